//! zlink-node: runs one node of a mesh from a TOML config (examples/node.toml,
//! examples/mesh/), with the lobby game registered, until SIGINT or SIGTERM;
//! then shuts down as §10 says (its Actors move to linked peers first).
//!
//! It prints one `zlink-node ready: …` line with its addresses and
//! NodeGeneration once it serves, and one `zlink-node stopped: …` line with
//! the game's and the runtime's counts when it stops. With `--console` it
//! answers operator commands on stdin meanwhile (`relocate <actor> [<rid>]`,
//! `counters`: see control.rs). With `listen.metrics` it serves
//! `/metrics`, `/healthz` and `/readyz` over HTTP (probes.rs). A config it refuses
//! exits with code 2 and a message naming the key (docs/store.md
//! "zlink-node").

/// A line on stdout. A stdout that nobody reads any more (a log shipper or
/// `| tee` that went away) is no reason to stop: `println!` would panic,
/// and a panic at a stop would skip the drain and leave the owner lease
/// held, so a restart would wait out a term for it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

/// A line on stderr, as [`say`] on stdout.
macro_rules! complain {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod config;
mod control;
mod game;
mod probes;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use zlink::api::{ClusterSecret, Mesh, NodeBuilder, ObjectRole, StartError};
use zlink::ids::NodeGeneration;
use zlink::store::{
    CountingStore, EmbeddedStore, LocationStore, MonotonicClock, RedisPassword, RedisStore,
    RedisStoreConfig, StoreCounts,
};

use crate::config::{Config, SecretSource, StoreKind};

/// DESIGN: the library sets no global allocator; the binaries use mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code of a lifecycle that stopped because its owner lease lapsed
/// (§5): restart it; nothing is wrong with its configuration.
const LEASE_LAPSED_EXIT: u8 = 3;

/// Exit code of a refused config or command line (clap's own, too).
const EXIT_CONFIG: u8 = 2;

/// How often a start that waits looks for a stop signal.
const START_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// How long a stop signal during the start waits for the cancelled start
/// to end, given the store's call timeout: a request in flight and the
/// give-back's two calls (whose lease is it, then its release), each up to
/// a connect and a call, so two call timeouts each; and 2 s to spare. At
/// the default 500 ms call timeout that is 5 s, well inside a
/// supervisor's usual 30 s grace period.
fn start_cancel_wait(call_timeout: std::time::Duration) -> std::time::Duration {
    call_timeout * 6 + std::time::Duration::from_secs(2)
}

/// The command line: the config file and nothing that belongs in it.
#[derive(Parser)]
#[command(
    name = "zlink-node",
    about = "Runs one zlink node from a TOML config (see examples/node.toml) until SIGINT or SIGTERM."
)]
struct Args {
    /// The node's TOML config file.
    #[arg(long, short)]
    config: PathBuf,
    /// Answer operator commands on stdin (`relocate <actor> [<rid>]`,
    /// `counters`), one answer line each on stdout. Off by default: a node
    /// started in the background of a terminal must not read it.
    #[arg(long)]
    console: bool,
    /// Refused: a secret on the command line shows in process lists.
    #[arg(long, hide = true)]
    secret: Option<String>,
    /// Refused, as `--secret`.
    #[arg(long, hide = true)]
    cluster_secret: Option<String>,
}

fn main() -> ExitCode {
    // First, before any thread starts (so every thread inherits the mask)
    // and before the config is read: a stop signal from here on waits for
    // `wait_for_stop` or the start's poll instead of killing the process.
    let stop = signals::block_stop_signals();
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    if args.secret.is_some() || args.cluster_secret.is_some() {
        return refuse(
            "the cluster secret is never taken from the command line: set secret.file or \
             secret.env in the config",
        );
    }
    let config = match config::load(&args.config) {
        Ok(config) => config,
        Err(e) => return refuse(&format!("config error: {e}")),
    };
    tracing_subscriber::fmt()
        .with_max_level(config.log_level)
        .with_writer(std::io::stderr)
        // A stderr that nobody reads any more must not stop a thread: with
        // this on, a failed write is reported with `eprintln!`, which
        // panics, and the thread may be a shard's.
        .log_internal_errors(false)
        .init();
    run(&config, &stop, args.console)
}

