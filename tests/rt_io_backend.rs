//! The socket loop's backend chosen at startup (issue 8 item 2), tested
//! where io_uring is really denied: a child process installs a seccomp
//! filter that makes `io_uring_setup` fail with EPERM (what Docker's
//! default profile and `kernel.io_uring_disabled` return) before it starts
//! a node. The child is this test binary again, running only the test that
//! spawned it, or the demo binary (the README's main job).

mod bound;
mod runtime_support;

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use runtime_support::*;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
use zlink::api::{IoBackend, NodeBuilder, NodeSettings, StartError};
use zlink::error::ErrorKind;

/// Set in a child: which scenario the re-executed test runs.
const CHILD_VAR: &str = "ZLINK_TEST_DENIED_CHILD";

/// The warning `Auto` logs when it falls back (its fixed start).
const FALLBACK_WARNING: &str = "running the socket loop on epoll instead of io_uring";

/// A seccomp program that denies `io_uring_setup` with EPERM and allows
/// everything else.
fn deny_io_uring() -> BpfProgram {
    let arch = std::env::consts::ARCH
        .try_into()
        .expect("seccomp knows this architecture");
    let rules = [(libc::SYS_io_uring_setup, Vec::new())]
        .into_iter()
        .collect();
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .expect("the filter compiles")
}

/// Runs `command` with io_uring denied from its first instruction on.
fn run_denied(mut command: Command) -> Output {
    let program = deny_io_uring();
    // SAFETY: between fork and exec the hook makes only the two system calls
    // of `apply_filter` (prctl, seccomp) on memory compiled before the fork;
    // it allocates only on its error path, whose process then exits.
    unsafe {
        command.pre_exec(move || seccompiler::apply_filter(&program).map_err(io::Error::other));
    }
    command.output().expect("the child runs")
}

/// Re-executes this test binary, running only `test` as a child in
/// `scenario`, with io_uring denied.
fn run_child(test: &str, scenario: &str, backend: &str) -> Output {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_VAR, scenario)
        .env(IO_BACKEND_VAR, backend);
    run_denied(command)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn auto_runs_on_epoll_with_one_warning_where_io_uring_is_denied() {
    if std::env::var(CHILD_VAR).as_deref() == Ok("auto") {
        // The child: its log goes to stderr, for the parent to read.
        tracing_subscriber::fmt()
            .with_writer(io::stderr)
            .with_ansi(false)
            .init();
        let game = start_game(GameOptions {
            shards: 2,
            ..GameOptions::default()
        });
        assert_eq!(game.node.io_backend(), IoBackend::Epoll);
        game.node.create_actor("player", &id("player-1")).unwrap();
        let mut client = login(&game, "player-1");
        let echoed = client
            .request(RELAY, payload("player-1", "on epoll"), WAIT)
            .unwrap();
        assert_eq!(echoed, payload("player-1", "on epoll"));
        println!("child: relayed on epoll");
        return;
    }
    let out = run_child(
        "auto_runs_on_epoll_with_one_warning_where_io_uring_is_denied",
        "auto",
        "auto",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("child: relayed on epoll"), "{stdout}");
    // One warning for the node, not one per shard, saying why and how.
    assert_eq!(stderr.matches(FALLBACK_WARNING).count(), 1, "{stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.contains(FALLBACK_WARNING))
        .unwrap_or_default();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("not permitted (EPERM"), "{warning}");
    assert!(warning.contains("seccomp"), "{warning}");
    assert!(
        warning.contains("sysctl -w kernel.io_uring_disabled=0"),
        "{warning}"
    );
}

#[test]
fn io_uring_demanded_where_denied_fails_startup_saying_why_and_how() {
    if std::env::var(CHILD_VAR).as_deref() == Ok("io_uring") {
        let settings = NodeSettings {
            io_backend: IoBackend::IoUring,
            shards: 1,
            pin_cores: false,
            ..NodeSettings::default()
        };
        let started = NodeBuilder::new(1)
            .listen("127.0.0.1:0".parse().unwrap())
            .settings(settings)
            .start();
        let Err(error @ StartError::IoUring(_)) = started else {
            panic!("started where io_uring is denied: {started:?}");
        };
        assert_eq!(error.error().kind(), ErrorKind::Configuration);
        println!("child: {error}");
        return;
    }
    let out = run_child(
        "io_uring_demanded_where_denied_fails_startup_saying_why_and_how",
        "io_uring",
        "io_uring",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    // The harness prints the test's name on the line before the child's own.
    let message = stdout
        .lines()
        .find_map(|l| l.split_once("child: ").map(|(_, m)| m))
        .unwrap_or_default();
    assert!(message.contains("configuration error"), "{stdout}");
    assert!(
        message.contains("io_uring_setup was not permitted"),
        "{message}"
    );
    assert!(
        message.contains("seccomp profile that allows io_uring_setup"),
        "{message}"
    );
    assert!(message.contains("IoBackend::Epoll"), "{message}");
    assert!(!stderr.contains(FALLBACK_WARNING), "{stderr}");
}

#[test]
fn the_readme_demo_passes_on_epoll_where_io_uring_is_denied() {
    // The README's first command as written (the full run, not --quick).
    let out = run_denied(Command::new(env!("CARGO_BIN_EXE_zlink-demo")));
    let report = text(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{report}\n{}",
        out.status,
        text(&out.stderr)
    );
    let backend = report
        .lines()
        .find(|l| l.trim_start().starts_with("io backend"))
        .unwrap_or_default();
    assert!(backend.ends_with("Epoll"), "{report}");
    assert!(report.contains("PASS:"), "{report}");
}

#[test]
fn the_node_reports_the_backend_it_runs_on() {
    let game = start_game(GameOptions::default());
    let expected = io_backend().resolve().unwrap();
    assert_ne!(expected, IoBackend::Auto);
    assert_eq!(game.node.io_backend(), expected);
    // It runs there: a login and a relay go through it.
    game.node.create_actor("player", &id("player-2")).unwrap();
    let mut client = login(&game, "player-2");
    let echoed = client
        .request(RELAY, payload("player-2", "hello"), WAIT)
        .unwrap();
    assert_eq!(echoed, payload("player-2", "hello"));
}
