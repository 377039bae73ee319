//! An async client on tokio (feature `client-tokio`; issue 22 item 5), for
//! bots and load tests that run many sessions on one runtime. The same
//! frames as [`super::Client`] (docs/wire.md "Client frames"), over TCP,
//! with requests that may overlap (`&self`), and the reconnect rules of
//! every zlink client (docs/clients.md "Reconnect rules"):
//!
//! - a request in flight when the connection drops ends
//!   `Unavailable/OutcomeUnknown` and is never sent again;
//! - a lost connection is retried with capped exponential backoff and
//!   jitter, and each new connection sends the login request first;
//! - `Replaced` and `AuthenticationFailed` never reconnect, nor does a
//!   relogin refused with anything but `Unavailable` or `DeadlineExceeded`;
//! - the first connection and login are not retried.
//!
//! One task per client reads the connection, answers the server's pings,
//! files replies by correlation and pushes in order, and reconnects.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::{ClientError, CloseReason, ReconnectPolicy};
use crate::error::{Error, ErrorKind, Reason};
use crate::ids::{Correlation, PacketKey};
use crate::wire::client::ClientFrame;
use crate::wire::DecodeLimits;

/// What an [`AsyncClient`] reports besides replies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A push from a bound Actor.
    Push {
        /// Its packet key.
        key: PacketKey,
        /// Its payload.
        payload: Bytes,
    },
    /// The connection dropped (the server's reason, if any); the client
    /// reconnects.
    Disconnected(Option<CloseReason>),
    /// A new connection is up and its login succeeded.
    Reconnected,
    /// The client will not reconnect (its reason, when the server gave
    /// one); every later call fails `Closed`.
    Closed(Option<CloseReason>),
}

type Waiter = oneshot::Sender<Result<Bytes, Error>>;

/// State shared by the client's handle and its connection task.
struct Shared {
    /// The current connection's writer; `None` while reconnecting.
    writer: tokio::sync::Mutex<Option<OwnedWriteHalf>>,
    /// Requests in flight on the current connection.
    pending: Mutex<HashMap<Correlation, Waiter>>,
    last_correlation: Mutex<u32>,
    /// Set once the client will not reconnect.
    ended: Mutex<Option<Option<CloseReason>>>,
}

impl Shared {
    /// The next request's correlation, unique across connections.
    fn next_correlation(&self) -> Correlation {
        let mut last = lock(&self.last_correlation);
        *last = last.wrapping_add(1);
        Correlation(*last)
    }
}

/// An async STREAM client that reconnects by itself.
pub struct AsyncClient {
    shared: Arc<Shared>,
    events: mpsc::UnboundedReceiver<AsyncEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for AsyncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncClient").finish_non_exhaustive()
    }
}

