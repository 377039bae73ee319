//! The session owner (§2, §4–§7, §10): every physical session of one shard,
//! each judged by its own [`SessionBindingAggregate`], plus the requests they
//! have in flight.
//!
//! Rules this module keeps:
//! - A bind sends one 38 at the ActorRef's location; its terminal commits the
//!   binding at one linearization point (§5). The Location Store is never read.
//! - Relay sends 24 over the stored route with the binding generation and the
//!   session sequence; the reply completes the client's correlation exactly
//!   once, or the deadline does, and a late reply is dropped and counted (§12).
//! - A push (36) is judged here, on the session's own shard, against the four
//!   generation values only (§5).
//! - 51 retires one binding, closes the session to new dispatch, runs the
//!   duplicate-connection callback and closes the connection 100 ms after its
//!   terminal, or at SessionReplacementCallbackTimeout (§6).
//! - Disconnect notifies every current binding once, all-settled, then sends
//!   the tombstone (§7).
//! - A relocation seal (42) holds one binding's messages until 44 or
//!   SessionRelocationSealTimeout (§8.1, `seal.rs`).

mod aggregate;
mod lanes;
mod seal;

pub use aggregate::SessionBindingAggregate;
pub use lanes::{ClientPacket, SessionTurn, SessionWork, TurnId};

use std::collections::hash_map::Entry;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use self::aggregate::{
    Binding, BindingState, Lifecycle, PushVerdict, Replacement, ReplacementPhase,
};
use self::seal::{Accepted, AcceptedRequest, HeldDisconnect, Seal};
use super::effects::{CoreTimer, Effects};
use super::latency::PushOrigin;
use super::time::Instant;
use super::timer::TimerKey;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, BindingGeneration, Correlation,
    NodeGeneration, NodeRid, ObjectGeneration, OwnerLeaseGeneration, PacketKey, Peer, RelocationId,
    RequestId, SessionOwnerId, SessionRef, SessionRid,
};
use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::node::{
    ActorMessage, ActorReply, ActorSend, ActorSendBody, BindRequest, BindTerminal, BindTombstone,
    BoundSessionBind, BoundSessionBody, BoundSessionReplaced, BoundSessionSend, BoundSessionTail,
    NodeRecord, RequestHeader, TombstoneCause,
};

/// §6: the previous connection closes this long after its callback terminal.
/// Fixed by the spec, not a setting.
pub const REPLACEMENT_CLOSE_DELAY: Duration = Duration::from_millis(100);

/// Settings of the session owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOwnerConfig {
    /// §6 SessionReplacementCallbackTimeout: force-close a replaced session
    /// whose callback reaches no terminal. Default 30,000 ms.
    pub replacement_callback_timeout: Duration,
    /// Deadline of a bind request (38) before it ends with DeadlineExceeded.
    pub bind_timeout: Duration,
    /// §7 lifecycle deadline: how long a disconnect notification waits for its
    /// Spot callback before cleanup proceeds.
    pub disconnect_deadline: Duration,
    /// §8.1 SessionRelocationSealTimeout: how long a seal waits for its 44
    /// before the physical session closes. Default 3,000 ms.
    pub relocation_seal_timeout: Duration,
    /// How long a client frame that has begun may take to arrive whole
    /// before the session closes with `ProtocolError` (a slow writer holds a
    /// connection for free otherwise; docs/threading.md "Timeouts on the
    /// edges"). Default 10,000 ms.
    pub client_frame_deadline: Duration,
    /// How many callback turns one session's lane may queue (§10); a packet
    /// beyond it is refused `QueueFull`. Default 1,024.
    pub session_queue_max: usize,
    /// Whether the node has a connect callback (§1 step 1): a session's
    /// first packet is then its hello, for that callback.
    pub connect_callback: bool,
}

impl Default for SessionOwnerConfig {
    fn default() -> Self {
        Self {
            replacement_callback_timeout: Duration::from_millis(30_000),
            bind_timeout: Duration::from_millis(5_000),
            disconnect_deadline: Duration::from_millis(5_000),
            relocation_seal_timeout: Duration::from_millis(3_000),
            client_frame_deadline: Duration::from_millis(10_000),
            session_queue_max: 1_024,
            connect_callback: false,
        }
    }
}

/// Who this session owner is: the values every binding identity it issues
/// carries (§4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOwnerIdentity {
    /// The node.
    pub node: NodeRid,
    /// The node's lifecycle generation.
    pub lifecycle: NodeGeneration,
    /// This owner (shard) within the node.
    pub owner_id: SessionOwnerId,
    /// The node's owner lease generation.
    pub lease: OwnerLeaseGeneration,
}

/// Names one asynchronous operation (a bind, a notify, a callback) so that
/// its completion event can be matched to the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// What a bind call started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindStart {
    /// §6, §13: the session already holds this binding: idempotent success,
    /// no record is sent.
    Existing(ActorRef),
    /// A 38 is in flight; [`SessionEvent::BindCompleted`] ends it.
    Pending(Ticket),
}

