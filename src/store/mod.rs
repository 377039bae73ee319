//! The Location Store (§1, §3, §4, §5, §8.1): where an Actor's current owner
//! is recorded so that several nodes can agree on it, and the owner leases
//! that bound how long a stored route may be used.
//!
//! # Who calls it, and from where
//!
//! The store is the authority over "which node owns this ActorId, in which
//! incarnation, under which authority owner generation" (§1). It is read and
//! written by the runtime when it creates or looks up an Actor (§1 step 2), by
//! the relocation target when it takes over an Actor (§8.1: "the target
//! relocation runtime performs the Location Store CAS using the expected
//! source owner and generation") or its coordinator records a durable abort
//! ([`LocationStore::abort_relocation`]), by each node to hold its owner
//! lease, and by nodes to register in and find the mesh's membership
//! ([`LocationStore::members`], live exactly while each member's lease is).
//!
//! It is **never** called on the bind, relay, push or disconnect paths: a
//! binding stores the route verified at bind time and uses it for every
//! message (§1 table, §5 "the Location Store isn't queried again on every
//! message send", §7). The trait is synchronous, and no shard thread ever
//! calls it: the runtime runs each operation on a store worker thread and
//! hands the answer back to the shard (docs/threading.md "Never block a
//! shard"); in debug builds a store call on a shard thread panics
//! (`store::guard`). [`CountingStore`] lets tests prove that bind, relay, push
//! and disconnect never call it (CONTRACT R1, X10).
//!
//! # Generations the store keeps
//!
//! Per ActorId, both strictly increasing over the whole life of the id,
//! across destroy and re-create:
//! - [`ObjectGeneration`]: new for every incarnation, kept by relocation (§1);
//!   a later incarnation always gets a greater one, so a binding to an earlier
//!   incarnation can never resolve to it (§4).
//! - [`AuthorityOwnerGeneration`]: bumped by every compare-and-set and by every
//!   new incarnation (§5); it is the row's version, so a CAS that expects an
//!   earlier owner fails instead of overwriting a later one (§8.1).
//!
//! Per NodeRid: an [`OwnerLeaseGeneration`] for each process lifecycle
//! ([`NodeGeneration`]) that acquires a lease; renewal keeps it (§5
//! "distinguishes the current owner host process lifecycle"), and neither
//! a lapse nor a release ([`LocationStore::release_lease`]) forgets it.
//!
//! # Leases and liveness
//!
//! A row is live only while its owner's lease, of the generation the row
//! names, is live. When the lease lapses the row's incarnation ends: lookups
//! no longer return it and the next create makes a new incarnation (greater
//! generations, issue 6 "node failure"). The owner fences itself at
//! [`OwnerLease::expires_at`] (§5: "Even if the Location Store is temporarily
//! unavailable, this lease or deadline isn't extended"); a store outage makes
//! renewal fail, never succeed late. A clean stop ends its lease early with
//! [`LocationStore::release_lease`], after removing its rows.
//!
//! docs/store.md describes the semantics in prose.

mod clock;
mod counting;
mod embedded;
mod guard;
mod redis;

pub use self::redis::{
    RedisConfigError, RedisPassword, RedisStore, RedisStoreConfig, RedisTls, CLUSTER_LEN_MAX,
};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use counting::{CountingStore, StoreCounts};
pub use embedded::EmbeddedStore;
pub(crate) use guard::{assert_off_shard, mark_shard_thread};

use std::net::SocketAddr;

use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, RelocationId,
};
// The time a store counts in (a lease's expiry, `LocationStore::now`) is
// public here: a store of the embedder's own names it. It is defined below
// the store and the core, in the internal `time` layer, because both use it.
pub use crate::time::Instant;

/// The Location Store: the shared authority over Actor ownership and owner
/// leases (§1, §5, §8.1).
///
/// Every operation is atomic with respect to every other operation on the
/// same store, across all processes that share it. Implementations: the
/// [`EmbeddedStore`] for one process; the [`RedisStore`] for many.
/// Never called on the bind, relay, push or disconnect paths (module doc).
pub trait LocationStore: Send + Sync {
    /// The live row for `actor`, if there is one. A row whose owner lease has
    /// lapsed is not returned: that incarnation ended with the lease (§5).
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError>;

