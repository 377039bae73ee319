//! zlink-demo: the main job. Starts a local mesh of three nodes on loopback
//! sharing one embedded Location Store, runs a small lobby game on it, drives
//! a few hundred simulated clients through log in, MOVE (relayed to the
//! player, often on another node), lobby pushes, replacement by a second
//! login and disconnect, and prints what happened. It exits 0 only when no
//! reply was duplicated, no request was silently dropped and every replaced
//! session saw its Close(Replaced).
//!
//! `cargo run --release --bin zlink-demo -- --help` lists the flags.

mod args;
mod game;
mod load;
mod moves;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use zlink::api::FlowTrace;
use zlink::ids::{ActorId, SpotId};
use zlink::store::{EmbeddedStore, MonotonicClock};

use crate::game::{GameNode, Store, LEASE_TERM, PLAYER, ROOM};
use crate::load::{Tally, PHASES};
use crate::moves::MoveTally;

/// DESIGN: the library sets no global allocator; the binaries use mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes in the demo mesh.
const NODES: u64 = 3;
/// Threads that relocate players concurrently, each its own players.
const MOVERS: usize = 2;
/// How long the final disconnect callbacks may take to arrive.
const DISCONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long to keep watching after they arrived, to catch extra ones.
const SETTLE: Duration = Duration::from_millis(200);

fn main() {
    let options = match args::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(args::ArgsError::Help) => {
            print!("{}", args::USAGE);
            return;
        }
        Err(e) => {
            eprint!("{e}");
            std::process::exit(2);
        }
    };
    match run(&options) {
        Ok(report) => {
            print!("{}", report.text);
            if !report.passed {
                std::process::exit(1);
            }
        }
        Err(why) => {
            eprintln!("zlink-demo: {why}");
            std::process::exit(1);
        }
    }
}

/// The printed report and whether the run passed.
struct Report {
    text: String,
    passed: bool,
}

/// What the main thread measured at each phase boundary.
struct Boundary {
    at: Instant,
    store_rows: u64,
}

