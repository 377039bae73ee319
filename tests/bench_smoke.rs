//! Smoke test of the zlink-bench harness (issue 5 "Rules"): every workload
//! on each system that supports it, about a second each, over real sockets
//! on loopback. It checks that the report is complete (every figure of every
//! system, the `.hgrm` files, the SVG) and that no message was lost,
//! duplicated or corrupted. It asserts no speed.
//!
//! Needs the `bench` feature: `cargo test --features bench --test bench_smoke`.

#![cfg(feature = "bench")]

use std::path::PathBuf;
use std::process::Command;

/// The figures every system's latency must report.
const LATENCY_FIELDS: [&str; 8] = [
    "p50", "p90", "p99", "p99.9", "p99.99", "max", "mean", "count",
];

fn out_dir(workload: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "zlink-bench-smoke-{}-{workload}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs one workload on every system that supports it and checks the report.
fn smoke(workload: &str, systems: &[&str]) {
    let dir = out_dir(workload);
    let json = dir.join("report.json");
    std::fs::create_dir_all(&dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_zlink-bench"))
        .args(["--system", "all", "--workload", workload])
        .args(["--sessions", "4", "--in-flight", "2", "--payload", "32"])
        .args(["--warmup", "0.2", "--duration", "1"])
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "zlink-bench failed:\n{stdout}\n{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["workload"], workload);
    let listed: Vec<&str> = report["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    assert_eq!(listed, systems, "the systems that run {workload}");
    for system in report["systems"].as_array().unwrap() {
        let name = system["system"].as_str().unwrap();
        for field in LATENCY_FIELDS {
            let value = system["latency_us"][field].as_f64();
            assert!(
                value.is_some_and(|v| v > 0.0),
                "{name}: latency {field} is {value:?}"
            );
        }
        assert!(
            system["messages"].as_u64().unwrap() > 0,
            "{name} measured nothing"
        );
        assert!(system["messages_per_second"].as_f64().unwrap() > 0.0);
        assert!(
            system["cpu_us_per_message"].as_f64().unwrap() > 0.0,
            "{name}: no CPU time"
        );
        for counter in ["lost", "duplicated", "corrupt", "errors", "failed_sessions"] {
            assert_eq!(system[counter], 0, "{name}: {counter}");
        }
        let hgrm = std::fs::read_to_string(dir.join(format!("{workload}-{name}.hgrm"))).unwrap();
        assert!(
            hgrm.contains("Percentile") && hgrm.contains("#[Max"),
            "{name}: .hgrm incomplete"
        );
        assert!(stdout.contains(name), "the table has no row for {name}");
    }
    for printed in ["lost", "dup", "p99.99", "cpu µs/msg"] {
        assert!(
            stdout.contains(printed),
            "the table does not print {printed}"
        );
    }
    let svg = std::fs::read_to_string(dir.join(format!("{workload}-latency.svg"))).unwrap();
    for system in systems {
        assert!(
            svg.contains(system),
            "the plot has no curve labelled {system}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_relay_runs_on_every_system_with_nothing_lost() {
    smoke(
        "relay",
        &["zlink", "raw-uring", "raw-epoll", "tokio", "ractor"],
    );
}

#[test]
fn bench_push_runs_on_the_systems_with_a_protocol_with_nothing_lost() {
    smoke("push", &["zlink", "tokio", "ractor"]);
}

#[test]
fn bench_raw_forwarders_refuse_the_push_workload() {
    let output = Command::new(env!("CARGO_BIN_EXE_zlink-bench"))
        .args(["--system", "raw-uring,raw-epoll", "--workload", "push"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no chosen system runs the push workload")
    );
}
