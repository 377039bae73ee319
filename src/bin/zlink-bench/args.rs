//! The bench's command line, parsed by hand so that the binary pulls in no
//! argument-parsing crate (DESIGN: lean dependencies). Every run is bounded:
//! a warm-up, a measured duration and a bounded drain.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use crate::systems::SystemKind;

/// What a run measures (issue 5 item 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Request → actor on another node → reply.
    Relay,
    /// A one-way message to the bound actor, which pushes it back (§5).
    Push,
    /// A game tick: the sessions send relay requests, and each room of
    /// [`crate::client::ROOM_SIZE`] players ticks on the server, on a
    /// repeating timer (`--tick-ms`), pushing its state to every member at
    /// each tick. No client sends a tick (issue 21): a game's tick is the
    /// server's clock, and a client-driven one would tie the push rate to
    /// the request rate.
    Mixed,
    /// Session churn: login (and bind), replacement by a second login,
    /// disconnect, reconnect; latency per operation kind (§6, §7, §9).
    Churn,
    /// The relay workload while the players relocate between the nodes
    /// (§8, zlink only): the client-visible pause per move.
    Relocate,
    /// No sessions: an Actor on one node requests an Actor on another,
    /// closed loop, timed inside the node (issue 21), beside tokio's
    /// channel round trip and tokio over a loopback TCP connection
    /// ([`crate::actor_rtt`]).
    ActorRtt,
}

impl Workload {
    pub const ALL: [Workload; 6] = [
        Workload::Relay,
        Workload::Push,
        Workload::Mixed,
        Workload::Churn,
        Workload::Relocate,
        Workload::ActorRtt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Relay => "relay",
            Workload::Push => "push",
            Workload::Mixed => "mixed",
            Workload::Churn => "churn",
            Workload::Relocate => "relocate",
            Workload::ActorRtt => "actor-rtt",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == text)
    }
}

/// What the run does, from the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The systems to run, in this order each round.
    pub systems: Vec<SystemKind>,
    /// The workloads to run, one after the other (`--compare`: relay and
    /// mixed; `--compare --full`: every workload).
    pub workloads: Vec<Workload>,
    /// Client sessions (connections), one player each.
    pub sessions: usize,
    /// `--actors N`: the player actors (game entities) each system hosts,
    /// at least the sessions (`--idle-sessions` under that mode): players
    /// `0..sessions` are bound and driven, the rest exist idle
    /// ([`crate::client::LoadSpec::idle_players`]). Default: the sessions.
    pub actors: usize,
    /// Requests (or pushes) each session keeps in flight: closed loop.
    pub in_flight: usize,
    /// Bytes of payload in each request.
    pub payload_len: usize,
    /// Time before measuring starts (connections are up, load is on).
    pub warmup: Duration,
    /// The measured time.
    pub duration: Duration,
    /// `--messages N`: the measured window also ends once N messages were
    /// sent in it (whichever comes first; not for churn).
    pub messages: Option<u64>,
    /// Rounds over `systems` (`--compare`: at least 3, interleaved).
    pub rounds: usize,
    /// Where the JSON report goes.
    pub json: Option<PathBuf>,
    /// The folder for the `.hgrm` files and the SVG plot.
    pub out_dir: Option<PathBuf>,
    /// zlink nodes: sessions on node 1, players spread over the others;
    /// 1 is the local path (the zlink systems become their `-local` ones).
    pub nodes: u64,
    /// Shards (threads) per zlink node.
    pub shards: usize,
    /// The machine's cores, counted before any thread is pinned.
    pub cores: usize,
    /// The placements to run each workload in, one after the other; `None`
    /// lets the threads float over every core (`--compare --full`: both).
    pub placements: Vec<Option<Placement>>,
    /// Open loop: messages per second over all sessions, each measured from
    /// its intended send time; `None` is closed loop.
    pub rate: Option<u64>,
    /// `mixed`: the period of each room's server-side tick (`--tick-ms`).
    pub tick: Duration,
    /// `--idle-sessions N`: no load; bind N sessions and report the memory
    /// each costs.
    pub idle_sessions: Option<usize>,
    /// Set in the child process that measures one system's idle memory.
    pub idle_child: bool,
    /// `--scale-report DIR`: no load; the table and plot of the sweep
    /// scripts/scale.sh left in DIR ([`crate::scale`]).
    pub scale_report: Option<PathBuf>,
    /// `--target ADDR[,ADDR..]`: drive the zlink mesh already running at
    /// these stream addresses instead of starting systems here (issue 5
    /// item 1); empty when the systems start here.
    pub target: Vec<SocketAddr>,
    /// `--store-axis`: no load client; the store axis's phases instead
    /// ([`crate::store_axis`], issue 19 item 7).
    pub store_axis: Option<StoreAxis>,
    /// `--transport-axis`: no load client; zlink over TCP and over its
    /// WebSocket listener, side by side ([`crate::transport_axis`], issue
    /// 22).
    pub transport_axis: bool,
}

