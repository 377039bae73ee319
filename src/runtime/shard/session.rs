//! The session side of a shard: each STREAM session's lane and the turns of
//! the application's session callbacks on it (§1 step 1, §6, §7, §10;
//! docs/threading.md "Session callbacks").
//!
//! Rules this module keeps:
//! - One lane per session, one turn at a time (§10, W1): the connect
//!   callback with the client's first packet, the packet handlers, the
//!   duplicate-Actor-connection callback and the disconnect callback all run
//!   as turns of that lane, so no two of them overlap, and none of them runs
//!   an Actor handler (those run on Actor lanes).
//! - The connect callback authenticates (§1 step 1): packets that arrive
//!   while it runs wait on the lane behind it; when it fails, the session
//!   closes with `AuthenticationFailed` and those packets reach no handler
//!   (a closing session runs no new application dispatch, §6).
//! - When the connection ends, for whatever reason, the lane is closed to
//!   packets and the disconnect turn is queued once, after the turn running
//!   then. The framework's own disconnect notifications and cleanup (§7) run
//!   in the core and never wait for any of these turns (§10).
//! - A turn that runs after its connection ended gets the §7 lifecycle
//!   deadline (`NodeSettings::disconnect_deadline`) from the later of the
//!   end and its start; one still running then is dropped, so a callback
//!   that never finishes cannot hold its lane (and its session's memory)
//!   forever. Every such deadline has the same length, so a FIFO queue is in
//!   deadline order and needs no timer wheel.
//! - The lane, and with it the session's attributes, lives until its
//!   disconnect turn has finished; then it is removed.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use super::{ShardHandle, ShardState};
use crate::core::lane::{LaneId, LaneRefusal, SessionClass, SessionState};
use crate::core::session::{SessionEvent, Ticket};
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, Correlation, PacketKey, SessionRid};
use crate::net::{CloseCause, ConnId};
use crate::runtime::app::session::{Attributes, Dispatch, Packet, Session};
use crate::runtime::executor::{completion, or_abort, Completer, Completion};
use crate::runtime::rate_limit::TokenBucket;
use crate::runtime::PacketHandler;
use crate::wire::client::{ClientFrame, CloseReason};

/// Work on a session's lane (§10): two turns of one connection never overlap.
pub(super) enum SessionWork {
    /// §1 step 1: the client's first packet, for the connect callback.
    Connect(Packet),
    /// A packet for its typed handler.
    Packet(Packet),
    /// §6: the duplicate-Actor-connection callback.
    Replaced { callback: Ticket, actor: ActorId },
    /// §7: the session's disconnect callback; always the lane's last turn.
    Disconnected,
}

/// Where a session's connection stands, as its lane sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConnectionPhase {
    /// Open, with a connect callback that has not had its packet yet.
    AwaitingHello,
    /// Open: packets go to their handlers.
    Open,
    /// Ended: the disconnect turn is queued on the lane.
    Ended,
    /// Ended while the lane was full: the disconnect turn is queued as soon
    /// as a finished turn leaves a place.
    EndedAtFullLane,
}

impl ConnectionPhase {
    fn ended(self) -> bool {
        match self {
            Self::AwaitingHello | Self::Open => false,
            Self::Ended | Self::EndedAtFullLane => true,
        }
    }
}

/// What a session lane belongs to; it outlives the session's entry in the
/// core, until its disconnect turn finished.
pub(super) struct LaneSession {
    rid: SessionRid,
    attributes: Attributes,
    phase: ConnectionPhase,
}

/// The running turn of a session lane.
pub(super) struct RunningTurn {
    id: u64,
    /// Held for its drop, which aborts the turn.
    _abort: Completer<()>,
}

/// §7 lifecycle deadlines of session turns that run after their connection
/// ended, in deadline order.
pub(super) struct LifecycleDeadlines {
    after: Duration,
    queue: VecDeque<(WallInstant, LaneId, u64)>,
    next_turn: u64,
}

impl LifecycleDeadlines {
    pub(super) fn new(after: Duration) -> Self {
        Self {
            after,
            queue: VecDeque::new(),
            next_turn: 0,
        }
    }

    /// The time left at `now` until the earliest deadline, if one is armed.
    pub(super) fn next_in(&self, now: WallInstant) -> Option<Duration> {
        let &(at, _, _) = self.queue.front()?;
        Some(at.saturating_duration_since(now))
    }

