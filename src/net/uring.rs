//! The io_uring backend of the socket loop: one io_uring, its listeners and
//! connections, driven one [`UringReactor::turn`] at a time through the seam
//! ([`super::Reactor`]).
//!
//! A turn, in order (docs/threading.md "The socket loop"):
//! 1. gather: every connection with queued bytes and no send in flight gets
//!    one `Send` of all of them; every ended connection is shut down and its
//!    receive cancelled, and a quiet one gets its `Close` and a freed slot;
//! 2. enter the kernel once: submit, and wait for one completion unless
//!    events are pending or the timeout is zero;
//! 3. drain every completion into the event queue, re-arming multishot
//!    operations the kernel ended.
//!
//! Ground rules: every submission's memory (send bytes, connect address,
//! receive buffers, the eventfd word) is owned by the reactor until the
//! operation's last completion; a connection's slot is freed only when it is
//! quiet; dropping the reactor cancels everything and waits, and leaks the
//! memory rather than free it under the kernel if that wait runs out.

#![allow(unsafe_code)]

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use bytes::Buf;
use io_uring::types::{CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::accept_pause::{self, AcceptPause};
use super::buf_ring::BufRing;
use super::conn::{
    listen_socket, peer_of, CloseCause, Conn, ConnId, Conns, ListenerId, Phase, SendState,
};
use super::probe::{check_features, setup_error, ReactorError};
use super::reactor::{NetEvent, ReactorConfig};
use super::token::{OpKind, Token};
use super::waker::{Parker, ReactorWaker};

/// The buffer group of the reactor's one buffer ring.
const BUF_GROUP: u16 = 0;
/// The largest single send; a larger queue goes out over several turns.
const SEND_LEN_MAX: usize = 1 << 30;
/// How many waits of [`DROP_WAIT_STEP`] a dropped reactor gives the kernel
/// to finish its cancelled operations before it leaks their memory.
const DROP_WAIT_ROUNDS: u32 = 50;
const DROP_WAIT_STEP: Duration = Duration::from_millis(20);

/// Sets up the ring. One thread submits and reaps (the reactor's, see its
/// doc), so the kernel may keep completions as task work of that thread
/// until the turn's enter asks for them (DEFER_TASKRUN, which needs
/// SINGLE_ISSUER; COOP_TASKRUN: no interrupt to run it; TASKRUN_FLAG: the
/// ring says when such work waits, see `enter`) instead of interrupting the
/// thread, possibly on another vCPU, for each one (docs/threading.md "The
/// socket loop"). DEFER_TASKRUN is Linux 6.1: on 6.0, which refuses the
/// flags (EINVAL), the ring is set up without them.
fn build_ring(entries: u32) -> io::Result<IoUring> {
    let deferred = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_coop_taskrun()
        .setup_taskrun_flag()
        .build(entries);
    match deferred {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
        built => built,
    }
}

#[derive(Debug)]
struct Listener {
    socket: Socket,
    /// Paused after running out of descriptors (`accept_pause`).
    pause: AcceptPause,
}

/// A shard's socket loop on io_uring; see the module doc for a turn.
///
/// Build it, run it and drop it on one thread ([`super::Reactor`] is not
/// `Send`): the ring is single-issuer on Linux 6.1+, where an enter from
/// another thread fails. On 6.0 (the plain ring, `build_ring`) the kernel
/// ties an operation to the thread that submitted it and cancels it if that
/// thread exits; the re-arms below then recover a live connection.
pub(super) struct UringReactor {
    ring: IoUring,
    buf_ring: Option<BufRing>,
    /// The connections and what the caller sees of them.
    pub(super) conns: Conns,
    listeners: Vec<Listener>,
    /// Completions of the current drain, kept for its capacity.
    cqes: Vec<(u64, i32, u32)>,
    parker: Parker,
    /// The eventfd read's target; boxed so that its address is stable.
    wake_word: Box<u64>,
    turn_count: u64,
    /// Operations whose last completion has not arrived.
    ops_in_flight: usize,
}

impl std::fmt::Debug for UringReactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringReactor")
            .field("listeners", &self.listeners.len())
            .field("events", &self.conns.events.len())
            .field("ops_in_flight", &self.ops_in_flight)
            .finish_non_exhaustive()
    }
}

