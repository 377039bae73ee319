//! The main job end to end: `zlink-demo --quick` runs a 3-node loopback mesh
//! with simulated clients and must pass its own checks — exit 0, with no
//! duplicated reply and no silently dropped request in its report.

use std::process::Command;

/// The count printed after `label` on its report line.
fn count(report: &str, label: &str) -> Option<u64> {
    let line = report.lines().find(|l| l.trim_start().starts_with(label))?;
    line.trim_start()[label.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn demo_quick_run_passes_with_no_duplicated_or_dropped_request() {
    let out = Command::new(env!("CARGO_BIN_EXE_zlink-demo"))
        .arg("--quick")
        .output()
        .expect("the demo binary runs");
    let report = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "zlink-demo --quick failed ({}):\n{report}\n{errors}",
        out.status
    );
    assert_eq!(count(&report, "duplicated replies"), Some(0), "{report}");
    assert_eq!(count(&report, "dropped requests"), Some(0), "{report}");
    assert!(
        count(&report, "requests sent").is_some_and(|n| n > 0),
        "{report}"
    );
    assert!(report.contains("PASS:"), "{report}");
}

/// Continuity under churn (issue 4): 200 clients each send numbered MOVEs
/// to their own player — every reply carries the position, which is exact
/// only if every earlier accepted MOVE was applied once, in order — and
/// count the ticks their player pushes, while the players are relocated at
/// least 500 times between the 3 nodes (some back and forth, some whole
/// SpotWide rooms with their players), with a quarter
/// of the clients replaced by a second login and an eighth reconnecting to
/// another node midway. The demo's own checks
/// fail the run on a duplicate, a loss, a position mismatch, a missing tick
/// or a request that ended at its deadline; the seed is in the report.
#[test]
fn churn_200_clients_500_relocations_lose_nothing_and_duplicate_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_zlink-demo"))
        .args(["--clients", "200", "--rounds", "40", "--relocations", "500"])
        .output()
        .expect("the demo binary runs");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    assert!(
        out.status.success(),
        "the churn run failed ({}):\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("PASS:"), "{report}");
    for label in [
        "duplicated replies",
        "dropped requests",
        "position mismatches",
    ] {
        assert_eq!(count(&report, label), Some(0), "{label}: {report}");
    }
    let relocations = report
        .lines()
        .find(|l| l.trim_start().starts_with("relocations"))
        .expect("a relocations line");
    let committed = count(&report, "relocations").expect("relocations committed");
    assert!(committed >= 500, "{relocations}");
    // A move may abort when its seal (42) finds the binding just replaced
    // (StaleBinding), its session closing after a replacement
    // (SessionClosing) or another seal on it (RelocationSealed): the player
    // stays put, typed (§8.1). Nothing else may refuse a move here.
    if let Some((_, refused)) = relocations.split_once(" refused (") {
        for entry in refused.split(')').next().unwrap_or("").split(", ") {
            let reason = entry.split(' ').next().unwrap_or(entry);
            assert!(
                [
                    "Unavailable/StaleBinding",
                    "Unavailable/SessionClosing",
                    "Unavailable/RelocationSealed"
                ]
                .contains(&reason),
                "{relocations}"
            );
        }
    }
    assert!(relocations.contains("whole rooms"), "{relocations}");
    // The move's in-flight paths ran: messages held by a seal, at least.
    let held = count(&report, "in flight at a move").expect("the in-flight line");
    assert!(held > 0, "no message was held by a seal: {report}");
}

#[test]
fn demo_refuses_a_bad_flag_with_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_zlink-demo"))
        .args(["--clients", "many"])
        .output()
        .expect("the demo binary runs");
    assert_eq!(out.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        errors.contains("--clients needs a whole number"),
        "{errors}"
    );
}
