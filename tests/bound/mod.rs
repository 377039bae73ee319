//! A bound on every test that goes through the shared support of the
//! real-process and real-socket tests (issue 23 item 5): a hung test fails
//! with its name and what it waited for, instead of hanging CI.
//!
//! libtest runs each test on a thread named after it. The support's entry
//! points (starting a node, a game, a mesh, a client) and its blocking
//! waits [`arm`] the current test thread: it joins a registry with the
//! instant it was armed. One watchdog thread per process, started by the
//! first arming, sleeps until the oldest live test's bound runs out; then
//! it prints `test <name> exceeded its <n> s bound; waiting for: <what>` to
//! stderr and ends the process with exit code 101, so `cargo test` fails
//! and names the test. A test deregisters when its thread ends (the
//! registration is a thread-local whose destructor is the drop guard), so
//! a test that finishes or panics leaves nothing behind.
//!
//! "What it waited for" is what the support's wait helpers record around
//! each blocking wait ([`waiting`]): a short description, nested waits
//! joined by " > ", cleared when the wait ends.
//!
//! cargo-nextest's per-test timeout would do the same from outside, but no
//! prebuilt binary can be downloaded here and building it would cost CI
//! minutes; this costs a thread-local lookup per wait.
//!
//! Every test crate that includes a support module declares `mod bound;` at
//! its root, so that a crate including several support modules still has
//! one registry and one watchdog (a module included twice by `#[path]`
//! would have two of each).
#![allow(dead_code)]

use std::cell::RefCell;
use std::fmt::{Display, Write as _};
use std::io::Write as _;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The environment variable that sets the bound, in whole seconds; `0`
/// turns it off (a test stopped in a debugger must not be ended).
pub const BOUND_VAR: &str = "ZLINK_TEST_BOUND_SECS";

/// The default bound: far past the slowest test of the suite on the
/// loaded 2-core CI machine (seconds, not minutes), far below the 800 s
/// one hang took before anyone noticed.
pub const DEFAULT_BOUND: Duration = Duration::from_secs(180);

/// The exit code of a process the watchdog ends: libtest's own for a
/// failed run, so that `cargo test` reports the binary as failed.
pub const EXIT_CODE: i32 = 101;

/// One live test: its name, when it was armed, what it waits for now.
struct Live {
    name: String,
    armed: Instant,
    waiting: Mutex<String>,
}

/// The live tests, oldest first; the watchdog waits on [`WAKE`] for a
/// change, or for the oldest one's bound to run out.
static LIVE: Mutex<Vec<Arc<Live>>> = Mutex::new(Vec::new());
static WAKE: Condvar = Condvar::new();
static WATCHDOG: Once = Once::new();

/// The registration of the current thread; dropped when the thread ends.
struct Armed(Arc<Live>);

impl Drop for Armed {
    fn drop(&mut self) {
        lock(&LIVE).retain(|live| !Arc::ptr_eq(live, &self.0));
        WAKE.notify_all();
    }
}

thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
}

/// A lock that a panic elsewhere does not poison for the watchdog: what it
/// guards stays consistent (a list, a description).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bound, from [`BOUND_VAR`] or [`DEFAULT_BOUND`]; `None` when it is
/// off. A value that is not a number fails the test rather than silently
/// running unbounded.
pub fn bound() -> Option<Duration> {
    static BOUND: OnceLock<Option<Duration>> = OnceLock::new();
    *BOUND.get_or_init(|| match std::env::var(BOUND_VAR) {
        Err(_) => Some(DEFAULT_BOUND),
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(0) => None,
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(e) => panic!("{BOUND_VAR}: {text:?} is not a whole number of seconds: {e}"),
        },
    })
}

/// Puts the current test under the bound, from now; a no-op when it
/// already is, when the bound is off, and on a thread that is not a test's
/// (unnamed, or `main`): a helper thread a test spawned, or one a node
/// runs, is covered by its test, and one left running after its test ended
/// must not fail the next.
pub fn arm() {
    let Some(bound) = bound() else { return };
    // `try_with`: a wait recorded from another thread-local's destructor,
    // after this one's, goes unrecorded rather than panicking.
    let _ = ARMED.try_with(|armed| {
        let mut armed = armed.borrow_mut();
        if armed.is_some() {
            return;
        }
        let thread = std::thread::current();
        let name = match thread.name() {
            Some(name) if name != "main" => name,
            _ => return,
        };
        WATCHDOG.call_once(|| {
            std::thread::Builder::new()
                .name("zlink-test-bound".into())
                .spawn(move || watch(bound))
                .expect("the test watchdog starts");
        });
        let live = Arc::new(Live {
            name: name.to_owned(),
            armed: Instant::now(),
            waiting: Mutex::new(String::new()),
        });
        lock(&LIVE).push(Arc::clone(&live));
        WAKE.notify_all();
        *armed = Some(Armed(live));
    });
}

