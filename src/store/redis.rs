//! The Redis Location Store: one store for the nodes of many processes and
//! hosts (§3, issue 6), behind the same [`LocationStore`] trait as the
//! embedded one, with the same outcomes and errors.
//!
//! # Ground rules
//!
//! - Every operation is one atomic server-side step: a Lua script (run with
//!   EVALSHA, loaded again on NOSCRIPT after a server restart) that touches
//!   one key. An Actor's row is one hash, `zlink:<cluster>:actor:{<ActorId>}`;
//!   a node's lease is one hash, `zlink:<cluster>:lease:{<NodeRid>}`;
//!   the membership is one hash per cluster, `zlink:<cluster>:members`. Each
//!   key is its own hash slot, so the scripts run on Redis Cluster.
//! - A row's liveness depends on its owner's lease, which lives in another
//!   slot. A row caches a bound, `lease_until`: the server time until which
//!   the lease it names is known live. A lapsed lease never comes back, so
//!   "lease G lapsed" stays true once read; a lease is never shortened
//!   except by its holder's release, so "lease G of node N is live until T"
//!   stays true unless G is released before T. When the cached bound is
//!   past, the script answers `need`; the client reads the owner's lease and
//!   runs the script again with that fact. Only the lease's own key ever
//!   decides that a lease lapsed (docs/store.md "Rows and leases in
//!   different slots").
//! - A release ([`LocationStore::release_lease`]) ends the lease on its own
//!   key at once, and marks the membership entry released. It cannot reach
//!   the rows (other slots), so their cached bounds may still say live; but
//!   every bound anyone holds was read from the lease key before the
//!   release, when the lease was live, so none is later than the expiry
//!   the lease had at the release: that is the window in which a row of a
//!   released lease may still be taken as live (docs/store.md "Clean stop:
//!   releasing the lease"). The releasing client forgets its own bound.
//! - Lease expiry is the server's clock (TIME inside the script). The
//!   [`OwnerLease::expires_at`] a caller gets is the store's [`Clock`] read
//!   *before* the request was sent plus the term, so it is never later than
//!   the moment the server stops treating the lease as live (§5).
//! - Connection loss, a timeout or a malformed reply is
//!   [`StoreError::Unavailable`]; the connection is dropped and the next call
//!   connects again. Every call has a timeout (connect, read and write).
//! - TLS (`rediss://`, [`RedisTls`]) always verifies the server's
//!   certificate, against the configured CA file only when one is given; a
//!   URL that asks to skip that (`#insecure`) is refused at [`RedisStore::open`],
//!   as is a TLS setting on a plaintext URL (it would silently go
//!   unencrypted). The files are read and checked at `open`, so a bad one
//!   is a startup error naming its setting, not a failure of every call.
//! - The store is off every hot path (bind, relay, push and disconnect never
//!   call it), so one connection serves the process. It lives on a thread
//!   of its own that makes every socket call, and a caller waits for its
//!   answer: a shard's io_uring flags its thread as signalled when a
//!   completion arrives, and a socket read with a timeout made on that
//!   thread would fail with EINTR under load (a spurious `Unavailable`,
//!   `x21_store_outage_within_the_lease_…` in tests/rt_fences.rs), while
//!   waiting for the answer retries the interrupted wait.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc::{channel, sync_channel, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{
    AbortOutcome, CasOutcome, Clock, Created, LocationRow, LocationStore, Member, MonotonicClock,
    OwnerClaim, OwnerLease, RemoveOutcome, RowVersion, StoreError,
};
use crate::ids::{
    ActorId, ActorLocation, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId,
};
use crate::time::Instant;

/// How many times a row script is run again for one operation: once per
/// lease fact it asks for, and once to refresh the claimant's lease. More
/// means other clients kept changing the row's owner under it.
const ATTEMPTS_MAX: usize = 8;

/// A membership entry's `until` once its lifecycle released the lease it
/// registered under (`release_member.lua`); a registered bound is always a
/// server time in the future, never 0.
const RELEASED: u64 = 0;

/// Longest cluster name, in bytes.
pub const CLUSTER_LEN_MAX: usize = 64;

/// How to reach the Redis store and what it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisStoreConfig {
    /// `redis://host:port/db`, or `rediss://host:port/db` for TLS (the
    /// redis crate's URL form).
    pub url: String,
    /// Namespaces every key, so several clusters share one Redis: ASCII
    /// letters, digits, `.`, `_` and `-`, at most [`CLUSTER_LEN_MAX`] bytes
    /// (no braces: they would change the keys' hash tags).
    pub cluster: String,
    /// How long a lease lasts from each acquire or renewal (default 10 s).
    pub lease_term: Duration,
    /// The limit of each connect, write and read (default 500 ms): a hung
    /// server makes a call fail with `Unavailable`, never block for long.
    pub call_timeout: Duration,
    /// The ACL user to authenticate as (Redis 6+); `None`: the default user.
    pub username: Option<String>,
    /// The password (Redis `requirepass` or the ACL user's), read by the
    /// caller from a file or an environment variable, never from config
    /// text; `None`: no AUTH. Debug output shows only whether one is set.
    pub password: Option<RedisPassword>,
    /// The files TLS needs, for a `rediss://` URL; `None` with `rediss://`:
    /// the server's certificate must chain to a public (Mozilla) root.
    /// Refused with a `redis://` URL, which would ignore it.
    pub tls: Option<RedisTls>,
}

/// TLS to the store (docs/store.md "TLS"): the PEM files, read once by
/// [`RedisStore::open`] (a renewed certificate takes a restart). The
/// server's certificate is always verified: it must chain to a CA trusted
/// here and name the URL's host (a DNS name, or an IP address in its
/// subject alternative names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// The CA certificate(s) the server's certificate must chain to. When
    /// set, only these are trusted (a private CA, as a self-hosted Redis
    /// has); `None`: Mozilla's roots, for a managed Redis with a public
    /// certificate. Never the system's trust store, so a node trusts the
    /// same CAs on every host.
    pub ca_file: Option<PathBuf>,
    /// This client's certificate chain, for a server that demands one
    /// (`tls-auth-clients yes`); given together with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The private key of `cert_file` (PKCS#8, PKCS#1 or SEC1). A secret:
    /// only its path is ever in config text or Debug output.
    pub key_file: Option<PathBuf>,
}

