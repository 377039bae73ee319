//! The report (issue 5 item 3): per system, the latency percentiles of all
//! its rounds merged (hdrhistogram), messages/s in total and per core, CPU
//! time per message from getrusage, and lost, duplicated and corrupt counts
//! (must be 0, printed always); ratios to the raw forwarders (two-hop and
//! one-hop) and to tokio; the local path beside the cross-node one (issue
//! 24 item 3, [`local_path`]); JSON, one `.hgrm` percentile distribution
//! per system and one SVG of all curves.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::args::{Options, Placement, Workload};
use crate::client::{Tally, ROOM_SIZE};
use crate::systems::SystemKind;

/// One workload in one placement: the systems' summaries are over its
/// rounds.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub workload: Workload,
    pub pin: Option<Placement>,
}

impl Run {
    /// The run's name in file names: the workload, and `-pinned` when pinned.
    pub fn label(&self) -> String {
        match self.pin {
            Some(_) => format!("{}-pinned", self.workload.name()),
            None => self.workload.name().to_owned(),
        }
    }

    fn placement(&self) -> String {
        match self.pin {
            None => "floating: every thread may run on any core".to_owned(),
            // actor-rtt has no load client: only the system is placed.
            Some(p) if self.workload == Workload::ActorRtt => format!(
                "pinned: every system thread on core {} (no load client)",
                p.system_core
            ),
            Some(p) => p.to_string(),
        }
    }
}

/// The quantiles the table prints, with their labels.
const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

/// CPU seconds (user + system) this process has used, all threads: the
/// load client and the system under test alike.
pub fn process_cpu_seconds() -> Result<f64, String> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is
    // given, which points to memory of that type; it is read only on success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!("getrusage: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: getrusage succeeded, so it initialised the value.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// One system's rounds, merged.
pub struct Summary {
    pub system: SystemKind,
    /// The io stack the system ran on, as it reported ([`crate::systems::Running::io_stack`]).
    pub io_stack: &'static str,
    pub latency: Histogram<u64>,
    pub measured: u64,
    /// Measured seconds over all rounds.
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub cpu_wall_seconds: f64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupt: u64,
    pub errors: u64,
    pub failed_sessions: u64,
    /// LOGINs (and `--target` LOOKUPs) the system refused with
    /// `StoreUnavailable` and the client sent again, over all rounds, and
    /// the sessions they belonged to ([`crate::client::login_all`]): a
    /// round whose logins met a full store queue says so.
    pub login_refusals: u64,
    pub refused_sessions: u64,
    /// p50 of each round, in ns: shows a bimodal (floating) run.
    pub round_p50_ns: Vec<u64>,
    /// Messages a second of each round: rounds are interleaved, so round
    /// `i` of two systems ran side by side, and their ratios round by
    /// round show how far one run's ratio can be trusted.
    pub round_msgs_per_s: Vec<f64>,
    pub notes: Vec<String>,
    /// Latency by kind of answer or operation, all rounds merged.
    pub kinds: BTreeMap<&'static str, Histogram<u64>>,
    /// `relocate`: moves that did not commit.
    pub move_failures: u64,
    /// The player actors the system counted itself after the last round's
    /// load ([`crate::systems::Running::actors`]); `None`: it has none.
    pub actors: Option<usize>,
    /// The same per zlink node, node 1 first
    /// ([`crate::systems::Running::actors_by_node`]): where the players
    /// were (all on node 1 on the local path).
    pub actors_by_node: Option<Vec<usize>>,
}

impl Summary {
    pub fn new(system: SystemKind, latency: Histogram<u64>) -> Self {
        Self {
            system,
            io_stack: "",
            latency,
            measured: 0,
            seconds: 0.0,
            cpu_seconds: 0.0,
            cpu_wall_seconds: 0.0,
            lost: 0,
            duplicated: 0,
            corrupt: 0,
            errors: 0,
            failed_sessions: 0,
            login_refusals: 0,
            refused_sessions: 0,
            round_p50_ns: Vec::new(),
            round_msgs_per_s: Vec::new(),
            notes: Vec::new(),
            kinds: BTreeMap::new(),
            move_failures: 0,
            actors: None,
            actors_by_node: None,
        }
    }

