//! Command 51, boundSessionReplaced (§6): one-way, at most once, to the
//! previous session owner of a replaced binding.
//!
//! One variant (1); docs/wire.md "51 boundSessionReplaced".

use bytes::BytesMut;

use super::{Body, Command};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

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

impl Field for AuthorityFence {
    fn put(&self, dst: &mut BytesMut) {
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.owner.put(dst);
        self.node_generation.put(dst);
        self.authority.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            actor: r.get()?,
            object_generation: r.get()?,
            owner: r.get()?,
            node_generation: r.get()?,
            authority: r.get()?,
        })
    }
}

// 51 has one variant.
one_variant_body!(BoundSessionReplaced {
    fence,
    previous,
    previous_lease,
    retired
});
