//! Session lanes: the turns of the application's session callbacks, one
//! lane per session (§1 step 1, §6, §7, §10; docs/threading.md "Session
//! callbacks").
//!
//! The session owner decides which callback runs next and when a turn is
//! over; the runtime only runs the callback a [`SessionTurn`] names and
//! reports its end ([`super::Sessions::turn_done`]). Rules kept here, once:
//! - One lane per session, one turn at a time (§10, W1): the connect
//!   callback with the client's first packet, the packet handlers, the
//!   duplicate-Actor-connection callback and the disconnect callback all
//!   run as turns of that lane, so no two of them overlap.
//! - The connect callback authenticates (§1 step 1): packets that arrive
//!   while it runs wait behind it on the lane.
//! - A closing session runs no new application dispatch (§6): from the
//!   moment the session leaves Open (replaced, or ended) its lane is
//!   Closed; a packet submitted then is refused `SessionClosing`, and one
//!   queued before is answered `SessionClosing` when its turn would have
//!   come ([`super::Sessions::next_turn`]), never run. Lifecycle turns (the
//!   replacement and disconnect callbacks) still run.
//! - When the session ends, for whatever reason, the disconnect turn is
//!   queued once, after the turn running then; at a full lane it is queued
//!   as soon as a finished turn leaves a place. The framework's own
//!   disconnect notices and cleanup (§7) never wait for any of these turns
//!   (§10).
//! - A turn that runs after its session ended gets the §7 lifecycle
//!   deadline (the disconnect deadline) from the later of the end and its
//!   start, on the shard's one timer wheel; one still running then is
//!   over: the lane moves on and the runtime drops the callback
//!   ([`super::SessionEvent::TurnExpired`]). A callback that never finishes
//!   cannot hold its lane, and its session's memory, forever.
//! - The lane lives until its disconnect turn is over: it may outlive the
//!   session's binding state.

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use super::{SessionEvent, SessionTimer, Sessions, Ticket};
use crate::core::effects::CoreTimer;
use crate::core::lane::{
    detached, Detach, LaneEngine, LaneId, LaneRefusal, SessionClass, SessionLane, SessionState,
};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, Correlation, PacketKey, SessionRid};
use crate::wire::client::ClientFrame;

/// Names one turn of a session lane, so that its end (or its lifecycle
/// deadline) is matched to it and to no later turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TurnId(pub u64);

/// A packet from the client, for the connect callback or its handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientPacket {
    /// Which handler it is for.
    pub key: PacketKey,
    /// Set on a request: it must end with its reply or a typed error (§12).
    pub correlation: Option<Correlation>,
    /// The packet's bytes.
    pub payload: Bytes,
}

/// Work on a session's lane (§10): two turns of one session never overlap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionWork {
    /// §1 step 1: the client's first packet, for the connect callback.
    Connect(ClientPacket),
    /// A packet for its handler.
    Packet(ClientPacket),
    /// §6: the duplicate-Actor-connection callback; its terminal is
    /// reported with [`super::Sessions::replacement_callback_done`].
    Replaced {
        /// Names the callback.
        callback: Ticket,
        /// The Actor bound elsewhere now.
        actor: ActorId,
    },
    /// §7: the session's disconnect callback; always the lane's last turn.
    Disconnected,
}

impl Detach for SessionWork {
    fn detach(&mut self) {
        if let Self::Connect(packet) | Self::Packet(packet) = self {
            packet.payload = detached(&packet.payload);
        }
    }
}

impl SessionWork {
    fn class(&self) -> SessionClass {
        match self {
            Self::Connect(_) | Self::Packet(_) => SessionClass::Application,
            Self::Replaced { .. } | Self::Disconnected => SessionClass::Lifecycle,
        }
    }
}

/// A callback for the runtime to run now; report its end with
/// [`super::Sessions::turn_done`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionTurn {
    /// The session.
    pub session: SessionRid,
    /// The turn.
    pub turn: TurnId,
    /// What to run.
    pub work: SessionWork,
}

/// Where a session stands, as its lane sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Open, with a connect callback that has not had its packet yet.
    AwaitingHello,
    /// Open: packets go to their handlers.
    Open,
    /// Ended: the disconnect turn is queued.
    Ended,
    /// Ended while the lane was full: the disconnect turn is queued as
    /// soon as a finished turn leaves a place.
    EndedAtFullLane,
}

impl Phase {
    fn ended(self) -> bool {
        matches!(self, Self::Ended | Self::EndedAtFullLane)
    }
}

#[derive(Debug)]
struct Running {
    turn: TurnId,
    /// The disconnect turn: the lane goes when it is over.
    last: bool,
    /// Its §7 lifecycle deadline, once its session ended.
    deadline: Option<TimerKey>,
}

#[derive(Debug)]
struct Slot {
    session: SessionRid,
    phase: Phase,
    running: Option<Running>,
}

