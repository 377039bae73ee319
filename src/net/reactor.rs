//! The IO seam: the one interface through which the shard loop talks to its
//! sockets, whichever backend runs under it (issue 8 item 1;
//! docs/threading.md "The IO seam").
//!
//! [`Reactor`] is an enum over the two backends, so a call costs one match
//! and no boxing: the io_uring backend ([`super::uring`], the default) and
//! the epoll backend ([`super::epoll`], for where io_uring is denied). Both
//! keep the same contract: listeners and connections named by ids, bytes
//! moved between sockets and per-connection [`BytesMut`] buffers, one
//! gathered send per connection per turn, and what happened reported as
//! [`NetEvent`]s. Nothing above the seam knows which backend runs, except
//! [`Reactor::backend`] for diagnostics.

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;

use super::conn::{CloseCause, ConnId, ListenerId};
use super::epoll::EpollReactor;
use super::probe::{probe_io_uring, ReactorError};
use super::uring::UringReactor;
use super::waker::ReactorWaker;

/// Which system interface runs a node's socket loop (issue 8 item 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IoBackend {
    /// io_uring (Linux >= 6.0): the default where it is permitted.
    IoUring,
    /// epoll: for where io_uring is denied (a container's default seccomp
    /// profile, `kernel.io_uring_disabled`, an old kernel).
    Epoll,
    /// Probe io_uring at startup and run on it; where it is not available,
    /// run on epoll and log one warning that says why and how to enable it.
    #[default]
    Auto,
}

impl IoBackend {
    /// The backend that will run: `IoUring` and `Epoll` as given, `Auto`
    /// probed. `IoUring` where io_uring is not available is the error that
    /// says why and how to fix it; `Auto` there logs it as one warning and
    /// resolves to `Epoll`.
    pub fn resolve(self) -> Result<Self, ReactorError> {
        match self {
            Self::Epoll => Ok(Self::Epoll),
            Self::IoUring => probe_io_uring().map(|()| Self::IoUring),
            Self::Auto => match probe_io_uring() {
                Ok(()) => Ok(Self::IoUring),
                Err(error @ ReactorError::IoUringUnavailable { .. }) => {
                    tracing::warn!(
                        "running the socket loop on epoll instead of io_uring: {error} \
                         (set io_backend = IoBackend::Epoll to choose epoll without this warning)"
                    );
                    Ok(Self::Epoll)
                }
                Err(other) => Err(other),
            },
        }
    }
}

/// The sizes a reactor is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReactorConfig {
    /// Submission queue entries; the completion queue is twice as large
    /// and never drops (NODROP).
    pub ring_entries: u32,
    /// Receive buffers in the provided ring, a power of two: how many
    /// receives can complete between two turns before one waits (ENOBUFS).
    pub buffer_count: u16,
    /// Bytes per receive buffer: the most one receive completion carries
    /// (on epoll: the most one read takes; a turn reads at most
    /// `buffer_count` of them per connection).
    pub buffer_size: u32,
    /// The caller's bound on one connection's queued and in-flight outbound
    /// bytes; the reactor only reports room against it
    /// ([`Reactor::outbound_room`]) and never refuses bytes itself.
    pub outbound_max: usize,
    /// Which backend runs the loop (docs/threading.md "Choosing a
    /// backend"); [`IoBackend::Auto`] probes io_uring and falls back to
    /// epoll.
    pub backend: IoBackend,
}

impl Default for ReactorConfig {
    fn default() -> Self {
        Self {
            ring_entries: 256,
            buffer_count: 256,
            buffer_size: 16 * 1024,
            outbound_max: 4 * 1024 * 1024,
            backend: IoBackend::Auto,
        }
    }
}

/// What a turn found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// A listener accepted a connection, which is already receiving.
    Accepted {
        /// The listener that accepted it.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
        /// Its peer's address.
        peer: SocketAddr,
    },
    /// A [`Reactor::connect`] succeeded; the connection is receiving.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// A [`Reactor::connect`] failed; the id is dead, no `Closed` follows.
    ConnectFailed {
        /// The connection that was never established.
        conn: ConnId,
        /// Why.
        error: io::ErrorKind,
    },
    /// New bytes are in [`Reactor::inbound`] (at most one per connection per
    /// turn).
    Received {
        /// The connection.
        conn: ConnId,
    },
    /// The connection ended; its inbound bytes stay readable until the next
    /// turn, nothing more can be queued.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why it ended.
        cause: CloseCause,
    },
    /// A [`ReactorWaker::wake`] arrived.
    Woken,
}

/// The setting's spelling in configuration: `"io_uring"`, `"epoll"` or
/// `"auto"` (issue 8 item 2).
impl std::str::FromStr for IoBackend {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "io_uring" => Ok(Self::IoUring),
            "epoll" => Ok(Self::Epoll),
            "auto" => Ok(Self::Auto),
            other => Err(format!(
                "io_backend = {other:?}: expected \"io_uring\", \"epoll\" or \"auto\""
            )),
        }
    }
}

/// A shard's socket loop: the backend chosen at startup behind one
/// interface (module doc).
///
/// Build it, run it and drop it on one thread: the io_uring backend's ring
/// is single-issuer (an enter from another thread fails), so the type is
/// neither `Send` nor `Sync`.
#[derive(Debug)]
pub struct Reactor {
    backend: Backend,
    /// Keeps the reactor on the thread that built it (above).
    _one_thread: PhantomData<*const ()>,
}

