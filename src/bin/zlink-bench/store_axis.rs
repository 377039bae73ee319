//! `--store-axis` (issue 19 item 7): what a slow or hung Location Store
//! costs the sessions already playing. Every store call is an effect run on
//! the node's store workers (docs/threading.md "Never block a shard"), so
//! neither a login storm against a slower store nor a store that hangs for
//! seconds should show in the relays of established sessions, which never
//! read the store (§5). This mode measures it instead of assuming it.
//!
//! It starts the store (a real `redis-server` child behind a delay proxy of
//! its own, or the embedded store behind an in-process gate), two zlink
//! nodes on it, and established sessions, each bound to a player created on
//! the other node, relaying closed loop (one thread each, one request in
//! flight). Then it runs four phases, each a warm-up and a measured window:
//!
//! - A: a login storm (threads that log a new player in on alternating
//!   nodes, a store create each, and disconnect) at +0 ms store latency;
//! - B: the same storm with every store round trip `--store-latency` slower;
//! - C: no storm, nothing slowed: the baseline;
//! - D: no storm, the store hung (SIGSTOP, or the gate closed) for
//!   `--store-hang` in the middle of the window.
//!
//! It reports each phase's relays/s, latency percentiles, the longest gap
//! between two replies of one session, and the logins, then the two ratios
//! the issue names. It asserts no speed: only an established request that
//! ended in an error fails the run (exit 1), as a lost message does in the
//! load runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use zlink::api::{IoBackend, Node};
use zlink::client::{Client, ClientError};
use zlink::core::time::Instant as StoreInstant;
use zlink::ids::{ActorId, MeshName, NodeGeneration, NodeRid, RelocationId};
use zlink::store::{
    AbortOutcome, CasOutcome, Created, EmbeddedStore, LocationRow, LocationStore, Member,
    MonotonicClock, OwnerClaim, OwnerLease, RedisStore, RedisStoreConfig, RemoveOutcome,
    RowVersion, StoreError,
};

use crate::args::{Options, StoreAxis, StoreKind};
use crate::client::{player_name, LATENCY_MAX_NS, LOGIN, RELAY};
use crate::systems::zlink::{start_linked, LEASE_TERM, PLAYER};

/// Threads of the login storm: enough to keep a store create in flight on
/// each node most of the time, few enough to leave the 2 vCPUs to the
/// sessions being measured.
const STORM_THREADS: usize = 2;
/// The limit of each store call (RedisStoreConfig's default): a hung store
/// makes a call fail `Unavailable` after it, on either store.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long an established request may wait for its reply: longer than any
/// hang this mode makes, so that a relay stalled by the hang shows as its
/// latency and gap, not as an error.
const REQUEST_SLACK: Duration = Duration::from_secs(5);
/// How long a storm login may wait: a refused or timed-out login is
/// counted, not judged.
const LOGIN_WAIT: Duration = Duration::from_secs(5);
/// How long an established session's first login may take.
const SETUP_WAIT: Duration = Duration::from_secs(10);
/// How long redis-server may take to answer its first PING.
const REDIS_START_WAIT: Duration = Duration::from_secs(10);
/// Free ports tried for redis-server: another process may take the one
/// picked between the probe and the server's bind.
const REDIS_PORT_TRIES: usize = 5;
/// The proxy's connect to Redis (a loopback connect: immediate unless the
/// server is gone).
const PROXY_CONNECT_WAIT: Duration = Duration::from_secs(1);
/// Gaps between replies kept with their time, to tell in phase D the
/// gaps that overlap the hang from those outside it (the machine's own
/// stalls): shorter ones are the closed loop's ordinary turn.
const GAP_KEPT: Duration = Duration::from_millis(1);
/// The most of the window kept on each side of the hang in phase D.
const HANG_MARGIN_MAX: Duration = Duration::from_millis(500);
/// The goals, printed beside the measured ratios (not asserted).
const P99_RATIO_GOAL: f64 = 1.2;
const GAP_GROWTH_GOAL_MS: f64 = 50.0;

/// One phase of the axis.
#[derive(Clone, Copy, Debug)]
struct Phase {
    name: &'static str,
    /// Whether the login storm runs.
    storm: bool,
    /// Whether every store round trip is `--store-latency` slower.
    slow: bool,
    /// Whether the store hangs for `--store-hang` mid-window.
    hang: bool,
}

const PHASES: [Phase; 4] = [
    Phase {
        name: "A",
        storm: true,
        slow: false,
        hang: false,
    },
    Phase {
        name: "B",
        storm: true,
        slow: true,
        hang: false,
    },
    Phase {
        name: "C",
        storm: false,
        slow: false,
        hang: false,
    },
    Phase {
        name: "D",
        storm: false,
        slow: false,
        hang: true,
    },
];

impl Phase {
    fn describes(&self, axis: &StoreAxis) -> String {
        let latency = if self.slow {
            axis.latency
        } else {
            Duration::ZERO
        };
        let mut text = format!("store +{} ms", ms(latency));
        text.push_str(if self.storm { ", storm" } else { ", no storm" });
        if self.hang {
            let _ = write!(text, ", hung {} ms", ms(axis.hang));
        }
        text
    }
}

