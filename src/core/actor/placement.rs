//! Where a hosted Actor runs on its shard (§1, §5, §11): its type, its
//! current Spot, the lane its turns pass and the slot of its instance.
//!
//! This is part of the one hosted-actor registry ([`super::ActorOwner`]):
//! the runtime keeps only what the core cannot hold (the instance, a user
//! value, and a Spot's callbacks), each in a table indexed by the
//! [`InstanceSlot`] the registry names. So there is one answer to "is this
//! Actor hosted here, which incarnation, on which lane, in which Spot", and
//! it is the core's:
//! - an Actor belongs to exactly one current Spot, fixed when it is hosted:
//!   its type's Entry Spot, or the User Spot it was created into (§1);
//!   disconnect notices never change it (§7);
//! - its lane is the execution mode's (§5): a PerActor Actor's own
//!   Actor-delivery lane, or a SpotWide Spot's one lane shared by the Spot's
//!   Actors (its common gate);
//! - a turn runs only on the incarnation it was admitted for
//!   ([`super::ActorOwner::turn_slot`], §4, X6).

use crate::core::lane::LaneId;
use crate::ids::SpotId;

/// The index of an Actor's instance (or a Spot's callbacks) in the
/// runtime's table. The registry names it; the runtime holds what it
/// indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InstanceSlot(pub usize);

/// The lane an Actor's turns pass (§5 execution modes, §11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorLane {
    /// PerActor: the Actor's own Actor-delivery lane.
    Own(LaneId),
    /// SpotWide: its Spot's lane, shared by all the Spot's Actors.
    Spot(LaneId),
}

impl ActorLane {
    /// The Spot lane, for a SpotWide Actor.
    pub fn spot_gate(self) -> Option<LaneId> {
        match self {
            ActorLane::Spot(lane) => Some(lane),
            ActorLane::Own(_) => None,
        }
    }
}

/// Where a hosted Actor runs: what the runtime needs to run its turns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Its type's name: the factory that built it (a relocation's target
    /// builds it with the same one).
    pub actor_type: String,
    /// The User Spot it belongs to; `None` for its type's Entry Spot.
    pub user_spot: Option<SpotId>,
    /// Its lane.
    pub lane: ActorLane,
    /// Its instance in the runtime's table.
    pub slot: InstanceSlot,
}

/// A User Spot whose home is this shard (§1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostedSpot {
    /// The Spot kind it was created as.
    pub kind: String,
    /// SpotWide: the Spot's lane, its common gate (§5); `None` for PerActor.
    pub lane: Option<LaneId>,
    /// Its handle in the runtime's table.
    pub slot: InstanceSlot,
}
