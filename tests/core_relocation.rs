//! Core tests for the Actor owner's side of live relocation (§8, §8.1, §9,
//! §12; docs/relocation.md): the coordinator on the source, the target's
//! handoff, the durable abort, Message Follow and the X5 pre-commit refusal,
//! on the sans-IO cores with virtual time. The mesh's stand-in runtime
//! answers capture, restore and the Location Store (`zlink::sim`).

mod common;

use std::time::Duration;

use common::*;
use zlink::core::creation::OwnRow;
use zlink::core::relocation::{AbortAnswer, CasAnswer, RelocationEvent, StoreOp, CUTOVER_FALLBACK};
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{ActorRef, NodeRid, RelocationId};
use zlink::sim::{actor_id, error, Journal, Mesh, RestoreBehavior, StoreBehavior, StoreDone};
use zlink::store::LocationStore;
use zlink::wire::node::{
    ActorReply, ActorSend, ActorSendBody, BindTerminal, BoundSessionBind, Command, NodeRecord,
    SessionRelocationRoute,
};

/// Node 1 holds sessions, node 2 is the source, node 3 the target; "a" is
/// created at the source (a Location Store row and a hosted Actor).
fn three_nodes() -> (Mesh, NodeRid, NodeRid, NodeRid, ActorRef) {
    let mut mesh = mesh();
    let (sessions, source, target) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    (mesh, sessions, source, target, a)
}

fn relocate(mesh: &mut Mesh, source: NodeRid, actor: &str, target: NodeRid) -> RelocationId {
    let relocation = mesh
        .relocations(source)
        .relocate(&actor_id(actor), target)
        .unwrap_or_else(|e| panic!("relocate {actor} refused: {e}"));
    mesh.run();
    relocation
}

/// The caller's completion of a relocation, if it came.
fn finished(
    mesh: &Mesh,
    node: NodeRid,
    relocation: RelocationId,
) -> Option<Result<ActorRef, Error>> {
    mesh.node(node)
        .relocation_events
        .iter()
        .find_map(|e| match e {
            RelocationEvent::Finished {
                relocation: r,
                outcome,
                ..
            } if *r == relocation => Some(outcome.clone()),
            _ => None,
        })
}

/// `a` stays where it was, at `source`: owner in the Location Store, and
/// hosted there as the same incarnation.
fn stays_at(mesh: &Mesh, source: NodeRid, a: &ActorRef) {
    assert_eq!(
        mesh.store().lookup(&a.id).unwrap().unwrap().location.owner,
        source
    );
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a.clone())
    );
}

/// The commands sent on the link `from` → `to`, in order.
fn commands(mesh: &Mesh, from: NodeRid, to: NodeRid) -> Vec<u8> {
    mesh.tap()
        .iter()
        .filter(|t| t.from == from && t.to == to)
        .map(|t| t.command().code())
        .collect()
}

/// The position in the journal of the first entry `matches` accepts.
fn position(mesh: &Mesh, what: &str, matches: impl Fn(&Journal) -> bool) -> usize {
    mesh.journal()
        .iter()
        .position(matches)
        .unwrap_or_else(|| panic!("the journal has no {what}"))
}

fn is_event(entry: &Journal, node: NodeRid, pick: impl Fn(&RelocationEvent) -> bool) -> bool {
    matches!(entry, Journal::Event { node: n, event: CoreEvent::Relocation(e), .. } if *n == node && pick(e))
}

fn is_sent(entry: &Journal, from: NodeRid, command: Command) -> bool {
    matches!(entry, Journal::Sent(t) if t.from == from && t.command() == command)
}

/// The store operations carried out, with their answers.
fn store_ops(mesh: &Mesh) -> Vec<(NodeRid, StoreOp, StoreDone)> {
    mesh.journal()
        .iter()
        .filter_map(|j| match j {
            Journal::Store { node, op, done, .. } => Some((*node, op.clone(), done.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn core_relocation_commits_an_unbound_actor_keeping_its_incarnation() {
    // Given "a", unbound, at the source, with some state.
    let (mut mesh, _, source, target, a) = three_nodes();
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();

    // When the source relocates it to the target.
    let relocation = relocate(&mut mesh, source, "a", target);

    // Then the caller gets the Actor at the target: same ActorId and
    // ObjectGeneration, a greater authority owner generation.
    let moved = finished(&mesh, source, relocation)
        .expect("the relocation finished")
        .expect("the relocation committed");
    assert_eq!(moved.id, a.id);
    assert_eq!(moved.generation, a.generation);
    assert_eq!(moved.location.owner, target);
    assert!(moved.location.authority > a.location.authority);
    // The Location Store agrees: the target's CAS moved the row.
    let after = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(after.location.owner, target);
    assert_eq!(after.object, row.object);
    assert_eq!(after.location.authority, moved.location.authority);
    // The state moved; the source no longer hosts the Actor.
    assert_eq!(mesh.node(target).states.get(&a.id), Some(&b(b"state of a")));
    assert!(!mesh.node(source).states.contains_key(&a.id));
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        Some(moved.clone())
    );
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    // Unbound: no 42, 43 or 44; the handoff is 60 → 61 → 63 → 65.
    assert_eq!(commands(&mesh, source, target), vec![60, 63]);
    assert_eq!(commands(&mesh, target, source), vec![61, 65]);
    for seal in [
        Command::SessionRelocationSeal,
        Command::SessionRelocationSealed,
    ] {
        assert!(tapped(&mesh, seal).is_empty());
    }
    assert!(tapped(&mesh, Command::SessionRelocationRoute).is_empty());
    assert_eq!(count(&mesh, target, FlowTrace::RelocationCommitted), 1);
    assert_eq!(count(&mesh, target, FlowTrace::CutoverTimeout), 0);
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));

    // And a session binding the new ActorRef is served by the target.
    let s = mesh.connect(NodeRid(1));
    let bound = bind_ok(&mut mesh, NodeRid(1), s, &moved);
    assert_eq!(bound.location.owner, target);
    mesh.request(NodeRid(1), s, &moved, b"ping").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, target, "a"), vec![b(b"ping")]);
}

#[test]
fn core_relocation_abort_on_61_error_confirms_the_durable_abort_first() {
    // Given a target whose Restore fails.
    let (mut mesh, _, source, target, a) = three_nodes();
    let refusal = error(Reason::NoActorFactory);
    mesh.set_restore(target, RestoreBehavior::Fail(refusal.clone()));

    // When the source relocates "a" there.
    let relocation = relocate(&mut mesh, source, "a", target);

    // Then the target answered 61 with its error, and the caller gets it.
    assert_eq!(finished(&mesh, source, relocation), Some(Err(refusal)));
    assert_eq!(commands(&mesh, target, source), vec![61]);
    // The durable abort was recorded in the store before anything else the
    // abort does: before the source reopens and before the 64.
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0].0, source);
    assert!(matches!(ops[0].1, StoreOp::AbortRelocation { .. }));
    assert_eq!(ops[0].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    let abort_at = position(&mesh, "durable abort", |j| {
        matches!(j, Journal::Store { .. })
    });
    let ready_at = position(&mesh, "61", |j| {
        is_sent(j, target, Command::RelocationReady)
    });
    let reopen_at = position(&mesh, "reopen", |j| {
        is_event(j, source, |e| matches!(e, RelocationEvent::Reopen { .. }))
    });
    let discard_at = position(&mesh, "64", |j| {
        is_sent(j, source, Command::RelocationDiscard)
    });
    let done_at = position(&mesh, "finished", |j| {
        is_event(j, source, |e| matches!(e, RelocationEvent::Finished { .. }))
    });
    assert!(ready_at < abort_at);
    assert!(
        abort_at < reopen_at,
        "the store confirms before the source reopens"
    );
    assert!(abort_at < discard_at, "the store confirms before the 64");
    assert!(reopen_at < done_at);
    // The source stays owner and keeps the Actor; a late CAS for this
    // relocation could not succeed.
    stays_at(&mesh, source, &a);
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(count(&mesh, source, FlowTrace::RelocationAborted), 1);
    // Nothing stays armed or in flight.
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
    assert_eq!(mesh.node(target).core().armed_timers(), 0);
    // And it can be relocated again once the target recovers.
    mesh.set_restore(target, RestoreBehavior::Succeed);
    let again = relocate(&mut mesh, source, "a", target);
    assert!(matches!(finished(&mesh, source, again), Some(Ok(_))));
}

#[test]
fn core_relocation_abort_on_61_deadline_not_before_prepare_timeout() {
    // Given a target whose Restore never finishes.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    let prepare_at = tapped(&mesh, Command::RelocationPrepare)[0].at;
    let prepare_timeout = Duration::from_millis(1_500);
    let deadline = prepare_at + prepare_timeout;

    // When time reaches 1 µs before the 1,500 ms prepare deadline, nothing
    // has ended.
    advance_to(&mut mesh, prepare_at + (prepare_timeout - MICRO));
    assert_eq!(finished(&mesh, source, relocation), None);
    assert!(store_ops(&mesh).is_empty());
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));

    // Then at the deadline the coordinator aborts: durable abort, 64, and
    // the caller's DeadlineExceeded.
    advance_to(&mut mesh, deadline);
    mesh.run();
    let outcome = finished(&mesh, source, relocation).expect("the relocation ended");
    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert_eq!(commands(&mesh, source, target), vec![60, 64]);
    // The target dropped what it prepared; a late restore answer is stale.
    assert!(!mesh.node(target).core().relocation().is_arriving(&a.id));
    mesh.finish_restore(target, Ok(()));
    mesh.run();
    assert_eq!(commands(&mesh, target, source), Vec::<u8>::new());
    assert_eq!(count(&mesh, target, FlowTrace::RelocationRecordStale), 1);
    assert_eq!(
        mesh.store().lookup(&a.id).unwrap().unwrap().location.owner,
        source
    );
}

#[test]
fn core_relocation_abort_when_the_target_is_unreachable_before_relay_ready() {
    // Given no link from the source to the target.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_linked(source, target, false);

    // When the source relocates "a" there.
    let relocation = relocate(&mut mesh, source, "a", target);

    // Then the 60 ends at once with PeerUnreachable, after the durable abort.
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::PeerUnreachable)))
    );
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a.clone())
    );
    assert_eq!(
        mesh.store().lookup(&a.id).unwrap().unwrap().location.owner,
        source
    );
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

#[test]
fn core_relocation_a_link_that_drops_before_relay_ready_aborts_the_move_at_once() {
    // Given a move whose 60 reached the target, which has not answered yet
    // (its restore is held),
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(commands(&mesh, source, target), vec![60]);
    assert!(store_ops(&mesh).is_empty());
    // when the link between them goes down (issue 20 item 4),
    mesh.set_linked(source, target, false);
    mesh.run();
    // then the move aborts now, not at the prepare deadline: the durable
    // abort first, then the source reopens and the caller gets the error.
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::PeerUnreachable)))
    );
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a.clone())
    );
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

#[test]
fn core_relocation_cutover_fallback_at_exactly_1000_ms_with_a_warning() {
    // Given a relocation whose cutover (63) is lost on the way.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(source, target, Command::RelocationCutover, true);
    let relocation = relocate(&mut mesh, source, "a", target);
    let ready_at = tapped(&mesh, Command::RelocationReady)[0].at;
    let fallback = ready_at + CUTOVER_FALLBACK;
    assert_eq!(CUTOVER_FALLBACK, Duration::from_millis(1_000));

    // When 999.999 ms have passed since the 61, the target has not moved.
    advance_to(&mut mesh, ready_at + (CUTOVER_FALLBACK - MICRO));
    assert!(store_ops(&mesh).is_empty());
    assert_eq!(count(&mesh, target, FlowTrace::CutoverTimeout), 0);
    assert_eq!(finished(&mesh, source, relocation), None);

    // Then at exactly 1,000 ms it warns cutover_timeout and proceeds: CAS,
    // commit, 65.
    advance_to(&mut mesh, fallback);
    assert_eq!(count(&mesh, target, FlowTrace::CutoverTimeout), 1);
    assert!(FlowTrace::CutoverTimeout.is_warning());
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].0, target);
    assert!(matches!(
        ops[0].2,
        StoreDone::Cas(Ok(CasAnswer::Swapped { .. }))
    ));
    mesh.run();
    let moved = finished(&mesh, source, relocation).unwrap().unwrap();
    assert_eq!(moved.location.owner, target);
    assert_eq!(
        mesh.store().lookup(&a.id).unwrap().unwrap().location.owner,
        target
    );
}

#[test]
fn core_relocation_cas_failure_after_relay_ready_never_reopens_the_source() {
    // Given a relocation whose target CAS will find another version (the
    // row moved under it: another owner took it meanwhile).
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(mesh.held_store(), 1, "the target's CAS waits");
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    let other = mesh.add_node(4);
    let claim = mesh
        .store()
        .acquire_lease(other, zlink::ids::NodeGeneration(1), &row.location.mesh)
        .unwrap()
        .claim();
    let rival = RelocationId {
        coordinator: other,
        sequence: 1,
    };
    mesh.store()
        .compare_and_set(&a.id, row.version(), rival, &claim)
        .unwrap();

    // When the target's CAS is carried out.
    mesh.release_store();
    mesh.run();

    // Then it failed, the target discarded and told the source (65 Err, no
    // 44), and the source did not reopen: the relocation failed.
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert!(
        matches!(&ops[0].2, StoreDone::Cas(Ok(CasAnswer::Conflict { current, .. })) if current.owner == other),
        "{:?}",
        ops[0].2
    );
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::StaleAuthority)))
    );
    assert_eq!(commands(&mesh, target, source), vec![61, 65]);
    assert!(tapped(&mesh, Command::SessionRelocationRoute).is_empty());
    let reopened = mesh
        .node(source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. }));
    assert!(!reopened, "no path reopens the source after relay-ready");
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert!(!mesh.node(target).states.contains_key(&a.id));
    assert_eq!(count(&mesh, source, FlowTrace::RelocationFailed), 1);
    // A record for the Actor at the source now ends with Unavailable.
    let s = mesh.connect(NodeRid(1));
    let refused = mesh.bind(NodeRid(1), s, &a).unwrap_err();
    assert_eq!(refused, error(Reason::StaleLocation));
}

#[test]
fn core_relocation_a_cas_whose_outcome_is_unknown_is_made_again_and_the_instance_kept() {
    // Given a relocation past relay-ready whose target CAS cannot reach the
    // store (its outcome unknown: issue 19 item 3),
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_store(StoreBehavior::Down);
    let relocation = relocate(&mut mesh, source, "a", target);
    let cas_ops = |mesh: &Mesh| {
        store_ops(mesh)
            .iter()
            .filter(|(_, op, _)| matches!(op, StoreOp::TakeAuthority { .. }))
            .count()
    };
    assert_eq!(cas_ops(&mesh), 1);
    // then the target neither serves nor drops the handed-over instance: no
    // 65, no completion at the source, nothing hosted, the state kept,
    assert_eq!(commands(&mesh, target, source), vec![61]);
    assert_eq!(finished(&mesh, source, relocation), None);
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(count(&mesh, target, FlowTrace::RelocationStoreRetry), 1);
    // and makes the CAS again after the store retry interval, never sooner,
    mesh.advance(Duration::from_millis(200) - MICRO);
    assert_eq!(cas_ops(&mesh), 1);
    mesh.advance(MICRO);
    assert_eq!(cas_ops(&mesh), 2);
    assert_eq!(count(&mesh, target, FlowTrace::RelocationStoreRetry), 2);
    // until the store answers: the move commits at the target, with the
    // incarnation it was handed.
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(200));
    mesh.run();
    assert_eq!(cas_ops(&mesh), 3);
    let moved = mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&a.id)
        .expect("the target hosts the Actor once the CAS swapped");
    assert_eq!(moved.generation, a.generation);
    assert_eq!(commands(&mesh, target, source), vec![61, 65]);
    assert!(matches!(finished(&mesh, source, relocation), Some(Ok(_))));
    assert_eq!(count(&mesh, source, FlowTrace::RelocationFailed), 0);
}

