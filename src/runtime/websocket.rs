//! One WebSocket connection of a STREAM session, sans IO (docs/wire.md
//! "WebSocket"; docs/threading.md "WebSocket listeners").
//!
//! tungstenite does the protocol — the upgrade, masking, fragmentation,
//! control frames, the close handshake — and zlink's reactor does the IO:
//! the shard hands a connection's received bytes to [`WsConn::feed`], drives
//! the upgrade ([`WsConn::handshake`]) or reads messages
//! ([`WsConn::next_message`]), writes frames ([`WsConn::send_frame`]) and
//! moves what tungstenite wrote into the connection's outbound buffer
//! ([`WsConn::drain_output`]). tungstenite only ever sees an in-memory
//! [`WsIo`] that answers `WouldBlock` when it holds no bytes, so nothing here
//! can block a shard (docs/threading.md "Never block a shard").
//!
//! Bounds, so that no client can make the shard hold unbounded memory:
//! - the upgrade request: tungstenite refuses one over 64 KiB
//!   (`AttackAttempt`), and the shard closes any upgrade not finished by the
//!   handshake deadline. tungstenite parses the request only once its head
//!   is whole (or over the limit): it would parse everything received so
//!   far on every read, and a head sent in small pieces would cost time
//!   quadratic in its length ([`HeadScan`]);
//! - a message: tungstenite refuses a frame or a message over the client
//!   frame limit (the encoded frame with its 4-byte prefix) as soon as its
//!   header announces it, before buffering it ([`WsRead::TooLarge`]);
//! - a message begun and not whole falls under the client frame deadline,
//!   exactly as a partial TCP frame ([`WsRead::Pending`] says whether one
//!   is begun; [`Boundaries`] follows the frame headers with tungstenite's
//!   own parser to know).

use std::io::{self, Cursor, Read, Write};
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response, ServerHandshake};
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::protocol::frame::coding::{CloseCode, OpCode};
use tungstenite::protocol::frame::{CloseFrame, FrameHeader};
use tungstenite::protocol::{Message, WebSocketConfig};
use tungstenite::{Error as WsError, WebSocket};

use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::DecodeLimits;

/// What a node's WebSocket listener accepts: the `Origin`s a browser may
/// connect from (empty: any) and the client frame limit.
#[derive(Clone, Debug)]
pub(crate) struct WsPolicy {
    /// Allowed `Origin` header values, compared without regard to ASCII
    /// case; empty allows every origin.
    pub(crate) origins: Arc<[String]>,
    /// The largest WebSocket message: one encoded client frame, prefix
    /// included (`frame_len_max + 4`).
    pub(crate) message_max: usize,
}

impl WsPolicy {
    pub(crate) fn new(origins: Arc<[String]>, limits: &DecodeLimits) -> Self {
        let frame_max = usize::try_from(limits.frame_len_max).unwrap_or(usize::MAX);
        Self {
            origins,
            message_max: frame_max.saturating_add(4),
        }
    }

    fn config(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            // Read from memory: a small chunk costs copies, never syscalls,
            // and keeps an idle connection's buffer at 4 KiB.
            .read_buffer_size(4 * 1024)
            // Every message goes straight to the in-memory writer, which the
            // shard drains into the reactor in the same turn: no second
            // buffer that could grow behind the reactor's outbound bound.
            .write_buffer_size(0)
            .max_message_size(Some(self.message_max))
            .max_frame_size(Some(self.message_max))
    }
}

/// The `Origin` check at the upgrade: a browser's `Origin` not on a
/// non-empty allow-list is refused with 403 Forbidden. A request without
/// `Origin` is not a browser's (a browser always sends one on a WebSocket
/// upgrade) and a non-browser client could send any value, so the list
/// guards browsers against cross-site use only.
struct OriginCheck {
    origins: Arc<[String]>,
}