/// Prints a refusal on stderr and returns the config exit code.
fn refuse(why: &str) -> ExitCode {
    complain!("zlink-node: {why}");
    ExitCode::from(EXIT_CONFIG)
}

fn run(config: &Config, stop: &signals::StopSignals, console: bool) -> ExitCode {
    let secret = match config
        .secret
        .as_ref()
        .map(|source| read_secret(source, "secret"))
        .transpose()
    {
        Ok(secret) => secret,
        Err(why) => return refuse(&format!("config error: {why}")),
    };
    let (store, store_counts, store_name) = match &config.store {
        StoreKind::Embedded => {
            let (store, counts) =
                counted(EmbeddedStore::new(MonotonicClock::new(), config.lease_term));
            (store, counts, "embedded".to_owned())
        }
        StoreKind::Redis(url) => {
            let password = match config
                .store_password
                .as_ref()
                .map(read_password)
                .transpose()
            {
                Ok(password) => password,
                Err(why) => return refuse(&format!("config error: {why}")),
            };
            let store_config = RedisStoreConfig {
                url: url.clone(),
                cluster: config.cluster.clone(),
                lease_term: config.lease_term,
                call_timeout: config.call_timeout,
                username: config.store_username.clone(),
                password,
                tls: config.store_tls.clone(),
            };
            match RedisStore::open(store_config, MonotonicClock::new()) {
                Ok(store) => {
                    let (store, counts) = counted(store);
                    (store, counts, url.clone())
                }
                Err(e) => return refuse(&format!("config error: {e}")),
            }
        }
    };
    // Taken here rather than inside `start` so that the ready line can name
    // it: a restart of the same rid prints a greater one (§3, DESIGN).
    let generation = NodeGeneration::from_wall_clock();
    let stats = Arc::new(game::NodeStats::default());
    let mut builder = NodeBuilder::new(config.rid)
        .node_generation(generation.0)
        .mesh(&config.mesh)
        .listen(config.stream)
        .object_role(config.role)
        .location_store(store)
        .settings(settings_within_descriptors(config));
    // §3: a node without an object role takes no part in Actor dispatch
    // (a STREAM-only node: its game's logins end with a typed error).
    if config.role != ObjectRole::None {
        builder = builder.enable_actor_dispatch();
    }
    if let Some(peer) = config.peer {
        builder = builder.peer_listen(peer);
    }
    if let Some(websocket) = config.websocket {
        builder = builder
            .websocket_listen(websocket)
            .websocket_origins(config.websocket_origins.iter().cloned());
    }
    if let Some(secret) = secret {
        builder = builder.cluster_secret(secret);
    }
    for &(rid, address) in &config.peers {
        builder = match address {
            Some(address) => builder.peer(rid, address),
            None => builder.accept_peer(rid),
        };
    }
    if config.discover {
        builder = builder.discover_peers();
    }
    for joined in &config.joined {
        let secret = match read_secret(&joined.secret, &format!("mesh.{}.secret", joined.name)) {
            Ok(secret) => secret,
            Err(why) => return refuse(&format!("config error: {why}")),
        };
        let mesh =
            joined
                .peers
                .iter()
                .fold(
                    Mesh::new(&joined.name, secret),
                    |mesh, &(rid, address)| match address {
                        Some(address) => mesh.peer(rid, address),
                        None => mesh.accept_peer(rid),
                    },
                );
        builder = builder.join_mesh(mesh);
    }
    // Served before the node starts (probes.rs): an address in use fails
    // the start before the owner lease is taken, and a start that waits for
    // a crashed predecessor's lease stays live to a probe.
    let endpoint = match config.metrics.map(probes::Endpoint::bind).transpose() {
        Ok(endpoint) => endpoint,
        Err(why) => {
            complain!("zlink-node: {why}");
            return ExitCode::FAILURE;
        }
    };
    let metrics_addr = endpoint.as_ref().map(probes::Endpoint::address);
    // The start runs on a thread of its own, so that a stop signal ends a
    // start that waits — for a crashed predecessor's lease, up to a term,
    // or for a store that does not answer, for as long as it does not
    // (docs/operations.md "Probes") — instead of waiting behind it.
    let cancel = zlink::api::StartCancel::new();
    let builder = game::register(builder, &stats).cancel_with(cancel.clone());
    let (started, start) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("zlink-node-start".to_owned())
        .spawn(move || {
            let _ = started.send(builder.start());
        });
    if let Err(e) = spawned {
        complain!("zlink-node: cannot start the start's thread: {e}");
        return ExitCode::FAILURE;
    }
    let started = loop {
        match start.recv_timeout(START_POLL) {
            Ok(started) => break started,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                complain!("zlink-node: the start's thread ended without an answer");
                return ExitCode::FAILURE;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(signal) = stop.take_pending() {
            say!("zlink-node stopping before it started: {signal}");
            return stop_the_start(&cancel, &start, start_cancel_wait(config.call_timeout));
        }
    };
    let node = match started {
        Ok(node) => node,
        Err(e @ StartError::Io(_)) => {
            complain!("zlink-node: {e}");
            return ExitCode::FAILURE;
        }
        Err(e @ StartError::LeaseLapsed(_)) => {
            complain!("zlink-node: {e}");
            return ExitCode::from(LEASE_LAPSED_EXIT);
        }
        Err(e) => return refuse(&e.to_string()),
    };
    if let Some(endpoint) = &endpoint {
        endpoint.attach(node.metrics());
    }
    let show = |addr: Option<std::net::SocketAddr>| addr.map_or("-".to_owned(), |a| a.to_string());
    say!(
        "zlink-node ready: rid={} node_generation={} mesh={} stream={} websocket={} peer={} metrics={} store={} io_backend={:?}",
        config.rid,
        generation.0,
        config.mesh,
        show(node.stream_addr()),
        show(node.websocket_addr()),
        show(node.peer_addr()),
        show(metrics_addr),
        store_name,
        node.io_backend(),
    );
    let diagnostics = || {
        format!(
            "store_row_operations={} {}",
            store_counts().row_operations(),
            game::report(&stats)
        )
    };
    // §5: a lifecycle whose owner lease lapsed is dead to the mesh for
    // good: it stops (its sessions closed with a reason) and exits with
    // LEASE_LAPSED_EXIT, so a supervisor starts a new lifecycle
    // (docs/store.md "A lapsed lease"). The watcher wakes the stop wait as
    // a SIGTERM would.
    let watch = node.lease_watch();
    let _ = std::thread::Builder::new()
        .name("zlink-node-lease".to_owned())
        .spawn(move || {
            watch.wait();
            complain!("zlink-node: the owner lease lapsed: this lifecycle is fenced; stopping");
            // SAFETY: kill with this process's own id and a valid signal
            // number has no memory effects; SIGTERM is blocked in every
            // thread and taken by the main thread's sigwait.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
        });
    let signal = if console {
        control::serve_until_stop(&node, &diagnostics, stop)
    } else {
        stop.wait_for_stop()
    };
    say!("zlink-node stopping: {signal}");
    let flow = node.flow_counters();
    let actors = node.actor_count();
    let lapsed = node.lease_lapsed();
    node.shutdown();
    let mut counts = String::new();
    for (event, n) in flow.nonzero() {
        counts.push_str(&format!(" {}={n}", event.name()));
    }
    say!(
        "zlink-node stopped: rid={} actors_at_stop={actors} {} flow:{counts}",
        config.rid,
        game::report(&stats),
    );
    if lapsed {
        return ExitCode::from(LEASE_LAPSED_EXIT);
    }
    ExitCode::SUCCESS
}

/// A stop signal during the start: the start is cancelled and waited for,
/// so that an owner lease it took in the same instant is given back and
/// the next start of this node need not wait a term for it
/// (docs/operations.md "Stopping a start"). A store call in flight bounds
/// the wait (its call timeout, then the give-back's); a start that won the
/// race with the signal is stopped cleanly.
fn stop_the_start(
    cancel: &zlink::api::StartCancel,
    start: &std::sync::mpsc::Receiver<Result<zlink::api::Node, StartError>>,
    wait: std::time::Duration,
) -> ExitCode {
    cancel.cancel();
    match start.recv_timeout(wait) {
        Ok(Ok(node)) => node.shutdown(),
        Ok(Err(StartError::Cancelled)) => {}
        Ok(Err(e)) => complain!("zlink-node: {e}"),
        Err(_) => complain!(
            "zlink-node: the start did not end within {:.1} s of its cancel; exiting (a lease it \
             took lapses within one term)",
            wait.as_secs_f64()
        ),
    }
    say!("zlink-node stopped before it started");
    ExitCode::SUCCESS
}

/// Descriptors the process holds for itself whatever its load: its rings
/// or epoll instances, listeners, eventfds, the log and the like (a node
/// with one shard holds about 16).
const OWN_DESCRIPTORS: usize = 32;

/// The node's settings, with `limits.max_sessions` within the process's
/// descriptor limit: sessions past it would take the descriptors the node
/// needs for its links, its store and its probes, and a node out of
/// descriptors cannot accept a liveness probe, so a supervisor would
/// restart a node that served (docs/operations.md "Descriptors"). The
/// soft limit is raised to the hard one first, as servers do; then a
/// quarter of it, at most 256, is kept back, with the probe endpoint's
/// connections and the process's own. Left out, `max_sessions` is the
/// rest; set higher than the rest, it is lowered to it, with a warning.
fn settings_within_descriptors(config: &Config) -> zlink::api::NodeSettings {
    let mut settings = config.settings.clone();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write the local
    // `limit` and this process's own limit.
    let raised = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return settings;
        }
        if limit.rlim_cur < limit.rlim_max {
            let wanted = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
        limit.rlim_cur
    };
    if raised == libc::RLIM_INFINITY {
        return settings;
    }
    let descriptors = usize::try_from(raised).unwrap_or(usize::MAX);
    // Links, the store and WebSocket upgrades in progress; every
    // connection the probe endpoint may hold; the process's own (its
    // rings, listeners, log and the like).
    let kept = (descriptors / 4).min(256) + probes::CONNECTIONS_MAX + OWN_DESCRIPTORS;
    let within = descriptors.saturating_sub(kept).max(1);
    if !config.max_sessions_set {
        settings.max_sessions = within;
        tracing::info!(
            max_sessions = within,
            descriptors,
            kept,
            "limits.max_sessions is left out: the descriptor limit, less those kept for \
             links, the store and the probes"
        );
    } else if settings.max_sessions > within {
        tracing::warn!(
            configured = settings.max_sessions,
            max_sessions = within,
            descriptors,
            kept,
            "limits.max_sessions is more than the descriptor limit allows, less those kept \
             for links, the store and the probes: lowered (raise the limit, ulimit -n or \
             LimitNOFILE, to hold more)"
        );
        settings.max_sessions = within;
    }
    settings
}