    /// Create-if-absent (§1 step 2). When no live row exists, `owner` becomes
    /// the owner of a new incarnation with an ObjectGeneration and an
    /// AuthorityOwnerGeneration greater than any this ActorId had before, and
    /// the result is [`Created::New`]. When a live row exists it is returned
    /// as [`Created::Existing`]: a racing creator binds the incarnation that
    /// won instead of failing.
    ///
    /// Fails with [`StoreError::LeaseExpired`] when `owner` does not name the
    /// live lease of its node: only a leased owner may own a row.
    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError>;

    /// The relocation target's CAS (§8.1 "CAS owner to target if source
    /// fence still matches"): moves authority to `new_owner` if the live
    /// row's version equals `expected` **and** `relocation` was not recorded
    /// aborted by [`abort_relocation`](Self::abort_relocation). On success
    /// the AuthorityOwnerGeneration is bumped, the ObjectGeneration kept
    /// (relocation keeps the incarnation, §1) and the row's abort record
    /// cleared (it belonged to the old version).
    ///
    /// The version is checked first: a stale version is
    /// [`CasOutcome::Conflict`] even if the relocation was also aborted.
    ///
    /// Fails with [`StoreError::LeaseExpired`] when `new_owner` does not name
    /// the live lease of its node.
    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError>;

    /// The coordinator's durable abort (§8.1 "first confirms a durable
    /// abort"): if the live row's version equals `expected`, the row keeps
    /// its owner and generations but remembers that `relocation` — and every
    /// earlier relocation of the same coordinator at this version — is
    /// aborted, so a slow target's later [`compare_and_set`] for it returns
    /// [`CasOutcome::RelocationAborted`]. Idempotent.
    ///
    /// "Earlier" is by [`RelocationId::sequence`]: a row at one version is
    /// owned by one process lifecycle, whose coordinator runs one relocation
    /// of an Actor at a time and numbers them in increasing order, so one
    /// remembered id per row covers them all (bounded memory).
    ///
    /// [`AbortOutcome::Conflict`] means authority already moved (the target's
    /// CAS won the race): the relocation committed and the caller must not
    /// reopen the source.
    ///
    /// [`compare_and_set`]: Self::compare_and_set
    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError>;

    /// Destroys the incarnation if the live row's version equals `expected`.
    /// The store keeps the id's last generations, so the next create gets
    /// greater ones and no binding of this incarnation becomes valid again
    /// (§1, §4).
    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError>;

    /// Acquires the owner lease of `node` for the process lifecycle
    /// `node_generation`, reached through `mesh`.
    ///
    /// A new lifecycle gets a new [`OwnerLeaseGeneration`], greater than any
    /// the node held before. Acquiring again from the same lifecycle while its
    /// lease is live renews it (a retry after a lost reply is harmless).
    ///
    /// Fails with [`StoreError::LeaseHeld`] while another lifecycle of the
    /// same node holds a live lease (two processes must never both believe
    /// they own the node's actors; a crashed one's lease lapses within one
    /// lease term), with [`StoreError::StaleNodeGeneration`] when
    /// `node_generation` is older than one the node already used, and with
    /// [`StoreError::LeaseExpired`] when this lifecycle's lease already lapsed:
    /// a lapsed lifecycle stays dead to the mesh and must restart.
    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError>;

    /// Extends a live lease by one lease term, keeping its generation.
    ///
    /// Fails with [`StoreError::LeaseExpired`] once the lease has lapsed or
    /// was replaced: the owner must then fence itself (stop admitting relay
    /// for its actors), because its rows are no longer live.
    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError>;

