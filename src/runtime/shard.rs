//! One shard: a thread that owns an io_uring reactor, a [`ShardCore`], the
//! lanes, the sessions it accepted and the Actors it hosts (DESIGN "Threads,
//! queues, time"; docs/threading.md).
//!
//! The loop turn: wait on the reactor (bounded by the core's next timer, not
//! at all when work is ready) → feed socket bytes and timers into the core →
//! carry out the core's outputs (client frames, lane submissions, bind and
//! notify terminals) → run Actor lane turns → start session lane turns as
//! tasks → poll ready tasks with a budget → carry out outputs again. Nothing
//! here takes a lock; state is shared with the shard's own tasks through one
//! `RefCell`, never borrowed across an `.await`. The session side (lanes
//! and the turns of the session callbacks) is [`session`]; the Actor side
//! (hosted Actors, User Spots, their lanes and turns) is [`actors`].

mod actors;
mod awaits;
mod calls;
mod relocation;
mod session;
mod websocket;

use foldhash::{HashMap, HashMapExt};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use self::actors::{ActorHost, HostRequest, HostWaiter};
pub(crate) use self::calls::NodeCallReply;
use self::relocation::Moves;
use super::app::session::Dispatches;
use super::deadlines::FifoDeadlines;
use super::executor::{completion, Completer, Completion, Executor, Spawner};
use super::links::{Links, Sent};
use super::membership::Membership;
use super::router::{Router, ShardMsg, LINK_SHARD};
use super::stall::{Phase, Stall, StallWatch};
use super::store_effects::StoreAnswer;
use super::{Handlers, NodeCommand, NodeShared, PublishedCounters};
use crate::core::admission::{LinkAdmission, LinkRoom};
use crate::core::host_ask::HostEvent;
use crate::core::session::{BindStart, Ticket};
use crate::core::shard::ShardCore;
use crate::core::time::Instant;
use crate::core::trace::FlowTrace;
use crate::core::CoreEvent;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, Correlation, NodeRid, PacketKey, Peer, SessionRid};
use crate::net::{ConnId, ListenerId, NetEvent, Reactor};
use crate::store::{LocationStore, OwnerLease, StoreError};
use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::node::{ActorReply, ActorSend, NodeRecord};

/// How many ready tasks one loop turn polls before it looks at the sockets
/// again, so one busy callback cannot starve keepalive (§5).
const TASK_BUDGET: usize = 256;

/// How many inbox messages (other shards' records and transmits, store
/// answers, the embedder's commands) one loop turn takes before it looks
/// at its sockets and timers again. Without a bound, shards that hand this
/// one messages as fast as it takes them would keep it in its inbox: its
/// own clients, links, timers and Actor turns would wait (a 523 ms
/// records phase was seen under overload; docs/threading.md "The loop
/// turn"). A turn rarely takes more than a few hundred.
const INBOX_BUDGET: usize = 1_024;

/// The longest a parked loop waits with no timer due (a safety net; every
/// real wake-up is an event, a timer or a waker).
const IDLE_WAIT_MAX: Duration = Duration::from_millis(100);

/// §10 host Shutdown in progress: the core closes what is left at the
/// drain deadline; the shard reports when no session is left.
struct Drain {
    done: Option<std::sync::mpsc::Sender<()>>,
}

struct SessionEntry {
    conn: ConnId,
    /// Its inbound rate limit (`rate_limit`).
    bucket: super::rate_limit::TokenBucket,
}

/// The listeners of a shard besides its STREAM one.
pub(crate) struct Listeners {
    /// The node links' (shard 0 only).
    pub(crate) peer: Option<ListenerId>,
    /// The WebSocket clients' (every shard, when the node has one).
    pub(crate) websocket: Option<ListenerId>,
}

/// Everything a shard owns, behind the one `RefCell` of [`ShardHandle`].
pub(crate) struct ShardState {
    node: Arc<NodeShared>,
    /// This shard's index: its SessionOwnerId.
    index: u16,
    router: Arc<Router>,
    reactor: Reactor,
    links: Links,
    /// Shard 0 of a discovering node: its side of the store's membership.
    membership: Option<Membership>,
    peer_listener: Option<ListenerId>,
    websocket_listener: Option<ListenerId>,
    /// The WebSocket connections (upgrading or upgraded) and their
    /// protocol state; a TCP client's connection is not here.
    ws: HashMap<ConnId, crate::runtime::websocket::WsConn>,
    /// The upgrade deadlines of the WebSocket connections not upgraded yet.
    ws_handshakes: FifoDeadlines<ConnId>,
    /// Where a frame is encoded before it becomes a WebSocket message.
    ws_scratch: bytes::BytesMut,
    /// Records decoded from links this turn (kept to reuse its allocation).
    link_records: Vec<(Peer, crate::wire::node::NodeRecord)>,
    /// The core's transmits of this turn, walked in place (kept to reuse
    /// its allocation; empty between turns).
    outbox: VecDeque<crate::core::Transmit>,
    core: ShardCore,
    me: Peer,
    sessions: HashMap<SessionRid, SessionEntry>,
    conns: HashMap<ConnId, SessionRid>,
    /// Client connections this shard closed whose last bytes (the Close
    /// frame) are not out yet.
    flushing: foldhash::HashSet<ConnId>,
    /// The Actors hosted here, their lanes and the User Spots whose home
    /// this shard is.
    host: ActorHost,
    /// Relocations this shard started for the application.
    moves: Moves,
    /// Routes to other Actors, and the calls waiting on their look-ups.
    routes: calls::Routes,
    /// Turns that await, and moves waiting for them (awaits.rs).
    awaits: awaits::Awaits,
    /// Session turns the core handed out, to start as tasks.
    ready_turns: std::collections::VecDeque<crate::core::session::SessionTurn>,
    /// Each session's lane, from its accept until its disconnect turn is
    /// over: its attributes, its task's mailbox and its awaiting turn, in
    /// one entry so that a turn's start and end each look it up once.
    lanes: HashMap<SessionRid, session::Lane>,
    /// The executor's live tasks at the end of the last loop turn, for a
    /// scrape ([`ShardState::gauges`]).
    tasks: usize,
    /// Session turns' aborts kept for reuse (`session.rs`'s `start_turn`).
    aborts: super::executor::AbortPool,
    draining: Option<Drain>,
    bind_waiters: HashMap<Ticket, Completer<Result<ActorRef, Error>>>,
    /// Actor look-ups answered by the Actor's shard.
    actor_waiters: HashMap<u64, Completer<Result<ActorRef, Error>>>,
    next_actor_token: u64,
    notify_waiters: HashMap<Ticket, Completer<Result<(), Error>>>,
    /// §5: when the owner lease lapses, by the store's clock; kept by shard
    /// 0, which renews it, so its loop reads no lock to watch it.
    lease_expires_at: Option<Instant>,
    /// §5: this node's Actor owner fenced itself (shard 0 sets it once; a
    /// lapsed lifecycle stays dead, so the lease is not renewed again).
    lease_fenced: bool,
    /// (Link shard) a lease round is with the store workers.
    lease_round_in_flight: bool,
    /// The clock as the loop turn read it ([`Self::tick`]), and the same
    /// instant in the core's time: nothing else in the shard reads a clock.
    wall: std::time::Instant,
    clock: Instant,
    /// What this shard publishes for the node's metrics; it is their only
    /// writer on this thread (the Actor turn durations).
    published: Arc<PublishedCounters>,
    /// Actor turns run so far: every ACTOR_TURN_SAMPLE-th is timed.
    actor_turns_seen: u64,
}