/// A Redis password: kept out of logs (its Debug form is `***`).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisPassword(pub String);

impl std::fmt::Debug for RedisPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl RedisStoreConfig {
    /// The store at `url` for `cluster`, with the default term and timeout.
    pub fn new(url: impl Into<String>, cluster: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster: cluster.into(),
            lease_term: Duration::from_secs(10),
            call_timeout: Duration::from_millis(500),
            username: None,
            password: None,
            tls: None,
        }
    }
}

/// Why a [`RedisStore`] could not be built (nothing is connected yet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The URL does not parse as a Redis URL.
    #[error("store.url: {0}")]
    Url(String),
    /// The thread that owns the connection could not be started.
    #[error("store: no thread for the redis connection: {0}")]
    Thread(String),
    /// The cluster name is empty, too long or has a character keys cannot carry.
    #[error("store.cluster {0:?}: 1 to 64 ASCII letters, digits, '.', '_' or '-'")]
    Cluster(String),
    /// A zero lease term or call timeout.
    #[error("store.{0} must be greater than zero")]
    Zero(&'static str),
    /// TLS cannot work as configured: a file that cannot be read or holds
    /// no usable certificate or key, a certificate without its key, TLS
    /// settings on a plaintext URL, or a URL that would skip verifying the
    /// server (`#insecure`). `setting` names the key (`store.tls.ca_file`,
    /// `store.url`, …).
    #[error("{setting}: {detail}")]
    Tls {
        /// The setting at fault, as zlink-node's config names it.
        setting: &'static str,
        /// What is wrong with it.
        detail: String,
    },
}

/// A [`LocationStore`] kept in Redis (module doc). Leases are stamped by
/// `clock`, the frame of every [`OwnerLease::expires_at`] it returns.
pub struct RedisStore<C: Clock = MonotonicClock> {
    /// Hands each call to the connection thread ([`Connection::serve`]).
    calls: Mutex<Sender<Call>>,
    prefix: String,
    clock: C,
    lease_term: Duration,
    call_timeout: Duration,
    scripts: Scripts,
    /// The newest live bound this client read for each node's lease; any
    /// bound once read stays a valid fact (module doc), so a stale one only
    /// costs a round trip.
    known: Mutex<HashMap<NodeRid, KnownLease>>,
}

impl<C: Clock> std::fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("keys", &self.prefix)
            .field("lease_term", &self.lease_term)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

struct Scripts {
    lookup: Arc<::redis::Script>,
    create: Arc<::redis::Script>,
    cas: Arc<::redis::Script>,
    abort: Arc<::redis::Script>,
    remove: Arc<::redis::Script>,
    acquire: Arc<::redis::Script>,
    renew: Arc<::redis::Script>,
    read_lease: Arc<::redis::Script>,
    release: Arc<::redis::Script>,
    register_member: Arc<::redis::Script>,
    release_member: Arc<::redis::Script>,
    members: Arc<::redis::Script>,
}

/// A script is its prelude and its body. The `#!lua` shebang opts into
/// Redis 7's strict script mode: a script that touched keys of two hash
/// slots fails even on a server that owns every slot, so the one-node
/// Cluster run of the test suite proves each script stays in one slot.
macro_rules! script {
    ($prelude:literal, $body:literal) => {
        Arc::new(::redis::Script::new(concat!(
            "#!lua\n",
            include_str!($prelude),
            "\n",
            include_str!($body)
        )))
    };
}

impl Scripts {
    fn new() -> Self {
        Self {
            lookup: script!("redis/row.lua", "redis/lookup.lua"),
            create: script!("redis/row.lua", "redis/create.lua"),
            cas: script!("redis/row.lua", "redis/cas.lua"),
            abort: script!("redis/row.lua", "redis/abort.lua"),
            remove: script!("redis/row.lua", "redis/remove.lua"),
            acquire: script!("redis/lease.lua", "redis/acquire.lua"),
            renew: script!("redis/lease.lua", "redis/renew.lua"),
            read_lease: script!("redis/lease.lua", "redis/read_lease.lua"),
            release: script!("redis/lease.lua", "redis/release.lua"),
            register_member: script!("redis/member.lua", "redis/register_member.lua"),
            release_member: script!("redis/member.lua", "redis/release_member.lua"),
            members: script!("redis/member.lua", "redis/members.lua"),
        }
    }
}

/// A node's lease as one read found it, in the server's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KnownLease {
    node_generation: NodeGeneration,
    generation: OwnerLeaseGeneration,
    mesh: MeshName,
    expires_us: u64,
}

/// A lease record and the server time of the reply that carried it.
struct LeaseRecord {
    lease: KnownLease,
    server_now_us: u64,
}

impl LeaseRecord {
    fn is_live(&self) -> bool {
        self.server_now_us < self.lease.expires_us
    }

    /// The record as the owner's lease, expiring at `sent` plus what the
    /// server says is left: never later than the server's own expiry.
    fn owner_lease(&self, node: NodeRid, sent: Instant) -> OwnerLease {
        let left_us = self.lease.expires_us.saturating_sub(self.server_now_us);
        OwnerLease {
            node,
            node_generation: self.lease.node_generation,
            mesh: self.lease.mesh.clone(),
            generation: self.lease.generation,
            expires_at: sent + Duration::from_micros(left_us),
        }
    }
}

/// What a row script may be told about a lease: `[owner, generation, until]`.
type Fact = [String; 3];