#[test]
fn core_relocation_a_cas_applied_with_its_answer_lost_commits_once_when_made_again() {
    // Given a relocation whose target CAS is applied but its answer lost
    // (a call timeout after the store swapped: issue 19 item 3),
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_store(StoreBehavior::LoseReply);
    let relocation = relocate(&mut mesh, source, "a", target);
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 1);
    assert_eq!(
        ops[0].2,
        StoreDone::Cas(Err(error(Reason::StoreUnavailable)))
    );
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(row.location.owner, target, "the CAS was applied");
    // the target serves nothing yet and tells nobody,
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(commands(&mesh, target, source), vec![61]);
    // and a login at the target meanwhile, which finds the row naming the
    // target, creates nothing there: the Actor is in motion, not lost (the
    // player keeps the state its move carries; issue 19 item 3).
    let row_ref = row.actor_ref();
    assert_eq!(mesh.node(target).core().own_row(&row_ref), OwnRow::InMotion);
    // A row of another incarnation beside the arrival is not in motion
    // (the simulator's seed 11751): it names an incarnation this node lost.
    let mut other = row_ref.clone();
    other.generation = zlink::ids::ObjectGeneration(other.generation.0 + 1);
    assert_eq!(mesh.node(target).core().own_row(&other), OwnRow::Lost);
    let got = mesh.host_or_get(target, &a.id).unwrap();
    assert_eq!(got.location.owner, target);
    assert_eq!(count(&mesh, target, FlowTrace::LostIncarnationReplaced), 0);
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );

    // When the CAS is made again and finds the row naming this very
    // lifecycle under this lease (a conflict by version),
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(200));
    mesh.run();
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 2);
    assert!(
        matches!(&ops[1].2, StoreDone::Cas(Ok(CasAnswer::Conflict { current, .. })) if current.owner == target),
        "{:?}",
        ops[1].2
    );
    // then that conflict is its own swap: the move commits once, under the
    // authority the first CAS took, and the row is not touched again.
    let moved = mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&a.id)
        .expect("the target hosts the Actor");
    assert_eq!(moved.location.authority, row.location.authority);
    assert_eq!(mesh.store().lookup(&a.id).unwrap().unwrap(), row);
    assert_eq!(commands(&mesh, target, source), vec![61, 65]);
    assert!(matches!(finished(&mesh, source, relocation), Some(Ok(_))));
}

#[test]
fn core_relocation_a_cas_made_again_over_a_new_incarnation_at_the_target_is_no_swap_of_its_own() {
    // Given a target whose CAS outcome is unknown (the store down), and a
    // source whose lease lapses meanwhile (its process died), so the row is
    // no longer live,
    let mut mesh = Mesh::with_lease_term(LATENCY, Duration::from_secs(2));
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    mesh.set_store(StoreBehavior::Down);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.restart(source);
    // (in steps: the target's lease is renewed as time passes)
    for _ in 0..25 {
        mesh.advance(Duration::from_millis(100));
    }
    // when a login at the target creates a new incarnation there (the
    // store's ordinary create, the old lease having lapsed),
    let fresh = mesh.host_or_get(target, &a.id).unwrap();
    assert_ne!(fresh.generation, a.generation);
    assert_eq!(fresh.location.owner, target);
    // and the CAS is made again: the row names this very lifecycle under
    // this lease, but another incarnation,
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(200));
    mesh.run();
    let cas = store_ops(&mesh)
        .into_iter()
        .filter_map(|(_, op, done)| matches!(op, StoreOp::TakeAuthority { .. }).then_some(done))
        .last();
    assert!(
        matches!(&cas, Some(StoreDone::Cas(Ok(CasAnswer::Conflict { object, .. }))) if *object == fresh.generation),
        "{cas:?}"
    );
    // then that conflict is no swap of its own: the move ends
    // StaleAuthority, the handed instance is dropped, the new incarnation
    // stays hosted with its row untouched (seed 7247).
    // (Its 65 is for the source's past lifecycle: dropped, journaled.)
    let outcomes: Vec<_> = mesh
        .journal()
        .iter()
        .filter_map(|entry| match entry {
            Journal::AnswerDropped(t) => match &t.record {
                NodeRecord::RelocationFinished(f) if f.relocation == relocation => {
                    Some(f.outcome.clone())
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, vec![Err(error(Reason::StaleAuthority))]);
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        Some(fresh.clone())
    );
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(row.object, fresh.generation);
}

#[test]
fn core_relocation_a_login_at_a_source_holding_the_actor_captured_creates_no_row() {
    // Given a move whose target took the row (its CAS swapped) while the
    // source never heard (its 61 and 65 lost), so the source, at its
    // prepare deadline, asks the store for a durable abort that cannot get
    // through (the store down), keeping the Actor captured,
    let mut mesh = Mesh::with_lease_term(LATENCY, Duration::from_secs(2));
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_dropping(target, source, Command::RelocationFinished, true);
    relocate(&mut mesh, source, "a", target);
    for _ in 0..12 {
        mesh.advance(Duration::from_millis(100));
    }
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(
        row.location.owner, target,
        "the target's CAS swapped the row"
    );
    mesh.set_store(StoreBehavior::Down);
    // and the target's process then dies, its lease lapsing (the row is no
    // longer live: the moved incarnation is lost with it, L6),
    mesh.restart(target);
    for _ in 0..30 {
        mesh.advance(Duration::from_millis(100));
    }
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(mesh.store().lookup(&a.id).unwrap(), None);

    // when a login at the source finds no live row,
    let login = mesh.host_or_get(source, &a.id);

    // then, as the runtime's `host_without_store` does, it is given the
    // instance the source still holds (a bind there is refused while it is
    // sealed, and the client retries), and no row is created: a new
    // incarnation could not be hosted beside the captured one, and its row
    // would name the source with nobody serving it (seed 4330: the abort
    // then took that row for a move elsewhere, and no node hosted the
    // Actor its row named).
    assert_eq!(login, Ok(a.clone()));
    assert_eq!(mesh.store().lookup(&a.id).unwrap(), None);
    // Once the store answers, the abort finds no row and the move ends;
    // the next login creates a new incarnation, hosted where its row says.
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(500));
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    let fresh = mesh.host_or_get(source, &a.id).unwrap();
    assert_ne!(fresh.generation, a.generation);
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(row.actor_ref(), fresh);
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(fresh)
    );
}

#[test]
fn core_relocation_a_durable_abort_applied_with_its_answer_lost_completes_when_made_again() {
    // Given a target that fails its Restore, and a durable abort applied
    // with its answer lost,
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
    mesh.set_store(StoreBehavior::LoseReply);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(finished(&mesh, source, relocation), None);
    // when it is made again, the store confirms it, and the source reopens
    // with the Actor it kept.
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(200));
    mesh.run();
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[1].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::NoActorFactory)))
    );
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a)
    );
}

#[test]
fn core_relocation_late_target_cas_after_a_durable_abort_fails() {
    // Given a target that restores slowly and never hears the 64.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    mesh.set_dropping(source, target, Command::RelocationDiscard, true);
    let relocation = relocate(&mut mesh, source, "a", target);

    // When the coordinator's prepare deadline passes (durable abort), and
    // only then the target finishes its Restore, answers 61 and — no
    // cutover coming — falls back to its CAS 1,000 ms later.
    mesh.advance(Duration::from_millis(1_500));
    assert!(finished(&mesh, source, relocation).is_some());
    mesh.finish_restore(target, Ok(()));
    mesh.advance(CUTOVER_FALLBACK);
    mesh.run();

    // Then the CAS found the relocation recorded aborted: the row stays the
    // source's, the target hosts nothing, and its 65 is stale at the source.
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert_eq!(ops[0].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert_eq!(ops[1].0, target);
    assert_eq!(ops[1].2, StoreDone::Cas(Ok(CasAnswer::RelocationAborted)));
    let row = mesh.store().lookup(&a.id).unwrap().unwrap();
    assert_eq!(row.location.owner, source);
    assert_eq!(row.location.authority, a.location.authority);
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert!(!mesh.node(target).states.contains_key(&a.id));
    assert_eq!(count(&mesh, source, FlowTrace::RelocationRecordStale), 2);
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a)
    );
}

#[test]
fn core_x5_bind_during_pre_commit_seal_is_unavailable() {
    // Given "a" in its relocation's pre-commit state (the target restores).
    let (mut mesh, sessions, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));

    // When a session binds it.
    let s = mesh.connect(sessions);
    let refused = mesh.bind(sessions, s, &a).unwrap_err();

    // Then the Actor owner refuses it: Unavailable, relocation in progress,
    // and nothing is forwarded to the target.
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    assert_eq!(refused.reason(), Reason::RelocationSealed);
    assert_eq!(commands(&mesh, source, target), vec![60]);
    assert_eq!(registered(&mesh, source, "a"), None);

    // And once the relocation aborted (the target fails), the same bind
    // succeeds at the source.
    mesh.finish_restore(target, Err(error(Reason::NoActorFactory)));
    mesh.run();
    assert!(matches!(finished(&mesh, source, relocation), Some(Err(_))));
    let s2 = mesh.connect(sessions);
    assert_eq!(bind_ok(&mut mesh, sessions, s2, &a).location.owner, source);
}

#[test]
fn core_s3_stale_actor_ref_follows_once_then_unavailable() {
    // Given "a" relocated from the source to the target, and the old
    // ActorRef still in a caller's hands.
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let relocation = relocate(&mut mesh, source, "a", target);
    let moved = finished(&mesh, source, relocation).unwrap().unwrap();
    let committed_at = tapped(&mesh, Command::RelocationFinished)[0].at + LATENCY;
    let lifetime = Duration::from_millis(30_000);
    let expiry = committed_at + lifetime;

    // When a session binds the stale ActorRef.
    let s = mesh.connect(sessions);
    let bound = bind_ok(&mut mesh, sessions, s, &stale);

    // Then the source forwarded the bind exactly once over Message Follow,
    // the target registered it, and the terminal names the target's route.
    let forwarded: Vec<_> = tapped(&mesh, Command::BoundSessionBind)
        .into_iter()
        .filter(|t| t.from == source && t.to == target)
        .collect();
    assert_eq!(forwarded.len(), 1);
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), 1);
    assert_eq!(bound.location, moved.location);
    assert_eq!(bound.generation, stale.generation);
    assert!(registered(&mesh, target, "a").is_some());
    // The binding relays to the target directly.
    mesh.request(sessions, s, &bound, b"ping").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, target, "a"), vec![b(b"ping")]);
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), 1);

    // When one stale bind reaches the source 1 µs before the follow entry's
    // lifetime (30,000 ms from the commit) runs out, and another exactly at
    // it.
    advance_to(&mut mesh, committed_at + (lifetime - LATENCY - MICRO));
    let (s2, s3) = (mesh.connect(sessions), mesh.connect(sessions));
    let early = bind_pending(&mut mesh, sessions, s2, &stale);
    mesh.advance(MICRO);
    let late = bind_pending(&mut mesh, sessions, s3, &stale);
    mesh.run();

    // Then the first still follows; the second ends with Unavailable, and
    // nothing more is forwarded.
    assert!(mesh.now() > expiry);
    let early = mesh.bind_outcome(sessions, early).expect("a terminal");
    assert_eq!(early.unwrap().location, moved.location);
    let late = mesh.bind_outcome(sessions, late).expect("a terminal");
    assert_eq!(late, Err(error(Reason::StaleLocation)));
    assert!(!mesh.node(source).core().relocation().follows(&stale.id));
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), 2);
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 0);
}

#[test]
fn core_l7_command_44_gets_no_response() {
    // Given a session owner node and a peer.
    let mut mesh = mesh();
    let (owner, peer) = (mesh.add_node(1), mesh.add_node(2));
    let s = mesh.connect(owner);
    let seal = zlink::wire::node::SealIdentity {
        relocation: RelocationId {
            coordinator: peer,
            sequence: 1,
        },
        session: zlink::ids::SessionRef {
            owner,
            lifecycle: zlink::ids::NodeGeneration(1),
            owner_id: zlink::ids::SessionOwnerId(0),
            session: s,
        },
        binding: zlink::ids::BindingGeneration(1),
    };

    // When a 44 abort and a 44 commit reach it.
    let commit = zlink::wire::node::RouteCommit {
        seal,
        actor: actor_id("a"),
        object_generation: zlink::ids::ObjectGeneration(1),
        target_mesh: zlink::ids::MeshName::new("sim").unwrap(),
        target: peer,
        target_node_generation: zlink::ids::NodeGeneration(1),
        authority: zlink::ids::AuthorityOwnerGeneration(2),
        lease: zlink::ids::OwnerLeaseGeneration(1),
    };
    for route in [
        SessionRelocationRoute::Abort(seal),
        SessionRelocationRoute::Commit(commit),
    ] {
        mesh.inject(peer, owner, NodeRecord::SessionRelocationRoute(route));
        mesh.run();
    }

    // Then nothing at all goes back: 44 is one-way, with no response.
    assert_eq!(commands(&mesh, owner, peer), Vec::<u8>::new());
    assert_eq!(tapped(&mesh, Command::SessionRelocationRoute).len(), 2);
}

#[test]
fn core_relocation_durable_abort_is_retried_until_the_store_confirms_it() {
    // Given a target that fails its Restore while the store is down.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
    mesh.set_store(StoreBehavior::Down);
    let relocation = relocate(&mut mesh, source, "a", target);
    let reopened = |mesh: &Mesh| {
        mesh.node(source)
            .relocation_events
            .iter()
            .any(|e| matches!(e, RelocationEvent::Reopen { .. }))
    };

    // When the first durable abort fails, nothing else of the abort happens:
    // the source stays captured, no 64, no completion.
    assert_eq!(count(&mesh, source, FlowTrace::RelocationStoreRetry), 1);
    assert!(!reopened(&mesh));
    assert_eq!(commands(&mesh, source, target), vec![60]);
    assert_eq!(finished(&mesh, source, relocation), None);
    // It is retried every 200 ms, never sooner.
    mesh.advance(Duration::from_millis(200) - MICRO);
    assert_eq!(count(&mesh, source, FlowTrace::RelocationStoreRetry), 1);
    mesh.advance(MICRO);
    assert_eq!(count(&mesh, source, FlowTrace::RelocationStoreRetry), 2);

    // Then once the store answers, the abort completes in its order.
    mesh.set_store(StoreBehavior::Immediate);
    mesh.advance(Duration::from_millis(200));
    mesh.run();
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[2].2, StoreDone::Abort(Ok(AbortAnswer::Aborted)));
    assert!(reopened(&mesh));
    assert_eq!(commands(&mesh, source, target), vec![60, 64]);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::NoActorFactory)))
    );
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a)
    );
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

#[test]
fn core_relocation_abort_that_loses_the_race_to_the_targets_cas_commits() {
    // Given a relocation whose 61 is lost, so the coordinator's prepare
    // deadline passes while the target — ready, no cutover coming — falls
    // back to its CAS; both store operations wait.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(
        mesh.held_store(),
        2,
        "the target's CAS, then the durable abort"
    );

    // When the store takes the target's CAS first, then the abort.
    mesh.release_store();
    mesh.run();
    mesh.release_store();
    mesh.run();

    // Then the abort learns that authority moved to the target: the
    // relocation committed, the source never reopened and the caller gets
    // the Actor at the target.
    let ops = store_ops(&mesh);
    assert!(matches!(
        ops[0].2,
        StoreDone::Cas(Ok(CasAnswer::Swapped { .. }))
    ));
    assert_eq!(
        ops[1].2,
        StoreDone::Abort(Ok(AbortAnswer::Moved { owner: target }))
    );
    let moved = finished(&mesh, source, relocation).unwrap().unwrap();
    assert_eq!(moved.location.owner, target);
    let reopened = mesh
        .node(source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. }));
    assert!(!reopened);
    assert!(!commands(&mesh, source, target).contains(&64));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        Some(moved)
    );
    assert!(mesh.node(source).core().relocation().follows(&a.id));
}

