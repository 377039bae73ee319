//! The metrics and probe endpoint of a real `zlink-node` process (issue 24
//! items 1 and 2; `listen.metrics`, docs/operations.md "Probes" and
//! "Metrics"): scraped over a plain TCP socket, with assertions on named
//! series and values that must have changed; `/readyz` turns not-ready
//! while the node drains after SIGTERM. Every wait is on an event (a line
//! the node prints, a reply, a socket's end) and bounded; none sleeps.

mod bound;
mod node_support;
mod redis_support;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use node_support::*;
use redis_support::{Mode, RedisServer};

/// What a node logs once every peer it knew at its start is linked, and
/// so `/readyz` says ready (docs/operations.md "Probes").
const LINKED_IN: &str = "linked in: every peer known at start is linked";

/// Asserts that the scrape holds the line `line` exactly.
fn assert_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "no line {line:?} in\n{text}"
    );
}

/// Node `rid`'s config on `redis`, with the endpoint on a free port and
/// `extra` lines added to its `[limits]` table.
fn config_with_metrics(rid: u64, redis: &RedisServer, cluster: &str, limits: &str) -> String {
    let text = with_metrics(&config(rid, &redis.url(), cluster, &Peers::Discover));
    format!("{text}\n[limits]\n{limits}\n")
}

