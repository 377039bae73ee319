//! Timeouts on the edges (issue 20 item 2; docs/threading.md "Timeouts on
//! the edges"), over real sockets: a client that begins a frame and stops
//! is closed at the client frame deadline, and a connection to the peer
//! port that does not finish its handshake is closed at the link handshake
//! deadline — never sooner, within a generous bound. A quiet client between
//! frames is left alone.

mod bound;
mod runtime_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::core::trace::FlowTrace;

const DEADLINE: Duration = Duration::from_millis(300);

fn game() -> Game {
    start_game(GameOptions {
        settings: Some(NodeSettings {
            client_frame_deadline: DEADLINE,
            link_handshake_deadline: DEADLINE,
            pin_cores: false,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    })
}

/// Reads until the peer closes; how long that took from `since`.
fn closed_after(mut stream: TcpStream, since: Instant) -> Duration {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return since.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return since.elapsed(),
            Err(e) => panic!("the connection was not closed within {WAIT:?}: {e}"),
        }
    }
}

#[test]
fn a_client_that_stops_mid_frame_is_closed_at_the_frame_deadline_and_a_quiet_one_is_not() {
    let game = game();
    // Given a client that logged in and then stays quiet between frames,
    let mut quiet = login(&game, "q");
    // when another sends the first bytes of a frame and nothing more,
    let mut slow = TcpStream::connect(game.addr()).unwrap();
    let started = Instant::now();
    slow.write_all(&[0, 0, 0, 12, 1]).unwrap();
    // then it is closed at the deadline, not sooner,
    let after = closed_after(slow, started);
    assert!(
        after >= DEADLINE,
        "closed after {after:?}, before the deadline"
    );
    assert_eq!(
        game.node.flow_counters().get(FlowTrace::ClientFrameTimeout),
        1
    );
    // while the quiet one, idle for longer than the deadline, still plays.
    let reply = quiet.request(RELAY, payload("q", "still"), WAIT).unwrap();
    assert_eq!(reply, payload("q", "still"));
}

#[test]
fn a_peer_port_connection_that_never_finishes_its_handshake_is_closed_at_the_deadline() {
    let game = game();
    let peer_port = game.node.peer_addr().expect("the node listens for peers");
    // A connection that sends nothing, and one that sends part of a Hello.
    for first in [&[][..], &[0, 0, 0, 40, 1][..]] {
        let mut silent = TcpStream::connect(peer_port).unwrap();
        let started = Instant::now();
        silent.write_all(first).unwrap();
        let after = closed_after(silent, started);
        assert!(
            after >= DEADLINE,
            "closed after {after:?}, before the deadline"
        );
    }
    assert!(
        game.node
            .flow_counters()
            .get(FlowTrace::LinkHandshakeFailed)
            >= 2
    );
}

#[test]
fn a_hello_from_a_past_lifecycle_of_a_linked_peer_gets_no_welcome() {
    use zlink::ids::{MeshName, NodeGeneration, NodeRid};
    use zlink::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN};
    let generation = |g: u64| {
        let settings = NodeSettings {
            pin_cores: false,
            ..NodeSettings::default()
        };
        GameOptions {
            settings: Some(settings),
            node_generation: Some(g),
            ..GameOptions::default()
        }
    };
    // Given node 1 (lifecycle 5) linked to node 2,
    let store = new_store();
    let two = start_node(2, std::sync::Arc::clone(&store), generation(1), &[]);
    let peer_port = two.node.peer_addr().unwrap();
    let one = start_node(1, store, generation(5), &[(2, peer_port)]);
    assert!(one.node.wait_linked(2, WAIT) && two.node.wait_linked(1, WAIT));
    let refused_before = two.node.flow_counters().get(FlowTrace::StaleLinkGeneration);
    // when a Hello claims to be node 1 in an older lifecycle (4),
    let mesh = MeshName::new("default").unwrap();
    let hello = LinkFrame::Hello {
        version: LINK_VERSION,
        identity: LinkIdentity {
            mesh,
            rid: NodeRid(1),
            generation: NodeGeneration(4),
        },
        nonce: [7; NONCE_LEN],
    };
    let mut frame = bytes::BytesMut::new();
    hello.encode(&mut frame);
    let mut stale = TcpStream::connect(peer_port).unwrap();
    stale.write_all(&frame).unwrap();
    // then the connection is closed with no Welcome (no byte at all),
    stale.set_read_timeout(Some(WAIT)).unwrap();
    let mut answer = Vec::new();
    let read = stale.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "{} bytes answered a stale Hello ({read:?})",
        answer.len()
    );
    assert_eq!(
        two.node.flow_counters().get(FlowTrace::StaleLinkGeneration),
        refused_before + 1
    );
    // and the real node 1 stays linked.
    assert!(two.node.wait_linked(1, Duration::ZERO));
}

