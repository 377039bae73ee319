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
use super::warn_budget::WarnBudget;
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

/// Warning-level flow events logged per [`FLOW_WARN_WINDOW`] by one core
/// (one shard); every one is counted all the same.
pub(crate) const FLOW_WARN_BURST: u32 = 10;
pub(crate) const FLOW_WARN_WINDOW: Duration = Duration::from_secs(1);

/// The outputs of one shard core, and its timer wheel.
#[derive(Debug)]
pub(crate) struct Effects {
    now: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<CoreEvent>,
    timers: TimerWheel<CoreTimer>,
    counters: FlowCounters,
    /// The log lines of warning-level flow events: a peer or a client can
    /// trigger many of them (stale records, overflowing queues), so a
    /// flood is counted in full and logged in part.
    warnings: WarnBudget<Instant>,
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
            warnings: WarnBudget::new(now, FLOW_WARN_BURST, FLOW_WARN_WINDOW),
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

    /// Counts `event` and logs it: a warning-level event within the
    /// budget of [`FLOW_WARN_BURST`] lines per [`FLOW_WARN_WINDOW`] of
    /// input time, the next line saying how many were left out; the others
    /// at debug level.
    pub(crate) fn trace(&mut self, event: FlowTrace) {
        self.counters.record(event);
        if !event.is_warning() {
            tracing::debug!(flow = event.name(), "flow trace");
        } else if let Some(suppressed) = self.warnings.admit(self.now) {
            tracing::warn!(flow = event.name(), suppressed, "flow trace");
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    /// The `suppressed` field of every WARN event, in order.
    #[derive(Default)]
    struct Warnings(Mutex<Vec<u64>>);

    struct Suppressed(u64);

    impl Visit for Suppressed {
        fn record_u64(&mut self, field: &Field, value: u64) {
            if field.name() == "suppressed" {
                self.0 = value;
            }
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    impl Subscriber for &'static Warnings {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            if *event.metadata().level() == Level::WARN {
                let mut suppressed = Suppressed(0);
                event.record(&mut suppressed);
                self.0.lock().unwrap().push(suppressed.0);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// A flood of warning-level flow events, as a stalled reader per
    /// connection or a peer's stale records make, is counted in full and
    /// logged within the budget; the first line after the window says how
    /// many were left out.
    #[test]
    fn a_flood_of_flow_warnings_is_counted_in_full_and_logged_within_the_budget() {
        let warnings: &'static Warnings = Box::leak(Box::default());
        let start = Instant::from_millis(7);
        let mut fx = Effects::new(start);
        tracing::subscriber::with_default(warnings, || {
            for _ in 0..1_000 {
                fx.trace(FlowTrace::ClientOutboundOverflow);
                fx.trace(FlowTrace::PushRejectedNotCurrent);
            }
            fx.advance(start + FLOW_WARN_WINDOW);
            fx.trace(FlowTrace::RelocationRecordStale);
        });
        let logged = warnings.0.lock().unwrap().clone();
        let burst = FLOW_WARN_BURST as usize;
        assert_eq!(logged.len(), burst + 1, "{logged:?}");
        assert_eq!(logged[..burst], vec![0; burst][..]);
        assert_eq!(logged[burst], 1_000 - FLOW_WARN_BURST as u64);
        assert_eq!(fx.counters.get(FlowTrace::ClientOutboundOverflow), 1_000);
        assert_eq!(fx.counters.get(FlowTrace::PushRejectedNotCurrent), 1_000);
        assert_eq!(fx.counters.get(FlowTrace::RelocationRecordStale), 1);
    }
}
