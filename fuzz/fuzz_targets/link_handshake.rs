//! The link handshake as a connection reads it (src/net/handshake.rs
//! `LinkHandshake`, the state machine the runtime's links run): the input is
//! a split plan and a byte stream from a peer, fed to an accepting and to a
//! dialing end once whole and once in the plan's chunks. Whatever the split,
//! each end sends the same frames and ends the same way (still waiting,
//! refused with the same typed error, or up with the same peer and the same
//! bytes left over for the records that follow); a Welcome answers only a
//! Hello of this version that the node's policy admits (a peer it expects,
//! §2); and a peer is learned only if it proved the secret, and is then the
//! one its Hello or Welcome named, in our mesh, not ourselves.
//!
//! Input: byte 0 mod 9 is the plan's length k, the next k bytes are chunk
//! sizes used in turn until the stream ends (0 counts as 1; k = 0 feeds the
//! stream whole), and the rest is the stream. The stream is also checked as
//! the other decoder targets are (`check_stream`: splits like the reference,
//! canonical). The secret, identities and nonces are those of the seed
//! corpus (tests/wire_link.rs `write_fuzz_corpus`), so a seed holds a
//! complete, valid handshake for the fuzzer to mutate.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use zlink::ids::{MeshName, NodeGeneration, NodeRid};
use zlink::net::handshake::{
    refusal_frame, Answer, ClusterSecret, HandshakeError, LinkHandshake, Progress,
};
use zlink::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN};
use zlink::wire::DecodeLimits;
use zlink_fuzz::{check_stream, Codec};

const SECRET: &[u8] = b"0123456789abcdef";

fn identity(rid: u64) -> LinkIdentity {
    LinkIdentity {
        mesh: MeshName::new("m").unwrap_or_else(|_| unreachable!("a valid literal")),
        rid: NodeRid(rid),
        generation: NodeGeneration(rid * 10),
    }
}

fn secret() -> ClusterSecret {
    ClusterSecret::new(SECRET).unwrap_or_else(|_| unreachable!("16 bytes"))
}

/// How one end's run ended.
#[derive(Debug, PartialEq)]
enum End {
    /// Waiting for more bytes.
    Pending,
    /// Refused; the connection closes.
    Failed(HandshakeError),
    /// Authenticated; the bytes after the handshake (records).
    Up(LinkIdentity, Vec<u8>),
}

/// One end fed `chunks` in turn: the frames it sent, the Hellos its policy
/// saw, and how it ended.
struct Run {
    sent: Vec<LinkFrame>,
    admitted: Vec<LinkIdentity>,
    end: End,
}

/// The accepting node (node 2) takes a Hello only from node 1, the one peer
/// it expects (the runtime's policy is richer; this one is enough to check
/// that no Welcome is computed for a Hello it refuses).
fn admit(hello: &LinkIdentity) -> Result<Answer, HandshakeError> {
    if hello.rid != NodeRid(1) {
        return Err(HandshakeError::Refused(format!(
            "node {} is not expected",
            hello.rid
        )));
    }
    Ok(Answer {
        secret: secret(),
        me: identity(2),
        nonce: [2; NONCE_LEN],
    })
}

fn run(mut state: LinkHandshake, mut sent: Vec<LinkFrame>, chunks: &[&[u8]]) -> Run {
    let limits = DecodeLimits::default();
    let mut buf = BytesMut::new();
    let mut admitted = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        buf.extend_from_slice(chunk);
        loop {
            let mut policy = |hello: &LinkIdentity| {
                admitted.push(hello.clone());
                admit(hello)
            };
            match state.advance(&mut buf, &limits, &mut policy) {
                Ok(Progress::Pending(next)) => {
                    state = next;
                    break;
                }
                Ok(Progress::Welcome(next, welcome)) => {
                    sent.push(welcome);
                    state = next;
                }
                Ok(Progress::Up { send, peer }) => {
                    sent.extend(send);
                    let mut rest = buf.to_vec();
                    chunks[i + 1..]
                        .iter()
                        .for_each(|c| rest.extend_from_slice(c));
                    let end = End::Up(peer, rest);
                    return Run {
                        sent,
                        admitted,
                        end,
                    };
                }
                Err(error) => {
                    sent.extend(refusal_frame(&error));
                    let end = End::Failed(error);
                    return Run {
                        sent,
                        admitted,
                        end,
                    };
                }
            }
        }
    }
    Run {
        sent,
        admitted,
        end: End::Pending,
    }
}