impl Callback for OriginCheck {
    fn on_request(self, request: &Request, response: Response) -> Result<Response, ErrorResponse> {
        // tungstenite writes a refusal into the stream it then drops; the
        // shard sends its own (`refusal_answer`).
        let refusal = |status| {
            let mut refused = ErrorResponse::new(None);
            *refused.status_mut() = status;
            refused
        };
        // RFC 6455 §4.2.1: the key is 16 bytes in base64; tungstenite
        // checks only that there is one.
        let key = request.headers().get("sec-websocket-key");
        if !key.is_some_and(|key| is_websocket_key(key.as_bytes())) {
            return Err(refusal(tungstenite::http::StatusCode::BAD_REQUEST));
        }
        if self.origins.is_empty() {
            return Ok(response);
        }
        let origins: Vec<_> = request.headers().get_all("origin").iter().collect();
        match origins[..] {
            // Not a browser's request: a browser always sends one.
            [] => Ok(response),
            [origin]
                if origin.to_str().is_ok_and(|origin| {
                    self.origins.iter().any(|a| a.eq_ignore_ascii_case(origin))
                }) =>
            {
                Ok(response)
            }
            // Off the list; or two, which a browser never sends (RFC 6454
            // §7.3), and of which checking the first alone would let the
            // second through unchecked.
            _ => Err(refusal(tungstenite::http::StatusCode::FORBIDDEN)),
        }
    }
}

/// Whether `key` is 16 bytes in base64: 22 characters of the base64
/// alphabet and `==`.
fn is_websocket_key(key: &[u8]) -> bool {
    key.len() == 24
        && key.ends_with(b"==")
        && key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The connection's bytes as tungstenite sees them: what the reactor
/// received and tungstenite has not read yet, and what tungstenite wrote
/// and the shard has not moved to the reactor yet.
#[derive(Default)]
struct WsIo {
    inbound: BytesMut,
    outbound: BytesMut,
    /// Frame boundaries of what tungstenite read, once upgraded.
    boundaries: Option<Boundaries>,
}

impl Read for WsIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.inbound.is_empty() {
            // Never `Ok(0)`: that is the end of the stream to tungstenite.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.inbound.len());
        buf[..n].copy_from_slice(&self.inbound[..n]);
        if let Some(boundaries) = &mut self.boundaries {
            boundaries.pass(&buf[..n]);
        }
        self.inbound.advance(n);
        Ok(n)
    }
}

impl Write for WsIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outbound.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the bytes tungstenite has read stand: inside a frame header, a
/// frame's payload, or a fragmented message, or at a message boundary. It
/// follows the frame headers with tungstenite's own parser
/// (`FrameHeader::parse`), so that a message begun and not whole falls
/// under the client frame deadline as a partial TCP frame does, and a
/// client quiet between messages does not.
#[derive(Default)]
struct Boundaries {
    header: [u8; 14],
    header_len: usize,
    payload_left: u64,
    /// A data frame without FIN was read: its message goes on.
    in_message: bool,
    /// The bytes are not WebSocket frames: tungstenite refuses them too.
    broken: bool,
}

impl Boundaries {
    fn pass(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.broken {
            if self.payload_left > 0 {
                let n = usize::try_from(self.payload_left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                bytes = &bytes[n..];
                self.payload_left -= n as u64;
                continue;
            }
            let take = (self.header.len() - self.header_len).min(bytes.len());
            let end = self.header_len + take;
            self.header[self.header_len..end].copy_from_slice(&bytes[..take]);
            let mut cursor = Cursor::new(&self.header[..end]);
            match FrameHeader::parse(&mut cursor) {
                Ok(Some((header, len))) => {
                    let used = usize::try_from(cursor.position())
                        .unwrap_or(end)
                        .saturating_sub(self.header_len)
                        .min(take);
                    bytes = &bytes[used..];
                    self.header_len = 0;
                    self.payload_left = len;
                    if let OpCode::Data(_) = header.opcode {
                        self.in_message = !header.is_final;
                    }
                }
                Ok(None) => {
                    self.header_len = end;
                    bytes = &bytes[take..];
                }
                Err(_) => self.broken = true,
            }
        }
    }

    fn begun(&self) -> bool {
        !self.broken && (self.header_len > 0 || self.payload_left > 0 || self.in_message)
    }
}

/// How an upgrade stands after the bytes fed so far.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// The request is not whole yet.
    Pending,
    /// Upgraded: messages from now on.
    Upgraded,
    /// Refused: the answer (403 for an Origin not allowed, 400 for a
    /// request that is no upgrade) is in the output, if any; close.
    Refused {
        /// The `Origin` was not on the allow-list.
        origin: bool,
        /// Why, for the log.
        detail: String,
    },
}

