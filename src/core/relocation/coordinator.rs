//! The relocation coordinator on the source Actor owner (docs/relocation.md
//! "The order"): capture the Actor while sealing its binding (42/43),
//! prepare the target (60), and on relay-ready (61) hand over the ingress
//! hold (62) and cut over (63); or abort before relay-ready — durable abort
//! first, then the source queue, then 44 abort, then 64.
//!
//! The capture is asked for together with the 42, so that the Actor's
//! ingress divides exactly as L2 says: queued at capture (saved work), or
//! reaching the source after it (the ingress hold: what the session owner
//! accepted before its seal), or held by the session owner after its seal
//! (sent to the target after 44).
//!
//! Phases, in order; each is a variant, so a state that cannot exist (a
//! prepare deadline while sealing, a reopen after relay-ready) cannot be
//! written:
//!
//! | phase | waits for | Actor's ingress (24) | a bind (38) |
//! | --- | --- | --- | --- |
//! | `Sealing` | 43 (≤ `seal_request_timeout`) and the capture | admitted and held | `Unavailable` (X5) |
//! | `Capturing` | the runtime's capture | admitted and held | `Unavailable` (X5) |
//! | `Unwinding` | the capture, to reopen after a failed seal | admitted and held | `Unavailable` (X5) |
//! | `Preparing` | 61, or `prepare_timeout` | admitted and held | `Unavailable` (X5) |
//! | `Aborting` | the store's durable abort | admitted and held | `Unavailable` (X5) |
//! | `Handed` | 65, or `finish_timeout` | kept for Message Follow | kept for Message Follow |

use bytes::BytesMut;

use super::{
    AbortAnswer, Capture, ExpectedOwner, Origin, RelocationEvent, RelocationTimer, Relocations,
    StoreOp,
};
use crate::core::actor::ActorEvent;
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, NodeRid, ObjectGeneration, Peer,
};
use crate::ids::{BindingGeneration, RelocationId, RequestId, SessionRef};
use crate::wire::node::{
    ActorCall, ActorReply, ActorSend, BindTombstone, BindingHandoff, BoundRoute, BoundSessionBind,
    NodeRecord, RelocationCutover, RelocationDiscard, RelocationFinished, RelocationIngressHold,
    RelocationPrepare, RelocationReady, RequestHeader, SavedWork, SealIdentity,
    SessionRelocationRoute, SessionRelocationSeal, SessionRelocationSealed,
};

/// One relocation of one Actor away from this shard.
#[derive(Debug)]
pub(super) struct Coordinator {
    relocation: RelocationId,
    actor: ActorId,
    generation: ObjectGeneration,
    expected: ExpectedOwner,
    target: NodeRid,
    /// The seal 42 asked for; `None` when the Actor was unbound, the 42
    /// never left, or the session owner refused it (then there is nothing
    /// for a 44 abort to release).
    seal: Option<SealIdentity>,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    /// 42 sent and the capture asked for; waits for both.
    Sealing {
        request: RequestId,
        deadline: TimerKey,
        capture: Option<Capture>,
        held: Vec<Held>,
    },
    /// The seal is installed (or there is none); waits for the capture.
    Capturing { held: Vec<Held> },
    /// The seal failed before anything was prepared; waits for the
    /// capture, so that the lane reopens with everything it held.
    Unwinding { error: Error, held: Vec<Held> },
    Preparing {
        request: RequestId,
        deadline: TimerKey,
        work: Work,
    },
    Aborting {
        error: Error,
        work: Work,
        retry: Option<TimerKey>,
        /// A 65 that overtook the store's answer (the target's CAS won the
        /// race); applied if the answer says authority moved.
        finished: Option<Result<BoundRoute, Error>>,
    },
    Handed {
        deadline: TimerKey,
        /// Records for the Actor that arrived after relay-ready, before
        /// 65: forwarded by Message Follow once the route is known.
        pending: Vec<(Peer, NodeRecord)>,
    },
}

/// What the source took off the lane and what arrived after: run at the
/// source again on abort, handed to the target on relay-ready.
#[derive(Debug, Default)]
struct Work {
    /// The queued work at capture, in order (in the 60).
    saved: Vec<ActorEvent>,
    /// What arrived after capture, in order (the ingress hold, 62).
    held: Vec<Held>,
    /// The proxy ids the saved work went out under.
    proxies: Vec<RequestId>,
}

/// One item of the ingress hold.
#[derive(Debug)]
enum Held {
    /// Admitted work, owing its reply, with the binding (session and
    /// generation) that sent it when a session did.
    Work(ActorEvent, Option<(SessionRef, BindingGeneration)>),
    /// A tombstone, already applied here; the target applies it too.
    Tombstone(BindTombstone),
}

impl Coordinator {
    /// The messages this relocation holds now (RelocationOwner::held_count).
    pub(super) fn held_count(&self) -> usize {
        let work = |held: &[Held]| held.iter().filter(|h| matches!(h, Held::Work(..))).count();
        match &self.phase {
            Phase::Sealing { held, .. }
            | Phase::Capturing { held }
            | Phase::Unwinding { held, .. } => work(held),
            Phase::Preparing { work: w, .. } | Phase::Aborting { work: w, .. } => work(&w.held),
            Phase::Handed { pending, .. } => pending
                .iter()
                .filter(|(_, r)| {
                    matches!(
                        r,
                        NodeRecord::ActorSend(ActorSend::Message(_)) | NodeRecord::ActorCall(_)
                    )
                })
                .count(),
        }
    }
}