/// Records, for the current test, that it waits for `what` until the
/// returned guard drops; the watchdog prints it if the bound runs out
/// meanwhile. Arms the bound ([`arm`]). Writes into the test's one buffer,
/// so a warm wait allocates nothing.
#[must_use = "the wait is recorded until the guard drops"]
pub fn waiting(what: impl Display) -> Waiting {
    arm();
    let live = ARMED.try_with(|armed| armed.borrow().as_ref().map(|a| Arc::clone(&a.0)));
    let Ok(Some(live)) = live else {
        return Waiting(None);
    };
    let mark = {
        let mut waiting = lock(&live.waiting);
        let mark = waiting.len();
        if mark > 0 {
            waiting.push_str(" > ");
        }
        let _ = write!(waiting, "{what}");
        mark
    };
    Waiting(Some((live, mark)))
}

/// A wait recorded by [`waiting`]; dropping it clears it (and what was
/// recorded inside it).
pub struct Waiting(Option<(Arc<Live>, usize)>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some((live, mark)) = &self.0 {
            lock(&live.waiting).truncate(*mark);
        }
    }
}

/// The watchdog: sleeps until the oldest live test's bound runs out, then
/// reports it and ends the process. Never allocates while it waits, so
/// that a test counting the process's allocations (tests/alloc_relay.rs)
/// does not count it.
fn watch(bound: Duration) {
    let mut live = lock(&LIVE);
    loop {
        let Some(oldest) = live.iter().min_by_key(|l| l.armed) else {
            live = WAKE.wait(live).unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let now = Instant::now();
        let deadline = oldest.armed + bound;
        if now < deadline {
            live = WAKE
                .wait_timeout(live, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            continue;
        }
        // Straight to the process's stderr: `eprintln!` here would go to
        // the output capture libtest gave the test thread that spawned
        // this one, and vanish with the process.
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\ntest {} exceeded its {} s bound; waiting for: {}",
            oldest.name,
            bound.as_secs(),
            describe(&oldest.waiting)
        );
        for other in live.iter().filter(|l| !Arc::ptr_eq(l, oldest)) {
            let _ = writeln!(
                err,
                "  also live: {} ({} s; waiting for: {})",
                other.name,
                now.duration_since(other.armed).as_secs(),
                describe(&other.waiting)
            );
        }
        let _ = err.flush();
        std::process::exit(EXIT_CODE);
    }
}

/// A recorded wait, or what to print when none is.
fn describe(waiting: &Mutex<String>) -> String {
    let waiting = lock(waiting);
    if waiting.is_empty() {
        "no wait recorded (the test's own code, or a call into the node)".to_owned()
    } else {
        waiting.clone()
    }
}

/// Waits until every thread of process `pid` is stopped (SIGSTOP took
/// effect), under [`waiting`] so that the watchdog names it if it never
/// does. kill(2) only queues the stop: a thread of a loaded machine that
/// has not run since can still wake on I/O and run user code before it
/// stops (seen: a node answered a relocation's prepare after its SIGSTOP
/// was sent). A test that stops a process to freeze it waits for this.
pub fn until_stopped(pid: u32, what: &str) {
    let _wait = waiting(format_args!("{what} (pid {pid}) to stop after SIGSTOP"));
    let tasks = format!("/proc/{pid}/task");
    loop {
        let stopped = std::fs::read_dir(&tasks).is_ok_and(|entries| {
            entries.flatten().all(|task| {
                // The state is the field after the command, which ends
                // with the last ')'.
                std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                    let state = stat
                        .rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().next());
                    matches!(state, Some("T" | "t"))
                })
            })
        });
        if stopped {
            return;
        }
        std::thread::yield_now();
    }
}
