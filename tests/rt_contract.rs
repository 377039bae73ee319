//! Contract items over real sockets: a real node (io_uring shard, STREAM
//! listener on loopback) and real clients. Times use the real clock with a
//! one-sided check: never sooner, and only a generous upper bound.

mod bound;
mod runtime_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{NodeBuilder, NodeSettings, ObjectRole, StartError};
use zlink::client::{ClientError, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::PacketKey;
use zlink::store::{EmbeddedStore, MonotonicClock};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::Command;

fn store() -> Arc<EmbeddedStore> {
    Arc::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    ))
}

#[test]
fn s1_startup_refuses_dispatch_without_role_or_store_and_duplicate_keys() {
    // enable_actor_dispatch() takes no mesh name: it is a method without arguments.
    let no_role = NodeBuilder::new(1)
        .location_store(store())
        .enable_actor_dispatch()
        .start();
    assert!(
        matches!(no_role, Err(StartError::NoObjectRole)),
        "{no_role:?}"
    );

    let no_store = NodeBuilder::new(1)
        .object_role(ObjectRole::Server)
        .enable_actor_dispatch()
        .start();
    assert!(
        matches!(no_store, Err(StartError::NoLocationStore)),
        "{no_store:?}"
    );

    let duplicate = NodeBuilder::new(1)
        .on_packet(PacketKey(7), |_, _| async { Ok(()) })
        .on_packet(PacketKey(7), |_, _| async { Ok(()) })
        .start();
    assert!(
        matches!(
            duplicate,
            Err(StartError::DuplicatePacketHandler(PacketKey(7)))
        ),
        "{duplicate:?}"
    );
    let error = NodeBuilder::new(1)
        .object_role(ObjectRole::Client)
        .enable_actor_dispatch()
        .start()
        .unwrap_err();
    assert_eq!(error.error().kind(), ErrorKind::Configuration);
    assert!(error.to_string().contains("Location Store"), "{error}");

    // A STREAM-only node needs neither a role nor a store.
    let stream_only = NodeBuilder::new(1)
        .listen("127.0.0.1:0".parse().unwrap())
        .start();
    assert!(stream_only.is_ok(), "{stream_only:?}");
}

shard_matrix! {
    fn r1_relay_after_bind_makes_no_store_query_and_reaches_the_handler(shards: usize) {
        let game = start_game(GameOptions {
            shards,
            ..GameOptions::default()
        });
        let player = actor_on("player-1", actor_shard(shards, true), shards);
        let mut client = login_on(&game, &player, session_shard(shards));
        let after_bind = game.store.counts().row_operations();
        for i in 0..20 {
            let reply = client
                .request(RELAY, payload(&player, &i.to_string()), WAIT)
                .unwrap();
            assert_eq!(reply, payload(&player, &i.to_string()));
        }
        assert_eq!(
            game.store.counts().row_operations(),
            after_bind,
            "relay queried the store"
        );
        assert_eq!(game.observed.delivered.lock().unwrap().len(), 20);
    }
}

shard_matrix! {
    fn r3_reply_completes_the_original_correlation_exactly_once(shards: usize) {
        let game = start_game(GameOptions {
            shards,
            ..GameOptions::default()
        });
        let player = actor_on("player-1", actor_shard(shards, true), shards);
        let mut client = login_on(&game, &player, session_shard(shards));
        let first = client.start_request(RELAY, payload(&player, "a")).unwrap();
        let second = client.start_request(RELAY, payload(&player, "b")).unwrap();
        assert_eq!(
            client.wait_reply(second, WAIT).unwrap(),
            Ok(payload(&player, "b"))
        );
        assert_eq!(
            client.wait_reply(first, WAIT).unwrap(),
            Ok(payload(&player, "a"))
        );
        // Nothing else arrives for either correlation: the next event is the
        // reply to a marker request relayed to the same Actor after them.
        let marker = client.start_request(RELAY, payload(&player, "marker")).unwrap();
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Reply {
                correlation: marker,
                outcome: Ok(payload(&player, "marker"))
            }),
            "a second terminal arrived before the marker's"
        );
    }
}

