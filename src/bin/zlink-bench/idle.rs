//! `--idle-sessions N` (issue 5 item 3): the resident memory an idle bound
//! session costs. Each system is measured in a fresh child process of this
//! binary (`--idle-child`), so that no earlier system's freed pages, kept
//! by the allocator, hide a later one's growth. The child samples its
//! VmRSS (/proc/self/status) before the system starts, after it started
//! (zlink's player Actors are created then, the baselines spawn theirs at
//! login) and after N sessions connected and logged in (bound); it prints
//! one JSON line, with the wall time of each phase (start, login, measure,
//! stop) so that a slow phase shows. The load client runs in the same process: its side of
//! each connection (a tokio TcpStream, no buffers kept) is in the figure.

use std::cell::RefCell;
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use crate::args::{Options, Workload};
use crate::client::{self, LoadSpec, Tally};
use crate::systems;

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

/// The child: measures the one system of `options` and prints its line.
pub fn child(options: &Options, sessions: usize) -> Result<(), String> {
    let &[system] = options.systems.as_slice() else {
        return Err("--idle-child measures exactly one system".to_owned());
    };
    crate::ensure_descriptors(sessions)?;
    let spec = LoadSpec {
        workload: Workload::Relay,
        sessions,
        in_flight: 1,
        payload_len: options.payload_len,
        warmup: options.warmup,
        duration: options.duration,
        rate: None,
        nodes: options.nodes,
        shards: options.shards,
        messages: None,
        target: None,
    };
    let before = rss_kib()?;
    let clock = Instant::now();
    let running = systems::start(system, &spec)?;
    let start_seconds = clock.elapsed().as_secs_f64();
    let started = rss_kib()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(RefCell::new(Tally::new()?));
    let entry = running.entry();
    let clock = Instant::now();
    let streams = local.block_on(&runtime, client::login_all(entry, &spec, &tally))?;
    let login_seconds = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let bound_rss = rss_kib()?;
    let measure_seconds = clock.elapsed().as_secs_f64();
    let bound = streams.len();
    let clock = Instant::now();
    drop(streams);
    running.stop();
    let stop_seconds = clock.elapsed().as_secs_f64();
    let line = serde_json::json!({
        "system": system.name(),
        "sessions": sessions,
        "bound": bound,
        "failed": tally.borrow().failed_sessions,
        "notes": tally.borrow().notes,
        "rss_before_kib": before,
        "rss_started_kib": started,
        "rss_bound_kib": bound_rss,
        "phase_seconds": {
            "start": start_seconds,
            "login": login_seconds,
            "measure": measure_seconds,
            "stop": stop_seconds,
        },
    });
    println!("{line}");
    Ok(())
}

/// The parent: one child per system, then the table (and the JSON when
/// asked). `false` when a session could not be bound.
pub fn run(options: &Options, sessions: usize) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut lines = Vec::new();
    for system in &options.systems {
        eprintln!(
            "zlink-bench: idle memory, {}, {sessions} sessions",
            system.name()
        );
        let output = Command::new(&exe)
            .args(["--idle-child", "--idle-sessions", &sessions.to_string()])
            .args(["--system", system.name()])
            .args(["--nodes", &options.nodes.to_string()])
            .args(["--shards", &options.shards.to_string()])
            .output()
            .map_err(|e| format!("running the {} child: {e}", system.name()))?;
        if !output.status.success() {
            return Err(format!(
                "the {} child failed: {}",
                system.name(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line: serde_json::Value = stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("the {} child printed no report", system.name()))?;
        lines.push(line);
    }
    let kib = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mut clean = true;
    let mut systems = Vec::new();
    println!(
        "zlink-bench: idle bound sessions, {sessions} per system, one process each; RSS from /proc/self/status (load client included)"
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
    if let Some(path) = &options.json {
        let report = serde_json::json!({ "idle_sessions": sessions, "systems": systems });
        crate::write_json(path, &report)?;
    }
    Ok(clean)
}
