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
//! HTTP is hyper's (HTTP/1.1), on a single-threaded tokio runtime on a
//! thread of its own, never a shard's, from before the node starts
//! (`/readyz` says `starting` while the start waits for a predecessor's
//! lease) to the process's exit, so a probe sees the drain through. Each
//! connection is a task, so an idle or slow client holds no thread and no
//! probe waits behind it (with tiny_http, used until 7 December 2026, each
//! connection held a pool thread, and eight idle ones made `/healthz`
//! hang: a liveness probe would have restarted a node that served):
//!
//! - a connection that sends no whole request head within
//!   [`HEADER_TIMEOUT`] of its accept or of its last answer (idle
//!   keep-alive, a slow writer) is closed;
//! - a connection lives at most [`CONNECTION_LIFETIME`] (a client that
//!   does not read its answer);
//! - at most [`CONNECTIONS_MAX`] are open at once, and
//!   [`CONNECTIONS_PER_ADDRESS_MAX`] from one address; one over either is
//!   closed at its accept;
//! - a request head may take [`HEAD_MAX`] bytes (431 past it);
//! - a scrape waits up to 500 ms for the shards' answers, so it is encoded
//!   on a blocking thread, at most [`SCRAPES`] at once: a probe never waits
//!   behind a scrape.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use zlink::api::{NodeMetrics, METRICS_CONTENT_TYPE};

/// How long a connection may take to send a whole request head, from its
/// accept or from its last answer.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection lives at most.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Connections open at once at most: probes and scrapes need a handful,
/// and each is a descriptor that zlink-node keeps back from its sessions
/// (main.rs), so that the endpoint can always accept.
pub const CONNECTIONS_MAX: usize = 64;
/// Connections open at once from one address at most: one local client
/// cannot hold every connection the endpoint takes, which would refuse the
/// kubelet's probes (a liveness probe refused restarts a node that serves).
pub const CONNECTIONS_PER_ADDRESS_MAX: usize = 16;
/// The bytes a connection may buffer for a request head: the probes' heads
/// are a few hundred bytes; hyper's default (about 400 KB) let 1,024
/// connections hold 400 MB. A larger head is answered 431.
///
/// The endpoint so holds at most 64 × 16 KiB of heads, and as many
/// descriptors as zlink-node keeps back for it.
pub const HEAD_MAX: usize = 16 * 1024;
/// Scrapes encoded at once at most.
pub const SCRAPES: usize = 2;
/// How long the listener rests after an accept failed (out of
/// descriptors): the failure would repeat at once.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

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
        let listener = std::net::TcpListener::bind(address)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .map_err(|e| format!("listen.metrics: cannot listen on {address}: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("listen.metrics: {address}: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(SCRAPES)
            .thread_name("zlink-node-scrape")
            .build()
            .map_err(|e| format!("listen.metrics: cannot start its runtime: {e}"))?;
        let node: Arc<OnceLock<NodeMetrics>> = Arc::default();
        let served = Arc::clone(&node);
        std::thread::Builder::new()
            .name("zlink-node-probes".to_owned())
            .spawn(move || runtime.block_on(serve(listener, served)))
            .map_err(|e| format!("listen.metrics: cannot start its thread: {e}"))?;
        Ok(Self { node, address })
    }

    /// The address it listens on (the bound port when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The node started: report on it from now on, until the process
    /// exits (through its drain: the thread outlives the node).
    pub fn attach(&self, metrics: NodeMetrics) {
        let _ = self.node.set(metrics);
    }
}

/// Accepts connections until the process exits, each served as a task.
async fn serve(listener: std::net::TcpListener, node: Arc<OnceLock<NodeMetrics>>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "listen.metrics: the endpoint cannot serve");
            return;
        }
    };
    let open = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let by_address: Arc<Mutex<HashMap<IpAddr, usize>>> = Arc::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::debug!(%error, "listen.metrics: accept failed");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let Some(slot) = AddressSlot::take(&by_address, peer.ip()) else {
            tracing::debug!(
                %peer,
                "listen.metrics: {CONNECTIONS_PER_ADDRESS_MAX} connections open from this \
                 address; closing a new one"
            );
            continue;
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            tracing::debug!(
                "listen.metrics: {CONNECTIONS_MAX} connections open; closing a new one"
            );
            continue;
        };
        let node = Arc::clone(&node);
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, Arc::clone(&node)));
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(HEAD_MAX)
                .serve_connection(TokioIo::new(stream), service);
            // A connection that errs or overstays ends here; either way
            // the client is gone or dropped, which is not an error here.
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
            drop((permit, slot));
        });
    }
}

/// One open connection counted against its address
/// ([`CONNECTIONS_PER_ADDRESS_MAX`]); given back when dropped.
struct AddressSlot {
    by_address: Arc<Mutex<HashMap<IpAddr, usize>>>,
    address: IpAddr,
}

impl AddressSlot {
    /// A slot for `address`, unless it has as many open as it may.
    fn take(by_address: &Arc<Mutex<HashMap<IpAddr, usize>>>, address: IpAddr) -> Option<Self> {
        let mut open = by_address.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(address).or_default();
        if *count >= CONNECTIONS_PER_ADDRESS_MAX {
            return None;
        }
        *count += 1;
        Some(Self {
            by_address: Arc::clone(by_address),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// Answers one request. The node's metrics are `None` until it started.
async fn answer(
    request: Request<Incoming>,
    node: Arc<OnceLock<NodeMetrics>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let is_get = request.method() == Method::GET;
    let metrics = node.get();
    let (status, content_type, body) = match (is_get, request.uri().path()) {
        (true, "/healthz") => (StatusCode::OK, TEXT, "ok\n".to_owned()),
        (true, "/metrics") => match metrics.cloned() {
            Some(metrics) => match tokio::task::spawn_blocking(move || metrics.encode()).await {
                Ok(text) => (StatusCode::OK, METRICS_CONTENT_TYPE, text),
                Err(error) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    TEXT,
                    format!("metrics: the scrape failed: {error}\n"),
                ),
            },
            None => (
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                "starting\n".to_owned(),
            ),
        },
        (true, "/readyz") => match metrics.map(NodeMetrics::readiness) {
            Some(readiness) if readiness.is_ready() => {
                (StatusCode::OK, TEXT, format!("{readiness}\n"))
            }
            Some(readiness) => (
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                format!("{readiness}\n"),
            ),
            None => (
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                "starting\n".to_owned(),
            ),
        },
        (false, "/metrics" | "/healthz" | "/readyz") => (
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "only GET is served\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: GET /metrics, /healthz or /readyz\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// The `Content-Type` of the probes' plain answers.
const TEXT: &str = "text/plain; charset=utf-8";