/// One script call for the connection thread, and where its answer goes.
struct Call {
    script: Arc<::redis::Script>,
    key: String,
    args: Vec<String>,
    answer: SyncSender<Result<Vec<String>, StoreError>>,
}

/// The store's one connection, owned by its own thread (module doc).
struct Connection {
    client: ::redis::Client,
    /// A `rediss://` store: its failures are explained as TLS ones.
    tls: bool,
    call_timeout: Duration,
    open: Option<::redis::Connection>,
}

impl Connection {
    /// Answers calls in order until the store is dropped.
    fn serve(mut self, queue: &std::sync::mpsc::Receiver<Call>) {
        while let Ok(call) = queue.recv() {
            let answer = self.invoke(&call.script, &call.key, &call.args);
            // The caller waits for the answer; it cannot have gone.
            let _ = call.answer.send(answer);
        }
    }

    /// Runs `script` on `key` with `args`, connecting first if there is no
    /// connection. Any failure drops the connection (its state is unknown
    /// after a timeout), so the next call starts afresh.
    fn invoke(
        &mut self,
        script: &::redis::Script,
        key: &str,
        args: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let connection = match &mut self.open {
            Some(connection) => connection,
            None => self.open.insert(self.connect()?),
        };
        let mut invocation = script.prepare_invoke();
        invocation.key(key);
        for arg in args {
            invocation.arg(arg.as_str());
        }
        let reply = invocation.invoke::<Vec<String>>(connection);
        reply.map_err(|error| {
            self.open = None;
            store_error(&error, format!("redis: {}", explain(&error)))
        })
    }

    fn connect(&self) -> Result<::redis::Connection, StoreError> {
        let unavailable = |error: ::redis::RedisError| StoreError::Unavailable(explain(&error));
        let connection = self
            .client
            .get_connection_with_timeout(self.call_timeout)
            .map_err(|error| {
                let detail = setup_failure(&error, self.tls).unwrap_or_else(|| explain(&error));
                store_error(&error, detail)
            })?;
        connection
            .set_read_timeout(Some(self.call_timeout))
            .map_err(unavailable)?;
        connection
            .set_write_timeout(Some(self.call_timeout))
            .map_err(unavailable)?;
        Ok(connection)
    }
}

/// The store's client: plaintext for `redis://`; for `rediss://`, TLS
/// with the CA and client certificate of `tls`, each file read and checked
/// here so that a bad one is a startup error naming its setting.
fn tls_client(
    info: ::redis::ConnectionInfo,
    tls: Option<&RedisTls>,
) -> Result<::redis::Client, RedisConfigError> {
    let url_error = |e: ::redis::RedisError| RedisConfigError::Url(e.to_string());
    let refused = |setting, detail: &str| RedisConfigError::Tls {
        setting,
        detail: detail.to_owned(),
    };
    let insecure = match &info.addr {
        ::redis::ConnectionAddr::TcpTls { insecure, .. } => *insecure,
        _ => {
            if tls.is_some() {
                return Err(refused(
                    "store.url",
                    "is not rediss:// but TLS files are set (store.tls): the connection \
                     would not be encrypted; use a rediss:// URL",
                ));
            }
            return ::redis::Client::open(info).map_err(url_error);
        }
    };
    if insecure {
        return Err(refused(
            "store.url",
            "#insecure would accept any server certificate; zlink always verifies it \
             (store.tls.ca_file names a private CA)",
        ));
    }
    install_crypto_provider();
    let tls = tls.cloned().unwrap_or_default();
    let certificates = ::redis::TlsCertificates {
        client_tls: client_certificate(&tls)?,
        root_cert: tls.ca_file.as_deref().map(read_ca).transpose()?,
    };
    ::redis::Client::build_with_tls(info, certificates).map_err(|e| RedisConfigError::Tls {
        setting: "store.tls",
        detail: e.to_string(),
    })
}

/// The CA file's PEM text, once each certificate in it is known to be a
/// usable trust anchor.
fn read_ca(path: &Path) -> Result<Vec<u8>, RedisConfigError> {
    let (pem, certificates) = read_certificates(path, "store.tls.ca_file")?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates {
        roots.add(certificate).map_err(|e| RedisConfigError::Tls {
            setting: "store.tls.ca_file",
            detail: format!("{}: not a usable CA certificate: {e}", path.display()),
        })?;
    }
    Ok(pem)
}

/// The client certificate and key of `tls`, if any: both or neither, the
/// key one rustls can sign with and the certificate's own (checked here
/// rather than at the first connect, so a wrong pair is a startup error).
fn client_certificate(
    tls: &RedisTls,
) -> Result<Option<::redis::ClientTlsConfig>, RedisConfigError> {
    use rustls::pki_types::pem::PemObject;
    let missing = |setting, detail: &str| RedisConfigError::Tls {
        setting,
        detail: detail.to_owned(),
    };
    let (cert_file, key_file) =
        match (&tls.cert_file, &tls.key_file) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(missing(
                    "store.tls.key_file",
                    "missing: store.tls.cert_file needs the private key it was issued for",
                ))
            }
            (None, Some(_)) => return Err(missing(
                "store.tls.cert_file",
                "missing: store.tls.key_file is the key of a client certificate, which is not set",
            )),
            (Some(cert_file), Some(key_file)) => (cert_file, key_file),
        };
    let (client_cert, chain) = read_certificates(cert_file, "store.tls.cert_file")?;
    let client_key = read_file(key_file, "store.tls.key_file")?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&client_key).map_err(|e| {
        RedisConfigError::Tls {
            setting: "store.tls.key_file",
            detail: format!(
                "no PEM private key (PKCS#8, PKCS#1 or SEC1) in {}: {e}",
                key_file.display()
            ),
        }
    })?;
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)
        .map_err(|e| RedisConfigError::Tls {
            setting: "store.tls.key_file",
            detail: format!("does not go with store.tls.cert_file: {e}"),
        })?;
    Ok(Some(::redis::ClientTlsConfig {
        client_cert,
        client_key,
    }))
}

