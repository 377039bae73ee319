//! The Message Follow table (§2, §5, §9): after a relocation committed, the
//! source remembers where the moved incarnation went, so that a record still
//! addressed to it here is forwarded once to the new owner instead of ending
//! with `Unavailable`.
//!
//! Rules this table keeps (docs/relocation.md "Message Follow"):
//! - An entry lives `follow_lifetime` from the commit, then expires; a
//!   record for the Actor after that ends with `Unavailable` (§12 stale
//!   location, no Message Follow route).
//! - At most `follow_max` entries: at the limit the oldest goes first, and
//!   its senders get `Unavailable` from then on.
//! - An entry goes when this node hosts the Actor again (a move back), and
//!   never forwards a record that names the entry's authority or a later
//!   one: the authority grows along every chain of follows, so none loops.
//! - An entry names the route the target confirmed in 65; nothing here reads
//!   the Location Store or judges the record (§2: Message Follow revalidates
//!   nothing).

use std::collections::VecDeque;

use foldhash::HashMap;

use super::{Origin, RelocationTimer, Relocations};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::Reason;
use crate::ids::{ActorId, NodeRid, ObjectGeneration, Peer};
use crate::wire::node::{ActorSend, BoundRoute, BoundSessionBind, NodeRecord, RequestHeader};

/// Where a moved incarnation went.
#[derive(Debug)]
pub(super) struct FollowEntry {
    /// The moved incarnation (kept by the move, §1).
    pub(super) generation: ObjectGeneration,
    /// The route the target confirmed.
    pub(super) route: BoundRoute,
    /// Tells this entry from a later one for the same ActorId.
    serial: u64,
    /// Its expiry timer.
    expiry: TimerKey,
}

/// Every live follow entry of one shard.
#[derive(Debug, Default)]
pub(super) struct FollowTable {
    entries: HashMap<ActorId, FollowEntry>,
    /// Insertion order, oldest first, for eviction at the limit. An item
    /// whose serial no longer matches its entry was replaced or removed.
    order: VecDeque<(ActorId, u64)>,
    next_serial: u64,
}

/// What [`FollowTable::insert`] pushed out to stay within the limit.
pub(super) struct Evicted {
    /// The expiry timer of the evicted entry, to cancel.
    pub(super) expiry: TimerKey,
}

impl FollowTable {
    /// The entry for `actor`, if one is live.
    pub(super) fn get(&self, actor: &ActorId) -> Option<&FollowEntry> {
        self.entries.get(actor)
    }

    /// Whether no entry is live: then no record can follow one, and the
    /// registry takes it straight ([`super::Relocations::handle_actor_record`]).
    /// Skipped by cargo-mutants: its `false` mutant is equivalent (every
    /// record then goes through [`super::Relocations::follow`], which hands
    /// back untouched a record no entry names); its `true` mutant fails
    /// every follow test (docs/TESTING.md "Mutation testing").
    #[cfg_attr(zlink_mutants_skip, mutants::skip)]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries are live.
    #[cfg(feature = "testing")]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The serial the next inserted entry will carry (its expiry timer is
    /// armed with it before the insert).
    pub(super) fn next_serial(&self) -> u64 {
        self.next_serial
    }

    /// Installs an entry for `actor`, replacing any earlier one, and evicts
    /// the oldest entries while more than `max` are live. Returns what was
    /// replaced or evicted, whose timers the caller cancels.
    pub(super) fn insert(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        route: BoundRoute,
        expiry: TimerKey,
        max: usize,
    ) -> Vec<Evicted> {
        debug_assert!(max > 0, "follow_max is at least one");
        let serial = self.next_serial;
        self.next_serial += 1;
        let mut gone = Vec::new();
        let entry = FollowEntry {
            generation,
            route,
            serial,
            expiry,
        };
        if let Some(old) = self.entries.insert(actor.clone(), entry) {
            gone.push(Evicted { expiry: old.expiry });
        }
        self.order.push_back((actor, serial));
        while self.entries.len() > max {
            let Some((oldest, serial)) = self.order.pop_front() else {
                break;
            };
            if let Some(expiry) = self.remove(&oldest, serial) {
                gone.push(Evicted { expiry });
            }
        }
        self.compact();
        gone
    }

