//! The client itself, in safe Rust and free of the FFI: one non-blocking
//! TCP connection at a time, a login, requests with deadlines, one-way
//! sends, pushes, keepalive and the reconnect rules of docs/clients.md
//! (the same rules as clients/ts). src/lib.rs only puts a C face on it.
//!
//! Nothing here blocks or sleeps: [`Client::poll`] does whatever I/O the
//! socket allows at that moment and checks every timer against the `now`
//! it is given, so a game loop drives it once a frame and a test drives it
//! with its own clock. What happened is queued as [`Event`]s.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use zlink::client::{ClientFrame, CloseReason, DecodeLimits, WireError};
use zlink::error::ErrorKind;
use zlink::ids::{Correlation, PacketKey};

/// The ErrorKind code the client reports for a kind this build does not
/// know (a newer server's): a generic error, never a dropped connection.
pub(crate) const KIND_UNKNOWN: u8 = 255;

/// Reasons only the client produces (never on the wire). They sit above
/// the server's Reason codes (1..=64 today; the `reasons!` table of
/// src/error.rs) so that one `u8` names either.
pub(crate) mod local {
    /// Unavailable: the connection ended while the request was in flight.
    /// The server may or may not have run it; it is never sent again.
    pub(crate) const OUTCOME_UNKNOWN: u8 = 200;
}

/// A failure as the C side sees it: an ErrorKind code, a Reason code (the
/// server's, or one of [`local`]), and whether the server sent it and
/// whether the request may have run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The ErrorKind code, or [`KIND_UNKNOWN`].
    pub kind: u8,
    /// The Reason code.
    pub reason: u8,
    /// Sent by the server (an Error frame).
    pub remote: bool,
    /// The request may or may not have run on the server.
    pub outcome_unknown: bool,
}

impl Failure {
    fn local(kind: ErrorKind, reason: u8, outcome_unknown: bool) -> Self {
        Self {
            kind: kind.code(),
            reason,
            remote: false,
            outcome_unknown,
        }
    }

    /// The connection ended with the request in flight.
    pub fn outcome_unknown() -> Self {
        Self::local(ErrorKind::Unavailable, local::OUTCOME_UNKNOWN, true)
    }

    fn deadline() -> Self {
        let reason = zlink::error::Reason::Deadline;
        Self::local(reason.kind(), reason.code(), true)
    }

    /// A server Error frame: its kind through `ErrorKind::from_code`, so
    /// that a kind added to src/error.rs flows through, and a code this
    /// build does not know is a generic error ([`KIND_UNKNOWN`]). The
    /// server's own `OutcomeUnknown` (a node link that went down with the
    /// request in flight, §12) sets `outcome_unknown` as the local one does.
    fn remote(kind: u8, reason: u8) -> Self {
        Self {
            kind: ErrorKind::from_code(kind).map_or(KIND_UNKNOWN, ErrorKind::code),
            reason,
            remote: true,
            outcome_unknown: reason == zlink::error::Reason::OutcomeUnknown.code(),
        }
    }

    /// Whether a relogin refused with this failure is tried again: the
    /// server may answer the same login differently later (docs/clients.md
    /// reconnect rule 6).
    fn retryable(&self) -> bool {
        self.kind == ErrorKind::Unavailable.code()
            || self.kind == ErrorKind::DeadlineExceeded.code()
    }
}

/// Why a call could not even start: nothing was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No logged-in connection (connecting, logging in, reconnecting).
    NotConnected,
    /// The client is closed for good.
    Closed,
    /// The frame is over the frame length limit.
    TooLarge,
    /// Too many requests in flight, or too many bytes unsent.
    QueueFull,
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The server sent a Close frame.
    ServerClose(CloseReason),
    /// The socket ended without a Close frame.
    ConnectionLost,
    /// The server's bytes did not decode, or it sent a client-only kind.
    ProtocolError,
    /// A ping got no pong in time.
    KeepaliveTimeout,
    /// `close()` was called.
    ClientClosed,
    /// The connection could not be opened (refused, unreachable, timed out).
    ConnectFailed,
    /// The login request ended with this failure.
    LoginFailed(Failure),
    /// `max_attempts` reconnect attempts failed in a row.
    GaveUp,
}

impl Cause {
    /// `Replaced` and `AuthenticationFailed` never reconnect
    /// (docs/clients.md reconnect rule 4): after `Replaced` another
    /// connection owns the player and reconnecting would evict it in turn;
    /// the same credentials would fail again.
    fn terminal(&self) -> bool {
        matches!(
            self,
            Cause::ServerClose(CloseReason::Replaced | CloseReason::AuthenticationFailed)
        )
    }
}

/// What happened, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A connection is open and its login succeeded.
    LoggedIn {
        /// False for the first connection, true for each reconnect.
        reconnect: bool,
        /// The login's reply payload.
        payload: Bytes,
    },
    /// A request ended: its reply, or its failure. Exactly one per request
    /// that [`Client::request`] accepted.
    Reply {
        /// The id `request` returned.
        id: u64,
        /// The reply payload, or the failure.
        outcome: Result<Bytes, Failure>,
    },
    /// A push from a bound Actor.
    Push {
        /// Its packet key.
        key: u16,
        /// Its payload.
        payload: Bytes,
    },
    /// A logged-in connection ended, or the client closed for good (then
    /// `will_reconnect` is false and the client stays closed).
    Closed {
        /// Why.
        cause: Cause,
        /// Whether a reconnect follows.
        will_reconnect: bool,
    },
    /// A reconnect attempt is scheduled.
    Reconnecting {
        /// 1 for the first attempt after a drop.
        attempt: u32,
        /// How long until it starts.
        delay: Duration,
    },
    /// A reconnect attempt failed (the connection, or its login).
    ReconnectFailed {
        /// Which attempt.
        attempt: u32,
        /// Why.
        cause: Cause,
    },
}