    /// Numbers every session turn, so that an expired deadline drops only
    /// the turn it was armed for.
    fn turn_id(&mut self) -> u64 {
        self.next_turn += 1;
        self.next_turn
    }

    fn arm(&mut self, lane: LaneId, turn: u64, now: WallInstant) {
        let at = now + self.after;
        debug_assert!(self.queue.back().map_or(true, |&(last, _, _)| last <= at));
        self.queue.push_back((at, lane, turn));
    }
}

impl ShardState {
    /// A client connection is ready for its session: a TCP connection at
    /// its accept, a WebSocket connection once upgraded.
    pub(super) fn accepted(&mut self, conn: ConnId) {
        if self.draining.is_some() {
            // §10: a draining host takes no new sessions.
            self.close_conn(conn, CloseReason::Shutdown);
            return;
        }
        if !self.node.admit_session() {
            self.core
                .trace(crate::core::trace::FlowTrace::SessionLimitRefused);
            self.close_conn(conn, CloseReason::SessionLimit);
            return;
        }
        let now = self.now();
        let rid = self.core.sessions(now).open_session();
        let lane = self
            .session_lanes
            .add_lane(self.node.settings.session_queue_max);
        self.sessions.insert(
            rid,
            super::SessionEntry {
                conn,
                lane,
                bucket: TokenBucket::new(self.wall, self.node.settings.session_burst),
            },
        );
        let phase = if self.node.handlers.on_connect.is_some() {
            ConnectionPhase::AwaitingHello
        } else {
            ConnectionPhase::Open
        };
        let session = LaneSession {
            rid,
            attributes: Attributes::default(),
            phase,
        };
        self.lane_sessions.insert(lane, session);
        self.conns.insert(conn, rid);
    }

    /// Tells the client why its connection ends (a Close frame, and on a
    /// WebSocket a close frame after it), then closes it once what is
    /// queued is sent.
    pub(super) fn close_conn(&mut self, conn: ConnId, reason: CloseReason) {
        let open = self.reactor.outbound(conn).is_some();
        self.write_frame(conn, &ClientFrame::Close { reason });
        self.ws_close(conn, reason);
        self.reactor.close(conn);
        // Until its last bytes are out, a drain is not done: a node that
        // stopped now would cut the Close frame off (found by the
        // TypeScript client's SIGTERM test). One already gone sends nothing.
        if open {
            self.flushing.insert(conn);
        }
    }

    /// The session's input ends with a frame `begun` and not yet whole (or
    /// with none): a begun frame must be whole within the client frame
    /// deadline, the core's (a slow writer is closed then).
    pub(super) fn frame_pending(&mut self, rid: SessionRid, begun: bool) {
        let now = self.now();
        let mut sessions = self.core.sessions(now);
        if begun {
            sessions.frame_begun(rid);
        } else {
            sessions.frame_whole(rid);
        }
    }

    pub(super) fn conn_closed(&mut self, conn: ConnId, cause: CloseCause) {
        self.flushing.remove(&conn);
        let Some(rid) = self.conns.remove(&conn) else {
            return;
        };
        tracing::debug!(?rid, ?cause, "session connection closed");
        self.connection_ended(rid);
        let now = self.now();
        self.core.sessions(now).connection_lost(rid);
    }

    /// The shard ends the connection itself (a protocol error, a refused
    /// hello): the client is told why, then the ordinary disconnect
    /// procedure runs (§7).
    pub(super) fn close_with(&mut self, rid: SessionRid, conn: ConnId, reason: CloseReason) {
        self.close_conn(conn, reason);
        self.conns.remove(&conn);
        self.connection_ended(rid);
        let now = self.now();
        self.core.sessions(now).connection_lost(rid);
    }

