//! Location Store operations as effects: no shard thread ever waits on the
//! store (issue 19 item 1, docs/threading.md "Never block a shard").
//!
//! A shard that needs the store (BindOrGet's create or look-up, §1 step 2;
//! a lost incarnation's replacement; an Actor's destruction; the
//! relocation's CAS and durable abort, §8.1; the owner lease's renewal and
//! the membership, §5) hands the operation to [`StoreWorkers`] and goes on
//! with its loop turn. A worker thread makes the call — one round trip with
//! Redis, bounded by its call timeout — and sends the outcome back to the
//! shard's inbox as a [`StoreAnswer`], which wakes the shard. Meanwhile only
//! what waits on that one answer waits: the session turn that logs in, the
//! relocation in its phase. Relays, pushes and disconnects never touch the
//! store (§5), so a store that hangs for seconds leaves them as they were.
//!
//! The queue is bounded ([`QUEUE_MAX`]): an operation offered to a full
//! queue is refused at once (`Unavailable`, StoreUnavailable; counted as
//! `StoreQueueFull`), so a login storm against a hung store costs memory
//! in proportion to the queue, never to the storm.
//!
//! Several workers ([`WORKERS`]) keep several operations in flight, so one
//! slow call (a timeout) does not hold the others back behind it.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::relocation::{AbortAnswer, CasAnswer, ExpectedOwner};
use crate::error::Error;
use crate::ids::{ActorId, ActorRef, RelocationId};
use crate::store::{
    AbortOutcome, CasOutcome, Created, LocationRow, LocationStore, Member, OwnerLease,
    RemoveOutcome, RowVersion, StoreError,
};

/// Worker threads per node: operations in flight at once.
pub(crate) const WORKERS: usize = 4;

/// Operations waiting for a worker, at most.
pub(crate) const QUEUE_MAX: usize = 1024;

/// Lease rounds waiting for the lease worker, at most (one is in flight
/// at a time per node, so this is slack).
const LEASE_QUEUE_MAX: usize = 4;

/// One store operation, run on a worker thread; it sends its own answer.
type StoreJob = Box<dyn FnOnce(&dyn LocationStore) + Send>;

/// The store queue was full: the operation was not made.
#[derive(Debug)]
pub(crate) struct QueueFull;

/// The node's store workers (module doc). Dropping it ends them once the
/// jobs already queued are done.
pub(crate) struct StoreWorkers {
    jobs: SyncSender<StoreJob>,
    /// The lease rounds' own lane and worker (see [`StoreWorkers::submit_lease`]).
    lease: SyncSender<StoreJob>,
}

impl StoreWorkers {
    /// Starts [`WORKERS`] threads calling `store`.
    pub(crate) fn start(store: Arc<dyn LocationStore>, name: &str) -> std::io::Result<Self> {
        let (jobs, queue) = sync_channel::<StoreJob>(QUEUE_MAX);
        let queue = Arc::new(Mutex::new(queue));
        for index in 0..WORKERS {
            let (store, queue) = (Arc::clone(&store), Arc::clone(&queue));
            std::thread::Builder::new()
                .name(format!("zlink-{name}-store-{index}"))
                .spawn(move || serve(store.as_ref(), &queue))?;
        }
        let (lease, lease_queue) = sync_channel::<StoreJob>(LEASE_QUEUE_MAX);
        let lease_queue = Mutex::new(lease_queue);
        std::thread::Builder::new()
            .name(format!("zlink-{name}-store-lease"))
            .spawn(move || serve(store.as_ref(), &lease_queue))?;
        Ok(Self { jobs, lease })
    }

    /// Queues a lease round on its own lane and worker, so that it never
    /// waits behind a storm of logins queued against a slow store: their
    /// call timeouts, one after another, could otherwise outlast the lease
    /// (§5) and fence a node whose store came back long before.
    pub(crate) fn submit_lease(
        &self,
        job: impl FnOnce(&dyn LocationStore) + Send + 'static,
    ) -> Result<(), QueueFull> {
        offer(&self.lease, Box::new(job))
    }

    /// Queues `job` without waiting; a full queue refuses it.
    pub(crate) fn submit(
        &self,
        job: impl FnOnce(&dyn LocationStore) + Send + 'static,
    ) -> Result<(), QueueFull> {
        offer(&self.jobs, Box::new(job))
    }
}

/// Queues `job` on `queue` without waiting; full (or ended) refuses it.
fn offer(queue: &SyncSender<StoreJob>, job: StoreJob) -> Result<(), QueueFull> {
    queue.try_send(job).map_err(|refused| match refused {
        TrySendError::Full(_) | TrySendError::Disconnected(_) => QueueFull,
    })
}

/// A worker: takes the next job (one worker waits on the queue at a time)
/// and runs it, until the node drops its [`StoreWorkers`].
fn serve(store: &dyn LocationStore, queue: &Mutex<Receiver<StoreJob>>) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.recv()
        };
        match job {
            Ok(job) => job(store),
            Err(_) => return,
        }
    }
}