    /// Adds one round's tally.
    pub fn add(&mut self, tally: Tally, seconds: f64) -> Result<(), String> {
        self.latency
            .add(&tally.latency)
            .map_err(|e| format!("merging histograms: {e}"))?;
        self.round_p50_ns.push(tally.latency.value_at_quantile(0.5));
        if seconds > 0.0 {
            self.round_msgs_per_s.push(tally.measured as f64 / seconds);
        }
        self.measured += tally.measured;
        self.seconds += seconds;
        self.cpu_seconds += tally.cpu_seconds;
        self.cpu_wall_seconds += tally.cpu_wall_seconds;
        self.lost += tally.lost;
        self.duplicated += tally.duplicated;
        self.corrupt += tally.corrupt;
        self.errors += tally.errors;
        self.failed_sessions += tally.failed_sessions;
        self.login_refusals += tally.login_refusals;
        self.refused_sessions += tally.refused_sessions;
        self.move_failures += tally.move_failures;
        self.notes.extend(tally.notes);
        for (kind, histogram) in tally.kinds {
            match self.kinds.get_mut(kind) {
                Some(merged) => merged
                    .add(&histogram)
                    .map_err(|e| format!("merging histograms: {e}"))?,
                None => {
                    self.kinds.insert(kind, histogram);
                }
            }
        }
        Ok(())
    }

    /// The msg/s ratio of `self` to `base` in each round they both ran,
    /// and the median of those ratios.
    pub fn round_ratios(&self, base: &Summary) -> Option<(Vec<f64>, f64)> {
        let ratios: Vec<f64> = self
            .round_msgs_per_s
            .iter()
            .zip(&base.round_msgs_per_s)
            .filter(|(_, b)| **b > 0.0)
            .map(|(a, b)| a / b)
            .collect();
        if ratios.len() < 2 {
            return None;
        }
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 0 {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        Some((ratios, median))
    }

    pub fn messages_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.measured as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// CPU µs per message: CPU per wall second over messages per second;
    /// `None` for a `--target` mesh, whose CPU is other processes' (this
    /// one's getrusage would count the client alone).
    pub fn cpu_us_per_message(&self) -> Option<f64> {
        if self.system == SystemKind::ZlinkTarget {
            return None;
        }
        let rate = self.messages_per_second();
        Some(if rate > 0.0 && self.cpu_wall_seconds > 0.0 {
            self.cpu_seconds / self.cpu_wall_seconds / rate * 1e6
        } else {
            0.0
        })
    }

    fn us(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1e3
    }

    /// Whether the run kept its promises: every message answered once, as sent.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.corrupt == 0
            && self.errors == 0
            && self.failed_sessions == 0
            && self.measured > 0
    }
}

/// How the load was offered, in words.
fn load_mode(options: &Options, workload: Workload) -> String {
    let mode = match (workload, options.rate) {
        (Workload::Churn, _) => "churn: one operation at a time per session".to_owned(),
        (Workload::ActorRtt, _) => {
            return format!(
                "closed loop inside the system, no client: {} caller(s), {} request(s) in flight each, each to its own callee on another node (tokio-chan: another task), timed from the caller's send to the caller taking the reply",
                options.sessions, options.in_flight
            )
        }
        (_, Some(rate)) => {
            format!("open loop at {rate} msg/s in total, latency from the intended send time")
        }
        (_, None) => format!("closed loop, {} in flight each", options.in_flight),
    };
    let mode = match workload {
        Workload::Mixed => format!(
            "{mode}, every room of {ROOM_SIZE} ticking on the server every {} ms and pushing each tick to its members",
            options.tick.as_millis()
        ),
        _ => mode,
    };
    match options.messages {
        Some(n) if workload != Workload::Churn => {
            format!("{mode}, at most {n} messages measured per round")
        }
        _ => mode,
    }
}

/// `mixed`: the tick pushes every member is owed per second (each session
/// is a member of one room, and each room pushes every tick to each of
/// its members), against which the deliveries measured are read.
fn ticks_scheduled_per_second(options: &Options) -> f64 {
    options.sessions as f64 / options.tick.as_secs_f64()
}