/// Wraps the store to count its calls (the console's `counters` shows its
/// row operations: §5, none on the bind, relay and push paths); returns it
/// with a reader of the counts.
fn counted<S: LocationStore + 'static>(
    store: S,
) -> (
    Arc<dyn LocationStore>,
    Box<dyn Fn() -> StoreCounts + Send + Sync>,
) {
    let store = Arc::new(CountingStore::new(store));
    let counts = Arc::clone(&store);
    (store, Box::new(move || counts.counts()))
}

/// The Redis password from its file or environment variable (trailing
/// whitespace, such as an editor's newline, is not part of it).
fn read_password(source: &SecretSource) -> Result<RedisPassword, String> {
    let (key, bytes) = match source {
        SecretSource::File(path) => (
            "store.password.file",
            std::fs::read(path)
                .map_err(|e| format!("store.password.file: cannot read {}: {e}", path.display()))?,
        ),
        SecretSource::Env(name) => (
            "store.password.env",
            std::env::var_os(name)
                .ok_or_else(|| {
                    format!("store.password.env: the environment variable {name} is not set")
                })?
                .into_encoded_bytes(),
        ),
    };
    let text = String::from_utf8(bytes).map_err(|_| format!("{key}: not UTF-8"))?;
    let password = text.trim_end();
    if password.is_empty() {
        return Err(format!("{key}: empty"));
    }
    Ok(RedisPassword(password.to_owned()))
}

