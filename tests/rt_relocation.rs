//! Live Actor relocation over real sockets (§8, §8.1, §9; CONTRACT L1–L7):
//! a bound Actor moves between nodes of a loopback mesh while its client
//! stays connected to the node it connected to.

mod runtime_support;

use std::thread;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::RelocateTo;
use zlink::client::ClientEvent;
use zlink::error::{ErrorKind, Reason};

/// Waits until the Actor is hosted by `to` and no longer by `from` (the
/// counts are published at the end of each shard loop turn).
fn wait_moved(from: &Game, to: &Game) {
    wait_until("the actor moved", || {
        from.node.actor_count() == 0 && to.node.actor_count() == 1
    });
}

shard_matrix! {
    fn l1_relocated_actor_keeps_the_connection_and_serves_relays_on_the_target(shards: usize) {
        let mesh = start_mesh(
            3,
            GameOptions {
                shards,
                ..GameOptions::default()
            },
        );
        let player = actor_on("player-1", actor_shard(shards, false), shards);
        mesh[1].node.create_actor("player", &id(&player)).unwrap();
        let mut client = login_on(&mesh[0], &player, session_shard(shards));
        assert_eq!(
            client.request(RELAY, payload(&player, "before"), WAIT).unwrap(),
            payload(&player, "before")
        );
        let identity = client.request(FIND, Bytes::from(player.clone()), WAIT).unwrap();
        client.request(LOCATE, Bytes::from(player.clone()), WAIT).unwrap();

        // When the actor's node moves it to node 3.
        mesh[1].node.relocate(&id(&player), RelocateTo::Node(3)).unwrap();
        wait_moved(&mesh[1], &mesh[2]);

        // Then relay over the same connection is processed on the target,
        // with the state the actor had (COUNT counts every handled message).
        assert_eq!(
            client.request(RELAY, payload(&player, "after"), WAIT).unwrap(),
            payload(&player, "after")
        );
        assert_eq!(
            client.request(COUNT, payload(&player, "count"), WAIT).unwrap(),
            Bytes::from_static(b"3")
        );
        let on_target = mesh[2].observed.delivered.lock().unwrap().clone();
        assert_eq!(
            on_target,
            vec![payload(&player, "after"), payload(&player, "count")]
        );
        assert_eq!(mesh[1].observed.delivered.lock().unwrap().len(), 1);
        // ActorId and ObjectGeneration are kept; the location snapshot changed.
        assert_eq!(
            client.request(FIND, Bytes::from(player.clone()), WAIT).unwrap(),
            identity
        );
        client.request(LOCATE, Bytes::from(player.clone()), WAIT).unwrap();
        let locations = mesh[0].observed.locations.lock().unwrap().clone();
        assert_eq!(locations.len(), 2);
        assert_ne!(locations[0], locations[1], "the snapshot names the target");
        // A push from the moved actor reaches the client (§5 judged on the
        // session owner against the target's generations).
        assert_eq!(
            client.request(PUSH, payload(&player, "tick"), WAIT).unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload(&player, "tick")
            })
        );
        assert!(!client.is_closed());
        // No disconnect callback ran for the move (§8.1).
        assert!(mesh[1].observed.disconnects.lock().unwrap().is_empty());
        assert!(mesh[2].observed.disconnects.lock().unwrap().is_empty());
    }
}

#[test]
fn l2_messages_relayed_during_the_move_are_processed_once_on_the_target() {
    let mesh = start_mesh(3, GameOptions::default());
    let player = "player-1";
    mesh[1].node.create_actor("player", &id(player)).unwrap();
    let mut client = login(&mesh[0], player);
    let held = mesh[1].observed.held_receiver();

    // Given the actor's node busy in a handler, with requests queued
    // behind it, when a relocation is asked for meanwhile.
    let hold = client.start_request(HOLD, payload(player, "hold")).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
    let early: Vec<_> = (0..20)
        .map(|i| {
            let data = format!("early-{i}");
            client.start_request(RELAY, payload(player, &data)).unwrap()
        })
        .collect();
    let source = &mesh[1].node;
    let late = thread::scope(|scope| {
        let mover = scope.spawn(|| source.relocate(&id(player), RelocateTo::Node(3)));
        mesh[1].observed.release();
        // And more requests while the move runs.
        let late: Vec<_> = (0..20)
            .map(|i| {
                let data = format!("late-{i}");
                client.start_request(RELAY, payload(player, &data)).unwrap()
            })
            .collect();
        mover.join().unwrap().unwrap();
        late
    });
    // Then every request got its reply, each message was processed exactly
    // once in all (at the source before capture or on the target), in the
    // connection's order, and the count continued across the move.
    assert!(client.wait_reply(hold, WAIT).unwrap().is_ok());
    for (i, c) in early.into_iter().enumerate() {
        let reply = client.wait_reply(c, WAIT).unwrap().unwrap();
        assert_eq!(reply, payload(player, &format!("early-{i}")));
    }
    for (i, c) in late.into_iter().enumerate() {
        let reply = client.wait_reply(c, WAIT).unwrap().unwrap();
        assert_eq!(reply, payload(player, &format!("late-{i}")));
    }
    let mut processed = mesh[1].observed.delivered.lock().unwrap().clone();
    let on_target = mesh[2].observed.delivered.lock().unwrap().clone();
    assert!(
        !on_target.is_empty(),
        "the later messages ran on the target"
    );
    processed.extend(on_target);
    let expected: Vec<Bytes> = std::iter::once(payload(player, "hold"))
        .chain((0..20).map(|i| payload(player, &format!("early-{i}"))))
        .chain((0..20).map(|i| payload(player, &format!("late-{i}"))))
        .collect();
    assert_eq!(
        processed, expected,
        "exactly once, in the connection's order"
    );
    assert_eq!(
        client
            .request(COUNT, payload(player, "count"), WAIT)
            .unwrap(),
        Bytes::from("42")
    );
}

#[test]
fn a_type_without_a_snapshot_or_a_user_spot_member_is_not_relocatable_and_stays() {
    let mesh = start_mesh(2, GameOptions::default());
    let hall = mesh[0]
        .node
        .create_spot("hall", &zlink::ids::SpotId::new("hall-1").unwrap())
        .unwrap();
    mesh[0]
        .node
        .create_actor_in(&hall, "player", &id("member"))
        .unwrap();
    let refused = mesh[0]
        .node
        .relocate(&id("member"), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(
        (refused.kind(), refused.reason()),
        (ErrorKind::InvalidOperation, Reason::NotRelocatable)
    );
    // A hint that names no linked peer is refused, and so is a move of an
    // actor this node does not host.
    mesh[0].node.create_actor("player", &id("solo")).unwrap();
    let refused = mesh[0]
        .node
        .relocate(&id("solo"), RelocateTo::Node(9))
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::RelocationTargetInvalid);
    let refused = mesh[1]
        .node
        .relocate(&id("solo"), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    assert_eq!(mesh[0].node.actor_count(), 2);
}