#[test]
fn a_scrape_shows_links_sessions_relays_moves_and_refusals() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("metrics");
    let one = write_config(
        &dir,
        "node-1.toml",
        &config_with_metrics(1, &redis, "metrics", "max_sessions = 1"),
    );
    let two = write_config(
        &dir,
        "node-2.toml",
        &config(2, &redis.url(), "metrics", &Peers::Discover),
    );
    let mut node = NodeProcess::start(1, &one);
    let mut peer = NodeProcess::start(2, &two);
    node.wait_linked(2);
    peer.wait_linked(1);
    assert_eq!(peer.metrics, None, "no listen.metrics, no endpoint");

    // Before any client: the link up, ready, nothing counted yet.
    let before = scrape(&node);
    assert_line(
        &before,
        r#"zlink_link_up{node="1",peer="2",mesh="lobby"} 1"#,
    );
    assert_line(&before, r#"zlink_ready{node="1"} 1"#);
    assert_line(&before, r#"zlink_draining{node="1"} 0"#);
    assert_line(&before, r#"zlink_lease_held{node="1"} 1"#);
    assert_line(&before, r#"zlink_sessions{node="1"} 0"#);
    assert_line(&before, r#"zlink_bound_sessions{node="1"} 0"#);
    assert_line(&before, r#"zlink_shard_sessions{node="1",shard="0"} 0"#);
    assert_line(&before, r#"zlink_shard_responsive{node="1",shard="0"} 1"#);
    assert_line(
        &before,
        r#"zlink_flow_events_total{node="1",event="session_limit_refused",level="warn"} 0"#,
    );
    assert_line(
        &before,
        r#"zlink_store_operation_duration_seconds_count{node="1",op="acquire_lease"} 1"#,
    );
    assert_line(
        &before,
        r#"zlink_store_errors_total{node="1",op="create",error="unavailable"} 0"#,
    );
    let lease_left = sample(&before, r#"zlink_lease_left_seconds{node="1"}"#);
    let term = LEASE_TERM_MS as f64 / 1000.0;
    assert!(
        lease_left > 0.0 && lease_left <= term,
        "lease left {lease_left} s of a {term} s term"
    );
    let lookups_and_creates = |text: &str| {
        sample(
            text,
            r#"zlink_store_operation_duration_seconds_count{node="1",op="create"}"#,
        ) + sample(
            text,
            r#"zlink_store_operation_duration_seconds_count{node="1",op="lookup"}"#,
        )
    };
    let store_before = lookups_and_creates(&before);

    // A login: one session, bound to its player, after a store call.
    let mut client = connect(node.stream);
    login(&mut client, "alice").expect("alice logs in");
    let after = scrape(&node);
    assert_line(&after, r#"zlink_sessions{node="1"} 1"#);
    assert_line(&after, r#"zlink_shard_sessions{node="1",shard="0"} 1"#);
    assert_line(&after, r#"zlink_bound_sessions{node="1"} 1"#);
    assert_line(
        &after,
        r#"zlink_shard_bound_sessions{node="1",shard="0"} 1"#,
    );
    assert_line(&after, r#"zlink_bindings{node="1"} 1"#);
    assert!(
        lookups_and_creates(&after) > store_before,
        "the login's BindOrGet called the store:\n{after}"
    );
    assert_line(&after, r#"zlink_relay_duration_seconds_count{node="1"} 0"#);

    // Relayed MOVEs: each one's latency recorded, and one Actor turn in 64
    // timed (the login's join turn and these 64).
    for _ in 0..64 {
        step(&mut client, "alice").expect("a MOVE is answered");
    }
    let moved = scrape(&node);
    assert_line(&moved, r#"zlink_relay_duration_seconds_count{node="1"} 64"#);
    assert_line(
        &moved,
        r#"zlink_relay_duration_seconds_bucket{node="1",le="+Inf"} 64"#,
    );
    let turns = sample(
        &moved,
        r#"zlink_actor_turn_duration_seconds_count{node="1"}"#,
    );
    assert!(turns >= 1.0, "one Actor turn in 64 is timed: {turns}");
    // The player pushes a tick on every fourth MOVE: 16 pushes from an
    // Actor of this node, each measured from its push to the frame handed
    // to alice's connection; none came over a link, and nothing moved yet.
    assert_line(
        &moved,
        r#"zlink_push_duration_seconds_count{node="1",origin="local"} 16"#,
    );
    assert_line(
        &moved,
        r#"zlink_push_duration_seconds_bucket{node="1",origin="local",le="+Inf"} 16"#,
    );
    assert_line(
        &moved,
        r#"zlink_push_duration_seconds_count{node="1",origin="link"} 0"#,
    );
    for outcome in ["committed", "aborted", "timed_out"] {
        assert_line(
            &moved,
            &format!(r#"zlink_relocation_pause_seconds_count{{node="1",outcome="{outcome}"}} 0"#),
        );
    }
    assert_line(
        &moved,
        r#"zlink_held_messages{node="1",hold="session_seal"} 0"#,
    );
    assert_line(&moved, r#"zlink_held_messages{node="1",hold="ingress"} 0"#);

    // A live move to the peer: its duration recorded as committed, the
    // seal on alice's binding as one committed pause, and the next MOVEs
    // relayed across the link are measured as well; the fourth of them
    // (alice's 68th) pushes a tick from node 2, which node 1 hands to alice
    // from the link.
    assert_eq!(node.control("relocate alice 2"), "ok");
    let relocated = scrape(&node);
    assert_line(
        &relocated,
        r#"zlink_relocation_duration_seconds_count{node="1",unit="actor",outcome="committed"} 1"#,
    );
    let took = sample(
        &relocated,
        r#"zlink_relocation_duration_seconds_sum{node="1",unit="actor",outcome="committed"}"#,
    );
    assert!(took > 0.0, "the move took {took} s");
    assert_line(
        &relocated,
        r#"zlink_relocation_duration_seconds_count{node="1",unit="actor",outcome="failed"} 0"#,
    );
    assert_line(
        &relocated,
        r#"zlink_relocation_pause_seconds_count{node="1",outcome="committed"} 1"#,
    );
    let paused = sample(
        &relocated,
        r#"zlink_relocation_pause_seconds_sum{node="1",outcome="committed"}"#,
    );
    assert!(
        paused > 0.0,
        "the seal lasted from the 42 to the 44 from node 2: {paused} s"
    );
    assert_line(
        &relocated,
        r#"zlink_relocation_pause_seconds_count{node="1",outcome="aborted"} 0"#,
    );
    for _ in 0..4 {
        step(&mut client, "alice").expect("a MOVE after the move is answered");
    }
    let relayed = scrape(&node);
    assert_line(
        &relayed,
        r#"zlink_relay_duration_seconds_count{node="1"} 68"#,
    );
    assert_line(
        &relayed,
        r#"zlink_push_duration_seconds_count{node="1",origin="link"} 1"#,
    );
    assert_line(
        &relayed,
        r#"zlink_push_duration_seconds_count{node="1",origin="local"} 16"#,
    );

    // A second client is over limits.max_sessions = 1: closed at once and
    // counted, the first one still counted alone.
    let mut refused = TcpStream::connect(node.stream).expect("the node accepts");
    refused
        .set_read_timeout(Some(WAIT))
        .expect("a read timeout");
    let mut ignored = Vec::new();
    refused
        .read_to_end(&mut ignored)
        .expect("the node closes the refused session");
    let refused_scrape = scrape(&node);
    assert_line(
        &refused_scrape,
        r#"zlink_flow_events_total{node="1",event="session_limit_refused",level="warn"} 1"#,
    );
    assert_line(&refused_scrape, r#"zlink_sessions{node="1"} 1"#);
    // The console's counters say the same.
    let counters = node.control("counters");
    assert_eq!(count(&counters, "session_limit_refused"), 1, "{counters}");

    // The peer gone: its link reads 0.
    peer.kill9();
    node.wait_line(Stream::Err, "link down peer=2");
    assert_line(
        &scrape(&node),
        r#"zlink_link_up{node="1",peer="2",mesh="lobby"} 0"#,
    );
    drop(client);
    let (_, status) = node.terminate();
    assert!(status.success(), "{status}");
}

#[test]
fn readyz_turns_not_ready_while_the_node_drains_after_sigterm() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("readyz");
    // A drain that waits for its clients for up to 10 s: long enough to
    // be seen, ended early by the client leaving.
    let text = config_with_metrics(1, &redis, "readyz", "").replace(
        "shutdown_deadline_ms = 1000",
        "shutdown_deadline_ms = 10000",
    );
    let path = write_config(&dir, "node-1.toml", &text);
    let mut node = NodeProcess::start(1, &path);
    let address = node.metrics.expect("the node serves listen.metrics");
    // Alone in its mesh: ready once its first listing named no peer.
    node.wait_line(Stream::Err, LINKED_IN);
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(get(address, "/nothing").0, 404);

    // A logged-in client keeps the drain open until it leaves.
    let mut client = connect(node.stream);
    login(&mut client, "bob").expect("bob logs in");
    node.sigterm();
    node.wait_line(Stream::Err, "shutdown: draining");
    assert_eq!(get(address, "/readyz"), (503, "draining\n".to_owned()));
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    let draining = scrape(&node);
    assert_line(&draining, r#"zlink_draining{node="1"} 1"#);
    assert_line(&draining, r#"zlink_ready{node="1"} 0"#);
    assert_line(&draining, r#"zlink_lease_held{node="1"} 1"#);

    drop(client);
    node.wait_line(Stream::Out, "zlink-node stopped:");
    let status = node.wait_exit();
    assert!(status.success(), "{status}");
}

/// The held-message gauge and the pause over real processes: node 1 moves
/// player p to node 2, which is frozen (SIGSTOP) so that the move waits on
/// its 61 with p's binding sealed; a MOVE the session sends meanwhile is
/// held, and the scrape shows it (`zlink_held_messages{hold="session_seal"}`
/// 1). Node 2 then goes on (SIGCONT): the move commits, the held MOVE is
/// answered from node 2, nothing is held any more, and the one committed
/// pause lasted at least from when the test saw the 60 sent to when it
/// thawed node 2 — the seal was installed before the 60 left and released
/// only by node 2's 44 — which proves the span, not a speed.
#[test]
fn a_scrape_shows_a_message_held_under_a_seal_and_the_pause_it_waited() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("metrics-held");
    // Waits long enough that the frozen target, not a timeout, decides.
    let text = config_with_metrics(1, &redis, "metrics-held", "").replace(
        "relay_deadline_ms = 2000",
        "relay_deadline_ms = 10000\nsession_relocation_seal_timeout_ms = 15000",
    ) + "\n[relocation]\nprepare_timeout_ms = 10000\n";
    let one = write_config(&dir, "node-1.toml", &text);
    let two = write_config(
        &dir,
        "node-2.toml",
        &config(2, &redis.url(), "metrics-held", &Peers::Discover),
    );
    let mut source = NodeProcess::start(1, &one);
    let mut target = NodeProcess::start(2, &two);
    source.wait_linked(2);
    target.wait_linked(1);
    let metrics = source.metrics.expect("node 1 serves listen.metrics");
    let prepare_sent =
        r#"zlink_flow_events_total{node="1",event="relocation_prepare_sent",level="debug"}"#;
    let sealed = r#"zlink_held_messages{node="1",hold="session_seal"}"#;

    let mut client = connect(source.stream);
    login(&mut client, "p").expect("p logs in on node 1");
    assert_eq!(step(&mut client, "p").expect("a MOVE"), 1);
    assert_eq!(sample(&scrape_at(metrics), sealed), 0.0);
    target.freeze(true);
    let (answer, held, seen_sent, thawed, during) = std::thread::scope(|scope| {
        let relocating = scope.spawn(|| source.control("relocate p 2"));
        wait_sample(metrics, prepare_sent, 1.0, || relocating.is_finished());
        let seen_sent = Instant::now();
        let held = client
            .start_request(MOVE, payload(&step_message("p")))
            .expect("the session takes a MOVE");
        wait_sample(metrics, sealed, 1.0, || relocating.is_finished());
        let during = scrape_at(metrics);
        let thawed = Instant::now();
        target.freeze(false);
        let answer = relocating.join().expect("the console thread");
        (answer, held, seen_sent, thawed, during)
    });
    assert_line(
        &during,
        r#"zlink_shard_held_messages{node="1",shard="0",hold="session_seal"} 1"#,
    );
    assert_line(&during, r#"zlink_held_messages{node="1",hold="ingress"} 0"#);
    assert_line(
        &during,
        r#"zlink_relocation_pause_seconds_count{node="1",outcome="committed"} 0"#,
    );
    assert_eq!(answer, "ok", "the move commits once node 2 goes on");

    // The held MOVE went to node 2 and is answered from p's moved state.
    let reply = client.wait_reply(held, REQUEST_WAIT);
    let reply = reply.expect("the held MOVE ends").expect("it is answered");
    assert_eq!(x_of(&reply), Ok(2));
    let after = scrape_at(metrics);
    assert_line(
        &after,
        r#"zlink_held_messages{node="1",hold="session_seal"} 0"#,
    );
    assert_line(
        &after,
        r#"zlink_flow_events_total{node="1",event="held_message_released",level="debug"} 1"#,
    );
    assert_line(
        &after,
        r#"zlink_relocation_pause_seconds_count{node="1",outcome="committed"} 1"#,
    );
    let paused = sample(
        &after,
        r#"zlink_relocation_pause_seconds_sum{node="1",outcome="committed"}"#,
    );
    // The node's times are whole microseconds: a millisecond of slack.
    let frozen = thawed.saturating_duration_since(seen_sent).as_secs_f64();
    assert!(
        paused + 0.001 >= frozen,
        "the pause ({paused} s) covers the seal while node 2 was frozen ({frozen} s)"
    );
    println!(
        "a held MOVE: the binding was sealed {:.1} ms, node 2 frozen {:.1} ms of it",
        paused * 1000.0,
        frozen * 1000.0
    );
    drop(client);
    let (_, status) = source.terminate();
    assert!(status.success(), "{status}");
}

/// After start, `/readyz` says `linking` until every peer the node knew at
/// its start is linked (docs/operations.md "Probes"): node 2 takes links
/// from node 1 (configured without an address: the lower RID dials), which
/// is not running yet, so node 2 is not ready though its lease is held.
/// Node 1 starts and dials, and node 2 turns ready. The wait for links is
/// far longer than the test: only the link ends it.
#[test]
fn readyz_says_linking_until_the_peers_known_at_start_are_linked() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("readyz-linking");
    let cluster = "readyz-linking";
    let two = with_metrics(&config(
        2,
        &redis.url(),
        cluster,
        &Peers::Static(Vec::new()),
    ))
    .replace(
        "shutdown_deadline_ms = 1000",
        "shutdown_deadline_ms = 1000\nready_link_wait_ms = 600000",
    );
    let two = write_config(&dir, "node-2.toml", &two);
    let mut node_two = NodeProcess::start(2, &two);
    let address = node_two.metrics.expect("node 2 serves listen.metrics");
    assert_eq!(get(address, "/readyz"), (503, "linking\n".to_owned()));
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    let linking = scrape(&node_two);
    assert_line(&linking, r#"zlink_ready{node="2"} 0"#);
    assert_line(&linking, r#"zlink_lease_held{node="2"} 1"#);
    assert_line(
        &linking,
        r#"zlink_link_up{node="2",peer="1",mesh="lobby"} 0"#,
    );

    let peer = node_two.peer.expect("node 2 takes links");
    let one = write_config(
        &dir,
        "node-1.toml",
        &config(1, &redis.url(), cluster, &Peers::Static(vec![(2, peer)])),
    );
    let _node_one = NodeProcess::start(1, &one);
    node_two.wait_line(Stream::Err, LINKED_IN);
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
    let ready = scrape(&node_two);
    assert_line(&ready, r#"zlink_ready{node="2"} 1"#);
    assert_line(&ready, r#"zlink_link_up{node="2",peer="1",mesh="lobby"} 1"#);
}

/// A peer known at start that never links keeps the node out of service
/// for `timeouts.ready_link_wait_ms` and no longer (docs/operations.md
/// "Probes"): node 2 takes links from node 1 (configured, without an
/// address: node 1 dials), which never starts. `/readyz` says `linking`,
/// then, once the wait has passed (timed from before the process started,
/// so never sooner), `ready`, with the missing peer named in the log.
#[test]
fn readyz_waits_for_a_peer_that_never_links_no_longer_than_ready_link_wait() {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir("readyz-missing");
    let wait = Duration::from_millis(3_000);
    let text = with_metrics(&config(
        2,
        &redis.url(),
        "readyz-missing",
        &Peers::Static(Vec::new()),
    ))
    .replace(
        "shutdown_deadline_ms = 1000",
        &format!(
            "shutdown_deadline_ms = 1000\nready_link_wait_ms = {}",
            wait.as_millis()
        ),
    );
    let path = write_config(&dir, "node-2.toml", &text);
    let started = Instant::now();
    let mut node = NodeProcess::start(2, &path);
    let address = node.metrics.expect("the node serves listen.metrics");
    assert_eq!(get(address, "/readyz"), (503, "linking\n".to_owned()));

    let line = node.wait_line(Stream::Err, "linked in without every peer known at start");
    assert!(
        started.elapsed() >= wait,
        "ready {:?} after the start, before the {wait:?} wait",
        started.elapsed()
    );
    assert!(line.contains("missing=[1]"), "{line}");
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
}

/// Connections that hold the endpoint open do not hold up a probe
/// (docs/operations.md "Probes"): with 16 connections that send nothing
/// and 16 that sent half a request head, `/healthz`, `/readyz` and
/// `/metrics` are answered all the same (until 7 December 2026 the
/// endpoint gave each connection a thread of a small pool, and eight
/// idle ones made `/healthz` hang: a liveness probe would have restarted a
/// node that served). A half-sent head is closed at the header timeout
/// (5 s), never sooner.
#[test]
fn probes_are_answered_while_idle_and_half_sent_connections_hold_the_endpoint() {
    use std::io::Write;
    const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
    let (_redis, _node, address) = linked_in_with_probes("probes-held", "", None);
    // Given connections that send nothing, and connections whose request
    // head stops half way (each kind from an address of its own, as many
    // as the endpoint takes from one),
    let idle: Vec<TcpStream> = (0..16)
        .map(|_| connect_from([127, 0, 0, 2], address))
        .collect();
    let opened = Instant::now();
    let half: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut stream = connect_from([127, 0, 0, 3], address);
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n")
                .expect("half a head is sent");
            stream
        })
        .collect();
    // then each probe and a scrape are answered while they are held open,
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
    let (status, text) = get(address, "/metrics");
    assert_eq!(status, 200);
    assert_line(&text, r#"zlink_ready{node="1"} 1"#);
    // and a half-sent head is closed at the header timeout, never sooner
    // (the read ends with the close; no answer came before it).
    let mut first = half.into_iter().next().expect("a half-sent connection");
    first
        .set_read_timeout(Some(HEADER_TIMEOUT + WAIT))
        .expect("a read timeout");
    let mut answer = Vec::new();
    let _ = first.read_to_end(&mut answer);
    let closed_after = opened.elapsed();
    assert!(
        closed_after >= HEADER_TIMEOUT,
        "closed after {closed_after:?}, before the header timeout"
    );
    assert!(
        closed_after < HEADER_TIMEOUT + WAIT,
        "not closed within {:?} of the header timeout",
        WAIT
    );
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "a half-sent head was answered: {answer:?}"
    );
    drop(idle);
}

/// Sessions that would take every descriptor of the process: with
/// `limits.max_sessions` left out, zlink-node derives it from the
/// descriptor limit (256 here: 64, a quarter, kept back, with 64 for the
/// probe endpoint and 32 for the process itself: 96 sessions), so the
/// connections past it are refused with `SessionLimit` and the probes still
/// answer. Before, 400 idle connections under a limit of 256 left
/// `/healthz` unanswered: a liveness probe would have restarted a node
/// that served every session it had (docs/operations.md "Descriptors").
#[test]
fn sessions_left_unlimited_are_bounded_by_the_descriptor_limit_and_probes_answer() {
    let (_redis, node, address) = linked_in_with_probes("probes-descriptors", "", Some(256));
    // Given more connections than the process has descriptors,
    let held: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&node.stream, WAIT).ok())
        .collect();
    // then the node holds the derived limit (96) and refuses the rest,
    wait_sample(address, r#"zlink_sessions{node="1"}"#, 96.0, || false);
    let text = scrape(&node);
    assert!(text.contains(r#"event="session_limit_refused""#), "{text}");
    // and, with 48 idle connections held on the probe endpoint from three
    // addresses (descriptors too: a hostile run's took the last ones that
    // a quarter of the limit left), its probes from a fourth answer.
    let _probe_holders: Vec<TcpStream> = [2, 3, 4]
        .into_iter()
        .flat_map(|host| (0..16).map(move |_| connect_from([127, 0, 0, host], address)))
        .collect();
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
    drop(held);
}

/// `limits.max_sessions` set past what the descriptor limit allows is
/// lowered to what it allows, with a warning, for the same reason.
#[test]
fn a_max_sessions_past_the_descriptor_limit_is_lowered_and_probes_answer() {
    let (_redis, mut node, address) =
        linked_in_with_probes("probes-no-descriptors", "max_sessions = 10000", Some(256));
    node.wait_line_anywhere("limits.max_sessions is more than the descriptor limit allows");
    // Given more connections than the process has descriptors,
    let held: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&node.stream, WAIT).ok())
        .collect();
    // then the node holds what the limit allows, and its probes answer.
    wait_sample(address, r#"zlink_sessions{node="1"}"#, 96.0, || false);
    for _ in 0..3 {
        assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    }
    drop(held);
}

/// A TCP connection to `to` from the loopback address `from`, so that a
/// test's clients can stand for several hosts.
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> TcpStream {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    let local = std::net::SocketAddr::from((from, 0));
    socket.bind(&local.into()).expect("a loopback address");
    socket
        .connect_timeout(&to.into(), WAIT)
        .expect("the endpoint accepts");
    socket.into()
}

/// One address cannot hold every connection of the endpoint: past 16
/// from it, a connection is closed at its accept, so the kubelet's probes
/// from another address are answered however many a local client opens
/// (before, 1,024 connections from one client reset every probe). A
/// request head past 16 KiB is answered 431 (hyper's default buffer, about
/// 400 KB a connection, let 1,024 connections hold 400 MB).
#[test]
fn one_address_holds_at_most_16_probe_connections_and_a_large_head_gets_431() {
    use std::io::Write;
    let (_redis, _node, address) = linked_in_with_probes("probes-per-address", "", None);
    // Given 200 connections from one address,
    let held: Vec<TcpStream> = (0..200)
        .map(|_| connect_from([127, 0, 0, 4], address))
        .collect();
    // the 16 the endpoint takes from it stay open, the rest are closed at
    // their accept,
    let mut closed = 0;
    for stream in &held[16..] {
        let _ = closed_within_wait(stream);
        closed += 1;
    }
    assert_eq!(closed, 184);
    // (at their accept: the ones it took, opened first, are still open,
    // where the header timeout would have closed them first)
    held[0].set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    assert_eq!(
        (&held[0]).read(&mut byte).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "the first connection from the address was closed"
    );
    // probes from another address are answered,
    assert_eq!(get(address, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(get(address, "/readyz"), (200, "ready\n".to_owned()));
    // and a head past 16 KiB gets 431.
    let mut big = connect_from([127, 0, 0, 5], address);
    write!(
        big,
        "GET /healthz HTTP/1.1\r\nHost: probe\r\nX-Padding: {}\r\n\r\n",
        "p".repeat(20 * 1024)
    )
    .expect("the head is sent");
    big.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut answer = Vec::new();
    let _ = big.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    drop(held);
}

/// Waits (bounded) until the peer closed `stream`: a read that ends (0
/// bytes, or a reset).
fn closed_within_wait(mut stream: &TcpStream) -> usize {
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
        Err(e) => panic!("not closed within {WAIT:?}: {e}"),
    }
}

/// Node 1 alone on a Redis of its own, under `cluster`, with `limits`
/// lines, its descriptor limit at `nofile` if given, serving
/// `listen.metrics`, once linked in (ready); the Redis, the node and the
/// endpoint's address.
fn linked_in_with_probes(
    cluster: &str,
    limits: &str,
    nofile: Option<u64>,
) -> (RedisServer, NodeProcess, std::net::SocketAddr) {
    let redis = RedisServer::start(Mode::Volatile);
    let dir = temp_dir(cluster);
    let path = write_config(
        &dir,
        "node-1.toml",
        &config_with_metrics(1, &redis, cluster, limits),
    );
    let mut node = match nofile {
        Some(nofile) => NodeProcess::start_with_nofile(1, &path, nofile),
        None => NodeProcess::start(1, &path),
    };
    let address = node.metrics.expect("the node serves listen.metrics");
    node.wait_line(Stream::Err, LINKED_IN);
    (redis, node, address)
}
