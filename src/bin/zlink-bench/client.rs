//! The one load client every system gets (issue 5 item 2: same client, same
//! framing, same payloads): STREAM frames from `zlink::wire::client`, one
//! connection per session, all sessions on one client thread (a tokio
//! current-thread runtime, so the client costs every system the same).
//!
//! A session first logs in (a LOGIN request naming its player, and for
//! `mixed` its room), then sends. Closed loop: it keeps `in_flight`
//! messages outstanding, replacing every answer that arrives before the
//! measured window ends. Open loop (`rate`): it sends on a fixed schedule
//! whatever is outstanding, and a message is measured from its intended
//! send time, so a stalled system is charged for the messages it delayed
//! (no coordinated omission). A message sent inside the window is measured
//! to its answer. Every message carries its sequence number in its first
//! four bytes and is tracked until answered: an answer for a number not
//! outstanding is a duplicate; a message still unanswered when the bounded
//! drain ends is lost; an answer whose payload is not the one sent is
//! corrupt. Under `mixed` a session also takes its room's server-side tick
//! pushes ([`TickStamp`]): numbered per room with no gap, so a member that
//! misses one counts it lost, and one seen twice duplicated. `churn` has
//! its own driver ([`crate::churn`]).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::ops::Range;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use zlink::error::{Error, Reason};
use zlink::ids::{Correlation, PacketKey};
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use crate::args::Workload;
use crate::lobby;

/// Request: binds the session to the player its payload names; any reply
/// is success.
pub const LOGIN: PacketKey = PacketKey(1);
/// Request relayed to the session's player, which replies with the payload.
pub const RELAY: PacketKey = PacketKey(2);
/// One-way message relayed to the session's player, which pushes the
/// payload back to the session with the same key.
pub const PUSH: PacketKey = PacketKey(3);
/// `mixed`: the push a room makes to each of its members at every tick of
/// its server-side timer, carrying a [`TickStamp`]. No client sends it.
pub const TICK: PacketKey = PacketKey(4);
/// `mixed`: players per room (sessions `k * ROOM_SIZE ..` share room `k`).
pub const ROOM_SIZE: usize = 4;

/// How long, after the measured window, a session waits for its
/// outstanding answers before it counts them lost: far beyond any relay
/// deadline of the systems (5 s in zlink).
pub const DRAIN_WAIT: Duration = Duration::from_secs(8);
/// How long connecting and logging in every session may take.
const LOGIN_WAIT: Duration = Duration::from_secs(30);
/// How many times [`login_all`] sends a session's LOGIN (or LOOKUP) that
/// the node refused with `StoreUnavailable`, at most.
const LOGIN_ATTEMPTS: u32 = 12;
/// The pause before the first such retry; it doubles with each, up to
/// [`LOGIN_RETRY_PAUSE_MAX`] (about 4 s over every attempt).
const LOGIN_RETRY_PAUSE: Duration = Duration::from_millis(10);
const LOGIN_RETRY_PAUSE_MAX: Duration = Duration::from_millis(500);
/// The histograms' range: 1 ns to 60 s at 3 significant digits.
pub const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// The player of session `index`; every system names players so.
pub fn player_name(index: usize) -> String {
    format!("p-{index}")
}

/// The room of session `index` under `mixed`.
pub fn room_name(index: usize) -> String {
    format!("room-{}", index / ROOM_SIZE)
}

/// The number of room `name` (`room-k`: k), which its tick pushes carry.
pub fn room_number(name: &str) -> Option<u32> {
    name.strip_prefix("room-")?.parse().ok()
}

/// The sessions (players) of room `room` when the run has `sessions`.
pub fn room_members(room: u32, sessions: usize) -> Range<usize> {
    let first = room as usize * ROOM_SIZE;
    first.min(sessions)..(first + ROOM_SIZE).min(sessions)
}

/// The one clock origin of the process: the systems stamp their tick
/// pushes as nanoseconds since it, and the load client reads them back.
/// Both run in this process (a `--target` mesh runs no `mixed`), so the
/// stamps are `Instant`s of one monotonic clock, not wall-clock readings
/// of two machines. Fixed before the first stamp is taken.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

/// What each `mixed` tick push carries (in the first 16 bytes of a
/// `--payload`-sized payload): the room's tick number (1, 2, 3 …, counting
/// the ticks that ran), the room, and when the room pushed it (an
/// [`Instant`] of this process).
///
/// No due time: zlink's timer counts from its shard's clock as of the
/// turn that set it, which the Actor cannot read, so a due time computed
/// from the handler's own clock would be later than the timer's and a tick
/// on time would read as a period late. The interval between two ticks as
/// the room pushed them needs no origin ([`file_tick`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickStamp {
    pub tick: u32,
    pub room: u32,
    pub sent: Instant,
}

/// The bytes a [`TickStamp`] takes.
pub const TICK_STAMP_LEN: usize = 16;

impl TickStamp {
    /// The room's `tick`th tick, pushed now.
    pub fn now(tick: u32, room: u32) -> Self {
        epoch();
        Self {
            tick,
            room,
            sent: Instant::now(),
        }
    }

