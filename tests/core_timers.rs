//! An Actor's timers in the core (docs/actors.md "Timers"), in virtual
//! time: a tick never comes before its time, repeating timers keep a fixed
//! rate with contiguous tick numbers, a tick due while the previous one runs
//! is skipped and counted, and a live relocation carries the timers as time
//! left — no tick lost, doubled or early, on the target or back at the
//! source after an abort.

mod common;

use std::time::Duration;

use common::*;
use zlink::core::actor::ActorEvent;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::Reason;
use zlink::ids::{NodeRid, TimerId};
use zlink::sim::{actor_id, error, ActorBehavior, Journal, Mesh, RestoreBehavior};

const PERIOD: Duration = Duration::from_millis(50);

/// Every tick the nodes' cores emitted, in order: (when, node, timer, tick).
fn ticks(mesh: &Mesh) -> Vec<(Instant, NodeRid, TimerId, u64)> {
    mesh.journal()
        .iter()
        .filter_map(|entry| match entry {
            Journal::Event {
                at,
                node,
                event: CoreEvent::Actor(ActorEvent::Timer { timer, tick, .. }),
            } => Some((*at, *node, *timer, *tick)),
            _ => None,
        })
        .collect()
}

fn one_node() -> (Mesh, NodeRid) {
    let mut mesh = mesh();
    let node = mesh.add_node(2);
    mesh.create(node, "a");
    (mesh, node)
}

#[test]
fn core_a_one_shot_timer_ticks_once_at_its_time_never_sooner() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let t0 = mesh.now();
    let after = Duration::from_millis(120);
    let timer = mesh.actors(node).set_timer(&a, after, None).unwrap();
    assert_eq!(mesh.node(node).core().poll_timeout(), Some(t0 + after));

    mesh.advance(after - MICRO);
    assert!(ticks(&mesh).is_empty(), "ticked before its time");
    mesh.advance(MICRO);
    assert_eq!(ticks(&mesh), vec![(t0 + after, node, timer, 1)]);

    // Once: nothing is left armed, and a later marker shows no second tick.
    mesh.advance(Duration::from_secs(5));
    assert_eq!(ticks(&mesh).len(), 1);
    assert_eq!(mesh.node(node).core().actor_owner().timer_count(&a), 0);
    assert_eq!(mesh.node(node).core().armed_timers(), 0);
    assert!(!mesh.actors(node).cancel_timer(&a, timer), "already spent");
}

#[test]
fn core_a_repeating_timer_keeps_a_fixed_rate_with_contiguous_tick_numbers() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let t0 = mesh.now();
    let first = Duration::from_millis(10);
    let timer = mesh
        .actors(node)
        .set_timer(&a, first, Some(PERIOD))
        .unwrap();
    mesh.advance(first + PERIOD * 9);
    let expected: Vec<_> = (0..10u32)
        .map(|n| (t0 + first + PERIOD * n, node, timer, u64::from(n) + 1))
        .collect();
    assert_eq!(ticks(&mesh), expected);
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 0);
}

/// Fixed rate (docs/actors.md "Timers"): a shard that fires a repeating
/// timer late by several periods (a long turn, a stopped process) skips
/// every tick whose time has passed, counts each once, and the next tick
/// keeps the timer's phase — no burst makes up for the skipped ones.
#[test]
fn core_a_repeating_timer_fired_periods_late_skips_and_counts_the_passed_ticks_and_keeps_its_phase()
{
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let t0 = mesh.now();
    // Given a repeating timer due at P, 2P, 3P …, and a shard that handles
    // its timers 3.5 periods late,
    let timer = mesh
        .actors(node)
        .set_timer(&a, PERIOD, Some(PERIOD))
        .unwrap();
    mesh.set_timer_lateness(PERIOD * 3 + PERIOD / 2);
    // when tick 1 fires at 4.5P, the ticks due at 2P, 3P and 4P have
    // passed: they are skipped and counted, once each;
    mesh.advance(PERIOD * 4 + PERIOD / 2);
    assert_eq!(
        ticks(&mesh),
        vec![(t0 + PERIOD * 4 + PERIOD / 2, node, timer, 1)]
    );
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 3);
    // then, the shard on time again, tick 2 comes at 5P, on the timer's
    // phase, and nothing more is skipped.
    mesh.set_timer_lateness(Duration::ZERO);
    mesh.advance(PERIOD / 2);
    assert_eq!(
        ticks(&mesh).last(),
        Some(&(t0 + PERIOD * 5, node, timer, 2))
    );
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 3);
}