/// Capped exponential backoff with jitter (docs/clients.md reconnect
/// rule 5): attempt `n` (from 0) waits `min(max, initial × multiplier^n)`,
/// shortened by a random share of up to `jitter` of it, so that clients
/// dropped together do not come back together.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The cap of every delay.
    pub max: Duration,
    /// Growth per failed attempt (at least 1).
    pub multiplier: f64,
    /// The share of each delay that is random, 0..=1.
    pub jitter: f64,
    /// Attempts after one drop before giving up; 0: no limit.
    pub max_attempts: u32,
}

impl Backoff {
    /// The delay before attempt `attempt` (0-based), `random` in [0, 1).
    pub fn delay(&self, attempt: u32, random: f64) -> Duration {
        let exp = self.initial.as_secs_f64() * self.multiplier.powi(attempt.min(64) as i32);
        let capped = self.max.as_secs_f64().min(exp);
        let jitter = self.jitter.clamp(0.0, 1.0);
        let secs = capped * (1.0 - jitter * random.clamp(0.0, 1.0));
        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(self.max)
    }
}

/// The client's settings; `Options::default()` gives the documented
/// defaults (those of clients/ts).
#[derive(Clone, Debug)]
pub struct Options {
    /// `host:port`. An IP address is used as it is; a host name is looked
    /// up with the system resolver at each connection attempt, which may
    /// block: pass an address to never block.
    pub address: String,
    /// The login: a first request with this key and payload, run on every
    /// new connection before the client counts as open. `None`: open as
    /// soon as connected.
    pub login: Option<(u16, Bytes)>,
    /// The login request's deadline.
    pub login_deadline: Duration,
    /// A request's deadline when the call gives none.
    pub request_deadline: Duration,
    /// How long a connection may take to open.
    pub connect_timeout: Duration,
    /// The reconnect policy; `None`: never reconnect.
    pub reconnect: Option<Backoff>,
    /// Client pings: every `.0`, lost after `.1` without the pong.
    pub keepalive: Option<(Duration, Duration)>,
    /// The node's `limits.frame_len_max`, both ways.
    pub frame_len_max: u32,
    /// Requests in flight at once before `QueueFull`.
    pub max_in_flight: usize,
    /// Bytes held unsent before `QueueFull`.
    pub outbound_max: usize,
    /// Events queued before the client stops reading the socket (the
    /// server then slows down: TCP's own backpressure). Replies and ends
    /// of requests are always queued.
    pub max_events: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            address: String::new(),
            login: None,
            login_deadline: Duration::from_secs(10),
            request_deadline: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            reconnect: Some(Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(5),
                multiplier: 2.0,
                jitter: 0.5,
                max_attempts: 0,
            }),
            keepalive: Some((Duration::from_secs(10), Duration::from_secs(10))),
            frame_len_max: DecodeLimits::FRAME_LEN_MAX_DEFAULT,
            max_in_flight: 4096,
            outbound_max: 4 * 1024 * 1024,
            max_events: 4096,
        }
    }
}

/// Where the client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Made, `connect` not called yet.
    Idle,
    /// Opening the first connection, or logging in on it.
    Connecting,
    /// Logged in: requests and sends go out.
    Open,
    /// Waiting to reconnect, or opening and logging in again.
    Reconnecting,
    /// Closed for good.
    Closed,
}

/// Counts for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections opened (TCP connected).
    pub connections: u64,
    /// Logins after a reconnect.
    pub reconnects: u64,
    /// Request frames written to a socket, logins included.
    pub requests_sent: u64,
    /// Replies or errors whose request had already ended (its deadline).
    pub dropped: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Bytes queued but not yet written to the socket.
    pub unsent: u64,
}

/// What [`Client::interest`] tells a caller that wants to block until
/// there is work (a tool or a test; never a game frame).
#[derive(Clone, Copy, Debug)]
pub struct Interest {
    /// The socket, if there is one.
    pub fd: Option<std::os::fd::RawFd>,
    /// Wait for it to be writable too (connecting, or bytes unsent).
    pub write: bool,
    /// The next timer (deadline, keepalive, backoff, connect timeout).
    pub until: Option<Instant>,
}

/// A request in flight on one connection.
struct Pending {
    /// 0 for the login.
    id: u64,
    deadline: Instant,
    /// Its end goes to the routed queue (a C callback), not the events.
    routed: bool,
}

/// One TCP connection and what is in flight on it.
struct Conn {
    sock: TcpStream,
    connected: bool,
    started: Instant,
    read_buf: BytesMut,
    out: BytesMut,
    pending: HashMap<u32, Pending>,
    /// A write failed outside `poll` (in `request`): ended at the next poll.
    broken: bool,
    next_ping: Instant,
    ping: Option<(u64, Instant)>,
}

enum Phase {
    Idle,
    /// TCP connecting, then the login in flight (`login` is its correlation).
    Opening {
        conn: Box<Conn>,
        reconnect: bool,
        attempt: u32,
        login: Option<u32>,
    },
    Open(Box<Conn>),
    /// Waiting for attempt `attempt` (0-based) to start.
    Backoff {
        until: Instant,
        attempt: u32,
    },
    Closed,
}

/// How many bytes one poll reads at most, so that a flood cannot hold a
/// game frame; the rest is read at the next poll.
const READ_BUDGET: usize = 256 * 1024;

/// The client.
pub struct Client {
    opts: Options,
    limits: DecodeLimits,
    phase: Phase,
    events: VecDeque<Event>,
    routed: VecDeque<(u64, Result<Bytes, Failure>)>,
    next_id: u64,
    next_correlation: u32,
    next_nonce: u64,
    rng: u64,
    stats: Stats,
}

