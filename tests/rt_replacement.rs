//! Rebind and replacement contract items (§6) over real nodes on loopback,
//! some with a tap on the link that drops, duplicates or rewrites record 51.

mod bound;
mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::client::{Client, ClientError, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::OwnerLeaseGeneration;
use zlink::wire::client::CloseReason;
use zlink::wire::node::{Command, NodeRecord};

const REPLACED: u8 = 51;

/// Node 1 (sessions) reaches node 2 (actors) through a tap; node 3 is linked
/// to both directly.
fn tapped_mesh(options: GameOptions) -> (Vec<Game>, LinkTap) {
    assert_eq!(Command::BoundSessionReplaced.code(), REPLACED);
    let store = new_store();
    let three = start_node(3, store.clone(), options.clone(), &[]);
    let two = start_node(
        2,
        store.clone(),
        options.clone(),
        &[(3, three.node.peer_addr().unwrap())],
    );
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(
        1,
        store,
        options,
        &[(2, tap.addr), (3, three.node.peer_addr().unwrap())],
    );
    let mesh = vec![one, two, three];
    for a in &mesh {
        for b in &mesh {
            if a.rid != b.rid {
                assert!(a.node.wait_linked(b.rid, WAIT));
            }
        }
    }
    (mesh, tap)
}

fn assert_push(client: &mut Client, actor: &str, data: &str) {
    assert_eq!(
        client.request(PUSH, payload(actor, data), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload(actor, data)
        })
    );
}

/// The next event on `client` is the reply to a marker relayed to `actor`
/// now: whatever the node sent before it has been read, so nothing else
/// came (no sleep window).
fn assert_marker_is_next(client: &mut Client, actor: &str) {
    let marker = client
        .start_request(RELAY, payload(actor, "marker"))
        .unwrap();
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Reply {
            correlation: marker,
            outcome: Ok(payload(actor, "marker"))
        })
    );
}

fn relay_error(client: &mut Client, actor: &str, data: &str) -> zlink::error::Error {
    match client.request(RELAY, payload(actor, data), WAIT) {
        Err(ClientError::Remote(error)) => error,
        other => panic!("relay {actor}:{data}: expected a typed error, got {other:?}"),
    }
}

shard_matrix! {
    fn p2_relay_from_the_replaced_session_is_refused_and_the_binding_stays(shards: usize) {
        let mesh = start_mesh(
            3,
            GameOptions {
                replaced_awaits_gate: true,
                shards,
                ..GameOptions::default()
            },
        );
        let player = actor_on("player-1", actor_shard(shards, false), shards);
        mesh[1].node.create_actor("player", &id(&player)).unwrap();
        let held = mesh[0].observed.held_receiver();
        let mut old = login_on(&mesh[0], &player, session_shard(shards));
        let mut new = login_on(&mesh[2], &player, session_shard(shards));
        assert_eq!(held.recv_timeout(WAIT).unwrap(), "replaced");
        // The old connection is still open (its callback awaits), yet its relay
        // is refused: the session is closing (§6). The other half of P2, the
        // retired binding generation refused at the Actor owner, is
        // `p2_a_relay_on_a_binding_whose_51_was_lost_is_refused_at_the_actor_owner`.
        let error = relay_error(&mut old, &player, "late");
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
        assert_eq!(error.reason(), Reason::SessionClosing, "{error:?}");
        assert_push(&mut new, &player, "tick");
        assert!(!mesh[1]
            .observed
            .delivered
            .lock()
            .unwrap()
            .contains(&payload(&player, "late")));
        mesh[0].observed.gate.open();
        assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
        assert_push(&mut new, &player, "after");
    }
}

