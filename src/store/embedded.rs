//! The embedded Location Store: one process, in memory (§3, DESIGN
//! "Decisions already made": for one process the store is the embedded one,
//! always configured explicitly — §3 forbids a hidden same-process
//! authority, so a node never builds one for itself).
//!
//! One `std::sync::Mutex` guards all state, so every operation is atomic with
//! respect to every other. A lock is acceptable here and only here: the store
//! is called only for rare control operations, never on the bind, relay, push
//! or disconnect paths (§5, module doc of [`crate::store`]), so the lock is
//! held briefly and rarely.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{
    AbortOutcome, CasOutcome, Clock, Created, LocationRow, LocationStore, Member, MonotonicClock,
    OwnerClaim, OwnerLease, RemoveOutcome, RowVersion, StoreError,
};
use crate::ids::{
    ActorId, ActorLocation, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId,
};
use crate::time::Instant;

/// An in-process [`LocationStore`] for a mesh whose nodes share one process
/// (the demo, the tests). Leases expire by the injected [`Clock`]: the
/// runtime gives it a [`MonotonicClock`], tests a
/// [`ManualClock`](super::ManualClock).
#[derive(Debug)]
pub struct EmbeddedStore<C: Clock = MonotonicClock> {
    clock: C,
    lease_term: Duration,
    state: Mutex<State>,
}

/// Everything the store knows. Entries are never dropped: an ended
/// incarnation's slot and a lapsed lifecycle's lease record are what make the
/// next generations strictly greater.
#[derive(Debug, Default)]
struct State {
    actors: HashMap<ActorId, Slot>,
    leases: HashMap<NodeRid, OwnerLease>,
    /// Each node's latest registration: the lifecycle's claim (the lease it
    /// registered under) and its address. Live while that claim is.
    members: BTreeMap<NodeRid, (OwnerClaim, SocketAddr)>,
}

/// One ActorId: the generations of its latest incarnation, its owner while
/// that incarnation has not been removed, and the latest relocation aborted
/// at the current version (cleared whenever the version changes).
#[derive(Debug)]
struct Slot {
    object: ObjectGeneration,
    authority: AuthorityOwnerGeneration,
    owner: Option<OwnerClaim>,
    aborted: Option<RelocationId>,
}

impl<C: Clock> EmbeddedStore<C> {
    /// A store whose leases last `lease_term` from each acquire or renewal,
    /// measured by `clock`.
    pub fn new(clock: C, lease_term: Duration) -> Self {
        Self {
            clock,
            lease_term,
            state: Mutex::new(State::default()),
        }
    }

    /// The state, locked. A poisoned lock means an operation panicked while
    /// holding it; the store cannot vouch for rows it may have half written,
    /// so it answers `Unavailable` from then on rather than serving them.
    fn lock(&self) -> Result<MutexGuard<'_, State>, StoreError> {
        super::assert_off_shard("embedded store");
        self.state.lock().map_err(|_| {
            StoreError::Unavailable("the embedded store was poisoned by a panic".into())
        })
    }
}

impl State {
    /// The live row of `actor` at `now` (§5).
    fn live_row(&self, actor: &ActorId, now: Instant) -> Option<LocationRow> {
        self.actors.get(actor)?.live_row(actor, &self.leases, now)
    }

    fn require_live_claim(&self, claim: &OwnerClaim, now: Instant) -> Result<(), StoreError> {
        if claim_is_live(&self.leases, claim, now) {
            Ok(())
        } else {
            Err(StoreError::LeaseExpired { node: claim.owner })
        }
    }
}

impl Slot {
    /// The slot as a row, if its incarnation is live at `now`: not removed,
    /// and owned under a live lease (§5).
    fn live_row(
        &self,
        actor: &ActorId,
        leases: &HashMap<NodeRid, OwnerLease>,
        now: Instant,
    ) -> Option<LocationRow> {
        let owner = self.owner.as_ref()?;
        claim_is_live(leases, owner, now).then(|| row(actor, self.object, self.authority, owner))
    }

