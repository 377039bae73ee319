//! `zlink-node` processes against a Location Store that hangs or still
//! holds a lease: the lobby game driven by blocking clients over loopback,
//! each node its own process on one real redis-server.
//!
//! - A store hang shorter than the lease (redis-server stopped with SIGSTOP
//!   for 3 s, the lease 10 s) leaves established relays flowing: §5, relays
//!   never read the Location Store, and an owner whose renewals fail keeps
//!   serving until its lease's `expires_at`, so nothing may stall a relay
//!   for the length of the hang, nor fence a node. Logins meanwhile (a
//!   login storm on every node) may end in a typed error or succeed late;
//!   they are counted, not judged.
//! - The owner lease across a restart of the same RID (§5, §10): a node
//!   stopped by SIGTERM gives its lease back, so a start straight after
//!   comes up at once, well inside the lease term; a node killed with
//!   SIGKILL leaves its lease live for up to one term, and a start that
//!   meets it says it waits, waits it out, then serves — it does not exit
//!   with the configuration error code (2). Nor does a start that meets a
//!   store that does not answer (redis-server stopped with SIGSTOP): it
//!   says it tries again and starts once the store answers.
//! - A live move across a store freeze (§8.1: only the target's CAS decides
//!   authority; the source reopens only after a confirmed durable abort):
//!   redis-server stopped while node 1 moves a player with state to node
//!   2, for 1.5 s (past the 500 ms call timeout: the CAS is applied at
//!   SIGCONT, its answer lost, and the target asks again) or 300 ms (the
//!   CAS answered late); or with the target frozen too, so the move aborts
//!   at its prepare deadline and its durable abort waits for the store.
//!   Nothing serves the player while the store cannot decide; afterwards it
//!   is served with its state (x continues) from the session or a new
//!   login, logins on every node reach the same player, and one node hosts
//!   it.
//!
//! - A target killed after relay-ready (L6, issue 19 item 3): the target's
//!   store path is cut (a fault proxy refuses its Redis connections), so
//!   its CAS never reaches Redis; it is killed (SIGKILL) once it asked,
//!   and the source gives the player up at its finish deadline. A login on
//!   a third node then asks the row's owner (71), which records the loss
//!   and creates a new incarnation: the player is served again, afresh.
//!
//! Every wait is bounded and waits on an event (a printed line, a reply);
//! the only sleeps are the hang or freeze itself (the stimulus) and the
//! pause between login attempts of the older tests, which proves nothing
//! (the move tests ask again at once, each attempt waiting on its
//! terminal). A missing redis-server is a clear failure (redis_support).

mod bound;
// The fault proxy of the in-process tests; this file uses part of it.
#[allow(dead_code)]
#[path = "runtime_support/fault.rs"]
mod fault;
mod node_support;
mod redis_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use node_support::*;
use redis_support::{Mode, RedisServer};
use zlink::client::{Client, ClientError, ClientEvent};
use zlink::ids::Correlation;
use zlink::wire::client::CloseReason;

/// The lease of the tests that must outlive a store hang, or show that a
/// restart did not wait one out: far longer than either.
const LONG_LEASE_MS: u64 = 10_000;

/// What a node's log says when it fences its Actors (src/runtime/shard.rs).
const FENCED: &str = "fencing this node's actors";

/// `n` nodes on `redis` under `cluster`, with a lease of `lease_term_ms`,
/// each linked to every other.
struct Mesh {
    dir: PathBuf,
    nodes: Vec<NodeProcess>,
}

impl Mesh {
    fn start(redis: &RedisServer, cluster: &str, n: u64, lease_term_ms: u64) -> Mesh {
        let dir = temp_dir(cluster);
        let nodes = (1..=n)
            .map(|rid| {
                let path = write_config(
                    &dir,
                    &format!("node-{rid}.toml"),
                    &config_with_lease(rid, &redis.url(), cluster, &Peers::Discover, lease_term_ms),
                );
                NodeProcess::start(rid, &path)
            })
            .collect();
        let mut mesh = Mesh { dir, nodes };
        for node in &mut mesh.nodes {
            let rid = node.rid;
            for peer in (1..=n).filter(|&peer| peer != rid) {
                node.wait_linked(peer);
            }
        }
        mesh
    }

    fn node(&mut self, rid: u64) -> &mut NodeProcess {
        &mut self.nodes[usize::try_from(rid - 1).unwrap()]
    }

    fn config_path(&self, rid: u64) -> PathBuf {
        self.dir.join(format!("node-{rid}.toml"))
    }
}

/// A session on `session_node` bound to `player`, hosted on `owner`: a
/// login on `owner` creates the player there, and a login from
/// `session_node` (when it is another node) binds it remotely, replacing the
/// first session.
fn session(mesh: &mut Mesh, player: &str, owner: u64, session_node: u64) -> Client {
    let mut first = connect(mesh.node(owner).stream);
    login(&mut first, player).expect("the first login creates the player on its node");
    if owner == session_node {
        return first;
    }
    let mut client = connect(mesh.node(session_node).stream);
    login(&mut client, player).expect("the login elsewhere binds the same player");
    client
}

