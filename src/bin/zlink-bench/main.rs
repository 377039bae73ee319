//! zlink-bench: load-tests zlink and the baselines a studio would compare it
//! with, in one run on one machine, with one shared load client (issue 5;
//! docs/PERFORMANCE.md). Each system starts on loopback in this process, is
//! driven (closed or open loop) for a warm-up and a bounded measured
//! window, and is stopped before the next starts; `--compare` interleaves
//! the systems over at least three rounds, for each workload and placement
//! asked. `--target` drives a zlink mesh already running elsewhere instead
//! ([`client::Target`]). `--idle-sessions` measures memory instead
//! ([`idle`]). `--store-axis` measures what a slow or hung Location Store
//! costs established sessions instead ([`store_axis`]). The `actor-rtt`
//! workload has no load client: its callers are Actors (or tasks) inside
//! the system ([`actor_rtt`]). It exits 1
//! when any message was lost, duplicated or corrupted, (store axis) an
//! established request failed, or (idle memory) a session did not bind.
//!
//! `cargo run --release --features bench --bin zlink-bench -- --help`
//! lists the flags.

mod actor_rtt;
mod args;
mod churn;
mod client;
mod idle;
/// The lobby game's typed messages, which a `--target` run sends to
/// zlink-node (src/bin/lobby/messages.rs).
#[path = "../lobby/messages.rs"]
mod lobby;
mod pause;
mod report;
mod scale;
mod store_axis;
mod systems;
mod transport_axis;

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::client::{LoadSpec, Target};
use crate::report::{Run, Summary};

/// DESIGN: the library sets no global allocator; the binaries use mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let outcome = match &options.store_axis {
        None if options.transport_axis => transport_axis::run(&options).map(|clean| {
            (
                clean,
                "a request ended in an error or with the wrong echo (see the report)",
            )
        }),
        Some(axis) => store_axis::run(&options, axis).map(|clean| {
            (
                clean,
                "an established session's request ended in an error (see the report)",
            )
        }),
        // Idle memory: a session whose login failed (a typed error other
        // than the store queue's refusal, which the client retries, or a
        // broken connection) is left unbound; the report says what the
        // first ones got.
        None if options.idle_sessions.is_some() => run(&options).map(|clean| {
            (
                clean,
                "not every idle session logged in and bound (see the bound column, and what the unbound sessions got under the table)",
            )
        }),
        None => run(&options).map(|clean| {
            (
                clean,
                "messages were lost, duplicated or corrupted (see the table)",
            )
        }),
    };
    match outcome {
        Ok((clean, failure)) => {
            if !clean {
                eprintln!("zlink-bench: FAILED: {failure}");
                std::process::exit(1);
            }
        }
        Err(why) => {
            eprintln!("zlink-bench: {why}");
            std::process::exit(1);
        }
    }
}

fn run(options: &args::Options) -> Result<bool, String> {
    if let Some(dir) = &options.scale_report {
        scale::report(dir)?;
        return Ok(true);
    }
    if let Some(sessions) = options.idle_sessions {
        if options.idle_child {
            idle::child(options, sessions)?;
            return Ok(true);
        }
        return idle::run(options, sessions);
    }
    ensure_descriptors(options.sessions, BOTH_ENDS)?;
    let mut reports = Vec::new();
    let mut clean = true;
    let started = Instant::now();
    for &pin in &options.placements {
        for &workload in &options.workloads {
            let run = Run { workload, pin };
            let systems: Vec<_> = options
                .systems
                .iter()
                .copied()
                .filter(|s| s.runs(workload))
                .collect();
            let warning = (workload == args::Workload::Churn)
                .then(churn::port_range_warning)
                .flatten();
            if let Some(warning) = &warning {
                eprintln!("zlink-bench: warning: {warning}");
            }
            let summaries = run_rounds(options, &run, &systems, started)?;
            if let Some(warning) = &warning {
                println!("warning: {warning}");
            }
            print!("{}", report::render(options, &run, &summaries));
            println!();
            if let Some(dir) = &options.out_dir {
                write_files(dir, options, &run, &summaries)?;
            }
            clean &= summaries.iter().all(Summary::clean);
            let mut report = report::json(options, &run, &summaries);
            if let (Some(warning), Some(fields)) = (&warning, report.as_object_mut()) {
                fields.insert("warning".to_owned(), serde_json::json!(warning));
            }
            reports.push(report);
        }
    }
    if let Some(path) = &options.json {
        write_json(path, &serde_json::json!({ "runs": reports }))?;
    }
    Ok(clean)
}

/// Descriptors a run needs beyond those of its sessions: listeners, links,
/// rings, runtimes, the store.
const DESCRIPTORS_SPARE: u64 = 512;

/// A load run holds both ends of every session's connection: the client's
/// and the system's.
pub const BOTH_ENDS: u64 = 2;

