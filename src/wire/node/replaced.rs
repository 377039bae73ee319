//! Command 51, boundSessionReplaced (§6): one-way, at most once, to the
//! previous session owner of a replaced binding.

use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, SessionRef,
};

/// The Actor-authority source fence: who replaced the binding. The receiver
/// checks that the sending node is `owner` and never uses the fence to look up
/// a local Actor (§6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityFence {
    /// The Actor whose binding was replaced.
    pub actor: ActorId,
    /// Its incarnation.
    pub object_generation: ObjectGeneration,
    /// The Actor owner node (the sender).
    pub owner: NodeRid,
    /// The Actor owner's process lifecycle.
    pub node_generation: NodeGeneration,
    /// The authority owner generation.
    pub authority: AuthorityOwnerGeneration,
}

/// Command 51.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundSessionReplaced {
    /// Who replaced it.
    pub fence: AuthorityFence,
    /// The previous session: owner RID, lifecycle generation, owner id, SessionRid.
    pub previous: SessionRef,
    /// The previous session owner's lease generation.
    pub previous_lease: OwnerLeaseGeneration,
    /// The retired binding generation.
    pub retired: BindingGeneration,
}