/// The shard as its tasks see it: shared, shard-local, never `Send`.
pub(crate) struct ShardHandle {
    state: RefCell<ShardState>,
    spawner: Spawner,
    /// The packets' dispatches kept for reuse (`session.rs`).
    dispatches: Dispatches,
    /// The session callbacks' future slots kept for reuse (`session.rs`).
    callback_slots: RefCell<Vec<session::CallbackSlot>>,
    /// The application's session callbacks, fixed for the node's life.
    handlers: Arc<Handlers>,
    /// The waker of a session callback's first poll (`session.rs`).
    first_poll_waker: std::task::Waker,
}

impl ShardState {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: Arc<NodeShared>,
        index: u16,
        router: Arc<Router>,
        reactor: Reactor,
        links: Links,
        membership: Option<Membership>,
        listeners: Listeners,
        core: ShardCore,
        me: Peer,
        published: Arc<PublishedCounters>,
    ) -> Self {
        let lease_expires_at = node.lease.as_ref().map(|lease| {
            lease
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .expires_at
        });
        let ws_handshakes = FifoDeadlines::new(node.settings.websocket_handshake_deadline);
        let wall = std::time::Instant::now();
        let clock = node.instant_at(wall);
        Self {
            node,
            index,
            router,
            reactor,
            links,
            membership,
            peer_listener: listeners.peer,
            websocket_listener: listeners.websocket,
            ws: HashMap::new(),
            ws_handshakes,
            ws_scratch: bytes::BytesMut::new(),
            link_records: Vec::new(),
            outbox: VecDeque::new(),
            core,
            me,
            sessions: HashMap::new(),
            conns: HashMap::new(),
            flushing: foldhash::HashSet::default(),
            host: ActorHost::new(),
            moves: Moves::default(),
            routes: calls::Routes::default(),
            awaits: awaits::Awaits::default(),
            ready_turns: std::collections::VecDeque::new(),
            lanes: HashMap::new(),
            tasks: 0,
            aborts: super::executor::AbortPool::default(),
            draining: None,
            bind_waiters: HashMap::new(),
            actor_waiters: HashMap::new(),
            next_actor_token: 0,
            notify_waiters: HashMap::new(),
            lease_expires_at,
            lease_fenced: false,
            lease_round_in_flight: false,
            wall,
            clock,
            published,
            actor_turns_seen: 0,
        }
    }

    /// Reads the clock: once per loop turn, the one place a shard does
    /// (docs/threading.md "One clock per turn"). Every input of the turn is
    /// stamped with it, so the core, the links and the edge deadlines see
    /// one time; a deadline is checked late by at most one turn, never early.
    /// Reads the clock: at the start of each loop turn, and once more when
    /// a replacement callback reaches its terminal, whose 100 ms close must
    /// start from the terminal, not from the turn's start (§6;
    /// docs/threading.md "One clock per turn").
    fn tick(&mut self) {
        self.wall = std::time::Instant::now();
        self.clock = self.node.instant_at(self.wall).max(self.clock);
        self.links.tick(self.wall);
    }

    /// A loop turn stalled the shard: counted, and logged unless another
    /// was this second (src/runtime/stall.rs).
    fn stalled(&mut self, watch: &mut StallWatch, stall: &Stall) {
        self.core.trace(FlowTrace::ShardStalled);
        if let Some(unreported) = watch.warn_now() {
            tracing::warn!(
                shard = self.index,
                took_ms = stall.total.as_millis() as u64,
                limit_ms = watch.limit().as_millis() as u64,
                phases = %stall.describe(),
                since_last_line = unreported,
                "shard stalled: every session and Actor of this shard waited on this loop turn \
                 (a handler that blocks? docs/operations.md \"Shard stalls\")"
            );
        }
    }

    /// The core's time as of this loop turn ([`Self::tick`]).
    fn now(&self) -> Instant {
        self.clock
    }

    /// Feeds every reactor event into the core and the lanes.
    fn process_net(&mut self) {
        while let Some(event) = self.reactor.poll_event() {
            match event {
                NetEvent::Accepted { listener, conn, .. }
                    if Some(listener) == self.peer_listener =>
                {
                    self.links.accepted(conn)
                }
                NetEvent::Accepted { listener, conn, .. }
                    if Some(listener) == self.websocket_listener =>
                {
                    self.ws_accepted(conn)
                }
                NetEvent::Accepted { conn, .. } => self.accepted(conn),
                NetEvent::Received { conn } if self.links.owns(conn) => {
                    let mut records = std::mem::take(&mut self.link_records);
                    self.links
                        .received(&mut self.reactor, &mut self.core, conn, &mut records);
                    // A link a newer one replaced is down before the new
                    // one's records count.
                    while let Some(peer) = self.links.take_replaced() {
                        self.peer_down(peer);
                    }
                    for (from, record) in records.drain(..) {
                        self.deliver(from, record);
                    }
                    self.link_records = records;
                }
                NetEvent::Received { conn } if self.is_websocket(conn) => self.ws_received(conn),
                NetEvent::Received { conn } => self.received(conn),
                NetEvent::Closed { conn, .. } if self.links.owns(conn) => {
                    if let Some(peer) = self.links.closed(conn) {
                        self.peer_down(peer);
                    }
                }
                NetEvent::Closed { conn, cause } => {
                    self.ws_closed(conn);
                    self.conn_closed(conn, cause);
                }
                NetEvent::Connected { conn } => self.links.connected(&mut self.reactor, conn),
                NetEvent::ConnectFailed { conn, .. } => {
                    let _ = self.links.closed(conn);
                }
                NetEvent::Woken => {}
            }
        }
    }

    /// Splits client frames off the connection's bytes: keepalive is answered
    /// here, outside every application queue (§5); packets go to the
    /// session's lane; anything else closes the connection with a reason.
    fn received(&mut self, conn: ConnId) {
        let Some(&rid) = self.conns.get(&conn) else {
            return;
        };
        let limits = self.node.settings.decode_limits;
        loop {
            // A connection closed or aborted meanwhile reads no further.
            if self.reactor.outbound(conn).is_none() || !self.conns.contains_key(&conn) {
                return;
            }
            let Some(inbound) = self.reactor.inbound(conn) else {
                return;
            };
            let frame = match ClientFrame::decode_from(inbound, &limits) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    let begun = !inbound.is_empty();
                    return self.frame_pending(rid, begun);
                }
                Err(error) => {
                    tracing::debug!(?rid, %error, "malformed client frame");
                    self.close_with(rid, conn, CloseReason::ProtocolError);
                    return;
                }
            };
            if !self.client_frame(rid, conn, frame) {
                return;
            }
        }
    }

    /// One client frame, whatever carried it (a TCP stream or a WebSocket
    /// message): keepalive answered at once, packets onto the session's
    /// lane. `false` when it closed the connection.
    fn client_frame(&mut self, rid: SessionRid, conn: ConnId, frame: ClientFrame) -> bool {
        match frame {
            ClientFrame::Ping { nonce } => self.write_frame(conn, &ClientFrame::Pong { nonce }),
            ClientFrame::Pong { .. } => {}
            ClientFrame::Request {
                key,
                correlation,
                payload,
            } => self.packet(rid, conn, key, Some(correlation), payload),
            ClientFrame::Message { key, payload } => self.packet(rid, conn, key, None, payload),
            ClientFrame::Reply { .. }
            | ClientFrame::Error { .. }
            | ClientFrame::Push { .. }
            | ClientFrame::Close { .. } => {
                self.close_with(rid, conn, CloseReason::ProtocolError);
                return false;
            }
        }
        true
    }

    /// A link connection whose handshake did not finish by its deadline is
    /// closed, counted (docs/threading.md "Timeouts on the edges"; the
    /// client frame deadline is the core's, `Sessions::frame_begun`).
    fn expire_handshakes(&mut self) {
        let ShardState {
            links,
            reactor,
            core,
            ..
        } = self;
        links.expire_handshakes(reactor, core);
    }

    /// Encodes a frame into the connection's outbound buffer; a client that
    /// lets it grow past the bound is disconnected (counted in the log).
    fn write_frame(&mut self, conn: ConnId, frame: &ClientFrame) {
        // One look-up on the TCP path only while the shard has WebSocket
        // connections at all.
        if !self.ws.is_empty() && self.ws.contains_key(&conn) {
            return self.ws_write_frame(conn, frame);
        }
        let Some(outbound) = self.reactor.outbound(conn) else {
            return;
        };
        frame.encode(outbound);
        self.cut_over_bound(conn);
    }

    /// A client that lets its outbound bytes grow past the bound (it does
    /// not read) is cut, counted (docs/threading.md "Slow readers");
    /// whether it was.
    fn cut_over_bound(&mut self, conn: ConnId) -> bool {
        if self.reactor.outbound_len(conn) <= self.node.settings.outbound_max {
            return false;
        }
        tracing::debug!(?conn, "client outbound queue over its bound: disconnecting");
        self.core.trace(FlowTrace::ClientOutboundOverflow);
        self.reactor.abort(conn);
        true
    }

    /// Whether something is queued that the next turn must take up
    /// without waiting: output of the core, or session turns a drain
    /// handed out.
    fn has_work(&self) -> bool {
        self.core.has_output() || !self.ready_turns.is_empty()
    }

    /// Carries out every output of the core; records for this node loop back.
    /// Most calls (several a loop turn) find nothing to do: they cost one
    /// check, not the whole drain (docs/PERFORMANCE.md "Empty drains").
    #[inline]
    fn drain_core(&mut self) {
        if self.core.has_output() {
            self.drain_core_outputs();
        }
    }

    /// [`Self::drain_core`]'s work, until the core has nothing more: an
    /// event carried out may queue more output.
    #[inline(never)]
    fn drain_core_outputs(&mut self) {
        loop {
            let mut outbox = std::mem::take(&mut self.outbox);
            self.core.swap_transmits(&mut outbox);
            while let Some(front) = outbox.front() {
                // The link shard writes a record onto its link where it
                // lies in the queue: no record-sized move per transmit.
                if front.to != self.me.rid
                    && self.index == LINK_SHARD
                    && !LinkAdmission::waits(&front.record)
                {
                    self.transmit(front);
                    outbox.pop_front();
                    continue;
                }
                let Some(transmit) = outbox.pop_front() else {
                    break;
                };
                if transmit.to == self.me.rid {
                    // An answer names this process's own lifecycle: the
                    // process that asked is this one.
                    let me = self.me;
                    self.deliver(me, transmit.record);
                } else if self.index != LINK_SHARD {
                    self.router.send(LINK_SHARD, ShardMsg::Transmit(transmit));
                } else {
                    // A 51 or a 44 (the others went out above).
                    self.offer_transmit(transmit);
                }
            }
            self.outbox = outbox;
            while let Some(event) = self.core.poll_event() {
                match event {
                    CoreEvent::Session(event) => self.session_event(event),
                    CoreEvent::Actor(event) => self.actor_event(event),
                    CoreEvent::Relocation(event) => self.relocation_event(event),
                    CoreEvent::Await(event) => self.await_event(event),
                    CoreEvent::NodeCallOutcome { call, outcome } => {
                        self.node_call_ended(call, outcome)
                    }
                    CoreEvent::Host(HostEvent::Answered { actor, outcome }) => {
                        self.owner_answered(actor, outcome);
                    }
                    CoreEvent::Host(HostEvent::Asked {
                        from,
                        request,
                        actor,
                        actor_type,
                    }) => {
                        let waiter = HostWaiter::Peer { to: from, request };
                        let request = HostRequest {
                            actor_type: actor_type.as_str().to_owned(),
                            spot: None,
                            waiter,
                        };
                        self.host_or_get(actor, request);
                    }
                    CoreEvent::Host(HostEvent::RemoveAgain { row }) => self.remove_again(&row),
                    CoreEvent::Host(HostEvent::DestroyUnknown { actor }) => {
                        self.destroy_unknown(&actor)
                    }
                    CoreEvent::Host(HostEvent::Recheck { actor }) => {
                        let request = HostRequest {
                            actor_type: String::new(),
                            spot: None,
                            waiter: HostWaiter::Recheck,
                        };
                        self.host_or_get(actor, request);
                    }
                }
            }
            if !self.core.has_output() {
                return;
            }
        }
    }

    /// A record for this node: into this shard's core, or one hop to the
    /// shard that owns its session or Actor, stamped with this turn's clock
    /// so that the time it waits in that hop counts in a push's latency.
    fn deliver(&mut self, from: Peer, record: crate::wire::node::NodeRecord) {
        let shard = crate::core::shard::record_shard(&record, self.router.shards());
        let now = self.now();
        if shard == self.index {
            self.core.handle_record(now, from, record);
        } else {
            let since = now;
            self.router.send(
                shard,
                ShardMsg::Record {
                    from,
                    record,
                    since,
                },
            );
        }
    }

    /// (Link shard) a record onto the link to its node. An answer goes only
    /// onto a link to the lifecycle that asked (`Transmit::lifecycle`): a
    /// peer that restarted reuses its RequestIds and RelocationIds, and must
    /// never take an answer meant for its previous process as its own.
    fn transmit(&mut self, transmit: &crate::core::Transmit) {
        if self.answers_past_lifecycle(transmit) {
            return;
        }
        self.write_record(transmit);
    }

    /// Whether `transmit` answers a lifecycle of its peer that is gone
    /// (counted, and dropped by the caller).
    fn answers_past_lifecycle(&mut self, transmit: &crate::core::Transmit) -> bool {
        let Some(lifecycle) = transmit.lifecycle else {
            return false;
        };
        let past = self
            .links
            .peer(transmit.to)
            .is_some_and(|p| p.generation != lifecycle);
        if past {
            self.core.trace(FlowTrace::AnswerToPastLifecycleDropped);
        }
        past
    }

    /// (Link shard) a record another shard handed over whole: a 51 is
    /// offered for admission, any other goes out by [`Self::transmit`].
    fn transmit_owned(&mut self, transmit: crate::core::Transmit) {
        if LinkAdmission::waits(&transmit.record) {
            self.offer_transmit(transmit);
        } else {
            self.transmit(&transmit);
        }
    }

    /// (Link shard) a record that may wait for admission, owned because it
    /// may stay in the core: a 51 offered to a full link waits there for
    /// room (§6), a 44 offered with no link waits for the link (§8.1; see
    /// `admit_waiting`); a 51 with no link at all is unroutable in
    /// `write_record`. Every other record goes out at once through
    /// [`Self::transmit`]: the relay path pays no link-room look-up for the
    /// admission rule.
    fn offer_transmit(&mut self, transmit: crate::core::Transmit) {
        if self.answers_past_lifecycle(&transmit) {
            return;
        }
        let link = match self.links.has_room(&self.reactor, transmit.to) {
            Some(true) => LinkRoom::Room,
            Some(false) => LinkRoom::Full,
            None => LinkRoom::Down,
        };
        let now = self.now();
        if let Some(transmit) = self.core.offer_transmit(now, transmit, link) {
            self.write_record(&transmit);
        }
    }

    /// (Link shard) writes the waiting 51s whose link has room now (§6: a
    /// link drains through socket completions, each of which ends the
    /// loop's wait) and the waiting 44s whose link is up now (§8.1: a link
    /// up is a socket event too); those past their send timeout ended on
    /// the core's wheel.
    fn admit_waiting(&mut self) {
        let (links, reactor) = (&self.links, &self.reactor);
        let admitted = self
            .core
            .admit_waiting(|to| links.has_room(reactor, to) == Some(true));
        for transmit in admitted {
            self.write_record(&transmit);
        }
    }

    /// A record onto the link to its node, or dropped and counted when there
    /// is none (a request among them then ends with Unavailable).
    fn write_record(&mut self, transmit: &crate::core::Transmit) {
        let crate::core::Transmit { to, ref record, .. } = *transmit;
        match self.links.send(&mut self.reactor, to, record) {
            Sent::Written => return,
            // No link: the record is dropped and counted, and a request
            // among them ends now with Unavailable on the shard that sent it.
            Sent::NoLink => self.core.trace(FlowTrace::RecordUnroutable),
            Sent::TooLarge => {
                self.core.trace(FlowTrace::RecordTooLarge);
                // A reply too large to cross still ends its request, typed.
                if let NodeRecord::ActorSend(ActorSend::Reply(reply)) = record {
                    let refused = NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
                        request: reply.request,
                        outcome: Err(Reason::MessageTooLarge.into()),
                    }));
                    let _ = self.links.send(&mut self.reactor, to, &refused);
                    return;
                }
            }
        }
        if let Some(request) = record.request_id() {
            let owner = request.owner().0;
            if owner == self.index {
                let now = self.now();
                self.core.handle_unreachable(now, to, request);
            } else {
                self.router
                    .send(owner, ShardMsg::Unreachable { to, request });
            }
        }
    }

    /// (Link shard) the link to `peer` went down: every shard's core learns
    /// it, so that a move to that peer before relay-ready aborts at once
    /// (issue 20 item 4) instead of at its prepare deadline.
    fn peer_down(&mut self, peer: NodeRid) {
        let now = self.now();
        self.core.handle_peer_down(now, peer);
        self.routes.forget_peer(peer);
        for shard in (0..self.router.shards()).filter(|&s| s != self.index) {
            self.router.send(shard, ShardMsg::PeerDown(peer));
        }
    }

    /// Takes this turn's share of what other shards and the application
    /// handed this shard (its inbox), at most [`INBOX_BUDGET`]
    /// messages in the order they came; `true` when more are waiting, so
    /// that the next turn does not park (counted `inbox_budget_spent`).
    fn process_inbox(&mut self) -> bool {
        for _ in 0..INBOX_BUDGET {
            let Some(msg) = self.router.receive(self.index) else {
                return false;
            };
            self.inbox_message(msg);
        }
        let more = self.router.waiting(self.index) > 0;
        if more {
            self.core.trace(FlowTrace::InboxBudgetSpent);
        }
        more
    }

    /// One message another shard (or the embedder) handed this one.
    fn inbox_message(&mut self, msg: ShardMsg) {
        match msg {
            ShardMsg::Record {
                from,
                record,
                since,
            } => {
                let now = self.now();
                self.core.handle_record_since(now, since, from, record);
            }
            ShardMsg::Transmit(transmit) => self.transmit_owned(transmit),
            ShardMsg::Command(NodeCommand::CreateActor {
                actor_type,
                id,
                spot,
                reply,
            }) => {
                let waiter = HostWaiter::Command(reply);
                self.host_or_get(
                    id,
                    HostRequest {
                        actor_type,
                        spot,
                        waiter,
                    },
                );
            }
            ShardMsg::Command(NodeCommand::CreateSpot { kind, id, reply }) => {
                let _ = reply.send(self.create_spot(&kind, &id));
            }
            ShardMsg::Command(NodeCommand::DestroyActor { id, reply }) => {
                self.destroy(id, reply);
            }
            ShardMsg::Command(NodeCommand::RelocateSpot { id, target, reply }) => {
                self.start_spot_relocation(&id, target, reply);
            }
            ShardMsg::Command(NodeCommand::HostedActors { reply }) => {
                let _ = reply.send(self.relocation_units());
            }
            ShardMsg::Command(NodeCommand::Relocate { id, target, reply }) => {
                self.start_relocation(&id, target, reply);
            }
            ShardMsg::Command(NodeCommand::Call {
                to,
                key,
                payload,
                reply,
            }) => self.node_call(to, key, payload, reply),
            ShardMsg::CreateActor {
                actor_type,
                id,
                spot,
                origin,
                token,
            } => {
                let waiter = HostWaiter::Shard { origin, token };
                self.host_or_get(
                    id,
                    HostRequest {
                        actor_type,
                        spot,
                        waiter,
                    },
                );
            }
            ShardMsg::Store(answer) => self.store_answered(answer),
            ShardMsg::ActorCreated { token, outcome } => {
                if let Some(waiter) = self.actor_waiters.remove(&token) {
                    waiter.complete(outcome);
                }
            }
            ShardMsg::Fence => {
                let now = self.now();
                self.core.actors(now).fence();
            }
            ShardMsg::PeerDown(peer) => {
                let now = self.now();
                self.core.handle_peer_down(now, peer);
                self.routes.forget_peer(peer);
            }
            ShardMsg::Unreachable { to, request } => {
                let now = self.now();
                self.core.handle_unreachable(now, to, request);
            }
            ShardMsg::Gauges(reply) => {
                // A scrape that gave up waiting dropped its receiver.
                let _ = reply.send(self.gauges());
            }
            ShardMsg::Drain { deadline, done } => {
                let now = self.now();
                self.core.sessions(now).drain(deadline);
                self.core.actors(now).leave();
                self.draining = Some(Drain { done: Some(done) });
            }
        }
    }

    /// What this shard reports to a scrape (src/runtime/metrics.rs):
    /// counted here, once per scrape, so that no loop turn pays for it.
    /// O(sessions + lanes), a few microseconds per thousand sessions.
    fn gauges(&self) -> super::metrics::ShardGauges {
        let owner = self.core.session_owner();
        let (bound_sessions, bindings) = owner.bound_counts();
        let (actor_queued, actor_deepest) = self.host.actor_lanes.queue_depths();
        let (spot_queued, spot_deepest) = self.host.spot_lanes.queue_depths();
        let (held_sealed, held_ingress) = self.core.held_messages();
        super::metrics::ShardGauges {
            shard: self.index,
            sessions: self.sessions.len(),
            session_lanes: self.lanes.len(),
            tasks: self.tasks,
            bound_sessions,
            bindings,
            requests_pending: owner.pending_count(),
            mailbox_depth: actor_queued + spot_queued,
            mailbox_depth_max: actor_deepest.max(spot_deepest),
            held_sealed,
            held_ingress,
            links: self.links.peer_states(),
            lease_left: self.lease_left(),
        }
    }

    /// §10: once no session is left (the core closes those still open at
    /// the drain deadline), the drain is reported done.
    fn advance_drain(&mut self) {
        if self.draining.is_none() {
            return;
        }
        if self.sessions_gone() {
            if let Some(done) = self.draining.as_mut().and_then(|d| d.done.take()) {
                let _ = done.send(());
            }
        }
    }

    /// Hands a store operation to the node's store workers; its answer
    /// comes back to this shard's inbox (docs/threading.md "Never block a
    /// shard"). A full queue refuses it at once: `Unavailable`, counted.
    pub(super) fn store_effect(
        &mut self,
        op: impl FnOnce(&dyn LocationStore) -> StoreAnswer + Send + 'static,
    ) -> Result<(), Error> {
        self.store_effect_on(false, op)
    }

    /// [`Self::store_effect`] on the general lane, or on the lease lane
    /// (`lease`: a lease round, which must not wait behind logins).
    fn store_effect_on(
        &mut self,
        lease: bool,
        op: impl FnOnce(&dyn LocationStore) -> StoreAnswer + Send + 'static,
    ) -> Result<(), Error> {
        let Some(workers) = &self.node.store_workers else {
            return Err(Reason::StoreUnavailable.into());
        };
        let (router, shard) = (Arc::clone(&self.router), self.index);
        let job = move |store: &dyn LocationStore| {
            let answer = op(store);
            router.send(shard, ShardMsg::Store(answer));
        };
        let submitted = if lease {
            workers.submit_lease(job)
        } else {
            workers.submit(job)
        };
        submitted.map_err(|_| {
            self.core.trace(FlowTrace::StoreQueueFull);
            Error::new(Reason::StoreUnavailable)
        })
    }

    /// A store operation this shard asked for has ended.
    fn store_answered(&mut self, answer: StoreAnswer) {
        match answer {
            StoreAnswer::Host { id, outcome } => self.host_answered(id, outcome),
            StoreAnswer::Replace { id, outcome } => self.replace_answered(id, outcome),
            StoreAnswer::Orphan { id, outcome } => self.orphan_answered(id, outcome),
            StoreAnswer::Resolve { id, outcome } => self.route_resolved(id, outcome),
            StoreAnswer::Destroy { id, outcome, reply } => {
                self.destroy_answered(&id, outcome, reply)
            }
            StoreAnswer::Cas { relocation, answer } => {
                let now = self.now();
                self.core.relocations(now).cas_done(relocation, answer);
            }
            StoreAnswer::Abort { relocation, answer } => {
                let now = self.now();
                self.core.relocations(now).abort_done(relocation, answer);
            }
            StoreAnswer::LeaseRound { renewed, listed } => {
                self.lease_round_in_flight = false;
                if let Some(renewed) = renewed {
                    self.lease_renewed(renewed);
                }
                if let Some(membership) = &mut self.membership {
                    let read = listed.is_some();
                    let live = membership.listed(listed);
                    self.links
                        .follow_members(&mut self.reactor, &mut self.core, live);
                    if read {
                        self.links.listing_read(live);
                    }
                }
            }
        }
    }

    /// §5, docs/store.md "Membership": one lease round as a store effect
    /// (at most one in flight) — the owner lease renewed, then this
    /// lifecycle registered in the membership while its lease is not
    /// fenced, and the mesh listed. Runs on shard 0 every renewal interval;
    /// the answer comes back to [`Self::store_answered`].
    fn lease_round(&mut self) {
        if self.lease_round_in_flight || self.node.store.is_none() {
            return;
        }
        let lease = match (&self.node.lease, self.lease_fenced) {
            (Some(lease), false) => Some(
                lease
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
            ),
            _ => None,
        };
        let register = self.membership.as_ref().map(Membership::registration);
        if lease.is_none() && register.is_none() {
            return;
        }
        let asked = self.store_effect_on(true, move |store| {
            // Asked twice: a renew interval after the last round the
            // connection may have been closed while idle, and asked once
            // every round, the lease would lapse while the store is healthy.
            let renewed = lease
                .as_ref()
                .map(|lease| super::lease::asked_twice(|| store.renew_lease(lease)));
            let current = match &renewed {
                Some(Ok(renewed)) => Some(renewed),
                // Unreachable: the lease stands until it lapses (§5).
                Some(Err(StoreError::Unavailable(_) | StoreError::Refused(_))) => lease.as_ref(),
                _ => None,
            };
            let listed = register.and_then(|register| register.round(store, current));
            StoreAnswer::LeaseRound { renewed, listed }
        });
        self.lease_round_in_flight = asked.is_ok();
    }

    /// §5: the renewal's outcome. A store that could not be reached leaves
    /// the lease as it was: the owner keeps serving until its `expires_at`
    /// and fences itself then ([`Self::fence_if_lapsed`], X21), so an outage
    /// neither extends the lease nor cuts it short. A store that says the
    /// lease lapsed fences the owner at once.
    fn lease_renewed(&mut self, renewed: Result<OwnerLease, StoreError>) {
        let Some(lease) = &self.node.lease else {
            return;
        };
        if self.lease_fenced {
            return;
        }
        let mut lease = lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match renewed {
            Ok(renewed) => {
                self.lease_expires_at = Some(renewed.expires_at);
                *lease = renewed;
            }
            Err(StoreError::Unavailable(detail) | StoreError::Refused(detail)) => {
                tracing::warn!(%detail, lease_left_ms = ?self.lease_left().map(|l| l.as_millis()),
                    "owner lease not renewed: the store is unavailable");
            }
            Err(error) => {
                drop(lease);
                self.fence_owner(&error);
            }
        }
    }

    /// How long the owner lease has left by the store's clock (the frame of
    /// its `expires_at`), on the shard that renews it; `None` when there is
    /// no lease to watch.
    fn lease_left(&self) -> Option<Duration> {
        let (Some(store), Some(expires_at)) = (&self.node.store, self.lease_expires_at) else {
            return None;
        };
        if self.index != LINK_SHARD || self.lease_fenced {
            return None;
        }
        Some(expires_at.saturating_duration_since(store.now()))
    }

    /// §5, X21: once the lease is past its `expires_at` (renewals failed
    /// while the store was unreachable), the owner fences itself: a stored
    /// route is never used past the lease.
    fn fence_if_lapsed(&mut self) {
        if self.lease_left() == Some(Duration::ZERO) {
            self.fence_owner(&"the owner lease expired before it could be renewed");
        }
    }

    /// The shard stopped: the rows of the Actors it still hosts go to the
    /// clean stop, which removes them at their versions (docs/store.md
    /// "Clean stop").
    fn leave_rows(&self) {
        let owner = self.core.actor_owner();
        let rows = owner.placements().filter_map(|(id, _)| {
            let actor_ref = owner.actor_ref(id)?;
            Some((id.clone(), (&actor_ref.location).into()))
        });
        self.node
            .left_rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(rows);
    }

    /// Fences every shard's Actor owner: every later bind and relay ends
    /// with Unavailable (§5).
    fn fence_owner(&mut self, why: &dyn std::fmt::Display) {
        tracing::error!(%why, "fencing this node's actors");
        self.lease_fenced = true;
        self.node.lease_lapsed.set();
        // This shard at once, before it handles another record; the others
        // at their next inbox drain.
        let now = self.now();
        self.core.actors(now).fence();
        for shard in (0..self.router.shards()).filter(|&s| s != self.index) {
            self.router.send(shard, ShardMsg::Fence);
        }
    }
}

