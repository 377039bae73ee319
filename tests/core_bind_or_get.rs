//! BindOrGet's decisions (§1 step 2), in the core (issue 19 item 2;
//! src/core/creation.rs `ShardCore::host_step`, `host_found`): the Spot
//! rules, an Actor hosted here, and what each Location Store answer means —
//! decided once for the runtime's shards. The store itself is the shard's
//! effect; these tests give the core its answers directly.

mod common;

use common::one_shard;
use zlink::core::actor::{ActorLane, HostedSpot, InstanceSlot, Placement};
use zlink::core::creation::{HostDecision, IntoSpot, RowAnswer};
use zlink::core::lane::{LaneEngine, SpotLane};
use zlink::core::session::SessionOwnerConfig;
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::error::Reason;
use zlink::ids::{
    ActorLocation, ActorRef, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, SpotId,
};
use zlink::sim::actor_id;

const NOW: Instant = Instant::ZERO;
/// The shard under test is node 1's.
const ME: NodeRid = NodeRid(1);
const OTHER: NodeRid = NodeRid(2);

/// A live row for `name` naming `owner`.
fn row(name: &str, owner: NodeRid) -> ActorRef {
    ActorRef {
        id: actor_id(name),
        generation: ObjectGeneration(3),
        location: ActorLocation {
            mesh: MeshName::new("sim").unwrap(),
            owner,
            node_generation: NodeGeneration(1),
            authority: AuthorityOwnerGeneration(5),
            lease: OwnerLeaseGeneration(1),
        },
    }
}

fn outcome(decision: HostDecision) -> Result<ActorRef, Reason> {
    match decision {
        HostDecision::Decided(outcome) => outcome.map_err(|e| e.reason()),
        other => panic!("not decided: {other:?}"),
    }
}

