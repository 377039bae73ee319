//! A Rust client for the STREAM protocol (docs/wire.md "Client frames"), used
//! by the tests and the bench harness, and usable by a game client.
//!
//! It is a plain blocking client over one `std::net::TcpStream`: requests with
//! a correlation and a local deadline, one-way messages, pushes, and the
//! server's close reason. The stream carries the frames as they are
//! ([`Client::connect`]) or inside WebSocket binary messages, one frame each
//! ([`Client::connect_websocket`], tungstenite's blocking client: a client
//! thread may block, a shard never does). It answers the server's keepalive pings itself, so
//! they never reach the caller. It never reconnects by itself (§9: a
//! reconnect is a new session that must authenticate and bind again);
//! [`ReconnectingClient`] does, with the rules of every zlink client
//! (docs/clients.md "Reconnect rules").

mod reconnect;
#[cfg(feature = "client-tokio")]
pub mod tokio;

pub use reconnect::{Endpoint, ReconnectEvent, ReconnectPolicy, ReconnectingClient, RequestId};

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::error::Error;
use crate::ids::{Correlation, PacketKey};
use crate::typed::{self, Message};
// The STREAM frame codec is public here, not only used: a client that
// drives its own sockets (the C ABI client, clients/c; a game's own async
// client) frames its bytes with it, under the same decode limits and
// errors as this one.
pub use crate::wire::client::{ClientFrame, CloseReason};
pub use crate::wire::{DecodeLimits, WireError};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// The server sent bytes that are not a frame.
    #[error("malformed frame from the server: {0}")]
    Wire(#[from] WireError),
    /// The server answered the request with a typed error (§12): the
    /// framework's, or the application's own (`ErrorKind::Application`,
    /// with its code and detail).
    #[error("server error: {0}")]
    Remote(Error),
    /// A typed message did not encode, or the server's reply did not decode
    /// as the reply type (`MalformedPayload`, naming the type).
    #[error("payload: {0}")]
    Payload(Error),
    /// The connection is closed; the reason, when the server gave one.
    #[error("connection closed ({0:?})")]
    Closed(Option<CloseReason>),
    /// Nothing arrived before the local deadline.
    #[error("timed out waiting for the server")]
    TimedOut,
    /// The WebSocket upgrade or protocol failed (a refused upgrade names
    /// its HTTP status, e.g. 403 for an `Origin` the node does not allow).
    #[error("websocket: {0}")]
    WebSocket(String),
}

/// How the frames travel.
enum Transport {
    Tcp(TcpStream),
    WebSocket(Box<tungstenite::WebSocket<TcpStream>>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(stream) => f.debug_tuple("Tcp").field(stream).finish(),
            Self::WebSocket(ws) => f.debug_tuple("WebSocket").field(ws.get_ref()).finish(),
        }
    }
}

impl Transport {
    fn stream(&self) -> &TcpStream {
        match self {
            Self::Tcp(stream) => stream,
            Self::WebSocket(ws) => ws.get_ref(),
        }
    }
}

/// How long [`Client::connect_websocket`] waits for the upgrade's answer.
const UPGRADE_WAIT: Duration = Duration::from_secs(10);

/// Something the server sent that the caller did not ask for by correlation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A push from a bound Actor.
    Push {
        /// Its packet key.
        key: PacketKey,
        /// Its payload.
        payload: Bytes,
    },
    /// The reply to a request started with [`Client::start_request`].
    Reply {
        /// The request's correlation.
        correlation: Correlation,
        /// The reply, or the typed error.
        outcome: Result<Bytes, Error>,
    },
    /// The server closed the connection (the reason, when it sent one).
    Closed(Option<CloseReason>),
}

/// A STREAM client connection.
#[derive(Debug)]
pub struct Client {
    transport: Transport,
    read_buf: BytesMut,
    write_buf: BytesMut,
    limits: DecodeLimits,
    next_correlation: u32,
    inbox: VecDeque<ClientEvent>,
    closed: Option<Option<CloseReason>>,
    /// Requests sent whose terminal has not arrived yet.
    in_flight: HashSet<Correlation>,
    /// Requests the caller stopped waiting for ([`Client::cancel`]).
    cancelled: HashSet<Correlation>,
}

