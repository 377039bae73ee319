//! `--idle-sessions N` (issue 5 item 3): the resident memory an idle bound
//! session costs. Each system runs in a fresh child process of this binary
//! (`--idle-child`), so that no earlier system's freed pages, kept by the
//! allocator, hide a later one's growth, and the load client stays in the
//! parent: the child's figure is the system's alone, and each process
//! holds one end of each connection, so 10,000 sessions fit under a
//! descriptor limit of 20,000 (the machine's hard limit here).
//!
//! The two talk over the child's stdin and stdout, one line at a time: the
//! child samples its VmRSS (/proc/self/status) before the system starts
//! and after it started (zlink's player Actors are created then; the
//! baselines spawn the bound players at login and the idle ones of
//! `--actors` at start), and prints its entry address; the
//! parent connects and logs every session in (bound), then writes
//! `measure`; the child samples again and prints its figures; the parent
//! closes the sessions and its end of stdin; the child stops the system
//! and prints how long that took. The wall time of each phase (start,
//! login, measure, stop) is reported so that a slow phase shows.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Lines, Write};
use std::net::SocketAddr;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

use crate::args::{Options, Workload};
use crate::client::{self, LoadSpec, Tally};
use crate::systems::{self, SystemKind};

/// The line the parent writes once every session is logged in.
const MEASURE: &str = "measure";

/// VmRSS of this process in KiB.
fn rss_kib() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_owned())
}

/// The idle load: `sessions` sessions, each logged in (bound) and then
/// left alone.
fn idle_spec(options: &Options, sessions: usize) -> LoadSpec {
    LoadSpec {
        workload: Workload::Relay,
        sessions,
        actors: options.actors,
        in_flight: 1,
        payload_len: options.payload_len,
        warmup: options.warmup,
        duration: options.duration,
        rate: None,
        tick: options.tick,
        nodes: options.nodes,
        shards: options.shards,
        messages: None,
        target: None,
    }
}

/// Prints one JSON line to the parent at once (stdout is a pipe, so it
/// would otherwise wait in a buffer).
fn tell_parent(line: &serde_json::Value) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing to the parent: {e}"))
}

/// The child: starts the one system of `options`, and measures it while
/// the parent's sessions are bound (the module's steps).
pub fn child(options: &Options, sessions: usize) -> Result<(), String> {
    let &[system] = options.systems.as_slice() else {
        return Err("--idle-child measures exactly one system".to_owned());
    };
    crate::ensure_descriptors(sessions, 1)?;
    let before = rss_kib()?;
    let clock = Instant::now();
    let running = systems::start(system, &idle_spec(options, sessions))?;
    let start_seconds = clock.elapsed().as_secs_f64();
    let started = rss_kib()?;
    tell_parent(&serde_json::json!({ "entry": running.entry().to_string() }))?;
    let mut parent = std::io::stdin().lock();
    let mut line = String::new();
    parent
        .read_line(&mut line)
        .map_err(|e| format!("reading from the parent: {e}"))?;
    if line.trim() != MEASURE {
        running.stop();
        return Err("the parent ended before its sessions were bound".to_owned());
    }
    let clock = Instant::now();
    let bound_rss = rss_kib()?;
    let measure_seconds = clock.elapsed().as_secs_f64();
    tell_parent(&serde_json::json!({
        "rss_before_kib": before,
        "rss_started_kib": started,
        "rss_bound_kib": bound_rss,
        "start_seconds": start_seconds,
        "measure_seconds": measure_seconds,
    }))?;
    // Until the parent has closed its sessions and its end of the pipe.
    while parent.read_line(&mut line).is_ok_and(|n| n > 0) {}
    let clock = Instant::now();
    running.stop();
    tell_parent(&serde_json::json!({ "stop_seconds": clock.elapsed().as_secs_f64() }))
}

/// The next JSON line the child printed; when it printed none, why (its
/// own error went to the shared stderr).
fn next_line(
    lines: &mut Lines<BufReader<ChildStdout>>,
    system: SystemKind,
) -> Result<serde_json::Value, String> {
    let line = lines
        .next()
        .ok_or_else(|| {
            format!(
                "the {} child ended early (its error is above)",
                system.name()
            )
        })?
        .map_err(|e| format!("reading the {} child: {e}", system.name()))?;
    serde_json::from_str(&line)
        .map_err(|e| format!("the {} child printed {line:?}: {e}", system.name()))
}

