//! A client that reconnects by itself (docs/clients.md "Reconnect rules";
//! issue 22 item 5), with the rules every zlink client library keeps:
//!
//! - A lost connection is retried with capped exponential backoff and full
//!   jitter (the first delay, doubling to the cap, each wait drawn between
//!   half of it and all of it), so that a restarted node is not hit by
//!   every client at once.
//! - Each new connection runs the login again (the kept login request): a
//!   reconnect is a new session that authenticates and binds again (§9).
//! - A request in flight when the connection dropped ends
//!   `Unavailable` / `OutcomeUnknown` (§12): it may or may not have run,
//!   and it is **never** sent again by the client — the game decides
//!   whether running it twice is harmless. kameo and Ray name the same
//!   outcome.
//! - A close for `Replaced` (another connection of the player took over,
//!   §6) or `AuthenticationFailed` never reconnects: two clients of one
//!   player would otherwise evict each other in a loop. Nor does a login
//!   refused on a new connection with anything but `Unavailable` or
//!   `DeadlineExceeded`: retrying cannot change it.
//! - The first connection is not retried: a wrong address or a refused
//!   login is the caller's to see at once.
//!
//! It is a blocking client, like [`Client`]: the waits between attempts
//! happen in the calling thread, inside [`ReconnectingClient::next_event`]
//! or a request, never longer than the caller's timeout.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Client, ClientError, ClientEvent, CloseReason};
use crate::error::{Error, ErrorKind, Reason};
use crate::ids::{Correlation, PacketKey};

/// Where a [`ReconnectingClient`] connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A node's STREAM listener.
    Tcp(SocketAddr),
    /// A node's WebSocket listener (`ws://…`).
    WebSocket(String),
}

impl Endpoint {
    fn connect(&self) -> Result<Client, ClientError> {
        match self {
            Endpoint::Tcp(addr) => Client::connect(*addr),
            Endpoint::WebSocket(url) => Client::connect_websocket(url),
        }
    }
}

/// How a [`ReconnectingClient`] retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// The wait before the first attempt after a drop (default 100 ms).
    pub first_delay: Duration,
    /// The longest wait between attempts (default 5 s).
    pub max_delay: Duration,
    /// Attempts after one drop before giving up for good (`None`, the
    /// default: for ever).
    pub max_attempts: Option<u32>,
    /// How long a new connection's login may take (default 5 s).
    pub login_timeout: Duration,
}

impl ReconnectPolicy {
    /// The wait before attempt `attempts` (from 0) after a drop:
    /// `first_delay` doubled per attempt, capped at `max_delay`, then drawn
    /// between half of it and all of it (`jitter`: the caller's xorshift
    /// state), so that clients dropped together do not return together.
    pub(crate) fn delay(&self, attempts: u32, jitter: &mut u64) -> Duration {
        let cap = self
            .first_delay
            .saturating_mul(1u32 << attempts.min(16))
            .min(self.max_delay);
        *jitter ^= *jitter << 13;
        *jitter ^= *jitter >> 7;
        *jitter ^= *jitter << 17;
        let half = cap / 2;
        let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_micros(*jitter % spread)
    }

    /// A seed for [`Self::delay`]'s jitter.
    pub(crate) fn jitter_seed() -> u64 {
        let mut seed = [0u8; 8];
        // A weak seed is only a worse spread of retries, never a fault.
        let _ = getrandom::fill(&mut seed);
        u64::from_le_bytes(seed) | 1
    }
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_attempts: None,
            login_timeout: Duration::from_secs(5),
        }
    }
}

/// A request of a [`ReconnectingClient`]: numbered by the client, across
/// its connections (a connection's own correlations start again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What a [`ReconnectingClient`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReconnectEvent {
    /// A push from a bound Actor.
    Push {
        /// Its packet key.
        key: PacketKey,
        /// Its payload.
        payload: Bytes,
    },
    /// The terminal of a request: the reply, the server's typed error, or
    /// `OutcomeUnknown` for one in flight when its connection dropped.
    Reply {
        /// The request.
        id: RequestId,
        /// Its outcome.
        outcome: Result<Bytes, Error>,
    },
    /// The connection dropped (the server's reason, if it gave one); the
    /// client reconnects.
    Disconnected(Option<CloseReason>),
    /// A new connection is up and its login succeeded.
    Reconnected,
    /// The client will not reconnect: the close reason (`Replaced`,
    /// `AuthenticationFailed`), or `None` when the retries ran out or a
    /// relogin was refused for good. Every later call fails `Closed`.
    Closed(Option<CloseReason>),
}