    /// The push's payload: the stamp, zero-padded to `len` bytes.
    pub fn encode(&self, len: usize) -> Bytes {
        let mut payload = BytesMut::zeroed(len.max(TICK_STAMP_LEN));
        payload[..4].copy_from_slice(&self.tick.to_le_bytes());
        payload[4..8].copy_from_slice(&self.room.to_le_bytes());
        payload[8..16].copy_from_slice(&nanos_since_epoch(self.sent).to_le_bytes());
        payload.freeze()
    }

    pub fn decode(payload: &[u8]) -> Option<Self> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                payload.get(at..at + 8)?.try_into().ok()?,
            ))
        };
        let half = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(
                payload.get(at..at + 4)?.try_into().ok()?,
            ))
        };
        Some(Self {
            tick: half(0)?,
            room: half(4)?,
            sent: epoch() + Duration::from_nanos(word(8)?),
        })
    }
}

/// What a session's LOGIN carries: its player's name and, for `mixed`, a
/// newline and its room's.
pub fn login_payload(index: usize, workload: Workload) -> String {
    match workload {
        Workload::Mixed => format!("{}\n{}", player_name(index), room_name(index)),
        _ => player_name(index),
    }
}

/// A LOGIN payload's player and room names (the inverse of
/// [`login_payload`]).
pub fn login_names(text: &str) -> (&str, Option<&str>) {
    match text.split_once('\n') {
        Some((player, room)) => (player, Some(room)),
        None => (text, None),
    }
}

/// The load one run puts on a system.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub workload: Workload,
    pub sessions: usize,
    /// `--actors`: the player actors the system hosts, `sessions` or more;
    /// see [`LoadSpec::idle_players`].
    pub actors: usize,
    pub in_flight: usize,
    pub payload_len: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Open loop: messages per second over all sessions.
    pub rate: Option<u64>,
    /// `mixed`: each room's server-side tick period.
    pub tick: Duration,
    /// The zlink system's mesh; the baselines have their fixed shape.
    pub nodes: u64,
    pub shards: usize,
    /// `--messages N`: the measured window also ends once N messages were
    /// sent in it (not `churn`).
    pub messages: Option<u64>,
    /// `--target`: the running mesh to drive instead of a system started
    /// here.
    pub target: Option<Target>,
}

impl LoadSpec {
    /// The players no session binds (`sessions..actors`): the NPCs and
    /// offline players a game server keeps hosting. Every system creates
    /// them at start, idle, as plain players (`p-i`, in no room); players
    /// `0..sessions` are bound one to a session, since a second session
    /// binding the same player replaces the first (§7).
    pub fn idle_players(&self) -> Range<usize> {
        self.sessions..self.actors
    }
}

/// `--target`: a zlink mesh already running at `addresses`, playing the
/// lobby game (src/bin/lobby/game.rs). Session `i` connects to address
/// `i % n`; with two or more addresses its player is first created on
/// address `(i + 1) % n` (LOOKUP), so that its MOVEs cross a link as the
/// local RELAY does. The session logs in as player `<tag>-<i>` (`tag` unique to the run, so a
/// rerun meets fresh players at 0,0) and sends MOVE `{player, dx: 1, dy: 0}`
/// requests (the lobby's typed messages, MessagePack: src/bin/lobby/messages.rs):
/// the x of the player's `Position` reply must be its MOVE count, so a MOVE
/// the mesh lost or applied twice shows in the next reply's position.
#[derive(Clone, Debug)]
pub struct Target {
    pub addresses: Vec<SocketAddr>,
    pub tag: String,
}

impl Target {
    /// A target run with a tag no earlier run used: this process's id and
    /// the wall clock in nanoseconds.
    pub fn new(addresses: Vec<SocketAddr>) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            addresses,
            tag: format!("bench-{}-{nanos}", std::process::id()),
        }
    }

    fn player(&self, index: usize) -> String {
        format!("{}-{index}", self.tag)
    }

    fn address(&self, index: usize, fallback: SocketAddr) -> SocketAddr {
        match self.addresses.len() {
            0 => fallback,
            n => self.addresses[index % n],
        }
    }

    /// Where session `index`'s player is created: the next address after
    /// its session's, so that with two or more addresses every MOVE crosses
    /// a link both ways, as the local systems' RELAY does (§3, §4); `None`
    /// with one address (the player then lives on the session's node).
    fn player_host(&self, index: usize) -> Option<SocketAddr> {
        match self.addresses.len() {
            0 | 1 => None,
            n => Some(self.addresses[(index + 1) % n]),
        }
    }
}

/// The payload of one of the lobby game's typed messages: a struct of
/// strings and integers, which always encodes.
fn lobby_payload<M: zlink::typed::Message>(message: &M) -> Bytes {
    zlink::typed::encode(message).expect("a lobby message encodes")
}

/// A `--target` session's player, its MOVE's payload (encoded once) and how
/// far its position is from its MOVE count so far (MOVEs lost, negative, or
/// applied twice, positive). The lobby's Tick push every fourth MOVE is
/// received and ignored.
struct Mover {
    player: String,
    step: Bytes,
    offset: i64,
}

/// `--messages N`: how many messages the measured window may still send,
/// shared by every session of the run, and when the last one was sent.
/// Messages sent in the warm-up do not count.
pub struct Budget {
    left: Cell<Option<u64>>,
    ended: Cell<Option<Instant>>,
    spent: Notify,
}

