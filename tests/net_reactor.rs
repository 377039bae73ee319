//! The reactor over real loopback sockets, on either backend: multishot accept and
//! receive, buffer recycling, gathered and short writes, connect, close,
//! and the waker. No test sleeps: each waits for the event it needs, with a
//! deadline that fails the test instead of hanging it.

use std::error::Error;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use zlink::net::{CloseCause, ConnId, IoBackend, NetEvent, Reactor, ReactorConfig, ReactorWaker};

type TestResult = Result<(), Box<dyn Error + Send + Sync>>;

/// How long any single wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// A small buffer ring, so that the tests recycle buffers many times over
/// (on epoll: small reads and a small read budget per turn), on the backend
/// `ZLINK_IO_BACKEND` names (`io_uring` by default; `.ci/run` runs this
/// suite on both, issue 8 item 3).
fn small_config() -> ReactorConfig {
    let backend = std::env::var("ZLINK_IO_BACKEND").map_or(IoBackend::IoUring, |name| {
        name.parse()
            .unwrap_or_else(|e| panic!("ZLINK_IO_BACKEND: {e}"))
    });
    ReactorConfig {
        buffer_count: 16,
        buffer_size: 4096,
        backend,
        ..ReactorConfig::default()
    }
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Turns until an event matches `want`; the events before it are returned
/// too, in order, so that a test can check what came first.
fn wait_for(
    reactor: &mut Reactor,
    mut want: impl FnMut(&NetEvent) -> bool,
) -> Result<(NetEvent, Vec<NetEvent>), Box<dyn Error + Send + Sync>> {
    let start = Instant::now();
    let mut before = Vec::new();
    loop {
        while let Some(event) = reactor.poll_event() {
            if want(&event) {
                return Ok((event, before));
            }
            before.push(event);
        }
        if start.elapsed() > DEADLINE {
            return Err(format!("no matching event within {DEADLINE:?}; saw {before:?}").into());
        }
        reactor.turn(Some(Duration::from_millis(500)))?;
    }
}

/// Turns until the reactor has released `conn`, after its end was reported.
fn wait_released(reactor: &mut Reactor, conn: ConnId) -> TestResult {
    let start = Instant::now();
    while reactor.inbound(conn).is_some() {
        if start.elapsed() > DEADLINE {
            return Err("the connection was never released".into());
        }
        reactor.turn(Some(Duration::from_millis(100)))?;
        while reactor.poll_event().is_some() {}
    }
    Ok(())
}

fn accepted(reactor: &mut Reactor) -> Result<ConnId, Box<dyn Error + Send + Sync>> {
    match wait_for(reactor, |e| matches!(e, NetEvent::Accepted { .. }))?.0 {
        NetEvent::Accepted { conn, .. } => Ok(conn),
        other => Err(format!("unexpected {other:?}").into()),
    }
}

/// An echo server on its own reactor thread; stops when woken with `stop`.
struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    waker: ReactorWaker,
    thread: thread::JoinHandle<Result<(), String>>,
}

impl EchoServer {
    fn start() -> Result<Self, Box<dyn Error + Send + Sync>> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_seen = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let run = || -> Result<(), Box<dyn Error + Send + Sync>> {
                let mut reactor = Reactor::new(small_config())?;
                let (_, addr) = reactor.listen(localhost())?;
                ready_tx.send((addr, reactor.waker()))?;
                loop {
                    reactor.turn(None)?;
                    while let Some(event) = reactor.poll_event() {
                        match event {
                            NetEvent::Received { conn } => echo(&mut reactor, conn),
                            NetEvent::Woken if stop_seen.load(Ordering::Acquire) => return Ok(()),
                            _ => {}
                        }
                    }
                }
            };
            run().map_err(|err| err.to_string())
        });
        let (addr, waker) = ready_rx.recv_timeout(DEADLINE)?;
        Ok(Self {
            addr,
            stop,
            waker,
            thread,
        })
    }

    fn stop(self) -> TestResult {
        self.stop.store(true, Ordering::Release);
        self.waker.wake();
        self.thread
            .join()
            .map_err(|_| "the echo server panicked")?
            .map_err(Into::into)
    }
}

