//! `zlink-node` processes for the tests: each [`NodeProcess`] is the built
//! binary run on a config the test writes, its stdout and stderr read line by
//! line by threads so a test waits on what the node prints (its ready line, a
//! link coming up, its stop report, a console answer) or on what its
//! `/metrics` reads (`listen.metrics`), never on a sleep.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::bound;

/// How long a node may take to print a line a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

/// The secret the test nodes share, passed in their environment.
pub const SECRET_ENV: &str = "ZLINK_TEST_CLUSTER_SECRET";
const SECRET: &str = "zlink-node-test-cluster-secret";

/// The owner and membership lease term of the test meshes, shortened so a
/// dead node's lease lapses within seconds.
pub const LEASE_TERM_MS: u64 = 3_000;
/// How often the test nodes renew their leases.
pub const RENEW_MS: u64 = 200;

/// How node `rid` of a test mesh finds its peers.
pub enum Peers {
    /// In the store's membership (`peers.discover`).
    Discover,
    /// At these link addresses (`peers.static`): the lower RID dials, so a
    /// node lists the peers of higher RIDs with their addresses, and every
    /// lower RID (its dialers) by rid alone — a node takes links only from
    /// its peers (docs/threading.md "Node links").
    Static(Vec<(u64, SocketAddr)>),
}

/// The config of node `rid` of a test mesh in the "lobby" mesh on the
/// Redis at `url` (keys under `cluster`): one unpinned shard, loopback
/// ports picked by the kernel, shortened leases (3 s renewed every 200 ms),
/// relays and binds that end within 2 s, a quick shutdown.
pub fn config(rid: u64, url: &str, cluster: &str, peers: &Peers) -> String {
    config_with_lease(rid, url, cluster, peers, LEASE_TERM_MS)
}

/// [`config`] with an owner and membership lease of `lease_term_ms`
/// (still renewed every [`RENEW_MS`]): a test of a store outage that the
/// lease must outlive by a wide margin.
pub fn config_with_lease(
    rid: u64,
    url: &str,
    cluster: &str,
    peers: &Peers,
    lease_term_ms: u64,
) -> String {
    let peers = match peers {
        Peers::Discover => "discover = true".to_owned(),
        Peers::Static(list) => {
            let list: Vec<String> = list
                .iter()
                .map(|(rid, address)| format!("{{ rid = {rid}, address = \"{address}\" }}"))
                .chain((1..rid).map(|lower| format!("{{ rid = {lower} }}")))
                .collect();
            format!("static = [{}]", list.join(", "))
        }
    };
    format!(
        r#"
[node]
rid = {rid}
meshes = ["lobby"]
log_level = "info"
shards = 1
pin_cores = false

[listen]
stream = "127.0.0.1:0"
peer = "127.0.0.1:0"

[peers]
{peers}

[secret]
env = "{SECRET_ENV}"

[store]
url = "{url}"
cluster = "{cluster}"
lease_term_ms = {lease_term_ms}
lease_renew_interval_ms = {RENEW_MS}

[timeouts]
relay_deadline_ms = 2000
bind_timeout_ms = 2000
shutdown_deadline_ms = 1000
"#
    )
}

/// A folder of its own for one test's configs.
pub fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "zlink-node-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// Writes `text` to `dir/name` and returns its path.
pub fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("the config is written");
    path
}

/// What a run that exits by itself left: its code and stderr.
pub struct Exited {
    pub status: ExitStatus,
    pub stderr: String,
}