impl ShardHandle {
    pub(crate) fn new(state: ShardState, spawner: Spawner) -> Rc<Self> {
        let handlers = Arc::clone(&state.node.handlers);
        Rc::new(Self {
            state: RefCell::new(state),
            spawner,
            dispatches: Dispatches::default(),
            callback_slots: RefCell::new(Vec::new()),
            handlers,
            first_poll_waker: std::task::Waker::from(Arc::new(session::FirstPoll)),
        })
    }

    pub(crate) fn bound(&self, rid: SessionRid) -> Vec<ActorRef> {
        self.state.borrow().core.session_owner().bound(rid)
    }

    pub(crate) fn find(&self, rid: SessionRid, id: &ActorId) -> Option<ActorRef> {
        self.state.borrow().core.session_owner().find(rid, id)
    }

    pub(crate) fn bind(
        &self,
        rid: SessionRid,
        actor: ActorRef,
    ) -> Result<Completion<Result<ActorRef, Error>>, Error> {
        let mut state = self.state.borrow_mut();
        // §3, §4: the route names the mesh its owner is reached through.
        if !state.node.meshes.contains(&actor.location.mesh) {
            return Err(Reason::MeshUnreachable.into());
        }
        let now = state.now();
        let (completer, completion) = completion();
        match state.core.sessions(now).bind(rid, actor)? {
            BindStart::Existing(bound) => completer.complete(Ok(bound)),
            BindStart::Pending(ticket) => {
                state.bind_waiters.insert(ticket, completer);
            }
        }
        Ok(completion)
    }