/// Moves everything received on `conn` to its outbound queue.
fn echo(reactor: &mut Reactor, conn: ConnId) {
    let Some(bytes) = reactor.inbound(conn).map(|inbound| inbound.split()) else {
        return;
    };
    if let Some(outbound) = reactor.outbound(conn) {
        outbound.extend_from_slice(&bytes);
    }
}

/// The 64-byte message number `seq` of client `client`.
fn message(client: u8, seq: u16) -> [u8; 64] {
    let mut msg = [client; 64];
    msg[..2].copy_from_slice(&seq.to_be_bytes());
    msg
}

fn connect_client(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(DEADLINE))?;
    Ok(stream)
}

#[test]
fn echo_of_1000_messages_to_8_clients_at_once_arrives_intact() -> TestResult {
    let server = EchoServer::start()?;
    let clients: Vec<_> = (0..8u8)
        .map(|client| {
            let addr = server.addr;
            thread::spawn(move || -> std::io::Result<()> {
                let mut stream = connect_client(addr)?;
                const BATCH: u16 = 50;
                for batch in 0..(1000 / BATCH) {
                    let mut sent = Vec::with_capacity(64 * BATCH as usize);
                    for seq in batch * BATCH..(batch + 1) * BATCH {
                        let msg = message(client, seq);
                        stream.write_all(&msg)?;
                        sent.extend_from_slice(&msg);
                    }
                    let mut back = vec![0; sent.len()];
                    stream.read_exact(&mut back)?;
                    if back != sent {
                        return Err(std::io::Error::other(format!(
                            "client {client}: batch {batch} came back altered"
                        )));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for client in clients {
        client.join().map_err(|_| "a client panicked")??;
    }
    server.stop()
}

#[test]
fn a_large_write_to_a_slow_reader_arrives_whole_and_outbound_len_drops_to_zero() -> TestResult {
    const LEN: usize = 8 * 1024 * 1024;
    let mut reactor = Reactor::new(small_config())?;
    let (_, addr) = reactor.listen(localhost())?;
    // The reader starts reading only once the reactor's first send has
    // ended: the socket buffers then hold far less than 8 MiB, so the write
    // takes several sends whatever the machine's speed (an idle machine's
    // reader once kept up with a single 8 MiB send).
    let (go, start_reading) = std::sync::mpsc::channel::<()>();
    let reader = thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let mut stream = connect_client(addr)?;
        let _ = start_reading.recv();
        let mut got = Vec::with_capacity(LEN);
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk)? {
                0 => return Ok(got),
                n => got.extend_from_slice(&chunk[..n]),
            }
        }
    });
    let conn = accepted(&mut reactor)?;
    let payload: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    reactor
        .outbound(conn)
        .ok_or("no outbound queue")?
        .extend_from_slice(&payload);
    assert_eq!(reactor.outbound_len(conn), LEN);
    let start = Instant::now();
    let mut turns = 0;
    while reactor.outbound_len(conn) > 0 {
        if start.elapsed() > DEADLINE {
            return Err("the large write did not drain".into());
        }
        reactor.turn(Some(Duration::from_millis(500)))?;
        while reactor.poll_event().is_some() {}
        turns += 1;
        if turns == 1 {
            let _ = go.send(());
        }
    }
    assert!(turns > 1, "8 MiB to a slow reader takes several sends");
    reactor.close(conn);
    let (closed, _) = wait_for(&mut reactor, |e| matches!(e, NetEvent::Closed { .. }))?;
    assert_eq!(
        closed,
        NetEvent::Closed {
            conn,
            cause: CloseCause::Local
        }
    );
    let got = reader.join().map_err(|_| "the reader panicked")??;
    assert_eq!(got.len(), LEN);
    assert!(got == payload, "the bytes arrived altered");
    Ok(())
}

#[test]
fn connect_between_two_reactors_yields_connected_and_bytes_flow_both_ways() -> TestResult {
    let server = EchoServer::start()?;
    let mut reactor = Reactor::new(small_config())?;
    let conn = reactor.connect(server.addr)?;
    reactor
        .outbound(conn)
        .ok_or("no outbound queue while connecting")?
        .extend_from_slice(b"queued before connected;");
    let (event, _) = wait_for(&mut reactor, |e| {
        matches!(
            e,
            NetEvent::Connected { .. } | NetEvent::ConnectFailed { .. }
        )
    })?;
    assert_eq!(event, NetEvent::Connected { conn });
    reactor
        .outbound(conn)
        .ok_or("no outbound queue")?
        .extend_from_slice(b"sent after");
    let want: &[u8] = b"queued before connected;sent after";
    let start = Instant::now();
    while reactor.inbound(conn).map_or(0, |b| b.len()) < want.len() {
        if start.elapsed() > DEADLINE {
            return Err("the echo did not come back".into());
        }
        wait_for(&mut reactor, |e| *e == NetEvent::Received { conn })?;
    }
    assert_eq!(reactor.inbound(conn).map(|b| &b[..]), Some(want));
    reactor.abort(conn);
    assert_eq!(
        reactor.poll_event(),
        Some(NetEvent::Closed {
            conn,
            cause: CloseCause::Local
        })
    );
    server.stop()
}

#[test]
fn connect_to_a_closed_port_yields_connect_failed() -> TestResult {
    let addr = TcpListener::bind(localhost())?.local_addr()?;
    let mut reactor = Reactor::new(small_config())?;
    let conn = reactor.connect(addr)?;
    let (event, _) = wait_for(&mut reactor, |e| {
        matches!(
            e,
            NetEvent::Connected { .. } | NetEvent::ConnectFailed { .. }
        )
    })?;
    assert_eq!(
        event,
        NetEvent::ConnectFailed {
            conn,
            error: std::io::ErrorKind::ConnectionRefused
        }
    );
    wait_released(&mut reactor, conn)
}

#[test]
fn peer_close_gives_closed_peer_closed_after_its_last_bytes() -> TestResult {
    let mut reactor = Reactor::new(small_config())?;
    let (_, addr) = reactor.listen(localhost())?;
    let mut client = connect_client(addr)?;
    let conn = accepted(&mut reactor)?;
    client.write_all(b"last words")?;
    drop(client);
    let (closed, before) = wait_for(&mut reactor, |e| matches!(e, NetEvent::Closed { .. }))?;
    assert_eq!(
        closed,
        NetEvent::Closed {
            conn,
            cause: CloseCause::PeerClosed
        }
    );
    assert!(before.contains(&NetEvent::Received { conn }));
    assert_eq!(
        reactor.inbound(conn).map(|b| &b[..]),
        Some(&b"last words"[..]),
        "inbound stays readable until the next turn"
    );
    assert!(reactor.outbound(conn).is_none());
    wait_released(&mut reactor, conn)
}

#[test]
fn close_flushes_queued_bytes_then_the_peer_reads_eof() -> TestResult {
    const LEN: usize = 1024 * 1024;
    let mut reactor = Reactor::new(small_config())?;
    let (_, addr) = reactor.listen(localhost())?;
    let mut client = connect_client(addr)?;
    let conn = accepted(&mut reactor)?;
    reactor
        .outbound(conn)
        .ok_or("no outbound queue")?
        .extend_from_slice(&vec![7u8; LEN]);
    reactor.close(conn);
    assert!(
        reactor.outbound(conn).is_none(),
        "a closing connection takes no more bytes"
    );
    let reader = thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let mut got = Vec::new();
        client.read_to_end(&mut got)?;
        Ok(got)
    });
    let (closed, _) = wait_for(&mut reactor, |e| matches!(e, NetEvent::Closed { .. }))?;
    assert_eq!(
        closed,
        NetEvent::Closed {
            conn,
            cause: CloseCause::Local
        }
    );
    let got = reader.join().map_err(|_| "the reader panicked")??;
    assert_eq!(got.len(), LEN);
    assert!(got.iter().all(|&b| b == 7));
    Ok(())
}

#[test]
fn wake_from_another_thread_makes_a_parked_turn_return_woken() -> TestResult {
    let mut reactor = Reactor::new(small_config())?;
    let waker = reactor.waker();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let waking = thread::spawn(move || {
        while go_rx.recv().is_ok() {
            waker.wake();
        }
    });
    for _ in 0..100 {
        go_tx.send(())?;
        let start = Instant::now();
        loop {
            reactor.turn(None)?;
            if reactor.poll_event() == Some(NetEvent::Woken) {
                break;
            }
            if start.elapsed() > DEADLINE {
                return Err("no Woken".into());
            }
        }
        assert_eq!(reactor.poll_event(), None, "one wake is one Woken");
    }
    drop(go_tx);
    waking.join().map_err(|_| "the waking thread panicked")?;
    Ok(())
}