/// Runs the binary with `args` until it exits (a refused config exits at
/// once); panics if it is still running after [`WAIT`].
pub fn run_to_exit(args: &[&str]) -> Exited {
    let _wait = bound::waiting(format_args!("zlink-node {args:?} to exit"));
    let child = command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zlink-node runs");
    let pid = child.id();
    let (tx, done) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match done.recv_timeout(WAIT) {
        Ok(output) => {
            let output = output.expect("zlink-node is waited for");
            Exited {
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        Err(_) => {
            sigkill(pid);
            panic!("zlink-node {args:?} did not exit");
        }
    }
}

/// Waits up to [`WAIT`] for `child` to exit; `None` (after a SIGKILL)
/// when it did not.
fn wait_child(mut child: Child) -> Option<ExitStatus> {
    let pid = child.id();
    let _wait = bound::waiting(format_args!("zlink-node pid {pid} to exit"));
    let (tx, done) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match done.recv_timeout(WAIT) {
        Ok(status) => Some(status.expect("the node is waited for")),
        Err(_) => {
            sigkill(pid);
            None
        }
    }
}

/// Sends SIGKILL to a child that did not exit in time.
fn sigkill(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) only signals the child this test started; at
        // worst it is already gone and the call fails with ESRCH.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A `zlink-node` command on `config`, with the test mesh's secret, not yet
/// started: for a test that drives the process itself.
#[allow(dead_code)]
pub fn node_command(config: &Path) -> Command {
    command(&["--config", config.to_str().expect("a UTF-8 path")])
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zlink-node"));
    command
        .args(args)
        .env(SECRET_ENV, SECRET)
        .stdin(Stdio::null());
    command
}

/// Which of the node's streams a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Out,
    Err,
}

/// A running zlink-node.
pub struct NodeProcess {
    pub rid: u64,
    child: Option<Child>,
    /// The console (src/bin/zlink-node/control.rs).
    console: Option<ChildStdin>,
    lines: Receiver<(Stream, String)>,
    /// Every line read so far, for failure messages and later searches.
    pub seen: Vec<(Stream, String)>,
    /// From the ready line.
    pub stream: SocketAddr,
    /// From the ready line: where peers link to it, if they may.
    pub peer: Option<SocketAddr>,
    /// From the ready line: where it serves /metrics, /healthz and /readyz
    /// (`listen.metrics`), if it does.
    pub metrics: Option<SocketAddr>,
    pub node_generation: u64,
}

/// A start that ended before the node printed its ready line: how the
/// process exited and everything it printed (a refused config or lease
/// exits with code 2 and says why on stderr).
pub struct StartFailure {
    pub status: ExitStatus,
    pub printed: Vec<(Stream, String)>,
}

impl std::fmt::Debug for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exited with {} before its ready line; it printed:",
            self.status
        )?;
        for (stream, line) in &self.printed {
            write!(f, "\n  {stream:?}: {line}")?;
        }
        Ok(())
    }
}

impl NodeProcess {
    /// Starts the node on `config` and waits for its ready line.
    pub fn start(rid: u64, config: &Path) -> Self {
        Self::try_start(rid, config).unwrap_or_else(|failure| panic!("node {rid}: {failure:?}"))
    }

    /// Starts the node on `config` and waits up to [`WAIT`] for its ready
    /// line; `Err` with its exit status and output if the process exits
    /// first (panics if it neither prints the line nor exits in time).
    pub fn try_start(rid: u64, config: &Path) -> Result<Self, StartFailure> {
        Self::try_start_with(rid, config, None)
    }

    /// [`NodeProcess::start`] with the process's descriptor limit
    /// (RLIMIT_NOFILE, soft and hard) set to `nofile` before it runs.
    pub fn start_with_nofile(rid: u64, config: &Path, nofile: u64) -> Self {
        Self::try_start_with(rid, config, Some(nofile))
            .unwrap_or_else(|failure| panic!("node {rid} did not start: {failure:?}"))
    }

