//! Commands 42, 43 and 44 (§8.2): the relocation seal request, its result, and
//! the one-way route apply or abort.
//!
//! Variants (docs/wire.md "42", "43", "44"): 42 and 43 have one variant (1);
//! 44 has 1 commit and 2 abort. 43's body is exactly the request id and the
//! outcome: no sequence, no high-water (§8.1, §8.2).

use bytes::BytesMut;

use super::{Body, Command, RequestHeader};
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId, RequestId, SessionRef,
};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

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

impl Field for SealIdentity {
    fn put(&self, dst: &mut BytesMut) {
        self.relocation.put(dst);
        self.session.put(dst);
        self.binding.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            relocation: r.get()?,
            session: r.get()?,
            binding: r.get()?,
        })
    }
}

impl Field for RouteCommit {
    fn put(&self, dst: &mut BytesMut) {
        self.seal.put(dst);
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.target_mesh.put(dst);
        self.target.put(dst);
        self.target_node_generation.put(dst);
        self.authority.put(dst);
        self.lease.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            seal: r.get()?,
            actor: r.get()?,
            object_generation: r.get()?,
            target_mesh: r.get()?,
            target: r.get()?,
            target_node_generation: r.get()?,
            authority: r.get()?,
            lease: r.get()?,
        })
    }
}

const COMMIT: u8 = 1;
const ABORT: u8 = 2;

one_variant_body!(SessionRelocationSeal {
    request,
    seal,
    actor,
    object_generation
});

one_variant_body!(SessionRelocationSealed { request, outcome });

impl Body for SessionRelocationRoute {
    const COMMAND: Command = Command::SessionRelocationRoute;

    fn variant(&self) -> u8 {
        match self {
            SessionRelocationRoute::Commit(_) => COMMIT,
            SessionRelocationRoute::Abort(_) => ABORT,
        }
    }

    fn put_body(&self, dst: &mut BytesMut) {
        match self {
            SessionRelocationRoute::Commit(commit) => commit.put(dst),
            SessionRelocationRoute::Abort(seal) => seal.put(dst),
        }
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match variant {
            COMMIT => SessionRelocationRoute::Commit(r.get()?),
            ABORT => SessionRelocationRoute::Abort(r.get()?),
            other => return Err(Self::unknown(other)),
        })
    }
}
