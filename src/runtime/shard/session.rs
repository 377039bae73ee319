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

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::{ShardHandle, ShardState};
use crate::core::session::{ClientPacket, SessionEvent, SessionTurn, SessionWork, Ticket, TurnId};
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{Correlation, PacketKey, SessionRid};
use crate::net::{CloseCause, ConnId};
use crate::runtime::app::session::{Attributes, Dispatch, Packet, Session};
use crate::runtime::executor::{or_abort, AbortSlot, Completer, Completion};
use crate::runtime::rate_limit::TokenBucket;
use crate::runtime::{LocalResult, PacketHandler};
use crate::wire::client::{ClientFrame, CloseReason};

/// A session callback's future, in storage that stays where it is: a
/// callback that awaits goes on from where its first poll left it, in its
/// lane's task. The shard keeps these for reuse, so a turn allocates none
/// once warm (docs/PERFORMANCE.md "Turns that end in their first poll").
pub(super) type CallbackSlot = Pin<Box<Option<LocalResult>>>;

/// At most this many [`CallbackSlot`]s are kept: the callbacks awaiting at
/// once on a shard, beyond which a slot is simply freed.
const SLOTS_KEPT: usize = 64;

/// What a session turn does once its callback ended.
enum Then {
    /// The application set no callback for the turn: nothing.
    Nothing,
    /// §1 step 1: a connect callback that failed refuses the client; a
    /// request it left unanswered gets its error (§12).
    Admit(Rc<Dispatch>),
    /// §12: a request the handler left unanswered ends with its error or
    /// `NotAnswered`, never with silence.
    Answer(Rc<Dispatch>),
    /// §6: the callback's terminal, which the close follows.
    ReplacementDone(Ticket),
    /// §7: the disconnect callback; its failure is only logged.
    Disconnected,
}

/// A session turn the core handed out, with its callback's future.
struct CallbackTurn {
    session: SessionRid,
    turn: TurnId,
    /// The disconnect turn, the lane's last.
    last: bool,
    /// The callback's future; empty when there is no callback.
    slot: CallbackSlot,
    then: Then,
}

