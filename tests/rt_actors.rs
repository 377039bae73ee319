//! Actors and Spots over real nodes on loopback (§1, §4, §5, §7, §11): Entry
//! and User Spots, the execution modes PerActor and SpotWide, and destroy
//! and re-create inside a Spot.

mod bound;
mod runtime_support;

use bytes::Bytes;
use runtime_support::*;
use std::time::Duration;
use zlink::api::ExecutionMode;
use zlink::api::NodeSettings;
use zlink::api::SpotHandle;
use zlink::client::{Client, ClientEvent};
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{Correlation, SpotId};

fn spot_id(name: &str) -> SpotId {
    SpotId::new(name).unwrap()
}

/// The (spot, actor) pairs of every User Spot `on_disconnect_actor`, sorted.
fn spot_disconnects(game: &Game) -> Vec<(String, String)> {
    let mut all = game.observed.spot_disconnects.lock().unwrap().clone();
    all.sort();
    all
}

fn pair(spot: &str, actor: &str) -> (String, String) {
    (spot.to_owned(), actor.to_owned())
}

#[test]
fn on_disconnect_actor_runs_on_the_current_user_spot_not_the_entry_spot() {
    // Given one session bound to an Actor of each kind of Spot: a PerActor
    // User Spot, a SpotWide User Spot, and the type's Entry Spot.
    let game = start_game(GameOptions::default());
    let hall = game.node.create_spot("hall", &spot_id("hall-1")).unwrap();
    let room = game.node.create_spot("room", &spot_id("room-1")).unwrap();
    assert_eq!(hall.mode(), ExecutionMode::PerActor);
    assert_eq!(room.mode(), ExecutionMode::SpotWide);
    let npc = room.id().actor_id("npc").unwrap();
    game.node
        .create_actor_in(&hall, "player", &id("guest"))
        .unwrap();
    game.node.create_actor_in(&room, "player", &npc).unwrap();
    game.node.create_actor("player", &id("lobbyist")).unwrap();
    let mut client = game.client();
    for actor in ["guest", npc.as_str(), "lobbyist"] {
        assert_eq!(expect_reply(&mut client, LOGIN, actor), "bound");
    }

    // When the connection ends.
    drop(client);

    // Then each Actor's own current Spot is told, once, and the Entry Spot
    // only about the Actor that belongs to it.
    assert_eq!(
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        "lobbyist"
    );
    wait_until("both User Spots were told", || {
        spot_disconnects(&game).len() == 2
    });
    assert_eq!(
        spot_disconnects(&game),
        vec![pair("hall-1", "guest"), pair("room-1", "room-1/npc")]
    );
    assert_eq!(*game.observed.disconnects.lock().unwrap(), vec!["lobbyist"]);
}

#[test]
fn user_spot_membership_is_unchanged_by_disconnect_notifications() {
    let game = start_game(GameOptions::default());
    let hall = game.node.create_spot("hall", &spot_id("hall-1")).unwrap();
    let other = game.node.create_spot("hall", &spot_id("hall-2")).unwrap();
    game.node
        .create_actor_in(&hall, "player", &id("guest"))
        .unwrap();
    wait_until("the node counts its actor", || game.node.actor_count() == 1);

    // A NotifyDisconnected, then a physical disconnect of another binding.
    let mut client = login(&game, "guest");
    assert_eq!(expect_reply(&mut client, NOTIFY, "guest"), "notified");
    assert_eq!(expect_reply(&mut client, LOGIN, "guest"), "bound");
    drop(client);
    wait_until("both notifications reached the Spot", || {
        spot_disconnects(&game).len() == 2
    });

    // The Actor still exists and is still a member of hall-1 alone: a third
    // notification goes to hall-1 again, never to the Entry Spot, and it
    // cannot be created into another Spot.
    assert_eq!(game.node.actor_count(), 1);
    let mut client = login(&game, "guest");
    assert_eq!(expect_reply(&mut client, NOTIFY, "guest"), "notified");
    assert_eq!(spot_disconnects(&game), vec![pair("hall-1", "guest"); 3]);
    assert!(game.observed.disconnects.lock().unwrap().is_empty());
    let moved = game.node.create_actor_in(&other, "player", &id("guest"));
    assert_eq!(moved.unwrap_err().reason(), Reason::ActorInOtherSpot);
    assert!(game
        .node
        .create_actor_in(&hall, "player", &id("guest"))
        .is_ok());
    assert_eq!(game.node.actor_count(), 1);
}

