//! Proxied requests (docs/relocation.md "Replies always come from the node a
//! request was sent to"): a request the source hands to the target — saved
//! work, an ingress hold item, a Message Follow — is re-issued under a
//! RequestId of the source's own; the target answers the source, and the
//! source answers the original sender under the original id.
//!
//! So a session owner only ever matches a reply against the peer it sent
//! the request to (§2 transport ingress), and every proxied request ends
//! exactly once: with the target's answer, or at its deadline with
//! `DeadlineExceeded`, or with `PeerUnreachable` when the link is gone.

use foldhash::HashMap;

use crate::core::actor::ReplyTicket;
use crate::core::timer::TimerKey;
use crate::ids::{NodeRid, Peer, RequestId};

/// Whom a proxied request's answer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// Work this Actor owner admitted and owes a 24 reply for (a request
    /// relay or a disconnect callback): answered through the ticket.
    Ticket(ReplyTicket),
    /// A 24 request forwarded by Message Follow: answered with a 24 reply.
    Relay {
        /// The original sender (its lifecycle too: the answer goes to it
        /// alone).
        to: Peer,
        /// Its request id.
        request: RequestId,
    },
    /// A 38 bind forwarded by Message Follow: answered with a 38 terminal.
    Bind {
        /// The original sender (its lifecycle too: the answer goes to it
        /// alone).
        to: Peer,
        /// Its request id.
        request: RequestId,
    },
}

impl Origin {
    /// Whether the answer is a 38 terminal (otherwise a 24 reply).
    pub(super) fn wants_bind_terminal(&self) -> bool {
        matches!(self, Origin::Bind { .. })
    }
}

/// One proxied request in flight.
#[derive(Debug)]
pub(super) struct Proxy {
    /// The node the re-issued request went to: only its answer counts.
    pub(super) peer: NodeRid,
    /// Whom to answer.
    pub(super) origin: Origin,
    /// Its deadline.
    pub(super) deadline: TimerKey,
}

/// Every proxied request of one shard, by the source's RequestId.
#[derive(Debug, Default)]
pub(super) struct ProxyTable {
    proxies: HashMap<RequestId, Proxy>,
}

impl ProxyTable {
    /// How many are in flight.
    pub(super) fn len(&self) -> usize {
        self.proxies.len()
    }

    /// Records a proxied request.
    pub(super) fn insert(&mut self, id: RequestId, proxy: Proxy) {
        debug_assert!(
            id.is_relocation(),
            "proxy ids come from the relocation side"
        );
        let previous = self.proxies.insert(id, proxy);
        debug_assert!(previous.is_none(), "a proxy id is used once: {id:?}");
    }

    /// The proxied request `id`, if it is still in flight.
    pub(super) fn get(&self, id: RequestId) -> Option<&Proxy> {
        self.proxies.get(&id)
    }

    /// Ends the proxied request `id`.
    pub(super) fn remove(&mut self, id: RequestId) -> Option<Proxy> {
        self.proxies.remove(&id)
    }

    /// The proxied requests re-issued to `peer` that a reply ends (not
    /// binds), in the order they were made.
    pub(super) fn relays_to(&self, peer: NodeRid) -> Vec<RequestId> {
        crate::core::sorted_keys(&self.proxies, |p| {
            p.peer == peer && !p.origin.wants_bind_terminal()
        })
    }
}
