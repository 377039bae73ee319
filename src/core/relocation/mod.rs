//! The Actor owner's side of live Actor relocation (§2, §8, §8.1, §9, §12;
//! docs/relocation.md): the relocation coordinator on the source, the
//! target's handoff, Message Follow, and the proxied replies that join them.
//!
//! Ground rules:
//! - Sans-IO like the rest of the core: every input is `(now, input)`,
//!   every output goes through the shard's `Effects` — records to send,
//!   [`RelocationEvent`]s for the runtime (capture, restore, reopen, drop,
//!   store operations, the caller's completion), timers on the shard's one
//!   wheel. The runtime decides nothing: it carries out events and feeds
//!   their results back ([`Relocations::captured`], [`Relocations::restored`],
//!   [`Relocations::cas_done`], [`Relocations::abort_done`]).
//! - The coordinator lives on the source Actor owner, decides when to start
//!   and when to abort before relay-ready; the target decides Restore, the
//!   cutover or its 1,000 ms fallback and performs the CAS; nobody else
//!   re-decides either (§2 table, docs/relocation.md "Who decides what").
//! - Abort before relay-ready: the durable abort in the Location Store comes
//!   first, then the source queue is restored, then 44 abort, then 64. After
//!   relay-ready is accepted no path reopens the source route (§8.1, L6).
//! - Every request handed across (saved work, ingress hold, Message Follow)
//!   is answered exactly once, through the source (`proxy`).
//! - Everything is bounded: saved work by the decode limits, the ingress
//!   hold and the proxies by `proxy_max`, follow entries by `follow_max`.

mod coordinator;
mod follow;
mod parked;
mod proxy;
mod spot_move;
mod target;

use foldhash::{HashMap, HashMapExt};
use std::time::Duration;

use bytes::Bytes;

use self::coordinator::Coordinator;
use self::follow::FollowTable;
use self::proxy::{Origin, Proxy, ProxyTable};
use self::target::TargetHandoff;
use super::actor::{ActorEvent, ActorOwner, Actors, HostedSpot, Placement};
use super::effects::{CoreTimer, Effects};
use super::lane::LaneId;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, NodeRid, ObjectGeneration, Peer,
    RelocationId, RequestId, SessionOwnerId, SpotId,
};
use crate::wire::node::{
    ActorReply, ActorSend, BindTerminal, BoundRoute, BoundSessionBind, NodeRecord, RequestHeader,
};
use crate::wire::DecodeLimits;

/// §2, §8.1: the target proceeds by fallback when no cutover (63) arrived
/// this long after its relay-ready reply (61). Fixed by the spec.
pub const CUTOVER_FALLBACK: Duration = Duration::from_millis(1_000);

/// Settings of the relocation side of a shard (docs/relocation.md
/// "Settings").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationConfig {
    /// The bounded wait for 43 after 42. Default 1,000 ms: well inside the
    /// session owner's 3,000 ms seal timeout, so an abort reaches it first.
    pub seal_request_timeout: Duration,
    /// The wait for 61 after 60. Default 1,500 ms.
    pub prepare_timeout: Duration,
    /// The coordinator's wait for 65 after relay-ready was accepted. Default
    /// 5,000 ms: past the target's 1,000 ms fallback and a store round trip.
    pub finish_timeout: Duration,
    /// How long a Message Follow entry lives after the commit. Default
    /// 30,000 ms.
    pub follow_lifetime: Duration,
    /// Follow entries per shard; the oldest goes first. Default 65,536.
    pub follow_max: usize,
    /// Proxied requests per shard, and records held per relocation; past it
    /// a request ends with `Unavailable` (QueueFull). Default 65,536.
    pub proxy_max: usize,
    /// The budget of a proxied request whose own budget the source does not
    /// know (saved work: the lane keeps no deadline). Default 10,000 ms:
    /// longer than the default request deadline, so the sender's own
    /// deadline ends it first.
    pub proxy_budget: Duration,
    /// How soon a durable abort that could not reach the store is retried.
    /// Default 200 ms.
    pub store_retry: Duration,
    /// The peer links' decode limits: a prepare (60) that would not fit them
    /// is not sent (the relocation aborts with HandoffTooLarge).
    pub limits: DecodeLimits,
}