#[test]
fn user_spots_refuse_what_they_cannot_do_with_typed_errors() {
    let game = start_game(GameOptions::default());
    let room = game.node.create_spot("room", &spot_id("room-1")).unwrap();
    // Creating a Spot again with its kind is the same Spot.
    let again = game.node.create_spot("room", &spot_id("room-1")).unwrap();
    assert_eq!(again.id(), room.id());
    wait_until("the node counts its Spot", || game.node.spot_count() == 1);

    let no_kind = game.node.create_spot("arena", &spot_id("a-1")).unwrap_err();
    assert_eq!(
        (no_kind.kind(), no_kind.reason()),
        (ErrorKind::NotFound, Reason::NoSpotKind)
    );
    let taken = game
        .node
        .create_spot("hall", &spot_id("room-1"))
        .unwrap_err();
    assert_eq!(
        (taken.kind(), taken.reason()),
        (ErrorKind::InvalidOperation, Reason::SpotIdInUse)
    );
    // §5: a SpotWide Spot's Actors are placed with it, by name.
    let stray = game
        .node
        .create_actor_in(&room, "player", &id("stray"))
        .unwrap_err();
    assert_eq!(
        (stray.kind(), stray.reason()),
        (ErrorKind::InvalidOperation, Reason::NotPlacedWithSpot)
    );
    // §1: an Actor already in the Entry Spot does not join a User Spot.
    let lobbyist = room.id().actor_id("lobbyist").unwrap();
    game.node.create_actor("player", &lobbyist).unwrap();
    let joined = game
        .node
        .create_actor_in(&room, "player", &lobbyist)
        .unwrap_err();
    assert_eq!(joined.reason(), Reason::ActorInOtherSpot);
    let unknown = game
        .node
        .create_actor_in(&room, "no-such-type", &room.id().actor_id("x").unwrap())
        .unwrap_err();
    assert_eq!(unknown.reason(), Reason::NoActorFactory);
    assert_eq!(game.node.spot_count(), 1);
}

/// Pipelines `rounds` WORK requests to `actor` and returns their
/// correlations.
fn start_work(client: &mut Client, actor: &str, rounds: usize) -> Vec<Correlation> {
    (0..rounds)
        .map(|i| {
            client
                .start_request(WORK, payload(actor, &i.to_string()))
                .unwrap()
        })
        .collect()
}

fn finish_work(client: &mut Client, actor: &str, started: Vec<Correlation>) {
    for (i, correlation) in started.into_iter().enumerate() {
        assert_eq!(
            client.wait_reply(correlation, WAIT).unwrap(),
            Ok(payload(actor, &i.to_string()))
        );
    }
}

#[test]
fn spotwide_actors_never_run_handlers_concurrently_and_keep_arrival_order() {
    // Given a SpotWide room with six Actors, on a node with two shards, and
    // sessions on both shards, each Actor created into the room from its
    // session.
    let game = start_game(GameOptions {
        shards: 2,
        ..GameOptions::default()
    });
    let room = room(&game, "room-1");
    let names: Vec<String> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|n| room.id().actor_id(n).unwrap().to_string())
        .collect();
    let mut clients: Vec<Client> = names[..4]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut client = client_on(&game, u16::try_from(i % 2).unwrap());
            assert_eq!(expect_reply(&mut client, ENTER, name), "bound");
            client
        })
        .collect();
    // One more session, bound to the other two, sends to both alternately.
    let mut both = client_on(&game, 1);
    for name in &names[4..] {
        assert_eq!(expect_reply(&mut both, ENTER, name), "bound");
    }
    wait_until("the node counts its actors", || {
        game.node.actor_count() == 6
    });

    // When every session sends at once.
    let rounds = 40;
    let started: Vec<_> = clients
        .iter_mut()
        .zip(&names)
        .map(|(client, name)| start_work(client, name, rounds))
        .collect();
    let alternating: Vec<(String, Correlation)> = (0..rounds)
        .map(|i| {
            let name = &names[4 + i % 2];
            let data = format!("in-order-{i}");
            let correlation = both.start_request(WORK, payload(name, &data)).unwrap();
            (
                payload(name, &data).iter().map(|&b| b as char).collect(),
                correlation,
            )
        })
        .collect();
    for ((client, name), started) in clients.iter_mut().zip(&names).zip(started) {
        finish_work(client, name, started);
    }
    for (sent, correlation) in &alternating {
        let reply = both.wait_reply(*correlation, WAIT).unwrap().unwrap();
        assert_eq!(reply, Bytes::from(sent.clone()));
    }

    // Then no two handlers of the room's Actors ever ran at once, and the
    // two-Actor session's messages ran in the order they arrived.
    assert_eq!(
        game.observed
            .turns_overlap_max
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let delivered = game.observed.delivered.lock().unwrap().clone();
    let in_order: Vec<Bytes> = delivered
        .into_iter()
        .filter(|p| p.windows(9).any(|w| w == b"in-order-"))
        .collect();
    let sent: Vec<Bytes> = alternating
        .iter()
        .map(|(sent, _)| Bytes::from(sent.clone()))
        .collect();
    assert_eq!(in_order, sent);
}