/// Makes ring rustls's process-wide crypto provider unless one is already
/// installed. The redis crate's rustls is built without a provider and
/// takes the process default; with two providers compiled in (an embedding
/// program may enable aws-lc-rs) rustls would panic on the connection
/// thread instead of choosing. A provider installed first by the program
/// is kept, so a program that wants aws-lc-rs (with its post-quantum key
/// exchange) installs it before it opens the store.
///
/// rustls 0.23.48 deprecates ring's provider for lacking post-quantum key
/// exchange. It stays the default here on purpose: aws-lc-rs is a large C
/// build (CI builds cold on 2 cores), and what crosses this link — rows
/// and leases of live Actors — is worth nothing years later, which is the
/// threat post-quantum exchange answers.
#[allow(deprecated)]
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn read_file(path: &Path, setting: &'static str) -> Result<Vec<u8>, RedisConfigError> {
    std::fs::read(path).map_err(|e| RedisConfigError::Tls {
        setting,
        detail: format!("cannot read {}: {e}", path.display()),
    })
}

/// The PEM text of `path` and the certificates in it: at least one, or the
/// file is refused (an empty CA list would refuse every server, call after
/// call, instead of once at startup).
fn read_certificates(
    path: &Path,
    setting: &'static str,
) -> Result<(Vec<u8>, Vec<rustls::pki_types::CertificateDer<'static>>), RedisConfigError> {
    use rustls::pki_types::pem::PemObject;
    let pem = read_file(path, setting)?;
    let certificates = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RedisConfigError::Tls {
            setting,
            detail: format!("{}: not PEM certificates: {e}", path.display()),
        })?;
    if certificates.is_empty() {
        return Err(RedisConfigError::Tls {
            setting,
            detail: format!("no PEM certificate in {}", path.display()),
        });
    }
    Ok((pem, certificates))
}

/// A redis error as its text, plus what a TLS failure means for the
/// operator: the bare rustls text ("invalid peer certificate:
/// UnknownIssuer") does not say which setting to look at.
fn explain(error: &::redis::RedisError) -> String {
    match tls_error(error) {
        Some(tls) => {
            let hint = match tls {
                rustls::Error::InvalidCertificate(_) => {
                    "the server's certificate was refused: it must chain to a CA of \
                     store.tls.ca_file and name the URL's host"
                }
                rustls::Error::InvalidMessage(_) => {
                    "the server does not speak TLS on this port (a plaintext Redis? \
                     then the URL is redis://)"
                }
                rustls::Error::AlertReceived(_) => {
                    "the server refused the TLS handshake (a server with tls-auth-clients \
                     needs store.tls.cert_file and store.tls.key_file of a CA it trusts)"
                }
                _ => "the TLS handshake failed",
            };
            format!("TLS: {hint}: {tls}")
        }
        // A socket read or write past its timeout reports EAGAIN ("Resource
        // temporarily unavailable"), which reads like a refusal: an
        // operator looking at a hung Redis is told it did not answer.
        None if error.is_timeout() => {
            format!("no answer within the call timeout (store.call_timeout_ms): {error}")
        }
        None => error.to_string(),
    }
}

/// `error` as a store error with `detail`: a refusal when the server
/// answered and will not serve this client as configured (an auth or
/// permission error, a TLS certificate or handshake it refused: see
/// [`StoreError::Refused`]), else unavailable (no answer, a lost
/// connection), which may pass.
fn store_error(error: &::redis::RedisError, detail: String) -> StoreError {
    let refused_tls = matches!(
        tls_error(error),
        Some(
            rustls::Error::InvalidCertificate(_)
                | rustls::Error::AlertReceived(_)
                | rustls::Error::InvalidMessage(_)
        )
    );
    let refused_auth = error.kind() == ::redis::ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"));
    if refused_tls || refused_auth {
        StoreError::Refused(detail)
    } else {
        StoreError::Unavailable(detail)
    }
}

/// The rustls error behind `error`, if a TLS failure caused it. rustls
/// reports through `std::io::Error`, whose `source()` skips the error it
/// wraps, so each io error is opened with `get_ref`.
fn tls_error(error: &::redis::RedisError) -> Option<&rustls::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let wrapped = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if wrapped.is_some() {
            return wrapped;
        }
        cause = error.source();
    }
    None
}

/// What a connection that failed while it was being set up most likely
/// means, when the server answers nothing a client could read:
///
/// - plaintext, closed by the server: a Redis at its `maxclients` limit
///   (it writes its error and closes before any request, and the client
///   reads only the close), or a port that speaks TLS only, which drops
///   the plaintext request as a bad handshake. Both are named: a hint
///   that named only the second sent an operator of a full Redis to the
///   URL;
/// - TLS, no answer within the timeout: a hung server, or a plaintext port
///   (Redis reads the TLS hello as a command that never ends).
fn setup_failure(error: &::redis::RedisError, tls: bool) -> Option<String> {
    use std::error::Error;
    use std::io::ErrorKind;
    let kind = error
        .source()
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind)?;
    let hint = match (tls, kind) {
        (false, ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe) => {
            "the server closed the connection as it was set up: a Redis at its maxclients \
             limit does so (its INFO clients says how many it holds), and so does a port \
             that speaks TLS only (then the URL is rediss://)"
        }
        (true, ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            "TLS: no answer to the handshake within the call timeout: a hung server, or \
             a port that speaks plaintext (then the URL is redis://)"
        }
        _ => return None,
    };
    Some(format!("{error} ({hint})"))
}