/// Milliseconds of `d`, as printed.
fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms}")
    }
}

fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).map_err(|e| format!("histogram: {e}"))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------- redis

/// A redis-server child on a free loopback port, in memory only (`--save ''
/// --appendonly no`): the store a mesh of processes would use, started and
/// owned by the bench so that it can hang it (SIGSTOP). Dropping it kills
/// it, on every path out of the mode, a stopped one included.
struct RedisChild {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RedisChild {
    fn start() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!(
            "zlink-bench-store-axis-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        for _ in 0..REDIS_PORT_TRIES {
            let port = free_port()?;
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--protected-mode", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        "redis-server is not installed: --store redis runs a real one \
                         (apt-get install redis-server), or use --store embedded"
                            .to_owned()
                    } else {
                        format!("starting redis-server: {e}")
                    }
                })?;
            // Owned before the wait, so that a failed wait kills it.
            let mut redis = RedisChild {
                child,
                port,
                dir: dir.clone(),
            };
            if redis.wait_ready()? {
                return Ok(redis);
            }
        }
        Err(format!(
            "redis-server did not start on a free port after {REDIS_PORT_TRIES} tries"
        ))
    }

    fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// Waits (bounded) until the server answers PING; `false` if it exited
    /// first (the port was taken meanwhile).
    fn wait_ready(&mut self) -> Result<bool, String> {
        let deadline = Instant::now() + REDIS_START_WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Ok(false);
            }
            if ping(self.addr()) {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!(
            "redis-server on port {} did not answer PING within {:?}",
            self.port, REDIS_START_WAIT
        ))
    }

    /// SIGSTOP: the whole server hangs (the kernel still accepts its
    /// connections, nothing answers), as a server stuck in a long command,
    /// a fork or a paused VM does.
    fn stop(&self) -> Result<(), String> {
        self.signal(libc::SIGSTOP, "SIGSTOP")
    }

    /// SIGCONT: the server answers again.
    fn resume(&self) -> Result<(), String> {
        self.signal(libc::SIGCONT, "SIGCONT")
    }

    fn signal(&self, signal: libc::c_int, name: &str) -> Result<(), String> {
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| format!("redis-server's pid {} does not fit", self.child.id()))?;
        // SAFETY: kill(2) signals the redis-server child this process
        // started and has not waited for, so the pid is still that child's.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(format!(
                "{name} to redis-server: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

impl Drop for RedisChild {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A number unique in this process, for names.
fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A loopback port nothing listens on right now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// One PING in RESP over a fresh connection: whether `+PONG` came back.
fn ping(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    if stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .is_err()
        || stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err()
    {
        return false;
    }
    let mut reply = [0u8; 16];
    matches!(stream.read(&mut reply), Ok(n) if reply[..n].starts_with(b"+PONG"))
}

// ---------------------------------------------------------------- proxy

/// A TCP proxy between zlink's Redis clients and Redis that holds every
/// client→Redis chunk for a delay before passing it on (Redis→client goes
/// straight through), so each store round trip takes that much longer: a
/// store one network hop further away, without touching the machine's
/// network settings. The delay is an atomic, so a phase changes it while
/// the connections stay up; each chunk is stamped when read and sent when
/// due, in order, so chunks in flight do not add up their delays.
struct DelayProxy {
    addr: SocketAddr,
    delay_ns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl DelayProxy {
    fn start(upstream: SocketAddr) -> Result<Self, String> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| format!("the store proxy's listener: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("the store proxy's address: {e}"))?;
        let delay_ns = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (delay, stopped) = (Arc::clone(&delay_ns), Arc::clone(&stop));
        let acceptor = std::thread::Builder::new()
            .name("store-proxy".to_owned())
            .spawn(move || {
                for client in listener.incoming() {
                    if stopped.load(Ordering::Acquire) {
                        break;
                    }
                    // A failed connection is the store client's error (it
                    // sees the socket close): the proxy goes on.
                    let piped = client.and_then(|client| pipe(client, upstream, &delay));
                    if let Err(e) = piped {
                        eprintln!("zlink-bench: store proxy: {e}");
                    }
                }
            })
            .map_err(|e| format!("spawning the store proxy: {e}"))?;
        Ok(Self {
            addr,
            delay_ns,
            stop,
            acceptor: Some(acceptor),
        })
    }

    fn set_delay(&self, delay: Duration) {
        self.delay_ns.store(nanos(delay), Ordering::Release);
    }
}

impl Drop for DelayProxy {
    /// Stops accepting. The connections' threads end when their sockets
    /// close: when the store clients are dropped with the nodes, and when
    /// redis-server is killed.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the acceptor out of accept(); if even that fails the thread
        // is left blocked rather than joined forever.
        let woken = TcpStream::connect_timeout(&self.addr, PROXY_CONNECT_WAIT).is_ok();
        if let Some(acceptor) = self.acceptor.take().filter(|_| woken) {
            let _ = acceptor.join();
        }
    }
}

/// Connects `client` to `upstream` through three threads: the reader
/// stamps each client chunk with its due time, the writer sends it to
/// Redis when due, and the way back is a plain copy. Each side's end
/// (EOF or error) is passed on as a shutdown of the other side's write.
fn pipe(client: TcpStream, upstream: SocketAddr, delay: &Arc<AtomicU64>) -> std::io::Result<()> {
    let server = TcpStream::connect_timeout(&upstream, PROXY_CONNECT_WAIT)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (due_tx, due_rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let mut from_client = client.try_clone()?;
    let delay = Arc::clone(delay);
    spawn("store-proxy-in", move || {
        let mut chunk = vec![0u8; 16 * 1024];
        while let Ok(n @ 1..) = from_client.read(&mut chunk) {
            let due = Instant::now() + Duration::from_nanos(delay.load(Ordering::Acquire));
            if due_tx.send((due, chunk[..n].to_vec())).is_err() {
                break;
            }
        }
    })?;
    let mut to_server = server.try_clone()?;
    spawn("store-proxy-delay", move || {
        for (due, chunk) in due_rx {
            let left = due.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                std::thread::sleep(left);
            }
            if to_server.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(Shutdown::Write);
    })?;
    let (mut from_server, mut to_client) = (server, client);
    spawn("store-proxy-out", move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Write);
    })?;
    Ok(())
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map(drop)
}

