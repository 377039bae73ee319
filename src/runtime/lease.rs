//! The owner lease's lifecycle around a process (§5; docs/store.md "Owner
//! leases", "Clean stop"): taken at start — waiting out a crashed
//! predecessor's lease rather than failing — and given back at a clean stop,
//! so a restart straight after it comes up at once.
//!
//! Both run on the embedder's thread, before the shards start and after
//! they stopped: never on a shard thread.

use std::time::Duration;

use crate::ids::{MeshName, NodeGeneration, NodeRid};
use crate::runtime::app::{StartCancel, StartError};
use crate::store::{LocationStore, OwnerLease, StoreError};

/// How long past a predecessor's expiry a start tries again: the store's
/// clock and this process's sleep are not the same clock.
const AFTER_EXPIRY: Duration = Duration::from_millis(50);

/// How far a predecessor's expiry may seem to move between two reads
/// without a renewal: the store derives it from a round trip's timing. A
/// renewal moves it by what passed since the last one, which after a
/// wait is most of a lease term.
const EXPIRY_JITTER: Duration = Duration::from_millis(250);

/// The first wait before a start tries its store again when the store did
/// not answer, doubled on each try up to [`UNAVAILABLE_RETRY_MAX`].
const UNAVAILABLE_RETRY_MIN: Duration = Duration::from_millis(250);
const UNAVAILABLE_RETRY_MAX: Duration = Duration::from_secs(4);

/// Acquires `node`'s owner lease for the lifecycle `generation`.
///
/// A lease still held by a previous lifecycle of the node (a process that
/// was killed, or paused, without giving it back) is waited out: one log
/// line says for how long, in seconds, then the start tries again once it
/// lapsed. It is not a configuration error. The holder renewing it while
/// this start waits is: then another live process runs with this NodeRid,
/// and two processes must never both own the node's Actors (§3, §5).
///
/// A store that does not answer (down, hung, unreachable) is not a
/// configuration error either: the start tries again, 250 ms later and
/// then twice as long each time up to 4 s, logging each try, until the
/// store answers (docs/operations.md "Probes"). Failing instead would turn
/// a store blip during a deploy into a crash loop whose restarts back off
/// for minutes. A try whose answer was lost may have taken the lease: the
/// next is the same lifecycle asking again, which the store answers as a
/// renewal.
///
/// `cancel` ends either wait at once with [`StartError::Cancelled`]; a
/// request in flight is let finish, and what it took is given back
/// ([`give_back_cancelled`]).
pub(crate) fn acquire(
    store: &dyn LocationStore,
    node: NodeRid,
    generation: NodeGeneration,
    mesh: &MeshName,
    cancel: &StartCancel,
) -> Result<OwnerLease, StartError> {
    let mut waited_for = None;
    let mut retry = UNAVAILABLE_RETRY_MIN;
    loop {
        if cancel.is_cancelled() {
            return Err(StartError::Cancelled);
        }
        let asked = std::time::Instant::now();
        let answer = store.acquire_lease(node, generation, mesh);
        let round_trip = asked.elapsed();
        if cancel.is_cancelled() {
            give_back_cancelled(store, node, generation, &answer);
            return Err(StartError::Cancelled);
        }
        let (holder, expires_at) = match answer {
            Ok(lease) => return Ok(lease),
            Err(StoreError::LeaseHeld {
                holder, expires_at, ..
            }) => (holder, expires_at),
            Err(StoreError::Unavailable(detail)) => {
                tracing::warn!(
                    %node, %detail, retry_ms = retry.as_millis(),
                    "the Location Store did not answer the start's owner lease request: \
                     trying again (not ready until it answers)"
                );
                if cancel.wait(retry) {
                    give_back_cancelled(
                        store,
                        node,
                        generation,
                        &Err(StoreError::Unavailable(detail)),
                    );
                    return Err(StartError::Cancelled);
                }
                retry = (retry * 2).min(UNAVAILABLE_RETRY_MAX);
                continue;
            }
            // This lifecycle's own lease, taken by a request whose answer
            // was lost, lapsed before a retry could use it: §5, a lapsed
            // lifecycle stays dead, so the start ends as a lapsed lease
            // does, and the process starts again as a new lifecycle.
            Err(StoreError::LeaseExpired { .. }) => {
                return Err(StartError::LeaseLapsed(format!(
                    "the owner lease of node {node} that this lifecycle ({generation}) took \
                     with a request whose answer was lost lapsed before the start could use \
                     it; a lapsed lifecycle stays dead (§5): start again as a new lifecycle"
                )))
            }
            Err(error) => return Err(StartError::Lease(error.to_string())),
        };
        match waited_for {
            // The same expiry again: the store derives it from the time a
            // request was sent, so a slow answer makes it look earlier by
            // up to that request's round trip; a renewal moves it by what
            // passed since the last one, most of a term after a wait.
            Some((seen, until, then))
                if seen == holder && expires_at <= until + EXPIRY_JITTER + then + round_trip => {}
            Some(_) => {
                return Err(StartError::Lease(format!(
                    "node {node} is leased by its lifecycle {holder}, which keeps renewing \
                     the lease: another live process runs with this NodeRid"
                )))
            }
            None => {
                let left = expires_at.saturating_duration_since(store.now());
                tracing::warn!(
                    %node, previous_lifecycle = %holder, wait_s = left.as_secs_f64(),
                    "waiting for the owner lease held by this node's previous lifecycle \
                     to lapse, then starting"
                );
                waited_for = Some((holder, expires_at, round_trip));
            }
        }
        let left = expires_at.saturating_duration_since(store.now());
        if cancel.wait(left + AFTER_EXPIRY) {
            return Err(StartError::Cancelled);
        }
    }
}

