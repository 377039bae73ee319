//! The one hosted-actor registry, in the core (issue 19 item 2;
//! src/core/actor/placement.rs; docs/core.md): which Actors and Spots this
//! shard hosts, on which lane, in which Spot and at which instance slot, and
//! the rules kept on it once — a turn runs only on the incarnation it was
//! admitted for (§4, X6), an Actor whose row removal is with the store does
//! not move and is not destroyed twice (§1, §8.1).

mod common;

use common::one_shard;
use zlink::core::actor::{ActorLane, HostedSpot, InstanceSlot, Placement};
use zlink::core::lane::{ActorDeliveryLane, LaneEngine, SpotLane};
use zlink::core::session::SessionOwnerConfig;
use zlink::core::time::Instant;
use zlink::error::Reason;
use zlink::ids::{AuthorityOwnerGeneration, NodeRid, ObjectGeneration, SpotId};
use zlink::sim::actor_id;

const NOW: Instant = Instant::ZERO;
const AUTHORITY: AuthorityOwnerGeneration = AuthorityOwnerGeneration(1);

fn placed(lanes: &mut LaneEngine<ActorDeliveryLane, ()>, slot: usize) -> Placement {
    Placement {
        actor_type: "player".into(),
        user_spot: None,
        lane: ActorLane::Own(lanes.add_lane(4)),
        slot: InstanceSlot(slot),
    }
}

#[test]
fn core_x6_a_turn_runs_only_on_the_incarnation_it_was_admitted_for() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes = LaneEngine::new();
    let a = actor_id("a");
    let (first, second) = (ObjectGeneration(1), ObjectGeneration(2));
    let placement = placed(&mut lanes, 7);
    core.actors(NOW)
        .host_placed(a.clone(), first, AUTHORITY, placement.clone())
        .unwrap();
    let owner = core.actor_owner();
    assert_eq!(owner.turn_slot(&a, first), Some(InstanceSlot(7)));
    assert_eq!(owner.turn_lane(&a), Some((placement.lane, first)));
    // Work admitted for another incarnation finds no instance.
    assert_eq!(owner.turn_slot(&a, second), None);

    // Destroyed: the registry says where it ran, and no turn finds it.
    let dropped = core.actors(NOW).destroy(&a).unwrap();
    assert_eq!(dropped, Some(placement));
    assert_eq!(core.actor_owner().turn_slot(&a, first), None);

    // A new incarnation under the same ActorId, at another slot: work
    // queued for the old one still finds nothing (X6).
    core.actors(NOW)
        .host_placed(a.clone(), second, AUTHORITY, placed(&mut lanes, 9))
        .unwrap();
    assert_eq!(core.actor_owner().turn_slot(&a, first), None);
    assert_eq!(
        core.actor_owner().turn_slot(&a, second),
        Some(InstanceSlot(9))
    );
}

/// Hosting is idempotent for one incarnation (src/core/actor/mod.rs
/// `host_placed`): hosting an Actor already here under the same
/// ObjectGeneration returns its ActorRef and leaves its registry entry as it
/// was; under another ObjectGeneration it is refused
/// (`ObjectGenerationMismatch`, §4: destroy the old incarnation first).
#[test]
fn core_hosting_a_hosted_actor_again_returns_its_ref_and_another_incarnation_is_refused() {
    // Given "a" hosted with ObjectGeneration 1 at instance slot 7.
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes = LaneEngine::new();
    let a = actor_id("a");
    let first = core
        .actors(NOW)
        .host_placed(
            a.clone(),
            ObjectGeneration(1),
            AUTHORITY,
            placed(&mut lanes, 7),
        )
        .unwrap();

    // When it is hosted again under the same incarnation (another slot).
    let again = core.actors(NOW).host_placed(
        a.clone(),
        ObjectGeneration(1),
        AUTHORITY,
        placed(&mut lanes, 8),
    );

    // Then the answer is its ActorRef, and the registry still names the
    // first instance.
    assert_eq!(again, Ok(first.clone()));
    assert_eq!(
        core.actor_owner().turn_slot(&a, ObjectGeneration(1)),
        Some(InstanceSlot(7))
    );

    // When another incarnation is hosted under the same ActorId.
    let other = core.actors(NOW).host_placed(
        a.clone(),
        ObjectGeneration(2),
        AUTHORITY,
        placed(&mut lanes, 9),
    );

    // Then it is refused, and the hosted incarnation is unchanged.
    assert_eq!(
        other.unwrap_err().reason(),
        Reason::ObjectGenerationMismatch
    );
    assert_eq!(core.actor_owner().actor_ref(&a), Some(first));
    assert_eq!(core.actor_owner().turn_slot(&a, ObjectGeneration(2)), None);
}

#[test]
fn core_an_actor_whose_row_removal_is_with_the_store_does_not_move_and_is_not_destroyed_twice() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes = LaneEngine::new();
    let a = actor_id("a");
    core.actors(NOW)
        .host_placed(
            a.clone(),
            ObjectGeneration(1),
            AUTHORITY,
            placed(&mut lanes, 0),
        )
        .unwrap();
    let actor_ref = core.actors(NOW).begin_destroy(&a).unwrap();
    assert_eq!(actor_ref.generation, ObjectGeneration(1));
    assert!(core.actor_owner().is_ending(&a));

    let moved = core.relocations(NOW).relocate(&a, NodeRid(2));
    assert_eq!(moved.unwrap_err().reason(), Reason::StaleLocation);
    let again = core.actors(NOW).begin_destroy(&a);
    assert_eq!(again.unwrap_err().reason(), Reason::StaleLocation);
    // Still hosted meanwhile: relays and binds are judged as before.
    assert!(core.actor_owner().actor_ref(&a).is_some());

    // The store could not remove the row: the Actor goes on, and may move.
    core.actors(NOW).destroy_failed(&a);
    assert!(!core.actor_owner().is_ending(&a));
    assert!(core.relocations(NOW).relocate(&a, NodeRid(2)).is_ok());
}

