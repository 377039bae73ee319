//! `raw-uring`: the limit of this io stack on this machine (issue 5 item
//! 2). A two-hop forwarder with no protocol logic (client → A → B → A →
//! client): A multiplexes every client onto one link connection to B
//! ([`super::forward`]: an 8-byte header per chunk, as zlink's nodes share
//! one link), B answers each request frame with a reply frame. Both hops
//! run zlink's own socket loop, [`zlink::net::Reactor`], on io_uring
//! (multishot receive into one provided buffer ring, one `submit_and_wait`
//! per turn, every connection's queued bytes sent once per turn), one
//! thread each, TCP_NODELAY on every socket: one link send per turn carries
//! every client's bytes of that turn. The difference to the `zlink` system
//! is the protocol and runtime above the reactor.
//!
//! `raw-uring-1hop` ([`start_one_hop`]) is the limit of the local path (a
//! session and its player on one node, `zlink-local`): one thread, one
//! reactor, each client's request frames answered on its own connection in
//! the turn that read them, with the same answering code as hop B.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use bytes::BytesMut;
use zlink::net::{ConnId, IoBackend, NetEvent, Reactor, ReactorConfig, ReactorWaker};
use zlink::wire::DecodeLimits;

use super::{forward, Running};

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
    /// Runs once on the hop's thread before its first turn.
    fn setup(&mut self, _reactor: &mut Reactor) -> Result<(), String> {
        Ok(())
    }
    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent);
}

/// Node A: tags each client's bytes onto the link to B and copies B's
/// chunks back to their clients.
struct Relay {
    upstream: SocketAddr,
    /// The link to B, connecting from the start (bytes queue until it is up).
    link: Option<ConnId>,
    /// Each client's tag on the link, both ways.
    tags: HashMap<ConnId, u32>,
    clients: HashMap<u32, ConnId>,
    next_tag: u32,
}

impl Relay {
    /// A client's bytes, as one chunk on the link. The forwarder never
    /// queues more than the reactor's bound: a client whose bytes find no
    /// room is closed instead of growing memory.
    fn uplink_client(&mut self, reactor: &mut Reactor, conn: ConnId) {
        let (Some(&tag), Some(link)) = (self.tags.get(&conn), self.link) else {
            return;
        };
        let Some(bytes) = reactor.inbound(conn).map(|b| b.split()) else {
            return;
        };
        if reactor.outbound_room(link) < bytes.len() + forward::HEADER {
            reactor.close(conn);
            return;
        }
        if let Some(out) = reactor.outbound(link) {
            forward::push_chunk(out, tag, &bytes);
        }
    }

    /// B's chunks, each to its client (one that has gone is skipped).
    fn downlink(&mut self, reactor: &mut Reactor, link: ConnId) {
        let Some(mut inbound) = reactor.inbound(link).map(|b| b.split()) else {
            return;
        };
        while let Some((tag, bytes)) = forward::next_chunk(&mut inbound) {
            let Some(&client) = self.clients.get(&tag) else {
                continue;
            };
            if reactor.outbound_room(client) < bytes.len() {
                reactor.close(client);
            } else if let Some(out) = reactor.outbound(client) {
                out.extend_from_slice(&bytes);
            }
        }
        // A partial chunk waits in front of any bytes that came since.
        if !inbound.is_empty() {
            if let Some(rest) = reactor.inbound(link) {
                inbound.unsplit(rest.split());
                *rest = inbound;
            }
        }
    }

    /// The link is gone (or never came up): every client with it; their
    /// load client reports the closed sessions.
    fn lose_link(&mut self, reactor: &mut Reactor) {
        self.link = None;
        for (_, client) in self.clients.drain() {
            reactor.close(client);
        }
        self.tags.clear();
    }
}