/// What reading the connection's messages gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WsRead {
    /// One binary message: the bytes of one encoded client frame.
    Binary(Bytes),
    /// Nothing more for now; whether a message has begun and is not whole.
    Pending {
        /// A message is begun.
        begun: bool,
    },
    /// The client closed (its Close frame is answered in the output).
    Closed,
    /// A message over the client frame limit: close with 1009.
    TooLarge(String),
    /// Not WebSocket, or a text message: close with 1002 / 1003.
    Protocol {
        /// The close code to send.
        text: bool,
        /// Why, for the log and the close frame.
        detail: String,
    },
}

enum Phase {
    Upgrading(Box<MidHandshake<ServerHandshake<WsIo, OriginCheck>>>),
    Open(Box<WebSocket<WsIo>>),
    /// Refused or closed: takes no more bytes; holds the refusal's answer
    /// until the shard drains it.
    Done(BytesMut),
}

/// One WebSocket connection of the node's WebSocket listener.
pub(crate) struct WsConn {
    phase: Phase,
    /// Where the upgrade request's head ends, looked for in each read's
    /// bytes alone.
    head: HeadScan,
}

/// The largest upgrade request tungstenite takes (its `AttackAttempt`
/// bound): past it the request is handed over whole or not, to be refused.
const REQUEST_MAX: usize = 64 * 1024;

/// Whether the upgrade request's head (up to its empty line) has arrived,
/// found by scanning each read's bytes once: the request is handed to
/// tungstenite only then, so it is parsed once, not once per read.
#[derive(Debug, Default)]
struct HeadScan {
    /// Bytes of the request already scanned.
    scanned: usize,
    /// Where the head begins: after the empty lines a request may start
    /// with (httparse skips them, as RFC 9112 §2.2 allows), which must not
    /// count as its end.
    begins: Option<usize>,
    /// The empty line that ends the head was seen, or the request passed
    /// [`REQUEST_MAX`].
    ready: bool,
}

impl HeadScan {
    /// Scans `request` (every byte received so far) from where the last
    /// scan stopped, with the three bytes before it: an end of head may
    /// straddle two reads. A bare `\n\n` ends a head too, as httparse reads it.
    fn scan(&mut self, request: &[u8]) {
        if self.ready {
            return;
        }
        let scanned = self.scanned.min(request.len());
        self.scanned = request.len();
        let begins = match self.begins {
            Some(begins) => begins,
            None => {
                let first = request[scanned..]
                    .iter()
                    .position(|&b| b != b'\r' && b != b'\n');
                match first {
                    Some(at) => *self.begins.insert(scanned + at),
                    None => {
                        self.ready = request.len() > REQUEST_MAX;
                        return;
                    }
                }
            }
        };
        let tail = &request[scanned.saturating_sub(3).max(begins)..];
        self.ready = request.len() > REQUEST_MAX
            || tail.windows(4).any(|w| w == b"\r\n\r\n")
            || tail.windows(2).any(|w| w == b"\n\n");
    }
}

impl WsConn {
    /// A connection just accepted: its upgrade request comes next.
    pub(crate) fn accept(policy: &WsPolicy) -> Self {
        let check = OriginCheck {
            origins: Arc::clone(&policy.origins),
        };
        let mid = ServerHandshake::start(WsIo::default(), check, Some(policy.config()));
        Self {
            phase: Phase::Upgrading(Box::new(mid)),
            head: HeadScan::default(),
        }
    }