/// Makes room for `sessions` connections of which this process holds
/// `ends` ends each ([`BOTH_ENDS`] when the client and the system share
/// it, one when `--idle-sessions` splits them): raises the soft descriptor
/// limit, and the hard one where it is allowed to (root); where it cannot,
/// says so at once instead of letting the logins fail with EMFILE one by
/// one.
pub fn ensure_descriptors(sessions: usize, ends: u64) -> Result<(), String> {
    let need = ends * sessions as u64 + DESCRIPTORS_SPARE;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the pointer, which points
    // to a live value of that type.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    if limit.rlim_cur >= need {
        return Ok(());
    }
    let raised = libc::rlimit {
        rlim_cur: need.max(limit.rlim_cur),
        rlim_max: need.max(limit.rlim_max),
    };
    // SAFETY: setrlimit only reads the `rlimit` the pointer points to.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(format!(
            "{sessions} sessions need about {need} file descriptors ({ends} end(s) of each connection in this process); the limit is {} and could not be raised ({}): raise it (ulimit -n) or run fewer sessions",
            limit.rlim_max,
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Writes `value` as pretty JSON to `path`, creating its folder.
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("json: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The rounds of one run: each round starts, drives and stops every system
/// in turn (interleaved).
fn run_rounds(
    options: &args::Options,
    run: &Run,
    systems: &[systems::SystemKind],
    started: Instant,
) -> Result<Vec<Summary>, String> {
    // Churn's operations and actor-rtt's callers pace themselves: no rate
    // or message budget applies to them (`--compare` runs them beside the
    // workloads it applies to).
    let paced = !matches!(
        run.workload,
        args::Workload::Churn | args::Workload::ActorRtt
    );
    let spec = LoadSpec {
        workload: run.workload,
        sessions: options.sessions,
        actors: options.actors,
        in_flight: options.in_flight,
        payload_len: options.payload_len,
        warmup: options.warmup,
        duration: options.duration,
        rate: options.rate.filter(|_| paced),
        tick: options.tick,
        nodes: options.nodes,
        shards: options.shards,
        messages: options.messages.filter(|_| paced),
        target: None,
    };
    let mut summaries = systems
        .iter()
        .map(|&system| {
            let latency = Histogram::<u64>::new_with_bounds(1, client::LATENCY_MAX_NS, 3)
                .map_err(|e| format!("histogram: {e}"))?;
            Ok(Summary::new(system, latency))
        })
        .collect::<Result<Vec<_>, String>>()?;
    for round in 1..=options.rounds {
        for summary in &mut summaries {
            let name = summary.system.name();
            eprintln!(
                "zlink-bench: round {round}/{}, {name}, {} ({:.0} s elapsed)",
                options.rounds,
                run.label(),
                started.elapsed().as_secs_f64()
            );
            if let Some(pin) = run.pin {
                // Threads inherit their creator's affinity: every thread
                // the system starts lands on the system core.
                pin_current(pin.system_core)?;
            } else {
                unpin_current(options.cores)?;
            }
            let mut spec = spec.clone();
            if !options.target.is_empty() {
                // Fresh players every round: a player keeps its position.
                spec.target = Some(Target::new(options.target.clone()));
            }
            let tally = if run.workload == args::Workload::ActorRtt {
                let outcome = actor_rtt::run(summary.system, &spec)
                    .map_err(|why| format!("{name}: {why}"))?;
                summary.io_stack = outcome.io_stack;
                summary.actors = outcome.actors;
                outcome.tally
            } else {
                drive(summary, &spec, run)?
            };
            eprintln!(
                "zlink-bench:   {} measured, p50 {:.1} µs, lost {}, duplicated {}",
                tally.measured,
                tally.latency.value_at_quantile(0.5) as f64 / 1e3,
                tally.lost,
                tally.duplicated
            );
            let seconds = tally.measured_seconds;
            summary.add(tally, seconds)?;
        }
    }
    Ok(summaries)
}

/// Starts `summary`'s system, drives it with the load client (on its
/// own thread, on the client core when pinned), stops it, and gives the
/// round's tally with the relocations' pauses (`relocate`).
fn drive(summary: &mut Summary, spec: &LoadSpec, run: &Run) -> Result<client::Tally, String> {
    let name = summary.system.name();
    let system = systems::start(summary.system, spec)?;
    summary.io_stack = system.io_stack();
    let entry = system.entry();
    let bound = system.bound_signal();
    let client_core = run.pin.map(|p| p.client_core);
    let load_spec = spec.clone();
    let load = std::thread::Builder::new()
        .name("load-client".to_owned())
        .spawn(move || {
            client_core.map_or(Ok(()), pin_current)?;
            client::run(entry, &load_spec, bound)
        })
        .map_err(|e| format!("spawning the load client: {e}"))?;
    let tally = load
        .join()
        .map_err(|_| format!("{name}: the load client panicked"))?;
    summary.actors = system.actors();
    summary.actors_by_node = system.actors_by_node();
    let moves = system.stop();
    let mut tally = tally.map_err(|why| format!("{name}: {why}"))?;
    pause::record(&mut tally, &moves);
    Ok(tally)
}

/// Pins the calling thread to `core`.
fn pin_current(core: usize) -> Result<(), String> {
    if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        Ok(())
    } else {
        Err(format!("could not pin a thread to core {core}"))
    }
}

/// Lets the calling thread run on every core again (a floating run after
/// a pinned one in the same process).
fn unpin_current(cores: usize) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes bits
    // inside it and sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for core in 0..cores {
            libc::CPU_SET(core, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "could not unpin a thread: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// One `.hgrm` per system and the SVG of all curves.
fn write_files(
    dir: &Path,
    options: &args::Options,
    run: &Run,
    summaries: &[Summary],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let workload = run.label();
    for s in summaries {
        let path = dir.join(format!("{workload}-{}.hgrm", s.system.name()));
        std::fs::write(&path, report::hgrm(&s.latency))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let load = match options.rate {
        Some(rate) => format!("open loop {rate} msg/s"),
        None => format!("{} in flight", options.in_flight),
    };
    let title = format!(
        "{workload}: latency by percentile, {} sessions, {load}",
        options.sessions
    );
    report::svg(
        &dir.join(format!("{workload}-latency.svg")),
        &title,
        summaries,
    )
}
