//! `--transport-axis` (issue 22): what zlink's WebSocket listener costs
//! beside its TCP listener, on the same nodes, with the same client code.
//!
//! It starts two linked zlink nodes of the bench's game (node 1 listens on
//! TCP and WebSocket, node 2 hosts the players), then runs, in `--rounds`
//! interleaved rounds, the same load over each transport in turn:
//! `--sessions` client threads, each a [`Client`] connected to node 1 over
//! TCP ([`Client::connect`]) or over WebSocket
//! ([`Client::connect_websocket`], tungstenite: masking and framing on the
//! client too), logged in as a player on node 2, relaying `--payload`-byte
//! requests closed loop, one in flight, for `--warmup` then `--duration`.
//! The same blocking client on both sides of the comparison means the
//! difference is the transport: the WebSocket framing, masking and the
//! node's tungstenite layer.
//!
//! It reports each transport's relays/s and latency percentiles
//! (hdrhistogram), and WebSocket's as ratios to TCP's. It asserts no speed:
//! a request that ends in an error fails the run (exit 1).

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use zlink::api::IoBackend;
use zlink::client::Client;
use zlink::ids::ActorId;
use zlink::store::{EmbeddedStore, LocationStore, MonotonicClock};

use crate::args::Options;
use crate::client::{player_name, LATENCY_MAX_NS, LOGIN, RELAY};
use crate::systems::zlink::{start_linked, LEASE_TERM, PLAYER};

/// How a session reaches node 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Tcp,
    WebSocket,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::WebSocket => "websocket",
        }
    }
}

/// What one session's thread measured: its latencies, its relays in the
/// window, and whether every request succeeded.
type SessionResult = Result<(Histogram<u64>, u64, bool), String>;

/// One transport's measured windows, summed over the rounds.
struct Measured {
    latency: Histogram<u64>,
    relays: u64,
    window: Duration,
}

/// Runs the axis and prints its report; `Ok(false)` when a request failed.
pub fn run(options: &Options) -> Result<bool, String> {
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let store: Arc<dyn LocationStore> =
        Arc::new(EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM));
    let nodes = start_linked(
        2,
        options.sessions,
        1,
        IoBackend::IoUring,
        |_| Ok(Arc::clone(&store)),
        &|builder| builder.websocket_listen(loopback),
    )?;
    let (entry, host) = (&nodes[0].1, &nodes[1].1);
    let tcp = entry.stream_addr().ok_or("node 1 has no STREAM address")?;
    let ws = entry
        .websocket_addr()
        .ok_or("node 1 has no WebSocket address")?;
    let url = format!("ws://{ws}/");
    for index in 0..options.sessions {
        let id = ActorId::new(&player_name(index)).map_err(|e| format!("player id: {e}"))?;
        host.create_actor(PLAYER, &id)
            .map_err(|e| format!("creating {id} on node 2: {e}"))?;
    }
    let mut measured = Vec::new();
    for transport in [Transport::Tcp, Transport::WebSocket] {
        measured.push((transport, empty()?));
    }
    let mut clean = true;
    for round in 0..options.rounds.max(1) {
        for (transport, total) in &mut measured {
            let (latency, relays, window, ok) = load(*transport, tcp, &url, options)?;
            total.latency.add(&latency).map_err(|e| e.to_string())?;
            total.relays += relays;
            total.window += window;
            clean &= ok;
            eprintln!(
                "round {}: {} {} relays in {:?}",
                round + 1,
                transport.name(),
                relays,
                window
            );
        }
    }
    print!("{}", report(&measured, options));
    if let Some(path) = &options.json {
        let text = serde_json::to_string_pretty(&json(&measured, clean))
            .map_err(|e| format!("the JSON report: {e}"))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(clean)
}

/// Relays a second over the measured windows.
fn rate(m: &Measured) -> f64 {
    m.relays as f64 / m.window.as_secs_f64().max(1e-9)
}

/// The latency at quantile `q`, in microseconds.
fn us(m: &Measured, q: f64) -> f64 {
    m.latency.value_at_quantile(q) as f64 / 1_000.0
}