/// What BindOrGet's store step found (§1 step 2).
pub(crate) enum HostRow {
    /// This node may host the Actor: the outcome of its create-if-absent.
    Created(Created),
    /// This node cannot host it: the live row, if any.
    Looked(Option<LocationRow>),
}

/// What replacing a lost incarnation found (docs/relocation.md, L6).
pub(crate) enum Replaced {
    /// The row changed meanwhile: this is the row now.
    Conflict(LocationRow),
    /// The old row is gone; the create's outcome.
    Created(Created),
}

/// A store operation's outcome, back on the shard that asked for it.
pub(crate) enum StoreAnswer {
    /// BindOrGet's create or look-up for `id`.
    Host {
        id: ActorId,
        outcome: Result<HostRow, StoreError>,
    },
    /// The route to `id` for a call from one of the shard's Actors (its
    /// live row, as a Ready ActorRef).
    Resolve {
        id: ActorId,
        outcome: Result<Option<ActorRef>, StoreError>,
    },
    /// The removal and re-creation of a lost incarnation of `id`.
    Replace {
        id: ActorId,
        outcome: Result<Replaced, StoreError>,
    },
    /// A recheck's removal of an orphan row of `id` (src/core/recheck.rs).
    Orphan {
        id: ActorId,
        outcome: Result<RemoveOutcome, StoreError>,
    },
    /// The row of a destroyed Actor removed (or not).
    Destroy {
        id: ActorId,
        outcome: Result<(), StoreError>,
        reply: std::sync::mpsc::Sender<Result<(), Error>>,
    },
    /// The target's CAS (§8.1).
    Cas {
        relocation: RelocationId,
        answer: Result<CasAnswer, Error>,
    },
    /// The coordinator's durable abort (§8.1).
    Abort {
        relocation: RelocationId,
        answer: Result<AbortAnswer, Error>,
    },
    /// (Link shard) one lease round: the renewal's outcome (`None` when
    /// none was asked) and the membership as listed (`None` when it was not
    /// asked or could not be read).
    LeaseRound {
        renewed: Option<Result<OwnerLease, StoreError>>,
        listed: Option<Vec<Member>>,
    },
}

// The bridge between the two layers beside each other: the store knows
// nothing of the relocation core and the core nothing of the store, so
// their vocabularies meet here, in the runtime that carries one's effects
// to the other.

/// The relocation core's expectation is the row version (§8.1 "the
/// expected source owner and generation"). Hidden: `RowVersion` is public,
/// `ExpectedOwner` is not.
#[doc(hidden)]
impl From<ExpectedOwner> for RowVersion {
    fn from(expected: ExpectedOwner) -> Self {
        RowVersion {
            owner: expected.owner,
            authority: expected.authority,
        }
    }
}

/// What the target's core needs of a CAS answer: the new authority owner
/// generation, or which way it failed.
impl From<CasOutcome> for CasAnswer {
    fn from(outcome: CasOutcome) -> Self {
        match outcome {
            CasOutcome::Swapped(row) => CasAnswer::Swapped {
                authority: row.location.authority,
            },
            CasOutcome::Conflict { current } => CasAnswer::Conflict {
                current: current.location,
                object: current.object,
            },
            CasOutcome::Absent => CasAnswer::Absent,
            CasOutcome::RelocationAborted => CasAnswer::RelocationAborted,
        }
    }
}

/// What the coordinator's core needs of a durable abort's answer.
impl From<AbortOutcome> for AbortAnswer {
    fn from(outcome: AbortOutcome) -> Self {
        match outcome {
            AbortOutcome::Aborted => AbortAnswer::Aborted,
            AbortOutcome::Conflict { current } => AbortAnswer::Moved {
                owner: current.location.owner,
            },
            AbortOutcome::Absent => AbortAnswer::Absent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmbeddedStore, MonotonicClock};
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn a_full_queue_refuses_at_once_and_every_queued_job_still_runs() {
        let store = Arc::new(EmbeddedStore::new(
            MonotonicClock::new(),
            Duration::from_secs(60),
        ));
        let workers = StoreWorkers::start(store, "test").unwrap();
        // Every worker held inside a job, then the queue filled,
        let (release, held) = channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let (started, running) = channel();
        for _ in 0..WORKERS {
            let (held, started) = (Arc::clone(&held), started.clone());
            workers
                .submit(move |_| {
                    started.send(()).unwrap();
                    let _ = held.lock().unwrap().recv();
                })
                .unwrap();
        }
        for _ in 0..WORKERS {
            running.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        let (done, finished) = channel();
        for _ in 0..QUEUE_MAX {
            let done = done.clone();
            workers.submit(move |_| done.send(()).unwrap()).unwrap();
        }
        // one more is refused without waiting,
        assert!(workers.submit(|_| {}).is_err());
        // and once the workers are free, every queued job runs.
        for _ in 0..WORKERS {
            release.send(()).unwrap();
        }
        for _ in 0..QUEUE_MAX {
            finished.recv_timeout(Duration::from_secs(10)).unwrap();
        }
    }
}