/// The backend behind a [`Reactor`]; boxed once at startup so that the two
/// differ in size without the enum paying for the larger.
#[derive(Debug)]
enum Backend {
    IoUring(Box<UringReactor>),
    Epoll(Box<EpollReactor>),
}

/// Forwards a call to whichever backend runs.
macro_rules! dispatch {
    ($self:expr, $reactor:ident => $call:expr) => {
        match &mut $self.backend {
            Backend::IoUring($reactor) => $call,
            Backend::Epoll($reactor) => $call,
        }
    };
    (ref $self:expr, $reactor:ident => $call:expr) => {
        match &$self.backend {
            Backend::IoUring($reactor) => $call,
            Backend::Epoll($reactor) => $call,
        }
    };
}

impl Reactor {
    /// Builds the reactor of `config.backend` (resolving `Auto`, see
    /// [`IoBackend::resolve`]).
    ///
    /// Fails at once with [`ReactorError::IoUringUnavailable`], whose message
    /// says how to fix it, where io_uring is demanded but denied or too old.
    pub fn new(config: ReactorConfig) -> Result<Self, ReactorError> {
        let backend = match config.backend.resolve()? {
            IoBackend::Epoll => Backend::Epoll(Box::new(EpollReactor::new(config)?)),
            _ => Backend::IoUring(Box::new(UringReactor::new(config)?)),
        };
        Ok(Self {
            backend,
            _one_thread: PhantomData,
        })
    }

    /// Listens on `addr` (SO_REUSEADDR and SO_REUSEPORT, so that every shard
    /// can listen on the same port) and starts accepting. Returns the bound
    /// address, with port 0 resolved.
    pub fn listen(&mut self, addr: SocketAddr) -> io::Result<(ListenerId, SocketAddr)> {
        dispatch!(self, r => r.listen(addr))
    }

    /// Starts connecting to `addr`; a `Connected` or `ConnectFailed` event
    /// follows. Bytes may be queued at once; they go out once connected.
    pub fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        dispatch!(self, r => r.connect(addr))
    }

    /// The received bytes of `conn` that the caller has not consumed: split
    /// frames off the front. `None` once the id is dead.
    pub fn inbound(&mut self, conn: ConnId) -> Option<&mut BytesMut> {
        dispatch!(self, r => r.conns.inbound(conn))
    }

    /// The outbound queue of `conn`: encode frames straight into it; all of
    /// it goes out in one send at the next turn. `None` once the connection
    /// is closing or dead.
    #[inline]
    pub fn outbound(&mut self, conn: ConnId) -> Option<&mut BytesMut> {
        dispatch!(self, r => r.conns.outbound(conn))
    }

    /// Outbound bytes of `conn` not yet handed to the kernel: queued plus
    /// in flight. What the caller bounds.
    pub fn outbound_len(&self, conn: ConnId) -> usize {
        dispatch!(ref self, r => r.conns.outbound_len(conn))
    }

    /// How many more bytes `conn` may queue before reaching
    /// [`ReactorConfig::outbound_max`]; at 0 the caller refuses or ends the
    /// session, the reactor never drops bytes itself.
    pub fn outbound_room(&self, conn: ConnId) -> usize {
        dispatch!(ref self, r => r.conns.outbound_room(conn))
    }

    /// Closes `conn` gracefully: what is queued goes out, then the socket is
    /// shut down and closed, and `Closed { Local }` is reported (unless the
    /// peer or an error ends it first).
    pub fn close(&mut self, conn: ConnId) {
        dispatch!(self, r => r.conns.close(conn))
    }

    /// Closes `conn` now, dropping its queued bytes; `Closed { Local }` is
    /// reported at once.
    pub fn abort(&mut self, conn: ConnId) {
        dispatch!(self, r => r.conns.end(conn, Some(CloseCause::Local)))
    }

    /// A waker for this reactor, for other threads.
    pub fn waker(&self) -> ReactorWaker {
        dispatch!(ref self, r => r.waker())
    }

    /// Runs one turn: sends what was queued, waits in the kernel once for
    /// at most `timeout` (`None`: until something happens; not at all while
    /// events are pending), and turns what happened into events. May return
    /// with no event (a signal, a stale wake).
    pub fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        dispatch!(self, r => r.turn(timeout))
    }

    /// The next event, in the order the turn found them.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<NetEvent> {
        dispatch!(self, r => r.conns.events.pop_front())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_parses_its_three_names_and_refuses_others() {
        assert_eq!("io_uring".parse(), Ok(IoBackend::IoUring));
        assert_eq!("epoll".parse(), Ok(IoBackend::Epoll));
        assert_eq!("auto".parse(), Ok(IoBackend::Auto));
        let refused = "uring".parse::<IoBackend>().unwrap_err();
        assert!(
            refused.contains("\"io_uring\", \"epoll\" or \"auto\""),
            "{refused}"
        );
    }

    #[test]
    fn epoll_resolves_to_itself_without_probing() {
        assert_eq!(IoBackend::Epoll.resolve().ok(), Some(IoBackend::Epoll));
    }
}
