//! A SpotWide Spot moves as one unit (§5, §8; docs/relocation.md "Spots"):
//! its Actors share one lane, the Spot's common gate, so only one node's
//! Spot lane may ever dispatch them. The move's phases are decided here,
//! once:
//! - it starts only for a SpotWide Spot whose home is this shard and that
//!   has Actors (an empty Spot would not be created at the target: it stays,
//!   `NotRelocatable`), and not while it is moving already;
//! - the Spot's lane is move-sealed for the whole move
//!   ([`RelocationEvent::SpotSealed`]): its Actors' work is held, in order,
//!   and no new Actor joins the Spot meanwhile (a BindOrGet into it ends
//!   `RelocationSealed`);
//! - its Actors move one after the other, in ActorId order, each by the
//!   ordinary move of one Actor (a member whose turn awaits is parked like
//!   any other move, parked.rs); each capture takes that Actor's share of
//!   the sealed lane; a member destroyed meanwhile is skipped;
//! - the first failure ends the Spot's move: the Actors already moved stay
//!   at the target, in the Spot there, and the rest keep the Spot here,
//!   whose lane reopens (a second move takes them);
//! - when the last Actor committed the Spot leaves this shard
//!   ([`RelocationEvent::SpotFinished`] names what to drop).
//!
//! Each member's move ends with a [`RelocationEvent::Finished`] that the
//! shard core takes back itself ([`crate::core::shard::ShardCore::poll_event`]),
//! after the step that ended it, to start the next.

use std::collections::VecDeque;

use foldhash::HashMap;

use super::{RelocationEvent, RelocationOwner, Relocations};
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, NodeRid, RelocationId, SpotId};

/// A Spot on its way to `target`.
#[derive(Debug)]
struct SpotMove {
    target: NodeRid,
    /// Its Actors still to move, in order.
    remaining: VecDeque<ActorId>,
}

/// The Spots moving away from this shard, and which Spot each member's
/// relocation belongs to.
#[derive(Debug, Default)]
pub(super) struct SpotMoves {
    moves: HashMap<SpotId, SpotMove>,
    of: HashMap<RelocationId, SpotId>,
}

impl RelocationOwner {
    /// Whether the Spot is moving away (no Actor may join it meanwhile).
    pub fn spot_moving(&self, spot: &SpotId) -> bool {
        self.spot_moves.moves.contains_key(spot)
    }

    /// Whether `relocation` moves an Actor with its Spot: its capture takes
    /// the Actor's share of the Spot's sealed lane.
    pub fn moves_with_spot(&self, relocation: RelocationId) -> bool {
        self.spot_moves.of.contains_key(&relocation)
    }
}

impl Relocations<'_> {
    /// `relocate_spot`: starts moving the SpotWide Spot `spot`, whose home
    /// is this shard, to `target`. Its outcome is
    /// [`RelocationEvent::SpotFinished`].
    pub fn relocate_spot(&mut self, spot: &SpotId, target: NodeRid) -> Result<(), Error> {
        if self.owner.is_fenced() {
            return Err(Reason::LeaseExpired.into());
        }
        let Some(hosted) = self.owner.spot(spot) else {
            return Err(Reason::StaleLocation.into());
        };
        let Some(lane) = hosted.lane else {
            // A PerActor Spot has no common gate: its Actors do not move.
            return Err(Reason::NotRelocatable.into());
        };
        if self.state.spot_moves.moves.contains_key(spot) {
            return Err(Reason::RelocationSealed.into());
        }
        if target == self.owner.identity().node {
            return Err(Reason::RelocationTargetInvalid.into());
        }
        let members = self.owner.spot_members(spot);
        if members.is_empty() {
            return Err(Reason::NotRelocatable.into());
        }
        let spot_move = SpotMove {
            target,
            remaining: members.into(),
        };
        self.state.spot_moves.moves.insert(spot.clone(), spot_move);
        self.event(RelocationEvent::SpotSealed {
            spot: spot.clone(),
            lane,
        });
        self.next_member(spot);
        Ok(())
    }

    /// Starts the next member's move, or ends the Spot's move.
    fn next_member(&mut self, spot: &SpotId) {
        loop {
            let Some(spot_move) = self.state.spot_moves.moves.get_mut(spot) else {
                return;
            };
            let target = spot_move.target;
            let Some(actor) = spot_move.remaining.pop_front() else {
                return self.finish_spot(spot, Ok(()));
            };
            match self.relocate(&actor, target) {
                Ok(relocation) => {
                    self.state.spot_moves.of.insert(relocation, spot.clone());
                    return;
                }
                // Destroyed meanwhile: nothing of it is left to move.
                Err(error) if error.reason() == Reason::StaleLocation => {}
                Err(error) => return self.finish_spot(spot, Err(error)),
            }
        }
    }

    /// The move of one member of a moving Spot ended; `false` when
    /// `relocation` is no Spot's (the caller of `relocate` gets it).
    pub(crate) fn member_moved(
        &mut self,
        relocation: RelocationId,
        actor: &ActorId,
        outcome: &Result<ActorRef, Error>,
    ) -> bool {
        let Some(spot) = self.state.spot_moves.of.remove(&relocation) else {
            return false;
        };
        match outcome {
            Ok(_) => self.next_member(&spot),
            // Destroyed while its move was parked: skipped.
            Err(error) if error.reason() == Reason::StaleLocation && !self.owner.hosts(actor) => {
                self.next_member(&spot);
            }
            Err(error) => self.finish_spot(&spot, Err(error.clone())),
        }
        true
    }

    /// Ends the Spot's move: committed with no Actor left here, the Spot
    /// leaves this shard; otherwise its lane reopens.
    fn finish_spot(&mut self, spot: &SpotId, outcome: Result<(), Error>) {
        if self.state.spot_moves.moves.remove(spot).is_none() {
            return;
        }
        let left = outcome.is_ok() && self.owner.spot_members(spot).is_empty();
        let gone = if left {
            self.actors().remove_spot(spot)
        } else {
            None
        };
        self.event(RelocationEvent::SpotFinished {
            spot: spot.clone(),
            outcome,
            gone,
        });
    }
}