impl Budget {
    pub fn new(messages: Option<u64>) -> Self {
        Self {
            left: Cell::new(messages),
            ended: Cell::new(None),
            spent: Notify::new(),
        }
    }

    /// Whether a message meant for `at` may be sent: before the window
    /// always, inside it while the budget lasts, after it never. Takes one
    /// from the budget.
    fn take(&self, at: Instant, phases: &Phases) -> bool {
        if at >= phases.measure_end {
            return false;
        }
        if at < phases.warm_end {
            return true;
        }
        match self.left.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.left.set(Some(n - 1));
                if n == 1 {
                    self.ended.set(Some(at));
                    self.spent.notify_waiters();
                }
                true
            }
        }
    }

    /// Whether the window is still open at `at` (time and budget left).
    fn open(&self, at: Instant, phases: &Phases) -> bool {
        at < phases.measure_end && self.left.get() != Some(0)
    }

    /// When the measured window ended: the last budgeted send, else its
    /// planned end.
    pub fn window_end(&self, phases: &Phases) -> Instant {
        self.ended.get().unwrap_or(phases.measure_end)
    }
}

/// When the phases of a run end, fixed once every session is logged in.
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    pub warm_end: Instant,
    pub measure_end: Instant,
    pub drain_end: Instant,
}

/// What the client saw in one run.
pub struct Tally {
    /// Latency of the messages sent inside the measured window, in ns.
    pub latency: Histogram<u64>,
    /// Messages sent inside the measured window and answered.
    pub measured: u64,
    /// Messages never answered by the end of the drain.
    pub lost: u64,
    /// Answers for a sequence number not outstanding.
    pub duplicated: u64,
    /// Answers whose payload was not the one sent.
    pub corrupt: u64,
    /// Typed errors received instead of a reply.
    pub errors: u64,
    /// Sessions that could not connect or log in, or whose connection broke.
    pub failed_sessions: u64,
    /// LOGINs (and LOOKUPs) the node refused with `StoreUnavailable` and
    /// [`login_all`] sent again, and the sessions they belong to.
    pub login_refusals: u64,
    pub refused_sessions: u64,
    /// The first anomalies, in words.
    pub notes: Vec<String>,
    /// Latency by kind of answer or operation (`relay`, `fan-out`, `login`,
    /// `pause`, ...), in ns, of those begun inside the measured window.
    pub kinds: BTreeMap<&'static str, Histogram<u64>>,
    /// `relocate`: per session, every measured request's (intended send
    /// time, latency in ns), to find the pause each move caused.
    pub timelines: Vec<(usize, Vec<(Instant, u64)>)>,
    /// `relocate`: moves that did not commit.
    pub move_failures: u64,
    /// When the phases of the run ended.
    pub phases: Option<Phases>,
    /// The measured window's length: `--duration`, or less when
    /// `--messages` ended it first.
    pub measured_seconds: f64,
    /// CPU seconds (user + system, the whole process) and wall seconds
    /// between the two samples taken inside the measured window.
    pub cpu_seconds: f64,
    pub cpu_wall_seconds: f64,
}

const NOTES_MAX: usize = 8;

impl Tally {
    pub fn new() -> Result<Self, String> {
        Ok(Self {
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .map_err(|e| format!("histogram: {e}"))?,
            measured: 0,
            lost: 0,
            duplicated: 0,
            corrupt: 0,
            errors: 0,
            failed_sessions: 0,
            login_refusals: 0,
            refused_sessions: 0,
            notes: Vec::new(),
            kinds: BTreeMap::new(),
            timelines: Vec::new(),
            move_failures: 0,
            phases: None,
            measured_seconds: 0.0,
            cpu_seconds: 0.0,
            cpu_wall_seconds: 0.0,
        })
    }

    pub fn note(&mut self, note: String) {
        if self.notes.len() < NOTES_MAX {
            self.notes.push(note);
        }
    }

    /// Records one measured answer or operation of `kind`.
    pub fn record(&mut self, kind: &'static str, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.latency.saturating_record(ns);
        self.measured += 1;
        self.record_kind(kind, ns);
    }

    /// Records `ns` in the histogram of `kind` only (a relocation's pause
    /// is no message).
    pub fn record_kind(&mut self, kind: &'static str, ns: u64) {
        let latency = &self.latency;
        let histogram = self
            .kinds
            .entry(kind)
            .or_insert_with(|| Histogram::new_from(latency));
        histogram.saturating_record(ns.max(1));
    }
}

/// Runs the load against `entry` on this thread and returns what it saw;
/// signals `bound` (when given) once every session is bound, before the
/// warm-up ([`crate::systems::Running::bound_signal`]).
pub fn run(
    entry: SocketAddr,
    spec: &LoadSpec,
    bound: Option<std::sync::mpsc::Sender<()>>,
) -> Result<Tally, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(RefCell::new(Tally::new()?));
    local.block_on(&runtime, drive_all(entry, spec, bound, Rc::clone(&tally)))?;
    Rc::try_unwrap(tally)
        .map(RefCell::into_inner)
        .map_err(|_| "a session task outlived the run".to_owned())
}