    /// Hands tungstenite what the reactor received.
    pub(crate) fn feed(&mut self, bytes: BytesMut) {
        match &mut self.phase {
            Phase::Upgrading(mid) => {
                let io = mid.get_mut().get_mut();
                io.inbound.unsplit(bytes);
                self.head.scan(&io.inbound);
            }
            Phase::Open(ws) => ws.get_mut().inbound.unsplit(bytes),
            Phase::Done(_) => {}
        }
    }

    /// Whether the upgrade is done.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open(_))
    }

    /// Drives the upgrade with the bytes fed so far.
    pub(crate) fn handshake(&mut self) -> Handshake {
        if matches!(self.phase, Phase::Upgrading(_)) && !self.head.ready {
            return Handshake::Pending;
        }
        let phase = std::mem::replace(&mut self.phase, Phase::Done(BytesMut::new()));
        let Phase::Upgrading(mid) = phase else {
            let open = matches!(phase, Phase::Open(_));
            self.phase = phase;
            return if open {
                Handshake::Upgraded
            } else {
                Handshake::Refused {
                    origin: false,
                    detail: "closed".to_owned(),
                }
            };
        };
        match (*mid).handshake() {
            Ok(mut ws) => {
                ws.get_mut().boundaries = Some(Boundaries::default());
                self.phase = Phase::Open(Box::new(ws));
                Handshake::Upgraded
            }
            Err(HandshakeError::Interrupted(mid)) => {
                self.phase = Phase::Upgrading(Box::new(mid));
                Handshake::Pending
            }
            Err(HandshakeError::Failure(error)) => {
                // The refusal tungstenite wrote (403) was written to the
                // stream it consumed; an error found while reading the
                // request (not an upgrade, too large) gets a 400 here.
                let (origin, answer) = match &error {
                    WsError::Http(response)
                        if response.status() == tungstenite::http::StatusCode::FORBIDDEN =>
                    {
                        (true, refusal_answer(403, "origin not allowed"))
                    }
                    _ => (false, refusal_answer(400, "not a WebSocket upgrade")),
                };
                self.phase = Phase::Done(answer);
                Handshake::Refused {
                    origin,
                    detail: error.to_string(),
                }
            }
        }
    }

    /// The next message the fed bytes hold (control frames are answered
    /// by tungstenite and skipped).
    pub(crate) fn next_message(&mut self) -> WsRead {
        let Phase::Open(ws) = &mut self.phase else {
            return WsRead::Closed;
        };
        loop {
            match ws.read() {
                Ok(Message::Binary(bytes)) => return WsRead::Binary(bytes),
                Ok(Message::Text(_)) => {
                    return WsRead::Protocol {
                        text: true,
                        detail: "a text message: client frames are binary messages".to_owned(),
                    }
                }
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Ok(Message::Close(_)) => {
                    // tungstenite queued the answering close frame: out
                    // with it, before the connection closes.
                    let _ = ws.flush();
                    return WsRead::Closed;
                }
                Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return WsRead::Closed,
                Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    let begun = ws
                        .get_ref()
                        .boundaries
                        .as_ref()
                        .is_some_and(Boundaries::begun);
                    return WsRead::Pending { begun };
                }
                Err(WsError::Capacity(error)) => return WsRead::TooLarge(error.to_string()),
                Err(error) => {
                    return WsRead::Protocol {
                        text: false,
                        detail: error.to_string(),
                    }
                }
            }
        }
    }

    /// Writes one client frame as one binary message. `false` when the
    /// connection can take no more (closed, or not upgraded).
    pub(crate) fn send_frame(&mut self, frame: &ClientFrame, scratch: &mut BytesMut) -> bool {
        let Phase::Open(ws) = &mut self.phase else {
            return false;
        };
        scratch.clear();
        frame.encode(scratch);
        let message = Message::Binary(scratch.split().freeze());
        ws.send(message).is_ok()
    }

    /// Starts the close handshake with a close frame: the code a browser
    /// sees and the zlink reason in words. Nothing is written after it.
    pub(crate) fn close(&mut self, code: CloseCode, reason: &str) {
        if let Phase::Open(ws) = &mut self.phase {
            let frame = CloseFrame {
                code,
                reason: reason.into(),
            };
            let _ = ws.close(Some(frame));
        }
    }

    /// Moves what tungstenite wrote into the connection's outbound buffer.
    pub(crate) fn drain_output(&mut self, dst: &mut BytesMut) {
        let out = match &mut self.phase {
            Phase::Upgrading(mid) => &mut mid.get_mut().get_mut().outbound,
            Phase::Open(ws) => &mut ws.get_mut().outbound,
            Phase::Done(leftover) => leftover,
        };
        if out.is_empty() {
            return;
        }
        dst.extend_from_slice(out);
        out.clear();
    }
}