impl<C: Clock> RedisStore<C> {
    /// A store for `config`; nothing is connected until the first call.
    pub fn open(config: RedisStoreConfig, clock: C) -> Result<Self, RedisConfigError> {
        let cluster_ok = !config.cluster.is_empty()
            && config.cluster.len() <= CLUSTER_LEN_MAX
            && config
                .cluster
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !cluster_ok {
            return Err(RedisConfigError::Cluster(config.cluster));
        }
        if config.lease_term.is_zero() {
            return Err(RedisConfigError::Zero("lease_term"));
        }
        if config.call_timeout.is_zero() {
            return Err(RedisConfigError::Zero("call_timeout"));
        }
        let mut info = ::redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(|e| RedisConfigError::Url(e.to_string()))?;
        // Credentials given apart from the URL win over any in it: the URL
        // lives in config text, the password in a file or the environment.
        if let Some(username) = &config.username {
            info.redis.username = Some(username.clone());
        }
        if let Some(password) = &config.password {
            info.redis.password = Some(password.0.clone());
        }
        let tls = matches!(info.addr, ::redis::ConnectionAddr::TcpTls { .. });
        let client = tls_client(info, config.tls.as_ref())?;
        let (calls, queue) = channel();
        let connection = Connection {
            client,
            tls,
            call_timeout: config.call_timeout,
            open: None,
        };
        std::thread::Builder::new()
            .name("zlink-redis".into())
            .spawn(move || connection.serve(&queue))
            .map_err(|e| RedisConfigError::Thread(e.to_string()))?;
        Ok(Self {
            calls: Mutex::new(calls),
            prefix: format!("zlink:{}:", config.cluster),
            clock,
            lease_term: config.lease_term,
            call_timeout: config.call_timeout,
            scripts: Scripts::new(),
            known: Mutex::new(HashMap::new()),
        })
    }

    fn actor_key(&self, actor: &ActorId) -> String {
        format!("{}actor:{{{}}}", self.prefix, actor.as_str())
    }

    fn lease_key(&self, node: NodeRid) -> String {
        format!("{}lease:{{{}}}", self.prefix, node.0)
    }

    /// The cluster's one membership hash: few nodes, so one key (one slot)
    /// lists them all in one round trip (docs/store.md "Membership").
    fn members_key(&self) -> String {
        format!("{}members", self.prefix)
    }

    fn term_us(&self) -> String {
        u64::try_from(self.lease_term.as_micros())
            .unwrap_or(u64::MAX)
            .to_string()
    }

    /// Runs `script` on `key` with `args` on the connection thread and
    /// waits for its answer (module doc: no socket call on the caller's
    /// thread).
    fn invoke(
        &self,
        script: &Arc<::redis::Script>,
        key: &str,
        args: &[&str],
    ) -> Result<Vec<String>, StoreError> {
        super::assert_off_shard(key);
        let (answer, answered) = sync_channel(1);
        let call = Call {
            script: Arc::clone(script),
            key: key.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            answer,
        };
        let gone = || StoreError::Unavailable("the redis connection thread ended".into());
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(call)
            .map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }

    fn known(&self) -> MutexGuard<'_, HashMap<NodeRid, KnownLease>> {
        // The map holds only facts that stay true; a panic cannot make one false.
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers a live bound of `node`'s lease if it is newer than the one known.
    fn learn(&self, node: NodeRid, record: &LeaseRecord) {
        if !record.is_live() {
            return;
        }
        let mut known = self.known();
        let newer = !known.get(&node).is_some_and(|old| {
            old.generation == record.lease.generation && old.expires_us >= record.lease.expires_us
        });
        if newer {
            known.insert(node, record.lease.clone());
        }
    }

    /// Forgets this client's bound of `lease` once it was released: read
    /// before the release, the bound is no longer a fact (module doc).
    fn forget(&self, lease: &OwnerLease) {
        let mut known = self.known();
        let same = known.get(&lease.node).is_some_and(|known| {
            known.node_generation == lease.node_generation && known.generation == lease.generation
        });
        if same {
            known.remove(&lease.node);
        }
    }

    /// Reads `node`'s lease record as it is now.
    fn read_lease(&self, node: NodeRid) -> Result<Option<LeaseRecord>, StoreError> {
        let reply = self.invoke(&self.scripts.read_lease, &self.lease_key(node), &[])?;
        match tag(&reply)? {
            "none" => Ok(None),
            "lease" => {
                let record = lease_record(&reply)?;
                self.learn(node, &record);
                Ok(Some(record))
            }
            other => Err(malformed(other)),
        }
    }

    /// What a row script needs to know about the lease `generation` of
    /// `owner`: live until a server time, or lapsed ("-1").
    fn fact(&self, owner: NodeRid, generation: OwnerLeaseGeneration) -> Result<Fact, StoreError> {
        let until = match self.read_lease(owner)? {
            Some(record) if record.is_live() && record.lease.generation == generation => {
                record.lease.expires_us.to_string()
            }
            _ => "-1".to_owned(),
        };
        Ok([owner.0.to_string(), generation.0.to_string(), until])
    }

    /// The server time until which `claim`'s lease is known live: from what
    /// this client knows unless `fresh`, else read now. A claim that is not
    /// its node's live lease fails with `LeaseExpired`, like the embedded
    /// store's.
    fn claim_until(&self, claim: &OwnerClaim, fresh: bool) -> Result<String, StoreError> {
        let matches = |lease: &KnownLease| {
            lease.node_generation == claim.node_generation
                && lease.generation == claim.lease
                && lease.mesh == claim.mesh
        };
        if !fresh {
            if let Some(lease) = self.known().get(&claim.owner).filter(|l| matches(l)) {
                return Ok(lease.expires_us.to_string());
            }
        }
        match self.read_lease(claim.owner)? {
            Some(record) if record.is_live() && matches(&record.lease) => {
                Ok(record.lease.expires_us.to_string())
            }
            _ => Err(StoreError::LeaseExpired { node: claim.owner }),
        }
    }