    /// Whether the coordinator recorded `relocation` aborted at the current
    /// version: it, or a later relocation of the same coordinator, was
    /// aborted (the trait's doc says why one id covers the earlier ones).
    fn is_aborted(&self, relocation: RelocationId) -> bool {
        self.aborted.is_some_and(|aborted| {
            aborted.coordinator == relocation.coordinator && relocation.sequence <= aborted.sequence
        })
    }

    /// A new version of the row: authority moved or a new incarnation began.
    /// Aborts recorded at the old version cannot concern it.
    fn set_owner(&mut self, owner: Option<OwnerClaim>) {
        self.owner = owner;
        self.aborted = None;
    }
}

/// Whether `claim` names its node's lease, of that lifecycle, generation and
/// mesh, and the lease is live at `now`.
fn claim_is_live(leases: &HashMap<NodeRid, OwnerLease>, claim: &OwnerClaim, now: Instant) -> bool {
    leases.get(&claim.owner).is_some_and(|lease| {
        lease.node_generation == claim.node_generation
            && lease.generation == claim.lease
            && lease.mesh == claim.mesh
            && lease.is_live_at(now)
    })
}

fn row(
    actor: &ActorId,
    object: ObjectGeneration,
    authority: AuthorityOwnerGeneration,
    owner: &OwnerClaim,
) -> LocationRow {
    LocationRow {
        actor: actor.clone(),
        object,
        location: ActorLocation {
            mesh: owner.mesh.clone(),
            owner: owner.owner,
            node_generation: owner.node_generation,
            authority,
            lease: owner.lease,
        },
    }
}