/// Logs a new player in on `address`, again after each typed refusal,
/// until one succeeds or `deadline` passes; every refusal seen. Each
/// attempt waits on its reply; the short pause between attempts only keeps
/// the loop from hammering the node.
fn login_by(address: SocketAddr, player: &str, deadline: Instant) -> Result<(), Vec<String>> {
    let mut refusals = Vec::new();
    while Instant::now() < deadline {
        let mut client = connect(address);
        match login(&mut client, player) {
            Ok(()) => return Ok(()),
            Err(ClientError::Remote(error)) => refusals.push(error.to_string()),
            Err(other) => {
                refusals.push(format!("no terminal: {other}"));
                return Err(refusals);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(refusals)
}

/// What one MOVE loop saw.
#[derive(Debug)]
struct Run {
    player: String,
    session_node: u64,
    owner: u64,
    /// When each reply arrived.
    replies: Vec<Instant>,
    /// Every request that ended without a reply, and when.
    errors: Vec<(Instant, String)>,
    /// Replies whose x was not the previous one plus one, plus at most the
    /// requests that ended with an error since (those may or may not have
    /// run, §12): a MOVE run twice, or lost after its reply.
    jumps: Vec<String>,
    /// Set when the loop ran out of time before the run's end.
    stuck: bool,
}

impl Run {
    /// The longest gap between consecutive replies and when it began.
    fn longest_gap(&self) -> (Duration, Option<Instant>) {
        self.replies
            .windows(2)
            .map(|pair| (pair[1] - pair[0], Some(pair[0])))
            .max_by_key(|(gap, _)| *gap)
            .unwrap_or((Duration::ZERO, None))
    }
}

/// What one login storm thread saw.
#[derive(Debug, Default)]
struct Storm {
    node: u64,
    ok: u64,
    /// Successful logins that took longer than the hang's first second.
    late: u64,
    slowest_ok: Duration,
    slowest_refusal: Duration,
    /// Typed refusals, by message.
    refused: BTreeMap<String, u64>,
    /// Logins that got no terminal (the client's own deadline, a close).
    no_terminal: BTreeMap<String, u64>,
}

/// Signed seconds from `origin` to `at`, for the figures printed.
fn since(origin: Instant, at: Instant) -> f64 {
    if at >= origin {
        (at - origin).as_secs_f64()
    } else {
        -(origin - at).as_secs_f64()
    }
}

#[test]
fn o2_store_hang_within_the_lease_keeps_established_relays_flowing() {
    let _alone = one_at_a_time();
    const NODES: u64 = 3;
    const SESSIONS: u64 = 6;
    const WARMUP: usize = 5;
    const HANG: Duration = Duration::from_secs(3);
    const AFTER: Duration = Duration::from_secs(1);
    const MAX_GAP: Duration = Duration::from_millis(500);
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, "hang", NODES, LONG_LEASE_MS);
    // Given six sessions, two on each node: one bound to a player hosted on
    // its own node, one to a player hosted on the next node (its MOVEs
    // relayed over the link),
    let sessions: Vec<(String, u64, u64, Client)> = (0..SESSIONS)
        .map(|i| {
            let session_node = i % NODES + 1;
            let owner = if i < NODES {
                session_node
            } else {
                session_node % NODES + 1
            };
            let player = format!("h{i}");
            let client = session(&mut mesh, &player, owner, session_node);
            (player, session_node, owner, client)
        })
        .collect();
    let addresses: Vec<(u64, SocketAddr)> = mesh.nodes.iter().map(|n| (n.rid, n.stream)).collect();
    // when each MOVEs in a loop, and once each has had a few replies the
    // store hangs (SIGSTOP) for 3 s, then answers again (SIGCONT) while the
    // loops go on for another second, and logins of new players storm every
    // node during the hang,
    let resumed_at = Arc::new(OnceLock::<Instant>::new());
    let run_deadline = Instant::now() + Duration::from_secs(60);
    let (warm_tx, warm) = channel();
    let loops: Vec<_> = sessions
        .into_iter()
        .map(|(player, session_node, owner, mut client)| {
            let warm_tx = warm_tx.clone();
            let resumed_at = Arc::clone(&resumed_at);
            std::thread::spawn(move || {
                let mut run = Run {
                    player,
                    session_node,
                    owner,
                    replies: Vec::new(),
                    errors: Vec::new(),
                    jumps: Vec::new(),
                    stuck: false,
                };
                let mut last_x = 0;
                let mut errors_since_ok = 0;
                loop {
                    let done = match (resumed_at.get(), run.replies.last()) {
                        (Some(&resumed), Some(&last)) => last >= resumed + AFTER,
                        _ => false,
                    };
                    if done {
                        break;
                    }
                    if Instant::now() > run_deadline || run.errors.len() > 100 {
                        run.stuck = true;
                        break;
                    }
                    match step(&mut client, &run.player) {
                        Ok(x) => {
                            run.replies.push(Instant::now());
                            if x <= last_x || x - last_x > 1 + errors_since_ok {
                                run.jumps.push(format!(
                                    "{last_x} -> {x} with {errors_since_ok} errors between"
                                ));
                            }
                            last_x = x;
                            errors_since_ok = 0;
                            if run.replies.len() == WARMUP {
                                let _ = warm_tx.send(());
                            }
                        }
                        Err(ClientError::Remote(error)) => {
                            run.errors.push((Instant::now(), error.to_string()));
                            errors_since_ok += 1;
                        }
                        Err(other) => {
                            run.errors
                                .push((Instant::now(), format!("no terminal: {other}")));
                            run.stuck = true;
                            break;
                        }
                    }
                }
                run
            })
        })
        .collect();
    drop(warm_tx);
    for _ in 0..SESSIONS {
        warm.recv_timeout(WAIT)
            .expect("every session got its first replies before the hang");
    }
    let storming = Arc::new(AtomicBool::new(true));
    redis.pause();
    let stopped_at = Instant::now();
    let storms: Vec<_> = addresses
        .iter()
        .map(|&(node, address)| {
            let storming = Arc::clone(&storming);
            std::thread::spawn(move || {
                let mut storm = Storm {
                    node,
                    ..Storm::default()
                };
                // Kept open to the end of the test, as real players' are:
                // their disconnects are no part of the run.
                let mut clients = Vec::new();
                let mut n = 0;
                while storming.load(Ordering::Relaxed) {
                    n += 1;
                    let asked = Instant::now();
                    let mut client = connect(address);
                    match login(&mut client, &format!("storm-{node}-{n}")) {
                        Ok(()) => {
                            let took = asked.elapsed();
                            storm.ok += 1;
                            storm.late += u64::from(took > Duration::from_secs(1));
                            storm.slowest_ok = storm.slowest_ok.max(took);
                            clients.push(client);
                        }
                        Err(ClientError::Remote(error)) => {
                            storm.slowest_refusal = storm.slowest_refusal.max(asked.elapsed());
                            *storm.refused.entry(error.to_string()).or_default() += 1;
                        }
                        Err(other) => {
                            *storm.no_terminal.entry(other.to_string()).or_default() += 1;
                        }
                    }
                    // Not a proof of anything: only keeps a storm whose
                    // logins fail at once from spinning.
                    std::thread::sleep(Duration::from_millis(20));
                }
                (storm, clients)
            })
        })
        .collect();
    // The hang itself: the stimulus, not a wait for an outcome.
    std::thread::sleep(HANG);
    redis.resume();
    let _ = resumed_at.set(Instant::now());
    storming.store(false, Ordering::Relaxed);
    // (Each loop ends by itself, bounded by its deadline and each request
    // by REQUEST_WAIT; so does each storm, after its last login.)
    let runs: Vec<Run> = loops
        .into_iter()
        .map(|thread| thread.join().expect("a MOVE loop"))
        .collect();
    let (storms, _storm_sessions): (Vec<Storm>, Vec<Vec<Client>>) = storms
        .into_iter()
        .map(|thread| thread.join().expect("a login storm"))
        .unzip();
    // then every MOVE got its reply, in order, and no session waited more
    // than 500 ms between two replies at any time of the run,
    let resumed = *resumed_at.get().expect("set above");
    eprintln!(
        "store hang: redis-server stopped for {:.3} s (SIGSTOP at +0.000 s), lease {LONG_LEASE_MS} ms",
        since(stopped_at, resumed)
    );
    let mut failures = Vec::new();
    for run in &runs {
        let (gap, from) = run.longest_gap();
        let during = run
            .replies
            .iter()
            .filter(|&&at| at >= stopped_at && at < resumed)
            .count();
        eprintln!(
            "  {} (session on node {}, player on node {}): {} replies ({during} during the hang), \
             longest gap {} ms from {} s, {} errors",
            run.player,
            run.session_node,
            run.owner,
            run.replies.len(),
            gap.as_millis(),
            from.map_or("-".to_owned(), |at| format!(
                "{:+.3}",
                since(stopped_at, at)
            )),
            run.errors.len(),
        );
        if gap >= MAX_GAP {
            failures.push(format!(
                "{}: longest gap between replies {} ms (from {} s after SIGSTOP), \
                 not under {} ms",
                run.player,
                gap.as_millis(),
                from.map_or("-".to_owned(), |at| format!(
                    "{:+.3}",
                    since(stopped_at, at)
                )),
                MAX_GAP.as_millis()
            ));
        }
        if !run.errors.is_empty() {
            let errors: Vec<String> = run
                .errors
                .iter()
                .map(|(at, error)| format!("{:+.3} s: {error}", since(stopped_at, *at)))
                .collect();
            failures.push(format!(
                "{}: {} requests ended without a reply: {errors:?}",
                run.player,
                run.errors.len(),
            ));
        }
        if !run.jumps.is_empty() {
            failures.push(format!("{}: x jumped: {:?}", run.player, run.jumps));
        }
        if run.stuck {
            failures.push(format!(
                "{}: the loop did not reach {AFTER:?} after SIGCONT",
                run.player
            ));
        }
    }
    for storm in &storms {
        eprintln!(
            "  login storm on node {}: {} ok ({} took over 1 s, slowest {} ms), refused {:?} \
             (slowest {} ms), no terminal {:?}",
            storm.node,
            storm.ok,
            storm.late,
            storm.slowest_ok.as_millis(),
            storm.refused,
            storm.slowest_refusal.as_millis(),
            storm.no_terminal
        );
    }
    // and no node fenced itself or buried a peer: a hang inside the lease
    // ends no lifecycle.
    for node in &mut mesh.nodes {
        for needle in [FENCED, "peer_lease_lapsed"] {
            for (_, line) in node.lines_with(needle) {
                failures.push(format!("node {}: {line}", node.rid));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "a 3 s store hang inside a 10 s lease disturbed established relays (§5: relays never \
         read the Location Store):\n  {}",
        failures.join("\n  ")
    );
    for rid in 1..=NODES {
        let (report, _) = mesh.node(rid).terminate();
        eprintln!("{report}");
    }
}

#[test]
fn o1_restart_straight_after_sigterm_comes_up_at_once() {
    /// Far inside the 10 s lease a start would have to wait out.
    const BOUND: Duration = Duration::from_secs(2);
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, "restart-term", 1, LONG_LEASE_MS);
    // Given a node with a player logged in and moving,
    let mut client = session(&mut mesh, "t", 1, 1);
    assert_eq!(step(&mut client, "t").unwrap(), 1);
    let old_generation = mesh.node(1).node_generation;
    // and a client connected with no binding (its session ends the moment
    // the drain closes it),
    let mut bare = Client::connect(mesh.node(1).stream).unwrap();
    // when it stops on SIGTERM and the same RID starts again at once on
    // the same config,
    let (report, status) = mesh.node(1).terminate();
    eprintln!("{report} ({status})");
    assert!(status.success(), "the SIGTERM'd node exited with {status}");
    // (§10) its client was told why before the process ended: the Close
    // frame was out before the node stopped, not cut off with it.
    for client in [&mut client, &mut bare] {
        assert_eq!(
            client.wait_closed(WAIT).unwrap(),
            Some(zlink::wire::client::CloseReason::Shutdown)
        );
    }
    let started = Instant::now();
    let node = NodeProcess::try_start(1, &mesh.config_path(1)).unwrap_or_else(|failure| {
        panic!(
            "a start straight after a SIGTERM must come up at once (the stopped lifecycle \
             gave its owner lease back, §5, §10), but after {} ms it {failure:?}",
            started.elapsed().as_millis()
        )
    });
    let ready_after = started.elapsed();
    // then it runs as a new lifecycle and accepts a login within 2 s of
    // its start: it did not wait out a lease of 10 s.
    assert!(node.node_generation > old_generation);
    let address = node.stream;
    *mesh.node(1) = node;
    serves_a_login_within(
        &mut mesh,
        address,
        "t2",
        started,
        BOUND,
        "after SIGTERM",
        ready_after,
    );
}

#[test]
fn a_start_that_meets_a_live_predecessor_lease_waits_it_out() {
    /// The lease term plus a generous margin.
    const BOUND: Duration = Duration::from_secs(15);
    let redis = RedisServer::start(Mode::Volatile);
    // A 3 s lease (node_support's LEASE_TERM_MS), renewed every 200 ms.
    let mut mesh = Mesh::start(&redis, "restart-kill9", 1, LEASE_TERM_MS);
    // Given a node with a player logged in and moving,
    let mut client = session(&mut mesh, "k", 1, 1);
    assert_eq!(step(&mut client, "k").unwrap(), 1);
    let old_generation = mesh.node(1).node_generation;
    // when it is killed (SIGKILL: its lease stays live until it lapses) and
    // the same RID starts again at once on the same config,
    let killed = Instant::now();
    mesh.node(1).kill9();
    drop(client);
    let node = NodeProcess::try_start(1, &mesh.config_path(1)).unwrap_or_else(|failure| {
        panic!(
            "a start that meets its predecessor's live lease must wait it out (§5), not exit: \
             after {} ms it {failure:?}",
            killed.elapsed().as_millis()
        )
    });
    let ready_after = killed.elapsed();
    *mesh.node(1) = node;
    // then it says it waits for the predecessor's lease,
    let (stream, waiting) = mesh
        .node(1)
        .wait_line_anywhere("waiting for the owner lease");
    // comes up as a new lifecycle no sooner than that lease could have
    // lapsed (its last renewal was at most two intervals before the kill),
    assert!(mesh.node(1).node_generation > old_generation);
    let floor = Duration::from_millis(LEASE_TERM_MS - 2 * RENEW_MS);
    assert!(
        ready_after >= floor,
        "the new lifecycle served {} ms after the kill, before its predecessor's lease could \
         have lapsed ({} ms)",
        ready_after.as_millis(),
        floor.as_millis()
    );
    // and accepts a login, all within the term and a generous margin.
    let address = mesh.node(1).stream;
    eprintln!("restart after SIGKILL: {stream:?} {waiting:?}");
    serves_a_login_within(
        &mut mesh,
        address,
        "k2",
        killed,
        BOUND,
        "after SIGKILL",
        ready_after,
    );
}

/// The restarted node 1 at `address` accepts a login of `player` within
/// `bound` of `since` (the stop or the kill); prints the figures, then
/// stops the node.
fn serves_a_login_within(
    mesh: &mut Mesh,
    address: SocketAddr,
    player: &str,
    since: Instant,
    bound: Duration,
    what: &str,
    ready_after: Duration,
) {
    let login = login_by(address, player, since + bound);
    let took = since.elapsed();
    eprintln!(
        "restart {what}: ready after {} ms, login after {} ms ({login:?})",
        ready_after.as_millis(),
        took.as_millis()
    );
    if let Err(refusals) = login {
        panic!(
            "the node restarted {what} refused logins for {} ms: {refusals:?}",
            took.as_millis()
        );
    }
    assert!(
        took < bound,
        "the node restarted {what} took {} ms to accept a login, not under {} ms",
        took.as_millis(),
        bound.as_millis()
    );
    let (report, _) = mesh.node(1).terminate();
    eprintln!("{report}");
}

/// A start while the store does not answer (redis-server stopped with
/// SIGSTOP) is not a configuration error: the node says it tries again,
/// waits for the store and starts once it answers (docs/operations.md
/// "Probes"), rather than exit with code 2 and leave a supervisor to
/// restart it with a growing backoff. The freeze (the stimulus) outlasts
/// the store's 500 ms call timeout several times over.
#[test]
fn a_start_while_the_store_does_not_answer_waits_for_it_then_serves() {
    const FREEZE: Duration = Duration::from_secs(2);
    let redis = Arc::new(RedisServer::start(Mode::Volatile));
    let dir = temp_dir("start-store-frozen");
    let path = write_config(
        &dir,
        "node-1.toml",
        &config(1, &redis.url(), "start-store-frozen", &Peers::Discover),
    );
    redis.pause();
    let thaw = {
        let redis = Arc::clone(&redis);
        std::thread::spawn(move || {
            std::thread::sleep(FREEZE);
            redis.resume();
        })
    };
    let started = Instant::now();
    let mut node = NodeProcess::try_start(1, &path).unwrap_or_else(|failure| {
        panic!(
            "a start during a store freeze must wait for the store, not exit: after {} ms it \
             {failure:?}",
            started.elapsed().as_millis()
        )
    });
    thaw.join().expect("the thaw ran");
    let (_, retried) =
        node.wait_line_anywhere("did not answer the start's owner lease request: trying again");
    assert!(started.elapsed() >= FREEZE, "ready during the freeze");
    eprintln!("{retried}");
    let mut client = connect(node.stream);
    login(&mut client, "after-freeze").expect("the node serves once it started");
}

/// A `zlink-node` whose start the test drives itself (it does not wait
/// for the ready line): both streams' lines come on one channel, and the
/// process is killed if the test ends before it exited.
struct Starting {
    pid: libc::pid_t,
    lines: std::sync::mpsc::Receiver<String>,
    exited: std::sync::mpsc::Receiver<std::io::Result<std::process::ExitStatus>>,
    /// Every line read so far.
    seen: Vec<String>,
}

impl Starting {
    fn spawn(path: &std::path::Path) -> Self {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let mut child = node_command(path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("zlink-node runs");
        let (tx, lines) = channel();
        let readers = [
            Box::new(child.stdout.take().expect("stdout is piped"))
                as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr is piped")),
        ]
        .map(|stream| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            })
        });
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        let (done, exited) = channel();
        std::thread::spawn(move || {
            let status = child.wait();
            // Every line is read before the exit is told.
            for reader in readers {
                let _ = reader.join();
            }
            let _ = done.send(status);
        });
        Self {
            pid,
            lines,
            exited,
            seen: Vec::new(),
        }
    }

    /// Waits (bounded) for a line containing `needle`.
    fn wait_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line with {needle:?}; printed: {:#?}", self.seen));
            self.seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    }

    fn sigterm(&self) {
        // SAFETY: kill(2) only signals the child this test started; it is
        // not reaped before `exited` tells so, and `Drop` kills it only
        // then if it still runs.
        assert_eq!(unsafe { libc::kill(self.pid, libc::SIGTERM) }, 0);
    }

    /// Waits (bounded) for the process to exit; its status and every line
    /// it printed.
    fn wait_exit(&mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = self
            .exited
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("zlink-node did not exit; printed: {:#?}", self.seen))
            .expect("zlink-node is waited for");
        self.seen.extend(self.lines.try_iter());
        self.pid = 0;
        (status, self.seen.clone())
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if self.pid != 0 {
            // SAFETY: as in `sigterm`: the child was not yet seen to exit.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

/// A start that waits for a store that does not answer still stops on
/// SIGTERM (docs/operations.md "Probes"): it exits 0 saying it stopped
/// before it started, rather than take the signal only once the store
/// answers, which may be never.
#[test]
fn a_start_waiting_for_the_store_stops_on_sigterm() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("start-store-stop");
    let path = write_config(
        &dir,
        "node-1.toml",
        &config(1, &redis.url(), "start-store-stop", &Peers::Discover),
    );
    redis.pause();
    let _wait = bound::waiting("a start waiting for the store to stop on SIGTERM");
    let mut node = Starting::spawn(&path);
    node.wait_line("did not answer the start's owner lease request");
    node.sigterm();
    let (status, printed) = node.wait_exit();
    redis.resume();
    assert!(status.success(), "{status}: {printed:#?}");
    assert!(
        printed
            .iter()
            .any(|line| line.contains("zlink-node stopping before it started: SIGTERM")),
        "{printed:#?}"
    );
}

/// A SIGTERM that lands while the start's owner lease request is with the
/// store (docs/operations.md "Stopping a start"): the process waits for the
/// request, gives back the lease it took, and exits 0; a start of the same
/// node straight after comes up at once. Before, it exited at the signal,
/// and a lease the request took in that instant was held by a process that
/// was gone, so the next start waited out a whole term. Redis holds the
/// request with `CLIENT PAUSE … WRITE` (the lease is taken by a script,
/// which the pause holds), and the node's call timeout is longer than the
/// pause, so the request is in flight when the signal comes.
#[test]
fn a_sigterm_while_the_starts_lease_request_is_in_flight_gives_the_lease_back() {
    /// Far inside the 10 s lease a start would have to wait out.
    const BOUND: Duration = Duration::from_secs(2);
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("start-lease-in-flight");
    let text = config_with_lease(
        1,
        &redis.url(),
        "start-lease-in-flight",
        &Peers::Discover,
        LONG_LEASE_MS,
    )
    .replace("[timeouts]", "call_timeout_ms = 30000\n\n[timeouts]");
    let path = write_config(&dir, "node-1.toml", &text);
    let mut admin = redis.admin();
    RedisServer::pause_writes(&mut admin, 30_000);
    let _wait = bound::waiting("a start whose lease request is held by CLIENT PAUSE");
    let mut node = Starting::spawn(&path);
    // Given the start's lease script held by the pause (a blocked client
    // whose command is a script),
    let deadline = Instant::now() + WAIT;
    loop {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut admin)
            .expect("CLIENT LIST");
        if clients.lines().any(|c| {
            c.contains(" flags=b ") && (c.contains(" cmd=evalsha ") || c.contains(" cmd=eval "))
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no lease request held: {clients}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // when SIGTERM comes and the store then applies the request,
    node.sigterm();
    node.wait_line("zlink-node stopping before it started: SIGTERM");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .expect("CLIENT UNPAUSE");
    // then the process gives the lease back and exits 0,
    let (status, printed) = node.wait_exit();
    assert!(status.success(), "{status}: {printed:#?}");
    for said in [
        "clean stop: owner lease released",
        "zlink-node stopped before it started",
    ] {
        assert!(
            printed.iter().any(|line| line.contains(said)),
            "{said:?}: {printed:#?}"
        );
    }
    // and the node's next start comes up at once.
    let started = Instant::now();
    let restarted = NodeProcess::try_start(1, &path).unwrap_or_else(|failure| {
        panic!(
            "a start after a cancelled start must not wait for a lease: after {} ms it \
             {failure:?}",
            started.elapsed().as_millis()
        )
    });
    assert!(
        started.elapsed() < BOUND,
        "the restart was ready {} ms after it began: it waited for the cancelled start's \
         lease; it printed {:#?}",
        started.elapsed().as_millis(),
        restarted.seen
    );
}

#[test]
fn a_node_paused_past_its_lease_closes_its_sessions_and_exits_3() {
    let redis = RedisServer::start(Mode::Volatile);
    // A 3 s lease (node_support's LEASE_TERM_MS), renewed every 200 ms.
    let mut mesh = Mesh::start(&redis, "paused", 1, LEASE_TERM_MS);
    // Given a node with a player logged in and moving,
    let mut client = session(&mut mesh, "z", 1, 1);
    assert_eq!(step(&mut client, "z").unwrap(), 1);
    // when the process is frozen (SIGSTOP) past its lease and then goes on,
    mesh.node(1).freeze(true);
    std::thread::sleep(Duration::from_millis(LEASE_TERM_MS + 1_000));
    mesh.node(1).freeze(false);
    // then it says its lease lapsed (§5: the lifecycle is dead to the mesh),
    mesh.node(1).wait_line_anywhere("the owner lease lapsed");
    // its session is closed (not left open with every request failing),
    let closed = loop {
        match client.next_event(WAIT) {
            Ok(Some(ClientEvent::Closed(reason))) => break format!("{reason:?}"),
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the session stayed open after the lease lapsed"),
            Err(error) => break format!("{error}"),
        }
    };
    // and it exits with the lapsed-lease code, so a supervisor restarts it
    // as a new lifecycle (docs/store.md).
    let status = mesh.node(1).wait_exit();
    eprintln!("paused past its lease: session closed ({closed}), exit {status}");
    assert_eq!(status.code(), Some(3), "exit status after the lease lapsed");
}

/// Taken by the tests of this file that judge timings (the longest gap
/// between replies, what a client gets during a freeze), so they run one at
/// a time: on a small machine several meshes at once starve one another of
/// CPU for longer than the gaps judged (seen: 500–850 ms gaps in the store
/// hang test on 2 CPUs while the move tests ran beside it).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SessionRelocationSealTimeout of the test nodes (the default, §8.1), ms.
const SEAL_TIMEOUT_MS: u64 = 3_000;

/// The x of one player as every client that reached it saw it (each MOVE
/// reply carries it): a reply is the previous x plus one, plus at most one
/// per MOVE that ended in a typed error since (such a request may or may
/// not have run, §12). A smaller x is the state lost (a new incarnation
/// starts again at 1); a larger one, a MOVE run twice.
struct Lineage {
    player: String,
    x: i64,
    /// MOVEs that ended in a typed error since the last reply.
    unsure: i64,
    /// What the clients saw besides replies, in order, timed from the
    /// freeze (SIGSTOP of redis-server).
    events: Vec<String>,
    /// Refused logins, by message (a login is asked again at once).
    refused_logins: BTreeMap<String, u64>,
    origin: Instant,
}

impl Lineage {
    fn new(player: &str, x: i64) -> Self {
        Lineage {
            player: player.to_owned(),
            x,
            unsure: 0,
            events: Vec::new(),
            refused_logins: BTreeMap::new(),
            origin: Instant::now(),
        }
    }

    fn note(&mut self, what: impl std::fmt::Display) {
        let at = since(self.origin, Instant::now());
        self.events.push(format!("{at:+.3} s: {what}"));
    }

    /// A reply with `x`, from a client `via`.
    fn replied(&mut self, x: i64, via: &str) -> Result<(), String> {
        if x <= self.x || x - self.x > 1 + self.unsure {
            return Err(format!(
                "{}: x went from {} to {x} ({via}) with {} MOVEs ended in a typed error \
                 between: {}; seen: {:?}",
                self.player,
                self.x,
                self.unsure,
                if x <= self.x {
                    "the state was lost (a new incarnation, or an older state)"
                } else {
                    "a MOVE ran twice"
                },
                self.events
            ));
        }
        self.note(format!("x={x} ({via})"));
        self.x = x;
        self.unsure = 0;
        Ok(())
    }

    fn move_failed(&mut self, what: impl std::fmt::Display) {
        self.unsure += 1;
        self.note(format!("MOVE ended in a typed error: {what}"));
    }
}

/// The rest of the freeze, watched: the first event on `client` before
/// `until` (a push is skipped), or `None` when nothing came — which is
/// what a client whose Actor is moving and whose store is frozen should
/// see.
fn watch(client: &mut Client, until: Instant) -> Option<(Instant, ClientEvent)> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match client.next_event(left) {
            Ok(None) => return None,
            Ok(Some(ClientEvent::Push { .. })) => continue,
            Ok(Some(event)) => return Some((Instant::now(), event)),
            Err(error) => {
                eprintln!("  the client failed during the freeze: {error}");
                return Some((Instant::now(), ClientEvent::Closed(None)));
            }
        }
    }
}

/// Logs the player in on a new connection to `address`, again at once
/// after each typed refusal (each attempt waits on its terminal), until
/// one succeeds or `deadline` passes.
fn login_again(
    address: SocketAddr,
    lineage: &mut Lineage,
    deadline: Instant,
) -> Result<Client, String> {
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "{}: no login succeeded on {address} by the deadline; refused: {:?}",
                lineage.player, lineage.refused_logins
            ));
        }
        let mut client = connect(address);
        match login(&mut client, &lineage.player) {
            Ok(()) => {
                lineage.note(format!("logged in on {address}"));
                return Ok(client);
            }
            Err(ClientError::Remote(error)) => {
                *lineage.refused_logins.entry(error.to_string()).or_default() += 1;
            }
            Err(other) => return Err(format!("a login ended without a terminal: {other}")),
        }
    }
}