    fn try_start_with(rid: u64, config: &Path, nofile: Option<u64>) -> Result<Self, StartFailure> {
        // Every test that starts a zlink-node is under the bound from here.
        bound::arm();
        let path = config.to_str().expect("a UTF-8 path");
        let mut command = command(&["--config", path, "--console"]);
        if let Some(nofile) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches only the
            // child's own limits, between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: nofile,
                        rlim_max: nofile,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("zlink-node runs");
        let (tx, lines) = channel();
        let out = child.stdout.take().expect("stdout is piped");
        let err = child.stderr.take().expect("stderr is piped");
        for (stream, pipe) in [
            (Stream::Out, Box::new(out) as Box<dyn std::io::Read + Send>),
            (Stream::Err, Box::new(err)),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if tx.send((stream, line)).is_err() {
                        break;
                    }
                }
            });
        }
        // Only the readers send: once both pipes close (the process
        // exited), a wait ends at once instead of at its timeout.
        drop(tx);
        let console = child.stdin.take();
        let mut node = NodeProcess {
            rid,
            child: Some(child),
            console,
            lines,
            seen: Vec::new(),
            stream: ([0, 0, 0, 0], 0).into(),
            peer: None,
            metrics: None,
            node_generation: 0,
        };
        let wait = bound::waiting(format_args!("node {rid}'s ready line"));
        let ready = match node.next_match(0, |s, l| {
            s == Stream::Out && l.contains("zlink-node ready:")
        }) {
            Ok((_, line)) => line,
            Err(RecvTimeoutError::Disconnected) => return Err(node.exited()),
            Err(RecvTimeoutError::Timeout) => panic!(
                "node {rid}: no ready line within {WAIT:?}; it printed {:#?}",
                node.seen
            ),
        };
        drop(wait);
        node.stream = field(&ready, "stream")
            .parse()
            .unwrap_or_else(|_| panic!("a stream address in {ready:?}"));
        node.peer = field(&ready, "peer").parse().ok();
        node.metrics = field(&ready, "metrics").parse().ok();
        node.node_generation = field(&ready, "node_generation")
            .parse()
            .unwrap_or_else(|_| panic!("a node_generation in {ready:?}"));
        Ok(node)
    }

    /// The exit of a process whose pipes closed: its status (waited for up
    /// to [`WAIT`]) and everything it printed.
    fn exited(&mut self) -> StartFailure {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.console = None;
        let child = self.child.take().expect("the node was started");
        match wait_child(child) {
            Some(status) => StartFailure {
                status,
                printed: std::mem::take(&mut self.seen),
            },
            None => panic!(
                "node {}: closed its output but did not exit; it printed {:#?}",
                self.rid, self.seen
            ),
        }
    }

    /// Waits up to [`WAIT`] for a line on `stream` containing `needle`
    /// (also among the lines already read); returns it.
    pub fn wait_line(&mut self, stream: Stream, needle: &str) -> String {
        self.wait_line_from(0, stream, needle)
    }

    /// [`NodeProcess::wait_line`] on either stream (a log line on stderr or
    /// a printed one on stdout); returns the stream and the line.
    pub fn wait_line_anywhere(&mut self, needle: &str) -> (Stream, String) {
        let _wait = bound::waiting(format_args!(
            "a line with {needle:?} from node {}",
            self.rid
        ));
        self.next_match(0, |_, l| l.contains(needle))
            .unwrap_or_else(|_| {
                panic!(
                    "node {}: no line with {needle:?}; it printed {:#?}",
                    self.rid, self.seen
                )
            })
    }

    /// Reads every line the node printed so far (without waiting) into
    /// [`NodeProcess::seen`]; returns those containing `needle`.
    pub fn lines_with(&mut self, needle: &str) -> Vec<(Stream, String)> {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.seen
            .iter()
            .filter(|(_, l)| l.contains(needle))
            .cloned()
            .collect()
    }

    /// Sends one console command (the node runs with `--console`) and
    /// returns its answer (what follows
    /// `zlink-node control: `). Commands are answered in order, and this
    /// waits for each, so the first answer line after the command is its.
    pub fn control(&mut self, command: &str) -> String {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        let mark = self.seen.len();
        let console = self.console.as_mut().expect("the node is running");
        writeln!(console, "{command}").expect("the console takes a command");
        console.flush().expect("the console takes a command");
        let prefix = "zlink-node control: ";
        let _wait = bound::waiting(format_args!(
            "the answer to console command {command:?} on node {}",
            self.rid
        ));
        let line = self.wait_line_from(mark, Stream::Out, prefix);
        line.split_once(prefix)
            .map_or(line.clone(), |(_, answer)| answer.to_owned())
    }

    /// [`NodeProcess::wait_line`] among the lines from the `from`th on.
    fn wait_line_from(&mut self, from: usize, stream: Stream, needle: &str) -> String {
        let _wait = bound::waiting(format_args!(
            "a line with {needle:?} on node {}'s {stream:?}",
            self.rid
        ));
        match self.next_match(from, |s, l| s == stream && l.contains(needle)) {
            Ok((_, line)) => line,
            Err(_) => panic!(
                "node {}: no {stream:?} line with {needle:?}; it printed {:#?}",
                self.rid, self.seen
            ),
        }
    }

    /// The first line from the `from`th on (already read, or read within
    /// [`WAIT`]) that `matches`; `Err` at the timeout, or once the process
    /// closed its output without printing one.
    fn next_match(
        &mut self,
        from: usize,
        matches: impl Fn(Stream, &str) -> bool,
    ) -> Result<(Stream, String), RecvTimeoutError> {
        if let Some(found) = self.seen[from.min(self.seen.len())..]
            .iter()
            .find(|(s, l)| matches(*s, l))
        {
            return Ok(found.clone());
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (s, line) = self.lines.recv_timeout(left)?;
            self.seen.push((s, line.clone()));
            if matches(s, &line) {
                return Ok((s, line));
            }
        }
    }

    /// Waits until this node logged its link to `peer` up.
    pub fn wait_linked(&mut self, peer: u64) {
        self.wait_line(Stream::Err, &format!("link up peer={peer} "));
    }

    /// SIGKILL: the process ends at once, giving nothing back (its leases
    /// stay in the store until they lapse).
    pub fn kill9(&mut self) {
        self.console = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): the process freezes, or goes on.
    /// A freeze returns once every thread of the node is stopped
    /// ([`bound::until_stopped`]), not when the signal is sent.
    pub fn freeze(&mut self, frozen: bool) {
        self.signal(if frozen { libc::SIGSTOP } else { libc::SIGCONT });
        if frozen {
            let pid = self.child.as_ref().expect("the node is running").id();
            bound::until_stopped(pid, &format!("node {}", self.rid));
        }
    }

    /// Sends `signal` to the running node.
    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("the node is running");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        // SAFETY: kill(2) with a valid signal number only sends a signal to
        // the child this test started and still owns (not yet waited for).
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "signal {signal} to node {}", self.rid);
    }

    /// SIGTERM alone: the node starts its clean stop (§10 Shutdown), and
    /// the test goes on while it drains.
    pub fn sigterm(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Waits (bounded) for the process to exit on its own; its status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.take().expect("the node is running");
        wait_child(child)
            .unwrap_or_else(|| panic!("node {} did not exit within {WAIT:?}", self.rid))
    }

    /// SIGTERM, then waits for the stop report and the exit; returns the
    /// report line and the exit status.
    pub fn terminate(&mut self) -> (String, ExitStatus) {
        self.stop_with(libc::SIGTERM)
    }

    /// [`NodeProcess::terminate`] with another stop signal (SIGINT,
    /// SIGHUP).
    pub fn stop_with(&mut self, signal: libc::c_int) -> (String, ExitStatus) {
        self.signal(signal);
        let report = self.wait_line(Stream::Out, "zlink-node stopped:");
        let child = self.child.take().expect("the node is running");
        let status = wait_child(child)
            .unwrap_or_else(|| panic!("node {} did not exit after its stop report", self.rid));
        (report, status)
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The value of `name=value` in a printed line.
pub fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=");
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key.as_str()))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

