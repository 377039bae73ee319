//! Command 38, boundSessionBind (§5, §6): the bind request, its terminal reply
//! (exactly once), and the tombstone transition that ends a binding.
//!
//! Variants (docs/wire.md "38 boundSessionBind"): 1 request, 2 terminal,
//! 3 tombstone. The tombstone is a transition of the binding 38 created (§6
//! "a tombstone transition of boundSessionBind(38)"), so it is a variant here.

use bytes::{BufMut, BytesMut};

use super::{Body, Command, RequestHeader};
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RequestId, SessionRef,
};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

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
#[repr(u8)]
pub enum TombstoneCause {
    /// The session disconnected (§7).
    Disconnect = 1,
    /// The application's NotifyDisconnected on a kept connection (§7).
    Notified = 2,
    /// The replaced previous session cleaned up after its callback (§6).
    Replaced = 3,
}

impl TombstoneCause {
    /// The cause's wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The cause for a wire code, if the code names one.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Disconnect,
            2 => Self::Notified,
            3 => Self::Replaced,
            _ => return None,
        })
    }
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

impl Field for TombstoneCause {
    fn put(&self, dst: &mut BytesMut) {
        dst.put_u8(self.code());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let code = r.u8()?;
        Self::from_code(code).ok_or(WireError::UnknownTombstoneCause(code))
    }
}

impl Field for BoundRoute {
    fn put(&self, dst: &mut BytesMut) {
        self.mesh.put(dst);
        self.owner.put(dst);
        self.node_generation.put(dst);
        self.authority.put(dst);
        self.lease.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            mesh: r.get()?,
            owner: r.get()?,
            node_generation: r.get()?,
            authority: r.get()?,
            lease: r.get()?,
        })
    }
}

impl Field for BindRequest {
    fn put(&self, dst: &mut BytesMut) {
        self.request.put(dst);
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.target_node_generation.put(dst);
        self.authority.put(dst);
        self.lease.put(dst);
        self.session.put(dst);
        self.session_lease.put(dst);
        self.binding.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            request: r.get()?,
            actor: r.get()?,
            object_generation: r.get()?,
            target_node_generation: r.get()?,
            authority: r.get()?,
            lease: r.get()?,
            session: r.get()?,
            session_lease: r.get()?,
            binding: r.get()?,
        })
    }
}

impl Field for BindTombstone {
    fn put(&self, dst: &mut BytesMut) {
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.session.put(dst);
        self.binding.put(dst);
        self.cause.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            actor: r.get()?,
            object_generation: r.get()?,
            session: r.get()?,
            binding: r.get()?,
            cause: r.get()?,
        })
    }
}

const REQUEST: u8 = 1;
const TERMINAL: u8 = 2;
const TOMBSTONE: u8 = 3;

impl Body for BoundSessionBind {
    const COMMAND: Command = Command::BoundSessionBind;

    fn variant(&self) -> u8 {
        match self {
            BoundSessionBind::Request(_) => REQUEST,
            BoundSessionBind::Terminal(_) => TERMINAL,
            BoundSessionBind::Tombstone(_) => TOMBSTONE,
        }
    }

    fn put_body(&self, dst: &mut BytesMut) {
        match self {
            BoundSessionBind::Request(request) => request.put(dst),
            BoundSessionBind::Terminal(terminal) => {
                terminal.request.put(dst);
                terminal.outcome.put(dst);
            }
            BoundSessionBind::Tombstone(tombstone) => tombstone.put(dst),
        }
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match variant {
            REQUEST => BoundSessionBind::Request(r.get()?),
            TERMINAL => BoundSessionBind::Terminal(BindTerminal {
                request: r.get()?,
                outcome: r.get()?,
            }),
            TOMBSTONE => BoundSessionBind::Tombstone(r.get()?),
            other => return Err(Self::unknown(other)),
        })
    }
}
