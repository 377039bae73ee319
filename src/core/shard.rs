//! `ShardCore`: the session owner and the Actor owner of one shard behind one
//! quinn-style surface (DESIGN "The shape of a core state machine").
//!
//! Inputs: [`ShardCore::handle_record`], [`ShardCore::handle_timeout`], and the
//! commands of [`Sessions`] and [`Actors`]. Outputs, drained after every
//! input: [`ShardCore::swap_transmits`], [`ShardCore::poll_event`],
//! [`ShardCore::poll_timeout`]. Time comes in; nothing reads a clock.

use std::collections::VecDeque;
use std::time::Duration;

use super::actor::{ActorOwner, ActorOwnerIdentity, Actors};
use super::admission::{LinkAdmission, LinkRoom};
use super::effects::{CoreEvent, CoreTimer, Effects};
use super::host_ask::HostAsks;
use super::recheck::Rechecks;
use super::relocation::{RelocationConfig, RelocationEvent, RelocationOwner, Relocations};
use super::session::{
    SessionEvent, SessionOwner, SessionOwnerConfig, SessionOwnerIdentity, Sessions,
};
use super::time::Instant;
use super::trace::{FlowCounters, FlowTrace};
use crate::error::Reason;
use crate::ids::{ActorId, NodeRid, Peer, RequestId};
use crate::wire::node::{
    ActorHost, ActorReply, ActorSend, BindTerminal, BoundSessionBind, NodeRecord,
    SessionRelocationRoute,
};

/// Which role of a node a record is for (§5 command table directions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordRole {
    /// Session owner: 24 replies, 38 terminals, 36, 51, 42, 44.
    SessionOwner,
    /// Actor owner: 24 messages, 38 requests and tombstones, and the
    /// target's handoff records 60, 62, 63, 64.
    ActorOwner,
    /// Relocation coordinator (on the source Actor owner): 43 and 61, the
    /// replies to its 42 and 60; 65; and the answers to requests it
    /// proxied (a 24 reply or 38 terminal whose RequestId carries
    /// [`RequestId::RELOCATION_BIT`]).
    Coordinator,
    /// The caller side of the Actor owner: the 24 replies to requests its
    /// Actors made of other Actors (RequestId with [`RequestId::CALL_BIT`],
    /// docs/actors.md).
    Caller,
    /// BindOrGet between nodes (71, src/core/host_ask.rs): an ask for the
    /// Actor's shard, an answer for the shard that asked.
    Host,
}

/// The role a record is addressed to, from its command and transition.
pub fn record_role(record: &NodeRecord) -> RecordRole {
    match record {
        NodeRecord::ActorSend(ActorSend::Message(_))
        | NodeRecord::BoundSessionBind(BoundSessionBind::Request(_))
        | NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(_))
        | NodeRecord::RelocationPrepare(_)
        | NodeRecord::RelocationIngressHold(_)
        | NodeRecord::RelocationCutover(_)
        | NodeRecord::RelocationDiscard(_)
        | NodeRecord::ActorCall(_) => RecordRole::ActorOwner,
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply { request, .. }))
            if request.is_call() =>
        {
            RecordRole::Caller
        }
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply { request, .. }))
        | NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(BindTerminal {
            request, ..
        })) if request.is_relocation() => RecordRole::Coordinator,
        NodeRecord::ActorSend(ActorSend::Reply(_))
        | NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(_))
        | NodeRecord::BoundSessionSend(_)
        | NodeRecord::BoundSessionReplaced(_)
        | NodeRecord::SessionRelocationSeal(_)
        | NodeRecord::SessionRelocationRoute(_) => RecordRole::SessionOwner,
        NodeRecord::SessionRelocationSealed(_)
        | NodeRecord::RelocationReady(_)
        | NodeRecord::RelocationFinished(_) => RecordRole::Coordinator,
        NodeRecord::ActorHost(_) => RecordRole::Host,
    }
}