    /// Removes the entry of `actor` if it is still the one with `serial`
    /// (its expiry fired); returns its timer key when it was removed.
    pub(super) fn remove(&mut self, actor: &ActorId, serial: u64) -> Option<TimerKey> {
        if self.entries.get(actor).is_some_and(|e| e.serial == serial) {
            let removed = self.entries.remove(actor).map(|e| e.expiry);
            self.compact();
            return removed;
        }
        None
    }

    /// Removes the entry of `actor`, whatever its serial (this node hosts
    /// the Actor again); returns its timer key when there was one.
    pub(super) fn forget(&mut self, actor: &ActorId) -> Option<TimerKey> {
        let removed = self.entries.remove(actor).map(|e| e.expiry);
        self.compact();
        removed
    }

    /// Drops order items of entries that are gone from the front, so the
    /// order queue stays within a constant factor of the live entries.
    fn compact(&mut self) {
        while let Some((actor, serial)) = self.order.front() {
            let live = self.entries.get(actor).is_some_and(|e| e.serial == *serial);
            if live {
                break;
            }
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.entries.len() + 16 {
            let entries = &self.entries;
            self.order
                .retain(|(actor, serial)| entries.get(actor).is_some_and(|e| e.serial == *serial));
        }
    }
}

impl Relocations<'_> {
    /// Installs the follow entry of a committed relocation (65), for
    /// `follow_lifetime`; the oldest entry goes when the table is full.
    pub(super) fn install_follow(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        route: BoundRoute,
    ) {
        let serial = self.state.follow.next_serial();
        let lifetime = self.state.config.follow_lifetime;
        let timer = RelocationTimer::FollowExpiry {
            actor: actor.clone(),
            serial,
        };
        let expiry = self.arm(lifetime, timer);
        let max = self.state.config.follow_max;
        for evicted in self
            .state
            .follow
            .insert(actor, generation, route, expiry, max)
        {
            self.fx.cancel(evicted.expiry);
        }
    }