impl Client {
    /// A client with these settings; nothing is opened before `connect`.
    pub fn new(opts: Options) -> Self {
        let limits = DecodeLimits {
            frame_len_max: opts.frame_len_max,
            ..DecodeLimits::default()
        };
        // A per-process random seed for the jitter, without a dependency.
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            opts,
            limits,
            phase: Phase::Idle,
            events: VecDeque::new(),
            routed: VecDeque::new(),
            next_id: 0,
            next_correlation: 0,
            next_nonce: 0,
            rng: seed | 1,
            stats: Stats::default(),
        }
    }

    /// Seeds the jitter (tests).
    pub fn seed_jitter(&mut self, seed: u64) {
        self.rng = seed | 1;
    }

    /// Where the client is.
    pub fn state(&self) -> State {
        match &self.phase {
            Phase::Idle => State::Idle,
            Phase::Opening {
                reconnect: false, ..
            } => State::Connecting,
            Phase::Opening { .. } | Phase::Backoff { .. } => State::Reconnecting,
            Phase::Open(_) => State::Open,
            Phase::Closed => State::Closed,
        }
    }

    /// Its counts.
    pub fn stats(&self) -> Stats {
        let conn = match &self.phase {
            Phase::Opening { conn, .. } | Phase::Open(conn) => Some(conn),
            _ => None,
        };
        Stats {
            in_flight: conn.map_or(0, |c| {
                c.pending.values().filter(|p| p.id != 0).count() as u64
            }),
            unsent: conn.map_or(0, |c| c.out.len() as u64),
            ..self.stats
        }
    }

    /// The next event, oldest first.
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Events queued.
    pub fn queued(&self) -> usize {
        self.events.len()
    }

    /// The next end of a routed request (see [`Client::request`]).
    pub fn next_routed(&mut self) -> Option<(u64, Result<Bytes, Failure>)> {
        self.routed.pop_front()
    }

    /// Starts the first connection. Its outcome is an event: `LoggedIn`,
    /// or `Closed` (the first connection is not retried: docs/clients.md
    /// reconnect rule 7). Only from `Idle`.
    pub fn connect(&mut self, now: Instant) -> Result<(), Refused> {
        match self.phase {
            Phase::Idle => {}
            Phase::Closed => return Err(Refused::Closed),
            _ => return Err(Refused::NotConnected),
        }
        self.start_attempt(now, false, 0);
        Ok(())
    }

    /// Sends a request; its end is one `Reply` event with the id returned
    /// (or, when `routed`, one entry of [`Client::next_routed`]). A request
    /// in flight when its connection ends ends with OutcomeUnknown and is
    /// never sent again (docs/clients.md reconnect rule 2).
    pub fn request(
        &mut self,
        key: u16,
        payload: &[u8],
        deadline: Option<Duration>,
        routed: bool,
        now: Instant,
    ) -> Result<u64, Refused> {
        let max_in_flight = self.opts.max_in_flight;
        let deadline = now + deadline.unwrap_or(self.opts.request_deadline);
        let conn = self.open_conn()?;
        if conn.pending.len() >= max_in_flight {
            return Err(Refused::QueueFull);
        }
        self.next_id += 1;
        let id = self.next_id;
        self.send_request(key, payload, id, deadline, routed)?;
        Ok(id)
    }

    /// Sends a one-way message: a Message frame, no answer.
    pub fn send(&mut self, key: u16, payload: &[u8]) -> Result<(), Refused> {
        let frame = ClientFrame::Message {
            key: PacketKey(key),
            payload: Bytes::copy_from_slice(payload),
        };
        let (frame_len_max, outbound_max) = (self.opts.frame_len_max, self.opts.outbound_max);
        let conn = self.open_conn()?;
        conn.queue(&frame, payload.len() + 8, frame_len_max, outbound_max)?;
        conn.flush();
        Ok(())
    }

    /// Closes for good: no reconnect; requests in flight end with
    /// OutcomeUnknown, then `Closed { ClientClosed }`.
    pub fn close(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Closed => {}
            Phase::Open(conn) => {
                self.end_requests(conn.pending);
                self.closed_for_good(Cause::ClientClosed);
            }
            Phase::Opening { conn, .. } => {
                self.end_requests(conn.pending);
                self.closed_for_good(Cause::ClientClosed);
            }
            Phase::Idle | Phase::Backoff { .. } => self.closed_for_good(Cause::ClientClosed),
        }
    }

    /// What to wait on before the next poll, for a caller that blocks.
    pub fn interest(&self) -> Interest {
        use std::os::fd::AsRawFd;
        match &self.phase {
            Phase::Opening { conn, .. } | Phase::Open(conn) => {
                let until = conn.pending.values().map(|p| p.deadline).min();
                let mut timers = vec![until];
                if !conn.connected {
                    timers.push(Some(conn.started + self.opts.connect_timeout));
                } else if self.opts.keepalive.is_some() {
                    timers.push(Some(conn.ping.map_or(conn.next_ping, |(_, d)| d)));
                }
                Interest {
                    fd: Some(conn.sock.as_raw_fd()),
                    write: !conn.connected || !conn.out.is_empty(),
                    until: timers.into_iter().flatten().min(),
                }
            }
            Phase::Backoff { until, .. } => Interest {
                fd: None,
                write: false,
                until: Some(*until),
            },
            Phase::Idle | Phase::Closed => Interest {
                fd: None,
                write: false,
                until: None,
            },
        }
    }

    /// Does all the I/O the socket allows now and checks every timer
    /// against `now`. Never blocks.
    pub fn poll(&mut self, now: Instant) {
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Idle => self.phase = Phase::Idle,
            Phase::Closed => {}
            Phase::Backoff { until, attempt } => {
                if now >= until {
                    self.start_attempt(now, true, attempt);
                } else {
                    self.phase = Phase::Backoff { until, attempt };
                }
            }
            Phase::Opening {
                mut conn,
                reconnect,
                attempt,
                mut login,
            } => {
                if !conn.connected {
                    match conn.check_connected() {
                        Ok(false) if now < conn.started + self.opts.connect_timeout => {
                            self.phase = Phase::Opening {
                                conn,
                                reconnect,
                                attempt,
                                login,
                            };
                            return;
                        }
                        Ok(false) | Err(_) => {
                            drop(conn);
                            return self.attempt_failed(
                                now,
                                reconnect,
                                attempt,
                                Cause::ConnectFailed,
                            );
                        }
                        Ok(true) => {
                            self.stats.connections += 1;
                            conn.next_ping =
                                now + self.opts.keepalive.map_or(Duration::ZERO, |k| k.0);
                            match self.opts.login.clone() {
                                None => return self.logged_in(conn, reconnect, Bytes::new()),
                                Some((key, payload)) => {
                                    let deadline = now + self.opts.login_deadline;
                                    let correlation =
                                        Self::next_correlation(&mut self.next_correlation, &conn);
                                    let frame = ClientFrame::Request {
                                        key: PacketKey(key),
                                        correlation: Correlation(correlation),
                                        payload: payload.clone(),
                                    };
                                    // The login's size was checked when the
                                    // options were; the buffer is empty.
                                    let _ = conn.queue(
                                        &frame,
                                        payload.len() + 12,
                                        u32::MAX,
                                        usize::MAX,
                                    );
                                    conn.pending.insert(
                                        correlation,
                                        Pending {
                                            id: 0,
                                            deadline,
                                            routed: false,
                                        },
                                    );
                                    self.stats.requests_sent += 1;
                                    login = Some(correlation);
                                }
                            }
                        }
                    }
                }
                let (ended, login_outcome) = self.drive(&mut conn, now, login);
                if let Some(outcome) = login_outcome {
                    return match outcome {
                        Ok(payload) if ended.is_none() => {
                            self.logged_in(conn, reconnect, payload);
                            // What came after the login's reply, in order.
                            self.poll(now)
                        }
                        Ok(_) => {
                            let cause = ended.unwrap_or(Cause::ConnectionLost);
                            self.end_requests(conn.pending);
                            self.attempt_failed(now, reconnect, attempt, cause)
                        }
                        Err(failure) => {
                            self.end_requests(conn.pending);
                            let cause = match ended {
                                Some(cause @ Cause::ServerClose(_)) => cause,
                                _ => Cause::LoginFailed(failure),
                            };
                            self.attempt_failed(now, reconnect, attempt, cause)
                        }
                    };
                }
                match ended {
                    None => {
                        self.phase = Phase::Opening {
                            conn,
                            reconnect,
                            attempt,
                            login,
                        }
                    }
                    Some(cause) => {
                        self.end_requests(conn.pending);
                        self.attempt_failed(now, reconnect, attempt, cause)
                    }
                }
            }
            Phase::Open(mut conn) => {
                let (ended, _) = self.drive(&mut conn, now, None);
                match ended {
                    None => self.phase = Phase::Open(conn),
                    Some(cause) => {
                        self.end_requests(conn.pending);
                        self.connection_ended(now, cause);
                    }
                }
            }
        }
    }

    // ---- internals ---------------------------------------------------------

    fn open_conn(&mut self) -> Result<&mut Conn, Refused> {
        match &mut self.phase {
            Phase::Open(conn) => Ok(conn),
            Phase::Closed => Err(Refused::Closed),
            _ => Err(Refused::NotConnected),
        }
    }

    /// The next correlation not in flight on `conn`.
    fn next_correlation(counter: &mut u32, conn: &Conn) -> u32 {
        loop {
            *counter = counter.wrapping_add(1);
            if !conn.pending.contains_key(counter) {
                return *counter;
            }
        }
    }

    fn send_request(
        &mut self,
        key: u16,
        payload: &[u8],
        id: u64,
        deadline: Instant,
        routed: bool,
    ) -> Result<(), Refused> {
        let (frame_len_max, outbound_max) = (self.opts.frame_len_max, self.opts.outbound_max);
        let Phase::Open(conn) = &mut self.phase else {
            return Err(Refused::NotConnected);
        };
        let correlation = Self::next_correlation(&mut self.next_correlation, conn);
        let frame = ClientFrame::Request {
            key: PacketKey(key),
            correlation: Correlation(correlation),
            payload: Bytes::copy_from_slice(payload),
        };
        conn.queue(&frame, payload.len() + 12, frame_len_max, outbound_max)?;
        conn.pending.insert(
            correlation,
            Pending {
                id,
                deadline,
                routed,
            },
        );
        self.stats.requests_sent += 1;
        // Written at once when the socket takes it: a request made during
        // a frame does not wait for the next frame's poll.
        conn.flush();
        Ok(())
    }

    fn random(&mut self) -> f64 {
        // xorshift64*: enough for a jitter.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Opens a connection for attempt `attempt`.
    fn start_attempt(&mut self, now: Instant, reconnect: bool, attempt: u32) {
        match Conn::open(&self.opts.address, now) {
            Ok(conn) => {
                self.phase = Phase::Opening {
                    conn: Box::new(conn),
                    reconnect,
                    attempt,
                    login: None,
                }
            }
            Err(_) => self.attempt_failed(now, reconnect, attempt, Cause::ConnectFailed),
        }
    }

    /// An attempt (the first connection, or a reconnect) did not log in.
    fn attempt_failed(&mut self, now: Instant, reconnect: bool, attempt: u32, cause: Cause) {
        if !reconnect {
            return self.closed_for_good(cause);
        }
        self.events.push_back(Event::ReconnectFailed {
            attempt: attempt + 1,
            cause,
        });
        let retry = match cause {
            Cause::LoginFailed(failure) => failure.retryable(),
            Cause::ClientClosed | Cause::GaveUp => false,
            other => !other.terminal(),
        };
        if retry {
            self.schedule(now, attempt + 1);
        } else {
            self.closed_for_good(cause);
        }
    }

    fn schedule(&mut self, now: Instant, attempt: u32) {
        let Some(policy) = self.opts.reconnect else {
            return self.closed_for_good(Cause::GaveUp);
        };
        if policy.max_attempts != 0 && attempt >= policy.max_attempts {
            return self.closed_for_good(Cause::GaveUp);
        }
        let delay = policy.delay(attempt, self.random());
        self.events.push_back(Event::Reconnecting {
            attempt: attempt + 1,
            delay,
        });
        self.phase = Phase::Backoff {
            until: now + delay,
            attempt,
        };
    }

    fn logged_in(&mut self, conn: Box<Conn>, reconnect: bool, payload: Bytes) {
        if reconnect {
            self.stats.reconnects += 1;
        }
        self.phase = Phase::Open(conn);
        self.events
            .push_back(Event::LoggedIn { reconnect, payload });
    }

    /// A logged-in connection ended: reconnect unless the cause forbids it.
    fn connection_ended(&mut self, now: Instant, cause: Cause) {
        let will_reconnect = self.opts.reconnect.is_some() && !cause.terminal();
        self.events.push_back(Event::Closed {
            cause,
            will_reconnect,
        });
        if will_reconnect {
            self.schedule(now, 0);
        } else {
            self.phase = Phase::Closed;
        }
    }

    fn closed_for_good(&mut self, cause: Cause) {
        self.phase = Phase::Closed;
        self.events.push_back(Event::Closed {
            cause,
            will_reconnect: false,
        });
    }

    /// Ends every request of a connection that is gone with OutcomeUnknown:
    /// the server may have run it. Never queued for the next connection.
    fn end_requests(&mut self, pending: HashMap<u32, Pending>) {
        let mut ended: Vec<(u32, Pending)> = pending.into_iter().collect();
        // In the order they were sent (correlations grow; wrap aside).
        ended.sort_by_key(|(c, _)| *c);
        for (_, p) in ended {
            if p.id != 0 {
                self.finish(&p, Err(Failure::outcome_unknown()));
            }
        }
    }

    fn finish(&mut self, p: &Pending, outcome: Result<Bytes, Failure>) {
        if p.routed {
            self.routed.push_back((p.id, outcome));
        } else {
            self.events.push_back(Event::Reply { id: p.id, outcome });
        }
    }

    /// One poll of a connected socket: read and file frames, write, check
    /// deadlines and keepalive. Returns why it ended, if it did, and the
    /// login's outcome when `login` names its correlation and it ended.
    fn drive(
        &mut self,
        conn: &mut Conn,
        now: Instant,
        login: Option<u32>,
    ) -> (Option<Cause>, Option<Result<Bytes, Failure>>) {
        let mut login_outcome = None;
        if conn.broken {
            return (Some(Cause::ConnectionLost), None);
        }
        // Read what is there, within the budget and while the event queue
        // has room.
        let mut eof = false;
        let mut read = 0;
        let mut chunk = [0u8; 16 * 1024];
        while read < READ_BUDGET && self.events.len() < self.opts.max_events {
            match conn.sock.read(&mut chunk) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    read += n;
                    conn.read_buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        // File every complete frame, in order: a Close read before the end
        // of the stream is the reason.
        loop {
            let body = match ClientFrame::split_from(&mut conn.read_buf, &self.limits) {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(_) => return (Some(Cause::ProtocolError), login_outcome),
            };
            let frame = match ClientFrame::decode(body.clone(), &self.limits) {
                Ok(frame) => frame,
                Err(e) => match (e, ClientFrame::error_parts(&body, &self.limits)) {
                    (
                        WireError::UnknownErrorKind(_)
                        | WireError::UnknownReason(_)
                        | WireError::ReasonKindMismatch { .. },
                        Some((correlation, kind, reason)),
                    ) => {
                        let failure = Failure::remote(kind, reason);
                        self.settle(conn, correlation.0, Err(failure), login, &mut login_outcome);
                        continue;
                    }
                    _ => return (Some(Cause::ProtocolError), login_outcome),
                },
            };
            match frame {
                ClientFrame::Reply {
                    correlation,
                    payload,
                } => self.settle(conn, correlation.0, Ok(payload), login, &mut login_outcome),
                ClientFrame::Error { correlation, error } => {
                    let failure = Failure::remote(error.kind().code(), error.reason().code());
                    self.settle(conn, correlation.0, Err(failure), login, &mut login_outcome)
                }
                ClientFrame::Push { key, payload } => self.events.push_back(Event::Push {
                    key: key.0,
                    payload,
                }),
                ClientFrame::Ping { nonce } => {
                    let _ = conn.queue(&ClientFrame::Pong { nonce }, 10, u32::MAX, usize::MAX);
                }
                ClientFrame::Pong { nonce } => {
                    if conn.ping.is_some_and(|(n, _)| n == nonce) {
                        conn.ping = None;
                    }
                }
                ClientFrame::Close { reason } => {
                    return (Some(Cause::ServerClose(reason)), login_outcome)
                }
                // Client → server kinds: a server never sends them.
                ClientFrame::Request { .. } | ClientFrame::Message { .. } => {
                    return (Some(Cause::ProtocolError), login_outcome)
                }
            }
            // Logged in: the frames after the login's reply are filed after
            // `LoggedIn`, by the poll of the open connection that follows.
            if matches!(login_outcome, Some(Ok(_))) {
                return (None, login_outcome);
            }
        }
        if eof {
            return (Some(Cause::ConnectionLost), login_outcome);
        }
        // Deadlines.
        let expired: Vec<u32> = conn
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(c, _)| *c)
            .collect();
        for correlation in expired {
            if let Some(p) = conn.pending.remove(&correlation) {
                if Some(correlation) == login {
                    login_outcome = Some(Err(Failure::deadline()));
                } else {
                    self.finish(&p, Err(Failure::deadline()));
                }
            }
        }
        // Keepalive.
        if let Some((interval, timeout)) = self.opts.keepalive {
            match conn.ping {
                Some((_, deadline)) if now >= deadline => {
                    return (Some(Cause::KeepaliveTimeout), login_outcome)
                }
                None if now >= conn.next_ping => {
                    self.next_nonce = self.next_nonce.wrapping_add(1);
                    let nonce = self.next_nonce;
                    let _ = conn.queue(&ClientFrame::Ping { nonce }, 10, u32::MAX, usize::MAX);
                    conn.ping = Some((nonce, now + timeout));
                    conn.next_ping = now + interval;
                }
                _ => {}
            }
        }
        conn.flush();
        if conn.broken {
            return (Some(Cause::ConnectionLost), login_outcome);
        }
        (None, login_outcome)
    }

    /// A reply or error for `correlation`: ends its request, or counts it
    /// as dropped when the request already ended (a deadline).
    fn settle(
        &mut self,
        conn: &mut Conn,
        correlation: u32,
        outcome: Result<Bytes, Failure>,
        login: Option<u32>,
        login_outcome: &mut Option<Result<Bytes, Failure>>,
    ) {
        match conn.pending.remove(&correlation) {
            None => self.stats.dropped += 1,
            Some(_) if Some(correlation) == login => *login_outcome = Some(outcome),
            Some(p) => self.finish(&p, outcome),
        }
    }
}