async fn drive_all(
    entry: SocketAddr,
    spec: &LoadSpec,
    bound: Option<std::sync::mpsc::Sender<()>>,
    tally: Rc<RefCell<Tally>>,
) -> Result<(), String> {
    let mut streams = Vec::with_capacity(spec.sessions);
    if spec.workload != Workload::Churn {
        streams = login_all(entry, spec, &tally).await?;
    }
    if let Some(bound) = bound {
        // A system gone meanwhile has nothing to start: its stop reports.
        let _ = bound.send(());
    }
    let now = Instant::now();
    let phases = Phases {
        warm_end: now + spec.warmup,
        measure_end: now + spec.warmup + spec.duration,
        drain_end: now + spec.warmup + spec.duration + DRAIN_WAIT,
    };
    let budget = Rc::new(Budget::new(spec.messages));
    let cpu = tokio::task::spawn_local(sample_cpu(phases, Rc::clone(&budget)));
    let drivers: Vec<_> = if spec.workload == Workload::Churn {
        (0..spec.sessions)
            .map(|index| {
                tokio::task::spawn_local(crate::churn::drive(
                    entry,
                    index,
                    spec.payload_len,
                    phases,
                    Rc::clone(&tally),
                ))
            })
            .collect()
    } else {
        streams
            .into_iter()
            .map(|(index, stream)| {
                tokio::task::spawn_local(drive(
                    index,
                    stream,
                    spec.clone(),
                    phases,
                    Rc::clone(&tally),
                    Rc::clone(&budget),
                ))
            })
            .collect()
    };
    for handle in drivers {
        handle
            .await
            .map_err(|e| format!("a session task failed: {e}"))?;
    }
    let (cpu_seconds, cpu_wall_seconds) = cpu.await.map_err(|e| format!("cpu sampler: {e}"))??;
    let mut t = tally.borrow_mut();
    t.cpu_seconds = cpu_seconds;
    t.cpu_wall_seconds = cpu_wall_seconds;
    t.phases = Some(phases);
    t.measured_seconds = (budget.window_end(&phases) - phases.warm_end).as_secs_f64();
    Ok(())
}

/// Connects and logs every session in, concurrently; a session that fails
/// is counted and noted. A LOGIN (or a `--target` LOOKUP) refused with
/// `StoreUnavailable` is sent again on its connection after a pause
/// ([`ask`]), as a game client would: a storm of thousands of logins at
/// once fills a node's bounded store queue (src/runtime/store_effects.rs),
/// which refuses what it cannot hold at once with that typed error, one
/// that says the operation may be retried (`Reason::StoreUnavailable`,
/// src/error.rs). The refusals are counted ([`Tally::login_refusals`]); a
/// session still refused after [`LOGIN_ATTEMPTS`] fails with that error.
pub async fn login_all(
    entry: SocketAddr,
    spec: &LoadSpec,
    tally: &Rc<RefCell<Tally>>,
) -> Result<Vec<(usize, TcpStream)>, String> {
    let logins: Vec<_> = (0..spec.sessions)
        .map(|index| {
            let target = spec.target.as_ref().map(|target| {
                (
                    target.address(index, entry),
                    target.player(index),
                    target.player_host(index),
                )
            });
            let workload = spec.workload;
            let tally = Rc::clone(tally);
            tokio::task::spawn_local(async move {
                let refused = Cell::new(0);
                let outcome = async {
                    let Some((entry, player, host)) = target else {
                        let payload = login_payload(index, workload);
                        let bytes = Bytes::from(payload.clone().into_bytes());
                        return ask(entry, (LOGIN, "login"), &payload, bytes, Some(&refused)).await;
                    };
                    if let Some(host) = host {
                        // Placed by a connection of its own, which then
                        // closes: a LOOKUP binds nothing, so the player stays.
                        let lookup = lobby_payload(&lobby::Lookup {
                            player: player.clone(),
                        });
                        let what = (lobby::LOOKUP, "lookup");
                        ask(host, what, &player, lookup, Some(&refused)).await?;
                    }
                    let login = lobby_payload(&lobby::Login {
                        player: player.clone(),
                    });
                    let what = (lobby::LOGIN, "login");
                    ask(entry, what, &player, login, Some(&refused)).await
                }
                .await;
                if refused.get() > 0 {
                    let mut t = tally.borrow_mut();
                    t.login_refusals += u64::from(refused.get());
                    t.refused_sessions += 1;
                }
                outcome.map(|stream| (index, stream))
            })
        })
        .collect();
    let mut streams = Vec::with_capacity(spec.sessions);
    for handle in logins {
        let outcome = tokio::time::timeout(LOGIN_WAIT, handle)
            .await
            .map_err(|_| "logging the sessions in took too long".to_owned())?
            .map_err(|e| format!("a login task failed: {e}"))?;
        match outcome {
            Ok(stream) => streams.push(stream),
            Err(why) => {
                let mut t = tally.borrow_mut();
                t.failed_sessions += 1;
                t.note(why);
            }
        }
    }
    Ok(streams)
}