/// How the player was served again after the freeze.
#[derive(Debug)]
struct Served {
    at: Instant,
    /// The session was closed by its seal timeout (a typed close, §8.1) and
    /// the player was reached by a new login on the session's node.
    relogged: bool,
}

/// MOVEs the player over `client` (a session on the node at `home`) until
/// one gets its reply, by `deadline`: the first MOVE (`pending`, sent
/// during the freeze) has its terminal collected first (`early` if it came
/// during the freeze). A session closed by its seal timeout is replaced by
/// a new login on `home`; any other close, or a request that ends without
/// a terminal, is a failure.
fn served_again(
    lineage: &mut Lineage,
    client: &mut Client,
    pending: Correlation,
    early: Option<(Instant, ClientEvent)>,
    home: SocketAddr,
    deadline: Instant,
) -> Result<Served, String> {
    let mut relogged = false;
    let first = match early {
        Some((
            _,
            ClientEvent::Reply {
                correlation,
                outcome,
            },
        )) if correlation == pending => Ok(outcome),
        Some((_, ClientEvent::Closed(reason))) => Err(ClientError::Closed(reason)),
        _ => client.wait_reply(pending, REQUEST_WAIT),
    };
    match first {
        Ok(Ok(reply)) => {
            lineage.replied(x_of(&reply)?, "the MOVE sent during the freeze")?;
            return Ok(Served {
                at: Instant::now(),
                relogged,
            });
        }
        Ok(Err(error)) => lineage.move_failed(format!("(the one sent during the freeze) {error}")),
        Err(ClientError::Closed(reason)) => {
            // Its terminal never came: it may or may not have run.
            lineage.unsure += 1;
            lineage.note(format!(
                "the session closed ({reason:?}) before the MOVE sent during the freeze ended"
            ));
        }
        Err(other) => {
            return Err(format!(
                "the MOVE sent during the freeze ended without a terminal: {other}"
            ))
        }
    }
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "{}: not served again by the deadline; seen: {:?}, refused logins: {:?}",
                lineage.player, lineage.events, lineage.refused_logins
            ));
        }
        match step(client, &lineage.player) {
            Ok(x) => {
                let via = if relogged {
                    "a new login on the session's node"
                } else {
                    "the existing session"
                };
                lineage.replied(x, via)?;
                return Ok(Served {
                    at: Instant::now(),
                    relogged,
                });
            }
            Err(ClientError::Remote(error)) => lineage.move_failed(error),
            Err(ClientError::Closed(Some(CloseReason::SealTimeout))) => {
                lineage.note("the session closed: SealTimeout");
                *client = login_again(home, lineage, deadline)?;
                relogged = true;
            }
            Err(other) => {
                return Err(format!(
                    "a MOVE ended without a reply or a typed error, nor a typed close: {other}; \
                     seen: {:?}",
                    lineage.events
                ))
            }
        }
    }
}