/// Which Location Store the store axis runs zlink on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A real redis-server child behind the bench's delay proxy: the store
    /// a mesh of processes uses, with its network round trip.
    Redis,
    /// The embedded store behind an in-process gate that adds the same
    /// delay and hang: what zlink does apart from Redis and TCP.
    Embedded,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Redis => "redis",
            StoreKind::Embedded => "embedded",
        }
    }
}

/// `--store-axis`: how the store is slowed and hung (issue 19 item 7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoreAxis {
    pub store: StoreKind,
    /// Added to every store round trip in phase B (`--store-latency`).
    pub latency: Duration,
    /// How long the store hangs in phase D (`--store-hang`).
    pub hang: Duration,
    /// Logins per second the storm offers in phases A and B, in total
    /// (`--storm-rate`); 0: each storm thread logs in again as soon as
    /// the last login is answered.
    pub storm_rate: u64,
}

impl Default for StoreAxis {
    /// Redis, +1 ms, a 3 s hang: the figures the issue names (a store one
    /// millisecond away; a hang shorter than the 10 s lease, so that it
    /// does not fence the nodes). The storm offers 500 logins/s in A and in
    /// B alike, a rate the storm threads keep up with on the slower store
    /// too (docs/PERFORMANCE.md "Store axis"): unpaced, the faster store
    /// of A would get more logins than B's and load the machine more, and
    /// p99(B)/p99(A) would compare two loads, not two stores.
    fn default() -> Self {
        Self {
            store: StoreKind::Redis,
            latency: Duration::from_millis(1),
            hang: Duration::from_secs(3),
            storm_rate: 500,
        }
    }
}

/// The pinned placement `--compare` uses when `--pin` is not given: the
/// client and every system thread on one vCPU (the placement whose rounds
/// repeat, docs/PERFORMANCE.md).
fn one_vcpu(cores: usize) -> Placement {
    let core = 1 % cores.max(1);
    Placement {
        client_core: core,
        system_core: core,
    }
}

/// `--pin`: the load client on one core, every thread of the system under
/// test on another (or the same). On a 2-vCPU machine floating threads give
/// bimodal rounds; pinned ones repeat (issue 5 item 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub client_core: usize,
    pub system_core: usize,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pinned: load client on core {}, every system thread on core {}",
            self.client_core, self.system_core
        )
    }
}

fn placement(value: &str, cores: usize) -> Result<Placement, ArgsError> {
    let (client, system) = value
        .split_once(':')
        .ok_or_else(|| invalid(format!("--pin wants CLIENT:SYSTEM cores, not {value:?}")))?;
    Ok(Placement {
        client_core: number("--pin", client, 0, cores - 1)?,
        system_core: number("--pin", system, 0, cores - 1)?,
    })
}

const MAX_SESSIONS: usize = 10_000;
/// `--actors`: zlink creates its players one by one at start; beyond this a
/// run's start-up dwarfs its measured window.
const MAX_ACTORS: usize = 200_000;
const MAX_IN_FLIGHT: usize = 1_024;
const MAX_PAYLOAD: usize = 60 * 1024;
const MAX_SECONDS: u64 = 600;
const MAX_ROUNDS: usize = 100;
const MAX_MESSAGES: u64 = 1_000_000_000;
const MAX_NODES: u64 = 16;
/// `--tick-ms`: zlink's timer wheel ticks every millisecond, so a shorter
/// period is refused there (`TimerPeriodTooShort`); a period above a
/// second would give a measured window of a few seconds too few ticks.
const MAX_TICK_MS: u64 = 1_000;
/// `mixed`'s default tick: 20 Hz, a common server tick rate (the README's
/// timer example).
const DEFAULT_TICK_MS: u64 = 50;
const MAX_SHARDS: usize = 16;
/// Open-loop rates above this would only measure the client's queue.
const MAX_RATE: u64 = 10_000_000;
/// `--compare` runs interleaved rounds: at least this many (issue 5 item 2).
pub const COMPARE_ROUNDS_MIN: usize = 3;
/// `--transport-axis`'s sessions when `--sessions` is not given.
const TRANSPORT_AXIS_SESSIONS: usize = 8;

/// `--store-axis` runs one thread per session: beyond this the threads,
/// not the store, would set the figures.
const MAX_STORE_AXIS_SESSIONS: usize = 256;
/// `--store-axis`'s sessions when `--sessions` is not given.
const STORE_AXIS_SESSIONS: usize = 8;
/// `--store-latency` above this is an outage, which `--store-hang` is for.
const MAX_STORE_LATENCY_MS: f64 = 1_000.0;
/// `--store-hang` above this outlives the 10 s lease: the nodes would fence
/// themselves, which tests/node_store.rs covers and this mode does not.
const MAX_STORE_HANG_MS: f64 = 8_000.0;
/// `--storm-rate`: far above what a few blocking login threads can do.
const MAX_STORM_RATE: u64 = 100_000;
/// The flags `--store-axis` takes; it starts its own mesh and load, so the
/// others would be silently ignored.
const STORE_AXIS_FLAGS: [&str; 9] = [
    "--store",
    "--store-latency",
    "--store-hang",
    "--storm-rate",
    "--sessions",
    "--payload",
    "--warmup",
    "--duration",
    "--json",
];

