//! A store step whose outcome was unknown is made again (issue 19 item 3):
//! a BindOrGet's create (src/core/recheck.rs) and a destroy's row removal
//! (src/core/actor/removal.rs), on the core's one timer wheel, never before
//! the backoff, doubling up to its cap; a recheck settled only by an answer
//! to a step made a horizon after the last unknown outcome, a removal ended
//! only by the store's answer or the owner's fence. Virtual time: each due
//! time is checked as "not a tick before, at the instant itself".

mod common;

use std::time::Duration;

use common::one_shard;
use zlink::core::creation::{HostDecision, RowAnswer};
use zlink::core::host_ask::HostEvent;
use zlink::core::recheck::{StepEnd, RECHECK_FIRST, RECHECK_HORIZON, RECHECK_MAX};
use zlink::core::session::SessionOwnerConfig;
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::{Error, Reason};
use zlink::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration,
};
use zlink::sim::actor_id;

const T0: Instant = Instant::ZERO;
const MS: Duration = Duration::from_millis(1);

/// A create's (or a replacement's) outcome unknown.
const WROTE_UNKNOWN: StepEnd = StepEnd::Unknown { writes: true };

/// What the core asks to make again at `now` (timers fired, events
/// drained): the Actors of its rechecks and removals.
fn due(core: &mut ShardCore, now: Instant) -> Vec<ActorId> {
    core.handle_timeout(now);
    let mut asked = Vec::new();
    while let Some(event) = core.poll_event() {
        match event {
            CoreEvent::Host(HostEvent::Recheck { actor }) => asked.push(actor),
            CoreEvent::Host(HostEvent::RemoveAgain { row }) => asked.push(row.id),
            CoreEvent::Host(other) => panic!("not asked for here: {other:?}"),
            _ => {}
        }
    }
    asked
}

/// Asserts that `actor`'s recheck comes `after` `from`, not a tick sooner;
/// returns when.
fn comes_at(core: &mut ShardCore, actor: &ActorId, from: Instant, after: Duration) -> Instant {
    let at = from + after;
    assert!(due(core, from + (after - MS)).is_empty(), "before {at:?}");
    assert_eq!(due(core, at), vec![actor.clone()], "at {at:?}");
    at
}

#[test]
fn core_recheck_an_unknown_create_is_asked_again_after_a_doubling_backoff_up_to_its_cap() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    let mut now = T0;
    let mut backoff = RECHECK_FIRST;
    // Each recheck's own step ends unknown too: the backoff doubles, capped.
    for _ in 0..7 {
        core.recheck_after_store(now, &actor, now, WROTE_UNKNOWN);
        let open: Vec<_> = core.rechecks().collect();
        assert_eq!(open, [(&actor, true)], "open and armed");
        now = comes_at(&mut core, &actor, now, backoff);
        backoff = (backoff * 2).min(RECHECK_MAX);
    }
    assert_eq!(backoff, RECHECK_MAX);
    // Once asked, nothing more comes until an answer arms it again: the
    // next recheck's answer, to a step made past the horizon, settles it.
    assert!(due(&mut core, now + RECHECK_MAX * 4).is_empty());
    let open: Vec<_> = core.rechecks().collect();
    assert_eq!(open, [(&actor, false)], "open, waiting for its answer");
    let later = now + RECHECK_MAX * 4;
    core.recheck_after_store(later, &actor, later, StepEnd::Answered);
    assert!(due(&mut core, later + RECHECK_MAX * 4).is_empty());
    assert_eq!(core.rechecks().count(), 0, "settled");
}

#[test]
fn core_recheck_an_answer_to_a_step_made_before_the_horizon_does_not_settle_it() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    core.recheck_after_store(T0, &actor, T0, WROTE_UNKNOWN);
    // A step made before the unknown one's horizon (several are in flight
    // at the store at once) is answered: the recheck still comes, at the
    // horizon at the earliest.
    let answered = T0 + 100 * MS;
    core.recheck_after_store(answered, &actor, T0 + 50 * MS, StepEnd::Answered);
    comes_at(&mut core, &actor, T0, RECHECK_HORIZON);
    // Its own step, made past the horizon, settles it.
    let made = T0 + RECHECK_HORIZON;
    core.recheck_after_store(made + 20 * MS, &actor, made, StepEnd::Answered);
    assert_eq!(core.rechecks().count(), 0);
    assert!(due(&mut core, made + RECHECK_MAX * 4).is_empty());
}