impl Drop for AsyncClient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AsyncClient {
    /// Connects to `addr` and logs in with `login_key` / `login_payload`
    /// (sent again first on every later connection). The first connection
    /// and login are not retried: their failure is returned.
    pub async fn connect(
        addr: SocketAddr,
        login_key: PacketKey,
        login_payload: Bytes,
        policy: ReconnectPolicy,
    ) -> Result<Self, ClientError> {
        let (reader, writer) = open(addr).await?;
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new(Some(writer)),
            pending: Mutex::new(HashMap::new()),
            last_correlation: Mutex::new(0),
            ended: Mutex::new(None),
        });
        let (events_tx, events) = mpsc::unbounded_channel();
        let login = (login_key, login_payload);
        let connection = Connection {
            shared: Arc::clone(&shared),
            addr,
            login: login.clone(),
            policy,
            events: events_tx,
        };
        let task = tokio::spawn(connection.run(reader));
        let client = Self {
            shared,
            events,
            task,
        };
        let timeout = policy.login_timeout;
        client.request(login.0, login.1, timeout).await?;
        Ok(client)
    }

    /// Sends a request and awaits its terminal, at most `timeout`. A request
    /// in flight when the connection drops ends
    /// `Remote(Unavailable/OutcomeUnknown)`; one made while the client is
    /// reconnecting is refused `Closed(None)` (never queued).
    pub async fn request(
        &self,
        key: PacketKey,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        let (waiter, outcome) = oneshot::channel();
        let correlation = self.shared.next_correlation();
        lock(&self.shared.pending).insert(correlation, waiter);
        let frame = ClientFrame::Request {
            key,
            correlation,
            payload,
        };
        if let Err(error) = self.write(&frame).await {
            lock(&self.shared.pending).remove(&correlation);
            return Err(error);
        }
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(outcome)) => outcome.map_err(ClientError::Remote),
            // The task ended with the client.
            Ok(Err(_)) => Err(ClientError::Closed(self.ended())),
            Err(_) => {
                lock(&self.shared.pending).remove(&correlation);
                Err(ClientError::TimedOut)
            }
        }
    }

    /// Sends a one-way message; refused `Closed(None)` while reconnecting.
    pub async fn send(&self, key: PacketKey, payload: Bytes) -> Result<(), ClientError> {
        self.write(&ClientFrame::Message { key, payload }).await
    }

    /// The next push or connection event; `None` once the client ended and
    /// every event was taken.
    pub async fn next_event(&mut self) -> Option<AsyncEvent> {
        self.events.recv().await
    }

    fn ended(&self) -> Option<CloseReason> {
        lock(&self.shared.ended).flatten()
    }

    async fn write(&self, frame: &ClientFrame) -> Result<(), ClientError> {
        if let Some(reason) = *lock(&self.shared.ended) {
            return Err(ClientError::Closed(reason));
        }
        let mut bytes = BytesMut::new();
        frame.encode(&mut bytes);
        let mut writer = self.shared.writer.lock().await;
        let Some(stream) = writer.as_mut() else {
            return Err(ClientError::Closed(None));
        };
        stream.write_all(&bytes).await.map_err(ClientError::Io)
    }
}

/// The client's connection task.
struct Connection {
    shared: Arc<Shared>,
    addr: SocketAddr,
    login: (PacketKey, Bytes),
    policy: ReconnectPolicy,
    events: mpsc::UnboundedSender<AsyncEvent>,
}

impl Connection {
    async fn run(self, mut reader: tokio::net::tcp::OwnedReadHalf) {
        let mut jitter = ReconnectPolicy::jitter_seed();
        loop {
            let reason = self.read(&mut reader).await;
            *self.shared.writer.lock().await = None;
            let lost: Vec<Waiter> = lock(&self.shared.pending).drain().map(|(_, w)| w).collect();
            for waiter in lost {
                let _ = waiter.send(Err(Reason::OutcomeUnknown.into()));
            }
            if matches!(
                reason,
                Some(CloseReason::Replaced | CloseReason::AuthenticationFailed)
            ) {
                return self.end(reason);
            }
            let _ = self.events.send(AsyncEvent::Disconnected(reason));
            match self.reconnect(&mut jitter).await {
                Some(next) => reader = next,
                None => return self.end(None),
            }
        }
    }