/// A fresh login on node `rid` (at `address`) and one MOVE over it, by
/// `deadline`: the player it reaches must be the one of the lineage.
fn reach_from(
    rid: u64,
    address: SocketAddr,
    lineage: &mut Lineage,
    deadline: Instant,
) -> Result<Client, String> {
    let mut client = login_again(address, lineage, deadline)?;
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "{}: a login on node {rid} never got a MOVE reply; seen: {:?}",
                lineage.player, lineage.events
            ));
        }
        match step(&mut client, &lineage.player) {
            Ok(x) => {
                return lineage
                    .replied(x, &format!("a fresh login on node {rid}"))
                    .map(|()| client)
            }
            Err(ClientError::Remote(error)) => lineage.move_failed(error),
            Err(other) => {
                return Err(format!(
                    "a MOVE after a login on node {rid} ended without a terminal: {other}"
                ))
            }
        }
    }
}

/// How many Actors each node hosts now, by its console's `counters`.
fn hosts(mesh: &mut Mesh) -> Vec<(u64, u64)> {
    mesh.nodes
        .iter_mut()
        .map(|node| {
            let counters = node.control("counters");
            let actors = field(&counters, "actors")
                .parse()
                .unwrap_or_else(|_| panic!("an actor count in {counters:?}"));
            (node.rid, actors)
        })
        .collect()
}