fn row_naming(owner: NodeRid) -> ActorRef {
    ActorRef {
        id: actor_id("p"),
        generation: ObjectGeneration(2),
        location: ActorLocation {
            mesh: MeshName::new("sim").unwrap(),
            owner,
            node_generation: NodeGeneration(1),
            authority: AuthorityOwnerGeneration(3),
            lease: OwnerLeaseGeneration(1),
        },
    }
}

#[test]
fn core_recheck_a_login_answered_with_a_row_naming_this_node_it_does_not_host_is_asked_again() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    // Another node's row, or an error: nothing to ask again.
    core.recheck_unhosted(T0, &actor, &Ok(row_naming(NodeRid(2))));
    let refused: Result<ActorRef, Error> = Err(Reason::StaleLocation.into());
    core.recheck_unhosted(T0, &actor, &refused);
    assert_eq!(core.rechecks().count(), 0);
    // This node's row, hosted nowhere here ("in motion"): asked again.
    core.recheck_unhosted(T0, &actor, &Ok(row_naming(NodeRid(1))));
    let now = comes_at(&mut core, &actor, T0, RECHECK_FIRST);
    // Its own look-up ends unknown: again, after a doubled backoff.
    core.recheck_after_store(now, &actor, now, StepEnd::Unknown { writes: false });
    comes_at(&mut core, &actor, now, RECHECK_FIRST * 2);
}

#[test]
fn core_recheck_an_unknown_removal_is_made_again_until_the_store_answers_or_the_owner_fences() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    let hosted = core
        .actors(T0)
        .host(
            actor.clone(),
            ObjectGeneration(2),
            AuthorityOwnerGeneration(3),
        )
        .unwrap();
    core.actors(T0).begin_destroy(&actor).unwrap();
    // Each removal made again ends unknown too: the backoff doubles, capped.
    let (mut now, mut backoff) = (T0, RECHECK_FIRST);
    for _ in 0..6 {
        core.actors(now).removal_unknown(&actor);
        now = comes_at(&mut core, &actor, now, backoff);
        backoff = (backoff * 2).min(RECHECK_MAX);
    }
    // Each names the incarnation as it was: its location is the version.
    core.actors(now).removal_unknown(&actor);
    now = now + RECHECK_MAX;
    core.handle_timeout(now);
    let again: Vec<CoreEvent> = std::iter::from_fn(|| core.poll_event()).collect();
    let row = hosted.clone();
    assert_eq!(again, vec![CoreEvent::Host(HostEvent::RemoveAgain { row })]);
    // The store answers (the removal made): nothing more is made again.
    core.actors(now).removal_unknown(&actor);
    core.actors(now).destroy(&actor).unwrap();
    assert!(due(&mut core, now + RECHECK_MAX * 2).is_empty());
    // A refusal ends it too: the Actor goes on, its removal never made again.
    let now = now + RECHECK_MAX * 2;
    core.actors(now)
        .host(
            actor.clone(),
            ObjectGeneration(4),
            AuthorityOwnerGeneration(5),
        )
        .unwrap();
    core.actors(now).begin_destroy(&actor).unwrap();
    core.actors(now).removal_unknown(&actor);
    core.actors(now).destroy_failed(&actor);
    assert!(due(&mut core, now + RECHECK_MAX * 2).is_empty());
    // Once fenced (§5), a due removal ends the destroy unknown instead.
    let now = now + RECHECK_MAX * 2;
    core.actors(now).begin_destroy(&actor).unwrap();
    core.actors(now).removal_unknown(&actor);
    core.actors(now).fence();
    core.handle_timeout(now + RECHECK_FIRST);
    let events: Vec<CoreEvent> = std::iter::from_fn(|| core.poll_event()).collect();
    assert_eq!(
        events,
        vec![CoreEvent::Host(HostEvent::DestroyUnknown {
            actor: actor.clone()
        })]
    );
    assert!(core.actor_owner().is_ending(&actor), "it stays ending");
}

#[test]
fn core_recheck_a_look_up_alone_arms_nothing_and_an_answered_one_settles_past_the_horizon() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    core.recheck_after_store(T0, &actor, T0, StepEnd::Unknown { writes: false });
    assert_eq!(core.rechecks().count(), 0, "a look-up leaves no row");
    core.recheck_after_store(T0, &actor, T0, WROTE_UNKNOWN);
    let made = T0 + RECHECK_HORIZON;
    core.recheck_after_store(made, &actor, made, StepEnd::Answered);
    assert_eq!(core.rechecks().count(), 0);
    // A fenced owner (§5) checks nothing more: due, it is dropped.
    core.recheck_after_store(made, &actor, made, WROTE_UNKNOWN);
    core.actors(made).fence();
    assert!(due(&mut core, made + RECHECK_FIRST).is_empty());
    assert_eq!(core.rechecks().count(), 0);
}