impl CallbackTurn {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match self.slot.as_mut().as_pin_mut() {
            Some(callback) => callback.poll(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// The waker of a callback's first poll, which does nothing
/// ([`ShardHandle::start_session_turns`]). `Waker::noop` is younger than
/// the crate's rust-version (1.80).
pub(super) struct FirstPoll;

impl std::task::Wake for FirstPoll {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// A turn for its lane's task.
struct QueuedTurn {
    turn: Queued,
    /// Ends the turn at its §7 lifecycle deadline.
    aborted: Completion<()>,
}

/// What a lane's task is given.
enum Queued {
    /// A turn whose callback awaited in its first poll.
    Awaiting(CallbackTurn),
    /// A turn handed out while the task still held the one before it: its
    /// callback is built by the task once that one is gone, so that not
    /// even its synchronous part overlaps it (W1).
    Unstarted {
        turn: SessionTurn,
        attributes: Attributes,
    },
}

/// Where a session's lane task takes its next awaiting turn from, in
/// order. The core hands out one turn of a lane at a time, so it holds one,
/// or two when the first was dropped at its §7 deadline before the task
/// took it (the task then ends that one at once, and takes the next).
/// Closed when the lane goes, which ends the task.
#[derive(Default)]
pub(super) struct LaneMailbox {
    turns: RefCell<VecDeque<QueuedTurn>>,
    waker: RefCell<Option<Waker>>,
    closed: Cell<bool>,
    /// The task holds a turn, or one waits for it here. A turn dropped at
    /// its §7 deadline is over for the core at once, but its callback goes
    /// only when the task is next polled: until then the lane's next turn
    /// goes to the task too, behind it, and not inline ahead of it (W1:
    /// a session's callbacks never overlap).
    busy: Cell<bool>,
}

impl LaneMailbox {
    fn put(&self, turn: QueuedTurn) {
        self.turns.borrow_mut().push_back(turn);
        self.busy.set(true);
        self.wake();
    }

    fn close(&self) {
        self.closed.set(true);
        self.wake();
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}

/// The lane task's wait for its next awaiting turn: `None` once the lane
/// is gone.
struct NextTurn<'a>(&'a LaneMailbox);

impl Future for NextTurn<'_> {
    type Output = Option<QueuedTurn>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<QueuedTurn>> {
        if let Some(turn) = self.0.turns.borrow_mut().pop_front() {
            return Poll::Ready(Some(turn));
        }
        self.0.busy.set(false);
        if self.0.closed.get() {
            return Poll::Ready(None);
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A session's lane in the runtime: what its turns run with.
pub(super) struct Lane {
    /// The session's typed attributes.
    attributes: Attributes,
    /// The lane task's mailbox, once a turn that awaited spawned it.
    mailbox: Option<Rc<LaneMailbox>>,
    /// The turn awaiting now, if any (a turn that ends in its first poll
    /// is never here).
    running: Option<RunningTurn>,
}

/// The awaiting turn of a session lane.
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

    /// A turn whose callback awaited: its abort (for its §7 lifecycle
    /// deadline), and the lane task's mailbox if the task is running.
    /// `None` when the session has no lane.
    fn start_awaiting(
        &mut self,
        session: SessionRid,
        turn: TurnId,
    ) -> Option<(Completion<()>, Option<Rc<LaneMailbox>>)> {
        let lane = self.lanes.get_mut(&session)?;
        let (abort, aborted, slot) = self.aborts.take();
        lane.running = Some(RunningTurn { turn, abort, slot });
        Some((aborted, lane.mailbox.clone()))
    }

    /// A turn's callback ended (returned, or was dropped): the core moves
    /// the lane on. After the disconnect turn the lane goes, with the
    /// session's attributes and its task.
    fn end_session_turn(&mut self, session: SessionRid, turn: TurnId, last: bool) {
        let running = if last {
            self.lanes.remove(&session).and_then(|lane| {
                if let Some(mailbox) = &lane.mailbox {
                    mailbox.close();
                }
                lane.running
            })
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

    /// A turn whose callback was never built ends (its session has no
    /// lane).
    fn end_unstarted_turn(&mut self, turn: &SessionTurn) {
        let last = matches!(turn.work, SessionWork::Disconnected);
        self.end_session_turn(turn.session, turn.turn, last);
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

    /// Runs every session turn the core handed out. A turn's callback is
    /// polled here first, from the shard's own loop: most end in that poll
    /// (a handler that relays or answers and returns), and such a turn
    /// costs no task, no wake and no allocation. A callback that awaits
    /// (§10: binding work proceeds while it does) goes on in its session's
    /// lane task, spawned with the lane's first such turn, which runs them
    /// one after another until the lane goes. Before, every turn went
    /// through that task, whose future at 1,000 sessions was cold for each
    /// message (docs/PERFORMANCE.md "Turns that end in their first poll").
    pub(super) fn start_session_turns(self: &Rc<Self>) {
        self.state.borrow_mut().drain_core();
        loop {
            let next = {
                let mut state = self.state.borrow_mut();
                state.ready_turns.pop_front().map(|turn| {
                    let lane = state.lanes.get(&turn.session).map(|lane| {
                        let busy = lane.mailbox.as_ref().is_some_and(|m| m.busy.get());
                        (lane.attributes.clone(), busy)
                    });
                    (turn, lane)
                })
            };
            let Some((turn, lane)) = next else {
                return;
            };
            let Some((attributes, task_busy)) = lane else {
                // No lane: never reached (it lives from the accept to the
                // end of the disconnect turn); the turn ends at once.
                self.state.borrow_mut().end_unstarted_turn(&turn);
                continue;
            };
            if task_busy {
                // Behind the turn its task still holds (see `LaneMailbox`).
                let (session, id) = (turn.session, turn.turn);
                self.hand_to_task(session, id, Queued::Unstarted { turn, attributes });
                continue;
            }
            let mut callback = self.callback_turn(turn, attributes);
            // A waker that does nothing: a callback still pending after
            // this poll is polled again by its lane task, with the task's
            // waker, before anything can have woken it.
            let mut cx = Context::from_waker(&self.first_poll_waker);
            match callback.poll(&mut cx) {
                Poll::Ready(outcome) => self.end_callback_turn(callback, Some(outcome)),
                Poll::Pending => {
                    let (session, id) = (callback.session, callback.turn);
                    self.hand_to_task(session, id, Queued::Awaiting(callback));
                }
            }
        }
    }

    /// Builds a turn's callback: the application's callback for its work,
    /// its future in a kept slot, and what follows its end.
    fn callback_turn(self: &Rc<Self>, turn: SessionTurn, attributes: Attributes) -> CallbackTurn {
        let SessionTurn {
            session: rid,
            turn,
            work,
        } = turn;
        let last = matches!(work, SessionWork::Disconnected);
        let session = Session {
            shard: Rc::clone(self),
            rid,
            attributes,
        };
        let mut slot = self
            .callback_slots
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Box::pin(None));
        // Each callback's future is written into the slot where it is
        // built: returned through this function instead, its 512-byte
        // storage was copied three more times a turn.
        let handlers = &self.handlers;
        let then = match work {
            SessionWork::Connect(hello) => match &handlers.on_connect {
                Some(handler) => {
                    Then::Admit(self.packet_callback(handler, session, hello, &mut slot))
                }
                None => Then::Nothing,
            },
            SessionWork::Packet(packet) => match handlers.packets.get(&packet.key) {
                Some(handler) => {
                    Then::Answer(self.packet_callback(handler, session, packet, &mut slot))
                }
                None => Then::Nothing,
            },
            SessionWork::Replaced { callback, actor } => {
                if let Some(handler) = &handlers.on_replaced {
                    handler(session, actor, slot.as_mut());
                }
                Then::ReplacementDone(callback)
            }
            SessionWork::Disconnected => {
                if let Some(handler) = &handlers.on_disconnect {
                    handler(session, slot.as_mut());
                }
                Then::Disconnected
            }
        };
        CallbackTurn {
            session: rid,
            turn,
            last,
            slot,
            then,
        }
    }

    /// Puts a packet's callback (the connect callback or a packet handler)
    /// in `slot`; gives the dispatch that tells whether it answered.
    fn packet_callback(
        &self,
        handler: &PacketHandler,
        session: Session,
        packet: ClientPacket,
        slot: &mut CallbackSlot,
    ) -> Rc<Dispatch> {
        let dispatch = self.dispatches.take(packet.correlation);
        let packet = Packet {
            key: packet.key,
            payload: packet.payload,
            dispatch: Rc::clone(&dispatch),
        };
        handler(session, packet, slot.as_mut());
        dispatch
    }

    /// A turn for its lane's task (a callback that awaited, or a turn
    /// behind the one the task holds), spawned now if the lane has none
    /// yet, with the abort of its §7 lifecycle deadline.
    fn hand_to_task(self: &Rc<Self>, session: SessionRid, id: TurnId, turn: Queued) {
        let started = self.state.borrow_mut().start_awaiting(session, id);
        let Some((aborted, mailbox)) = started else {
            // No lane (never reached, as above): the turn ends at once.
            match turn {
                Queued::Awaiting(callback) => self.end_callback_turn(callback, None),
                Queued::Unstarted { turn, .. } => {
                    self.state.borrow_mut().end_unstarted_turn(&turn);
                }
            }
            return;
        };
        let mailbox = mailbox.unwrap_or_else(|| self.spawn_lane_task(session));
        mailbox.put(QueuedTurn { turn, aborted });
    }

    /// Spawns the lane task of `session`: it runs each turn put in its
    /// mailbox to its end, in order, under the turn's abort, and ends once
    /// the lane is gone.
    fn spawn_lane_task(self: &Rc<Self>, session: SessionRid) -> Rc<LaneMailbox> {
        let mailbox = Rc::new(LaneMailbox::default());
        if let Some(lane) = self.state.borrow_mut().lanes.get_mut(&session) {
            lane.mailbox = Some(Rc::clone(&mailbox));
        }
        let (shard, next) = (Rc::clone(self), Rc::clone(&mailbox));
        self.spawner.spawn(async move {
            while let Some(QueuedTurn { turn, aborted }) = NextTurn(&next).await {
                let mut callback = match turn {
                    Queued::Awaiting(callback) => callback,
                    Queued::Unstarted { turn, attributes } => shard.callback_turn(turn, attributes),
                };
                // A turn dropped at its lifecycle deadline ends here too.
                let outcome = or_abort(std::future::poll_fn(|cx| callback.poll(cx)), aborted).await;
                shard.end_callback_turn(callback, outcome);
            }
        });
        mailbox
    }

    /// A turn's callback ended with `outcome` (`None`: dropped at its §7
    /// lifecycle deadline, so nothing follows it): what follows its end,
    /// then the core moves the lane on. What the lane has next comes with
    /// the next drain.
    fn end_callback_turn(&self, callback: CallbackTurn, outcome: Option<Result<(), Error>>) {
        let CallbackTurn {
            session: rid,
            turn,
            last,
            mut slot,
            then,
        } = callback;
        // The callback's future goes first, with the packet it held: its
        // dispatch is then free for reuse.
        slot.set(None);
        {
            let mut slots = self.callback_slots.borrow_mut();
            if slots.len() < SLOTS_KEPT {
                slots.push(slot);
            }
        }
        if let Some(outcome) = outcome {
            match then {
                Then::Nothing => {}
                Then::Admit(dispatch) => {
                    self.answer_unanswered(rid, dispatch, &outcome);
                    if let Err(error) = outcome {
                        tracing::debug!(?rid, %error, "the connect callback refused the client");
                        self.state.borrow_mut().refuse_session(rid);
                    }
                }
                Then::Answer(dispatch) => self.answer_unanswered(rid, dispatch, &outcome),
                Then::ReplacementDone(callback) => {
                    let mut state = self.state.borrow_mut();
                    // §6: the close follows the callback's terminal by 100
                    // ms, never sooner. The callback may end late in a long
                    // loop turn, so the clock is read again here: the
                    // turn's first reading would start the close too early.
                    state.tick();
                    let now = state.now();
                    state.core.sessions(now).replacement_callback_done(
                        rid,
                        callback,
                        outcome.is_ok(),
                    );
                }
                Then::Disconnected => {
                    if let Err(error) = outcome {
                        tracing::debug!(?rid, %error, "the disconnect callback failed");
                    }
                }
            }
        }
        self.state.borrow_mut().end_session_turn(rid, turn, last);
    }

    /// §12: a request its callback left unanswered ends with the callback's
    /// error or `NotAnswered`, never with silence. The core hands out no
    /// packet of a session that began closing (§6), so none is checked
    /// here.
    fn answer_unanswered(
        &self,
        rid: SessionRid,
        dispatch: Rc<Dispatch>,
        outcome: &Result<(), Error>,
    ) {
        if let (false, Some(correlation)) = (dispatch.answered.get(), dispatch.correlation) {
            let error = outcome
                .clone()
                .err()
                .unwrap_or(Error::new(Reason::NotAnswered));
            let _ = self.answer(rid, correlation, Err(error));
        }
        self.dispatches.give_back(dispatch);
    }
}
