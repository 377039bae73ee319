//! Connections and their identities: the slab that owns every socket of a
//! reactor, with a generation per slot.
//!
//! Ground rules: a [`ConnId`] names one connection for ever. A slot is freed
//! only once the connection's operations have all completed, and its
//! generation then moves on, so an old `ConnId` never reaches the next
//! connection in that slot. A slot whose generation is exhausted is retired,
//! never reused.

use std::collections::VecDeque;
use std::io;
use std::mem;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::reactor::NetEvent;

/// The listen backlog: enough for a burst of logins between two turns.
const LISTEN_BACKLOG: i32 = 1024;

/// One TCP connection of a reactor; `Copy`, and never reused for another
/// connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    slot: u32,
    generation: u32,
}

impl ConnId {
    /// The slot index inside the reactor.
    pub(super) fn slot(self) -> u32 {
        self.slot
    }

    /// The slot's generation when this connection took it.
    pub(super) fn generation(self) -> u32 {
        self.generation
    }

    /// A made-up id, for unit tests of the layers above.
    #[cfg(test)]
    pub(crate) fn for_tests(slot: u32) -> Self {
        Self {
            slot,
            generation: 0,
        }
    }
}

/// One listening socket of a reactor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub(super) u32);

/// Why a connection ended, as reported by [`super::NetEvent::Closed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseCause {
    /// The peer closed its side (a receive returned end of stream).
    PeerClosed,
    /// A receive or send failed.
    Error(io::ErrorKind),
    /// This side called [`super::Reactor::close`] or
    /// [`super::Reactor::abort`].
    Local,
}

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Connecting or connected; the caller may queue bytes.
    Open,
    /// [`super::Reactor::close`] was called: queued bytes go out, then the
    /// connection ends with `Closed { Local }`.
    Draining,
    /// Its end was reported; it waits for its operations to complete before
    /// the slot is freed.
    Ended,
}

/// The state of the connection's one send.
#[derive(Debug, Default)]
pub(super) enum SendState {
    /// No send in flight.
    #[default]
    Idle,
    /// A send of these bytes is in the kernel; they stay alive until its
    /// completion.
    InFlight(Bytes),
    /// A short write left these bytes; they go out at the next turn.
    Partial(Bytes),
}

impl SendState {
    /// The bytes the caller queued that have not yet been sent.
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Idle => 0,
            Self::InFlight(bytes) | Self::Partial(bytes) => bytes.len(),
        }
    }
}

/// One connection and its buffers.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) socket: Socket,
    pub(super) phase: Phase,
    /// Received bytes the caller has not consumed.
    pub(super) inbound: BytesMut,
    /// Bytes the caller queued for the next send.
    pub(super) outbound: BytesMut,
    pub(super) send: SendState,
    /// The peer address of a connect in flight, kept alive until its
    /// completion; `None` when no connect is in flight.
    pub(super) connecting: Option<Box<SockAddr>>,
    /// The connection is established (accepted, or connect succeeded).
    pub(super) established: bool,
    pub(super) recv_armed: bool,
    /// It was shut down and its cancels submitted (only once `Ended`).
    pub(super) teardown_sent: bool,
    /// It is on the reactor's flush list.
    pub(super) flush_listed: bool,
    /// The turn in which its last `Received` was reported, so that a turn
    /// reports at most one per connection.
    pub(super) received_turn: u64,
}

impl Conn {
    /// A connection around `socket`, not yet receiving.
    pub(super) fn new(socket: Socket, established: bool) -> Self {
        Self {
            socket,
            phase: Phase::Open,
            inbound: BytesMut::new(),
            outbound: BytesMut::new(),
            send: SendState::Idle,
            connecting: None,
            established,
            recv_armed: false,
            teardown_sent: false,
            flush_listed: false,
            received_turn: 0,
        }
    }

    /// No operation of this connection is in the kernel, so its memory and
    /// descriptor may be released.
    pub(super) fn is_quiet(&self) -> bool {
        !self.recv_armed
            && self.connecting.is_none()
            && !matches!(self.send, SendState::InFlight(_))
    }
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// The connections of a reactor, by slot.
#[derive(Debug, Default)]
pub(super) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Slab {
    /// Stores `conn` and names it.
    pub(super) fn insert(&mut self, conn: Conn) -> io::Result<ConnId> {
        if let Some(slot) = self.free.pop() {
            if let Some(entry) = self.slots.get_mut(slot as usize) {
                entry.conn = Some(conn);
                return Ok(ConnId {
                    slot,
                    generation: entry.generation,
                });
            }
        }
        let slot = u32::try_from(self.slots.len())
            .map_err(|_| io::Error::other("connection slots exhausted"))?;
        self.slots.push(Slot {
            generation: 0,
            conn: Some(conn),
        });
        Ok(ConnId {
            slot,
            generation: 0,
        })
    }

    /// The connection `id` names, if it is still stored.
    pub(super) fn get(&self, id: ConnId) -> Option<&Conn> {
        let entry = self.slots.get(id.slot as usize)?;
        if entry.generation != id.generation {
            return None;
        }
        entry.conn.as_ref()
    }

    /// The connection `id` names, if it is still stored.
    pub(super) fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        if entry.generation != id.generation {
            return None;
        }
        entry.conn.as_mut()
    }

    /// The id of the connection now in `slot`, if any.
    pub(super) fn id_at(&self, slot: u32) -> Option<ConnId> {
        let entry = self.slots.get(slot as usize)?;
        entry.conn.as_ref()?;
        Some(ConnId {
            slot,
            generation: entry.generation,
        })
    }