// Generations advance with `next()`, which wraps only after 2^64 steps of
// one ActorId or NodeRid: unreachable in practice (584 years at one step per
// nanosecond), so strict increase holds.
impl<C: Clock> LocationStore for EmbeddedStore<C> {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        let state = self.lock()?;
        Ok(state.live_row(actor, self.clock.now()))
    }

    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        state.require_live_claim(owner, now)?;
        let State { actors, leases, .. } = &mut *state;
        let slot = match actors.get_mut(actor) {
            Some(slot) => {
                if let Some(existing) = slot.live_row(actor, leases, now) {
                    return Ok(Created::Existing(existing));
                }
                // A removed incarnation, or one whose owner lease lapsed: the
                // new one must not be confused with it (§1, §4).
                slot.object = slot.object.next();
                slot.authority = slot.authority.next();
                slot.set_owner(Some(owner.clone()));
                slot
            }
            None => actors.entry(actor.clone()).or_insert(Slot {
                object: ObjectGeneration::default().next(),
                authority: AuthorityOwnerGeneration::default().next(),
                owner: Some(owner.clone()),
                aborted: None,
            }),
        };
        Ok(Created::New(row(actor, slot.object, slot.authority, owner)))
    }

    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        state.require_live_claim(new_owner, now)?;
        let State { actors, leases, .. } = &mut *state;
        let Some(slot) = actors.get_mut(actor) else {
            return Ok(CasOutcome::Absent);
        };
        let Some(current) = slot.live_row(actor, leases, now) else {
            return Ok(CasOutcome::Absent);
        };
        if current.version() != expected {
            return Ok(CasOutcome::Conflict { current });
        }
        if slot.is_aborted(relocation) {
            return Ok(CasOutcome::RelocationAborted);
        }
        slot.authority = slot.authority.next();
        slot.set_owner(Some(new_owner.clone()));
        Ok(CasOutcome::Swapped(row(
            actor,
            slot.object,
            slot.authority,
            new_owner,
        )))
    }

    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        let State { actors, leases, .. } = &mut *state;
        let Some(slot) = actors.get_mut(actor) else {
            return Ok(AbortOutcome::Absent);
        };
        let Some(current) = slot.live_row(actor, leases, now) else {
            return Ok(AbortOutcome::Absent);
        };
        if current.version() != expected {
            return Ok(AbortOutcome::Conflict { current });
        }
        // Keep the latest: an older abort arriving late must not lift a
        // newer one (repeats are harmless).
        if !slot.is_aborted(relocation) {
            slot.aborted = Some(relocation);
        }
        Ok(AbortOutcome::Aborted)
    }

    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        let State { actors, leases, .. } = &mut *state;
        let Some(slot) = actors.get_mut(actor) else {
            return Ok(RemoveOutcome::Absent);
        };
        let Some(current) = slot.live_row(actor, leases, now) else {
            return Ok(RemoveOutcome::Absent);
        };
        if current.version() != expected {
            return Ok(RemoveOutcome::Conflict { current });
        }
        // The generations stay: the next create goes past them.
        slot.set_owner(None);
        Ok(RemoveOutcome::Removed)
    }

    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        let expires_at = now + self.lease_term;
        let generation = match state.leases.get_mut(&node) {
            None => OwnerLeaseGeneration::default().next(),
            Some(held) if held.node_generation == node_generation => {
                if !held.is_live_at(now) {
                    return Err(StoreError::LeaseExpired { node });
                }
                // The same lifecycle again (a retry): a renewal. Its mesh
                // stays the one it first acquired with.
                held.expires_at = expires_at;
                return Ok(held.clone());
            }
            Some(held) if node_generation < held.node_generation => {
                return Err(StoreError::StaleNodeGeneration {
                    node,
                    offered: node_generation,
                    latest: held.node_generation,
                });
            }
            Some(held) if held.is_live_at(now) => {
                return Err(StoreError::LeaseHeld {
                    node,
                    holder: held.node_generation,
                    expires_at: held.expires_at,
                });
            }
            Some(lapsed) => lapsed.generation.next(),
        };
        let lease = OwnerLease {
            node,
            node_generation,
            mesh: mesh.clone(),
            generation,
            expires_at,
        };
        state.leases.insert(node, lease.clone());
        Ok(lease)
    }

    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        match state.leases.get_mut(&lease.node) {
            Some(held)
                if held.node_generation == lease.node_generation
                    && held.generation == lease.generation
                    && held.is_live_at(now) =>
            {
                held.expires_at = now + self.lease_term;
                Ok(held.clone())
            }
            _ => Err(StoreError::LeaseExpired { node: lease.node }),
        }
    }

    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        let mut state = self.lock()?;
        let now = self.clock.now();
        if let Some(held) = state.leases.get_mut(&lease.node) {
            if held.node_generation == lease.node_generation
                && held.generation == lease.generation
                && held.is_live_at(now)
            {
                // Lapsed from now on (`is_live_at(now)` is false), so its
                // rows and membership end with it. The record stays: it keeps
                // the node's newest NodeGeneration and OwnerLeaseGeneration,
                // which the next lifecycle's must go past.
                held.expires_at = now;
            }
        }
        // Anything else — lapsed, released, replaced, never given — is
        // already over, and another lifecycle's lease is not this one's to end.
        Ok(())
    }

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        let state = self.lock()?;
        let now = self.clock.now();
        Ok(state
            .leases
            .get(&node)
            .filter(|lease| lease.is_live_at(now))
            .cloned())
    }

    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError> {
        let mut state = self.lock()?;
        let claim = lease.claim();
        state.require_live_claim(&claim, self.clock.now())?;
        let expires_at = state
            .leases
            .get(&lease.node)
            .map_or(lease.expires_at, |held| held.expires_at);
        state.members.insert(lease.node, (claim.clone(), address));
        Ok(member(&claim, address, expires_at))
    }

    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        let state = self.lock()?;
        let now = self.clock.now();
        Ok(state
            .members
            .values()
            .filter(|(claim, _)| &claim.mesh == mesh && claim_is_live(&state.leases, claim, now))
            .filter_map(|(claim, address)| {
                let lease = state.leases.get(&claim.owner)?;
                Some(member(claim, *address, lease.expires_at))
            })
            .collect())
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

fn member(claim: &OwnerClaim, address: SocketAddr, expires_at: Instant) -> Member {
    Member {
        node: claim.owner,
        node_generation: claim.node_generation,
        lease: claim.lease,
        mesh: claim.mesh.clone(),
        address,
        expires_at,
    }
}

#[cfg(test)]
mod tests {
    //! The scenario tests of the store's semantics run against every store
    //! from `tests/store.rs`; this model check stays here because it needs
    //! virtual time (it advances the clock by seconds at will).

    use proptest::prelude::*;