/// A timer of the session owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionTimer {
    /// A request's deadline.
    RequestDeadline(RequestId),
    /// §6 SessionReplacementCallbackTimeout for a replaced session.
    ReplacementCallbackTimeout {
        /// The replaced session.
        session: SessionRid,
        /// The callback it waits for.
        callback: Ticket,
    },
    /// §6: the 100 ms close, with the values it revalidates when it fires.
    ReplacementClose {
        /// The owner lifecycle captured when it was scheduled.
        lifecycle: NodeGeneration,
        /// The session.
        session: SessionRid,
        /// The retired binding generation.
        retired: BindingGeneration,
    },
    /// A client frame begun on the session did not arrive whole in time.
    FrameDeadline(SessionRid),
    /// §10: the drain deadline; the sessions still open close now.
    DrainDeadline,
    /// §7: the lifecycle deadline of a session turn that runs after its
    /// session ended.
    LifecycleDeadline {
        /// The session.
        session: SessionRid,
        /// The turn it was armed for.
        turn: TurnId,
    },
    /// §8.1 SessionRelocationSealTimeout: 44 did not come in time.
    SealTimeout {
        /// The session holding the sealed binding.
        session: SessionRid,
        /// The sealed binding's Actor.
        actor: ActorId,
        /// The relocation whose seal it is, revalidated when it fires.
        relocation: RelocationId,
    },
}

/// What the session owner asks of the shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// Write a frame to the client (reply, error, push).
    Frame {
        /// The session.
        session: SessionRid,
        /// The frame.
        frame: ClientFrame,
    },
    /// Close the physical connection after the frames before this event.
    Close {
        /// The session.
        session: SessionRid,
        /// Why.
        reason: CloseReason,
    },
    /// A bind reached its terminal.
    BindCompleted {
        /// The session.
        session: SessionRid,
        /// The bind call.
        ticket: Ticket,
        /// The binding, or why not.
        outcome: Result<ActorRef, Error>,
    },
    /// A NotifyDisconnected reached its terminal (§7).
    NotifyCompleted {
        /// The session.
        session: SessionRid,
        /// The notify call.
        ticket: Ticket,
        /// `Err` when the Spot callback failed or timed out; the binding is
        /// removed either way.
        outcome: Result<(), Error>,
    },
    /// Run a session callback (lanes.rs): the lane stays in this turn until
    /// [`Sessions::turn_done`] reports its end, or its lifecycle deadline.
    Turn(SessionTurn),
    /// §7: a session turn outlived its lifecycle deadline: it is over (the
    /// lane has moved on); drop its callback.
    TurnExpired {
        /// The session.
        session: SessionRid,
        /// The turn.
        turn: TurnId,
    },
    /// Every binding of a closed session is cleaned up; nothing of it is left.
    SessionEnded {
        /// The session.
        session: SessionRid,
    },
}

/// A request in flight.
#[derive(Debug)]
struct Pending {
    session: SessionRid,
    /// The node the request went to: only its answer ends the request.
    peer: NodeRid,
    deadline: TimerKey,
    kind: PendingKind,
    /// When it was accepted (the relay latency's start).
    started: Instant,
}

#[derive(Debug)]
enum PendingKind {
    Bind {
        /// Boxed: a bind is rare beside relays, and the 104 bytes of its
        /// route would make every pending relay's entry as large.
        actor: Box<ActorRef>,
        generation: BindingGeneration,
        ticket: Ticket,
    },
    /// A relayed request; its Actor is named in the client's error, should
    /// one end it (issue 21 item 4: an error says what it is about).
    Relay {
        actor: ActorId,
        correlation: Correlation,
    },
    /// §8.1: a request held on a sealed binding, not sent yet; its deadline
    /// runs from acceptance.
    Held {
        actor: ActorId,
        correlation: Correlation,
    },
    Disconnect {
        actor: ActorId,
        generation: BindingGeneration,
        cause: TombstoneCause,
        ticket: Option<Ticket>,
    },
}

/// What a 24 takes from its binding (§5): the node it goes to, the bound
/// incarnation and the generations it is admitted on.
#[derive(Clone, Copy)]
struct SendRoute {
    to: NodeRid,
    object_generation: ObjectGeneration,
    authority: AuthorityOwnerGeneration,
    lease: OwnerLeaseGeneration,
    binding: BindingGeneration,
}

impl SendRoute {
    fn of(binding: &Binding) -> Self {
        Self {
            to: binding.location.owner,
            object_generation: binding.object_generation,
            authority: binding.location.authority,
            lease: binding.location.lease,
            binding: binding.generation,
        }
    }
}

/// The state of every session of one shard.
#[derive(Debug)]
pub struct SessionOwner {
    identity: SessionOwnerIdentity,
    config: SessionOwnerConfig,
    sessions: HashMap<SessionRid, SessionBindingAggregate>,
    pending: HashMap<RequestId, Pending>,
    next_session: SessionRid,
    next_binding: BindingGeneration,
    next_request: RequestId,
    next_ticket: u64,
    /// §10: the host is relocating or shutting down its sessions.
    draining: bool,
    /// The client frame deadline of each session with a frame begun and not
    /// yet whole.
    partial_frames: HashMap<SessionRid, TimerKey>,
    /// The lane of each session's callbacks (lanes.rs).
    lanes: lanes::SessionLanes,
}

impl SessionOwner {
    /// The settings it runs with.
    pub(crate) fn config(&self) -> &SessionOwnerConfig {
        &self.config
    }

    pub(crate) fn new(identity: SessionOwnerIdentity, config: SessionOwnerConfig) -> Self {
        Self {
            identity,
            config,
            sessions: HashMap::new(),
            pending: HashMap::new(),
            next_session: SessionRid(0),
            next_binding: BindingGeneration(0),
            next_request: RequestId::origin(identity.owner_id),
            next_ticket: 0,
            draining: false,
            partial_frames: HashMap::new(),
            lanes: lanes::SessionLanes::new(),
        }
    }

    /// This owner's identity.
    #[cfg(feature = "testing")]
    pub fn identity(&self) -> SessionOwnerIdentity {
        self.identity
    }

    /// How many sessions exist (open, replacing or still cleaning up).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Whether a session callback turn may be ready to hand out
    /// ([`crate::core::ShardCore::has_output`]).
    pub(crate) fn may_have_turn(&self) -> bool {
        self.lanes.may_have_turn()
    }