/// The store row operations a node made so far (its console's
/// `counters`): a CAS counts as it is made, before the store answers.
fn row_operations(node: &mut NodeProcess) -> u64 {
    let counters = node.control("counters");
    field(&counters, "store_row_operations")
        .parse()
        .unwrap_or_else(|_| panic!("a row operation count in {counters:?}"))
}

/// A flow count of a node's console `counters` (0 when not listed).
fn flow(mesh: &mut Mesh, rid: u64, name: &str) -> u64 {
    count(&mesh.node(rid).control("counters"), name)
}

/// [`fail`], with every node's flow counters first (a stopped node goes
/// on to answer): for a test whose nodes all still run.
fn fail_with_counters(mesh: &mut Mesh, what: &str) -> ! {
    for node in &mut mesh.nodes {
        node.freeze(false);
        // Its answer lands in the log `fail` prints.
        node.control("counters");
    }
    fail(mesh, what)
}

/// Prints every node's log, then fails with `what`.
fn fail(mesh: &mut Mesh, what: &str) -> ! {
    for node in &mut mesh.nodes {
        let rid = node.rid;
        for (stream, line) in node.lines_with("") {
            eprintln!("  node {rid} {stream:?}: {line}");
        }
    }
    panic!("{what}");
}

/// Stops every node, those hosting nothing first (a stop moves what a node
/// hosts to a linked peer, §10), and returns the Actors they hosted at
/// their stops, summed; also fails on a node that fenced itself.
fn stop_all(mesh: &mut Mesh, hosting: &[(u64, u64)]) -> u64 {
    let mut order: Vec<(u64, u64)> = hosting.to_vec();
    order.sort_by_key(|&(rid, actors)| (actors, rid));
    let mut fenced = Vec::new();
    for node in &mut mesh.nodes {
        for needle in [FENCED, "peer_lease_lapsed"] {
            for (_, line) in node.lines_with(needle) {
                fenced.push(format!("node {}: {line}", node.rid));
            }
        }
    }
    let mut hosted = 0;
    for (rid, _) in order {
        let (report, _) = mesh.node(rid).terminate();
        eprintln!("  {report}");
        hosted += count(&report, "actors_at_stop");
    }
    assert!(
        fenced.is_empty(),
        "a freeze inside a 10 s lease fenced or buried a node: {fenced:?}"
    );
    hosted
}

/// The flow-trace warnings a node logged (relocation retries, aborts,
/// stale records, seal timeouts), for the figures printed.
fn warnings(mesh: &mut Mesh, rid: u64) -> Vec<String> {
    mesh.node(rid)
        .lines_with("flow=")
        .into_iter()
        .map(|(_, line)| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix("flow="))
                .unwrap_or(&line)
                .trim_matches('"')
                .to_owned()
        })
        .collect()
}

/// A player hosted on node 1 with state (five MOVEs, x = 5), bound from a
/// session on node 3; redis-server stopped (SIGSTOP), node 1's console
/// asked to move the player to node 2, and once node 2 made its CAS (its
/// store row operations grow: the source has handed the player over and
/// the session owner sealed its binding) the session sends one MOVE and
/// redis-server goes on (SIGCONT) `freeze` later. What §8.1 asks of it:
/// only the target's CAS decides authority, so while the store cannot
/// answer nothing serves the player (the MOVE, held by the session owner,
/// gets no reply before SIGCONT), and once it answers the player is served
/// again with its state — from the existing session, or (if the seal timed
/// out first: a typed close) from a new login on node 3 — and fresh logins
/// on nodes 1 and 2 reach the same player (x continues), which exactly one
/// node hosts: node 2 when the console said the move committed.
///
/// The player comes to node 1 by a first move, from node 3 where its login
/// created it, while the store answers: that loads the CAS script into
/// redis, as on any store that has served a move. On a fresh server the
/// first EVALSHA of a script fails with NOSCRIPT (the client then loads it
/// and asks again), so a first CAS stuck in a frozen socket would never
/// apply, and the lost-answer case could not happen. It can only happen to
/// the first call on the connection that was open at SIGSTOP: a call that
/// times out drops the connection, and a new one makes a round trip
/// (CLIENT SETINFO) before its command, which a frozen server never answers.
/// The relocate is asked at once after SIGSTOP so that its CAS is that call
/// unless a lease renewal (every 200 ms) comes first.
///
/// Runs alone among the timing tests of this file ([`one_at_a_time`]).
fn a_move_across_a_store_freeze(cluster: &str, freeze: Duration) {
    let _alone = one_at_a_time();
    const WARMUP: i64 = 5;
    /// The seal timeout plus the lease term, with a margin: by then the
    /// move has ended whatever way the runtime decides, and any session it
    /// closed has been replaced by a new login.
    const BOUND: Duration = Duration::from_millis(SEAL_TIMEOUT_MS + LONG_LEASE_MS + 7_000);
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, cluster, 3, LONG_LEASE_MS);
    let player = "p";
    // Given player p on node 1 with state, bound from a session on node 3:
    // created on node 3 by its login there and moved to node 1 while the
    // store answers (so redis has loaded the CAS script, as a store that
    // has served a move has: on a fresh server the first EVALSHA fails with
    // NOSCRIPT, and a CAS stuck in a frozen socket would never apply),
    let mut client = session(&mut mesh, player, 3, 3);
    for i in 1..=WARMUP / 2 {
        assert_eq!(step(&mut client, player).unwrap(), i);
    }
    let warmup = mesh.node(3).control(&format!("relocate {player} 1"));
    assert_eq!(warmup, "ok", "the move of {player} from node 3 to node 1");
    for i in WARMUP / 2 + 1..=WARMUP {
        assert_eq!(step(&mut client, player).unwrap(), i);
    }
    let addresses: Vec<SocketAddr> = mesh.nodes.iter().map(|n| n.stream).collect();
    let mut lineage = Lineage::new(player, WARMUP);
    // when redis-server stops, node 1 is asked to move p to node 2, the
    // session sends a MOVE once node 2 made its CAS, and redis-server goes
    // on `freeze` after that CAS,
    let target_row_operations = row_operations(mesh.node(2));
    redis.pause();
    let frozen_at = Instant::now();
    lineage.origin = frozen_at;
    let (answer, asked, early, recovered, resumed_at) = std::thread::scope(|scope| {
        let (source, others) = mesh.nodes.split_at_mut(1);
        let (source, target) = (&mut source[0], &mut others[0]);
        let relocating = scope.spawn(move || {
            let answer = source.control(&format!("relocate {player} 2"));
            (answer, Instant::now())
        });
        // The target's CAS is asked (it counts as a row operation as it is
        // made): the source has handed the player over and the session
        // owner has sealed its binding, so a MOVE sent now is held there
        // until the store decides. Bounded: the seal's and the prepare's
        // waits, with a margin.
        let asked = loop {
            if row_operations(target) > target_row_operations {
                break Ok(Instant::now());
            }
            if relocating.is_finished() || frozen_at.elapsed() > Duration::from_secs(5) {
                break Err(format!(
                    "node 2's CAS was not asked within {:.3} s of the relocate",
                    frozen_at.elapsed().as_secs_f64()
                ));
            }
        };
        let Ok(cas_at) = asked else {
            redis.resume();
            return (
                relocating.join(),
                asked,
                None,
                Err(String::new()),
                Instant::now(),
            );
        };
        // The freeze itself (the stimulus), from the CAS on, watched for
        // anything the session gets.
        let pending = client
            .start_request(MOVE, payload(&step_message(player)))
            .expect("the session takes a MOVE");
        let early = watch(&mut client, cas_at + freeze);
        redis.resume();
        let resumed_at = Instant::now();
        let recovered = served_again(
            &mut lineage,
            &mut client,
            pending,
            early.clone(),
            addresses[2],
            resumed_at + BOUND,
        );
        (relocating.join(), asked, early, recovered, resumed_at)
    });
    let (answer, answered_at) = match answer {
        Ok(answered) => answered,
        Err(_) => fail(&mut mesh, "node 1's console gave no answer to the relocate"),
    };
    let cas_at = asked.unwrap_or_else(|failure| {
        fail(
            &mut mesh,
            &format!("{failure}; the console answered {answer:?}"),
        )
    });
    let served = recovered.unwrap_or_else(|failure| fail(&mut mesh, &failure));
    // then nothing answered the session while the store was frozen,
    if let Some((at, event)) = &early {
        if let ClientEvent::Reply { outcome: Ok(_), .. } = event {
            fail(
                &mut mesh,
                &format!(
                    "the player was served {:+.3} s into the freeze, before the store could \
                     decide the move (§8.1): {event:?}",
                    since(frozen_at, *at)
                ),
            );
        }
    }
    // fresh logins on nodes 1 and 2 reach the same player, with its state,
    for rid in [1, 2] {
        let address = addresses[usize::try_from(rid - 1).unwrap()];
        if let Err(failure) = reach_from(rid, address, &mut lineage, resumed_at + BOUND) {
            fail(&mut mesh, &failure);
        }
    }
    // and exactly one node hosts it: node 2 when the console said the move
    // committed.
    let hosting = hosts(&mut mesh);
    let retries = flow(&mut mesh, 2, "relocation_store_retry");
    let committed = flow(&mut mesh, 2, "relocation_committed");
    let held = flow(&mut mesh, 3, "held_message_released");
    eprintln!(
        "a move across a {} ms store freeze (SIGSTOP at +0.000 s, node 2's CAS asked at \
         {:+.3} s, SIGCONT at {:+.3} s): console answered {answer:?} at {:+.3} s; the player \
         served again at {:+.3} s ({:.3} s after SIGCONT{}), x = {}; first event during the \
         freeze: {:?}; node 2: relocation_store_retry={retries} relocation_committed={committed}; \
         node 3: held_message_released={held}; warnings node 1 {:?}, node 2 {:?}, node 3 {:?}; \
         hosts {hosting:?}",
        freeze.as_millis(),
        since(frozen_at, cas_at),
        since(frozen_at, resumed_at),
        since(frozen_at, answered_at),
        since(frozen_at, served.at),
        since(resumed_at, served.at),
        if served.relogged {
            ", after the seal timeout closed the session"
        } else {
            ", on the existing session"
        },
        lineage.x,
        early
            .as_ref()
            .map(|(at, e)| (since(frozen_at, *at), e.clone())),
        warnings(&mut mesh, 1),
        warnings(&mut mesh, 2),
        warnings(&mut mesh, 3),
    );
    eprintln!(
        "  seen: {:#?}\n  refused logins: {:?}",
        lineage.events, lineage.refused_logins
    );
    let hosted: u64 = hosting.iter().map(|&(_, n)| n).sum();
    if hosted != 1 {
        fail(
            &mut mesh,
            &format!("{hosted} Actors hosted across the nodes, not one: {hosting:?}"),
        );
    }
    if answer == "ok" && hosting[1].1 != 1 {
        fail(
            &mut mesh,
            &format!("the console said the move committed, but the hosts are {hosting:?}"),
        );
    }
    assert_eq!(stop_all(&mut mesh, &hosting), 1, "Actors at the stops");
}