/// CPU time used by the whole process (client and system threads alike)
/// from the start to the end of the measured window (its planned end, or
/// the last send `--messages` allowed), and the wall time between the two
/// samples (the sampler may wake late on a busy thread).
async fn sample_cpu(phases: Phases, budget: Rc<Budget>) -> Result<(f64, f64), String> {
    tokio::time::sleep_until(phases.warm_end.into()).await;
    let (cpu_start, wall_start) = (crate::report::process_cpu_seconds()?, Instant::now());
    let spent = budget.spent.notified();
    if budget.open(Instant::now(), &phases) {
        tokio::select! {
            () = tokio::time::sleep_until(phases.measure_end.into()) => {}
            () = spent => {}
        }
    }
    let (cpu_end, wall_end) = (crate::report::process_cpu_seconds()?, Instant::now());
    Ok((cpu_end - cpu_start, (wall_end - wall_start).as_secs_f64()))
}

/// Connects and logs in with `payload` (a player's name, and a room's for
/// `mixed`): the LOGIN request binds the session to the player. Returns the
/// connection once the LOGIN is answered.
pub async fn login(entry: SocketAddr, payload: &str) -> Result<TcpStream, String> {
    let bytes = Bytes::from(payload.to_owned().into_bytes());
    ask(entry, (LOGIN, "login"), payload, bytes, None).await
}

/// Connects and sends one request `key` (named `what` in errors, with
/// `who`) with `payload`; returns the connection once it is answered.
/// With `refused`, a refusal with `StoreUnavailable` is counted there and
/// the request sent again on the connection after a pause, up to
/// [`LOGIN_ATTEMPTS`] in all ([`login_all`]); without, it is the error.
async fn ask(
    entry: SocketAddr,
    (key, what): (PacketKey, &str),
    who: &str,
    payload: Bytes,
    refused: Option<&Cell<u32>>,
) -> Result<TcpStream, String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(entry)
        .await
        .map_err(|e| format!("{who}: connect: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("{who}: nodelay: {e}"))?;
    let mut pause = LOGIN_RETRY_PAUSE;
    let mut attempt = 1;
    loop {
        // Each attempt has its own correlation, so that no answer to an
        // earlier one could pass for this one's.
        let correlation = Correlation(attempt);
        let mut out = BytesMut::new();
        ClientFrame::Request {
            key,
            correlation,
            payload: payload.clone(),
        }
        .encode(&mut out);
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("{who}: {what} write: {e}"))?;
        let error = match read_answer(&mut stream, correlation).await {
            Ok(_) => return Ok(stream),
            Err(Unanswered::Refused(error)) => error,
            Err(Unanswered::Broken(why)) => return Err(format!("{who}: {what}: {why}")),
        };
        let retry = refused
            .filter(|_| error.reason() == Reason::StoreUnavailable && attempt < LOGIN_ATTEMPTS);
        let Some(refused) = retry else {
            return Err(format!(
                "{who}: {what}: typed error: {error} (attempt {attempt}, {:.2} s after connecting)",
                started.elapsed().as_secs_f64()
            ));
        };
        refused.set(refused.get() + 1);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LOGIN_RETRY_PAUSE_MAX);
        attempt += 1;
    }
}

/// What a request got instead of its reply.
enum Unanswered {
    /// A typed error for it.
    Refused(Error),
    /// A close, a broken connection, a malformed or unexpected frame.
    Broken(String),
}

/// Reads frames until the reply to `correlation` and returns its payload;
/// a typed error, a close or another frame is an error (a ping is
/// answered, a push skipped: under `mixed` the room's server-side tick
/// may reach a member between its binding and its LOGIN's reply).
pub async fn answer(stream: &mut TcpStream, correlation: Correlation) -> Result<Bytes, String> {
    read_answer(stream, correlation)
        .await
        .map_err(|unanswered| match unanswered {
            Unanswered::Refused(error) => format!("typed error: {error}"),
            Unanswered::Broken(why) => why,
        })
}

/// [`answer`], with the typed error kept whole.
async fn read_answer(
    stream: &mut TcpStream,
    correlation: Correlation,
) -> Result<Bytes, Unanswered> {
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(4096);
    loop {
        match ClientFrame::decode_from(&mut inbound, &limits) {
            Ok(None) => {}
            Ok(Some(ClientFrame::Reply {
                correlation: c,
                payload,
            })) if c == correlation => return Ok(payload),
            Ok(Some(ClientFrame::Ping { nonce })) => {
                let mut out = BytesMut::new();
                ClientFrame::Pong { nonce }.encode(&mut out);
                stream
                    .write_all(&out)
                    .await
                    .map_err(|e| Unanswered::Broken(format!("pong write: {e}")))?;
                continue;
            }
            Ok(Some(ClientFrame::Push { .. })) => continue,
            Ok(Some(ClientFrame::Error { error, .. })) => return Err(Unanswered::Refused(error)),
            Ok(Some(other)) => return Err(Unanswered::Broken(format!("answered with {other:?}"))),
            Err(e) => return Err(Unanswered::Broken(format!("malformed answer: {e}"))),
        }
        let n = stream
            .read_buf(&mut inbound)
            .await
            .map_err(|e| Unanswered::Broken(format!("read: {e}")))?;
        if n == 0 {
            return Err(Unanswered::Broken("closed by the server".to_owned()));
        }
    }
}

/// `mixed`: what one session saw of its room's ticks.
#[derive(Default)]
struct TickSeen {
    /// The last tick number received, which the next must follow, and
    /// when the room pushed it.
    last: Option<(u32, Instant)>,
}