/// The sessions, and the player actors each system hosts (`--actors`),
/// in words; a `--target` mesh's own actors are not this run's to say.
fn population(options: &Options, workload: Workload) -> String {
    if workload == Workload::ActorRtt {
        return format!("{} caller/callee pairs", options.sessions);
    }
    let sessions = format!("{} sessions", options.sessions);
    if !options.target.is_empty() {
        return sessions;
    }
    format!(
        "{sessions}, {} player actors per system ({} bound, {} idle; the raw forwarders host none)",
        options.actors,
        options.sessions,
        options.actors - options.sessions
    )
}

/// What each request carries, in words: `--payload` bytes, or a
/// `--target` mesh's MOVE (`--payload` does not apply there).
fn payload(options: &Options) -> String {
    if options.target.is_empty() {
        format!("{} B payload", options.payload_len)
    } else {
        "lobby MOVE {player, dx: 1, dy: 0} requests (MessagePack)".to_owned()
    }
}

/// The readable table, ratios and anomalies.
pub fn render(options: &Options, run: &Run, summaries: &[Summary]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "zlink-bench: workload {}, {}, {}, {}, {:.1} s warm-up + {:.1} s measured, {} round(s) interleaved, {} cores",
        run.workload.name(),
        population(options, run.workload),
        load_mode(options, run.workload),
        payload(options),
        options.warmup.as_secs_f64(),
        options.duration.as_secs_f64(),
        options.rounds,
        options.cores
    );
    let _ = writeln!(out, "placement {}", run.placement());
    let cpu = if run.workload == Workload::ActorRtt {
        "no client: the system's threads alone"
    } else {
        "client included"
    };
    let _ = writeln!(
        out,
        "latency in µs (all rounds merged); CPU is the whole process ({cpu})"
    );
    let _ = write!(out, "{:<17} {:<13}", "system", "io");
    for (label, _) in QUANTILES {
        let _ = write!(out, " {label:>8}");
    }
    let _ = writeln!(
        out,
        " {:>8} {:>8} {:>10} {:>10} {:>9} {:>9} {:>5} {:>5} {:>5}  p50 per round",
        "max", "mean", "count", "msg/s", "msg/s/core", "cpu µs/msg", "lost", "dup", "bad"
    );
    for s in summaries {
        let _ = write!(out, "{:<17} {:<13}", s.system.name(), s.io_stack);
        for (_, q) in QUANTILES {
            let _ = write!(out, " {:>8.1}", s.us(q));
        }
        let rounds: Vec<String> = s
            .round_p50_ns
            .iter()
            .map(|ns| format!("{:.1}", *ns as f64 / 1e3))
            .collect();
        let _ = writeln!(
            out,
            " {:>8.1} {:>8.1} {:>10} {:>10.0} {:>9.0} {:>9} {:>5} {:>5} {:>5}  {}",
            s.latency.max() as f64 / 1e3,
            s.latency.mean() / 1e3,
            s.latency.len(),
            s.messages_per_second(),
            s.messages_per_second() / options.cores as f64,
            s.cpu_us_per_message()
                .map_or("n/a".to_owned(), |us| format!("{us:.2}")),
            s.lost,
            s.duplicated,
            s.corrupt + s.errors + s.failed_sessions,
            rounds.join(" ")
        );
    }
    // Ratios to every raw forwarder, two-hop (the cross-node limit) and
    // one-hop (the local path's limit), and to tokio (which serves a
    // player in-process, one hop) for every system, or (actor-rtt) to
    // both tokio round trips; then zlink on epoll against zlink on
    // io_uring (issue 8 item 4), on each path, when both ran.
    let bases = [
        (SystemKind::RawUring, None),
        (SystemKind::RawEpoll, None),
        (SystemKind::RawUringOneHop, None),
        (SystemKind::RawEpollOneHop, None),
        (SystemKind::Tokio, None),
        (SystemKind::TokioChan, None),
        (SystemKind::TokioTcp, None),
        (SystemKind::Zlink, Some(SystemKind::ZlinkEpoll)),
        (SystemKind::ZlinkLocal, Some(SystemKind::ZlinkEpollLocal)),
    ];
    for (base, only) in bases {
        let Some(b) = summaries.iter().find(|s| s.system == base) else {
            continue;
        };
        let rows: Vec<&Summary> = summaries
            .iter()
            .filter(|s| only.map_or(true, |o| s.system == o))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\nratios to {} (p50, p99, p99.9: lower is better; msg/s: higher is better; cpu/msg: lower)", base.name());
        for s in rows {
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            let _ = writeln!(
                out,
                "  {:<17} p50 {:>5.2}x  p99 {:>5.2}x  p99.9 {:>5.2}x  msg/s {:>5.2}x  cpu/msg {:>5.2}x",
                s.system.name(),
                ratio(s.us(0.5), b.us(0.5)),
                ratio(s.us(0.99), b.us(0.99)),
                ratio(s.us(0.999), b.us(0.999)),
                ratio(s.messages_per_second(), b.messages_per_second()),
                ratio(
                    s.cpu_us_per_message().unwrap_or(0.0),
                    b.cpu_us_per_message().unwrap_or(0.0)
                )
            );
            if let Some(line) = round_ratios(s, b) {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let local = local_path(summaries);
    if !local.is_empty() {
        let _ = writeln!(
            out,
            "\nthe local path (session and player on one node) beside the cross-node one and the limits (msg/s: higher is better; p50, p99: lower)"
        );
        for row in &local {
            let ratios: Vec<String> = row
                .ratios
                .iter()
                .map(|r| format!("{} {:.2}x {}", r.metric.name(), r.value, r.to.name()))
                .collect();
            let _ = writeln!(out, "  {:<17} {}", row.system.name(), ratios.join(", "));
        }
    }
    if summaries.iter().any(|s| !s.kinds.is_empty()) {
        let _ = writeln!(
            out,
            "\nby kind (µs; per second over the measured time; pause and move: per relocation)"
        );
        for s in summaries {
            for (kind, h) in &s.kinds {
                let q = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
                let _ = writeln!(
                    out,
                    "  {:<17} {:<13} p50 {:>9.1} p99 {:>9.1} p99.9 {:>9.1} max {:>9.1} count {:>9} {:>9.0}/s",
                    s.system.name(),
                    kind,
                    q(0.5),
                    q(0.99),
                    q(0.999),
                    h.max() as f64 / 1e3,
                    h.len(),
                    per_second(h.len(), s.seconds)
                );
            }
            if run.workload == Workload::Relocate {
                let _ = writeln!(
                    out,
                    "  {:<17} moves that did not commit: {}",
                    s.system.name(),
                    s.move_failures
                );
            }
            if run.workload == Workload::Mixed {
                let (delivered, scheduled) = tick_deliveries(options, s);
                let _ = writeln!(
                    out,
                    "  {:<17} tick pushes delivered {delivered:.0}/s of {scheduled:.0}/s scheduled ({:.1}%; a tick due while the last still runs is skipped)",
                    s.system.name(),
                    if scheduled > 0.0 { delivered / scheduled * 100.0 } else { 0.0 }
                );
            }
        }
    }
    if run.workload == Workload::Relocate {
        let _ = writeln!(
            out,
            "\nrelocate is zlink's alone: no baseline can move a live actor while its session stays connected"
        );
    }
    let _ = writeln!(out, "\nsystems:");
    for s in summaries {
        let actors = s
            .actors
            .map_or("n/a".to_owned(), |n| match &s.actors_by_node {
                Some(by_node) => {
                    let by_node: Vec<String> = by_node
                        .iter()
                        .enumerate()
                        .map(|(i, n)| format!("node {}: {n}", i + 1))
                        .collect();
                    format!("{n} (its own count; {})", by_node.join(", "))
                }
                None => format!("{n} (its own count)"),
            });
        let _ = writeln!(
            out,
            "  {:<17} {}; actors {actors}",
            s.system.name(),
            s.system.describes(options, run.workload)
        );
        if s.login_refusals > 0 {
            let _ = writeln!(
                out,
                "                    logins refused with Unavailable (StoreUnavailable: the node's store queue was full) and sent again: {} refusals of {} sessions over all rounds",
                s.login_refusals, s.refused_sessions
            );
        }
        for note in s.notes.iter().take(4) {
            let _ = writeln!(out, "                    anomaly: {note}");
        }
    }
    out
}

/// What a ratio of [`local_path`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Messages per second: higher is better.
    Rate,
    P50,
    P99,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Rate => "msg/s",
            Metric::P50 => "p50",
            Metric::P99 => "p99",
        }
    }

    fn of(self, s: &Summary) -> f64 {
        match self {
            Metric::Rate => s.messages_per_second(),
            Metric::P50 => s.us(0.5),
            Metric::P99 => s.us(0.99),
        }
    }
}

