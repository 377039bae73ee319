//! Admission of record 51 to a full link (§6): "when the queue is full, it
//! waits for admission until the send timeout, and ends with
//! DeadlineExceeded if it is not admitted by then."
//!
//! The queue a 51 enters is the link's outbound queue to the previous
//! session owner. The transport tells this type whether that queue is full
//! (its unsent bytes at the node's `outbound_max`); a 51 offered to a full
//! link, or behind another 51 still waiting for the same peer, waits here in
//! order. The shard core keeps this table ([`super::shard::ShardCore::offer_transmit`]),
//! with each send timeout on its one timer wheel; each turn the transport
//! admits the waiting records of links with room (a link drains through
//! socket completions, which end the loop's wait, so nothing polls), and
//! those whose send timeout has passed end with DeadlineExceeded:
//! dropped and counted (`replaced_notice_deadline_exceeded`), never retried,
//! never early. Nothing here delays the bind terminal, which went out before
//! the 51 was offered (§6). Every other record goes out at once, as before
//! (docs/threading.md "Node links").
//!
//! Sans-IO: time is the core's [`Instant`], so a test drives it virtually.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};
use std::time::Duration;

use super::effects::Transmit;
use super::time::Instant;
use crate::ids::NodeRid;
use crate::wire::node::NodeRecord;

/// The 51s waiting for room on their links, by peer, in offer order.
#[derive(Debug)]
pub struct LinkAdmission {
    send_timeout: Duration,
    waiting: HashMap<NodeRid, VecDeque<(Instant, Transmit)>>,
}

impl LinkAdmission {
    /// Waits of at most `send_timeout` (the node's §6 send timeout).
    pub fn new(send_timeout: Duration) -> Self {
        Self {
            send_timeout,
            waiting: HashMap::new(),
        }
    }

    /// The send timeout a waiting record gets.
    pub fn send_timeout(&self) -> Duration {
        self.send_timeout
    }

    /// Whether `record` waits for admission to a full link: only 51, the
    /// one send §6 gives that rule to.
    pub fn waits(record: &NodeRecord) -> bool {
        matches!(record, NodeRecord::BoundSessionReplaced(_))
    }

    /// A record to go onto the link to `transmit.to` at `now`: given back to
    /// be written now, or kept to wait (`None`) when it is a 51 and the link
    /// is full or an earlier 51 for that peer still waits (order is kept).
    pub fn offer(&mut self, now: Instant, transmit: Transmit, link_full: bool) -> Option<Transmit> {
        if !Self::waits(&transmit.record) {
            return Some(transmit);
        }
        let queue = self.waiting.entry(transmit.to).or_default();
        if !link_full && queue.is_empty() {
            return Some(transmit);
        }
        queue.push_back((now + self.send_timeout, transmit));
        None
    }

    /// Ends every waiting record whose send timeout has passed at `now`
    /// (DeadlineExceeded); returns how many. A record is never ended before
    /// its deadline.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut ended = 0;
        self.waiting.retain(|_, queue| {
            let before = queue.len();
            queue.retain(|(deadline, _)| *deadline > now);
            ended += before - queue.len();
            !queue.is_empty()
        });
        ended
    }

    /// The waiting records admitted now: every one for a peer whose link
    /// `has_room` (51s are small; the bound is a threshold, not a cap), in
    /// offer order per peer. Call [`LinkAdmission::expire`] first: a record
    /// past its send timeout is never admitted.
    pub fn admit(&mut self, mut has_room: impl FnMut(NodeRid) -> bool) -> Vec<Transmit> {
        let mut admitted = Vec::new();
        self.waiting.retain(|&peer, queue| {
            if has_room(peer) {
                admitted.extend(queue.drain(..).map(|(_, transmit)| transmit));
            }
            !queue.is_empty()
        });
        admitted
    }

    /// The earliest send timeout among the waiting records.
    #[cfg(feature = "testing")]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.waiting
            .values()
            .filter_map(|queue| queue.front().map(|(deadline, _)| *deadline))
            .min()
    }

    /// How many records wait.
    pub fn waiting(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }
}