/// Found by the zlink-sim soak (seed 18094): the target's CAS won the race
/// against the durable abort, the moved Actor was destroyed at the target
/// (its row removed), and only then did the abort reach the store, which
/// found no row. The coordinator took `Absent` for `Aborted` and reopened
/// the source instance: an Actor no route could reach kept its binding, and
/// a later create made a second incarnation with a current binding of its
/// own (two current bindings of one Actor).
#[test]
fn core_relocation_an_abort_that_finds_no_row_never_reopens_the_source() {
    // Given a relocation whose 61 is lost, so the coordinator's durable
    // abort races the target's fallback CAS at a store that holds both.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");

    // When the target's CAS commits, the Actor is destroyed at the target,
    // and then the abort reaches the store.
    mesh.release_store();
    mesh.run();
    mesh.destroy(target, &a.id).unwrap();
    mesh.release_store();
    mesh.run();

    // Then the abort finds no row, and the source does not reopen: it runs
    // no instance of "a" and the move ends with StaleAuthority.
    let ops = store_ops(&mesh);
    assert_eq!(ops[1].2, StoreDone::Abort(Ok(AbortAnswer::Absent)));
    let reopened = mesh
        .node(source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. }));
    assert!(!reopened, "the source reopened an Actor it no longer owns");
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::StaleAuthority)))
    );

    // And a create of "a" makes the one incarnation there is.
    mesh.set_store(StoreBehavior::Immediate);
    let again = mesh.create(target, "a");
    assert_ne!(again.generation, a.generation);
    for node in [source, target] {
        let hosted = mesh.node(node).core().actor_owner().actor_ref(&a.id);
        assert!(hosted.is_none() || hosted == Some(again.clone()));
    }
}

/// Found by the zlink-sim soak (seed 67581): a move's 62 (ingress hold)
/// reached the target after its commit, when the target had already begun
/// moving the Actor on. The target merged the late work straight onto the
/// Actor's lane, so a source sealed and captured for the next move ran a
/// request (X5: a sealed source runs nothing).
#[test]
fn core_relocation_a_late_62_at_an_actor_moving_on_joins_the_next_moves_hold() {
    // Given s bound to "a" at the source, and a move to the target whose 61
    // is lost, so the source's durable abort races the target's fallback
    // CAS at a store that holds both; a request of s reaches the source
    // after its capture (the ingress hold).
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let next = mesh.add_node(4);
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let held = mesh.request(sessions, s, &a, b"held").unwrap();
    mesh.relocations(source).relocate(&a.id, target).unwrap();
    mesh.run();
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");

    // When the target's CAS commits, the target starts moving "a" on (its
    // restore at the next node waits), and only then the abort learns that
    // authority moved, so the source hands its ingress hold over late.
    mesh.release_store();
    mesh.run();
    mesh.set_restore(next, RestoreBehavior::Hold);
    mesh.relocations(target).relocate(&a.id, next).unwrap();
    mesh.run();
    mesh.release_store();
    mesh.run();
    assert!(tapped(&mesh, Command::RelocationIngressHold)
        .iter()
        .any(|t| t.from == source && t.to == target));

    // Then the target, captured for the next move, runs nothing: the late
    // work joins that move's hold.
    assert!(mesh.delivered(target, &a.id).is_empty());

    // And when the next move commits, the request runs once, at the next
    // node, and s gets its reply.
    mesh.finish_restore(next, Ok(()));
    mesh.run();
    while mesh.held_store() > 0 {
        mesh.release_store();
        mesh.run();
    }
    mesh.advance(Duration::from_millis(1));
    assert!(mesh.delivered(target, &a.id).is_empty());
    assert_eq!(mesh.delivered(next, &a.id), vec![b(b"held")]);
    assert_eq!(mesh.delivered(source, &a.id), Vec::<bytes::Bytes>::new());
    assert_eq!(
        mesh.answers(sessions, s, held),
        vec![zlink::wire::client::ClientFrame::Reply {
            correlation: held,
            payload: b(b"held")
        }]
    );
}

/// Found by zlink-sim (seed 15 of `--steps 2000`): the target's 65 came
/// while the coordinator still waited for the lost 61; it was dropped as
/// stale, so after the durable abort learned that authority had moved, the
/// coordinator waited for a 65 that had already come, kept the Actor marked
/// as relocating, and ended with DeadlineExceeded a move that had committed.
#[test]
fn core_relocation_a_65_that_overtakes_a_lost_61_ends_the_move_at_once_with_its_outcome() {
    // Given a relocation whose 61 is lost: the target falls back to its CAS
    // 1,000 ms after its 61 and sends 65 before the source's 1,500 ms
    // prepare deadline.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    let relocation = relocate(&mut mesh, source, "a", target);

    // When the 65 has reached the source (well before the prepare deadline).
    mesh.advance(Duration::from_millis(1_200));

    // Then the coordinator asked the store at once, learned the move
    // committed, and ended it with the Actor at the target: nothing of the
    // relocation is left at the source but the follow entry.
    let ops = store_ops(&mesh);
    assert_eq!(ops.len(), 2, "the target's CAS, then the durable abort");
    assert_eq!(
        ops[1].2,
        StoreDone::Abort(Ok(AbortAnswer::Moved { owner: target }))
    );
    let moved = finished(&mesh, source, relocation)
        .expect("the move ended when its 65 came")
        .unwrap();
    assert_eq!(moved.location.owner, target);
    let relocations = mesh.node(source).core().relocation();
    assert!(!relocations.is_relocating(&a.id));
    assert!(relocations.follows(&a.id));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
}

/// §8.1: a seal that fails before the lane's capture is in (its 42 could
/// not be sent: no link to the session owner) ends the move with that
/// error once the capture comes: nothing is prepared, and the lane reopens
/// with the work the capture took off it, which then runs at the source.
#[test]
fn core_relocation_a_seal_failing_before_the_capture_reopens_the_lane_when_it_comes() {
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_behavior(source, zlink::sim::ActorBehavior::Queue);
    mesh.request(sessions, s, &a, b"r1").unwrap();
    mesh.run();
    assert_eq!(mesh.lane(source, &a.id).len(), 1);
    mesh.set_linked(source, sessions, false);
    let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
    mesh.run();
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::PeerUnreachable)))
    );
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(mesh.lane(source, &a.id).len(), 1, "r1 back on its lane");
}

/// relocation/mod.rs, `proxy_max`: a move's ingress hold is bounded. With
/// room for one item, a one-way message that reaches the source after the
/// capture is held (and delivered at the target); a request right behind
/// it finds the hold full and is refused `QueueFull` at once, answered to
/// its client, never held without bound.
#[test]
fn core_relocation_a_request_reaching_a_full_ingress_hold_is_refused_queue_full() {
    let mut mesh = mesh();
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        proxy_max: 1,
        ..Default::default()
    });
    let (sessions, source, target) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.relocations(source).relocate(&a.id, target).unwrap();
    // Both relayed before the seal reaches the session owner: both reach
    // the source after the capture.
    let one_way = bytes::Bytes::from_static(b"one-way");
    mesh.sessions(sessions)
        .relay(s, &a.id, zlink::ids::PacketKey(1), one_way.clone(), None)
        .unwrap();
    let refused = mesh.request(sessions, s, &a, b"refused").unwrap();
    mesh.run();
    let answers = mesh.answers(sessions, s, refused);
    assert!(
        matches!(
            &answers[..],
            [zlink::wire::client::ClientFrame::Error { error, .. }]
                if error.reason() == Reason::QueueFull
        ),
        "{answers:?}"
    );
    assert_eq!(delivered(&mesh, target, "a"), vec![one_way]);
}

/// §8.1: the coordinator waits for the seal's 43 a bounded time
/// (`seal_request_timeout`, 1,000 ms by default): a move whose 42 is lost
/// ends `Deadline` then, not a microsecond sooner, before anything is
/// prepared, and the Actor stays at the source, its lane open again.
#[test]
fn core_relocation_a_seal_never_answered_ends_the_move_at_its_deadline() {
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_dropping(source, sessions, Command::SessionRelocationSeal, true);
    let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
    let start = mesh.now();
    mesh.run();
    let bound = zlink::core::relocation::RelocationConfig::default().seal_request_timeout;
    mesh.advance((start + bound - mesh.now()) - MICRO);
    assert_eq!(finished(&mesh, source, relocation), None);
    mesh.advance(MICRO);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::Deadline)))
    );
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert!(mesh
        .node(source)
        .core()
        .actor_owner()
        .actor_ref(&a.id)
        .is_some());
}

/// §8.1: a 43 ends the seal whose 42 it names by request id. A 43 from the
/// session owner naming a request no coordinator here waits on is stale
/// (counted `RelocationRecordStale`), even a refusal: the move waiting on
/// its own 43 goes on (here to its seal deadline, the 42 being lost).
#[test]
fn core_relocation_a_43_naming_another_request_is_stale_and_ends_no_move() {
    use zlink::ids::RequestId;
    use zlink::wire::node::{SessionRelocationSeal, SessionRelocationSealed};
    // Given a move whose 42 is lost, its coordinator waiting on the 43,
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_dropping(source, sessions, Command::SessionRelocationSeal, true);
    let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
    let start = mesh.now();
    mesh.run();
    let seals = tapped(&mesh, Command::SessionRelocationSeal);
    let [NodeRecord::SessionRelocationSeal(SessionRelocationSeal { request, .. })] =
        &seals.iter().map(|t| t.record.clone()).collect::<Vec<_>>()[..]
    else {
        panic!("one 42: {seals:?}")
    };
    // when the session owner answers a refusal naming another request,
    let other = RequestId(request.id.0 + 1_000);
    mesh.inject(
        sessions,
        source,
        NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
            request: other,
            outcome: Err(error(Reason::StaleBinding)),
        }),
    );
    mesh.run();
    // then it is counted stale and the move goes on,
    assert_eq!(count(&mesh, source, FlowTrace::RelocationRecordStale), 1);
    assert_eq!(finished(&mesh, source, relocation), None);
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));
    // ending only at its seal deadline, as without that 43.
    let bound = zlink::core::relocation::RelocationConfig::default().seal_request_timeout;
    mesh.advance((start + bound - mesh.now()) - MICRO);
    assert_eq!(finished(&mesh, source, relocation), None);
    mesh.advance(MICRO);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::Deadline)))
    );
}

#[test]
fn core_relocation_refused_seal_reopens_with_saved_work_then_ingress_hold_in_order() {
    // Given s bound to "a" at the source, whose lane still holds two
    // requests (the stand-in runtime has not run them).
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_behavior(source, zlink::sim::ActorBehavior::Queue);
    let r1 = mesh.request(sessions, s, &a, b"r1").unwrap();
    let r2 = mesh.request(sessions, s, &a, b"r2").unwrap();
    mesh.run();
    assert_eq!(mesh.lane(source, &a.id).len(), 2);
    // Their replies are owed: the Actor owner keeps both tickets.
    let owed = mesh.node(source).core().actor_owner().owed_count();
    assert_eq!(owed, 2);

    // When the source starts relocating it and, at the same instant, the
    // session relays a third request (it reaches the source after the
    // capture), and the seal is refused (43 with an error). The session
    // owner here would install the seal, so the 42 is lost on the link and a
    // 43 refusal stands in for a session owner that refuses it.
    mesh.set_dropping(source, sessions, Command::SessionRelocationSeal, true);
    let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
    let r3 = mesh.request(sessions, s, &a, b"r3").unwrap();
    mesh.run();
    let seals = tapped(&mesh, Command::SessionRelocationSeal);
    assert_eq!(seals.len(), 1);
    let NodeRecord::SessionRelocationSeal(seal) = &seals[0].record else {
        unreachable!()
    };
    let refusal = Error::new(Reason::SessionClosing);
    let sealed = zlink::wire::node::SessionRelocationSealed {
        request: seal.request.id,
        outcome: Err(refusal.clone()),
    };
    mesh.inject(
        sessions,
        source,
        NodeRecord::SessionRelocationSealed(sealed),
    );
    mesh.run();

    // Then the relocation ends with that error before anything was
    // prepared: no 60, no durable abort, no 44 (no seal to release).
    assert_eq!(finished(&mesh, source, relocation), Some(Err(refusal)));
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(store_ops(&mesh).is_empty());
    assert!(tapped(&mesh, Command::SessionRelocationRoute).is_empty());
    // The lane reopened with the saved work, then the ingress hold, in
    // arrival order (the capture had taken r1 and r2 off the lane, so they
    // are handed to it again; r3 was held, never delivered before).
    let reopen_at = position(&mesh, "reopen", |j| {
        is_event(j, source, |e| matches!(e, RelocationEvent::Reopen { .. }))
    });
    let after: Vec<_> = mesh.journal()[reopen_at..]
        .iter()
        .filter_map(|j| match j {
            Journal::Event {
                node,
                event: CoreEvent::Actor(zlink::core::actor::ActorEvent::Deliver { payload, .. }),
                ..
            } if *node == source => Some(payload.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(after, vec![b(b"r1"), b(b"r2"), b(b"r3")]);
    assert_eq!(
        mesh.lane(source, &a.id)
            .iter()
            .filter(|e| matches!(e, zlink::core::actor::ActorEvent::Deliver { .. }))
            .count(),
        3
    );
    // Running the lane answers each request exactly once, at the source.
    mesh.run_lane(source, &a.id);
    mesh.run();
    for (correlation, payload) in [(r1, b"r1"), (r2, b"r2"), (r3, b"r3")] {
        let replies = mesh.answers(sessions, s, correlation);
        assert_eq!(
            replies,
            vec![zlink::wire::client::ClientFrame::Reply {
                correlation,
                payload: b(payload),
            }]
        );
    }
    assert!(delivered(&mesh, target, "a").is_empty());
    assert!(registered(&mesh, source, "a").is_some());
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

#[test]
fn core_relocation_records_reach_the_actor_owner_side_on_the_actors_shard() {
    use zlink::core::shard::{record_role, record_shard, RecordRole};
    use zlink::ids::{RequestId, SessionOwnerId};
    use zlink::wire::node::*;

    // Given an Actor on shard `home` of a 4-shard node, and a request id
    // the relocation side of shard 3 allocated.
    let actor = actor_id("a");
    let home = actor.shard(4);
    let relocation = RelocationId {
        coordinator: NodeRid(2),
        sequence: 1,
    };
    let coordinator_id = RequestId::relocation_origin(SessionOwnerId(3)).next();
    let session_id = RequestId::origin(SessionOwnerId(1)).next();
    assert!(coordinator_id.is_relocation() && !session_id.is_relocation());
    let cases = [
        (
            NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
                request: RequestHeader {
                    id: coordinator_id,
                    budget: Duration::from_millis(1_500),
                },
                relocation,
                actor: actor.clone(),
                object_generation: zlink::ids::ObjectGeneration(1),
                expected_authority: zlink::ids::AuthorityOwnerGeneration(1),
                binding: None,
                state: bytes::Bytes::new(),
                saved: Vec::new(),
                timers: zlink::wire::node::TimersHandoff::default(),
                calls: Default::default(),
            })),
            RecordRole::ActorOwner,
            home,
        ),
        (
            NodeRecord::RelocationIngressHold(RelocationIngressHold {
                relocation,
                actor: actor.clone(),
                work: SavedWork::Bound {
                    session: zlink::ids::SessionRef {
                        owner: NodeRid(1),
                        lifecycle: zlink::ids::NodeGeneration(1),
                        owner_id: SessionOwnerId(1),
                        session: zlink::ids::SessionRid(1),
                    },
                },
            }),
            RecordRole::ActorOwner,
            home,
        ),
        (
            NodeRecord::RelocationCutover(RelocationCutover {
                relocation,
                actor: actor.clone(),
            }),
            RecordRole::ActorOwner,
            home,
        ),
        (
            NodeRecord::RelocationDiscard(RelocationDiscard {
                relocation,
                actor: actor.clone(),
            }),
            RecordRole::ActorOwner,
            home,
        ),
        (
            NodeRecord::RelocationFinished(RelocationFinished {
                relocation,
                actor: actor.clone(),
                outcome: Err(error(Reason::RelocationAborted)),
            }),
            RecordRole::Coordinator,
            home,
        ),
        (
            NodeRecord::RelocationReady(RelocationReady {
                request: coordinator_id,
                outcome: Ok(()),
            }),
            RecordRole::Coordinator,
            3,
        ),
        (
            NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
                request: coordinator_id,
                outcome: Ok(()),
            }),
            RecordRole::Coordinator,
            3,
        ),
        (
            NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
                request: coordinator_id,
                outcome: Ok(bytes::Bytes::new()),
            })),
            RecordRole::Coordinator,
            3,
        ),
        (
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(BindTerminal {
                request: coordinator_id,
                outcome: Err(error(Reason::StaleLocation)),
            })),
            RecordRole::Coordinator,
            3,
        ),
        (
            NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
                request: session_id,
                outcome: Ok(bytes::Bytes::new()),
            })),
            RecordRole::SessionOwner,
            1,
        ),
    ];

    // Then each goes to its role, on the shard that owns it.
    for (record, role, shard) in cases {
        assert_eq!(record_role(&record), role, "{record:?}");
        assert_eq!(record_shard(&record, 4), shard, "{record:?}");
    }
}

