//! A SpotWide Spot moves as one unit, its phases decided in the core
//! (issue 19 item 2; src/core/relocation/spot_move.rs; docs/relocation.md
//! "Spots"): its lane is move-sealed for the whole move, its Actors move one
//! after the other in ActorId order (a member whose turn awaits is parked, a
//! member destroyed meanwhile is skipped), the first failure ends the move
//! and reopens the lane, and each member's `Finished` stays inside the core.

mod common;

use common::one_shard;
use zlink::core::actor::{ActorLane, HostedSpot, InstanceSlot, Placement};
use zlink::core::lane::{LaneEngine, LaneId, SpotLane};
use zlink::core::relocation::RelocationEvent;
use zlink::core::session::SessionOwnerConfig;
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::CoreEvent;
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, AuthorityOwnerGeneration, NodeRid, ObjectGeneration, SpotId};
use zlink::sim::actor_id;

const NOW: Instant = Instant::ZERO;
const TARGET: NodeRid = NodeRid(2);

/// A shard hosting SpotWide Spot `room-1` with `members`, and a PerActor
/// Spot `lobby` with one Actor.
fn with_spot(members: &[&str]) -> (ShardCore, SpotId, LaneId) {
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes: LaneEngine<SpotLane, ()> = LaneEngine::new();
    let room = SpotId::new("room-1").unwrap();
    let gate = lanes.add_lane(8);
    let spot = |lane| HostedSpot {
        kind: "room".into(),
        lane,
        slot: InstanceSlot(0),
    };
    core.actors(NOW).host_spot(room.clone(), spot(Some(gate)));
    let lobby = SpotId::new("lobby").unwrap();
    core.actors(NOW).host_spot(lobby.clone(), spot(None));
    let own = lanes.add_lane(8);
    let mut host = |name: &str, spot: &SpotId, lane| {
        let placement = Placement {
            actor_type: "player".into(),
            user_spot: Some(spot.clone()),
            lane,
            slot: InstanceSlot(0),
        };
        core.actors(NOW)
            .host_placed(
                actor_id(name),
                ObjectGeneration(1),
                AuthorityOwnerGeneration(1),
                placement,
            )
            .unwrap();
    };
    for name in members {
        host(name, &room, ActorLane::Spot(gate));
    }
    host("lobby/x", &lobby, ActorLane::Own(own));
    (core, room, gate)
}

fn relocations(core: &mut ShardCore) -> Vec<RelocationEvent> {
    let mut events = Vec::new();
    while let Some(event) = core.poll_event() {
        if let CoreEvent::Relocation(event) = event {
            events.push(event);
        }
    }
    events
}

fn captured_actor(event: &RelocationEvent) -> Option<&ActorId> {
    match event {
        RelocationEvent::Capture { actor, .. } => Some(actor),
        _ => None,
    }
}

#[test]
fn core_a_spot_move_seals_its_lane_and_moves_its_members_one_at_a_time_in_order() {
    let (mut core, room, gate) = with_spot(&["room-1/b", "room-1/a"]);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    let events = relocations(&mut core);
    assert!(
        matches!(&events[0], RelocationEvent::SpotSealed { spot, lane } if *spot == room && *lane == gate),
        "{events:?}"
    );
    // One member at a time: only the first in ActorId order is captured.
    let captured: Vec<_> = events.iter().filter_map(captured_actor).collect();
    assert_eq!(captured, [&actor_id("room-1/a")]);
    let RelocationEvent::Capture { relocation, .. } = &events[1] else {
        panic!("{events:?}");
    };
    assert!(core.relocation().moves_with_spot(*relocation));
    assert!(core.relocation().spot_moving(&room));
    let again = core.relocations(NOW).relocate_spot(&room, TARGET);
    assert_eq!(again.unwrap_err().reason(), Reason::RelocationSealed);

    // The first member cannot be captured: its move ends, and with it the
    // Spot's, whose lane reopens with both Actors still here. The member's
    // own Finished stays inside the core.
    let refused = Err(Error::new(Reason::NotRelocatable));
    core.relocations(NOW).captured(*relocation, refused);
    let events = relocations(&mut core);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RelocationEvent::Finished { .. })),
        "{events:?}"
    );
    let finished = events.iter().find_map(|e| match e {
        RelocationEvent::SpotFinished {
            spot,
            outcome,
            gone,
        } if *spot == room => Some((outcome.clone().map_err(|e| e.reason()), gone.is_some())),
        _ => None,
    });
    assert_eq!(finished, Some((Err(Reason::NotRelocatable), false)));
    assert!(!core.relocation().spot_moving(&room));
    assert_eq!(core.actor_owner().spot_members(&room).len(), 2);
}

#[test]
fn core_a_spot_member_whose_turn_awaits_is_parked_and_one_destroyed_meanwhile_is_skipped() {
    let (mut core, room, _) = with_spot(&["room-1/a", "room-1/b"]);
    let (a, b) = (actor_id("room-1/a"), actor_id("room-1/b"));
    core.actors(NOW).turn_suspended(&a);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    let events = relocations(&mut core);
    assert!(
        events.iter().all(|e| captured_actor(e).is_none()),
        "{events:?}"
    );
    assert_eq!(core.relocation().parked_moves(), 1);

    // a is destroyed while its move waits; its turn ends (the runtime ends
    // an awaiting turn first at a destroy): a is skipped, b moves next.
    core.actors(NOW).destroy(&a).unwrap();
    core.turn_ended(NOW, &a);
    let events = relocations(&mut core);
    let captured: Vec<_> = events.iter().filter_map(captured_actor).collect();
    assert_eq!(captured, [&b], "{events:?}");
    assert!(core.relocation().spot_moving(&room));
}

