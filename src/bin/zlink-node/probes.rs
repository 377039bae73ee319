//! The metrics and probe endpoint of `zlink-node` (`listen.metrics`;
//! docs/operations.md "Probes" and "Metrics"):
//!
//! - `GET /metrics`: every series of `Node::metrics`, in the Prometheus text
//!   format (the `prometheus_client` crate writes it);
//! - `GET /healthz`: 200 while the process runs (liveness);
//! - `GET /readyz`: 200 while the owner lease is held and the node is not
//!   draining, 503 otherwise, with the reason as the body (readiness). The
//!   Location Store's health is not part of it: a hung store must not take
//!   every node out of service while relays and pushes still flow; it shows
//!   in the metrics instead (`zlink_store_errors_total`).
//!
//! HTTP is `tiny_http`'s, served on threads of their own, never a shard's;
//! they stay up while the node drains, so a probe sees the drain through.
//! Two threads take requests, so a liveness probe does not wait behind a
//! scrape (which waits up to 500 ms for the shards' answers).

use std::net::SocketAddr;
use std::sync::Arc;

use zlink::api::{NodeMetrics, METRICS_CONTENT_TYPE};

/// Threads answering requests.
const SERVERS: usize = 2;

/// The endpoint's listener, bound before the node starts so that an
/// address in use fails the start before any lease is taken.
pub struct Endpoint {
    server: Arc<tiny_http::Server>,
    address: SocketAddr,
}

impl Endpoint {
    /// Binds `address` (port 0: any free port).
    pub fn bind(address: SocketAddr) -> Result<Self, String> {
        let server = tiny_http::Server::http(address)
            .map_err(|e| format!("listen.metrics: cannot listen on {address}: {e}"))?;
        let address = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("listen.metrics: {address} is not an IP address"))?;
        Ok(Self {
            server: Arc::new(server),
            address,
        })
    }

    /// The address it listens on (the bound port when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves `metrics` from now on, on threads of their own, until the
    /// process exits.
    pub fn serve(self, metrics: &NodeMetrics) -> Result<(), String> {
        for index in 0..SERVERS {
            let (server, metrics) = (Arc::clone(&self.server), metrics.clone());
            std::thread::Builder::new()
                .name(format!("zlink-node-probes-{index}"))
                .spawn(move || {
                    // `recv` fails only when the listener is gone.
                    while let Ok(request) = server.recv() {
                        answer(request, &metrics);
                    }
                })
                .map_err(|e| format!("listen.metrics: cannot start its thread: {e}"))?;
        }
        Ok(())
    }
}

/// Answers one request; a client that went away is not an error here.
fn answer(request: tiny_http::Request, metrics: &NodeMetrics) {
    let path = request.url().split('?').next().unwrap_or("");
    let is_get = matches!(request.method(), tiny_http::Method::Get);
    let (status, content_type, body) = match (is_get, path) {
        (true, "/metrics") => (200, METRICS_CONTENT_TYPE, metrics.encode()),
        (true, "/healthz") => (200, TEXT, "ok\n".to_owned()),
        (true, "/readyz") => {
            let readiness = metrics.readiness();
            let status = if readiness.is_ready() { 200 } else { 503 };
            (status, TEXT, format!("{readiness}\n"))
        }
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