/// docs/threading.md "Shards": a record whose session owner (or the
/// request id it answers) names a shard this node does not have goes to
/// shard 0, whose core refuses it as not its own; the last shard there is
/// is still its own.
#[test]
fn core_a_record_naming_a_shard_the_node_does_not_have_goes_to_shard_0() {
    use zlink::core::shard::record_shard;
    use zlink::ids::{RequestId, SessionOwnerId};
    use zlink::wire::node::ActorReply;

    let reply_to = |owner: u16| {
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            request: RequestId::origin(SessionOwnerId(owner)).next(),
            outcome: Ok(bytes::Bytes::new()),
        }))
    };
    // Given a node of 4 shards (0 to 3).
    let shards = 4;
    // Then shard 3's reply goes to shard 3, and shard 4's or 9's to 0.
    assert_eq!(record_shard(&reply_to(3), shards), 3);
    assert_eq!(record_shard(&reply_to(4), shards), 0);
    assert_eq!(record_shard(&reply_to(9), shards), 0);
}

// ---- whole flows with a bound session (the session owner's seal, §8.1) ----

/// A relocation of "a", bound to s, in flight: r1 and r2 were queued on the
/// source's lane at capture (saved work), r3 was relayed at the instant the
/// relocation started (it reaches the source after the capture: the
/// ingress hold), r4 after the session owner installed its seal (held by
/// it). Nothing has been run further than the seal.
struct Flow {
    mesh: Mesh,
    sessions: NodeRid,
    source: NodeRid,
    target: NodeRid,
    a: ActorRef,
    s: zlink::ids::SessionRid,
    relocation: RelocationId,
    /// r1..r4, in relay order.
    requests: Vec<(zlink::ids::Correlation, &'static [u8])>,
}

impl Flow {
    fn start(prepare: impl FnOnce(&mut Mesh, NodeRid, NodeRid)) -> Flow {
        let (mut mesh, sessions, source, target, a) = three_nodes();
        let s = mesh.connect(sessions);
        bind_ok(&mut mesh, sessions, s, &a);
        prepare(&mut mesh, source, target);
        mesh.set_behavior(source, zlink::sim::ActorBehavior::Queue);
        let mut requests = Vec::new();
        for payload in [&b"r1"[..], b"r2"] {
            requests.push((mesh.request(sessions, s, &a, payload).unwrap(), payload));
        }
        mesh.run();
        assert_eq!(mesh.lane(source, &a.id).len(), 2);
        let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
        requests.push((mesh.request(sessions, s, &a, b"r3").unwrap(), b"r3"));
        // The 42 reaches the session owner (and r3 the source).
        mesh.advance(LATENCY);
        assert_eq!(tapped(&mesh, Command::SessionRelocationSealed).len(), 1);
        requests.push((mesh.request(sessions, s, &a, b"r4").unwrap(), b"r4"));
        Flow {
            mesh,
            sessions,
            source,
            target,
            a,
            s,
            relocation,
            requests,
        }
    }

    /// Every request answered exactly once, with its own payload.
    fn assert_each_answered_once(&self) {
        for &(correlation, payload) in &self.requests {
            assert_eq!(
                self.mesh.answers(self.sessions, self.s, correlation),
                vec![zlink::wire::client::ClientFrame::Reply {
                    correlation,
                    payload: bytes::Bytes::from_static(payload),
                }],
                "{payload:?}"
            );
        }
    }

    /// The 24s the session sent to `to` after the relocation started.
    /// The client messages (24 relays, not disconnect notices) the session
    /// owner sent to `to` from `after` on.
    fn relayed_to(&self, to: NodeRid, after: zlink::core::time::Instant) -> usize {
        self.sent_to(to, after, |body| {
            !matches!(body, ActorSendBody::DisconnectNotice)
        })
    }

    /// The disconnect notices (24) the session owner sent to `to` from
    /// `after` on.
    fn notices_to(&self, to: NodeRid, after: zlink::core::time::Instant) -> usize {
        self.sent_to(to, after, |body| {
            matches!(body, ActorSendBody::DisconnectNotice)
        })
    }

    fn sent_to(
        &self,
        to: NodeRid,
        after: zlink::core::time::Instant,
        pick: impl Fn(&ActorSendBody) -> bool,
    ) -> usize {
        self.mesh
            .tap()
            .iter()
            .filter(|t| t.from == self.sessions && t.to == to && t.at >= after)
            .filter(|t| matches!(&t.record, NodeRecord::ActorSend(ActorSend::Message(m)) if pick(&m.body)))
            .count()
    }
}

#[test]
fn core_l1_relocated_bound_actor_serves_relays_on_the_target_over_the_same_connection() {
    // Given s bound to "a", relocated from the source to the target.
    let mut f = Flow::start(|_, _, _| {});
    f.mesh.run();
    let moved = finished(&f.mesh, f.source, f.relocation)
        .expect("finished")
        .expect("committed");

    // Then the connection is kept, the binding's location snapshot names
    // the target, ActorId and ObjectGeneration are the same, and the
    // binding identity at the target is the one the source had.
    assert!(!f.mesh.closed(f.sessions, f.s));
    let snapshot = f
        .mesh
        .node(f.sessions)
        .core()
        .session_owner()
        .find(f.s, &f.a.id)
        .expect("still bound");
    assert_eq!(snapshot.location, moved.location);
    assert_eq!(snapshot.location.owner, f.target);
    assert_eq!(
        (snapshot.id.clone(), snapshot.generation),
        (f.a.id.clone(), f.a.generation)
    );
    assert_eq!(
        registered(&f.mesh, f.target, "a"),
        Some(zlink::ids::BindingIdentity {
            owner: f.sessions,
            lifecycle: zlink::ids::NodeGeneration(1),
            generation: relayed_generations(&f.mesh, f.s, "a")[0],
        })
    );
    assert_eq!(registered(&f.mesh, f.source, "a"), None);
    // The 44 commit went from the target, once; nothing answered it.
    let commits = tapped(&f.mesh, Command::SessionRelocationRoute);
    assert_eq!(commits.len(), 1);
    assert_eq!((commits[0].from, commits[0].to), (f.target, f.sessions));
    assert!(matches!(
        commits[0].record,
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(_))
    ));

    // When the client relays after the commit.
    let after = f.mesh.now();
    let r5 = f.mesh.request(f.sessions, f.s, &f.a, b"r5").unwrap();
    f.mesh.run();

    // Then it goes straight to the target and is processed there.
    assert_eq!(f.relayed_to(f.target, after), 1);
    assert_eq!(f.relayed_to(f.source, after), 0);
    assert_eq!(
        f.mesh.answers(f.sessions, f.s, r5),
        vec![zlink::wire::client::ClientFrame::Reply {
            correlation: r5,
            payload: b(b"r5"),
        }]
    );
    assert_eq!(delivered(&f.mesh, f.target, "a").last(), Some(&b(b"r5")));
    assert_eq!(
        count(&f.mesh, f.sessions, FlowTrace::LateSessionRouteUpdate),
        0
    );
}

#[test]
fn core_l2_saved_work_and_ingress_hold_processed_once_on_target() {
    // Given the flow: r1, r2 saved work, r3 ingress hold, r4 held by the
    // session owner's seal.
    let mut f = Flow::start(|_, _, _| {});
    // Each node counts what it holds (a metrics scrape reads it): r4 under
    // the session owner's seal, r3 in the source's ingress hold.
    let held = |f: &Flow, node| f.mesh.node(node).core().held_messages();
    assert_eq!(held(&f, f.sessions), (1, 0));
    assert_eq!(held(&f, f.source), (0, 1));

    // When the relocation runs to its end.
    f.mesh.run();
    assert!(matches!(
        finished(&f.mesh, f.source, f.relocation),
        Some(Ok(_))
    ));
    for node in [f.sessions, f.source, f.target] {
        assert_eq!(held(&f, node), (0, 0), "{node:?} still holds messages");
    }

    // Then r1 and r2 travelled in the 60 and r3 as a 62, before the 63.
    let prepare = tapped(&f.mesh, Command::RelocationPrepare);
    let NodeRecord::RelocationPrepare(prepare) = &prepare[0].record else {
        unreachable!()
    };
    let saved: Vec<_> = prepare
        .saved
        .iter()
        .filter_map(|w| match w {
            zlink::wire::node::SavedWork::Deliver { payload, .. } => Some(payload.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(saved, vec![b(b"r1"), b(b"r2")]);
    assert_eq!(commands(&f.mesh, f.source, f.target), vec![60, 62, 63]);
    // Every request was processed exactly once, on the target, in its
    // relay order; the source processed none of them.
    assert_eq!(
        delivered(&f.mesh, f.target, "a"),
        vec![b(b"r1"), b(b"r2"), b(b"r3"), b(b"r4")]
    );
    let at_source = delivered(&f.mesh, f.source, "a");
    assert_eq!(
        at_source,
        vec![b(b"r1"), b(b"r2")],
        "delivered to the lane once, before the capture"
    );
    assert!(f.mesh.lane(f.source, &f.a.id).is_empty());
    // Each reply reached the client once, under its own correlation: the
    // saved work's and the ingress hold's through the source's proxies,
    // r4's directly from the target.
    f.assert_each_answered_once();
    assert_eq!(f.mesh.node(f.source).core().relocation().proxy_count(), 0);
    assert_eq!(count(&f.mesh, f.sessions, FlowTrace::ReplyMismatch), 0);
    assert_eq!(count(&f.mesh, f.sessions, FlowTrace::LateReplyDropped), 0);
}

/// Found by zlink-sim (seed 193 of `--steps 2000`): the source held r3
/// (its ingress hold) while its 61 was lost and its durable abort waited on
/// a store outage; the target had committed by its fallback and served,
/// and another session had bound the Actor there. When the abort learned
/// the move had committed, the 62 carried r3 to the target, which delivered
/// it although the binding it was admitted under was retired (P2).
#[test]
fn core_p2_a_late_ingress_hold_of_a_replaced_binding_is_refused_at_the_target() {
    // Given r3 held at the source, its 61 and 65 lost, so that the target
    // commits by its fallback and the source does not know.
    let mut f = Flow::start(|mesh, source, target| {
        mesh.set_dropping(target, source, Command::RelocationReady, true);
        mesh.set_dropping(target, source, Command::RelocationFinished, true);
    });
    f.mesh.advance(Duration::from_millis(1_200));
    let row = f.mesh.store().lookup(&f.a.id).unwrap().unwrap();
    assert_eq!(row.location.owner, f.target, "the target's fallback CAS");
    // ... the store is down when the source's prepare deadline passes ...
    f.mesh.set_store(StoreBehavior::Down);
    // ... and another session binds the Actor at the target meanwhile.
    let s2 = f.mesh.connect(f.sessions);
    bind_ok(&mut f.mesh, f.sessions, s2, &row.actor_ref());
    f.mesh.advance(Duration::from_millis(500));
    assert!(f
        .mesh
        .node(f.source)
        .core()
        .relocation()
        .is_relocating(&f.a.id));

    // When the store is back and the abort learns the move committed.
    f.mesh.set_store(StoreBehavior::Immediate);
    f.mesh.advance(Duration::from_millis(500));
    assert_eq!(
        tapped(&f.mesh, Command::RelocationIngressHold).len(),
        1,
        "the source handed r3 over once it knew"
    );

    // Then r3, admitted under s's retired binding, never reaches the Actor
    // at the target; it ends with a typed error (StaleBinding).
    assert!(!delivered(&f.mesh, f.target, "a").contains(&b(b"r3")));
    let (r3, _) = f.requests[2];
    assert_eq!(
        f.mesh.answers(f.sessions, f.s, r3),
        vec![zlink::wire::client::ClientFrame::Error {
            correlation: r3,
            error: error(Reason::StaleBinding).about_actor(&actor_id("a")),
        }]
    );
}

/// Found by zlink-sim (seed 411 of `--steps 2000`): the 65 of a move was
/// lost, and the Actor was moved back to its old node while that node's
/// coordinator still waited for it. The node hosted the Actor again beside
/// the waiting coordinator, which kept holding the Actor's records and, at
/// its deadline, ended a committed move with DeadlineExceeded and replayed
/// five seconds of records at once.
#[test]
fn core_relocation_a_move_back_waits_until_the_sources_coordinator_has_ended() {
    // Given a move from the source to the target whose 65 is lost: the
    // source's coordinator still waits for it.
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationFinished, true);
    let first = relocate(&mut mesh, source, "a", target);
    assert_eq!(finished(&mesh, source, first), None);
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));

    // When the Actor is moved back from the target to the source.
    let back = relocate(&mut mesh, target, "a", source);

    // Then the source refuses to host it while its coordinator lives: the
    // move back ends with a typed error and the Actor stays at the target.
    let refused = finished(&mesh, target, back).expect("the move back ended");
    assert_eq!(refused, Err(error(Reason::RelocationSealed)));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert!(mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&a.id)
        .is_some());
    assert_eq!(
        mesh.store().lookup(&a.id).unwrap().unwrap().location.owner,
        target
    );
}

/// Found by zlink-sim (seed 1057 of `--steps 2000`, `sim` profile): a
/// durable abort waited on a store outage longer than the proxies of the
/// saved work live; each proxy's deadline ended its request, and the reopen
/// then gave the same requests to the handler again, whose replies were
/// owed to no one.
/// The 61s `target` sent, each as (the 60's request id, its outcome).
fn readies(mesh: &Mesh, target: NodeRid) -> Vec<(zlink::ids::RequestId, Result<(), Error>)> {
    tapped(mesh, Command::RelocationReady)
        .into_iter()
        .filter(|t| t.from == target)
        .filter_map(|t| match t.record {
            NodeRecord::RelocationReady(r) => Some((r.request, r.outcome)),
            _ => None,
        })
        .collect()
}

/// The one 60 tapped so far.
fn the_prepare(mesh: &Mesh) -> zlink::wire::node::RelocationPrepare {
    match &tapped(mesh, Command::RelocationPrepare)[..] {
        [t] => match &t.record {
            NodeRecord::RelocationPrepare(p) => (**p).clone(),
            other => panic!("not a 60: {other:?}"),
        },
        other => panic!("not one 60: {other:?}"),
    }
}

/// §8.1, docs/relocation.md ("Target invalid"): a node that already hosts
/// the Actor is no target for it. A 60 naming an Actor the target hosts
/// (here: a copy of the move's own 60 under another relocation id, after
/// that move committed) is refused `RelocationTargetInvalid` in its 61,
/// and restores nothing.
#[test]
fn core_relocation_a_60_for_an_actor_the_target_hosts_is_refused_target_invalid() {
    let (mut mesh, _, source, target, _) = three_nodes();
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    let mut prepare = the_prepare(&mesh);
    prepare.relocation.sequence += 1_000;
    prepare.request.id = zlink::ids::RequestId(prepare.request.id.0 + 1_000);
    let restores = mesh.node(target).relocation_events.len();
    mesh.inject(
        source,
        target,
        NodeRecord::RelocationPrepare(Box::new(prepare.clone())),
    );
    mesh.run();
    assert_eq!(
        readies(&mesh, target).last(),
        Some(&(
            prepare.request.id,
            Err(error(Reason::RelocationTargetInvalid))
        ))
    );
    assert_eq!(mesh.node(target).relocation_events.len(), restores);
}

/// §10 Shutdown, docs/relocation.md ("A draining target"): a node that
/// drains takes no Actor by relocation, since it would end the Actor at
/// its stop. A move to it is refused `ShuttingDown` in its 61: the caller
/// gets that error, nothing is restored at the target, and the Actor stays
/// at its source, owner in the store, and movable elsewhere.
#[test]
fn core_relocation_a_draining_target_refuses_the_move_and_the_actor_stays() {
    let (mut mesh, _, source, target, a) = three_nodes();
    let restores = mesh.node(target).relocation_events.len();
    mesh.actors(target).leave();
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::ShuttingDown)))
    );
    assert_eq!(commands(&mesh, target, source), vec![61]);
    assert_eq!(mesh.node(target).relocation_events.len(), restores);
    stays_at(&mesh, source, &a);
    assert_eq!(mesh.node(source).states.get(&a.id), Some(&b(b"state of a")));
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        None
    );
    // Another node, not draining, takes it.
    let other = mesh.add_node(4);
    let again = relocate(&mut mesh, source, "a", other);
    assert!(matches!(finished(&mesh, source, again), Some(Ok(_))));
}