    pub(crate) fn relay(
        &self,
        rid: SessionRid,
        actor: &ActorId,
        key: PacketKey,
        payload: Bytes,
        correlation: Option<Correlation>,
    ) -> Result<(), Error> {
        let mut state = self.state.borrow_mut();
        let now = state.now();
        let deadline = state.node.settings.relay_deadline;
        let request = correlation.map(|c| (c, deadline));
        state
            .core
            .sessions(now)
            .relay(rid, actor, key, payload, request)
    }

    pub(crate) fn notify_disconnected(
        &self,
        rid: SessionRid,
        actor: &ActorId,
    ) -> Result<Completion<Result<(), Error>>, Error> {
        let mut state = self.state.borrow_mut();
        let now = state.now();
        let ticket = state.core.sessions(now).notify_disconnected(rid, actor)?;
        let (completer, completion) = completion();
        state.notify_waiters.insert(ticket, completer);
        Ok(completion)
    }

    pub(crate) fn answer(
        &self,
        rid: SessionRid,
        correlation: Correlation,
        outcome: Result<Bytes, Error>,
    ) -> Result<(), Error> {
        let frame = match outcome {
            Ok(payload) => ClientFrame::Reply {
                correlation,
                payload,
            },
            Err(error) => ClientFrame::Error { correlation, error },
        };
        let mut state = self.state.borrow_mut();
        let conn = state
            .sessions
            .get(&rid)
            .map(|e| e.conn)
            .ok_or(Error::new(Reason::SessionClosing))?;
        state.write_frame(conn, &frame);
        Ok(())
    }

