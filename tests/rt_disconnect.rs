//! Disconnect contract items (§7, §9) over real nodes on loopback.

mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::core::trace::FlowTrace;
use zlink::error::Reason;

#[test]
fn d2_notify_racing_a_physical_disconnect_runs_the_callback_at_most_once() {
    let mesh = start_mesh(2, GameOptions::default());
    let rounds = 10;
    for round in 0..rounds {
        let actor = format!("d2-{round}");
        mesh[1].node.create_actor("player", &id(&actor)).unwrap();
        let mut client = login(&mesh[0], &actor);
        // The logical notification, and at once the connection's end.
        client
            .send(NOTIFY, Bytes::copy_from_slice(actor.as_bytes()))
            .unwrap();
        drop(client);
    }
    let mut seen: Vec<String> = (0..rounds)
        .map(|_| mesh[1].disconnect_events.recv_timeout(WAIT).unwrap())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), rounds, "a callback ran twice: {seen:?}");
    assert!(
        mesh[1]
            .disconnect_events
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "a callback ran twice"
    );
}

#[test]
fn d3_after_a_disconnect_notification_the_actor_and_its_spot_are_unchanged() {
    let mesh = start_mesh(2, GameOptions::default());
    let handle = mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = login(&mesh[0], "player-1");
    assert_eq!(
        client
            .request(COUNT, payload("player-1", ""), WAIT)
            .unwrap(),
        Bytes::from_static(b"1")
    );
    // The logical notification: the same instance is bound again afterwards.
    assert_eq!(
        expect_reply(&mut client, NOTIFY, "player-1"),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    assert_eq!(
        expect_reply(&mut client, LOGIN, "player-1"),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        client
            .request(COUNT, payload("player-1", ""), WAIT)
            .unwrap(),
        Bytes::from_static(b"2")
    );
    // The physical disconnect: likewise.
    drop(client);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    let mut client = login(&mesh[0], "player-1");
    assert_eq!(
        client
            .request(COUNT, payload("player-1", ""), WAIT)
            .unwrap(),
        Bytes::from_static(b"3")
    );
    assert_eq!(
        expect_reply(&mut client, FIND, "player-1"),
        Bytes::from(format!("player-1:{}", handle.generation.0))
    );
    assert_eq!(
        mesh[1]
            .node
            .create_actor("player", &id("player-1"))
            .unwrap(),
        handle
    );
    // The same Spot is still told about the actor.
    drop(client);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
}

#[test]
fn d4_a_reconnecting_client_gets_no_old_binding_back() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let old = login(&mesh[0], "player-1");
    drop(old);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    let mut again = mesh[0].client();
    assert_eq!(
        expect_error(&mut again, RELAY, "player-1:x").reason(),
        Reason::SessionNotBound
    );
    assert_eq!(
        expect_reply(&mut again, FIND, "player-1"),
        Bytes::from_static(b"none")
    );
    assert_eq!(expect_reply(&mut again, BOUND, ""), Bytes::new());
    assert_eq!(
        expect_reply(&mut again, LOGIN, "player-1"),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        again
            .request(RELAY, payload("player-1", "y"), WAIT)
            .unwrap(),
        payload("player-1", "y")
    );
}

#[test]
fn x17_a_disconnect_callback_that_never_finishes_does_not_stall_cleanup() {
    let deadline = Duration::from_millis(500);
    let settings = NodeSettings {
        disconnect_deadline: deadline,
        ..NodeSettings::default()
    };
    let mesh = start_mesh(
        3,
        GameOptions {
            settings: Some(settings),
            blocking_disconnect: Some("slow".to_owned()),
            ..GameOptions::default()
        },
    );
    mesh[1].node.create_actor("player", &id("slow")).unwrap();
    mesh[2].node.create_actor("player", &id("fast")).unwrap();
    let mut client = login(&mesh[0], "slow");
    assert_eq!(
        expect_reply(&mut client, LOGIN, "fast"),
        Bytes::from_static(b"bound")
    );
    let held = mesh[1].observed.held_receiver();
    let dropped = Instant::now();
    drop(client);
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect");
    // The other binding's cleanup is not held up by the stuck callback.
    assert_eq!(
        mesh[2].disconnect_events.recv_timeout(WAIT).unwrap(),
        "fast"
    );
    wait_counter(&mesh[0], FlowTrace::DisconnectCallbackTimeout, 1);
    let elapsed = dropped.elapsed();
    assert!(elapsed >= deadline, "gave up after {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(
        mesh[0]
            .node
            .flow_counters()
            .get(FlowTrace::DisconnectCallbackTimeout),
        1
    );
    // The tombstone went out at the deadline: once node 2 runs again, a new
    // bind of "slow" replaces nothing.
    mesh[1].observed.release();
    let _client = login(&mesh[0], "slow");
    assert_eq!(
        mesh[1].node.flow_counters().get(FlowTrace::BindingReplaced),
        0
    );
    assert!(mesh[0]
        .observed
        .replaced_callbacks
        .lock()
        .unwrap()
        .is_empty());
}