#[test]
fn s5_relay_to_an_actor_the_session_has_not_bound_is_session_not_bound() {
    let game = start_game(GameOptions::default());
    let mut client = game.client();
    let outcome = client.request(RELAY, payload("player-9", "x"), WAIT);
    match outcome {
        Err(ClientError::Remote(error)) => {
            assert_eq!(error.kind(), ErrorKind::InvalidOperation);
            assert_eq!(error.reason(), Reason::SessionNotBound);
        }
        other => panic!("expected session-not-bound, got {other:?}"),
    }
    // An Actor with no binding that pushes or closes its session — asked
    // by node code, since no session reaches it — gets session-not-bound
    // for each, typed (§12).
    game.node.create_actor("player", &id("player-9")).unwrap();
    let caller = game.node.caller();
    for key in [PUSH, CLOSE_SESSION] {
        let unbound = caller
            .request(&id("player-9"), key, payload("player-9", "x"), WAIT)
            .wait()
            .expect_err("no binding");
        assert_eq!(unbound.kind(), ErrorKind::InvalidOperation, "{unbound}");
        assert_eq!(unbound.reason(), Reason::SessionNotBound, "{unbound}");
    }
    // The same calls succeed once the binding exists; the actor can push.
    let mut client = login(&game, "player-9");
    assert_eq!(
        client
            .request(PUSH, payload("player-9", "hello"), WAIT)
            .unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("player-9", "hello")
        })
    );
    // And close its session: the client is told why.
    let _ = client.start_request(CLOSE_SESSION, payload("player-9", "bye"));
    assert_eq!(
        client.wait_closed(WAIT).unwrap(),
        Some(CloseReason::Application)
    );
}

shard_matrix! {
    fn p1_rebind_from_a_new_session_completes_and_pushes_go_only_there(shards: usize) {
        let game = start_game(GameOptions {
            shards,
            ..GameOptions::default()
        });
        let player = actor_on("player-1", actor_shard(shards, true), shards);
        let mut old = login_on(&game, &player, session_shard(shards));
        let mut new = login_on(&game, &player, session_shard(shards));
        assert_eq!(
            new.request(PUSH, payload(&player, "tick"), WAIT).unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            new.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload(&player, "tick")
            })
        );
        // The old session got the duplicate-connection notice, then its
        // close; never the push.
        let mut saw_notice = false;
        loop {
            match old.next_event(WAIT).unwrap() {
                Some(ClientEvent::Push { key, .. }) if key == REPLACED_NOTICE => saw_notice = true,
                Some(ClientEvent::Closed(reason)) => {
                    assert_eq!(reason, Some(CloseReason::Replaced));
                    break;
                }
                other => panic!("the old session saw {other:?}"),
            }
        }
        assert!(saw_notice);
    }
}

shard_matrix! {
    fn p3_old_connection_closes_100ms_after_callback_not_sooner(shards: usize) {
        let game = start_game(GameOptions {
            shards,
            ..GameOptions::default()
        });
        // Five replacements: a close timer a few ms short can hide behind one
        // late wake-up of a loaded machine, not behind five.
        for round in 0..5 {
            let player = actor_on(&format!("p3-{round}"), actor_shard(shards, true), shards);
            let mut old = login_on(&game, &player, session_shard(shards));
            let _new = login_on(&game, &player, session_shard(shards));
            let reason = old.wait_closed(WAIT).unwrap();
            let closed_at = Instant::now();
            assert_eq!(reason, Some(CloseReason::Replaced));
            let callbacks = game.observed.replaced_callbacks.lock().unwrap().clone();
            assert_eq!(callbacks.len(), round + 1);
            // Recorded as the callback's last step, just before its terminal
            // arms the close timer.
            let (actor, terminal) = callbacks[round].clone();
            assert_eq!(actor, player);
            let since_terminal = closed_at - terminal;
            assert!(
                since_terminal >= Duration::from_millis(100),
                "closed {since_terminal:?} after the callback terminal"
            );
            assert!(since_terminal < Duration::from_secs(5), "{since_terminal:?}");
        }
    }
}

