//! Turns that await (docs/actors.md "Async turns"; issue 21 item 3): an
//! Actor's handler suspends its turn on a future ([`AsyncTurn`]) and its
//! continuation finishes the turn once the future is ready.
//!
//! Rules this module keeps:
//! - The lane stays in its turn while the turn awaits: the Actor's next
//!   message waits (turns are never reentrant), and a SpotWide Spot's gate
//!   stays held, since the Spot is one serial context (§5, §11). The shard
//!   serves everything else meanwhile: the future is a task of the shard's
//!   executor, polled between its loop turns, never blocking it.
//! - An awaiting turn is never captured. A move asked for while the Actor's
//!   turn awaits is parked before anything is sealed (so the 42→43 seal is
//!   never delayed by an awaiting turn, X18) and starts as soon as the turn
//!   ends, between two turns; if the turn has not ended within the move's
//!   prepare bound, the move ends `DeadlineExceeded` with nothing sealed or
//!   moved (L5: an abort before relay-ready).
//! - A turn awaits at most `actor_turn_deadline` in all (however often its
//!   continuations suspend again): then its future is dropped, its
//!   continuation never runs, a request it answers ends `DeadlineExceeded`,
//!   a timer tick counts as done, and the lane goes on
//!   (`actor_turn_deadline_exceeded`). Startup keeps the deadline below the
//!   seal timeout minus the prepare timeout.
//! - Destroying the Actor ends its awaiting turn first (`StaleLocation` to
//!   a request it answers).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};

use super::actors::TurnEnd;
use super::{ShardHandle, ShardState};
use crate::core::lane::LaneId;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, NodeRid, ObjectGeneration, SpotId};
use crate::runtime::app::actor::{AsyncTurn, Resume};
use crate::runtime::deadlines::FifoDeadlines;
use crate::runtime::executor::{completion, or_abort, Completer, Completion};

/// Which lane engine a turn holds a lane of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnLane {
    /// A PerActor Actor's own lane.
    Actor(LaneId),
    /// A SpotWide Spot's lane, the Spot's gate.
    Spot(LaneId),
    /// No lane: lifecycle work (a join or disconnect callback) that found
    /// its lane full runs at once rather than be lost (actors.rs).
    Outside,
}

/// A turn that awaits.
struct Awaiting {
    actor: ActorId,
    generation: ObjectGeneration,
    lane: TurnLane,
    end: TurnEnd,
    /// Held for its drop, which ends the task's await (the deadline, a
    /// destroy).
    _abort: Completer<()>,
}

/// A move that waits for an awaiting turn to end before it starts.
enum Parked {
    /// `Node::relocate` of the Actor.
    Actor {
        actor: ActorId,
        target: NodeRid,
        reply: crate::runtime::MoveReply,
    },
    /// The next member of a moving SpotWide Spot.
    SpotMember { spot: SpotId, actor: ActorId },
}

impl Parked {
    fn actor(&self) -> &ActorId {
        match self {
            Parked::Actor { actor, .. } | Parked::SpotMember { actor, .. } => actor,
        }
    }
}

type TurnFuture = Pin<Box<dyn Future<Output = Resume>>>;

/// The shard's awaiting turns and the moves waiting for them.
pub(super) struct Awaits {
    turns: HashMap<u64, Awaiting>,
    by_actor: HashMap<ActorId, u64>,
    last: u64,
    deadlines: FifoDeadlines<u64>,
    /// Futures to start as tasks once the shard's state is not borrowed.
    to_start: Vec<(u64, TurnFuture, Completion<()>)>,
    parked: HashMap<u64, Parked>,
    parked_deadlines: FifoDeadlines<u64>,
    last_parked: u64,
}

impl Awaits {
    pub(super) fn new(turn_deadline: std::time::Duration, prepare: std::time::Duration) -> Self {
        Self {
            turns: HashMap::new(),
            by_actor: HashMap::new(),
            last: 0,
            deadlines: FifoDeadlines::new(turn_deadline),
            to_start: Vec::new(),
            parked: HashMap::new(),
            parked_deadlines: FifoDeadlines::new(prepare),
            last_parked: 0,
        }
    }

    /// Whether a turn of `actor` awaits.
    pub(super) fn awaits(&self, actor: &ActorId) -> bool {
        self.by_actor.contains_key(actor)
    }