/// One session's message window.
struct Window {
    index: usize,
    workload: Workload,
    payload_len: usize,
    next_seq: u32,
    /// Sequence number → intended send time.
    outstanding: HashMap<u32, Instant>,
    outbound: BytesMut,
    /// `relocate`: the measured requests' (intended send time, latency).
    timeline: Vec<(Instant, u64)>,
    /// `--target`: the requests are the lobby game's MOVEs.
    mover: Option<Mover>,
    /// `mixed`: the room's tick pushes seen so far.
    ticks: TickSeen,
}

impl Window {
    /// Queues the next message, meant to leave at `intended`; it goes out
    /// with the next write.
    fn queue(&mut self, intended: Instant) {
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        let seq = self.next_seq;
        if let Some(mover) = &self.mover {
            ClientFrame::Request {
                key: lobby::MOVE,
                correlation: Correlation(seq),
                payload: mover.step.clone(),
            }
            .encode(&mut self.outbound);
            self.outstanding.insert(seq, intended);
            return;
        }
        let mut payload = BytesMut::zeroed(self.payload_len);
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        let sender = u32::try_from(self.index).unwrap_or(u32::MAX);
        payload[4..8].copy_from_slice(&sender.to_le_bytes());
        let payload = payload.freeze();
        let frame = match self.workload {
            Workload::Push => ClientFrame::Message { key: PUSH, payload },
            _ => ClientFrame::Request {
                key: RELAY,
                correlation: Correlation(seq),
                payload,
            },
        };
        frame.encode(&mut self.outbound);
        self.outstanding.insert(seq, intended);
    }
}

/// Checks a `--target` MOVE reply: after MOVE number `seq` (the session's
/// first is 1) the player stands at `seq,0`. A position further on than
/// the last reply's offset says MOVEs were applied twice; one behind says
/// MOVEs were lost; a reply that is no position is corrupt.
fn check_move(mover: &mut Mover, seq: u32, payload: &[u8], t: &mut Tally) {
    let x = zlink::typed::decode::<lobby::Position>(payload)
        .map_err(|e| e.to_string())
        .and_then(|at| match at {
            lobby::Position { x, y: 0 } => Ok(x),
            other => Err(format!("{other:?} is off the x axis")),
        });
    let x = match x {
        Ok(x) => x,
        Err(why) => {
            t.corrupt += 1;
            t.note(format!(
                "{}: the reply to MOVE {seq} is no position: {why}",
                mover.player
            ));
            return;
        }
    };
    let offset = x - i64::from(seq);
    let change = offset - mover.offset;
    if change == 0 {
        return;
    }
    mover.offset = offset;
    if change > 0 {
        t.duplicated += change.unsigned_abs();
    } else {
        t.lost += change.unsigned_abs();
    }
    t.note(format!(
        "{}: MOVE {seq} answered at x = {x}: {} MOVE(s) {}",
        mover.player,
        change.unsigned_abs(),
        if change > 0 { "applied twice" } else { "lost" }
    ));
}

/// The sequence number and the sender a payload carries.
fn seq_of(payload: &[u8]) -> Option<(u32, usize)> {
    let seq: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    let sender: [u8; 4] = payload.get(4..8)?.try_into().ok()?;
    let sender = usize::try_from(u32::from_le_bytes(sender)).ok()?;
    Some((u32::from_le_bytes(seq), sender))
}

/// Open loop: when this session's next message is due.
struct Schedule {
    next: Instant,
    interval: Duration,
}

async fn drive(
    index: usize,
    mut stream: TcpStream,
    spec: LoadSpec,
    phases: Phases,
    tally: Rc<RefCell<Tally>>,
    budget: Rc<Budget>,
) {
    let mut window = Window {
        index,
        workload: spec.workload,
        payload_len: spec.payload_len,
        next_seq: 0,
        outstanding: HashMap::with_capacity(spec.in_flight),
        outbound: BytesMut::with_capacity(4096),
        timeline: Vec::new(),
        mover: spec.target.as_ref().map(|target| {
            let player = target.player(index);
            let step = lobby_payload(&lobby::Move {
                player: player.clone(),
                dx: 1,
                dy: 0,
            });
            Mover {
                player,
                step,
                offset: 0,
            }
        }),
        ticks: TickSeen::default(),
    };
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(16 * 1024);
    // Open loop: the sessions' schedules are spread over one interval so
    // that the total rate is even.
    let mut schedule = spec.rate.map(|rate| {
        let interval = Duration::from_secs_f64(spec.sessions as f64 / rate as f64);
        Schedule {
            next: Instant::now() + interval.mul_f64(index as f64 / spec.sessions as f64),
            interval,
        }
    });
    if schedule.is_none() {
        for _ in 0..spec.in_flight {
            let now = Instant::now();
            if budget.take(now, &phases) {
                window.queue(now);
            }
        }
    }
    let player = spec
        .target
        .as_ref()
        .map_or_else(|| player_name(index), |t| t.player(index));
    let mut sending = true;
    let broke = loop {
        if let Some(s) = &mut schedule {
            let now = Instant::now();
            while s.next <= now && budget.take(s.next, &phases) {
                window.queue(s.next);
                s.next += s.interval;
            }
        }
        if !window.outbound.is_empty() {
            if let Err(e) = stream.write_all(&window.outbound).await {
                break Some(format!("{player}: write: {e}"));
            }
            window.outbound.clear();
        }
        let still = match &schedule {
            Some(s) => budget.open(s.next, &phases),
            None => budget.open(Instant::now(), &phases),
        };
        if sending && !still {
            sending = false;
        }
        if !sending && window.outstanding.is_empty() {
            break None;
        }
        let wake = match &schedule {
            Some(s) if sending => s.next,
            _ => phases.drain_end,
        };
        let read = tokio::time::timeout_at(wake.into(), stream.read_buf(&mut inbound));
        match read.await {
            Err(_) if Instant::now() >= phases.drain_end => break None,
            Err(_) => continue,
            Ok(Ok(0)) => break Some(format!("{player}: the server closed the connection")),
            Ok(Err(e)) => break Some(format!("{player}: read: {e}")),
            Ok(Ok(_)) => {}
        }
        let refill = schedule.is_none();
        if let Err(why) = file_frames(
            &mut window,
            &mut inbound,
            &limits,
            &phases,
            &tally,
            &budget,
            refill,
        ) {
            break Some(format!("{player}: {why}"));
        }
    };
    let mut t = tally.borrow_mut();
    t.lost += window.outstanding.len() as u64;
    if spec.workload == Workload::Relocate {
        t.timelines.push((index, window.timeline));
    }
    if let Some(why) = broke {
        t.failed_sessions += 1;
        t.note(why);
    }
}

