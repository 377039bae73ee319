//! The link protocol version over real sockets (issue 20 item 6;
//! docs/operations.md "Versions", docs/wire.md "Node-link handshake
//! frames"): a Hello of another version gets `VersionRefused` naming this
//! node's version and no Welcome, whatever the rest of its layout; a dialer
//! told so counts it and dials again (a rolling upgrade relinks once both
//! ends speak one version). A peer's restarted lifecycle is still linked:
//! `x19_after_a_session_owner_restart_…` (tests/rt_fences.rs).

mod bound;
mod runtime_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use bytes::BytesMut;
use runtime_support::*;
use zlink::core::trace::FlowTrace;
use zlink::ids::{MeshName, NodeGeneration, NodeRid};
use zlink::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN};
use zlink::wire::DecodeLimits;

fn hello(version: u8, rid: u64) -> BytesMut {
    let mut frame = BytesMut::new();
    LinkFrame::Hello {
        version,
        identity: LinkIdentity {
            mesh: MeshName::new("default").unwrap(),
            rid: NodeRid(rid),
            generation: NodeGeneration(1),
        },
        nonce: [7; NONCE_LEN],
    }
    .encode(&mut frame);
    frame
}

/// Every byte the node sends until it closes, as link frames.
fn answer(mut stream: TcpStream) -> Vec<LinkFrame> {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .expect("the node closes within WAIT");
    let mut buf = BytesMut::from(&bytes[..]);
    let mut frames = Vec::new();
    while let Some(frame) = LinkFrame::decode_from(&mut buf, &DecodeLimits::default()).unwrap() {
        frames.push(frame);
    }
    assert!(buf.is_empty(), "a cut frame: {buf:?}");
    frames
}

#[test]
fn a_hello_of_another_link_version_gets_version_refused_and_no_welcome() {
    // Given node 2 on its peer port,
    let game = start_node(2, new_store(), GameOptions::default(), &[]);
    let peer_port = game.node.peer_addr().unwrap();
    // when node 1 says Hello in the next link version,
    let mut newer = TcpStream::connect(peer_port).unwrap();
    newer.write_all(&hello(LINK_VERSION + 1, 1)).unwrap();
    // then the only answer is VersionRefused with this node's version,
    // and the connection closes;
    assert_eq!(
        answer(newer),
        [LinkFrame::VersionRefused {
            version: LINK_VERSION
        }]
    );
    // and so for a Hello of a later layout (more after the nonce), which
    // this version cannot decode: its version is read first.
    let mut later = hello(LINK_VERSION + 7, 1);
    later.extend_from_slice(&[1, 2, 3, 4]);
    let len = u32::try_from(later.len() - 4).unwrap();
    later[..4].copy_from_slice(&len.to_be_bytes());
    let mut stream = TcpStream::connect(peer_port).unwrap();
    stream.write_all(&later).unwrap();
    assert_eq!(
        answer(stream),
        [LinkFrame::VersionRefused {
            version: LINK_VERSION
        }]
    );
    wait_counter(&game, FlowTrace::LinkVersionRefused, 2);
    let counters = game.node.flow_counters();
    assert_eq!(counters.get(FlowTrace::LinkHandshakeFailed), 2);
    assert!(!game.node.wait_linked(1, std::time::Duration::ZERO));
}

#[test]
fn a_dialer_refused_for_its_version_counts_it_and_dials_again() {
    // Given a peer port that speaks the next version,
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // when node 1 dials it,
    let game = start_node(1, new_store(), GameOptions::default(), &[(2, addr)]);
    listener.set_nonblocking(true).unwrap();
    let refuse = |listener: &TcpListener| {
        let mut stream = accept_within(listener);
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut buf = BytesMut::new();
        let hello = loop {
            let limits = DecodeLimits::default();
            if let Some(frame) = LinkFrame::decode_from(&mut buf, &limits).unwrap() {
                break frame;
            }
            let mut chunk = [0u8; 512];
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "node 1 closed before its Hello");
            buf.extend_from_slice(&chunk[..n]);
        };
        assert!(
            matches!(hello, LinkFrame::Hello { version, .. } if version == LINK_VERSION),
            "{hello:?}"
        );
        let mut out = BytesMut::new();
        LinkFrame::VersionRefused {
            version: LINK_VERSION + 1,
        }
        .encode(&mut out);
        stream.write_all(&out).unwrap();
    };
    // then it is told, counts the refusal,
    refuse(&listener);
    wait_counter(&game, FlowTrace::LinkVersionRefused, 1);
    // and dials again after its backoff, so that it links once the peer
    // is upgraded.
    refuse(&listener);
    wait_counter(&game, FlowTrace::LinkVersionRefused, 2);
}

/// The next connection to `listener` (non-blocking), within [`WAIT`].
fn accept_within(listener: &TcpListener) -> TcpStream {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "node 1 did not dial within {WAIT:?}"
                );
                std::thread::yield_now();
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}
