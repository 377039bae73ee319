//! Command 36, boundSessionSend (§5): an Actor's push to its bound session, or
//! its request to close the connection. One-way; judged by the session owner
//! on the four generation values only (§5, §8.1).

use bytes::Bytes;

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