/// One ratio of [`local_path`]: `metric` of the row's system over the same
/// of `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub metric: Metric,
    pub to: SystemKind,
    pub value: f64,
}

/// One row of [`local_path`]: a system and its ratios.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalRow {
    pub system: SystemKind,
    pub ratios: Vec<Ratio>,
}

/// The local path beside the cross-node one (issue 24 item 3), as the
/// issue's goals read it: first each one-hop forwarder against tokio (the
/// ceiling: what the local path could reach on that io stack, msg/s and
/// p99), then each `-local` zlink against the one-hop forwarder of its own
/// io stack (msg/s), against tokio (msg/s, p99; tokio serves its player
/// in-process, one hop, too) and against the cross-node zlink on the same
/// stack (msg/s, p50, p99). A ratio whose systems did not both run (or
/// measured nothing) is left out, and so is a row with none.
pub fn local_path(summaries: &[Summary]) -> Vec<LocalRow> {
    let find = |kind: SystemKind| {
        summaries
            .iter()
            .find(|s| s.system == kind && s.messages_per_second() > 0.0)
    };
    let ratio = |metric: Metric, s: &Summary, to: SystemKind| {
        let base = metric.of(find(to)?);
        (base > 0.0).then(|| Ratio {
            metric,
            to,
            value: metric.of(s) / base,
        })
    };
    let rows = [
        (SystemKind::RawUringOneHop, None, None),
        (SystemKind::RawEpollOneHop, None, None),
        (
            SystemKind::ZlinkLocal,
            Some(SystemKind::RawUringOneHop),
            Some(SystemKind::Zlink),
        ),
        (
            SystemKind::ZlinkEpollLocal,
            Some(SystemKind::RawEpollOneHop),
            Some(SystemKind::ZlinkEpoll),
        ),
    ];
    let mut out = Vec::new();
    for (system, limit, cross_node) in rows {
        let Some(s) = find(system) else {
            continue;
        };
        let mut wanted = Vec::new();
        if let Some(limit) = limit {
            wanted.push((Metric::Rate, limit));
        }
        wanted.push((Metric::Rate, SystemKind::Tokio));
        wanted.push((Metric::P99, SystemKind::Tokio));
        if let Some(cross_node) = cross_node {
            wanted.extend([
                (Metric::Rate, cross_node),
                (Metric::P50, cross_node),
                (Metric::P99, cross_node),
            ]);
        }
        let ratios: Vec<Ratio> = wanted
            .into_iter()
            .filter_map(|(metric, to)| ratio(metric, s, to))
            .collect();
        if !ratios.is_empty() {
            out.push(LocalRow { system, ratios });
        }
    }
    out
}