    /// Takes the connection out and retires its id.
    pub(super) fn remove(&mut self, id: ConnId) -> Option<Conn> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        if entry.generation != id.generation {
            return None;
        }
        let conn = entry.conn.take()?;
        if let Some(next) = entry.generation.checked_add(1) {
            entry.generation = next;
            self.free.push(id.slot);
        }
        Some(conn)
    }
}

/// What both backends keep the same way: the connections, the events not
/// yet polled, and the lists a turn works through. The seam's per-connection
/// calls ([`super::Reactor::inbound`], `outbound`, `close`, ...) act on it
/// directly, so the backends differ only in how they move bytes.
#[derive(Debug)]
pub(super) struct Conns {
    pub(super) slab: Slab,
    pub(super) events: VecDeque<NetEvent>,
    /// Connections to look at in the gather step.
    pub(super) flush: Vec<ConnId>,
    /// The gather step's copy of `flush` ([`Conns::take_flush`]), kept
    /// empty between turns so that both lists keep their capacity: listing
    /// a connection allocates nothing once warm (issue 24 item 4).
    flush_spare: Vec<ConnId>,
    /// Ended connections not yet released.
    pub(super) ending: Vec<ConnId>,
    /// The caller's bound on one connection's queued and in-flight bytes.
    outbound_max: usize,
}

impl Conns {
    pub(super) fn new(outbound_max: usize, events: usize) -> Self {
        Self {
            slab: Slab::default(),
            events: VecDeque::with_capacity(events),
            flush: Vec::new(),
            flush_spare: Vec::new(),
            ending: Vec::new(),
            outbound_max,
        }
    }

    /// The connections listed for the gather step, leaving the list empty
    /// with the capacity of the last one handed back
    /// ([`give_back_flush`](Self::give_back_flush)): taking the list
    /// whole (`mem::take`) would leave it without capacity, and the next
    /// listing would allocate it again, once or twice per message.
    pub(super) fn take_flush(&mut self) -> Vec<ConnId> {
        let mut list = mem::take(&mut self.flush_spare);
        mem::swap(&mut list, &mut self.flush);
        list
    }

    /// Hands back a list [`take_flush`](Self::take_flush) gave, done with,
    /// to be the next one's buffer.
    pub(super) fn give_back_flush(&mut self, mut list: Vec<ConnId>) {
        list.clear();
        self.flush_spare = list;
    }

    /// See [`super::Reactor::inbound`].
    pub(super) fn inbound(&mut self, conn: ConnId) -> Option<&mut BytesMut> {
        self.slab.get_mut(conn).map(|c| &mut c.inbound)
    }

    /// See [`super::Reactor::outbound`].
    pub(super) fn outbound(&mut self, conn: ConnId) -> Option<&mut BytesMut> {
        let c = self.slab.get_mut(conn)?;
        if c.phase != Phase::Open {
            return None;
        }
        if !c.flush_listed {
            c.flush_listed = true;
            self.flush.push(conn);
        }
        Some(&mut c.outbound)
    }

    /// See [`super::Reactor::outbound_len`]: queued plus in flight (epoll
    /// has nothing in flight).
    pub(super) fn outbound_len(&self, conn: ConnId) -> usize {
        self.slab
            .get(conn)
            .map_or(0, |c| c.outbound.len() + c.send.len())
    }

    /// See [`super::Reactor::outbound_room`].
    pub(super) fn outbound_room(&self, conn: ConnId) -> usize {
        self.outbound_max.saturating_sub(self.outbound_len(conn))
    }

    /// See [`super::Reactor::close`]: the gather step ends it once its
    /// queue is out.
    pub(super) fn close(&mut self, conn: ConnId) {
        let Some(c) = self.slab.get_mut(conn) else {
            return;
        };
        if c.phase != Phase::Open {
            return;
        }
        c.phase = Phase::Draining;
        if !c.flush_listed {
            c.flush_listed = true;
            self.flush.push(conn);
        }
    }

    /// Ends `id` once: drops its queue, reports `cause` (if any) and lists
    /// it for release.
    pub(super) fn end(&mut self, id: ConnId, cause: Option<CloseCause>) {
        let Some(conn) = self.slab.get_mut(id) else {
            return;
        };
        if conn.phase == Phase::Ended {
            return;
        }
        conn.phase = Phase::Ended;
        conn.outbound = BytesMut::new();
        if matches!(conn.send, SendState::Partial(_)) {
            conn.send = SendState::Idle;
        }
        if let Some(cause) = cause {
            self.events.push_back(NetEvent::Closed { conn: id, cause });
        }
        self.ending.push(id);
    }
}

/// A listening socket on `addr` (SO_REUSEADDR and SO_REUSEPORT, so that
/// every shard can listen on the same port) and its bound address.
pub(super) fn listen_socket(addr: SocketAddr) -> io::Result<(Socket, SocketAddr)> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    let bound = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("the listener has no inet address"))?;
    Ok((socket, bound))
}

/// The address of an established socket's peer, if it still has one.
pub(super) fn peer_of(socket: &Socket) -> Option<SocketAddr> {
    socket.peer_addr().ok()?.as_socket()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> io::Result<Conn> {
        Ok(Conn::new(
            Socket::new(Domain::IPV4, Type::STREAM, None)?,
            false,
        ))
    }

    #[test]
    fn a_freed_slot_is_reused_under_a_new_generation() -> io::Result<()> {
        let mut slab = Slab::default();
        let first = slab.insert(conn()?)?;
        assert!(slab.remove(first).is_some());
        let second = slab.insert(conn()?)?;
        assert_eq!(first.slot(), second.slot());
        assert_ne!(first, second);
        assert!(slab.get(first).is_none());
        assert!(slab.get(second).is_some());
        assert_eq!(slab.id_at(second.slot()), Some(second));
        Ok(())
    }
}