    /// §9 Message Follow: a 24 or 38 for an Actor that moved away from here
    /// is forwarded once to its new owner — a request under a proxy id, so
    /// its answer comes back through this node — with the location it
    /// carries rewritten to the new owner's (the target judges it, §2: this
    /// boundary revalidates nothing). Returns the record when no entry
    /// applies (the registry then answers, `Unavailable` for an Actor not
    /// here).
    pub(super) fn follow(&mut self, from: Peer, record: NodeRecord) -> Option<NodeRecord> {
        let Some(actor) = super::actor_of(&record) else {
            return Some(record);
        };
        if self.owner.hosts(actor) {
            return Some(record);
        }
        let Some(entry) = self.state.follow.get(actor) else {
            return Some(record);
        };
        // A relay or tombstone names the incarnation its binding points to:
        // only the moved one follows. A bind is forwarded whatever it names,
        // so that the target gives §12's answer for another generation.
        let generation = match &record {
            NodeRecord::ActorSend(ActorSend::Message(m)) => Some(m.object_generation),
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(t)) => {
                Some(t.object_generation)
            }
            NodeRecord::ActorCall(c) => Some(c.object_generation),
            _ => None,
        };
        if generation.is_some_and(|g| g != entry.generation) {
            return Some(record);
        }
        // A record that already names this move's authority or a later one
        // was addressed after the move: an entry never sends it on, so the
        // authority strictly grows along a chain of follows and no record
        // goes round a loop of them.
        let authority = match &record {
            NodeRecord::ActorSend(ActorSend::Message(m)) => Some(m.authority),
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => Some(r.authority),
            NodeRecord::ActorCall(c) => Some(c.authority),
            _ => None,
        };
        if authority.is_some_and(|a| a >= entry.route.authority) {
            return Some(record);
        }
        let route = entry.route.clone();
        let forwarded = match record {
            NodeRecord::ActorSend(ActorSend::Message(mut message)) => {
                message.authority = route.authority;
                message.lease = route.lease;
                if !self.proxy_request(from, route.owner, &mut message.request) {
                    let record = NodeRecord::ActorSend(ActorSend::Message(message));
                    self.refuse(from, record, Reason::QueueFull.into());
                    return None;
                }
                NodeRecord::ActorSend(ActorSend::Message(message))
            }
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(mut request)) => {
                request.target_node_generation = route.node_generation;
                request.authority = route.authority;
                request.lease = route.lease;
                let origin = Origin::Bind {
                    to: from,
                    request: request.request.id,
                };
                let budget = request.request.budget;
                let Some(proxied) = self.proxy(route.owner, origin, budget) else {
                    let record = NodeRecord::BoundSessionBind(BoundSessionBind::Request(request));
                    self.refuse(from, record, Reason::QueueFull.into());
                    return None;
                };
                request.request = proxied;
                NodeRecord::BoundSessionBind(BoundSessionBind::Request(request))
            }
            NodeRecord::ActorCall(mut call) => {
                call.authority = route.authority;
                call.lease = route.lease;
                if !self.proxy_request(from, route.owner, &mut call.request) {
                    self.refuse(from, NodeRecord::ActorCall(call), Reason::QueueFull.into());
                    return None;
                }
                NodeRecord::ActorCall(call)
            }
            tombstone => tombstone,
        };
        self.fx.trace(FlowTrace::MessageFollowed);
        self.fx.send(route.owner, forwarded);
        None
    }

    /// A followed request (a 24 or 70) travels on under a proxy id of this
    /// node's, so that its reply comes back through here to its sender
    /// (`Origin::Relay`); `false` when the proxy table is full.
    fn proxy_request(
        &mut self,
        from: Peer,
        owner: NodeRid,
        request: &mut Option<RequestHeader>,
    ) -> bool {
        let Some(header) = *request else {
            return true;
        };
        let origin = Origin::Relay {
            to: from,
            request: header.id,
        };
        match self.proxy(owner, origin, header.budget) {
            Some(proxied) => {
                *request = Some(proxied);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The table alone (docs/relocation.md "Message Follow"): which entry
    //! goes at `follow_max`, which expiry removes which entry, and what the
    //! eviction queue keeps. The follows themselves are proven on the mesh
    //! (tests/core_relocation.rs).

    use super::FollowTable;
    use crate::core::time::Instant;
    use crate::core::timer::{TimerKey, TimerWheel};
    use crate::ids::{
        ActorId, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid, ObjectGeneration,
        OwnerLeaseGeneration,
    };
    use crate::wire::node::BoundRoute;

    /// A table and the wheel its expiry keys come from.
    struct Table {
        table: FollowTable,
        wheel: TimerWheel<()>,
    }

    impl Table {
        fn new() -> Self {
            Self {
                table: FollowTable::default(),
                wheel: TimerWheel::with_defaults(Instant::ZERO),
            }
        }

        /// Installs an entry for `actor` as `install_follow` does: the
        /// serial announced, then the insert. Returns the entry's serial,
        /// its expiry key and the keys of the entries it pushed out.
        fn insert(&mut self, actor: &str, max: usize) -> (u64, TimerKey, Vec<TimerKey>) {
            let serial = self.table.next_serial();
            let expiry = self.wheel.insert(Instant::from_millis(1_000), ());
            let route = BoundRoute {
                mesh: MeshName::new("m").unwrap(),
                owner: NodeRid(3),
                node_generation: NodeGeneration(1),
                authority: AuthorityOwnerGeneration(2),
                lease: OwnerLeaseGeneration(1),
            };
            let gone = self
                .table
                .insert(id(actor), ObjectGeneration(1), route, expiry, max)
                .into_iter()
                .map(|e| e.expiry)
                .collect();
            (serial, expiry, gone)
        }

        fn live(&self, actor: &str) -> bool {
            self.table.get(&id(actor)).is_some()
        }
    }

    fn id(actor: &str) -> ActorId {
        ActorId::new(actor).unwrap()
    }

    /// docs/relocation.md "Message Follow": at most `follow_max` entries;
    /// at the limit the oldest goes first (its expiry handed back to be
    /// cancelled), and every entry up to the limit stays.
    #[test]
    fn at_the_limit_the_oldest_entry_goes_first_and_every_entry_up_to_it_stays() {
        let mut t = Table::new();
        let (_, a, gone) = t.insert("a", 2);
        assert!(gone.is_empty());
        let (_, b, gone) = t.insert("b", 2);
        assert!(gone.is_empty(), "two entries fit a limit of two");
        assert!(t.live("a") && t.live("b"));
        let (_, _, gone) = t.insert("c", 2);
        assert_eq!(gone, vec![a], "the oldest goes");
        assert!(!t.live("a") && t.live("b") && t.live("c"));
        let (_, _, gone) = t.insert("d", 2);
        assert_eq!(gone, vec![b]);
        assert!(t.live("c") && t.live("d"));
        assert_eq!(t.table.entries.len(), 2);
    }

    /// An entry's expiry timer is armed with the serial `next_serial`
    /// announces before the insert (`install_follow`): that serial removes
    /// that entry, every entry's its own; the expiry of an entry since
    /// replaced (the Actor moved back and away again) removes nothing of
    /// the new one.
    #[test]
    fn each_entry_expires_by_the_serial_announced_for_it_and_no_later_entry_by_an_earlier_one() {
        let mut t = Table::new();
        let (a1, _, _) = t.insert("a", 8);
        let (b, b_key, _) = t.insert("b", 8);
        let (c, c_key, _) = t.insert("c", 8);
        assert_eq!(t.table.remove(&id("b"), b), Some(b_key));
        assert_eq!(t.table.remove(&id("c"), c), Some(c_key));
        assert!(!t.live("b") && !t.live("c"));
        // "a" moved back here (its entry forgotten), then away again.
        assert!(t.table.forget(&id("a")).is_some());
        let (a2, a2_key, _) = t.insert("a", 8);
        assert_eq!(t.table.remove(&id("a"), a1), None, "the old expiry");
        assert!(t.live("a"));
        assert_eq!(t.table.remove(&id("a"), a2), Some(a2_key));
        assert_eq!(t.table.entries.len(), 0);
    }

    /// The eviction queue keeps an item per insert until `compact` drops
    /// those of entries gone. After a thousand moves away, then each of
    /// those Actors back (its entry forgotten), behind one entry that
    /// stays, the queue holds a few items, not the thousand (compact keeps
    /// it within 2 · live + 16; any bound that does not grow with the churn
    /// would do), and the entry that stayed is still the oldest: the next
    /// insert at a limit of one evicts it, not the new one.
    #[test]
    fn moves_away_and_back_leave_the_eviction_queue_bounded_and_the_oldest_entry_first() {
        let mut t = Table::new();
        let (_, stays, _) = t.insert("stays", 2_000);
        let moved: Vec<_> = (0..1_000)
            .map(|n| {
                let actor = format!("m{n}");
                let (_, key, gone) = t.insert(&actor, 2_000);
                assert!(gone.is_empty());
                (actor, key)
            })
            .collect();
        for (actor, key) in &moved {
            assert_eq!(t.table.forget(&id(actor)), Some(*key));
        }
        assert_eq!(t.table.entries.len(), 1);
        assert!(
            t.table.order.len() <= 64,
            "the queue grew with the churn: {} items for one entry",
            t.table.order.len()
        );
        let (_, _, gone) = t.insert("new", 1);
        assert_eq!(gone, vec![stays]);
        assert!(t.live("new") && !t.live("stays"));
    }
}
