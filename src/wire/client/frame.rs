//! The client STREAM frame: length, packet key, request correlation, flags and
//! payload (docs/wire.md has the byte layout).
//!
//! A frame is `[u32 len][u8 kind][u8 flags][fields of the kind]`. No flag is
//! defined yet, so flags must be zero: a later flag (compression, say) is then
//! refused by an old peer instead of misread. The fields of each kind are
//! written in the order the variant declares them.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::Error;
use crate::ids::{Correlation, PacketKey};
use crate::wire::codec::{self, Field, Reader};
use crate::wire::{DecodeLimits, WireError};

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
    /// The connect callback refused the client's hello (§1 step 1: the
    /// session callback authenticates the client).
    AuthenticationFailed = 8,
    /// The node already holds its most sessions (`NodeSettings::max_sessions`):
    /// the connection was closed as soon as it was accepted.
    SessionLimit = 9,
}

impl CloseReason {
    /// The reason's wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The reason for a wire code, if the code names one.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Replaced,
            2 => Self::SealTimeout,
            3 => Self::ActorRequested,
            4 => Self::Shutdown,
            5 => Self::ProtocolError,
            6 => Self::KeepaliveTimeout,
            7 => Self::Application,
            8 => Self::AuthenticationFailed,
            9 => Self::SessionLimit,
            _ => return None,
        })
    }
}

impl Field for CloseReason {
    fn put(&self, dst: &mut BytesMut) {
        dst.put_u8(self.code());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let code = r.u8()?;
        Self::from_code(code).ok_or(WireError::UnknownCloseReason(code))
    }
}

/// The kind bytes, 1-based so that a zeroed frame names nothing.
mod kind {
    pub(super) const REQUEST: u8 = 1;
    pub(super) const MESSAGE: u8 = 2;
    pub(super) const REPLY: u8 = 3;
    pub(super) const ERROR: u8 = 4;
    pub(super) const PUSH: u8 = 5;
    pub(super) const CLOSE: u8 = 6;
    pub(super) const PING: u8 = 7;
    pub(super) const PONG: u8 = 8;
}

/// The flags byte of a frame without flags.
const FLAGS_NONE: u8 = 0;
/// On an Error frame: the error's detail (the application's code and text,
/// or what a framework error is about) follows its reason. An error without
/// detail is written without the flag, byte for byte as before the flag
/// existed, so an older client still reads it (docs/wire.md "Client
/// frames").
const FLAG_DETAIL: u8 = 0x01;

impl ClientFrame {
    fn kind(&self) -> u8 {
        match self {
            ClientFrame::Request { .. } => kind::REQUEST,
            ClientFrame::Message { .. } => kind::MESSAGE,
            ClientFrame::Reply { .. } => kind::REPLY,
            ClientFrame::Error { .. } => kind::ERROR,
            ClientFrame::Push { .. } => kind::PUSH,
            ClientFrame::Close { .. } => kind::CLOSE,
            ClientFrame::Ping { .. } => kind::PING,
            ClientFrame::Pong { .. } => kind::PONG,
        }
    }

    /// The bytes a Reply frame adds around its payload after the length
    /// prefix: kind, flags, correlation, payload length.
    pub const REPLY_OVERHEAD: usize = 2 + 4 + 4;
    /// The bytes a Push frame adds around its payload after the length
    /// prefix: kind, flags, packet key, payload length.
    pub const PUSH_OVERHEAD: usize = 2 + 2 + 4;

    /// Whether a Reply (`reply`) or Push of `payload` bytes fits a frame of
    /// `limits`: what the receiving client accepts (docs/wire.md "Limits").
    pub fn payload_fits(reply: bool, payload: usize, limits: &DecodeLimits) -> bool {
        let overhead = if reply {
            Self::REPLY_OVERHEAD
        } else {
            Self::PUSH_OVERHEAD
        };
        payload.saturating_add(overhead) <= limits.frame_len_max as usize
    }