shard_matrix! {
    fn p5_a_late_response_on_the_old_connection_is_not_applied_to_the_new_one(shards: usize) {
        let mesh = start_mesh(
            3,
            GameOptions {
                shards,
                ..GameOptions::default()
            },
        );
        let (x, y) = (
            actor_on("x", actor_shard(shards, false), shards),
            actor_on("y", actor_shard(shards, false), shards),
        );
        mesh[1].node.create_actor("player", &id(&x)).unwrap();
        mesh[2].node.create_actor("player", &id(&y)).unwrap();
        let mut old = login_on(&mesh[0], &x, session_shard(shards));
        assert_eq!(
            expect_reply(&mut old, LOGIN, &y),
            Bytes::from_static(b"bound")
        );
        let held = mesh[2].observed.held_receiver();
        // Correlation 4 on the old connection (shard query, two logins),
        // held on node 3.
        let late = old.start_request(HOLD, payload(&y, "late")).unwrap();
        assert_eq!(late.0, 4);
        assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
        // A new connection on the same shard replaces the binding of x.
        let mut new = login_on(&mesh[0], &x, session_shard(shards));
        assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
        mesh[2].observed.release();
        wait_counter(&mesh[0], FlowTrace::LateReplyDropped, 1);
        for (corr, data) in [(3, "three"), (4, "four")] {
            let c = new.start_request(RELAY, payload(&x, data)).unwrap();
            assert_eq!(c.0, corr);
            assert_eq!(new.wait_reply(c, WAIT).unwrap(), Ok(payload(&x, data)));
        }
        // Nothing else came: the next event is a marker's reply.
        assert_marker_is_next(&mut new, &x);
    }
}

/// P2's other half: the 51 never reached the old session, which still
/// relays on its binding; the Actor owner refuses the retired binding
/// generation (`Unavailable`, a stale binding fence, §12), and the current
/// binding stays.
#[test]
fn p2_a_relay_on_a_binding_whose_51_was_lost_is_refused_at_the_actor_owner() {
    let (mesh, tap) = tapped_mesh(GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    tap.set(Direction::ToDialer, REPLACED, TapAction::Drop);
    let mut old = login(&mesh[0], "player-1");
    let mut new = login(&mesh[2], "player-1");
    wait_until("the 51 to be sent (and dropped)", || {
        tap.count(Direction::ToDialer, REPLACED) == 1
    });
    let refused = mesh[1]
        .node
        .flow_counters()
        .get(FlowTrace::RelayRejectedStaleBinding);
    let error = relay_error(&mut old, "player-1", "late");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::StaleBinding, "{error:?}");
    assert_eq!(
        mesh[1]
            .node
            .flow_counters()
            .get(FlowTrace::RelayRejectedStaleBinding),
        refused + 1
    );
    // The current binding did not change: the new session relays and gets
    // the pushes, and the refused relay never reached the handler.
    assert_eq!(
        new.request(RELAY, payload("player-1", "mine"), WAIT)
            .unwrap(),
        payload("player-1", "mine")
    );
    assert_push(&mut new, "player-1", "tick");
    assert_eq!(
        mesh[1].observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "mine"), payload("player-1", "tick")]
    );
    assert!(!old.is_closed());
}

#[test]
fn x2_a_late_duplicate_51_touches_only_the_retired_identity() {
    let (mesh, tap) = tapped_mesh(GameOptions::default());
    mesh[1].node.create_actor("player", &id("x")).unwrap();
    mesh[1].node.create_actor("player", &id("y")).unwrap();
    tap.set(Direction::ToDialer, REPLACED, TapAction::Keep);
    let mut old = login(&mesh[0], "x");
    assert_eq!(
        expect_reply(&mut old, LOGIN, "y"),
        Bytes::from_static(b"bound")
    );
    // The new session is on the same node as the old one.
    let mut new = login(&mesh[0], "x");
    assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
    // Closing the old connection cleaned up its other binding once.
    assert_eq!(mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(), "y");
    // The same 51 again, late.
    let duplicates = mesh[0]
        .node
        .flow_counters()
        .get(FlowTrace::ReplacedNoticeDuplicate);
    assert_eq!(tap.replay(), 1);
    wait_counter(&mesh[0], FlowTrace::ReplacedNoticeDuplicate, duplicates + 1);
    assert_eq!(mesh[0].observed.replaced_callbacks.lock().unwrap().len(), 1);
    assert_push(&mut new, "x", "still-mine");
    assert_eq!(
        new.request(RELAY, payload("x", "relay"), WAIT).unwrap(),
        payload("x", "relay")
    );
    assert!(!new.is_closed());
    // A notice for x would have crossed the link before that relay.
    assert_eq!(
        mesh[1].disconnect_events.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "x's new binding was notified as disconnected"
    );
}

