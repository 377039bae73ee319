//! The epoll backend of the socket loop (issue 8 item 1): for where io_uring
//! is denied. It keeps the contract of the seam ([`super::Reactor`]) with
//! readiness instead of completions, through mio's edge-triggered epoll.
//!
//! A turn, in order (docs/threading.md "The IO seam"):
//! 1. gather: every connection with queued bytes writes all of them in one
//!    send (more only after a short write, until the socket would block; its
//!    writable edge lists it again); every ended connection is shut down,
//!    deregistered and closed, its slot freed;
//! 2. wait once in `epoll_wait`, not at all while events are pending or a
//!    connection has unread bytes left from the last turn;
//! 3. turn readiness into events: accept until the listener would block,
//!    read until a read comes back short (or, once the peer has closed,
//!    until the socket would block) or the turn's read budget of the
//!    connection is spent (then the rest is read next turn), finish
//!    connects.
//!
//! Ground rules: nothing is in the kernel between turns, so a connection is
//! released as soon as its end has been reported for one turn (its inbound
//! bytes stay readable until the next turn, as on io_uring); a read takes
//! at most `buffer_size` bytes into one reused scratch buffer and a turn at
//! most `buffer_count` of them per connection, so one flooding peer cannot
//! starve the others of a turn.

use std::io::{self, Read};
use std::mem;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use bytes::Buf;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::accept_pause::{self, AcceptPause};
use super::conn::{listen_socket, peer_of, CloseCause, Conn, ConnId, Conns, ListenerId, Phase};
use super::probe::ReactorError;
use super::reactor::{NetEvent, ReactorConfig};
use super::token::{OpKind, Token};
use super::waker::{Parker, ReactorWaker};

/// The largest single send; a larger queue goes out over several sends.
const SEND_LEN_MAX: usize = 1 << 30;

// A mio token carries a whole 64-bit `Token` (kind, generation, slot).
const _: () = assert!(usize::BITS >= 64);

#[derive(Debug)]
struct Listener {
    socket: Socket,
    /// Paused after running out of descriptors (`accept_pause`).
    pause: AcceptPause,
}

/// A shard's socket loop on epoll; see the module doc for a turn.
pub(super) struct EpollReactor {
    poll: Poll,
    ready: Events,
    /// The readiness of the current turn (token, readable, writable), kept
    /// for its capacity.
    ready_list: Vec<(mio::Token, Readiness, bool)>,
    /// The connections and what the caller sees of them.
    pub(super) conns: Conns,
    listeners: Vec<Listener>,
    /// Connections whose read budget ran out with bytes possibly left.
    unread: Vec<ConnId>,
    /// One read's target, reused.
    scratch: Vec<u8>,
    /// Reads a connection gets per turn.
    reads_per_turn: usize,
    parker: Parker,
    turn_count: u64,
}

impl std::fmt::Debug for EpollReactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpollReactor")
            .field("listeners", &self.listeners.len())
            .field("events", &self.conns.events.len())
            .finish_non_exhaustive()
    }
}

/// The mio token of a readiness source.
/// What one event says of a connection's inbound side.
#[derive(Clone, Copy)]
struct Readiness {
    readable: bool,
    /// The peer closed its side, or the socket has an error.
    closed: bool,
}

fn mio_token(kind: OpKind, slot: u32, generation: u32) -> mio::Token {
    mio::Token(Token::new(kind, slot, generation).to_user_data() as usize)
}

