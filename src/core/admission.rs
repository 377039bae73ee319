//! Admission of record 51 to a full link (§6): "when the queue is full, it
//! waits for admission until the send timeout, and ends with
//! DeadlineExceeded if it is not admitted by then." And of record 44 to a
//! link that is not up yet (§8.1; docs/relocation.md "A 44 waits for its
//! link").
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
//! the 51 was offered (§6).
//!
//! A 44 goes to the session owner once, with no reply and no resend
//! (§8.1), and only it ends the seal there before the seal timeout. A
//! target that commits while its link to the session owner is down (a
//! node that has just restarted links to its peers one by one) would lose
//! it, and the session would close at the seal timeout though the move
//! succeeded. So a 44 offered to a peer with no link waits here for the
//! link, in order with the other waiting records of that peer, until the
//! send timeout (then dropped and counted, `route_update_unroutable`):
//! still sent once, only later. Every other record goes out at once, as
//! before (docs/threading.md "Node links").
//!
//! Sans-IO: time is the core's [`Instant`], so a test drives it virtually.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};
use std::time::Duration;

use super::effects::Transmit;
use super::time::Instant;
use crate::ids::NodeRid;
use crate::wire::node::NodeRecord;

/// The state of the link a record is offered to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRoom {
    /// Up, with room below the outbound bound.
    Room,
    /// Up, its outbound queue at the bound.
    Full,
    /// No link to the peer now.
    Down,
}

/// Records whose send timeout passed while they waited, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// 51s: DeadlineExceeded (§6).
    pub notices: usize,
    /// 44s that found no link to the session owner in time.
    pub routes: usize,
}

/// The 51s waiting for room on their links and the 44s waiting for their
/// links to come up, by peer, in offer order.
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

    /// Whether `record` may wait here: a 51 (for room, §6) or a 44 (for
    /// its link, §8.1).
    pub fn waits(record: &NodeRecord) -> bool {
        Self::waits_for(record).is_some()
    }

    /// The link state `record` waits out: a full link for a 51, no link
    /// for a 44; `None` for every other record (it goes out at once).
    fn waits_for(record: &NodeRecord) -> Option<LinkRoom> {
        match record {
            NodeRecord::BoundSessionReplaced(_) => Some(LinkRoom::Full),
            NodeRecord::SessionRelocationRoute(_) => Some(LinkRoom::Down),
            _ => None,
        }
    }

    /// A record to go onto the link to `transmit.to` at `now`: given back to
    /// be written now, or kept to wait (`None`) when an earlier record for
    /// that peer still waits (order is kept), or when it is a 51 and the
    /// link is full, or a 44 and there is no link. A 51 with no link at all
    /// is given back (it is unroutable: the old connection is left to its
    /// owner's liveness, §6); a 44 to a full link is given back (it is
    /// written past the bound, as every record but the 51).
    pub fn offer(&mut self, now: Instant, transmit: Transmit, link: LinkRoom) -> Option<Transmit> {
        let Some(waits_for) = Self::waits_for(&transmit.record) else {
            return Some(transmit);
        };
        let queue = self.waiting.entry(transmit.to).or_default();
        if link != waits_for && queue.is_empty() {
            return Some(transmit);
        }
        queue.push_back((now + self.send_timeout, transmit));
        None
    }

    /// Ends every waiting record whose send timeout has passed at `now`;
    /// returns how many of each kind. A record is never ended before its
    /// deadline.
    pub fn expire(&mut self, now: Instant) -> Expired {
        let mut expired = Expired::default();
        self.waiting.retain(|_, queue| {
            queue.retain(|(deadline, transmit)| {
                if *deadline > now {
                    return true;
                }
                if Self::waits_for(&transmit.record) == Some(LinkRoom::Down) {
                    expired.routes += 1;
                } else {
                    expired.notices += 1;
                }
                false
            });
            !queue.is_empty()
        });
        expired
    }

    /// The waiting records admitted now: every one for a peer whose link
    /// `has_room` (is up, below its bound: 51s and 44s are small, the
    /// bound is a threshold, not a cap), in offer order per peer. Call
    /// [`LinkAdmission::expire`] first: a record past its send timeout is
    /// never admitted.
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
