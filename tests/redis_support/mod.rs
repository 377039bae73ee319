//! A real redis-server for the tests: each [`RedisServer`] is its own child
//! process on a free loopback port, killed when dropped. The tests never
//! rely on a system service; `.ci/run` installs the package.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
const START_WAIT: Duration = Duration::from_secs(10);

/// How the server keeps its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In memory only (`--save '' --appendonly no`): a restart loses it.
    Volatile,
    /// An append-only file synced on every write: a restart keeps it, as
    /// a production store must (docs/store.md "Durability").
    Durable,
    /// A one-node Redis Cluster owning every slot: a script that touched
    /// keys of two slots would fail, so the suite proves each stays in one.
    Cluster,
}

/// The PEM files of a server that speaks TLS only ([`RedisServer::start_tls`]).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The server's certificate (`--tls-cert-file`).
    pub cert: PathBuf,
    /// Its private key (`--tls-key-file`).
    pub key: PathBuf,
    /// The CA a client's certificate must chain to (`--tls-ca-cert-file`;
    /// the server needs one even when it asks clients for none).
    pub ca: PathBuf,
    /// `--tls-auth-clients yes`: a client without a certificate of `ca` is
    /// refused; `no`: none is asked for.
    pub auth_clients: bool,
}

/// A redis-server child process on 127.0.0.1.
pub struct RedisServer {
    port: u16,
    mode: Mode,
    dir: PathBuf,
    child: Option<Child>,
    /// `--requirepass`, when the server demands a password.
    password: Option<String>,
    /// When set, the port is a TLS port (`--tls-port`) and no plaintext
    /// port is open (`--port 0`).
    tls: Option<TlsFiles>,
}

impl RedisServer {
    /// Starts a server and waits until it answers PING. Panics with how to
    /// install it when redis-server is missing: no test is skipped silently.
    pub fn start(mode: Mode) -> Self {
        Self::start_with(mode, None, None)
    }

    /// A volatile server that demands `password` (`--requirepass`).
    pub fn start_with_password(password: &str) -> Self {
        Self::start_with(Mode::Volatile, Some(password.to_owned()), None)
    }

    /// A volatile server that speaks TLS only, with `files`; its
    /// [`RedisServer::url`] is `rediss://`.
    pub fn start_tls(files: TlsFiles) -> Self {
        Self::start_with(Mode::Volatile, None, Some(files))
    }