/// Runs one system's child and binds `sessions` sessions to it from this
/// process ([`drive`]).
fn measure(
    exe: &std::path::Path,
    options: &Options,
    system: SystemKind,
    sessions: usize,
) -> Result<serde_json::Value, String> {
    let mut child = Command::new(exe)
        .args(["--idle-child", "--idle-sessions", &sessions.to_string()])
        .args(["--system", system.name()])
        .args(["--actors", &options.actors.to_string()])
        .args(["--nodes", &options.nodes.to_string()])
        .args(["--shards", &options.shards.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running the {} child: {e}", system.name()))?;
    let (Some(to_child), Some(from_child)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the child's pipes were not made".to_owned());
    };
    let result = drive(
        BufReader::new(from_child).lines(),
        to_child,
        options,
        system,
        sessions,
    );
    // Whatever went wrong in it, the child is waited for: it stops once
    // its stdin closes.
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the {} child: {e}", system.name()))?;
    let line = result?;
    if !status.success() {
        return Err(format!("the {} child ended with {status}", system.name()));
    }
    Ok(line)
}

/// The parent's side of one child's run (the module's steps): binds the
/// sessions, has the child measure, closes them; the child's figures with
/// the login's, in one JSON object.
fn drive(
    mut lines: Lines<BufReader<ChildStdout>>,
    mut to_child: ChildStdin,
    options: &Options,
    system: SystemKind,
    sessions: usize,
) -> Result<serde_json::Value, String> {
    let ready = next_line(&mut lines, system)?;
    let entry: SocketAddr = ready["entry"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("the {} child named no entry: {ready}", system.name()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(RefCell::new(Tally::new()?));
    let spec = idle_spec(options, sessions);
    let clock = Instant::now();
    let streams = local.block_on(&runtime, client::login_all(entry, &spec, &tally))?;
    let login_seconds = clock.elapsed().as_secs_f64();
    writeln!(to_child, "{MEASURE}")
        .and_then(|()| to_child.flush())
        .map_err(|e| format!("writing to the {} child: {e}", system.name()))?;
    let mut line = next_line(&mut lines, system)?;
    let bound = streams.len();
    drop(streams);
    drop(to_child);
    let stopped = next_line(&mut lines, system)?;
    let tally = tally.borrow();
    line["system"] = system.name().into();
    line["sessions"] = sessions.into();
    line["bound"] = bound.into();
    line["failed"] = tally.failed_sessions.into();
    line["login_refusals"] = tally.login_refusals.into();
    line["refused_sessions"] = tally.refused_sessions.into();
    line["notes"] = tally.notes.clone().into();
    line["phase_seconds"] = serde_json::json!({
        "start": line["start_seconds"],
        "login": login_seconds,
        "measure": line["measure_seconds"],
        "stop": stopped["stop_seconds"],
    });
    Ok(line)
}

/// Says under the table what a system's logins met: the refusals
/// [`client::login_all`] retried, and, when some sessions did not bind,
/// what they got instead (the first few the tally noted, each with its
/// player).
fn report_logins(line: &serde_json::Value, sessions: usize) {
    let system = line["system"].as_str().unwrap_or("?");
    let count = |k: &str| line[k].as_u64().unwrap_or(0);
    let (refusals, refused) = (count("login_refusals"), count("refused_sessions"));
    if refusals > 0 {
        println!(
            "{system}: {refusals} logins of {refused} sessions were refused with Unavailable (StoreUnavailable: the node's store queue was full) and sent again"
        );
    }
    let (bound, failed) = (count("bound"), count("failed"));
    if bound == sessions as u64 {
        return;
    }
    let notes = line["notes"].as_array().map_or(&[][..], Vec::as_slice);
    println!(
        "{system}: {bound} of {sessions} sessions bound, {failed} failed; what the first {} got:",
        notes.len()
    );
    for note in notes {
        println!("  {}", note.as_str().unwrap_or("?"));
    }
}

/// The parent: one child per system, then the table (and the JSON when
/// asked). `false` when a session could not be bound.
pub fn run(options: &Options, sessions: usize) -> Result<bool, String> {
    crate::ensure_descriptors(sessions, 1)?;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut lines = Vec::new();
    for &system in &options.systems {
        eprintln!(
            "zlink-bench: idle memory, {}, {sessions} sessions",
            system.name()
        );
        lines.push(measure(&exe, options, system, sessions)?);
    }
    let kib = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mut clean = true;
    let mut systems = Vec::new();
    println!(
        "zlink-bench: idle bound sessions, {sessions} per system, {} player actors each, each in its own process; RSS from /proc/self/status (the system's alone: the load client runs in the parent)",
        options.actors
    );
    println!(
        "{:<12} {:>7} {:>14} {:>22} {:>26}   seconds: start login measure stop",
        "system", "bound", "RSS started MiB", "KiB/session (binding)", "KiB/session (incl. start)"
    );
    for line in &lines {
        let bound = line["bound"].as_u64().unwrap_or(0);
        clean &= bound == sessions as u64;
        let per =
            |from: &str| (kib(line, "rss_bound_kib") - kib(line, from)) / (bound.max(1) as f64);
        let (binding, total) = (per("rss_started_kib"), per("rss_before_kib"));
        let phase = |p: &str| line["phase_seconds"][p].as_f64().unwrap_or(0.0);
        println!(
            "{:<12} {:>7} {:>14.1} {:>22.2} {:>26.2}   {:>14.2} {:>5.2} {:>7.3} {:>4.2}",
            line["system"].as_str().unwrap_or("?"),
            bound,
            kib(line, "rss_started_kib") / 1024.0,
            binding,
            total,
            phase("start"),
            phase("login"),
            phase("measure"),
            phase("stop")
        );
        let mut entry = line.clone();
        entry["kib_per_session_binding"] = binding.into();
        entry["kib_per_session_including_start"] = total.into();
        systems.push(entry);
    }
    for line in &lines {
        report_logins(line, sessions);
    }
    if let Some(path) = &options.json {
        let report = serde_json::json!({ "idle_sessions": sessions, "actors": options.actors, "systems": systems });
        crate::write_json(path, &report)?;
    }
    Ok(clean)
}