fn run(options: &args::Options) -> Result<Report, String> {
    let started = Instant::now();
    arm_watchdog(options);
    let store: Arc<Store> = Arc::new(Store::new(EmbeddedStore::new(
        MonotonicClock::new(),
        LEASE_TERM,
    )));
    let mesh = game::start_mesh(NODES, &store)?;
    let nodes = mesh.len();
    for index in 0..options.clients {
        let id = ActorId::new(&load::player_name(index)).map_err(|e| format!("player id: {e}"))?;
        let host = &mesh[load::host_node(index, nodes)];
        let created = match load::room_of(index) {
            Some(room) => {
                let room =
                    SpotId::new(&load::room_name(room)).map_err(|e| format!("room id: {e}"))?;
                host.node
                    .create_spot(ROOM, &room)
                    .and_then(|room| host.node.create_actor_in(&room, PLAYER, &id))
            }
            None => host.node.create_actor(PLAYER, &id),
        };
        created.map_err(|e| format!("creating {id} on node {}: {e}", host.rid))?;
    }
    let addrs = mesh
        .iter()
        .map(|g| {
            g.node
                .stream_addr()
                .ok_or_else(|| format!("node {} does not listen", g.rid))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mesh_ready = Instant::now();

    let barrier = Barrier::new(options.threads + 1);
    let mut boundaries = vec![Boundary {
        at: mesh_ready,
        store_rows: store.counts().row_operations(),
    }];
    let mut disconnects_before_final = 0;
    let mut move_tally = MoveTally::new();
    let stop_moving = std::sync::atomic::AtomicBool::new(false);
    let tallies: Vec<std::thread::Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.threads)
            .map(|t| {
                let indices: Vec<usize> = (t..options.clients).step_by(options.threads).collect();
                let (addrs, barrier) = (&addrs, &barrier);
                scope.spawn(move || load::run_thread(indices, addrs, options.rounds, barrier))
            })
            .collect();
        // The movers start with the first MOVE rounds and finish before the
        // second half's end (the clients wait for them there), so every
        // relocation happens under live, busy sessions.
        let mut movers = Vec::new();
        for phase in 0..PHASES.len() {
            if phase == 1 {
                movers = (0..MOVERS)
                    .map(|m| {
                        let indices: Vec<usize> = (m..options.clients).step_by(MOVERS).collect();
                        let budget = options.relocations / MOVERS
                            + usize::from(m < options.relocations % MOVERS);
                        let seed = options.seed.wrapping_add(m as u64);
                        let (mesh, stop) = (&mesh, &stop_moving);
                        scope.spawn(move || moves::run_mover(mesh, &indices, budget, seed, stop))
                    })
                    .collect();
            }
            if phase + 3 == PHASES.len() {
                stop_moving.store(true, std::sync::atomic::Ordering::Relaxed);
                for mover in movers.drain(..) {
                    match mover.join() {
                        Ok(t) => move_tally.merge(t),
                        Err(_) => move_tally.panicked = true,
                    }
                }
            }
            if phase + 1 == PHASES.len() {
                // The clients wait for this count to be taken before they
                // disconnect, so it holds only the run's earlier callbacks.
                disconnects_before_final = disconnects(&mesh);
                barrier.wait();
            }
            barrier.wait();
            boundaries.push(Boundary {
                at: Instant::now(),
                store_rows: store.counts().row_operations(),
            });
        }
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut tally = Tally::new();
    for result in tallies {
        match result {
            Ok(t) => tally.merge(t),
            Err(_) => return Err("a client thread panicked".to_owned()),
        }
    }

    // §7: every live binding's session ended, so each bound player's Spot
    // must be told once; wait for that, then a little longer for extras.
    let expected_disconnects = disconnects_before_final + tally.live_bindings;
    let deadline = Instant::now() + DISCONNECT_WAIT;
    while disconnects(&mesh) < expected_disconnects && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let disconnects_arrived = Instant::now();
    std::thread::sleep(SETTLE);
    let final_disconnects = disconnects(&mesh) - disconnects_before_final;
    let store_rows_disconnect = store.counts().row_operations();
    let wall = disconnects_arrived - started;

    let report = render(
        options,
        &tally,
        &mesh,
        &boundaries,
        Finals {
            mesh_setup: mesh_ready - started,
            disconnect_wait: disconnects_arrived - boundaries.last().map_or(mesh_ready, |b| b.at),
            wall,
            disconnects_before_final,
            final_disconnects,
            store_rows_disconnect,
            moves: move_tally,
        },
    );
    for game in mesh {
        game.node.shutdown();
    }
    Ok(report)
}

/// The measurements taken after the client threads ended.
struct Finals {
    mesh_setup: Duration,
    disconnect_wait: Duration,
    wall: Duration,
    disconnects_before_final: u64,
    final_disconnects: u64,
    store_rows_disconnect: u64,
    /// What the movers did.
    moves: MoveTally,
}

fn disconnects(mesh: &[GameNode]) -> u64 {
    mesh.iter()
        .map(|g| g.stats.disconnects.load(Ordering::Relaxed))
        .sum()
}

/// A run that hangs must still end with a message and a failing exit code
/// (the demo is a CI gate): a thread that ends the process after a bound
/// scaled to the load.
fn arm_watchdog(options: &args::Options) {
    let requests = options.clients.saturating_mul(options.rounds + 2);
    let limit = Duration::from_secs(60) + Duration::from_micros(requests as u64 * 500);
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("zlink-demo: FAILED: the run did not finish within {limit:?}");
        std::process::exit(1);
    });
}

fn percentile_line(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "no samples".to_owned();
    }
    format!(
        "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (µs, {} samples)",
        h.value_at_quantile(0.50),
        h.value_at_quantile(0.90),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        h.len()
    )
}