/// A minimal HTTP answer for a refused upgrade, so that a client sees why
/// rather than a reset.
fn refusal_answer(status: u16, why: &str) -> BytesMut {
    let reason = match status {
        403 => "Forbidden",
        _ => "Bad Request",
    };
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{why}\n",
        why.len() + 1
    );
    BytesMut::from(text.as_bytes())
}

/// The close code a browser sees for a zlink close reason; the reason
/// itself always goes first, as a Close client frame in a binary message.
pub(crate) fn close_code(reason: CloseReason) -> CloseCode {
    match reason {
        CloseReason::Shutdown => CloseCode::Away,
        CloseReason::ProtocolError => CloseCode::Protocol,
        CloseReason::SessionLimit => CloseCode::Again,
        CloseReason::Replaced
        | CloseReason::SealTimeout
        | CloseReason::ActorRequested
        | CloseReason::KeepaliveTimeout
        | CloseReason::Application
        | CloseReason::AuthenticationFailed => CloseCode::Normal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tungstenite::protocol::frame::coding::Data;
    use tungstenite::protocol::frame::Frame;

    const UPGRADE: &str = "GET /play HTTP/1.1\r\nHost: game\r\nConnection: Upgrade\r\n\
        Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

    fn policy(origins: &[&str]) -> WsPolicy {
        let origins: Vec<String> = origins.iter().map(|o| (*o).to_owned()).collect();
        WsPolicy::new(origins.into(), &DecodeLimits::default())
    }

    fn raw_output(ws: &mut WsConn) -> BytesMut {
        let mut out = BytesMut::new();
        ws.drain_output(&mut out);
        out
    }

    fn output(ws: &mut WsConn) -> String {
        String::from_utf8_lossy(&raw_output(ws)).into_owned()
    }

    fn upgrade(ws: &mut WsConn, headers: &str) -> Handshake {
        ws.feed(BytesMut::from(format!("{UPGRADE}{headers}\r\n").as_bytes()));
        ws.handshake()
    }

    fn open() -> WsConn {
        let mut ws = WsConn::accept(&policy(&[]));
        assert_eq!(upgrade(&mut ws, ""), Handshake::Upgraded);
        assert!(output(&mut ws).starts_with("HTTP/1.1 101"));
        ws
    }

    /// A client's frame as a browser sends it: masked.
    fn frame(opcode: OpCode, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut frame = Frame::message(Bytes::copy_from_slice(payload), opcode, fin);
        frame.header_mut().mask = Some([1, 2, 3, 4]);
        let mut out = Vec::new();
        frame.format(&mut out).unwrap();
        out
    }

    fn binary(payload: &[u8]) -> Vec<u8> {
        frame(OpCode::Data(Data::Binary), true, payload)
    }

    #[test]
    fn an_upgrade_in_pieces_is_pending_until_whole_then_answered_with_101() {
        let mut ws = WsConn::accept(&policy(&[]));
        let request = format!("{UPGRADE}\r\n");
        let (head, last) = request.as_bytes().split_at(request.len() - 1);
        for piece in head.chunks(40) {
            ws.feed(BytesMut::from(piece));
            assert_eq!(ws.handshake(), Handshake::Pending);
            assert_eq!(output(&mut ws), "");
        }
        ws.feed(BytesMut::from(last));
        assert_eq!(ws.handshake(), Handshake::Upgraded);
        assert!(output(&mut ws).starts_with("HTTP/1.1 101 Switching Protocols"));
    }

    /// A head dribbled a byte at a time is handed to tungstenite once,
    /// when whole (it would parse all it had on every read, and refused a
    /// dribble only after many reads of under 128 bytes: a head in
    /// 130-byte pieces cost time quadratic in its length). A dribbler is
    /// bounded by the handshake deadline instead.
    #[test]
    fn an_upgrade_dribbled_a_byte_at_a_time_is_parsed_once_when_whole() {
        let mut ws = WsConn::accept(&policy(&[]));
        let request = format!("{UPGRADE}\r\n");
        let (head, last) = request.as_bytes().split_at(request.len() - 1);
        for &byte in head {
            ws.feed(BytesMut::from(&[byte][..]));
            assert_eq!(ws.handshake(), Handshake::Pending);
        }
        assert_eq!(ws.head.scanned, head.len());
        ws.feed(BytesMut::from(last));
        assert_eq!(ws.handshake(), Handshake::Upgraded);
        assert!(output(&mut ws).starts_with("HTTP/1.1 101 Switching Protocols"));
    }

    /// Empty lines before a request are no end of its head (httparse skips
    /// them): counted as one, the head would go to tungstenite on every read
    /// after them, as before the scan.
    #[test]
    fn empty_lines_before_a_request_do_not_end_its_head() {
        let mut ws = WsConn::accept(&policy(&[]));
        let request = format!("\r\n\r\n{UPGRADE}\r\n");
        let (head, last) = request.as_bytes().split_at(request.len() - 1);
        for piece in head.chunks(7) {
            ws.feed(BytesMut::from(piece));
            assert!(!ws.head.ready, "ready before the end of the head");
            assert_eq!(ws.handshake(), Handshake::Pending);
        }
        ws.feed(BytesMut::from(last));
        assert_eq!(ws.handshake(), Handshake::Upgraded);
        assert!(output(&mut ws).starts_with("HTTP/1.1 101 Switching Protocols"));
    }

    /// A request that passes 64 KiB with no end of head is handed over
    /// then, and refused with 400.
    #[test]
    fn a_request_over_64_kib_with_no_end_of_head_is_refused_with_400() {
        let mut ws = WsConn::accept(&policy(&[]));
        ws.feed(BytesMut::from(UPGRADE.as_bytes()));
        let line = format!("X-Padding: {}\r\n", "p".repeat(1_000));
        let mut fed = UPGRADE.len();
        let refused = loop {
            ws.feed(BytesMut::from(line.as_bytes()));
            fed += line.len();
            match ws.handshake() {
                Handshake::Pending => assert!(fed <= REQUEST_MAX, "pending at {fed} bytes"),
                other => break other,
            }
        };
        assert!(
            matches!(refused, Handshake::Refused { origin: false, .. }),
            "{refused:?}"
        );
        assert!(output(&mut ws).starts_with("HTTP/1.1 400"));
    }

    /// RFC 6455 §4.2.1: a `Sec-WebSocket-Key` that is not 16 bytes in
    /// base64 gets 400 (tungstenite checks only that there is one).
    #[test]
    fn a_key_that_is_not_16_bytes_in_base64_is_refused_with_400() {
        let good = "dGhlIHNhbXBsZSBub25jZQ==";
        for bad in [
            "short",
            "dGhlIHNhbXBsZSBub25jZQ",
            "dGhlIHNhbXBsZSBub25jZ!==",
            "",
        ] {
            let mut ws = WsConn::accept(&policy(&[]));
            let request = UPGRADE.replace(good, bad);
            assert_ne!(request, UPGRADE, "the test's request carries {good}");
            ws.feed(BytesMut::from(format!("{request}\r\n").as_bytes()));
            assert!(
                matches!(ws.handshake(), Handshake::Refused { origin: false, .. }),
                "{bad:?}"
            );
            assert!(output(&mut ws).starts_with("HTTP/1.1 400"), "{bad:?}");
        }
    }

    /// Two `Origin` headers, one allowed: refused, since checking the first
    /// alone would let the other through (a browser never sends two).
    #[test]
    fn two_origins_are_refused_with_403_even_when_one_is_allowed() {
        let list = policy(&["https://game.example"]);
        for (first, second) in [
            ("https://game.example", "https://evil.example"),
            ("https://evil.example", "https://game.example"),
        ] {
            let mut ws = WsConn::accept(&list);
            let headers = format!("Origin: {first}\r\nOrigin: {second}\r\n");
            assert!(matches!(
                upgrade(&mut ws, &headers),
                Handshake::Refused { origin: true, .. }
            ));
            assert!(output(&mut ws).starts_with("HTTP/1.1 403 Forbidden"));
        }
    }

    #[test]
    fn an_origin_off_a_non_empty_list_is_refused_with_403_and_one_on_it_or_none_passes() {
        let list = policy(&["https://game.example"]);
        let mut refused = WsConn::accept(&list);
        match upgrade(&mut refused, "Origin: https://evil.example\r\n") {
            Handshake::Refused { origin: true, .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(output(&mut refused).starts_with("HTTP/1.1 403 Forbidden"));
        assert!(!refused.is_open());
        for headers in ["Origin: https://GAME.example\r\n", ""] {
            let mut ws = WsConn::accept(&list);
            assert_eq!(
                upgrade(&mut ws, headers),
                Handshake::Upgraded,
                "{headers:?}"
            );
        }
        let mut any = WsConn::accept(&policy(&[]));
        assert_eq!(
            upgrade(&mut any, "Origin: https://evil.example\r\n"),
            Handshake::Upgraded
        );
    }

    #[test]
    fn a_request_that_is_no_upgrade_is_refused_with_400() {
        let mut ws = WsConn::accept(&policy(&[]));
        ws.feed(BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]));
        assert!(matches!(
            ws.handshake(),
            Handshake::Refused { origin: false, .. }
        ));
        assert!(output(&mut ws).starts_with("HTTP/1.1 400"));
    }

    #[test]
    fn a_message_is_begun_until_its_last_byte_and_whole_after_it() {
        let mut ws = open();
        let bytes = binary(b"hello");
        for byte in &bytes[..bytes.len() - 1] {
            ws.feed(BytesMut::from(&[*byte][..]));
            assert_eq!(ws.next_message(), WsRead::Pending { begun: true });
        }
        ws.feed(BytesMut::from(&bytes[bytes.len() - 1..]));
        assert_eq!(
            ws.next_message(),
            WsRead::Binary(Bytes::from_static(b"hello"))
        );
        assert_eq!(ws.next_message(), WsRead::Pending { begun: false });
    }

    #[test]
    fn a_whole_message_with_the_next_one_begun_is_begun_and_fragments_count_as_one_message() {
        let mut ws = open();
        let mut bytes = binary(b"one");
        bytes.extend_from_slice(&binary(b"two")[..3]);
        ws.feed(BytesMut::from(&bytes[..]));
        assert_eq!(
            ws.next_message(),
            WsRead::Binary(Bytes::from_static(b"one"))
        );
        assert_eq!(ws.next_message(), WsRead::Pending { begun: true });

        let mut ws = open();
        ws.feed(BytesMut::from(
            &frame(OpCode::Data(Data::Binary), false, b"fr")[..],
        ));
        assert_eq!(ws.next_message(), WsRead::Pending { begun: true });
        // A ping between the fragments is answered and leaves the message begun.
        let mut ping = Frame::ping(Bytes::from_static(b"p"));
        ping.header_mut().mask = Some([5, 6, 7, 8]);
        let mut bytes = Vec::new();
        ping.format(&mut bytes).unwrap();
        ws.feed(BytesMut::from(&bytes[..]));
        assert_eq!(ws.next_message(), WsRead::Pending { begun: true });
        ws.feed(BytesMut::from(
            &frame(OpCode::Data(Data::Continue), true, b"ag")[..],
        ));
        assert_eq!(
            ws.next_message(),
            WsRead::Binary(Bytes::from_static(b"frag"))
        );
        assert_eq!(ws.next_message(), WsRead::Pending { begun: false });
        let pong = raw_output(&mut ws);
        assert!(pong.starts_with(&[0x8a, 0x01, b'p']), "{pong:?}");
    }

    #[test]
    fn a_message_over_the_limit_is_refused_from_its_header_and_one_at_the_limit_passes() {
        let limits = DecodeLimits::default();
        let max = usize::try_from(limits.frame_len_max).unwrap() + 4;
        let mut ws = open();
        let at_limit = binary(&vec![7; max]);
        ws.feed(BytesMut::from(&at_limit[..]));
        assert!(matches!(ws.next_message(), WsRead::Binary(m) if m.len() == max));
        let over = binary(&vec![7; max + 1]);
        // The header alone (2 + 8 bytes of length + 4 of mask) is enough.
        ws.feed(BytesMut::from(&over[..14]));
        assert!(matches!(ws.next_message(), WsRead::TooLarge(_)));
        // Fragments that add up to more are refused too.
        let mut ws = open();
        let half = vec![7; max / 2 + 1];
        ws.feed(BytesMut::from(
            &frame(OpCode::Data(Data::Binary), false, &half)[..],
        ));
        ws.feed(BytesMut::from(
            &frame(OpCode::Data(Data::Continue), true, &half)[..],
        ));
        assert!(matches!(ws.next_message(), WsRead::TooLarge(_)));
    }

    #[test]
    fn text_unmasked_and_garbage_are_protocol_errors_and_a_close_is_answered() {
        let mut ws = open();
        ws.feed(BytesMut::from(
            &frame(OpCode::Data(Data::Text), true, b"hi")[..],
        ));
        assert!(matches!(
            ws.next_message(),
            WsRead::Protocol { text: true, .. }
        ));

        let mut ws = open();
        let mut unmasked = Vec::new();
        Frame::message(Bytes::from_static(b"x"), OpCode::Data(Data::Binary), true)
            .format(&mut unmasked)
            .unwrap();
        ws.feed(BytesMut::from(&unmasked[..]));
        assert!(matches!(
            ws.next_message(),
            WsRead::Protocol { text: false, .. }
        ));

        let mut ws = open();
        ws.feed(BytesMut::from(&[0xff_u8; 32][..]));
        assert!(matches!(
            ws.next_message(),
            WsRead::Protocol { text: false, .. }
        ));

        let mut ws = open();
        let mut close = Frame::close(None);
        close.header_mut().mask = Some([9, 9, 9, 9]);
        let mut bytes = Vec::new();
        close.format(&mut bytes).unwrap();
        ws.feed(BytesMut::from(&bytes[..]));
        assert_eq!(ws.next_message(), WsRead::Closed);
        assert!(raw_output(&mut ws).starts_with(&[0x88]));
    }

    #[test]
    fn a_frame_goes_out_as_one_binary_message_and_the_close_frame_after_it() {
        let mut ws = open();
        let mut scratch = BytesMut::new();
        let frame = ClientFrame::Close {
            reason: CloseReason::Replaced,
        };
        assert!(ws.send_frame(&frame, &mut scratch));
        ws.close(close_code(CloseReason::Replaced), "Replaced");
        assert!(!ws.send_frame(&frame, &mut scratch));
        let mut out = BytesMut::new();
        ws.drain_output(&mut out);
        // 0x82: FIN + binary, 7 bytes (unmasked: a server's), then the close.
        assert_eq!(&out[..2], &[0x82, 7]);
        assert_eq!(&out[2..9], &[0, 0, 0, 3, 6, 0, 1]);
        assert_eq!(out[9], 0x88);
    }
}
