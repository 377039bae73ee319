//! Limits that compose (docs/wire.md "Limits"), over real sockets: every
//! client frame a node accepts crosses a node link inside its record, and
//! no client can make a peer drop a link. A reply or push an Actor makes
//! that no client frame could carry is refused at its sender, typed.

mod bound;
mod runtime_support;

use bytes::Bytes;
use runtime_support::*;
use zlink::client::{ClientError, CloseReason};
use zlink::core::trace::FlowTrace;
use zlink::error::Reason;
use zlink::wire::DecodeLimits;

/// What a client Request frame adds around its payload after the length
/// prefix: kind, flags, packet key, correlation, payload length.
const REQUEST_OVERHEAD: usize = 2 + 2 + 4 + 4;

/// A payload for `actor` (the relay handler reads its name first) of
/// exactly `len` bytes.
fn sized(actor: &str, len: usize) -> Bytes {
    let head = format!("{actor}:");
    Bytes::from(head.clone() + &"x".repeat(len - head.len()))
}

/// Node 1 holds a session bound to player `actor`, hosted on node 2.
fn bound_across(mesh: &[Game], actor: &str) -> zlink::client::Client {
    let _first = login(&mesh[1], actor);
    login(&mesh[0], actor)
}

/// The counters that would show a link closed for a frame too long, or a
/// record refused as too large, on every node.
fn link_damage(mesh: &[Game]) -> Vec<(u64, u64, u64)> {
    mesh.iter()
        .map(|game| {
            let counters = game.node.flow_counters();
            (
                counters.get(FlowTrace::LinkFrameTooLong),
                counters.get(FlowTrace::RecordTooLarge),
                counters.get(FlowTrace::MalformedRecordDropped),
            )
        })
        .collect()
}

#[test]
fn a_client_frame_of_exactly_the_limit_crosses_a_link_and_back() {
    let mesh = start_mesh(2, GameOptions::default());
    let mut client = bound_across(&mesh, "big");
    let limit = DecodeLimits::default().frame_len_max as usize;
    // Given requests of exactly the client frame limit, relayed to a player
    // on another node, each is answered with its payload (the echo), many
    // times over on the same link,
    let at_limit = sized("big", limit - REQUEST_OVERHEAD);
    for _ in 0..20 {
        let reply = client
            .request(RELAY, at_limit.clone(), WAIT)
            .expect("a frame at the limit is relayed and answered");
        assert_eq!(reply, at_limit);
    }
    // and the link never closed (a record over the peer's limit would have
    // made it drop the link, and counted it).
    assert_eq!(link_damage(&mesh), vec![(0, 0, 0), (0, 0, 0)]);
    assert!(mesh[0].node.wait_linked(2, WAIT));
    // A frame one byte over the limit closes only its own session, with a
    // reason; the link and the other sessions are untouched.
    let mut other = bound_across(&mesh, "small");
    let over = sized("big", limit - REQUEST_OVERHEAD + 1);
    match client.request(RELAY, over, WAIT) {
        Err(ClientError::Closed(reason)) => {
            assert_eq!(reason, Some(CloseReason::ProtocolError))
        }
        other => panic!("a frame over the limit got {other:?}"),
    }
    let reply = other.request(RELAY, payload("small", "still"), WAIT);
    assert_eq!(reply.unwrap(), payload("small", "still"));
    assert_eq!(link_damage(&mesh), vec![(0, 0, 0), (0, 0, 0)]);
}

#[test]
fn a_reply_or_push_no_client_frame_could_carry_is_refused_typed_at_its_sender() {
    let mesh = start_mesh(2, GameOptions::default());
    let mut client = bound_across(&mesh, "grow");
    let limit = DecodeLimits::default().frame_len_max as usize;
    // Given a player that answers with twice its payload (or pushes that),
    // a payload at half the limit makes a reply, and a push, that no client
    // frame could carry:
    let half = sized("grow", limit / 2 + 16);
    for key in [GROW_REPLY, GROW_PUSH] {
        match client.request(key, half.clone(), WAIT) {
            Err(ClientError::Remote(error)) => {
                assert_eq!(error.reason(), Reason::MessageTooLarge, "{key:?}")
            }
            other => panic!("{key:?}: an oversized answer got {other:?}"),
        }
    }
    // the session and the link stay up: a small one still works both ways.
    let small = sized("grow", 64);
    let grown = client.request(GROW_REPLY, small.clone(), WAIT).unwrap();
    assert_eq!(grown.len(), 128);
    assert_eq!(link_damage(&mesh), vec![(0, 0, 0), (0, 0, 0)]);
}

