//! `--workload actor-rtt` (issue 21): an Actor's request to an Actor on
//! another node and its reply, closed loop, timed inside the process —
//! no client, no session, only the call path between Actors — beside what
//! the same round trip costs on tokio.
//!
//! Every system runs `--sessions` pairs, each a caller and its callee,
//! and each caller keeps `--in-flight` requests outstanding: it sends the
//! next when one is answered, until the measured window ends. A request
//! carries `--payload` bytes with its sequence number and its pair; the
//! callee answers with the same bytes. A request sent inside the window
//! is timed from the caller's send to the caller's turn that takes its
//! reply (hdrhistogram, ns); one that ends in an error, or whose reply is
//! not the payload sent, is counted and fails the run, and one still
//! unanswered when the bounded drain ends is lost. CPU per request is the
//! whole process's over the window, as in the load runs (here nothing
//! but the system runs in it: the driver thread sleeps).
//!
//! - `zlink`, `zlink-epoll`: `--nodes` nodes (the same start as the load
//!   runs, [`start_linked`]); caller `rtt-caller-i` is an Actor on node 1,
//!   callee `rtt-callee-i` an Actor on node `2 + i % (nodes - 1)`. The
//!   caller requests with [`ActorContext::request`] and takes the reply
//!   in [`Actor::on_reply`], a later turn of its own: the call path a game
//!   uses between Actors, which never holds the caller's lane while it
//!   waits (docs/actors.md "Messages between Actors"). Every request
//!   crosses the link both ways.
//! - `zlink-local`, `zlink-epoll-local` (or `--nodes 1`): the same on one
//!   node, caller and callee both on node 1: no link.
//! - `tokio-chan`: the lower bound of a round trip between two tasks in
//!   one process: a multi-thread runtime (2 workers), per pair a caller
//!   task and a callee task, the request an mpsc message carrying a
//!   oneshot sender, the reply sent on it. No network, no second node.
//! - `tokio-tcp`: the fair cross-node comparison: two current-thread
//!   runtimes on a thread each ("node A" with the callers, "node B" with
//!   the callees, as each zlink node runs one shard), one loopback TCP
//!   connection between them (TCP_NODELAY) carrying every pair's requests
//!   and replies as length-prefixed frames; on A a writer task sends what
//!   the callers queued (the oneshot of each request kept in a pending
//!   map by id) and a reader task hands each reply to its oneshot; on B a
//!   reader hands each request to its callee task's mailbox and a writer
//!   sends the callees' replies, all queued ones in one write.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use zlink::api::{Actor, ActorContext, ActorMessage, IoBackend, Node, NodeBuilder, Spot};
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, CallId, PacketKey};
use zlink::store::{EmbeddedStore, LocationStore, MonotonicClock};

use crate::client::{LoadSpec, Phases, Tally, DRAIN_WAIT, LATENCY_MAX_NS};
use crate::systems::zlink::{start_linked, LEASE_TERM};
use crate::systems::{self, SystemKind};

/// The Actor types of the pairs on zlink.
const CALLER: &str = "rtt-caller";
const CALLEE: &str = "rtt-callee";
/// The caller's request to its callee.
const RTT: PacketKey = PacketKey(50);
/// Node code's one message to a caller: start its closed loop.
const START: PacketKey = PacketKey(51);
/// Each request's deadline on zlink: far beyond any round trip, so that a
/// request ends by its reply; one that does not is an error of the run.
const DEADLINE: Duration = Duration::from_secs(5);
/// A callee's mailbox on tokio, as the tokio game's player's.
const MAILBOX_MAX: usize = 1_024;
/// `tokio-chan`'s workers: one per core of the bench machine, as the
/// tokio game server's.
const WORKERS: usize = 2;
/// How often the driver looks whether every request was answered.
const DRAIN_POLL: Duration = Duration::from_millis(2);

/// One system's run, as the rounds of the report take it.
pub struct Outcome {
    pub tally: Tally,
    pub io_stack: &'static str,
    pub actors: Option<usize>,
}

/// What every caller of one run shares, on every system alike: the phases,
/// the histogram and the counts. The histogram is behind a mutex taken
/// once per reply (uncontended where the callers share one thread, as on
/// zlink's one shard and tokio-tcp's node A); the same on every system,
/// so its cost is in every row alike.
pub struct Shared {
    phases: OnceLock<Phases>,
    in_flight: usize,
    payload_len: usize,
    outstanding: AtomicU64,
    record: Mutex<Record>,
}

