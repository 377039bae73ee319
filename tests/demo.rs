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