/// A cancelled start's last store calls (docs/operations.md "Stopping a
/// start"): the lease its last request took is given back; a request the
/// store did not answer may have taken it all the same (its answer lost),
/// so the store is asked whose the lease is, and this lifecycle's is given
/// back. Each call is bounded by the store's call timeout; one that fails
/// leaves the lease to lapse within one term, as after a crash.
fn give_back_cancelled(
    store: &dyn LocationStore,
    node: NodeRid,
    generation: NodeGeneration,
    answer: &Result<OwnerLease, StoreError>,
) {
    let taken = match answer {
        Ok(lease) => Some(lease.clone()),
        Err(StoreError::Unavailable(_)) => match store.lease(node) {
            Ok(lease) => lease.filter(|lease| lease.node_generation == generation),
            Err(error) => {
                tracing::warn!(%node, %error,
                    "cancelled start: whether the unanswered lease request took the lease \
                     is not known; if it did, it lapses within one term");
                None
            }
        },
        Err(_) => None,
    };
    if let Some(lease) = taken {
        release(store, &lease, &[]);
    }
}

/// `call`, asked once more at once if the store did not answer. Only for a
/// call that asking twice cannot harm: renewing this lifecycle's own
/// lease, giving it back, removing a row at its version. Such a call may
/// have failed only because the store, or a proxy, closed the connection
/// while it was idle (the failure opens a fresh one): Redis's `timeout`,
/// a load balancer's idle timeout. Asked once, a renewal every round and
/// the give-back at a clean stop would fail against a healthy store.
pub(crate) fn asked_twice<T>(
    mut call: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match call() {
        Err(StoreError::Unavailable(_)) => call(),
        answer => answer,
    }
}

/// A clean stop's last step (§5, docs/store.md "Clean stop"): the rows of
/// the Actors that were still hosted here when the shards stopped (those
/// no move took away) are removed at their versions, so no lookup sends a
/// login to a process that is gone; then the lease is given back, which
/// also ends the node's membership. A restart straight after comes up at
/// once. Each step is bounded by the store's call timeout; a store that
/// cannot be reached leaves the rest to lapse with the lease (at most one
/// term), as after a crash.
pub(crate) fn release(store: &dyn LocationStore, lease: &OwnerLease, rows: &[LeftRow]) {
    let mut removed = 0;
    for (actor, version) in rows {
        match asked_twice(|| store.remove(actor, *version)) {
            Ok(_) => removed += 1,
            Err(error) => {
                tracing::warn!(%error, left = rows.len() - removed,
                    "clean stop: Actor rows not removed; they lapse with the lease");
                break;
            }
        }
    }
    match asked_twice(|| store.release_lease(lease)) {
        Ok(()) => tracing::info!(node = %lease.node, removed, "clean stop: owner lease released"),
        Err(error) => tracing::warn!(%error, node = %lease.node,
            "clean stop: the owner lease was not released; it lapses within one term"),
    }
}

/// The row of an Actor a stopping shard still hosted, at its version.
pub(crate) type LeftRow = (crate::ids::ActorId, crate::store::RowVersion);

/// §5: that this lifecycle's owner lease lapsed, for whoever waits on it
/// (a supervisor thread of the embedder): set once, by the shard that
/// fenced the node, never cleared (a lapsed lifecycle stays dead).
#[derive(Default)]
pub(crate) struct LeaseLapse {
    lapsed: std::sync::Mutex<bool>,
    changed: std::sync::Condvar,
}

impl LeaseLapse {
    /// Records the lapse and wakes every waiter (a brief lock, no wait).
    pub(crate) fn set(&self) {
        *self
            .lapsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.changed.notify_all();
    }

    /// Whether the lease lapsed.
    pub(crate) fn is_set(&self) -> bool {
        *self
            .lapsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Blocks the calling thread (never a shard) until the lease lapsed.
    pub(crate) fn wait(&self) {
        let lapsed = self
            .lapsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _lapsed = self
            .changed
            .wait_while(lapsed, |lapsed| !*lapsed)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}