/// The report as JSON (`--json`).
fn json(measured: &[(Transport, Measured)], clean: bool) -> serde_json::Value {
    let transports: Vec<serde_json::Value> = measured
        .iter()
        .map(|(transport, m)| {
            serde_json::json!({
                "transport": transport.name(),
                "relays": m.relays,
                "relays_per_s": rate(m),
                "latency_us": {
                    "p50": us(m, 0.5),
                    "p99": us(m, 0.99),
                    "p99.9": us(m, 0.999),
                    "max": m.latency.max() as f64 / 1_000.0,
                },
            })
        })
        .collect();
    let ratio = match measured {
        [(_, tcp), (_, ws)] => serde_json::json!({
            "relays_per_s": rate(ws) / rate(tcp).max(1e-9),
            "p50": us(ws, 0.5) / us(tcp, 0.5).max(1e-9),
            "p99": us(ws, 0.99) / us(tcp, 0.99).max(1e-9),
        }),
        _ => serde_json::Value::Null,
    };
    serde_json::json!({
        "mode": "transport-axis",
        "clean": clean,
        "transports": transports,
        "websocket_over_tcp": ratio,
    })
}

fn empty() -> Result<Measured, String> {
    Ok(Measured {
        latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).map_err(|e| e.to_string())?,
        relays: 0,
        window: Duration::ZERO,
    })
}

/// One round of one transport: every session's thread, warm-up then the
/// measured window. Returns the window's latencies, relays, its length,
/// and whether every request succeeded.
fn load(
    transport: Transport,
    tcp: SocketAddr,
    url: &str,
    options: &Options,
) -> Result<(Histogram<u64>, u64, Duration, bool), String> {
    let start = Arc::new(Barrier::new(options.sessions + 1));
    let payload = Bytes::from(vec![b'x'; options.payload_len.max(1)]);
    let (warmup, duration) = (options.warmup, options.duration);
    let threads: Vec<JoinHandle<SessionResult>> = (0..options.sessions)
        .map(|index| {
            let (start, payload, url) = (Arc::clone(&start), payload.clone(), url.to_owned());
            std::thread::spawn(move || {
                let mut client = match transport {
                    Transport::Tcp => Client::connect(tcp),
                    Transport::WebSocket => Client::connect_websocket(&url),
                }
                .map_err(|e| format!("{} connect: {e}", transport.name()))?;
                let name = Bytes::from(player_name(index).into_bytes());
                client
                    .request(LOGIN, name, Duration::from_secs(10))
                    .map_err(|e| format!("{} login: {e}", transport.name()))?;
                let mut latency =
                    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).map_err(|e| e.to_string())?;
                start.wait();
                let begun = Instant::now();
                let (measure_from, until) = (begun + warmup, begun + warmup + duration);
                let (mut relays, mut ok) = (0u64, true);
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break;
                    }
                    let reply = client.request(RELAY, payload.clone(), Duration::from_secs(10));
                    let took = sent.elapsed();
                    match reply {
                        Ok(echo) if echo == payload => {}
                        _ => ok = false,
                    }
                    if sent >= measure_from {
                        relays += 1;
                        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                        latency.saturating_record(nanos.max(1));
                    }
                }
                Ok((latency, relays, ok))
            })
        })
        .collect();
    start.wait();
    let mut total = empty()?;
    let mut clean = true;
    for thread in threads {
        let (latency, relays, ok) = thread
            .join()
            .map_err(|_| "a session thread panicked".to_owned())??;
        total.latency.add(&latency).map_err(|e| e.to_string())?;
        total.relays += relays;
        clean &= ok;
    }
    Ok((total.latency, total.relays, duration, clean))
}

fn report(measured: &[(Transport, Measured)], options: &Options) -> String {
    let mut out = format!(
        "transport axis: {} sessions, one request in flight each, {} B payload, \
         {} round(s) of {:?} (after {:?} warm-up), 2 nodes (sessions on node 1, \
         players on node 2)\n\n",
        options.sessions,
        options.payload_len,
        options.rounds.max(1),
        options.duration,
        options.warmup
    );
    out.push_str("transport    relays/s      p50 µs    p99 µs   p99.9 µs    max µs\n");
    for (transport, m) in measured {
        out.push_str(&format!(
            "{:<10} {:>10.0} {:>11.1} {:>9.1} {:>10.1} {:>9.1}\n",
            transport.name(),
            rate(m),
            us(m, 0.5),
            us(m, 0.99),
            us(m, 0.999),
            m.latency.max() as f64 / 1_000.0
        ));
    }
    if let [(_, tcp), (_, ws)] = measured {
        out.push_str(&format!(
            "\nwebsocket / tcp: relays/s {:.2}x, p50 {:.2}x, p99 {:.2}x\n",
            rate(ws) / rate(tcp).max(1e-9),
            us(ws, 0.5) / us(tcp, 0.5).max(1e-9),
            us(ws, 0.99) / us(tcp, 0.99).max(1e-9)
        ));
    }
    out
}
