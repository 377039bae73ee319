//! The target's handoff (§2 "Target handoff", §8.1; docs/relocation.md): a
//! temporary queue, Restore without dispatch, relay-ready, then the cutover
//! or the 1,000 ms fallback, then the Location Store CAS; on success the
//! queue is merged, the Actor hosted under the new location with the
//! handed-over binding, dispatch opened, 44 commit sent to the session owner
//! and 65 to the source; on failure everything prepared is discarded (no 44:
//! the session owner's seal timeout cleans up, L6).
//!
//! The target is the one boundary that decides Restore, cutover or fallback
//! and the CAS (§2 table); it does not admit the queued work again (the
//! source did, §2 "Target queue").
//!
//! | phase | waits for | a 62 |
//! | --- | --- | --- |
//! | `Restoring` | the runtime's Restore | queued |
//! | `Ready` | 63, or [`CUTOVER_FALLBACK`] after the 61 | queued |
//! | `Committing` | the CAS answer | queued |
//! | `Committed` | `follow_lifetime` (late 62s only) | delivered at once while the handed-over binding is current, else refused (StaleBinding) |

use super::{
    CasAnswer, ExpectedOwner, RelocationEvent, RelocationOwner, RelocationTimer, Relocations,
    StoreOp, CUTOVER_FALLBACK,
};
use crate::core::actor::{ActorEvent, HandedActor, Placement};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingIdentity, ObjectGeneration, Peer, RelocationId,
    RequestId,
};
use crate::wire::node::{
    ActorReply, ActorSend, BindTombstone, BindingHandoff, BoundRoute, CallsHandoff, NodeRecord,
    RelocationCutover, RelocationDiscard, RelocationFinished, RelocationIngressHold,
    RelocationPrepare, RelocationReady, RouteCommit, SavedWork, SealIdentity,
    SessionRelocationRoute, TimersHandoff,
};

/// One Actor arriving at this shard.
#[derive(Debug)]
pub(super) struct TargetHandoff {
    relocation: RelocationId,
    actor: ActorId,
    generation: ObjectGeneration,
    expected: ExpectedOwner,
    /// The source that sent 60, in its lifecycle: the handoff's records are
    /// taken from it alone, and its answers go to it alone.
    source: Peer,
    binding: Option<BindingHandoff>,
    /// The Actor's timers, as time left at capture (docs/actors.md
    /// "Timers"); armed when the Actor is hosted here.
    timers: TimersHandoff,
    /// The Actor's requests: their numbering and those open, with the time
    /// each deadline had left; armed when the Actor is hosted here.
    calls: CallsHandoff,
    /// The temporary queue: saved work, then the ingress hold, in order.
    queue: Vec<SavedWork>,
    /// Where the runtime placed the restored instance (once restored).
    placement: Option<Placement>,
    phase: TargetPhase,
}

#[derive(Debug)]
enum TargetPhase {
    Restoring {
        request: RequestId,
    },
    Ready {
        fallback: TimerKey,
    },
    Committing,
    /// The CAS's outcome is unknown (the store could not be reached or its
    /// answer was lost): the CAS is made again at `retry`. Meanwhile the
    /// restored instance is kept, neither served nor dropped: past
    /// relay-ready it is the only one (issue 19 item 3, docs/relocation.md
    /// "An unknown CAS outcome").
    CasRetry,
    Committed {
        linger: TimerKey,
    },
}

impl TargetHandoff {
    /// Whether the CAS moved authority here.
    /// The incarnation this handoff brings.
    pub(super) fn generation(&self) -> ObjectGeneration {
        self.generation
    }

    pub(super) fn is_committed(&self) -> bool {
        matches!(self.phase, TargetPhase::Committed { .. })
    }

    fn source(&self) -> Peer {
        self.source
    }
}