    /// Appends the whole length-prefixed frame to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        codec::put_frame(dst, |dst| {
            dst.put_u8(self.kind());
            dst.put_u8(self.flags());
            self.put_fields(dst);
        });
    }

    fn flags(&self) -> u8 {
        match self {
            ClientFrame::Error { error, .. } if error.has_detail() => FLAG_DETAIL,
            _ => FLAGS_NONE,
        }
    }

    fn put_fields(&self, dst: &mut BytesMut) {
        match self {
            ClientFrame::Request {
                key,
                correlation,
                payload,
            } => {
                key.put(dst);
                correlation.put(dst);
                payload.put(dst);
            }
            ClientFrame::Message { key, payload } | ClientFrame::Push { key, payload } => {
                key.put(dst);
                payload.put(dst);
            }
            ClientFrame::Reply {
                correlation,
                payload,
            } => {
                correlation.put(dst);
                payload.put(dst);
            }
            ClientFrame::Error { correlation, error } => {
                correlation.put(dst);
                codec::put_error_reason(dst, error);
                if error.has_detail() {
                    codec::put_error_detail(dst, error);
                }
            }
            ClientFrame::Close { reason } => reason.put(dst),
            ClientFrame::Ping { nonce } | ClientFrame::Pong { nonce } => dst.put_u64(*nonce),
        }
    }

    /// Decodes one complete frame from `frame`, the bytes after the length
    /// prefix. Payloads are slices of `frame`.
    pub fn decode(frame: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        codec::check_frame_len(frame.len(), limits)?;
        Self::read(Reader::new(frame, limits))
    }

    /// The fields of one frame, to the end of the frame.
    #[inline]
    fn read(mut r: Reader<'_>) -> Result<Self, WireError> {
        let kind = r.u8()?;
        let flags = r.u8()?;
        // Flags are checked before the kind: the one flag only on an Error.
        if flags & !FLAG_DETAIL != 0 || (flags != FLAGS_NONE && kind != kind::ERROR) {
            return Err(WireError::InvalidFlags(flags));
        }
        let frame = Self::get_fields(kind, flags, &mut r)?;
        r.finish()?;
        Ok(frame)
    }

    fn get_fields(kind: u8, flags: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match kind {
            kind::REQUEST => ClientFrame::Request {
                key: r.get()?,
                correlation: r.get()?,
                payload: r.get()?,
            },
            kind::MESSAGE => ClientFrame::Message {
                key: r.get()?,
                payload: r.get()?,
            },
            kind::REPLY => ClientFrame::Reply {
                correlation: r.get()?,
                payload: r.get()?,
            },
            kind::ERROR => {
                let correlation = r.get()?;
                let reason = codec::get_error_reason(r)?;
                let error = if flags & FLAG_DETAIL != 0 {
                    codec::get_error_detail(r, reason)?
                } else {
                    Error::new(reason)
                };
                ClientFrame::Error { correlation, error }
            }
            kind::PUSH => ClientFrame::Push {
                key: r.get()?,
                payload: r.get()?,
            },
            kind::CLOSE => ClientFrame::Close { reason: r.get()? },
            kind::PING => ClientFrame::Ping { nonce: r.u64()? },
            kind::PONG => ClientFrame::Pong { nonce: r.u64()? },
            other => return Err(WireError::UnknownFrameKind(other)),
        })
    }

    /// Decodes a WebSocket message that must hold exactly one whole frame,
    /// its length prefix included (docs/wire.md "WebSocket"): a message
    /// shorter than its prefix says is `Truncated`, a longer one
    /// `TrailingBytes`, so two frames in one message are refused too.
    pub fn decode_message(message: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        let have = message.len();
        let Some(prefix) = message.get(..4) else {
            return Err(WireError::Truncated { need: 4, have });
        };
        let mut len = [0u8; 4];
        len.copy_from_slice(prefix);
        let announced = u32::from_be_bytes(len);
        if announced > limits.frame_len_max {
            return Err(WireError::FrameTooLong {
                len: announced,
                max: limits.frame_len_max,
            });
        }
        let body = have - 4;
        let announced = usize::try_from(announced).unwrap_or(usize::MAX);
        if announced > body {
            return Err(WireError::Truncated {
                need: announced,
                have: body,
            });
        }
        if announced < body {
            return Err(WireError::TrailingBytes {
                len: body - announced,
            });
        }
        Self::decode(message.slice(4..), limits)
    }

    /// Splits one whole frame off the front of a receive buffer without
    /// decoding it, as [`ClientFrame::decode_from`] does before it decodes
    /// (the same rules: `Ok(None)` while incomplete, an oversized prefix
    /// refused at once with `buf` untouched). For a client that must still
    /// act on a frame that does not decode: it splits, decodes with
    /// [`ClientFrame::decode`], and on an error reads the body with
    /// [`ClientFrame::error_parts`].
    pub fn split_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Bytes>, WireError> {
        codec::split_frame(buf, limits)
    }

    /// The correlation and the raw ErrorKind and Reason codes of an Error
    /// frame's body (the bytes after the prefix), whatever the codes are;
    /// `None` if it is not an Error frame with those fields.
    ///
    /// [`ClientFrame::decode`] refuses a kind or reason this build does not
    /// know. A game client built before its server learnt a new kind (a
    /// shipped game meeting a newer server) still has to end that one
    /// request, with a generic error, rather than drop the connection and
    /// every other request on it: this is how it finds which request.
    /// Nothing after the reason byte is read, so a later version's longer
    /// Error frame still gives its correlation.
    pub fn error_parts(frame: &Bytes, limits: &DecodeLimits) -> Option<(Correlation, u8, u8)> {
        let mut r = Reader::new(frame.clone(), limits);
        if r.u8().ok()? != kind::ERROR || r.u8().ok()? != FLAGS_NONE {
            return None;
        }
        let correlation = r.get().ok()?;
        Some((correlation, r.u8().ok()?, r.u8().ok()?))
    }

    /// Splits one frame off the front of a socket's receive buffer.
    ///
    /// `Ok(None)` while the frame is incomplete (nothing is consumed). An
    /// oversized length prefix is refused at once, leaving `buf` untouched:
    /// the connection cannot resynchronise and closes with
    /// [`CloseReason::ProtocolError`]. Any other error has consumed exactly
    /// the bad frame.
    pub fn decode_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Self>, WireError> {
        // Split with its prefix and read after it: one split of `buf`, and
        // the length already checked by the split.
        codec::read_whole_frame(buf, limits, Self::read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_parts_reads_an_error_frame_whose_codes_this_build_does_not_know() {
        let limits = DecodeLimits::default();
        let mut buf = BytesMut::new();
        ClientFrame::Error {
            correlation: Correlation(9),
            error: Error::new(crate::error::Reason::NoPacketHandler),
        }
        .encode(&mut buf);
        // Kind 200, reason 201: codes of a newer server.
        let at = buf.len() - 2;
        buf[at] = 200;
        buf[at + 1] = 201;
        let body = ClientFrame::split_from(&mut buf, &limits).unwrap().unwrap();
        assert!(buf.is_empty());
        assert_eq!(
            ClientFrame::decode(body.clone(), &limits),
            Err(WireError::UnknownErrorKind(200))
        );
        assert_eq!(
            ClientFrame::error_parts(&body, &limits),
            Some((Correlation(9), 200, 201))
        );
        // Any other frame, or a cut one, gives nothing.
        let mut push = BytesMut::new();
        ClientFrame::Push {
            key: PacketKey(1),
            payload: Bytes::new(),
        }
        .encode(&mut push);
        let push = ClientFrame::split_from(&mut push, &limits)
            .unwrap()
            .unwrap();
        assert_eq!(ClientFrame::error_parts(&push, &limits), None);
        assert_eq!(ClientFrame::error_parts(&body.slice(..7), &limits), None);
    }

    #[test]
    fn the_overheads_are_what_an_empty_reply_and_push_encode_to() {
        let mut reply = BytesMut::new();
        ClientFrame::Reply {
            correlation: Correlation(7),
            payload: Bytes::new(),
        }
        .encode(&mut reply);
        assert_eq!(reply.len() - 4, ClientFrame::REPLY_OVERHEAD);
        let mut push = BytesMut::new();
        ClientFrame::Push {
            key: PacketKey(1),
            payload: Bytes::new(),
        }
        .encode(&mut push);
        assert_eq!(push.len() - 4, ClientFrame::PUSH_OVERHEAD);
        let limits = DecodeLimits::default();
        let max = limits.frame_len_max as usize;
        assert!(ClientFrame::payload_fits(
            true,
            max - ClientFrame::REPLY_OVERHEAD,
            &limits
        ));
        assert!(!ClientFrame::payload_fits(
            true,
            max - ClientFrame::REPLY_OVERHEAD + 1,
            &limits
        ));
        assert!(ClientFrame::payload_fits(
            false,
            max - ClientFrame::PUSH_OVERHEAD,
            &limits
        ));
        assert!(!ClientFrame::payload_fits(
            false,
            max - ClientFrame::PUSH_OVERHEAD + 1,
            &limits
        ));
    }
}