/// The shard of a node (of `shards`) that a record is for: the Actor's shard
/// for the Actor owner's records and 65 (the coordinator lives on the
/// Actor's shard), the session owner named in the record (or in the top bits
/// of the RequestId a reply ends — 43 and 61 included, whose coordinator
/// allocated the id on the Actor's shard) for the rest (docs/threading.md
/// "Shards").
pub fn record_shard(record: &NodeRecord, shards: u16) -> u16 {
    let owner = match record {
        NodeRecord::ActorSend(ActorSend::Message(m)) => return m.actor.shard(shards),
        NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => return r.actor.shard(shards),
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(t)) => {
            return t.actor.shard(shards)
        }
        NodeRecord::RelocationPrepare(p) => return p.actor.shard(shards),
        NodeRecord::RelocationIngressHold(h) => return h.actor.shard(shards),
        NodeRecord::RelocationCutover(c) => return c.actor.shard(shards),
        NodeRecord::RelocationDiscard(d) => return d.actor.shard(shards),
        NodeRecord::RelocationFinished(f) => return f.actor.shard(shards),
        NodeRecord::ActorCall(c) => return c.actor.shard(shards),
        NodeRecord::ActorHost(ActorHost::Ask(a)) => return a.actor.shard(shards),
        NodeRecord::ActorHost(ActorHost::Answer(a)) => a.request.owner(),
        NodeRecord::RelocationReady(r) => r.request.owner(),
        NodeRecord::ActorSend(ActorSend::Reply(r)) => r.request.owner(),
        NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(t)) => t.request.owner(),
        NodeRecord::SessionRelocationSealed(s) => s.request.owner(),
        NodeRecord::BoundSessionSend(s) => s.session.owner_id,
        NodeRecord::BoundSessionReplaced(r) => r.previous.owner_id,
        NodeRecord::SessionRelocationSeal(s) => s.seal.session.owner_id,
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(c)) => {
            c.seal.session.owner_id
        }
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Abort(seal)) => {
            seal.session.owner_id
        }
    };
    // A record naming a shard this node does not have goes to shard 0,
    // whose core refuses it as not its own.
    if owner.0 < shards {
        owner.0
    } else {
        0
    }
}

/// Everything a shard core is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardConfig {
    /// The session owner's identity.
    pub session_owner: SessionOwnerIdentity,
    /// The Actor owner's identity.
    pub actor_owner: ActorOwnerIdentity,
    /// Session owner settings.
    pub sessions: SessionOwnerConfig,
    /// Relocation settings (docs/relocation.md "Settings").
    pub relocation: RelocationConfig,
    /// §6 send timeout of a 51 waiting for admission to a full link.
    pub send_timeout: Duration,
    /// How long an Actor's async turn may await in all (docs/actors.md
    /// "Async turns").
    pub actor_turn_deadline: Duration,
}

/// The sans-IO core of one shard.
#[derive(Debug)]
pub struct ShardCore {
    pub(super) fx: Effects,
    pub(super) sessions: SessionOwner,
    actors: ActorOwner,
    relocation: RelocationOwner,
    /// (Link shard) the 51s waiting for room on a full link (§6).
    admission: LinkAdmission,
    /// BindOrGets this shard asked of the nodes owning the rows (71).
    pub(super) host_asks: HostAsks,
    /// BindOrGets to ask again after an unknown outcome (recheck.rs).
    pub(super) rechecks: Rechecks,
}

impl ShardCore {
    /// A shard core whose clock starts at `now`.
    pub fn new(config: ShardConfig, now: Instant) -> Self {
        Self {
            fx: Effects::new(now),
            relocation: RelocationOwner::new(config.session_owner.owner_id, config.relocation),
            sessions: SessionOwner::new(config.session_owner, config.sessions),
            actors: ActorOwner::new(
                config.actor_owner,
                config.session_owner.owner_id,
                config.actor_turn_deadline,
            ),
            admission: LinkAdmission::new(config.send_timeout),
            host_asks: HostAsks::new(config.session_owner.owner_id),
            rechecks: Rechecks::default(),
        }
    }

