//! The session side of a shard: the connections of STREAM sessions and the
//! turns of the application's session callbacks (§1 step 1, §6, §7, §10;
//! docs/threading.md "Session callbacks").
//!
//! The protocol facts live in the core (src/core/session/lanes.rs): which
//! callback runs next on a session's lane, that a closing session runs no
//! new application dispatch, the disconnect turn queued once, and the §7
//! lifecycle deadline of a turn that runs after its session ended. This
//! module runs what the core hands out ([`SessionEvent::Turn`]), reports
//! each turn's end, and drops a callback whose turn is over
//! ([`SessionEvent::TurnExpired`]). Session attributes live until the
//! disconnect turn is over.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::{ShardHandle, ShardState};
use crate::core::session::{ClientPacket, SessionEvent, SessionTurn, SessionWork, TurnId};
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{Correlation, PacketKey, SessionRid};
use crate::net::{CloseCause, ConnId};
use crate::runtime::app::session::{Attributes, Packet, Session};
use crate::runtime::executor::{or_abort, AbortSlot, Completer, Completion};
use crate::runtime::rate_limit::TokenBucket;
use crate::runtime::PacketHandler;
use crate::wire::client::{ClientFrame, CloseReason};

/// What [`ShardState::start_turn`] gives the turn's task.
struct StartedTurn {
    attributes: Attributes,
    aborted: Completion<()>,
    /// The lane task's mailbox; `None` before its first turn.
    mailbox: Option<Rc<LaneMailbox>>,
}

/// A turn for a session's lane task, with what it runs with.
struct TurnToRun {
    turn: SessionTurn,
    attributes: Attributes,
    aborted: Completion<()>,
}

/// Where a session's lane task takes its next turn from: the core hands
/// out one turn of a lane at a time, so it holds at most one.
#[derive(Default)]
pub(super) struct LaneMailbox {
    turn: RefCell<Option<TurnToRun>>,
    waker: RefCell<Option<Waker>>,
}

impl LaneMailbox {
    fn put(&self, turn: TurnToRun) {
        let previous = self.turn.borrow_mut().replace(turn);
        debug_assert!(previous.is_none(), "two turns of one lane at once");
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}

/// The lane task's wait for its next turn.
struct NextTurn<'a>(&'a LaneMailbox);

impl Future for NextTurn<'_> {
    type Output = TurnToRun;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TurnToRun> {
        if let Some(turn) = self.0.turn.borrow_mut().take() {
            return Poll::Ready(turn);
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A session's lane in the runtime: what its turns run with.
pub(super) struct Lane {
    /// The session's typed attributes.
    attributes: Attributes,
    /// The lane task's mailbox, once its first turn spawned it.
    mailbox: Option<Rc<LaneMailbox>>,
    /// The turn running now, if any.
    running: Option<RunningTurn>,
}

/// The running turn of a session lane.
struct RunningTurn {
    turn: TurnId,
    /// Held for its drop, which aborts the turn.
    abort: Completer<()>,
    /// The abort's storage, for the shard's pool once the turn is over.
    slot: AbortSlot,
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
        self.sessions.insert(
            rid,
            super::SessionEntry {
                conn,
                bucket: TokenBucket::new(self.wall, self.node.settings.session_burst),
            },
        );
        let lane = Lane {
            attributes: Attributes::default(),
            mailbox: None,
            running: None,
        };
        self.lanes.insert(rid, lane);
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
        let now = self.now();
        self.core.sessions(now).connection_lost(rid);
    }

    /// The shard ends the connection itself (a protocol error, a refused
    /// hello): the client is told why, then the ordinary disconnect
    /// procedure runs (§7).
    pub(super) fn close_with(&mut self, rid: SessionRid, conn: ConnId, reason: CloseReason) {
        self.close_conn(conn, reason);
        self.conns.remove(&conn);
        let now = self.now();
        self.core.sessions(now).connection_lost(rid);
    }

    /// A packet from the client: past the session's rate limit, onto its
    /// lane in the core, which decides whether it is the hello, whether it
    /// has a handler and whether the lane takes it; refused with the typed
    /// error the core gives.
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
        let handled = self.node.handlers.packets.contains_key(&key);
        let packet = ClientPacket {
            key,
            correlation,
            payload,
        };
        let now = self.now();
        let refused = self.core.sessions(now).packet(rid, packet, handled);
        if let (Err(error), Some(correlation)) = (refused, correlation) {
            self.write_frame(conn, &ClientFrame::Error { correlation, error });
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
            SessionEvent::Turn(turn) => self.ready_turns.push_back(turn),
            SessionEvent::TurnExpired { session, turn } => {
                // §7: the lane moved on; the callback is dropped here (its
                // task then ends, and its end is stale to the core).
                if let Some(lane) = self.lanes.get_mut(&session) {
                    drop(lane.running.take_if(|running| running.turn == turn));
                }
            }
            SessionEvent::SessionEnded { session } => {
                // Its lane lives on until its disconnect turn is over.
                if let Some(entry) = self.sessions.remove(&session) {
                    self.conns.remove(&entry.conn);
                    self.node.session_ended();
                }
            }
        }
    }

    /// Starts a turn the core handed out: its abort, and what its task
    /// needs to run it (the session's attributes, and the lane task's
    /// mailbox if the task is running).
    fn start_turn(&mut self, turn: &SessionTurn) -> Option<StartedTurn> {
        let lane = self.lanes.get_mut(&turn.session)?;
        let (abort, aborted, slot) = self.aborts.take();
        lane.running = Some(RunningTurn {
            turn: turn.turn,
            abort,
            slot,
        });
        Some(StartedTurn {
            attributes: lane.attributes.clone(),
            aborted,
            mailbox: lane.mailbox.clone(),
        })
    }

    /// A turn's task ended (its callback returned, or was dropped): the core
    /// moves the lane on. After the disconnect turn the lane goes, with the
    /// session's attributes.
    fn end_session_turn(&mut self, session: SessionRid, turn: TurnId, last: bool) {
        let running = if last {
            self.lanes.remove(&session).and_then(|lane| lane.running)
        } else {
            self.lanes
                .get_mut(&session)
                .and_then(|lane| lane.running.take_if(|running| running.turn == turn))
        };
        if let Some(RunningTurn { abort, slot, .. }) = running.filter(|r| r.turn == turn) {
            drop(abort);
            self.aborts.give(slot);
        }
        let now = self.now();
        self.core.sessions(now).turn_done(session, turn);
    }

    /// Whether no session is left on this shard, its lanes included (a
    /// drain is done only once every disconnect callback has run, §10), and
    /// every connection it closed has sent its last bytes (its Close frame).
    pub(super) fn sessions_gone(&self) -> bool {
        let owner = self.core.session_owner();
        owner.session_count() == 0 && owner.lane_count() == 0 && self.flushing.is_empty()
    }
}

