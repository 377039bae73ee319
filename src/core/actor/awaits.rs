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
//!   anything is sealed ([`super::Actors::park_move`],
//!   `relocation_waits_for_turn`): the 42→43 seal is never delayed by an
//!   awaiting turn (X18). When the turn ends, the moves parked behind it go
//!   on in the order they were asked for ([`AwaitEvent::ParkedReady`]); one
//!   whose turn has not ended within the prepare bound ends
//!   `DeadlineExceeded` with nothing sealed or moved
//!   ([`AwaitEvent::ParkedExpired`]; L5: an abort before relay-ready).

use std::collections::BTreeMap;
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

/// Names one move parked behind an awaiting turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParkId(pub u64);

/// A deadline of an awaiting turn or of a parked move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwaitTimer {
    /// The turn's `actor_turn_deadline`.
    Turn {
        /// The Actor whose turn awaits.
        actor: ActorId,
        /// The turn.
        turn: AwaitId,
    },
    /// The parked move's prepare bound.
    Parked(ParkId),
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
    /// The turn this move was parked behind ended: start the move now.
    ParkedReady {
        /// The move.
        park: ParkId,
    },
    /// The turn did not end within the move's prepare bound: the move ends
    /// `DeadlineExceeded`, with nothing sealed.
    ParkedExpired {
        /// The move.
        park: ParkId,
    },
}

/// The awaiting turns of one shard's Actors and the moves parked behind
/// them.
#[derive(Debug)]
pub(super) struct TurnAwaits {
    turn_deadline: Duration,
    prepare: Duration,
    turns: HashMap<ActorId, (AwaitId, TimerKey)>,
    /// In the order they were parked.
    parked: BTreeMap<ParkId, (ActorId, TimerKey)>,
    last: u64,
    last_parked: u64,
}

impl TurnAwaits {
    pub(super) fn new(turn_deadline: Duration, prepare: Duration) -> Self {
        Self {
            turn_deadline,
            prepare,
            turns: HashMap::new(),
            parked: BTreeMap::new(),
            last: 0,
            last_parked: 0,
        }
    }

    /// The awaiting turn of `actor`, if its turn awaits.
    pub(super) fn of(&self, actor: &ActorId) -> Option<AwaitId> {
        self.turns.get(actor).map(|&(turn, _)| turn)
    }

    /// How many moves are parked.
    #[cfg(feature = "testing")]
    pub(super) fn parked_len(&self) -> usize {
        self.parked.len()
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
        let timer = AwaitTimer::Turn {
            actor: actor.clone(),
            turn,
        };
        let key = self.fx.arm(awaits.turn_deadline, CoreTimer::Await(timer));
        awaits.turns.insert(actor.clone(), (turn, key));
        turn
    }

    /// The awaiting turn of `actor` ended (its continuation finished, or
    /// the runtime ended it for a destroy): the moves parked behind it go
    /// on.
    pub fn turn_ended(&mut self, actor: &ActorId) {
        if let Some((_, key)) = self.owner.awaits.turns.remove(actor) {
            self.fx.cancel(key);
            self.release_parked(actor);
        }
    }

    /// A move of `actor`, whose turn awaits, waits for the turn to end, at
    /// most the prepare bound; nothing is sealed meanwhile.
    pub fn park_move(&mut self, actor: &ActorId) -> ParkId {
        self.fx.trace(FlowTrace::RelocationWaitsForTurn);
        let awaits = &mut self.owner.awaits;
        awaits.last_parked += 1;
        let park = ParkId(awaits.last_parked);
        let key = self
            .fx
            .arm(awaits.prepare, CoreTimer::Await(AwaitTimer::Parked(park)));
        awaits.parked.insert(park, (actor.clone(), key));
        park
    }

    pub(crate) fn on_await_timer(&mut self, timer: AwaitTimer) {
        match timer {
            AwaitTimer::Turn { actor, turn } => {
                if self.owner.awaits.of(&actor) != Some(turn) {
                    return;
                }
                self.owner.awaits.turns.remove(&actor);
                self.fx.trace(FlowTrace::ActorTurnDeadlineExceeded);
                self.fx.event(CoreEvent::Await(AwaitEvent::TurnExpired {
                    actor: actor.clone(),
                    turn,
                }));
                self.release_parked(&actor);
            }
            AwaitTimer::Parked(park) => {
                if self.owner.awaits.parked.remove(&park).is_some() {
                    self.fx
                        .event(CoreEvent::Await(AwaitEvent::ParkedExpired { park }));
                }
            }
        }
    }

    fn release_parked(&mut self, actor: &ActorId) {
        let ready: Vec<ParkId> = self
            .owner
            .awaits
            .parked
            .iter()
            .filter(|(_, (parked, _))| parked == actor)
            .map(|(&park, _)| park)
            .collect();
        for park in ready {
            if let Some((_, key)) = self.owner.awaits.parked.remove(&park) {
                self.fx.cancel(key);
                self.fx
                    .event(CoreEvent::Await(AwaitEvent::ParkedReady { park }));
            }
        }
    }
}