#[test]
fn x13_undeliverable_51_does_not_delay_the_bind_and_the_retired_generation_is_refused() {
    let (mesh, tap) = tapped_mesh(GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    tap.set(Direction::ToDialer, REPLACED, TapAction::Drop);
    let mut old = login(&mesh[0], "player-1");
    let started = Instant::now();
    let mut new = login(&mesh[2], "player-1");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    wait_until("the 51 to be sent (and dropped)", || {
        tap.count(Direction::ToDialer, REPLACED) == 1
    });
    // The old session never heard of it, yet the actor owner refuses it.
    let error = relay_error(&mut old, "player-1", "late");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::StaleBinding);
    assert!(mesh[0]
        .observed
        .replaced_callbacks
        .lock()
        .unwrap()
        .is_empty());
    assert_push(&mut new, "player-1", "tick");
    assert!(!mesh[1]
        .observed
        .delivered
        .lock()
        .unwrap()
        .contains(&payload("player-1", "late")));
}

fn mismatch_lease(record: NodeRecord) -> NodeRecord {
    match record {
        NodeRecord::BoundSessionReplaced(mut replaced) => {
            replaced.previous_lease = OwnerLeaseGeneration(replaced.previous_lease.0 + 1);
            NodeRecord::BoundSessionReplaced(replaced)
        }
        other => other,
    }
}

#[test]
fn x13_a_mismatched_51_runs_no_callback() {
    let (mesh, tap) = tapped_mesh(GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    tap.set(
        Direction::ToDialer,
        REPLACED,
        TapAction::Rewrite(mismatch_lease),
    );
    let mut old = login(&mesh[0], "player-1");
    let mut new = login(&mesh[2], "player-1");
    wait_counter(&mesh[0], FlowTrace::ReplacedNoticeMismatch, 1);
    assert!(mesh[0]
        .observed
        .replaced_callbacks
        .lock()
        .unwrap()
        .is_empty());
    // No notice and no close: the next event is the reply to a relay sent
    // now, refused at the Actor owner (the binding is retired there).
    let late = old
        .start_request(RELAY, payload("player-1", "late"))
        .unwrap();
    match old.next_event(WAIT).unwrap() {
        Some(ClientEvent::Reply {
            correlation,
            outcome: Err(error),
        }) if correlation == late => {
            assert_eq!(error.reason(), Reason::StaleBinding, "{error:?}")
        }
        other => panic!("the old session got {other:?} before its relay's refusal"),
    }
    assert_push(&mut new, "player-1", "tick");
}

#[test]
fn x14_the_previous_session_refuses_dispatch_but_its_callback_still_sends() {
    let game = start_game(GameOptions {
        replaced_awaits_gate: true,
        ..GameOptions::default()
    });
    let held = game.observed.held_receiver();
    let mut old = login(&game, "player-1");
    let _new = login(&game, "player-1");
    assert_eq!(
        old.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: REPLACED_NOTICE,
            payload: Bytes::from_static(b"player-1")
        })
    );
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "replaced");
    for key in [RELAY, LOGIN, BOUND] {
        let error = match old.request(key, payload("player-1", "x"), WAIT) {
            Err(ClientError::Remote(error)) => error,
            other => panic!("{key:?} on the closing session: {other:?}"),
        };
        assert_eq!(error.reason(), Reason::SessionClosing, "{key:?}: {error:?}");
    }
    // A send submitted by the callback after that still goes out.
    game.observed.gate.open();
    assert_eq!(
        old.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: REPLACED_AFTER_WAIT,
            payload: Bytes::from_static(b"player-1")
        })
    );
    assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
}