impl Default for RelocationConfig {
    fn default() -> Self {
        Self {
            seal_request_timeout: Duration::from_millis(1_000),
            prepare_timeout: Duration::from_millis(1_500),
            finish_timeout: Duration::from_millis(5_000),
            follow_lifetime: Duration::from_millis(30_000),
            follow_max: 65_536,
            proxy_max: 65_536,
            proxy_budget: Duration::from_millis(10_000),
            store_retry: Duration::from_millis(200),
            limits: DecodeLimits::default(),
        }
    }
}

/// What the source expects the Location Store row to be: itself as owner,
/// under the authority owner generation it hosts the Actor with (§8.1 "the
/// expected source owner and generation"). The store's `RowVersion`.
// Reachable from the public surface only through the runtime's
// `From<ExpectedOwner> for RowVersion` (runtime/store_effects.rs, hidden
// from the documentation): the bridge between the core and the store.
#[allow(unnameable_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpectedOwner {
    /// The source node.
    pub owner: NodeRid,
    /// Its authority owner generation.
    pub authority: AuthorityOwnerGeneration,
}

/// A Location Store operation the runtime carries out for the relocation,
/// off the shard's hot path; its result comes back as an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// The target's CAS (§8.1): authority to this node, with its own lease
    /// claim, if the row is still at `expected` and the relocation was not
    /// recorded aborted. Answer with [`Relocations::cas_done`].
    TakeAuthority {
        /// The Actor.
        actor: ActorId,
        /// The row the CAS expects.
        expected: ExpectedOwner,
    },
    /// The coordinator's durable abort (§8.1). Answer with
    /// [`Relocations::abort_done`].
    AbortRelocation {
        /// The Actor.
        actor: ActorId,
        /// The row the abort expects.
        expected: ExpectedOwner,
    },
}

/// The answer to [`StoreOp::TakeAuthority`] (the store's `CasOutcome`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CasAnswer {
    /// Authority moved here, under this new authority owner generation.
    Swapped {
        /// The generation after the CAS.
        authority: AuthorityOwnerGeneration,
    },
    /// The row has another version, `current`: authority is elsewhere —
    /// unless `current` names this very lifecycle under this lease, for the
    /// incarnation this relocation moves, which only its own earlier CAS,
    /// applied with its answer lost, can have done (the target decides so:
    /// `cas_done`).
    Conflict {
        /// Where the row's authority is now.
        current: ActorLocation,
        /// The row's incarnation.
        object: ObjectGeneration,
    },
    /// There is no live row.
    Absent,
    /// The coordinator recorded this relocation aborted.
    RelocationAborted,
}

/// The answer to [`StoreOp::AbortRelocation`] (the store's `AbortOutcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortAnswer {
    /// Recorded: no CAS for this relocation can succeed.
    Aborted,
    /// Authority already moved (the target's CAS won the race) to `owner`.
    Moved {
        /// The row's owner now.
        owner: NodeRid,
    },
    /// There is no live row: no CAS can succeed either, and the source no
    /// longer holds authority (a committed move whose Actor was destroyed
    /// since, or a lapsed lease): the source does not reopen.
    Absent,
}

/// What the runtime hands back for a [`RelocationEvent::Capture`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// The Actor's state snapshot.
    pub state: Bytes,
    /// The work still queued on the Actor's lane, in its order, exactly as
    /// the core emitted it (saved work, docs/relocation.md).
    pub queued: Vec<ActorEvent>,
}

