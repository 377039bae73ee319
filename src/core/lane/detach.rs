//! What a lane holds while it waits: a payload split zero-copy off a
//! connection's receive buffer (a client frame, a link record) keeps that
//! whole buffer alive, so one small item queued per buffer can pin memory
//! far past what the items weigh. A client flooding small one-way messages,
//! each read's buffer kept alive by the one message the rate limit let
//! through, held 0.5 GiB of one node this way (7 December 2026).
//!
//! So an item that has to wait behind others is detached as the engine
//! queues it ([`LaneEngine::submit`](super::LaneEngine::submit)): its bytes
//! are copied into an allocation of their own. An item that finds its lane
//! empty is taken at the next turn and stays zero-copy: the path of a
//! message with nothing ahead of it allocates nothing for this. A lane then
//! holds what its items weigh, up to its capacity, plus at most the one
//! buffer its head pins.

use bytes::Bytes;

/// An item that may hold borrowed bytes.
pub trait Detach {
    /// Copies any bytes that share a larger buffer into allocations of
    /// their own.
    fn detach(&mut self) {}
}

/// `bytes`, copied into an allocation of its own (an empty one needs none).
pub fn detached(bytes: &Bytes) -> Bytes {
    if bytes.is_empty() {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(bytes)
    }
}

/// Numbers and names, the items of the engine's tests and examples, hold no
/// bytes.
impl Detach for u32 {}
impl Detach for u64 {}
impl Detach for &str {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::actor::ActorEvent;
    use crate::core::session::{ClientPacket, SessionWork};
    use crate::ids::{ActorId, PacketKey, SessionSequence};

    /// Whether `bytes` still points into `buffer`.
    fn shares(bytes: &Bytes, buffer: &Bytes) -> bool {
        let start = buffer.as_ptr() as usize;
        (start..start + buffer.len()).contains(&(bytes.as_ptr() as usize))
    }

    #[test]
    fn a_session_packet_and_an_actor_message_copy_their_payloads_when_detached() {
        let buffer = Bytes::from(vec![1u8; 4096]);
        let mut work = SessionWork::Packet(ClientPacket {
            key: PacketKey(2),
            correlation: None,
            payload: buffer.slice(8..40),
        });
        work.detach();
        let SessionWork::Packet(packet) = &work else {
            unreachable!("detaching keeps the variant")
        };
        assert!(!shares(&packet.payload, &buffer));
        assert_eq!(packet.payload, buffer.slice(8..40));

        let mut event = ActorEvent::Deliver {
            actor: ActorId::new("p").unwrap(),
            key: PacketKey(2),
            correlation: None,
            sequence: SessionSequence(1),
            payload: buffer.slice(100..140),
            reply: None,
        };
        event.detach();
        let ActorEvent::Deliver { payload, .. } = &event else {
            unreachable!("detaching keeps the variant")
        };
        assert!(!shares(payload, &buffer));
        assert_eq!(*payload, buffer.slice(100..140));
    }
}
