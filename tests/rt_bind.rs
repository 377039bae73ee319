//! Startup-and-bind contract items (§4, §5, §12, §13) over real nodes on
//! loopback: a session on one node, its actors on others.

mod bound;
mod runtime_support;

use bytes::Bytes;
use runtime_support::*;
use zlink::client::ClientEvent;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{ObjectGeneration, OwnerLeaseGeneration};

/// Stashes the ActorRef of `actor` on `game`'s session node (the lookup reads
/// the store; the bind that follows must not).
fn stash(game: &Game, client: &mut zlink::client::Client, actor: &str) -> zlink::ids::ActorRef {
    assert_eq!(
        expect_reply(client, STASH, actor),
        Bytes::from_static(b"stashed")
    );
    game.observed.stash.lock().unwrap().clone().unwrap()
}

#[test]
fn s2_two_actors_bind_with_independent_routes() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1].node.create_actor("player", &id("on-two")).unwrap();
    mesh[2]
        .node
        .create_actor("player", &id("on-three"))
        .unwrap();
    let mut client = login(&mesh[0], "on-two");
    assert_eq!(
        expect_reply(&mut client, LOGIN, "on-three"),
        Bytes::from_static(b"bound")
    );
    let bound = String::from_utf8(expect_reply(&mut client, BOUND, "").to_vec()).unwrap();
    assert_eq!(bound.split(',').count(), 2, "{bound}");
    for i in 0..5 {
        for actor in ["on-two", "on-three"] {
            let data = format!("{actor}-{i}");
            assert_eq!(
                client.request(RELAY, payload(actor, &data), WAIT).unwrap(),
                payload(actor, &data)
            );
        }
    }
    // Each actor's handler saw only its own payloads: the routes never cross.
    let two = mesh[1].observed.delivered.lock().unwrap().clone();
    let three = mesh[2].observed.delivered.lock().unwrap().clone();
    assert_eq!(two.len(), 5);
    assert_eq!(three.len(), 5);
    assert!(two.iter().all(|p| p.starts_with(b"on-two:")), "{two:?}");
    assert!(
        three.iter().all(|p| p.starts_with(b"on-three:")),
        "{three:?}"
    );
    // Each actor pushes over its own binding.
    for actor in ["on-two", "on-three"] {
        assert_eq!(
            client.request(PUSH, payload(actor, "tick"), WAIT).unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload(actor, "tick")
            })
        );
    }
    // Ending one binding leaves the other's route alone.
    assert_eq!(
        expect_reply(&mut client, NOTIFY, "on-two"),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        expect_error(&mut client, RELAY, "on-two:x").reason(),
        Reason::SessionNotBound
    );
    assert_eq!(
        client
            .request(RELAY, payload("on-three", "still"), WAIT)
            .unwrap(),
        payload("on-three", "still")
    );
    assert_eq!(
        mesh[0]
            .node
            .flow_counters()
            .get(FlowTrace::PushRejectedNotCurrent),
        0
    );
}

#[test]
fn s3_stale_location_without_follow_route_is_unavailable_no_store_read_no_retry() {
    let mesh = start_mesh(3, GameOptions::default());
    // "ghost" lives on node 3; the ActorRef the session holds says node 2
    // (where "decoy" lives): a stale location.
    mesh[2].node.create_actor("player", &id("ghost")).unwrap();
    mesh[1].node.create_actor("player", &id("decoy")).unwrap();
    let mut client = mesh[0].client();
    let decoy = stash(&mesh[0], &mut client, "decoy");
    let mut stale = stash(&mesh[0], &mut client, "ghost");
    stale.location = decoy.location.clone();
    *mesh[0].observed.stash.lock().unwrap() = Some(stale);

    let before = mesh[0].store.counts().row_operations();
    let error = expect_error(&mut client, BIND_STASHED, "");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::StaleLocation);
    assert_eq!(
        mesh[0].store.counts().row_operations(),
        before,
        "the bind re-read the store"
    );
    // Nothing was bound anywhere: not on node 3 where the actor really is.
    assert!(mesh[2].observed.bound_events.lock().unwrap().is_empty());
    assert!(mesh[1].observed.bound_events.lock().unwrap().is_empty());
    assert_eq!(expect_reply(&mut client, BOUND, ""), Bytes::new());
    assert_eq!(
        expect_error(&mut client, RELAY, "ghost:x").reason(),
        Reason::SessionNotBound
    );
}