/// docs/wire.md "Limits that compose": nodes of one mesh may accept client
/// frames of different lengths. A frame a client of the node with the
/// larger limit sends crosses the link to a node with the default limit and
/// back, and the link stays up: a node's links take records up to the
/// mesh-wide ceiling, not up to its own client limit. (A real-process run
/// found it: bounded by its own limit, the smaller node closed the link,
/// and every session relayed over it lost its requests.)
#[test]
fn a_frame_within_the_larger_limit_of_two_nodes_crosses_their_link_and_leaves_it_up() {
    use std::sync::Arc;
    use zlink::api::NodeSettings;
    let with_frame_max = |frame_len_max: u32| GameOptions {
        settings: Some(NodeSettings {
            pin_cores: false,
            decode_limits: DecodeLimits {
                frame_len_max,
                ..DecodeLimits::default()
            },
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    };
    // Given node 2 with the default 64 KiB client frames, and node 1 whose
    // clients may send 128 KiB,
    let default_max = DecodeLimits::default().frame_len_max;
    let larger_max = 2 * default_max;
    let store = new_store();
    let two = start_node(2, Arc::clone(&store), with_frame_max(default_max), &[]);
    let one = start_node(
        1,
        store,
        with_frame_max(larger_max),
        &[(2, two.node.peer_addr().unwrap())],
    );
    assert!(one.node.wait_linked(2, WAIT) && two.node.wait_linked(1, WAIT));
    let mesh = [one, two];
    let mut client = bound_across(&mesh, "big");
    // when a client of node 1 sends frames of node 1's limit to its player
    // on node 2, which answers each with its count of messages,
    let at_limit = sized("big", larger_max as usize - REQUEST_OVERHEAD);
    let counts: Vec<u64> = (0..5)
        .map(|_| {
            let reply = client
                .request(COUNT, at_limit.clone(), WAIT)
                .expect("a frame within node 1's limit crosses the link, answered");
            String::from_utf8_lossy(&reply).parse().expect("a count")
        })
        .collect();
    // then each crossed the link and was handled once,
    assert!(counts.windows(2).all(|w| w[1] == w[0] + 1), "{counts:?}");
    // and an echo of one is refused by node 2, which judges what its
    // Actors answer by its own client limit: typed, at the sender.
    match client.request(RELAY, at_limit, WAIT) {
        Err(ClientError::Remote(error)) => assert_eq!(error.reason(), Reason::MessageTooLarge),
        other => panic!("an echo over node 2's client limit got {other:?}"),
    }
    // No link closed for a frame too long, and the link is up.
    let closed: Vec<u64> = mesh
        .iter()
        .map(|g| g.node.flow_counters().get(FlowTrace::LinkFrameTooLong))
        .collect();
    assert_eq!(closed, vec![0, 0]);
    assert!(mesh[0].node.wait_linked(2, std::time::Duration::ZERO));
}

/// docs/threading.md "One connection's share of a turn": a client that
/// writes thousands of requests at once (a flood, or the backlog of a
/// node that was stopped) gets them taken a share per loop turn, its
/// reads paused in between, and each request still ends once:
/// its reply or a typed refusal, the replies in the order sent.
/// Meanwhile another session is served.
#[test]
fn a_burst_of_requests_is_taken_a_share_per_turn_and_each_ends_once_replies_in_order() {
    use std::collections::HashSet;
    use std::io::{Read, Write};
    use zlink::ids::{Correlation, PacketKey};
    use zlink::wire::client::ClientFrame;
    const BURST: u32 = 5_000;
    let game = start_game(GameOptions::default());
    let mut other = login(&game, "other");
    let _player = login(&game, "burst");
    let mut stream = std::net::TcpStream::connect(game.addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut out = bytes::BytesMut::new();
    ClientFrame::Request {
        key: LOGIN,
        correlation: Correlation(1),
        payload: Bytes::from_static(b"burst"),
    }
    .encode(&mut out);
    for n in 2..=BURST + 1 {
        ClientFrame::Request {
            key: PacketKey(RELAY.0),
            correlation: Correlation(n),
            payload: payload("burst", &n.to_string()),
        }
        .encode(&mut out);
    }
    stream.write_all(&out).unwrap();
    // Each correlation ends once; the replies come in the order sent (a
    // refusal is written at once, ahead of replies still to come).
    let (mut buf, mut ended, mut last_reply) = (bytes::BytesMut::new(), HashSet::new(), 0);
    let limits = zlink::wire::DecodeLimits::default();
    let mut replies = 0;
    while ended.len() < (BURST + 1) as usize {
        let correlation = match ClientFrame::decode_from(&mut buf, &limits).unwrap() {
            Some(ClientFrame::Reply { correlation, .. }) => {
                assert!(
                    correlation.0 > last_reply,
                    "reply {correlation:?} after {last_reply}"
                );
                last_reply = correlation.0;
                replies += 1;
                correlation
            }
            Some(ClientFrame::Error { correlation, error }) => {
                assert_eq!(error.reason(), Reason::QueueFull, "{error:?}");
                correlation
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {
                let mut chunk = [0u8; 64 * 1024];
                let n = stream.read(&mut chunk).unwrap();
                assert!(n > 0, "closed after {} of {} ends", ended.len(), BURST + 1);
                buf.extend_from_slice(&chunk[..n]);
                continue;
            }
        };
        assert!(ended.insert(correlation), "{correlation:?} ended twice");
    }
    assert!(replies > 1, "the login and at least one request replied");
    let counters = game.node.flow_counters();
    assert!(counters.get(FlowTrace::ClientFramesDeferred) >= 1);
    let data = payload("other", "after");
    assert_eq!(other.request(RELAY, data.clone(), WAIT).unwrap(), data);
}