/// What the relocation side asks of the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelocationEvent {
    /// Source: move-seal the Actor's lane, let the running turn end, then
    /// answer [`Relocations::captured`] with the state snapshot and the
    /// queued work, taken off the lane. Until [`RelocationEvent::Reopen`] or
    /// [`RelocationEvent::DropInstance`] the core sends it nothing.
    Capture {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
    },
    /// Source, abort before relay-ready: lift the move seal. The saved work
    /// and the ingress hold follow as ordinary deliveries, in arrival order.
    Reopen {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
    },
    /// Drop the Actor's instance: the source's after relay-ready was
    /// accepted, or the target's when it discards. May come before a
    /// pending Restore finished: [`Relocations::restored`] then hands the
    /// placement back.
    DropInstance {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
        /// Where the instance ran (or was restored to): the runtime frees
        /// its slot and its own lane. `None` when nothing was placed.
        placement: Option<Placement>,
    },
    /// Target: build the Actor from `state` without dispatch, then answer
    /// [`Relocations::restored`].
    Restore {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
        /// Its state snapshot.
        state: Bytes,
    },
    /// Target, after its CAS: the Actor is hosted here now; deliveries for
    /// it follow (the temporary queue first).
    Opened {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor at its new location.
        actor: ActorRef,
    },
    /// Carry out a Location Store operation.
    Store {
        /// The relocation.
        relocation: RelocationId,
        /// The operation.
        op: StoreOp,
    },
    /// Source: a move parked behind the Actor's awaiting turn goes on now
    /// (src/core/relocation/parked.rs); its outcome is still to come.
    Unparked {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
    },
    /// Source: move-seal the Spot's lane for its move (spot_move.rs): its
    /// Actors' work is held, in order, until the Spot's move ends.
    SpotSealed {
        /// The Spot.
        spot: SpotId,
        /// Its lane.
        lane: LaneId,
    },
    /// Source: the Spot's move ended; the caller of `relocate_spot` gets
    /// `outcome`. With `gone`, the Spot left this shard (drop its handle and
    /// lane); otherwise its lane reopens, with the Actors still here.
    SpotFinished {
        /// The Spot.
        spot: SpotId,
        /// Every Actor moved, or the first failure.
        outcome: Result<(), Error>,
        /// The Spot as the registry held it, when it left.
        gone: Option<HostedSpot>,
    },
    /// Source: the relocation ended; the caller of `relocate` gets this.
    Finished {
        /// The relocation.
        relocation: RelocationId,
        /// The Actor.
        actor: ActorId,
        /// The Actor at its new location, or why it did not move.
        outcome: Result<ActorRef, Error>,
    },
}

/// A timer of the relocation side. Each fires once and is forgotten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelocationTimer {
    /// The 42 → 43 bounded wait ended.
    SealReply(RelocationId),
    /// The 60 → 61 wait ended.
    PrepareReply(RelocationId),
    /// The coordinator's wait for 65 ended.
    FinishWait(RelocationId),
    /// Retry the durable abort.
    AbortRetry(RelocationId),
    /// Make the target's CAS again: its outcome was unknown.
    CasRetry(RelocationId),
    /// §8.1: 1,000 ms after the target's relay-ready reply.
    CutoverFallback(RelocationId),
    /// A committed handoff stops accepting late ingress hold items.
    TargetLinger(RelocationId),
    /// A proxied request's deadline.
    ProxyDeadline(RequestId),
    /// A move parked behind an awaiting turn reached its prepare bound.
    Parked(RelocationId),
    /// A follow entry's lifetime ended.
    FollowExpiry {
        /// The moved Actor.
        actor: ActorId,
        /// Which entry.
        serial: u64,
    },
}

/// The relocation state of one shard: its coordinators, target handoffs,
/// proxied requests and follow entries.
#[derive(Debug)]
pub struct RelocationOwner {
    config: RelocationConfig,
    next_request: RequestId,
    /// The shard in the high bits, a counter below: unique per node
    /// lifecycle and increasing per Actor.
    next_sequence: u64,
    coordinators: HashMap<RelocationId, Coordinator>,
    relocating: HashMap<ActorId, RelocationId>,
    targets: HashMap<RelocationId, TargetHandoff>,
    arriving: HashMap<ActorId, RelocationId>,
    proxies: ProxyTable,
    follow: FollowTable,
    /// Moves parked behind an awaiting turn (parked.rs).
    parked: parked::ParkedMoves,
    /// Spots moving away as one unit (spot_move.rs).
    spot_moves: spot_move::SpotMoves,
}

impl RelocationOwner {
    pub(crate) fn new(owner: SessionOwnerId, config: RelocationConfig) -> Self {
        Self {
            config,
            next_request: RequestId::relocation_origin(owner),
            next_sequence: u64::from(owner.0) << RequestId::OWNER_SHIFT,
            coordinators: HashMap::new(),
            relocating: HashMap::new(),
            targets: HashMap::new(),
            arriving: HashMap::new(),
            proxies: ProxyTable::default(),
            follow: FollowTable::default(),
            parked: parked::ParkedMoves::default(),
            spot_moves: spot_move::SpotMoves::default(),
        }
    }