/// §8.1: one handoff at a time per Actor at a target. A second 60 for an
/// Actor still arriving (its restore not answered yet) is refused
/// `RelocationSealed` at once, and the first move goes on and commits.
#[test]
fn core_relocation_a_second_60_for_an_actor_still_arriving_is_refused_sealed() {
    let (mut mesh, _, source, target, _) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    let mut second = the_prepare(&mesh);
    second.relocation.sequence += 1_000;
    second.request.id = zlink::ids::RequestId(second.request.id.0 + 1_000);
    mesh.inject(
        source,
        target,
        NodeRecord::RelocationPrepare(Box::new(second.clone())),
    );
    mesh.run();
    assert_eq!(
        readies(&mesh, target),
        vec![(second.request.id, Err(error(Reason::RelocationSealed)))]
    );
    mesh.finish_restore(target, Ok(()));
    mesh.run();
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    assert!(mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&actor_id("a"))
        .is_some());
}

/// §8.1: a target that received an Actor once, which has moved on since,
/// takes it again: "a" moves to the target, back to the source and to the
/// target again, each move committing (the target's record of the first
/// arrival, committed, lingers and is done with, not taken for a handoff
/// still going on).
#[test]
fn core_relocation_an_actor_moved_back_can_move_to_the_same_target_again() {
    let (mut mesh, _, source, target, _) = three_nodes();
    for (from, to) in [(source, target), (target, source), (source, target)] {
        let relocation = relocate(&mut mesh, from, "a", to);
        assert_eq!(
            finished(&mesh, from, relocation).map(|r| r.map(|_| ())),
            Some(Ok(())),
            "the move {from:?} -> {to:?}"
        );
    }
    assert!(mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&actor_id("a"))
        .is_some());
}

/// relocation/target.rs, the temporary queue's bound: while the Actor is
/// restored, a target queues at most twice `saved_work_count_max` items
/// (the 60's saved work and the 62s after it); a 62 past that is refused
/// `QueueFull` and never delivered. With a limit of 4 and nothing saved,
/// 8 one-way messages from the ingress hold are delivered after the
/// commit, in order, and the 9th is not.
#[test]
fn core_relocation_the_targets_queue_takes_twice_the_saved_work_limit_then_refuses() {
    use zlink::wire::node::{RelocationIngressHold, SavedWork};
    let mut mesh = mesh();
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        limits: zlink::wire::DecodeLimits {
            saved_work_count_max: 4,
            ..Default::default()
        },
        ..Default::default()
    });
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    mesh.create(source, "a");
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    let prepare = the_prepare(&mesh);
    assert!(prepare.saved.is_empty());
    let payloads: Vec<bytes::Bytes> = (0..9u8)
        .map(|n| bytes::Bytes::from(vec![b'm', n]))
        .collect();
    for (n, payload) in payloads.iter().enumerate() {
        let work = SavedWork::Deliver {
            request: None,
            key: PUSH_KEY,
            correlation: None,
            sequence: zlink::ids::SessionSequence(n as u64 + 1),
            payload: payload.clone(),
        };
        mesh.inject(
            source,
            target,
            NodeRecord::RelocationIngressHold(RelocationIngressHold {
                relocation,
                actor: actor_id("a"),
                work,
            }),
        );
    }
    mesh.run();
    mesh.finish_restore(target, Ok(()));
    mesh.run();
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    assert_eq!(delivered(&mesh, target, "a"), payloads[..8].to_vec());
}

/// §8.1, §2: a 62 and a 63 belong to their move's source. A 62 naming the
/// move but sent by another node is stale (counted, never queued nor
/// delivered), and a 63 from another node does not cut over: the target
/// waits for its source's cutover, here lost, until the 1,000 ms fallback
/// (`cutover_timeout`), and commits then.
#[test]
fn core_relocation_a_62_or_63_from_a_node_other_than_the_source_is_stale_at_the_target() {
    use zlink::wire::node::{RelocationCutover, RelocationIngressHold, SavedWork};
    let (mut mesh, other, source, target, _) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    mesh.set_dropping(source, target, Command::RelocationCutover, true);
    let relocation = relocate(&mut mesh, source, "a", target);
    // A 62 for this move from node 1, while the target restores "a",
    let work = SavedWork::Deliver {
        request: None,
        key: PUSH_KEY,
        correlation: None,
        sequence: zlink::ids::SessionSequence(1),
        payload: b(b"forged"),
    };
    mesh.inject(
        other,
        target,
        NodeRecord::RelocationIngressHold(RelocationIngressHold {
            relocation,
            actor: actor_id("a"),
            work,
        }),
    );
    mesh.run();
    assert_eq!(count(&mesh, target, FlowTrace::RelocationRecordStale), 1);
    // then relay-ready, and a 63 for this move from node 1,
    mesh.finish_restore(target, Ok(()));
    mesh.run();
    let ready_at = tapped(&mesh, Command::RelocationReady)[0].at;
    mesh.inject(
        other,
        target,
        NodeRecord::RelocationCutover(RelocationCutover {
            relocation,
            actor: actor_id("a"),
        }),
    );
    mesh.run();
    assert_eq!(count(&mesh, target, FlowTrace::RelocationRecordStale), 2);
    assert_eq!(count(&mesh, target, FlowTrace::CutoverTimeout), 0);
    assert!(store_ops(&mesh).is_empty(), "no CAS before the fallback");
    // and the move commits at the fallback, delivering nothing forged.
    advance_to(&mut mesh, ready_at + CUTOVER_FALLBACK + LATENCY);
    mesh.run();
    assert_eq!(count(&mesh, target, FlowTrace::CutoverTimeout), 1);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    assert_eq!(delivered(&mesh, target, "a"), Vec::<bytes::Bytes>::new());
}

/// relocation/target.rs `cas_done`: two instances of an Actor never run.
/// When the runtime hosted the Actor at the target by itself while the
/// move's CAS was out, the CAS that swaps does not commit the handed-over
/// instance: the move ends `RelocationTargetInvalid` (65 to the source),
/// and the Actor hosted here is the one the runtime hosted.
#[test]
fn core_relocation_a_cas_that_swaps_after_the_target_hosted_the_actor_itself_commits_nothing() {
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(mesh.held_store(), 1, "the target's CAS waits");
    let other = a.generation.next();
    let hosted = mesh
        .actors(target)
        .host(a.id.clone(), other, a.location.authority)
        .unwrap();
    mesh.release_store();
    mesh.run();
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::RelocationTargetInvalid)))
    );
    assert_eq!(
        mesh.node(target).core().actor_owner().actor_ref(&a.id),
        Some(hosted)
    );
}

/// docs/relocation.md ("An unknown CAS outcome"): only a CAS whose outcome
/// is unknown (`StoreUnavailable`) is made again. One the store refused
/// (here `LeaseExpired`: the target's lease lapsed) ends the move at once
/// with that error, told to the source in its 65, with no retry.
#[test]
fn core_relocation_a_cas_refused_other_than_store_unavailable_ends_the_move_unretried() {
    let (mut mesh, _, source, target, _) = three_nodes();
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(mesh.held_store(), 1, "the target's CAS waits");
    // The runtime answers the CAS: refused.
    mesh.relocations(target)
        .cas_done(relocation, Err(error(Reason::LeaseExpired)));
    mesh.run();
    assert_eq!(count(&mesh, target, FlowTrace::RelocationStoreRetry), 0);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::LeaseExpired)))
    );
    assert_eq!(commands(&mesh, target, source), vec![61, 65]);
}

/// §8.1, §2: a 64 (discard) belongs to its move's source. One naming the
/// move but sent by another node is stale (counted) and discards nothing:
/// the target's restore goes on and the move commits.
#[test]
fn core_relocation_a_64_from_a_node_other_than_the_source_discards_nothing() {
    use zlink::wire::node::RelocationDiscard;
    let (mut mesh, other, source, target, _) = three_nodes();
    mesh.set_restore(target, RestoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.inject(
        other,
        target,
        NodeRecord::RelocationDiscard(RelocationDiscard {
            relocation,
            actor: actor_id("a"),
        }),
    );
    mesh.run();
    assert_eq!(count(&mesh, target, FlowTrace::RelocationRecordStale), 1);
    assert!(mesh
        .node(target)
        .core()
        .relocation()
        .is_arriving(&actor_id("a")));
    mesh.finish_restore(target, Ok(()));
    mesh.run();
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
}

/// A target keeps the record of a committed arrival for `follow_lifetime`
/// from the commit (a late 62 of that move still reaches the Actor
/// through it), then drops it, not a microsecond sooner: nothing of the
/// move is left there (`is_idle`).
#[test]
fn core_relocation_a_target_drops_a_committed_arrival_at_the_end_of_the_follow_lifetime() {
    let (mut mesh, _, source, target, _) = three_nodes();
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    let committed_at = tapped(&mesh, Command::RelocationFinished)[0].at;
    let lifetime = zlink::core::relocation::RelocationConfig::default().follow_lifetime;
    let idle = |mesh: &Mesh| mesh.node(target).core().relocation().is_idle();
    assert!(!idle(&mesh));
    advance_to(&mut mesh, committed_at + (lifetime - MICRO));
    assert!(!idle(&mesh));
    mesh.advance(MICRO);
    assert!(idle(&mesh));
}

#[test]
fn core_relocation_saved_work_whose_request_ended_during_a_long_abort_is_not_run_again() {
    // Given r1 and r2 saved work of a relocation that aborts (the target's
    // restore fails) while the store is down.
    let mut f = Flow::start(|mesh, _, target| {
        mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
        mesh.set_store(StoreBehavior::Down);
    });

    // When the outage outlasts the proxies' budget, then the store is back.
    f.mesh.advance(Duration::from_secs(11));
    assert!(f
        .mesh
        .node(f.source)
        .core()
        .relocation()
        .is_relocating(&f.a.id));
    f.mesh.set_store(StoreBehavior::Immediate);
    f.mesh.advance(Duration::from_millis(500));
    assert!(matches!(
        finished(&f.mesh, f.source, f.relocation),
        Some(Err(_))
    ));

    // Then r1 and r2 went to the handler's queue once, before the capture,
    // and are not given to it again; what the lane holds now runs without
    // any reply being owed to no one.
    let at_source = delivered(&f.mesh, f.source, "a");
    let count = |p: &[u8]| at_source.iter().filter(|d| d.as_ref() == p).count();
    assert_eq!((count(b"r1"), count(b"r2")), (1, 1), "{at_source:?}");
    let _ = f.mesh.run_lane(f.source, &f.a.id);
    f.mesh.run();
    assert_eq!(f.mesh.node(f.source).core().actor_owner().owed_count(), 0);
}

#[test]
fn core_l5_target_restore_failure_reopens_the_source_and_releases_the_seal() {
    // Given the flow, with a target whose Restore fails.
    let mut f = Flow::start(|mesh, _, target| {
        mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
    });

    // When it runs.
    f.mesh.run();

    // Then the relocation aborted: durable abort first, then the source
    // reopened, then the 44 abort released the seal, then the 64.
    assert_eq!(
        finished(&f.mesh, f.source, f.relocation),
        Some(Err(error(Reason::NoActorFactory)))
    );
    let abort_at = position(&f.mesh, "durable abort", |j| {
        matches!(j, Journal::Store { .. })
    });
    let reopen_at = position(&f.mesh, "reopen", |j| {
        is_event(j, f.source, |e| matches!(e, RelocationEvent::Reopen { .. }))
    });
    let route_at = position(&f.mesh, "44 abort", |j| {
        is_sent(j, f.source, Command::SessionRelocationRoute)
    });
    let discard_at = position(&f.mesh, "64", |j| {
        is_sent(j, f.source, Command::RelocationDiscard)
    });
    assert!(abort_at < reopen_at && abort_at < route_at && abort_at < discard_at);
    let route = tapped(&f.mesh, Command::SessionRelocationRoute);
    assert_eq!(route.len(), 1);
    assert!(matches!(
        route[0].record,
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Abort(_))
    ));
    // The held r4 went over the source route; the connection is kept.
    assert!(!f.mesh.closed(f.sessions, f.s));
    let snapshot = f
        .mesh
        .node(f.sessions)
        .core()
        .session_owner()
        .find(f.s, &f.a.id);
    assert_eq!(snapshot.map(|r| r.location.owner), Some(f.source));
    // All four wait on the source's lane in order, and run there once.
    let lane: Vec<_> = f
        .mesh
        .lane(f.source, &f.a.id)
        .into_iter()
        .filter_map(|e| match e {
            zlink::core::actor::ActorEvent::Deliver { payload, .. } => Some(payload),
            _ => None,
        })
        .collect();
    assert_eq!(lane, vec![b(b"r1"), b(b"r2"), b(b"r3"), b(b"r4")]);
    f.mesh.run_lane(f.source, &f.a.id);
    f.mesh.run();
    f.assert_each_answered_once();
    assert!(delivered(&f.mesh, f.target, "a").is_empty());
    // The saved work's proxies went with the abort (the source answers
    // those requests itself): none is left, and none ends them again at
    // its deadline.
    assert_eq!(f.mesh.node(f.source).core().relocation().proxy_count(), 0);
    f.mesh.advance(Duration::from_secs(11));
    f.assert_each_answered_once();
    assert_eq!(
        f.mesh
            .store()
            .lookup(&f.a.id)
            .unwrap()
            .unwrap()
            .location
            .owner,
        f.source
    );
}

#[test]
fn core_l6_cas_failure_after_relay_ready_never_falls_back_to_the_source_route() {
    // Given the flow, with the target's CAS held while another owner takes
    // the row.
    let mut f = Flow::start(|mesh, _, _| mesh.set_store(StoreBehavior::Hold));
    let sealed_at = tapped(&f.mesh, Command::SessionRelocationSealed)[0].at;
    f.mesh.run();
    assert_eq!(f.mesh.held_store(), 1);
    let row = f.mesh.store().lookup(&f.a.id).unwrap().unwrap();
    let rival = f.mesh.add_node(4);
    let claim = f
        .mesh
        .store()
        .acquire_lease(rival, zlink::ids::NodeGeneration(1), &row.location.mesh)
        .unwrap()
        .claim();
    let other = RelocationId {
        coordinator: rival,
        sequence: 1,
    };
    f.mesh
        .store()
        .compare_and_set(&f.a.id, row.version(), other, &claim)
        .unwrap();
    let ready_at = tapped(&f.mesh, Command::RelocationReady)[0].at;

    // When the CAS fails.
    f.mesh.release_store();
    f.mesh.run();

    // Then no 44 is sent, the source never reopens, and nothing goes over
    // the source route again: the relocation failed.
    assert_eq!(
        finished(&f.mesh, f.source, f.relocation),
        Some(Err(error(Reason::StaleAuthority)))
    );
    assert!(tapped(&f.mesh, Command::SessionRelocationRoute).is_empty());
    assert!(!f
        .mesh
        .node(f.source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. })));
    assert_eq!(f.relayed_to(f.source, ready_at), 0);
    // The handed-over requests end with the CAS's typed error, once each.
    for &(correlation, payload) in &f.requests[..3] {
        let answers = f.mesh.answers(f.sessions, f.s, correlation);
        assert_eq!(
            answers,
            vec![zlink::wire::client::ClientFrame::Error {
                correlation,
                error: error(Reason::StaleAuthority).about_actor(&actor_id("a")),
            }],
            "{payload:?}"
        );
    }

    // And the session owner's seal timeout (3,000 ms from the seal) cleans
    // up: the session closes with SealTimeout and r4 is never delivered.
    let timeout = Duration::from_millis(3_000);
    advance_to(&mut f.mesh, sealed_at + (timeout - MICRO));
    assert!(!f.mesh.closed(f.sessions, f.s));
    advance_to(&mut f.mesh, sealed_at + timeout);
    assert_eq!(
        closes(&f.mesh, f.sessions, f.s),
        vec![zlink::wire::client::CloseReason::SealTimeout]
    );
    f.mesh.run();
    let (r4, _) = f.requests[3];
    assert!(!f
        .mesh
        .answers(f.sessions, f.s, r4)
        .iter()
        .any(|a| matches!(a, zlink::wire::client::ClientFrame::Reply { .. })));
    for node in [f.source, f.target] {
        assert!(!delivered(&f.mesh, node, "a").contains(&b(b"r4")));
    }
    assert_eq!(f.relayed_to(f.source, ready_at), 0);
    // X22: the sealed binding still ends with one disconnect notice over
    // the stored (source) route, which reopens nothing there: the source
    // hosts no "a" and runs no callback for it.
    assert_eq!(f.notices_to(f.source, ready_at), 1);
    assert_eq!(f.notices_to(f.target, ready_at), 0);
    assert!(f.mesh.disconnect_callbacks(f.source, &f.a.id).is_empty());
    assert!(!f
        .mesh
        .node(f.source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. })));
}