/// The cluster secret from its file (trailing whitespace, such as the
/// newline an editor adds, is not part of it) or its environment variable.
/// `key` names the secret's table in the config (`secret`, or
/// `mesh.<name>.secret`).
fn read_secret(source: &SecretSource, key: &str) -> Result<ClusterSecret, String> {
    let (key, bytes) = match source {
        SecretSource::File(path) => {
            let mut bytes = std::fs::read(path)
                .map_err(|e| format!("{key}.file: cannot read {}: {e}", path.display()))?;
            let kept = bytes.trim_ascii_end().len();
            bytes.truncate(kept);
            (format!("{key}.file"), bytes)
        }
        SecretSource::Env(name) => {
            let value = std::env::var_os(name)
                .ok_or_else(|| format!("{key}.env: the environment variable {name} is not set"))?;
            (format!("{key}.env"), value.into_encoded_bytes())
        }
    };
    ClusterSecret::new(bytes).map_err(|e| format!("{key}: {e}"))
}

/// SIGINT, SIGTERM and SIGHUP, blocked in every thread and taken by one
/// `sigwait`. SIGHUP is a stop too: a node run from a terminal that closes
/// (an ssh session that drops) gets it, and its default action would kill
/// the process without a drain, leaving the owner lease held for a term.
pub(crate) mod signals {
    use std::mem::MaybeUninit;

