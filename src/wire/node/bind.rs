//! Command 38, boundSessionBind (§5, §6): the bind request, its terminal reply
//! (exactly once), and the tombstone transition that ends a binding.

use super::RequestHeader;
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RequestId, SessionRef,
};

/// Command 38.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundSessionBind {
    /// Session owner → Actor owner: bind request.
    Request(BindRequest),
    /// Actor owner → session owner: the terminal reply, exactly once.
    Terminal(BindTerminal),
    /// Session owner → Actor owner: remove exactly this binding identity
    /// (unbind, disconnect), one-way (§6).
    Tombstone(BindTombstone),
}

/// A bind request: the three admission values, plus what the Actor owner
/// stores to reach the session later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindRequest {
    /// Correlation and deadline.
    pub request: RequestHeader,
    /// The Actor to bind.
    pub actor: ActorId,
    /// Admission value: the incarnation the caller holds.
    pub object_generation: ObjectGeneration,
    /// Admission value: the target node's process lifecycle.
    pub target_node_generation: NodeGeneration,
    /// Admission value: the authority owner generation.
    pub authority: AuthorityOwnerGeneration,
    /// Preserved, never admitted on (§5).
    pub lease: OwnerLeaseGeneration,
    /// The session being bound.
    pub session: SessionRef,
    /// The session owner's own lease generation, carried back in 51 (§6).
    pub session_lease: OwnerLeaseGeneration,
    /// The binding generation the session owner allocated.
    pub binding: BindingGeneration,
}

/// The terminal reply of a bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindTerminal {
    /// The request this ends.
    pub request: RequestId,
    /// The verified route, or the typed failure.
    pub outcome: Result<BoundRoute, Error>,
}

/// The route the Actor owner confirms (§5 "store the verified Actor route").
/// It names the owner, because a bind relayed by Message Follow is answered
/// by the target (docs/wire.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundRoute {
    /// The owner's mesh.
    pub mesh: MeshName,
    /// The owner node.
    pub owner: NodeRid,
    /// The owner's process lifecycle.
    pub node_generation: NodeGeneration,
    /// The authority owner generation.
    pub authority: AuthorityOwnerGeneration,
    /// The owner lease generation.
    pub lease: OwnerLeaseGeneration,
}

/// Why a binding ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TombstoneCause {
    /// The session disconnected (§7).
    Disconnect,
    /// The application's NotifyDisconnected on a kept connection (§7).
    Notified,
    /// The replaced previous session cleaned up after its callback (§6).
    Replaced,
}

/// Removes exactly one binding identity at the Actor owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindTombstone {
    /// The Actor.
    pub actor: ActorId,
    /// The incarnation the binding pointed to.
    pub object_generation: ObjectGeneration,
    /// The session whose binding ends.
    pub session: SessionRef,
    /// The binding generation that ends.
    pub binding: BindingGeneration,
    /// Why.
    pub cause: TombstoneCause,
}
