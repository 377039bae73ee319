//! What a core input produces: records to send, events for the shard, timers.
//!
//! One [`Effects`] belongs to one shard core ([`super::shard::ShardCore`]); the
//! session-owner and actor-owner roles write into it, and the shard loop
//! drains it after every input (DESIGN "The shape of a core state machine").
//! One hashed timer wheel per shard serves every timeout of both roles.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::actor::ActorEvent;
use super::latency::{CoreLatency, PushOrigin, SealEnd};
use super::relocation::{RelocationEvent, RelocationTimer};
use super::session::{SessionEvent, SessionTimer};
use super::time::Instant;
use super::timer::{TimerKey, TimerWheel};
use super::trace::{FlowCounters, FlowTrace};
use crate::ids::{NodeGeneration, NodeRid, Peer};
use crate::wire::node::NodeRecord;

/// A record to send, and to whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The node it goes to.
    pub to: NodeRid,
    /// For an answer to a peer's request (a reply, a bind terminal, 43, 61,
    /// 65): the lifecycle of `to` that asked. RequestIds and RelocationIds
    /// start again in every NodeGeneration, so an answer delivered to a
    /// later lifecycle could complete that lifecycle's own request of the
    /// same id with another request's outcome; the transport drops it
    /// unless its link to `to` is to this lifecycle (§4: nothing crosses a
    /// NodeGeneration). `None` for everything else.
    pub lifecycle: Option<NodeGeneration>,
    /// The record.
    pub record: NodeRecord,
}

/// A timer of either role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreTimer {
    /// A session-owner timer.
    Session(SessionTimer),
    /// A relocation timer (coordinator, target, proxies, follow entries).
    Relocation(RelocationTimer),
    /// §6: a 51 waiting for admission to a full link reaches its send
    /// timeout ([`super::admission::LinkAdmission`]).
    Admission,
    /// A tick of an Actor's timer is due (docs/actors.md "Timers").
    Actor(super::actor::ActorTimerFire),
    /// An awaiting turn's deadline, or a parked move's (docs/actors.md
    /// "Async turns").
    Await(super::actor::AwaitTimer),
    /// The deadline of a request as the node that sent it keeps it (to
    /// route its answer; calls.rs).
    Call(crate::ids::RequestId),
    /// The deadline of a request in its calling Actor's ledger, which moves
    /// with the Actor (open_calls.rs).
    CallDeadline(super::actor::CallDeadline),
    /// The deadline of a BindOrGet asked of the row's owner (host_ask.rs).
    HostAsk(crate::ids::RequestId),
    /// A BindOrGet whose store step's outcome was unknown is due to be
    /// asked again (recheck.rs).
    Recheck(crate::ids::ActorId),
    /// An ending Actor's row removal is due to be made again
    /// (actor/removal.rs).
    RemoveAgain(crate::ids::ActorId),
}

/// An event for the shard to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreEvent {
    /// For a STREAM session or the application's session side.
    Session(SessionEvent),
    /// For an Actor's queue or its Spot.
    Actor(ActorEvent),
    /// For the runtime's part in a relocation (capture, restore, store).
    Relocation(RelocationEvent),
    /// About an Actor's awaiting turn or a move parked behind it.
    Await(super::actor::AwaitEvent),
    /// The outcome of a request node code made of an Actor (docs/actors.md
    /// "From node code"): for its waiter, not for any Actor's lane.
    NodeCallOutcome {
        /// The request, as the shard numbered it.
        call: crate::ids::CallId,
        /// The reply, or the typed error that ended it.
        outcome: Result<bytes::Bytes, crate::error::Error>,
    },
    /// BindOrGet between nodes (src/core/host_ask.rs).
    Host(super::host_ask::HostEvent),
}

/// The outputs of one shard core, and its timer wheel.
#[derive(Debug)]
pub(crate) struct Effects {
    now: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<CoreEvent>,
    timers: TimerWheel<CoreTimer>,
    counters: FlowCounters,
    /// When the record being handled entered this node's path: `now`,
    /// unless the runtime says it waited in another shard's hop first
    /// ([`super::shard::ShardCore::handle_record_since`]). The start of a
    /// push's span (core::latency).
    arrived: Instant,
    /// The relay and push latency and the relocation pause (this core
    /// writes them, a metrics scrape reads them: core::latency).
    latency: Arc<CoreLatency>,
}