/// P3's revalidation (§6: the close timer "revalidates before closing"):
/// when the old connection is already gone as its 100 ms end, the timer
/// finds no session to close, and says so (`replacement_close_superseded`).
/// The client ends its connection as soon as it reads the callback's
/// notice; the callback ends right after sending it, so the client's end
/// comes within the 100 ms, unless the machine stalls the test for that
/// long: then the node closes it first (`Replaced`), and the test tries
/// again with another player, up to five times.
#[test]
fn p3_the_close_timer_revalidates_and_closes_nothing_when_the_connection_is_gone() {
    let game = start_game(GameOptions::default());
    for attempt in 0..5 {
        let player = format!("p3-{attempt}");
        let superseded = game
            .node
            .flow_counters()
            .get(FlowTrace::ReplacementCloseSuperseded);
        let mut old = Raw::connect(game.addr());
        old.login(&player);
        let _new = login(&game, &player);
        match old.next_or_end() {
            Some(ClientFrame::Push { key, .. }) => assert_eq!(key, REPLACED_NOTICE),
            other => panic!("the old session got {other:?} before the notice"),
        }
        old.shutdown_write();
        match old.next_or_end() {
            // The client's end came first: the session closed without a
            // reason, and at its 100 ms the timer revalidates and stands down.
            None => {
                wait_counter(&game, FlowTrace::ReplacementCloseSuperseded, superseded + 1);
                return;
            }
            // The timer came first: nothing shown, try again.
            Some(ClientFrame::Close { reason }) => assert_eq!(reason, CloseReason::Replaced),
            Some(other) => panic!("the old session got {other:?}"),
        }
    }
    panic!("in five tries the node always closed the old connection before its client did");
}

shard_matrix! {
    fn p4_binding_the_current_binding_again_is_idempotent(shards: usize) {
        let game = start_game(GameOptions {
            shards,
            ..GameOptions::default()
        });
        let player = actor_on("player-1", actor_shard(shards, true), shards);
        let mut client = login_on(&game, &player, session_shard(shards));
        let again = client
            .request(LOGIN, Bytes::copy_from_slice(player.as_bytes()), WAIT)
            .unwrap();
        assert_eq!(again, Bytes::from_static(b"bound"));
        assert_eq!(
            client.request(RELAY, payload(&player, "still"), WAIT).unwrap(),
            payload(&player, "still")
        );
        assert!(game.observed.replaced_callbacks.lock().unwrap().is_empty());
        // No close and no notice: the next event is a marker's reply.
        let marker = client.start_request(RELAY, payload(&player, "marker")).unwrap();
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Reply {
                correlation: marker,
                outcome: Ok(payload(&player, "marker"))
            }),
            "no close, no notice"
        );
    }
}

/// P1, "does not wait for the old callback": the old session's replacement
/// callback never ends (its timeout is 30 s), and still the new session's
/// bind completes and the Actor's push reaches the new session — while the
/// old callback is running, as the node's counters show at that moment.
#[test]
fn p1_the_new_binding_does_not_wait_for_the_old_sessions_callback() {
    let game = start_game(GameOptions {
        replaced_never_finishes: true,
        ..GameOptions::default()
    });
    let _old = login(&game, "player-1");
    let mut new = login(&game, "player-1");
    assert_eq!(
        new.request(PUSH, payload("player-1", "tick"), WAIT)
            .unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        new.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("player-1", "tick")
        })
    );
    // The old callback has not ended: no terminal, no timeout yet.
    assert!(game.observed.replaced_callbacks.lock().unwrap().is_empty());
    let counters = game.node.flow_counters();
    assert_eq!(counters.get(FlowTrace::ReplacementCallbackTimeout), 0);
    assert_eq!(counters.get(FlowTrace::ReplacementCallbackFailed), 0);
}

/// The Actor lives on node 2 and the old session's node 1 reaches it
/// through a tap, which reads the 51 one loopback hop before node 1 arms
/// the callback timeout: the clock starts there (docs/TESTING.md "Timer
/// lower bounds").
#[test]
fn x1_callback_without_terminal_is_force_closed_at_the_timeout() {
    let timeout = Duration::from_millis(400);
    let settings = NodeSettings {
        replacement_callback_timeout: timeout,
        ..NodeSettings::default()
    };
    let options = GameOptions {
        settings: Some(settings),
        replaced_never_finishes: true,
        ..GameOptions::default()
    };
    let store = new_store();
    let two = start_node(2, store.clone(), options.clone(), &[]);
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(1, store, options, &[(2, tap.addr)]);
    assert!(one.node.wait_linked(2, WAIT));
    two.node.create_actor("player", &id("player-1")).unwrap();
    let mut old = login(&one, "player-1");
    let _new = login(&two, "player-1");
    assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
    let notice = tap
        .first_seen(Direction::ToDialer, Command::BoundSessionReplaced.code())
        .expect("the 51 crossed the tap");
    let elapsed = notice.elapsed();
    assert!(
        elapsed >= timeout,
        "force-closed {elapsed:?} after the 51 reached node 1's link"
    );
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    // The timeout closed it: the callback never ended.
    assert!(one.observed.replaced_callbacks.lock().unwrap().is_empty());
    assert_eq!(
        one.node
            .flow_counters()
            .get(FlowTrace::ReplacementCallbackTimeout),
        1
    );
}

