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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{
    AbortOutcome, CasOutcome, Clock, Created, LocationRow, LocationStore, MonotonicClock,
    OwnerClaim, OwnerLease, RemoveOutcome, RowVersion, StoreError,
};
use crate::core::time::Instant;
use crate::ids::{
    ActorId, ActorLocation, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId,
};

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
        let State { actors, leases } = &mut *state;
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
        let State { actors, leases } = &mut *state;
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
        let State { actors, leases } = &mut *state;
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
        let State { actors, leases } = &mut *state;
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

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        let state = self.lock()?;
        let now = self.clock.now();
        Ok(state
            .leases
            .get(&node)
            .filter(|lease| lease.is_live_at(now))
            .cloned())
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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

    fn relocation(sequence: u64) -> RelocationId {
        RelocationId {
            coordinator: NodeRid(1),
            sequence,
        }
    }

    fn lease(store: &(impl LocationStore + ?Sized), node: u64, generation: u64) -> OwnerLease {
        store
            .acquire_lease(NodeRid(node), NodeGeneration(generation), &mesh())
            .unwrap()
    }

    #[test]
    fn create_if_absent_returns_the_winners_row_to_a_second_creator() {
        let (store, _) = store();
        let a = lease(&store, 1, 1);
        let b = lease(&store, 2, 1);
        let player = actor("player-1");

        let Created::New(first) = store.create(&player, &a.claim()).unwrap() else {
            panic!("the first creator creates");
        };
        assert_eq!(first.object, ObjectGeneration(1));
        assert_eq!(first.location.owner, NodeRid(1));
        assert_eq!(first.location.mesh, mesh());
        assert_eq!(first.location.node_generation, NodeGeneration(1));
        assert_eq!(first.location.lease, a.generation);

        assert_eq!(
            store.create(&player, &b.claim()).unwrap(),
            Created::Existing(first.clone())
        );
        assert_eq!(store.lookup(&player).unwrap(), Some(first.clone()));
        assert_eq!(first.actor_ref().generation, first.object);
        assert_eq!(store.lookup(&actor("nobody")).unwrap(), None);
    }

    #[test]
    fn cas_with_the_current_version_moves_authority_and_bumps_its_generation() {
        let (store, _) = store();
        let source = lease(&store, 1, 1);
        let target = lease(&store, 2, 7);
        let player = actor("player-1");
        let before = store.create(&player, &source.claim()).unwrap().into_row();

        let CasOutcome::Swapped(after) = store
            .compare_and_set(&player, before.version(), relocation(1), &target.claim())
            .unwrap()
        else {
            panic!("the CAS with the current version succeeds");
        };
        assert_eq!(
            after.object, before.object,
            "relocation keeps the incarnation"
        );
        assert!(after.location.authority > before.location.authority);
        assert_eq!(after.location.owner, NodeRid(2));
        assert_eq!(after.location.node_generation, NodeGeneration(7));
        assert_eq!(after.location.lease, target.generation);
        assert_eq!(store.lookup(&player).unwrap(), Some(after));
    }

    #[test]
    fn cas_with_a_stale_owner_or_generation_fails_with_the_current_row() {
        let (store, _) = store();
        let source = lease(&store, 1, 1);
        let target = lease(&store, 2, 1);
        let player = actor("player-1");
        let first = store.create(&player, &source.claim()).unwrap().into_row();
        let CasOutcome::Swapped(moved) = store
            .compare_and_set(&player, first.version(), relocation(1), &target.claim())
            .unwrap()
        else {
            panic!("first CAS succeeds");
        };

        // The old version again: stale generation and stale owner.
        assert_eq!(
            store
                .compare_and_set(&player, first.version(), relocation(1), &source.claim())
                .unwrap(),
            CasOutcome::Conflict {
                current: moved.clone()
            }
        );
        // The current generation with the wrong owner.
        let wrong_owner = RowVersion {
            owner: NodeRid(1),
            ..moved.version()
        };
        assert_eq!(
            store
                .compare_and_set(&player, wrong_owner, relocation(1), &source.claim())
                .unwrap(),
            CasOutcome::Conflict {
                current: moved.clone()
            }
        );
        assert_eq!(
            store.remove(&player, first.version()).unwrap(),
            RemoveOutcome::Conflict {
                current: moved.clone()
            }
        );
        assert_eq!(store.lookup(&player).unwrap(), Some(moved));
        assert_eq!(
            store
                .compare_and_set(
                    &actor("nobody"),
                    first.version(),
                    relocation(1),
                    &source.claim()
                )
                .unwrap(),
            CasOutcome::Absent
        );
    }

    #[test]
    fn a_durable_abort_makes_that_relocations_cas_fail_and_keeps_the_row() {
        let (store, _) = store();
        let source = lease(&store, 1, 1);
        let target = lease(&store, 2, 1);
        let player = actor("player-1");
        let before = store.create(&player, &source.claim()).unwrap().into_row();

        assert_eq!(
            store
                .abort_relocation(&player, before.version(), relocation(2))
                .unwrap(),
            AbortOutcome::Aborted
        );
        assert_eq!(
            store.lookup(&player).unwrap(),
            Some(before.clone()),
            "an abort keeps the owner and every generation"
        );
        // The slow target's CAS for the aborted relocation, and for an
        // earlier one of the same coordinator, fail.
        for late in [relocation(2), relocation(1)] {
            assert_eq!(
                store
                    .compare_and_set(&player, before.version(), late, &target.claim())
                    .unwrap(),
                CasOutcome::RelocationAborted
            );
        }
        // A repeated abort, or a late one of an earlier relocation, changes
        // nothing.
        for again in [relocation(2), relocation(1)] {
            assert_eq!(
                store
                    .abort_relocation(&player, before.version(), again)
                    .unwrap(),
                AbortOutcome::Aborted
            );
        }
        assert_eq!(
            store
                .compare_and_set(&player, before.version(), relocation(2), &target.claim())
                .unwrap(),
            CasOutcome::RelocationAborted
        );
        assert_eq!(store.lookup(&player).unwrap(), Some(before.clone()));

        // The next relocation of the same coordinator is not aborted.
        let CasOutcome::Swapped(moved) = store
            .compare_and_set(&player, before.version(), relocation(3), &target.claim())
            .unwrap()
        else {
            panic!("a later relocation's CAS succeeds");
        };
        assert_eq!(moved.location.owner, NodeRid(2));
        assert_eq!(moved.object, before.object);
    }

    #[test]
    fn an_abort_is_per_coordinator_and_cleared_by_a_new_version() {
        let (store, _) = store();
        let source = lease(&store, 1, 1);
        let target = lease(&store, 2, 1);
        let player = actor("player-1");
        let first = store.create(&player, &source.claim()).unwrap().into_row();
        store
            .abort_relocation(&player, first.version(), relocation(5))
            .unwrap();
        let other_coordinator = RelocationId {
            coordinator: NodeRid(9),
            sequence: 1,
        };
        let CasOutcome::Swapped(moved) = store
            .compare_and_set(&player, first.version(), other_coordinator, &target.claim())
            .unwrap()
        else {
            panic!("another coordinator's relocation was not aborted");
        };
        // The abort belonged to the old version: at the new one, the same
        // relocation id is not aborted (the version check already fences the
        // old relocation's CAS).
        assert_eq!(
            store
                .compare_and_set(&player, first.version(), relocation(5), &source.claim())
                .unwrap(),
            CasOutcome::Conflict {
                current: moved.clone()
            }
        );
        let CasOutcome::Swapped(back) = store
            .compare_and_set(&player, moved.version(), relocation(1), &source.claim())
            .unwrap()
        else {
            panic!("no abort is recorded at the new version");
        };
        assert_eq!(back.location.owner, NodeRid(1));
    }

    #[test]
    fn an_abort_after_the_targets_cas_reports_the_moved_row() {
        let (store, _) = store();
        let source = lease(&store, 1, 1);
        let target = lease(&store, 2, 1);
        let player = actor("player-1");
        let before = store.create(&player, &source.claim()).unwrap().into_row();
        let CasOutcome::Swapped(moved) = store
            .compare_and_set(&player, before.version(), relocation(1), &target.claim())
            .unwrap()
        else {
            panic!("the target's CAS wins the race");
        };
        // The coordinator learns the relocation committed: it must not
        // reopen the source.
        assert_eq!(
            store
                .abort_relocation(&player, before.version(), relocation(1))
                .unwrap(),
            AbortOutcome::Conflict {
                current: moved.clone()
            }
        );
        assert_eq!(store.lookup(&player).unwrap(), Some(moved));
        assert_eq!(
            store
                .abort_relocation(&actor("nobody"), before.version(), relocation(1))
                .unwrap(),
            AbortOutcome::Absent
        );
    }

    #[test]
    fn remove_then_create_gives_strictly_greater_generations() {
        let (store, _) = store();
        let owner = lease(&store, 1, 1);
        let player = actor("player-1");
        let first = store.create(&player, &owner.claim()).unwrap().into_row();

        assert_eq!(
            store.remove(&player, first.version()).unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.lookup(&player).unwrap(), None);
        assert_eq!(
            store.remove(&player, first.version()).unwrap(),
            RemoveOutcome::Absent
        );

        let Created::New(second) = store.create(&player, &owner.claim()).unwrap() else {
            panic!("a removed actor is created anew");
        };
        assert!(second.object > first.object);
        assert!(second.location.authority > first.location.authority);
        // The old version cannot touch the new incarnation.
        assert_eq!(
            store.remove(&player, first.version()).unwrap(),
            RemoveOutcome::Conflict { current: second }
        );
    }

    #[test]
    fn lease_generation_is_kept_by_renewal_and_new_per_node_generation() {
        let (store, clock) = store();
        let first = lease(&store, 1, 1);
        assert_eq!(first.expires_at, Instant::ZERO + TERM);

        clock.advance(Duration::from_secs(4));
        let renewed = store.renew_lease(&first).unwrap();
        assert_eq!(renewed.generation, first.generation);
        assert_eq!(renewed.expires_at, Instant::from_millis(4_000) + TERM);
        // A retried acquire by the same lifecycle is a renewal, too.
        assert_eq!(lease(&store, 1, 1).generation, first.generation);
        assert_eq!(
            store.lease(NodeRid(1)).unwrap().map(|l| l.generation),
            Some(first.generation)
        );

        // A restart (new NodeGeneration) waits out the live lease, then gets
        // a new generation.
        let held = store.acquire_lease(NodeRid(1), NodeGeneration(2), &mesh());
        assert!(matches!(
            held,
            Err(StoreError::LeaseHeld {
                holder: NodeGeneration(1),
                ..
            })
        ));
        clock.advance(TERM);
        let restarted = lease(&store, 1, 2);
        assert!(restarted.generation > first.generation);
        assert_eq!(restarted.node_generation, NodeGeneration(2));

        // Other nodes count their own lifecycles.
        assert_eq!(lease(&store, 2, 9).generation, OwnerLeaseGeneration(1));
        // A NodeGeneration is never reused or gone back to.
        assert_eq!(
            store.acquire_lease(NodeRid(1), NodeGeneration(1), &mesh()),
            Err(StoreError::StaleNodeGeneration {
                node: NodeRid(1),
                offered: NodeGeneration(1),
                latest: NodeGeneration(2),
            })
        );
    }

    #[test]
    fn renewal_after_expiry_fails_and_the_lapsed_owners_rows_end() {
        let (store, clock) = store();
        let owner = lease(&store, 1, 1);
        let player = actor("player-1");
        let first = store.create(&player, &owner.claim()).unwrap().into_row();

        clock.advance(TERM);
        assert!(!owner.is_live_at(clock.now()));
        assert_eq!(
            store.renew_lease(&owner),
            Err(StoreError::LeaseExpired { node: NodeRid(1) })
        );
        // Re-acquiring cannot revive the lapsed lifecycle.
        assert_eq!(
            store.acquire_lease(NodeRid(1), NodeGeneration(1), &mesh()),
            Err(StoreError::LeaseExpired { node: NodeRid(1) })
        );
        assert_eq!(store.lease(NodeRid(1)).unwrap(), None);
        // The lapsed owner can neither own nor hand over rows.
        assert_eq!(
            store.create(&actor("player-2"), &owner.claim()),
            Err(StoreError::LeaseExpired { node: NodeRid(1) })
        );
        // Its incarnation ended with the lease: the next creator gets a new one.
        assert_eq!(store.lookup(&player).unwrap(), None);
        let other = lease(&store, 2, 1);
        assert_eq!(
            store
                .compare_and_set(&player, first.version(), relocation(1), &other.claim())
                .unwrap(),
            CasOutcome::Absent
        );
        let Created::New(second) = store.create(&player, &other.claim()).unwrap() else {
            panic!("a lapsed owner's actor is created anew");
        };
        assert!(second.object > first.object);
        assert!(second.location.authority > first.location.authority);
    }

    #[test]
    fn a_claim_that_is_not_the_live_lease_is_refused() {
        let (store, _) = store();
        let owner = lease(&store, 1, 1);
        let forged = OwnerClaim {
            lease: owner.generation.next(),
            ..owner.claim()
        };
        assert_eq!(
            store.create(&actor("player-1"), &forged),
            Err(StoreError::LeaseExpired { node: NodeRid(1) })
        );
        let unleased = OwnerClaim {
            owner: NodeRid(3),
            ..owner.claim()
        };
        assert_eq!(
            store.create(&actor("player-1"), &unleased),
            Err(StoreError::LeaseExpired { node: NodeRid(3) })
        );
    }

    #[test]
    fn concurrent_creators_agree_on_one_incarnation() {
        let clock = ManualClock::new(Instant::ZERO);
        let store: Arc<dyn LocationStore> = Arc::new(EmbeddedStore::new(clock, TERM));
        let claims: Vec<OwnerClaim> = (1..=8).map(|n| lease(&*store, n, 1).claim()).collect();
        let player = actor("contended");
        let rows: Vec<Created> = std::thread::scope(|scope| {
            let handles: Vec<_> = claims
                .iter()
                .map(|claim| {
                    let store = Arc::clone(&store);
                    let player = player.clone();
                    scope.spawn(move || store.create(&player, claim).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners = rows.iter().filter(|c| matches!(c, Created::New(_))).count();
        assert_eq!(winners, 1);
        assert!(rows.iter().all(|c| c.row() == rows[0].row()));
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
                        let previous = leases[node].as_ref().map(|l| l.generation);
                        match store.acquire_lease(NodeRid(node as u64), generation, &mesh()) {
                            Ok(new) => {
                                prop_assert!(previous.map_or(true, |p| new.generation > p));
                                leases[node] = Some(new);
                            }
                            Err(StoreError::LeaseHeld { .. }) => {}
                            Err(other) => prop_assert!(false, "unexpected {other:?}"),
                        }
                    }
                }
            }
        }
    }
}
