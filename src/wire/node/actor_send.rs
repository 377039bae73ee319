//! Command 24, actorSend (§5): session → Actor payload with the bound-session
//! tail, the disconnect notice (§7), and the terminal reply of a request relay.
//!
//! Variants (docs/wire.md "24 actorSend"): 1 a message with a payload, 2 a
//! message that is the disconnect notice, 3 the reply. The notice and the
//! reply travel as 24 because they follow the binding's route and the
//! request's correlation exactly as a relay does; they are not new commands.

use bytes::{Bytes, BytesMut};

use super::{Body, Command, RequestHeader};
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, Correlation, ObjectGeneration,
    OwnerLeaseGeneration, PacketKey, RequestId, SessionRef, SessionSequence,
};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

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

impl Field for BoundSessionTail {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        self.session.put(dst);
        self.binding.put(dst);
        self.sequence.put(dst);
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            session: r.get()?,
            binding: r.get()?,
            sequence: r.get()?,
        })
    }
}

const PAYLOAD: u8 = 1;
const DISCONNECT_NOTICE: u8 = 2;
const REPLY: u8 = 3;

impl Body for ActorSend {
    const COMMAND: Command = Command::ActorSend;

    fn variant(&self) -> u8 {
        match self {
            ActorSend::Message(ActorMessage {
                body: ActorSendBody::Payload { .. },
                ..
            }) => PAYLOAD,
            ActorSend::Message(ActorMessage {
                body: ActorSendBody::DisconnectNotice,
                ..
            }) => DISCONNECT_NOTICE,
            ActorSend::Reply(_) => REPLY,
        }
    }

    #[inline]
    fn put_body(&self, dst: &mut BytesMut) {
        match self {
            ActorSend::Message(m) => {
                m.request.put(dst);
                m.actor.put(dst);
                m.object_generation.put(dst);
                m.authority.put(dst);
                m.lease.put(dst);
                m.tail.put(dst);
                if let ActorSendBody::Payload {
                    key,
                    correlation,
                    payload,
                } = &m.body
                {
                    key.put(dst);
                    correlation.put(dst);
                    payload.put(dst);
                }
            }
            ActorSend::Reply(reply) => {
                reply.request.put(dst);
                reply.outcome.put(dst);
            }
        }
    }

    #[inline]
    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        if variant == REPLY {
            return Ok(ActorSend::Reply(ActorReply {
                request: r.get()?,
                outcome: r.get()?,
            }));
        }
        if variant != PAYLOAD && variant != DISCONNECT_NOTICE {
            return Err(Self::unknown(variant));
        }
        let request = r.get()?;
        let actor = r.get()?;
        let object_generation = r.get()?;
        let authority = r.get()?;
        let lease = r.get()?;
        let tail = r.get()?;
        let body = if variant == PAYLOAD {
            ActorSendBody::Payload {
                key: r.get()?,
                correlation: r.get()?,
                payload: r.get()?,
            }
        } else {
            ActorSendBody::DisconnectNotice
        };
        Ok(ActorSend::Message(ActorMessage {
            request,
            actor,
            object_generation,
            authority,
            lease,
            tail,
            body,
        }))
    }
}