    /// A clean stop gives its lease back (docs/store.md "Clean stop:
    /// releasing the lease"): the lease ends now instead of at its
    /// `expires_at`, so the node's next process lifecycle need not wait out a
    /// term before it may acquire (§5: the lease distinguishes the current
    /// owner host process lifecycle).
    ///
    /// If `lease` is the node's live lease (same NodeRid, NodeGeneration and
    /// OwnerLeaseGeneration), it ends at once and for good, as if it had
    /// lapsed (§5): [`lease`](Self::lease) returns `None`,
    /// [`members`](Self::members) no longer lists the node,
    /// [`renew_lease`](Self::renew_lease) of it, an `acquire_lease` by the
    /// same lifecycle, a registration and a claim under it fail with
    /// [`StoreError::LeaseExpired`] (a lapsed lifecycle stays dead), and the
    /// next `acquire_lease` by a newer lifecycle succeeds at once — no
    /// [`StoreError::LeaseHeld`] — with a greater OwnerLeaseGeneration. The
    /// node's latest NodeGeneration is kept, so an older one still gets
    /// [`StoreError::StaleNodeGeneration`]. The caller behaves as fenced from
    /// the call on: it owns nothing any more.
    ///
    /// Idempotent: releasing a lease that already lapsed, was released, or
    /// was replaced by a newer lifecycle's (or one the store never gave) is
    /// `Ok(())` and changes nothing; it never ends another lifecycle's lease.
    ///
    /// Rows: a row lives only while the lease it names does (§5), so a row
    /// of the released lease ends with it — in the [`EmbeddedStore`], at the
    /// release. The [`RedisStore`] caches in each row a bound until which its
    /// owner's lease is known live, and a release cannot reach rows in other
    /// hash slots: a row naming the released lease may still be taken as
    /// live, by any client, until the expiry the lease had when it was
    /// released at the latest (the moment it would have lapsed had its holder
    /// crashed instead; plus the clock skew between two Cluster primaries),
    /// never later. The same bound holds for a claim under the released lease
    /// sent through another client that remembers a bound of it (the
    /// releasing client forgets its own). The caller removes its rows at
    /// their versions *before* it releases the lease, so this window only
    /// concerns rows whose remove failed.
    ///
    /// [`StoreError::Unavailable`] leaves it unknown whether the lease ended
    /// (and, with Redis, whether the membership forgot the node): the caller
    /// may retry, or leave the lease to lapse at its `expires_at`.
    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError>;

    /// The node's current lease, if it is live.
    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError>;

    /// Registers `lease`'s node as a member of its mesh, reached at
    /// `address` (issue 6 "membership"): the node's process lifecycle is then
    /// listed by [`members`](Self::members) for exactly as long as `lease`
    /// stays live, renewals included. One entry per NodeRid: a registration
    /// by a new lifecycle replaces the old one's, which never comes back.
    ///
    /// Fails with [`StoreError::LeaseExpired`] when `lease` is not the live
    /// lease of its node: only a leased lifecycle joins the mesh.
    ///
    /// [`members`]: Self::members
    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError>;

    /// The live members of `mesh`, ordered by NodeRid: every registered node
    /// whose lease — of the lifecycle that registered — is live. A node whose
    /// lease lapsed is dead to the mesh and is not listed (docs/store.md
    /// "Membership").
    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError>;

    /// The store's clock: the frame of every [`OwnerLease::expires_at`] it
    /// returns. Reading it asks the store nothing. An owner whose renewal
    /// failed with [`StoreError::Unavailable`] keeps its lease until `now()`
    /// reaches `expires_at` and fences itself then (§5, X21): an outage
    /// neither extends the lease nor cuts it short.
    fn now(&self) -> Instant;
}

/// A node's owner lease (§5): held by one process lifecycle of the node and
/// renewed before it lapses.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerLease {
    /// The leased node.
    pub node: NodeRid,
    /// The process lifecycle that holds it.
    pub node_generation: NodeGeneration,
    /// The mesh the node's actors are reached through.
    pub mesh: MeshName,
    /// New per process lifecycle, unchanged by renewal.
    pub generation: OwnerLeaseGeneration,
    /// When the lease lapses, in the store's clock. It is never later than
    /// the moment the store itself stops treating the lease as live, so an
    /// owner that fences itself here is never late.
    pub expires_at: Instant,
}