/// Says Hello to `peer_port` as node `rid` in lifecycle `generation` and
/// reads until the node closes or `WAIT` passes: the link frames answered.
fn hello_answer(
    peer_port: std::net::SocketAddr,
    rid: u64,
    generation: u64,
) -> Vec<zlink::wire::link::LinkFrame> {
    use zlink::ids::{MeshName, NodeGeneration, NodeRid};
    use zlink::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN};
    let hello = LinkFrame::Hello {
        version: LINK_VERSION,
        identity: LinkIdentity {
            mesh: MeshName::new("default").unwrap(),
            rid: NodeRid(rid),
            generation: NodeGeneration(generation),
        },
        nonce: [7; NONCE_LEN],
    };
    let mut frame = bytes::BytesMut::new();
    hello.encode(&mut frame);
    let mut stream = TcpStream::connect(peer_port).unwrap();
    stream.write_all(&frame).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = bytes::BytesMut::new();
    let limits = zlink::wire::DecodeLimits::default();
    loop {
        // A Welcome is all an expected Hello gets until its proof.
        if let Some(frame) = LinkFrame::decode_from(&mut buf, &limits).unwrap() {
            return vec![frame];
        }
        let mut chunk = [0u8; 512];
        match stream.read(&mut chunk) {
            Ok(0) => return Vec::new(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Vec::new(),
            Err(e) => panic!("no answer and no close within {WAIT:?}: {e}"),
        }
    }
}

#[test]
fn a_hello_from_a_node_that_is_not_a_peer_gets_no_welcome_and_a_restarted_peer_does() {
    // Given node 3, whose peers are node 1 (it dials node 3) and node 2,
    let store = new_store();
    let three = start_node(3, store, GameOptions::default(), &[]);
    let peer_port = three.node.peer_addr().unwrap();
    let before = three.node.flow_counters();
    // when node 7, which is not among them, says Hello,
    let answered = hello_answer(peer_port, 7, 1);
    // then it gets no byte back, only the close, counted;
    assert!(answered.is_empty(), "an unexpected Hello got {answered:?}");
    wait_counter(
        &three,
        FlowTrace::UnexpectedLinkPeer,
        before.get(FlowTrace::UnexpectedLinkPeer) + 1,
    );
    assert_eq!(
        three
            .node
            .flow_counters()
            .get(FlowTrace::LinkHandshakeFailed),
        before.get(FlowTrace::LinkHandshakeFailed) + 1
    );
    // and a peer's Hellos are answered in any lifecycle: its first, and the
    // next one after a restart (a greater NodeGeneration).
    for generation in [5, 6] {
        let answered = hello_answer(peer_port, 1, generation);
        assert!(
            matches!(
                answered.as_slice(),
                [zlink::wire::link::LinkFrame::Welcome { .. }]
            ),
            "node 1 in lifecycle {generation} got {answered:?}"
        );
    }
    assert_eq!(
        three
            .node
            .flow_counters()
            .get(FlowTrace::UnexpectedLinkPeer),
        before.get(FlowTrace::UnexpectedLinkPeer) + 1
    );
}

#[test]
fn a_session_over_its_rate_gets_typed_refusals_and_every_request_ends() {
    let game = start_game(GameOptions {
        settings: Some(NodeSettings {
            session_rate: 50,
            session_burst: 10,
            pin_cores: false,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    });
    // Given a client logged in (one packet of its burst),
    let mut client = login(&game, "r");
    // when it sends 40 requests back to back, far over 10 at once and
    // 50 a second,
    let mut replies = 0;
    let mut limited = 0;
    for n in 0..40 {
        match client.request(RELAY, payload("r", &n.to_string()), WAIT) {
            Ok(reply) => {
                assert_eq!(reply, payload("r", &n.to_string()));
                replies += 1;
            }
            Err(zlink::client::ClientError::Remote(error)) => {
                assert_eq!(error.reason(), zlink::error::Reason::RateLimited);
                limited += 1;
            }
            Err(other) => panic!("request {n} ended without a terminal: {other}"),
        }
    }
    // then every request ended, some with RateLimited, counted, and the
    // session stays open: once the bucket refills it is served again.
    assert_eq!(replies + limited, 40);
    assert!(
        limited > 0 && replies >= 9,
        "{replies} replies, {limited} limited"
    );
    assert_eq!(
        game.node.flow_counters().get(FlowTrace::SessionRateLimited),
        limited
    );
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "never served again");
        if client.request(RELAY, payload("r", "again"), WAIT).is_ok() {
            break;
        }
    }
}
