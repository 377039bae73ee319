//! `raw-epoll`: the same two-hop forwarder as `raw-uring` on plain tokio
//! current-thread runtimes (epoll), one thread per hop, TCP_NODELAY on
//! every socket (issue 5 item 2: the limit of this io stack). A multiplexes
//! every client onto one link connection to B ([`super::forward`]); client
//! readers append tagged chunks to the link's queue and one writer task
//! sends whatever queued while it was away (a batch per runtime turn). B's
//! chunks go straight to each client with a non-blocking write; only what
//! the socket does not take waits for the client's writer task. B answers
//! each request frame with a reply frame, all of one read in one write.
//!
//! `raw-epoll-1hop` ([`start_one_hop`]) is the limit of the local path on
//! this stack: one current-thread runtime, each client's task answering its
//! request frames on its own connection, with hop B's code.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use zlink::wire::DecodeLimits;

use super::{forward, Running};

struct HopThread {
    thread: JoinHandle<()>,
    stop: oneshot::Sender<()>,
}

struct Forwarder {
    entry: SocketAddr,
    hops: Vec<HopThread>,
}

impl Running for Forwarder {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn io_stack(&self) -> &'static str {
        "epoll (tokio)"
    }

    fn stop(self: Box<Self>) -> Vec<super::Move> {
        for hop in self.hops {
            let _ = hop.stop.send(());
            let _ = hop.thread.join();
        }
        Vec::new()
    }
}

/// The most a client's or the link's queue holds: a peer that stops
/// reading loses its connection instead of growing memory.
const QUEUE_MAX: usize = 4 * 1024 * 1024;

/// A's side of one client: its write half and what it has not taken yet.
struct ClientOut {
    half: OwnedWriteHalf,
    pending: RefCell<BytesMut>,
    wake: Notify,
    closed: Cell<bool>,
}

impl ClientOut {
    /// Writes `bytes` now if the socket takes them, else queues them for
    /// the client's writer task.
    fn send(&self, bytes: &[u8]) {
        let mut pending = self.pending.borrow_mut();
        let mut rest = bytes;
        if pending.is_empty() {
            match self.half.try_write(bytes) {
                Ok(n) => rest = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return self.close(),
            }
        }
        if rest.is_empty() {
            return;
        }
        if pending.len() + rest.len() > QUEUE_MAX {
            drop(pending);
            return self.close();
        }
        pending.extend_from_slice(rest);
        self.wake.notify_one();
    }

    fn close(&self) {
        self.closed.set(true);
        self.wake.notify_one();
    }