#[test]
fn x1_l3_the_public_defaults_are_the_specs_30000_ms_and_3000_ms() {
    let defaults = NodeSettings::default();
    assert_eq!(
        defaults.replacement_callback_timeout,
        Duration::from_millis(30_000)
    );
    assert_eq!(
        defaults.relocation_seal_timeout,
        Duration::from_millis(3_000)
    );
}

#[test]
fn d1_disconnect_notifies_each_bound_actor_once_even_when_one_fails() {
    let game = start_game(GameOptions {
        failing_disconnect: Some("player-a".to_owned()),
        ..GameOptions::default()
    });
    let mut client = login(&game, "player-a");
    assert_eq!(
        client
            .request(LOGIN, Bytes::from_static(b"player-b"), WAIT)
            .unwrap(),
        Bytes::from_static(b"bound")
    );
    drop(client);
    let mut seen = vec![
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
    ];
    seen.sort();
    assert_eq!(seen, vec!["player-a".to_owned(), "player-b".to_owned()]);
    // No second callback: a new session binds both and relays to each,
    // after anything the old one sent them.
    let mut again = login(&game, "player-a");
    assert_eq!(
        expect_reply(&mut again, LOGIN, "player-b"),
        Bytes::from_static(b"bound")
    );
    for actor in ["player-a", "player-b"] {
        assert_eq!(
            again
                .request(RELAY, payload(actor, "marker"), WAIT)
                .unwrap(),
            payload(actor, "marker")
        );
    }
    assert_eq!(
        game.disconnect_events.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "a callback ran twice"
    );
}

