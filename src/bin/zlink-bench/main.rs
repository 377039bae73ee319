//! zlink-bench: load-tests zlink and the baselines a studio would compare it
//! with, in one run on one machine, with one shared load client (issue 5;
//! docs/PERFORMANCE.md). Each system starts on loopback in this process, is
//! driven closed-loop for a warm-up and a bounded measured window, and is
//! stopped before the next starts; `--compare` interleaves the systems over
//! at least three rounds. It exits 1 when any message was lost, duplicated
//! or corrupted.
//!
//! `cargo run --release --features bench --bin zlink-bench -- --help`
//! lists the flags.

mod args;
mod client;
mod report;
mod systems;

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::client::LoadSpec;
use crate::report::Summary;

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
    match run(&options) {
        Ok(clean) => {
            if !clean {
                eprintln!("zlink-bench: FAILED: messages were lost, duplicated or corrupted (see the table)");
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
    let spec = LoadSpec {
        workload: options.workload,
        sessions: options.sessions,
        in_flight: options.in_flight,
        payload_len: options.payload_len,
        warmup: options.warmup,
        duration: options.duration,
        nodes: options.nodes,
        shards: options.shards,
    };
    let mut summaries = options
        .systems
        .iter()
        .map(|&system| {
            let latency = Histogram::<u64>::new_with_bounds(1, client::LATENCY_MAX_NS, 3)
                .map_err(|e| format!("histogram: {e}"))?;
            Ok(Summary::new(system, latency))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let started = Instant::now();
    for round in 1..=options.rounds {
        for summary in &mut summaries {
            let name = summary.system.name();
            eprintln!(
                "zlink-bench: round {round}/{}, {name}, {} ({:.0} s elapsed)",
                options.rounds,
                options.workload.name(),
                started.elapsed().as_secs_f64()
            );
            if let Some(pin) = options.pin {
                // Threads inherit their creator's affinity: every thread
                // the system starts lands on the system core.
                pin_current(pin.system_core)?;
            }
            let system = systems::start(summary.system, &spec)?;
            let entry = system.entry();
            let client_core = options.pin.map(|p| p.client_core);
            let load_spec = spec.clone();
            let load = std::thread::Builder::new()
                .name("load-client".to_owned())
                .spawn(move || {
                    client_core.map_or(Ok(()), pin_current)?;
                    client::run(entry, &load_spec)
                })
                .map_err(|e| format!("spawning the load client: {e}"))?;
            let tally = load
                .join()
                .map_err(|_| format!("{name}: the load client panicked"))?;
            system.stop();
            let tally = tally.map_err(|why| format!("{name}: {why}"))?;
            eprintln!(
                "zlink-bench:   {} messages, p50 {:.1} µs, lost {}, duplicated {}",
                tally.measured,
                tally.latency.value_at_quantile(0.5) as f64 / 1e3,
                tally.lost,
                tally.duplicated
            );
            summary.add(tally, spec.duration.as_secs_f64())?;
        }
    }
    print!("{}", report::render(options, &summaries));
    if let Some(path) = &options.json {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let text = serde_json::to_string_pretty(&report::json(options, &summaries))
            .map_err(|e| format!("json: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(dir) = &options.out_dir {
        write_files(dir, options, &summaries)?;
    }
    Ok(summaries.iter().all(Summary::clean))
}

/// Pins the calling thread to `core`.
fn pin_current(core: usize) -> Result<(), String> {
    if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        Ok(())
    } else {
        Err(format!("could not pin a thread to core {core}"))
    }
}

/// One `.hgrm` per system and the SVG of all curves.
fn write_files(dir: &Path, options: &args::Options, summaries: &[Summary]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let workload = options.workload.name();
    for s in summaries {
        let path = dir.join(format!("{workload}-{}.hgrm", s.system.name()));
        std::fs::write(&path, report::hgrm(&s.latency))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let title = format!(
        "{workload}: latency by percentile, {} sessions x {} in flight",
        options.sessions, options.in_flight
    );
    report::svg(
        &dir.join(format!("{workload}-latency.svg")),
        &title,
        summaries,
    )
}