pub const USAGE: &str = "\
usage: zlink-bench [--system S[,S..]] [--workload W] [--sessions N] [--in-flight N]
                   [--payload BYTES] [--warmup SECS] [--duration SECS] [--messages N] [--rounds N]
                   [--actors N] [--nodes N] [--shards N] [--pin C:S] [--rate R] [--tick-ms MS]
                   [--compare [--full]]
                   [--idle-sessions N] [--scale-report DIR] [--target ADDR[,ADDR..]]
                   [--json FILE] [--out DIR]
       zlink-bench --store-axis [--store redis|embedded] [--store-latency MS] [--store-hang MS]
                   [--storm-rate R] [--sessions N] [--payload BYTES] [--warmup SECS] [--duration SECS] [--json FILE]
       zlink-bench --transport-axis [--sessions N] [--payload BYTES] [--warmup SECS]
                   [--duration SECS] [--rounds N]

Starts each system on loopback, drives it with one shared load client (STREAM
frames, the same payloads for every system), closed loop with N in flight per
session or open loop at a fixed rate, and prints p50..max, messages/s, CPU per
message, lost and duplicated.

  --system S     zlink (shards on io_uring), zlink-epoll (shards on epoll): sessions
                 on node 1, players on the other nodes; zlink-local, zlink-epoll-local:
                 the local path, one node, sessions and players on it; raw-uring,
                 raw-epoll: two-hop forwarders, the cross-node limit; raw-uring-1hop,
                 raw-epoll-1hop: one-hop echo, the local path's limit; tokio, ractor,
                 tokio-chan, tokio-tcp, or all (default zlink)
  --workload W   relay (every system but tokio-chan and tokio-tcp); push, mixed, churn
                 (zlink, zlink-epoll, zlink-local, zlink-epoll-local, tokio, ractor);
                 relocate (zlink, zlink-epoll); actor-rtt (zlink, zlink-epoll,
                 zlink-local, zlink-epoll-local, tokio-chan, tokio-tcp: an Actor on
                 node 1 requests an Actor on node 2 (-local: on node 1), closed loop,
                 timed inside the process, no client) (default relay)
  --sessions N   client sessions (default 64); actor-rtt: caller/callee pairs
  --actors N     player actors each system hosts (the zlink ones, tokio, ractor),
                 at least the sessions (with --idle-sessions, at least those): one
                 bound per session and driven, the rest idle, created at start (NPCs,
                 offline players). A session cannot share a player: a second binding
                 replaces the first (§7). Default: the sessions; at most 200000
  --in-flight N  requests in flight per session, closed loop (default 1)
  --rate R       open loop: R messages/s over all sessions, latency from each
                 message's intended send time (not with churn or actor-rtt)
  --tick-ms MS   mixed: each room's server-side tick period (default 50: 20 Hz)
  --payload B    payload bytes per request (default 64)
  --warmup S     seconds of load before measuring (default 1; fractions allowed)
  --duration S   measured seconds (default 5)
  --messages N   also end the measured window once N messages were sent in it,
                 whichever comes first (not churn or actor-rtt); msg/s is over the window
  --rounds N     rounds over the systems, interleaved (default 1)
  --nodes N      zlink nodes: sessions on node 1, players on the others (default 2);
                 1: the local path, sessions and players on node 1 (zlink runs as
                 zlink-local, zlink-epoll as zlink-epoll-local; --shards still
                 applies); with --compare, 1 also leaves out the cross-node systems
                 and limits (zlink, zlink-epoll, raw-uring, raw-epoll, tokio-tcp)
  --shards N     shards per zlink node (default 1)
  --pin C:S      the load client on core C, every thread of the system on core S
                 (default: all threads float over every core)
  --compare      relay and mixed (or --workload), every system that runs each, pinned
                 (--pin, or client and system on core 1), interleaved, at least 3 rounds,
                 with ratios to the two-hop forwarders (raw-uring, raw-epoll), the
                 one-hop ones (raw-uring-1hop, raw-epoll-1hop) and tokio, and the
                 local path beside the cross-node one
  --full         with --compare: every workload, floating and pinned
  --idle-sessions N  no load: bind N sessions on each system (the zlink ones, tokio, ractor)
                 and report the resident memory each costs, one process per system
  --scale-report DIR  no load: read the sweep scripts/scale.sh wrote in DIR
                 (<axis>-<value>.json), print its table, write DIR/scale.svg
  --target ADDR[,ADDR..]  start nothing: drive the zlink mesh already running at these
                 stream addresses (zlink-node's lobby game), sessions round-robin over
                 them, each logged in as a player unique to the run and created on the
                 next address (LOOKUP), relay as MOVE requests; reported as zlink@target, CPU/msg n/a (another process's).
                 Relay only; not with --compare, --actors, --nodes, --shards, --pin or a
                 --system other than zlink
  --json FILE    also write the report as JSON
  --out DIR      write one .hgrm per system and latency.svg into DIR
  -h, --help     this text

  --store-axis   no load client: 2 zlink nodes (shards on io_uring) on a real Location
                 Store; established sessions (--sessions, default 8, one thread each)
                 relay closed loop to players on the other node while the phases run,
                 each --warmup then --duration: (A) a login storm (2 threads, a new
                 player per login: a store create each) at +0 ms store latency, (B) the
                 storm at +--store-latency, (C) no storm, (D) no storm, the store hung
                 for --store-hang mid-window (the window grows to hold it). Reports relays/s,
                 p50/p99/p99.9/max, the longest gap between replies, logins, and the
                 ratios p99(B)/p99(A) (goal <= 1.2x) and gap(D) - gap(C) (goal < 50 ms);
                 exits 1 if an established request failed
  --store S      redis (default): a redis-server child on a free port, reached through
                 a delay proxy, SIGSTOP for the hang; embedded: the embedded store
                 behind an in-process gate that adds the delay and the hang
  --store-latency MS  one-way delay added to every store round trip in (B) (default 1)
  --store-hang MS     how long the store hangs in (D) (default 3000, at most 8000:
                 the 10 s lease must outlive it)
  --storm-rate R the logins/s the storm offers in (A) and (B) alike (default 500);
                 0: each storm thread logs in again as soon as answered (unpaced)
";

/// Why the command line was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// `--help`: not an error, but the run does not happen.
    Help,
    /// Anything else, with the sentence to print.
    Invalid(String),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Help => f.write_str(USAGE),
            ArgsError::Invalid(why) => write!(f, "zlink-bench: {why}\n\n{USAGE}"),
        }
    }
}