#[test]
fn x15_closing_the_previous_connection_never_removes_the_new_binding() {
    let (mesh, tap) = tapped_mesh(GameOptions::default());
    mesh[1].node.create_actor("player", &id("x")).unwrap();
    mesh[1].node.create_actor("player", &id("y")).unwrap();
    // The 51 is lost: the old session still believes it holds x.
    tap.set(Direction::ToDialer, REPLACED, TapAction::Drop);
    let mut old = login(&mesh[0], "x");
    assert_eq!(
        expect_reply(&mut old, LOGIN, "y"),
        Bytes::from_static(b"bound")
    );
    let mut new = login(&mesh[2], "x");
    wait_until("the 51 to be dropped", || {
        tap.count(Direction::ToDialer, REPLACED) == 1
    });
    let stale_before = mesh[1].node.flow_counters().get(FlowTrace::TombstoneStale);
    // The old connection ends: its late notification and tombstone for x's
    // previous identity reach node 2 after the new binding.
    drop(old);
    assert_eq!(mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(), "y");
    wait_counter(&mesh[1], FlowTrace::TombstoneStale, stale_before + 1);
    assert_push(&mut new, "x", "still-mine");
    assert_eq!(
        new.request(RELAY, payload("x", "relay"), WAIT).unwrap(),
        payload("x", "relay")
    );
    // The old connection's notice for x went out before its tombstone,
    // which node 2 has handled: no callback for x's new binding.
    assert_eq!(
        mesh[1].disconnect_events.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "x's Spot was told of a disconnect of its new binding"
    );
}

/// Node 1 holds the old session and reaches the Actor owner (node 2)
/// through a fault proxy; node 3 holds the new session. Node 2's links are
/// full at 64 KiB unsent and its 51 waits `send_timeout` (§6).
struct Congested {
    _old_owner: Game,
    owner: Game,
    new_owner: Game,
    proxy: FaultProxy,
    old: Client,
}

/// One-way PUSHes of this size, this many: the Actor owner pushes each back
/// over the link to node 1 (36), far more than the two sockets' buffers
/// hold while the proxy stalls the way back.
const FLOOD_PUSH: usize = 60 * 1024;
const FLOOD_COUNT: usize = 200;

fn congested(send_timeout: Duration) -> Congested {
    let store = new_store();
    let options = |settings: NodeSettings| GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    };
    let new_owner = start_node(3, store.clone(), GameOptions::default(), &[]);
    let owner = start_node(
        2,
        store.clone(),
        options(NodeSettings {
            outbound_max: 64 * 1024,
            send_timeout,
            ..NodeSettings::default()
        }),
        &[(3, new_owner.node.peer_addr().unwrap())],
    );
    let proxy = FaultProxy::start(owner.node.peer_addr().unwrap());
    // Node 1's client queue takes the whole flood when it arrives.
    let old_owner = start_node(
        1,
        store,
        options(NodeSettings {
            outbound_max: 64 << 20,
            ..NodeSettings::default()
        }),
        &[(2, proxy.addr), (3, new_owner.node.peer_addr().unwrap())],
    );
    for (a, b) in [(&old_owner, 2), (&old_owner, 3), (&owner, 3)] {
        assert!(a.node.wait_linked(b, WAIT));
    }
    owner.node.create_actor("player", &id("player-1")).unwrap();
    let mut old = login(&old_owner, "player-1");
    // Given the way back from the Actor owner stalled and its link to node 1
    // full: every push of the flood was handled and queued there.
    proxy.set_stalled_back(true);
    let data = "x".repeat(FLOOD_PUSH);
    for _ in 0..FLOOD_COUNT {
        old.send(PUSH, payload("player-1", &data)).unwrap();
    }
    wait_until("the owner handled the flood", || {
        owner.observed.delivered.lock().unwrap().len() == FLOOD_COUNT
    });
    Congested {
        _old_owner: old_owner,
        owner,
        new_owner,
        proxy,
        old,
    }
}

