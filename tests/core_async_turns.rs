//! Awaiting turns and the moves parked behind them, in the core (issue 19
//! item 2; src/core/actor/awaits.rs, src/core/relocation/parked.rs;
//! docs/actors.md "Async turns"): a turn awaits at most the actor turn
//! deadline in all, a move asked for while a turn awaits is parked by the
//! core and goes on when the turn ends, or ends at its prepare bound with
//! nothing sealed (Y2, L5). Virtual time: each deadline fires at its
//! instant, never a microsecond sooner.

mod common;

use std::time::Duration;

use common::{one_shard, one_shard_with, TURN_DEADLINE};
use zlink::core::actor::AwaitEvent;
use zlink::core::relocation::{RelocationConfig, RelocationEvent};
use zlink::core::session::SessionOwnerConfig;
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::Reason;
use zlink::ids::{ActorId, AuthorityOwnerGeneration, NodeRid, ObjectGeneration, RelocationId};
use zlink::sim::actor_id;

const PREPARE: Duration = Duration::from_millis(1_500);
const JUST: Duration = Duration::from_micros(1);

fn awaits(core: &mut ShardCore) -> Vec<AwaitEvent> {
    let mut events = Vec::new();
    while let Some(event) = core.poll_event() {
        if let CoreEvent::Await(event) = event {
            events.push(event);
        }
    }
    events
}

#[test]
fn core_y2_a_turn_awaits_at_most_the_turn_deadline_in_all_never_sooner() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = actor_id("a");
    let t0 = Instant::from_millis(100);
    let turn = core.actors(t0).turn_suspended(&a);
    assert_eq!(core.actor_owner().awaiting(&a), Some(turn));
    // A continuation that suspends again keeps the first deadline.
    let later = t0 + Duration::from_millis(900);
    assert_eq!(core.actors(later).turn_suspended(&a), turn);
    assert_eq!(core.poll_timeout(), Some(t0 + TURN_DEADLINE));

    core.handle_timeout(t0 + (TURN_DEADLINE - JUST));
    assert!(awaits(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::ActorTurnDeadlineExceeded), 0);

    core.handle_timeout(t0 + TURN_DEADLINE);
    assert_eq!(
        awaits(&mut core),
        [AwaitEvent::TurnExpired {
            actor: a.clone(),
            turn
        }]
    );
    assert_eq!(core.counters().get(FlowTrace::ActorTurnDeadlineExceeded), 1);
    assert_eq!(core.actor_owner().awaiting(&a), None);
    // A later turn is a new one, with a deadline of its own.
    let next = core.actors(t0 + TURN_DEADLINE).turn_suspended(&a);
    assert_ne!(next, turn);
    assert_eq!(core.poll_timeout(), Some(t0 + 2 * TURN_DEADLINE));
}

#[test]
fn core_a_turn_that_ends_in_time_leaves_no_deadline() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = actor_id("a");
    core.actors(Instant::ZERO).turn_suspended(&a);
    core.turn_ended(Instant::ZERO, &a);
    assert_eq!(core.poll_timeout(), None);
    core.handle_timeout(Instant::ZERO + 2 * TURN_DEADLINE);
    assert!(awaits(&mut core).is_empty());
}

/// What a parked move's life shows of itself, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    TurnExpired(ActorId),
    Unparked(RelocationId),
    Capture(RelocationId),
    Finished(RelocationId, Result<(), Reason>),
}

fn seen(core: &mut ShardCore) -> Vec<Seen> {
    let mut seen = Vec::new();
    while let Some(event) = core.poll_event() {
        seen.push(match event {
            CoreEvent::Await(AwaitEvent::TurnExpired { actor, .. }) => Seen::TurnExpired(actor),
            CoreEvent::Relocation(RelocationEvent::Unparked { relocation, .. }) => {
                Seen::Unparked(relocation)
            }
            CoreEvent::Relocation(RelocationEvent::Capture { relocation, .. }) => {
                Seen::Capture(relocation)
            }
            CoreEvent::Relocation(RelocationEvent::Finished {
                relocation,
                outcome,
                ..
            }) => Seen::Finished(relocation, outcome.map(drop).map_err(|e| e.reason())),
            _ => continue,
        });
    }
    seen
}

