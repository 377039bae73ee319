//! The node's TOML config: what each key means, its default, and the checks
//! that reject a bad value at startup with the key's name (docs/store.md
//! "zlink-node"). Every key maps onto a `NodeBuilder` call or a
//! `NodeSettings` field; a setting the runtime does not have is not a key.
//! Defaults come from `NodeSettings::default()` (the spec's where it gives
//! one: §6 SessionReplacementCallbackTimeout 30,000 ms, §8.1
//! SessionRelocationSealTimeout 3,000 ms), never restated here.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use zlink::api::{DecodeLimits, IoBackend, NodeSettings, ObjectRole, RelocationConfig};

/// A config the node refuses to start with; the message names the key.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(key: &str, why: impl fmt::Display) -> ConfigError {
    ConfigError(format!("{key}: {why}"))
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    node: NodeSection,
    listen: ListenSection,
    #[serde(default)]
    peers: PeersSection,
    /// A table (`file` or `env`); a string here is a literal secret, which
    /// is refused with its own message (see [`secret_source`]). Required
    /// when the node links to peers.
    secret: Option<toml::Value>,
    store: StoreSection,
    #[serde(default)]
    timeouts: TimeoutsSection,
    #[serde(default)]
    relocation: RelocationSection,
    #[serde(default)]
    limits: LimitsSection,
    /// `[mesh.<name>]`: each mesh after the first of `node.meshes`, with
    /// its own secret and static peers (§3; docs/store.md "zlink-node").
    #[serde(default)]
    mesh: std::collections::BTreeMap<String, JoinedSection>,
}

/// A mesh this node joins besides its home mesh.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinedSection {
    /// A table (`file` or `env`), as the home mesh's `[secret]`.
    secret: toml::Value,
    #[serde(default, rename = "static")]
    peers: Vec<StaticPeer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSection {
    rid: u64,
    meshes: Vec<String>,
    #[serde(default = "default_log_level")]
    log_level: String,
    #[serde(default)]
    shards: usize,
    #[serde(default = "default_pin_cores")]
    pin_cores: bool,
    #[serde(default)]
    cores: Vec<usize>,
    #[serde(default = "default_io_backend")]
    io_backend: String,
    #[serde(default = "default_role")]
    role: String,
}

fn default_role() -> String {
    "server".to_owned()
}

fn default_log_level() -> String {
    "info".to_owned()
}

fn default_pin_cores() -> bool {
    NodeSettings::default().pin_cores
}