#[test]
fn per_actor_actors_run_independently_a_busy_one_blocks_no_other() {
    // Given two PerActor Actors of one hall on different shards, and a
    // session on each Actor's shard.
    let game = start_game(GameOptions {
        shards: 2,
        ..GameOptions::default()
    });
    let hall = game.node.create_spot("hall", &spot_id("hall-1")).unwrap();
    let busy = actor_on("busy", 0, 2);
    let free = actor_on("free", 1, 2);
    for name in [&busy, &free] {
        game.node
            .create_actor_in(&hall, "player", &id(name))
            .unwrap();
    }
    let mut holder = login_on(&game, &busy, 1);
    let mut other = login_on(&game, &free, 1);

    // When one Actor's handler blocks until released.
    let held = game.observed.held_receiver();
    let hold = holder.start_request(HOLD, payload(&busy, "busy")).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");

    // Then the other Actor answers meanwhile: its handler ran while the
    // first one's was still running.
    assert_eq!(
        expect_reply(&mut other, RELAY, &format!("{free}:meanwhile")),
        payload(&free, "meanwhile")
    );
    assert_eq!(
        game.observed
            .turns_overlap_max
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    game.observed.release();
    assert_eq!(
        holder.wait_reply(hold, WAIT).unwrap(),
        Ok(payload(&busy, "busy"))
    );
}

#[test]
fn a_destroyed_spotwide_actor_is_recreated_in_its_spot_with_a_new_incarnation() {
    let game = start_game(GameOptions::default());
    let room = game.node.create_spot("room", &spot_id("room-1")).unwrap();
    let a = room.id().actor_id("a").unwrap();
    let old = game.node.create_actor_in(&room, "player", &a).unwrap();
    let mut client = login(&game, a.as_str());
    assert_eq!(expect_reply(&mut client, COUNT, a.as_str()), "1");

    game.node.destroy_actor(&a).unwrap();
    wait_until("the node forgot the actor", || game.node.actor_count() == 0);
    let new = game.node.create_actor_in(&room, "player", &a).unwrap();
    assert!(new.generation > old.generation, "{old:?} then {new:?}");

    // The old binding is refused as a stale binding fence (§4, §12), and
    // its relay never reaches the new incarnation.
    let error = expect_error(&mut client, COUNT, a.as_str());
    assert_eq!(
        (error.kind(), error.reason()),
        (ErrorKind::Unavailable, Reason::StaleBinding)
    );
    let mut fresh = login(&game, a.as_str());
    assert_eq!(expect_reply(&mut fresh, COUNT, a.as_str()), "1");
    // It is still the room's: its disconnect goes to the room.
    drop(fresh);
    wait_until("the room was told", || !spot_disconnects(&game).is_empty());
    assert_eq!(spot_disconnects(&game), vec![pair("room-1", a.as_str())]);
}

#[test]
fn a_lane_bound_the_engine_cannot_hold_fails_startup() {
    for settings in [
        zlink::api::NodeSettings {
            spot_queue_max: 0,
            ..zlink::api::NodeSettings::default()
        },
        zlink::api::NodeSettings {
            actor_queue_max: usize::MAX,
            ..zlink::api::NodeSettings::default()
        },
    ] {
        let started = zlink::api::NodeBuilder::new(1)
            .object_role(zlink::api::ObjectRole::Server)
            .location_store(new_store())
            .enable_actor_dispatch()
            .settings(settings)
            .start();
        let error = started.unwrap_err();
        assert!(
            matches!(error, zlink::api::StartError::Invalid(_)),
            "{error}"
        );
        assert_eq!(error.error().kind(), ErrorKind::Configuration);
    }
}

/// A SpotWide room "room-1" on a node with two shards, its Actors `a` and
/// `b` each bound from a session on its own shard.
fn room_with_two_members() -> (Game, SpotHandle, Client, Client) {
    let game = start_game(GameOptions {
        shards: 2,
        ..GameOptions::default()
    });
    let room = room(&game, "room-1");
    let mut a = client_on(&game, 0);
    assert_eq!(expect_reply(&mut a, ENTER, "room-1/a"), "bound");
    let mut b = client_on(&game, 1);
    assert_eq!(expect_reply(&mut b, ENTER, "room-1/b"), "bound");
    (game, room, a, b)
}

fn pushed(data: &str) -> Option<ClientEvent> {
    Some(ClientEvent::Push {
        key: PUSHED,
        payload: Bytes::from(data.to_owned()),
    })
}

#[test]
fn push_to_member_goes_to_the_members_own_current_binding() {
    // Given SpotWide members a and b, each bound from its own session.
    let (game, _room, mut a, mut b) = room_with_two_members();

    // When a's handler pushes on behalf of b, then on its own.
    let tick = "room-1/a:room-1/b:tick";
    assert_eq!(expect_reply(&mut a, PUSH_MEMBER, tick), "pushed");
    assert_eq!(expect_reply(&mut a, PUSH, "room-1/a:own"), "pushed");

    // Then b's session got the member push, and a's session only a's own.
    assert_eq!(b.next_event(WAIT).unwrap(), pushed(tick));
    assert_eq!(a.next_event(WAIT).unwrap(), pushed("room-1/a:own"));

    // When b binds again from a new session (§6: the old one is replaced),
    // a push on behalf of b follows b's current binding, judged as b's own
    // push would be: the new session gets it, the old never does.
    let mut b_again = client_on(&game, 0);
    assert_eq!(expect_reply(&mut b_again, ENTER, "room-1/b"), "bound");
    let after = "room-1/a:room-1/b:after";
    assert_eq!(expect_reply(&mut a, PUSH_MEMBER, after), "pushed");
    assert_eq!(b_again.next_event(WAIT).unwrap(), pushed(after));
    loop {
        match b.next_event(WAIT).unwrap() {
            Some(ClientEvent::Push { key, .. }) if key == REPLACED_NOTICE => {}
            Some(ClientEvent::Closed(_)) => break,
            other => panic!("the replaced session saw {other:?}"),
        }
    }
}

#[test]
fn push_to_member_outside_the_spot_or_without_a_binding_ends_with_a_typed_error() {
    let (game, room, mut a, _b) = room_with_two_members();
    // A member with no bound session: session-not-bound (§12), as b's own
    // push would end.
    let c = room.id().actor_id("c").unwrap();
    game.node.create_actor_in(&room, "player", &c).unwrap();
    let unbound = expect_error(&mut a, PUSH_MEMBER, "room-1/a:room-1/c:x");
    assert_eq!(
        (unbound.kind(), unbound.reason()),
        (ErrorKind::InvalidOperation, Reason::SessionNotBound)
    );
    // Not a proxy to an arbitrary session (§5): an Actor of the Entry Spot,
    // a member of another SpotWide room, and an ActorId nobody hosts.
    let other = game.node.create_spot("room", &spot_id("room-2")).unwrap();
    let d = other.id().actor_id("d").unwrap();
    game.node.create_actor_in(&other, "player", &d).unwrap();
    let mut lobbyist = login(&game, "lobbyist");
    for outside in ["lobbyist", "room-2/d", "nobody"] {
        let refused = expect_error(&mut a, PUSH_MEMBER, &format!("room-1/a:{outside}:x"));
        assert_eq!(
            (refused.kind(), refused.reason()),
            (ErrorKind::InvalidOperation, Reason::ActorInOtherSpot),
            "a push to {outside}"
        );
    }
    // And an Actor in no SpotWide Spot has no members to push for.
    let refused = expect_error(&mut lobbyist, PUSH_MEMBER, "lobbyist:room-1/a:x");
    assert_eq!(
        (refused.kind(), refused.reason()),
        (ErrorKind::InvalidOperation, Reason::ActorInOtherSpot)
    );
    // None of them reached a session: a's next event is its own push.
    assert_eq!(expect_reply(&mut a, PUSH, "room-1/a:own"), "pushed");
    assert_eq!(a.next_event(WAIT).unwrap(), pushed("room-1/a:own"));
}

/// docs/operations.md "Shard stalls": a handler that blocks its shard's
/// thread past `stall_warn` stalls every session and Actor of that shard;
/// the node counts it (`shard_stalled`, and logs the phases), so an
/// operator sees which node and shard a blocking handler holds up.
#[test]
fn a_handler_that_blocks_its_shard_past_stall_warn_is_counted_as_a_stall() {
    use zlink::core::trace::FlowTrace;
    const STALL_WARN: Duration = Duration::from_millis(200);
    // Given a node that counts a loop turn of 200 ms or more as a stall,
    let game = start_game(GameOptions {
        settings: Some(NodeSettings {
            pin_cores: false,
            stall_warn: STALL_WARN,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    });
    let mut client = login(&game, "slow");
    let stalls = || game.node.flow_counters().get(FlowTrace::ShardStalled);
    let before = stalls();
    // when the player's handler blocks the shard's thread for longer,
    let held = game.observed.held_receiver();
    let hold = client.start_request(HOLD, payload("slow", "held")).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
    // (the block itself: the stimulus, not a wait for an outcome)
    std::thread::sleep(STALL_WARN + Duration::from_millis(100));
    game.observed.release();
    assert_eq!(
        client.wait_reply(hold, WAIT).unwrap(),
        Ok(payload("slow", "held"))
    );
    // then that turn is counted as a stall of the shard.
    wait_until("the blocked turn is counted as a stall", || {
        stalls() > before
    });
}