#[test]
fn s3_bind_to_an_owner_node_that_is_gone_is_unavailable() {
    let settings = zlink::api::NodeSettings {
        bind_timeout: std::time::Duration::from_millis(2_000),
        ..zlink::api::NodeSettings::default()
    };
    let mut mesh = start_mesh(
        2,
        GameOptions {
            settings: Some(settings),
            ..GameOptions::default()
        },
    );
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = mesh[0].client();
    stash(&mesh[0], &mut client, "player-1");
    mesh.pop().unwrap().node.shutdown();
    assert!(
        mesh[0].node.wait_unlinked(2, WAIT),
        "node 1 never saw node 2 go"
    );
    let before = mesh[0].store.counts().row_operations();
    let error = expect_error(&mut client, BIND_STASHED, "");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(mesh[0].store.counts().row_operations(), before);
}

#[test]
fn s4_bind_with_another_object_generation_is_invalid_operation() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = mesh[0].client();
    for delta in [1i64, -1] {
        let mut wrong = stash(&mesh[0], &mut client, "player-1");
        wrong.generation = ObjectGeneration((wrong.generation.0 as i64 + delta) as u64);
        *mesh[0].observed.stash.lock().unwrap() = Some(wrong);
        let before = mesh[0].store.counts().row_operations();
        let error = expect_error(&mut client, BIND_STASHED, "");
        assert_eq!(error.kind(), ErrorKind::InvalidOperation, "{error:?}");
        assert_eq!(error.reason(), Reason::ObjectGenerationMismatch);
        assert_eq!(mesh[0].store.counts().row_operations(), before);
    }
    assert!(mesh[1].observed.bound_events.lock().unwrap().is_empty());
    assert_eq!(expect_reply(&mut client, BOUND, ""), Bytes::new());
    // The current generation binds.
    stash(&mesh[0], &mut client, "player-1");
    assert_eq!(
        expect_reply(&mut client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
}

#[test]
fn x8_push_from_the_join_callback_is_delivered_never_stale() {
    let mesh = start_mesh(
        3,
        GameOptions {
            push_on_bound: true,
            ..GameOptions::default()
        },
    );
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    for round in 0..5 {
        let mut client = login(&mesh[0], "player-1");
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: JOINED,
                payload: Bytes::from_static(b"player-1")
            }),
            "round {round}"
        );
        // A replacing session on another node gets its own join push.
        let mut other = login(&mesh[2], "player-1");
        assert_eq!(
            other.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: JOINED,
                payload: Bytes::from_static(b"player-1")
            }),
            "round {round}"
        );
        drop(other);
        let _ = mesh[1].disconnect_events.recv_timeout(WAIT);
    }
    for game in &mesh {
        assert_eq!(
            game.node
                .flow_counters()
                .get(FlowTrace::PushRejectedNotCurrent),
            0,
            "node {}",
            game.rid
        );
    }
}

#[test]
fn x9_bind_is_not_refused_for_a_differing_lease_copy_and_renewal_keeps_pushes_current() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = mesh[0].client();
    let mut copy = stash(&mesh[0], &mut client, "player-1");
    copy.location.lease = OwnerLeaseGeneration(copy.location.lease.0 + 7);
    *mesh[0].observed.stash.lock().unwrap() = Some(copy);
    assert_eq!(
        expect_reply(&mut client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
    // The owner's lease is renewed (same generation, later expiry).
    use zlink::store::LocationStore;
    let lease = mesh[1]
        .store
        .lease(zlink::ids::NodeRid(2))
        .unwrap()
        .expect("node 2 holds a lease");
    mesh[1].store.renew_lease(&lease).unwrap();
    for i in 0..3 {
        let data = format!("tick-{i}");
        assert_eq!(
            client
                .request(PUSH, payload("player-1", &data), WAIT)
                .unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload("player-1", &data)
            })
        );
    }
    assert_eq!(
        mesh[0]
            .node
            .flow_counters()
            .get(FlowTrace::PushRejectedNotCurrent),
        0
    );
}