/// §8.1 (only the target's CAS decides authority) across a store freeze
/// longer than the 500 ms call timeout (1.5 s from the CAS): the CAS reaches
/// redis's socket buffer, its call times out (outcome unknown), and redis
/// applies it at SIGCONT — the lost-answer case (docs/relocation.md "An
/// unknown CAS outcome"). The target keeps the handed-over instance
/// unserved, asks again every 200 ms, takes the row already naming its
/// lifecycle as its own swap, and serves the player with the state it was
/// handed; see [`a_move_across_a_store_freeze`] for what is checked.
#[test]
fn a_redis_freeze_across_a_moves_cas_leaves_the_player_served_with_its_state() {
    a_move_across_a_store_freeze("freeze-cas", Duration::from_millis(1_500));
}

/// §8.1 across a store freeze shorter than the call timeout (300 ms from
/// the CAS): the target's CAS is only answered late, and the move commits
/// then, with the player's state; see [`a_move_across_a_store_freeze`].
#[test]
fn a_short_redis_freeze_during_a_move_only_delays_its_cas() {
    a_move_across_a_store_freeze("freeze-short", Duration::from_millis(300));
}

/// §8.1: the source reopens only after a confirmed durable abort. A move
/// whose target is frozen (SIGSTOP of its process) aborts at the source's
/// prepare deadline (1.5 s) while redis-server is stopped too: the durable
/// abort cannot reach the store and is retried every 200 ms, the player
/// staying captured (the session's MOVE held, unanswered before SIGCONT).
/// Once redis goes on (after 2.5 s) the abort is confirmed and the source
/// reopens: the player is served from node 1 with its state (x continues),
/// from the existing session or, if its seal timed out first (a typed
/// close), a new login on node 3, and fresh logins on nodes 1 and 3 reach
/// it. Then the target goes on: it reads the 60 only now, then the
/// source's 64, and discards what it prepared (a CAS of it would meet the
/// recorded abort), so a login there reaches the same player on node 1,
/// and node 1 alone hosts it. That node 2 kept nothing of the handoff is
/// shown by a later event, not a wait: a move there is then admitted (a
/// pending handoff would refuse it, RelocationSealed; a hosted player,
/// RelocationTargetInvalid) and commits with the player's state.
///
/// Runs alone among the timing tests of this file ([`one_at_a_time`]).
#[test]
fn a_redis_freeze_during_a_durable_abort_reopens_the_source_with_the_player() {
    let _alone = one_at_a_time();
    const WARMUP: i64 = 5;
    const FREEZE: Duration = Duration::from_millis(2_500);
    /// From SIGCONT: the abort's retry interval and a drained store queue,
    /// with a wide margin, yet well inside the target's 10 s lease (it is
    /// frozen all along).
    const BOUND: Duration = Duration::from_secs(5);
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, "freeze-abort", 3, LONG_LEASE_MS);
    let player = "q";
    // Given player q on node 1 with state, bound from a session on node 3,
    let mut client = session(&mut mesh, player, 1, 3);
    for i in 1..=WARMUP {
        assert_eq!(step(&mut client, player).unwrap(), i);
    }
    let addresses: Vec<SocketAddr> = mesh.nodes.iter().map(|n| n.stream).collect();
    let mut lineage = Lineage::new(player, WARMUP);
    // when node 2 and redis-server stop, node 1 is asked to move q to node
    // 2, the session sends a MOVE meanwhile, and redis-server goes on after
    // 2.5 s (node 2 still stopped),
    mesh.node(2).freeze(true);
    redis.pause();
    let frozen_at = Instant::now();
    lineage.origin = frozen_at;
    let (answer, early, recovered, resumed_at) = std::thread::scope(|scope| {
        let source = mesh.node(1);
        let relocating = scope.spawn(move || {
            let answer = source.control(&format!("relocate {player} 2"));
            (answer, Instant::now())
        });
        std::thread::sleep(FREEZE / 2);
        let pending = client
            .start_request(MOVE, payload(&step_message(player)))
            .expect("the session takes a MOVE");
        let early = watch(&mut client, frozen_at + FREEZE);
        redis.resume();
        let resumed_at = Instant::now();
        let recovered = served_again(
            &mut lineage,
            &mut client,
            pending,
            early.clone(),
            addresses[2],
            resumed_at + BOUND,
        );
        let answer = relocating.join();
        (answer, early, recovered, resumed_at)
    });
    let (answer, answered_at) = match answer {
        Ok(answered) => answered,
        Err(_) => fail_with_counters(&mut mesh, "node 1's console gave no answer to the relocate"),
    };
    let served = recovered.unwrap_or_else(|failure| fail_with_counters(&mut mesh, &failure));
    // then nothing the session owner held under the seal was answered while
    // the abort was unconfirmed (a MOVE that passed before the seal was
    // installed, under load, may be answered at the source before its
    // capture: that is no move yet, and is only reported),
    let held = flow(&mut mesh, 3, "held_message_released");
    if let Some((at, event)) = &early {
        if let ClientEvent::Reply { outcome: Ok(_), .. } = event {
            if held > 0 {
                fail(
                    &mut mesh,
                    &format!(
                        "the MOVE held under the seal was answered {:+.3} s into the freeze, \
                         before the store confirmed the abort (§8.1): {event:?}",
                        since(frozen_at, *at)
                    ),
                );
            }
            eprintln!(
                "  the MOVE sent {:.3} s into the freeze passed before the seal and was \
                 answered at {:+.3} s: this run did not hold it",
                (FREEZE / 2).as_secs_f64(),
                since(frozen_at, *at)
            );
        }
    }
    // the move did not commit (its target never answered),
    if !answer.starts_with("error ") {
        fail(
            &mut mesh,
            &format!("the relocate to a frozen target answered {answer:?}"),
        );
    }
    // fresh logins on nodes 1 and 3 reach the player, with its state,
    for rid in [1, 3] {
        let address = addresses[usize::try_from(rid - 1).unwrap()];
        if let Err(failure) = reach_from(rid, address, &mut lineage, resumed_at + BOUND) {
            fail_with_counters(&mut mesh, &failure);
        }
    }
    let source_served_at = Instant::now();
    // and once node 2 goes on, a login there reaches the same player,
    mesh.node(2).freeze(false);
    let target_resumed_at = Instant::now();
    // (Its session stays open through the probe move below: dropped, its
    // disconnect would race the move's seal, which a session that ended
    // refuses, StaleBinding, aborting the probe; seen once on a loaded
    // machine.)
    let _bound = reach_from(2, addresses[1], &mut lineage, target_resumed_at + BOUND)
        .unwrap_or_else(|failure| fail_with_counters(&mut mesh, &failure));
    // which node 1 alone hosts.
    let hosting = hosts(&mut mesh);
    eprintln!(
        "a durable abort across a {} ms store freeze (node 2 and redis-server SIGSTOP at \
         +0.000 s, redis SIGCONT at {:+.3} s, node 2 SIGCONT at {:+.3} s): console answered \
         {answer:?} at {:+.3} s; the player served again at {:+.3} s ({:.3} s after SIGCONT{}), \
         x = {}; first event during the freeze: {:?}; node 1: relocation_store_retry={} \
         relocation_aborted={}; node 3: held_message_released={held}; warnings node 1 {:?}, \
         node 2 {:?}, node 3 {:?}; hosts {hosting:?}",
        FREEZE.as_millis(),
        since(frozen_at, resumed_at),
        since(frozen_at, target_resumed_at),
        since(frozen_at, answered_at),
        since(frozen_at, served.at),
        since(resumed_at, served.at),
        if served.relogged {
            ", after the seal timeout closed the session"
        } else {
            ", on the existing session"
        },
        lineage.x,
        early
            .as_ref()
            .map(|(at, e)| (since(frozen_at, *at), e.clone())),
        flow(&mut mesh, 1, "relocation_store_retry"),
        flow(&mut mesh, 1, "relocation_aborted"),
        warnings(&mut mesh, 1),
        warnings(&mut mesh, 2),
        warnings(&mut mesh, 3),
    );
    eprintln!(
        "  seen: {:#?}\n  refused logins: {:?}\n  the source served {:.3} s after SIGCONT",
        lineage.events,
        lineage.refused_logins,
        since(resumed_at, source_served_at)
    );
    if hosting != [(1, 1), (2, 0), (3, 0)] {
        fail(
            &mut mesh,
            &format!("after the abort the hosts are {hosting:?}, not node 1 alone"),
        );
    }
    // Node 2 kept nothing of the aborted handoff (a later event, not a
    // wait): a move there now is admitted — a handoff still pending would
    // refuse it (RelocationSealed), a player hosted there
    // (RelocationTargetInvalid) — and commits, with the player's state.
    let probe = mesh.node(1).control(&format!("relocate {player} 2"));
    if probe != "ok" {
        fail(
            &mut mesh,
            &format!("a move to node 2 after the abort answered {probe:?}"),
        );
    }
    if let Err(failure) = reach_from(3, addresses[2], &mut lineage, Instant::now() + BOUND) {
        fail_with_counters(&mut mesh, &failure);
    }
    let moved = hosts(&mut mesh);
    eprintln!("  then moved to node 2: hosts {moved:?}, x = {}", lineage.x);
    if moved != [(1, 0), (2, 1), (3, 0)] {
        fail(
            &mut mesh,
            &format!("after the move to node 2 the hosts are {moved:?}, not node 2 alone"),
        );
    }
    assert_eq!(stop_all(&mut mesh, &moved), 1, "Actors at the stops");
}