// ---------------------------------------------------------------- gate

/// `--store embedded`: the delay and the hang applied in process, in front
/// of the embedded store. A call first waits the delay (one per call: a
/// Redis operation may take more than one round trip, each delayed, so the
/// two stores are not slowed alike); while the gate is closed it waits for
/// it to open for at most [`CALL_TIMEOUT`], then fails `Unavailable`, as
/// the Redis store's call does against a stopped server.
struct Gate {
    delay_ns: AtomicU64,
    closed: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn new() -> Self {
        Self {
            delay_ns: AtomicU64::new(0),
            closed: Mutex::new(false),
            opened: Condvar::new(),
        }
    }

    fn set_delay(&self, delay: Duration) {
        self.delay_ns.store(nanos(delay), Ordering::Release);
    }

    fn set_closed(&self, closed: bool) {
        *self.closed.lock().unwrap_or_else(PoisonError::into_inner) = closed;
        self.opened.notify_all();
    }

    fn pass(&self) -> Result<(), StoreError> {
        let delay = Duration::from_nanos(self.delay_ns.load(Ordering::Acquire));
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        let (closed, _) = self
            .opened
            .wait_timeout_while(closed, CALL_TIMEOUT, |closed| *closed)
            .unwrap_or_else(PoisonError::into_inner);
        if *closed {
            return Err(StoreError::Unavailable(
                "the bench holds the store hung".to_owned(),
            ));
        }
        Ok(())
    }
}

/// The embedded store behind a [`Gate`]: every call that asks the store
/// something passes the gate first.
struct GatedStore {
    gate: Arc<Gate>,
    inner: EmbeddedStore<MonotonicClock>,
}

impl LocationStore for GatedStore {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        self.gate.pass()?;
        self.inner.lookup(actor)
    }

    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        self.gate.pass()?;
        self.inner.create(actor, owner)
    }

    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        self.gate.pass()?;
        self.inner
            .compare_and_set(actor, expected, relocation, new_owner)
    }

    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        self.gate.pass()?;
        self.inner.abort_relocation(actor, expected, relocation)
    }

    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        self.gate.pass()?;
        self.inner.remove(actor, expected)
    }

    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        self.gate.pass()?;
        self.inner.acquire_lease(node, node_generation, mesh)
    }

    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        self.gate.pass()?;
        self.inner.renew_lease(lease)
    }

    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        self.gate.pass()?;
        self.inner.release_lease(lease)
    }

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        self.gate.pass()?;
        self.inner.lease(node)
    }

    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError> {
        self.gate.pass()?;
        self.inner.register_member(lease, address)
    }

    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        self.gate.pass()?;
        self.inner.members(mesh)
    }

    /// Reading the store's clock asks the store nothing: not gated.
    fn now(&self) -> StoreInstant {
        self.inner.now()
    }
}

// ---------------------------------------------------------------- store

/// The store under test and its two knobs, the delay and the hang.
enum Backend {
    Redis {
        /// Declared first, so dropped first: it stops accepting before
        /// the server goes.
        proxy: DelayProxy,
        redis: RedisChild,
        /// Namespaces this run's keys.
        cluster: String,
    },
    Embedded {
        gate: Arc<Gate>,
        store: Arc<GatedStore>,
    },
}