#[test]
fn x10_bind_and_disconnect_notification_make_no_store_query() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    mesh[1]
        .node
        .create_actor("player", &id("player-2"))
        .unwrap();
    let mut client = mesh[0].client();
    stash(&mesh[0], &mut client, "player-1");
    let before = mesh[0].store.counts().row_operations();
    assert_eq!(
        expect_reply(&mut client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        mesh[0].store.counts().row_operations(),
        before,
        "bind read the store"
    );
    // The logical notification.
    assert_eq!(
        expect_reply(&mut client, NOTIFY, "player-1"),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    assert_eq!(
        mesh[0].store.counts().row_operations(),
        before,
        "notify read the store"
    );
    // The physical disconnect.
    stash(&mesh[0], &mut client, "player-2");
    let before = mesh[0].store.counts().row_operations();
    assert_eq!(
        expect_reply(&mut client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
    drop(client);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-2"
    );
    assert_eq!(
        mesh[0].store.counts().row_operations(),
        before,
        "disconnect read the store"
    );
}

#[test]
fn x11_bind_or_get_find_and_bound_see_only_this_sessions_current_bindings() {
    let mesh = start_mesh(2, GameOptions::default());
    let handle = mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    mesh[1]
        .node
        .create_actor("player", &id("player-2"))
        .unwrap();
    let expected = format!("player-1:{}", handle.generation.0);
    let mut mine = login(&mesh[0], "player-1");
    let mut other = mesh[0].client();
    // Another session sees none of mine, though the directory has the actor.
    assert_eq!(
        expect_reply(&mut other, FIND, "player-1"),
        Bytes::from_static(b"none")
    );
    assert_eq!(expect_reply(&mut other, BOUND, ""), Bytes::new());
    assert_eq!(
        expect_reply(&mut mine, FIND, "player-1"),
        Bytes::from(expected.clone())
    );
    assert_eq!(
        expect_reply(&mut mine, FIND, "player-2"),
        Bytes::from_static(b"none")
    );

    // bind_or_get of the bound ActorRef returns that binding: no new bind.
    let binds = mesh[1].observed.bound_events.lock().unwrap().len();
    let mut current = stash(&mesh[0], &mut mine, "player-1");
    assert_eq!(
        expect_reply(&mut mine, BIND_OR_GET_STASHED, ""),
        Bytes::from(expected.clone())
    );
    assert_eq!(mesh[1].observed.bound_events.lock().unwrap().len(), binds);
    // ... and never returns that binding for another generation.
    current.generation = ObjectGeneration(current.generation.0 + 1);
    *mesh[0].observed.stash.lock().unwrap() = Some(current);
    let error = expect_error(&mut mine, BIND_OR_GET_STASHED, "");
    assert_eq!(error.kind(), ErrorKind::InvalidOperation, "{error:?}");

    assert_eq!(
        expect_reply(&mut mine, BOUND, ""),
        Bytes::from(expected.clone())
    );
    assert_eq!(
        expect_reply(&mut mine, LOGIN, "player-2"),
        Bytes::from_static(b"bound")
    );
    let both = String::from_utf8(expect_reply(&mut mine, BOUND, "").to_vec()).unwrap();
    assert_eq!(both.split(',').count(), 2, "{both}");
    assert!(both.starts_with(&expected), "{both}");
    assert_eq!(
        expect_reply(&mut mine, NOTIFY, "player-1"),
        Bytes::from_static(b"notified")
    );
    let left = String::from_utf8(expect_reply(&mut mine, BOUND, "").to_vec()).unwrap();
    assert!(
        left.starts_with("player-2:") && !left.contains(','),
        "{left}"
    );
    assert_eq!(
        expect_reply(&mut mine, FIND, "player-1"),
        Bytes::from_static(b"none")
    );
    assert_eq!(expect_reply(&mut other, BOUND, ""), Bytes::new());
}

#[test]
fn x12_a_failed_rebind_keeps_the_existing_binding_and_its_pushes() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    mesh[2].node.create_actor("player", &id("decoy")).unwrap();
    let mut client = login(&mesh[0], "player-1");
    let good = stash(&mesh[0], &mut client, "player-1");
    let decoy = stash(&mesh[0], &mut client, "decoy");
    // A rebind with another generation, and one at a stale location.
    let mut wrong_generation = good.clone();
    wrong_generation.generation = ObjectGeneration(good.generation.0 + 1);
    let mut wrong_place = good.clone();
    wrong_place.generation = ObjectGeneration(good.generation.0 + 1);
    wrong_place.location = decoy.location;
    for (bad, kind) in [
        (wrong_generation, ErrorKind::InvalidOperation),
        (wrong_place, ErrorKind::Unavailable),
    ] {
        *mesh[0].observed.stash.lock().unwrap() = Some(bad);
        let error = expect_error(&mut client, BIND_STASHED, "");
        assert_eq!(error.kind(), kind, "{error:?}");
        assert_eq!(
            expect_reply(&mut client, FIND, "player-1"),
            Bytes::from(format!("player-1:{}", good.generation.0))
        );
        assert_eq!(
            client
                .request(PUSH, payload("player-1", "still"), WAIT)
                .unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload("player-1", "still")
            })
        );
    }
    assert_eq!(mesh[1].observed.bound_events.lock().unwrap().len(), 1);
}