/// Files every complete frame in `inbound`; closed loop (`refill`), each
/// answer is replaced by a new message while the measured window is open
/// and the budget lasts.
fn file_frames(
    window: &mut Window,
    inbound: &mut BytesMut,
    limits: &DecodeLimits,
    phases: &Phases,
    tally: &Rc<RefCell<Tally>>,
    budget: &Budget,
    refill: bool,
) -> Result<(), String> {
    loop {
        let frame = ClientFrame::decode_from(inbound, limits)
            .map_err(|e| format!("malformed frame: {e}"))?;
        let Some(frame) = frame else {
            return Ok(());
        };
        let (kind, seq, payload) = match (window.workload, frame) {
            (
                Workload::Relay | Workload::Mixed | Workload::Relocate,
                ClientFrame::Reply {
                    correlation,
                    payload,
                },
            ) => ("relay", correlation.0, payload),
            (Workload::Push, ClientFrame::Push { key, payload }) if key == PUSH => {
                ("push", seq_of(&payload).map_or(0, |(seq, _)| seq), payload)
            }
            (Workload::Mixed, ClientFrame::Push { key, payload }) if key == TICK => {
                let end = budget.window_end(phases);
                file_tick(window, &payload, phases, end, &mut tally.borrow_mut());
                continue;
            }
            (_, ClientFrame::Error { correlation, error }) => {
                let mut t = tally.borrow_mut();
                t.errors += 1;
                t.note(format!("typed error for {}: {error}", correlation.0));
                window.outstanding.remove(&correlation.0);
                continue;
            }
            (_, ClientFrame::Push { key, .. }) if key == lobby::TICK && window.mover.is_some() => {
                continue;
            }
            (_, ClientFrame::Ping { nonce }) => {
                ClientFrame::Pong { nonce }.encode(&mut window.outbound);
                continue;
            }
            (_, ClientFrame::Close { reason }) => {
                return Err(format!("closed by the server: {reason:?}"))
            }
            (_, other) => return Err(format!("unexpected frame {other:?}")),
        };
        let now = Instant::now();
        let mut t = tally.borrow_mut();
        let Some(sent) = window.outstanding.remove(&seq) else {
            t.duplicated += 1;
            t.note(format!("an answer for {seq}, which is not outstanding"));
            continue;
        };
        if let Some(mover) = &mut window.mover {
            check_move(mover, seq, &payload, &mut t);
        } else if payload.len() != window.payload_len
            || seq_of(&payload) != Some((seq, window.index))
        {
            t.corrupt += 1;
            t.note(format!("the answer to {seq} carries another payload"));
        }
        if sent >= phases.warm_end && sent < phases.measure_end {
            t.record(kind, now - sent);
            if window.workload == Workload::Relocate {
                let ns = u64::try_from((now - sent).as_nanos()).unwrap_or(u64::MAX);
                window.timeline.push((sent, ns));
            }
        }
        drop(t);
        if refill && budget.take(now, phases) {
            window.queue(now);
        }
    }
}