/// Found by zlink-sim (seed 4043 of `--steps 2000`, the soak): an Actor
/// moved from one node to another and back kept a Message Follow entry at
/// each; once it was destroyed, a record for it bounced between the two
/// entries for ever (each rewrote the route to the other's), a record loop
/// on the links that no deadline ended for one-way records and tombstones.
#[test]
fn core_relocation_an_actor_moved_away_and_back_leaves_no_follow_loop() {
    // Given "a" moved from the source to the target and back again, then
    // destroyed at the source, and a caller holding the ActorRef from
    // before the moves.
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let away = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, away).unwrap().is_ok());
    let back = relocate(&mut mesh, target, "a", source);
    assert!(finished(&mesh, target, back).unwrap().is_ok());
    mesh.destroy(source, &stale.id).unwrap();
    let followed_before = (
        count(&mesh, source, FlowTrace::MessageFollowed),
        count(&mesh, target, FlowTrace::MessageFollowed),
    );

    // When a session binds the stale ActorRef, and time passes.
    let s = mesh.connect(sessions);
    let ticket = bind_pending(&mut mesh, sessions, s, &stale);
    mesh.advance(Duration::from_secs(1));

    // Then the source, which hosted "a" after its entry for the first move,
    // keeps no entry from that move: the bind is not forwarded and ends with
    // StaleLocation, and nothing goes round between the two nodes.
    assert!(!mesh.node(source).core().relocation().follows(&stale.id));
    let outcome = mesh.bind_outcome(sessions, ticket).expect("a terminal");
    assert_eq!(outcome, Err(error(Reason::StaleLocation)));
    assert_eq!(
        (
            count(&mesh, source, FlowTrace::MessageFollowed),
            count(&mesh, target, FlowTrace::MessageFollowed),
        ),
        followed_before
    );
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 0);
    assert_eq!(mesh.node(target).core().relocation().proxy_count(), 0);
}

#[test]
fn core_relocation_a_record_addressed_after_the_move_is_not_followed_back() {
    // Given "a" moved from the source to the target, and a session bound to
    // it at the target whose one-way message the target has handled.
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let away = relocate(&mut mesh, source, "a", target);
    let moved = finished(&mesh, source, away).unwrap().unwrap();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &moved);
    send(&mut mesh, sessions, s, "a", b"once").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, target, "a"), vec![b(b"once")]);
    let message = tapped(&mesh, Command::ActorSend)
        .into_iter()
        .find(|t| t.from == sessions && t.to == target)
        .expect("the relay to the target")
        .record;
    let followed = count(&mesh, source, FlowTrace::MessageFollowed);

    // When that same record, which names the target's authority, reaches
    // the source (a record that went astray).
    mesh.inject(sessions, source, message);
    mesh.run();

    // Then the source's follow entry, older than that authority, does not
    // send it on: the target handles it once, and the source follows
    // nothing more.
    assert!(mesh.node(source).core().relocation().follows(&stale.id));
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), followed);
    assert_eq!(delivered(&mesh, target, "a"), vec![b(b"once")]);
}

/// §9 Message Follow, §12: a follow entry forwards only records addressed
/// to the moved incarnation before the move. A 24, a 70 or a tombstone
/// naming another incarnation of the Actor, and a 38 or a 70 that already
/// names the move's authority (addressed after it), go to the source's
/// registry instead: none is sent on, and the entry stays for the records
/// it does forward.
#[test]
fn core_relocation_records_for_another_incarnation_or_at_the_moves_authority_are_not_followed() {
    use zlink::wire::node::{ActorCall, ActorMessage, BindTombstone, CallBody, TombstoneCause};
    // Given "a" moved from the source to the target, and a session bound
    // to it at the target (its 38 and a one-way 24 went there directly).
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let away = relocate(&mut mesh, source, "a", target);
    let moved = finished(&mesh, source, away).unwrap().unwrap();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &moved);
    send(&mut mesh, sessions, s, "a", b"once").unwrap();
    mesh.run();
    let to_target = |mesh: &Mesh, command| {
        tapped(mesh, command)
            .into_iter()
            .find(|t| t.from == sessions && t.to == target)
            .expect("a record to the target")
            .record
    };
    let NodeRecord::ActorSend(ActorSend::Message(message)) = to_target(&mesh, Command::ActorSend)
    else {
        panic!("the relay is a 24 message")
    };
    let NodeRecord::BoundSessionBind(BoundSessionBind::Request(bind)) =
        to_target(&mesh, Command::BoundSessionBind)
    else {
        panic!("the bind is a 38")
    };
    let (before, after) = (stale.location.authority, moved.location.authority);
    assert!(before < after);
    let other = stale.generation.next();
    let call = |object_generation, authority| {
        NodeRecord::ActorCall(ActorCall {
            request: None,
            actor: stale.id.clone(),
            object_generation,
            authority,
            lease: stale.location.lease,
            from: None,
            body: CallBody::Message {
                key: PUSH_KEY,
                payload: b(b"call"),
            },
        })
    };
    let records = vec![
        (
            "a 24 for another incarnation",
            NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
                object_generation: other,
                authority: before,
                ..message
            })),
        ),
        ("a 70 for another incarnation", call(other, before)),
        (
            "a tombstone for another incarnation",
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(BindTombstone {
                actor: stale.id.clone(),
                object_generation: other,
                session: bind.session,
                binding: bind.binding,
                cause: TombstoneCause::Disconnect,
            })),
        ),
        (
            "a 38 at the move's authority",
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(bind)),
        ),
        (
            "a 70 at the move's authority",
            call(stale.generation, after),
        ),
    ];
    for (what, record) in records {
        let followed = count(&mesh, source, FlowTrace::MessageFollowed);
        let sent = commands(&mesh, source, target).len();
        // When it reaches the source (a record gone astray),
        mesh.inject(sessions, source, record);
        mesh.run();
        // then nothing is sent on, and the entry stays.
        assert_eq!(
            count(&mesh, source, FlowTrace::MessageFollowed),
            followed,
            "{what} was followed"
        );
        assert_eq!(
            commands(&mesh, source, target).len(),
            sent,
            "{what} went on"
        );
        assert!(mesh.node(source).core().relocation().follows(&stale.id));
    }
}

/// X22 (§7, §8.1, §9): the binding a seal timeout ends is notified too —
/// one disconnect notice and then its tombstone, over the stored (source)
/// route only; after a committed move the source's Message Follow takes
/// them to the target, once.
#[test]
fn core_x22_a_seal_timeout_after_a_commit_notifies_the_actor_once_at_the_target() {
    // Given a move whose 44 commit never reaches the session owner.
    let mut f = Flow::start(|mesh, _, target| {
        mesh.set_dropping(target, NodeRid(1), Command::SessionRelocationRoute, true);
    });
    let sealed_at = tapped(&f.mesh, Command::SessionRelocationSealed)[0].at;
    f.mesh.run();
    let moved = finished(&f.mesh, f.source, f.relocation)
        .expect("finished")
        .expect("committed");
    assert_eq!(moved.location.owner, f.target);
    let followed = count(&f.mesh, f.source, FlowTrace::MessageFollowed);

    // When the seal times out at the session owner.
    let timeout = Duration::from_millis(3_000);
    advance_to(&mut f.mesh, sealed_at + timeout);
    f.mesh.run();

    // Then the session closed with SealTimeout, and the Actor at the target
    // saw its disconnect callback exactly once: the notice went to the
    // source only, which followed it (and then the tombstone) to the target.
    assert_eq!(
        closes(&f.mesh, f.sessions, f.s),
        vec![zlink::wire::client::CloseReason::SealTimeout]
    );
    assert_eq!(f.notices_to(f.source, sealed_at), 1);
    assert_eq!(f.notices_to(f.target, sealed_at), 0);
    assert_eq!(f.mesh.disconnect_callbacks(f.target, &f.a.id).len(), 1);
    assert!(f.mesh.disconnect_callbacks(f.source, &f.a.id).is_empty());
    assert_eq!(
        count(&f.mesh, f.source, FlowTrace::MessageFollowed),
        followed + 2,
        "the notice and its tombstone, each forwarded once"
    );
    // The binding is gone everywhere: the target's registry, the session.
    assert_eq!(
        f.mesh
            .node(f.target)
            .core()
            .actor_owner()
            .current_binding(&f.a.id),
        None
    );
    assert!(ended(&f.mesh, f.sessions, f.s));
    // A later marker: more time brings no second callback.
    f.mesh.advance(Duration::from_secs(10));
    assert_eq!(f.mesh.disconnect_callbacks(f.target, &f.a.id).len(), 1);
}

#[test]
fn core_x22_a_seal_timeout_after_an_abort_notifies_the_actor_once_at_the_source() {
    // Given a move that aborts (the target cannot restore) and whose 44
    // abort never reaches the session owner.
    let mut f = Flow::start(|mesh, source, target| {
        mesh.set_restore(target, RestoreBehavior::Fail(error(Reason::NoActorFactory)));
        mesh.set_dropping(source, NodeRid(1), Command::SessionRelocationRoute, true);
    });
    let sealed_at = tapped(&f.mesh, Command::SessionRelocationSealed)[0].at;
    f.mesh.run();
    assert!(matches!(
        finished(&f.mesh, f.source, f.relocation),
        Some(Err(_))
    ));
    f.mesh
        .set_behavior(f.source, zlink::sim::ActorBehavior::Echo);
    f.mesh.run_lane(f.source, &f.a.id);

    // When the seal times out at the session owner.
    advance_to(&mut f.mesh, sealed_at + Duration::from_millis(3_000));
    f.mesh.run();

    // Then the source, owner again, ran the disconnect callback once, and
    // the target never heard of it.
    assert_eq!(f.notices_to(f.source, sealed_at), 1);
    assert_eq!(f.notices_to(f.target, sealed_at), 0);
    assert_eq!(f.mesh.disconnect_callbacks(f.source, &f.a.id).len(), 1);
    assert!(f.mesh.disconnect_callbacks(f.target, &f.a.id).is_empty());
    assert_eq!(
        f.mesh
            .node(f.source)
            .core()
            .actor_owner()
            .current_binding(&f.a.id),
        None
    );
    assert!(ended(&f.mesh, f.sessions, f.s));
}

/// §2, §9 Message Follow: a bind forwarded by the source is judged at the
/// target by its binding, as any bind, though the source's NodeGeneration is
/// not the session owner's lifecycle: only a record of a session owned by
/// the sending node itself is held to the link's lifecycle (§4).
#[test]
fn core_s3_a_bind_followed_from_a_source_of_another_node_generation_binds_at_the_target() {
    // Given "a" relocated from the source (node 2, NodeGeneration 5) to the
    // target (node 3), and a session on node 1 (lifecycle 1) holding the
    // old ActorRef.
    let mut mesh = mesh();
    let sessions = mesh.add_node(1);
    let source = mesh.add_node_with(2, 5, zlink::core::session::SessionOwnerConfig::default());
    let target = mesh.add_node(3);
    let stale = mesh.create(source, "a");
    let relocation = relocate(&mut mesh, source, "a", target);
    let moved = finished(&mesh, source, relocation).unwrap().unwrap();

    // When the session binds the stale ActorRef and relays over the binding.
    let s = mesh.connect(sessions);
    let bound = bind_ok(&mut mesh, sessions, s, &stale);
    send(&mut mesh, sessions, s, "a", b"after").unwrap();
    mesh.run();

    // Then the source followed the bind to the target, which registered it
    // (no stale-lifecycle refusal) and takes the relay.
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), 1);
    assert_eq!(count(&mesh, target, FlowTrace::StaleLifecycleRecord), 0);
    assert_eq!(bound.location, moved.location);
    assert_eq!(
        registered(&mesh, target, "a").map(|b| b.owner),
        Some(sessions)
    );
    assert_eq!(delivered(&mesh, target, "a"), vec![b(b"after")]);
}

/// docs/relocation.md "Message Follow": after a commit the source keeps one
/// follow entry for the moved Actor, and one proxy for each followed
/// request until its answer comes back through it; the entry goes at the
/// end of its lifetime, and then nothing of the move is left at the source
/// (`is_idle`: no leak once every move ended and its follow lifetime
/// passed).
#[test]
fn core_relocation_a_source_keeps_its_follow_entry_and_proxies_until_they_end_then_nothing() {
    // Given "a" at the source, and no move yet: nothing is held anywhere.
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let held = |mesh: &Mesh, node: NodeRid| {
        let relocation = mesh.node(node).core().relocation();
        (
            relocation.follow_count(),
            relocation.proxy_count(),
            relocation.is_idle(),
        )
    };
    assert_eq!(held(&mesh, source), (0, 0, true));

    // When "a" moves to the target and the move commits.
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());

    // Then the source holds one follow entry, and is not idle.
    assert_eq!(held(&mesh, source), (1, 0, false));

    // When a session binds the stale ActorRef: the source forwards the
    // bind to the target under a proxy id.
    let s = mesh.connect(sessions);
    let ticket = bind_pending(&mut mesh, sessions, s, &stale);
    mesh.advance(LATENCY * 2);

    // Then the source holds that proxy until the target's terminal comes
    // back through it.
    assert_eq!(held(&mesh, source), (1, 1, false));
    mesh.run();
    assert!(matches!(mesh.bind_outcome(sessions, ticket), Some(Ok(_))));
    assert_eq!(held(&mesh, source), (1, 0, false));

    // When the follow entry's lifetime (30,000 ms from the commit) passes.
    mesh.advance(Duration::from_millis(30_000));

    // Then nothing of the move is left at the source.
    assert!(!mesh.node(source).core().relocation().follows(&stale.id));
    assert_eq!(held(&mesh, source), (0, 0, true));
}

/// §12, docs/relocation.md "Message Follow": a bind the source follows to
/// the target while it has no link to it ends at once with `Unavailable`
/// (PeerUnreachable), not at a deadline, and leaves no proxy behind.
#[test]
fn core_relocation_a_bind_followed_to_an_unreachable_target_ends_at_once_peer_unreachable() {
    // Given "a" moved from the source to the target, and then the link
    // between the two gone.
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    mesh.set_linked(source, target, false);

    // When a session binds the stale ActorRef.
    let s = mesh.connect(sessions);
    let ticket = bind_pending(&mut mesh, sessions, s, &stale);
    mesh.run();

    // Then the source tried to follow it, and the bind ended with
    // PeerUnreachable as soon as its answer came back, with no proxy left.
    assert_eq!(count(&mesh, source, FlowTrace::MessageFollowed), 1);
    let outcome = mesh.bind_outcome(sessions, ticket);
    assert_eq!(
        outcome.map(|o| o.map_err(|e| e.reason())),
        Some(Err(Reason::PeerUnreachable))
    );
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 0);
}

/// "a" moved from the source to the target, and a bind of the stale
/// ActorRef that the source followed to the target, whose terminal (38) is
/// lost on its way back: the bind is open, its proxy at the source.
fn a_followed_bind_whose_terminal_is_lost() -> (
    Mesh,
    NodeRid,
    NodeRid,
    NodeRid,
    zlink::core::session::Ticket,
) {
    let (mut mesh, sessions, source, target, stale) = three_nodes();
    let relocation = relocate(&mut mesh, source, "a", target);
    assert!(finished(&mesh, source, relocation).unwrap().is_ok());
    mesh.set_dropping(target, source, Command::BoundSessionBind, true);
    let s = mesh.connect(sessions);
    let ticket = bind_pending(&mut mesh, sessions, s, &stale);
    mesh.run();
    (mesh, sessions, source, target, ticket)
}