impl UringReactor {
    /// Sets up the ring, checks that io_uring is permitted and has what the
    /// loop needs, and registers the buffer ring.
    ///
    /// Fails at once with [`ReactorError::IoUringUnavailable`], whose message
    /// says how to fix it, where io_uring is denied or too old.
    pub(super) fn new(config: ReactorConfig) -> Result<Self, ReactorError> {
        if config.ring_entries == 0 || config.ring_entries > 32_768 {
            return Err(ReactorError::InvalidConfig(
                "ring_entries must be between 1 and 32768",
            ));
        }
        let ring = build_ring(config.ring_entries).map_err(setup_error)?;
        check_features(&ring)?;
        let buf_ring = BufRing::new(config.buffer_count, config.buffer_size)?;
        buf_ring.register(&ring, BUF_GROUP)?;
        let parker = Parker::new().map_err(ReactorError::Setup)?;
        let mut reactor = Self {
            ring,
            buf_ring: Some(buf_ring),
            conns: Conns::new(config.outbound_max, config.ring_entries as usize),
            listeners: Vec::new(),
            cqes: Vec::with_capacity(2 * config.ring_entries as usize),
            parker,
            wake_word: Box::new(0),
            turn_count: 0,
            ops_in_flight: 0,
        };
        reactor.arm_wake().map_err(ReactorError::Setup)?;
        Ok(reactor)
    }

    /// Listens on `addr` (SO_REUSEADDR and SO_REUSEPORT, so that every shard
    /// can listen on the same port) and starts its multishot accept.
    /// Returns the bound address, with port 0 resolved.
    pub(super) fn listen(&mut self, addr: SocketAddr) -> io::Result<(ListenerId, SocketAddr)> {
        let (socket, bound) = listen_socket(addr)?;
        let index = u32::try_from(self.listeners.len())
            .map_err(|_| io::Error::other("too many listeners"))?;
        let fd = socket.as_raw_fd();
        self.listeners.push(Listener {
            socket,
            pause: AcceptPause::new(),
        });
        if let Err(err) = self.arm_accept(index, fd) {
            self.listeners.pop();
            return Err(err);
        }
        Ok((ListenerId(index), bound))
    }