#[test]
fn core_the_registry_names_a_spots_members_in_order_and_each_actors_one_spot() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut spot_lanes: LaneEngine<SpotLane, ()> = LaneEngine::new();
    let room = SpotId::new("room-1").unwrap();
    let gate = spot_lanes.add_lane(8);
    core.actors(NOW).host_spot(
        room.clone(),
        HostedSpot {
            kind: "room".into(),
            lane: Some(gate),
            slot: InstanceSlot(0),
        },
    );
    for (slot, name) in [(2, "room-1/c"), (0, "room-1/a"), (1, "room-1/b")] {
        let placement = Placement {
            actor_type: "player".into(),
            user_spot: Some(room.clone()),
            lane: ActorLane::Spot(gate),
            slot: InstanceSlot(slot),
        };
        core.actors(NOW)
            .host_placed(actor_id(name), ObjectGeneration(1), AUTHORITY, placement)
            .unwrap();
    }
    let loner = actor_id("loner");
    let mut lanes = LaneEngine::new();
    core.actors(NOW)
        .host_placed(
            loner.clone(),
            ObjectGeneration(1),
            AUTHORITY,
            placed(&mut lanes, 3),
        )
        .unwrap();

    let owner = core.actor_owner();
    let members = owner.spot_members(&room);
    let names: Vec<&str> = members.iter().map(|m| m.as_str()).collect();
    assert_eq!(names, ["room-1/a", "room-1/b", "room-1/c"]);
    assert_eq!(owner.spot(&room).map(|s| s.lane), Some(Some(gate)));
    assert_eq!(owner.placement(&loner).unwrap().lane.spot_gate(), None);
    assert_eq!(
        owner.placement(&members[0]).unwrap().lane.spot_gate(),
        Some(gate)
    );
    assert_eq!((owner.actor_count(), owner.spot_count()), (4, 1));
    let spots: Vec<_> = owner.spots().map(|(id, s)| (id.clone(), s.lane)).collect();
    assert_eq!(spots, [(room.clone(), Some(gate))]);

    let gone = core.actors(NOW).remove_spot(&room).unwrap();
    assert_eq!(gone.slot, InstanceSlot(0));
    assert_eq!(core.actor_owner().spot(&room), None);
    // The count follows the Spots hosted, not only their first.
    assert_eq!(core.actor_owner().spot_count(), 0);
}

#[test]
fn core_an_instance_restored_for_an_arriving_actor_is_listed_until_its_move_ends() {
    use bytes::Bytes;
    use std::time::Duration;
    use zlink::core::relocation::RelocationEvent;
    use zlink::core::CoreEvent;
    use zlink::ids::{NodeGeneration, Peer, RelocationId, RequestId, SessionOwnerId};
    use zlink::wire::node::{
        NodeRecord, RelocationDiscard, RelocationPrepare, RequestHeader, TimersHandoff,
    };

    // Given a Restore asked of this shard (node 1) by node 2.
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes = LaneEngine::new();
    let a = actor_id("a");
    let source = Peer {
        rid: NodeRid(2),
        generation: NodeGeneration(1),
    };
    let relocation = RelocationId {
        coordinator: NodeRid(2),
        sequence: 1,
    };
    let prepare = RelocationPrepare {
        request: RequestHeader {
            id: RequestId::relocation_origin(SessionOwnerId(0)).next(),
            budget: Duration::from_millis(1_500),
        },
        relocation,
        actor: a.clone(),
        object_generation: ObjectGeneration(1),
        expected_authority: AUTHORITY,
        binding: None,
        state: Bytes::new(),
        saved: Vec::new(),
        timers: TimersHandoff::default(),
        calls: Default::default(),
    };
    core.handle_record(
        NOW,
        source,
        NodeRecord::RelocationPrepare(Box::new(prepare)),
    );
    let mut restores = 0;
    while let Some(event) = core.poll_event() {
        if let CoreEvent::Relocation(RelocationEvent::Restore { actor, .. }) = event {
            assert_eq!(actor, a);
            restores += 1;
        }
    }
    assert_eq!(restores, 1);
    assert_eq!(
        core.relocation().arrivals().count(),
        0,
        "nothing restored yet"
    );

    // The instance is restored: listed as an arrival, not hosted.
    let placement = placed(&mut lanes, 5);
    let back = core
        .relocations(NOW)
        .restored(relocation, Ok(Some(placement.clone())));
    assert_eq!(back, None, "taken by the handoff");
    let arrivals: Vec<_> = core.relocation().arrivals().cloned().collect();
    assert_eq!(arrivals, std::slice::from_ref(&placement));
    assert_eq!(core.actor_owner().placement(&a), None);

    // The source discards the handoff: the instance is dropped, and no
    // longer listed.
    let discard = RelocationDiscard {
        relocation,
        actor: a.clone(),
    };
    core.handle_record(NOW, source, NodeRecord::RelocationDiscard(discard));
    let mut dropped = Vec::new();
    while let Some(event) = core.poll_event() {
        if let CoreEvent::Relocation(RelocationEvent::DropInstance { placement, .. }) = event {
            dropped.push(placement);
        }
    }
    assert_eq!(dropped, [Some(placement)]);
    assert_eq!(core.relocation().arrivals().count(), 0);
}