    /// The blocked stop signals.
    pub struct StopSignals(libc::sigset_t);

    /// The stop signals and their names.
    const STOPS: [(libc::c_int, &str); 3] = [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ];

    fn name(signal: libc::c_int) -> Option<&'static str> {
        STOPS
            .iter()
            .find(|&&(number, _)| number == signal)
            .map(|&(_, name)| name)
    }

    /// Blocks the stop signals in the calling thread, and so in every
    /// thread it starts afterwards.
    pub fn block_stop_signals() -> StopSignals {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `set` is a local sigset_t that sigemptyset initialises
        // before sigaddset and pthread_sigmask read it; the calls only touch
        // it and this thread's signal mask.
        let set = unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            for (signal, _) in STOPS {
                libc::sigaddset(set.as_mut_ptr(), signal);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut());
            set.assume_init()
        };
        StopSignals(set)
    }

    impl StopSignals {
        /// A stop signal already pending, taken; `None` when there is none.
        pub fn take_pending(&self) -> Option<&'static str> {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `self.0` is an initialised set and `zero` a live
            // local; sigtimedwait only reads them, and a null info is
            // allowed.
            let signal = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &zero) };
            name(signal)
        }

        /// Waits until a stop signal arrives; its name.
        pub fn wait_for_stop(&self) -> &'static str {
            loop {
                let mut signal: libc::c_int = 0;
                // SAFETY: `self.0` is an initialised set and `signal` a
                // live local; sigwait only reads the one and writes the other.
                let rc = unsafe { libc::sigwait(&self.0, &mut signal) };
                if let (0, Some(name)) = (rc, name(signal)) {
                    return name;
                }
            }
        }
    }
}