    /// Runs a row script until it decides: with the lease fact it asks for
    /// (`need`), and with a fresh bound of the claimant's lease when the
    /// known one is past (`claim`). `args` follow the fact; the claim's five
    /// arguments, when there is a claim, come last.
    fn run_row(
        &self,
        script: &Arc<::redis::Script>,
        actor: &ActorId,
        args: &[&str],
        claim: Option<&OwnerClaim>,
    ) -> Result<Vec<String>, StoreError> {
        let key = self.actor_key(actor);
        let mut fact: Fact = Default::default();
        let mut fresh_claim = false;
        for _ in 0..ATTEMPTS_MAX {
            let claim_args = match claim {
                Some(claim) => {
                    let until = self.claim_until(claim, fresh_claim)?;
                    claim_args(claim, until)
                }
                None => Vec::new(),
            };
            let mut all: Vec<&str> = fact.iter().map(String::as_str).collect();
            all.extend_from_slice(args);
            all.extend(claim_args.iter().map(String::as_str));
            let reply = self.invoke(script, &key, &all)?;
            match tag(&reply)? {
                "need" => {
                    let owner = NodeRid(field(&reply, 1)?);
                    let generation = OwnerLeaseGeneration(field(&reply, 2)?);
                    fact = self.fact(owner, generation)?;
                }
                "claim" => fresh_claim = true,
                _ => return Ok(reply),
            }
        }
        Err(StoreError::Unavailable(format!(
            "the row of {actor} kept changing owner during {ATTEMPTS_MAX} attempts"
        )))
    }

    /// Sends a lease script, stamping the answer with the clock read before
    /// the request left.
    fn lease_call(
        &self,
        script: &Arc<::redis::Script>,
        node: NodeRid,
        args: &[&str],
    ) -> Result<(Vec<String>, Instant), StoreError> {
        let sent = self.clock.now();
        let reply = self.invoke(script, &self.lease_key(node), args)?;
        Ok((reply, sent))
    }
}

/// One node's entry in the membership hash, as `members.lua` returned it.
#[derive(Default)]
struct MemberEntry {
    node_generation: Option<NodeGeneration>,
    lease: Option<OwnerLeaseGeneration>,
    mesh: Option<MeshName>,
    address: Option<SocketAddr>,
    until_us: Option<u64>,
}

impl MemberEntry {
    /// Sets the field `name` from its text; an unknown name or a bad value
    /// is a malformed reply.
    fn set(&mut self, name: &str, value: &str) -> Result<(), StoreError> {
        let bad = || malformed(name);
        match name {
            "node_gen" => self.node_generation = Some(NodeGeneration(parse(value, bad)?)),
            "lease" => self.lease = Some(OwnerLeaseGeneration(parse(value, bad)?)),
            "mesh" => self.mesh = Some(MeshName::new(value).map_err(|_| bad())?),
            "addr" => self.address = Some(parse(value, bad)?),
            "until" => self.until_us = Some(parse(value, bad)?),
            _ => return Err(bad()),
        }
        Ok(())
    }
}

fn parse<T: FromStr>(text: &str, bad: impl Fn() -> StoreError) -> Result<T, StoreError> {
    text.parse().map_err(|_| bad())
}

/// `[tag, now, field, value, …]` as each node's entry.
fn member_entries(reply: &[String]) -> Result<BTreeMap<NodeRid, MemberEntry>, StoreError> {
    let mut entries: BTreeMap<NodeRid, MemberEntry> = BTreeMap::new();
    let pairs = reply.get(2..).unwrap_or_default();
    if pairs.len() % 2 != 0 {
        return Err(malformed("members"));
    }
    for pair in pairs.chunks_exact(2) {
        let (node, name) = pair[0].split_once(':').ok_or_else(|| malformed(&pair[0]))?;
        let node = NodeRid(parse(node, || malformed(&pair[0]))?);
        entries.entry(node).or_default().set(name, &pair[1])?;
    }
    Ok(entries)
}

fn claim_args(claim: &OwnerClaim, until: String) -> Vec<String> {
    vec![
        claim.mesh.as_str().to_owned(),
        claim.owner.0.to_string(),
        padded(claim.node_generation.0),
        claim.lease.0.to_string(),
        until,
    ]
}

/// A u64 whose order the scripts compare: zero-padded to 20 digits, so that
/// string order is numeric order (Lua's numbers are doubles, exact only to
/// 2^53).
fn padded(value: u64) -> String {
    format!("{value:020}")
}

fn malformed(what: &str) -> StoreError {
    StoreError::Unavailable(format!("malformed reply from the redis store: {what:?}"))
}

fn tag(reply: &[String]) -> Result<&str, StoreError> {
    reply
        .first()
        .map(String::as_str)
        .ok_or_else(|| malformed("empty"))
}

fn field<T: FromStr>(reply: &[String], index: usize) -> Result<T, StoreError> {
    reply
        .get(index)
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| malformed(reply.get(index).map_or("missing", String::as_str)))
}

fn mesh_field(reply: &[String], index: usize) -> Result<MeshName, StoreError> {
    reply
        .get(index)
        .and_then(|text| MeshName::new(text).ok())
        .ok_or_else(|| malformed("mesh"))
}

/// `[tag, object, authority, mesh, owner, node_gen, lease]` as a row.
fn row_reply(actor: &ActorId, reply: &[String]) -> Result<LocationRow, StoreError> {
    Ok(LocationRow {
        actor: actor.clone(),
        object: ObjectGeneration(field(reply, 1)?),
        location: ActorLocation {
            mesh: mesh_field(reply, 3)?,
            owner: NodeRid(field(reply, 4)?),
            node_generation: NodeGeneration(field(reply, 5)?),
            authority: AuthorityOwnerGeneration(field(reply, 2)?),
            lease: OwnerLeaseGeneration(field(reply, 6)?),
        },
    })
}