    /// Starts connecting to `addr`; a `Connected` or `ConnectFailed` event
    /// follows. Bytes may be queued at once; they go out once connected.
    pub(super) fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_tcp_nodelay(true)?;
        let fd = socket.as_raw_fd();
        let peer = Box::new(SockAddr::from(addr));
        let (addr_ptr, addr_len) = (peer.as_ptr().cast::<libc::sockaddr>(), peer.len());
        let mut conn = Conn::new(socket, false);
        conn.connecting = Some(peer);
        let id = self.conns.slab.insert(conn)?;
        let entry = opcode::Connect::new(Fd(fd), addr_ptr, addr_len)
            .build()
            .user_data(token(OpKind::Connect, id));
        // SAFETY: the address is boxed in the connection's `connecting`,
        // which is cleared only by the connect's completion, and the slot is
        // not freed while it is set.
        if let Err(err) = unsafe { self.push(&entry) } {
            self.conns.slab.remove(id);
            return Err(err);
        }
        Ok(id)
    }

    /// A waker for this reactor, for other threads.
    pub(super) fn waker(&self) -> ReactorWaker {
        self.parker.waker()
    }

    /// Runs one turn (module doc): gathers sends, enters the kernel once,
    /// drains completions into events. Blocks for at most `timeout`
    /// (`None`: until something happens) and not at all while events are
    /// pending. May return with no event (a signal, a stale wake).
    pub(super) fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.turn_count += 1;
        self.gather_sends()?;
        self.advance_endings()?;
        let timeout = self.resume_listeners(timeout)?;
        let entered = self.enter(timeout);
        let woken = self.parker.take_wake();
        entered?;
        self.drain()?;
        if woken || self.parker.take_wake() {
            self.conns.events.push_back(NetEvent::Woken);
        }
        Ok(())
    }

    /// Queues one submission and counts it as in flight.
    ///
    /// # Safety
    /// Every buffer or address `entry` points to must stay valid until the
    /// operation's last completion.
    unsafe fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: the caller keeps the entry's memory alive (above).
        if unsafe { self.ring.submission().push(entry) }.is_err() {
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(entry) }
                .map_err(|_| io::Error::other("the io_uring submission queue stays full"))?;
        }
        self.ops_in_flight += 1;
        Ok(())
    }

    fn arm_wake(&mut self) -> io::Result<()> {
        let word: *mut u64 = &mut *self.wake_word;
        let entry = opcode::Read::new(Fd(self.parker.eventfd()), word.cast::<u8>(), 8)
            .build()
            .user_data(Token::new(OpKind::Wake, 0, 0).to_user_data());
        // SAFETY: the word is boxed in the reactor, which outlives the read
        // (Drop waits for it, or leaks the box).
        unsafe { self.push(&entry) }
    }

    fn arm_accept(&mut self, index: u32, fd: RawFd) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(Fd(fd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(Token::new(OpKind::Accept, index, 0).to_user_data());
        // SAFETY: a multishot accept points to no memory.
        unsafe { self.push(&entry) }
    }

    fn arm_recv(&mut self, id: ConnId) -> io::Result<()> {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return Ok(());
        };
        let entry = opcode::RecvMulti::new(Fd(conn.socket.as_raw_fd()), BUF_GROUP)
            .build()
            .user_data(token(OpKind::Recv, id));
        conn.recv_armed = true;
        // SAFETY: the receive writes only into the registered buffer ring,
        // which the reactor owns until every operation has ended.
        let pushed = unsafe { self.push(&entry) };
        if pushed.is_err() {
            if let Some(conn) = self.conns.slab.get_mut(id) {
                conn.recv_armed = false;
            }
        }
        pushed
    }

    /// Step 1: one send per connection with queued bytes and none in flight;
    /// a draining connection with nothing left ends.
    fn gather_sends(&mut self) -> io::Result<()> {
        let list = self.conns.take_flush();
        let mut outcome = Ok(());
        for (done, &id) in list.iter().enumerate() {
            if let Err(err) = self.flush_one(id) {
                self.conns.flush.extend_from_slice(&list[done..]);
                outcome = Err(err);
                break;
            }
        }
        self.conns.give_back_flush(list);
        outcome
    }

    fn flush_one(&mut self, id: ConnId) -> io::Result<()> {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return Ok(());
        };
        let sendable = conn.phase != Phase::Ended && conn.connecting.is_none();
        if !sendable || matches!(conn.send, SendState::InFlight(_)) {
            // A connect or send completion lists it again.
            conn.flush_listed = false;
            return Ok(());
        }
        let bytes = match mem::take(&mut conn.send) {
            SendState::Partial(rest) => rest,
            _ if !conn.outbound.is_empty() => {
                let len = conn.outbound.len().min(SEND_LEN_MAX);
                conn.outbound.split_to(len).freeze()
            }
            _ => {
                conn.flush_listed = false;
                if conn.phase == Phase::Draining {
                    self.conns.end(id, Some(CloseCause::Local));
                }
                return Ok(());
            }
        };
        let entry = opcode::Send::new(
            Fd(conn.socket.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(token(OpKind::Send, id));
        conn.send = SendState::InFlight(bytes);
        // SAFETY: the bytes are held in the connection's `InFlight` until the
        // send completes, and the slot is not freed while it is in flight.
        let pushed = unsafe { self.push(&entry) };
        if let Some(conn) = self.conns.slab.get_mut(id) {
            if pushed.is_err() {
                if let SendState::InFlight(bytes) = mem::take(&mut conn.send) {
                    conn.send = SendState::Partial(bytes);
                }
            } else {
                conn.flush_listed = false;
            }
        }
        pushed
    }

    /// Submits the teardown of newly ended connections and releases the
    /// quiet ones: their descriptor is closed and their slot freed.
    fn advance_endings(&mut self) -> io::Result<()> {
        let mut list = mem::take(&mut self.conns.ending);
        let mut result = Ok(());
        list.retain(|&id| match self.advance_ending(id) {
            Ok(released) => !released,
            Err(err) => {
                result = Err(err);
                true
            }
        });
        self.conns.ending = list;
        result
    }

    /// Returns whether `id` was released.
    fn advance_ending(&mut self, id: ConnId) -> io::Result<bool> {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return Ok(true);
        };
        if !conn.teardown_sent {
            conn.teardown_sent = true;
            if conn.established {
                // A plain shutdown(2): IORING_OP_SHUTDOWN always goes through
                // an io-wq worker, which costs more than the syscall. It sends
                // the FIN after the bytes already queued in the kernel and
                // ends the multishot receive with end of stream. ENOTCONN
                // (the peer already reset) leaves nothing to shut down.
                let _ = conn.socket.shutdown(std::net::Shutdown::Both);
            }
            let (recv_armed, connecting) = (conn.recv_armed, conn.connecting.is_some());
            if recv_armed {
                self.cancel(token(OpKind::Recv, id))?;
            }
            if connecting {
                self.cancel(token(OpKind::Connect, id))?;
            }
        }
        let Some(conn) = self.conns.slab.get(id) else {
            return Ok(true);
        };
        if !conn.is_quiet() {
            return Ok(false);
        }
        if let Some(conn) = self.conns.slab.remove(id) {
            self.close_fd(conn.socket.into_raw_fd());
        }
        Ok(true)
    }

    fn cancel(&mut self, user_data: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel2::new(CancelBuilder::user_data(user_data))
            .build()
            .user_data(Token::new(OpKind::Cancel, 0, 0).to_user_data());
        // SAFETY: a cancel points to no memory.
        unsafe { self.push(&entry) }
    }

    /// Closes `fd` in the next submission, or at once if the queue refuses.
    fn close_fd(&mut self, fd: RawFd) {
        let entry = opcode::Close::new(Fd(fd))
            .build()
            .user_data(Token::new(OpKind::Close, 0, 0).to_user_data());
        // SAFETY: a close points to no memory, and `fd` is owned by nobody
        // else once its connection is removed.
        if unsafe { self.push(&entry) }.is_err() {
            // SAFETY: as above: the descriptor is ours alone.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }

    /// Step 2: the turn's one entry into the kernel.
    fn enter(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let block = self.conns.events.is_empty() && timeout != Some(Duration::ZERO);
        if !block || !self.parker.park() {
            // Deferred completions reach the queue only through an enter
            // that asks for events: `submit` asks when the ring's taskrun
            // flag says some wait.
            let sq = self.ring.submission();
            let pending = !sq.is_empty() || sq.taskrun();
            drop(sq);
            if pending {
                self.ring.submit()?;
            }
            return Ok(());
        }
        let entered = match timeout {
            None => self.ring.submit_and_wait(1),
            Some(timeout) => {
                let ts = Timespec::new()
                    .sec(timeout.as_secs())
                    .nsec(timeout.subsec_nanos());
                let args = SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match entered {
            Ok(_) => Ok(()),
            // The timeout passed, a signal arrived, or completions are
            // backed up: all are drained by the caller's next steps.
            Err(err)
                if matches!(
                    err.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// Step 3: every completion becomes state and events.
    fn drain(&mut self) -> io::Result<()> {
        let mut cqes = mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result(), cqe.flags())),
        );
        let mut result = Ok(());
        for &(user_data, res, flags) in &cqes {
            if !cqueue::more(flags) {
                self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
            }
            if let Err(err) = self.complete(user_data, res, flags) {
                result = result.and(Err(err));
            }
        }
        self.cqes = cqes;
        result
    }

    fn complete(&mut self, user_data: u64, res: i32, flags: u32) -> io::Result<()> {
        let Some(token) = Token::from_user_data(user_data) else {
            return Ok(());
        };
        match token.kind {
            OpKind::Accept => self.complete_accept(token.slot, res, flags),
            // Drop does not come here, so even a cancelled read (its thread
            // exited) is re-armed.
            OpKind::Wake => self.arm_wake(),
            OpKind::Close | OpKind::Cancel => Ok(()),
            OpKind::Recv | OpKind::Send | OpKind::Connect => {
                let Some(id) = self
                    .conns
                    .slab
                    .id_at(token.slot)
                    .filter(|id| token.is_for(id.generation()))
                else {
                    self.recycle(flags);
                    return Ok(());
                };
                match token.kind {
                    OpKind::Recv => self.complete_recv(id, res, flags),
                    OpKind::Send => {
                        self.complete_send(id, res);
                        Ok(())
                    }
                    _ => self.complete_connect(id, res),
                }
            }
        }
    }

    /// Re-arms every paused listener whose pause is over; the wait of the
    /// turn ends no later than the next pause does.
    fn resume_listeners(&mut self, timeout: Option<Duration>) -> io::Result<Option<Duration>> {
        let now = std::time::Instant::now();
        let mut wait = timeout;
        for index in 0..self.listeners.len() {
            let listener = &mut self.listeners[index];
            if listener.pause.resume_if_due(now) {
                let fd = listener.socket.as_raw_fd();
                self.arm_accept(u32::try_from(index).unwrap_or(u32::MAX), fd)?;
            } else if let Some(left) = listener.pause.left(now) {
                wait = Some(wait.map_or(left, |w| w.min(left)));
            }
        }
        Ok(wait)
    }

    fn complete_accept(&mut self, index: u32, res: i32, flags: u32) -> io::Result<()> {
        let Some(fd) = self
            .listeners
            .get(index as usize)
            .map(|l| l.socket.as_raw_fd())
        else {
            return Ok(());
        };
        let adopted = if res >= 0 {
            if let Some(listener) = self.listeners.get_mut(index as usize) {
                listener.pause.accepted();
            }
            // SAFETY: a non-negative accept result is a new descriptor that
            // nothing else owns.
            let socket = Socket::from(unsafe { OwnedFd::from_raw_fd(res) });
            self.adopt(ListenerId(index), socket)
        } else if accept_pause::is_exhaustion(-res) {
            // Out of descriptors: pause, re-armed by `resume_listeners`
            // (a multishot accept that failed has ended).
            if let Some(listener) = self.listeners.get_mut(index as usize) {
                listener
                    .pause
                    .failed(std::time::Instant::now(), index, -res);
            }
            Ok(())
        } else {
            // ECONNABORTED and the like concern one connection only.
            tracing::debug!(errno = -res, "accept failed; re-arming");
            Ok(())
        };
        let paused = self
            .listeners
            .get(index as usize)
            .is_some_and(|l| l.pause.paused());
        if !cqueue::more(flags) && !paused {
            self.arm_accept(index, fd)?;
        }
        adopted
    }

    /// Takes an accepted socket into the slab and starts receiving on it.
    fn adopt(&mut self, listener: ListenerId, socket: Socket) -> io::Result<()> {
        // A peer that is already gone, or a socket that refuses NODELAY, is
        // dropped (closed) here: there is no connection to report.
        let Some(peer) = peer_of(&socket) else {
            return Ok(());
        };
        if socket.set_tcp_nodelay(true).is_err() {
            return Ok(());
        }
        let conn = self.conns.slab.insert(Conn::new(socket, true))?;
        if let Err(err) = self.arm_recv(conn) {
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

    /// Hands back the buffer a completion selected, if any.
    fn recycle(&mut self, flags: u32) {
        if let (Some(bid), Some(ring)) = (cqueue::buffer_select(flags), self.buf_ring.as_mut()) {
            ring.recycle(bid);
        }
    }

    fn complete_recv(&mut self, id: ConnId, res: i32, flags: u32) -> io::Result<()> {
        let more = cqueue::more(flags);
        let Some(conn) = self.conns.slab.get_mut(id) else {
            self.recycle(flags);
            return Ok(());
        };
        if !more {
            conn.recv_armed = false;
        }
        let live = conn.phase != Phase::Ended;
        if res > 0 {
            if let (true, Some(bid), Some(ring)) =
                (live, cqueue::buffer_select(flags), self.buf_ring.as_ref())
            {
                if let Some(bytes) = ring.filled(bid, res as usize) {
                    conn.inbound.extend_from_slice(bytes);
                }
                if conn.received_turn != self.turn_count {
                    conn.received_turn = self.turn_count;
                    self.conns.events.push_back(NetEvent::Received { conn: id });
                }
            }
        }
        self.recycle(flags);
        match res {
            0 => self.conns.end(id, Some(CloseCause::PeerClosed)),
            // ENOBUFS: the ring ran dry, and is refilled by now. ECANCELED on
            // a live connection: the thread that armed it exited.
            _ if res > 0 || res == -libc::ENOBUFS || res == -libc::ECANCELED => {
                if live && !more {
                    self.arm_recv(id)?;
                }
            }
            _ => self.conns.end(id, Some(CloseCause::Error(error_kind(res)))),
        }
        Ok(())
    }

    fn complete_send(&mut self, id: ConnId, res: i32) {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return;
        };
        let SendState::InFlight(mut bytes) = mem::take(&mut conn.send) else {
            return;
        };
        if res < 0 && res != -libc::ECANCELED {
            self.conns.end(id, Some(CloseCause::Error(error_kind(res))));
            return;
        }
        // A cancelled send (its thread exited) is sent again whole.
        bytes.advance((res.max(0) as usize).min(bytes.len()));
        if !bytes.is_empty() {
            conn.send = SendState::Partial(bytes);
        }
        if conn.phase != Phase::Ended && !conn.flush_listed {
            conn.flush_listed = true;
            self.conns.flush.push(id);
        }
    }

    fn complete_connect(&mut self, id: ConnId, res: i32) -> io::Result<()> {
        let Some(conn) = self.conns.slab.get_mut(id) else {
            return Ok(());
        };
        conn.connecting = None;
        if conn.phase == Phase::Ended {
            return Ok(());
        }
        if res < 0 {
            self.conns.events.push_back(NetEvent::ConnectFailed {
                conn: id,
                error: error_kind(res),
            });
            self.conns.end(id, None);
            return Ok(());
        }
        conn.established = true;
        if !conn.flush_listed {
            conn.flush_listed = true;
            self.conns.flush.push(id);
        }
        self.arm_recv(id)?;
        self.conns
            .events
            .push_back(NetEvent::Connected { conn: id });
        Ok(())
    }
}

impl Drop for UringReactor {
    /// Cancels every operation and waits for their completions, so that no
    /// kernel write lands in freed memory; if they do not all arrive in
    /// time, the memory they may use is leaked instead.
    fn drop(&mut self) {
        let cancel_all = opcode::AsyncCancel2::new(CancelBuilder::any().all())
            .build()
            .user_data(Token::new(OpKind::Cancel, 0, 0).to_user_data());
        // SAFETY: a cancel points to no memory.
        let cancelled = unsafe { self.push(&cancel_all) }.is_ok();
        let mut rounds = 0;
        while cancelled && self.ops_in_flight > 0 && rounds < DROP_WAIT_ROUNDS {
            rounds += 1;
            let ts = Timespec::new().nsec(DROP_WAIT_STEP.subsec_nanos());
            let args = SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            for cqe in self.ring.completion() {
                if !cqueue::more(cqe.flags()) {
                    self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
                }
            }
        }
        if self.ops_in_flight > 0 {
            tracing::error!(
                ops = self.ops_in_flight,
                "io_uring operations still in flight at drop; leaking their memory"
            );
            if let Some(ring) = self.buf_ring.take() {
                ring.leak();
            }
            mem::forget(mem::take(&mut self.conns.slab));
            mem::forget(mem::replace(&mut self.wake_word, Box::new(0)));
        }
    }
}

/// The `user_data` of an operation on connection `id`.
fn token(kind: OpKind, id: ConnId) -> u64 {
    Token::new(kind, id.slot(), id.generation()).to_user_data()
}

/// The error kind of a negative completion result.
fn error_kind(res: i32) -> io::ErrorKind {
    io::Error::from_raw_os_error(-res).kind()
}