    /// The session owner's commands, at `now`.
    pub fn sessions(&mut self, now: Instant) -> Sessions<'_> {
        self.fx.advance(now);
        Sessions {
            owner: &mut self.sessions,
            fx: &mut self.fx,
        }
    }

    /// The Actor owner's commands, at `now`.
    pub fn actors(&mut self, now: Instant) -> Actors<'_> {
        self.fx.advance(now);
        Actors {
            owner: &mut self.actors,
            fx: &mut self.fx,
        }
    }

    /// The relocation side's commands and answers, at `now` (the Actor
    /// owner's relocation, the target's handoff).
    pub fn relocations(&mut self, now: Instant) -> Relocations<'_> {
        self.fx.advance(now);
        Relocations {
            state: &mut self.relocation,
            owner: &mut self.actors,
            fx: &mut self.fx,
        }
    }

    /// The relocation side's state, for queries.
    pub fn relocation(&self) -> &RelocationOwner {
        &self.relocation
    }

    /// The session owner's state, for queries.
    pub fn session_owner(&self) -> &SessionOwner {
        &self.sessions
    }

    /// The Actor owner's state, for queries.
    pub fn actor_owner(&self) -> &ActorOwner {
        &self.actors
    }

    /// A record from an authenticated peer (the transport checked `from`).
    pub fn handle_record(&mut self, now: Instant, from: Peer, record: NodeRecord) {
        self.handle_record_since(now, now, from, record);
    }

    /// [`Self::handle_record`] for a record that entered this node's path at
    /// `arrived` and waited since in a hop between shards (another shard
    /// read it off a link, or its Actor pushed it there): the push latency
    /// runs from `arrived` (core::latency). Only the time is the runtime's;
    /// the record is judged as any other.
    pub fn handle_record_since(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: Peer,
        record: NodeRecord,
    ) {
        self.fx.advance(now);
        self.fx.set_arrived(arrived);
        match record_role(&record) {
            RecordRole::ActorOwner => self.relocations(now).handle_actor_record(from, record),
            RecordRole::SessionOwner => self.sessions(now).handle_record(from, record),
            RecordRole::Coordinator => self
                .relocations(now)
                .handle_coordinator_record(from, record),
            RecordRole::Caller => {
                if let NodeRecord::ActorSend(ActorSend::Reply(reply)) = record {
                    self.actors(now).on_call_reply(from, reply);
                }
            }
            RecordRole::Host => {
                if let NodeRecord::ActorHost(host) = record {
                    self.on_actor_host(from, host);
                }
            }
        }
    }

    /// The transport had no link to `to` for a request record this shard
    /// sent: the request ends now with `Unavailable` (PeerUnreachable).
    pub fn handle_unreachable(&mut self, now: Instant, to: NodeRid, request: RequestId) {
        if request.is_relocation() {
            self.relocations(now).unreachable(to, request);
        } else if request.is_call() {
            self.actors(now).call_unreachable(to, request);
        } else if request.is_host() {
            if self.host_asks.asked(to, request) {
                self.fx.advance(now);
                self.host_ask_ended(request, Err(Reason::PeerUnreachable.into()));
            }
        } else {
            self.sessions(now).unreachable(to, request);
        }
    }

    /// The link to `peer` went down: what waits on it and cannot succeed
    /// without it ends now (a move to it before relay-ready aborts,
    /// [`crate::core::relocation::Relocations`]), and so do the relayed
    /// requests and Actor calls in flight to it, with `OutcomeUnknown`
    /// (§12: a route failure after submission leaves undetermined whether
    /// the target ran the work; nothing is sent again).
    pub fn handle_peer_down(&mut self, now: Instant, peer: NodeRid) {
        self.relocations(now).peer_down(peer);
        self.sessions(now).peer_down(peer);
        self.actors(now).calls_peer_down(peer);
    }

    /// (Link shard) a record about to go onto the link to `transmit.to`,
    /// in the state `link` is: given back to be written now, or kept
    /// (`None`) when it is a 51 that must wait for room (§6) or a 44 that
    /// must wait for its link (§8.1), until the send timeout at most, on
    /// this core's wheel ([`super::admission`]).
    pub fn offer_transmit(
        &mut self,
        now: Instant,
        transmit: super::Transmit,
        link: LinkRoom,
    ) -> Option<super::Transmit> {
        self.fx.advance(now);
        let waiting = self.admission.waiting();
        let offered = self.admission.offer(now, transmit, link);
        if self.admission.waiting() > waiting {
            let deadline = now + self.admission.send_timeout();
            let _ = self.fx.arm_at(deadline, CoreTimer::Admission);
        }
        offered
    }

    /// (Link shard) the waiting 51s and 44s admitted now: every one for a
    /// peer whose link `has_room`, in offer order. None past its send timeout:
    /// those ended at their timer ([`Self::handle_timeout`]).
    pub fn admit_waiting(&mut self, has_room: impl FnMut(NodeRid) -> bool) -> Vec<super::Transmit> {
        if self.admission.waiting() == 0 {
            return Vec::new();
        }
        self.admission.admit(has_room)
    }

    /// Fires every timer due at `now`. A timer never fires before its time.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.fx.advance(now);
        while let Some(timer) = self.fx.poll_expired() {
            match timer {
                CoreTimer::Session(timer) => self.sessions(now).handle_timer(timer),
                CoreTimer::Relocation(timer) => self.relocations(now).handle_timer(timer),
                CoreTimer::Actor(fire) => self.actors(now).fire_timer(&fire),
                CoreTimer::Await(timer) => {
                    // A turn over at its deadline lets its parked moves go
                    // on, as one that ended does.
                    if let Some(actor) = self.actors(now).on_await_timer(timer) {
                        self.relocations(now).unpark(&actor);
                    }
                }
                CoreTimer::Call(request) => self.actors(now).on_call_deadline(request),
                CoreTimer::CallDeadline(fire) => self.actors(now).on_caller_deadline(&fire),
                CoreTimer::HostAsk(request) => self.on_host_ask_deadline(request),
                CoreTimer::Recheck(actor) => self.on_recheck_due(actor),
                CoreTimer::RemoveAgain(actor) => self.actors(now).on_remove_again(actor),
                CoreTimer::Admission => {
                    // Not admitted by its send timeout: a 51 ends with
                    // DeadlineExceeded (§6), a 44 found no link; each is
                    // dropped and counted, never retried.
                    let expired = self.admission.expire(now);
                    for _ in 0..expired.notices {
                        self.fx.trace(FlowTrace::ReplacedNoticeDeadlineExceeded);
                    }
                    for _ in 0..expired.routes {
                        self.fx.trace(FlowTrace::RouteUpdateUnroutable);
                    }
                }
            }
        }
    }

    /// The awaiting turn of `actor` ended (its continuation finished, or the
    /// runtime ended it for a destroy): the moves parked behind it go on, in
    /// the order they were asked for (src/core/relocation/parked.rs).
    pub fn turn_ended(&mut self, now: Instant, actor: &ActorId) {
        if self.actors(now).turn_ended(actor) {
            self.relocations(now).unpark(actor);
        }
    }

    /// The next record to send, with its destination node (and lifecycle,
    /// for an answer): one at a time, for the contract tests; the shard and
    /// the simulator take them all with [`Self::swap_transmits`].
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<super::Transmit> {
        self.fx.poll_transmit()
    }

    /// Every queued transmit at once, swapped with the empty `spare`: the
    /// shard reads a record it only writes onto a link where it lies,
    /// instead of moving a record-sized value out of the queue for each
    /// (docs/PERFORMANCE.md "Fewer moves of records").
    pub fn swap_transmits(&mut self, spare: &mut VecDeque<super::Transmit>) {
        self.fx.swap_transmits(spare);
    }

    /// The next event to carry out. Once the queued events are out, the
    /// next session callback turn whose lane is ready comes as
    /// [`SessionEvent::Turn`] (src/core/session/lanes.rs): the shard runs
    /// it and reports its end with [`Sessions::turn_done`].
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        while let Some(event) = self.fx.peek_event() {
            // A moving Spot's member arrived (or failed): the Spot's move
            // goes on from here, after the step that ended it
            // (src/core/relocation/spot_move.rs). Any other event goes out
            // as it is, straight from the queue.
            let member_moved = matches!(
                event,
                CoreEvent::Relocation(RelocationEvent::Finished { relocation, .. })
                    if self.relocation.moves_with_spot(*relocation)
            );
            if !member_moved {
                return self.fx.poll_event();
            }
            if let Some(CoreEvent::Relocation(RelocationEvent::Finished {
                relocation,
                actor,
                outcome,
            })) = self.fx.poll_event()
            {
                let now = self.fx.now();
                self.relocations(now)
                    .member_moved(relocation, &actor, &outcome);
            }
        }
        let mut sessions = Sessions {
            owner: &mut self.sessions,
            fx: &mut self.fx,
        };
        match sessions.next_turn() {
            Some(turn) => Some(CoreEvent::Session(SessionEvent::Turn(turn))),
            // Requests refused on a closing lane have their answers queued.
            None => self.fx.poll_event(),
        }
    }

    /// Whether [`ShardCore::poll_transmit`] or [`ShardCore::poll_event`]
    /// may have something: a queued transmit or event, or a session lane
    /// listed as ready. `false` means both return `None` now, so that a
    /// host can skip its drain when the core has nothing for it (the
    /// runtime asks several times a loop turn, most often with nothing to
    /// carry out: docs/PERFORMANCE.md). `true` may still find nothing (a
    /// listed lane that was emptied).
    #[must_use]
    pub fn has_output(&self) -> bool {
        self.fx.has_output() || self.sessions.may_have_turn()
    }

    /// When [`ShardCore::handle_timeout`] should next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.fx.next_deadline()
    }

    /// The flow-trace counters.
    pub fn counters(&self) -> &FlowCounters {
        self.fx.counters()
    }

    /// The latency of this core's relays (from the session's relay to the
    /// Actor's reply reaching this owner) and pushes, and the pauses of its
    /// sessions' relocation seals: written by this core only, read by any
    /// thread (a metrics scrape).
    pub fn latency(&self) -> &std::sync::Arc<crate::core::latency::CoreLatency> {
        self.fx.latency()
    }

    /// How many client messages this shard's sessions hold under relocation
    /// seals, and how many messages for Actors moving away from this shard
    /// it holds (the ingress hold, and what waits for a 65 to be followed):
    /// counted when asked (a metrics scrape), O(sessions + relocations).
    pub fn held_messages(&self) -> (usize, usize) {
        (self.sessions.held_count(), self.relocation.held_count())
    }

    /// Records a flow event the transport observed (a malformed record, a
    /// record with no route), so that the one set of counters tells all.
    pub fn trace(&mut self, event: FlowTrace) {
        self.fx.trace(event);
    }

    /// How many timers are armed (a leak check for the tests).
    #[cfg(feature = "testing")]
    pub fn armed_timers(&self) -> usize {
        self.fx.pending_timers()
    }
}
