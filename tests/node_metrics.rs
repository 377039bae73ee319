//! The metrics and probe endpoint of a real `zlink-node` process (issue 24
//! items 1 and 2; `listen.metrics`, docs/operations.md "Probes" and
//! "Metrics"): scraped over a plain TCP socket, with assertions on named
//! series and values that must have changed; `/readyz` turns not-ready
//! while the node drains after SIGTERM. Every wait is on an event (a line
//! the node prints, a reply, a socket's end) and bounded; none sleeps.

mod node_support;
mod redis_support;

use std::io::Read;
use std::net::TcpStream;

use node_support::*;
use redis_support::{Mode, RedisServer};

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

    // A live move to the peer: its duration recorded as committed, and the
    // next MOVE relayed across the link is measured as well.
    assert_eq!(node.control("relocate alice 2"), "ok");
    step(&mut client, "alice").expect("a MOVE after the move is answered");
    let relocated = scrape(&node);
    assert_line(
        &relocated,
        r#"zlink_relocation_duration_seconds_count{node="1",unit="actor",outcome="committed"} 1"#,
    );
    assert_line(
        &relocated,
        r#"zlink_relocation_duration_seconds_count{node="1",unit="actor",outcome="failed"} 0"#,
    );
    assert_line(
        &relocated,
        r#"zlink_relay_duration_seconds_count{node="1"} 65"#,
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