#[test]
fn core_a_tick_due_while_the_previous_one_has_not_run_is_skipped_and_counted() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    mesh.set_behavior(node, ActorBehavior::Queue);
    let timer = mesh
        .actors(node)
        .set_timer(&a, PERIOD, Some(PERIOD))
        .unwrap();
    // Tick 1 is queued and not run; the next three come due meanwhile.
    mesh.advance(PERIOD * 4);
    assert_eq!(ticks(&mesh).len(), 1);
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 3);
    // Once it has run, the next due tick is delivered, numbered 2: the
    // numbers stay contiguous, and no burst makes up for the skipped ones.
    mesh.run_lane(node, &a);
    mesh.advance(PERIOD);
    let numbers: Vec<u64> = ticks(&mesh).iter().map(|&(.., tick)| tick).collect();
    assert_eq!(numbers, vec![1, 2]);
    assert_eq!(ticks(&mesh)[1].2, timer);
}

#[test]
fn core_t2_cancel_and_destroy_end_timers_and_a_fenced_owner_fires_none() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let cancelled = mesh
        .actors(node)
        .set_timer(&a, PERIOD, Some(PERIOD))
        .unwrap();
    let kept = mesh.actors(node).set_timer(&a, PERIOD * 2, None).unwrap();
    assert_ne!(cancelled, kept);
    assert!(mesh.actors(node).cancel_timer(&a, cancelled));
    mesh.advance(PERIOD * 3);
    assert_eq!(
        ticks(&mesh)
            .iter()
            .map(|&(_, _, timer, _)| timer)
            .collect::<Vec<_>>(),
        vec![kept]
    );

    // Destroying the Actor cancels what it has pending.
    mesh.actors(node)
        .set_timer(&a, PERIOD, Some(PERIOD))
        .unwrap();
    mesh.destroy(node, &a).unwrap();
    mesh.advance(PERIOD * 3);
    assert_eq!(ticks(&mesh).len(), 1);
    assert_eq!(mesh.node(node).core().armed_timers(), 0);

    // A fenced owner (§5) delivers no tick.
    mesh.create(node, "b");
    let b = actor_id("b");
    mesh.actors(node)
        .set_timer(&b, PERIOD, Some(PERIOD))
        .unwrap();
    mesh.actors(node).fence();
    mesh.advance(PERIOD * 3);
    assert_eq!(ticks(&mesh).len(), 1);
}

#[test]
fn core_a_timer_that_cannot_be_set_is_refused_with_a_typed_error() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    assert_eq!(
        mesh.actors(node)
            .set_timer(&a, PERIOD, Some(Duration::from_micros(999))),
        Err(error(Reason::TimerPeriodTooShort))
    );
    for _ in 0..64 {
        mesh.actors(node).set_timer(&a, PERIOD, None).unwrap();
    }
    assert_eq!(
        mesh.actors(node).set_timer(&a, PERIOD, None),
        Err(error(Reason::TooManyTimers))
    );
    assert_eq!(
        mesh.actors(node)
            .set_timer(&actor_id("nobody"), PERIOD, None),
        Err(error(Reason::StaleLocation))
    );
}