struct Record {
    latency: Histogram<u64>,
    measured: u64,
    errors: u64,
    corrupt: u64,
    duplicated: u64,
    notes: Vec<String>,
}

impl Record {
    fn note(&mut self, note: String) {
        if self.notes.len() < 8 {
            self.notes.push(note);
        }
    }
}

impl Shared {
    fn new(spec: &LoadSpec) -> Result<Self, String> {
        Ok(Self {
            phases: OnceLock::new(),
            in_flight: spec.in_flight,
            payload_len: spec.payload_len,
            outstanding: AtomicU64::new(0),
            record: Mutex::new(Record {
                latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                    .map_err(|e| format!("histogram: {e}"))?,
                measured: 0,
                errors: 0,
                corrupt: 0,
                duplicated: 0,
                notes: Vec::new(),
            }),
        })
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a caller may send a request now: the measured window is
    /// still open.
    fn open(&self, now: Instant) -> bool {
        self.phases.get().is_some_and(|p| now < p.measure_end)
    }

    /// Request `seq` of pair `pair`: its sequence number and pair in the
    /// first 8 bytes of `--payload` bytes. Counts it outstanding.
    fn request(&self, pair: usize, seq: u32) -> Bytes {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        let mut payload = BytesMut::zeroed(self.payload_len.max(8));
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        let pair = u32::try_from(pair).unwrap_or(u32::MAX);
        payload[4..8].copy_from_slice(&pair.to_le_bytes());
        payload.freeze()
    }

    /// Files the outcome of pair `pair`'s request `seq`, sent at `sent`:
    /// timed when it was sent inside the window and answered with its own
    /// payload, else counted. Returns whether the caller sends another.
    fn answered(
        &self,
        pair: usize,
        seq: u32,
        sent: Instant,
        outcome: Result<Bytes, String>,
    ) -> bool {
        let now = Instant::now();
        {
            let mut r = self.record();
            match outcome {
                Ok(reply) if reply == self.expected(pair, seq) => {
                    let timed = self
                        .phases
                        .get()
                        .is_some_and(|p| sent >= p.warm_end && sent < p.measure_end);
                    if timed {
                        let ns = u64::try_from((now - sent).as_nanos()).unwrap_or(u64::MAX);
                        r.latency.saturating_record(ns.max(1));
                        r.measured += 1;
                    }
                }
                Ok(_) => {
                    r.corrupt += 1;
                    r.note(format!(
                        "pair {pair}: the reply to {seq} carries another payload"
                    ));
                }
                Err(why) => {
                    r.errors += 1;
                    r.note(format!("pair {pair}: request {seq} ended: {why}"));
                }
            }
        }
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
        self.open(now)
    }

    fn expected(&self, pair: usize, seq: u32) -> Bytes {
        let mut payload = BytesMut::zeroed(self.payload_len.max(8));
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        let pair = u32::try_from(pair).unwrap_or(u32::MAX);
        payload[4..8].copy_from_slice(&pair.to_le_bytes());
        payload.freeze()
    }

    /// An outcome for a request the caller does not have outstanding.
    fn duplicate(&self, pair: usize) {
        let mut r = self.record();
        r.duplicated += 1;
        r.note(format!(
            "pair {pair}: an outcome for no request outstanding"
        ));
    }
}

/// Runs one round of `system` under `spec`'s shape.
pub fn run(system: SystemKind, spec: &LoadSpec) -> Result<Outcome, String> {
    match system {
        SystemKind::Zlink
        | SystemKind::ZlinkEpoll
        | SystemKind::ZlinkLocal
        | SystemKind::ZlinkEpollLocal => {
            let (spec, backend) = systems::zlink_shape(system, spec)?;
            zlink(&spec, backend)
        }
        SystemKind::TokioChan => tokio_chan(spec),
        SystemKind::TokioTcp => tokio_tcp(spec),
        other => Err(format!("{} does not run actor-rtt", other.name())),
    }
}

/// Sets the phases from now, lets `start` start every caller, samples the
/// process's CPU over the measured window, waits (bounded) until every
/// request is answered, and gives the run's tally.
fn measure(
    shared: &Shared,
    spec: &LoadSpec,
    start: impl FnOnce() -> Result<(), String>,
) -> Result<Tally, String> {
    let now = Instant::now();
    let phases = Phases {
        warm_end: now + spec.warmup,
        measure_end: now + spec.warmup + spec.duration,
        drain_end: now + spec.warmup + spec.duration + DRAIN_WAIT,
    };
    shared
        .phases
        .set(phases)
        .map_err(|_| "actor-rtt: the phases were set twice".to_owned())?;
    start()?;
    sleep_until(phases.warm_end);
    let (cpu_start, wall_start) = (crate::report::process_cpu_seconds()?, Instant::now());
    sleep_until(phases.measure_end);
    let (cpu_end, wall_end) = (crate::report::process_cpu_seconds()?, Instant::now());
    while shared.outstanding.load(Ordering::Acquire) > 0 && Instant::now() < phases.drain_end {
        std::thread::sleep(DRAIN_POLL);
    }
    let mut tally = Tally::new()?;
    let r = shared.record();
    tally.latency = r.latency.clone();
    tally.measured = r.measured;
    tally.errors = r.errors;
    tally.corrupt = r.corrupt;
    tally.duplicated = r.duplicated;
    tally.notes = r.notes.clone();
    tally.lost = shared.outstanding.load(Ordering::Acquire);
    if tally.lost > 0 {
        tally.note(format!(
            "{} request(s) unanswered {DRAIN_WAIT:?} after the window",
            tally.lost
        ));
    }
    tally.kinds.insert("rtt", r.latency.clone());
    tally.phases = Some(phases);
    tally.measured_seconds = spec.duration.as_secs_f64();
    tally.cpu_seconds = cpu_end - cpu_start;
    tally.cpu_wall_seconds = (wall_end - wall_start).as_secs_f64();
    Ok(tally)
}

fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

// zlink: Actors on two nodes.

/// A caller Actor: `in_flight` requests to its callee outstanding, each
/// reply a turn of its own ([`Actor::on_reply`]) that sends the next.
struct Caller {
    pair: usize,
    callee: ActorId,
    shared: Arc<Shared>,
    /// Each open request's send time and sequence number.
    calls: HashMap<CallId, (Instant, u32)>,
    seq: u32,
}

impl Caller {
    fn new(id: &ActorId, shared: Arc<Shared>) -> Self {
        let pair = id
            .as_str()
            .strip_prefix("rtt-caller-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        let callee = ActorId::new(&callee_name(pair)).unwrap_or_else(|_| id.clone());
        Self {
            pair,
            callee,
            shared,
            calls: HashMap::new(),
            seq: 0,
        }
    }

    fn call(&mut self, ctx: &mut dyn ActorContext) {
        self.seq = self.seq.wrapping_add(1);
        let payload = self.shared.request(self.pair, self.seq);
        let sent = Instant::now();
        match ctx.request(&self.callee, RTT, payload, DEADLINE) {
            Ok(call) => {
                self.calls.insert(call, (sent, self.seq));
            }
            // Refused here (a full ledger, say): counted, not retried, so
            // that a refusal cannot spin the caller.
            Err(e) => {
                self.shared
                    .answered(self.pair, self.seq, sent, Err(e.to_string()));
            }
        }
    }
}

impl Actor for Caller {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        if message.key != START {
            return Some(Err(Error::new(Reason::NotSupported)));
        }
        for _ in 0..self.shared.in_flight {
            if self.shared.open(Instant::now()) {
                self.call(ctx);
            }
        }
        None
    }

