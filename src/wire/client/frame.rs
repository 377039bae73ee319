//! The client STREAM frame: length, packet key, request correlation, flags and
//! payload (docs/wire.md has the byte layout).

use bytes::Bytes;

use crate::error::Error;
use crate::ids::{Correlation, PacketKey};

/// One STREAM frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientFrame {
    /// Client → server: a request that gets exactly one reply or error (§12).
    Request {
        /// Selects the typed handler.
        key: PacketKey,
        /// The client's correlation; the terminal carries it back.
        correlation: Correlation,
        /// The payload.
        payload: Bytes,
    },
    /// Client → server: a one-way message.
    Message {
        /// Selects the typed handler.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
    },
    /// Server → client: the reply to a request.
    Reply {
        /// The request's correlation.
        correlation: Correlation,
        /// The payload.
        payload: Bytes,
    },
    /// Server → client: the typed failure of a request.
    Error {
        /// The request's correlation.
        correlation: Correlation,
        /// Kind and reason.
        error: Error,
    },
    /// Server → client: a push from a bound Actor (§5).
    Push {
        /// The packet key.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
    },
    /// Server → client: the connection is closing, and why. Last frame sent.
    Close {
        /// Why.
        reason: CloseReason,
    },
    /// Either way: keepalive probe.
    Ping {
        /// Echoed by the pong.
        nonce: u64,
    },
    /// Either way: keepalive answer.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
}

/// Why the server closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CloseReason {
    /// Another connection bound this connection's Actor (§6).
    Replaced = 1,
    /// The relocation seal timed out (§8.1).
    SealTimeout = 2,
    /// The bound Actor asked for the close (§5 bound-session close).
    ActorRequested = 3,
    /// The node is shutting down or relocating its sessions (§10).
    Shutdown = 4,
    /// The client broke the protocol (a malformed frame).
    ProtocolError = 5,
    /// The client stopped answering keepalive.
    KeepaliveTimeout = 6,
    /// The application closed the session.
    Application = 7,
}