/// docs/actors.md "Timers": a repeating period is at least 1 ms, the
/// wheel's tick; a period of exactly 1 ms is accepted and ticks every
/// millisecond.
#[test]
fn core_a_repeating_timer_of_exactly_one_millisecond_is_accepted() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let t0 = mesh.now();
    let ms = Duration::from_millis(1);
    let timer = mesh.actors(node).set_timer(&a, ms, Some(ms)).unwrap();
    mesh.advance(ms * 3);
    let expected: Vec<_> = (1..=3u32)
        .map(|n| (t0 + ms * n, node, timer, u64::from(n)))
        .collect();
    assert_eq!(ticks(&mesh), expected);
}

/// docs/actors.md "Timers": a tick that cannot run (its lane is full, or
/// it was refused) is a skipped tick, counted, and its number is given
/// back: the next tick is delivered under it, so the numbers the Actor sees
/// stay contiguous, and the timer goes on.
#[test]
fn core_a_refused_tick_is_skipped_and_its_number_goes_to_the_next_tick() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    mesh.set_behavior(node, ActorBehavior::Manual);
    let timer = mesh
        .actors(node)
        .set_timer(&a, PERIOD, Some(PERIOD))
        .unwrap();
    mesh.advance(PERIOD);
    let numbers = |mesh: &Mesh| -> Vec<u64> { ticks(mesh).iter().map(|t| t.3).collect() };
    assert_eq!(numbers(&mesh), vec![1]);
    let refused = ActorEvent::Timer {
        actor: a.clone(),
        timer,
        tick: 1,
    };
    mesh.actors(node).refuse(refused, Reason::QueueFull);
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 1);
    mesh.advance(PERIOD);
    assert_eq!(numbers(&mesh), vec![1, 1]);
    assert_eq!(count(&mesh, node, FlowTrace::ActorTimerTickSkipped), 1);
}

/// Contract T2: destroying an Actor cancels its timers, and no timer of a
/// destroyed incarnation fires on a new one, even on a timer the new one
/// set under the same number (each incarnation numbers its timers anew):
/// that timer ticks at its own time, not the old one's.
#[test]
fn core_t2_a_destroyed_incarnations_timer_never_ticks_the_same_numbered_timer_of_the_next() {
    let (mut mesh, node) = one_node();
    let a = actor_id("a");
    let old = mesh.actors(node).set_timer(&a, PERIOD, None).unwrap();
    mesh.destroy(node, &a).unwrap();
    assert_eq!(mesh.node(node).core().armed_timers(), 0);
    mesh.create(node, "a");
    let t1 = mesh.now();
    let new = mesh.actors(node).set_timer(&a, PERIOD * 2, None).unwrap();
    assert_eq!(old, new, "numbered anew");
    mesh.advance(PERIOD * 3);
    assert_eq!(ticks(&mesh), vec![(t1 + PERIOD * 2, node, new, 1)]);
}

/// Node 1 holds no sessions here; "a" is created at node 2 (the source)
/// with a repeating timer, and moved to node 3.
fn moving() -> (Mesh, NodeRid, NodeRid, Instant, TimerId) {
    let mut mesh = mesh();
    mesh.add_node(1);
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    mesh.create(source, "a");
    let t0 = mesh.now();
    let timer = mesh
        .actors(source)
        .set_timer(&actor_id("a"), PERIOD, Some(PERIOD))
        .unwrap();
    (mesh, source, target, t0, timer)
}

/// Checks the ticks one timer set at `t0` ran: numbered 1, 2, 3 … with no
/// gap and no repeat, and none before its fixed-rate time.
fn assert_contiguous_and_never_early(mesh: &Mesh, t0: Instant, timer: TimerId) {
    let ticks = ticks(mesh);
    for (n, &(at, node, t, tick)) in ticks.iter().enumerate() {
        assert_eq!(t, timer);
        assert_eq!(tick, n as u64 + 1, "tick numbers: {ticks:?}");
        let due = t0 + PERIOD * u32::try_from(tick).unwrap();
        assert!(at >= due, "tick {tick} on {node:?} at {at:?}, due {due:?}");
    }
}

