//! The metrics and probe endpoint of `zlink-node` (`listen.metrics`;
//! docs/operations.md "Probes" and "Metrics"):
//!
//! - `GET /metrics`: every series of `Node::metrics`, in the Prometheus text
//!   format (the `prometheus_client` crate writes it);
//! - `GET /healthz`: 200 while the process runs (liveness);
//! - `GET /readyz`: 200 while the owner lease is held, the node is not
//!   draining and its link round after start is over (every peer it knew
//!   at start linked, or `timeouts.ready_link_wait_ms` passed), 503
//!   otherwise, with the reason as the body (readiness). The
//!   Location Store's health is not part of it: a hung store must not take
//!   every node out of service while relays and pushes still flow; it shows
//!   in the metrics instead (`zlink_store_errors_total`).
//!
//! HTTP is `tiny_http`'s, served on threads of their own, never a shard's,
//! from before the node starts (`/readyz` says `starting` while the start
//! waits for a predecessor's lease) to the process's exit, so a probe sees
//! the drain through.
//! Two threads take requests, so a liveness probe does not wait behind a
//! scrape (which waits up to 500 ms for the shards' answers).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use zlink::api::{NodeMetrics, METRICS_CONTENT_TYPE};

/// Threads answering requests.
const SERVERS: usize = 2;

/// The endpoint: its listener and the node it reports on once started.
pub struct Endpoint {
    node: Arc<OnceLock<NodeMetrics>>,
    address: SocketAddr,
}

impl Endpoint {
    /// Binds `address` (port 0: any free port) and serves at once, before
    /// the node starts: a start can wait up to one lease term for a crashed
    /// predecessor's lease (docs/operations.md "Probes"), and meanwhile
    /// `/healthz` answers 200 (a liveness probe must not kill a process
    /// that is waiting as it should) and `/readyz` 503 `starting`. Binding
    /// first also fails the start on an address in use before any lease is
    /// taken.
    pub fn bind(address: SocketAddr) -> Result<Self, String> {
        let server = tiny_http::Server::http(address)
            .map_err(|e| format!("listen.metrics: cannot listen on {address}: {e}"))?;
        let address = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("listen.metrics: {address} is not an IP address"))?;
        let server = Arc::new(server);
        let node: Arc<OnceLock<NodeMetrics>> = Arc::default();
        for index in 0..SERVERS {
            let (server, node) = (Arc::clone(&server), Arc::clone(&node));
            std::thread::Builder::new()
                .name(format!("zlink-node-probes-{index}"))
                .spawn(move || {
                    // `recv` fails only when the listener is gone.
                    while let Ok(request) = server.recv() {
                        answer(request, node.get());
                    }
                })
                .map_err(|e| format!("listen.metrics: cannot start its thread: {e}"))?;
        }
        Ok(Self { node, address })
    }

    /// The address it listens on (the bound port when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The node started: report on it from now on, until the process
    /// exits (through its drain: the threads outlive the node).
    pub fn attach(&self, metrics: NodeMetrics) {
        let _ = self.node.set(metrics);
    }
}

/// Answers one request; a client that went away is not an error here.
/// `metrics` is `None` until the node started.
fn answer(request: tiny_http::Request, metrics: Option<&NodeMetrics>) {
    let path = request.url().split('?').next().unwrap_or("");
    let is_get = matches!(request.method(), tiny_http::Method::Get);
    let (status, content_type, body) = match (is_get, path) {
        (true, "/healthz") => (200, TEXT, "ok\n".to_owned()),
        (true, "/metrics") => match metrics {
            Some(metrics) => (200, METRICS_CONTENT_TYPE, metrics.encode()),
            None => (503, TEXT, "starting\n".to_owned()),
        },
        (true, "/readyz") => match metrics.map(NodeMetrics::readiness) {
            Some(readiness) if readiness.is_ready() => (200, TEXT, format!("{readiness}\n")),
            Some(readiness) => (503, TEXT, format!("{readiness}\n")),
            None => (503, TEXT, "starting\n".to_owned()),
        },
        (false, "/metrics" | "/healthz" | "/readyz") => {
            (405, TEXT, "only GET is served\n".to_owned())
        }
        _ => (
            404,
            TEXT,
            "not found: GET /metrics, /healthz or /readyz\n".to_owned(),
        ),
    };
    let mut response = tiny_http::Response::from_string(body).with_status_code(status);
    if let Ok(header) = tiny_http::Header::from_bytes("Content-Type", content_type) {
        response = response.with_header(header);
    }
    let _ = request.respond(response);
}

/// The `Content-Type` of the probes' plain answers.
const TEXT: &str = "text/plain; charset=utf-8";
