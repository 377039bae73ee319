//! The one load client every system gets (issue 5 item 2: same client, same
//! framing, same payloads): STREAM frames from `zlink::wire::client`, one
//! connection per session, closed loop with `in_flight` messages
//! outstanding per session, all sessions on one client thread (a tokio
//! current-thread runtime, so the client costs every system the same).
//!
//! A session first logs in (a LOGIN request naming its player), then keeps
//! its window full: every answer that arrives before the measured window
//! ends is replaced by a new message. A message sent inside the window is
//! measured from its send time to its answer. Every message carries its
//! sequence number in its first four bytes and is tracked until answered:
//! an answer for a number not outstanding is a duplicate; a message still
//! unanswered when the bounded drain ends is lost; an answer whose payload
//! is not the one sent is corrupt.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zlink::ids::{Correlation, PacketKey};
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use crate::args::Workload;

/// Request: binds the session to the player its payload names; any reply
/// is success.
pub const LOGIN: PacketKey = PacketKey(1);
/// Request relayed to the session's player, which replies with the payload.
pub const RELAY: PacketKey = PacketKey(2);
/// One-way message relayed to the session's player, which pushes the
/// payload back to the session with the same key.
pub const PUSH: PacketKey = PacketKey(3);

/// How long, after the measured window, a session waits for its
/// outstanding answers before it counts them lost: far beyond any relay
/// deadline of the systems (5 s in zlink).
pub const DRAIN_WAIT: Duration = Duration::from_secs(8);
/// How long connecting and logging in every session may take.
const LOGIN_WAIT: Duration = Duration::from_secs(30);
/// The histograms' range: 1 ns to 60 s at 3 significant digits.
pub const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// The player of session `index`; every system names players so.
pub fn player_name(index: usize) -> String {
    format!("p-{index}")
}

/// The load one run puts on a system.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub workload: Workload,
    pub sessions: usize,
    pub in_flight: usize,
    pub payload_len: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// The zlink system's mesh; the baselines have their fixed shape.
    pub nodes: u64,
    pub shards: usize,
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
    /// The first anomalies, in words.
    pub notes: Vec<String>,
    /// CPU seconds (user + system, the whole process) and wall seconds
    /// between the two samples taken inside the measured window.
    pub cpu_seconds: f64,
    pub cpu_wall_seconds: f64,
}

const NOTES_MAX: usize = 8;

impl Tally {
    fn new() -> Result<Self, String> {
        Ok(Self {
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .map_err(|e| format!("histogram: {e}"))?,
            measured: 0,
            lost: 0,
            duplicated: 0,
            corrupt: 0,
            errors: 0,
            failed_sessions: 0,
            notes: Vec::new(),
            cpu_seconds: 0.0,
            cpu_wall_seconds: 0.0,
        })
    }

    fn note(&mut self, note: String) {
        if self.notes.len() < NOTES_MAX {
            self.notes.push(note);
        }
    }
}

/// Runs the load against `entry` on this thread and returns what it saw.
pub fn run(entry: SocketAddr, spec: &LoadSpec) -> Result<Tally, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(RefCell::new(Tally::new()?));
    local.block_on(&runtime, drive_all(entry, spec, Rc::clone(&tally)))?;
    Rc::try_unwrap(tally)
        .map(RefCell::into_inner)
        .map_err(|_| "a session task outlived the run".to_owned())
}

async fn drive_all(
    entry: SocketAddr,
    spec: &LoadSpec,
    tally: Rc<RefCell<Tally>>,
) -> Result<(), String> {
    let logins: Vec<_> = (0..spec.sessions)
        .map(|index| tokio::task::spawn_local(login(entry, index)))
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
    let now = Instant::now();
    let phases = Phases {
        warm_end: now + spec.warmup,
        measure_end: now + spec.warmup + spec.duration,
        drain_end: now + spec.warmup + spec.duration + DRAIN_WAIT,
    };
    let cpu = tokio::task::spawn_local(sample_cpu(phases));
    let drivers: Vec<_> = streams
        .into_iter()
        .map(|(index, stream)| {
            tokio::task::spawn_local(drive(
                index,
                stream,
                spec.clone(),
                phases,
                Rc::clone(&tally),
            ))
        })
        .collect();
    for handle in drivers {
        handle
            .await
            .map_err(|e| format!("a session task failed: {e}"))?;
    }
    let (cpu_seconds, cpu_wall_seconds) = cpu.await.map_err(|e| format!("cpu sampler: {e}"))??;
    let mut t = tally.borrow_mut();
    t.cpu_seconds = cpu_seconds;
    t.cpu_wall_seconds = cpu_wall_seconds;
    Ok(())
}

/// CPU time used by the whole process (client and system threads alike)
/// from the start to the end of the measured window, and the wall time
/// between the two samples (the sampler may wake late on a busy thread).
async fn sample_cpu(phases: Phases) -> Result<(f64, f64), String> {
    tokio::time::sleep_until(phases.warm_end.into()).await;
    let (cpu_start, wall_start) = (crate::report::process_cpu_seconds()?, Instant::now());
    tokio::time::sleep_until(phases.measure_end.into()).await;
    let (cpu_end, wall_end) = (crate::report::process_cpu_seconds()?, Instant::now());
    Ok((cpu_end - cpu_start, (wall_end - wall_start).as_secs_f64()))
}