/// The stream cut by the plan.
fn split<'a>(plan: &[u8], mut stream: &'a [u8]) -> Vec<&'a [u8]> {
    if plan.is_empty() {
        return vec![stream];
    }
    let mut chunks = Vec::new();
    for &size in plan.iter().cycle() {
        if stream.is_empty() {
            break;
        }
        let (chunk, rest) = stream.split_at(usize::from(size.max(1)).min(stream.len()));
        chunks.push(chunk);
        stream = rest;
    }
    chunks
}

fuzz_target!(|input: &[u8]| {
    let Some((&k, rest)) = input.split_first() else {
        return;
    };
    let k = usize::from(k % 9).min(rest.len());
    let (plan, stream) = rest.split_at(k);
    check_stream(
        stream,
        &Codec {
            decode: LinkFrame::decode,
            decode_from: LinkFrame::decode_from,
            encode: LinkFrame::encode,
        },
    );
    let chunks = split(plan, stream);

    // This node accepts as node 2.
    let whole = run(LinkHandshake::accept(), Vec::new(), &[stream]);
    let cut = run(LinkHandshake::accept(), Vec::new(), &chunks);
    assert_eq!(
        whole.sent, cut.sent,
        "the acceptor answered a split otherwise"
    );
    assert_eq!(whole.end, cut.end, "the acceptor ended a split otherwise");
    assert_eq!(whole.admitted, cut.admitted);
    assert!(whole.admitted.len() <= 1, "one Hello per handshake");
    for frame in &whole.sent {
        match frame {
            LinkFrame::Welcome { version, .. } => {
                assert_eq!(*version, LINK_VERSION);
                assert!(
                    whole.admitted.first().is_some_and(|h| h.rid == NodeRid(1)),
                    "a Welcome for a Hello the policy did not admit"
                );
            }
            LinkFrame::VersionRefused { version } => {
                assert_eq!(*version, LINK_VERSION);
                assert!(matches!(
                    whole.end,
                    End::Failed(HandshakeError::Version { .. })
                ));
            }
            other => panic!("the acceptor sent {other:?}"),
        }
    }
    if let End::Up(peer, _) = &whole.end {
        assert_eq!(
            whole.admitted.first(),
            Some(peer),
            "the acceptor learned another peer"
        );
        assert_eq!(peer.mesh, identity(2).mesh);
        assert_ne!(peer.rid, identity(2).rid);
    }

    // This node dials as node 1.
    let dial = || {
        let (dialer, hello) = LinkHandshake::dial(secret(), identity(1), [1; NONCE_LEN]);
        (dialer, vec![hello])
    };
    let (dialer, hello) = dial();
    let whole = run(dialer, hello, &[stream]);
    let (dialer, hello) = dial();
    let cut = run(dialer, hello, &chunks);
    assert_eq!(
        whole.sent, cut.sent,
        "the dialer answered a split otherwise"
    );
    assert_eq!(whole.end, cut.end, "the dialer ended a split otherwise");
    assert!(whole.admitted.is_empty(), "a dialer takes no Hello");
    if let End::Up(peer, _) = &whole.end {
        assert!(matches!(whole.sent.last(), Some(LinkFrame::Proof { .. })));
        let mut first = BytesMut::from(stream);
        let welcome = LinkFrame::decode_from(&mut first, &DecodeLimits::default());
        let Ok(Some(LinkFrame::Welcome {
            identity: named, ..
        })) = welcome
        else {
            panic!("the dialer came up on {welcome:?}");
        };
        assert_eq!(peer, &named, "the dialer learned another peer");
        assert_eq!(peer.mesh, identity(1).mesh);
        assert_ne!(peer.rid, identity(1).rid);
    }
});