/// docs/threading.md "Node links": a bind the source followed to the
/// target keeps its deadline when the link between the two goes down
/// while it is in flight (only requests a reply ends, relays and calls,
/// end `OutcomeUnknown` then): its proxy stays until its own deadline.
#[test]
fn core_relocation_a_followed_bind_in_flight_when_the_link_goes_down_keeps_its_deadline() {
    let (mut mesh, sessions, source, target, ticket) = a_followed_bind_whose_terminal_is_lost();
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 1);

    mesh.break_link(source, target);
    mesh.run();

    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 1);
    assert_eq!(count(&mesh, source, FlowTrace::RequestLinkDown), 0);
    assert_eq!(mesh.bind_outcome(sessions, ticket), None);
}

/// docs/relocation.md "Message Follow": an answer to a followed request
/// counts only from the node it was followed to, and only of the kind its
/// origin waits for (a 38 terminal for a bind); any other is a counted
/// mismatch that ends nothing.
#[test]
fn core_relocation_an_answer_to_a_followed_bind_counts_only_from_the_target_as_a_terminal() {
    // Given "a" moved from the source to the target, and a bind of the
    // stale ActorRef the source followed to the target, whose terminal is
    // lost on its way back.
    let (mut mesh, sessions, source, target, ticket) = a_followed_bind_whose_terminal_is_lost();
    let other = mesh.add_node(4);
    let terminal = tapped(&mesh, Command::BoundSessionBind)
        .into_iter()
        .find(|t| t.from == target && t.to == source)
        .expect("the target's terminal")
        .record;
    let NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(BindTerminal { request, .. })) =
        &terminal
    else {
        panic!("not a terminal: {terminal:?}");
    };
    let proxied = *request;
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 1);

    // When that terminal reaches the source from another node, and a 24
    // reply under the same proxy id from the target.
    mesh.inject(other, source, terminal.clone());
    let reply = ActorReply {
        request: proxied,
        outcome: Ok(b(b"not a terminal")),
    };
    mesh.inject(
        target,
        source,
        NodeRecord::ActorSend(ActorSend::Reply(reply)),
    );
    mesh.run();

    // Then neither counts: two mismatches, and the bind is still open.
    assert_eq!(count(&mesh, source, FlowTrace::ReplyMismatch), 2);
    assert_eq!(mesh.bind_outcome(sessions, ticket), None);
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 1);

    // When the target's terminal reaches the source from the target.
    mesh.set_dropping(target, source, Command::BoundSessionBind, false);
    mesh.inject(target, source, terminal);
    mesh.run();

    // Then the bind ends bound at the target, and the proxy is gone.
    let bound = mesh.bind_outcome(sessions, ticket).expect("a terminal");
    assert_eq!(bound.map(|r| r.location.owner), Ok(target));
    assert_eq!(mesh.node(source).core().relocation().proxy_count(), 0);
}

/// §8, docs/relocation.md ("Handed"): after relay-ready the coordinator
/// waits for the target's 65 a bounded time (`finish_timeout`, 5,000 ms by
/// default, from its 63): a move whose 65 is lost ends `Deadline` then, not
/// a microsecond sooner, and the source does not take the Actor back (the
/// instance went with the handoff).
#[test]
fn core_relocation_a_65_never_received_ends_the_move_at_the_finish_deadline() {
    // Given a move whose target commits but whose 65 never reaches the
    // source,
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationFinished, true);
    let relocation = relocate(&mut mesh, source, "a", target);
    let cutover_at = tapped(&mesh, Command::RelocationCutover)[0].at;
    let bound = zlink::core::relocation::RelocationConfig::default().finish_timeout;

    // when time reaches 1 µs before the finish deadline, the move has not
    // ended;
    advance_to(&mut mesh, cutover_at + (bound - MICRO));
    assert_eq!(finished(&mesh, source, relocation), None);
    assert!(mesh.node(source).core().relocation().is_relocating(&a.id));

    // then at the deadline it ends Deadline, with nothing of it left
    // running at the source and no instance there.
    advance_to(&mut mesh, cutover_at + bound);
    mesh.run();
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::Deadline)))
    );
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

/// docs/relocation.md ("HandoffTooLarge"), §8: a prepare (60) must fit the
/// peer links' decode limits on both counts, the Actor's state and its
/// saved work. Small state with more saved work than `saved_work_count_max`
/// does not fit: the move ends `HandoffTooLarge` before any 60 is sent,
/// and the lane reopens at the source with all its work.
#[test]
fn core_relocation_more_saved_work_than_the_limit_aborts_before_a_prepare() {
    // Given a limit of one saved item and two requests queued on the lane,
    let mut mesh = mesh();
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        limits: zlink::wire::DecodeLimits {
            saved_work_count_max: 1,
            ..Default::default()
        },
        ..Default::default()
    });
    let (sessions, source, target) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_behavior(source, zlink::sim::ActorBehavior::Queue);
    mesh.request(sessions, s, &a, b"r1").unwrap();
    mesh.request(sessions, s, &a, b"r2").unwrap();
    mesh.run();
    assert_eq!(mesh.lane(source, &a.id).len(), 2);

    // when the source relocates "a",
    let relocation = relocate(&mut mesh, source, "a", target);

    // then the move ends HandoffTooLarge with nothing prepared, and both
    // requests are back on the lane at the source.
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::HandoffTooLarge)))
    );
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(mesh.lane(source, &a.id).len(), 2);
}

/// A source holding "a" whose relocation config allows frames of at most
/// `frame_len_max` bytes (the default when `None`).
fn three_nodes_with_frame_max(frame_len_max: Option<u32>) -> (Mesh, NodeRid, NodeRid, ActorRef) {
    let mut mesh = mesh();
    if let Some(frame_len_max) = frame_len_max {
        mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
            limits: zlink::wire::DecodeLimits {
                frame_len_max,
                ..Default::default()
            },
            ..Default::default()
        });
    }
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    let a = mesh.create(source, "a");
    (mesh, source, target, a)
}

/// docs/relocation.md ("HandoffTooLarge"), docs/wire.md "Limits": a
/// prepare (60) is sent only when its frame fits the peer links'
/// `frame_len_max`. A 60 exactly at the limit is sent and the move
/// commits; with the limit one byte lower the move ends `HandoffTooLarge`
/// at once, no 60 sent, and the Actor stays at the source.
#[test]
fn core_relocation_a_prepare_exactly_at_the_frame_limit_is_sent_one_byte_over_aborts() {
    // Given the length of this move's 60 frame body (its 4-byte length
    // prefix aside) under the default limits,
    let (mut mesh, source, target, _) = three_nodes_with_frame_max(None);
    relocate(&mut mesh, source, "a", target);
    let mut encoded = bytes::BytesMut::new();
    tapped(&mesh, Command::RelocationPrepare)[0]
        .record
        .encode(&mut encoded);
    let frame = u32::try_from(encoded.len() - 4).unwrap();

    // when the limit is exactly that, the 60 goes out and the move commits;
    let (mut mesh, source, target, _) = three_nodes_with_frame_max(Some(frame));
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(tapped(&mesh, Command::RelocationPrepare).len(), 1);
    let moved = finished(&mesh, source, relocation)
        .expect("the move ended")
        .unwrap();
    assert_eq!(moved.location.owner, target);

    // then with the limit one byte lower no 60 goes out: the move ends
    // HandoffTooLarge and "a" stays at the source, nothing of the move left.
    let (mut mesh, source, target, a) = three_nodes_with_frame_max(Some(frame - 1));
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(Error::new(Reason::HandoffTooLarge)))
    );
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(store_ops(&mesh).is_empty());
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a.clone())
    );
    assert_eq!(mesh.node(source).core().armed_timers(), 0);
}

/// relocation/mod.rs, `proxy_max`, and the late-62 rule above: work that a
/// late 62 merges into a move under way joins that move's ingress hold only
/// while the hold has room. At a target that allows no held records, the
/// late request is refused `QueueFull` and answered to its client, never
/// held past the bound and never run.
#[test]
fn core_relocation_a_late_62_at_an_actor_moving_on_with_a_full_hold_is_refused_queue_full() {
    // Given the same late-62 race as above, the target (and the next node)
    // allowing no held records,
    let mut mesh = mesh();
    let (sessions, source) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        proxy_max: 0,
        ..Default::default()
    });
    let (target, next) = (mesh.add_node(3), mesh.add_node(4));
    let a = mesh.create(source, "a");
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let held = mesh.request(sessions, s, &a, b"held").unwrap();
    mesh.relocations(source).relocate(&a.id, target).unwrap();
    mesh.run();
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");

    // when the source hands its ingress hold over after the target began
    // moving "a" on,
    mesh.release_store();
    mesh.run();
    mesh.set_restore(next, RestoreBehavior::Hold);
    mesh.relocations(target).relocate(&a.id, next).unwrap();
    mesh.run();
    mesh.release_store();
    mesh.run();
    assert!(tapped(&mesh, Command::RelocationIngressHold)
        .iter()
        .any(|t| t.from == source && t.to == target));

    // then the request is refused QueueFull at once and runs nowhere, even
    // after the next move commits.
    let answers = mesh.answers(sessions, s, held);
    assert!(
        matches!(
            &answers[..],
            [zlink::wire::client::ClientFrame::Error { error, .. }]
                if error.reason() == Reason::QueueFull
        ),
        "{answers:?}"
    );
    mesh.finish_restore(next, Ok(()));
    mesh.run();
    while mesh.held_store() > 0 {
        mesh.release_store();
        mesh.run();
    }
    mesh.advance(Duration::from_millis(1));
    assert!(mesh.delivered(target, &a.id).is_empty());
    assert!(mesh.delivered(next, &a.id).is_empty());
    assert_eq!(mesh.answers(sessions, s, held), answers);
}

/// The outcomes of node code's requests that ended at `node`, in order.
fn node_call_outcomes(
    mesh: &Mesh,
    node: NodeRid,
) -> Vec<(zlink::ids::CallId, Result<bytes::Bytes, Error>)> {
    mesh.journal()
        .iter()
        .filter_map(|j| match j {
            Journal::Event {
                node: n,
                event: CoreEvent::NodeCallOutcome { call, outcome },
                ..
            } if *n == node => Some((*call, outcome.clone())),
            _ => None,
        })
        .collect()
}

/// §8.1, docs/relocation.md ("No 60 left, no durable abort"): when the
/// runtime cannot capture the Actor, nothing was taken off its lane, but
/// what reached the move's ingress hold meanwhile was admitted and held:
/// the lane reopens and that work runs at the source, in arrival order,
/// before the caller gets the capture's error. Nothing is prepared.
#[test]
fn core_relocation_a_failed_capture_reopens_the_lane_with_the_ingress_hold() {
    use zlink::core::actor::ActorEvent;
    use zlink::core::session::SessionOwnerConfig;
    use zlink::core::time::Instant;
    use zlink::ids::{
        AuthorityOwnerGeneration, NodeGeneration, ObjectGeneration, OwnerLeaseGeneration,
        PacketKey, Peer,
    };
    use zlink::wire::node::{ActorCall, CallBody};

    // Given "a", unbound, hosted on one shard, whose move to node 2 waits
    // for the runtime's capture,
    let now = Instant::from_millis(1_000);
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = actor_id("a");
    core.actors(now)
        .host(a.clone(), ObjectGeneration(1), AuthorityOwnerGeneration(1))
        .unwrap();
    let relocation = core.relocations(now).relocate(&a, NodeRid(2)).unwrap();
    let mut asked = Vec::new();
    while let Some(event) = core.poll_event() {
        asked.push(event);
    }
    assert!(
        asked.iter().any(|e| matches!(
            e,
            CoreEvent::Relocation(RelocationEvent::Capture { relocation: r, .. }) if *r == relocation
        )),
        "{asked:?}"
    );
    // and a one-way message from another Actor reaching it meanwhile (held),
    let message = ActorCall {
        request: None,
        actor: a.clone(),
        object_generation: ObjectGeneration(1),
        authority: AuthorityOwnerGeneration(1),
        lease: OwnerLeaseGeneration(1),
        from: Some(actor_id("b")),
        body: CallBody::Message {
            key: PacketKey(7),
            payload: b(b"held"),
        },
    };
    let from = Peer {
        rid: NodeRid(3),
        generation: NodeGeneration(1),
    };
    core.handle_record(now, from, NodeRecord::ActorCall(message));
    assert!(core.poll_event().is_none(), "a captured Actor gets nothing");

    // when the runtime answers that it could not capture the Actor,
    let refusal = error(Reason::NotRelocatable);
    core.relocations(now)
        .captured(relocation, Err(refusal.clone()));

    // then the lane reopens, the held message runs at the source, and the
    // move ends with the capture's error; nothing went to the target.
    let mut seen = Vec::new();
    while let Some(event) = core.poll_event() {
        match event {
            CoreEvent::Relocation(RelocationEvent::Reopen { .. }) => seen.push("reopen".into()),
            CoreEvent::Actor(ActorEvent::Call { payload, .. }) => {
                seen.push(format!("call {}", String::from_utf8_lossy(&payload)))
            }
            CoreEvent::Relocation(RelocationEvent::Finished { outcome, .. }) => {
                assert_eq!(outcome, Err(refusal.clone()));
                seen.push("finished".into());
            }
            _ => {}
        }
    }
    assert_eq!(seen, vec!["reopen", "call held", "finished"]);
    assert!(!core.relocation().is_relocating(&a));
    while let Some(transmit) = core.poll_transmit() {
        assert_ne!(transmit.to, NodeRid(2), "{:?}", transmit.record);
    }
}

/// §8.1, docs/relocation.md ("Abort before relay-ready is accepted", "The
/// store says the target won", `Absent`): a durable abort that finds the row
/// owned by a node other than the target (the target committed and moved
/// the Actor on meanwhile) does not commit this move: the source hands
/// nothing to the target (no 63), never reopens, drops its instance and
/// ends the move `StaleAuthority`, even though the target's 65 came.
#[test]
fn core_relocation_an_abort_that_finds_a_third_owner_hands_nothing_to_the_target() {
    // Given a relocation whose 61 is lost, so the source's durable abort
    // races the target's fallback CAS at a store that holds both,
    let (mut mesh, _, source, target, a) = three_nodes();
    let next = mesh.add_node(4);
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");

    // when the target's CAS commits (its 65 reaches the source), the abort
    // fails once (the store is down), the target moves "a" on to a third
    // node, and only then the abort is made again,
    mesh.release_store();
    mesh.run();
    mesh.set_store(StoreBehavior::Down);
    mesh.release_store();
    mesh.run();
    assert_eq!(count(&mesh, source, FlowTrace::RelocationStoreRetry), 1);
    mesh.set_store(StoreBehavior::Immediate);
    let moved_on = relocate(&mut mesh, target, "a", next);
    assert_eq!(
        finished(&mesh, target, moved_on).map(|r| r.map(|a| a.location.owner)),
        Some(Ok(next))
    );
    mesh.advance(Duration::from_millis(200));
    mesh.run();

    // then the store names the third node, and the source's move ends
    // StaleAuthority: no 63 to the target, no reopen, no instance left.
    let ops = store_ops(&mesh);
    assert_eq!(
        ops.last().map(|op| op.2.clone()),
        Some(StoreDone::Abort(Ok(AbortAnswer::Moved { owner: next })))
    );
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::StaleAuthority)))
    );
    assert_eq!(commands(&mesh, source, target), vec![60]);
    let reopened = mesh
        .node(source)
        .relocation_events
        .iter()
        .any(|e| matches!(e, RelocationEvent::Reopen { .. }));
    assert!(!reopened);
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        None
    );
}