fn invalid(why: String) -> ArgsError {
    ArgsError::Invalid(why)
}

fn number<T>(flag: &str, value: &str, min: T, max: T) -> Result<T, ArgsError>
where
    T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
{
    let n: T = value
        .parse()
        .map_err(|_| invalid(format!("{flag} wants a number, not {value:?}")))?;
    if n < min || n > max {
        return Err(invalid(format!("{flag} must be between {min} and {max}")));
    }
    Ok(n)
}

/// A duration given in milliseconds, fractions allowed.
fn millis(flag: &str, value: &str, max: f64) -> Result<Duration, ArgsError> {
    let ms: f64 = number(flag, value, 0.0, max)?;
    Ok(Duration::from_secs_f64(ms / 1e3))
}

fn seconds(flag: &str, value: &str) -> Result<Duration, ArgsError> {
    let secs: f64 = number(flag, value, 0.0, MAX_SECONDS as f64)?;
    Ok(Duration::from_secs_f64(secs))
}

/// `--target`'s addresses: `host:port`, comma-separated.
fn targets(value: &str) -> Result<Vec<SocketAddr>, ArgsError> {
    value
        .split(',')
        .map(|address| {
            address
                .to_socket_addrs()
                .ok()
                .and_then(|mut found| found.next())
                .ok_or_else(|| {
                    invalid(format!(
                        "--target wants HOST:PORT addresses, not {address:?}"
                    ))
                })
        })
        .collect()
}

fn systems(value: &str) -> Result<Vec<SystemKind>, ArgsError> {
    if value == "all" {
        return Ok(SystemKind::ALL.to_vec());
    }
    value
        .split(',')
        .map(|name| {
            SystemKind::parse(name).ok_or_else(|| invalid(format!("unknown system {name:?}")))
        })
        .collect()
}

/// `--target`: the one run that can drive a mesh this process did not
/// start: zlink's lobby game, relay as MOVE, no shape or placement of its
/// own to choose, nothing to compare side by side.
fn target(mut options: Options, compare: bool, shaped: &[String]) -> Result<Options, ArgsError> {
    let refuse = |why: &str| Err(invalid(format!("--target: {why}")));
    if compare {
        return refuse("--compare starts every system here; a running mesh is measured alone");
    }
    if let Some(flag) = shaped.first() {
        return refuse(&format!(
            "{flag} shapes a system this process starts; the running mesh has its own"
        ));
    }
    if options.systems != [SystemKind::Zlink] {
        return refuse("the running mesh is zlink; --system must be zlink (or left out)");
    }
    if options.workloads != [Workload::Relay] {
        return refuse("the lobby game runs the relay workload only (as MOVE requests)");
    }
    if options.idle_sessions.is_some() || options.scale_report.is_some() {
        return refuse("--idle-sessions and --scale-report start or read no mesh");
    }
    if options.duration.is_zero() {
        return Err(invalid("--duration must be positive".to_owned()));
    }
    options.systems = vec![SystemKind::ZlinkTarget];
    Ok(options)
}

