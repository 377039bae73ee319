//! Disconnect contract items (§7, §9) over real nodes on loopback.

mod bound;
mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::core::trace::FlowTrace;
use zlink::error::Reason;

/// The race forced: the NotifyDisconnected notice's callback is running
/// (blocked on the Actor's node) when the connection drops, so the binding
/// is being notified at the moment of the physical disconnect. The
/// callback runs once; a second notice would reach the Actor before a
/// later bind and relay over the same link, which are the marker.
#[test]
fn d2_notify_racing_a_physical_disconnect_runs_the_callback_at_most_once() {
    let mesh = start_mesh(
        2,
        GameOptions {
            blocking_disconnect: Some("d2".to_owned()),
            ..GameOptions::default()
        },
    );
    mesh[1].node.create_actor("player", &id("d2")).unwrap();
    let actor_node = mesh[1].observed.held_receiver();
    let mut client = Raw::connect(mesh[0].addr());
    client.login("d2");
    // The logical notification: its callback starts, and blocks node 2.
    client.send(&[Raw::request(NOTIFY, 2, Bytes::from_static(b"d2"))]);
    assert_eq!(actor_node.recv_timeout(WAIT).unwrap(), "disconnect");
    assert_eq!(mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(), "d2");
    // The physical disconnect while that notice is in flight: node 1 closes
    // its end of the connection as it handles the client's.
    client.shutdown_write();
    assert_eq!(client.next_or_end(), None);
    mesh[1].observed.release();
    // The marker: a new session binds d2 and relays to it, after anything
    // the old session sent to d2 on that link.
    let mut again = login(&mesh[0], "d2");
    assert_eq!(
        again.request(RELAY, payload("d2", "marker"), WAIT).unwrap(),
        payload("d2", "marker")
    );
    assert_eq!(
        mesh[1].disconnect_events.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "the callback ran twice"
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
    // The lifecycle deadline is armed when node 1 handles the client's end
    // and sends the notices, one loopback hop after this: the last event
    // before the arming the test sees. (A clock started after the arming,
    // at the session's own disconnect callback, made a correct deadline
    // look 1.3 ms early on the loaded machine: docs/TESTING.md "Timer lower
    // bounds".)
    let started = Instant::now();
    drop(client);
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect");
    // The other binding's cleanup is not held up by the stuck callback.
    assert_eq!(
        mesh[2].disconnect_events.recv_timeout(WAIT).unwrap(),
        "fast"
    );
    wait_counter(&mesh[0], FlowTrace::DisconnectCallbackTimeout, 1);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= deadline,
        "gave up {elapsed:?} after the client left"
    );
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