/// A shard with SpotWide Spot `room-1` (Actor `room-1/a` in it) and an
/// Actor `loner` of its type's Entry Spot.
fn shard() -> (ShardCore, SpotId) {
    let mut core = one_shard(SessionOwnerConfig::default());
    let mut lanes: LaneEngine<SpotLane, ()> = LaneEngine::new();
    let room = SpotId::new("room-1").unwrap();
    let gate = lanes.add_lane(8);
    let spot = HostedSpot {
        kind: "room".into(),
        lane: Some(gate),
        slot: InstanceSlot(0),
    };
    core.actors(NOW).host_spot(room.clone(), spot);
    for (name, user_spot, lane) in [
        ("room-1/a", Some(room.clone()), ActorLane::Spot(gate)),
        ("loner", None, ActorLane::Own(lanes.add_lane(8))),
    ] {
        let placement = Placement {
            actor_type: "player".into(),
            user_spot,
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
    }
    (core, room)
}

#[test]
fn core_bind_or_get_keeps_the_spot_rules_before_the_store() {
    let (mut core, room) = shard();
    let into = IntoSpot {
        id: &room,
        spotwide: true,
    };
    let step = |core: &ShardCore, name: &str, spot| {
        core.host_step(&actor_id(name), spot)
            .map(|d| outcome(d).map(|a| a.id))
    };
    // Into a SpotWide Spot only an Actor named under it.
    assert_eq!(
        step(&core, "b", Some(into)),
        Some(Err(Reason::NotPlacedWithSpot))
    );
    // Hosted here: in the Spot asked for, or another one.
    assert_eq!(
        step(&core, "room-1/a", Some(into)),
        Some(Ok(actor_id("room-1/a")))
    );
    let lobby = SpotId::new("lobby").unwrap();
    let elsewhere = IntoSpot {
        id: &lobby,
        spotwide: false,
    };
    assert_eq!(
        step(&core, "room-1/a", Some(elsewhere)),
        Some(Err(Reason::ActorInOtherSpot))
    );
    assert_eq!(step(&core, "loner", None), Some(Ok(actor_id("loner"))));
    // Not hosted: the store decides.
    assert_eq!(step(&core, "room-1/new", Some(into)), None);

    // A Spot moving as one unit takes no new Actor.
    core.relocations(NOW).relocate_spot(&room, OTHER).unwrap();
    assert_eq!(
        step(&core, "room-1/new", Some(into)),
        Some(Err(Reason::RelocationSealed))
    );
}

#[test]
fn core_bind_or_get_judges_each_store_answer() {
    let (mut core, room) = shard();
    let into = Some(IntoSpot {
        id: &room,
        spotwide: true,
    });
    let new = actor_id("room-1/new");
    let mut asked = |answer, spot, replacing, for_peer| {
        core.host_found(&new, spot, answer, replacing, for_peer)
    };

    // A look-up: another node's row is that node's to judge (§8.1), so it
    // is asked (71) — never in a Spot here; an asked node never asks on
    // and answers the row as found; no row is NoActorFactory.
    let theirs = row("room-1/new", OTHER);
    let looked = RowAnswer::Looked(Some(theirs.clone()));
    assert_eq!(
        asked(looked.clone(), None, false, false),
        HostDecision::AskOwner(theirs.clone())
    );
    assert_eq!(
        outcome(asked(looked.clone(), None, false, true)),
        Ok(theirs.clone())
    );
    assert_eq!(
        outcome(asked(looked, into, false, false)),
        Err(Reason::ActorInOtherSpot)
    );
    // A create that found another node's row: asked the same way.
    assert_eq!(
        asked(RowAnswer::Existing(theirs.clone()), None, false, false),
        HostDecision::AskOwner(theirs.clone())
    );
    let mut found = |answer, spot, replacing| core.host_found(&new, spot, answer, replacing, true);
    assert_eq!(
        outcome(found(RowAnswer::Looked(None), None, false)),
        Err(Reason::NoActorFactory)
    );
    // A create that made the row hosts it here.
    let made = row("room-1/new", ME);
    assert_eq!(
        found(RowAnswer::Created(made.clone()), into, false),
        HostDecision::HostNew(made.clone())
    );
    // Asked: a create that found another node's row is theirs, as found.
    let existing = RowAnswer::Existing(theirs.clone());
    assert_eq!(outcome(found(existing, None, false)), Ok(theirs.clone()));
    // A live row naming this node for an Actor neither hosted nor moving:
    // a lost incarnation (L6), replaced.
    assert_eq!(
        found(RowAnswer::Existing(made.clone()), None, false),
        HostDecision::Replace(made.clone())
    );
    // Replacing: a row changed meanwhile is its owner's (not asked: one
    // replacement answers once); one naming this node again ends
    // StaleLocation, never a second replacement.
    assert_eq!(
        outcome(found(RowAnswer::Conflict(theirs.clone()), None, true)),
        Ok(theirs)
    );
    assert_eq!(
        outcome(found(RowAnswer::Conflict(made.clone()), None, true)),
        Err(Reason::StaleLocation)
    );
    assert_eq!(
        outcome(found(RowAnswer::Existing(made.clone()), None, true)),
        Err(Reason::StaleLocation)
    );
    assert_eq!(
        found(RowAnswer::Created(made.clone()), None, true),
        HostDecision::HostNew(made)
    );
    assert_eq!(
        core.counters().get(FlowTrace::LostIncarnationReplaced),
        1,
        "counted once, for the replacement's create"
    );
}

/// An Actor moving away is hosted here until its move hands it over: a
/// BindOrGet answers with it (and the bind then meets the seal, X5),
/// whatever the store said, and never creates a second one. (An Actor in
/// motion that is no longer hosted here, or arriving, takes the `own_row`
/// branch: tests/core_relocation.rs, through the simulator.)
#[test]
fn core_bind_or_get_answers_an_actor_hosted_here_even_while_it_moves() {
    let (mut core, _) = shard();
    let loner = actor_id("loner");
    core.relocations(NOW).relocate(&loner, OTHER).unwrap();
    let hosted = core
        .host_step(&loner, None)
        .map(|d| outcome(d).map(|a| a.id));
    assert_eq!(hosted, Some(Ok(loner.clone())));
    let answer = RowAnswer::Existing(row("loner", ME));
    let decided = core.host_found(&loner, None, answer, false, false);
    assert_eq!(outcome(decided).map(|a| a.id), Ok(loner));
    // Into another Spot: not there.
    let lobby = SpotId::new("lobby").unwrap();
    let into = Some(IntoSpot {
        id: &lobby,
        spotwide: false,
    });
    let answer = RowAnswer::Existing(row("loner", ME));
    let decided = core.host_found(&actor_id("loner"), into, answer, false, false);
    assert_eq!(outcome(decided), Err(Reason::ActorInOtherSpot));
}

/// An ending Actor (its destroy's row removal with the store) is never a
/// BindOrGet's answer, before the store or on its answer: the request
/// waits for the destroy (`AfterDestroy`), in or out of a Spot. A destroy
/// that failed makes it an answer again; one that ended lets the store
/// decide (the simulator's seed 26527: a BindOrGet asked again after a
/// create's lost answer settled on the ending instance, and the create's
/// row, made after the removal, named this node hosting nothing).
#[test]
fn core_bind_or_get_waits_for_an_ending_actors_destroy() {
    let (mut core, room) = shard();
    let into = IntoSpot {
        id: &room,
        spotwide: true,
    };
    for name in ["loner", "room-1/a"] {
        let actor = actor_id(name);
        let spot = (name != "loner").then_some(into);
        core.actors(NOW).begin_destroy(&actor).unwrap();
        assert_eq!(
            core.host_step(&actor, spot),
            Some(HostDecision::AfterDestroy)
        );
        let answer = RowAnswer::Existing(row(name, ME));
        let decided = core.host_found(&actor, spot, answer, false, false);
        assert_eq!(decided, HostDecision::AfterDestroy);
        // The removal refused: it goes on, and is the answer again.
        core.actors(NOW).destroy_failed(&actor);
        let decided = core.host_step(&actor, spot).map(outcome);
        assert_eq!(decided.map(|r| r.map(|a| a.id)), Some(Ok(actor.clone())));
        // The removal made: the store decides.
        core.actors(NOW).begin_destroy(&actor).unwrap();
        core.actors(NOW).destroy(&actor).unwrap();
        assert_eq!(core.host_step(&actor, spot), None);
    }
}
