//! Waking a parked reactor from another thread (cross-shard queues,
//! DESIGN "Threads, queues, time").
//!
//! Ground rules: the reactor and its wakers share one state byte. The reactor
//! moves it to `PARKED` just before it blocks in the kernel and back to
//! `RUNNING` when it returns; a waker moves it to `NOTIFIED` and writes the
//! eventfd only if it found `PARKED`. So a busy reactor is woken for the cost
//! of one atomic swap and no syscall, and a parked one for one eventfd write,
//! whose read the io_uring reactor keeps armed in its ring and the epoll
//! reactor watches for readiness.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The reactor is running a turn and will look at the state before parking.
const RUNNING: u8 = 0;
/// The reactor is blocked in the kernel, or about to be.
const PARKED: u8 = 1;
/// A wake arrived that the reactor has not yet reported.
const NOTIFIED: u8 = 2;

#[derive(Debug)]
struct Shared {
    state: AtomicU8,
    eventfd: File,
}

/// Wakes a [`super::Reactor`] from any thread: its next (or current)
/// [`super::Reactor::turn`] returns with a [`super::NetEvent::Woken`].
///
/// Several wakes before the reactor looks are reported as one.
#[derive(Clone, Debug)]
pub struct ReactorWaker {
    shared: Arc<Shared>,
}

impl ReactorWaker {
    /// Makes the reactor report [`super::NetEvent::Woken`]; writes the
    /// eventfd only when the reactor is parked or about to park.
    pub fn wake(&self) {
        // AcqRel: what the caller did before waking (a queue push) happens
        // before the reactor's swap that observes NOTIFIED.
        if self.shared.state.swap(NOTIFIED, Ordering::AcqRel) == PARKED {
            // A full counter (EAGAIN) already wakes the reactor, and no other
            // error can leave it parked for longer than its timeout, so the
            // result carries nothing to act on.
            let _ = (&self.shared.eventfd).write(&1u64.to_ne_bytes());
        }
    }
}

/// The reactor's side of the handshake.
#[derive(Debug)]
pub(super) struct Parker {
    shared: Arc<Shared>,
}

impl Parker {
    /// Creates the eventfd and the shared state.
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let eventfd = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Self {
            shared: Arc::new(Shared {
                state: AtomicU8::new(RUNNING),
                eventfd,
            }),
        })
    }

    /// A waker for this reactor.
    pub(super) fn waker(&self) -> ReactorWaker {
        ReactorWaker {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The eventfd the reactor keeps a read armed on.
    pub(super) fn eventfd(&self) -> RawFd {
        self.shared.eventfd.as_raw_fd()
    }

    /// Empties the eventfd's counter (the epoll backend, whose readiness
    /// for it is edge-triggered); a counter already at zero is fine.
    pub(super) fn clear(&self) {
        let mut word = [0u8; 8];
        // EAGAIN (nothing to read) and every other result leave nothing to
        // act on: the state byte, not the counter, carries the wake.
        let _ = (&self.shared.eventfd).read(&mut word);
    }

    /// Announces that the reactor is about to block; `false` means a wake
    /// already arrived and it must not block.
    pub(super) fn park(&self) -> bool {
        self.shared
            .state
            .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Returns to `RUNNING`; `true` if a wake arrived since the last call.
    pub(super) fn take_wake(&self) -> bool {
        if self.shared.state.load(Ordering::Relaxed) == RUNNING {
            return false;
        }
        self.shared.state.swap(RUNNING, Ordering::AcqRel) == NOTIFIED
    }
}