fn default_io_backend() -> String {
    "auto".to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenSection {
    stream: SocketAddr,
    /// WebSocket clients (docs/wire.md "WebSocket"); left out: none.
    websocket: Option<SocketAddr>,
    /// The `Origin`s a browser may connect from; empty or left out: any.
    #[serde(default)]
    websocket_origins: Vec<String>,
    peer: Option<SocketAddr>,
    /// `/metrics`, `/healthz` and `/readyz` over HTTP (src/bin/zlink-node/
    /// probes.rs); left out: no endpoint.
    metrics: Option<SocketAddr>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeersSection {
    #[serde(default)]
    discover: bool,
    #[serde(default, rename = "static")]
    fixed: Vec<StaticPeer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticPeer {
    rid: u64,
    /// Needed for a peer this node dials (a higher RID); a peer that dials
    /// this node may be listed by its rid alone.
    address: Option<SocketAddr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretSection {
    file: Option<PathBuf>,
    env: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    url: String,
    #[serde(default = "default_cluster")]
    cluster: String,
    #[serde(default = "default_lease_term_ms")]
    lease_term_ms: u64,
    #[serde(default = "default_lease_renew_interval_ms")]
    lease_renew_interval_ms: u64,
    #[serde(default = "default_call_timeout_ms")]
    call_timeout_ms: u64,
    /// The ACL user (Redis 6+).
    username: Option<String>,
    /// The password: a table with `file` or `env`, like the cluster secret.
    password: Option<toml::Value>,
    /// `[store.tls]`: the PEM files of a `rediss://` store.
    tls: Option<StoreTlsSection>,
}

/// `[store.tls]`: paths relative to the config's folder, as `secret.file`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreTlsSection {
    /// The CA the server's certificate must chain to (the only one trusted).
    ca_file: Option<PathBuf>,
    /// A client certificate, for a server with `tls-auth-clients yes`.
    cert_file: Option<PathBuf>,
    /// Its private key.
    key_file: Option<PathBuf>,
}

fn default_cluster() -> String {
    "zlink".to_owned()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn default_lease_term_ms() -> u64 {
    ms(zlink::store::RedisStoreConfig::new("", "").lease_term)
}

fn default_call_timeout_ms() -> u64 {
    ms(zlink::store::RedisStoreConfig::new("", "").call_timeout)
}

fn default_lease_renew_interval_ms() -> u64 {
    ms(NodeSettings::default().lease_renew_interval)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TimeoutsSection {
    session_replacement_callback_timeout_ms: u64,
    session_relocation_seal_timeout_ms: u64,
    disconnect_deadline_ms: u64,
    bind_timeout_ms: u64,
    send_timeout_ms: u64,
    relay_deadline_ms: u64,
    shutdown_deadline_ms: u64,
    client_frame_deadline_ms: u64,
    websocket_handshake_deadline_ms: u64,
    link_handshake_deadline_ms: u64,
    actor_turn_deadline_ms: u64,
    /// 0 turns the shard stall watch off.
    stall_warn_ms: u64,
    /// 0: ready without waiting for the links after start.
    ready_link_wait_ms: u64,
}

impl Default for TimeoutsSection {
    fn default() -> Self {
        let s = NodeSettings::default();
        Self {
            session_replacement_callback_timeout_ms: ms(s.replacement_callback_timeout),
            session_relocation_seal_timeout_ms: ms(s.relocation_seal_timeout),
            disconnect_deadline_ms: ms(s.disconnect_deadline),
            bind_timeout_ms: ms(s.bind_timeout),
            send_timeout_ms: ms(s.send_timeout),
            relay_deadline_ms: ms(s.relay_deadline),
            shutdown_deadline_ms: ms(s.shutdown_deadline),
            client_frame_deadline_ms: ms(s.client_frame_deadline),
            websocket_handshake_deadline_ms: ms(s.websocket_handshake_deadline),
            link_handshake_deadline_ms: ms(s.link_handshake_deadline),
            actor_turn_deadline_ms: ms(s.actor_turn_deadline),
            stall_warn_ms: ms(s.stall_warn),
            ready_link_wait_ms: ms(s.ready_link_wait),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RelocationSection {
    follow_lifetime_ms: u64,
    follow_max: usize,
    proxy_max: usize,
    proxy_budget_ms: u64,
    seal_request_timeout_ms: u64,
    prepare_timeout_ms: u64,
    finish_timeout_ms: u64,
    store_retry_ms: u64,
}

impl Default for RelocationSection {
    fn default() -> Self {
        let r = RelocationConfig::default();
        Self {
            follow_lifetime_ms: ms(r.follow_lifetime),
            follow_max: r.follow_max,
            proxy_max: r.proxy_max,
            proxy_budget_ms: ms(r.proxy_budget),
            seal_request_timeout_ms: ms(r.seal_request_timeout),
            prepare_timeout_ms: ms(r.prepare_timeout),
            finish_timeout_ms: ms(r.finish_timeout),
            store_retry_ms: ms(r.store_retry),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct LimitsSection {
    frame_len_max: u32,
    budget_max_ms: u32,
    handoff_state_len_max: u32,
    saved_work_count_max: u16,
    outbound_max: usize,
    /// Left out: no limit (`NodeSettings::max_sessions`' default).
    max_sessions: Option<usize>,
    websocket_upgrades_max: usize,
    session_queue_max: usize,
    actor_queue_max: usize,
    spot_queue_max: usize,
    /// Packets a session may send a second (0: no limit).
    session_rate: u32,
    session_burst: u32,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let s = NodeSettings::default();
        Self {
            frame_len_max: s.decode_limits.frame_len_max,
            budget_max_ms: s.decode_limits.budget_max_ms,
            handoff_state_len_max: s.decode_limits.handoff_state_len_max,
            saved_work_count_max: s.decode_limits.saved_work_count_max,
            outbound_max: s.outbound_max,
            max_sessions: None,
            websocket_upgrades_max: s.websocket_upgrades_max,
            session_queue_max: s.session_queue_max,
            actor_queue_max: s.actor_queue_max,
            spot_queue_max: s.spot_queue_max,
            session_rate: s.session_rate,
            session_burst: s.session_burst,
        }
    }
}

/// Where the cluster secret comes from: never the config file itself, never
/// the command line (both end up in shell histories and process lists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// A file holding the secret (trailing whitespace is not part of it).
    File(PathBuf),
    /// An environment variable holding it.
    Env(String),
}

/// The Location Store the node uses (§3: always explicit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// This process's own store: for a node alone (nothing is shared).
    Embedded,
    /// A Redis server at this `redis://` (or TLS `rediss://`) URL, shared
    /// by the mesh.
    Redis(String),
}

/// The checked config: everything the node needs to start.
#[derive(Debug)]
pub struct Config {
    pub rid: u64,
    /// The home mesh: the first of `node.meshes`; `[secret]` and `[peers]`
    /// are its, and the Actor owner's store rows name it.
    pub mesh: String,
    /// The other meshes of `node.meshes` (`NodeBuilder::join_mesh`).
    pub joined: Vec<JoinedMesh>,
    pub log_level: tracing::level_filters::LevelFilter,
    /// The node's object role (`NodeBuilder::object_role`, §3).
    pub role: ObjectRole,
    pub stream: SocketAddr,
    /// The WebSocket listener (`NodeBuilder::websocket_listen`), if any,
    /// and the `Origin`s it allows (empty: any).
    pub websocket: Option<SocketAddr>,
    pub websocket_origins: Vec<String>,
    pub peer: Option<SocketAddr>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served, if anywhere.
    pub metrics: Option<SocketAddr>,
    pub discover: bool,
    pub peers: Vec<(u64, Option<SocketAddr>)>,
    pub secret: Option<SecretSource>,
    pub store: StoreKind,
    pub cluster: String,
    pub lease_term: Duration,
    pub call_timeout: Duration,
    /// The Redis ACL user, if any.
    pub store_username: Option<String>,
    /// Where the Redis password is read from, if the store needs one.
    pub store_password: Option<SecretSource>,
    /// `[store.tls]`, its paths taken from the config's folder; the files
    /// are read and checked by `RedisStore::open`, before the node starts.
    pub store_tls: Option<zlink::store::RedisTls>,
    pub settings: NodeSettings,
    /// Whether `limits.max_sessions` was set; left out, zlink-node derives
    /// it from the process's descriptor limit (main.rs).
    pub max_sessions_set: bool,
}

/// A mesh the node joins besides its home mesh: its name, its secret and
/// its static peers (discovery covers the home mesh only,
/// docs/threading.md "Several meshes").
#[derive(Debug)]
pub struct JoinedMesh {
    pub name: String,
    pub secret: SecretSource,
    pub peers: Vec<(u64, Option<SocketAddr>)>,
}

/// Reads and checks the config at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base)
}

/// Parses and checks config text; a relative `secret.file` is taken from
/// `base` (the config file's folder).
pub fn parse(text: &str, base: &Path) -> Result<Config, ConfigError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let key = e
            .span()
            .and_then(|span| key_at(text, span.start))
            .unwrap_or_else(|| "config".to_owned());
        ConfigError(format!("{key}: {}\n{e}", e.message()))
    })?;
    let (mesh, joined) = meshes(&file, base)?;
    let log_level = file.node.log_level.parse().map_err(|_| {
        bad(
            "node.log_level",
            format!(
                "{:?} is not one of off, error, warn, info, debug, trace",
                file.node.log_level
            ),
        )
    })?;
    let io_backend = match file.node.io_backend.as_str() {
        "auto" => IoBackend::Auto,
        "io_uring" => IoBackend::IoUring,
        "epoll" => IoBackend::Epoll,
        other => {
            return Err(bad(
                "node.io_backend",
                format!("{other:?} is not one of auto, io_uring, epoll"),
            ))
        }
    };
    let role = match file.node.role.as_str() {
        "server" => ObjectRole::Server,
        "client" => ObjectRole::Client,
        "none" => ObjectRole::None,
        other => {
            return Err(bad(
                "node.role",
                format!("{other:?} is not one of server, client, none"),
            ))
        }
    };
    let secret = file
        .secret
        .clone()
        .map(|value| secret_source(value, base, "secret"))
        .transpose()?;
    let store_password = file
        .store
        .password
        .clone()
        .map(|value| secret_source(value, base, "store.password"))
        .transpose()?;
    let store = if file.store.url == "embedded" {
        StoreKind::Embedded
    } else if file.store.url.starts_with("redis://") || file.store.url.starts_with("rediss://") {
        StoreKind::Redis(file.store.url.clone())
    } else {
        return Err(bad(
            "store.url",
            format!(
                "{:?} is neither \"embedded\" nor a redis:// or rediss:// URL",
                file.store.url
            ),
        ));
    };
    let store_tls = store_tls(&file.store, base)?;
    let needs_peer_listen = file.peers.discover || !file.peers.fixed.is_empty();
    if needs_peer_listen && file.listen.peer.is_none() {
        return Err(bad(
            "listen.peer",
            "required with peers.discover or peers.static: the address peers link to",
        ));
    }
    if needs_peer_listen && secret.is_none() {
        return Err(bad(
            "secret",
            "required with peers.discover or peers.static: node links are authenticated \
             with the cluster secret (secret.file or secret.env)",
        ));
    }
    if file.peers.discover && store == StoreKind::Embedded {
        return Err(bad(
            "peers.discover",
            "needs a shared store (store.url = \"redis://…\"); an embedded store lists only \
             this node",
        ));
    }
    let peers = static_peers(&file.peers.fixed, file.node.rid, "peers.static")?;
    let store_section = &file.store;
    let lease_term = positive("store.lease_term_ms", store_section.lease_term_ms)?;
    let renew = positive(
        "store.lease_renew_interval_ms",
        store_section.lease_renew_interval_ms,
    )?;
    if renew * 2 > lease_term {
        return Err(bad(
            "store.lease_renew_interval_ms",
            format!(
                "{} ms renews a lease of {} ms (store.lease_term_ms) too late: at most half \
                 the term",
                store_section.lease_renew_interval_ms, store_section.lease_term_ms
            ),
        ));
    }
    let call_timeout = positive("store.call_timeout_ms", store_section.call_timeout_ms)?;
    let settings = settings(&file, io_backend, renew)?;
    Ok(Config {
        rid: file.node.rid,
        mesh,
        joined,
        log_level,
        role,
        stream: file.listen.stream,
        websocket: file.listen.websocket,
        websocket_origins: file.listen.websocket_origins.clone(),
        peer: file.listen.peer,
        metrics: file.listen.metrics,
        discover: file.peers.discover,
        peers,
        secret,
        store,
        cluster: file.store.cluster,
        lease_term,
        call_timeout,
        store_username: file.store.username.clone(),
        store_password,
        store_tls,
        settings,
        max_sessions_set: file.limits.max_sessions.is_some(),
    })
}

/// `[store.tls]` checked against the URL: TLS files with a plaintext URL
/// would be ignored (the link to the store silently unencrypted), and a
/// client certificate is nothing without its key. Whether the files can be
/// read and hold what they should is `RedisStore::open`'s check, also
/// before the node starts, naming the same keys.
fn store_tls(
    store: &StoreSection,
    base: &Path,
) -> Result<Option<zlink::store::RedisTls>, ConfigError> {
    let Some(tls) = &store.tls else {
        return Ok(None);
    };
    if !store.url.starts_with("rediss://") {
        return Err(bad(
            "store.tls",
            format!(
                "is set but store.url {:?} is not a rediss:// URL: the store would be reached \
                 without TLS",
                store.url
            ),
        ));
    }
    match (&tls.cert_file, &tls.key_file) {
        (Some(_), None) => {
            return Err(bad(
                "store.tls.key_file",
                "missing: store.tls.cert_file needs its private key",
            ))
        }
        (None, Some(_)) => {
            return Err(bad(
                "store.tls.cert_file",
                "missing: store.tls.key_file is the key of a client certificate",
            ))
        }
        _ => {}
    }
    let path = |file: &Option<PathBuf>| file.as_ref().map(|file| base.join(file));
    Ok(Some(zlink::store::RedisTls {
        ca_file: path(&tls.ca_file),
        cert_file: path(&tls.cert_file),
        key_file: path(&tls.key_file),
    }))
}

/// The dotted path of the key whose name or value covers byte `at` of
/// `text` (the key a serde error is about: its value for a bad value, its
/// name for an unknown key, its table for a missing key).
fn key_at(text: &str, at: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    // A `[section]`'s span is its header alone, so every table is searched,
    // not only those whose span covers `at`.
    fn walk(table: &DeTable<'_>, at: usize, path: &mut Vec<String>) -> bool {
        for (key, value) in table {
            path.push(key.get_ref().to_string());
            if key.span().contains(&at) || value.span().contains(&at) {
                descend(value.get_ref(), at, path);
                return true;
            }
            if descend(value.get_ref(), at, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    fn descend(value: &DeValue<'_>, at: usize, path: &mut Vec<String>) -> bool {
        match value {
            DeValue::Table(table) => walk(table, at, path),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    if item.span().contains(&at) {
                        descend(item.get_ref(), at, path);
                        return true;
                    }
                    if descend(item.get_ref(), at, path) {
                        return true;
                    }
                    path.pop();
                }
                false
            }
            _ => false,
        }
    }
    let document = DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    walk(document.get_ref(), at, &mut path);
    (!path.is_empty()).then(|| path.join("."))
}

/// The `[secret]` table: exactly one of `file` and `env`.
/// The secret source of the table at `key` (`secret`, or
/// `mesh.<name>.secret`).
fn secret_source(value: toml::Value, base: &Path, key: &str) -> Result<SecretSource, ConfigError> {
    if value.is_str() {
        return Err(bad(
            key,
            format!(
                "a literal secret in the config is refused: put it in a file ({key}.file) or \
                 an environment variable ({key}.env)"
            ),
        ));
    }
    let section = SecretSection::deserialize(value).map_err(|e| bad(key, e))?;
    match (section.file, section.env) {
        (Some(file), None) => Ok(SecretSource::File(base.join(file))),
        (None, Some(env)) if !env.is_empty() => Ok(SecretSource::Env(env)),
        (None, Some(_)) => Err(bad(&format!("{key}.env"), "name an environment variable")),
        (Some(_), Some(_)) => Err(bad(key, "give one of file and env, not both")),
        (None, None) => Err(bad(key, format!("give {key}.file or {key}.env"))),
    }
}

/// The static peers at `key`, none of them this node.
fn static_peers(
    peers: &[StaticPeer],
    me: u64,
    key: &str,
) -> Result<Vec<(u64, Option<SocketAddr>)>, ConfigError> {
    peers
        .iter()
        .map(|peer| {
            if peer.rid == me {
                return Err(bad(key, format!("rid {} is this node's own rid", peer.rid)));
            }
            // The lower RID dials: a peer this node dials needs an address.
            if peer.address.is_none() && peer.rid > me {
                return Err(bad(
                    key,
                    format!(
                        "rid {} needs an address: this node has the lower rid and dials it",
                        peer.rid
                    ),
                ));
            }
            Ok((peer.rid, peer.address))
        })
        .collect()
}

/// `node.meshes`: the home mesh (the first) and the meshes joined besides
/// it, each with its `[mesh.<name>]` table (§3: several meshes configured
/// is not an error).
fn meshes(file: &File, base: &Path) -> Result<(String, Vec<JoinedMesh>), ConfigError> {
    let Some((home, others)) = file.node.meshes.split_first() else {
        return Err(bad(
            "node.meshes",
            "name the meshes this node is in; the first is its home mesh",
        ));
    };
    let mut seen = std::collections::HashSet::new();
    for name in &file.node.meshes {
        zlink::ids::MeshName::new(name).map_err(|e| bad("node.meshes", e))?;
        if !seen.insert(name) {
            return Err(bad("node.meshes", format!("{name:?} is listed twice")));
        }
    }
    if let Some(name) = file.mesh.keys().find(|name| !others.contains(name)) {
        return Err(bad(
            &format!("mesh.{name}"),
            "names no mesh after the first of node.meshes (the home mesh's secret and peers \
             are [secret] and [peers])",
        ));
    }
    let mut joined = Vec::with_capacity(others.len());
    for name in others {
        let key = format!("mesh.{name}");
        let Some(section) = file.mesh.get(name) else {
            return Err(bad(
                &key,
                "missing: each mesh after the first of node.meshes needs its own secret \
                 (and its static peers)",
            ));
        };
        joined.push(JoinedMesh {
            name: name.clone(),
            secret: secret_source(section.secret.clone(), base, &format!("{key}.secret"))?,
            peers: static_peers(&section.peers, file.node.rid, &format!("{key}.static"))?,
        });
    }
    if !joined.is_empty() && file.listen.peer.is_none() {
        return Err(bad(
            "listen.peer",
            "required with several meshes: the address their peers link to",
        ));
    }
    if !joined.is_empty() && file.secret.is_none() {
        return Err(bad(
            "secret",
            "required with several meshes: the home mesh's links are authenticated too",
        ));
    }
    Ok((home.clone(), joined))
}

fn positive(key: &str, value: u64) -> Result<Duration, ConfigError> {
    if value == 0 {
        return Err(bad(key, "must be greater than 0"));
    }
    Ok(Duration::from_millis(value))
}

fn at_least_one(key: &str, value: usize) -> Result<usize, ConfigError> {
    if value == 0 {
        return Err(bad(key, "must be at least 1"));
    }
    Ok(value)
}

/// The `NodeSettings` of the file's `[node]`, `[timeouts]`,
/// `[relocation]` and `[limits]`.
fn settings(
    file: &File,
    io_backend: IoBackend,
    renew: Duration,
) -> Result<NodeSettings, ConfigError> {
    if !file.node.cores.is_empty() && !file.node.pin_cores {
        return Err(bad(
            "node.cores",
            "pins the shards to these cores, but node.pin_cores = false: set pin_cores = true \
             or leave cores out",
        ));
    }
    let available = core_affinity::get_core_ids().unwrap_or_default();
    if let Some(id) = file
        .node
        .cores
        .iter()
        .find(|&&id| !available.iter().any(|core| core.id == id))
    {
        return Err(bad(
            "node.cores",
            format!("core {id} is not one this process may run on"),
        ));
    }
    let t = &file.timeouts;
    let r = &file.relocation;
    let l = &file.limits;
    let decode_limits = DecodeLimits {
        frame_len_max: l.frame_len_max,
        budget_max_ms: l.budget_max_ms,
        handoff_state_len_max: l.handoff_state_len_max,
        saved_work_count_max: l.saved_work_count_max,
    };
    if !decode_limits.frame_len_max_allowed() {
        return Err(bad(
            "limits.frame_len_max",
            format!(
                "must be 1 to {} bytes: what a node link carries, whatever a peer's own limit",
                DecodeLimits::FRAME_LEN_MAX_CEILING
            ),
        ));
    }
    if l.handoff_state_len_max >= l.frame_len_max {
        return Err(bad(
            "limits.handoff_state_len_max",
            "must be smaller than limits.frame_len_max: a snapshot travels in one frame",
        ));
    }
    let relocation = RelocationConfig {
        seal_request_timeout: positive(
            "relocation.seal_request_timeout_ms",
            r.seal_request_timeout_ms,
        )?,
        prepare_timeout: positive("relocation.prepare_timeout_ms", r.prepare_timeout_ms)?,
        finish_timeout: positive("relocation.finish_timeout_ms", r.finish_timeout_ms)?,
        follow_lifetime: positive("relocation.follow_lifetime_ms", r.follow_lifetime_ms)?,
        follow_max: at_least_one("relocation.follow_max", r.follow_max)?,
        proxy_max: at_least_one("relocation.proxy_max", r.proxy_max)?,
        proxy_budget: positive("relocation.proxy_budget_ms", r.proxy_budget_ms)?,
        store_retry: positive("relocation.store_retry_ms", r.store_retry_ms)?,
        limits: decode_limits,
    };
    // The lane bounds are checked by `NodeBuilder::start`, whose message
    // names the key (`session_queue_max = 0: …`).
    Ok(NodeSettings {
        replacement_callback_timeout: positive(
            "timeouts.session_replacement_callback_timeout_ms",
            t.session_replacement_callback_timeout_ms,
        )?,
        relocation_seal_timeout: positive(
            "timeouts.session_relocation_seal_timeout_ms",
            t.session_relocation_seal_timeout_ms,
        )?,
        disconnect_deadline: positive("timeouts.disconnect_deadline_ms", t.disconnect_deadline_ms)?,
        bind_timeout: positive("timeouts.bind_timeout_ms", t.bind_timeout_ms)?,
        send_timeout: positive("timeouts.send_timeout_ms", t.send_timeout_ms)?,
        relay_deadline: positive("timeouts.relay_deadline_ms", t.relay_deadline_ms)?,
        client_frame_deadline: positive(
            "timeouts.client_frame_deadline_ms",
            t.client_frame_deadline_ms,
        )?,
        websocket_handshake_deadline: positive(
            "timeouts.websocket_handshake_deadline_ms",
            t.websocket_handshake_deadline_ms,
        )?,
        link_handshake_deadline: positive(
            "timeouts.link_handshake_deadline_ms",
            t.link_handshake_deadline_ms,
        )?,
        // Checked against the seal and prepare timeouts by
        // `NodeBuilder::start`, whose message names the setting.
        actor_turn_deadline: positive("timeouts.actor_turn_deadline_ms", t.actor_turn_deadline_ms)?,
        outbound_max: at_least_one("limits.outbound_max", l.outbound_max)?,
        max_sessions: match l.max_sessions {
            Some(max) => at_least_one("limits.max_sessions", max)?,
            None => NodeSettings::default().max_sessions,
        },
        websocket_upgrades_max: at_least_one(
            "limits.websocket_upgrades_max",
            l.websocket_upgrades_max,
        )?,
        session_queue_max: l.session_queue_max,
        actor_queue_max: l.actor_queue_max,
        spot_queue_max: l.spot_queue_max,
        session_rate: l.session_rate,
        session_burst: l.session_burst,
        decode_limits,
        shards: file.node.shards,
        pin_cores: file.node.pin_cores,
        cores: file.node.cores.clone(),
        shutdown_deadline: positive("timeouts.shutdown_deadline_ms", t.shutdown_deadline_ms)?,
        lease_renew_interval: renew,
        relocation,
        stall_warn: Duration::from_millis(t.stall_warn_ms),
        ready_link_wait: Duration::from_millis(t.ready_link_wait_ms),
        io_backend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys left out take the runtime's defaults, which are the spec's
    /// where it gives one (§6: 30,000 ms; §8.1: 3,000 ms).
    #[test]
    fn x1_l3_left_out_keys_take_the_specs_defaults() {
        let text = "[node]\nrid = 1\nmeshes = [\"m\"]\n[listen]\nstream = \"127.0.0.1:0\"\n\
                    [store]\nurl = \"embedded\"\n";
        let config = parse(text, Path::new(".")).unwrap();
        assert_eq!(config.settings, NodeSettings::default());
        assert_eq!(
            config.settings.replacement_callback_timeout,
            Duration::from_millis(30_000)
        );
        assert_eq!(
            config.settings.relocation_seal_timeout,
            Duration::from_millis(3_000)
        );
        assert_eq!(config.secret, None);
        assert_eq!(config.store, StoreKind::Embedded);
        assert_eq!(config.store_tls, None);
    }

    fn with_store(store: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[node]\nrid = 1\nmeshes = [\"m\"]\n[listen]\nstream = \"127.0.0.1:0\"\n{store}"
        );
        parse(&text, Path::new("/etc/zlink"))
    }

    /// `[store.tls]` goes with a rediss:// URL, its paths taken from the
    /// config's folder; what cannot work is refused by its key.
    #[test]
    fn store_tls_needs_a_rediss_url_and_a_client_certificate_its_key() {
        let config = with_store(
            "[store]\nurl = \"rediss://redis.internal:6380/\"\n\
             [store.tls]\nca_file = \"ca.pem\"\ncert_file = \"node.pem\"\nkey_file = \"/k.pem\"\n",
        )
        .unwrap();
        assert_eq!(
            config.store,
            StoreKind::Redis("rediss://redis.internal:6380/".into())
        );
        assert_eq!(
            config.store_tls,
            Some(zlink::store::RedisTls {
                ca_file: Some("/etc/zlink/ca.pem".into()),
                cert_file: Some("/etc/zlink/node.pem".into()),
                key_file: Some("/k.pem".into()),
            })
        );
        // No table: rediss:// alone trusts the public roots.
        let config = with_store("[store]\nurl = \"rediss://r:6380/\"\n").unwrap();
        assert_eq!(config.store_tls, None);
        let refused = |store: &str| with_store(store).unwrap_err().0;
        let plaintext =
            refused("[store]\nurl = \"redis://r:6379/\"\n[store.tls]\nca_file = \"ca.pem\"\n");
        assert!(plaintext.starts_with("store.tls: "), "{plaintext}");
        let no_key =
            refused("[store]\nurl = \"rediss://r/\"\n[store.tls]\ncert_file = \"n.pem\"\n");
        assert!(no_key.starts_with("store.tls.key_file: "), "{no_key}");
        let no_cert =
            refused("[store]\nurl = \"rediss://r/\"\n[store.tls]\nkey_file = \"k.pem\"\n");
        assert!(no_cert.starts_with("store.tls.cert_file: "), "{no_cert}");
        let unknown = refused("[store]\nurl = \"rediss://r/\"\n[store.tls]\ninsecure = true\n");
        assert!(unknown.starts_with("store.tls.insecure: "), "{unknown}");
    }
}
