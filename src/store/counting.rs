//! A [`LocationStore`] wrapper that counts calls per operation, so that tests
//! can prove the store is never queried on the bind, relay, push or
//! disconnect paths (§1 table "The Location Store isn't re-queried when
//! relaying", §5, §7; CONTRACT R1, X10).
//!
//! Every call is counted when it is made, whether it then succeeds or fails:
//! the contract forbids asking, not only getting an answer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{
    AbortOutcome, CasOutcome, Created, LocationRow, LocationStore, Member, OwnerClaim, OwnerLease,
    RemoveOutcome, RowVersion, StoreError,
};
use crate::ids::{ActorId, MeshName, NodeGeneration, NodeRid, RelocationId};
use crate::time::Instant;

/// Wraps a store and counts every call to it, per operation.
#[derive(Debug)]
pub struct CountingStore<S: LocationStore> {
    inner: S,
    lookup: AtomicU64,
    create: AtomicU64,
    compare_and_set: AtomicU64,
    abort_relocation: AtomicU64,
    remove: AtomicU64,
    acquire_lease: AtomicU64,
    renew_lease: AtomicU64,
    release_lease: AtomicU64,
    lease: AtomicU64,
    register_member: AtomicU64,
    members: AtomicU64,
}

/// How many times each store operation was called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StoreCounts {
    /// Calls to [`LocationStore::lookup`].
    pub lookup: u64,
    /// Calls to [`LocationStore::create`].
    pub create: u64,
    /// Calls to [`LocationStore::compare_and_set`].
    pub compare_and_set: u64,
    /// Calls to [`LocationStore::abort_relocation`].
    pub abort_relocation: u64,
    /// Calls to [`LocationStore::remove`].
    pub remove: u64,
    /// Calls to [`LocationStore::acquire_lease`].
    pub acquire_lease: u64,
    /// Calls to [`LocationStore::renew_lease`].
    pub renew_lease: u64,
    /// Calls to [`LocationStore::release_lease`].
    pub release_lease: u64,
    /// Calls to [`LocationStore::lease`].
    pub lease: u64,
    /// Calls to [`LocationStore::register_member`].
    pub register_member: u64,
    /// Calls to [`LocationStore::members`].
    pub members: u64,
}

impl StoreCounts {
    /// Calls that read or write Actor rows: what bind, relay, push and
    /// disconnect must never add to. Lease upkeep and membership run on
    /// their own schedule and are left out, so a test can assert this stays
    /// unchanged while leases renew in the background.
    pub fn row_operations(&self) -> u64 {
        self.lookup + self.create + self.compare_and_set + self.abort_relocation + self.remove
    }
}

impl<S: LocationStore> CountingStore<S> {
    /// Wraps `inner`, with every count at zero.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            lookup: AtomicU64::new(0),
            create: AtomicU64::new(0),
            compare_and_set: AtomicU64::new(0),
            abort_relocation: AtomicU64::new(0),
            remove: AtomicU64::new(0),
            acquire_lease: AtomicU64::new(0),
            renew_lease: AtomicU64::new(0),
            release_lease: AtomicU64::new(0),
            lease: AtomicU64::new(0),
            register_member: AtomicU64::new(0),
            members: AtomicU64::new(0),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The counts so far. Each count is read on its own; a snapshot taken
    /// while other threads call the store may mix moments, which is enough
    /// to compare before and after a quiescent step.
    pub fn counts(&self) -> StoreCounts {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StoreCounts {
            lookup: read(&self.lookup),
            create: read(&self.create),
            compare_and_set: read(&self.compare_and_set),
            abort_relocation: read(&self.abort_relocation),
            remove: read(&self.remove),
            acquire_lease: read(&self.acquire_lease),
            renew_lease: read(&self.renew_lease),
            release_lease: read(&self.release_lease),
            lease: read(&self.lease),
            register_member: read(&self.register_member),
            members: read(&self.members),
        }
    }
}

/// Counts one call. Relaxed is enough: the counts are independent tallies,
/// and a test reads them after joining or synchronising with the callers.
fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl<S: LocationStore> LocationStore for CountingStore<S> {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        count(&self.lookup);
        self.inner.lookup(actor)
    }

    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        count(&self.create);
        self.inner.create(actor, owner)
    }

    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        count(&self.compare_and_set);
        self.inner
            .compare_and_set(actor, expected, relocation, new_owner)
    }

    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        count(&self.abort_relocation);
        self.inner.abort_relocation(actor, expected, relocation)
    }

    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        count(&self.remove);
        self.inner.remove(actor, expected)
    }

    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        count(&self.acquire_lease);
        self.inner.acquire_lease(node, node_generation, mesh)
    }

    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        count(&self.renew_lease);
        self.inner.renew_lease(lease)
    }

    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        count(&self.release_lease);
        self.inner.release_lease(lease)
    }

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        count(&self.lease);
        self.inner.lease(node)
    }

    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError> {
        count(&self.register_member);
        self.inner.register_member(lease, address)
    }

    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        count(&self.members);
        self.inner.members(mesh)
    }

    /// Not counted: reading the store's clock asks the store nothing.
    fn now(&self) -> Instant {
        self.inner.now()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{EmbeddedStore, ManualClock};

    #[test]
    fn every_call_is_counted_per_operation_even_when_it_fails() {
        let clock = ManualClock::new(Instant::ZERO);
        let store = CountingStore::new(EmbeddedStore::new(clock.clone(), Duration::from_secs(10)));
        assert_eq!(store.counts(), StoreCounts::default());

        let mesh = MeshName::new("game").unwrap();
        let actor = ActorId::new("player-1").unwrap();
        let lease = store
            .acquire_lease(NodeRid(1), NodeGeneration(1), &mesh)
            .unwrap();
        let row = store.create(&actor, &lease.claim()).unwrap().into_row();
        store.lookup(&actor).unwrap();
        store.lookup(&actor).unwrap();
        let relocation = RelocationId {
            coordinator: NodeRid(1),
            sequence: 1,
        };
        store
            .abort_relocation(&actor, row.version(), relocation)
            .unwrap();
        store
            .compare_and_set(&actor, row.version(), relocation, &lease.claim())
            .unwrap();
        store.remove(&actor, row.version()).unwrap();
        store.lease(NodeRid(1)).unwrap();
        let address = SocketAddr::from(([127, 0, 0, 1], 7000));
        store.register_member(&lease, address).unwrap();
        store.members(&mesh).unwrap();
        clock.advance(Duration::from_secs(10));
        assert!(store.renew_lease(&lease).is_err());
        // A release of the lapsed lease is Ok and changes nothing, but is
        // counted like every other call.
        store.release_lease(&lease).unwrap();

        let counts = store.counts();
        assert_eq!(
            counts,
            StoreCounts {
                lookup: 2,
                create: 1,
                compare_and_set: 1,
                abort_relocation: 1,
                remove: 1,
                acquire_lease: 1,
                renew_lease: 1,
                release_lease: 1,
                lease: 1,
                register_member: 1,
                members: 1,
            }
        );
        assert_eq!(counts.row_operations(), 6);
        assert!(store.inner().lookup(&actor).unwrap().is_none());
        assert_eq!(store.counts(), counts, "the inner store is not counted");
    }
}