impl EpollReactor {
    /// Creates the epoll instance and registers the waker's eventfd.
    pub(super) fn new(config: ReactorConfig) -> Result<Self, ReactorError> {
        if config.buffer_size == 0 || config.buffer_count == 0 {
            return Err(ReactorError::InvalidConfig(
                "buffer_size and buffer_count must be at least 1",
            ));
        }
        let poll = Poll::new().map_err(ReactorError::Setup)?;
        let parker = Parker::new().map_err(ReactorError::Setup)?;
        poll.registry()
            .register(
                &mut SourceFd(&parker.eventfd()),
                mio_token(OpKind::Wake, 0, 0),
                Interest::READABLE,
            )
            .map_err(ReactorError::Setup)?;
        Ok(Self {
            poll,
            ready: Events::with_capacity(1024),
            ready_list: Vec::with_capacity(1024),
            conns: Conns::new(config.outbound_max, 1024),
            listeners: Vec::new(),
            unread: Vec::new(),
            scratch: vec![0; config.buffer_size as usize],
            reads_per_turn: usize::from(config.buffer_count),
            parker,
            turn_count: 0,
        })
    }

    /// See [`super::Reactor::listen`].
    pub(super) fn listen(&mut self, addr: SocketAddr) -> io::Result<(ListenerId, SocketAddr)> {
        let (socket, bound) = listen_socket(addr)?;
        socket.set_nonblocking(true)?;
        let index = u32::try_from(self.listeners.len())
            .map_err(|_| io::Error::other("too many listeners"))?;
        self.poll.registry().register(
            &mut SourceFd(&socket.as_raw_fd()),
            mio_token(OpKind::Accept, index, 0),
            Interest::READABLE,
        )?;
        self.listeners.push(Listener {
            socket,
            pause: AcceptPause::new(),
        });
        Ok((ListenerId(index), bound))
    }