/// A [`Client`] that reconnects and logs in again by itself.
#[derive(Debug)]
pub struct ReconnectingClient {
    endpoint: Endpoint,
    login: (PacketKey, Bytes),
    policy: ReconnectPolicy,
    /// `None` while reconnecting (or closed for good).
    client: Option<Client>,
    /// The connection's correlations of the requests in flight.
    pending: HashMap<Correlation, RequestId>,
    last_id: u64,
    events: VecDeque<ReconnectEvent>,
    /// Attempts since the last drop, and when the next may start.
    attempts: u32,
    next_attempt: Instant,
    /// Set once the client will not reconnect.
    ended: Option<Option<CloseReason>>,
    /// Jitter source (xorshift; no cryptographic need).
    jitter: u64,
}

impl ReconnectingClient {
    /// Connects to `endpoint` and logs in with the request `login_key` /
    /// `login_payload`, which every later connection sends again. The first
    /// connection and login are not retried: their failure is returned.
    pub fn connect(
        endpoint: Endpoint,
        login_key: PacketKey,
        login_payload: Bytes,
        policy: ReconnectPolicy,
    ) -> Result<Self, ClientError> {
        let mut client = endpoint.connect()?;
        client.request(login_key, login_payload.clone(), policy.login_timeout)?;
        Ok(Self {
            endpoint,
            login: (login_key, login_payload),
            policy,
            client: Some(client),
            pending: HashMap::new(),
            last_id: 0,
            events: VecDeque::new(),
            attempts: 0,
            next_attempt: Instant::now(),
            ended: None,
            jitter: ReconnectPolicy::jitter_seed(),
        })
    }

    /// Whether a connection is up now.
    pub fn is_connected(&self) -> bool {
        self.client.is_some()
    }

    /// Sends a one-way message. While the client is reconnecting it is
    /// refused (`Closed(None)`): a one-way message is never queued for a
    /// later connection.
    pub fn send(&mut self, key: PacketKey, payload: Bytes) -> Result<(), ClientError> {
        let client = self.connected()?;
        let sent = client.send(key, payload);
        self.after_io(sent)
    }

    /// Sends a request; its terminal comes as [`ReconnectEvent::Reply`].
    /// While the client is reconnecting it is refused (`Closed(None)`).
    pub fn start_request(
        &mut self,
        key: PacketKey,
        payload: Bytes,
    ) -> Result<RequestId, ClientError> {
        let client = self.connected()?;
        let started = client.start_request(key, payload);
        let correlation = self.after_io(started)?;
        self.last_id += 1;
        let id = RequestId(self.last_id);
        self.pending.insert(correlation, id);
        Ok(id)
    }