#[test]
fn l6_a_target_killed_after_relay_ready_leaves_a_loss_that_a_login_on_a_third_node_replaces() {
    let _alone = one_at_a_time();
    let cluster = "l6-third-node-login";
    let redis = RedisServer::start(Mode::Volatile);
    // Node 2, the target, reaches Redis only through a fault proxy.
    let redis_addr: SocketAddr = format!("127.0.0.1:{}", redis.port()).parse().unwrap();
    let proxy = fault::FaultProxy::start(redis_addr);
    let dir = temp_dir(cluster);
    let nodes = (1..=3)
        .map(|rid| {
            let url = if rid == 2 {
                format!("redis://{}", proxy.addr)
            } else {
                redis.url()
            };
            let text = config_with_lease(rid, &url, cluster, &Peers::Discover, LONG_LEASE_MS);
            let path = write_config(&dir, &format!("node-{rid}.toml"), &text);
            NodeProcess::start(rid, &path)
        })
        .collect();
    let mut mesh = Mesh { dir, nodes };
    for rid in 1..=3 {
        for peer in (1..=3).filter(|&peer| peer != rid) {
            mesh.node(rid).wait_linked(peer);
        }
    }
    // Given player p on node 1 with state (x = 2), its session there,
    let player = "p";
    let mut client = session(&mut mesh, player, 1, 1);
    assert_eq!(step(&mut client, player).unwrap(), 1);
    assert_eq!(step(&mut client, player).unwrap(), 2);
    // and node 2 cut off from Redis (its lease, 10 s, outlives the test's
    // use of it),
    proxy.set_refusing(true);
    proxy.reset_all();
    // when node 1 moves p to node 2 and node 2 dies once it has asked for
    // its CAS (after relay-ready: the source has handed p over),
    let target_row_operations = row_operations(mesh.node(2));
    let answer = std::thread::scope(|scope| {
        let (source, others) = mesh.nodes.split_at_mut(1);
        let (source, target) = (&mut source[0], &mut others[0]);
        let relocating = scope.spawn(move || source.control(&format!("relocate {player} 2")));
        let started = Instant::now();
        while row_operations(target) == target_row_operations {
            assert!(
                !relocating.is_finished() && started.elapsed() < Duration::from_secs(5),
                "node 2's CAS was not asked within 5 s of the relocate"
            );
        }
        target.kill9();
        relocating.join().expect("the console thread")
    });
    // then the move fails (the source heard no finish from the target),
    assert!(answer.starts_with("error"), "{answer}");
    // and no node hosts p, while its row still names node 1;
    assert_eq!(count(&mesh.node(1).control("counters"), "actors"), 0);
    assert_eq!(count(&mesh.node(3).control("counters"), "actors"), 0);
    // a login on node 3 asks node 1, which records the loss and creates a
    // new incarnation, served afresh (x starts again).
    let address = mesh.node(3).stream;
    let deadline = Instant::now() + Duration::from_millis(SEAL_TIMEOUT_MS + 5_000);
    let mut again = None;
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    while again.is_none() && Instant::now() < deadline {
        let mut client = connect(address);
        match login(&mut client, player) {
            Ok(()) => again = Some(client),
            Err(error) => {
                *refusals.entry(error.to_string()).or_default() += 1;
                // Only keeps the loop from hammering the node.
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let Some(mut again) = again else {
        fail(
            &mut mesh,
            &format!("no login on node 3 reached p: {refusals:?}"),
        );
    };
    assert_eq!(step(&mut again, player).unwrap(), 1, "a new incarnation");
    assert_eq!(flow(&mut mesh, 1, "lost_incarnation_replaced"), 1);
    assert!(flow(&mut mesh, 3, "host_asked") >= 1);
    assert_eq!(count(&mesh.node(1).control("counters"), "actors"), 1);
    println!(
        "L6 after a target killed past relay-ready: the move answered {answer:?}; \
         login(s) on node 3 refused first: {refusals:?}"
    );
}

/// Found by running the binary (helper realrun): a `RelocationId` is
/// `{ coordinator rid, sequence }` with the sequence counted from the same
/// start in every lifecycle (src/core/relocation/mod.rs `relocation_id`),
/// so a node restarted straight after a SIGTERM hands its first move the
/// id of its previous lifecycle's first move. The target still keeps that
/// handoff (it lingers for the Message Follow lifetime, 30 s) and refuses
/// the new prepare as a duplicate (`targets.contains_key`, target.rs
/// `admit_prepare`): the move ended `Unavailable` (RelocationSealed), and
/// a SIGTERM's drain then ended such an Actor with the node (its rows
/// removed, its state lost, its remote clients answered StaleLocation).
/// Now a committed handoff of the coordinator's past lifecycle makes way.
#[test]
fn a_node_restarted_after_sigterm_moves_an_actor_like_its_previous_lifecycle_did() {
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, "restart-relocation-id", 2, LONG_LEASE_MS);
    // Given player a created on node 2 and moved by it to node 1 (the
    // first move of node 2's lifecycle),
    let mut first = session(&mut mesh, "a", 2, 2);
    assert_eq!(step(&mut first, "a").unwrap(), 1);
    assert_eq!(mesh.node(2).control("relocate a 1"), "ok");
    assert_eq!(step(&mut first, "a").unwrap(), 2, "a moved with its state");
    // when node 2 stops on SIGTERM and starts again at once,
    let (report, status) = mesh.node(2).terminate();
    eprintln!("{report} ({status})");
    assert!(status.success(), "the SIGTERM'd node exited with {status}");
    let node = NodeProcess::start(2, &mesh.config_path(2));
    *mesh.node(2) = node;
    mesh.node(2).wait_linked(1);
    mesh.node(1).wait_linked(2);
    // and a player b created on the new lifecycle is moved to node 1 (its
    // first move too),
    let mut second = session(&mut mesh, "b", 2, 2);
    assert_eq!(step(&mut second, "b").unwrap(), 1);
    let answer = mesh.node(2).control("relocate b 1");
    // then it moves like a's did: a new lifecycle's move is a new move.
    assert_eq!(
        answer, "ok",
        "the first move of a restarted node was refused (its RelocationId repeats \
         the previous lifecycle's first one)"
    );
    assert_eq!(step(&mut second, "b").unwrap(), 2, "b moved with its state");
}

/// Found by running the binary (helper realrun): when a peer restarts
/// straight after a SIGTERM, its dialer redials the new lifecycle within
/// its backoff, before its next membership listing; that listing then
/// finds the old lifecycle gone and buries it (src/runtime/links.rs
/// `bury`), and `bury` aborts the dial's connection whatever lifecycle it
/// reached — the new one's link, up and serving. Seen in the logs: the
/// restarted node printed `link down peer=<dialer>` ~0.3 s after its
/// `link up`, right as the dialer printed `peer lease lapsed: dropping its
/// links … generation=<old>`. Node 1 lists the membership every 2 s here,
/// so its redial wins that race.
#[test]
fn the_lapse_of_a_peers_old_lifecycle_leaves_its_new_lifecycles_link_up() {
    let redis = RedisServer::start(Mode::Volatile);
    let cluster = "bury-new-link";
    let dir = temp_dir(cluster);
    let text = config_with_lease(1, &redis.url(), cluster, &Peers::Discover, LONG_LEASE_MS)
        .replace(
            &format!("lease_renew_interval_ms = {RENEW_MS}"),
            "lease_renew_interval_ms = 2000",
        );
    let mut dialer = NodeProcess::start(1, &write_config(&dir, "node-1.toml", &text));
    // Node 2's link listener keeps its port across the restart (as a
    // deployment's does), so node 1's redial reaches the new lifecycle.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let text = config_with_lease(2, &redis.url(), cluster, &Peers::Discover, LONG_LEASE_MS)
        .replace(
            "peer = \"127.0.0.1:0\"",
            &format!("peer = \"127.0.0.1:{port}\""),
        );
    let path = write_config(&dir, "node-2.toml", &text);
    let mut peer = NodeProcess::start(2, &path);
    dialer.wait_linked(2);
    peer.wait_linked(1);
    // Given node 2 stopped on SIGTERM and started again at once,
    let (_, status) = peer.terminate();
    assert!(status.success(), "the SIGTERM'd node exited with {status}");
    let mut peer = NodeProcess::start(2, &path);
    // linked again (node 1's redial),
    peer.wait_linked(1);
    // when node 1 learns from its next listing that the old lifecycle is
    // gone,
    let lapsed = dialer.wait_line(Stream::Err, "peer lease lapsed");
    assert!(lapsed.contains("peer=2"), "{lapsed}");
    // then the new lifecycle's link stays up: give a dropped link the time
    // to show, then look for its `link down`.
    let settle = Instant::now() + Duration::from_millis(500);
    let mut client = connect(peer.stream);
    login(&mut client, "settle").expect("node 2 serves");
    std::thread::sleep(settle.saturating_duration_since(Instant::now()));
    let dropped = peer.lines_with("link down peer=1");
    for (stream, line) in dialer
        .lines_with("link")
        .iter()
        .chain(&peer.lines_with("link"))
    {
        eprintln!("{stream:?} {line}");
    }
    assert!(
        dropped.is_empty(),
        "node 1 dropped the link of node 2's new lifecycle when it buried the old one: {dropped:?}"
    );
}

/// A restart after a kill -9 whose first lease answer is slow (Redis holds
/// it with `CLIENT PAUSE … WRITE`, as a busy Redis would): the store
/// derives the predecessor's expiry from when the request was sent, so a
/// slow answer makes it look earlier, and the next answer seems to move it.
/// That is no renewal: the start waits the lease out and serves. Before,
/// it exited 2 ("another live process runs with this NodeRid") and a
/// supervisor would not restart it. The call timeout is set past the
/// pause, so the answer is slow, not lost.
#[test]
fn a_restart_whose_first_lease_answer_is_slow_waits_out_the_crashed_lease() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("restart-slow-answer");
    let text = config(1, &redis.url(), "restart-slow-answer", &Peers::Discover)
        .replace("[timeouts]", "call_timeout_ms = 5000\n\n[timeouts]");
    let path = write_config(&dir, "node-1.toml", &text);
    let mut node = NodeProcess::start(1, &path);
    // Given a node killed with its lease live (3 s),
    let killed = Instant::now();
    node.kill9();
    // and the next start's first lease request held for 1.5 s,
    RedisServer::pause_writes(&mut redis.admin(), 1_500);
    // when the same RID starts again,
    let mut node = NodeProcess::try_start(1, &path).unwrap_or_else(|failure| {
        panic!(
            "a slow answer is no renewal: the start must wait the crashed lease out, but \
             after {} ms it {failure:?}",
            killed.elapsed().as_millis()
        )
    });
    // then it waited for the lease (its one warning says so, and no try
    // went unanswered) and serves.
    node.wait_line_anywhere("waiting for the owner lease");
    assert!(
        node.lines_with("did not answer").is_empty(),
        "the paused request timed out instead of answering late"
    );
    let mut client = connect(node.stream);
    login(&mut client, "after-slow-answer").expect("the restarted node serves");
}

/// A node whose stdout and stderr nobody reads any more (a log shipper or
/// `| tee` that went away) still stops cleanly on SIGTERM: exit 0, its
/// lease given back, so a restart straight after comes up at once. Before,
/// the stop's first line panicked ("failed printing to stdout"), the
/// process exited 101 with no drain, and the restart waited out the lease;
/// and the log's own report of a failed write (`eprintln!` in the
/// subscriber) would have panicked whichever thread logged, a shard's
/// too. SIGHUP (a terminal that closes) stops a node cleanly too.
#[test]
fn a_node_whose_stdout_nobody_reads_stops_cleanly_and_gives_its_lease_back() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    /// Far inside the 10 s lease a start would have to wait out.
    const BOUND: Duration = Duration::from_secs(2);
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("stdout-gone");
    let path = write_config(
        &dir,
        "node-1.toml",
        &config_with_lease(
            1,
            &redis.url(),
            "stdout-gone",
            &Peers::Discover,
            LONG_LEASE_MS,
        ),
    );
    let _wait = bound::waiting("a node whose stdout is closed, stopped by SIGTERM");
    let mut child = node_command(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zlink-node runs");
    let stderr = child.stderr.take().expect("stderr is piped");
    // Given a node that printed its ready line to a pipe,
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut line = String::new();
    while !line.contains("zlink-node ready") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).expect("a line") > 0,
            "zlink-node ended before its ready line"
        );
    }
    // whose readers then go away,
    drop(stdout);
    drop(stderr);
    // when it gets SIGTERM, it stops cleanly (exit 0),
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) only signals the child this test started and has not
    // waited for yet, so the pid is its.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (exited, exit) = channel();
    std::thread::spawn(move || {
        let _ = exited.send(child.wait());
    });
    let status = exit
        .recv_timeout(WAIT)
        .expect("the node exits after SIGTERM")
        .expect("zlink-node is waited for");
    assert!(status.success(), "{status}");
    // and gave its lease back: a restart comes up at once.
    let started = Instant::now();
    let mut restarted = NodeProcess::try_start(1, &path)
        .unwrap_or_else(|failure| panic!("the restart did not start: {failure:?}"));
    assert!(
        started.elapsed() < BOUND,
        "the restart was ready after {} ms: it waited for a lease",
        started.elapsed().as_millis()
    );
    // SIGHUP stops it cleanly too.
    let (report, status) = restarted.stop_with(libc::SIGHUP);
    assert!(status.success(), "{status}: {report}");
    restarted.wait_line(Stream::Out, "zlink-node stopping: SIGHUP");
}