/// Reads the old session's events until the reply to a RELAY it sends after
/// the flood; returns the pushes' keys other than the flood's, in order.
fn old_session_notices(old: &mut Client) -> Vec<zlink::ids::PacketKey> {
    let relay = old
        .start_request(RELAY, payload("player-1", "after"))
        .unwrap();
    let mut flood = 0;
    let mut notices = Vec::new();
    loop {
        match old.next_event(WAIT).unwrap() {
            Some(ClientEvent::Push { key, .. }) if key == PUSHED => flood += 1,
            Some(ClientEvent::Push { key, .. }) => notices.push(key),
            Some(ClientEvent::Reply { correlation, .. }) if correlation == relay => break,
            Some(ClientEvent::Closed(_)) | None => break,
            other => panic!("the old session saw {other:?}"),
        }
    }
    assert_eq!(flood, FLOOD_COUNT);
    notices
}

#[test]
fn x_51_to_a_full_link_ends_with_deadline_exceeded_at_the_send_timeout_never_sooner() {
    let timeout = Duration::from_millis(500);
    let mut c = congested(timeout);
    // When player-1 is bound from node 3: the terminal is not delayed by
    // the 51 that waits behind the full link.
    let started = Instant::now();
    let mut new = login(&c.new_owner, "player-1");
    let counters = c.owner.node.flow_counters();
    assert_eq!(counters.get(FlowTrace::BindingReplaced), 1);
    assert_eq!(counters.get(FlowTrace::ReplacedNoticeDeadlineExceeded), 0);
    // Then at the send timeout, never sooner, the 51 ends: DeadlineExceeded,
    // dropped, counted.
    wait_counter(&c.owner, FlowTrace::ReplacedNoticeDeadlineExceeded, 1);
    let elapsed = started.elapsed();
    assert!(elapsed >= timeout, "ended after {elapsed:?}");
    // The new binding is untouched, and once the way back flows again the
    // old session gets the flood and never the notice (no retry), while
    // its relay with the retired binding is refused at the owner (§6).
    assert_eq!(
        new.request(RELAY, payload("player-1", "new"), WAIT)
            .unwrap(),
        payload("player-1", "new")
    );
    c.proxy.set_stalled_back(false);
    assert_eq!(old_session_notices(&mut c.old), vec![]);
    assert_eq!(
        c.owner
            .node
            .flow_counters()
            .get(FlowTrace::ReplacedNoticeDeadlineExceeded),
        1
    );
}

#[test]
fn x_51_waiting_for_a_full_link_goes_out_once_the_link_drains_before_the_send_timeout() {
    let mut c = congested(Duration::from_secs(30));
    let _new = login(&c.new_owner, "player-1");
    assert_eq!(
        c.owner.node.flow_counters().get(FlowTrace::BindingReplaced),
        1
    );
    // When the way back flows again well before the send timeout.
    c.proxy.set_stalled_back(false);
    // Then the 51 is admitted after the flood: the old session gets every
    // push, then the duplicate-connection notice, then its close.
    let mut flood = 0;
    loop {
        match c.old.next_event(WAIT).unwrap() {
            Some(ClientEvent::Push { key, .. }) if key == PUSHED => flood += 1,
            Some(ClientEvent::Push { key, .. }) if key == REPLACED_NOTICE => {
                assert_eq!(flood, FLOOD_COUNT);
            }
            Some(ClientEvent::Closed(reason)) => {
                assert_eq!(reason, Some(CloseReason::Replaced));
                break;
            }
            other => panic!("the old session saw {other:?}"),
        }
    }
    assert_eq!(
        c.owner
            .node
            .flow_counters()
            .get(FlowTrace::ReplacedNoticeDeadlineExceeded),
        0
    );
}

/// One replacement on one node counts once at each end: the Actor owner's
/// `binding_replaced` and the replaced session owner's `binding_retired`
/// (both are the same node here; before, both counted `binding_replaced`,
/// so one replacement read as two).
#[test]
fn a_replacement_on_one_node_counts_one_binding_replaced() {
    let game = start_game(GameOptions::default());
    let _first = login(&game, "player-1");
    let _second = login(&game, "player-1");
    let counters = game.node.flow_counters();
    assert_eq!(counters.get(FlowTrace::BindingReplaced), 1);
    wait_until("the replaced session's binding is retired", || {
        game.node.flow_counters().get(FlowTrace::BindingRetired) == 1
    });
    assert_eq!(game.node.flow_counters().get(FlowTrace::BindingReplaced), 1);
}