#[test]
fn core_only_a_spotwide_spot_with_actors_here_moves() {
    let (mut core, room, _) = with_spot(&[]);
    let lobby = SpotId::new("lobby").unwrap();
    let nowhere = SpotId::new("nowhere").unwrap();
    let me = NodeRid(1);
    let reason = |core: &mut ShardCore, spot: &SpotId, to| {
        core.relocations(NOW)
            .relocate_spot(spot, to)
            .unwrap_err()
            .reason()
    };
    assert_eq!(reason(&mut core, &room, TARGET), Reason::NotRelocatable);
    assert_eq!(reason(&mut core, &lobby, TARGET), Reason::NotRelocatable);
    assert_eq!(reason(&mut core, &nowhere, TARGET), Reason::StaleLocation);
    let (mut core, room, _) = with_spot(&["room-1/a"]);
    assert_eq!(
        reason(&mut core, &room, me),
        Reason::RelocationTargetInvalid
    );
    assert!(relocations(&mut core).is_empty(), "nothing sealed");
}

/// The SpotFinished of `room` among `events`, with its error's reason.
fn spot_finished(events: &[RelocationEvent], room: &SpotId) -> Option<Result<(), Reason>> {
    events.iter().find_map(|e| match e {
        RelocationEvent::SpotFinished { spot, outcome, .. } if spot == room => {
            Some(outcome.clone().map_err(|e| e.reason()))
        }
        _ => None,
    })
}

#[test]
fn core_a_spot_move_skips_a_member_being_destroyed_and_ends_at_one_moving_alone() {
    // a's turn awaits, so the Spot's move waits on a; meanwhile b's destroy
    // begins (its row removal is with the store). a is then destroyed: the
    // move skips a and b, and c moves.
    let (mut core, room, _) = with_spot(&["room-1/a", "room-1/b", "room-1/c"]);
    let (a, b, c) = (
        actor_id("room-1/a"),
        actor_id("room-1/b"),
        actor_id("room-1/c"),
    );
    core.actors(NOW).turn_suspended(&a);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    relocations(&mut core);
    core.actors(NOW).begin_destroy(&b).unwrap();
    core.actors(NOW).destroy(&a).unwrap();
    core.turn_ended(NOW, &a);
    let events = relocations(&mut core);
    let captured: Vec<_> = events.iter().filter_map(captured_actor).collect();
    assert_eq!(captured, [&c], "{events:?}");
    assert_eq!(spot_finished(&events, &room), None, "{events:?}");

    // The same, but b is moving alone when its turn comes: the Spot's move
    // ends there with b's refusal, and c stays.
    let (mut core, room, _) = with_spot(&["room-1/a", "room-1/b", "room-1/c"]);
    core.actors(NOW).turn_suspended(&a);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    core.relocations(NOW).relocate(&b, TARGET).unwrap();
    relocations(&mut core);
    core.actors(NOW).destroy(&a).unwrap();
    core.turn_ended(NOW, &a);
    let events = relocations(&mut core);
    assert!(
        events.iter().all(|e| captured_actor(e).is_none()),
        "{events:?}"
    );
    assert_eq!(
        spot_finished(&events, &room),
        Some(Err(Reason::RelocationSealed))
    );
    assert!(!core.relocation().spot_moving(&room));
}

#[test]
fn core_a_spot_member_still_hosted_whose_parked_move_ends_stale_ends_the_spot_move() {
    // a's move is parked behind its awaiting turn; a's destroy begins, and
    // its turn ends: a's move ends StaleLocation with a still hosted (the
    // store may yet refuse the removal), so the Spot's move ends there and
    // b does not move.
    let (mut core, room, _) = with_spot(&["room-1/a", "room-1/b"]);
    let a = actor_id("room-1/a");
    core.actors(NOW).turn_suspended(&a);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    relocations(&mut core);
    core.actors(NOW).begin_destroy(&a).unwrap();
    core.turn_ended(NOW, &a);
    let events = relocations(&mut core);
    assert!(
        events.iter().all(|e| captured_actor(e).is_none()),
        "{events:?}"
    );
    assert_eq!(
        spot_finished(&events, &room),
        Some(Err(Reason::StaleLocation))
    );
    assert_eq!(core.actor_owner().spot_members(&room).len(), 2);
}

#[test]
fn core_a_spot_move_that_ends_with_a_member_still_here_keeps_the_spot() {
    // a's move waits on its turn; b's destroy begins. a is destroyed and
    // skipped, b is skipped: the Spot's move ends with nothing moved, and
    // the Spot stays here with b, whose destroy the store may yet refuse.
    let (mut core, room, _) = with_spot(&["room-1/a", "room-1/b"]);
    let (a, b) = (actor_id("room-1/a"), actor_id("room-1/b"));
    core.actors(NOW).turn_suspended(&a);
    core.relocations(NOW).relocate_spot(&room, TARGET).unwrap();
    relocations(&mut core);
    core.actors(NOW).begin_destroy(&b).unwrap();
    core.actors(NOW).destroy(&a).unwrap();
    core.turn_ended(NOW, &a);
    let events = relocations(&mut core);
    let finished = events.iter().find_map(|e| match e {
        RelocationEvent::SpotFinished {
            spot,
            outcome,
            gone,
        } if *spot == room => Some((outcome.is_ok(), gone.is_some())),
        _ => None,
    });
    assert_eq!(finished, Some((true, false)), "{events:?}");
    assert!(core.actor_owner().spot(&room).is_some());
    assert_eq!(core.actor_owner().spot_members(&room), [b]);
}