    /// See [`super::Reactor::connect`].
    pub(super) fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_tcp_nodelay(true)?;
        socket.set_nonblocking(true)?;
        let peer = SockAddr::from(addr);
        let failed = match socket.connect(&peer) {
            Ok(()) => None,
            Err(err) if err.raw_os_error() == Some(libc::EINPROGRESS) => None,
            Err(err) => Some(err.kind()),
        };
        let fd = socket.as_raw_fd();
        let mut conn = Conn::new(socket, false);
        conn.connecting = Some(Box::new(peer));
        let id = self.conns.slab.insert(conn)?;
        if let Some(error) = failed {
            // Reported like a connect that failed in the kernel: at the turn.
            self.conns
                .events
                .push_back(NetEvent::ConnectFailed { conn: id, error });
            self.conns.end(id, None);
            return Ok(id);
        }
        if let Err(err) = self.register_conn(id, fd) {
            self.conns.slab.remove(id);
            return Err(err);
        }
        Ok(id)
    }

    fn register_conn(&self, id: ConnId, fd: i32) -> io::Result<()> {
        self.poll.registry().register(
            &mut SourceFd(&fd),
            mio_token(OpKind::Recv, id.slot(), id.generation()),
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    /// See [`super::Reactor::waker`].
    pub(super) fn waker(&self) -> ReactorWaker {
        self.parker.waker()
    }

    /// See [`super::Reactor::turn`] and the module doc.
    pub(super) fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.turn_count += 1;
        self.gather_sends();
        self.release_endings();
        let timeout = self.resume_listeners(timeout)?;
        let pending = !self.conns.events.is_empty() || !self.unread.is_empty();
        let wait = if pending || timeout == Some(Duration::ZERO) || !self.parker.park() {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        let polled = self.poll.poll(&mut self.ready, wait);
        let woken = self.parker.take_wake();
        match polled {
            Err(err) if err.kind() != io::ErrorKind::Interrupted => return Err(err),
            _ => {}
        }
        for id in mem::take(&mut self.unread) {
            self.read(id, true);
        }
        let mut ready = mem::take(&mut self.ready_list);
        ready.clear();
        ready.extend(self.ready.iter().map(|e| {
            let closed = e.is_read_closed() || e.is_error();
            let readable = e.is_readable() || closed;
            (e.token(), Readiness { readable, closed }, e.is_writable())
        }));
        let mut result = Ok(());
        for &(token, readiness, writable) in &ready {
            result = result.and(self.ready_one(token, readiness, writable));
        }
        self.ready_list = ready;
        result?;
        if woken || self.parker.take_wake() {
            self.conns.events.push_back(NetEvent::Woken);
        }
        Ok(())
    }

    /// Step 1: each listed connection writes what it has queued; a draining
    /// connection with nothing left ends.
    fn gather_sends(&mut self) {
        let list = self.conns.take_flush();
        for &id in &list {
            self.flush_one(id);
        }
        self.conns.give_back_flush(list);
    }

    fn flush_one(&mut self, id: ConnId) {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return;
        };
        conn.flush_listed = false;
        if conn.phase == Phase::Ended || conn.connecting.is_some() {
            // The connect's writable edge lists it again.
            return;
        }
        while !conn.outbound.is_empty() {
            let len = conn.outbound.len().min(SEND_LEN_MAX);
            match conn
                .socket
                .send_with_flags(&conn.outbound[..len], libc::MSG_NOSIGNAL)
            {
                Ok(sent) => conn.outbound.advance(sent),
                // The socket's writable edge lists it again.
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.conns.end(id, Some(CloseCause::Error(err.kind())));
                    return;
                }
            }
        }
        if conn.phase == Phase::Draining {
            self.conns.end(id, Some(CloseCause::Local));
        }
    }

    /// Shuts down, deregisters and closes the connections whose end was
    /// reported, and frees their slots.
    fn release_endings(&mut self) {
        for id in mem::take(&mut self.conns.ending) {
            let Some(conn) = self.conns.slab.remove(id) else {
                continue;
            };
            if conn.established {
                // Sends the FIN after the bytes already queued in the kernel.
                // ENOTCONN (the peer already reset) leaves nothing to shut.
                let _ = conn.socket.shutdown(std::net::Shutdown::Both);
            }
            // Its error (never registered: a connect that failed at once)
            // is nothing to act on.
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&conn.socket.as_raw_fd()));
            drop(conn);
        }
    }

    fn ready_one(
        &mut self,
        token: mio::Token,
        readiness: Readiness,
        writable: bool,
    ) -> io::Result<()> {
        let Some(token) = Token::from_user_data(token.0 as u64) else {
            return Ok(());
        };
        match token.kind {
            OpKind::Wake => self.parker.clear(),
            OpKind::Accept => self.accept_all(token.slot)?,
            OpKind::Recv => {
                let Some(id) = self
                    .conns
                    .slab
                    .id_at(token.slot)
                    .filter(|id| token.is_for(id.generation()))
                else {
                    return Ok(());
                };
                if writable {
                    self.writable(id);
                }
                if readiness.readable {
                    self.read(id, readiness.closed);
                }
            }
            OpKind::Send | OpKind::Connect | OpKind::Close | OpKind::Cancel => {}
        }
        Ok(())
    }

    /// Accepts again on every paused listener whose pause is over (its
    /// readiness edge has passed, so nothing else would); the wait of the
    /// turn ends no later than the next pause does.
    fn resume_listeners(&mut self, timeout: Option<Duration>) -> io::Result<Option<Duration>> {
        let now = std::time::Instant::now();
        let mut wait = timeout;
        for index in 0..self.listeners.len() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let Some(listener) = self.listeners.get_mut(index as usize) else {
                continue;
            };
            if listener.pause.resume_if_due(now) {
                self.accept_all(index)?;
            }
            if let Some(left) = self
                .listeners
                .get(index as usize)
                .and_then(|l| l.pause.left(now))
            {
                wait = Some(wait.map_or(left, |w| w.min(left)));
            }
        }
        Ok(wait)
    }

    /// Accepts until the listener would block (its readiness is an edge).
    fn accept_all(&mut self, index: u32) -> io::Result<()> {
        loop {
            let Some(listener) = self.listeners.get(index as usize) else {
                return Ok(());
            };
            match listener.socket.accept() {
                Ok((socket, _)) => {
                    if let Some(listener) = self.listeners.get_mut(index as usize) {
                        listener.pause.accepted();
                    }
                    self.adopt(ListenerId(index), socket)?
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                // ECONNABORTED and the like concern one connection only.
                Err(err) if err.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(err) => {
                    let errno = err.raw_os_error().unwrap_or_default();
                    if accept_pause::is_exhaustion(errno) {
                        // Out of descriptors: pause; `resume_listeners`
                        // accepts again (the backlog keeps what waits).
                        if let Some(listener) = self.listeners.get_mut(index as usize) {
                            listener
                                .pause
                                .failed(std::time::Instant::now(), index, errno);
                        }
                    } else {
                        tracing::debug!(%err, "accept failed");
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Takes an accepted socket into the slab and watches it.
    fn adopt(&mut self, listener: ListenerId, socket: Socket) -> io::Result<()> {
        // A peer that is already gone, or a socket that refuses its options,
        // is dropped (closed) here: there is no connection to report.
        let Some(peer) = peer_of(&socket) else {
            return Ok(());
        };
        if socket.set_tcp_nodelay(true).is_err() || socket.set_nonblocking(true).is_err() {
            return Ok(());
        }
        let fd = socket.as_raw_fd();
        let conn = self.conns.slab.insert(Conn::new(socket, true))?;
        if let Err(err) = self.register_conn(conn, fd) {
            self.conns.slab.remove(conn);
            return Err(err);
        }
        self.conns.events.push_back(NetEvent::Accepted {
            listener,
            conn,
            peer,
        });
        Ok(())
    }

    /// A writable edge: finishes a connect, or lists the connection to send.
    fn writable(&mut self, id: ConnId) {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return;
        };
        if conn.phase == Phase::Ended {
            return;
        }
        if conn.connecting.is_some() {
            let result = match conn.socket.take_error() {
                Ok(None) => Ok(()),
                Ok(Some(err)) | Err(err) => Err(err.kind()),
            };
            conn.connecting = None;
            if let Err(error) = result {
                self.conns
                    .events
                    .push_back(NetEvent::ConnectFailed { conn: id, error });
                self.conns.end(id, None);
                return;
            }
            conn.established = true;
            self.conns
                .events
                .push_back(NetEvent::Connected { conn: id });
        }
        if !conn.flush_listed {
            conn.flush_listed = true;
            self.conns.flush.push(id);
        }
    }

    /// Reads until a read comes back short, the socket would block or ends,
    /// or the turn's budget for the connection is spent.
    ///
    /// A short read ends the reading unless `to_end`: the socket had no
    /// more bytes queued at that moment, and bytes that arrive later raise
    /// a new edge (the kernel's wakeup on each arrival puts the socket back
    /// on epoll's ready list), so the read that would only return
    /// `WouldBlock` is saved: one system call per message (tokio's reads
    /// clear their readiness the same way). `to_end` when the event
    /// reported the peer's close or an error, whose edge has been taken:
    /// then the reading goes on to the end of the stream, or the close
    /// would never be seen; and for a connection carried over from the
    /// last turn's budget, which has no event of its own.
    fn read(&mut self, id: ConnId, to_end: bool) {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return;
        };
        if conn.phase == Phase::Ended || conn.connecting.is_some() {
            return;
        }
        let mut received = false;
        let mut ended = None;
        let mut reads = 0;
        loop {
            if reads == self.reads_per_turn {
                self.unread.push(id);
                break;
            }
            reads += 1;
            match (&conn.socket).read(&mut self.scratch) {
                Ok(0) => {
                    ended = Some(CloseCause::PeerClosed);
                    break;
                }
                Ok(len) => {
                    conn.inbound.extend_from_slice(&self.scratch[..len]);
                    received = true;
                    if len < self.scratch.len() && !to_end {
                        break;
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    ended = Some(CloseCause::Error(err.kind()));
                    break;
                }
            }
        }
        if received && conn.received_turn != self.turn_count {
            conn.received_turn = self.turn_count;
            self.conns.events.push_back(NetEvent::Received { conn: id });
        }
        if let Some(cause) = ended {
            self.conns.end(id, Some(cause));
        }
    }
}