fn hosted(core: &mut ShardCore, name: &str) -> ActorId {
    let actor = actor_id(name);
    core.actors(Instant::ZERO)
        .host(
            actor.clone(),
            ObjectGeneration(1),
            AuthorityOwnerGeneration(1),
        )
        .unwrap();
    actor
}

const TARGET: NodeRid = NodeRid(2);

#[test]
fn core_y2_moves_parked_behind_an_awaiting_turn_go_on_in_order_when_it_ends() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let (a, b) = (hosted(&mut core, "a"), hosted(&mut core, "b"));
    let t0 = Instant::ZERO;
    core.actors(t0).turn_suspended(&a);
    core.actors(t0).turn_suspended(&b);
    let first = core.relocations(t0).relocate(&a, TARGET).unwrap();
    let other = core.relocations(t0).relocate(&b, TARGET).unwrap();
    let second = core.relocations(t0).relocate(&a, TARGET).unwrap();
    assert_eq!(core.counters().get(FlowTrace::RelocationWaitsForTurn), 3);
    assert_eq!(core.relocation().parked_moves(), 3);
    assert!(seen(&mut core).is_empty(), "parked, nothing captured");
    assert!(!core.relocation().is_relocating(&a), "nothing sealed");

    let end = t0 + Duration::from_millis(300);
    core.turn_ended(end, &a);
    // The first goes on; the second, checked again, finds a move running.
    assert_eq!(
        seen(&mut core),
        [
            Seen::Unparked(first),
            Seen::Capture(first),
            Seen::Unparked(second),
            Seen::Finished(second, Err(Reason::RelocationSealed)),
        ]
    );
    assert_eq!(core.relocation().parked_moves(), 1);
    assert_eq!(core.counters().get(FlowTrace::RelocationUnparked), 2);
    // The released moves' deadlines are gone: when b's turn is over, only
    // b's move goes on.
    core.handle_timeout(t0 + PREPARE);
    assert_eq!(
        seen(&mut core),
        [
            Seen::TurnExpired(b),
            Seen::Unparked(other),
            Seen::Capture(other)
        ]
    );
    assert_eq!(core.relocation().parked_moves(), 0);
}

#[test]
fn core_l5_a_move_parked_past_its_prepare_bound_ends_never_sooner() {
    // A prepare bound shorter than the turn deadline, so the move's bound
    // comes first.
    let prepare = Duration::from_millis(500);
    let mut core = one_shard_with(
        SessionOwnerConfig::default(),
        RelocationConfig {
            prepare_timeout: prepare,
            ..RelocationConfig::default()
        },
    );
    let a = hosted(&mut core, "a");
    let t0 = Instant::from_millis(40);
    core.actors(t0).turn_suspended(&a);
    let parked_at = t0 + Duration::from_millis(10);
    let moving = core.relocations(parked_at).relocate(&a, TARGET).unwrap();
    core.handle_timeout(parked_at + (prepare - JUST));
    assert!(seen(&mut core).is_empty());
    core.handle_timeout(parked_at + prepare);
    assert_eq!(
        seen(&mut core),
        [Seen::Finished(moving, Err(Reason::Deadline))]
    );
    assert_eq!(core.relocation().parked_moves(), 0);
    assert!(
        !core.relocation().is_relocating(&a),
        "nothing sealed or moved"
    );
    // The turn that ends later releases nothing.
    core.turn_ended(parked_at + prepare, &a);
    assert!(seen(&mut core).is_empty());
}

#[test]
fn core_a_turn_over_at_its_deadline_releases_the_moves_parked_behind_it() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = hosted(&mut core, "a");
    // The turn deadline (1,400 ms) comes before the move's prepare bound
    // (1,500 ms from its parking): the move goes on, as at a turn's end.
    core.actors(Instant::ZERO).turn_suspended(&a);
    let moving = core
        .relocations(Instant::ZERO)
        .relocate(&a, TARGET)
        .unwrap();
    core.handle_timeout(Instant::ZERO + TURN_DEADLINE);
    assert_eq!(
        seen(&mut core),
        [
            Seen::TurnExpired(a),
            Seen::Unparked(moving),
            Seen::Capture(moving)
        ]
    );
    // Its prepare bound as a parked move is gone.
    core.handle_timeout(Instant::ZERO + 2 * PREPARE);
    assert!(!seen(&mut core).contains(&Seen::Finished(moving, Err(Reason::Deadline))));
}
