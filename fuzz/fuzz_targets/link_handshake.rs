//! Link handshake frames (src/wire/link.rs) and the handshake that reads them
//! (src/net/handshake.rs): any byte stream splits, decodes or errors without
//! a panic, what decodes is canonical, and the frames it holds, fed to an
//! acceptor (Hello, then Proof) and to a dialer (Welcome), are refused with a
//! typed error unless they prove the secret — and then the peer learned is
//! the one the Hello or Welcome named, in our mesh, not ourselves (§2).
//!
//! The secret, identities and nonces are those of the seed corpus
//! (tests/wire_link.rs `write_fuzz_corpus`), so a seed holds a complete,
//! valid handshake for the fuzzer to mutate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zlink::ids::{MeshName, NodeGeneration, NodeRid};
use zlink::net::handshake::{Acceptor, ClusterSecret, Dialer};
use zlink::wire::link::{LinkFrame, LinkIdentity, NONCE_LEN};
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

fuzz_target!(|stream: &[u8]| {
    let frames = check_stream(
        stream,
        &Codec {
            decode: LinkFrame::decode,
            decode_from: LinkFrame::decode_from,
            encode: LinkFrame::encode,
        },
    );
    let mut frames = frames.into_iter().filter_map(|(_, frame)| frame.ok());
    let Some(first) = frames.next() else {
        return;
    };
    // This node accepts as node 2.
    if let Ok((acceptor, _welcome)) =
        Acceptor::on_hello(secret(), identity(2), [2; NONCE_LEN], first.clone())
    {
        if let Some(proof) = frames.next() {
            if let Ok(peer) = acceptor.on_proof(proof) {
                let LinkFrame::Hello {
                    identity: hello, ..
                } = &first
                else {
                    unreachable!("on_hello took a Hello");
                };
                assert_eq!(&peer, hello, "the acceptor learned another peer");
                assert_eq!(peer.mesh, identity(2).mesh);
                assert_ne!(peer.rid, identity(2).rid);
            }
        }
    }
    // This node dials as node 1.
    let (dialer, _hello) = Dialer::start(secret(), identity(1), [1; NONCE_LEN]);
    if let Ok((_proof, peer)) = dialer.on_welcome(first.clone()) {
        let LinkFrame::Welcome {
            identity: welcome, ..
        } = &first
        else {
            unreachable!("on_welcome took a Welcome");
        };
        assert_eq!(&peer, welcome, "the dialer learned another peer");
        assert_eq!(peer.mesh, identity(1).mesh);
        assert_ne!(peer.rid, identity(1).rid);
    }
});