/// `mixed`: the tick pushes measured per second (those due in the window)
/// and those scheduled ([`ticks_scheduled_per_second`]).
fn tick_deliveries(options: &Options, s: &Summary) -> (f64, f64) {
    let delivered = s
        .kinds
        .get("tick")
        .map_or(0.0, |h| per_second(h.len(), s.seconds));
    (delivered, ticks_scheduled_per_second(options))
}

fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// One histogram's figures, in µs.
fn figures(h: &Histogram<u64>) -> serde_json::Map<String, serde_json::Value> {
    let mut latency = serde_json::Map::new();
    for (label, q) in QUANTILES {
        latency.insert(
            label.to_owned(),
            (h.value_at_quantile(q) as f64 / 1e3).into(),
        );
    }
    latency.insert("max".to_owned(), (h.max() as f64 / 1e3).into());
    latency.insert("mean".to_owned(), (h.mean() / 1e3).into());
    latency.insert("count".to_owned(), h.len().into());
    latency
}

/// One run's report as JSON.
pub fn json(options: &Options, run: &Run, summaries: &[Summary]) -> serde_json::Value {
    let systems: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| {
            let latency = figures(&s.latency);
            let kinds: serde_json::Map<String, serde_json::Value> = s
                .kinds
                .iter()
                .map(|(kind, h)| {
                    let mut f = figures(h);
                    f.insert(
                        "per_second".to_owned(),
                        per_second(h.len(), s.seconds).into(),
                    );
                    ((*kind).to_owned(), f.into())
                })
                .collect();
            let ticks = (run.workload == Workload::Mixed).then(|| {
                let (delivered, scheduled) = tick_deliveries(options, s);
                serde_json::json!({
                    "delivered_per_second": delivered,
                    "scheduled_per_second": scheduled,
                })
            });
            serde_json::json!({
                "system": s.system.name(),
                "tick_pushes": ticks,
                "describes": s.system.describes(options, run.workload),
                "io_stack": s.io_stack,
                "latency_us": latency,
                "messages": s.measured,
                "messages_per_second": s.messages_per_second(),
                "messages_per_second_per_core": s.messages_per_second() / options.cores as f64,
                "cpu_us_per_message": s.cpu_us_per_message(),
                "lost": s.lost,
                "duplicated": s.duplicated,
                "corrupt": s.corrupt,
                "errors": s.errors,
                "failed_sessions": s.failed_sessions,
                "login_refusals": s.login_refusals,
                "refused_sessions": s.refused_sessions,
                "move_failures": s.move_failures,
                "actors": s.actors,
                "actors_by_node": s.actors_by_node,
                "zlink_nodes": s.system.zlink_nodes(options.nodes),
                "kinds_us": kinds,
                "round_p50_us": s.round_p50_ns.iter().map(|ns| *ns as f64 / 1e3).collect::<Vec<_>>(),
                "round_msg_per_s": s.round_msgs_per_s,
            })
        })
        .collect();
    serde_json::json!({
        "workload": run.workload.name(),
        "sessions": options.sessions,
        "actors": options.target.is_empty().then_some(options.actors),
        "in_flight": options.in_flight,
        "rate_per_second": options.rate,
        "tick_ms": (run.workload == Workload::Mixed).then_some(options.tick.as_millis() as u64),
        "load": load_mode(options, run.workload),
        "target": options.target.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "payload_bytes": options.payload_len,
        "warmup_seconds": options.warmup.as_secs_f64(),
        "duration_seconds": options.duration.as_secs_f64(),
        "messages_bound": options.messages,
        "rounds": options.rounds,
        "cores": options.cores,
        "zlink_nodes": options.nodes,
        "zlink_shards": options.shards,
        "placement": run.pin.map_or("floating".to_owned(), |p| p.to_string()),
        "systems": systems,
        "local_path": local_path(summaries)
            .iter()
            .map(|row| {
                let ratios: Vec<serde_json::Value> = row
                    .ratios
                    .iter()
                    .map(|r| serde_json::json!({ "metric": r.metric.name(), "to": r.to.name(), "ratio": r.value }))
                    .collect();
                serde_json::json!({ "system": row.system.name(), "ratios": ratios })
            })
            .collect::<Vec<_>>(),
    })
}

