//! Commands 42, 43 and 44 (§8.2): the relocation seal request, its result, and
//! the one-way route apply or abort.

use super::RequestHeader;
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId, RequestId, SessionRef,
};

/// Which seal: the relocation, and the binding it was installed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SealIdentity {
    /// The relocation.
    pub relocation: RelocationId,
    /// The session holding the binding.
    pub session: SessionRef,
    /// The binding generation the seal is on.
    pub binding: BindingGeneration,
}

/// Command 42: coordinator → session owner, install a seal (request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRelocationSeal {
    /// Correlation and deadline.
    pub request: RequestHeader,
    /// Which seal.
    pub seal: SealIdentity,
    /// The Actor being moved.
    pub actor: ActorId,
    /// Its incarnation.
    pub object_generation: ObjectGeneration,
}

/// Command 43: session owner → coordinator, the seal result. It carries no
/// message sequence and no high-water (§8.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRelocationSealed {
    /// The 42 this answers.
    pub request: RequestId,
    /// Installed, or why not.
    pub outcome: Result<(), Error>,
}

/// Command 44: one-way, no response, never retransmitted (§8.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionRelocationRoute {
    /// The target's commit: apply the target route, submit held, release.
    Commit(RouteCommit),
    /// The coordinator's abort before relay-ready: release the matching seal
    /// and submit held messages to the source route. Only the seal identity.
    Abort(SealIdentity),
}

/// The commit of 44 (§8.2), plus the target's NodeGeneration, authority and
/// lease generation: pushes from the target are judged on them (§5), so the
/// binding must learn them with the route (docs/wire.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteCommit {
    /// Which seal (relocation identity, session, binding generation).
    pub seal: SealIdentity,
    /// The Actor.
    pub actor: ActorId,
    /// Its incarnation (unchanged by relocation).
    pub object_generation: ObjectGeneration,
    /// The target's mesh.
    pub target_mesh: MeshName,
    /// The target node.
    pub target: NodeRid,
    /// The target's process lifecycle.
    pub target_node_generation: NodeGeneration,
    /// The authority owner generation after the CAS.
    pub authority: AuthorityOwnerGeneration,
    /// The target owner's lease generation.
    pub lease: OwnerLeaseGeneration,
}