/// What a move starts from: the Actor's incarnation, its authority owner
/// generation (the CAS's expected value, §8.1) and its current binding.
type MoveFence = (
    ObjectGeneration,
    AuthorityOwnerGeneration,
    Option<BindingHandoff>,
);

impl Phase {
    fn held_mut(&mut self) -> Option<&mut Vec<Held>> {
        match self {
            Phase::Sealing { held, .. }
            | Phase::Capturing { held }
            | Phase::Unwinding { held, .. } => Some(held),
            Phase::Preparing { work, .. } | Phase::Aborting { work, .. } => Some(&mut work.held),
            Phase::Handed { .. } => None,
        }
    }
}

impl Relocations<'_> {
    /// Starts relocating a hosted Actor to `target` (the placement policy
    /// chose it; the core only checks it is another node). While it runs,
    /// the Actor is pre-commit: a bind for it ends `Unavailable`
    /// (RelocationSealed, §12, X5). The caller's completion is
    /// [`RelocationEvent::Finished`].
    pub fn relocate(&mut self, actor: &ActorId, target: NodeRid) -> Result<RelocationId, Error> {
        let fence = self.check_move(actor, target)?;
        let relocation = self.state.relocation_id(self.owner.identity().node);
        if self.owner.awaiting(actor).is_some() {
            self.park(relocation, actor, target);
        } else {
            self.start(relocation, actor, target, fence);
        }
        Ok(relocation)
    }

    /// A move under a RelocationId it was already given (a parked move
    /// going on, parked.rs): checked again as a new one; one that cannot
    /// start ends with its [`RelocationEvent::Finished`].
    pub(super) fn relocate_as(
        &mut self,
        relocation: RelocationId,
        actor: &ActorId,
        target: NodeRid,
    ) {
        match self.check_move(actor, target) {
            Ok(_) if self.owner.awaiting(actor).is_some() => self.park(relocation, actor, target),
            Ok(fence) => self.start(relocation, actor, target, fence),
            Err(error) => self.event(RelocationEvent::Finished {
                relocation,
                actor: actor.clone(),
                outcome: Err(error),
            }),
        }
    }

    /// Whether `actor` may start moving to `target` now: this owner holds
    /// its lease, the Actor is hosted here (and not ending) and not moving
    /// already, and the target is another node. Returns what the move
    /// starts from.
    fn check_move(&self, actor: &ActorId, target: NodeRid) -> Result<MoveFence, Error> {
        if self.owner.is_fenced() {
            return Err(Reason::LeaseExpired.into());
        }
        if self.state.relocating.contains_key(actor) {
            return Err(Reason::RelocationSealed.into());
        }
        let Some(fence) = self.owner.relocation_fence(actor) else {
            return Err(Reason::StaleLocation.into());
        };
        if target == self.owner.identity().node {
            return Err(Reason::RelocationTargetInvalid.into());
        }
        Ok(fence)
    }

    /// Starts a checked move: seals the binding (42) or, unbound, captures
    /// at once.
    fn start(
        &mut self,
        relocation: RelocationId,
        actor: &ActorId,
        target: NodeRid,
        (generation, authority, binding): MoveFence,
    ) {
        let node = self.owner.identity().node;
        let (seal, phase) = match binding {
            Some(binding) => {
                let seal = SealIdentity {
                    relocation,
                    session: binding.session,
                    binding: binding.binding,
                };
                let request = self.state.request_id();
                let budget = self.state.config.seal_request_timeout;
                let record = SessionRelocationSeal {
                    request: RequestHeader {
                        id: request,
                        budget,
                    },
                    seal,
                    actor: actor.clone(),
                    object_generation: generation,
                };
                self.fx.send(
                    seal.session.owner,
                    NodeRecord::SessionRelocationSeal(record),
                );
                let deadline = self.arm(budget, RelocationTimer::SealReply(relocation));
                let phase = Phase::Sealing {
                    request,
                    deadline,
                    capture: None,
                    held: Vec::new(),
                };
                (Some(seal), phase)
            }
            // Unbound: nothing to seal (no 42/43/44).
            None => (None, Phase::Capturing { held: Vec::new() }),
        };
        self.capture(relocation, actor);
        let coordinator = Coordinator {
            relocation,
            actor: actor.clone(),
            generation,
            expected: ExpectedOwner {
                owner: node,
                authority,
            },
            target,
            seal,
            phase,
        };
        self.state.relocating.insert(actor.clone(), relocation);
        self.state.coordinators.insert(relocation, coordinator);
    }

    /// The runtime's answer to [`RelocationEvent::Capture`]: the snapshot
    /// and the queued work, or why the Actor could not be captured (then the
    /// relocation aborts and the lane reopens).
    pub fn captured(&mut self, relocation: RelocationId, capture: Result<Capture, Error>) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            debug_assert!(false, "a capture for no relocation: {relocation:?}");
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        match (&mut coordinator.phase, capture) {
            (
                Phase::Sealing {
                    capture: slot @ None,
                    ..
                },
                Ok(capture),
            ) => {
                *slot = Some(capture);
                self.put_coordinator(coordinator);
            }
            (Phase::Capturing { held }, Ok(capture)) => {
                let held = std::mem::take(held);
                self.prepare(coordinator, capture, held);
            }
            (Phase::Unwinding { error, held }, capture) => {
                let (error, held) = (error.clone(), std::mem::take(held));
                let saved = capture.map(|c| c.queued).unwrap_or_default();
                let work = Work {
                    saved,
                    held,
                    proxies: Vec::new(),
                };
                self.finish_abort(coordinator, error, Some(work), false);
            }
            // The lane could not be captured: nothing was taken off it.
            (
                phase @ (Phase::Sealing { capture: None, .. } | Phase::Capturing { .. }),
                Err(error),
            ) => {
                // A 43 still on its way is stale then; the 44 abort covers
                // a seal it may have installed.
                if let Phase::Sealing { deadline, .. } = phase {
                    self.fx.cancel(*deadline);
                }
                let held = phase.held_mut().map(std::mem::take).unwrap_or_default();
                let work = Work {
                    held,
                    ..Work::default()
                };
                self.finish_abort(coordinator, error, Some(work), false);
            }
            _ => {
                self.fx.trace(FlowTrace::RelocationRecordStale);
                self.put_coordinator(coordinator);
            }
        }
    }

    /// The runtime's answer to [`StoreOp::AbortRelocation`].
    pub fn abort_done(&mut self, relocation: RelocationId, answer: Result<AbortAnswer, Error>) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        let Phase::Aborting {
            error,
            work,
            retry,
            finished,
        } = &mut coordinator.phase
        else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            self.put_coordinator(coordinator);
            return;
        };
        debug_assert!(retry.is_none(), "a store answer while a retry is armed");
        let (error, work, finished) = (error.clone(), std::mem::take(work), finished.take());
        match answer {
            // §8.1: confirmed: the source stays owner and reopens.
            Ok(AbortAnswer::Aborted) => self.finish_abort(coordinator, error, Some(work), true),
            // The target's CAS won the race: the relocation committed, so
            // the source behaves as after relay-ready and never reopens.
            Ok(AbortAnswer::Moved { owner }) if owner == coordinator.target => {
                self.hand_over(coordinator, work);
                if let Some(outcome) = finished {
                    self.on_finished_outcome(relocation, outcome);
                }
            }
            // Authority is elsewhere, or there is no live row at all: the
            // target's CAS may have committed and the Actor been destroyed
            // since, or the source's own lease lapsed. Either way this
            // source no longer holds authority, and reopening would run an
            // instance no route can reach beside any new incarnation (§8.1,
            // the stricter reading: docs/relocation.md).
            Ok(AbortAnswer::Moved { .. } | AbortAnswer::Absent) => self.lose(coordinator, work),
            Err(_) => {
                self.fx.trace(FlowTrace::RelocationStoreRetry);
                let retry_after = self.state.config.store_retry;
                let key = self.arm(retry_after, RelocationTimer::AbortRetry(relocation));
                coordinator.phase = Phase::Aborting {
                    error,
                    work,
                    retry: Some(key),
                    finished,
                };
                self.put_coordinator(coordinator);
            }
        }
    }

    /// A 24 message or a 38 request or tombstone for an Actor this shard is
    /// relocating: held (the ingress hold), refused (X5) or kept for Message
    /// Follow. Returns the record when no relocation of its Actor runs here.
    pub(super) fn intercept(&mut self, from: Peer, record: NodeRecord) -> Option<NodeRecord> {
        let relocation = super::actor_of(&record).and_then(|a| self.state.relocating.get(a));
        let Some(mut coordinator) = relocation.copied().and_then(|r| self.take_coordinator(r))
        else {
            return Some(record);
        };
        let max = self.state.config.proxy_max;
        match (&mut coordinator.phase, record) {
            (Phase::Handed { pending, .. }, record) => {
                if pending.len() < max {
                    pending.push((from, record));
                } else {
                    self.refuse(from, record, Reason::QueueFull.into());
                }
            }
            // §12, X5: the Actor owner decides; the Actor is pre-commit.
            (_, NodeRecord::BoundSessionBind(BoundSessionBind::Request(request))) => {
                let refusal = Err(Reason::RelocationSealed.into());
                self.actors().terminal(from, request.request.id, refusal);
            }
            // The lane is captured (or being captured): the ingress hold.
            (phase, record) => match phase.held_mut() {
                Some(held) if held.len() < max => self.hold(from, record, held),
                _ => self.refuse(from, record, Reason::QueueFull.into()),
            },
        }
        self.put_coordinator(coordinator);
        None
    }

    /// The ingress hold: a 24 is admitted against the source's registry as
    /// usual and kept with its reply owed; a tombstone is applied here and
    /// kept for the target, and the held work of the binding it retires
    /// ends ([`Self::retire_held`]).
    fn hold(&mut self, from: Peer, record: NodeRecord, held: &mut Vec<Held>) {
        match record {
            NodeRecord::ActorSend(ActorSend::Message(message)) => {
                let binding = Some((message.tail.session, message.tail.binding));
                if let Some(event) = self.actors().admit_to_event(from, message) {
                    held.push(Held::Work(event, binding));
                }
            }
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)) => {
                self.retire_held(held, &tombstone);
                self.actors().on_tombstone(tombstone.clone());
                held.push(Held::Tombstone(tombstone));
            }
            NodeRecord::ActorCall(call) => {
                if let Some(event) = self.actors().admit_call_to_event(from, call) {
                    held.push(Held::Work(event, None));
                }
            }
            other => self.actors().handle_record(from, other),
        }
    }

    /// A tombstone reached the ingress hold: the binding it names is over
    /// (§6, §7), so the work of that binding still held — never given to
    /// the Actor — ends here (a request with `StaleBinding`, a one-way
    /// message counted, a disconnect notice with its error: the session
    /// owner, which sent the tombstone, gave up waiting for it, §7) instead
    /// of running later for a retired binding. Found by the simulator
    /// (seed 5901): a seal-timeout notice (X22) held at a source whose abort
    /// waited on a down store timed out, and the messages held before it
    /// ran at the reopen.
    fn retire_held(&mut self, held: &mut Vec<Held>, tombstone: &BindTombstone) {
        let retired = |h: &Held| {
            matches!(h, Held::Work(_, Some((session, binding)))
                if *session == tombstone.session && *binding == tombstone.binding)
        };
        if !held.iter().any(retired) {
            return;
        }
        let (gone, kept): (Vec<Held>, Vec<Held>) =
            std::mem::take(held).into_iter().partition(retired);
        *held = kept;
        for item in gone {
            if let Held::Work(event, _) = item {
                self.fx.trace(FlowTrace::HeldMessageDropped);
                self.refuse_event(event, Reason::StaleBinding.into());
            }
        }
    }

    /// 43: the seal is installed (capture now) or refused (abort; nothing
    /// to release).
    pub(super) fn on_sealed(&mut self, from: Peer, sealed: SessionRelocationSealed) {
        let found = self.coordinator_by_request(sealed.request);
        let Some(mut coordinator) = found.and_then(|r| self.take_coordinator(r)) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        let from_sealed = coordinator
            .seal
            .is_some_and(|s| s.session.owner == from.rid);
        let Phase::Sealing {
            deadline,
            capture,
            held,
            ..
        } = &mut coordinator.phase
        else {
            // A 43 naming the 60's request id: of another kind, ignored.
            self.fx.trace(FlowTrace::ReplyMismatch);
            self.put_coordinator(coordinator);
            return;
        };
        if !from_sealed {
            self.fx.trace(FlowTrace::ReplyMismatch);
            self.put_coordinator(coordinator);
            return;
        }
        self.fx.cancel(*deadline);
        match (sealed.outcome, capture.take()) {
            (Ok(()), Some(capture)) => {
                let held = std::mem::take(held);
                self.prepare(coordinator, capture, held);
            }
            (Ok(()), None) => {
                let held = std::mem::take(held);
                coordinator.phase = Phase::Capturing { held };
                self.put_coordinator(coordinator);
            }
            (Err(error), capture) => {
                coordinator.seal = None;
                self.unwind(coordinator, error, capture);
            }
        }
    }

    /// The seal failed (43 refused or missing, or no link): nothing was
    /// prepared, so the lane reopens with what it held — at once if the
    /// capture is in, otherwise when it comes (`Unwinding`).
    fn unwind(&mut self, mut coordinator: Coordinator, error: Error, capture: Option<Capture>) {
        let held = coordinator
            .phase
            .held_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        match capture {
            Some(capture) => {
                let work = Work {
                    saved: capture.queued,
                    held,
                    proxies: Vec::new(),
                };
                self.finish_abort(coordinator, error, Some(work), false);
            }
            None => {
                coordinator.phase = Phase::Unwinding { error, held };
                self.put_coordinator(coordinator);
            }
        }
    }

    /// 61: relay-ready (hand over) or the target's explicit failure (abort).
    pub(super) fn on_ready(&mut self, from: Peer, ready: RelocationReady) {
        let found = self.coordinator_by_request(ready.request);
        let Some(mut coordinator) = found.and_then(|r| self.take_coordinator(r)) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        if from.rid != coordinator.target {
            self.fx.trace(FlowTrace::ReplyMismatch);
            self.put_coordinator(coordinator);
            return;
        }
        let Phase::Preparing { deadline, work, .. } = &mut coordinator.phase else {
            // A 61 naming the 42's request id: of another kind, ignored.
            self.fx.trace(FlowTrace::ReplyMismatch);
            self.put_coordinator(coordinator);
            return;
        };
        self.fx.cancel(*deadline);
        let work = std::mem::take(work);
        match ready.outcome {
            // Accepted: from here no path reopens the source route (L6).
            Ok(()) => self.hand_over(coordinator, work),
            Err(error) => self.start_durable_abort(coordinator, error, work, None),
        }
    }

    /// 65: the target committed (Message Follow from now on) or failed.
    pub(super) fn on_finished(&mut self, from: Peer, finished: RelocationFinished) {
        let target = self
            .state
            .coordinators
            .get(&finished.relocation)
            .map(|c| c.target);
        if target != Some(from.rid) {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        }
        self.on_finished_outcome(finished.relocation, finished.outcome);
    }

    fn on_finished_outcome(
        &mut self,
        relocation: RelocationId,
        outcome: Result<BoundRoute, Error>,
    ) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        match &mut coordinator.phase {
            Phase::Handed { deadline, pending } => {
                self.fx.cancel(*deadline);
                let pending = std::mem::take(pending);
                self.conclude(coordinator, outcome, pending);
            }
            Phase::Aborting { finished, .. } if finished.is_none() => {
                *finished = Some(outcome);
                self.put_coordinator(coordinator);
            }
            // A 65 before any 61 was accepted: the 61 was lost and the target
            // took its cutover fallback (docs/relocation.md). The store knows
            // which way it went: ask it now, keeping the 65 for the answer,
            // rather than wait for the prepare deadline (and then for a 65
            // that has already come).
            Phase::Preparing { deadline, work, .. } => {
                self.fx.cancel(*deadline);
                let work = std::mem::take(work);
                let error = match &outcome {
                    Err(error) => error.clone(),
                    Ok(_) => Reason::Deadline.into(),
                };
                self.start_durable_abort(coordinator, error, work, Some(outcome));
            }
            _ => {
                self.fx.trace(FlowTrace::RelocationRecordStale);
                self.put_coordinator(coordinator);
            }
        }
    }

    pub(super) fn on_seal_deadline(&mut self, relocation: RelocationId) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            return;
        };
        match &mut coordinator.phase {
            // The seal may be installed (43 lost or late): 44 abort goes out.
            Phase::Sealing { capture, .. } => {
                let capture = capture.take();
                self.unwind(coordinator, Reason::Deadline.into(), capture);
            }
            _ => self.put_coordinator(coordinator),
        }
    }

    pub(super) fn on_prepare_deadline(&mut self, relocation: RelocationId) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            return;
        };
        match &mut coordinator.phase {
            Phase::Preparing { work, .. } => {
                let work = std::mem::take(work);
                self.start_durable_abort(coordinator, Reason::Deadline.into(), work, None);
            }
            _ => self.put_coordinator(coordinator),
        }
    }

    pub(super) fn on_finish_deadline(&mut self, relocation: RelocationId) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            return;
        };
        match &mut coordinator.phase {
            Phase::Handed { pending, .. } => {
                let pending = std::mem::take(pending);
                self.conclude(coordinator, Err(Reason::Deadline.into()), pending);
            }
            _ => self.put_coordinator(coordinator),
        }
    }

    pub(super) fn on_abort_retry(&mut self, relocation: RelocationId) {
        let Some(mut coordinator) = self.take_coordinator(relocation) else {
            return;
        };
        if let Phase::Aborting { retry, .. } = &mut coordinator.phase {
            *retry = None;
            self.request_durable_abort(&coordinator);
        }
        self.put_coordinator(coordinator);
    }

    /// The link to the 42's session owner or the 60's target is gone: abort
    /// (a 42 that never left installed no seal).
    pub(super) fn coordinator_unreachable(&mut self, to: NodeRid, request: RequestId) {
        let found = self.coordinator_by_request(request);
        let Some(mut coordinator) = found.and_then(|r| self.take_coordinator(r)) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        let error = Reason::PeerUnreachable.into();
        match &mut coordinator.phase {
            Phase::Sealing {
                deadline, capture, ..
            } if coordinator.seal.map(|s| s.session.owner) == Some(to) => {
                self.fx.cancel(*deadline);
                let capture = capture.take();
                coordinator.seal = None;
                self.unwind(coordinator, error, capture);
            }
            Phase::Preparing { deadline, work, .. } if coordinator.target == to => {
                self.fx.cancel(*deadline);
                let work = std::mem::take(work);
                self.start_durable_abort(coordinator, error, work, None);
            }
            _ => self.put_coordinator(coordinator),
        }
    }

    fn capture(&mut self, relocation: RelocationId, actor: &ActorId) {
        // Its timers stop with its lane: no tick is due for a captured Actor
        // (docs/actors.md "Timers").
        self.owner.freeze_timers(actor, self.fx);
        self.event(RelocationEvent::Capture {
            relocation,
            actor: actor.clone(),
        });
    }

    /// Builds and sends the 60, with the saved work re-issued under proxy
    /// ids; aborts (nothing prepared yet) when it does not fit.
    fn prepare(&mut self, mut coordinator: Coordinator, capture: Capture, held: Vec<Held>) {
        let binding = self
            .owner
            .relocation_fence(&coordinator.actor)
            .map(|(_, _, binding)| binding);
        let mut work = Work {
            saved: capture.queued,
            held,
            proxies: Vec::new(),
        };
        debug_assert!(work.saved.iter().all(|e| e.actor() == &coordinator.actor));
        let Some(binding) = binding else {
            // Destroyed while capturing: nothing is left to move.
            return self.finish_abort(coordinator, Reason::StaleLocation.into(), Some(work), false);
        };
        let limits = self.state.config.limits;
        let fits = capture.state.len() <= limits.handoff_state_len_max as usize
            && work.saved.len() <= usize::from(limits.saved_work_count_max);
        let saved = if fits {
            self.saved_work(coordinator.target, &work.saved, &mut work.proxies)
        } else {
            Err(Reason::HandoffTooLarge.into())
        };
        let saved = match saved {
            Ok(saved) => saved,
            Err(error) => return self.abort_unprepared(coordinator, error, work),
        };
        let request = self.state.request_id();
        let budget = self.state.config.prepare_timeout;
        let record = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
            request: RequestHeader {
                id: request,
                budget,
            },
            relocation: coordinator.relocation,
            actor: coordinator.actor.clone(),
            object_generation: coordinator.generation,
            expected_authority: coordinator.expected.authority,
            binding,
            state: capture.state,
            saved,
            timers: self.owner.timers_handoff(&coordinator.actor),
            calls: self.owner.calls_handoff(&coordinator.actor),
        }));
        let mut encoded = BytesMut::new();
        record.encode(&mut encoded);
        if encoded.len() - 4 > limits.frame_len_max as usize {
            return self.abort_unprepared(coordinator, Reason::HandoffTooLarge.into(), work);
        }
        self.fx.send(coordinator.target, record);
        // Counted so that an operator (and a test over real processes) sees
        // a move waiting on its target's 61 (§8.1).
        self.fx.trace(FlowTrace::RelocationPrepareSent);
        let deadline = self.arm(
            budget,
            RelocationTimer::PrepareReply(coordinator.relocation),
        );
        coordinator.phase = Phase::Preparing {
            request,
            deadline,
            work,
        };
        self.put_coordinator(coordinator);
    }

    /// An abort before any 60 left: no target can CAS, so no durable abort
    /// is needed (docs/relocation.md).
    fn abort_unprepared(&mut self, coordinator: Coordinator, error: Error, mut work: Work) {
        for id in std::mem::take(&mut work.proxies) {
            self.forget_proxy(id);
        }
        self.finish_abort(coordinator, error, Some(work), false);
    }

    /// The saved work as 60 carries it: each request re-issued under a proxy
    /// id whose answer goes back to the ticket the source owes.
    fn saved_work(
        &mut self,
        target: NodeRid,
        events: &[ActorEvent],
        proxies: &mut Vec<RequestId>,
    ) -> Result<Vec<SavedWork>, Error> {
        let mut saved = Vec::with_capacity(events.len());
        for event in events {
            saved.push(self.event_to_saved(target, event, proxies)?);
        }
        Ok(saved)
    }

    fn event_to_saved(
        &mut self,
        target: NodeRid,
        event: &ActorEvent,
        proxies: &mut Vec<RequestId>,
    ) -> Result<SavedWork, Error> {
        let budget = self.state.config.proxy_budget;
        let mut proxy = |this: &mut Self, ticket| {
            let header = this.proxy(target, Origin::Ticket(ticket), budget);
            let header = header.ok_or_else(|| Error::new(Reason::QueueFull))?;
            proxies.push(header.id);
            Ok::<_, Error>(header)
        };
        Ok(match event {
            ActorEvent::Deliver {
                key,
                correlation,
                sequence,
                payload,
                reply,
                ..
            } => SavedWork::Deliver {
                request: reply.map(|t| proxy(self, t)).transpose()?,
                key: *key,
                correlation: *correlation,
                sequence: *sequence,
                payload: payload.clone(),
            },
            ActorEvent::Disconnect {
                session, ticket, ..
            } => SavedWork::Disconnect {
                request: proxy(self, *ticket)?,
                session: *session,
            },
            ActorEvent::Bound { session, .. } => SavedWork::Bound { session: *session },
            ActorEvent::Timer { timer, tick, .. } => SavedWork::Timer {
                timer: *timer,
                tick: *tick,
            },
            ActorEvent::Call {
                from,
                key,
                payload,
                reply,
                ..
            } => SavedWork::Call {
                request: reply.map(|t| proxy(self, t)).transpose()?,
                from: from.clone(),
                key: *key,
                payload: payload.clone(),
            },
            ActorEvent::CallOutcome { call, outcome, .. } => SavedWork::CallOutcome {
                call: *call,
                outcome: outcome.clone(),
            },
        })
    }

    /// §8.1 abort before relay-ready once a 60 left: the durable abort comes
    /// first; nothing else happens until the store answers.
    fn start_durable_abort(
        &mut self,
        mut coordinator: Coordinator,
        error: Error,
        work: Work,
        finished: Option<Result<BoundRoute, Error>>,
    ) {
        coordinator.phase = Phase::Aborting {
            error,
            work,
            retry: None,
            finished,
        };
        self.request_durable_abort(&coordinator);
        self.put_coordinator(coordinator);
    }

    fn request_durable_abort(&mut self, coordinator: &Coordinator) {
        let op = StoreOp::AbortRelocation {
            actor: coordinator.actor.clone(),
            expected: coordinator.expected,
        };
        self.event(RelocationEvent::Store {
            relocation: coordinator.relocation,
            op,
        });
    }

    /// The rest of an abort before relay-ready, in the decided order: the
    /// source queue (the move seal lifted, saved work then ingress hold in
    /// arrival order), 44 abort, 64, the caller's error (docs/relocation.md
    /// "Abort before relay-ready is accepted").
    fn finish_abort(
        &mut self,
        coordinator: Coordinator,
        error: Error,
        work: Option<Work>,
        prepared: bool,
    ) {
        let Coordinator {
            relocation,
            actor,
            target,
            seal,
            ..
        } = coordinator;
        self.state.relocating.remove(&actor);
        if let Some(work) = work {
            for id in work.proxies {
                self.forget_proxy(id);
            }
            self.event(RelocationEvent::Reopen {
                relocation,
                actor: actor.clone(),
            });
            self.owner.thaw_timers(&actor, self.fx);
            // Saved work whose request ended meanwhile (its proxy's
            // deadline passed during a long abort) is not run again: the
            // client has its terminal (§12).
            for event in work.saved {
                if self.still_owed(&event) {
                    self.fx.actor_event(event);
                }
            }
            for held in work.held {
                if let Held::Work(event, _) = held {
                    self.fx.actor_event(event);
                }
            }
        }
        if let Some(seal) = seal {
            let abort = SessionRelocationRoute::Abort(seal);
            self.fx.send(
                seal.session.owner,
                NodeRecord::SessionRelocationRoute(abort),
            );
        }
        if prepared {
            let discard = RelocationDiscard {
                relocation,
                actor: actor.clone(),
            };
            self.fx.send(target, NodeRecord::RelocationDiscard(discard));
        }
        self.fx.trace(FlowTrace::RelocationAborted);
        self.event(RelocationEvent::Finished {
            relocation,
            actor,
            outcome: Err(error),
        });
    }

    /// Relay-ready accepted (or the store says the target's CAS won): the
    /// ingress hold goes out in arrival order, then the cutover; the source
    /// instance is dropped. No path reopens the source route after this.
    fn hand_over(&mut self, mut coordinator: Coordinator, work: Work) {
        let (relocation, target) = (coordinator.relocation, coordinator.target);
        let actor = coordinator.actor.clone();
        let mut proxies = Vec::new();
        for held in work.held {
            let item = match held {
                Held::Work(event, _) => match self.event_to_saved(target, &event, &mut proxies) {
                    Ok(item) => item,
                    Err(error) => {
                        self.refuse_event(event, error);
                        continue;
                    }
                },
                Held::Tombstone(t) => SavedWork::Tombstone {
                    session: t.session,
                    binding: t.binding,
                    cause: t.cause,
                },
            };
            let hold = RelocationIngressHold {
                relocation,
                actor: actor.clone(),
                work: item,
            };
            self.fx
                .send(target, NodeRecord::RelocationIngressHold(hold));
        }
        let cutover = RelocationCutover {
            relocation,
            actor: actor.clone(),
        };
        self.fx.send(target, NodeRecord::RelocationCutover(cutover));
        // The registry entry goes with the instance; its binding lives on
        // at the target. It was hosted until now, so this cannot fail.
        let placement = self.actors().destroy(&actor).ok().flatten();
        self.event(RelocationEvent::DropInstance {
            relocation,
            actor: actor.clone(),
            placement,
        });
        let wait = self.state.config.finish_timeout;
        let deadline = self.arm(wait, RelocationTimer::FinishWait(relocation));
        coordinator.phase = Phase::Handed {
            deadline,
            pending: Vec::new(),
        };
        self.put_coordinator(coordinator);
    }

    /// Authority moved to a node other than the target while aborting: the
    /// source is no owner and cannot reopen, and there is no target to hand
    /// to. Everything held ends with a stale-authority error.
    fn lose(&mut self, coordinator: Coordinator, work: Work) {
        let (relocation, actor) = (coordinator.relocation, coordinator.actor);
        self.state.relocating.remove(&actor);
        for id in work.proxies {
            self.forget_proxy(id);
        }
        let error = Error::new(Reason::StaleAuthority);
        let held = work.held.into_iter().filter_map(|h| match h {
            Held::Work(event, _) => Some(event),
            Held::Tombstone(_) => None,
        });
        for event in work.saved.into_iter().chain(held) {
            if self.still_owed(&event) {
                self.refuse_event(event, error.clone());
            }
        }
        let placement = self.actors().destroy(&actor).ok().flatten();
        self.event(RelocationEvent::DropInstance {
            relocation,
            actor: actor.clone(),
            placement,
        });
        self.fx.trace(FlowTrace::RelocationFailed);
        self.event(RelocationEvent::Finished {
            relocation,
            actor,
            outcome: Err(error),
        });
    }

    /// 65 (or its deadline) ends the relocation: on success the follow entry
    /// is installed and the records that waited for it are forwarded; on
    /// failure they end as for any Actor not here (`Unavailable`).
    fn conclude(
        &mut self,
        coordinator: Coordinator,
        outcome: Result<BoundRoute, Error>,
        pending: Vec<(Peer, NodeRecord)>,
    ) {
        let Coordinator {
            relocation,
            actor,
            generation,
            ..
        } = coordinator;
        self.state.relocating.remove(&actor);
        let outcome = match outcome {
            Ok(route) => {
                let actor_ref = ActorRef {
                    id: actor.clone(),
                    generation,
                    location: ActorLocation {
                        mesh: route.mesh.clone(),
                        owner: route.owner,
                        node_generation: route.node_generation,
                        authority: route.authority,
                        lease: route.lease,
                    },
                };
                self.install_follow(actor.clone(), generation, route);
                Ok(actor_ref)
            }
            Err(error) => {
                self.fx.trace(FlowTrace::RelocationFailed);
                Err(error)
            }
        };
        self.event(RelocationEvent::Finished {
            relocation,
            actor,
            outcome,
        });
        for (from, record) in pending {
            self.handle_actor_record(from, record);
        }
    }

    /// Whether the work still owes its reply: a request or callback whose
    /// terminal went out already (a proxy's deadline) is done.
    fn still_owed(&self, event: &ActorEvent) -> bool {
        match event {
            ActorEvent::Deliver {
                reply: Some(ticket),
                ..
            }
            | ActorEvent::Disconnect { ticket, .. }
            | ActorEvent::Call {
                reply: Some(ticket),
                ..
            } => self.owner.owes(*ticket),
            ActorEvent::Deliver { reply: None, .. }
            | ActorEvent::Call { reply: None, .. }
            | ActorEvent::CallOutcome { .. }
            | ActorEvent::Bound { .. }
            | ActorEvent::Timer { .. } => true,
        }
    }

    /// Ends one piece of held or saved work with `error`.
    /// Work merged into an Actor after its arrival here committed (a late
    /// 62): it runs on the Actor's lane, unless the Actor is already being
    /// relocated away from here again. Then it is that move's, like any
    /// record that arrives now: held with the ingress hold before
    /// relay-ready, refused after it (the lane is handed over) — a sealed
    /// source runs nothing (§8.1, X5; found by the simulator's soak, seed
    /// 67581).
    pub(super) fn merge_event(&mut self, event: ActorEvent) {
        let relocation = self.state.relocating.get(event.actor()).copied();
        let Some(mut coordinator) = relocation.and_then(|r| self.take_coordinator(r)) else {
            return self.fx.actor_event(event);
        };
        let max = self.state.config.proxy_max;
        match &mut coordinator.phase {
            Phase::Handed { .. } => self.refuse_event(event, Reason::RelocationSealed.into()),
            phase => match phase.held_mut() {
                Some(held) if held.len() < max => held.push(Held::Work(event, None)),
                _ => self.refuse_event(event, Reason::QueueFull.into()),
            },
        }
        self.put_coordinator(coordinator);
    }

    /// A late 62's tombstone, merged as [`Self::merge_event`] merges work:
    /// applied here at once, and carried to wherever the Actor goes next
    /// when it is being relocated away again.
    pub(super) fn merge_tombstone(&mut self, from: Peer, tombstone: BindTombstone) {
        let relocation = self.state.relocating.get(&tombstone.actor).copied();
        let Some(mut coordinator) = relocation.and_then(|r| self.take_coordinator(r)) else {
            return self.actors().on_tombstone(tombstone);
        };
        let max = self.state.config.proxy_max;
        match &mut coordinator.phase {
            Phase::Handed { pending, .. } if pending.len() < max => {
                let record = NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone));
                pending.push((from, record));
            }
            phase => match phase.held_mut() {
                Some(held) if held.len() < max => {
                    self.retire_held(held, &tombstone);
                    self.actors().on_tombstone(tombstone.clone());
                    held.push(Held::Tombstone(tombstone));
                }
                _ => self.fx.trace(FlowTrace::OneWayRecordRefused),
            },
        }
        self.put_coordinator(coordinator);
    }

    fn refuse_event(&mut self, event: ActorEvent, error: Error) {
        match event {
            ActorEvent::Deliver {
                reply: Some(ticket),
                ..
            }
            | ActorEvent::Disconnect { ticket, .. } => self.actors().reply(ticket, Err(error)),
            ActorEvent::Deliver { reply: None, .. } => {
                self.fx.trace(FlowTrace::OneWayRecordRefused)
            }
            ActorEvent::Bound { .. } => {}
            event @ (ActorEvent::Timer { .. }
            | ActorEvent::Call { .. }
            | ActorEvent::CallOutcome { .. }) => self.actors().refuse(event, error.reason()),
        }
    }

    /// Refuses a record for the Actor: a typed error for a request, a
    /// counted drop for a one-way record.
    pub(super) fn refuse(&mut self, from: Peer, record: NodeRecord, error: Error) {
        match record {
            NodeRecord::ActorSend(ActorSend::Message(message)) => match message.request {
                Some(header) => {
                    let reply = ActorReply {
                        request: header.id,
                        outcome: Err(error),
                    };
                    self.fx
                        .answer(from, NodeRecord::ActorSend(ActorSend::Reply(reply)));
                }
                None => self.fx.trace(FlowTrace::OneWayRecordRefused),
            },
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(request)) => {
                self.actors().terminal(from, request.request.id, Err(error));
            }
            NodeRecord::ActorCall(ActorCall {
                request: Some(header),
                ..
            }) => {
                let reply = ActorReply {
                    request: header.id,
                    outcome: Err(error),
                };
                self.fx
                    .answer(from, NodeRecord::ActorSend(ActorSend::Reply(reply)));
            }
            _ => self.fx.trace(FlowTrace::OneWayRecordRefused),
        }
    }

    /// The requests coordinators here wait on from `peer`: a 42 to the
    /// session owner there, a 60 to the target there.
    pub(super) fn coordinator_requests_to(&self, peer: NodeRid) -> Vec<RequestId> {
        self.state
            .coordinators
            .values()
            .filter_map(|c| match c.phase {
                Phase::Sealing { request, .. } if c.seal.map(|s| s.session.owner) == Some(peer) => {
                    Some(request)
                }
                Phase::Preparing { request, .. } if c.target == peer => Some(request),
                _ => None,
            })
            .collect()
    }

    fn coordinator_by_request(&self, request: RequestId) -> Option<RelocationId> {
        self.state
            .coordinators
            .values()
            .find_map(|c| match c.phase {
                Phase::Sealing { request: r, .. } | Phase::Preparing { request: r, .. }
                    if r == request =>
                {
                    Some(c.relocation)
                }
                _ => None,
            })
    }

    fn take_coordinator(&mut self, relocation: RelocationId) -> Option<Coordinator> {
        self.state.coordinators.remove(&relocation)
    }

    /// Puts a coordinator that goes on back; one that ended is not put back
    /// (its `relocating` entry was removed where it ended).
    fn put_coordinator(&mut self, coordinator: Coordinator) {
        debug_assert!(self.state.relocating.contains_key(&coordinator.actor));
        self.state
            .coordinators
            .insert(coordinator.relocation, coordinator);
    }
}