    use super::*;
    use crate::store::ManualClock;

    const TERM: Duration = Duration::from_secs(10);

    fn store() -> (EmbeddedStore<ManualClock>, ManualClock) {
        let clock = ManualClock::new(Instant::ZERO);
        (EmbeddedStore::new(clock.clone(), TERM), clock)
    }

    fn mesh() -> MeshName {
        MeshName::new("game").unwrap()
    }

    fn actor(name: &str) -> ActorId {
        ActorId::new(name).unwrap()
    }

    fn lease(store: &(impl LocationStore + ?Sized), node: u64, generation: u64) -> OwnerLease {
        store
            .acquire_lease(NodeRid(node), NodeGeneration(generation), &mesh())
            .unwrap()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Create {
            actor: usize,
            node: usize,
        },
        Cas {
            actor: usize,
            node: usize,
            stale: bool,
            aborted: bool,
        },
        Abort {
            actor: usize,
        },
        Remove {
            actor: usize,
            stale: bool,
        },
        Advance {
            secs: u64,
        },
        Restart {
            node: usize,
        },
        Release {
            node: usize,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize, 0..3usize).prop_map(|(actor, node)| Op::Create { actor, node }),
            4 => (0..3usize, 0..3usize, any::<bool>(), any::<bool>())
                .prop_map(|(actor, node, stale, aborted)| Op::Cas { actor, node, stale, aborted }),
            2 => (0..3usize).prop_map(|actor| Op::Abort { actor }),
            2 => (0..3usize, any::<bool>()).prop_map(|(actor, stale)| Op::Remove { actor, stale }),
            1 => (1..12u64).prop_map(|secs| Op::Advance { secs }),
            1 => (0..3usize).prop_map(|node| Op::Restart { node }),
            1 => (0..3usize).prop_map(|node| Op::Release { node }),
        ]
    }

    /// What the test has seen of one ActorId.
    #[derive(Default)]
    struct Seen {
        object: ObjectGeneration,
        authority: AuthorityOwnerGeneration,
        /// The latest version the test made current.
        last: Option<RowVersion>,
        /// A version that was current once and never will be again.
        stale: Option<RowVersion>,
        /// A relocation aborted at the current version.
        aborted: Option<RelocationId>,
    }

    impl Seen {
        /// `version` is now current; whatever was current before is stale.
        fn supersede(&mut self, version: Option<RowVersion>) {
            if let Some(last) = self.last {
                self.stale = Some(last);
            }
            self.last = version;
            self.aborted = None;
        }
    }

    proptest! {
        #[test]
        fn generations_strictly_increase_per_actor(ops in prop::collection::vec(op(), 1..80)) {
            let (store, clock) = store();
            let actors = [actor("a"), actor("b"), actor("c")];
            let mut node_generations = [1u64, 1, 1];
            let mut leases: Vec<Option<OwnerLease>> = (0..3)
                .map(|n| Some(lease(&store, n as u64, 1)))
                .collect();
            // Each node's newest lease generation, whether live or not.
            let mut lease_generations: Vec<OwnerLeaseGeneration> =
                leases.iter().flatten().map(|l| l.generation).collect();
            let mut seen: Vec<Seen> = (0..3).map(|_| Seen::default()).collect();
            let mut relocations = 0u64;

            for op in ops {
                // Owners renew before every step, as a healthy node would;
                // a lease that lapsed during an `Advance` stays lapsed.
                for held in leases.iter_mut() {
                    *held = held.as_ref().and_then(|l| store.renew_lease(l).ok());
                }
                match op {
                    Op::Create { actor, node } => {
                        let Some(owner) = &leases[node] else { continue };
                        let s = &mut seen[actor];
                        match store.create(&actors[actor], &owner.claim()).unwrap() {
                            Created::New(row) => {
                                prop_assert!(row.object > s.object);
                                prop_assert!(row.location.authority > s.authority);
                                s.supersede(Some(row.version()));
                                s.object = row.object;
                                s.authority = row.location.authority;
                            }
                            Created::Existing(row) => {
                                prop_assert_eq!(row.object, s.object);
                                prop_assert_eq!(row.location.authority, s.authority);
                            }
                        }
                    }
                    Op::Cas { actor, node, stale, aborted } => {
                        let Some(owner) = &leases[node] else { continue };
                        let Some(current) = store.lookup(&actors[actor]).unwrap() else { continue };
                        let s = &mut seen[actor];
                        let expected = match (stale, s.stale) {
                            (true, Some(old)) => old,
                            _ => current.version(),
                        };
                        relocations += 1;
                        let (relocation, was_aborted) = match (aborted, s.aborted) {
                            (true, Some(old)) => (old, true),
                            _ => (RelocationId { coordinator: current.location.owner, sequence: relocations }, false),
                        };
                        match store.compare_and_set(&actors[actor], expected, relocation, &owner.claim()).unwrap() {
                            CasOutcome::Swapped(row) => {
                                prop_assert_eq!(expected, current.version());
                                prop_assert!(!was_aborted);
                                prop_assert_eq!(row.object, s.object);
                                prop_assert!(row.location.authority > s.authority);
                                s.supersede(Some(row.version()));
                                s.authority = row.location.authority;
                            }
                            CasOutcome::Conflict { current: now } => {
                                prop_assert_ne!(expected, current.version());
                                prop_assert_eq!(now, current);
                            }
                            CasOutcome::Absent => prop_assert!(false, "the row was live"),
                            CasOutcome::RelocationAborted => {
                                prop_assert_eq!(expected, current.version());
                                prop_assert!(was_aborted);
                                prop_assert_eq!(store.lookup(&actors[actor]).unwrap(), Some(current));
                            }
                        }
                    }
                    Op::Abort { actor } => {
                        let Some(current) = store.lookup(&actors[actor]).unwrap() else { continue };
                        relocations += 1;
                        let relocation = RelocationId { coordinator: current.location.owner, sequence: relocations };
                        prop_assert_eq!(
                            store.abort_relocation(&actors[actor], current.version(), relocation).unwrap(),
                            AbortOutcome::Aborted
                        );
                        prop_assert_eq!(store.lookup(&actors[actor]).unwrap(), Some(current));
                        seen[actor].aborted = Some(relocation);
                    }
                    Op::Remove { actor, stale } => {
                        let Some(current) = store.lookup(&actors[actor]).unwrap() else { continue };
                        let s = &mut seen[actor];
                        let expected = match (stale, s.stale) {
                            (true, Some(old)) => old,
                            _ => current.version(),
                        };
                        match store.remove(&actors[actor], expected).unwrap() {
                            RemoveOutcome::Removed => {
                                prop_assert_eq!(expected, current.version());
                                s.supersede(None);
                            }
                            RemoveOutcome::Conflict { current: now } => {
                                prop_assert_ne!(expected, current.version());
                                prop_assert_eq!(now, current);
                            }
                            RemoveOutcome::Absent => prop_assert!(false, "the row was live"),
                        }
                    }
                    Op::Advance { secs } => clock.advance(Duration::from_secs(secs)),
                    Op::Restart { node } => {
                        node_generations[node] += 1;
                        let generation = NodeGeneration(node_generations[node]);
                        match store.acquire_lease(NodeRid(node as u64), generation, &mesh()) {
                            Ok(new) => {
                                prop_assert!(new.generation > lease_generations[node]);
                                lease_generations[node] = new.generation;
                                leases[node] = Some(new);
                            }
                            Err(StoreError::LeaseHeld { .. }) => {
                                prop_assert!(leases[node].is_some(), "only a live lease is held");
                            }
                            Err(other) => prop_assert!(false, "unexpected {other:?}"),
                        }
                    }
                    Op::Release { node } => {
                        // A clean stop: the lease ends now, and with it every
                        // row it owns (the next create goes past their
                        // generations, checked by `Create`).
                        let Some(held) = leases[node].take() else { continue };
                        store.release_lease(&held).unwrap();
                        prop_assert_eq!(store.lease(held.node).unwrap(), None);
                        for a in &actors {
                            let row = store.lookup(a).unwrap();
                            prop_assert!(row.map_or(true, |r| r.location.owner != held.node));
                        }
                    }
                }
            }
        }
    }
}