    /// How many sessions have at least one binding the application sees
    /// (§13 `Bound` not empty), and how many such bindings there are in
    /// all. O(sessions + bindings): for a metrics scrape, not a hot path.
    pub fn bound_counts(&self) -> (usize, usize) {
        self.sessions
            .values()
            .fold((0, 0), |(sessions, bindings), s| {
                let bound = s.bindings.values().filter(|b| b.is_bound()).count();
                (sessions + usize::from(bound > 0), bindings + bound)
            })
    }

    /// How many client messages are held under relocation seals now, over
    /// every session (§8.1: released at the 44, dropped at a seal timeout).
    pub fn held_count(&self) -> usize {
        self.sessions
            .values()
            .flat_map(|s| s.bindings.values())
            .filter_map(|b| b.seal())
            .map(|seal| seal.held.len())
            .sum()
    }

    /// How many session lanes exist: a session's lane lives until its
    /// disconnect callback's turn is over (§7, §10).
    pub fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// How many requests are in flight.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The session's address as records carry it.
    pub fn session_ref(&self, session: SessionRid) -> SessionRef {
        SessionRef {
            owner: self.identity.node,
            lifecycle: self.identity.lifecycle,
            owner_id: self.identity.owner_id,
            session,
        }
    }

    /// Whether the session exists and is open (not replacing, not closed).
    #[cfg(feature = "testing")]
    pub fn is_open(&self, session: SessionRid) -> bool {
        self.sessions
            .get(&session)
            .is_some_and(SessionBindingAggregate::is_open)
    }

    /// §13 `Bound`: every current binding of the session.
    pub fn bound(&self, session: SessionRid) -> Vec<ActorRef> {
        self.sessions
            .get(&session)
            .map(SessionBindingAggregate::bound)
            .unwrap_or_default()
    }

    /// §13 `Find`: this session's current binding for `actor`, never the
    /// global directory.
    pub fn find(&self, session: SessionRid, actor: &ActorId) -> Option<ActorRef> {
        let aggregate = self.sessions.get(&session)?;
        aggregate
            .current(actor)
            .map(|b| SessionBindingAggregate::view(actor, b))
    }

    /// The binding identity (§4) of the session's binding of `actor` while
    /// the aggregate holds it — current, sealed, or being removed after a
    /// NotifyDisconnected until its tombstone (§7): what a 24 sent now
    /// carries and what a 36 is judged against (§5). For the simulator's
    /// invariants.
    #[cfg(feature = "testing")]
    pub fn binding_identity(
        &self,
        session: SessionRid,
        actor: &ActorId,
    ) -> Option<crate::ids::BindingIdentity> {
        let binding = self.sessions.get(&session)?.bindings.get(actor)?;
        Some(crate::ids::BindingIdentity {
            owner: self.identity.node,
            lifecycle: self.identity.lifecycle,
            generation: binding.generation,
        })
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        Ticket(self.next_ticket)
    }

    fn request_id(&mut self) -> RequestId {
        self.next_request = self.next_request.next();
        self.next_request
    }

    /// The seal of a session's binding, when that binding is sealed.
    fn seal_mut(&mut self, session: SessionRid, actor: &ActorId) -> Option<&mut Seal> {
        self.sessions
            .get_mut(&session)?
            .bindings
            .get_mut(actor)?
            .seal_mut()
    }
}

/// The session owner with the shard's effects: every command and input.
pub struct Sessions<'a> {
    pub(crate) owner: &'a mut SessionOwner,
    pub(crate) fx: &'a mut Effects,
}

