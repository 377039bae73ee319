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
//!   with the configuration error code (2).
//!
//! Every wait is bounded and waits on an event (a printed line, a reply);
//! the only sleeps are the hang itself (the stimulus) and the pause between
//! login attempts, which proves nothing. A missing redis-server is a clear
//! failure (redis_support).

mod node_support;
mod redis_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use node_support::*;
use redis_support::{Mode, RedisServer};
use zlink::client::{Client, ClientError, ClientEvent};
use zlink::ids::PacketKey;

/// The lobby game's keys (src/bin/lobby/game.rs).
const LOGIN: PacketKey = PacketKey(1);
const MOVE: PacketKey = PacketKey(2);

/// A client's own limit on one request: far past the relay deadline (2 s),
/// so a request that gets no terminal from the node is a failure, not a
/// slow reply.
const REQUEST_WAIT: Duration = Duration::from_secs(15);

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

fn connect(address: SocketAddr) -> Client {
    Client::connect(address).expect("the node accepts clients")
}

fn login(client: &mut Client, player: &str) -> Result<(), ClientError> {
    let reply = client.request(LOGIN, Bytes::from(player.to_owned()), REQUEST_WAIT)?;
    assert_eq!(&reply[..], b"welcome");
    Ok(())
}

/// MOVE `player` by (1, 0); its new x.
fn step(client: &mut Client, player: &str) -> Result<i64, ClientError> {
    let reply = client.request(MOVE, Bytes::from(format!("{player}:1,0")), REQUEST_WAIT)?;
    let text = std::str::from_utf8(&reply).expect("a UTF-8 position");
    let (x, y) = text.split_once(',').expect("a position x,y");
    assert_eq!(y, "0", "only x moves");
    Ok(x.parse().expect("a whole x"))
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
fn store_hang_within_the_lease_keeps_established_relays_flowing() {
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
fn restart_straight_after_sigterm_comes_up_at_once() {
    /// Far inside the 10 s lease a start would have to wait out.
    const BOUND: Duration = Duration::from_secs(2);
    let redis = RedisServer::start(Mode::Volatile);
    let mut mesh = Mesh::start(&redis, "restart-term", 1, LONG_LEASE_MS);
    // Given a node with a player logged in and moving,
    let mut client = session(&mut mesh, "t", 1, 1);
    assert_eq!(step(&mut client, "t").unwrap(), 1);
    let old_generation = mesh.node(1).node_generation;
    // when it stops on SIGTERM and the same RID starts again at once on
    // the same config,
    let (report, status) = mesh.node(1).terminate();
    eprintln!("{report} ({status})");
    assert!(status.success(), "the SIGTERM'd node exited with {status}");
    drop(client);
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
    let login = login_by(address, "t2", started + BOUND);
    let took = started.elapsed();
    eprintln!(
        "restart after SIGTERM: ready after {} ms, login after {} ms ({login:?})",
        ready_after.as_millis(),
        took.as_millis()
    );
    if let Err(refusals) = login {
        panic!(
            "the restarted node refused logins for {} ms: {refusals:?}",
            took.as_millis()
        );
    }
    assert!(
        took < BOUND,
        "the restarted node took {} ms to accept a login, not under {} ms",
        took.as_millis(),
        BOUND.as_millis()
    );
    let (report, _) = mesh.node(1).terminate();
    eprintln!("{report}");
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
    let login = login_by(address, "k2", killed + BOUND);
    let took = killed.elapsed();
    eprintln!(
        "restart after SIGKILL: {stream:?} {waiting:?}; ready after {} ms, login after {} ms \
         ({login:?})",
        ready_after.as_millis(),
        took.as_millis()
    );
    if let Err(refusals) = login {
        panic!(
            "the restarted node refused logins for {} ms after the kill: {refusals:?}",
            took.as_millis()
        );
    }
    assert!(
        took < BOUND,
        "the restarted node took {} ms after the kill to accept a login, not under {} ms",
        took.as_millis(),
        BOUND.as_millis()
    );
    let (report, _) = mesh.node(1).terminate();
    eprintln!("{report}");
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