/// A count `name=N` of a stop report (0 when the report lists none: the
/// flow counts list only those that are not zero).
pub fn count(report: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    report
        .split_whitespace()
        .find_map(|word| word.strip_prefix(key.as_str()))
        .map_or(0, |n| n.parse().expect("a count"))
}

// ---- the metrics endpoint (`listen.metrics`, docs/operations.md "Metrics") --

/// `text`, a node config, with the metrics endpoint on a free loopback
/// port (its address is in the ready line: [`NodeProcess::metrics`]).
pub fn with_metrics(text: &str) -> String {
    text.replace("[listen]\n", "[listen]\nmetrics = \"127.0.0.1:0\"\n")
}

/// One HTTP/1.1 GET over a fresh connection: the status and the body.
/// Bounded by [`WAIT`] for the connection and each read.
pub fn get(address: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&address, WAIT).expect("the endpoint accepts");
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .expect("the whole response, then the close");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP response: {:?}", String::from_utf8_lossy(&raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("an ASCII head");
    let body = &raw[split + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (status, String::from_utf8(body).expect("a UTF-8 body"))
}

/// The body of a `Transfer-Encoding: chunked` response (the endpoint's
/// HTTP server chunks a body past 32 KiB, as a scrape of every series
/// is), on bytes: a chunk may end inside a UTF-8 character.
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or_else(|| panic!("a chunk size line in {:?}", String::from_utf8_lossy(rest)));
        let size = std::str::from_utf8(&rest[..line]).expect("an ASCII chunk size");
        let size = usize::from_str_radix(size.split(';').next().unwrap_or(size).trim(), 16)
            .unwrap_or_else(|_| panic!("a hexadecimal chunk size: {size:?}"));
        if size == 0 {
            return body;
        }
        let data = &rest[line + 2..];
        body.extend_from_slice(&data[..size]);
        rest = data[size..]
            .strip_prefix(b"\r\n")
            .expect("a CRLF after each chunk");
    }
}