impl HopLogic for Relay {
    fn setup(&mut self, reactor: &mut Reactor) -> Result<(), String> {
        let link = reactor
            .connect(self.upstream)
            .map_err(|e| format!("connecting to hop B: {e}"))?;
        self.link = Some(link);
        Ok(())
    }

    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent) {
        match event {
            NetEvent::Accepted { conn, .. } => {
                if self.link.is_none() {
                    reactor.close(conn);
                    return;
                }
                let tag = self.next_tag;
                self.next_tag = self.next_tag.wrapping_add(1);
                self.tags.insert(conn, tag);
                self.clients.insert(tag, conn);
            }
            NetEvent::Received { conn } if Some(conn) == self.link => {
                self.downlink(reactor, conn);
            }
            NetEvent::Received { conn } => self.uplink_client(reactor, conn),
            NetEvent::Closed { conn, .. } | NetEvent::ConnectFailed { conn, .. }
                if Some(conn) == self.link =>
            {
                self.lose_link(reactor);
            }
            NetEvent::Closed { conn, .. } => {
                if let Some(tag) = self.tags.remove(&conn) {
                    self.clients.remove(&tag);
                    if let Some(out) = self.link.and_then(|l| reactor.outbound(l)) {
                        forward::push_closed(out, tag);
                    }
                }
            }
            NetEvent::ConnectFailed { .. } | NetEvent::Connected { .. } | NetEvent::Woken => {}
        }
    }
}

/// Node B: answers every request frame on the link with its payload; or,
/// one hop (`raw-uring-1hop`), every request frame of a client on that
/// client's own connection, in the turn that read it.
#[derive(Default)]
struct Reflect {
    /// `raw-uring-1hop`: the connections are the clients themselves, whose
    /// bytes are frames with no chunk header.
    one_hop: bool,
    limits: DecodeLimits,
    links: HashMap<ConnId, forward::Reflector>,
    replies: BytesMut,
}

impl HopLogic for Reflect {
    fn on_event(&mut self, reactor: &mut Reactor, event: NetEvent) {
        match event {
            NetEvent::Received { conn } => {
                let Some(inbound) = reactor.inbound(conn) else {
                    return;
                };
                // A partial frame (or chunk) stays in `inbound` for the
                // bytes still to come.
                let answered = if self.one_hop {
                    forward::answer_frames(inbound, &mut self.replies, &self.limits)
                } else {
                    let reflector = self.links.entry(conn).or_default();
                    reflector.answer(inbound, &mut self.replies)
                };
                if answered.is_err() {
                    reactor.close(conn);
                    return;
                }
                if reactor.outbound_room(conn) < self.replies.len() {
                    reactor.close(conn);
                } else if let Some(out) = reactor.outbound(conn) {
                    out.extend_from_slice(&self.replies);
                }
                self.replies.clear();
            }
            NetEvent::Closed { conn, .. } => {
                self.links.remove(&conn);
            }
            _ => {}
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
            let config = ReactorConfig {
                backend: IoBackend::IoUring,
                ..ReactorConfig::default()
            };
            let setup = Reactor::new(config)
                .map_err(|e| e.to_string())
                .and_then(|mut r| {
                    let (_, addr) = r
                        .listen(([127, 0, 0, 1], 0).into())
                        .map_err(|e| e.to_string())?;
                    hop.setup(&mut r)?;
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
    let (b_addr, b) = spawn_hop("raw-uring-b", Reflect::default(), Arc::clone(&stop))?;
    let relay = Relay {
        upstream: b_addr,
        link: None,
        tags: HashMap::new(),
        clients: HashMap::new(),
        next_tag: 0,
    };
    let (entry, a) = spawn_hop("raw-uring-a", relay, Arc::clone(&stop))?;
    Ok(Box::new(Forwarder {
        entry,
        stop,
        hops: vec![a, b],
    }))
}

/// `raw-uring-1hop`: hop B's answering alone, on the clients' own
/// connections (client → hop → client), one thread.
pub fn start_one_hop() -> Result<Box<dyn Running>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let echo = Reflect {
        one_hop: true,
        ..Reflect::default()
    };
    let (entry, hop) = spawn_hop("raw-uring-1hop", echo, Arc::clone(&stop))?;
    Ok(Box::new(Forwarder {
        entry,
        stop,
        hops: vec![hop],
    }))
}
