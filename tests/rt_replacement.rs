//! Rebind and replacement contract items (§6) over real nodes on loopback,
//! some with a tap on the link that drops, duplicates or rewrites record 51.

mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
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
        // is refused.
        let error = relay_error(&mut old, &player, "late");
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
        assert!(
            matches!(
                error.reason(),
                Reason::SessionClosing | Reason::StaleBinding
            ),
            "{error:?}"
        );
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
        assert_eq!(new.next_event(Duration::from_millis(200)).unwrap(), None);
    }
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
    assert!(
        mesh[1]
            .disconnect_events
            .recv_timeout(Duration::from_millis(200))
            .is_err(),
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
    assert_eq!(
        old.next_event(Duration::from_millis(300)).unwrap(),
        None,
        "the old session got a notice or a close"
    );
    let error = relay_error(&mut old, "player-1", "late");
    assert_eq!(error.reason(), Reason::StaleBinding, "{error:?}");
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
    assert!(
        mesh[1]
            .disconnect_events
            .recv_timeout(Duration::from_millis(200))
            .is_err(),
        "x's Spot was told of a disconnect of its new binding"
    );
    assert_push(&mut new, "x", "still-mine");
    assert_eq!(
        new.request(RELAY, payload("x", "relay"), WAIT).unwrap(),
        payload("x", "relay")
    );
}