    /// How many moves wait, parked, for an awaiting turn to end.
    #[cfg(feature = "testing")]
    pub fn parked_moves(&self) -> usize {
        self.parked.len()
    }

    /// Whether `actor` is being relocated away from here.
    pub fn is_relocating(&self, actor: &ActorId) -> bool {
        self.relocating.contains_key(actor)
    }

    /// Whether `actor` is arriving here (a target handoff before commit).
    #[cfg(feature = "testing")]
    pub fn is_arriving(&self, actor: &ActorId) -> bool {
        self.arriving
            .get(actor)
            .and_then(|id| self.targets.get(id))
            .is_some_and(|t| !t.is_committed())
    }

    /// The incarnation arriving here for `actor`, while its handoff has
    /// not committed.
    pub fn arriving_generation(&self, actor: &ActorId) -> Option<ObjectGeneration> {
        let handoff = self.targets.get(self.arriving.get(actor)?)?;
        (!handoff.is_committed()).then(|| handoff.generation())
    }

    /// Whether a Message Follow entry for `actor` is live here.
    #[cfg(feature = "testing")]
    pub fn follows(&self, actor: &ActorId) -> bool {
        self.follow.get(actor).is_some()
    }

    /// How many proxied requests are in flight.
    #[cfg(feature = "testing")]
    pub fn proxy_count(&self) -> usize {
        self.proxies.len()
    }

    /// Message Follow entries held now (bounded by `follow_max`, §8.2).
    #[cfg(feature = "testing")]
    pub fn follow_count(&self) -> usize {
        self.follow.len()
    }

    /// Whether no relocation is under way here, as source or target, and no
    /// follow entry or proxied request is left: nothing leaks once every
    /// move has ended and its follow lifetime has passed.
    #[cfg(feature = "testing")]
    pub fn is_idle(&self) -> bool {
        self.coordinators.is_empty()
            && self.relocating.is_empty()
            && self.targets.is_empty()
            && self.arriving.is_empty()
            && self.proxies.len() == 0
            && self.follow.is_empty()
    }

    /// How many messages for Actors moving away from this shard are held
    /// now: the ingress hold (arrived after the capture; handed to the
    /// target in 62s, or run here again after an abort) and, after
    /// relay-ready, what waits for the 65 to be followed. Tombstones are
    /// not messages and are not counted. For a metrics scrape:
    /// O(relocations).
    pub fn held_count(&self) -> usize {
        self.coordinators
            .values()
            .map(Coordinator::held_count)
            .sum()
    }

    fn request_id(&mut self) -> RequestId {
        self.next_request = self.next_request.next();
        debug_assert!(self.next_request.is_relocation());
        self.next_request
    }

    fn relocation_id(&mut self, coordinator: NodeRid) -> RelocationId {
        self.next_sequence += 1;
        RelocationId {
            coordinator,
            sequence: self.next_sequence,
        }
    }
}

/// The relocation side with the shard's Actor owner and effects: every
/// command and input.
pub struct Relocations<'a> {
    pub(crate) state: &'a mut RelocationOwner,
    pub(crate) owner: &'a mut ActorOwner,
    pub(crate) fx: &'a mut Effects,
}