/// `[tag, node_gen, gen, mesh, expires, now]` as a lease record.
fn lease_record(reply: &[String]) -> Result<LeaseRecord, StoreError> {
    Ok(LeaseRecord {
        lease: KnownLease {
            node_generation: NodeGeneration(field(reply, 1)?),
            generation: OwnerLeaseGeneration(field(reply, 2)?),
            mesh: mesh_field(reply, 3)?,
            expires_us: field(reply, 4)?,
        },
        server_now_us: field(reply, 5)?,
    })
}

fn version_args(expected: RowVersion) -> [String; 2] {
    [
        expected.owner.0.to_string(),
        expected.authority.0.to_string(),
    ]
}

fn relocation_args(relocation: RelocationId) -> [String; 2] {
    [
        relocation.coordinator.0.to_string(),
        padded(relocation.sequence),
    ]
}

impl<C: Clock> LocationStore for RedisStore<C> {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        let reply = self.run_row(&self.scripts.lookup, actor, &[], None)?;
        match tag(&reply)? {
            "row" => row_reply(actor, &reply).map(Some),
            "absent" => Ok(None),
            other => Err(malformed(other)),
        }
    }

    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        let reply = self.run_row(&self.scripts.create, actor, &[], Some(owner))?;
        match tag(&reply)? {
            "new" => row_reply(actor, &reply).map(Created::New),
            "existing" => row_reply(actor, &reply).map(Created::Existing),
            other => Err(malformed(other)),
        }
    }

    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        let [owner, authority] = version_args(expected);
        let [coordinator, sequence] = relocation_args(relocation);
        let args = [&*owner, &*authority, &*coordinator, &*sequence];
        let reply = self.run_row(&self.scripts.cas, actor, &args, Some(new_owner))?;
        match tag(&reply)? {
            "swapped" => row_reply(actor, &reply).map(CasOutcome::Swapped),
            "conflict" => row_reply(actor, &reply).map(|current| CasOutcome::Conflict { current }),
            "absent" => Ok(CasOutcome::Absent),
            "aborted" => Ok(CasOutcome::RelocationAborted),
            other => Err(malformed(other)),
        }
    }

    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        let [owner, authority] = version_args(expected);
        let [coordinator, sequence] = relocation_args(relocation);
        let args = [&*owner, &*authority, &*coordinator, &*sequence];
        let reply = self.run_row(&self.scripts.abort, actor, &args, None)?;
        match tag(&reply)? {
            "aborted" => Ok(AbortOutcome::Aborted),
            "conflict" => {
                row_reply(actor, &reply).map(|current| AbortOutcome::Conflict { current })
            }
            "absent" => Ok(AbortOutcome::Absent),
            other => Err(malformed(other)),
        }
    }

    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        let [owner, authority] = version_args(expected);
        let reply = self.run_row(&self.scripts.remove, actor, &[&owner, &authority], None)?;
        match tag(&reply)? {
            "removed" => Ok(RemoveOutcome::Removed),
            "conflict" => {
                row_reply(actor, &reply).map(|current| RemoveOutcome::Conflict { current })
            }
            "absent" => Ok(RemoveOutcome::Absent),
            other => Err(malformed(other)),
        }
    }

    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        let generation = padded(node_generation.0);
        let term = self.term_us();
        let args = [&*generation, mesh.as_str(), &*term];
        let (reply, sent) = self.lease_call(&self.scripts.acquire, node, &args)?;
        let record = lease_record(&reply)?;
        match tag(&reply)? {
            "ok" => {
                self.learn(node, &record);
                Ok(record.owner_lease(node, sent))
            }
            "expired" => Err(StoreError::LeaseExpired { node }),
            "stale" => Err(StoreError::StaleNodeGeneration {
                node,
                offered: node_generation,
                latest: record.lease.node_generation,
            }),
            "held" => Err(StoreError::LeaseHeld {
                node,
                holder: record.lease.node_generation,
                expires_at: record.owner_lease(node, sent).expires_at,
            }),
            other => Err(malformed(other)),
        }
    }

    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        let generation = padded(lease.node_generation.0);
        let lease_generation = lease.generation.0.to_string();
        let term = self.term_us();
        let args = [&*generation, &*lease_generation, &*term];
        let (reply, sent) = self.lease_call(&self.scripts.renew, lease.node, &args)?;
        match tag(&reply)? {
            "ok" => {
                let record = lease_record(&reply)?;
                self.learn(lease.node, &record);
                Ok(record.owner_lease(lease.node, sent))
            }
            "expired" => Err(StoreError::LeaseExpired { node: lease.node }),
            other => Err(malformed(other)),
        }
    }

    /// Two one-key scripts: `release.lua` ends the lease on its own key
    /// (what acquire, renew, `lease` and every lease read go by), then
    /// `release_member.lua` marks the node's membership entry released, so
    /// no client lists it on a bound it remembers. Rows are not reached
    /// (other slots): a row naming the lease may be taken as live by its
    /// cached bound until the expiry the lease had at the release (module
    /// doc, docs/store.md "Clean stop: releasing the lease"). Both scripts
    /// are idempotent, so a retry after `Unavailable` completes the release.
    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        let node_generation = padded(lease.node_generation.0);
        let generation = lease.generation.0.to_string();
        let args = [&*node_generation, &*generation];
        let reply = self.invoke(&self.scripts.release, &self.lease_key(lease.node), &args)?;
        match tag(&reply)? {
            "released" | "over" => {}
            other => return Err(malformed(other)),
        }
        self.forget(lease);
        let node = lease.node.0.to_string();
        let args = [&*node, &*node_generation, &*generation];
        let reply = self.invoke(&self.scripts.release_member, &self.members_key(), &args)?;
        match tag(&reply)? {
            "released" | "over" => Ok(()),
            other => Err(malformed(other)),
        }
    }

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        let sent = self.clock.now();
        Ok(self
            .read_lease(node)?
            .filter(LeaseRecord::is_live)
            .map(|record| record.owner_lease(node, sent)))
    }

    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError> {
        let claim = lease.claim();
        let node = claim.owner.0.to_string();
        let node_generation = padded(claim.node_generation.0);
        let generation = claim.lease.0.to_string();
        let address_text = address.to_string();
        let key = self.members_key();
        // A claim bound past on the server is read fresh once: live, the
        // second run succeeds; lapsed, `claim_until` says LeaseExpired.
        for fresh in [false, true] {
            let until = self.claim_until(&claim, fresh)?;
            let args = [
                &*node,
                &*node_generation,
                &*generation,
                claim.mesh.as_str(),
                &*address_text,
                &*until,
            ];
            let sent = self.clock.now();
            let reply = self.invoke(&self.scripts.register_member, &key, &args)?;
            match tag(&reply)? {
                "ok" => {
                    let until_us: u64 = field(&reply, 1)?;
                    let server_now_us: u64 = field(&reply, 2)?;
                    let left = Duration::from_micros(until_us.saturating_sub(server_now_us));
                    return Ok(Member {
                        node: claim.owner,
                        node_generation: claim.node_generation,
                        lease: claim.lease,
                        mesh: claim.mesh,
                        address,
                        expires_at: sent + left,
                    });
                }
                "claim" => {}
                "stale" => break,
                other => return Err(malformed(other)),
            }
        }
        Err(StoreError::LeaseExpired { node: claim.owner })
    }

    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        let sent = self.clock.now();
        let reply = self.invoke(&self.scripts.members, &self.members_key(), &[])?;
        if tag(&reply)? != "members" {
            return Err(malformed("members"));
        }
        let server_now_us: u64 = field(&reply, 1)?;
        let mut live = Vec::new();
        for (node, entry) in member_entries(&reply)? {
            let (Some(node_generation), Some(lease), Some(entry_mesh), Some(address), Some(until)) = (
                entry.node_generation,
                entry.lease,
                entry.mesh,
                entry.address,
                entry.until_us,
            ) else {
                return Err(malformed("member entry"));
            };
            if &entry_mesh != mesh || until == RELEASED {
                // Another mesh's, or a lifecycle that released its lease
                // (a fact that stays true, like a lapse): whatever bound of
                // it this client remembers, it is not live.
                continue;
            }
            let member = |expires_at| Member {
                node,
                node_generation,
                lease,
                mesh: entry_mesh.clone(),
                address,
                expires_at,
            };
            // The entry's bound, or a later one this client knows of the
            // same lease: either is a true fact (module doc).
            let known = self
                .known()
                .get(&node)
                .filter(|k| k.node_generation == node_generation && k.generation == lease)
                .map_or(0, |k| k.expires_us);
            let bound = until.max(known);
            if server_now_us < bound {
                live.push(member(sent + Duration::from_micros(bound - server_now_us)));
                continue;
            }
            // Past every bound: only the lease's own key decides.
            let read = self.clock.now();
            if let Some(record) = self.read_lease(node)? {
                let same = record.lease.node_generation == node_generation
                    && record.lease.generation == lease
                    && record.lease.mesh == entry_mesh;
                if same && record.is_live() {
                    live.push(member(record.owner_lease(node, read).expires_at));
                }
            }
        }
        Ok(live)
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cluster: &str) -> RedisStoreConfig {
        RedisStoreConfig::new("redis://127.0.0.1:1/", cluster)
    }

    #[test]
    fn a_call_past_its_timeout_is_explained_as_one() {
        let hung = ::redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::WouldBlock));
        assert!(
            explain(&hung).starts_with("no answer within the call timeout"),
            "{}",
            explain(&hung)
        );
        let refused =
            ::redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(
            !explain(&refused).contains("call timeout"),
            "{}",
            explain(&refused)
        );
    }

    #[test]
    fn keys_are_namespaced_by_cluster_and_hash_tagged_by_actor_or_node() {
        let store = RedisStore::open(config("eu-1"), MonotonicClock::new()).unwrap();
        let actor = ActorId::new("player:7").unwrap();
        assert_eq!(store.actor_key(&actor), "zlink:eu-1:actor:{player:7}");
        assert_eq!(store.lease_key(NodeRid(3)), "zlink:eu-1:lease:{3}");
    }

    #[test]
    fn a_cluster_name_that_could_change_a_hash_tag_is_refused() {
        for bad in ["", "a{b", "a}b", "a b", &"x".repeat(CLUSTER_LEN_MAX + 1)] {
            assert_eq!(
                RedisStore::open(config(bad), MonotonicClock::new()).err(),
                Some(RedisConfigError::Cluster(bad.to_owned()))
            );
        }
        let bad_url = RedisStoreConfig::new("http://nowhere", "c");
        assert!(matches!(
            RedisStore::open(bad_url, MonotonicClock::new()),
            Err(RedisConfigError::Url(_))
        ));
    }

    #[test]
    fn padded_u64_order_is_numeric_order() {
        assert!(padded(9) < padded(10));
        assert!(padded(u64::MAX - 1) < padded(u64::MAX));
        assert_eq!(padded(u64::MAX).len(), 20);
    }

    #[test]
    fn an_unreachable_server_is_unavailable() {
        let store = RedisStore::open(config("c"), MonotonicClock::new()).unwrap();
        let actor = ActorId::new("a").unwrap();
        assert!(matches!(
            store.lookup(&actor),
            Err(StoreError::Unavailable(_))
        ));
    }

    #[test]
    fn a_malformed_reply_is_unavailable_never_a_panic() {
        let actor = ActorId::new("a").unwrap();
        for reply in [
            vec![],
            vec!["row".to_owned()],
            vec!["row", "1", "x", "m", "1", "1", "1"]
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ] {
            assert!(matches!(
                row_reply(&actor, &reply),
                Err(StoreError::Unavailable(_))
            ));
        }
        assert!(matches!(
            lease_record(&["lease".to_owned(), "1".to_owned()]),
            Err(StoreError::Unavailable(_))
        ));
    }
}