/// `--store-axis`: refuses the flags it would ignore (`given`, every flag
/// of the command line), runs `--sessions` or its own default, and keeps
/// the store's knobs (`axis`).
fn store_axis(
    mut options: Options,
    axis: StoreAxis,
    given: &[String],
    sessions_given: bool,
) -> Result<Options, ArgsError> {
    if let Some(flag) = given
        .iter()
        .find(|flag| !STORE_AXIS_FLAGS.contains(&flag.as_str()))
    {
        return Err(invalid(format!(
            "--store-axis: {flag} does not apply (it starts its own 2-node zlink mesh and drives it itself)"
        )));
    }
    if !sessions_given {
        options.sessions = STORE_AXIS_SESSIONS;
    } else if options.sessions > MAX_STORE_AXIS_SESSIONS {
        return Err(invalid(format!(
            "--store-axis runs one thread per session: at most {MAX_STORE_AXIS_SESSIONS} sessions"
        )));
    }
    if options.duration.is_zero() {
        return Err(invalid("--duration must be positive".to_owned()));
    }
    options.actors = options.sessions;
    options.store_axis = Some(axis);
    Ok(options)
}

/// `--nodes 1`: the local path (issue 24 item 3). zlink's systems become
/// their one-node `-local` ones (once each, in their order); `--compare`
/// with no `--system` (`compare_all`) leaves out what measures or bounds
/// the cross-node path, so that it runs the local path beside its limits
/// and tokio. `relocate` moves players between nodes: refused alone.
fn local_path(options: &mut Options, compare_all: bool) -> Result<(), ArgsError> {
    if options.workloads == [Workload::Relocate] {
        return Err(invalid(
            "relocate moves players between nodes: it needs --nodes 2 or more".to_owned(),
        ));
    }
    if compare_all {
        options.systems.retain(|s| !s.crosses_nodes());
    }
    let mut local = Vec::with_capacity(options.systems.len());
    for system in options.systems.iter().map(|s| s.local()) {
        if !local.contains(&system) {
            local.push(system);
        }
    }
    options.systems = local;
    Ok(())
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, ArgsError> {
    let mut options = Options {
        systems: vec![SystemKind::Zlink],
        workloads: vec![Workload::Relay],
        sessions: 64,
        actors: 64,
        in_flight: 1,
        payload_len: 64,
        warmup: Duration::from_secs(1),
        duration: Duration::from_secs(5),
        messages: None,
        rounds: 1,
        json: None,
        out_dir: None,
        placements: vec![None],
        rate: None,
        tick: Duration::from_millis(DEFAULT_TICK_MS),
        idle_sessions: None,
        idle_child: false,
        scale_report: None,
        target: Vec::new(),
        store_axis: None,
        transport_axis: false,
        nodes: 2,
        shards: 1,
        cores: std::thread::available_parallelism().map_or(1, usize::from),
    };
    let mut compare = false;
    let mut full = false;
    let mut systems_given = false;
    let mut workload_given = false;
    let mut pin = None;
    let mut actors = None;
    let mut sessions_given = false;
    let mut axis = StoreAxis::default();
    let mut store_axis_asked = false;
    // Every flag given, in order: `--store-axis` refuses those it ignores,
    // and the store flags are refused without it.
    let mut given = Vec::new();
    // Flags that shape a system this process starts: refused with --target.
    let mut shaped = Vec::new();
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Err(ArgsError::Help);
        }
        if flag == "--compare" {
            compare = true;
            given.push(flag);
            continue;
        }
        if flag == "--full" {
            full = true;
            given.push(flag);
            continue;
        }
        if flag == "--store-axis" {
            store_axis_asked = true;
            continue;
        }
        if flag == "--transport-axis" {
            options.transport_axis = true;
            continue;
        }
        if flag == "--idle-child" {
            options.idle_child = true;
            continue;
        }
        let value = args
            .next()
            .ok_or_else(|| invalid(format!("{flag} needs a value")))?;
        given.push(flag.clone());
        match flag.as_str() {
            "--system" => {
                options.systems = systems(&value)?;
                systems_given = true;
            }
            "--workload" => {
                let workload = Workload::parse(&value)
                    .ok_or_else(|| invalid(format!("unknown workload {value:?}")))?;
                options.workloads = vec![workload];
                workload_given = true;
            }
            "--sessions" => {
                options.sessions = number(&flag, &value, 1, MAX_SESSIONS)?;
                sessions_given = true;
            }
            "--actors" => {
                actors = Some(number(&flag, &value, 1, MAX_ACTORS)?);
                shaped.push(flag);
            }
            "--rate" => options.rate = Some(number(&flag, &value, 1, MAX_RATE)?),
            "--tick-ms" => {
                options.tick = Duration::from_millis(number(&flag, &value, 1, MAX_TICK_MS)?);
            }
            "--idle-sessions" => {
                options.idle_sessions = Some(number(&flag, &value, 1, MAX_SESSIONS)?);
            }
            "--in-flight" => options.in_flight = number(&flag, &value, 1, MAX_IN_FLIGHT)?,
            "--payload" => options.payload_len = number(&flag, &value, 8, MAX_PAYLOAD)?,
            "--warmup" => options.warmup = seconds(&flag, &value)?,
            "--duration" => options.duration = seconds(&flag, &value)?,
            "--messages" => options.messages = Some(number(&flag, &value, 1, MAX_MESSAGES)?),
            "--rounds" => options.rounds = number(&flag, &value, 1, MAX_ROUNDS)?,
            "--json" => options.json = Some(PathBuf::from(value)),
            "--out" => options.out_dir = Some(PathBuf::from(value)),
            "--scale-report" => options.scale_report = Some(PathBuf::from(value)),
            "--nodes" => {
                options.nodes = number(&flag, &value, 1, MAX_NODES)?;
                shaped.push(flag);
            }
            "--shards" => {
                options.shards = number(&flag, &value, 1, MAX_SHARDS)?;
                shaped.push(flag);
            }
            "--pin" => {
                pin = Some(placement(&value, options.cores)?);
                shaped.push(flag);
            }
            "--target" => options.target = targets(&value)?,
            "--store" => {
                axis.store = match value.as_str() {
                    "redis" => StoreKind::Redis,
                    "embedded" => StoreKind::Embedded,
                    _ => {
                        return Err(invalid(format!(
                            "--store wants redis or embedded, not {value:?}"
                        )))
                    }
                }
            }
            "--store-latency" => axis.latency = millis(&flag, &value, MAX_STORE_LATENCY_MS)?,
            "--store-hang" => axis.hang = millis(&flag, &value, MAX_STORE_HANG_MS)?,
            "--storm-rate" => axis.storm_rate = number(&flag, &value, 0, MAX_STORM_RATE)?,
            other => return Err(invalid(format!("unknown flag {other}"))),
        }
    }
    options.placements = vec![pin];
    if store_axis_asked {
        return store_axis(options, axis, &given, sessions_given);
    }
    if options.transport_axis {
        // One client thread per session: a few keep both transports busy
        // without the threads themselves being what is measured.
        if !sessions_given {
            options.sessions = TRANSPORT_AXIS_SESSIONS;
        }
        return Ok(options);
    }
    if let Some(flag) = given
        .iter()
        .find(|flag| flag.starts_with("--store") || *flag == "--storm-rate")
    {
        return Err(invalid(format!("{flag} goes with --store-axis")));
    }
    let sessions = options.idle_sessions.unwrap_or(options.sessions);
    options.actors = actors.unwrap_or(sessions);
    if !options.target.is_empty() {
        return target(options, compare, &shaped);
    }
    if options.actors < sessions {
        return Err(invalid(format!(
            "--actors {} is fewer than the {sessions} sessions: each session binds a player of its own (§7: a second session binding a player replaces the first), so the actors must be at least the sessions",
            options.actors
        )));
    }
    if full && !compare {
        return Err(invalid("--full goes with --compare".to_owned()));
    }
    if compare {
        if !systems_given {
            options.systems = SystemKind::ALL.to_vec();
        }
        options.rounds = options.rounds.max(COMPARE_ROUNDS_MIN);
        let pinned = pin.unwrap_or_else(|| one_vcpu(options.cores));
        if full {
            options.placements = vec![None, Some(pinned)];
            if !workload_given {
                options.workloads = Workload::ALL.to_vec();
            }
        } else {
            options.placements = vec![Some(pinned)];
            if !workload_given {
                options.workloads = vec![Workload::Relay, Workload::Mixed];
            }
        }
    }
    if options.nodes == 1 {
        local_path(&mut options, compare && !systems_given)?;
    }
    if options.idle_sessions.is_some() {
        // Idle memory is a bound session's: only the systems with a protocol.
        options.systems.retain(|s| s.runs(Workload::Churn));
        if options.systems.is_empty() {
            return Err(invalid(
                "--idle-sessions needs a zlink system, tokio or ractor: the raw forwarders bind nothing"
                    .to_owned(),
            ));
        }
        return Ok(options);
    }
    // The raw forwarders have no protocol: they run `relay` only; only
    // zlink relocates.
    let asked: Vec<&str> = options.workloads.iter().map(|w| w.name()).collect();
    let asked = asked.join(", ");
    let systems = &options.systems;
    options
        .workloads
        .retain(|w| systems.iter().any(|s| s.runs(*w)));
    if options.workloads.is_empty() {
        return Err(invalid(format!(
            "no chosen system runs the {asked} workload"
        )));
    }
    if options.rate.is_some() && options.workloads.contains(&Workload::Churn) && !compare {
        return Err(invalid(
            "--rate does not apply to churn: its operations follow each other".to_owned(),
        ));
    }
    if options.messages.is_some() && options.workloads == [Workload::Churn] {
        return Err(invalid(
            "--messages does not apply to churn: it counts operations in time".to_owned(),
        ));
    }
    if options.workloads == [Workload::ActorRtt] {
        // Its callers are Actors (or tasks) inside the system: no load
        // client paces them, and they host no players.
        let refused = [
            (options.rate.is_some(), "--rate"),
            (options.messages.is_some(), "--messages"),
            (actors.is_some(), "--actors"),
        ];
        if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
            return Err(invalid(format!(
                "{flag} does not apply to actor-rtt: its callers run closed loop inside the system (--sessions pairs, --in-flight each)"
            )));
        }
    }
    if options.duration.is_zero() {
        return Err(invalid("--duration must be positive".to_owned()));
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Options, ArgsError> {
        parse(args.iter().map(|a| (*a).to_owned()))
    }

    /// The sentence a refused command line prints.
    fn refusal(args: &[&str]) -> String {
        match parse_args(args) {
            Err(ArgsError::Invalid(why)) => why,
            other => panic!("{args:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn actors_default_to_the_sessions_of_the_mode() {
        assert_eq!(parse_args(&["--sessions", "8"]).unwrap().actors, 8);
        assert_eq!(parse_args(&["--idle-sessions", "40"]).unwrap().actors, 40);
    }

    #[test]
    fn actors_beyond_the_sessions_are_hosted_idle() {
        let options = parse_args(&["--sessions", "8", "--actors", "1000"]).unwrap();
        assert_eq!((options.sessions, options.actors), (8, 1000));
        let idle = parse_args(&["--idle-sessions", "40", "--actors", "40"]).unwrap();
        assert_eq!(idle.actors, 40);
    }

    /// §7: a second session binding a player replaces the first, so fewer
    /// players than sessions cannot be driven.
    #[test]
    fn fewer_actors_than_sessions_are_refused() {
        let why = refusal(&["--sessions", "8", "--actors", "7"]);
        assert!(
            why.contains("--actors 7 is fewer than the 8 sessions"),
            "{why}"
        );
        let why = refusal(&["--idle-sessions", "40", "--actors", "39"]);
        assert!(why.contains("fewer than the 40 sessions"), "{why}");
        let why = refusal(&["--actors", "200001"]);
        assert!(why.contains("between 1 and 200000"), "{why}");
    }

    #[test]
    fn the_store_axis_has_its_own_defaults() {
        let options = parse_args(&["--store-axis"]).unwrap();
        assert_eq!(options.store_axis, Some(StoreAxis::default()));
        assert_eq!(options.sessions, 8);
        let options = parse_args(&[
            "--store-axis",
            "--store",
            "embedded",
            "--store-latency",
            "2.5",
            "--store-hang",
            "300",
            "--storm-rate",
            "0",
            "--sessions",
            "3",
        ])
        .unwrap();
        assert_eq!(
            options.store_axis,
            Some(StoreAxis {
                store: StoreKind::Embedded,
                latency: Duration::from_micros(2_500),
                hang: Duration::from_millis(300),
                storm_rate: 0,
            })
        );
        assert_eq!(options.sessions, 3);
    }

    /// What the store axis would ignore is refused, and its flags are
    /// refused without it.
    #[test]
    fn the_store_axis_refuses_what_it_would_ignore() {
        let why = refusal(&["--store-axis", "--system", "tokio"]);
        assert!(why.contains("--system does not apply"), "{why}");
        let why = refusal(&["--store-axis", "--compare"]);
        assert!(why.contains("--compare does not apply"), "{why}");
        let why = refusal(&["--store-hang", "100"]);
        assert!(why.contains("--store-hang goes with --store-axis"), "{why}");
        let why = refusal(&["--storm-rate", "100"]);
        assert!(why.contains("--storm-rate goes with --store-axis"), "{why}");
        let why = refusal(&["--store-axis", "--store", "memcached"]);
        assert!(why.contains("redis or embedded"), "{why}");
        let why = refusal(&["--store-axis", "--store-hang", "9000"]);
        assert!(why.contains("between 0 and 8000"), "{why}");
        let why = refusal(&["--store-axis", "--sessions", "257"]);
        assert!(why.contains("at most 256 sessions"), "{why}");
    }

    /// `mixed`'s rooms tick on the server at 20 Hz unless told otherwise;
    /// zlink's timers cannot tick faster than its 1 ms wheel.
    #[test]
    fn the_tick_period_defaults_to_20_hz_and_is_at_least_a_millisecond() {
        let options = parse_args(&["--workload", "mixed"]).unwrap();
        assert_eq!(options.tick, Duration::from_millis(50));
        let options = parse_args(&["--workload", "mixed", "--tick-ms", "10"]).unwrap();
        assert_eq!(options.tick, Duration::from_millis(10));
        let why = refusal(&["--tick-ms", "0"]);
        assert!(why.contains("between 1 and 1000"), "{why}");
    }

    /// `--compare --full` runs actor-rtt too, on the systems that run it;
    /// the load flags that do not apply to it are refused when it runs
    /// alone.
    #[test]
    fn actor_rtt_runs_on_zlink_and_its_tokio_baselines() {
        let options = parse_args(&["--compare", "--workload", "actor-rtt"]).unwrap();
        let systems: Vec<_> = options
            .systems
            .iter()
            .filter(|s| s.runs(Workload::ActorRtt))
            .map(|s| s.name())
            .collect();
        assert_eq!(
            systems,
            [
                "zlink",
                "zlink-epoll",
                "zlink-local",
                "zlink-epoll-local",
                "tokio-chan",
                "tokio-tcp"
            ]
        );
        let full = parse_args(&["--compare", "--full"]).unwrap();
        assert!(full.workloads.contains(&Workload::ActorRtt));
        let why = refusal(&["--workload", "actor-rtt", "--actors", "100"]);
        assert!(
            why.contains("--actors does not apply to actor-rtt"),
            "{why}"
        );
    }

    /// `--nodes 1` is the local path (issue 24 item 3): zlink's systems
    /// become their one-node ones, once each; the others are unchanged.
    #[test]
    fn one_node_runs_zlink_on_the_local_path() {
        assert_eq!(parse_args(&[]).unwrap().systems, [SystemKind::Zlink]);
        let options = parse_args(&["--nodes", "1"]).unwrap();
        assert_eq!(options.nodes, 1);
        assert_eq!(options.systems, [SystemKind::ZlinkLocal]);
        let options = parse_args(&[
            "--nodes",
            "1",
            "--shards",
            "2",
            "--system",
            "zlink,zlink-epoll,zlink-local,tokio,raw-uring",
        ])
        .unwrap();
        assert_eq!(options.shards, 2);
        assert_eq!(
            options.systems,
            [
                SystemKind::ZlinkLocal,
                SystemKind::ZlinkEpollLocal,
                SystemKind::Tokio,
                SystemKind::RawUring
            ]
        );
        // The local systems run one node whatever --nodes says.
        let options = parse_args(&["--system", "zlink-local,zlink", "--nodes", "3"]).unwrap();
        assert_eq!(options.systems, [SystemKind::ZlinkLocal, SystemKind::Zlink]);
        assert_eq!(SystemKind::ZlinkLocal.zlink_nodes(options.nodes), Some(1));
        assert_eq!(SystemKind::Zlink.zlink_nodes(options.nodes), Some(3));
        let why = refusal(&["--nodes", "0"]);
        assert!(why.contains("between 1 and 16"), "{why}");
    }

    /// The local path runs every workload but relocate, which needs a
    /// second node; the one-hop forwarders, like the two-hop ones, relay
    /// only.
    #[test]
    fn the_local_path_and_the_one_hop_forwarders_run_what_they_can() {
        for workload in ["relay", "push", "mixed", "churn", "actor-rtt"] {
            let options = parse_args(&["--nodes", "1", "--workload", workload]).unwrap();
            assert_eq!(options.systems, [SystemKind::ZlinkLocal], "{workload}");
            assert_eq!(options.workloads.len(), 1, "{workload}");
        }
        let why = refusal(&["--nodes", "1", "--workload", "relocate"]);
        assert!(why.contains("needs --nodes 2 or more"), "{why}");
        let why = refusal(&["--system", "zlink-epoll-local", "--workload", "relocate"]);
        assert!(why.contains("no chosen system runs the relocate"), "{why}");
        let options = parse_args(&["--system", "raw-uring-1hop,raw-epoll-1hop"]).unwrap();
        assert_eq!(
            options.systems,
            [SystemKind::RawUringOneHop, SystemKind::RawEpollOneHop]
        );
        let why = refusal(&[
            "--system",
            "raw-uring-1hop,raw-epoll-1hop",
            "--workload",
            "push",
        ]);
        assert!(why.contains("no chosen system runs the push"), "{why}");
    }

    /// `--compare` runs the local path beside the cross-node one, with both
    /// kinds of forwarder; `--compare --nodes 1` the local path alone,
    /// beside its limits and tokio.
    #[test]
    fn compare_runs_the_local_path_beside_the_cross_node_one() {
        let options = parse_args(&["--compare"]).unwrap();
        assert_eq!(options.systems, SystemKind::ALL);
        for system in [
            SystemKind::Zlink,
            SystemKind::ZlinkLocal,
            SystemKind::RawUring,
            SystemKind::RawUringOneHop,
            SystemKind::RawEpollOneHop,
        ] {
            assert!(options.systems.contains(&system), "{system:?}");
        }
        let options = parse_args(&["--compare", "--nodes", "1"]).unwrap();
        assert_eq!(
            options.systems,
            [
                SystemKind::ZlinkLocal,
                SystemKind::ZlinkEpollLocal,
                SystemKind::RawUringOneHop,
                SystemKind::RawEpollOneHop,
                SystemKind::Tokio,
                SystemKind::Ractor,
                SystemKind::TokioChan,
            ]
        );
        assert_eq!(options.workloads, [Workload::Relay, Workload::Mixed]);
        // Systems named on the command line are kept (made local).
        let options =
            parse_args(&["--compare", "--nodes", "1", "--system", "zlink,raw-epoll"]).unwrap();
        assert_eq!(
            options.systems,
            [SystemKind::ZlinkLocal, SystemKind::RawEpoll]
        );
    }

    #[test]
    fn a_target_refuses_actors() {
        let why = refusal(&["--target", "127.0.0.1:1", "--actors", "100"]);
        assert!(why.contains("--actors shapes a system"), "{why}");
    }
}
