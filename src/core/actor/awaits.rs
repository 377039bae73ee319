//! Turns that await, and the moves that wait for them (docs/actors.md
//! "Async turns"; Y1, Y2; §8.1 L5).
//!
//! The runtime runs an Actor's handler and holds the future an async turn
//! awaits; the Actor owner decides how long the turn may await and when a
//! move waiting for it goes on, on the shard's one timer wheel:
//! - A turn awaits at most `actor_turn_deadline` in all, however often its
//!   continuations suspend again: the deadline is armed at its first
//!   suspension ([`super::Actors::turn_suspended`]). Then the turn is over
//!   ([`AwaitEvent::TurnExpired`], `actor_turn_deadline_exceeded`): the
//!   runtime drops the future, ends a request the turn answers
//!   `DeadlineExceeded`, and the lane goes on.
//! - A move asked for while the Actor's turn awaits is parked before
//!   anything is sealed, by the relocation side (src/core/relocation/
//!   parked.rs); [`crate::core::shard::ShardCore::turn_ended`] and the turn's
//!   deadline let it go on.

use std::time::Duration;

use foldhash::{HashMap, HashMapExt};

use super::Actors;
use crate::core::effects::{CoreEvent, CoreTimer};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::ids::ActorId;

/// Names one awaiting turn, from its first suspension to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AwaitId(pub u64);

/// The deadline of an awaiting turn: its `actor_turn_deadline`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwaitTimer {
    /// The Actor whose turn awaits.
    actor: ActorId,
    /// The turn.
    turn: AwaitId,
}

/// What the Actor owner asks of the shard about awaiting turns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwaitEvent {
    /// The turn awaited past `actor_turn_deadline`: it is over. Drop its
    /// future; a request it answers ends `DeadlineExceeded`; the lane goes
    /// on.
    TurnExpired {
        /// The Actor.
        actor: ActorId,
        /// The turn.
        turn: AwaitId,
    },
}

/// The awaiting turns of one shard's Actors.
#[derive(Debug)]
pub(super) struct TurnAwaits {
    turn_deadline: Duration,
    turns: HashMap<ActorId, (AwaitId, TimerKey)>,
    last: u64,
}

impl TurnAwaits {
    pub(super) fn new(turn_deadline: Duration) -> Self {
        Self {
            turn_deadline,
            turns: HashMap::new(),
            last: 0,
        }
    }

    /// The awaiting turn of `actor`, if its turn awaits.
    pub(super) fn of(&self, actor: &ActorId) -> Option<AwaitId> {
        self.turns.get(actor).map(|&(turn, _)| turn)
    }
}

impl Actors<'_> {
    /// The turn of `actor` suspended on a future: its lane stays in its
    /// turn. The first suspension arms the turn's deadline; a continuation
    /// that suspends again keeps it (and gets the same [`AwaitId`]).
    pub fn turn_suspended(&mut self, actor: &ActorId) -> AwaitId {
        let awaits = &mut self.owner.awaits;
        if let Some(turn) = awaits.of(actor) {
            return turn;
        }
        awaits.last += 1;
        let turn = AwaitId(awaits.last);
        let timer = AwaitTimer {
            actor: actor.clone(),
            turn,
        };
        let key = self.fx.arm(awaits.turn_deadline, CoreTimer::Await(timer));
        awaits.turns.insert(actor.clone(), (turn, key));
        turn
    }

    /// The awaiting turn of `actor` ended (its continuation finished, or
    /// the runtime ended it for a destroy); `false` when none awaited. The
    /// shard's core then lets the moves parked behind it go on
    /// ([`crate::core::shard::ShardCore::turn_ended`]).
    pub(crate) fn turn_ended(&mut self, actor: &ActorId) -> bool {
        let Some((_, key)) = self.owner.awaits.turns.remove(actor) else {
            return false;
        };
        self.fx.cancel(key);
        true
    }

    /// A turn's deadline fired: if that turn still awaits, it is over
    /// ([`AwaitEvent::TurnExpired`]); returns its Actor, whose parked moves
    /// may go on.
    pub(crate) fn on_await_timer(&mut self, timer: AwaitTimer) -> Option<ActorId> {
        let AwaitTimer { actor, turn } = timer;
        if self.owner.awaits.of(&actor) != Some(turn) {
            return None;
        }
        self.owner.awaits.turns.remove(&actor);
        self.fx.trace(FlowTrace::ActorTurnDeadlineExceeded);
        self.fx.event(CoreEvent::Await(AwaitEvent::TurnExpired {
            actor: actor.clone(),
            turn,
        }));
        Some(actor)
    }
}