impl ShardHandle {
    /// The shard's index (its SessionOwnerId).
    pub(crate) fn index(&self) -> u16 {
        self.state.borrow().index
    }

    /// Hands every session turn the core handed out to its session's lane
    /// task (§10: binding work proceeds while the callback awaits). A
    /// session's lane task is spawned with its first turn and runs its
    /// turns one after another until the disconnect turn: one task per
    /// session, not per turn (a task was an allocation per relayed message:
    /// docs/PERFORMANCE.md "Allocations per relayed message").
    pub(super) fn start_session_turns(self: &Rc<Self>) {
        self.state.borrow_mut().drain_core();
        loop {
            let next = {
                let mut state = self.state.borrow_mut();
                state.ready_turns.pop_front().map(|turn| {
                    let started = state.start_turn(&turn);
                    (turn, started)
                })
            };
            let Some((turn, started)) = next else {
                return;
            };
            let (session, id) = (turn.session, turn.turn);
            let Some(StartedTurn {
                attributes,
                aborted,
                mailbox,
            }) = started
            else {
                // No lane: never reached (it lives from the accept to the
                // end of the disconnect turn); the turn ends at once.
                let last = matches!(turn.work, SessionWork::Disconnected);
                self.state.borrow_mut().end_session_turn(session, id, last);
                continue;
            };
            let mailbox = mailbox.unwrap_or_else(|| self.spawn_lane_task(session));
            mailbox.put(TurnToRun {
                turn,
                attributes,
                aborted,
            });
        }
    }

    /// Spawns the lane task of `session`: it runs each turn put in its
    /// mailbox, under the turn's abort, and reports its end; it ends after
    /// the disconnect turn.
    fn spawn_lane_task(self: &Rc<Self>, session: SessionRid) -> Rc<LaneMailbox> {
        let mailbox = Rc::new(LaneMailbox::default());
        if let Some(lane) = self.state.borrow_mut().lanes.get_mut(&session) {
            lane.mailbox = Some(Rc::clone(&mailbox));
        }
        let (shard, next) = (Rc::clone(self), Rc::clone(&mailbox));
        self.spawner.spawn(async move {
            loop {
                let TurnToRun {
                    turn,
                    attributes,
                    aborted,
                } = NextTurn(&next).await;
                let id = turn.turn;
                let last = matches!(turn.work, SessionWork::Disconnected);
                let handle = Session {
                    shard: Rc::clone(&shard),
                    rid: session,
                    attributes,
                };
                // A turn dropped at its lifecycle deadline ends here too.
                let _ = or_abort(shard.session_turn(handle, turn.work), aborted).await;
                // What the lane has next comes with the next drain.
                let mut state = shard.state.borrow_mut();
                state.end_session_turn(session, id, last);
                if last {
                    return;
                }
            }
        });
        mailbox
    }

    async fn session_turn(self: &Rc<Self>, session: Session, work: SessionWork) {
        let handlers = Arc::clone(&self.state.borrow().node.handlers);
        let rid = session.rid;
        match work {
            SessionWork::Connect(hello) => {
                let Some(handler) = &handlers.on_connect else {
                    return;
                };
                if let Err(error) = self.dispatch(handler, session, hello).await {
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

    /// Runs a packet's callback (the connect callback or a packet handler);
    /// a request it leaves unanswered ends with its error or `NotAnswered`,
    /// never with silence (§12). The core hands out no packet of a session
    /// that began closing (§6), so none is checked here.
    async fn dispatch(
        &self,
        handler: &PacketHandler,
        session: Session,
        packet: ClientPacket,
    ) -> Result<(), Error> {
        let rid = session.rid;
        let dispatch = self.dispatches.take(packet.correlation);
        let packet = Packet {
            key: packet.key,
            payload: packet.payload,
            dispatch: Rc::clone(&dispatch),
        };
        let outcome = handler(session, packet).await;
        if let (false, Some(correlation)) = (dispatch.answered.get(), dispatch.correlation) {
            let error = outcome
                .clone()
                .err()
                .unwrap_or(Error::new(Reason::NotAnswered));
            let _ = self.answer(rid, correlation, Err(error));
        }
        self.dispatches.give_back(dispatch);
        outcome
    }
}
