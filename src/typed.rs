//! Typed messages (issue 21 item 4): the application's requests, replies,
//! pushes and messages between Actors as Rust types, over the byte payloads
//! the runtime carries (§1: the application works with typed payloads and
//! typed replies; the wire stays bytes).
//!
//! A type becomes a message by naming its packet key and its reply type:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use zlink::ids::PacketKey;
//! use zlink::typed::{self, Message};
//!
//! #[derive(Debug, PartialEq, Serialize, Deserialize)]
//! struct Move { dx: i64, dy: i64 }
//! #[derive(Debug, PartialEq, Serialize, Deserialize)]
//! struct Position { x: i64, y: i64 }
//!
//! impl Message for Move {
//!     const KEY: PacketKey = PacketKey(2);
//!     type Reply = Position;
//! }
//!
//! let bytes = typed::encode(&Move { dx: 1, dy: -1 }).unwrap();
//! assert_eq!(typed::decode::<Move>(&bytes).unwrap(), Move { dx: 1, dy: -1 });
//! // Bytes that are not a Move give a typed error that names the type.
//! let error = typed::decode::<Move>(b"\x01").unwrap_err();
//! assert!(error.detail().contains("Move"), "{error}");
//! ```
//!
//! The same type then serves every place a message goes:
//! `NodeBuilder::on_message` (a session's typed handler), `ActorMessage::answer`
//! and `ActorMessage::decode` (an Actor's handler), the typed calls on
//! `dyn ActorContext` (`push_typed`, `send_typed`, `request_typed`), and
//! [`Client::call`](crate::client::Client::call) (a client's typed request).
//! The raw `Bytes` API stays underneath; these helpers only encode and decode.
//!
//! **The encoding is MessagePack** (rmp-serde), with a struct's fields by
//! name (docs/wire.md "Typed payloads" says why). Decoding is total and
//! bounded like the rest of the wire (docs/wire.md "Decoding rules"): any
//! bytes give a value or a [`Reason::MalformedPayload`] error whose detail
//! names the type, never a panic; nesting is limited to [`DEPTH_MAX`]
//! levels, and no length read from the payload reserves more memory than
//! the payload could fill; bytes after the value are refused.

use std::io::Cursor;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
#[cfg(doc)]
use crate::error::Reason;
use crate::ids::PacketKey;

/// A typed message: the packet key it travels under and the type of its
/// reply (`()` for a message no one answers). One key, one type — the way a
/// gRPC method names its request and response types.
pub trait Message: Serialize + DeserializeOwned + 'static {
    /// The packet key: a session's handler is chosen by it (§3: one handler
    /// per key), and an Actor's `handle` sees it on the message.
    const KEY: PacketKey;
    /// The reply a request of this type gets.
    type Reply: Serialize + DeserializeOwned + 'static;
}

/// How deeply a decoded value may nest (arrays and maps inside each
/// other). A game message is shallow; the bound keeps a hostile payload from
/// exhausting a shard thread's stack.
pub const DEPTH_MAX: usize = 64;

/// Encodes `value` as the payload of a frame (MessagePack, fields by name).
/// A `Serialize` implementation that fails gives `MalformedPayload` naming
/// the type.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, Error> {
    rmp_serde::to_vec_named(value)
        .map(Bytes::from)
        .map_err(|e| Error::malformed_payload(std::any::type_name::<T>(), &e))
}

/// Decodes a payload as a `T`: the whole payload, nothing after it. Any
/// other bytes give `MalformedPayload` (`InvalidOperation`) whose detail
/// names `T` and what was wrong.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, Error> {
    let malformed =
        |cause: &dyn std::fmt::Display| Error::malformed_payload(std::any::type_name::<T>(), cause);
    let mut de = rmp_serde::Deserializer::new(Cursor::new(payload));
    de.set_max_depth(DEPTH_MAX);
    let value = T::deserialize(&mut de).map_err(|e| malformed(&e))?;
    let read = de.position();
    let len = payload.len() as u64;
    if read != len {
        return Err(malformed(&format_args!(
            "{} bytes after the value",
            len.saturating_sub(read)
        )));
    }
    Ok(value)
}

/// The reply of a request of type `M`, from the outcome the raw API gives
/// (`Actor::on_reply`, a client's reply): the error stays as it was, the
/// bytes are decoded as `M::Reply`.
pub fn decode_reply<M: Message>(outcome: Result<Bytes, Error>) -> Result<M::Reply, Error> {
    outcome.and_then(|payload| decode::<M::Reply>(&payload))
}

/// The encoded reply of a handler's outcome, as the raw API returns it.
pub(crate) fn encode_outcome<T: Serialize>(outcome: Result<T, Error>) -> Result<Bytes, Error> {
    outcome.and_then(|reply| encode(&reply))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Move {
        dx: i64,
        dy: i64,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Tree(Vec<Tree>);

    #[test]
    fn a_value_round_trips_with_its_fields_by_name() {
        let bytes = encode(&Move { dx: 3, dy: -2 }).unwrap();
        // A map of two entries (0x82) whose first key is the string "dx".
        assert_eq!(&bytes[..4], &[0x82, 0xa2, b'd', b'x']);
        assert_eq!(decode::<Move>(&bytes).unwrap(), Move { dx: 3, dy: -2 });
        // A reader may add fields it does not know; they are ignored.
        let mut newer = BTreeMap::new();
        newer.insert("dx", 1);
        newer.insert("dy", 2);
        newer.insert("dz", 3);
        let bytes = encode(&newer).unwrap();
        assert_eq!(decode::<Move>(&bytes).unwrap(), Move { dx: 1, dy: 2 });
    }

    #[test]
    fn bad_bytes_give_a_typed_error_that_names_the_type() {
        for bad in [
            &b""[..],
            b"\x01",
            b"\xc1",
            b"\x82\xa2dx\x01",
            b"\xdd\xff\xff\xff\xff",
        ] {
            let e = decode::<Move>(bad).unwrap_err();
            assert_eq!(e.reason(), Reason::MalformedPayload, "{bad:?}");
            assert!(e.detail().starts_with("type "), "{e}");
            assert!(e.detail().contains("Move"), "{e}");
        }
        let mut whole = encode(&Move { dx: 1, dy: 1 }).unwrap().to_vec();
        whole.push(0);
        let e = decode::<Move>(&whole).unwrap_err();
        assert!(e.detail().contains("1 bytes after the value"), "{e}");
    }

    #[test]
    fn nesting_past_the_bound_is_refused_not_a_stack_overflow() {
        let deep = |levels: usize| {
            // Each level: an array of one element (0x91); the innermost is
            // an empty array (0x90).
            let mut bytes = vec![0x91; levels];
            bytes.push(0x90);
            bytes
        };
        assert!(decode::<Tree>(&deep(DEPTH_MAX - 2)).is_ok());
        let e = decode::<Tree>(&deep(100_000)).unwrap_err();
        assert_eq!(e.reason(), Reason::MalformedPayload);
    }

    #[test]
    fn a_huge_announced_length_reserves_nothing() {
        // An array announcing 4 billion elements, then nothing.
        let e = decode::<Vec<u64>>(b"\xdd\xff\xff\xff\xff").unwrap_err();
        assert_eq!(e.reason(), Reason::MalformedPayload);
        let e = decode::<String>(b"\xdb\xff\xff\xff\xff").unwrap_err();
        assert_eq!(e.reason(), Reason::MalformedPayload);
    }
}