impl Backend {
    fn start(kind: StoreKind) -> Result<Self, String> {
        match kind {
            StoreKind::Redis => {
                let redis = RedisChild::start()?;
                let proxy = DelayProxy::start(redis.addr())?;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let cluster = format!("bench-store-axis-{}-{now}", std::process::id());
                Ok(Backend::Redis {
                    proxy,
                    redis,
                    cluster,
                })
            }
            StoreKind::Embedded => {
                let gate = Arc::new(Gate::new());
                let store = Arc::new(GatedStore {
                    gate: Arc::clone(&gate),
                    inner: EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM),
                });
                Ok(Backend::Embedded { gate, store })
            }
        }
    }

    /// Node `rid`'s store: with Redis, a client of its own through the
    /// proxy (as each process of a mesh has); the embedded store is shared.
    /// The lease term outlives the longest hang (`--store-hang` at most
    /// 8 s), so the hang does not fence a node.
    fn store_for(&self, rid: u64) -> Result<Arc<dyn LocationStore>, String> {
        match self {
            Backend::Redis { proxy, cluster, .. } => {
                let config = RedisStoreConfig {
                    url: format!("redis://{}/", proxy.addr),
                    cluster: cluster.clone(),
                    lease_term: LEASE_TERM,
                    call_timeout: CALL_TIMEOUT,
                    username: None,
                    password: None,
                    tls: None,
                };
                let store = RedisStore::open(config, MonotonicClock::new())
                    .map_err(|e| format!("node {rid}'s Redis store: {e}"))?;
                Ok(Arc::new(store))
            }
            Backend::Embedded { store, .. } => Ok(Arc::clone(store) as Arc<dyn LocationStore>),
        }
    }

    fn set_delay(&self, delay: Duration) {
        match self {
            Backend::Redis { proxy, .. } => proxy.set_delay(delay),
            Backend::Embedded { gate, .. } => gate.set_delay(delay),
        }
    }

    fn hang(&self) -> Result<(), String> {
        match self {
            Backend::Redis { redis, .. } => redis.stop(),
            Backend::Embedded { gate, .. } => {
                gate.set_closed(true);
                Ok(())
            }
        }
    }

    fn resume(&self) -> Result<(), String> {
        match self {
            Backend::Redis { redis, .. } => redis.resume(),
            Backend::Embedded { gate, .. } => {
                gate.set_closed(false);
                Ok(())
            }
        }
    }

    fn describes(&self) -> String {
        match self {
            Backend::Redis { redis, proxy, .. } => format!(
                "redis-server on {} (--save '' --appendonly no), reached through the bench's delay proxy on {}, one Redis client per node; hang = SIGSTOP",
                redis.addr(),
                proxy.addr
            ),
            Backend::Embedded { .. } => format!(
                "the embedded store (shared by both nodes) behind an in-process gate: the delay once per call; hang = calls wait, then fail Unavailable after {} ms",
                CALL_TIMEOUT.as_millis()
            ),
        }
    }
}

// ---------------------------------------------------------------- load

/// What one established session measured in one phase.
struct SessionRun {
    /// Latency of every reply to a request sent in the window.
    latency: Histogram<u64>,
    /// The longest time between two consecutive replies, the second to a
    /// request sent in the window: in a closed loop, about the longest
    /// time the player heard nothing.
    longest_gap: Duration,
    /// When the longest gap began (the reply before it).
    longest_gap_from: Option<Instant>,
    /// Every gap of at least [`GAP_KEPT`]: when it began, how long.
    gaps: Vec<(Instant, Duration)>,
    /// Every request that ended in an error (any time of the phase).
    errors: Vec<String>,
}

/// Relays closed loop, one request in flight, until `until`; measures the
/// requests sent from `measure_from`. Returns the client unless its
/// connection broke (the session is then gone for the phases after).
fn relay_loop(
    mut client: Client,
    index: usize,
    payload: &Bytes,
    measure_from: Instant,
    until: Instant,
    timeout: Duration,
) -> (Option<Client>, Result<SessionRun, String>) {
    let mut run = match histogram() {
        Ok(latency) => SessionRun {
            latency,
            longest_gap: Duration::ZERO,
            longest_gap_from: None,
            gaps: Vec::new(),
            errors: Vec::new(),
        },
        Err(e) => return (Some(client), Err(e)),
    };
    let mut last_reply: Option<Instant> = None;
    loop {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        match client.request(RELAY, payload.clone(), timeout) {
            Ok(reply) => {
                let answered = Instant::now();
                if reply != *payload {
                    run.errors
                        .push(format!("session {index}: a reply's payload differs"));
                }
                if sent >= measure_from {
                    run.latency.saturating_record(nanos(answered - sent).max(1));
                    if let Some(last) = last_reply {
                        let gap = answered - last;
                        if gap > run.longest_gap {
                            run.longest_gap = gap;
                            run.longest_gap_from = Some(last);
                        }
                        if gap >= GAP_KEPT {
                            run.gaps.push((last, gap));
                        }
                    }
                }
                last_reply = Some(answered);
            }
            Err(e @ (ClientError::Remote(_) | ClientError::TimedOut)) => {
                run.errors.push(format!("session {index}: {e}"));
            }
            Err(e) => {
                run.errors
                    .push(format!("session {index}: {e}; the session is gone"));
                return (None, Ok(run));
            }
        }
    }
    (Some(client), Ok(run))
}

/// What the storm threads counted in one phase's window.
struct Storm {
    ok: u64,
    /// Typed errors (the login's terminal), by their text.
    refused: BTreeMap<String, u64>,
    /// Logins with no terminal: connect failed, timed out, connection closed.
    failed: BTreeMap<String, u64>,
    /// Latency of the logins that succeeded, connect included.
    latency: Histogram<u64>,
}