impl Relocations<'_> {
    /// The Actor owner's commands, sharing this handle's effects.
    fn actors(&mut self) -> Actors<'_> {
        Actors {
            owner: self.owner,
            fx: self.fx,
        }
    }

    fn event(&mut self, event: RelocationEvent) {
        self.fx.relocation_event(event);
    }

    fn arm(&mut self, after: Duration, timer: RelocationTimer) -> crate::core::timer::TimerKey {
        self.fx.arm(after, CoreTimer::Relocation(timer))
    }

    /// A record for the Actor owner role (24 message, 38 request and
    /// tombstone, 60, 62, 63, 64): the relocation side takes what concerns a
    /// relocation or a follow entry, the registry the rest.
    pub(crate) fn handle_actor_record(&mut self, from: Peer, record: NodeRecord) {
        match record {
            NodeRecord::RelocationPrepare(prepare) => self.on_prepare(from, *prepare),
            NodeRecord::RelocationIngressHold(hold) => self.on_ingress_hold(from, hold),
            NodeRecord::RelocationCutover(cutover) => self.on_cutover(from, cutover),
            NodeRecord::RelocationDiscard(discard) => self.on_discard(from, discard),
            record => {
                // No move and no follow entry on this shard (the common
                // case): neither the ingress hold nor a Message Follow can
                // take the record, so it goes to the registry without
                // passing, by value, through the two that would hand it
                // back untouched.
                if self.state.relocating.is_empty() && self.state.follow.is_empty() {
                    self.actors().handle_record(from, record);
                    return;
                }
                let Some(record) = self.intercept(from, record) else {
                    return;
                };
                let Some(record) = self.follow(from, record) else {
                    return;
                };
                self.actors().handle_record(from, record);
            }
        }
    }

    /// A record for the relocation coordinator (43, 61, 65, and the answers
    /// to proxied requests).
    pub(crate) fn handle_coordinator_record(&mut self, from: Peer, record: NodeRecord) {
        match record {
            NodeRecord::SessionRelocationSealed(sealed) => self.on_sealed(from, sealed),
            NodeRecord::RelocationReady(ready) => self.on_ready(from, ready),
            NodeRecord::RelocationFinished(finished) => self.on_finished(from, finished),
            NodeRecord::ActorSend(ActorSend::Reply(reply)) => {
                self.on_proxied_answer(from, reply.request, Answer::Reply(reply.outcome));
            }
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal)) => {
                let answer = Answer::Terminal(terminal.outcome);
                self.on_proxied_answer(from, terminal.request, answer);
            }
            other => {
                debug_assert!(false, "record not for the coordinator: {other:?}");
                self.fx.trace(FlowTrace::UnhandledRecord);
            }
        }
    }

    /// A timer of the relocation side fired.
    pub(crate) fn handle_timer(&mut self, timer: RelocationTimer) {
        match timer {
            RelocationTimer::SealReply(id) => self.on_seal_deadline(id),
            RelocationTimer::PrepareReply(id) => self.on_prepare_deadline(id),
            RelocationTimer::FinishWait(id) => self.on_finish_deadline(id),
            RelocationTimer::AbortRetry(id) => self.on_abort_retry(id),
            RelocationTimer::CasRetry(id) => self.on_cas_retry(id),
            RelocationTimer::CutoverFallback(id) => self.on_cutover_fallback(id),
            RelocationTimer::TargetLinger(id) => self.on_target_linger(id),
            RelocationTimer::Parked(id) => self.on_parked_deadline(id),
            RelocationTimer::ProxyDeadline(id) => {
                if let Some(proxy) = self.state.proxies.remove(id) {
                    self.fx.trace(FlowTrace::RequestDeadlineExceeded);
                    self.fail_origin(proxy.origin, Reason::Deadline.into());
                }
            }
            RelocationTimer::FollowExpiry { actor, serial } => {
                // The key already fired; nothing to cancel.
                let _ = self.state.follow.remove(&actor, serial);
            }
        }
    }

    /// The transport had no link to `to` for `request`, a request the
    /// relocation side sent: it ends now with `Unavailable`
    /// (PeerUnreachable).
    pub(crate) fn unreachable(&mut self, to: NodeRid, request: RequestId) {
        if let Some(proxy) = self.state.proxies.get(request).filter(|p| p.peer == to) {
            let deadline = proxy.deadline;
            if let Some(proxy) = self.state.proxies.remove(request) {
                self.fx.cancel(deadline);
                self.fail_origin(proxy.origin, Reason::PeerUnreachable.into());
            }
            return;
        }
        self.coordinator_unreachable(to, request);
    }

    /// The link to `peer` went down (issue 20 item 4): a move to it that
    /// has not reached relay-ready aborts now — its durable abort first,
    /// then its 44 abort (§8.1) — rather than at its prepare deadline, and
    /// a seal asked of it unwinds; the same as a request that could not be
    /// sent. After relay-ready the spec's cleanup applies (docs/relocation.md).
    pub(crate) fn peer_down(&mut self, peer: NodeRid) {
        for request in self.coordinator_requests_to(peer) {
            self.coordinator_unreachable(peer, request);
        }
        // A request this node re-issued to the peer (Message Follow, or
        // work it owed a reply for) ends as any relay in flight does when
        // its link goes down (§12): OutcomeUnknown. A forwarded bind keeps
        // its deadline, as the session owner's own does.
        for request in self.state.proxies.relays_to(peer) {
            if let Some(proxy) = self.state.proxies.remove(request) {
                self.fx.cancel(proxy.deadline);
                self.fx.trace(FlowTrace::RequestLinkDown);
                self.fail_origin(proxy.origin, Reason::OutcomeUnknown.into());
            }
        }
    }

    /// Re-issues a request under a proxy id of the source's: the answer
    /// from `peer` comes back here and goes to `origin`. `None` at the
    /// `proxy_max` limit (the caller refuses the request).
    fn proxy(&mut self, peer: NodeRid, origin: Origin, budget: Duration) -> Option<RequestHeader> {
        if self.state.proxies.len() >= self.state.config.proxy_max {
            return None;
        }
        let id = self.state.request_id();
        let deadline = self.arm(budget, RelocationTimer::ProxyDeadline(id));
        self.state.proxies.insert(
            id,
            Proxy {
                peer,
                origin,
                deadline,
            },
        );
        Some(RequestHeader { id, budget })
    }

    /// Forgets a proxied request without answering it (an abort that
    /// restores the source queue answers through the ticket itself).
    fn forget_proxy(&mut self, id: RequestId) {
        if let Some(proxy) = self.state.proxies.remove(id) {
            self.fx.cancel(proxy.deadline);
        }
    }

    /// An answer (24 reply or 38 terminal) to a request the relocation side
    /// proxied: it counts only from the proxy's peer and of the kind the
    /// origin waits for; then the origin gets it under its own id.
    fn on_proxied_answer(&mut self, from: Peer, request: RequestId, answer: Answer) {
        let Some(proxy) = self.state.proxies.get(request) else {
            self.fx.trace(FlowTrace::LateReplyDropped);
            return;
        };
        let is_terminal = matches!(answer, Answer::Terminal(_));
        if proxy.peer != from.rid || proxy.origin.wants_bind_terminal() != is_terminal {
            self.fx.trace(FlowTrace::ReplyMismatch);
            return;
        }
        let Some(proxy) = self.state.proxies.remove(request) else {
            return;
        };
        self.fx.cancel(proxy.deadline);
        match answer {
            Answer::Reply(outcome) => self.answer_relay(proxy.origin, outcome),
            Answer::Terminal(outcome) => self.answer_bind(proxy.origin, outcome),
        }
    }

    /// Ends a proxied request of any kind with `error`.
    fn fail_origin(&mut self, origin: Origin, error: Error) {
        if origin.wants_bind_terminal() {
            self.answer_bind(origin, Err(error));
        } else {
            self.answer_relay(origin, Err(error));
        }
    }

    /// Ends a proxied 24 request or disconnect callback.
    fn answer_relay(&mut self, origin: Origin, outcome: Result<Bytes, Error>) {
        match origin {
            Origin::Ticket(ticket) => self.actors().reply(ticket, outcome),
            Origin::Relay { to, request } => self.fx.answer(
                to,
                NodeRecord::ActorSend(ActorSend::Reply(ActorReply { request, outcome })),
            ),
            Origin::Bind { .. } => debug_assert!(false, "a 24 reply for a bind origin"),
        }
    }

    /// Ends a proxied 38 bind.
    fn answer_bind(&mut self, origin: Origin, outcome: Result<BoundRoute, Error>) {
        let Origin::Bind { to, request } = origin else {
            debug_assert!(false, "a bind terminal for a non-bind origin");
            return;
        };
        let terminal = BindTerminal { request, outcome };
        self.fx.answer(
            to,
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal)),
        );
    }
}

/// What a proxied request's answer carries back.
enum Answer {
    /// A 24 reply.
    Reply(Result<Bytes, Error>),
    /// A 38 terminal.
    Terminal(Result<BoundRoute, Error>),
}

/// The Actor a record for the Actor owner role names (24 message, 38
/// request or tombstone).
fn actor_of(record: &NodeRecord) -> Option<&ActorId> {
    match record {
        NodeRecord::ActorSend(ActorSend::Message(message)) => Some(&message.actor),
        NodeRecord::BoundSessionBind(BoundSessionBind::Request(request)) => Some(&request.actor),
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)) => {
            Some(&tombstone.actor)
        }
        NodeRecord::ActorCall(call) => Some(&call.actor),
        _ => None,
    }
}