    /// The client's writer task: sends what [`ClientOut::send`] queued.
    async fn write_queued(self: Rc<Self>) {
        loop {
            self.wake.notified().await;
            while !self.closed.get() && !self.pending.borrow().is_empty() {
                if self.half.writable().await.is_err() {
                    self.closed.set(true);
                }
                let written = self.half.try_write(&self.pending.borrow());
                match written {
                    Ok(n) => self.pending.borrow_mut().advance(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => self.closed.set(true),
                }
            }
            if self.closed.get() {
                return;
            }
        }
    }
}

/// A's shared state: the link's queue and the clients by tag.
struct Hub {
    link: RefCell<BytesMut>,
    link_wake: Notify,
    clients: RefCell<HashMap<u32, Rc<ClientOut>>>,
    next_tag: Cell<u32>,
}

impl Hub {
    fn queue(&self, push: impl FnOnce(&mut BytesMut)) -> bool {
        let mut link = self.link.borrow_mut();
        if link.len() > QUEUE_MAX {
            return false;
        }
        push(&mut link);
        self.link_wake.notify_one();
        true
    }
}

/// A's link writer: sends everything queued since its last send.
async fn write_link(hub: Rc<Hub>, mut half: OwnedWriteHalf) {
    loop {
        hub.link_wake.notified().await;
        loop {
            let bytes = hub.link.borrow_mut().split();
            if bytes.is_empty() {
                break;
            }
            if half.write_all(&bytes).await.is_err() {
                return;
            }
        }
    }
}

/// A's link reader: each of B's chunks to its client.
async fn read_link(hub: Rc<Hub>, mut half: OwnedReadHalf) {
    let mut inbound = BytesMut::with_capacity(64 * 1024);
    loop {
        match half.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        while let Some((tag, bytes)) = forward::next_chunk(&mut inbound) {
            let client = hub.clients.borrow().get(&tag).cloned();
            if let Some(client) = client {
                client.send(&bytes);
            }
        }
    }
    // The link is gone: every client with it.
    for (_, client) in hub.clients.borrow_mut().drain() {
        client.close();
    }
}

/// Node A's work for one client: its bytes, tagged, onto the link.
async fn relay(client: TcpStream, hub: Rc<Hub>) {
    let tag = hub.next_tag.get();
    hub.next_tag.set(tag.wrapping_add(1));
    let (mut read, write) = client.into_split();
    let out = Rc::new(ClientOut {
        half: write,
        pending: RefCell::new(BytesMut::new()),
        wake: Notify::new(),
        closed: Cell::new(false),
    });
    hub.clients.borrow_mut().insert(tag, Rc::clone(&out));
    tokio::task::spawn_local(Rc::clone(&out).write_queued());
    let mut inbound = BytesMut::with_capacity(16 * 1024);
    while !out.closed.get() {
        match read.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !hub.queue(|link| forward::push_chunk(link, tag, &inbound)) {
            break;
        }
        inbound.clear();
    }
    hub.clients.borrow_mut().remove(&tag);
    hub.queue(|link| forward::push_closed(link, tag));
    out.close();
}

/// Node B's work for one link: every request answered in kind, the
/// replies of one read in one write (a read holds at most what the socket
/// had, so the batch is bounded by the read). One hop (`raw-epoll-1hop`),
/// the connection is a client's, its bytes frames with no chunk header.
async fn reflect(mut conn: TcpStream, one_hop: bool) {
    let mut reflector = forward::Reflector::default();
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(64 * 1024);
    let mut replies = BytesMut::with_capacity(64 * 1024);
    loop {
        match conn.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answered = if one_hop {
            forward::answer_frames(&mut inbound, &mut replies, &limits)
        } else {
            reflector.answer(&mut inbound, &mut replies)
        };
        if answered.is_err() {
            return;
        }
        if conn.write_all(&replies).await.is_err() {
            return;
        }
        replies.clear();
    }
}

/// Connects A's link to B and starts its reader and writer tasks.
async fn link_to(upstream: SocketAddr) -> Result<Rc<Hub>, String> {
    let link = TcpStream::connect(upstream)
        .await
        .map_err(|e| format!("connecting to hop B: {e}"))?;
    link.set_nodelay(true)
        .map_err(|e| format!("link nodelay: {e}"))?;
    let (read, write) = link.into_split();
    let hub = Rc::new(Hub {
        link: RefCell::new(BytesMut::with_capacity(64 * 1024)),
        link_wake: Notify::new(),
        clients: RefCell::new(HashMap::new()),
        next_tag: Cell::new(0),
    });
    tokio::task::spawn_local(write_link(Rc::clone(&hub), write));
    tokio::task::spawn_local(read_link(Rc::clone(&hub), read));
    Ok(hub)
}

/// What a hop does with each connection it accepts.
#[derive(Clone, Copy)]
enum Role {
    /// Hop A: relays its clients over one link to hop B at this address.
    Relay(SocketAddr),
    /// Hop B: answers the requests of A's link.
    Reflect,
    /// `raw-epoll-1hop`: answers each client's requests on its own
    /// connection.
    Echo,
}

/// Starts a hop on its own current-thread runtime, each accepted
/// connection in its own task, doing what its `role` says.
fn spawn_hop(name: &str, role: Role) -> Result<(SocketAddr, HopThread), String> {
    let (tx, rx) = mpsc::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = tx.send(Err(format!("runtime: {e}")));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                let listener = match super::listen_loopback() {
                    Ok(listener) => listener,
                    Err(e) => {
                        let _ = tx.send(Err(format!("listen: {e}")));
                        return;
                    }
                };
                let hub = match role {
                    Role::Relay(upstream) => match link_to(upstream).await {
                        Ok(hub) => Some(hub),
                        Err(why) => {
                            let _ = tx.send(Err(why));
                            return;
                        }
                    },
                    Role::Reflect | Role::Echo => None,
                };
                let one_hop = matches!(role, Role::Echo);
                let _ = tx.send(listener.local_addr().map_err(|e| e.to_string()));
                let accept = async {
                    while let Ok((conn, _)) = listener.accept().await {
                        let _ = conn.set_nodelay(true);
                        match &hub {
                            Some(hub) => tokio::task::spawn_local(relay(conn, Rc::clone(hub))),
                            None => tokio::task::spawn_local(reflect(conn, one_hop)),
                        };
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        })
        .map_err(|e| format!("spawning {name}: {e}"))?;
    let addr = rx
        .recv()
        .map_err(|_| format!("{name} ended during setup"))??;
    Ok((addr, HopThread { thread, stop }))
}

pub fn start() -> Result<Box<dyn Running>, String> {
    let (b_addr, b) = spawn_hop("raw-epoll-b", Role::Reflect)?;
    let (entry, a) = spawn_hop("raw-epoll-a", Role::Relay(b_addr))?;
    Ok(Box::new(Forwarder {
        entry,
        hops: vec![a, b],
    }))
}

/// `raw-epoll-1hop`: hop B's answering alone, on the clients' own
/// connections (client → hop → client), one thread.
pub fn start_one_hop() -> Result<Box<dyn Running>, String> {
    let (entry, hop) = spawn_hop("raw-epoll-1hop", Role::Echo)?;
    Ok(Box::new(Forwarder {
        entry,
        hops: vec![hop],
    }))
}