/// Every session lane of one shard.
#[derive(Debug)]
pub(super) struct SessionLanes {
    engine: LaneEngine<SessionLane, SessionWork>,
    slots: HashMap<LaneId, Slot>,
    by_session: HashMap<SessionRid, LaneId>,
    next_turn: u64,
}

impl SessionLanes {
    pub(super) fn new() -> Self {
        Self {
            engine: LaneEngine::new(),
            slots: HashMap::new(),
            by_session: HashMap::new(),
            next_turn: 0,
        }
    }

    /// How many lanes exist: a session's lane lives until its disconnect
    /// turn is over.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether a session callback turn may be ready to hand out.
    pub(super) fn may_have_turn(&self) -> bool {
        self.engine.may_have_turn()
    }

    /// A new session's lane.
    pub(super) fn open(&mut self, session: SessionRid, capacity: usize, awaits_hello: bool) {
        let lane = self.engine.add_lane(capacity);
        let phase = if awaits_hello {
            Phase::AwaitingHello
        } else {
            Phase::Open
        };
        self.slots.insert(
            lane,
            Slot {
                session,
                phase,
                running: None,
            },
        );
        self.by_session.insert(session, lane);
    }

    /// Ends the lane's turn. A disconnect turn refused at a full lane is
    /// queued now that a place is free.
    fn finish(&mut self, lane: LaneId) {
        self.engine.finish_turn(lane);
        let deferred = self
            .slots
            .get(&lane)
            .is_some_and(|slot| slot.phase == Phase::EndedAtFullLane);
        if deferred
            && self
                .engine
                .submit(lane, SessionClass::Lifecycle, SessionWork::Disconnected)
                .is_ok()
        {
            if let Some(slot) = self.slots.get_mut(&lane) {
                slot.phase = Phase::Ended;
            }
        }
    }

    fn remove(&mut self, lane: LaneId) {
        if let Some(slot) = self.slots.remove(&lane) {
            self.by_session.remove(&slot.session);
        }
        // What it still held is dropped: the session's requests already
        // ended in the session owner.
        drop(self.engine.remove_lane(lane));
    }
}