fn render(
    options: &args::Options,
    t: &Tally,
    mesh: &[GameNode],
    boundaries: &[Boundary],
    f: Finals,
) -> Report {
    let mut out = String::new();
    let sum =
        |get: fn(&game::NodeStats) -> u64| -> u64 { mesh.iter().map(|g| get(&g.stats)).sum() };
    let pushes_sent = sum(|s| s.pushes.load(Ordering::Relaxed));
    let push_refused = sum(|s| s.push_refused.load(Ordering::Relaxed));
    let moves_handled = sum(|s| s.moves.load(Ordering::Relaxed));
    let replaced_callbacks = sum(|s| s.replaced_callbacks.load(Ordering::Relaxed));
    let closed: u64 = t.ended_by_close.values().sum();

    let _ = writeln!(
        out,
        "zlink-demo: {} nodes on loopback, one embedded Location Store, {} clients on {} client threads, {} MOVE rounds each",
        mesh.len(),
        options.clients,
        options.threads,
        options.rounds
    );
    let _ = writeln!(out);
    let mut line = |label: &str, value: String| {
        let _ = writeln!(out, "  {label:<28} {value}");
    };
    let remote = (0..options.clients)
        .filter(|&i| load::session_node(i, mesh.len()) != load::host_node(i, mesh.len()))
        .count();
    line(
        "io backend",
        mesh.first()
            .map_or_else(String::new, |g| format!("{:?}", g.node.io_backend())),
    );
    line(
        "clients",
        format!(
            "{} players; {} sessions ({} replacement logins, {} reconnects); {} connect failures",
            options.clients, t.connected, t.replacements_expected, t.reconnects, t.connect_failures
        ),
    );
    line(
        "placement",
        format!(
            "players spread over {} nodes; {remote} of {} first sessions relay across a link",
            mesh.len(),
            options.clients
        ),
    );
    line(
        "requests sent",
        format!(
            "{} (LOGIN {}, MOVE {}, WHERE {})",
            t.requests_sent(),
            t.logins_sent,
            t.moves_sent,
            t.wheres_sent
        ),
    );
    line(
        "replies received",
        format!(
            "{} (LOGIN {}, MOVE {}, WHERE {}; MOVEs handled by players {})",
            t.replies(),
            t.logins_ok,
            t.moves_ok + t.late_moves_accepted,
            t.wheres_ok,
            moves_handled
        ),
    );
    let errors = if t.errors.is_empty() {
        "0".to_owned()
    } else {
        let by_kind: Vec<String> = t
            .errors
            .iter()
            .map(|((kind, reason), n)| format!("{kind}/{reason} {n}"))
            .collect();
        format!("{} ({})", t.typed_errors(), by_kind.join(", "))
    };
    line("typed errors", errors);
    let by_close: Vec<String> = t
        .ended_by_close
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    line(
        "ended by a close",
        if by_close.is_empty() {
            "0".to_owned()
        } else {
            format!("{closed} ({})", by_close.join(", "))
        },
    );
    line("duplicated replies", t.duplicated.to_string());
    line("dropped requests", t.dropped.to_string());
    line(
        "unsolicited replies",
        format!(
            "{} (a terminal for a correlation never sent)",
            t.unsolicited
        ),
    );
    line(
        "position mismatches",
        format!("{} (a MOVE applied twice or lost)", t.position_mismatches),
    );
    line(
        "pushes received",
        format!(
            "{} ticks of {} pushed by players ({} refused, {} missing), {} replaced notices",
            t.ticks, pushes_sent, push_refused, t.ticks_missing, t.replaced_notices
        ),
    );
    line(
        "replacements observed",
        format!(
            "{} Close(Replaced) of {} expected ({} duplicate-connection callbacks)",
            t.replacements_seen, t.replacements_expected, replaced_callbacks
        ),
    );
    line(
        "late MOVEs, old sessions",
        format!(
            "{} refused with a typed error, {} ended by the close, {} accepted",
            t.late_moves_refused, t.late_moves_closed, t.late_moves_accepted
        ),
    );
    line(
        "disconnect callbacks",
        format!(
            "{} for {} live bindings at the end ({} earlier, during the run)",
            f.final_disconnects, t.live_bindings, f.disconnects_before_final
        ),
    );
    let m = &f.moves;
    let refused = if m.refused.is_empty() {
        "0 refused".to_owned()
    } else {
        let list: Vec<String> = m.refused.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!("{} refused ({})", m.refused_total(), list.join(", "))
    };
    line(
        "relocations",
        format!(
            "{} committed of {} asked (at least {}; {} whole rooms; {} back to a node left earlier), {refused}; seed {}",
            m.committed, m.asked, options.relocations, m.rooms, m.returns, options.seed
        ),
    );
    let counter =
        |event: FlowTrace| -> u64 { mesh.iter().map(|g| g.node.flow_counters().get(event)).sum() };
    line(
        "in flight at a move",
        format!(
            "{} held by a session owner's seal and released, {} queued at the source and merged at the target",
            counter(FlowTrace::HeldMessageReleased),
            counter(FlowTrace::RelocationWorkMerged)
        ),
    );
    if t.login_retries > 0 {
        line(
            "logins retried",
            format!(
                "{} (refused while the player was mid-relocation, X5)",
                t.login_retries
            ),
        );
    }
    line("MOVE latency", percentile_line(&t.move_latency));
    line("relocation latency", percentile_line(&m.latency));
    line("LOGIN latency", percentile_line(&t.login_latency));
    let moves_secs = phase_time(boundaries, 1) + phase_time(boundaries, 3);
    let rate = if moves_secs.is_zero() {
        0.0
    } else {
        t.moves_ok as f64 / moves_secs.as_secs_f64()
    };
    line(
        "MOVE throughput",
        format!(
            "{rate:.0} replies/s ({} client threads, one request in flight each)",
            options.threads
        ),
    );
    line("wall time", format!("{:.2} s", f.wall.as_secs_f64()));
    let _ = writeln!(out);
    let _ = writeln!(out, "  phases (Location Store row operations in each):");
    let _ = writeln!(
        out,
        "    {:<38} {:>8.1} ms",
        "start 3 nodes, link, create players",
        f.mesh_setup.as_secs_f64() * 1e3
    );
    for (i, name) in PHASES.iter().enumerate() {
        let (Some(a), Some(b)) = (boundaries.get(i), boundaries.get(i + 1)) else {
            continue;
        };
        let mut ms = (b.at - a.at).as_secs_f64() * 1e3;
        let mut rows = b.store_rows - a.store_rows;
        if i + 1 == PHASES.len() {
            ms += f.disconnect_wait.as_secs_f64() * 1e3;
            rows = f.store_rows_disconnect - a.store_rows;
        }
        let _ = writeln!(out, "    {name:<38} {ms:>8.1} ms   store rows {rows}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "  flow-trace counters (non-zero):");
    for g in mesh {
        let counters = g.node.flow_counters();
        let list: Vec<String> = counters
            .nonzero()
            .map(|(event, n)| format!("{event} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "    node {}: {}",
            g.rid,
            if list.is_empty() {
                "none".to_owned()
            } else {
                list.join(", ")
            }
        );
    }
    if !t.notes.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  first anomalies:");
        for note in &t.notes {
            let _ = writeln!(out, "    {note}");
        }
    }

    let mut failures = Vec::new();
    if t.duplicated > 0 || t.unsolicited > 0 {
        failures.push(format!(
            "{} duplicated and {} unsolicited replies (must be 0)",
            t.duplicated, t.unsolicited
        ));
    }
    if t.dropped > 0 {
        failures.push(format!(
            "{} requests without a terminal (must be 0)",
            t.dropped
        ));
    }
    if t.replacements_seen != t.replacements_expected {
        failures.push(format!(
            "{} of {} replaced clients saw Close(Replaced)",
            t.replacements_seen, t.replacements_expected
        ));
    }
    if t.connect_failures > 0 || t.logins_ok + t.login_retries != t.logins_sent {
        failures.push(format!(
            "{} connect failures, {} of {} logins succeeded ({} retried)",
            t.connect_failures, t.logins_ok, t.logins_sent, t.login_retries
        ));
    }
    if t.late_moves_accepted > 0 || t.position_mismatches > 0 {
        failures.push(format!(
            "{} MOVEs from replaced sessions accepted, {} position mismatches (must be 0)",
            t.late_moves_accepted, t.position_mismatches
        ));
    }
    if t.ticks > pushes_sent {
        failures.push(format!(
            "{} ticks arrived of {pushes_sent} pushed: a push delivered twice",
            t.ticks
        ));
    }
    if t.ticks_missing > 0 {
        failures.push(format!(
            "{} ticks the players pushed never arrived",
            t.ticks_missing
        ));
    }
    if t.unexpected_closes > 0 {
        failures.push(format!(
            "{} live sessions were closed by the server",
            t.unexpected_closes
        ));
    }
    if f.final_disconnects != t.live_bindings {
        failures.push(format!(
            "{} disconnect callbacks for {} live bindings",
            f.final_disconnects, t.live_bindings
        ));
    }
    let undecodable: u64 = t
        .errors
        .iter()
        .filter(|((_, reason), _)| reason == "MalformedPayload")
        .map(|(_, n)| n)
        .sum();
    if undecodable > 0 {
        failures.push(format!(
            "{undecodable} requests or replies were not their message type (must be 0)"
        ));
    }
    let timed_out: u64 = t
        .errors
        .iter()
        .filter(|((kind, _), _)| kind == "DeadlineExceeded")
        .map(|(_, n)| n)
        .sum();
    if timed_out > 0 {
        failures.push(format!(
            "{timed_out} requests ended at their deadline on a fault-free mesh (must be 0)"
        ));
    }
    if m.panicked || (options.relocations as u64) > m.asked || (m.asked > 0 && m.committed == 0) {
        failures.push(format!(
            "{} of {} relocations committed, at least {} asked for{}",
            m.committed,
            m.asked,
            options.relocations,
            if m.panicked { "; a mover panicked" } else { "" }
        ));
    }
    let _ = writeln!(out);
    if failures.is_empty() {
        let _ = writeln!(
            out,
            "PASS: 0 duplicated, 0 dropped, 0 position mismatches across {} live relocations, every replaced session saw Close(Replaced)",
            m.committed
        );
    } else {
        let _ = writeln!(out, "FAIL:");
        for why in &failures {
            let _ = writeln!(out, "  {why}");
        }
    }
    Report {
        text: out,
        passed: failures.is_empty(),
    }
}

fn phase_time(boundaries: &[Boundary], phase: usize) -> Duration {
    match (boundaries.get(phase), boundaries.get(phase + 1)) {
        (Some(a), Some(b)) => b.at - a.at,
        _ => Duration::ZERO,
    }
}