    /// Sends a request and waits up to `timeout` for its terminal; other
    /// events stay queued for [`Self::next_event`]. A request in flight when
    /// the connection drops ends `Remote(Unavailable/OutcomeUnknown)`.
    pub fn request(
        &mut self,
        key: PacketKey,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        let id = self.start_request(key, payload)?;
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .events
                .iter()
                .position(|e| matches!(e, ReconnectEvent::Reply { id: i, .. } if *i == id));
            if let Some(ReconnectEvent::Reply { outcome, .. }) =
                found.and_then(|i| self.events.remove(i))
            {
                return outcome.map_err(ClientError::Remote);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::TimedOut);
            }
            self.pump(left)?;
        }
    }

    /// The next event, waiting up to `timeout` (and reconnecting meanwhile
    /// when the connection is down); `Ok(None)` when none came.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<ReconnectEvent>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.events.pop_front() {
                return Ok(Some(event));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if self.ended.is_some() {
                return Err(ClientError::Closed(self.ended.flatten()));
            }
            self.pump(left)?;
        }
    }

    /// One step within `left`: read the connection, or (while down) wait
    /// for and make the next attempt.
    fn pump(&mut self, left: Duration) -> Result<(), ClientError> {
        if let Some(reason) = self.ended {
            return Err(ClientError::Closed(reason));
        }
        let Some(client) = self.client.as_mut() else {
            return self.reconnect(left);
        };
        match client.next_event(left) {
            Ok(None) => Ok(()),
            Ok(Some(ClientEvent::Push { key, payload })) => {
                self.events.push_back(ReconnectEvent::Push { key, payload });
                Ok(())
            }
            Ok(Some(ClientEvent::Reply {
                correlation,
                outcome,
            })) => {
                // A reply no request of this connection waits for (one
                // that ended already) is dropped.
                if let Some(id) = self.pending.remove(&correlation) {
                    self.events.push_back(ReconnectEvent::Reply { id, outcome });
                }
                Ok(())
            }
            Ok(Some(ClientEvent::Closed(reason))) => {
                self.dropped(reason);
                Ok(())
            }
            // The socket failed, or the server sent bytes that are not a
            // frame: the connection is gone either way.
            Err(_) => {
                let reason = self.client.as_ref().and_then(Client::close_reason);
                self.dropped(reason);
                Ok(())
            }
        }
    }

    /// The connection dropped: what was in flight ends `OutcomeUnknown`,
    /// and the client reconnects unless the reason forbids it.
    fn dropped(&mut self, reason: Option<CloseReason>) {
        self.client = None;
        let mut lost: Vec<RequestId> = self.pending.drain().map(|(_, id)| id).collect();
        lost.sort_unstable();
        for id in lost {
            let outcome = Err(Reason::OutcomeUnknown.into());
            self.events.push_back(ReconnectEvent::Reply { id, outcome });
        }
        let for_good = matches!(
            reason,
            Some(CloseReason::Replaced | CloseReason::AuthenticationFailed)
        );
        if for_good {
            self.end(reason);
            return;
        }
        self.events.push_back(ReconnectEvent::Disconnected(reason));
        self.attempts = 0;
        self.next_attempt = Instant::now() + self.delay();
    }

    /// Waits (within `left`) for the next attempt, then connects and logs in.
    fn reconnect(&mut self, left: Duration) -> Result<(), ClientError> {
        let wait = self.next_attempt.saturating_duration_since(Instant::now());
        if wait > left {
            // This thread is the client's own: its wait is the backoff.
            std::thread::sleep(left);
            return Ok(());
        }
        std::thread::sleep(wait);
        self.attempts += 1;
        let (key, payload) = self.login.clone();
        let attempt = self.endpoint.connect().and_then(|mut client| {
            client.request(key, payload, self.policy.login_timeout)?;
            Ok(client)
        });
        match attempt {
            Ok(client) => {
                self.client = Some(client);
                self.attempts = 0;
                self.events.push_back(ReconnectEvent::Reconnected);
            }
            // A login the server refused for a reason a retry cannot change.
            Err(ClientError::Remote(error))
                if !matches!(
                    error.kind(),
                    ErrorKind::Unavailable | ErrorKind::DeadlineExceeded
                ) =>
            {
                self.end(None);
            }
            Err(_) if self.policy.max_attempts.is_some_and(|m| self.attempts >= m) => {
                self.end(None);
            }
            Err(_) => self.next_attempt = Instant::now() + self.delay(),
        }
        Ok(())
    }

    fn end(&mut self, reason: Option<CloseReason>) {
        self.client = None;
        self.ended = Some(reason);
        self.events.push_back(ReconnectEvent::Closed(reason));
    }

    /// The wait before the next attempt.
    fn delay(&mut self) -> Duration {
        self.policy.delay(self.attempts, &mut self.jitter)
    }

    fn connected(&mut self) -> Result<&mut Client, ClientError> {
        if let Some(reason) = self.ended {
            return Err(ClientError::Closed(reason));
        }
        self.client.as_mut().ok_or(ClientError::Closed(None))
    }

    /// A socket error on the live connection is a drop like a close.
    fn after_io<T>(&mut self, result: Result<T, ClientError>) -> Result<T, ClientError> {
        match result {
            Err(ClientError::Io(_) | ClientError::Closed(_)) => {
                let reason = self.client.as_ref().and_then(Client::close_reason);
                self.dropped(reason);
                Err(ClientError::Closed(reason))
            }
            other => other,
        }
    }
}
