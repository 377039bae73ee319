//! The cross-shard hop (DESIGN "Threads, queues, time"): one lock-free
//! inbox per shard with a wake-up, no mutex. A record crosses at most one
//! shard hop inside a node: a session's shard and an Actor's shard talk
//! directly, and records for another node go through the one shard that
//! owns the node links (shard 0).

use crossbeam_queue::SegQueue;

use super::NodeCommand;
use crate::error::Error;
use crate::ids::{ActorId, ActorRef, NodeRid, Peer};
use crate::net::ReactorWaker;
use crate::runtime::app::spot::SpotHandle;
use crate::wire::node::NodeRecord;

/// The shard that owns every node link.
pub(crate) const LINK_SHARD: u16 = 0;

/// What one shard hands another.
pub(crate) enum ShardMsg {
    /// A record for this shard's core, from `from` (the transport checked
    /// it), handed over by a shard whose loop turn began at `since` (in the
    /// node's core time, which every shard shares): the start of the push
    /// latency's span when it is a push (core::latency).
    Record {
        from: Peer,
        record: NodeRecord,
        since: crate::core::time::Instant,
    },
    /// (Link shard) send this record on the link to its node.
    Transmit(crate::core::Transmit),
    /// A request from the embedding application.
    Command(NodeCommand),
    /// Look up or host an Actor here (into `spot` when given), for a
    /// session on shard `origin`.
    CreateActor {
        actor_type: String,
        id: ActorId,
        spot: Option<SpotHandle>,
        origin: u16,
        token: u64,
    },
    /// The answer to a `CreateActor`.
    ActorCreated {
        token: u64,
        outcome: Result<ActorRef, Error>,
    },
    /// A store operation this shard asked for has ended (docs/threading.md
    /// "Never block a shard").
    Store(super::store_effects::StoreAnswer),
    /// §5: the owner lease was lost; fence this shard's Actor owner.
    Fence,
    /// The link to this node went down (the link shard saw it).
    PeerDown(NodeRid),
    /// A request this shard sent could not go out: there is no link to `to`.
    Unreachable {
        to: NodeRid,
        request: crate::ids::RequestId,
    },
    /// A scrape asks for this shard's gauges (src/runtime/metrics.rs):
    /// counted from the shard's own state on its next turn and sent back.
    Gauges(std::sync::mpsc::Sender<super::metrics::ShardGauges>),
    /// §10 Shutdown: refuse new sessions and bindings, finish accepted work
    /// until `deadline`, then close every session; report on `done` once no
    /// session is left.
    Drain {
        /// In the core's time (`NodeShared::now`).
        deadline: crate::time::Instant,
        done: std::sync::mpsc::Sender<()>,
    },
}

/// Every shard's inbox and waker.
pub(crate) struct Router {
    inboxes: Vec<SegQueue<ShardMsg>>,
    wakers: Vec<ReactorWaker>,
}

impl Router {
    pub(crate) fn new(wakers: Vec<ReactorWaker>) -> Self {
        Self {
            inboxes: wakers.iter().map(|_| SegQueue::new()).collect(),
            wakers,
        }
    }

    /// How many shards the node has.
    pub(crate) fn shards(&self) -> u16 {
        u16::try_from(self.inboxes.len()).unwrap_or(u16::MAX)
    }

    /// Hands `msg` to `shard` and wakes it (a syscall only if it is parked).
    pub(crate) fn send(&self, shard: u16, msg: ShardMsg) {
        let index = usize::from(shard);
        debug_assert!(index < self.inboxes.len(), "no shard {shard}");
        if let (Some(inbox), Some(waker)) = (self.inboxes.get(index), self.wakers.get(index)) {
            inbox.push(msg);
            waker.wake();
        }
    }

    /// The next message for `shard`.
    pub(crate) fn receive(&self, shard: u16) -> Option<ShardMsg> {
        self.inboxes.get(usize::from(shard))?.pop()
    }

    /// How many messages wait in `shard`'s inbox now: read from any thread,
    /// so a scrape sees a shard's inbox grow while the shard is held up.
    pub(crate) fn waiting(&self, shard: u16) -> usize {
        self.inboxes
            .get(usize::from(shard))
            .map_or(0, SegQueue::len)
    }

    /// Wakes every shard (shutdown).
    pub(crate) fn wake_all(&self) {
        for waker in &self.wakers {
            waker.wake();
        }
    }
}
