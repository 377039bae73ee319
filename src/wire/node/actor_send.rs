//! Command 24, actorSend (§5): session → Actor payload with the bound-session
//! tail, the disconnect notice (§7), and the terminal reply of a request relay.

use bytes::Bytes;

use super::RequestHeader;
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, Correlation, ObjectGeneration,
    OwnerLeaseGeneration, PacketKey, RequestId, SessionRef, SessionSequence,
};

/// Command 24.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActorSend {
    /// Session owner → Actor owner: a message for the Actor's queue.
    Message(ActorMessage),
    /// Actor owner → session owner: the terminal of a request (once).
    Reply(ActorReply),
}

/// The bound-session tail (§5): which binding sent the message, and its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundSessionTail {
    /// The session and its owner lifecycle.
    pub session: SessionRef,
    /// The registered binding generation (the token never travels, §5).
    pub binding: BindingGeneration,
    /// The order of the message on its session.
    pub sequence: SessionSequence,
}

/// A message from a bound session to its Actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorMessage {
    /// `Some` for a request relay: its correlation and deadline; `None` for a
    /// one-way send.
    pub request: Option<RequestHeader>,
    /// The target Actor.
    pub actor: ActorId,
    /// The incarnation the binding points to.
    pub object_generation: ObjectGeneration,
    /// The authority owner generation the binding stored.
    pub authority: AuthorityOwnerGeneration,
    /// The owner lease generation the binding stored (preserved, §5).
    pub lease: OwnerLeaseGeneration,
    /// The bound-session tail.
    pub tail: BoundSessionTail,
    /// What is delivered.
    pub body: ActorSendBody,
}

/// What a 24 delivers to the Actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActorSendBody {
    /// A typed payload from the client, with the client's original request
    /// correlation (§5) when the client made a request.
    Payload {
        /// Which typed handler.
        key: PacketKey,
        /// The client's correlation, for a request.
        correlation: Option<Correlation>,
        /// The payload bytes.
        payload: Bytes,
    },
    /// §7: the session's connection ended (or the application called
    /// NotifyDisconnected); runs the current Spot's `on_disconnect_actor`. Sent as
    /// a request whose reply is the callback's terminal.
    DisconnectNotice,
}

/// The terminal of a 24 request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorReply {
    /// The request this ends.
    pub request: RequestId,
    /// The reply payload, or the typed failure.
    pub outcome: Result<Bytes, Error>,
}