/// `/metrics` of `node`, which must answer 200.
pub fn scrape(node: &NodeProcess) -> String {
    scrape_at(node.metrics.expect("the node serves listen.metrics"))
}

/// `/metrics` at `address` (a node's [`NodeProcess::metrics`], for a test
/// that scrapes while another thread holds the node), which must answer 200.
pub fn scrape_at(address: SocketAddr) -> String {
    let (status, body) = get(address, "/metrics");
    assert_eq!(status, 200, "GET /metrics: {body}");
    body
}

/// The value of the one sample named exactly `series` (name and labels,
/// as the Prometheus text format writes them).
pub fn sample(text: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    let found: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .collect();
    match found.as_slice() {
        [value] => value
            .parse()
            .unwrap_or_else(|_| panic!("{series}: {value:?} is not a number")),
        _ => panic!("{series}: {} samples in\n{text}", found.len()),
    }
}

/// Waits (bounded by [`WAIT`]) until the sample `series` of the node's
/// `/metrics` at `address` reads `value`; fails at once if `ended` says
/// the operation the test waits inside is over.
pub fn wait_sample(address: SocketAddr, series: &str, value: f64, ended: impl Fn() -> bool) {
    let _wait = bound::waiting(format_args!("{series} to read {value} at {address}"));
    let deadline = Instant::now() + WAIT;
    loop {
        let now = sample(&scrape_at(address), series);
        if now == value {
            return;
        }
        assert!(
            !ended(),
            "{series} reads {now}, not {value}, and the move ended"
        );
        assert!(
            Instant::now() < deadline,
            "{series} reads {now}, not {value}, after {WAIT:?}"
        );
        std::thread::yield_now();
    }
}

// ---- the lobby game's client side (src/bin/lobby/game.rs) -------------------

/// The lobby's typed messages (src/bin/lobby/messages.rs): MessagePack maps.
/// A test that also has tests/layout_support loads the file a second time,
/// inside the lobby game there: two copies of the same plain types.
#[allow(clippy::duplicate_mod)]
#[path = "../../src/bin/lobby/messages.rs"]
pub mod lobby;
#[allow(unused_imports)]
pub use lobby::{LOGIN, MOVE};

/// A client's own limit on one request: far past the relay deadline (2 s),
/// so a request that gets no terminal from the node is a failure, not a
/// slow reply.
pub const REQUEST_WAIT: Duration = Duration::from_secs(15);

/// A client of the node at `address`.
pub fn connect(address: SocketAddr) -> zlink::client::Client {
    bound::arm();
    zlink::client::Client::connect(address).expect("the node accepts clients")
}

/// Logs `player` in; the lobby answers `Welcome` naming it.
pub fn login(
    client: &mut zlink::client::Client,
    player: &str,
) -> Result<(), zlink::client::ClientError> {
    let _wait = bound::waiting(format_args!("the Welcome of {player:?}"));
    let welcome = client.call(
        &lobby::Login {
            player: player.to_owned(),
        },
        REQUEST_WAIT,
    )?;
    assert_eq!(welcome.player, player);
    Ok(())
}

/// MOVE `player` by (1, 0); its new x.
pub fn step(
    client: &mut zlink::client::Client,
    player: &str,
) -> Result<i64, zlink::client::ClientError> {
    let _wait = bound::waiting(format_args!("the reply to a MOVE of {player:?}"));
    let at = client.call(&step_message(player), REQUEST_WAIT)?;
    assert_eq!(at.y, 0, "only x moves");
    Ok(at.x)
}

/// The MOVE of `player` by (1, 0), for a test that sends it itself.
pub fn step_message(player: &str) -> lobby::Move {
    lobby::Move {
        player: player.to_owned(),
        dx: 1,
        dy: 0,
    }
}

/// The payload of a lobby message, for `start_request` (MessagePack).
pub fn payload<M: zlink::typed::Message>(message: &M) -> bytes::Bytes {
    zlink::typed::encode(message).expect("a lobby message encodes")
}

/// The x of a MOVE reply (a `Position`) whose y is 0.
pub fn x_of(reply: &[u8]) -> Result<i64, String> {
    let at: lobby::Position = zlink::typed::decode(reply)
        .map_err(|e| format!("a MOVE reply that is no position: {e}"))?;
    if at.y != 0 {
        return Err(format!("a MOVE reply off the x axis: {at:?}"));
    }
    Ok(at.x)
}