    /// §7, §10: the session's connection ended: its lane takes no more
    /// packets, the turn running now gets the lifecycle deadline, and the
    /// disconnect turn is queued behind it. Only the first call counts.
    pub(super) fn connection_ended(&mut self, rid: SessionRid) {
        let Some(lane) = self.sessions.get(&rid).map(|entry| entry.lane) else {
            return;
        };
        let Some(phase) = self.lane_sessions.get(&lane).map(|s| s.phase) else {
            return;
        };
        if phase.ended() {
            return;
        }
        self.session_lanes.set_state(lane, SessionState::Closed);
        let queued =
            self.session_lanes
                .submit(lane, SessionClass::Lifecycle, SessionWork::Disconnected);
        // A closed lane admits lifecycle work: only a full one refuses it.
        if let Err(refused) = &queued {
            debug_assert!(matches!(refused.reason, LaneRefusal::Full { .. }));
        }
        let phase = match queued {
            Ok(()) => ConnectionPhase::Ended,
            Err(_) => ConnectionPhase::EndedAtFullLane,
        };
        if let Some(session) = self.lane_sessions.get_mut(&lane) {
            session.phase = phase;
        }
        if let Some(turn) = self.running_turns.get(&lane) {
            let id = turn.id;
            self.lifecycle_deadlines.arm(lane, id, self.wall);
        }
    }

    /// A packet from the client: onto the session's lane, for the connect
    /// callback when it is the first one and there is a connect callback,
    /// else for its handler; refused with a typed error when it has no
    /// handler or the lane refuses it (full, or the session is closing).
    pub(super) fn packet(
        &mut self,
        rid: SessionRid,
        conn: ConnId,
        key: PacketKey,
        correlation: Option<Correlation>,
        payload: bytes::Bytes,
    ) {
        let (rate, burst) = (
            self.node.settings.session_rate,
            self.node.settings.session_burst,
        );
        let now = self.wall;
        let within_rate = self
            .sessions
            .get_mut(&rid)
            .map_or(true, |entry| entry.bucket.take(now, rate, burst));
        if !within_rate {
            self.core.trace(FlowTrace::SessionRateLimited);
            if let Some(correlation) = correlation {
                let error = Error::new(Reason::RateLimited);
                self.write_frame(conn, &ClientFrame::Error { correlation, error });
            }
            return;
        }
        let lane = self.sessions.get(&rid).map(|entry| entry.lane);
        let phase = lane.and_then(|lane| self.lane_sessions.get(&lane).map(|s| s.phase));
        let refusal = match (lane, phase) {
            (Some(lane), Some(phase)) => {
                let hello = phase == ConnectionPhase::AwaitingHello;
                if hello || self.node.handlers.packets.contains_key(&key) {
                    self.submit_packet(lane, hello, key, correlation, payload)
                } else {
                    Some(Error::new(Reason::NoPacketHandler).about_key(key))
                }
            }
            _ => Some(Error::new(Reason::SessionClosing)),
        };
        if let (Some(error), Some(correlation)) = (refusal, correlation) {
            self.write_frame(conn, &ClientFrame::Error { correlation, error });
        }
    }

    fn submit_packet(
        &mut self,
        lane: LaneId,
        hello: bool,
        key: PacketKey,
        correlation: Option<Correlation>,
        payload: bytes::Bytes,
    ) -> Option<Error> {
        let packet = Packet {
            key,
            payload,
            dispatch: Rc::new(Dispatch {
                correlation,
                answered: std::cell::Cell::new(false),
            }),
        };
        let work = if hello {
            SessionWork::Connect(packet)
        } else {
            SessionWork::Packet(packet)
        };
        match self
            .session_lanes
            .submit(lane, SessionClass::Application, work)
        {
            Ok(()) => {
                if let (true, Some(session)) = (hello, self.lane_sessions.get_mut(&lane)) {
                    session.phase = ConnectionPhase::Open;
                }
                None
            }
            Err(refused) => Some(match refused.reason {
                LaneRefusal::Full { .. } => Error::new(Reason::QueueFull),
                _ => Error::new(Reason::SessionClosing),
            }),
        }
    }

    /// §1 step 1: the connect callback refused the client.
    fn refuse_session(&mut self, rid: SessionRid) {
        let conn = self.sessions.get(&rid).map(|entry| entry.conn);
        if let Some(conn) = conn.filter(|conn| self.conns.contains_key(conn)) {
            self.close_with(rid, conn, CloseReason::AuthenticationFailed);
        }
    }