    /// How long until the next turn or parked-move deadline.
    pub(super) fn next_in(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        match (
            self.deadlines.next_in(now),
            self.parked_deadlines.next_in(now),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl ShardState {
    /// The turn of `actor` suspended on `turn`: its lane stays in its turn
    /// until the continuation ends it. A continuation that suspends again
    /// keeps its turn's first deadline.
    pub(super) fn suspend_turn(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        lane: TurnLane,
        end: TurnEnd,
        turn: AsyncTurn,
        again: Option<u64>,
    ) {
        let (abort, aborted) = completion();
        let id = again.unwrap_or_else(|| {
            self.awaits.last += 1;
            self.awaits.last
        });
        if again.is_none() {
            self.awaits.deadlines.arm(id, self.wall);
        }
        self.awaits.by_actor.insert(actor.clone(), id);
        let awaiting = Awaiting {
            actor,
            generation,
            lane,
            end,
            _abort: abort,
        };
        self.awaits.turns.insert(id, awaiting);
        self.awaits.to_start.push((id, turn.future, aborted));
    }

    /// The awaited future of turn `id` is ready: its continuation runs as
    /// the rest of the turn, with the Actor, unless the turn was ended
    /// meanwhile (its deadline, a destroy).
    fn resume_turn(&mut self, id: u64, resume: Option<Resume>) {
        let Some(resume) = resume else {
            return;
        };
        let Some(awaiting) = self.awaits.turns.remove(&id) else {
            return;
        };
        self.awaits.by_actor.remove(&awaiting.actor);
        let instance = self
            .host
            .actors
            .get_mut(&awaiting.actor)
            .filter(|h| h.generation == awaiting.generation)
            .and_then(|h| h.instance.take());
        let Some(mut instance) = instance else {
            self.awaits.deadlines.disarm(id);
            return self.end_awaiting(awaiting, Reason::StaleLocation.into());
        };
        let (outcome, suspended) = self.continue_turn(&awaiting.actor, &mut *instance, resume);
        if let Some(hosted) = self.host.actors.get_mut(&awaiting.actor) {
            hosted.instance = Some(instance);
        }
        let Awaiting {
            actor,
            generation,
            lane,
            end,
            _abort: _,
        } = awaiting;
        match suspended {
            Some(turn) => self.suspend_turn(actor, generation, lane, end, turn, Some(id)),
            None => {
                self.awaits.deadlines.disarm(id);
                self.end_turn(&actor, end, outcome);
                self.finish_turn_lane(lane);
                self.start_parked(&actor);
            }
        }
        // What the continuation sent goes now; its lane's next turn runs in
        // the loop's next round of Actor work.
        self.route_outgoing();
    }

    /// Ends an awaiting turn without its continuation: a request it
    /// answers ends with `error`, a timer tick counts as done, the lane
    /// goes on, and a move waiting for it starts.
    fn end_awaiting(&mut self, awaiting: Awaiting, error: Error) {
        let Awaiting {
            actor, lane, end, ..
        } = awaiting;
        self.end_turn(&actor, end, Some(Err(error)));
        self.finish_turn_lane(lane);
        self.start_parked(&actor);
    }

    /// The Actor is being destroyed: its awaiting turn, if any, ends first.
    pub(super) fn end_turn_of(&mut self, actor: &ActorId) {
        let Some(id) = self.awaits.by_actor.remove(actor) else {
            return;
        };
        self.awaits.deadlines.disarm(id);
        if let Some(awaiting) = self.awaits.turns.remove(&id) {
            self.end_awaiting(awaiting, Reason::StaleLocation.into());
        }
    }

    /// Turns whose deadline passed end now (`DeadlineExceeded`), and moves
    /// parked past their prepare bound end with nothing sealed.
    pub(super) fn expire_awaits(&mut self) {
        for id in self.awaits.deadlines.expire(self.wall) {
            let Some(awaiting) = self.awaits.turns.remove(&id) else {
                continue;
            };
            self.awaits.by_actor.remove(&awaiting.actor);
            self.core.trace(FlowTrace::ActorTurnDeadlineExceeded);
            tracing::debug!(actor = %awaiting.actor, "an awaiting turn passed its deadline");
            self.end_awaiting(awaiting, Reason::Deadline.into());
        }
        for id in self.awaits.parked_deadlines.expire(self.wall) {
            match self.awaits.parked.remove(&id) {
                Some(Parked::Actor { reply, .. }) => reply.send(Err(Reason::Deadline.into())),
                Some(Parked::SpotMember { spot, .. }) => {
                    self.finish_spot_move(&spot, Err(Reason::Deadline.into()));
                }
                None => {}
            }
        }
    }

    /// `Node::relocate` of an Actor whose turn awaits: it waits, parked,
    /// for the turn to end (at most the prepare bound).
    pub(super) fn park_move(
        &mut self,
        actor: ActorId,
        target: NodeRid,
        reply: crate::runtime::MoveReply,
    ) {
        self.park(Parked::Actor {
            actor,
            target,
            reply,
        });
    }

    /// A Spot move's next member awaits: the Spot move waits for it.
    pub(super) fn park_spot_member(&mut self, spot: SpotId, actor: ActorId) {
        self.park(Parked::SpotMember { spot, actor });
    }

    fn park(&mut self, parked: Parked) {
        self.core.trace(FlowTrace::RelocationWaitsForTurn);
        self.awaits.last_parked += 1;
        let id = self.awaits.last_parked;
        self.awaits.parked_deadlines.arm(id, self.wall);
        self.awaits.parked.insert(id, parked);
    }

    /// The moves parked behind `actor`'s turn start now, in the order they
    /// were asked for.
    fn start_parked(&mut self, actor: &ActorId) {
        let mut ready: Vec<u64> = self
            .awaits
            .parked
            .iter()
            .filter(|(_, parked)| parked.actor() == actor)
            .map(|(&id, _)| id)
            .collect();
        ready.sort_unstable();
        for id in ready {
            self.awaits.parked_deadlines.disarm(id);
            match self.awaits.parked.remove(&id) {
                Some(Parked::Actor {
                    actor,
                    target,
                    reply,
                }) => self.start_relocation(&actor, target, reply),
                Some(Parked::SpotMember { spot, .. }) => self.next_spot_member(&spot),
                None => {}
            }
        }
    }
}

impl ShardHandle {
    /// Starts the awaited futures of the turns that suspended as tasks of
    /// the shard's executor; each resumes its turn when ready, or ends at
    /// its abort (the deadline, a destroy).
    pub(super) fn start_actor_awaits(self: &Rc<Self>) {
        let started = std::mem::take(&mut self.state.borrow_mut().awaits.to_start);
        for (id, future, aborted) in started {
            let shard = Rc::clone(self);
            self.spawner.spawn(async move {
                let resume = or_abort(future, aborted).await;
                shard.state.borrow_mut().resume_turn(id, resume);
            });
        }
    }
}

/// The value a continuation gives back for a request, as `Actor::handle`'s.
pub(super) type TurnOutcome = Option<Result<Bytes, Error>>;