#[test]
fn x16_notify_disconnected_keeps_the_connection_and_removes_the_binding() {
    let game = start_game(GameOptions {
        session_disconnect: SessionDisconnect::Logs,
        ..GameOptions::default()
    });
    let mut client = login(&game, "player-1");
    assert_eq!(
        client
            .request(NOTIFY, Bytes::from_static(b"player-1"), WAIT)
            .unwrap(),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    let after = client.request(RELAY, payload("player-1", "x"), WAIT);
    assert!(
        matches!(&after, Err(ClientError::Remote(e)) if e.reason() == Reason::SessionNotBound),
        "{after:?}"
    );
    assert!(!client.is_closed());
    // The callback does not run again when the connection later closes.
    assert_closed_without_another_callback(&game, client, "player-1");
}

/// X16's second half: when the Spot callback fails, the binding is not
/// restored (a push ends session-not-bound) and the callback is not run
/// again, at NotifyDisconnected or at the connection's close.
#[test]
fn x16_a_failing_disconnect_callback_does_not_restore_the_binding_and_is_not_run_again() {
    let game = start_game(GameOptions {
        failing_disconnect: Some("player-1".to_owned()),
        session_disconnect: SessionDisconnect::Logs,
        ..GameOptions::default()
    });
    let mut client = login(&game, "player-1");
    let notified = client.request(NOTIFY, Bytes::from_static(b"player-1"), WAIT);
    assert!(
        matches!(&notified, Err(ClientError::Remote(_))),
        "NotifyDisconnected with a failing callback: {notified:?}"
    );
    assert_eq!(
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    for key in [RELAY, PUSH] {
        let after = client.request(key, payload("player-1", "x"), WAIT);
        assert!(
            matches!(&after, Err(ClientError::Remote(e)) if e.reason() == Reason::SessionNotBound),
            "{key:?}: {after:?}"
        );
    }
    assert!(!client.is_closed());
    assert_closed_without_another_callback(&game, client, "player-1");
}

/// Drops `client` and shows that `actor`'s disconnect callback does not run
/// (again): once the node has handled the close (the session's own
/// disconnect callback ran: the game must log it), a new session binds
/// `actor` and relays to it, after anything the old one sent it.
fn assert_closed_without_another_callback(game: &Game, client: zlink::client::Client, actor: &str) {
    let held = game.observed.held_receiver();
    drop(client);
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect");
    let mut again = login(game, actor);
    assert_eq!(
        again
            .request(RELAY, payload(actor, "marker"), WAIT)
            .unwrap(),
        payload(actor, "marker")
    );
    assert_eq!(
        game.disconnect_events.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "the disconnect callback ran again"
    );
}

#[test]
fn w1_session_callbacks_never_overlap_and_handlers_never_run_inside_them() {
    let game = start_game(GameOptions::default());
    let mut client = login(&game, "player-1");
    let correlations: Vec<_> = (0..50)
        .map(|i| {
            client
                .start_request(RELAY, payload("player-1", &i.to_string()))
                .unwrap()
        })
        .collect();
    for (i, correlation) in correlations.into_iter().enumerate() {
        assert_eq!(
            client.wait_reply(correlation, WAIT).unwrap(),
            Ok(payload("player-1", &i.to_string()))
        );
    }
    assert!(!game
        .observed
        .session_callbacks_overlapped
        .load(Ordering::SeqCst));
    assert!(!game
        .observed
        .handler_in_session_context
        .load(Ordering::SeqCst));
}

/// Pipelines `rounds` WORK requests (each handler turn spins 300 µs) to
/// `actor` and checks the replies come back in order.
fn pipelined_work(client: &mut zlink::client::Client, actor: &str, rounds: usize) {
    let started: Vec<_> = (0..rounds)
        .map(|i| {
            client
                .start_request(WORK, payload(actor, &i.to_string()))
                .unwrap()
        })
        .collect();
    for (i, correlation) in started.into_iter().enumerate() {
        assert_eq!(
            client.wait_reply(correlation, WAIT).unwrap(),
            Ok(payload(actor, &i.to_string()))
        );
    }
}

/// The payloads delivered to `actor`'s handler, in the order they ran.
fn delivered_to(game: &Game, actor: &str) -> Vec<Bytes> {
    let prefix = format!("{actor}:");
    let delivered = game.observed.delivered.lock().unwrap().clone();
    delivered
        .into_iter()
        .filter(|p| p.starts_with(prefix.as_bytes()))
        .collect()
}

#[test]
fn w2_session_spot_and_actor_delivery_lanes_all_run_one_turn_at_a_time_in_order() {
    // W2 (§11): the three lane sites are one serial engine, so each shows
    // the same discipline through the public API: one turn at a time per
    // lane, in arrival order, with work queued behind a running turn. A
    // node with two shards, each session on the shard other than its
    // Actor's, so every record crosses a shard hop into the lane.
    let game = start_game(GameOptions {
        shards: 2,
        ..GameOptions::default()
    });
    let rounds = 40;

    // Session lane: one connection's callbacks, pipelined.
    let lone = actor_on("lone", 0, 2);
    let mut client = login_on(&game, &lone, 1);
    // Actor-delivery lane (PerActor): the same pipelined requests queue in
    // the Actor's lane behind its running 300 µs turns.
    pipelined_work(&mut client, &lone, rounds);
    let expected: Vec<Bytes> = (0..rounds)
        .map(|i| payload(&lone, &i.to_string()))
        .collect();
    assert_eq!(delivered_to(&game, &lone), expected);
    assert!(!game
        .observed
        .session_callbacks_overlapped
        .load(Ordering::SeqCst));
    assert_eq!(game.observed.turns_overlap_max.load(Ordering::SeqCst), 1);

    // Spot lane (SpotWide): two Actors of one room, each bound from its own
    // session on its own shard, both sending at once.
    let room = room(&game, "room-1");
    let members: Vec<String> = ["a", "b"]
        .iter()
        .map(|n| room.id().actor_id(n).unwrap().to_string())
        .collect();
    let mut sessions: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut session = client_on(&game, u16::try_from(i).unwrap());
            assert_eq!(expect_reply(&mut session, ENTER, name), "bound");
            session
        })
        .collect();
    std::thread::scope(|scope| {
        for (session, name) in sessions.iter_mut().zip(&members) {
            scope.spawn(move || pipelined_work(session, name, rounds));
        }
    });
    for name in &members {
        let expected: Vec<Bytes> = (0..rounds).map(|i| payload(name, &i.to_string())).collect();
        assert_eq!(delivered_to(&game, name), expected);
    }
    // No two turns of any lane ever overlapped. (The probe does see
    // overlap where the spec allows it: rt_actors.rs
    // per_actor_actors_run_independently_a_busy_one_blocks_no_other.)
    assert_eq!(game.observed.turns_overlap_max.load(Ordering::SeqCst), 1);
}