/// `mixed`: files one tick push of the session's room. Its number must
/// follow the last one this session saw (the room numbers the ticks that
/// ran, 1, 2, 3 … with no gap): a gap is ticks pushed to this member and
/// never received (lost), a number not after the last a duplicate. The
/// first tick a session sees may be any: its room ticked before it logged
/// in. A tick pushed inside the measured window (`phases.warm_end` to
/// `window_end`) is timed as `tick`, from the room's push to this
/// member's receipt; the room's first member also records, once per tick,
/// the time since the room pushed the tick before it (`tick-interval`):
/// the period when the timer keeps time, more when a tick ran late, two
/// periods when one was skipped.
fn file_tick(
    window: &mut Window,
    payload: &[u8],
    phases: &Phases,
    window_end: Instant,
    t: &mut Tally,
) {
    let now = Instant::now();
    let room = u32::try_from(window.index / ROOM_SIZE).unwrap_or(u32::MAX);
    let whole = payload.len() == window.payload_len.max(TICK_STAMP_LEN);
    let stamp = match TickStamp::decode(payload) {
        Some(stamp) if stamp.room == room && whole => stamp,
        _ => {
            t.corrupt += 1;
            t.note(format!(
                "session {} got a tick push that is not its room's",
                window.index
            ));
            return;
        }
    };
    let mut previous = None;
    match window.ticks.last {
        Some((last, _)) if stamp.tick <= last => {
            t.duplicated += 1;
            t.note(format!(
                "session {}: tick {} of room {room} after tick {last}",
                window.index, stamp.tick
            ));
            return;
        }
        Some((last, _)) if stamp.tick > last + 1 => {
            let missed = stamp.tick - last - 1;
            t.lost += u64::from(missed);
            t.note(format!(
                "session {}: {missed} tick(s) of room {room} missing before tick {}",
                window.index, stamp.tick
            ));
        }
        Some((_, sent)) => previous = Some(sent),
        None => {}
    }
    window.ticks.last = Some((stamp.tick, stamp.sent));
    if stamp.sent >= phases.warm_end && stamp.sent < window_end {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        t.record_kind("tick", ns(now.saturating_duration_since(stamp.sent)));
        if let (0, Some(previous)) = (window.index % ROOM_SIZE, previous) {
            t.record_kind(
                "tick-interval",
                ns(stamp.sent.saturating_duration_since(previous)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_stamp_reads_back_as_pushed_whatever_the_payload_size() {
        let stamp = TickStamp::now(7, 3);
        for len in [8, TICK_STAMP_LEN, 64] {
            let payload = stamp.encode(len);
            assert_eq!(payload.len(), len.max(TICK_STAMP_LEN));
            let back = TickStamp::decode(&payload).unwrap();
            assert_eq!((back.tick, back.room), (7, 3));
            // Nanoseconds since the process's epoch: exact to the ns.
            assert_eq!(back.sent, stamp.sent);
        }
        assert_eq!(TickStamp::decode(&[0; 15]), None);
    }
    /// A node on loopback that answers each request of one connection in
    /// turn with `answers` (an error, or a reply when `None`), then
    /// closes it.
    async fn fake_node(answers: Vec<Option<Reason>>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (limits, mut inbound) = (DecodeLimits::default(), BytesMut::new());
            for answer in answers {
                let correlation = loop {
                    match ClientFrame::decode_from(&mut inbound, &limits).unwrap() {
                        Some(ClientFrame::Request { correlation, .. }) => break correlation,
                        Some(other) => panic!("the client sent {other:?}"),
                        None => assert!(stream.read_buf(&mut inbound).await.unwrap() > 0),
                    }
                };
                let frame = match answer {
                    Some(reason) => ClientFrame::Error {
                        correlation,
                        error: Error::new(reason),
                    },
                    None => ClientFrame::Reply {
                        correlation,
                        payload: Bytes::from_static(b"welcome"),
                    },
                };
                let mut out = BytesMut::new();
                frame.encode(&mut out);
                stream.write_all(&out).await.unwrap();
            }
        });
        addr
    }

    /// Runs `ask` for a LOGIN against a [`fake_node`] answering `answers`;
    /// whether it succeeded, and the refusals it counted (`None`: asked
    /// without retries).
    fn ask_against(answers: Vec<Option<Reason>>, retry: bool) -> (Result<(), String>, u32) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, async move {
            let entry = fake_node(answers).await;
            let refused = Cell::new(0);
            let payload = Bytes::from_static(b"p-0");
            let outcome = ask(
                entry,
                (LOGIN, "login"),
                "p-0",
                payload,
                retry.then_some(&refused),
            )
            .await
            .map(drop);
            (outcome, refused.get())
        })
    }

    #[test]
    fn a_login_refused_for_a_full_store_queue_is_sent_again_until_answered() {
        let refusal = Some(Reason::StoreUnavailable);
        assert_eq!(ask_against(vec![refusal, refusal, None], true), (Ok(()), 2));
    }

    #[test]
    fn another_refusal_or_no_retry_is_the_login_s_error_with_what_it_got() {
        let (outcome, refused) = ask_against(vec![Some(Reason::QueueFull)], true);
        assert_eq!(refused, 0);
        assert!(outcome
            .unwrap_err()
            .contains("typed error: Unavailable: a bounded queue is full (attempt 1"));
        let (outcome, _) = ask_against(vec![Some(Reason::StoreUnavailable)], false);
        assert!(outcome
            .unwrap_err()
            .contains("the location store is unavailable (attempt 1"));
    }

    #[test]
    fn a_login_refused_at_every_attempt_fails_with_the_last_refusal() {
        let answers = vec![Some(Reason::StoreUnavailable); LOGIN_ATTEMPTS as usize];
        let (outcome, refused) = ask_against(answers, true);
        assert_eq!(refused, LOGIN_ATTEMPTS - 1);
        let why = outcome.unwrap_err();
        assert!(
            why.contains(&format!("(attempt {LOGIN_ATTEMPTS},")),
            "{why}"
        );
    }
}