/// The percentile distribution in HdrHistogram's `.hgrm` text form (values
/// in µs), readable by its plotter.
pub fn hgrm(latency: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    for v in latency.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        let inverse = if q < 1.0 {
            format!("{:>14.2}", 1.0 / (1.0 - q))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:>12.3} {:>14.12} {:>10} {inverse}",
            v.value_iterated_to() as f64 / 1e3,
            q,
            v.count_since_last_iteration()
        );
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]\n#[Max     = {:>12.3}, Total count    = {:>12}]",
        latency.mean() / 1e3,
        latency.stdev() / 1e3,
        latency.max() as f64 / 1e3,
        latency.len()
    );
    out
}

/// Points of a percentile curve: x is the number of nines, -log10(1 - q),
/// y the latency in µs.
fn curve(latency: &Histogram<u64>) -> Vec<(f64, f64)> {
    latency
        .iter_quantiles(5)
        .map(|v| (v.quantile_iterated_to(), v.value_iterated_to() as f64 / 1e3))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, us)| (-(1.0 - q).log10(), us.max(0.1)))
        .collect()
}

/// The latency percentile curves of all systems on one chart.
pub fn svg(path: &Path, title: &str, summaries: &[Summary]) -> Result<(), String> {
    let curves: Vec<(SystemKind, Vec<(f64, f64)>)> = summaries
        .iter()
        .map(|s| (s.system, curve(&s.latency)))
        .collect();
    let x_max = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(1.0_f64, f64::max);
    let y_max = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max)
        * 1.5;
    let y_min = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.1))
        .fold(y_max, f64::min)
        / 1.5;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, (y_min..y_max).log_scale())
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("percentile (nines: 1 = p90, 2 = p99, 3 = p99.9)")
        .y_desc("latency µs (log)")
        .draw()
        .map_err(|e| fail(&e))?;
    for (i, (system, points)) in curves.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(system.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

/// The line under a ratio row with two or more rounds: its msg/s ratio
/// round by round (interleaved rounds ran side by side) and their median.
fn round_ratios(s: &Summary, base: &Summary) -> Option<String> {
    if s.system == base.system {
        return None;
    }
    let (ratios, median) = s.round_ratios(base)?;
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    Some(format!(
        "  {:<17} msg/s by round {} (median {median:.2}x)",
        "",
        each.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary of `rate` messages in one measured second, each taking
    /// `us` µs.
    fn summary(system: SystemKind, rate: u64, us: u64) -> Summary {
        let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        latency.record_n(us * 1_000, rate).unwrap();
        let mut s = Summary::new(system, latency);
        s.measured = rate;
        s.seconds = 1.0;
        s
    }

    /// Round `i` of a system is divided by round `i` of its base (they ran
    /// side by side); the median of an even count is the mean of the two
    /// middle ratios; one round gives no line (the row says it all).
    #[test]
    fn round_ratios_pair_rounds_and_give_their_median() {
        let mut zlink = summary(SystemKind::ZlinkEpoll, 1, 1);
        let mut raw = summary(SystemKind::RawEpoll, 1, 1);
        zlink.round_msgs_per_s = vec![90.0, 120.0, 80.0, 100.0];
        raw.round_msgs_per_s = vec![100.0, 100.0, 100.0, 100.0];
        let (each, median) = zlink.round_ratios(&raw).unwrap();
        assert_eq!(each, vec![0.9, 1.2, 0.8, 1.0]);
        assert!((median - 0.95).abs() < 1e-9, "{median}");
        let line = round_ratios(&zlink, &raw).unwrap();
        assert!(
            line.ends_with("msg/s by round 0.90 1.20 0.80 1.00 (median 0.95x)"),
            "{line}"
        );
        zlink.round_msgs_per_s.truncate(3);
        let (_, odd) = zlink.round_ratios(&raw).unwrap();
        assert!((odd - 0.9).abs() < 1e-9, "{odd}");
        assert!(round_ratios(&raw, &raw).is_none(), "no line against itself");
        zlink.round_msgs_per_s.truncate(1);
        assert!(zlink.round_ratios(&raw).is_none());
    }

    fn ratios(row: &LocalRow) -> Vec<(&'static str, &'static str, f64)> {
        row.ratios
            .iter()
            .map(|r| {
                (
                    r.metric.name(),
                    r.to.name(),
                    (r.value * 100.0).round() / 100.0,
                )
            })
            .collect()
    }

    /// The ceiling (one-hop forwarders against tokio), then each local
    /// zlink against its io stack's one-hop forwarder, tokio and the
    /// cross-node zlink; what did not run is left out.
    #[test]
    fn the_local_path_is_read_against_its_limit_tokio_and_the_cross_node_path() {
        let summaries = [
            summary(SystemKind::Zlink, 100, 40),
            summary(SystemKind::ZlinkLocal, 150, 20),
            summary(SystemKind::ZlinkEpollLocal, 90, 30),
            summary(SystemKind::RawUringOneHop, 200, 10),
            summary(SystemKind::Tokio, 120, 25),
        ];
        let rows = local_path(&summaries);
        let systems: Vec<_> = rows.iter().map(|r| r.system).collect();
        assert_eq!(
            systems,
            [
                SystemKind::RawUringOneHop,
                SystemKind::ZlinkLocal,
                SystemKind::ZlinkEpollLocal
            ]
        );
        assert_eq!(
            ratios(&rows[0]),
            [("msg/s", "tokio", 1.67), ("p99", "tokio", 0.4)]
        );
        assert_eq!(
            ratios(&rows[1]),
            [
                ("msg/s", "raw-uring-1hop", 0.75),
                ("msg/s", "tokio", 1.25),
                ("p99", "tokio", 0.8),
                ("msg/s", "zlink", 1.5),
                ("p50", "zlink", 0.5),
                ("p99", "zlink", 0.5),
            ]
        );
        // No raw-epoll-1hop and no zlink-epoll ran: tokio alone.
        assert_eq!(
            ratios(&rows[2]),
            [("msg/s", "tokio", 0.75), ("p99", "tokio", 1.2)]
        );
        // Nothing local ran: no section.
        let cross = [
            summary(SystemKind::Zlink, 100, 40),
            summary(SystemKind::Tokio, 120, 25),
        ];
        assert!(local_path(&cross).is_empty());
    }

    /// The table, the ratios to the one-hop forwarders and to tokio, the
    /// local-path section, where the players were and the logins refused
    /// and sent again, in text and JSON.
    #[test]
    fn the_report_shows_the_local_path_and_where_its_players_are() {
        let options = crate::args::parse(Vec::new()).unwrap();
        let run = Run {
            workload: Workload::Relay,
            pin: None,
        };
        let mut local = summary(SystemKind::ZlinkEpollLocal, 150, 20);
        local.actors = Some(64);
        local.actors_by_node = Some(vec![64]);
        let mut cross = summary(SystemKind::ZlinkEpoll, 100, 40);
        cross.actors = Some(64);
        cross.actors_by_node = Some(vec![0, 64]);
        cross.login_refusals = 5;
        cross.refused_sessions = 3;
        let summaries = [
            cross,
            local,
            summary(SystemKind::RawEpollOneHop, 200, 10),
            summary(SystemKind::Tokio, 120, 25),
        ];
        let text = render(&options, &run, &summaries);
        for needle in [
            "ratios to raw-epoll-1hop ",
            "ratios to tokio ",
            "the local path (session and player on one node)",
            "zlink-epoll-local msg/s 0.75x raw-epoll-1hop, msg/s 1.25x tokio, p99 0.80x tokio, msg/s 1.50x zlink-epoll, p50 0.50x zlink-epoll",
            "actors 64 (its own count; node 1: 64)",
            "actors 64 (its own count; node 1: 0, node 2: 64)",
            "sent again: 5 refusals of 3 sessions over all rounds",
        ] {
            assert!(text.contains(needle), "no {needle:?} in:\n{text}");
        }
        let json = json(&options, &run, &summaries);
        assert_eq!(json["systems"][1]["zlink_nodes"], 1);
        assert_eq!(json["systems"][0]["zlink_nodes"], 2);
        assert_eq!(json["systems"][0]["login_refusals"], 5);
        assert_eq!(json["systems"][0]["refused_sessions"], 3);
        assert_eq!(json["systems"][1]["login_refusals"], 0);
        assert!(
            !text.contains("sent again: 0"),
            "a system with no refusal says nothing of them:\n{text}"
        );
        assert_eq!(
            json["systems"][1]["actors_by_node"],
            serde_json::json!([64])
        );
        assert_eq!(json["local_path"][1]["system"], "zlink-epoll-local");
        assert_eq!(json["local_path"][1]["ratios"][0]["to"], "raw-epoll-1hop");
    }
}