#[test]
fn x7_shutdown_refuses_new_work_finishes_accepted_work_then_closes() {
    // Long enough that the steps before it fit on a loaded 2-core machine.
    let deadline = Duration::from_millis(3_000);
    let settings = NodeSettings {
        shutdown_deadline: deadline,
        ..NodeSettings::default()
    };
    let game = start_game(GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    });
    let addr = game.addr();
    let mut client = login(&game, "player-1");
    let Game {
        node,
        disconnect_events,
        ..
    } = game;
    let started = Instant::now();
    let stopper = std::thread::spawn(move || node.shutdown());
    // Once the drain has begun a new binding is refused...
    loop {
        match client.request(LOGIN, Bytes::from_static(b"player-2"), WAIT) {
            Err(ClientError::Remote(e)) => {
                assert_eq!(e.reason(), Reason::ShuttingDown);
                break;
            }
            Ok(_) => assert!(started.elapsed() < deadline, "binds were never refused"),
            Err(other) => panic!("bind during the drain: {other}"),
        }
    }
    // ...while work on the accepted session goes on until the deadline.
    assert!(
        started.elapsed() < deadline,
        "the test machine is too slow for this deadline"
    );
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "drain"), WAIT)
            .unwrap(),
        payload("player-1", "drain")
    );
    // A new connection is refused with a Shutdown close.
    let mut late = zlink::client::Client::connect(addr).unwrap();
    assert_eq!(late.wait_closed(WAIT).unwrap(), Some(CloseReason::Shutdown));
    // At the deadline the session closes, and its cleanup runs.
    assert_eq!(
        client.wait_closed(WAIT).unwrap(),
        Some(CloseReason::Shutdown)
    );
    assert!(
        started.elapsed() >= deadline,
        "closed {:?} after shutdown began",
        started.elapsed()
    );
    // player-2 may have been bound too, before the drain began.
    while disconnect_events.recv_timeout(WAIT).unwrap() != "player-1" {}
    stopper.join().unwrap();
}

/// A deterministic generator for the hostile-client test (xorshift64*).
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn hostile_client_bytes_get_a_typed_error_or_a_close_with_a_reason_and_the_shard_keeps_serving() {
    use std::io::{Read, Write};
    let game = start_game(GameOptions::default());
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut protocol_closes = 0;
    for case in 0..150 {
        let len = (next(&mut seed) % 64) as usize + 1;
        let mut bytes: Vec<u8> = (0..len).map(|_| next(&mut seed) as u8).collect();
        if case % 2 == 0 {
            // Half the cases carry a believable length prefix, so the body is judged.
            let body = (len.saturating_sub(4)) as u32;
            bytes.splice(..4.min(len), body.to_be_bytes());
        }
        let mut stream = std::net::TcpStream::connect(game.addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        // The hostile bytes, then a keepalive probe: the node either closes
        // with a reason, or answers what it decoded and then the probe.
        let mut probe = bytes::BytesMut::new();
        zlink::wire::client::ClientFrame::Ping { nonce: 7 }.encode(&mut probe);
        stream.write_all(&bytes).unwrap();
        stream.write_all(&probe).unwrap();
        let mut buf = bytes::BytesMut::new();
        let mut chunk = [0u8; 4096];
        'read: loop {
            let n = match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                // Nothing more: the bytes form an incomplete frame, which the
                // node keeps waiting for (bounded by the frame limit).
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) => panic!("case {case}: {e}"),
            };
            buf.extend_from_slice(&chunk[..n]);
            while let Some(frame) = zlink::wire::client::ClientFrame::decode_from(
                &mut buf,
                &zlink::wire::DecodeLimits::default(),
            )
            .expect("the node only sends well-formed frames")
            {
                match frame {
                    zlink::wire::client::ClientFrame::Close {
                        reason: CloseReason::ProtocolError,
                    } => protocol_closes += 1,
                    zlink::wire::client::ClientFrame::Pong { nonce: 7 } => break 'read,
                    zlink::wire::client::ClientFrame::Error { .. }
                    | zlink::wire::client::ClientFrame::Pong { .. } => {}
                    other => panic!("case {case}: unexpected {other:?} for {bytes:?}"),
                }
            }
        }
    }
    assert!(
        protocol_closes > 10,
        "only {protocol_closes} malformed inputs were closed with a reason"
    );
    // The shard is not stuck: a real client still logs in and relays.
    let mut client = login(&game, "player-1");
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "alive"), WAIT)
            .unwrap(),
        payload("player-1", "alive")
    );
}