impl OwnerLease {
    /// Whether the lease is still live at `now`: an owner that sees `false`
    /// must fence itself (§5).
    pub fn is_live_at(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// The claim that names this lease as a row's owner.
    pub fn claim(&self) -> OwnerClaim {
        OwnerClaim {
            mesh: self.mesh.clone(),
            owner: self.node,
            node_generation: self.node_generation,
            lease: self.generation,
        }
    }
}

/// A live member of a mesh (issue 6 "membership"): one process lifecycle
/// of a node, where its peers reach it, and until when it is live.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// The node.
    pub node: NodeRid,
    /// The process lifecycle that registered; a peer refuses records of any
    /// other (§5, docs/store.md "Membership").
    pub node_generation: NodeGeneration,
    /// The lease the lifecycle holds.
    pub lease: OwnerLeaseGeneration,
    /// The mesh it serves.
    pub mesh: MeshName,
    /// Where its peers connect to it.
    pub address: SocketAddr,
    /// When its lease lapses unless renewed, in the store's clock: never
    /// later than the store's own view, like [`OwnerLease::expires_at`].
    pub expires_at: Instant,
}

/// The owner a create or compare-and-set proposes: a node in one of its
/// process lifecycles under one lease. Built from the owner's lease with
/// [`OwnerLease::claim`]; the store accepts it only while that lease is live.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerClaim {
    /// The mesh the owner is reached through (§3, §4).
    pub mesh: MeshName,
    /// The owner node.
    pub owner: NodeRid,
    /// The owner's process lifecycle.
    pub node_generation: NodeGeneration,
    /// The owner's lease generation.
    pub lease: OwnerLeaseGeneration,
}

/// One Actor's row: its incarnation and where its authority lives (§4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocationRow {
    /// The Actor.
    pub actor: ActorId,
    /// The incarnation.
    pub object: ObjectGeneration,
    /// Mesh, owner NodeRid, NodeGeneration, AuthorityOwnerGeneration and
    /// OwnerLeaseGeneration: the route a bind starts from (§5).
    pub location: ActorLocation,
}

impl LocationRow {
    /// The version a compare-and-set or remove of this row expects.
    pub fn version(&self) -> RowVersion {
        RowVersion::from(&self.location)
    }

    /// The row as the Ready ActorRef a bind is given (§1 step 2, §5 "bind at
    /// the location of the ActorRef the caller submitted").
    pub fn actor_ref(&self) -> ActorRef {
        ActorRef {
            id: self.actor.clone(),
            generation: self.object,
            location: self.location.clone(),
        }
    }
}

/// What a compare-and-set or remove expects the row to be: the source owner
/// and its authority owner generation (§8.1). The authority owner generation
/// alone is unique per ActorId (it never repeats, even across incarnations);
/// the owner makes the expectation explicit in the terms §8.1 uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowVersion {
    /// The expected owner node.
    pub owner: NodeRid,
    /// The expected authority owner generation.
    pub authority: AuthorityOwnerGeneration,
}

/// The version of a row at `location`: what a remove or CAS of the
/// incarnation an ActorRef names expects.
impl From<&ActorLocation> for RowVersion {
    fn from(location: &ActorLocation) -> Self {
        RowVersion {
            owner: location.owner,
            authority: location.authority,
        }
    }
}

/// The answer to a create-if-absent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Created {
    /// This call created a new incarnation, owned by the claimant.
    New(LocationRow),
    /// A live incarnation already existed; the caller uses it.
    Existing(LocationRow),
}

impl Created {
    /// The row, whichever way it came about.
    pub fn row(&self) -> &LocationRow {
        match self {
            Created::New(row) | Created::Existing(row) => row,
        }
    }

    /// The row, by value.
    pub fn into_row(self) -> LocationRow {
        match self {
            Created::New(row) | Created::Existing(row) => row,
        }
    }
}

/// The answer to a compare-and-set. A lost race is an outcome, not an error:
/// the caller learns the current row in the same round trip.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CasOutcome {
    /// Authority moved; the new row.
    Swapped(LocationRow),
    /// The live row has another version; it is left unchanged.
    Conflict {
        /// The row as it is.
        current: LocationRow,
    },
    /// There is no live row (destroyed, or its owner lease lapsed).
    Absent,
    /// The version matched, but the coordinator recorded this relocation
    /// aborted (§8.1 durable abort); the row is left unchanged.
    RelocationAborted,
}