    pub(super) fn session_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Frame { session, frame } => {
                if let Some(conn) = self.sessions.get(&session).map(|e| e.conn) {
                    self.write_frame(conn, &frame);
                }
            }
            SessionEvent::Close { session, reason } => {
                if let Some(conn) = self.sessions.get(&session).map(|e| e.conn) {
                    self.close_conn(conn, reason);
                    self.conns.remove(&conn);
                    self.connection_ended(session);
                }
            }
            SessionEvent::BindCompleted {
                ticket, outcome, ..
            } => {
                if let Some(waiter) = self.bind_waiters.remove(&ticket) {
                    waiter.complete(outcome);
                }
            }
            SessionEvent::NotifyCompleted {
                ticket, outcome, ..
            } => {
                if let Some(waiter) = self.notify_waiters.remove(&ticket) {
                    waiter.complete(outcome);
                }
            }
            SessionEvent::ReplacementCallback {
                session,
                callback,
                actor,
            } => self.replacement_callback(session, callback, actor),
            SessionEvent::SessionEnded { session } => {
                // Every ended session gets its disconnect turn, however its
                // connection ended; the lane goes once that turn finished.
                self.connection_ended(session);
                if let Some(entry) = self.sessions.remove(&session) {
                    self.conns.remove(&entry.conn);
                    self.node.session_ended();
                }
            }
        }
    }

    /// §6: the previous session is closing before its callback starts: new
    /// inbound application dispatch is refused; the callback is admitted.
    fn replacement_callback(&mut self, session: SessionRid, callback: Ticket, actor: ActorId) {
        let lane = self
            .sessions
            .get(&session)
            .map(|e| e.lane)
            .filter(|lane| self.lane_sessions.contains_key(lane));
        if let Some(lane) = lane {
            self.session_lanes.set_state(lane, SessionState::Closed);
        }
        let work = SessionWork::Replaced { callback, actor };
        let admitted = lane.map(|lane| {
            self.session_lanes
                .submit(lane, SessionClass::Lifecycle, work)
        });
        if !matches!(admitted, Some(Ok(()))) {
            let now = self.now();
            self.core
                .sessions(now)
                .replacement_callback_done(session, callback, false);
        }
    }

    /// Takes the next ready session turn, with what the task needs to run
    /// it: the session's identity and attributes and the turn's abort. A
    /// turn that runs after its connection ended gets its lifecycle deadline.
    fn next_session_turn(&mut self) -> Option<(LaneId, SessionWork, Option<TurnStart>)> {
        let (lane, work) = self.session_lanes.next_turn()?;
        let Some(session) = self.lane_sessions.get(&lane) else {
            return Some((lane, work, None));
        };
        let (rid, attributes, phase) = (session.rid, session.attributes.clone(), session.phase);
        let id = self.lifecycle_deadlines.turn_id();
        let (abort, aborted) = completion::<()>();
        self.running_turns
            .insert(lane, RunningTurn { id, _abort: abort });
        if phase.ended() {
            self.lifecycle_deadlines.arm(lane, id, self.wall);
        }
        let start = TurnStart {
            rid,
            attributes,
            aborted,
        };
        Some((lane, work, Some(start)))
    }

    /// Ends a session turn; after the disconnect turn the lane is removed.
    /// A disconnect turn refused at a full lane is queued now.
    fn end_session_turn(&mut self, lane: LaneId, last: bool) {
        self.running_turns.remove(&lane);
        self.session_lanes.finish_turn(lane);
        if last {
            self.remove_session_lane(lane);
            return;
        }
        let deferred = self
            .lane_sessions
            .get(&lane)
            .is_some_and(|s| s.phase == ConnectionPhase::EndedAtFullLane);
        if deferred {
            let queued =
                self.session_lanes
                    .submit(lane, SessionClass::Lifecycle, SessionWork::Disconnected);
            if let (Ok(()), Some(session)) = (queued, self.lane_sessions.get_mut(&lane)) {
                session.phase = ConnectionPhase::Ended;
            }
        }
    }

    /// Removes an ended session's lane; what it still held is dropped (the
    /// session's requests already ended in the core).
    fn remove_session_lane(&mut self, lane: LaneId) {
        self.lane_sessions.remove(&lane);
        drop(self.session_lanes.remove_lane(lane));
    }

    /// §7: drops every session turn still running at its lifecycle deadline
    /// (its task then ends the turn, and the lane moves on).
    pub(super) fn expire_lifecycle_deadlines(&mut self) {
        let now = self.wall;
        while let Some(&(at, lane, id)) = self.lifecycle_deadlines.queue.front() {
            if at > now {
                return;
            }
            self.lifecycle_deadlines.queue.pop_front();
            if self
                .running_turns
                .get(&lane)
                .is_some_and(|turn| turn.id == id)
            {
                tracing::warn!(
                    ?lane,
                    "a session callback outlived the lifecycle deadline: dropped"
                );
                self.running_turns.remove(&lane);
            }
        }
    }

    /// Whether no session is left on this shard, its lanes included (a
    /// drain is done only once every disconnect callback has run, §10), and
    /// every connection it closed has sent its last bytes (its Close frame).
    pub(super) fn sessions_gone(&self) -> bool {
        self.core.session_owner().session_count() == 0
            && self.session_lanes.lanes_len() == 0
            && self.flushing.is_empty()
    }
}