impl Storm {
    fn new() -> Result<Self, String> {
        Ok(Self {
            ok: 0,
            refused: BTreeMap::new(),
            failed: BTreeMap::new(),
            latency: histogram()?,
        })
    }

    fn merge(&mut self, other: Storm) -> Result<(), String> {
        self.ok += other.ok;
        for (why, n) in other.refused {
            *self.refused.entry(why).or_default() += n;
        }
        for (why, n) in other.failed {
            *self.failed.entry(why).or_default() += n;
        }
        self.latency
            .add(&other.latency)
            .map_err(|e| format!("merging histograms: {e}"))
    }

    fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    /// Logins started in the window per second, whatever their outcome.
    fn per_second(&self, window: Duration) -> f64 {
        (self.ok + self.refused_total() + self.failed_total()) as f64 / window.as_secs_f64()
    }
}

/// One storm thread: until `until`, connects a new client to the nodes in
/// turn, logs a new player in (LOGIN creates it on that node: one store
/// create), and disconnects; counts the logins started from `measure_from`.
/// With an `interval`, the n-th login is due at `start + (n + offset) *
/// interval` (the threads' offsets spread them): early, it waits; late
/// (the last login took longer), it goes at once, so a store too slow for
/// the rate shows as fewer logins/s than offered.
fn storm_loop(
    thread: usize,
    phase: &str,
    entries: &[SocketAddr],
    pace: Option<(Instant, Duration)>,
    measure_from: Instant,
    until: Instant,
) -> Result<Storm, String> {
    let mut storm = Storm::new()?;
    let mut n = 0usize;
    let offset = thread as f64 / STORM_THREADS as f64;
    loop {
        if let Some((start, interval)) = pace {
            let due = start + interval.mul_f64(n as f64 + offset);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        if Instant::now() >= until {
            break;
        }
        n += 1;
        let entry = entries[(thread + n) % entries.len()];
        let name = format!("storm-{phase}-{thread}-{n}");
        let asked = Instant::now();
        let outcome = Client::connect(entry)
            .and_then(|mut client| client.request(LOGIN, Bytes::from(name), LOGIN_WAIT));
        if asked < measure_from {
            continue;
        }
        match outcome {
            Ok(_) => {
                storm.ok += 1;
                storm.latency.saturating_record(nanos(asked.elapsed()));
            }
            Err(ClientError::Remote(error)) => {
                *storm.refused.entry(error.to_string()).or_default() += 1;
            }
            Err(other) => *storm.failed.entry(other.to_string()).or_default() += 1,
        }
    }
    Ok(storm)
}

/// What one phase measured.
struct PhaseRun {
    phase: Phase,
    window: Duration,
    latency: Histogram<u64>,
    longest_gap: Duration,
    /// When the longest gap began, from the start of the measured window
    /// (negative: in the warm-up, before the first request measured).
    longest_gap_from: Option<f64>,
    errors: Vec<String>,
    storm: Option<Storm>,
    /// Phase D: the hang and the gaps around it.
    hung: Option<Hung>,
}

/// Phase D's hang: when the store hung and answered again, from the start
/// of the measured window, and the longest gap between replies that
/// overlapped it against the longest that did not. A stall caused by the
/// hang falls in the first; the machine's own (other processes on the
/// cores) fall anywhere, so the second is the phase's noise floor.
struct Hung {
    from: f64,
    to: f64,
    longest_during: Duration,
    longest_outside: Duration,
}

impl PhaseRun {
    fn us(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1e3
    }

    fn relays_per_second(&self) -> f64 {
        self.latency.len() as f64 / self.window.as_secs_f64()
    }

    fn gap_ms(&self) -> f64 {
        self.longest_gap.as_secs_f64() * 1e3
    }
}

/// The measured window of `phase`: `--duration`, and for the hang at least
/// the hang with a margin on each side (half the duration, at most 0.5 s),
/// so that the relays before, during and after it are all in the window.
fn window(phase: &Phase, options: &Options, axis: &StoreAxis) -> Duration {
    if !phase.hang {
        return options.duration;
    }
    let margin = (options.duration / 2).min(HANG_MARGIN_MAX);
    options.duration.max(axis.hang + margin * 2)
}

/// Runs one phase over `clients` (a session whose connection broke is
/// `None` and sits the phase out).
fn run_phase(
    phase: Phase,
    options: &Options,
    axis: &StoreAxis,
    backend: &Backend,
    entries: &[SocketAddr],
    clients: &mut [Option<Client>],
) -> Result<PhaseRun, String> {
    backend.set_delay(if phase.slow {
        axis.latency
    } else {
        Duration::ZERO
    });
    let window = window(&phase, options, axis);
    let start = Instant::now();
    let measure_from = start + options.warmup;
    let until = measure_from + window;
    let timeout = axis.hang + REQUEST_SLACK;
    let payload = Bytes::from(vec![b'x'; options.payload_len]);
    let mut sessions = Vec::new();
    for (index, slot) in clients.iter_mut().enumerate() {
        let Some(client) = slot.take() else { continue };
        let payload = payload.clone();
        let thread = std::thread::Builder::new()
            .name(format!("session-{index}"))
            .spawn(move || relay_loop(client, index, &payload, measure_from, until, timeout))
            .map_err(|e| format!("spawning session {index}: {e}"))?;
        sessions.push((index, thread));
    }
    let mut storms = Vec::new();
    // Each thread's share of the rate: one login per interval.
    let pace = (axis.storm_rate > 0).then(|| {
        let per_thread = axis.storm_rate as f64 / STORM_THREADS as f64;
        (start, Duration::from_secs_f64(1.0 / per_thread))
    });
    if phase.storm {
        for thread in 0..STORM_THREADS {
            let entries = entries.to_vec();
            let name = phase.name.to_owned();
            let handle = std::thread::Builder::new()
                .name(format!("storm-{thread}"))
                .spawn(move || storm_loop(thread, &name, &entries, pace, measure_from, until))
                .map_err(|e| format!("spawning the storm: {e}"))?;
            storms.push(handle);
        }
    }
    let mut hung = None;
    if phase.hang {
        // The hang itself is the stimulus: slept, not waited on.
        let at = measure_from + window.saturating_sub(axis.hang) / 2;
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        backend.hang()?;
        let stopped = Instant::now();
        std::thread::sleep(axis.hang);
        let resumed = backend.resume();
        hung = Some((stopped, Instant::now()));
        resumed?;
    }
    let mut run = PhaseRun {
        phase,
        window,
        latency: histogram()?,
        longest_gap: Duration::ZERO,
        longest_gap_from: None,
        errors: Vec::new(),
        storm: None,
        hung: None,
    };
    let offset = |at: Instant| {
        if at >= measure_from {
            (at - measure_from).as_secs_f64()
        } else {
            -(measure_from - at).as_secs_f64()
        }
    };
    let mut gaps = Vec::new();
    let mut failed = None;
    for (index, thread) in sessions {
        let (client, session) = thread
            .join()
            .map_err(|_| format!("session {index}'s thread panicked"))?;
        clients[index] = client;
        match session {
            Ok(session) => {
                run.latency
                    .add(&session.latency)
                    .map_err(|e| format!("merging histograms: {e}"))?;
                if session.longest_gap > run.longest_gap {
                    run.longest_gap = session.longest_gap;
                    run.longest_gap_from = session.longest_gap_from.map(offset);
                }
                gaps.extend(session.gaps);
                run.errors.extend(session.errors);
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    run.hung = hung.map(|(stopped, resumed)| {
        let (mut longest_during, mut longest_outside) = (Duration::ZERO, Duration::ZERO);
        for (from, gap) in gaps {
            let longest = if from < resumed && from + gap > stopped {
                &mut longest_during
            } else {
                &mut longest_outside
            };
            *longest = (*longest).max(gap);
        }
        Hung {
            from: offset(stopped),
            to: offset(resumed),
            longest_during,
            longest_outside,
        }
    });
    if phase.storm {
        let mut total = Storm::new()?;
        for thread in storms {
            let storm = thread
                .join()
                .map_err(|_| "a storm thread panicked".to_owned())??;
            total.merge(storm)?;
        }
        run.storm = Some(total);
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(run),
    }
}

// ---------------------------------------------------------------- run

/// The mesh and its established sessions, ready for the phases.
struct Mesh {
    /// Each node's stream address, node 1 first.
    entries: Vec<SocketAddr>,
    io_stack: &'static str,
    clients: Vec<Option<Client>>,
    /// Dropped after the clients (declared after them): each node stops at
    /// once, without moving its Actors to the other (Node::shutdown
    /// would, one store CAS each for every storm player).
    nodes: Vec<Node>,
}

/// Starts 2 nodes on `backend`'s stores and `sessions` established
/// sessions: session `i` on node `1 + i % 2`, its player `p-i` created
/// with `Node::create_actor` on the other node and bound by LOGIN, so that
/// every RELAY crosses the link both ways.
fn start_mesh(backend: &Backend, sessions: usize) -> Result<Mesh, String> {
    let started = start_linked(
        2,
        sessions,
        1,
        IoBackend::IoUring,
        |rid| backend.store_for(rid),
        &|builder| builder,
    )?;
    let nodes: Vec<Node> = started.into_iter().map(|(_, node)| node).collect();
    let entries = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            node.stream_addr()
                .ok_or_else(|| format!("node {} does not listen", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let io_stack = match nodes[0].io_backend() {
        IoBackend::IoUring => "io_uring",
        IoBackend::Epoll => "epoll",
        IoBackend::Auto => "auto",
    };
    let mut clients = Vec::with_capacity(sessions);
    for index in 0..sessions {
        let name = player_name(index);
        let id = ActorId::new(&name).map_err(|e| format!("player id: {e}"))?;
        let (session_node, player_node) = (index % 2, (index + 1) % 2);
        nodes[player_node]
            .create_actor(PLAYER, &id)
            .map_err(|e| format!("creating {name} on node {}: {e}", player_node + 1))?;
        let mut client = Client::connect(entries[session_node])
            .map_err(|e| format!("session {index}: connecting: {e}"))?;
        client
            .request(LOGIN, Bytes::from(name), SETUP_WAIT)
            .map_err(|e| format!("session {index}: logging in: {e}"))?;
        clients.push(Some(client));
    }
    Ok(Mesh {
        entries,
        io_stack,
        clients,
        nodes,
    })
}

/// Runs the store axis; `Ok(false)` when an established request failed.
pub fn run(options: &Options, axis: &StoreAxis) -> Result<bool, String> {
    let started = Instant::now();
    let load_before = load_average();
    eprintln!(
        "zlink-bench: store axis on {}: starting the store and 2 nodes",
        axis.store.name()
    );
    // Declared before the mesh, so dropped after it: the nodes stop while
    // the store still answers, and the store goes on every path out.
    let backend = Backend::start(axis.store)?;
    let mut mesh = start_mesh(&backend, options.sessions)?;
    let mut runs = Vec::with_capacity(PHASES.len());
    for phase in PHASES {
        eprintln!(
            "zlink-bench: phase {} ({}), {:.1} s + {:.1} s ({:.0} s elapsed)",
            phase.name,
            phase.describes(axis),
            options.warmup.as_secs_f64(),
            window(&phase, options, axis).as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        let run = run_phase(
            phase,
            options,
            axis,
            &backend,
            &mesh.entries,
            &mut mesh.clients,
        )?;
        eprintln!(
            "zlink-bench:   {} relays, p99 {:.1} µs, longest gap {:.1} ms, {} errors",
            run.latency.len(),
            run.us(0.99),
            run.gap_ms(),
            run.errors.len()
        );
        runs.push(run);
    }
    let report = Report {
        store: backend.describes(),
        io_stack: mesh.io_stack,
        actors: mesh.nodes.iter().map(Node::actor_count).sum(),
        load_before,
        load_after: load_average(),
        runs,
    };
    drop(mesh);
    drop(backend);
    print!("{}", render(options, axis, &report));
    if let Some(path) = &options.json {
        crate::write_json(path, &json(options, axis, &report))?;
    }
    Ok(report.runs.iter().all(|run| run.errors.is_empty()))
}

/// What the run found, for the table and the JSON.
struct Report {
    /// The store, in words ([`Backend::describes`]).
    store: String,
    io_stack: &'static str,
    /// Actors the nodes host at the end: the established players and every
    /// storm login's, so that the storm's creates show as done.
    actors: usize,
    load_before: String,
    load_after: String,
    runs: Vec<PhaseRun>,
}

// ---------------------------------------------------------------- report

/// The two figures: p99(B) / p99(A) and gap(D) - gap(C) in ms.
fn ratios(runs: &[PhaseRun]) -> Option<(f64, f64)> {
    let find = |name: &str| runs.iter().find(|r| r.phase.name == name);
    let (a, b, c, d) = (find("A")?, find("B")?, find("C")?, find("D")?);
    let p99 = if a.us(0.99) > 0.0 {
        b.us(0.99) / a.us(0.99)
    } else {
        0.0
    };
    Some((p99, d.gap_ms() - c.gap_ms()))
}

/// How the storm is paced, in words.
fn storm_pace(axis: &StoreAxis) -> String {
    match axis.storm_rate {
        0 => "unpaced (each thread logs in again once answered)".to_owned(),
        rate => format!("{rate} logins/s offered"),
    }
}

/// The 1-minute load average (/proc/loadavg), for the report: the bench
/// shares the machine, and a busy one shows in every tail.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".to_owned())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

fn render(options: &Options, axis: &StoreAxis, report: &Report) -> String {
    let runs = &report.runs;
    let io_stack = report.io_stack;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "zlink-bench: store axis (issue 19 item 7), store {}: {}; {} Actors hosted at the end",
        axis.store.name(),
        report.store,
        report.actors
    );
    let _ = writeln!(
        out,
        "2 zlink nodes, 1 shard each on {io_stack}, lease term {} s; {} established sessions (one thread each, closed loop, 1 in flight, {} B), each on one node with its player on the other; login storm: {STORM_THREADS} threads, {}, a new player per login on alternating nodes, then disconnect; {:.1} s warm-up + {:.1} s measured per phase; {} cores",
        LEASE_TERM.as_secs(),
        options.sessions,
        options.payload_len,
        storm_pace(axis),
        options.warmup.as_secs_f64(),
        options.duration.as_secs_f64(),
        options.cores
    );
    let _ = writeln!(
        out,
        "load average (1 min) before the run {}, after {}: other processes share the cores",
        report.load_before, report.load_after
    );
    let _ = writeln!(
        out,
        "established sessions' relays: latency in µs, the longest gap between two replies of one session in ms and when it began (s from the window's start); logins in the window"
    );
    let _ = writeln!(
        out,
        "{:<36} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>8} {:>7} {:>8} {:>6} {:>9} {:>9}",
        "phase",
        "relays/s",
        "p50",
        "p99",
        "p99.9",
        "max",
        "gap ms",
        "gap at s",
        "logins/s",
        "ok",
        "refused",
        "failed",
        "login p50",
        "login p99"
    );
    for run in runs {
        let label = format!("{} {}", run.phase.name, run.phase.describes(axis));
        let (rate, logins, refused, failed, p50, p99) = match &run.storm {
            Some(storm) => {
                let q = |q: f64| format!("{:.0}", storm.latency.value_at_quantile(q) as f64 / 1e3);
                (
                    format!("{:.0}", storm.per_second(run.window)),
                    storm.ok.to_string(),
                    storm.refused_total().to_string(),
                    storm.failed_total().to_string(),
                    q(0.5),
                    q(0.99),
                )
            }
            None => (
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let _ = writeln!(
            out,
            "{label:<36} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>9.1} {:>8} {rate:>8} {logins:>7} {refused:>8} {failed:>6} {p50:>9} {p99:>9}",
            run.relays_per_second(),
            run.us(0.5),
            run.us(0.99),
            run.us(0.999),
            run.latency.max() as f64 / 1e3,
            run.gap_ms(),
            run.longest_gap_from
                .map_or("-".to_owned(), |at| format!("{at:+.3}")),
        );
    }
    for run in runs {
        if let Some(hung) = &run.hung {
            let _ = writeln!(
                out,
                "phase {}: the store hung from {:+.3} s to {:+.3} s of its {:.1} s window; the longest gap overlapping the hang {:.1} ms, outside it {:.1} ms",
                run.phase.name,
                hung.from,
                hung.to,
                run.window.as_secs_f64(),
                hung.longest_during.as_secs_f64() * 1e3,
                hung.longest_outside.as_secs_f64() * 1e3
            );
        }
        if let Some(storm) = &run.storm {
            for (kind, reasons) in [("refused", &storm.refused), ("failed", &storm.failed)] {
                for (why, n) in reasons {
                    let _ = writeln!(out, "phase {}: {n} logins {kind}: {why}", run.phase.name);
                }
            }
        }
    }
    if let Some((p99, gap)) = ratios(runs) {
        let _ = writeln!(
            out,
            "p99(B) / p99(A) = {p99:.2}x (goal <= {P99_RATIO_GOAL}x: {})",
            met(p99 <= P99_RATIO_GOAL)
        );
        let _ = writeln!(
            out,
            "longest gap(D) - longest gap(C) = {gap:.1} ms (goal < {GAP_GROWTH_GOAL_MS:.0} ms: {})",
            met(gap < GAP_GROWTH_GOAL_MS)
        );
    }
    let errors: Vec<&String> = runs.iter().flat_map(|run| &run.errors).collect();
    if !errors.is_empty() {
        let _ = writeln!(
            out,
            "FAILED: {} established request(s) ended in an error; the first: {}",
            errors.len(),
            errors[0]
        );
    }
    out
}

fn json(options: &Options, axis: &StoreAxis, report: &Report) -> serde_json::Value {
    let runs = &report.runs;
    let phases: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            let storm = run.storm.as_ref().map(|storm| {
                serde_json::json!({
                    "per_second": storm.per_second(run.window),
                    "ok": storm.ok,
                    "refused": storm.refused_total(),
                    "failed": storm.failed_total(),
                    "refusals": storm.refused,
                    "failures": storm.failed,
                    "latency_us": {
                        "p50": storm.latency.value_at_quantile(0.5) as f64 / 1e3,
                        "p99": storm.latency.value_at_quantile(0.99) as f64 / 1e3,
                    },
                })
            });
            serde_json::json!({
                "phase": run.phase.name,
                "describes": run.phase.describes(axis),
                "window_seconds": run.window.as_secs_f64(),
                "relays": run.latency.len(),
                "relays_per_second": run.relays_per_second(),
                "latency_us": {
                    "p50": run.us(0.5),
                    "p99": run.us(0.99),
                    "p99.9": run.us(0.999),
                    "max": run.latency.max() as f64 / 1e3,
                },
                "longest_gap_ms": run.gap_ms(),
                "longest_gap_from_seconds": run.longest_gap_from,
                "errors": run.errors,
                "logins": storm,
                "hung_seconds": run.hung.as_ref().map(|hung| [hung.from, hung.to]),
                "longest_gap_during_hang_ms": run.hung.as_ref().map(|hung| hung.longest_during.as_secs_f64() * 1e3),
                "longest_gap_outside_hang_ms": run.hung.as_ref().map(|hung| hung.longest_outside.as_secs_f64() * 1e3),
            })
        })
        .collect();
    let (p99_ratio, gap_growth) = ratios(runs).unzip();
    serde_json::json!({
        "mode": "store-axis",
        "store": axis.store.name(),
        "describes": report.store,
        "io_stack": report.io_stack,
        "actors_at_end": report.actors,
        "load_average_before": report.load_before,
        "load_average_after": report.load_after,
        "storm_rate_per_second": axis.storm_rate,
        "store_latency_ms": axis.latency.as_secs_f64() * 1e3,
        "store_hang_ms": axis.hang.as_secs_f64() * 1e3,
        "sessions": options.sessions,
        "storm_threads": STORM_THREADS,
        "payload_bytes": options.payload_len,
        "warmup_seconds": options.warmup.as_secs_f64(),
        "duration_seconds": options.duration.as_secs_f64(),
        "cores": options.cores,
        "phases": phases,
        "p99_b_over_a": p99_ratio,
        "gap_d_minus_c_ms": gap_growth,
    })
}