/// docs/relocation.md ("The store says the target won": "a 65 that
/// overtakes the store's answer is kept until the answer comes"): the
/// first 65 is the one kept. A second 65 for the same move (a duplicate
/// with another outcome) while the durable abort is still out is stale,
/// counted, and changes nothing: the move ends with the first 65's
/// outcome once the store says the target won.
#[test]
fn core_relocation_a_second_65_while_the_abort_is_out_is_stale_and_the_first_is_kept() {
    // Given a relocation whose 61 is lost, the target's fallback CAS and the
    // source's durable abort both held at the store,
    let (mut mesh, _, source, target, a) = three_nodes();
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");
    // and the target's CAS committed, its 65 kept by the aborting source,
    mesh.release_store();
    mesh.run();
    assert_eq!(tapped(&mesh, Command::RelocationFinished).len(), 1);
    let stale = count(&mesh, source, FlowTrace::RelocationRecordStale);

    // when a second 65 for the move, with a failure, comes from the target,
    let duplicate = zlink::wire::node::RelocationFinished {
        relocation,
        actor: a.id.clone(),
        outcome: Err(error(Reason::RelocationAborted)),
    };
    mesh.inject(target, source, NodeRecord::RelocationFinished(duplicate));
    mesh.run();
    assert_eq!(
        count(&mesh, source, FlowTrace::RelocationRecordStale),
        stale + 1
    );
    assert_eq!(finished(&mesh, source, relocation), None);

    // then once the store says the target won, the move ends with the
    // first 65's outcome: the Actor at the target.
    mesh.release_store();
    mesh.run();
    let moved = finished(&mesh, source, relocation)
        .expect("the move ended")
        .expect("with the first 65's outcome");
    assert_eq!(moved.location.owner, target);
    assert!(mesh.node(source).core().relocation().follows(&a.id));
}

/// §6, §7, docs/relocation.md ("The Actor owner's side", a 38 tombstone
/// "applied and held"; `retire_held`): a tombstone that reaches the
/// ingress hold ends the held work of the binding it retires, never given
/// to the Actor: a request of that binding is answered `StaleBinding` to
/// its client, counted as a dropped held message, and runs nowhere, at the
/// source or the target.
#[test]
fn core_relocation_a_tombstone_reaching_the_ingress_hold_ends_the_held_work_of_its_binding() {
    use zlink::wire::node::{BindTombstone, TombstoneCause};

    // Given s bound to "a" at the source, a move starting and a request of
    // s reaching the source after the capture (held),
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    let binding = registered(&mesh, source, "a").expect("s's binding");
    let relocation = mesh.relocations(source).relocate(&a.id, target).unwrap();
    let held = mesh.request(sessions, s, &a, b"held").unwrap();
    mesh.drain_outputs();

    // when the tombstone of s's binding comes right behind it,
    let tombstone = BindTombstone {
        actor: a.id.clone(),
        object_generation: a.generation,
        session: mesh.node(sessions).core().session_owner().session_ref(s),
        binding: binding.generation,
        cause: TombstoneCause::Disconnect,
    };
    mesh.inject(
        sessions,
        source,
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)),
    );
    mesh.run();

    // then the held request ends StaleBinding, once, counted, and runs
    // nowhere, while the move itself goes on and commits.
    let answers = mesh.answers(sessions, s, held);
    assert!(
        matches!(
            &answers[..],
            [zlink::wire::client::ClientFrame::Error { error, .. }]
                if error.reason() == Reason::StaleBinding
        ),
        "{answers:?}"
    );
    assert_eq!(count(&mesh, source, FlowTrace::HeldMessageDropped), 1);
    assert!(delivered(&mesh, source, "a").is_empty());
    assert!(delivered(&mesh, target, "a").is_empty());
    let moved = finished(&mesh, source, relocation).expect("the move ended");
    assert_eq!(moved.map(|r| r.location.owner), Ok(target));
}

/// docs/relocation.md "Message Follow" (§9), relocation/mod.rs `proxy_max`:
/// records for the Actor that reach the source between relay-ready and the
/// 65 wait at the coordinator, at most `proxy_max` of them, and are
/// forwarded once the 65 gives the route; past the bound a request ends at
/// once `Unavailable` (QueueFull), answered to its sender: a request of
/// node code with a reply, a bind (38) with its terminal.
#[test]
fn core_relocation_records_after_relay_ready_wait_up_to_the_bound_then_are_refused_queue_full() {
    use zlink::ids::{CallId, PacketKey};

    // Given a source that keeps at most one record for a move, and a move
    // past relay-ready whose target's CAS waits at the store,
    let mut mesh = mesh();
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        proxy_max: 1,
        ..Default::default()
    });
    let (sessions, source, target, caller) = (
        mesh.add_node(1),
        mesh.add_node(2),
        mesh.add_node(3),
        mesh.add_node(5),
    );
    let a = mesh.create(source, "a");
    mesh.set_store(StoreBehavior::Hold);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(commands(&mesh, source, target), vec![60, 63]);
    assert_eq!(mesh.held_store(), 1, "the target's CAS");

    // when two requests of node code and then a bind reach the source,
    for n in 1..=2 {
        mesh.actors(caller).node_request(
            None,
            &a,
            PacketKey(7),
            b(b"q"),
            CallId(n),
            Duration::from_secs(2),
        );
    }
    mesh.drain_outputs();
    let s = mesh.connect(sessions);
    let bind = bind_pending(&mut mesh, sessions, s, &a);
    mesh.run();

    // then the first waits, and the second and the bind end QueueFull at
    // once, before the move ends;
    assert_eq!(finished(&mesh, source, relocation), None);
    assert_eq!(
        node_call_outcomes(&mesh, caller),
        vec![(CallId(2), Err(error(Reason::QueueFull)))]
    );
    assert_eq!(
        mesh.bind_outcome(sessions, bind),
        Some(Err(error(Reason::QueueFull)))
    );

    // and once the target commits, the first is forwarded and answered.
    mesh.release_store();
    mesh.run();
    assert!(finished(&mesh, source, relocation).is_some_and(|r| r.is_ok()));
    assert_eq!(
        node_call_outcomes(&mesh, caller),
        vec![
            (CallId(2), Err(error(Reason::QueueFull))),
            (CallId(1), Ok(b(b"q"))),
        ]
    );
}

/// docs/relocation.md ("Abort before relay-ready is accepted"): a link
/// that drops while the coordinator waits for the 43 of a session owner
/// there ends the move at once, `PeerUnreachable`, not at the seal's
/// deadline; the Actor stays at the source.
#[test]
fn core_relocation_a_link_to_the_session_owner_that_drops_while_sealing_ends_the_move_at_once() {
    // Given s bound to "a" and a move whose 42 is lost on its way,
    let (mut mesh, sessions, source, target, a) = three_nodes();
    let s = mesh.connect(sessions);
    bind_ok(&mut mesh, sessions, s, &a);
    mesh.set_dropping(source, sessions, Command::SessionRelocationSeal, true);
    let relocation = relocate(&mut mesh, source, "a", target);
    assert_eq!(finished(&mesh, source, relocation), None);

    // when the link to the session owner goes down,
    mesh.set_linked(source, sessions, false);
    mesh.run();

    // then the move ends now, PeerUnreachable, nothing prepared, and "a"
    // is at the source with nothing of the move left.
    assert_eq!(
        finished(&mesh, source, relocation),
        Some(Err(error(Reason::PeerUnreachable)))
    );
    assert!(tapped(&mesh, Command::RelocationPrepare).is_empty());
    assert!(!mesh.node(source).core().relocation().is_relocating(&a.id));
    assert_eq!(
        mesh.node(source).core().actor_owner().actor_ref(&a.id),
        Some(a)
    );
}

/// The late-62 race above with a tombstone in the source's ingress hold:
/// "a" (unbound) moves source → target, its 61 lost, so the source's
/// durable abort races the target's fallback CAS at a store that holds
/// both; a tombstone from the session owner of node 1 reaches the source
/// after the capture and joins its hold. The target, allowing `target_max`
/// records per move, commits and starts moving "a" on to `next`: past
/// relay-ready (`handed`, its CAS held at the store) or not (`next`'s
/// restore waits). Only then does the abort learn that authority moved, and
/// the source hands its hold — the tombstone — to the target, late.
/// Returns the mesh, the target, `next`, the tombstone and the target's
/// count of refused one-way records before the late 62.
fn late_tombstone_at_an_actor_moving_on(
    handed: bool,
    target_max: usize,
) -> (
    Mesh,
    NodeRid,
    NodeRid,
    zlink::wire::node::BindTombstone,
    u64,
) {
    use zlink::wire::node::{BindTombstone, TombstoneCause};

    let mut mesh = mesh();
    let (sessions, source) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_relocation_config(zlink::core::relocation::RelocationConfig {
        proxy_max: target_max,
        ..Default::default()
    });
    let (target, next) = (mesh.add_node(3), mesh.add_node(4));
    let a = mesh.create(source, "a");
    let s = mesh.connect(sessions);
    mesh.set_dropping(target, source, Command::RelocationReady, true);
    mesh.set_store(StoreBehavior::Hold);
    mesh.relocations(source).relocate(&a.id, target).unwrap();
    mesh.run();
    let tombstone = BindTombstone {
        actor: a.id.clone(),
        object_generation: a.generation,
        session: mesh.node(sessions).core().session_owner().session_ref(s),
        binding: zlink::ids::BindingGeneration(1),
        cause: TombstoneCause::Disconnect,
    };
    mesh.inject(
        sessions,
        source,
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone.clone())),
    );
    mesh.run();
    mesh.advance(Duration::from_millis(1_500));
    assert_eq!(mesh.held_store(), 2, "the target's CAS, then the abort");
    mesh.release_store();
    mesh.run();
    if !handed {
        mesh.set_restore(next, RestoreBehavior::Hold);
    }
    mesh.relocations(target).relocate(&a.id, next).unwrap();
    mesh.run();
    if handed {
        assert_eq!(commands(&mesh, target, next), vec![60, 63]);
        assert_eq!(mesh.held_store(), 2, "the abort, then next's CAS");
    } else {
        assert_eq!(commands(&mesh, target, next), vec![60]);
    }
    let refused = count(&mesh, target, FlowTrace::OneWayRecordRefused);
    mesh.release_store();
    mesh.run();
    let late = tapped(&mesh, Command::RelocationIngressHold);
    assert!(
        late.iter().any(|t| t.from == source && t.to == target),
        "the source handed its hold over"
    );
    (mesh, target, next, tombstone, refused)
}

/// Whether `from` sent `to` the tombstone, in a 62 or as a 38.
fn sent_tombstone(
    mesh: &Mesh,
    from: NodeRid,
    to: NodeRid,
    tombstone: &zlink::wire::node::BindTombstone,
) -> bool {
    use zlink::wire::node::{RelocationIngressHold, SavedWork};
    mesh.tap().iter().any(|t| {
        t.from == from
            && t.to == to
            && match &t.record {
                NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(x)) => x == tombstone,
                NodeRecord::RelocationIngressHold(RelocationIngressHold {
                    work:
                        SavedWork::Tombstone {
                            session, binding, ..
                        },
                    ..
                }) => *session == tombstone.session && *binding == tombstone.binding,
                _ => false,
            }
    })
}

/// docs/relocation.md (a 38 tombstone in the Actor owner's phases:
/// "applied and held"; the late-62 rule above; `proxy_max`): a tombstone a
/// late 62 brings to an Actor whose next move has not reached relay-ready
/// joins that move's ingress hold, and goes on to the next node in its
/// 62s, while the hold has room; at a full hold it is a counted drop, and
/// nothing carries it on.
#[test]
fn core_relocation_a_late_62_tombstone_joins_the_next_moves_hold_while_it_has_room() {
    let default_max = zlink::core::relocation::RelocationConfig::default().proxy_max;
    // With room: carried on in the next move's 62s, nothing refused.
    let (mut mesh, target, next, tombstone, refused) =
        late_tombstone_at_an_actor_moving_on(false, default_max);
    assert!(!sent_tombstone(&mesh, target, next, &tombstone));
    mesh.finish_restore(next, Ok(()));
    mesh.run();
    assert!(sent_tombstone(&mesh, target, next, &tombstone));
    assert_eq!(
        count(&mesh, target, FlowTrace::OneWayRecordRefused),
        refused
    );

    // At a target allowing no held records: dropped and counted, never
    // carried on.
    let (mut mesh, target, next, tombstone, refused) =
        late_tombstone_at_an_actor_moving_on(false, 0);
    assert_eq!(
        count(&mesh, target, FlowTrace::OneWayRecordRefused),
        refused + 1
    );
    mesh.finish_restore(next, Ok(()));
    mesh.run();
    assert!(!sent_tombstone(&mesh, target, next, &tombstone));
}

/// docs/relocation.md (Handed: a 38 tombstone is "kept, then forwarded";
/// "Message Follow", §9): a tombstone a late 62 brings to an Actor already
/// handed on (its next move past relay-ready) waits for that move's 65 and
/// then follows the Actor to the next node, while the move keeps fewer than
/// `proxy_max` records; past that it is a counted drop.
#[test]
fn core_relocation_a_late_62_tombstone_at_an_actor_handed_on_follows_it_after_the_65() {
    let default_max = zlink::core::relocation::RelocationConfig::default().proxy_max;
    // With room: kept until the next node commits, then followed there.
    let (mut mesh, target, next, tombstone, refused) =
        late_tombstone_at_an_actor_moving_on(true, default_max);
    assert!(!sent_tombstone(&mesh, target, next, &tombstone));
    mesh.release_store();
    mesh.run();
    assert!(sent_tombstone(&mesh, target, next, &tombstone));
    assert_eq!(
        count(&mesh, target, FlowTrace::OneWayRecordRefused),
        refused
    );

    // At a target keeping no records: dropped and counted, never followed.
    let (mut mesh, target, next, tombstone, refused) =
        late_tombstone_at_an_actor_moving_on(true, 0);
    assert_eq!(
        count(&mesh, target, FlowTrace::OneWayRecordRefused),
        refused + 1
    );
    mesh.release_store();
    mesh.run();
    assert!(!sent_tombstone(&mesh, target, next, &tombstone));
}

#[test]
fn core_relocation_a_restarted_coordinators_move_is_not_refused_for_its_past_lifecycles_id() {
    // Given a committed move from `source` to `target`, whose handoff
    // lingers at the target (for records its source may still send),
    let mut mesh = Mesh::with_lease_term(LATENCY, Duration::from_secs(2));
    let (source, target) = (mesh.add_node(2), mesh.add_node(3));
    mesh.create(source, "a");
    let first = relocate(&mut mesh, source, "a", target);
    assert!(matches!(finished(&mesh, source, first), Some(Ok(_))));
    // when the source restarts (a new lifecycle, which numbers its moves
    // from the same start as the last one) and moves another Actor there,
    // under the same RelocationId,
    mesh.restart(source);
    for _ in 0..25 {
        mesh.advance(Duration::from_millis(100));
    }
    mesh.create(source, "b");
    let second = relocate(&mut mesh, source, "b", target);
    assert_eq!(
        second, first,
        "the new lifecycle's first move repeats the id"
    );
    // then the target takes it: the handoff of the past lifecycle's move
    // is over (a new NodeGeneration fences what the old one sent, §3), and
    // it makes way instead of refusing the new move as already received.
    assert!(
        matches!(finished(&mesh, source, second), Some(Ok(_))),
        "{:?}",
        finished(&mesh, source, second)
    );
    assert!(mesh
        .node(target)
        .core()
        .actor_owner()
        .actor_ref(&actor_id("b"))
        .is_some());
    // Nothing of either move is left at the target once their lingering
    // has passed: the past lifecycle's record went when it made way.
    for _ in 0..40 {
        mesh.advance(Duration::from_secs(1));
    }
    assert!(mesh.node(target).core().relocation().is_idle());
}

#[test]
fn core_relocation_a_60_repeating_the_id_of_a_committed_move_of_the_same_lifecycle_is_refused() {
    // Given a committed move whose handoff lingers at the target,
    let (mut mesh, _, source, target, _) = three_nodes();
    let first = relocate(&mut mesh, source, "a", target);
    assert!(matches!(finished(&mesh, source, first), Some(Ok(_))));
    // when a 60 of the same lifecycle repeats its id, for another Actor,
    mesh.create(source, "c");
    let mut again = the_prepare(&mesh);
    again.actor = actor_id("c");
    again.request.id = zlink::ids::RequestId(again.request.id.0 + 1_000);
    mesh.inject(
        source,
        target,
        NodeRecord::RelocationPrepare(Box::new(again.clone())),
    );
    mesh.run();
    // then it is refused as a move already received: only a new lifecycle
    // of the coordinator makes the lingering handoff give way.
    assert_eq!(
        readies(&mesh, target)
            .into_iter()
            .filter(|(id, _)| *id == again.request.id)
            .collect::<Vec<_>>(),
        vec![(again.request.id, Err(error(Reason::RelocationSealed)))]
    );
}