impl Client {
    /// Connects to a node's STREAM listener.
    pub fn connect(addr: SocketAddr) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Self::over(Transport::Tcp(stream)))
    }

    /// Connects to a node's WebSocket listener, e.g. `ws://127.0.0.1:7201/`
    /// (docs/wire.md "WebSocket"): every frame then travels as one binary
    /// message. `ws://` only; a `wss://` endpoint is a TLS proxy's job
    /// (docs/operations.md "WebSocket"). The upgrade waits at most 10 s.
    pub fn connect_websocket(url: &str) -> Result<Self, ClientError> {
        use tungstenite::client::IntoClientRequest;
        let upgrade = |e: tungstenite::Error| ClientError::WebSocket(e.to_string());
        let request = url.into_client_request().map_err(upgrade)?;
        let uri = request.uri();
        if uri.scheme_str() != Some("ws") {
            return Err(ClientError::WebSocket(format!(
                "{url}: only ws:// (TLS belongs to a proxy in front of the node)"
            )));
        }
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
        let stream = TcpStream::connect((host, uri.port_u16().unwrap_or(80)))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(UPGRADE_WAIT))?;
        let (ws, _) = tungstenite::client::client(request, stream).map_err(|e| match e {
            tungstenite::HandshakeError::Failure(e) => upgrade(e),
            tungstenite::HandshakeError::Interrupted(_) => ClientError::TimedOut,
        })?;
        Ok(Self::over(Transport::WebSocket(Box::new(ws))))
    }

    fn over(transport: Transport) -> Self {
        Self {
            transport,
            read_buf: BytesMut::with_capacity(16 * 1024),
            write_buf: BytesMut::with_capacity(4 * 1024),
            limits: DecodeLimits::default(),
            next_correlation: 0,
            inbox: VecDeque::new(),
            closed: None,
            in_flight: HashSet::new(),
            cancelled: HashSet::new(),
        }
    }

    /// Sends a one-way message.
    pub fn send(&mut self, key: PacketKey, payload: Bytes) -> Result<(), ClientError> {
        self.write(&ClientFrame::Message { key, payload })
    }

    /// Sends a request and returns its correlation; the reply arrives as a
    /// [`ClientEvent::Reply`].
    pub fn start_request(
        &mut self,
        key: PacketKey,
        payload: Bytes,
    ) -> Result<Correlation, ClientError> {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let correlation = Correlation(self.next_correlation);
        self.write(&ClientFrame::Request {
            key,
            correlation,
            payload,
        })?;
        self.in_flight.insert(correlation);
        Ok(correlation)
    }

    /// Sends a request and waits up to `timeout` for its terminal. Other
    /// events that arrive meanwhile stay queued for [`Client::next_event`].
    pub fn request(
        &mut self,
        key: PacketKey,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        let correlation = self.start_request(key, payload)?;
        self.wait_reply(correlation, timeout)?
            .map_err(ClientError::Remote)
    }

    /// A typed request (issue 21 item 4): sends `message` under `M::KEY`
    /// (MessagePack, docs/wire.md "Typed payloads") and waits up to
    /// `timeout` for its reply, decoded as `M::Reply`. A typed error from
    /// the server is [`ClientError::Remote`]; a reply that is not an
    /// `M::Reply` is [`ClientError::Payload`].
    pub fn call<M: Message>(
        &mut self,
        message: &M,
        timeout: Duration,
    ) -> Result<M::Reply, ClientError> {
        let payload = typed::encode(message).map_err(ClientError::Payload)?;
        let reply = self.request(M::KEY, payload, timeout)?;
        typed::decode(&reply).map_err(ClientError::Payload)
    }

    /// A typed one-way message under `M::KEY`.
    pub fn send_typed<M: Message>(&mut self, message: &M) -> Result<(), ClientError> {
        let payload = typed::encode(message).map_err(ClientError::Payload)?;
        self.send(M::KEY, payload)
    }

    /// Waits up to `timeout` for the terminal of `correlation`.
    pub fn wait_reply(
        &mut self,
        correlation: Correlation,
        timeout: Duration,
    ) -> Result<Result<Bytes, Error>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.inbox.iter().position(
                |e| matches!(e, ClientEvent::Reply { correlation: c, .. } if *c == correlation),
            );
            if let Some(ClientEvent::Reply { outcome, .. }) =
                found.and_then(|i| self.inbox.remove(i))
            {
                return Ok(outcome);
            }
            if let Some(reason) = self.closed {
                return Err(ClientError::Closed(reason));
            }
            self.fill(deadline)?;
        }
    }

    /// The next event, waiting up to `timeout`; `Ok(None)` when none came.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<ClientEvent>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.inbox.pop_front() {
                return Ok(Some(event));
            }
            if let Some(reason) = self.closed {
                return Ok(Some(ClientEvent::Closed(reason)));
            }
            match self.fill(deadline) {
                Ok(()) => {}
                Err(ClientError::TimedOut) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits up to `timeout` for the server to close the connection and
    /// returns its reason. Events before the close are discarded.
    pub fn wait_closed(&mut self, timeout: Duration) -> Result<Option<CloseReason>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.inbox.clear();
            if let Some(reason) = self.closed {
                return Ok(reason);
            }
            self.fill(deadline)?;
        }
    }

    /// Whether the server has closed the connection (as far as read so far).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// The server's close reason, once it closed with one.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.closed.flatten()
    }

    /// Stops waiting for request `correlation` (R4's cancellation half):
    /// its terminal, queued or still to come, is dropped and never reported.
    /// Nothing goes to the server — a request may have run already — and
    /// the client never sends it again. `false` when its terminal had
    /// already been taken (or it was never started).
    pub fn cancel(&mut self, correlation: Correlation) -> bool {
        let queued = self.inbox.iter().position(
            |e| matches!(e, ClientEvent::Reply { correlation: c, .. } if *c == correlation),
        );
        if let Some(index) = queued {
            self.inbox.remove(index);
            return true;
        }
        self.in_flight.remove(&correlation) && self.cancelled.insert(correlation)
    }

    fn write(&mut self, frame: &ClientFrame) -> Result<(), ClientError> {
        if let Some(reason) = self.closed {
            return Err(ClientError::Closed(reason));
        }
        self.write_buf.clear();
        frame.encode(&mut self.write_buf);
        match &mut self.transport {
            Transport::Tcp(stream) => stream.write_all(&self.write_buf)?,
            Transport::WebSocket(ws) => {
                let message = tungstenite::Message::Binary(self.write_buf.split().freeze());
                ws.send(message).map_err(ws_error)?;
            }
        }
        Ok(())
    }

    /// Reads once (up to `deadline`) and files every complete frame.
    fn fill(&mut self, deadline: Instant) -> Result<(), ClientError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::TimedOut);
        }
        self.transport.stream().set_read_timeout(Some(left))?;
        if let Transport::WebSocket(ws) = &mut self.transport {
            match ws.read() {
                Ok(tungstenite::Message::Binary(message)) => {
                    self.read_buf.extend_from_slice(&message)
                }
                Ok(tungstenite::Message::Close(_)) => {
                    // Answer the close frame; the Close frame before it,
                    // if any, already gave the reason.
                    let _ = ws.flush();
                    self.closed.get_or_insert(None);
                    return Ok(());
                }
                // Pings are answered by tungstenite; nothing to file.
                Ok(_) => return Ok(()),
                Err(e) => match ws_error(e) {
                    ClientError::Closed(_) => {
                        self.closed.get_or_insert(None);
                        return Ok(());
                    }
                    ClientError::Io(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(ClientError::TimedOut)
                    }
                    ClientError::Io(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                        self.closed.get_or_insert(None);
                        return Ok(());
                    }
                    other => return Err(other),
                },
            }
            return self.file_all();
        }
        let Transport::Tcp(stream) = &mut self.transport else {
            return Ok(());
        };
        let mut chunk = [0u8; 16 * 1024];
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ClientError::TimedOut)
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            self.closed.get_or_insert(None);
            return Ok(());
        }
        self.read_buf.extend_from_slice(&chunk[..n]);
        self.file_all()
    }

    /// Files every complete frame read so far.
    fn file_all(&mut self) -> Result<(), ClientError> {
        while let Some(frame) = ClientFrame::decode_from(&mut self.read_buf, &self.limits)? {
            self.file(frame)?;
        }
        Ok(())
    }

    fn file(&mut self, frame: ClientFrame) -> Result<(), ClientError> {
        if let ClientFrame::Reply { correlation, .. } | ClientFrame::Error { correlation, .. } =
            &frame
        {
            self.in_flight.remove(correlation);
        }
        match frame {
            ClientFrame::Reply { correlation, .. } | ClientFrame::Error { correlation, .. }
                if self.cancelled.remove(&correlation) => {}
            ClientFrame::Reply {
                correlation,
                payload,
            } => self.inbox.push_back(ClientEvent::Reply {
                correlation,
                outcome: Ok(payload),
            }),
            ClientFrame::Error { correlation, error } => self.inbox.push_back(ClientEvent::Reply {
                correlation,
                outcome: Err(error),
            }),
            ClientFrame::Push { key, payload } => {
                self.inbox.push_back(ClientEvent::Push { key, payload })
            }
            ClientFrame::Close { reason } => self.closed = Some(Some(reason)),
            ClientFrame::Ping { nonce } => self.write(&ClientFrame::Pong { nonce })?,
            // Pongs answer our pings; requests and messages never come from a server.
            ClientFrame::Pong { .. }
            | ClientFrame::Request { .. }
            | ClientFrame::Message { .. } => {}
        }
        Ok(())
    }

    /// The local address of the connection.
    pub fn local_addr(&self) -> Result<SocketAddr, ClientError> {
        Ok(self.transport.stream().local_addr()?)
    }

    /// Whether the frames travel in WebSocket messages.
    pub fn is_websocket(&self) -> bool {
        matches!(self.transport, Transport::WebSocket(_))
    }
}

/// A tungstenite error as the client reports it: the socket's own errors
/// stay `Io`, the end of the connection is `Closed`.
fn ws_error(error: tungstenite::Error) -> ClientError {
    use tungstenite::error::ProtocolError;
    match error {
        tungstenite::Error::Io(e) => ClientError::Io(e),
        tungstenite::Error::ConnectionClosed
        | tungstenite::Error::AlreadyClosed
        | tungstenite::Error::Protocol(
            ProtocolError::ResetWithoutClosingHandshake | ProtocolError::SendAfterClosing,
        ) => ClientError::Closed(None),
        other => ClientError::WebSocket(other.to_string()),
    }
}
