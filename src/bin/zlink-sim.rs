//! zlink-sim: the seeded simulator (docs/TESTING.md "Simulation"). Runs
//! seeds of the schedule in `zlink::sim::schedule` — 3–5 real cores, hundreds
//! of clients, faults — and checks every invariant after every step.
//!
//! `zlink-sim --seeds 2000 --steps 2000` runs seeds 0..2000 on every core;
//! `zlink-sim --seed S` replays one seed exactly; `--trace` prints every
//! action and journal entry of it. On a violation it prints the seed, the
//! step, the invariant, the rule and the trail of events that led there, and
//! exits with code 1.

use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::Parser;
use zlink::sim::invariants::{Tally, Violation};
use zlink::sim::schedule::{run_seed, Failure, Observe, Outcome, SimConfig};

/// DESIGN: the library sets no global allocator; the binaries use mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The command line.
#[derive(Parser)]
#[command(
    name = "zlink-sim",
    about = "Runs seeded simulations of a zlink mesh and checks the spec's invariants."
)]
struct Args {
    /// How many seeds to run, starting at --first.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed of a --seeds run.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Replays this one seed (with --trace, prints every event).
    #[arg(long)]
    seed: Option<u64>,
    /// Steps per seed.
    #[arg(long, default_value_t = 2_000)]
    steps: u64,
    /// Nodes per mesh (default: the seed picks 3–5).
    #[arg(long)]
    nodes: Option<u64>,
    /// Prints every action and journal entry (with --seed).
    #[arg(long)]
    trace: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = SimConfig {
        steps: args.steps,
        nodes: args.nodes,
        ..SimConfig::default()
    };
    if let Some(seed) = args.seed {
        let observe = Observe {
            hash: true,
            print: args.trace,
        };
        let outcome = run_seed(seed, &config, observe);
        return report(&[outcome], 0.0);
    }
    let threads = args
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .max(1);
    let started = Instant::now();
    let next = AtomicU64::new(args.first);
    let end = args.first.saturating_add(args.seeds);
    let stop = AtomicBool::new(false);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let outcome = run_guarded(seed, &config);
                    if outcome.violation.is_some() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    let mut all = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                    all.push(outcome);
                    if all.len() % 100 == 0 {
                        eprintln!("zlink-sim: {} seeds done", all.len());
                    }
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|o| o.seed);
    report(&outcomes, started.elapsed().as_secs_f64())
}

/// Runs one seed; a panic in the core (a debug assertion in the `sim`
/// profile) is a violation of its own, reported with the seed.
fn run_guarded(seed: u64, config: &SimConfig) -> Outcome {
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
        run_seed(seed, config, Observe::default())
    }));
    run.unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".to_string());
        Outcome {
            seed,
            steps: config.steps,
            violation: Some(Failure {
                step: 0,
                violation: Violation {
                    invariant: "no_panic",
                    rule: "DESIGN: no input panics the core",
                    detail: format!("{detail} (replay with --trace for the events before it)"),
                },
                trail: Vec::new(),
            }),
            trace_hash: None,
            messages: 0,
            relocations: 0,
            tally: Tally::default(),
        }
    })
}

/// Prints the totals, or the first failing seed with its trail.
fn report(outcomes: &[Outcome], seconds: f64) -> ExitCode {
    let steps: u64 = outcomes.iter().map(|o| o.steps).sum();
    let messages: u64 = outcomes.iter().map(|o| o.messages).sum();
    let relocations: u64 = outcomes.iter().map(|o| o.relocations).sum();
    if let Some(outcome) = outcomes.iter().find(|o| o.violation.is_some()) {
        if let Some(failure) = &outcome.violation {
            println!(
                "zlink-sim: VIOLATION at seed {} step {}",
                outcome.seed, failure.step
            );
            println!("  {}", failure.violation);
            println!("  the last events, oldest first:");
            for line in &failure.trail {
                println!("  {line}");
            }
            println!(
                "replay: zlink-sim --seed {} --steps {} --trace",
                outcome.seed, outcome.steps
            );
        }
        return ExitCode::FAILURE;
    }
    let per_step = if steps > 0 && seconds > 0.0 {
        format!(", {:.1} µs per step", seconds * 1e6 / steps as f64)
    } else {
        String::new()
    };
    let hash = match outcomes {
        [one] => one
            .trace_hash
            .map(|h| format!(", trace hash {h:016x}"))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let mut tally = Tally::default();
    for outcome in outcomes {
        tally += outcome.tally;
    }
    println!(
        "zlink-sim: {} seeds, {steps} steps, {messages} messages, {relocations} relocations, \
         0 violations in {seconds:.1} s{per_step}{hash}",
        outcomes.len()
    );
    println!("  exercised: {tally:?}");
    ExitCode::SUCCESS
}