    /// Reads frames until the connection ends; its close reason, if any.
    async fn read(&self, reader: &mut tokio::net::tcp::OwnedReadHalf) -> Option<CloseReason> {
        let limits = DecodeLimits::default();
        let mut buffer = BytesMut::with_capacity(16 * 1024);
        loop {
            loop {
                let frame = match ClientFrame::decode_from(&mut buffer, &limits) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    // Not a frame: the connection is gone for this client.
                    Err(_) => return None,
                };
                match frame {
                    ClientFrame::Reply {
                        correlation,
                        payload,
                    } => self.answer(correlation, Ok(payload)),
                    ClientFrame::Error { correlation, error } => {
                        self.answer(correlation, Err(error))
                    }
                    ClientFrame::Push { key, payload } => {
                        let _ = self.events.send(AsyncEvent::Push { key, payload });
                    }
                    ClientFrame::Close { reason } => return Some(reason),
                    ClientFrame::Ping { nonce } => {
                        let mut bytes = BytesMut::new();
                        ClientFrame::Pong { nonce }.encode(&mut bytes);
                        if let Some(writer) = self.shared.writer.lock().await.as_mut() {
                            let _ = writer.write_all(&bytes).await;
                        }
                    }
                    ClientFrame::Pong { .. }
                    | ClientFrame::Request { .. }
                    | ClientFrame::Message { .. } => {}
                }
            }
            match reader.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    fn answer(&self, correlation: Correlation, outcome: Result<Bytes, Error>) {
        // A reply nobody waits for (its request timed out) is dropped.
        if let Some(waiter) = lock(&self.shared.pending).remove(&correlation) {
            let _ = waiter.send(outcome);
        }
    }

    /// Connects again with backoff and logs in; `None` to give up.
    async fn reconnect(&self, jitter: &mut u64) -> Option<tokio::net::tcp::OwnedReadHalf> {
        let mut attempts: u32 = 0;
        loop {
            tokio::time::sleep(self.policy.delay(attempts, jitter)).await;
            attempts += 1;
            match self.login_on_new_connection().await {
                Ok(reader) => {
                    let _ = self.events.send(AsyncEvent::Reconnected);
                    return Some(reader);
                }
                Err(ClientError::Remote(error))
                    if !matches!(
                        error.kind(),
                        ErrorKind::Unavailable | ErrorKind::DeadlineExceeded
                    ) =>
                {
                    return None
                }
                Err(_) if self.policy.max_attempts.is_some_and(|m| attempts >= m) => return None,
                Err(_) => {}
            }
        }
    }

    /// A new connection whose first request is the login; the reader once
    /// its reply came.
    async fn login_on_new_connection(&self) -> Result<tokio::net::tcp::OwnedReadHalf, ClientError> {
        let (mut reader, mut writer) = open(self.addr).await?;
        let correlation = self.shared.next_correlation();
        let mut bytes = BytesMut::new();
        ClientFrame::Request {
            key: self.login.0,
            correlation,
            payload: self.login.1.clone(),
        }
        .encode(&mut bytes);
        writer.write_all(&bytes).await?;
        let limits = DecodeLimits::default();
        let mut buffer = BytesMut::new();
        let login = async {
            loop {
                while let Some(frame) = ClientFrame::decode_from(&mut buffer, &limits)? {
                    match frame {
                        ClientFrame::Reply { correlation: c, .. } if c == correlation => {
                            return Ok(());
                        }
                        ClientFrame::Error {
                            correlation: c,
                            error,
                        } if c == correlation => return Err(ClientError::Remote(error)),
                        ClientFrame::Close { reason } => {
                            return Err(ClientError::Closed(Some(reason)))
                        }
                        // Pushes right behind the login are the new
                        // session's: the reader files them from now on.
                        _ => {}
                    }
                }
                if reader.read_buf(&mut buffer).await? == 0 {
                    return Err(ClientError::Closed(None));
                }
            }
        };
        match tokio::time::timeout(self.policy.login_timeout, login).await {
            Ok(Ok(())) => {
                *self.shared.writer.lock().await = Some(writer);
                Ok(reader)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(ClientError::TimedOut),
        }
    }

    fn end(&self, reason: Option<CloseReason>) {
        *lock(&self.shared.ended) = Some(reason);
        let _ = self.events.send(AsyncEvent::Closed(reason));
    }
}

async fn open(
    addr: SocketAddr,
) -> Result<(tokio::net::tcp::OwnedReadHalf, OwnedWriteHalf), ClientError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream.into_split())
}

/// A std mutex held for a few instructions, never across an await; a
/// poisoned one (a panic elsewhere) still holds consistent data.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
