//! The `net` layer's socket loop: one reactor per shard (DESIGN "Threads,
//! queues, time"; issue 3 item 1; docs/threading.md "The socket loop"), on
//! io_uring or, where io_uring is denied, on epoll, behind one seam
//! ([`Reactor`], issue 8).
//!
//! The reactor owns the shard's listeners and TCP connections and nothing
//! above them: it moves bytes between sockets and per-connection
//! [`bytes::BytesMut`] buffers, and reports what happened as [`NetEvent`]s.
//! Framing, sessions and backpressure decisions belong to the caller.
//!
//! Ground rules:
//! - One entry into the kernel's wait per [`Reactor::turn`] (io_uring: every
//!   operation of a turn goes into the kernel with it).
//! - io_uring receives are multishot into one provided buffer ring; a
//!   buffer goes back to the ring as soon as its bytes are copied out.
//! - Sends are gathered: one `Send` per connection per turn carries all the
//!   bytes queued since the last one.
//! - No input and no syscall result panics: failures become events or
//!   `io::Result` errors.
//! - `unsafe` lives only in the files that hand memory to the kernel, each
//!   block with a `SAFETY:` comment.

mod accept_pause;
mod buf_ring;
mod conn;
mod epoll;
pub mod handshake;
mod probe;
mod reactor;
mod token;
mod uring;
mod waker;

pub use conn::{CloseCause, ConnId, ListenerId};
pub use probe::ReactorError;
pub use reactor::{IoBackend, NetEvent, Reactor, ReactorConfig};
pub use waker::ReactorWaker;