/// The answer to a durable relocation abort.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AbortOutcome {
    /// The row remembers the relocation as aborted; its owner and
    /// generations are unchanged.
    Aborted,
    /// The live row has another version (authority moved); nothing recorded.
    Conflict {
        /// The row as it is.
        current: LocationRow,
    },
    /// There is no live row.
    Absent,
}

/// The answer to a remove.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RemoveOutcome {
    /// The incarnation ended.
    Removed,
    /// The live row has another version; it is left unchanged.
    Conflict {
        /// The row as it is.
        current: LocationRow,
    },
    /// There is no live row.
    Absent,
}

/// Why a store operation failed. Lost races are outcomes ([`CasOutcome`],
/// [`RemoveOutcome`], [`Created::Existing`]), not errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or could not answer (connection loss,
    /// a poisoned embedded store). Retrying may succeed; nothing was assumed.
    #[error("the location store is unavailable: {0}")]
    Unavailable(String),
    /// The store answered and refused this node as configured: its
    /// credentials or TLS settings are not accepted (a missing or wrong
    /// password, a user without the permission, a certificate it does not
    /// trust). Nothing was applied, and asking again as is will not help:
    /// a start fails on it at once, where it waits for a store that does
    /// not answer (docs/operations.md "Probes"). Later, for a node that
    /// is serving, it counts as the store being unavailable.
    #[error("the location store refused this node: {0}")]
    Refused(String),
    /// The lease is not live: it lapsed, was never acquired, or belongs to
    /// another lifecycle. Its holder must fence itself (§5).
    #[error("the owner lease of node {node} is not live")]
    LeaseExpired {
        /// The node whose lease it is.
        node: NodeRid,
    },
    /// Another process lifecycle of the node holds a live lease.
    #[error("node {node} is leased by its lifecycle {holder}, which has not lapsed")]
    LeaseHeld {
        /// The node.
        node: NodeRid,
        /// The lifecycle that holds the lease.
        holder: NodeGeneration,
        /// When that lease lapses unless renewed.
        expires_at: Instant,
    },
    /// The offered NodeGeneration is older than one the node already used; a
    /// NodeGeneration is never reused (DESIGN "Decisions already made").
    #[error("node {node} offered lifecycle {offered}, older than its lifecycle {latest}")]
    StaleNodeGeneration {
        /// The node.
        node: NodeRid,
        /// The generation offered.
        offered: NodeGeneration,
        /// The newest generation the store has seen for the node.
        latest: NodeGeneration,
    },
}

impl From<StoreError> for Error {
    /// An unreachable store and a lapsed lease are `Unavailable`: the caller
    /// may try later, and no other target is tried (§12). A lease held by
    /// another lifecycle, or a reused NodeGeneration, is a startup failure:
    /// the runtime waits out a crashed predecessor's lease (at most one term)
    /// before it gives up, so if it still gets here another live process runs
    /// with the same NodeRid, which is a configuration error (§3).
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) | StoreError::Refused(_) => {
                Error::new(Reason::StoreUnavailable)
            }
            StoreError::LeaseExpired { .. } => Error::new(Reason::LeaseExpired),
            StoreError::LeaseHeld { .. } | StoreError::StaleNodeGeneration { .. } => {
                Error::new(Reason::InvalidConfiguration)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn store_errors_map_to_the_crate_error_kinds() {
        let unavailable = Error::from(StoreError::Unavailable("connection reset".into()));
        assert_eq!(unavailable.kind(), ErrorKind::Unavailable);
        assert_eq!(unavailable.reason(), Reason::StoreUnavailable);
        let lapsed = Error::from(StoreError::LeaseExpired { node: NodeRid(1) });
        assert_eq!(lapsed.reason(), Reason::LeaseExpired);
        assert_eq!(lapsed.kind(), ErrorKind::Unavailable);
        let held = Error::from(StoreError::LeaseHeld {
            node: NodeRid(1),
            holder: NodeGeneration(1),
            expires_at: Instant::ZERO,
        });
        assert_eq!(held.kind(), ErrorKind::Configuration);
        let stale = Error::from(StoreError::StaleNodeGeneration {
            node: NodeRid(1),
            offered: NodeGeneration(1),
            latest: NodeGeneration(2),
        });
        assert_eq!(stale.kind(), ErrorKind::Configuration);
    }
}