impl Sessions<'_> {
    /// A packet from the client (§1 step 1, §6, §10): onto the session's
    /// lane, for the connect callback when it is the first one and the node
    /// has one, else for its handler (`handled`: the node has a handler for
    /// its key). `Err` is the typed error the client gets instead: no
    /// handler, a full lane, or a session that is closing.
    pub fn packet(
        &mut self,
        session: SessionRid,
        packet: ClientPacket,
        handled: bool,
    ) -> Result<(), Error> {
        let lanes = &mut self.owner.lanes;
        let Some(&lane) = lanes.by_session.get(&session) else {
            return Err(Reason::SessionClosing.into());
        };
        let hello = lanes
            .slots
            .get(&lane)
            .is_some_and(|slot| slot.phase == Phase::AwaitingHello);
        let work = if hello {
            SessionWork::Connect(packet)
        } else if handled {
            SessionWork::Packet(packet)
        } else {
            return Err(Error::new(Reason::NoPacketHandler).about_key(packet.key));
        };
        match lanes.engine.submit(lane, SessionClass::Application, work) {
            Ok(()) => {
                if let (true, Some(slot)) = (hello, lanes.slots.get_mut(&lane)) {
                    slot.phase = Phase::Open;
                }
                Ok(())
            }
            Err(refused) => Err(match refused.reason {
                LaneRefusal::Full { .. } => {
                    // Counted here, where both kinds are refused: a
                    // request's refusal goes to the client, a one-way
                    // message's nowhere else.
                    self.fx.trace(FlowTrace::SessionQueueFull);
                    Reason::QueueFull.into()
                }
                _ => Reason::SessionClosing.into(),
            }),
        }
    }

    /// The next callback to run, if a lane has one (round-robin over the
    /// lanes, FIFO within each). §6: a packet queued before its session
    /// began closing is not run: a request among them is answered
    /// `SessionClosing` here, the one place that rule is kept.
    pub(crate) fn next_turn(&mut self) -> Option<SessionTurn> {
        loop {
            let lanes = &mut self.owner.lanes;
            let (lane, work) = lanes.engine.next_turn()?;
            let closed = lanes.engine.state(lane) == SessionState::Closed;
            let Some(slot) = lanes.slots.get_mut(&lane) else {
                // A lane is removed with its slot: never reached.
                lanes.engine.finish_turn(lane);
                continue;
            };
            let session = slot.session;
            if closed && work.class() == SessionClass::Application {
                lanes.finish(lane);
                if let SessionWork::Connect(packet) | SessionWork::Packet(packet) = work {
                    if let Some(correlation) = packet.correlation {
                        let error = Error::new(Reason::SessionClosing);
                        let frame = ClientFrame::Error { correlation, error };
                        self.fx
                            .session_event(SessionEvent::Frame { session, frame });
                    }
                }
                continue;
            }
            lanes.next_turn += 1;
            let turn = TurnId(lanes.next_turn);
            let ended = slot.phase.ended();
            slot.running = Some(Running {
                turn,
                last: matches!(work, SessionWork::Disconnected),
                deadline: None,
            });
            if ended {
                self.arm_lifecycle_deadline(lane);
            }
            return Some(SessionTurn {
                session,
                turn,
                work,
            });
        }
    }

    /// The runtime finished running `turn` (its callback returned, or was
    /// dropped): the lane moves on. After the disconnect turn the lane is
    /// removed. The end of a turn already over (at its lifecycle deadline)
    /// changes nothing.
    pub fn turn_done(&mut self, session: SessionRid, turn: TurnId) {
        let lanes = &self.owner.lanes;
        let Some(&lane) = lanes.by_session.get(&session) else {
            return;
        };
        let current = lanes
            .slots
            .get(&lane)
            .and_then(|slot| slot.running.as_ref())
            .is_some_and(|running| running.turn == turn);
        if current {
            self.end_turn(lane);
        }
    }

    /// §7: a turn still running at its lifecycle deadline is over.
    pub(super) fn on_lifecycle_deadline(&mut self, session: SessionRid, turn: TurnId) {
        let lanes = &mut self.owner.lanes;
        let Some(&lane) = lanes.by_session.get(&session) else {
            return;
        };
        let Some(running) = lanes.slots.get_mut(&lane).and_then(|s| s.running.as_mut()) else {
            return;
        };
        if running.turn != turn {
            return;
        }
        // Fired: nothing to cancel.
        running.deadline = None;
        self.fx.trace(FlowTrace::SessionTurnExpired);
        self.fx
            .session_event(SessionEvent::TurnExpired { session, turn });
        self.end_turn(lane);
    }

    fn end_turn(&mut self, lane: LaneId) {
        let lanes = &mut self.owner.lanes;
        let Some(running) = lanes.slots.get_mut(&lane).and_then(|s| s.running.take()) else {
            return;
        };
        if let Some(key) = running.deadline {
            self.fx.cancel(key);
        }
        if running.last {
            lanes.engine.finish_turn(lane);
            lanes.remove(lane);
        } else {
            lanes.finish(lane);
        }
    }

    /// §6, §7: the session left Open (it is replacing or closed): its lane
    /// takes no more application work.
    pub(super) fn close_lane(&mut self, session: SessionRid) {
        if let Some(&lane) = self.owner.lanes.by_session.get(&session) {
            self.owner
                .lanes
                .engine
                .set_state(lane, SessionState::Closed);
        }
    }

    /// §7, §10: the session ended: its lane is closed, the turn running now
    /// gets the lifecycle deadline, and the disconnect turn is queued behind
    /// it. Only the first call counts.
    pub(super) fn end_lane(&mut self, session: SessionRid) {
        let lanes = &mut self.owner.lanes;
        let Some(&lane) = lanes.by_session.get(&session) else {
            return;
        };
        let Some(slot) = lanes.slots.get_mut(&lane) else {
            return;
        };
        if slot.phase.ended() {
            return;
        }
        lanes.engine.set_state(lane, SessionState::Closed);
        // A closed lane admits lifecycle work: only a full one refuses it.
        slot.phase =
            match lanes
                .engine
                .submit(lane, SessionClass::Lifecycle, SessionWork::Disconnected)
            {
                Ok(()) => Phase::Ended,
                Err(_) => Phase::EndedAtFullLane,
            };
        if slot.running.is_some() {
            self.arm_lifecycle_deadline(lane);
        }
    }

    /// §6: queues the duplicate-Actor-connection callback on the replaced
    /// session's lane, which is closing now. A lane that cannot take it
    /// (full, or gone) ends the callback at once, as failed: the close
    /// follows 100 ms later all the same.
    pub(super) fn queue_replacement_callback(
        &mut self,
        session: SessionRid,
        callback: Ticket,
        actor: ActorId,
    ) {
        self.close_lane(session);
        let lanes = &mut self.owner.lanes;
        let admitted = lanes.by_session.get(&session).is_some_and(|&lane| {
            let work = SessionWork::Replaced { callback, actor };
            lanes
                .engine
                .submit(lane, SessionClass::Lifecycle, work)
                .is_ok()
        });
        if !admitted {
            self.replacement_callback_done(session, callback, false);
        }
    }

    fn arm_lifecycle_deadline(&mut self, lane: LaneId) {
        let after = self.owner.config.disconnect_deadline;
        let Some(slot) = self.owner.lanes.slots.get_mut(&lane) else {
            return;
        };
        let Some(running) = slot.running.as_mut() else {
            return;
        };
        if running.deadline.is_some() {
            return;
        }
        let timer = SessionTimer::LifecycleDeadline {
            session: slot.session,
            turn: running.turn,
        };
        running.deadline = Some(self.fx.arm(after, CoreTimer::Session(timer)));
    }
}