    pub(crate) fn send_to_client(
        &self,
        rid: SessionRid,
        key: PacketKey,
        payload: Bytes,
    ) -> Result<(), Error> {
        let mut state = self.state.borrow_mut();
        let conn = state
            .sessions
            .get(&rid)
            .map(|e| e.conn)
            .ok_or(Error::new(Reason::SessionClosing))?;
        state.write_frame(conn, &ClientFrame::Push { key, payload });
        Ok(())
    }

    /// Calls to Actors from a session callback (docs/actors.md "From node
    /// code"), over this node's shards.
    pub(crate) fn caller(&self) -> crate::runtime::caller::ActorCaller {
        let state = self.state.borrow();
        crate::runtime::caller::ActorCaller::new(
            Arc::clone(&state.router),
            state.node.settings.decode_limits,
        )
    }

    pub(crate) fn close_session(&self, rid: SessionRid) {
        let mut state = self.state.borrow_mut();
        let now = state.now();
        state.core.sessions(now).close_session(rid);
    }
}

/// Runs a shard until `stop` is set.
pub(crate) fn run(
    shard: Rc<ShardHandle>,
    mut executor: Executor,
    stop: Arc<AtomicBool>,
    counters: &PublishedCounters,
) {
    let mut backlog = false;
    let mut stalls = StallWatch::new(shard.state.borrow().node.settings.stall_warn);
    let mut next_renewal = shard.state.borrow().wall;
    while !stop.load(Ordering::Acquire) {
        {
            let mut state = shard.state.borrow_mut();
            let ShardState { links, reactor, .. } = &mut *state;
            links.redial(reactor);
            links.watch_linking();
        }
        // Read last before the wait: a task woken on this thread does not
        // unpark the reactor (executor.rs `Ready::is_home`), so this check
        // is what keeps the turn from parking over it. Nor does the turn's
        // last drain (below) start the session turns it hands out: they
        // are taken on the next turn, not after a wait of up to
        // `IDLE_WAIT_MAX` (`has_work`).
        let timeout = {
            let state = shard.state.borrow();
            if backlog || executor.has_ready() || state.has_work() {
                Some(Duration::ZERO)
            } else {
                let now = state.now();
                let next = state.core.poll_timeout();
                let mut wait = next.map_or(IDLE_WAIT_MAX, |at| at - now).min(IDLE_WAIT_MAX);
                if let Some(dial) = state.links.next_dial_in() {
                    wait = wait.min(dial);
                }
                if let Some(round) = state.links.next_linking_in() {
                    wait = wait.min(round);
                }
                if let Some(left) = state.lease_left() {
                    wait = wait.min(left);
                }
                if let Some(deadline) = state.links.next_handshake_in() {
                    wait = wait.min(deadline);
                }
                if let Some(deadline) = state.ws_handshakes.next_in(state.wall) {
                    wait = wait.min(deadline);
                }
                Some(wait)
            }
        };
        {
            let mut state = shard.state.borrow_mut();
            if let Err(error) = state.reactor.turn(timeout) {
                tracing::error!(%error, "reactor turn failed");
            }
            state.tick();
            stalls.woke();
            // Before this turn's records: none is admitted past the lease.
            state.fence_if_lapsed();
            state.process_net();
            let inbox_left = state.process_inbox();
            let now = state.now();
            state.core.handle_timeout(now);
            state.expire_handshakes();
            state.expire_ws_handshakes();
            state.admit_waiting();
            stalls.ended(Phase::Records);
            let actor_work_left = state.run_actor_work();
            backlog = inbox_left || actor_work_left;
            stalls.ended(Phase::ActorTurns);
        }
        shard.start_session_turns();
        shard.start_actor_awaits();
        executor.run_ready(TASK_BUDGET);
        shard.start_session_turns();
        stalls.ended(Phase::Callbacks);
        {
            let mut state = shard.state.borrow_mut();
            backlog |= state.run_actor_work();
            if state.index == LINK_SHARD && state.wall >= next_renewal {
                state.lease_round();
                next_renewal = state.wall + state.node.settings.lease_renew_interval;
            }
        }
        // Work the last round started (a loopback 51's callback) is started
        // now, so the next wait does not park over it.
        shard.start_session_turns();
        shard.start_actor_awaits();
        {
            let mut state = shard.state.borrow_mut();
            // What those callbacks left in the core (a relay's record, a
            // reply) is written now: the next turn's one flush then sends
            // it with the rest of this turn's output, and its wait parks
            // when nothing else is due. Left for the next turn instead,
            // every batch took two turns (a second, zero-timeout wait) and
            // two link writes (docs/PERFORMANCE.md "One flush per batch").
            // The lease is read again first: a loopback record this drain
            // admits comes after the turn's first check (§5, X21).
            state.fence_if_lapsed();
            backlog |= state.run_actor_work();
        }
        // An Actor turn that drain ran may have suspended: its future
        // starts now, as a ready task the wait then does not park over.
        shard.start_actor_awaits();
        {
            // Last, on what the turn settled: a drain whose last session
            // ended in that drain is done now, not after the next wait, and
            // the counters are the turn's own.
            let mut state = shard.state.borrow_mut();
            state.advance_drain();
            let owner = state.core.actor_owner();
            let (actors, spots) = (owner.actor_count(), owner.spot_count());
            state.tasks = executor.live();
            if let Some(stall) = stalls.turn_ended() {
                state.stalled(&mut stalls, &stall);
            }
            counters.publish(state.core.counters(), actors, spots);
        }
    }
    shard.state.borrow().leave_rows();
    // Tasks hold the shard's handle: drop them (started or not) so the
    // shard's sockets close with it. So may a turn waiting in a lane's
    // mailbox for its task (its callback holds a `Session`): the lanes go
    // too, outside the state's borrow, as their callbacks' drops may use
    // the shard.
    drop(executor);
    shard.spawner.clear();
    let lanes = std::mem::take(&mut shard.state.borrow_mut().lanes);
    drop(lanes);
}