#[test]
fn core_t1_timers_move_with_the_actor_as_time_left_no_tick_lost_doubled_or_early() {
    let (mut mesh, source, target, t0, timer) = moving();
    let a = actor_id("a");
    mesh.advance(PERIOD * 3 + Duration::from_millis(20));
    assert_eq!(ticks(&mesh).len(), 3);
    let captured_at = mesh.now();

    mesh.relocations(source).relocate(&a, target).unwrap();
    mesh.advance(PERIOD * 10);

    let all = ticks(&mesh);
    assert!(all.len() >= 12, "{all:?}");
    assert_contiguous_and_never_early(&mesh, t0, timer);
    // The source ticks no more once it captured the Actor; the target
    // carries on with the same timer, the first tick no sooner than the
    // 30 ms it had left at capture.
    let moved: Vec<_> = all.iter().filter(|t| t.1 == target).collect();
    assert!(all
        .iter()
        .filter(|t| t.1 == source)
        .all(|t| t.0 <= captured_at));
    assert_eq!(moved[0].3, 4);
    assert!(moved[0].0 >= captured_at + Duration::from_millis(30));
    assert_eq!(
        mesh.node(target).core().actor_owner().timer_count(&a),
        1,
        "the timer lives at the target"
    );
    assert_eq!(count(&mesh, target, FlowTrace::ActorTimerTickSkipped), 0);
    // And a timer set after the move gets a number never used before.
    let next = mesh.actors(target).set_timer(&a, PERIOD, None).unwrap();
    assert!(next > timer);
}

#[test]
fn core_a_tick_queued_at_capture_runs_once_at_the_target() {
    let (mut mesh, source, target, t0, timer) = moving();
    let a = actor_id("a");
    mesh.set_behavior(source, ActorBehavior::Queue);
    // Tick 1 waits on the source's lane when the move captures it.
    mesh.advance(PERIOD + Duration::from_millis(5));
    assert_eq!(mesh.lane(source, &a).len(), 1);
    mesh.relocations(source).relocate(&a, target).unwrap();
    mesh.advance(PERIOD * 6);
    assert_eq!(mesh.lane(source, &a).len(), 0, "taken off as saved work");
    // The source emitted tick 1 onto its lane and ran nothing; the tick
    // travelled as saved work and ran at the target, once, and the timer
    // went on there from 2, never early.
    let at = |node| -> Vec<(Instant, u64)> {
        ticks(&mesh)
            .iter()
            .filter(|t| t.1 == node && t.2 == timer)
            .map(|t| (t.0, t.3))
            .collect()
    };
    assert_eq!(at(source), vec![(t0 + PERIOD, 1)]);
    let ran = at(target);
    assert!(ran.len() >= 5, "{ran:?}");
    for (n, &(when, tick)) in ran.iter().enumerate() {
        assert_eq!(tick, n as u64 + 1, "{ran:?}");
        assert!(
            when >= t0 + PERIOD * u32::try_from(tick).unwrap(),
            "{ran:?}"
        );
    }
    assert_eq!(count(&mesh, target, FlowTrace::ActorTimerTickSkipped), 0);
}

#[test]
fn core_a_move_that_aborts_gives_the_timers_back_to_the_source_never_early() {
    let (mut mesh, source, target, t0, timer) = moving();
    let a = actor_id("a");
    mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
    mesh.advance(PERIOD * 2 + Duration::from_millis(10));
    mesh.relocations(source).relocate(&a, target).unwrap();
    mesh.advance(PERIOD * 6);
    assert_contiguous_and_never_early(&mesh, t0, timer);
    let all = ticks(&mesh);
    assert!(all.len() >= 7, "{all:?}");
    assert!(all.iter().all(|t| t.1 == source));
    assert_eq!(mesh.node(source).core().actor_owner().timer_count(&a), 1);
    assert_eq!(count(&mesh, source, FlowTrace::RelocationAborted), 1);
}