/// What a session turn's task starts from.
struct TurnStart {
    rid: SessionRid,
    attributes: Attributes,
    aborted: Completion<()>,
}

impl ShardHandle {
    /// The shard's index (its SessionOwnerId).
    pub(crate) fn index(&self) -> u16 {
        self.state.borrow().index
    }

    /// Starts every ready session lane turn as a task (§10: binding work
    /// proceeds while the callback awaits).
    pub(super) fn start_session_turns(self: &Rc<Self>) {
        loop {
            let next = self.state.borrow_mut().next_session_turn();
            let Some((lane, work, start)) = next else {
                return;
            };
            let Some(start) = start else {
                self.state.borrow_mut().session_lanes.finish_turn(lane);
                continue;
            };
            let session = Session {
                shard: Rc::clone(self),
                rid: start.rid,
                attributes: start.attributes,
            };
            let last = matches!(work, SessionWork::Disconnected);
            let shard = Rc::clone(self);
            self.spawner.spawn(async move {
                // A turn dropped at its lifecycle deadline ends here too.
                let _ = or_abort(shard.session_turn(session, work), start.aborted).await;
                shard.state.borrow_mut().end_session_turn(lane, last);
            });
        }
    }

    async fn session_turn(self: &Rc<Self>, session: Session, work: SessionWork) {
        let handlers = Arc::clone(&self.state.borrow().node.handlers);
        let rid = session.rid;
        match work {
            SessionWork::Connect(hello) => {
                let Some(handler) = &handlers.on_connect else {
                    return;
                };
                if let Some(Err(error)) = self.dispatch(handler, session, hello).await {
                    tracing::debug!(?rid, %error, "the connect callback refused the client");
                    self.state.borrow_mut().refuse_session(rid);
                }
            }
            SessionWork::Packet(packet) => {
                if let Some(handler) = handlers.packets.get(&packet.key) {
                    let _ = self.dispatch(handler, session, packet).await;
                }
            }
            SessionWork::Replaced { callback, actor } => {
                let ok = match &handlers.on_replaced {
                    Some(handler) => handler(session, actor).await.is_ok(),
                    None => true,
                };
                let mut state = self.state.borrow_mut();
                // §6: the close follows the callback's terminal by 100 ms,
                // never sooner. The callback may end late in a long loop
                // turn, so the clock is read again here: the turn's first
                // reading would start the close too early.
                state.tick();
                let now = state.now();
                state
                    .core
                    .sessions(now)
                    .replacement_callback_done(rid, callback, ok);
            }
            SessionWork::Disconnected => {
                if let Some(handler) = &handlers.on_disconnect {
                    if let Err(error) = handler(session).await {
                        tracing::debug!(?rid, %error, "the disconnect callback failed");
                    }
                }
            }
        }
    }

    /// Runs a packet's callback (the connect callback or a packet handler)
    /// on an open session; a request it leaves unanswered ends with its
    /// error or `NotAnswered`, never with silence (§12). `None` when the
    /// session is no longer open: §6, a closing session runs no new
    /// application dispatch, even for packets queued before it began closing.
    async fn dispatch(
        &self,
        handler: &PacketHandler,
        session: Session,
        packet: Packet,
    ) -> Option<Result<(), Error>> {
        let rid = session.rid;
        let dispatch = Rc::clone(&packet.dispatch);
        let open = self.state.borrow().core.session_owner().is_open(rid);
        if !open {
            if let Some(correlation) = dispatch.correlation {
                let _ = self.answer(rid, correlation, Err(Reason::SessionClosing.into()));
            }
            return None;
        }
        let outcome = handler(session, packet).await;
        if let (false, Some(correlation)) = (dispatch.answered.get(), dispatch.correlation) {
            let error = outcome
                .clone()
                .err()
                .unwrap_or(Error::new(Reason::NotAnswered));
            let _ = self.answer(rid, correlation, Err(error));
        }
        Some(outcome)
    }
}