impl Sessions<'_> {
    /// A client connected: a new physical session with a never-reused RID.
    pub fn open_session(&mut self) -> SessionRid {
        let rid = self.owner.next_session.next();
        self.owner.next_session = rid;
        self.owner
            .sessions
            .insert(rid, SessionBindingAggregate::new());
        let config = &self.owner.config;
        let (capacity, hello) = (config.session_queue_max, config.connect_callback);
        self.owner.lanes.open(rid, capacity, hello);
        rid
    }

    /// Binds `actor` to the session (§5, §13 Bind and BindOrGet): one 38 at the
    /// ActorRef's location. Binding the current binding again is an
    /// idempotent success with no record (§6).
    pub fn bind(&mut self, session: SessionRid, actor: ActorRef) -> Result<BindStart, Error> {
        if self.owner.draining {
            return Err(Reason::ShuttingDown.into());
        }
        let aggregate = self.aggregate_open(session)?;
        if let Some(binding) = aggregate.current(&actor.id) {
            if binding.object_generation == actor.generation {
                return Ok(BindStart::Existing(SessionBindingAggregate::view(
                    &actor.id, binding,
                )));
            }
        }
        if aggregate.binds_in_flight.contains_key(&actor.id) {
            return Err(Reason::BindInProgress.into());
        }
        let generation = self.owner.next_binding.next();
        self.owner.next_binding = generation;
        let request = self.owner.request_id();
        let ticket = self.owner.ticket();
        let record = BindRequest {
            request: RequestHeader {
                id: request,
                budget: self.owner.config.bind_timeout,
            },
            actor: actor.id.clone(),
            object_generation: actor.generation,
            target_node_generation: actor.location.node_generation,
            authority: actor.location.authority,
            lease: actor.location.lease,
            session: self.owner.session_ref(session),
            session_lease: self.owner.identity.lease,
            binding: generation,
        };
        let peer = actor.location.owner;
        self.fx.send(
            peer,
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(record)),
        );
        if let Some(aggregate) = self.owner.sessions.get_mut(&session) {
            aggregate.binds_in_flight.insert(actor.id.clone(), request);
        }
        let kind = PendingKind::Bind {
            actor: Box::new(actor),
            generation,
            ticket,
        };
        let timeout = self.owner.config.bind_timeout;
        self.track(request, session, peer, timeout, kind);
        Ok(BindStart::Pending(ticket))
    }

    /// Relays a client payload to a bound Actor as 24 (§5), over the route
    /// stored at bind time. With a correlation it is a request whose reply or
    /// typed error completes that correlation exactly once (§12). On a sealed
    /// binding the message is held by the aggregate until the seal's outcome
    /// (§8.1); a held request still ends at its own deadline.
    pub fn relay(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        key: PacketKey,
        payload: Bytes,
        request: Option<(Correlation, Duration)>,
    ) -> Result<(), Error> {
        let aggregate = self.aggregate_open(session)?;
        let Some(binding) = aggregate.current(actor) else {
            return Err(Reason::SessionNotBound.into());
        };
        let sealed = matches!(binding.state, BindingState::Sealed(_));
        let route = SendRoute::of(binding);
        let peer = route.to;
        let sequence = aggregate.next_sequence();
        let now = self.fx.now();
        let request = request.map(|(correlation, budget)| {
            let id = self.owner.request_id();
            let kind = if sealed {
                PendingKind::Held {
                    actor: actor.clone(),
                    correlation,
                }
            } else {
                PendingKind::Relay {
                    actor: actor.clone(),
                    correlation,
                }
            };
            self.track(id, session, peer, budget, kind);
            AcceptedRequest {
                id,
                correlation,
                deadline: now + budget,
            }
        });
        let message = Accepted {
            sequence,
            key,
            payload,
            request,
        };
        if sealed {
            self.hold(session, actor, message);
        } else {
            // The route just read, and the request tracked with its node:
            // no second lookup of either.
            self.send_accepted(session, actor, route, message);
        }
        Ok(())
    }

    /// Sends one accepted message as 24 over `route`, with the binding
    /// generation and its session sequence (§5). A request's budget is what
    /// is left of its deadline.
    fn send_accepted(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        route: SendRoute,
        message: Accepted,
    ) {
        let now = self.fx.now();
        let record = ActorMessage {
            request: message.request.map(|r| RequestHeader {
                id: r.id,
                budget: r.deadline - now,
            }),
            actor: actor.clone(),
            object_generation: route.object_generation,
            authority: route.authority,
            lease: route.lease,
            tail: BoundSessionTail {
                session: self.owner.session_ref(session),
                binding: route.binding,
                sequence: message.sequence,
            },
            body: ActorSendBody::Payload {
                key: message.key,
                correlation: message.request.map(|r| r.correlation),
                payload: message.payload,
            },
        };
        self.fx
            .send(route.to, NodeRecord::ActorSend(ActorSend::Message(record)));
    }

    /// §7 NotifyDisconnected: the logical disconnect notification to one
    /// bound Actor while the connection is kept. The binding is removed once
    /// the Spot callback reaches a terminal ([`SessionEvent::NotifyCompleted`]).
    pub fn notify_disconnected(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
    ) -> Result<Ticket, Error> {
        let aggregate = self.aggregate_open(session)?;
        let Some(binding) = aggregate.current(actor) else {
            return Err(Reason::SessionNotBound.into());
        };
        let sealed = matches!(binding.state, BindingState::Sealed(_));
        let ticket = self.owner.ticket();
        if sealed {
            let held = HeldDisconnect {
                cause: TombstoneCause::Notified,
                ticket: Some(ticket),
            };
            self.hold_disconnect(session, actor, held);
        } else {
            self.send_disconnect_notice(session, actor, TombstoneCause::Notified, Some(ticket));
        }
        Ok(ticket)
    }

    /// The client's connection ended (§7): notify every current binding.
    pub fn connection_lost(&mut self, session: SessionRid) {
        self.close(session, None);
    }

    /// The application closes the session.
    pub fn close_session(&mut self, session: SessionRid) {
        self.close(session, Some(CloseReason::Application));
    }

    /// §10 host Relocate/Shutdown: from now on new bindings are refused;
    /// accepted work (relays, replies, callbacks, cleanup) goes on. At
    /// `deadline` every session still open closes ([`Self::close_all`]).
    pub fn drain(&mut self, deadline: Instant) {
        if self.owner.draining {
            return;
        }
        self.owner.draining = true;
        self.fx
            .arm_at(deadline, CoreTimer::Session(SessionTimer::DrainDeadline));
    }

    /// The client's connection holds the start of a frame that is not yet
    /// whole: unless it is whole within the client frame deadline
    /// (counted from the first such read), the session closes with
    /// `ProtocolError` (docs/threading.md "Timeouts on the edges").
    pub fn frame_begun(&mut self, session: SessionRid) {
        if self.owner.partial_frames.contains_key(&session)
            || !self
                .owner
                .sessions
                .get(&session)
                .is_some_and(|a| !a.is_closed())
        {
            return;
        }
        let after = self.owner.config.client_frame_deadline;
        let key = self.fx.arm(
            after,
            CoreTimer::Session(SessionTimer::FrameDeadline(session)),
        );
        self.owner.partial_frames.insert(session, key);
    }

    /// Every frame the connection began has arrived whole.
    pub fn frame_whole(&mut self, session: SessionRid) {
        // Most reads end on a frame boundary: no lookup (with its hash) for
        // a map that holds nothing.
        if self.owner.partial_frames.is_empty() {
            return;
        }
        if let Some(key) = self.owner.partial_frames.remove(&session) {
            self.fx.cancel(key);
        }
    }

    /// §10: at the drain deadline, closes every session (with `Shutdown`),
    /// each through the ordinary disconnect procedure.
    pub fn close_all(&mut self) {
        for session in super::sorted_keys(&self.owner.sessions, |_| true) {
            self.close(session, Some(CloseReason::Shutdown));
        }
    }

    /// §6: the duplicate-connection callback reached a terminal (`ok` or
    /// failed). The close follows 100 ms later, never sooner.
    pub fn replacement_callback_done(&mut self, session: SessionRid, callback: Ticket, ok: bool) {
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        let Lifecycle::Replacing(replacement) = &mut aggregate.lifecycle else {
            return;
        };
        let ReplacementPhase::CallbackRunning { timeout } = replacement.phase else {
            return;
        };
        if replacement.callback != callback {
            return;
        }
        replacement.phase = ReplacementPhase::CloseScheduled;
        let retired = replacement.retired;
        self.fx.cancel(timeout);
        if !ok {
            self.fx.trace(FlowTrace::ReplacementCallbackFailed);
        }
        let timer = SessionTimer::ReplacementClose {
            lifecycle: self.owner.identity.lifecycle,
            session,
            retired,
        };
        self.fx
            .arm(REPLACEMENT_CLOSE_DELAY, CoreTimer::Session(timer));
    }

    pub(crate) fn handle_record(&mut self, from: Peer, record: NodeRecord) {
        match record {
            NodeRecord::ActorSend(ActorSend::Reply(reply)) => self.on_reply(from, reply),
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal)) => {
                self.on_bind_terminal(from, terminal)
            }
            NodeRecord::BoundSessionSend(send) => self.on_bound_send(from, send),
            NodeRecord::BoundSessionReplaced(replaced) => self.on_replaced(from, replaced),
            NodeRecord::SessionRelocationSeal(seal) => self.on_seal(from, seal),
            NodeRecord::SessionRelocationRoute(route) => self.on_route(route),
            other => {
                debug_assert!(false, "record not for the session owner: {other:?}");
                self.fx.trace(FlowTrace::UnhandledRecord);
            }
        }
    }

    pub(crate) fn handle_timer(&mut self, timer: SessionTimer) {
        match timer {
            SessionTimer::RequestDeadline(request) => self.on_deadline(request),
            SessionTimer::ReplacementCallbackTimeout { session, callback } => {
                let running = self.owner.sessions.get(&session).is_some_and(|a| {
                    matches!(&a.lifecycle, Lifecycle::Replacing(r)
                        if r.callback == callback
                            && matches!(r.phase, ReplacementPhase::CallbackRunning { .. }))
                });
                if running {
                    self.fx.trace(FlowTrace::ReplacementCallbackTimeout);
                    self.close(session, Some(CloseReason::Replaced));
                }
            }
            SessionTimer::ReplacementClose {
                lifecycle,
                session,
                retired,
            } => {
                // §6: revalidate what was captured when the timer was armed.
                let still_target = lifecycle == self.owner.identity.lifecycle
                    && self.owner.sessions.get(&session).is_some_and(
                        |a| matches!(&a.lifecycle, Lifecycle::Replacing(r) if r.retired == retired),
                    );
                if still_target {
                    self.close(session, Some(CloseReason::Replaced));
                } else {
                    self.fx.trace(FlowTrace::ReplacementCloseSuperseded);
                }
            }
            SessionTimer::SealTimeout {
                session,
                actor,
                relocation,
            } => self.on_seal_timeout(session, &actor, relocation),
            SessionTimer::FrameDeadline(session) => {
                if self.owner.partial_frames.remove(&session).is_some() {
                    self.fx.trace(FlowTrace::ClientFrameTimeout);
                    self.close(session, Some(CloseReason::ProtocolError));
                }
            }
            SessionTimer::DrainDeadline => self.close_all(),
            SessionTimer::LifecycleDeadline { session, turn } => {
                self.on_lifecycle_deadline(session, turn)
            }
        }
    }

    fn aggregate_open(
        &mut self,
        session: SessionRid,
    ) -> Result<&mut SessionBindingAggregate, Error> {
        match self.owner.sessions.get_mut(&session) {
            Some(aggregate) if aggregate.is_open() => Ok(aggregate),
            _ => Err(Reason::SessionClosing.into()),
        }
    }

    fn track(
        &mut self,
        request: RequestId,
        session: SessionRid,
        peer: NodeRid,
        budget: Duration,
        kind: PendingKind,
    ) {
        let deadline = self.fx.arm(
            budget,
            CoreTimer::Session(SessionTimer::RequestDeadline(request)),
        );
        let pending = Pending {
            session,
            peer,
            deadline,
            kind,
            started: self.fx.now(),
        };
        let previous = self.owner.pending.insert(request, pending);
        debug_assert!(previous.is_none(), "request id reused: {request:?}");
    }

    fn send_disconnect_notice(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        cause: TombstoneCause,
        ticket: Option<Ticket>,
    ) {
        let session_ref = self.owner.session_ref(session);
        let request = self.owner.request_id();
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        let sequence = aggregate.next_sequence();
        let Some(binding) = aggregate.bindings.get_mut(actor) else {
            return;
        };
        debug_assert!(matches!(binding.state, BindingState::Current));
        binding.state = BindingState::Notifying;
        let generation = binding.generation;
        let location = binding.location.clone();
        let message = ActorMessage {
            request: Some(RequestHeader {
                id: request,
                budget: self.owner.config.disconnect_deadline,
            }),
            actor: actor.clone(),
            object_generation: binding.object_generation,
            authority: location.authority,
            lease: location.lease,
            tail: BoundSessionTail {
                session: session_ref,
                binding: generation,
                sequence,
            },
            body: ActorSendBody::DisconnectNotice,
        };
        self.fx.send(
            location.owner,
            NodeRecord::ActorSend(ActorSend::Message(message)),
        );
        let kind = PendingKind::Disconnect {
            actor: actor.clone(),
            generation,
            cause,
            ticket,
        };
        let deadline = self.owner.config.disconnect_deadline;
        self.track(request, session, location.owner, deadline, kind);
    }

    /// Closes the session (`reason` is `None` when the client went away) and
    /// starts the ordinary disconnect procedure for every current binding (§6,
    /// §7). Requests in flight end here: their late replies are dropped.
    fn close(&mut self, session: SessionRid, reason: Option<CloseReason>) {
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        if aggregate.is_closed() {
            return;
        }
        if let Some(key) = self.owner.partial_frames.remove(&session) {
            self.fx.cancel(key);
        }
        if let Lifecycle::Replacing(Replacement {
            phase: ReplacementPhase::CallbackRunning { timeout },
            ..
        }) = aggregate.lifecycle
        {
            self.fx.cancel(timeout);
        }
        aggregate.lifecycle = Lifecycle::Closed;
        if let Some(reason) = reason {
            self.fx
                .session_event(SessionEvent::Close { session, reason });
        }
        let mut current: Vec<ActorId> = aggregate
            .bindings
            .iter()
            .filter(|(_, b)| matches!(b.state, BindingState::Current))
            .map(|(id, _)| id.clone())
            .collect();
        // The tables are hash maps: sort what is emitted from them, so that
        // the same inputs give the same outputs in the same order (DESIGN:
        // the core is deterministic; the simulator replays a seed exactly).
        current.sort_unstable();
        // §7 while sealed: the notice waits for the seal's outcome and goes
        // over the route it resolves to; a NotifyDisconnected already held is
        // that notice (at most once).
        for seal in aggregate
            .bindings
            .values_mut()
            .filter_map(Binding::seal_mut)
        {
            seal.disconnect.get_or_insert(HeldDisconnect {
                cause: TombstoneCause::Disconnect,
                ticket: None,
            });
        }
        let in_flight = super::sorted_keys(&self.owner.pending, |p| {
            p.session == session && !matches!(p.kind, PendingKind::Disconnect { .. })
        });
        for request in in_flight {
            self.abandon(request);
        }
        for actor in current {
            self.send_disconnect_notice(session, &actor, TombstoneCause::Disconnect, None);
        }
        self.end_lane(session);
        self.end_if_settled(session);
    }

    /// Ends a request of a closing session: a bind that may have been admitted
    /// is tombstoned (FIFO on the link puts the tombstone after the request);
    /// a relay's late reply will be dropped (§12).
    fn abandon(&mut self, request: RequestId) {
        let Some(pending) = self.owner.pending.remove(&request) else {
            return;
        };
        self.fx.cancel(pending.deadline);
        match pending.kind {
            PendingKind::Bind {
                actor,
                generation,
                ticket,
            } => {
                self.tombstone_unadmitted(pending.session, &actor, generation);
                self.fx.session_event(SessionEvent::BindCompleted {
                    session: pending.session,
                    ticket,
                    outcome: Err(Reason::SessionClosing.into()),
                });
            }
            // §8.1: it ended while held, so it is never sent.
            PendingKind::Held { actor, .. } => self.unhold(pending.session, &actor, request),
            PendingKind::Relay { .. } | PendingKind::Disconnect { .. } => {}
        }
    }

    /// Removes a held request that ended from its seal's held list.
    fn unhold(&mut self, session: SessionRid, actor: &ActorId, request: RequestId) {
        let removed = self
            .owner
            .seal_mut(session, actor)
            .is_some_and(|seal| seal.unhold(request));
        debug_assert!(removed, "a held request is in its seal's held list");
    }

    fn tombstone_unadmitted(
        &mut self,
        session: SessionRid,
        actor: &ActorRef,
        generation: BindingGeneration,
    ) {
        if let Some(aggregate) = self.owner.sessions.get_mut(&session) {
            aggregate.binds_in_flight.remove(&actor.id);
        }
        let tombstone = BindTombstone {
            actor: actor.id.clone(),
            object_generation: actor.generation,
            session: self.owner.session_ref(session),
            binding: generation,
            cause: TombstoneCause::Disconnect,
        };
        self.fx.send(
            actor.location.owner,
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)),
        );
    }

    fn end_if_settled(&mut self, session: SessionRid) {
        let settled = self
            .owner
            .sessions
            .get(&session)
            .is_some_and(|a| a.is_closed() && a.bindings.is_empty());
        if settled {
            self.owner.sessions.remove(&session);
            self.fx
                .session_event(SessionEvent::SessionEnded { session });
        }
    }

    fn on_deadline(&mut self, request: RequestId) {
        let Some(pending) = self.owner.pending.remove(&request) else {
            return;
        };
        self.fx.trace(FlowTrace::RequestDeadlineExceeded);
        if matches!(pending.kind, PendingKind::Disconnect { .. }) {
            self.fx.trace(FlowTrace::DisconnectCallbackTimeout);
        }
        self.end_unanswered(request, pending, Reason::Deadline.into());
    }

    /// The transport could not send `request` to `to` (no link): it ends now
    /// with `Unavailable` rather than at its deadline. Never resent (§12).
    pub(crate) fn unreachable(&mut self, to: NodeRid, request: RequestId) {
        let ours = self
            .owner
            .pending
            .get(&request)
            .is_some_and(|p| p.peer == to && !matches!(p.kind, PendingKind::Held { .. }));
        let Some(pending) = ours.then(|| self.owner.pending.remove(&request)).flatten() else {
            return;
        };
        self.fx.cancel(pending.deadline);
        self.end_unanswered(request, pending, Reason::PeerUnreachable.into());
    }

    /// The link to `peer` went down (§12): each relayed request this owner
    /// sent it and still awaits ends now with `OutcomeUnknown` — the Actor
    /// may or may not have run it, and it is never sent again — rather than
    /// at its deadline. A reply that still comes, over a link up again, is
    /// late and dropped. A bind and a disconnect notice keep their deadlines:
    /// the tombstone a bind ends with needs a link, and one that is back by
    /// then reaches the owner (docs/threading.md "Node links").
    pub(crate) fn peer_down(&mut self, peer: NodeRid) {
        let lost = super::sorted_keys(&self.owner.pending, |p| {
            p.peer == peer && matches!(p.kind, PendingKind::Relay { .. })
        });
        for request in lost {
            if let Some(pending) = self.owner.pending.remove(&request) {
                self.fx.cancel(pending.deadline);
                self.fx.trace(FlowTrace::RequestLinkDown);
                self.end_unanswered(request, pending, Reason::OutcomeUnknown.into());
            }
        }
    }

    /// Ends a request that got no reply: a bind with its terminal (and a
    /// tombstone in case it was admitted), a relay with the client's typed
    /// error, a disconnect notice by settling the binding anyway (§7).
    fn end_unanswered(&mut self, request: RequestId, pending: Pending, error: Error) {
        match pending.kind {
            PendingKind::Bind {
                actor,
                generation,
                ticket,
            } => {
                self.tombstone_unadmitted(pending.session, &actor, generation);
                self.fx.session_event(SessionEvent::BindCompleted {
                    session: pending.session,
                    ticket,
                    outcome: Err(error),
                });
            }
            PendingKind::Relay { actor, correlation } => {
                let error = error.about_actor(&actor);
                self.fx.session_event(SessionEvent::Frame {
                    session: pending.session,
                    frame: ClientFrame::Error { correlation, error },
                });
            }
            PendingKind::Held { actor, correlation } => {
                // §8.1: a held request still ends at its own deadline, and
                // leaves the held list so that it is never sent later.
                self.unhold(pending.session, &actor, request);
                let error = error.about_actor(&actor);
                self.fx.session_event(SessionEvent::Frame {
                    session: pending.session,
                    frame: ClientFrame::Error { correlation, error },
                });
            }
            PendingKind::Disconnect {
                actor,
                generation,
                cause,
                ticket,
            } => {
                self.settle_disconnect(
                    pending.session,
                    &actor,
                    generation,
                    cause,
                    ticket,
                    Err(error),
                );
            }
        }
    }

    /// Takes the request a reply ends — only when the reply comes from the
    /// node the request went to and is of the request's kind (a 38 terminal
    /// for a bind, a 24 reply otherwise). Anything else leaves the request to
    /// its real reply or its deadline, and is counted.
    fn take_pending(
        &mut self,
        from: Peer,
        request: RequestId,
        bind_terminal: bool,
    ) -> Option<Pending> {
        // One lookup: the entry is judged, then taken where it lies.
        let Entry::Occupied(entry) = self.owner.pending.entry(request) else {
            self.fx.trace(FlowTrace::LateReplyDropped);
            return None;
        };
        let pending = entry.get();
        let is_bind = matches!(pending.kind, PendingKind::Bind { .. });
        // A held request was never sent: nothing can answer it yet.
        let is_held = matches!(pending.kind, PendingKind::Held { .. });
        if pending.peer != from.rid || is_bind != bind_terminal || is_held {
            self.fx.trace(FlowTrace::ReplyMismatch);
            return None;
        }
        let pending = entry.remove();
        self.fx.cancel(pending.deadline);
        Some(pending)
    }

    fn on_reply(&mut self, from: Peer, reply: ActorReply) {
        let Some(pending) = self.take_pending(from, reply.request, false) else {
            return;
        };
        match pending.kind {
            PendingKind::Relay { actor, correlation } => {
                self.fx.relay_replied(pending.started);
                let frame = match reply.outcome {
                    Ok(payload) => ClientFrame::Reply {
                        correlation,
                        payload,
                    },
                    Err(error) => ClientFrame::Error {
                        correlation,
                        error: error.about_actor(&actor),
                    },
                };
                self.fx.session_event(SessionEvent::Frame {
                    session: pending.session,
                    frame,
                });
            }
            PendingKind::Disconnect {
                actor,
                generation,
                cause,
                ticket,
            } => {
                let outcome = reply.outcome.map(|_| ());
                if outcome.is_err() {
                    self.fx.trace(FlowTrace::DisconnectCallbackFailed);
                }
                self.settle_disconnect(pending.session, &actor, generation, cause, ticket, outcome);
            }
            PendingKind::Bind { .. } => {
                unreachable!("take_pending returns a bind only for a 38 terminal")
            }
            PendingKind::Held { .. } => {
                debug_assert!(false, "take_pending never returns a held request");
            }
        }
    }

    /// §7: after the callback terminal (or its deadline) the binding is
    /// removed with a tombstone; a failure restores nothing and runs nothing
    /// again.
    fn settle_disconnect(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        generation: BindingGeneration,
        cause: TombstoneCause,
        ticket: Option<Ticket>,
        outcome: Result<(), Error>,
    ) {
        let session_ref = self.owner.session_ref(session);
        if let Some(aggregate) = self.owner.sessions.get_mut(&session) {
            let ours = aggregate
                .bindings
                .get(actor)
                .is_some_and(|b| b.generation == generation);
            if let Some(binding) = ours.then(|| aggregate.bindings.remove(actor)).flatten() {
                let tombstone = BindTombstone {
                    actor: actor.clone(),
                    object_generation: binding.object_generation,
                    session: session_ref,
                    binding: generation,
                    cause,
                };
                self.fx.send(
                    binding.location.owner,
                    NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)),
                );
            }
        }
        if let Some(ticket) = ticket {
            self.fx.session_event(SessionEvent::NotifyCompleted {
                session,
                ticket,
                outcome,
            });
        }
        self.end_if_settled(session);
    }

    fn on_bind_terminal(&mut self, from: Peer, terminal: BindTerminal) {
        let Some(pending) = self.take_pending(from, terminal.request, true) else {
            return;
        };
        let PendingKind::Bind {
            actor,
            generation,
            ticket,
        } = pending.kind
        else {
            unreachable!("take_pending returns only a bind for a 38 terminal")
        };
        let session = pending.session;
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        aggregate.binds_in_flight.remove(&actor.id);
        let mut replaced = None;
        let outcome = terminal.outcome.map(|route| {
            let location = ActorLocation {
                mesh: route.mesh,
                owner: route.owner,
                node_generation: route.node_generation,
                authority: route.authority,
                lease: route.lease,
            };
            let (view, previous) =
                aggregate.commit_binding(actor.id, generation, actor.generation, location);
            replaced = previous;
            view
        });
        self.fx.session_event(SessionEvent::BindCompleted {
            session,
            ticket,
            outcome,
        });
        if let Some(seal) = replaced.and_then(Binding::into_seal) {
            // The sealed binding was replaced by another incarnation's: what
            // it held is for a binding that no longer exists (§4, §8.1).
            self.discard(session, seal, Reason::StaleBinding.into());
        }
    }

    fn on_bound_send(&mut self, from: Peer, send: BoundSessionSend) {
        if !self.is_mine(&send.session) {
            self.fx.trace(FlowTrace::StaleLifecycleRecord);
            return;
        }
        let session = send.session.session;
        let verdict = match self.owner.sessions.get(&session) {
            Some(aggregate) if !aggregate.is_closed() => aggregate.judge_push(from, &send),
            _ => {
                self.fx.trace(FlowTrace::PushRejectedNoSession);
                return;
            }
        };
        match verdict {
            PushVerdict::Current => match send.body {
                BoundSessionBody::Push { key, payload } => {
                    // The frame is handed to the connection as this event
                    // is carried out, in this loop turn: the push's span
                    // ends here (core::latency).
                    let origin = if from.rid == self.owner.identity.node {
                        PushOrigin::Local
                    } else {
                        PushOrigin::Link
                    };
                    self.fx.push_handed(origin);
                    self.fx.session_event(SessionEvent::Frame {
                        session,
                        frame: ClientFrame::Push { key, payload },
                    });
                }
                BoundSessionBody::Close { reason } => self.close(session, Some(reason)),
            },
            PushVerdict::NoBinding | PushVerdict::NotCurrent => {
                self.fx.trace(FlowTrace::PushRejectedNotCurrent);
            }
        }
    }

    fn is_mine(&self, session: &SessionRef) -> bool {
        let me = &self.owner.identity;
        session.owner == me.node
            && session.lifecycle == me.lifecycle
            && session.owner_id == me.owner_id
    }

    /// §6: 51 runs the callback only when every previous session-owner value
    /// matches the current replacement target exactly; otherwise nothing runs.
    fn on_replaced(&mut self, from: Peer, replaced: BoundSessionReplaced) {
        // The sending node is the transport's authenticated peer, RID and
        // NodeGeneration both (§2): it must be the fence's Actor owner.
        let values_match = from.rid == replaced.fence.owner
            && from.generation == replaced.fence.node_generation
            && self.is_mine(&replaced.previous)
            && replaced.previous_lease == self.owner.identity.lease;
        if !values_match {
            self.fx.trace(FlowTrace::ReplacedNoticeMismatch);
            return;
        }
        let session = replaced.previous.session;
        let actor = replaced.fence.actor;
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            self.fx.trace(FlowTrace::ReplacedNoticeDuplicate);
            return;
        };
        let is_target = !aggregate.is_closed()
            && aggregate
                .bindings
                .get(&actor)
                .is_some_and(|b| b.generation == replaced.retired);
        if !is_target {
            self.fx.trace(FlowTrace::ReplacedNoticeDuplicate);
            return;
        }
        // Retire the binding: the Actor owner already refuses its ingress,
        // and the session's close must not notify or tombstone it (§6).
        let retired = aggregate.bindings.remove(&actor);
        let open = aggregate.is_open();
        self.fx.trace(FlowTrace::BindingRetired);
        if let Some(seal) = retired.and_then(Binding::into_seal) {
            // §8.1: held messages for a retired binding would be refused at
            // the Actor owner; they end here instead.
            self.discard(session, seal, Reason::StaleBinding.into());
        }
        if !open {
            // Already replacing: this binding is retired too, one callback.
            return;
        }
        let callback = self.owner.ticket();
        let timeout = self.fx.arm(
            self.owner.config.replacement_callback_timeout,
            CoreTimer::Session(SessionTimer::ReplacementCallbackTimeout { session, callback }),
        );
        if let Some(aggregate) = self.owner.sessions.get_mut(&session) {
            aggregate.lifecycle = Lifecycle::Replacing(Replacement {
                retired: replaced.retired,
                callback,
                phase: ReplacementPhase::CallbackRunning { timeout },
            });
        }
        self.queue_replacement_callback(session, callback, actor);
    }
}