async fn login(entry: SocketAddr, index: usize) -> Result<(usize, TcpStream), String> {
    let player = player_name(index);
    let mut stream = TcpStream::connect(entry)
        .await
        .map_err(|e| format!("{player}: connect: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("{player}: nodelay: {e}"))?;
    let mut out = BytesMut::new();
    ClientFrame::Request {
        key: LOGIN,
        correlation: Correlation(0),
        payload: Bytes::from(player.clone().into_bytes()),
    }
    .encode(&mut out);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("{player}: login write: {e}"))?;
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(4096);
    loop {
        let n = stream
            .read_buf(&mut inbound)
            .await
            .map_err(|e| format!("{player}: login read: {e}"))?;
        if n == 0 {
            return Err(format!("{player}: closed during login"));
        }
        match ClientFrame::decode_from(&mut inbound, &limits) {
            Ok(None) => continue,
            Ok(Some(ClientFrame::Reply { correlation, .. })) if correlation.0 == 0 => {
                return Ok((index, stream));
            }
            Ok(Some(other)) => return Err(format!("{player}: login answered with {other:?}")),
            Err(e) => return Err(format!("{player}: malformed login answer: {e}")),
        }
    }
}

/// One session's message window.
struct Window {
    workload: Workload,
    payload_len: usize,
    next_seq: u32,
    /// Sequence number → send time.
    outstanding: HashMap<u32, Instant>,
    outbound: BytesMut,
}

impl Window {
    /// Queues the next message; it goes out with the next write.
    fn queue(&mut self) {
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        let seq = self.next_seq;
        let mut payload = BytesMut::zeroed(self.payload_len);
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        let payload = payload.freeze();
        let frame = match self.workload {
            Workload::Relay => ClientFrame::Request {
                key: RELAY,
                correlation: Correlation(seq),
                payload,
            },
            Workload::Push => ClientFrame::Message { key: PUSH, payload },
        };
        frame.encode(&mut self.outbound);
        self.outstanding.insert(seq, Instant::now());
    }
}

/// The sequence number a payload carries.
fn seq_of(payload: &[u8]) -> Option<u32> {
    let head: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(head))
}

async fn drive(
    index: usize,
    mut stream: TcpStream,
    spec: LoadSpec,
    phases: Phases,
    tally: Rc<RefCell<Tally>>,
) {
    let mut window = Window {
        workload: spec.workload,
        payload_len: spec.payload_len,
        next_seq: 0,
        outstanding: HashMap::with_capacity(spec.in_flight),
        outbound: BytesMut::with_capacity(4096),
    };
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(16 * 1024);
    for _ in 0..spec.in_flight {
        window.queue();
    }
    let player = player_name(index);
    let broke = loop {
        if !window.outbound.is_empty() {
            if let Err(e) = stream.write_all(&window.outbound).await {
                break Some(format!("{player}: write: {e}"));
            }
            window.outbound.clear();
        }
        if window.outstanding.is_empty() {
            break None;
        }
        let read = tokio::time::timeout_at(phases.drain_end.into(), stream.read_buf(&mut inbound));
        match read.await {
            Err(_) => break None,
            Ok(Ok(0)) => break Some(format!("{player}: the server closed the connection")),
            Ok(Err(e)) => break Some(format!("{player}: read: {e}")),
            Ok(Ok(_)) => {}
        }
        if let Err(why) = file_frames(&mut window, &mut inbound, &limits, &phases, &tally) {
            break Some(format!("{player}: {why}"));
        }
    };
    let mut t = tally.borrow_mut();
    t.lost += window.outstanding.len() as u64;
    if let Some(why) = broke {
        t.failed_sessions += 1;
        t.note(why);
    }
}

/// Files every complete frame in `inbound`, refilling the window while the
/// measured window is open.
fn file_frames(
    window: &mut Window,
    inbound: &mut BytesMut,
    limits: &DecodeLimits,
    phases: &Phases,
    tally: &Rc<RefCell<Tally>>,
) -> Result<(), String> {
    loop {
        let frame = ClientFrame::decode_from(inbound, limits)
            .map_err(|e| format!("malformed frame: {e}"))?;
        let Some(frame) = frame else {
            return Ok(());
        };
        let (seq, payload) = match (window.workload, frame) {
            (
                Workload::Relay,
                ClientFrame::Reply {
                    correlation,
                    payload,
                },
            ) => (correlation.0, payload),
            (Workload::Push, ClientFrame::Push { key, payload }) if key == PUSH => {
                (seq_of(&payload).unwrap_or(0), payload)
            }
            (_, ClientFrame::Error { correlation, error }) => {
                let mut t = tally.borrow_mut();
                t.errors += 1;
                t.note(format!("typed error for {}: {error}", correlation.0));
                window.outstanding.remove(&correlation.0);
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
        if payload.len() != window.payload_len || seq_of(&payload) != Some(seq) {
            t.corrupt += 1;
            t.note(format!("the answer to {seq} carries another payload"));
        }
        if sent >= phases.warm_end && sent < phases.measure_end {
            let ns = u64::try_from((now - sent).as_nanos()).unwrap_or(u64::MAX);
            t.latency.saturating_record(ns.max(1));
            t.measured += 1;
        }
        drop(t);
        if now < phases.measure_end {
            window.queue();
        }
    }
}