    fn start_with(mode: Mode, password: Option<String>, tls: Option<TlsFiles>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "zlink-redis-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory for redis");
        for _ in 0..5 {
            let mut server = RedisServer {
                port: free_port(),
                mode,
                dir: dir.clone(),
                child: None,
                password: password.clone(),
                tls: tls.clone(),
            };
            if server.launch() {
                if mode == Mode::Cluster {
                    server.own_every_slot();
                }
                return server;
            }
        }
        panic!("redis-server did not start on a free port after 5 tries");
    }

    /// `redis://127.0.0.1:<port>/`, or `rediss://…` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// The server's one port (the TLS port of a TLS server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the server hangs as a whole (connections stay open and
    /// new ones are accepted by the kernel, but nothing is answered) until
    /// [`RedisServer::resume`]. Dropping a stopped server still kills it.
    /// It returns once the server is stopped ([`crate::bound::until_stopped`]),
    /// not when the signal is sent.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP, "SIGSTOP");
        let pid = self.child.as_ref().expect("redis-server is running").id();
        crate::bound::until_stopped(pid, &format!("redis-server on port {}", self.port));
    }

    /// A connection of the test's own, for commands a test gives the
    /// server (CONFIG, CLIENT PAUSE, CLIENT LIST).
    pub fn admin(&self) -> ::redis::Connection {
        ::redis::Client::open(self.url())
            .expect("a Redis URL")
            .get_connection_with_timeout(std::time::Duration::from_secs(10))
            .expect("Redis answers")
    }

    /// `CLIENT PAUSE <ms> WRITE` on `admin`: the server holds every write,
    /// and every script, for `ms` (reads and connection set-up go on), as
    /// a busy server delays an answer.
    pub fn pause_writes(admin: &mut ::redis::Connection, ms: u64) {
        let _: () = ::redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(ms)
            .arg("WRITE")
            .query(admin)
            .expect("CLIENT PAUSE");
    }

    /// SIGCONT: a server stopped by [`RedisServer::pause`] answers again.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT, "SIGCONT");
    }

    fn signal(&self, signal: libc::c_int, name: &str) {
        let child = self.child.as_ref().expect("redis-server is running");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        // SAFETY: kill(2) only signals the redis-server child this test
        // started and still owns (not yet waited for, so the pid is its).
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "{name} to redis-server on port {}", self.port);
    }

    /// Starts the server again on the same port (and, when durable, with
    /// the same data).
    pub fn restart(&mut self) {
        self.kill();
        assert!(
            self.launch(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    /// Spawns the process and waits for PING; `false` if it exited first
    /// (the port was taken meanwhile).
    fn launch(&mut self) -> bool {
        let mut command = Command::new("redis-server");
        let port = self.port.to_string();
        match &self.tls {
            None => command.args(["--port", &port]),
            Some(tls) => command
                .args(["--port", "0", "--tls-port", &port])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .args([
                    "--tls-auth-clients",
                    if tls.auth_clients { "yes" } else { "no" },
                ]),
        };
        command
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.tls.is_some() {
            // Its log says when it is ready: a plaintext PING cannot ask.
            command.stdout(Stdio::piped());
        }
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        match self.mode {
            Mode::Volatile => command.args(["--appendonly", "no"]),
            Mode::Durable => command.args(["--appendonly", "yes", "--appendfsync", "always"]),
            Mode::Cluster => command.args([
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ]),
        };
        let child = match command.spawn() {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not installed: these tests need a real Redis. \
                 Install it (`apt-get install redis-server`, which .ci/run does) and run again."
            ),
            Err(error) => panic!("redis-server did not start: {error}"),
        };
        self.child = Some(child);
        if self.tls.is_some() {
            return self.wait_ready_logged();
        }
        let deadline = Instant::now() + START_WAIT;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            if self
                .command(&["PING"])
                .is_some_and(|r| r.starts_with("+PONG") || r.starts_with("-NOAUTH"))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    /// Waits for the TLS server's "Ready to accept connections" log line
    /// (it speaks no plaintext to PING); `false` if it exited first (the
    /// port was taken meanwhile). A thread reads its log to the end, so the
    /// server never blocks on a full pipe.
    fn wait_ready_logged(&mut self) -> bool {
        let Some(log) = self.child.as_mut().and_then(|child| child.stdout.take()) else {
            panic!("redis-server's log is piped");
        };
        let (lines, logged) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(log).lines() {
                let Ok(line) = line else { break };
                // The waiter is gone once the server is ready: keep draining.
                let _ = lines.send(line);
            }
        });
        let deadline = Instant::now() + START_WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match logged.recv_timeout(left) {
                Ok(line) if line.contains("Ready to accept connections") => return true,
                Ok(line) => seen.push(line),
                // The log ended: the server exited before it was ready.
                Err(RecvTimeoutError::Disconnected) => {
                    if let Some(mut child) = self.child.take() {
                        let _ = child.wait();
                    }
                    eprintln!(
                        "redis-server with TLS on port {} exited before it was ready:\n{}",
                        self.port,
                        seen.join("\n")
                    );
                    return false;
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "redis-server with TLS on port {} was not ready within {START_WAIT:?}:\n{}",
                    self.port,
                    seen.join("\n")
                ),
            }
        }
    }

    /// Gives the one-node cluster every slot and waits until it serves.
    fn own_every_slot(&self) {
        let added = self.command(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        assert!(
            added.as_deref().is_some_and(|r| r.starts_with("+OK")),
            "CLUSTER ADDSLOTSRANGE: {added:?}"
        );
        let deadline = Instant::now() + START_WAIT;
        while !self
            .command(&["CLUSTER", "INFO"])
            .is_some_and(|info| info.contains("cluster_state:ok"))
        {
            assert!(
                Instant::now() < deadline,
                "the one-node cluster never served"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// One command in RESP over a fresh connection; the raw reply.
    fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reply = vec![0u8; 4096];
        let n = stream.read(&mut reply).ok()?;
        Some(String::from_utf8_lossy(&reply[..n]).into_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}
