//! Moves parked behind an awaiting turn (docs/actors.md "Async turns"; Y2,
//! X18; §8.1 L5).
//!
//! An awaiting turn is never captured: its lane is in its turn and the
//! Actor's state is in the middle of a handler. So a move asked for while
//! the Actor's turn awaits is parked here, before anything is sealed (the
//! 42→43 seal is never delayed by an awaiting turn, X18), and the decision
//! is the core's, made once in [`Relocations::relocate`] for the runtime,
//! a Spot's move and the simulator alike:
//! - it keeps the RelocationId it was given, and its caller's completion is
//!   [`RelocationEvent::Finished`] as for any move;
//! - when the turn ends (or is over at its deadline), the moves parked
//!   behind it go on, in the order they were asked for
//!   ([`RelocationEvent::Unparked`], counted `relocation_unparked`), each
//!   checked again as a new move would be;
//! - one whose turn has not ended within the prepare bound ends
//!   `DeadlineExceeded` with nothing sealed or moved (L5: an abort before
//!   relay-ready).
//!
//! A parked move does not make its Actor "relocating": a destroy meanwhile
//! ends the awaiting turn first, and the move then ends `StaleLocation`.

use super::{RelocationEvent, RelocationTimer, Relocations};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, NodeRid, RelocationId};

/// One parked move.
#[derive(Debug)]
struct ParkedMove {
    relocation: RelocationId,
    actor: ActorId,
    target: NodeRid,
    /// Its prepare bound.
    deadline: TimerKey,
}

/// The parked moves of a shard, in the order they were asked for (few: one
/// per `relocate` of an Actor whose turn awaits).
#[derive(Debug, Default)]
pub(super) struct ParkedMoves {
    moves: Vec<ParkedMove>,
}

impl ParkedMoves {
    /// How many moves are parked.
    #[cfg(feature = "testing")]
    pub(super) fn len(&self) -> usize {
        self.moves.len()
    }
}

impl Relocations<'_> {
    /// Parks a checked move of `actor`, whose turn awaits, under the
    /// RelocationId it was given.
    pub(super) fn park(&mut self, relocation: RelocationId, actor: &ActorId, target: NodeRid) {
        self.fx.trace(FlowTrace::RelocationWaitsForTurn);
        let bound = self.state.config.prepare_timeout;
        let deadline = self.arm(bound, RelocationTimer::Parked(relocation));
        self.state.parked.moves.push(ParkedMove {
            relocation,
            actor: actor.clone(),
            target,
            deadline,
        });
    }

    /// `actor`'s awaiting turn ended, or was over at its deadline: the moves
    /// parked behind it go on, in order, each checked again (the first may
    /// start; a later one then finds the Actor relocating).
    pub(crate) fn unpark(&mut self, actor: &ActorId) {
        let parked = &mut self.state.parked.moves;
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(parked)
            .into_iter()
            .partition(|p| p.actor == *actor);
        *parked = others;
        for ParkedMove {
            relocation,
            actor,
            target,
            deadline,
        } in mine
        {
            self.fx.cancel(deadline);
            self.fx.trace(FlowTrace::RelocationUnparked);
            self.event(RelocationEvent::Unparked {
                relocation,
                actor: actor.clone(),
            });
            self.relocate_as(relocation, &actor, target);
        }
    }

    /// A parked move's prepare bound passed with its turn still awaiting:
    /// it ends `DeadlineExceeded`, nothing sealed or moved.
    pub(super) fn on_parked_deadline(&mut self, relocation: RelocationId) {
        let parked = &mut self.state.parked.moves;
        let Some(at) = parked.iter().position(|p| p.relocation == relocation) else {
            return;
        };
        let ParkedMove { actor, .. } = parked.remove(at);
        self.event(RelocationEvent::Finished {
            relocation,
            actor,
            outcome: Err(Error::new(Reason::Deadline)),
        });
    }
}
