//! Fences and generations (§4, §5, §6, §12) over real nodes on loopback.

mod runtime_support;

use std::time::Duration;

use bytes::Bytes;
use runtime_support::*;
use zlink::client::{Client, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{AuthorityOwnerGeneration, NodeGeneration};
use zlink::store::LocationStore;
use zlink::wire::node::Command;

fn stash(game: &Game, client: &mut Client, actor: &str) -> zlink::ids::ActorRef {
    assert_eq!(
        expect_reply(client, STASH, actor),
        Bytes::from_static(b"stashed")
    );
    game.observed.stash.lock().unwrap().clone().unwrap()
}

#[test]
fn x3_a_push_that_is_not_current_is_refused_and_counted() {
    let store = new_store();
    let two = start_node(2, store.clone(), GameOptions::default(), &[]);
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(1, store, GameOptions::default(), &[(2, tap.addr)]);
    assert!(one.node.wait_linked(2, WAIT));
    two.node.create_actor("player", &id("x")).unwrap();
    let push = Command::BoundSessionSend.code();
    let mut client = login(&one, "x");
    tap.set(Direction::ToDialer, push, TapAction::Keep);
    assert_eq!(
        client.request(PUSH, payload("x", "once"), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("x", "once")
        })
    );
    tap.set(Direction::ToDialer, push, TapAction::Forward);
    // The binding that push belonged to ends; a new one takes its place.
    assert_eq!(
        expect_reply(&mut client, NOTIFY, "x"),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        expect_reply(&mut client, LOGIN, "x"),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        one.node
            .flow_counters()
            .get(FlowTrace::PushRejectedNotCurrent),
        0
    );
    // The old push arrives again, late.
    assert_eq!(tap.replay(), 1);
    wait_counter(&one, FlowTrace::PushRejectedNotCurrent, 1);
    assert_eq!(client.next_event(Duration::from_millis(200)).unwrap(), None);
}

#[test]
fn x5_no_actor_factory_is_not_found() {
    let mesh = start_mesh(2, GameOptions::default());
    let error = mesh[1]
        .node
        .create_actor("no-such-type", &id("player-1"))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert_eq!(error.reason(), Reason::NoActorFactory);
    let mut client = mesh[0].client();
    let error = expect_error(&mut client, STASH, "no-such-type/player-1");
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error:?}");
    assert_eq!(error.reason(), Reason::NoActorFactory);
}

#[test]
fn x5_a_stale_fence_is_unavailable_without_fallback() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = mesh[0].client();
    let good = stash(&mesh[0], &mut client, "player-1");
    let mut old_authority = good.clone();
    old_authority.location.authority = AuthorityOwnerGeneration(good.location.authority.0 - 1);
    let mut old_node = good.clone();
    old_node.location.node_generation = NodeGeneration(good.location.node_generation.0 - 1);
    for (stale, reason) in [
        (old_authority, Reason::StaleAuthority),
        (old_node, Reason::StaleNodeGeneration),
    ] {
        *mesh[0].observed.stash.lock().unwrap() = Some(stale);
        let before = mesh[0].store.counts().row_operations();
        let error = expect_error(&mut client, BIND_STASHED, "");
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
        assert_eq!(error.reason(), reason);
        assert_eq!(mesh[0].store.counts().row_operations(), before);
    }
    for game in &mesh {
        assert!(game.observed.bound_events.lock().unwrap().is_empty());
    }
    assert_eq!(expect_reply(&mut client, BOUND, ""), Bytes::new());
}

fn bind_from_store(game: &Game, client: &mut Client, actor: &str) {
    let row = game.store.lookup(&id(actor)).unwrap().expect("a live row");
    *game.observed.stash.lock().unwrap() = Some(row.actor_ref());
    assert_eq!(
        expect_reply(client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
}

#[test]
fn x19_after_a_session_owner_restart_a_smaller_binding_generation_is_accepted() {
    let store = new_store();
    let actors = start_node(2, store.clone(), GameOptions::default(), &[]);
    for name in ["a", "b", "c", "d", "x"] {
        actors.node.create_actor("player", &id(name)).unwrap();
    }
    let sessions = |generation| GameOptions {
        client_role: true,
        node_generation: Some(generation),
        ..GameOptions::default()
    };
    let first = start_node(
        1,
        store.clone(),
        sessions(100),
        &[(2, actors.node.peer_addr().unwrap())],
    );
    assert!(first.node.wait_linked(2, WAIT));
    let mut client = first.client();
    // x gets the fifth binding generation of that lifecycle.
    for name in ["a", "b", "c", "d", "x"] {
        bind_from_store(&first, &mut client, name);
    }
    first.node.shutdown();
    drop(client);

    let second = start_node(
        1,
        store,
        sessions(200),
        &[(2, actors.node.peer_addr().unwrap())],
    );
    assert!(second.node.wait_linked(2, WAIT));
    assert!(actors.node.wait_linked(1, WAIT));
    let mut client = second.client();
    // The first binding generation of the new lifecycle.
    bind_from_store(&second, &mut client, "x");
    assert_eq!(
        client.request(PUSH, payload("x", "tick"), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("x", "tick")
        })
    );
}

#[test]
fn x6_recreated_actor_never_revalidates_the_old_binding() {
    let mesh = start_mesh(2, GameOptions::default());
    let old = mesh[1].node.create_actor("player", &id("x")).unwrap();
    let mut client = login(&mesh[0], "x");
    assert_eq!(
        expect_reply(&mut client, RELAY, "x:before"),
        payload("x", "before")
    );

    mesh[1].node.destroy_actor(&id("x")).unwrap();
    assert_eq!(mesh[0].store.lookup(&id("x")).unwrap(), None);
    let new = mesh[1].node.create_actor("player", &id("x")).unwrap();
    assert!(new.generation > old.generation, "{old:?} then {new:?}");

    // The old binding's token is refused at the Actor owner as stale: it
    // never reaches the new incarnation's handler.
    let delivered = mesh[1].observed.delivered.lock().unwrap().len();
    let error = expect_error(&mut client, RELAY, "x:late");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::StaleBinding);
    assert_eq!(mesh[1].observed.delivered.lock().unwrap().len(), delivered);

    // A late disconnect notification for the old binding runs no Spot
    // callback of the new incarnation, and its tombstone is refused.
    let _ = client.request(NOTIFY, Bytes::from_static(b"x"), WAIT);
    drop(client);
    wait_counter(&mesh[1], FlowTrace::TombstoneStale, 1);
    assert!(mesh[1].observed.disconnects.lock().unwrap().is_empty());

    // A fresh bind reaches the new incarnation, which has handled nothing.
    let mut client = login(&mesh[0], "x");
    assert_eq!(expect_reply(&mut client, COUNT, "x"), Bytes::from("1"));
    assert!(mesh[1].node.destroy_actor(&id("nobody")).is_err());
}
