//! Command 36, boundSessionSend (§5): an Actor's push to its bound session, or
//! its request to close the connection. One-way; judged by the session owner
//! on the four generation values only (§5, §8.1).
//!
//! Variants (docs/wire.md "36 boundSessionSend"): 1 push, 2 close.

use bytes::{Bytes, BytesMut};

use super::{Body, Command};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, NodeGeneration, ObjectGeneration,
    PacketKey, SessionRef,
};
use crate::wire::client::CloseReason;

/// Command 36.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundSessionSend {
    /// The session the binding names.
    pub session: SessionRef,
    /// The expected binding generation.
    pub binding: BindingGeneration,
    /// The source Actor.
    pub actor: ActorId,
    /// The source Actor's ObjectGeneration.
    pub object_generation: ObjectGeneration,
    /// The source node's NodeGeneration.
    pub node_generation: NodeGeneration,
    /// The source's AuthorityOwnerGeneration.
    pub authority: AuthorityOwnerGeneration,
    /// Push or close.
    pub body: BoundSessionBody,
}

/// What a 36 asks of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundSessionBody {
    /// A one-way push to the client.
    Push {
        /// The packet key the client sees.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
    },
    /// Close the physical connection, saying why.
    Close {
        /// The reason the client sees.
        reason: CloseReason,
    },
}

const PUSH: u8 = 1;
const CLOSE: u8 = 2;

impl Body for BoundSessionSend {
    const COMMAND: Command = Command::BoundSessionSend;

    fn variant(&self) -> u8 {
        match self.body {
            BoundSessionBody::Push { .. } => PUSH,
            BoundSessionBody::Close { .. } => CLOSE,
        }
    }

    fn put_body(&self, dst: &mut BytesMut) {
        self.session.put(dst);
        self.binding.put(dst);
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.node_generation.put(dst);
        self.authority.put(dst);
        match &self.body {
            BoundSessionBody::Push { key, payload } => {
                key.put(dst);
                payload.put(dst);
            }
            BoundSessionBody::Close { reason } => reason.put(dst),
        }
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        if variant != PUSH && variant != CLOSE {
            return Err(Self::unknown(variant));
        }
        let session = r.get()?;
        let binding = r.get()?;
        let actor = r.get()?;
        let object_generation = r.get()?;
        let node_generation = r.get()?;
        let authority = r.get()?;
        let body = if variant == PUSH {
            BoundSessionBody::Push {
                key: r.get()?,
                payload: r.get()?,
            }
        } else {
            BoundSessionBody::Close { reason: r.get()? }
        };
        Ok(Self {
            session,
            binding,
            actor,
            object_generation,
            node_generation,
            authority,
            body,
        })
    }
}