impl Conn {
    /// Starts a non-blocking connect.
    fn open(address: &str, now: Instant) -> io::Result<Self> {
        let addr: SocketAddr = match address.parse() {
            Ok(addr) => addr,
            Err(_) => address
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?,
        };
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_nonblocking(true)?;
        socket.set_tcp_nodelay(true)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(Self {
            sock: socket.into(),
            connected: false,
            started: now,
            read_buf: BytesMut::with_capacity(16 * 1024),
            out: BytesMut::with_capacity(4 * 1024),
            pending: HashMap::new(),
            broken: false,
            next_ping: now,
            ping: None,
        })
    }

    /// Whether the non-blocking connect finished; an error if it failed.
    fn check_connected(&mut self) -> io::Result<bool> {
        if let Some(e) = self.sock.take_error()? {
            return Err(e);
        }
        match self.sock.peer_addr() {
            Ok(_) => {
                self.connected = true;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Queues a frame whose body is `body_len` bytes, within the limits.
    fn queue(
        &mut self,
        frame: &ClientFrame,
        body_len: usize,
        frame_len_max: u32,
        outbound_max: usize,
    ) -> Result<(), Refused> {
        if body_len > frame_len_max as usize {
            return Err(Refused::TooLarge);
        }
        if self.out.len().saturating_add(4 + body_len) > outbound_max {
            return Err(Refused::QueueFull);
        }
        frame.encode(&mut self.out);
        Ok(())
    }

    /// Writes what the socket takes now.
    fn flush(&mut self) {
        while !self.out.is_empty() && self.connected && !self.broken {
            match self.sock.write(&self.out) {
                Ok(0) => self.broken = true,
                Ok(n) => self.out.advance(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => self.broken = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A scripted server: accepts on a loopback port and speaks frames with
    /// the codec, blocking with bounded timeouts.
    struct Server {
        listener: TcpListener,
    }

    struct Peer {
        sock: TcpStream,
        buf: BytesMut,
    }

    const WAIT: Duration = Duration::from_secs(10);

    impl Server {
        fn new() -> Self {
            Self {
                listener: TcpListener::bind("127.0.0.1:0").unwrap(),
            }
        }
        fn addr(&self) -> String {
            self.listener.local_addr().unwrap().to_string()
        }
        /// Accepts one connection, polling the client meanwhile (it must
        /// make progress for the connect to finish).
        fn accept(&self, client: &mut Client) -> Peer {
            self.listener.set_nonblocking(true).unwrap();
            let end = Instant::now() + WAIT;
            loop {
                match self.listener.accept() {
                    Ok((sock, _)) => {
                        sock.set_nonblocking(false).unwrap();
                        sock.set_read_timeout(Some(Duration::from_millis(1)))
                            .unwrap();
                        return Peer {
                            sock,
                            buf: BytesMut::new(),
                        };
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        assert!(Instant::now() < end, "no connection within {WAIT:?}");
                        client.poll(Instant::now());
                        wait_io(client, 1);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    /// Blocks up to `ms` on the client's socket: what a tool's wait does.
    fn wait_io(client: &Client, ms: i32) {
        let interest = client.interest();
        if let Some(fd) = interest.fd {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN | if interest.write { libc::POLLOUT } else { 0 },
                revents: 0,
            };
            // SAFETY: one valid pollfd, count 1.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }

    impl Peer {
        /// The next frame from the client, polling it meanwhile.
        fn frame(&mut self, client: &mut Client) -> ClientFrame {
            let end = Instant::now() + WAIT;
            let limits = DecodeLimits::default();
            loop {
                if let Some(f) = ClientFrame::decode_from(&mut self.buf, &limits).unwrap() {
                    return f;
                }
                assert!(Instant::now() < end, "no frame within {WAIT:?}");
                client.poll(Instant::now());
                let mut chunk = [0u8; 4096];
                match self.sock.read(&mut chunk) {
                    Ok(0) => panic!("client closed"),
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    Err(_) => {}
                }
            }
        }
        fn send(&mut self, frame: ClientFrame) {
            let mut b = BytesMut::new();
            frame.encode(&mut b);
            self.sock.write_all(&b).unwrap();
        }
        fn send_raw(&mut self, bytes: &[u8]) {
            self.sock.write_all(bytes).unwrap();
        }
    }

    /// Polls until an event comes, bounded.
    fn event(client: &mut Client) -> Event {
        let end = Instant::now() + WAIT;
        loop {
            client.poll(Instant::now());
            if let Some(e) = client.next_event() {
                return e;
            }
            assert!(Instant::now() < end, "no event within {WAIT:?}");
            wait_io(client, 5);
        }
    }

    fn options(addr: String) -> Options {
        Options {
            address: addr,
            login: Some((1, Bytes::from_static(b"alice"))),
            reconnect: Some(Backoff {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(5),
                multiplier: 2.0,
                jitter: 0.5,
                max_attempts: 0,
            }),
            keepalive: None,
            ..Options::default()
        }
    }

    /// Connects and answers the login; the server side of the connection.
    fn logged_in(server: &Server, client: &mut Client) -> Peer {
        let mut peer = server.accept(client);
        let ClientFrame::Request {
            key,
            correlation,
            payload,
        } = peer.frame(client)
        else {
            panic!("the login comes first");
        };
        assert_eq!((key.0, &payload[..]), (1, &b"alice"[..]));
        peer.send(ClientFrame::Reply {
            correlation,
            payload: Bytes::from_static(b"welcome"),
        });
        peer
    }

    fn correlation_of(frame: ClientFrame) -> Correlation {
        match frame {
            ClientFrame::Request { correlation, .. } => correlation,
            other => panic!("not a request: {other:?}"),
        }
    }

    #[test]
    fn backoff_grows_capped_and_jittered() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(5000),
            multiplier: 2.0,
            jitter: 0.5,
            max_attempts: 0,
        };
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 0.0), Duration::from_millis(800));
        assert_eq!(b.delay(10, 0.0), Duration::from_millis(5000));
        assert_eq!(b.delay(10, 0.5), Duration::from_millis(3750));
        // Never shorter than (1 - jitter) of the capped delay.
        assert!(b.delay(10, 0.999_999) >= Duration::from_millis(2500));
        assert_eq!(b.delay(u32::MAX, 0.0), Duration::from_millis(5000));
    }

    #[test]
    fn replies_by_correlation_pushes_and_an_unknown_error_kind_as_a_generic_error() {
        let server = Server::new();
        let mut client = Client::new(options(server.addr()));
        client.connect(Instant::now()).unwrap();
        let mut peer = logged_in(&server, &mut client);
        assert_eq!(
            event(&mut client),
            Event::LoggedIn {
                reconnect: false,
                payload: Bytes::from_static(b"welcome")
            }
        );
        let now = Instant::now();
        let a = client.request(2, b"a", None, false, now).unwrap();
        let b = client.request(2, b"b", None, false, now).unwrap();
        let c = client.request(2, b"c", None, false, now).unwrap();
        let ca = correlation_of(peer.frame(&mut client));
        let cb = correlation_of(peer.frame(&mut client));
        let cc = correlation_of(peer.frame(&mut client));
        peer.send(ClientFrame::Reply {
            correlation: cb,
            payload: Bytes::from_static(b"B"),
        });
        peer.send(ClientFrame::Push {
            key: PacketKey(100),
            payload: Bytes::from_static(b"tick"),
        });
        // An Error frame with kind 7 and reason 99: codes this build may not know.
        let mut raw = BytesMut::new();
        ClientFrame::Error {
            correlation: ca,
            error: zlink::error::Error::new(zlink::error::Reason::NoPacketHandler),
        }
        .encode(&mut raw);
        let at = raw.len() - 2;
        raw[at] = 200;
        raw[at + 1] = 99;
        peer.send_raw(&raw);
        peer.send(ClientFrame::Error {
            correlation: cc,
            error: zlink::error::Error::new(zlink::error::Reason::NoPacketHandler),
        });
        assert_eq!(
            event(&mut client),
            Event::Reply {
                id: b,
                outcome: Ok(Bytes::from_static(b"B"))
            }
        );
        assert_eq!(
            event(&mut client),
            Event::Push {
                key: 100,
                payload: Bytes::from_static(b"tick")
            }
        );
        let generic = Failure {
            kind: KIND_UNKNOWN,
            reason: 99,
            remote: true,
            outcome_unknown: false,
        };
        assert_eq!(
            event(&mut client),
            Event::Reply {
                id: a,
                outcome: Err(generic)
            }
        );
        assert_eq!(
            event(&mut client),
            Event::Reply {
                id: c,
                outcome: Err(Failure::remote(3, 21))
            }
        );
        // The connection goes on.
        assert_eq!(client.state(), State::Open);
    }

    /// The server's OutcomeUnknown (code 29: a node link went down with
    /// the request in flight) tells the game what a local one does.
    #[test]
    fn a_servers_outcome_unknown_is_marked_outcome_unknown_and_no_other_error_is() {
        use zlink::error::Reason;
        let unavailable = ErrorKind::Unavailable.code();
        let server = Failure::remote(unavailable, Reason::OutcomeUnknown.code());
        assert!(server.remote && server.outcome_unknown);
        for reason in [
            Reason::PeerUnreachable,
            Reason::StaleLocation,
            Reason::QueueFull,
        ] {
            assert!(!Failure::remote(unavailable, reason.code()).outcome_unknown);
        }
    }

    #[test]
    fn a_drop_ends_in_flight_outcome_unknown_never_replays_and_logs_in_again() {
        let server = Server::new();
        let mut client = Client::new(options(server.addr()));
        client.connect(Instant::now()).unwrap();
        let mut peer = logged_in(&server, &mut client);
        assert!(matches!(event(&mut client), Event::LoggedIn { .. }));
        let id = client
            .request(2, b"once", None, false, Instant::now())
            .unwrap();
        let _ = peer.frame(&mut client);
        drop(peer);
        assert_eq!(
            event(&mut client),
            Event::Reply {
                id,
                outcome: Err(Failure::outcome_unknown())
            }
        );
        assert_eq!(
            event(&mut client),
            Event::Closed {
                cause: Cause::ConnectionLost,
                will_reconnect: true
            }
        );
        assert!(matches!(
            event(&mut client),
            Event::Reconnecting { attempt: 1, .. }
        ));
        assert_eq!(
            client.request(2, b"x", None, false, Instant::now()),
            Err(Refused::NotConnected)
        );
        // The new connection carries the login and nothing else.
        let mut peer = logged_in(&server, &mut client);
        assert_eq!(
            event(&mut client),
            Event::LoggedIn {
                reconnect: true,
                payload: Bytes::from_static(b"welcome")
            }
        );
        client
            .request(3, b"after", None, false, Instant::now())
            .unwrap();
        match peer.frame(&mut client) {
            ClientFrame::Request { key, payload, .. } => {
                assert_eq!((key.0, &payload[..]), (3, &b"after"[..]))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(client.stats().reconnects, 1);
    }

    #[test]
    fn replaced_and_authentication_failed_never_reconnect() {
        for reason in [CloseReason::Replaced, CloseReason::AuthenticationFailed] {
            let server = Server::new();
            let mut client = Client::new(options(server.addr()));
            client.connect(Instant::now()).unwrap();
            let mut peer = logged_in(&server, &mut client);
            assert!(matches!(event(&mut client), Event::LoggedIn { .. }));
            let id = client
                .request(2, b"r", None, false, Instant::now())
                .unwrap();
            let _ = peer.frame(&mut client);
            peer.send(ClientFrame::Close { reason });
            assert_eq!(
                event(&mut client),
                Event::Reply {
                    id,
                    outcome: Err(Failure::outcome_unknown())
                }
            );
            assert_eq!(
                event(&mut client),
                Event::Closed {
                    cause: Cause::ServerClose(reason),
                    will_reconnect: false
                }
            );
            assert_eq!(client.state(), State::Closed);
            assert_eq!(client.stats().connections, 1);
        }
    }

    #[test]
    fn deadlines_end_requests_and_late_replies_are_dropped() {
        let server = Server::new();
        let mut client = Client::new(options(server.addr()));
        client.connect(Instant::now()).unwrap();
        let mut peer = logged_in(&server, &mut client);
        assert!(matches!(event(&mut client), Event::LoggedIn { .. }));
        let start = Instant::now();
        let id = client
            .request(2, b"slow", Some(Duration::from_millis(50)), false, start)
            .unwrap();
        let correlation = correlation_of(peer.frame(&mut client));
        client.poll(start + Duration::from_millis(49));
        assert_eq!(client.next_event(), None);
        client.poll(start + Duration::from_millis(50));
        assert_eq!(
            client.next_event(),
            Some(Event::Reply {
                id,
                outcome: Err(Failure::deadline())
            })
        );
        peer.send(ClientFrame::Reply {
            correlation,
            payload: Bytes::new(),
        });
        let end = Instant::now() + WAIT;
        while client.stats().dropped == 0 {
            assert!(Instant::now() < end);
            wait_io(&client, 5);
            client.poll(Instant::now());
        }
        assert_eq!(client.next_event(), None);
    }

    #[test]
    fn a_refused_relogin_of_another_kind_closes_for_good() {
        let server = Server::new();
        let mut client = Client::new(options(server.addr()));
        client.connect(Instant::now()).unwrap();
        let peer = logged_in(&server, &mut client);
        assert!(matches!(event(&mut client), Event::LoggedIn { .. }));
        drop(peer);
        assert!(matches!(event(&mut client), Event::Closed { .. }));
        assert!(matches!(event(&mut client), Event::Reconnecting { .. }));
        let mut peer = server.accept(&mut client);
        let correlation = correlation_of(peer.frame(&mut client));
        peer.send(ClientFrame::Error {
            correlation,
            error: zlink::error::Error::new(zlink::error::Reason::NoPacketHandler),
        });
        let failure = Failure::remote(3, 21);
        assert_eq!(
            event(&mut client),
            Event::ReconnectFailed {
                attempt: 1,
                cause: Cause::LoginFailed(failure)
            }
        );
        assert_eq!(
            event(&mut client),
            Event::Closed {
                cause: Cause::LoginFailed(failure),
                will_reconnect: false
            }
        );
        assert_eq!(client.state(), State::Closed);
    }

    #[test]
    fn a_push_right_behind_the_login_reply_comes_after_logged_in() {
        let server = Server::new();
        let mut client = Client::new(options(server.addr()));
        client.connect(Instant::now()).unwrap();
        let mut peer = server.accept(&mut client);
        let correlation = correlation_of(peer.frame(&mut client));
        let mut both = BytesMut::new();
        ClientFrame::Reply {
            correlation,
            payload: Bytes::from_static(b"welcome"),
        }
        .encode(&mut both);
        ClientFrame::Push {
            key: PacketKey(100),
            payload: Bytes::from_static(b"hello"),
        }
        .encode(&mut both);
        peer.send_raw(&both);
        assert!(matches!(event(&mut client), Event::LoggedIn { .. }));
        assert_eq!(
            event(&mut client),
            Event::Push {
                key: 100,
                payload: Bytes::from_static(b"hello")
            }
        );
    }

    #[test]
    fn the_first_connect_is_not_retried() {
        let addr = {
            let server = Server::new();
            server.addr()
        };
        let mut client = Client::new(options(addr));
        client.connect(Instant::now()).unwrap();
        assert_eq!(
            event(&mut client),
            Event::Closed {
                cause: Cause::ConnectFailed,
                will_reconnect: false
            }
        );
        assert_eq!(client.state(), State::Closed);
    }
}