impl Relocations<'_> {
    /// 60: install a temporary queue and ask the runtime to Restore the
    /// Actor without dispatch; refused (61 with the reason) when this owner
    /// is fenced, already hosts the Actor or is receiving it.
    pub(super) fn on_prepare(&mut self, from: Peer, prepare: RelocationPrepare) {
        if let Err(error) = self.admit_prepare(from, &prepare) {
            self.send_ready(from, prepare.request.id, Err(error));
            return;
        }
        let relocation = prepare.relocation;
        let handoff = TargetHandoff {
            relocation,
            actor: prepare.actor.clone(),
            generation: prepare.object_generation,
            expected: ExpectedOwner {
                owner: from.rid,
                authority: prepare.expected_authority,
            },
            source: from,
            binding: prepare.binding,
            timers: prepare.timers,
            calls: prepare.calls,
            queue: prepare.saved,
            placement: None,
            phase: TargetPhase::Restoring {
                request: prepare.request.id,
            },
        };
        self.state
            .arriving
            .insert(prepare.actor.clone(), relocation);
        self.state.targets.insert(relocation, handoff);
        self.event(RelocationEvent::Restore {
            relocation,
            actor: prepare.actor,
            state: prepare.state,
        });
    }

    fn admit_prepare(&mut self, from: Peer, prepare: &RelocationPrepare) -> Result<(), Error> {
        if self.owner.is_fenced() {
            return Err(Reason::LeaseExpired.into());
        }
        if self.owner.is_leaving() {
            // §10: a draining node would leave the Actor behind at its
            // stop; the move aborts and the Actor stays at its source.
            return Err(Reason::ShuttingDown.into());
        }
        if from.rid == self.owner.identity().node || self.owner.hosts(&prepare.actor) {
            return Err(Reason::RelocationTargetInvalid.into());
        }
        if let Some(earlier) = self.state.targets.get(&prepare.relocation) {
            // A coordinator numbers its moves from the same start in every
            // lifecycle, so a restarted one's move can repeat the id of a
            // move its past lifecycle committed here, whose handoff still
            // lingers. Nothing more comes from that lifecycle (§3: records
            // of a pre-restart NodeGeneration are not applied): its handoff
            // makes way. Any other handoff of this id is this move's own.
            let past = earlier.source().generation < from.generation;
            if !(past && earlier.is_committed()) {
                return Err(Reason::RelocationSealed.into());
            }
            self.on_target_linger(prepare.relocation);
        }
        // This shard moved the Actor away and has not learned the outcome
        // yet (its 65 is late or lost): hosting it again now would leave a
        // coordinator holding the Actor's records beside the live instance.
        // The move back waits until that one has ended.
        if self.state.relocating.contains_key(&prepare.actor) {
            return Err(Reason::RelocationSealed.into());
        }
        let earlier = self.state.arriving.get(&prepare.actor).copied();
        match earlier.and_then(|id| self.state.targets.get(&id)) {
            Some(handoff) if !handoff.is_committed() => Err(Reason::RelocationSealed.into()),
            Some(_) => {
                // It arrived here once and moved on since: the lingering
                // record of that arrival is done.
                if let Some(id) = earlier {
                    self.on_target_linger(id);
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// The runtime's answer to [`RelocationEvent::Restore`]: relay-ready
    /// (61, the 1,000 ms fallback starts) with where the instance was
    /// placed (`None` for a driver that keeps no instances), or the
    /// target's explicit failure. A handoff discarded meanwhile hands the
    /// placement back: the runtime drops that instance.
    #[must_use = "a placement handed back is an instance to drop"]
    pub fn restored(
        &mut self,
        relocation: RelocationId,
        outcome: Result<Option<Placement>, Error>,
    ) -> Option<Placement> {
        let Some(mut handoff) = self.state.targets.remove(&relocation) else {
            // Discarded while restoring: what was restored goes back.
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return outcome.ok().flatten();
        };
        let TargetPhase::Restoring { request } = handoff.phase else {
            debug_assert!(false, "a second restore answer for {relocation:?}");
            self.state.targets.insert(relocation, handoff);
            return outcome.ok().flatten();
        };
        let source = handoff.source();
        match outcome {
            Ok(placement) => {
                handoff.placement = placement;
                self.send_ready(source, request, Ok(()));
                let fallback = self.arm(
                    CUTOVER_FALLBACK,
                    RelocationTimer::CutoverFallback(relocation),
                );
                handoff.phase = TargetPhase::Ready { fallback };
                self.state.targets.insert(relocation, handoff);
            }
            Err(error) => {
                // Nothing was restored. The queued requests stay the
                // coordinator's: it aborts and runs them at the source.
                self.send_ready(source, request, Err(error));
                self.state.arriving.remove(&handoff.actor);
            }
        }
        None
    }

    /// 62: one ingress hold item joins the temporary queue (or, after the
    /// commit, goes straight to the Actor).
    pub(super) fn on_ingress_hold(&mut self, from: Peer, hold: RelocationIngressHold) {
        let queue_max = 2 * usize::from(self.state.config.limits.saved_work_count_max);
        let Some(handoff) = self.state.targets.get_mut(&hold.relocation) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return self.refuse_work(from, &hold.work, Reason::RelocationAborted.into());
        };
        if handoff.source() != from || handoff.actor != hold.actor {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return self.refuse_work(from, &hold.work, Reason::RelocationAborted.into());
        }
        if handoff.is_committed() {
            let (actor, generation) = (handoff.actor.clone(), handoff.generation);
            // The source admitted this work against the handed-over binding.
            // A 62 that comes after the commit (the source learned late that
            // the move committed) meets an Actor that has served since: if
            // its binding is no longer that one, the work is a retired
            // binding's ingress and is refused (§6, P2). A tombstone names
            // its own binding and is judged by it.
            let handed = handoff.binding.map(|b| BindingIdentity {
                owner: b.session.owner,
                lifecycle: b.session.lifecycle,
                generation: b.binding,
            });
            let current = self.owner.current_binding(&actor);
            let hosted = self.owner.actor_ref(&actor).map(|r| r.generation);
            let tombstone = matches!(hold.work, SavedWork::Tombstone { .. });
            if !tombstone && (current != handed || hosted != Some(generation)) {
                self.fx.trace(FlowTrace::RelocationRecordStale);
                return self.refuse_work(from, &hold.work, Reason::StaleBinding.into());
            }
            // An outcome the source held reaches a ledger that has served
            // since the commit: it closes its request there, once, or is
            // late (it ended at its deadline) — never a second end (§12;
            // the simulator's seed 16527).
            if let SavedWork::CallOutcome { call, .. } = &hold.work {
                if !self.actors().close_call(&actor, *call) {
                    return;
                }
            }
            return self.merge_one(&actor, generation, from, hold.work);
        }
        if handoff.queue.len() >= queue_max {
            return self.refuse_work(from, &hold.work, Reason::QueueFull.into());
        }
        handoff.queue.push(hold.work);
    }

    /// 63: the cutover; the CAS follows at once.
    pub(super) fn on_cutover(&mut self, from: Peer, cutover: RelocationCutover) {
        let handoff = self.state.targets.get(&cutover.relocation);
        let Some(TargetPhase::Ready { fallback }) = handoff
            .filter(|h| h.source() == from && h.actor == cutover.actor)
            .map(|h| &h.phase)
        else {
            // Late (after the fallback) or for nothing prepared here.
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        let fallback = *fallback;
        self.fx.cancel(fallback);
        self.take_authority(cutover.relocation);
    }

    /// §8.1: no cutover 1,000 ms after relay-ready: a `cutover_timeout`
    /// warning, and the target proceeds.
    pub(super) fn on_cutover_fallback(&mut self, relocation: RelocationId) {
        let ready = self
            .state
            .targets
            .get(&relocation)
            .is_some_and(|h| matches!(h.phase, TargetPhase::Ready { .. }));
        if ready {
            self.fx.trace(FlowTrace::CutoverTimeout);
            self.take_authority(relocation);
        }
    }

    fn take_authority(&mut self, relocation: RelocationId) {
        let Some(handoff) = self.state.targets.get_mut(&relocation) else {
            return;
        };
        handoff.phase = TargetPhase::Committing;
        let op = StoreOp::TakeAuthority {
            actor: handoff.actor.clone(),
            expected: handoff.expected,
        };
        self.event(RelocationEvent::Store { relocation, op });
    }

    /// The runtime's answer to [`StoreOp::TakeAuthority`].
    pub fn cas_done(&mut self, relocation: RelocationId, answer: Result<CasAnswer, Error>) {
        let committing = self
            .state
            .targets
            .get(&relocation)
            .is_some_and(|h| matches!(h.phase, TargetPhase::Committing));
        let handoff = committing
            .then(|| self.state.targets.remove(&relocation))
            .flatten();
        let Some(handoff) = handoff else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        let answer = answer.map(|answer| self.own_swap(handoff.generation, answer));
        let error = match answer {
            // The runtime hosted the Actor here by itself meanwhile: the
            // store says this node owns it, but two instances must never
            // run; the handed-over one is dropped.
            Ok(CasAnswer::Swapped { .. }) if self.owner.hosts(&handoff.actor) => {
                Reason::RelocationTargetInvalid.into()
            }
            Ok(CasAnswer::Swapped { authority }) => return self.commit(handoff, authority),
            Ok(CasAnswer::Conflict { .. }) => Reason::StaleAuthority.into(),
            Ok(CasAnswer::Absent) => Reason::StaleLocation.into(),
            Ok(CasAnswer::RelocationAborted) => Reason::RelocationAborted.into(),
            // Unknown: the CAS may or may not have been applied. Only the
            // store decides authority (§8.1), so it is asked again; the
            // runtime answers a CAS this lifecycle already won as swapped.
            Err(error) if error.reason() == Reason::StoreUnavailable => {
                return self.retry_cas(handoff);
            }
            Err(error) => error,
        };
        // L6: no 44 (the session owner's seal timeout cleans up); the
        // coordinator learns it from 65.
        let (source, actor) = (handoff.source(), handoff.actor.clone());
        // After relay-ready the source never runs the queued work again, so
        // every request among it ends here, through the source.
        self.answer_queue(&handoff, error.clone());
        self.discard(handoff);
        self.send_finished(source, relocation, &actor, Err(error));
    }

    /// A CAS is made again when an earlier one's outcome was unknown
    /// (`retry_cas`); if that earlier one was applied and only its answer
    /// lost, the row now names this very lifecycle under this lease, for
    /// the incarnation moved, past the version expected, and the new CAS
    /// finds a conflict. No other operation can have put it there: a CAS
    /// keeps the incarnation and only this relocation's moves it here, and
    /// a create (this node's own, once the source's lease lapsed) makes a
    /// new incarnation. So that conflict is this relocation's own swap
    /// (docs/relocation.md "An unknown CAS outcome"; found by the
    /// simulator's seed 7247 when the incarnation was not compared).
    fn own_swap(&self, moved: ObjectGeneration, answer: CasAnswer) -> CasAnswer {
        let me = self.owner.identity();
        match answer {
            CasAnswer::Conflict { current, object }
                if object == moved
                    && current.owner == me.node
                    && current.node_generation == me.node_generation
                    && current.lease == me.lease =>
            {
                CasAnswer::Swapped {
                    authority: current.authority,
                }
            }
            answer => answer,
        }
    }

    /// An unknown CAS outcome: the CAS is made again after the store retry
    /// interval, never sooner, for as long as the store cannot answer. The
    /// handoff is kept as it is: its queue keeps taking ingress hold items,
    /// and nothing of it runs until the store decides.
    fn retry_cas(&mut self, mut handoff: TargetHandoff) {
        self.fx.trace(FlowTrace::RelocationStoreRetry);
        let retry_after = self.state.config.store_retry;
        let relocation = handoff.relocation;
        // Nothing cancels it: the handoff leaves this phase only by it.
        let _ = self.arm(retry_after, RelocationTimer::CasRetry(relocation));
        handoff.phase = TargetPhase::CasRetry;
        self.state.targets.insert(relocation, handoff);
    }

    /// The CAS retry interval passed: the CAS again.
    pub(super) fn on_cas_retry(&mut self, relocation: RelocationId) {
        let waiting = self
            .state
            .targets
            .get(&relocation)
            .is_some_and(|h| matches!(h.phase, TargetPhase::CasRetry));
        if waiting {
            self.take_authority(relocation);
        }
    }

    /// 64: the coordinator confirmed a durable abort; drop what was
    /// prepared. While the CAS is in flight the store decides (it will
    /// refuse the aborted relocation), so the 64 changes nothing then.
    pub(super) fn on_discard(&mut self, from: Peer, discard: RelocationDiscard) {
        let Some(handoff) = self.state.targets.get(&discard.relocation) else {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        };
        if handoff.source() != from || handoff.actor != discard.actor {
            self.fx.trace(FlowTrace::RelocationRecordStale);
            return;
        }
        match handoff.phase {
            TargetPhase::Restoring { .. } | TargetPhase::Ready { .. } => {
                if let TargetPhase::Ready { fallback } = handoff.phase {
                    self.fx.cancel(fallback);
                }
                // The coordinator forgot its proxies when it reopened: the
                // queued work runs at the source, nothing is answered here.
                if let Some(handoff) = self.state.targets.remove(&discard.relocation) {
                    self.discard(handoff);
                }
            }
            TargetPhase::Committing | TargetPhase::CasRetry | TargetPhase::Committed { .. } => {
                self.fx.trace(FlowTrace::RelocationRecordStale)
            }
        }
    }

    pub(super) fn on_target_linger(&mut self, relocation: RelocationId) {
        let committed = self
            .state
            .targets
            .get(&relocation)
            .is_some_and(TargetHandoff::is_committed);
        if let Some(handoff) = committed
            .then(|| self.state.targets.remove(&relocation))
            .flatten()
        {
            if let TargetPhase::Committed { linger } = handoff.phase {
                self.fx.cancel(linger);
            }
            if self.state.arriving.get(&handoff.actor) == Some(&relocation) {
                self.state.arriving.remove(&handoff.actor);
            }
        }
    }

    /// The CAS swapped: host the Actor under the new location with the
    /// handed-over binding as current, open dispatch with the temporary
    /// queue first, then 44 commit to the session owner and 65 to the
    /// source (docs/relocation.md).
    fn commit(&mut self, mut handoff: TargetHandoff, authority: AuthorityOwnerGeneration) {
        let relocation = handoff.relocation;
        let queue = &handoff.queue;
        let queued = |timer| {
            queue
                .iter()
                .any(|work| matches!(work, SavedWork::Timer { timer: t, .. } if *t == timer))
        };
        // An outcome the source took into the ingress hold after the 60
        // left closed its request there: the ledger that came in the 60 had
        // it open still (docs/actors.md "Messages between Actors").
        let mut calls = std::mem::take(&mut handoff.calls);
        calls.open.retain(|(open, _)| {
            !queue
                .iter()
                .any(|work| matches!(work, SavedWork::CallOutcome { call, .. } if call == open))
        });
        let handed = HandedActor {
            actor: handoff.actor.clone(),
            generation: handoff.generation,
            authority,
            binding: handoff.binding,
            timers: std::mem::take(&mut handoff.timers),
            calls,
            placement: handoff.placement.take(),
        };
        let actor_ref = self.actors().host_handed(handed, queued);
        // A follow entry left here by an earlier move away is stale now that
        // the Actor is back: it would send the Actor's records away again.
        if let Some(expiry) = self.state.follow.forget(&handoff.actor) {
            self.fx.cancel(expiry);
        }
        self.event(RelocationEvent::Opened {
            relocation,
            actor: actor_ref.clone(),
        });
        let source = handoff.source();
        for work in std::mem::take(&mut handoff.queue) {
            self.merge_one(&handoff.actor, handoff.generation, source, work);
        }
        let location = &actor_ref.location;
        if let Some(binding) = handoff.binding {
            let commit = RouteCommit {
                seal: SealIdentity {
                    relocation,
                    session: binding.session,
                    binding: binding.binding,
                },
                actor: handoff.actor.clone(),
                object_generation: handoff.generation,
                target_mesh: location.mesh.clone(),
                target: location.owner,
                target_node_generation: location.node_generation,
                authority: location.authority,
                lease: location.lease,
            };
            self.fx.send(
                binding.session.owner,
                NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(commit)),
            );
        }
        let route = BoundRoute {
            mesh: location.mesh.clone(),
            owner: location.owner,
            node_generation: location.node_generation,
            authority: location.authority,
            lease: location.lease,
        };
        self.send_finished(source, relocation, &handoff.actor, Ok(route));
        self.fx.trace(FlowTrace::RelocationCommitted);
        let linger = self.state.config.follow_lifetime;
        let linger = self.arm(linger, RelocationTimer::TargetLinger(relocation));
        handoff.phase = TargetPhase::Committed { linger };
        self.state.targets.insert(relocation, handoff);
    }

    /// One queued item reaches the Actor: work becomes a delivery whose
    /// reply (if any) goes to the source under its proxy id; a tombstone
    /// removes exactly the identity it names.
    fn merge_one(
        &mut self,
        actor: &ActorId,
        generation: ObjectGeneration,
        source: Peer,
        work: SavedWork,
    ) {
        self.fx.trace(FlowTrace::RelocationWorkMerged);
        let event = match work {
            SavedWork::Deliver {
                request,
                key,
                correlation,
                sequence,
                payload,
            } => ActorEvent::Deliver {
                actor: actor.clone(),
                key,
                correlation,
                sequence,
                payload,
                reply: request.map(|r| self.owner.owe(source, r.id)),
            },
            SavedWork::Disconnect { request, session } => ActorEvent::Disconnect {
                actor: actor.clone(),
                session,
                ticket: self.owner.owe(source, request.id),
            },
            SavedWork::Bound { session } => ActorEvent::Bound {
                actor: actor.clone(),
                session,
            },
            SavedWork::Timer { timer, tick } => ActorEvent::Timer {
                actor: actor.clone(),
                timer,
                tick,
            },
            SavedWork::Call {
                request,
                from,
                key,
                payload,
            } => ActorEvent::Call {
                actor: actor.clone(),
                from,
                key,
                payload,
                reply: request.map(|r| self.owner.owe(source, r.id)),
            },
            SavedWork::CallOutcome { call, outcome } => ActorEvent::CallOutcome {
                actor: actor.clone(),
                call,
                outcome,
            },
            SavedWork::Tombstone {
                session,
                binding,
                cause,
            } => {
                let tombstone = BindTombstone {
                    actor: actor.clone(),
                    object_generation: generation,
                    session,
                    binding,
                    cause,
                };
                return self.merge_tombstone(source, tombstone);
            }
        };
        self.merge_event(event);
    }

    /// Drops a handoff that will not commit: the restored instance goes.
    fn discard(&mut self, handoff: TargetHandoff) {
        self.state.arriving.remove(&handoff.actor);
        self.event(RelocationEvent::DropInstance {
            relocation: handoff.relocation,
            actor: handoff.actor,
            placement: handoff.placement,
        });
    }

    fn answer_queue(&mut self, handoff: &TargetHandoff, error: Error) {
        for work in &handoff.queue {
            self.refuse_work(handoff.source(), work, error.clone());
        }
    }

    /// Ends a request among handed work with `error`, answering the
    /// source's proxy id; other work needs no answer.
    fn refuse_work(&mut self, source: Peer, work: &SavedWork, error: Error) {
        let request = match work {
            SavedWork::Deliver {
                request: Some(request),
                ..
            }
            | SavedWork::Disconnect { request, .. } => request.id,
            _ => return,
        };
        let reply = ActorReply {
            request,
            outcome: Err(error),
        };
        self.fx
            .answer(source, NodeRecord::ActorSend(ActorSend::Reply(reply)));
    }

    fn send_ready(&mut self, to: Peer, request: RequestId, outcome: Result<(), Error>) {
        let ready = RelocationReady { request, outcome };
        self.fx.answer(to, NodeRecord::RelocationReady(ready));
    }

    fn send_finished(
        &mut self,
        to: Peer,
        relocation: RelocationId,
        actor: &ActorId,
        outcome: Result<BoundRoute, Error>,
    ) {
        let finished = RelocationFinished {
            relocation,
            actor: actor.clone(),
            outcome,
        };
        self.fx.answer(to, NodeRecord::RelocationFinished(finished));
    }
}

impl RelocationOwner {
    /// Where the instances restored for arriving Actors were placed: they
    /// are not hosted until their move commits (a Spot an arrival created
    /// stays while one of them is in it).
    pub fn arrivals(&self) -> impl Iterator<Item = &Placement> {
        self.targets.values().filter_map(|h| h.placement.as_ref())
    }
}
