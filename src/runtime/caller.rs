//! Messages and requests from node code outside any Actor (docs/actors.md
//! "From node code"; contract A4): a matchmaking service, an admin
//! endpoint or a test harness reaches an Actor by its ActorId, by the same
//! path as an Actor's turn — the route cache, Message Follow once, the
//! core's deadline — and never reads the store per message.
//!
//! The call is a node command to the target's shard: the caller's thread
//! never touches a shard's state. A request's outcome comes back through a
//! one-shot channel, which the caller either awaits (async code, a
//! session callback among it) or blocks on ([`CallReply::wait`], never on a
//! shard thread).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use super::router::{Router, ShardMsg};
use super::NodeCommand;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, PacketKey};
use crate::wire::client::ClientFrame;
use crate::wire::DecodeLimits;

/// Sends to and requests from Actors by ActorId, from node code outside
/// any Actor ([`crate::api::Node::caller`]). Cheap to clone, and usable from
/// any thread; it holds no reference to the node beyond its shards' inboxes,
/// so calls made after the node stopped end `ShuttingDown`.
#[derive(Clone)]
pub struct ActorCaller {
    router: Arc<Router>,
    limits: DecodeLimits,
}

impl ActorCaller {
    pub(crate) fn new(router: Arc<Router>, limits: DecodeLimits) -> Self {
        Self { router, limits }
    }

    /// A one-way message to the Actor `to`, for its handler of `key`, with
    /// no sender (`ActorMessage::from` is `None`). Returns once it is on
    /// its way; a message the target's owner refuses (stale route, full
    /// lane) is counted (`one_way_record_refused`), as for an Actor's send.
    /// `InvalidOperation` (MessageTooLarge) for a payload over the client
    /// payload limit (docs/wire.md "Limits"), which an Actor could not push
    /// on either.
    pub fn send(&self, to: &ActorId, key: PacketKey, payload: Bytes) -> Result<(), Error> {
        self.fits(&payload)?;
        self.command(to, key, payload, None);
        Ok(())
    }

    /// A request to the Actor `to`: its handler's return value is the
    /// reply. It ends exactly once — the reply, the target's typed error,
    /// `Deadline` at `deadline` (counted from when the target's shard takes
    /// it), or `Unavailable` for a route found stale (call again to
    /// resolve again) — and is never sent again to another owner.
    pub fn request(
        &self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        deadline: Duration,
    ) -> CallReply {
        let (reply, outcome) = oneshot::channel();
        match self.fits(&payload) {
            Ok(()) => self.command(to, key, payload, Some((deadline, reply))),
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
        CallReply::new(outcome)
    }

    fn command(
        &self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        reply: Option<(Duration, super::shard::NodeCallReply)>,
    ) {
        let shard = to.shard(self.router.shards());
        let command = NodeCommand::Call {
            to: to.clone(),
            key,
            payload,
            reply,
        };
        self.router.send(shard, ShardMsg::Command(command));
    }

    fn fits(&self, payload: &Bytes) -> Result<(), Error> {
        if ClientFrame::payload_fits(false, payload.len(), &self.limits) {
            Ok(())
        } else {
            Err(Reason::MessageTooLarge.into())
        }
    }
}

impl std::fmt::Debug for ActorCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorCaller").finish_non_exhaustive()
    }
}

/// The outcome of a request from node code ([`ActorCaller::request`]):
/// `.await` it in async code, or [`CallReply::wait`] for it on a thread of
/// the embedder's own.
#[derive(Debug)]
#[must_use = "a request's outcome is its reply or its typed error"]
pub struct CallReply {
    outcome: oneshot::Receiver<Result<Bytes, Error>>,
}

impl CallReply {
    pub(crate) fn new(outcome: oneshot::Receiver<Result<Bytes, Error>>) -> Self {
        Self { outcome }
    }

    /// Blocks until the request ended. Never call it on a shard thread (in
    /// a session callback or an Actor's turn): that thread would wait for
    /// itself; a debug build panics there (docs/threading.md "Never block a
    /// shard").
    pub fn wait(self) -> Result<Bytes, Error> {
        crate::store::assert_off_shard("CallReply::wait");
        self.outcome.recv().unwrap_or_else(|_| gone())
    }
}

impl Future for CallReply {
    type Output = Result<Bytes, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.outcome)
            .poll(cx)
            .map(|outcome| outcome.unwrap_or_else(|_| gone()))
    }
}

/// The node stopped before the request ended: its shard dropped the waiter.
fn gone() -> Result<Bytes, Error> {
    Err(Reason::ShuttingDown.into())
}