    fn on_reply(
        &mut self,
        ctx: &mut dyn ActorContext,
        call: CallId,
        outcome: Result<Bytes, Error>,
    ) {
        let Some((sent, seq)) = self.calls.remove(&call) else {
            self.shared.duplicate(self.pair);
            return;
        };
        let outcome = outcome.map_err(|e| e.to_string());
        if self.shared.answered(self.pair, seq, sent, outcome) {
            self.call(ctx);
        }
    }
}

/// A callee Actor: answers each request with its payload.
struct Callee;

impl Actor for Callee {
    fn handle(
        &mut self,
        _ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        message.is_request().then_some(Ok(message.payload))
    }
}

/// The pairs' Spot: nothing binds them.
struct Pairs;

impl Spot for Pairs {
    fn on_disconnect_actor(&self, _actor: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

fn caller_name(pair: usize) -> String {
    format!("rtt-caller-{pair}")
}

fn callee_name(pair: usize) -> String {
    format!("rtt-callee-{pair}")
}

fn zlink(spec: &LoadSpec, io_backend: IoBackend) -> Result<Outcome, String> {
    let shared = Arc::new(Shared::new(spec)?);
    let store: Arc<dyn LocationStore> =
        Arc::new(EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM));
    let types = {
        let shared = Arc::clone(&shared);
        move |builder: NodeBuilder| {
            let shared = Arc::clone(&shared);
            builder
                .actor_type(CALLER, Arc::new(Pairs), move |id| {
                    Box::new(Caller::new(id, Arc::clone(&shared)))
                })
                .actor_type(CALLEE, Arc::new(Pairs), |_| Box::new(Callee))
        }
    };
    let started = start_linked(
        spec.nodes,
        0,
        spec.shards,
        io_backend,
        |_| Ok(Arc::clone(&store)),
        &types,
    )?;
    let nodes: Vec<Node> = started.into_iter().map(|(_, node)| node).collect();
    let outcome = zlink_pairs(&nodes, &shared, spec);
    let actors = nodes.iter().map(Node::actor_count).sum();
    let io_stack = match nodes[0].io_backend() {
        IoBackend::IoUring => "io_uring",
        IoBackend::Epoll => "epoll",
        IoBackend::Auto => "auto",
    };
    for node in nodes {
        node.shutdown();
    }
    Ok(Outcome {
        tally: outcome?,
        io_stack,
        actors: Some(actors),
    })
}

/// Creates the pairs on `nodes` (callers on node 1, callees on the
/// others; on the local path, one node, both on node 1) and measures them.
fn zlink_pairs(nodes: &[Node], shared: &Shared, spec: &LoadSpec) -> Result<Tally, String> {
    let (home, others) = nodes.split_first().ok_or("no zlink node")?;
    let hosts = if others.is_empty() { nodes } else { others };
    let mut callers = Vec::with_capacity(spec.sessions);
    for pair in 0..spec.sessions {
        let id = |name: String| ActorId::new(&name).map_err(|e| format!("{name}: {e}"));
        let (caller, callee) = (id(caller_name(pair))?, id(callee_name(pair))?);
        let host = &hosts[pair % hosts.len()];
        host.create_actor(CALLEE, &callee)
            .map_err(|e| format!("creating {callee}: {e}"))?;
        home.create_actor(CALLER, &caller)
            .map_err(|e| format!("creating {caller}: {e}"))?;
        callers.push(caller);
    }
    let node_code = home.caller();
    measure(shared, spec, || {
        for caller in &callers {
            // A request, so that a caller that could not start fails the
            // run instead of measuring the others alone.
            node_code
                .request(caller, START, Bytes::new(), DEADLINE)
                .wait()
                .map_err(|e| format!("starting {caller}: {e}"))?;
        }
        Ok(())
    })
}

// tokio: tasks, over channels or over TCP.

/// How a tokio caller reaches its callee.
#[derive(Clone)]
enum Route {
    /// The callee task's mailbox: the request and the oneshot to reply on.
    Chan(mpsc::Sender<(Bytes, oneshot::Sender<Bytes>)>),
    /// Node A's link writer, which sends the request to node B under an id
    /// and keeps the oneshot until B's reply with that id comes back.
    Link(mpsc::Sender<LinkRequest>),
}

struct LinkRequest {
    pair: u32,
    payload: Bytes,
    reply: oneshot::Sender<Bytes>,
}

impl Route {
    async fn call(&self, pair: usize, payload: Bytes) -> Result<oneshot::Receiver<Bytes>, String> {
        let (reply, answer) = oneshot::channel();
        let sent = match self {
            Route::Chan(callee) => callee.send((payload, reply)).await.is_ok(),
            Route::Link(link) => {
                let pair = u32::try_from(pair).unwrap_or(u32::MAX);
                link.send(LinkRequest {
                    pair,
                    payload,
                    reply,
                })
                .await
                .is_ok()
            }
        };
        if sent {
            Ok(answer)
        } else {
            Err("the callee is gone".to_owned())
        }
    }
}

/// A tokio caller task: `in_flight` requests outstanding, the next sent
/// when one is answered, until the window ends.
async fn caller(pair: usize, route: Route, shared: Arc<Shared>) {
    let mut open: Vec<(Instant, u32, oneshot::Receiver<Bytes>)> =
        Vec::with_capacity(shared.in_flight);
    let mut seq = 0u32;
    let send = |seq: u32| {
        let payload = shared.request(pair, seq);
        let route = route.clone();
        async move { (Instant::now(), route.call(pair, payload).await) }
    };
    for _ in 0..shared.in_flight {
        if !shared.open(Instant::now()) {
            break;
        }
        seq = seq.wrapping_add(1);
        match send(seq).await {
            (sent, Ok(answer)) => open.push((sent, seq, answer)),
            (sent, Err(why)) => {
                shared.answered(pair, seq, sent, Err(why));
            }
        }
    }
    while !open.is_empty() {
        // The first of the open requests to be answered: a hand-written
        // select over a few oneshots (the bench has no futures crate).
        let (i, outcome) = std::future::poll_fn(|cx| {
            for (i, (_, _, answer)) in open.iter_mut().enumerate() {
                if let Poll::Ready(outcome) = Pin::new(answer).poll(cx) {
                    return Poll::Ready((i, outcome));
                }
            }
            Poll::Pending
        })
        .await;
        let (sent, done, _) = open.swap_remove(i);
        let outcome = outcome.map_err(|_| "the callee dropped the request".to_owned());
        if shared.answered(pair, done, sent, outcome) {
            seq = seq.wrapping_add(1);
            match send(seq).await {
                (sent, Ok(answer)) => open.push((sent, seq, answer)),
                (sent, Err(why)) => {
                    shared.answered(pair, seq, sent, Err(why));
                }
            }
        }
    }
}

fn runtime_error(e: std::io::Error) -> String {
    format!("tokio runtime: {e}")
}

fn tokio_chan(spec: &LoadSpec) -> Result<Outcome, String> {
    let shared = Arc::new(Shared::new(spec)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .map_err(runtime_error)?;
    let routes: Vec<Route> = (0..spec.sessions)
        .map(|_| {
            let (tx, mut rx) = mpsc::channel::<(Bytes, oneshot::Sender<Bytes>)>(MAILBOX_MAX);
            runtime.spawn(async move {
                while let Some((payload, reply)) = rx.recv().await {
                    let _ = reply.send(payload);
                }
            });
            Route::Chan(tx)
        })
        .collect();
    let tally = measure(&shared, spec, || {
        for (pair, route) in routes.into_iter().enumerate() {
            runtime.spawn(caller(pair, route, Arc::clone(&shared)));
        }
        Ok(())
    });
    runtime.shutdown_background();
    Ok(Outcome {
        tally: tally?,
        io_stack: "none (in memory)",
        actors: None,
    })
}

/// One length-prefixed frame on tokio-tcp's link: a u32 length (of what
/// follows), the request's u64 id, its u32 pair, its payload; a reply is
/// the same frame with the reply's payload.
fn put_frame(out: &mut BytesMut, id: u64, pair: u32, payload: &[u8]) {
    out.put_u32_le(u32::try_from(12 + payload.len()).unwrap_or(u32::MAX));
    out.put_u64_le(id);
    out.put_u32_le(pair);
    out.put_slice(payload);
}

fn take_frame(inbound: &mut BytesMut) -> Option<(u64, u32, Bytes)> {
    let len = u32::from_le_bytes(inbound.get(..4)?.try_into().ok()?) as usize;
    if inbound.len() < 4 + len || len < 12 {
        return None;
    }
    inbound.advance(4);
    let mut frame = inbound.split_to(len);
    let id = frame.get_u64_le();
    let pair = frame.get_u32_le();
    Some((id, pair, frame.freeze()))
}

/// Writes what `queue` carries, gathering every frame queued meanwhile
/// into one write (a batch per turn, as zlink's link sends).
async fn write_frames(
    mut half: tokio::net::tcp::OwnedWriteHalf,
    mut queue: mpsc::Receiver<(u64, u32, Bytes)>,
) {
    let mut out = BytesMut::with_capacity(64 * 1024);
    while let Some((id, pair, payload)) = queue.recv().await {
        put_frame(&mut out, id, pair, &payload);
        while let Ok((id, pair, payload)) = queue.try_recv() {
            put_frame(&mut out, id, pair, &payload);
        }
        if half.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}

/// Node A's link: the callers' requests out under ids, B's replies back to
/// their oneshots.
async fn link_a(stream: TcpStream, mut requests: mpsc::Receiver<LinkRequest>) {
    let (mut read, write) = stream.into_split();
    let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Bytes>>>> = Arc::default();
    let (frames, queue) = mpsc::channel(MAILBOX_MAX);
    tokio::spawn(write_frames(write, queue));
    let waiting = Arc::clone(&pending);
    tokio::spawn(async move {
        let mut next = 0u64;
        while let Some(LinkRequest {
            pair,
            payload,
            reply,
        }) = requests.recv().await
        {
            next += 1;
            waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(next, reply);
            if frames.send((next, pair, payload)).await.is_err() {
                return;
            }
        }
    });
    let mut inbound = BytesMut::with_capacity(64 * 1024);
    loop {
        match read.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while let Some((id, _, payload)) = take_frame(&mut inbound) {
            let reply = pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(reply) = reply {
                let _ = reply.send(payload);
            }
        }
    }
}

/// Node B's link: each request to its callee's mailbox, the callees'
/// replies back in batches.
async fn link_b(stream: TcpStream, pairs: usize) {
    let (mut read, write) = stream.into_split();
    let (replies, queue) = mpsc::channel::<(u64, u32, Bytes)>(MAILBOX_MAX);
    tokio::spawn(write_frames(write, queue));
    let callees: Vec<mpsc::Sender<(u64, u32, Bytes)>> = (0..pairs)
        .map(|_| {
            let (tx, mut rx) = mpsc::channel::<(u64, u32, Bytes)>(MAILBOX_MAX);
            let replies = replies.clone();
            tokio::spawn(async move {
                while let Some(request) = rx.recv().await {
                    if replies.send(request).await.is_err() {
                        return;
                    }
                }
            });
            tx
        })
        .collect();
    let mut inbound = BytesMut::with_capacity(64 * 1024);
    loop {
        match read.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while let Some((id, pair, payload)) = take_frame(&mut inbound) {
            let Some(callee) = callees.get(pair as usize) else {
                return;
            };
            if callee.send((id, pair, payload)).await.is_err() {
                return;
            }
        }
    }
}

/// A "node" of tokio-tcp: a current-thread runtime on a thread of its own,
/// running `main` until stopped, and a handle to spawn onto it.
struct NodeThread {
    handle: tokio::runtime::Handle,
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl NodeThread {
    fn start<F>(name: &str, main: F) -> Result<Self, String>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (ready, handle) = std_mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(runtime_error(e)));
                        return;
                    }
                };
                let _ = ready.send(Ok(runtime.handle().clone()));
                runtime.block_on(async move {
                    tokio::spawn(main);
                    let _ = stopped.await;
                });
                runtime.shutdown_background();
            })
            .map_err(|e| format!("spawning {name}: {e}"))?;
        let handle = handle
            .recv()
            .map_err(|_| format!("{name} ended during setup"))??;
        Ok(Self {
            handle,
            stop,
            thread,
        })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn tokio_tcp(spec: &LoadSpec) -> Result<Outcome, String> {
    let shared = Arc::new(Shared::new(spec)?);
    let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|e| format!("listen: {e}"))?;
    let address = listener.local_addr().map_err(|e| format!("listen: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listen: {e}"))?;
    let pairs = spec.sessions;
    let node_b = NodeThread::start("tokio-tcp-b", async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        if let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            link_b(stream, pairs).await;
        }
    })?;
    let (link, requests) = mpsc::channel(MAILBOX_MAX);
    let (connected, linked) = std_mpsc::channel();
    let node_a = NodeThread::start("tokio-tcp-a", async move {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let _ = connected.send(Ok(()));
                link_a(stream, requests).await;
            }
            Err(e) => {
                let _ = connected.send(Err(format!("connecting node A to node B: {e}")));
            }
        }
    });
    let node_a = match node_a {
        Ok(node) => node,
        Err(why) => {
            node_b.stop();
            return Err(why);
        }
    };
    let tally = linked
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| "node A's link did not come up".to_owned())
        .and_then(|linked| linked)
        .and_then(|()| {
            measure(&shared, spec, || {
                for pair in 0..pairs {
                    let route = Route::Link(link.clone());
                    node_a
                        .handle
                        .spawn(caller(pair, route, Arc::clone(&shared)));
                }
                Ok(())
            })
        });
    node_a.stop();
    node_b.stop();
    Ok(Outcome {
        tally: tally?,
        io_stack: "epoll (tokio)",
        actors: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_frame_reads_back_as_written_and_waits_for_its_last_byte() {
        let mut out = BytesMut::new();
        put_frame(&mut out, 7, 3, b"hello");
        put_frame(&mut out, 8, 4, b"");
        let mut partial = BytesMut::from(&out[..out.len() - 1]);
        assert_eq!(
            take_frame(&mut partial),
            Some((7, 3, Bytes::from_static(b"hello")))
        );
        assert_eq!(take_frame(&mut partial), None, "one byte short");
        let mut whole = out;
        take_frame(&mut whole);
        assert_eq!(take_frame(&mut whole), Some((8, 4, Bytes::new())));
    }
}
