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

/// A client that sends and never reads (a stalled or hostile reader): the
/// replies it does not take pile up in its outbound queue, and once that
/// passes `outbound_max` the node aborts the connection and counts it
/// (`client_outbound_overflow`, docs/threading.md "Timeouts on the
/// edges"), so no reader can make the node hold more than the bound. A
/// session beside it is served throughout.
#[test]
fn a_client_that_does_not_read_is_cut_at_the_outbound_bound_and_counted() {
    const BOUND: usize = 64 * 1024;
    let game = start_game(GameOptions {
        settings: Some(zlink::api::NodeSettings {
            outbound_max: BOUND,
            ..zlink::api::NodeSettings::default()
        }),
        ..GameOptions::default()
    });
    let mut stalled = login(&game, "stalled");
    let mut served = login(&game, "served");
    // Given a session that sends requests of 60,000 bytes, each answered
    // with its payload, and reads none of the answers (at most 60 MB,
    // far past what the kernel's socket buffers take before the node
    // queues),
    let big = sized("stalled", 60_000);
    let overflows = || {
        game.node
            .flow_counters()
            .get(FlowTrace::ClientOutboundOverflow)
    };
    for _ in 0..1_000 {
        if overflows() > 0 || stalled.start_request(RELAY, big.clone()).is_err() {
            break;
        }
    }
    // then the node cuts it once, counted,
    wait_until("the stalled reader is cut and counted", || overflows() == 1);
    // and the other session's requests are answered.
    let small = sized("served", 100);
    for _ in 0..10 {
        assert_eq!(served.request(RELAY, small.clone(), WAIT).unwrap(), small);
    }
    assert_eq!(overflows(), 1);
}