/// A recheck's answer: never a create, never an ask of the row's owner;
/// an orphan (a row naming this node, neither hosted nor moving here) is
/// removed at its version; an ending Actor is waited for, or, the owner
/// fenced, refused.
#[test]
fn core_recheck_found_removes_an_orphan_and_never_creates_or_asks_the_owner() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let actor = actor_id("p");
    let decided = |core: &mut ShardCore, answer| match core.recheck_found(&actor_id("p"), answer) {
        HostDecision::Decided(outcome) => Some(outcome.map_err(|e| e.reason())),
        HostDecision::RemoveOrphan(row) => {
            assert_eq!(row, row_naming(NodeRid(1)));
            None
        }
        other => panic!("a recheck decided {other:?}"),
    };
    // No row: nothing to clean, nothing created.
    let none = decided(&mut core, RowAnswer::Looked(None));
    assert_eq!(none, Some(Err(Reason::StaleLocation)));
    // Another node's row: its own (no ask, 71).
    let theirs = row_naming(NodeRid(2));
    let other = decided(&mut core, RowAnswer::Looked(Some(theirs.clone())));
    assert_eq!(other, Some(Ok(theirs)));
    // This node's row, hosted nowhere here: an orphan, removed.
    let orphan = decided(&mut core, RowAnswer::Looked(Some(row_naming(NodeRid(1)))));
    assert_eq!(orphan, None);
    assert_eq!(core.counters().get(FlowTrace::OrphanRowFound), 1);
    // Hosted here: that is it; the look-up goes to the store all the same.
    core.actors(T0)
        .host(
            actor.clone(),
            ObjectGeneration(2),
            AuthorityOwnerGeneration(3),
        )
        .unwrap();
    assert_eq!(core.recheck_step(&actor), None);
    let hosted = decided(&mut core, RowAnswer::Looked(Some(row_naming(NodeRid(1)))));
    assert_eq!(
        hosted.and_then(Result::ok).map(|r| r.id),
        Some(actor.clone())
    );
    // Ending: wait for the destroy; fenced meanwhile, refused.
    core.actors(T0).begin_destroy(&actor).unwrap();
    assert_eq!(core.recheck_step(&actor), Some(HostDecision::AfterDestroy));
    core.actors(T0).fence();
    let refused = core.recheck_step(&actor);
    assert_eq!(
        refused,
        Some(HostDecision::Decided(Err(Reason::LeaseExpired.into())))
    );
    assert_eq!(core.host_step(&actor, None), refused);
}

/// The simulator's destroy answers as the runtime's (`destroy_answered`
/// keeps the caller's reply while the removal's outcome is unknown): a
/// destroy whose row removal ended `StoreUnavailable` gets no answer then,
/// and once the removal made again after its backoff removes the row, the
/// final one — `Ok`, the incarnation ended — not the first
/// `StoreUnavailable`.
#[test]
fn core_a_destroy_whose_removal_was_unknown_is_answered_with_its_final_outcome() {
    use zlink::sim::{Answer, StoreBehavior, STORE_CALL_TIMEOUT};
    // Given "a" hosted on a node, and a store that hangs,
    let mut mesh = common::mesh();
    let node = mesh.add_node(1);
    let a = mesh.create(node, "a");
    mesh.set_store(StoreBehavior::Hang);
    // when "a" is destroyed, its removal ending `StoreUnavailable` at the
    // call timeout, its outcome is unknown: the Actor stays ending, the removal is due again after
    // the backoff, and the destroy is not answered yet;
    let ticket = mesh.start_destroy(node, &a.id).unwrap();
    mesh.advance(STORE_CALL_TIMEOUT);
    assert!(mesh.node(node).core().actor_owner().is_ending(&a.id));
    assert_eq!(mesh.next_timer(), Some(mesh.now() + RECHECK_FIRST));
    assert_eq!(mesh.take_answers().get(&ticket), None);
    // then, the store back, the removal made again ends the incarnation,
    // and that is the destroy's answer.
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(RECHECK_FIRST);
    mesh.run();
    assert_eq!(
        mesh.take_answers().get(&ticket),
        Some(&Answer::Destroy(Ok(())))
    );
    assert_eq!(mesh.node(node).core().actor_owner().actor_ref(&a.id), None);
}