impl Effects {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            now,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            timers: TimerWheel::with_defaults(now),
            counters: FlowCounters::default(),
            arrived: now,
            latency: Arc::default(),
        }
    }

    /// Moves the core's notion of now; input time never goes backwards.
    pub(crate) fn advance(&mut self, now: Instant) {
        debug_assert!(
            now >= self.now,
            "time went backwards: {now:?} < {:?}",
            self.now
        );
        self.now = self.now.max(now);
    }

    /// The time of the input being handled.
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    pub(crate) fn send(&mut self, to: NodeRid, record: NodeRecord) {
        self.transmits.push_back(Transmit {
            to,
            lifecycle: None,
            record,
        });
    }

    /// Sends an answer to a request of `to`: only that lifecycle of the
    /// peer gets it ([`Transmit::lifecycle`]).
    pub(crate) fn answer(&mut self, to: Peer, record: NodeRecord) {
        self.transmits.push_back(Transmit {
            to: to.rid,
            lifecycle: Some(to.generation),
            record,
        });
    }

    pub(crate) fn session_event(&mut self, event: SessionEvent) {
        self.events.push_back(CoreEvent::Session(event));
    }

    pub(crate) fn actor_event(&mut self, event: ActorEvent) {
        self.events.push_back(CoreEvent::Actor(event));
    }

    pub(crate) fn relocation_event(&mut self, event: RelocationEvent) {
        self.events.push_back(CoreEvent::Relocation(event));
    }

    pub(crate) fn event(&mut self, event: CoreEvent) {
        self.events.push_back(event);
    }

    pub(crate) fn trace(&mut self, event: FlowTrace) {
        self.counters.record(event);
    }

    /// Counts `count` occurrences of `event` at once.
    pub(crate) fn trace_many(&mut self, event: FlowTrace, count: u64) {
        self.counters.add(event, count);
    }

    /// A relay accepted at `started` got its reply now. No clock is read:
    /// both times are the inputs' (the shard reads its clock per input
    /// anyway), so the cost per message is one bucket's increment.
    pub(crate) fn relay_replied(&mut self, started: Instant) {
        self.latency.relay.record(self.now - started);
    }

    /// The record about to be handled entered this node's path at
    /// `arrived` (never later than now).
    pub(crate) fn set_arrived(&mut self, arrived: Instant) {
        self.arrived = arrived.min(self.now);
    }

    /// The push being handled is handed to its client's connection now:
    /// its span ran from its arrival ([`Self::set_arrived`]). Like the
    /// relay's, no clock is read.
    pub(crate) fn push_handed(&mut self, origin: PushOrigin) {
        self.latency.push(origin).record(self.now - self.arrived);
    }

    /// A relocation seal installed at `since` ended now, as `end` says.
    pub(crate) fn seal_ended(&mut self, since: Instant, end: SealEnd) {
        self.latency.pause(end).record(self.now - since);
    }

    /// The latency histograms, for whoever reads them.
    pub(crate) fn latency(&self) -> &Arc<CoreLatency> {
        &self.latency
    }

    /// Arms a timer `after` from now. It never fires sooner.
    pub(crate) fn arm(&mut self, after: Duration, timer: CoreTimer) -> TimerKey {
        self.timers.insert(self.now + after, timer)
    }

    /// Arms a timer at `deadline` (now, if it has passed). It never fires
    /// sooner.
    pub(crate) fn arm_at(&mut self, deadline: Instant, timer: CoreTimer) -> TimerKey {
        self.timers.insert(deadline.max(self.now), timer)
    }

    pub(crate) fn cancel(&mut self, key: TimerKey) {
        // A key whose timer already fired is ignored by the wheel.
        let _ = self.timers.cancel(key);
    }

    pub(crate) fn poll_expired(&mut self) -> Option<CoreTimer> {
        self.timers.poll_expired(self.now).map(|(_, timer)| timer)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    #[cfg(feature = "testing")]
    pub(crate) fn pending_timers(&self) -> usize {
        self.timers.len()
    }

    #[cfg(feature = "testing")]
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Swaps the queued transmits with `spare` (empty): the caller walks
    /// them in place and hands the emptied queue back the next time.
    pub(crate) fn swap_transmits(&mut self, spare: &mut VecDeque<Transmit>) {
        debug_assert!(spare.is_empty());
        std::mem::swap(&mut self.transmits, spare);
    }

    pub(crate) fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    /// Whether a transmit or an event is queued.
    pub(crate) fn has_output(&self) -> bool {
        !self.transmits.is_empty() || !self.events.is_empty()
    }

    /// The next event, left in place: the shard core looks before it takes,
    /// so that an event it hands on is moved once, not twice.
    pub(crate) fn peek_event(&self) -> Option<&CoreEvent> {
        self.events.front()
    }

    pub(crate) fn counters(&self) -> &FlowCounters {
        &self.counters
    }
}
