//! `raw-uring`: the limit of this design on this machine (issue 5 item 2). A
//! two-hop forwarder with no protocol logic: node A copies bytes between
//! each client connection and its own connection to node B; node B answers
//! each request frame with a reply frame carrying the same correlation and
//! payload. Both hops run zlink's own socket loop, [`zlink::net::Reactor`]
//! (multishot receive into one provided buffer ring, one `submit_and_wait`
//! per turn, gathered sends), one thread each, so the difference to the
//! `zlink` system is the protocol and runtime above the reactor.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use bytes::BytesMut;
use zlink::net::{ConnId, NetEvent, Reactor, ReactorConfig, ReactorWaker};
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use super::Running;

/// One hop's thread, its waker and the flag that ends it.
struct HopThread {
    thread: JoinHandle<()>,
    waker: ReactorWaker,
}

struct Forwarder {
    entry: SocketAddr,
    stop: Arc<AtomicBool>,
    hops: Vec<HopThread>,
}

impl Running for Forwarder {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn io_stack(&self) -> &'static str {
        "io_uring"
    }

    fn stop(self: Box<Self>) -> Vec<super::Move> {
        self.stop.store(true, Ordering::Release);
        for hop in &self.hops {
            hop.waker.wake();
        }
        for hop in self.hops {
            let _ = hop.thread.join();
        }
        Vec::new()
    }
}

/// What a hop does with the bytes of one turn.
trait HopLogic {
    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent);
}

/// Node A: copies bytes both ways between a client and its upstream.
struct Relay {
    upstream: SocketAddr,
    /// Each connection's partner, both directions.
    pairs: HashMap<ConnId, ConnId>,
}

impl Relay {
    fn forward(&mut self, reactor: &mut Reactor, from: ConnId) {
        let Some(&to) = self.pairs.get(&from) else {
            return;
        };
        let Some(bytes) = reactor.inbound(from).map(|b| b.split()) else {
            return;
        };
        // The forwarder never queues more than the reactor's bound: a peer
        // that stops reading loses its pair instead of growing memory.
        if reactor.outbound_room(to) < bytes.len() {
            reactor.close(from);
            reactor.close(to);
            return;
        }
        if let Some(out) = reactor.outbound(to) {
            out.extend_from_slice(&bytes);
        }
    }
}

impl HopLogic for Relay {
    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent) {
        match event {
            NetEvent::Accepted { conn, .. } => match reactor.connect(self.upstream) {
                Ok(up) => {
                    self.pairs.insert(conn, up);
                    self.pairs.insert(up, conn);
                }
                Err(_) => reactor.close(conn),
            },
            NetEvent::Received { conn } => self.forward(reactor, conn),
            NetEvent::Closed { conn, .. } | NetEvent::ConnectFailed { conn, .. } => {
                if let Some(other) = self.pairs.remove(&conn) {
                    self.pairs.remove(&other);
                    reactor.close(other);
                }
            }
            NetEvent::Connected { .. } | NetEvent::Woken => {}
        }
    }
}

/// Node B: answers every request frame with its payload.
struct Reflect {
    limits: DecodeLimits,
}

impl Reflect {
    fn answer(&mut self, reactor: &mut Reactor, conn: ConnId) {
        let mut replies = BytesMut::new();
        let Some(inbound) = reactor.inbound(conn) else {
            return;
        };
        loop {
            match ClientFrame::decode_from(inbound, &self.limits) {
                Ok(Some(ClientFrame::Request {
                    correlation,
                    payload,
                    ..
                })) => ClientFrame::Reply {
                    correlation,
                    payload,
                }
                .encode(&mut replies),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    reactor.close(conn);
                    return;
                }
            }
        }
        if reactor.outbound_room(conn) < replies.len() {
            reactor.close(conn);
        } else if let Some(out) = reactor.outbound(conn) {
            out.extend_from_slice(&replies);
        }
    }
}

impl HopLogic for Reflect {
    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent) {
        if let NetEvent::Received { conn } = event {
            self.answer(reactor, conn);
        }
    }
}

/// Starts a hop's thread: builds its reactor there (the kernel ties
/// operations to the submitting thread), listens, reports the address.
fn spawn_hop<H: HopLogic + Send + 'static>(
    name: &str,
    mut hop: H,
    stop: Arc<AtomicBool>,
) -> Result<(SocketAddr, HopThread), String> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let setup = Reactor::new(ReactorConfig::default())
                .map_err(|e| e.to_string())
                .and_then(|mut r| {
                    let (_, addr) = r
                        .listen(([127, 0, 0, 1], 0).into())
                        .map_err(|e| e.to_string())?;
                    Ok((r, addr))
                });
            let mut reactor = match setup {
                Ok((reactor, addr)) => {
                    let _ = tx.send(Ok((addr, reactor.waker())));
                    reactor
                }
                Err(why) => {
                    let _ = tx.send(Err(why));
                    return;
                }
            };
            while !stop.load(Ordering::Acquire) {
                if let Err(e) = reactor.turn(None) {
                    eprintln!("raw-uring: turn failed: {e}");
                    return;
                }
                while let Some(event) = reactor.poll_event() {
                    hop.on_event(&mut reactor, event);
                }
            }
        })
        .map_err(|e| format!("spawning {name}: {e}"))?;
    let (addr, waker) = rx
        .recv()
        .map_err(|_| format!("{name} ended during setup"))??;
    Ok((addr, HopThread { thread, waker }))
}

pub fn start() -> Result<Box<dyn Running>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let (b_addr, b) = spawn_hop(
        "raw-uring-b",
        Reflect {
            limits: DecodeLimits::default(),
        },
        Arc::clone(&stop),
    )?;
    let relay = Relay {
        upstream: b_addr,
        pairs: HashMap::new(),
    };
    let (entry, a) = spawn_hop("raw-uring-a", relay, Arc::clone(&stop))?;
    Ok(Box::new(Forwarder {
        entry,
        stop,
        hops: vec![a, b],
    }))
}
