//! Turns that await (docs/actors.md "Async turns"; issue 21 item 3): an
//! Actor's handler suspends its turn on a future ([`AsyncTurn`]) and its
//! continuation finishes the turn once the future is ready.
//!
//! The rules (how long a turn may await, when a move parked behind it goes
//! on) are the core's (src/core/actor/awaits.rs), on the shard's one timer
//! wheel; this module holds what the core cannot: the future, the
//! continuation, the turn's place on its lane and the move's reply.
//! - The lane stays in its turn while the turn awaits: the Actor's next
//!   message waits (turns are never reentrant), and a SpotWide Spot's gate
//!   stays held, since the Spot is one serial context (§5, §11). The shard
//!   serves everything else meanwhile: the future is a task of the shard's
//!   executor, polled between its loop turns, never blocking it.
//! - An awaiting turn is never captured: a move asked for meanwhile is
//!   parked by the core, which starts it when the turn ends (this module
//!   reports that: `ShardCore::turn_ended`) or ends it `DeadlineExceeded`
//!   with nothing sealed (src/core/relocation/parked.rs).
//! - A turn over at its deadline ([`AwaitEvent::TurnExpired`]): its future
//!   is dropped, its continuation never runs, a request it answers ends
//!   `DeadlineExceeded`, a timer tick counts as done, and the lane goes on.
//!   Startup keeps the deadline below the seal timeout minus the prepare
//!   timeout.
//! - Destroying the Actor ends its awaiting turn first (`StaleLocation` to
//!   a request it answers).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use foldhash::HashMap;

use super::actors::TurnEnd;
use super::{ShardHandle, ShardState};
use crate::core::actor::{AwaitEvent, AwaitId};
use crate::core::lane::LaneId;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ObjectGeneration};
use crate::runtime::app::actor::{AsyncTurn, Resume};
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

type TurnFuture = Pin<Box<dyn Future<Output = Resume>>>;

/// The shard's awaiting turns, as the core names them.
#[derive(Default)]
pub(super) struct Awaits {
    turns: HashMap<AwaitId, Awaiting>,
    /// Futures to start as tasks once the shard's state is not borrowed.
    to_start: Vec<(AwaitId, TurnFuture, Completion<()>)>,
}

impl ShardState {
    /// The turn of `actor` suspended on `turn`: its lane stays in its turn
    /// until the continuation ends it. A continuation that suspends again
    /// keeps its turn's first deadline (the core's).
    pub(super) fn suspend_turn(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        lane: TurnLane,
        end: TurnEnd,
        turn: AsyncTurn,
    ) {
        let (abort, aborted) = completion();
        let now = self.now();
        let id = self.core.actors(now).turn_suspended(&actor);
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
    fn resume_turn(&mut self, id: AwaitId, resume: Option<Resume>) {
        let Some(resume) = resume else {
            return;
        };
        let Some(awaiting) = self.awaits.turns.remove(&id) else {
            return;
        };
        // The incarnation the turn began on, or none (X6).
        let owner = self.core.actor_owner();
        let slot = owner.turn_slot(&awaiting.actor, awaiting.generation);
        let instance = slot.and_then(|slot| {
            let taken = self.host.instances.get_mut(slot.0)?.actor.take()?;
            Some((slot, taken))
        });
        let Some((slot, mut instance)) = instance else {
            return self.end_awaiting(awaiting, Reason::StaleLocation.into());
        };
        let (outcome, suspended) = self.continue_turn(&awaiting.actor, &mut *instance, resume);
        self.put_back(slot, instance);
        let Awaiting {
            actor,
            generation,
            lane,
            end,
            _abort: _,
        } = awaiting;
        match suspended {
            Some(turn) => self.suspend_turn(actor, generation, lane, end, turn),
            None => {
                self.end_turn(&actor, end, outcome);
                self.finish_turn_lane(lane);
                let now = self.now();
                self.core.turn_ended(now, &actor);
            }
        }
        // What the continuation sent goes now; its lane's next turn runs in
        // the loop's next round of Actor work.
        self.route_outgoing();
    }

    /// Ends an awaiting turn without its continuation: a request it
    /// answers ends with `error`, a timer tick counts as done, the lane
    /// goes on, and the core lets a move waiting for it start.
    fn end_awaiting(&mut self, awaiting: Awaiting, error: Error) {
        let actor = awaiting.actor.clone();
        self.drop_awaiting(awaiting, error);
        let now = self.now();
        self.core.turn_ended(now, &actor);
    }

    /// Ends the turn's work on the runtime's side: its answer, its lane.
    /// Dropping the `Awaiting` drops its abort, which ends the future's task.
    fn drop_awaiting(&mut self, awaiting: Awaiting, error: Error) {
        let Awaiting {
            actor, lane, end, ..
        } = awaiting;
        self.end_turn(&actor, end, Some(Err(error)));
        self.finish_turn_lane(lane);
    }

    /// The Actor is being destroyed: its awaiting turn, if any, ends first.
    pub(super) fn end_turn_of(&mut self, actor: &ActorId) {
        let Some(id) = self.core.actor_owner().awaiting(actor) else {
            return;
        };
        if let Some(awaiting) = self.awaits.turns.remove(&id) {
            self.end_awaiting(awaiting, Reason::StaleLocation.into());
        }
    }

    /// What the core decided about an awaiting turn.
    pub(super) fn await_event(&mut self, event: AwaitEvent) {
        let AwaitEvent::TurnExpired { actor, turn } = event;
        tracing::debug!(%actor, "an awaiting turn passed its deadline");
        if let Some(awaiting) = self.awaits.turns.remove(&turn) {
            self.drop_awaiting(awaiting, Reason::Deadline.into());
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
