//! Never block a shard (docs/threading.md): a Location Store call that
//! hangs holds only what waits on its answer, over real sockets.
//!
//! A relay never reads the store (§5: the route verified at bind time is
//! used for every message), so it must keep flowing while a login on the
//! same shard waits on a store that does not answer. The store here is
//! gated: its create and look-up block until the test opens the gate, and
//! the test opens it only after the relays were answered — with the old
//! shape (the store called on the shard thread) the shard would sit in the
//! create and the relays would get no reply at all.

mod bound;
mod runtime_support;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{
    NodeBuilder, NodeSettings, ObjectRole, Readiness, RelocateTo, StartCancel, StartError,
};
use zlink::core::trace::FlowTrace;
use zlink::ids::{ActorId, MeshName, NodeGeneration, NodeRid, RelocationId};
use zlink::store::{
    AbortOutcome, CasOutcome, CountingStore, Created, EmbeddedStore, LocationRow, LocationStore,
    Member, MonotonicClock, OwnerClaim, OwnerLease, RemoveOutcome, RowVersion, StoreError,
};

/// An embedded store whose create, look-up and remove wait while its gate
/// is closed, counting the calls that entered.
struct GatedStore {
    inner: EmbeddedStore,
    gate: Mutex<Gate>,
    changed: Condvar,
}

#[derive(Default)]
struct Gate {
    closed: bool,
    entered: usize,
    /// Faults for the next compare-and-sets, in order.
    cas_faults: std::collections::VecDeque<CasFault>,
    /// Faults for the next row removals, in order.
    remove_faults: std::collections::VecDeque<CasFault>,
    /// Faults for the next creates, in order.
    create_faults: std::collections::VecDeque<CasFault>,
    /// Row removals made.
    removes: usize,
    /// Membership listings fail (`Unavailable`) while this is set.
    listings_fail: bool,
    /// Membership listings asked for.
    listings: usize,
    /// Owner lease requests wait while this is set.
    lease_closed: bool,
    /// Owner lease requests made.
    lease_requests: usize,
    /// Faults for the next owner lease requests, in order.
    lease_faults: std::collections::VecDeque<CasFault>,
    /// Reads of the store's clock.
    clock_reads: usize,
    /// A lease renewal after more than [`IDLE_CLOSE`] without one fails
    /// (`Unavailable`, not applied), as on a connection the store closed
    /// while it was idle.
    renewals_close_idle: bool,
    /// Lease renewals asked for, and when the last one was.
    renewals: usize,
    last_renewal: Option<std::time::Instant>,
    /// The next lease give-back fails (`Unavailable`, not applied), as on
    /// a connection the store closed while it was idle.
    release_closed: bool,
}

/// How one compare-and-set fails, as a hung or dropped Redis makes it.
#[derive(Clone, Copy, Debug)]
enum CasFault {
    /// The store never got it: `Unavailable`, nothing applied.
    Unreachable,
    /// Applied, and its answer lost on the way back: `Unavailable`.
    LoseReply,
}

impl GatedStore {
    fn new() -> Self {
        Self::with_term(Duration::from_secs(60))
    }

    /// A store whose owner leases last `term`.
    fn with_term(term: Duration) -> Self {
        Self {
            inner: EmbeddedStore::new(MonotonicClock::new(), term),
            gate: Mutex::new(Gate::default()),
            changed: Condvar::new(),
        }
    }

    fn close(&self) {
        self.gate.lock().unwrap().closed = true;
    }

    fn fail_next_cas(&self, fault: CasFault) {
        self.gate.lock().unwrap().cas_faults.push_back(fault);
    }

    fn fail_next_create(&self, fault: CasFault) {
        self.gate.lock().unwrap().create_faults.push_back(fault);
    }

    fn fail_next_remove(&self, fault: CasFault) {
        self.gate.lock().unwrap().remove_faults.push_back(fault);
    }

    /// Owner lease requests wait from now on, until [`open_lease`](Self::open_lease).
    fn close_lease(&self) {
        self.gate.lock().unwrap().lease_closed = true;
    }

    fn open_lease(&self) {
        self.gate.lock().unwrap().lease_closed = false;
        self.changed.notify_all();
    }

    fn fail_next_lease(&self, fault: CasFault) {
        self.gate.lock().unwrap().lease_faults.push_back(fault);
    }

    /// Waits (bounded) until `n` owner lease requests were made.
    fn wait_lease_requests(&self, n: usize) {
        self.wait_count("lease requests", n, |g| g.lease_requests);
    }

    /// Waits (bounded) until the store's clock was read `n` times.
    fn wait_clock_reads(&self, n: usize) {
        self.wait_count("clock reads", n, |g| g.clock_reads);
    }

    fn fail_listings(&self, fail: bool) {
        self.gate.lock().unwrap().listings_fail = fail;
    }

    /// Waits (bounded) until `n` membership listings were asked for.
    fn wait_listings(&self, n: usize) {
        self.wait_count("listings", n, |g| g.listings);
    }

    fn removes(&self) -> usize {
        self.gate.lock().unwrap().removes
    }

    /// The gated calls that entered so far.
    fn entered(&self) -> usize {
        self.gate.lock().unwrap().entered
    }

    fn open(&self) {
        self.gate.lock().unwrap().closed = false;
        self.changed.notify_all();
    }

    /// Waits (bounded) until `n` gated calls entered the store.
    fn wait_entered(&self, n: usize) {
        self.wait_count("store calls entered", n, |g| g.entered);
    }

    /// Waits (bounded) until the count `of` reads at least `n`.
    fn wait_count(&self, what: &str, n: usize, of: impl Fn(&Gate) -> usize) {
        let gate = self.gate.lock().unwrap();
        let (gate, timeout) = self
            .changed
            .wait_timeout_while(gate, WAIT, |g| of(g) < n)
            .unwrap();
        assert!(!timeout.timed_out(), "{} of {n} {what}", of(&gate));
    }

    /// A gated call: waits while the gate is closed (bounded, so a test
    /// that forgets to open it still ends).
    fn pass(&self) {
        let mut gate = self.gate.lock().unwrap();
        gate.entered += 1;
        self.changed.notify_all();
        let _ = self
            .changed
            .wait_timeout_while(gate, Duration::from_secs(30), |g| g.closed)
            .unwrap();
    }
}

/// How long a connection of [`GatedStore`] may stay idle before a lease
/// renewal finds it closed (`renewals_close_idle`): less than the renew
/// interval of the test that sets it.
const IDLE_CLOSE: Duration = Duration::from_millis(50);

/// A store call as `fault` makes it: made and answered (none), never made
/// (`Unreachable`), or made with its answer lost (`LoseReply`); both
/// faults end `Unavailable`, as a hung or dropped Redis makes them.
fn faulted<T>(
    fault: Option<CasFault>,
    call: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let lost = || StoreError::Unavailable("injected: the answer was lost".into());
    match fault {
        None => call(),
        Some(CasFault::Unreachable) => Err(lost()),
        Some(CasFault::LoseReply) => call().and_then(|_| Err(lost())),
    }
}

impl LocationStore for GatedStore {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        self.pass();
        self.inner.lookup(actor)
    }
    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        self.pass();
        let fault = self.gate.lock().unwrap().create_faults.pop_front();
        faulted(fault, || self.inner.create(actor, owner))
    }
    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        let fault = self.gate.lock().unwrap().cas_faults.pop_front();
        faulted(fault, || {
            self.inner
                .compare_and_set(actor, expected, relocation, new_owner)
        })
    }
    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        self.inner.abort_relocation(actor, expected, relocation)
    }
    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        self.pass();
        let fault = {
            let mut gate = self.gate.lock().unwrap();
            gate.removes += 1;
            gate.remove_faults.pop_front()
        };
        faulted(fault, || self.inner.remove(actor, expected))
    }
    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        let fault = {
            let mut gate = self.gate.lock().unwrap();
            gate.lease_requests += 1;
            self.changed.notify_all();
            let (mut gate, _) = self
                .changed
                .wait_timeout_while(gate, Duration::from_secs(30), |g| g.lease_closed)
                .unwrap();
            gate.lease_faults.pop_front()
        };
        faulted(fault, || {
            self.inner.acquire_lease(node, node_generation, mesh)
        })
    }
    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        let mut gate = self.gate.lock().unwrap();
        gate.renewals += 1;
        let now = std::time::Instant::now();
        let idle = gate
            .last_renewal
            .map_or(true, |last| now.duration_since(last) > IDLE_CLOSE);
        let fails = gate.renewals_close_idle && idle;
        gate.last_renewal = Some(now);
        self.changed.notify_all();
        drop(gate);
        if fails {
            return Err(StoreError::Unavailable(
                "injected: the connection was closed while idle".into(),
            ));
        }
        self.inner.renew_lease(lease)
    }
    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        if std::mem::take(&mut self.gate.lock().unwrap().release_closed) {
            return Err(StoreError::Unavailable(
                "injected: the connection was closed while idle".into(),
            ));
        }
        self.inner.release_lease(lease)
    }
    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        self.inner.lease(node)
    }
    fn register_member(
        &self,
        lease: &OwnerLease,
        address: std::net::SocketAddr,
    ) -> Result<Member, StoreError> {
        self.inner.register_member(lease, address)
    }
    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        let mut gate = self.gate.lock().unwrap();
        gate.listings += 1;
        self.changed.notify_all();
        if gate.listings_fail {
            return Err(StoreError::Unavailable("the test fails listings".into()));
        }
        drop(gate);
        self.inner.members(mesh)
    }
    fn now(&self) -> zlink::core::time::Instant {
        self.gate.lock().unwrap().clock_reads += 1;
        self.changed.notify_all();
        self.inner.now()
    }
}

#[test]
fn a_login_waiting_on_a_hung_store_stalls_no_relay_of_its_shard() {
    // Given one shard, and player "a" bound to an established session,
    let store = Arc::new(CountingStore::new(GatedStore::new()));
    let game = start_node(1, Arc::clone(&store), GameOptions::default(), &[]);
    let mut established = login(&game, "a");
    // when the store stops answering and a second login waits on it,
    store.inner().close();
    let waiting_login = {
        let mut client = game.client();
        std::thread::spawn(move || client.request(LOGIN, Bytes::from_static(b"b"), WAIT))
    };
    store.inner().wait_entered(1);
    // then the established session's relays are answered while the store
    // still hangs (the gate opens only after them),
    for n in 1..=20u32 {
        let reply = established
            .request(COUNT, payload("a", "count"), WAIT)
            .expect("a relay answered while a login waits on the store");
        assert_eq!(reply, Bytes::from(n.to_string()));
    }
    // and once the store answers, the waiting login completes.
    store.inner().open();
    let reply = waiting_login
        .join()
        .unwrap()
        .expect("the login completes once the store answers");
    assert_eq!(reply, Bytes::from_static(b"bound"));
}

/// Two nodes on one gated store, linked; node 1's clients log in there.
fn two_nodes() -> (
    Arc<CountingStore<GatedStore>>,
    Game<GatedStore>,
    Game<GatedStore>,
) {
    let store = Arc::new(CountingStore::new(GatedStore::new()));
    let second = start_node(2, Arc::clone(&store), GameOptions::default(), &[]);
    let peers = [(2, second.node.peer_addr().unwrap())];
    let first = start_node(1, Arc::clone(&store), GameOptions::default(), &peers);
    assert!(first.node.wait_linked(2, WAIT), "link 1 -> 2");
    assert!(second.node.wait_linked(1, WAIT), "link 2 -> 1");
    (store, first, second)
}

/// A move whose CAS fails with `fault` once still ends with the player
/// served at the target, with its state, over the session it had (issue
/// 19 item 3): the target makes the CAS again rather than drop the only
/// instance, and a CAS it already won counts as won.
fn a_move_survives_a_cas_whose_outcome_was_unknown(fault: CasFault) {
    let (store, first, second) = two_nodes();
    // Given player "p" on node 1, bound from a session there, with state,
    let mut client = login(&first, "p");
    let count = |client: &mut zlink::client::Client| {
        client
            .request(COUNT, payload("p", "count"), WAIT)
            .expect("a relay to p is answered")
    };
    assert_eq!(count(&mut client), Bytes::from_static(b"1"));
    // when it moves to node 2 and the target's first CAS fails so,
    store.inner().fail_next_cas(fault);
    first
        .node
        .relocate(&id("p"), RelocateTo::Node(2))
        .unwrap_or_else(|e| panic!("{fault:?}: the move ended {e}"));
    // then it is hosted at node 2 alone, keeps its state, and the session
    // reaches it there; a login from node 2 binds the same incarnation.
    assert_eq!(
        (first.node.actor_count(), second.node.actor_count()),
        (0, 1)
    );
    assert_eq!(count(&mut client), Bytes::from_static(b"2"));
    let mut again = login(&second, "p");
    assert_eq!(count(&mut again), Bytes::from_static(b"3"));
    let retried = second
        .node
        .flow_counters()
        .get(FlowTrace::RelocationStoreRetry);
    assert_eq!(retried, 1, "{fault:?}: the target retried its CAS once");
}

#[test]
fn a_move_whose_cas_never_reached_the_store_commits_on_the_retry() {
    a_move_survives_a_cas_whose_outcome_was_unknown(CasFault::Unreachable);
}

#[test]
fn a_move_whose_cas_answer_was_lost_commits_as_the_cas_it_was() {
    a_move_survives_a_cas_whose_outcome_was_unknown(CasFault::LoseReply);
}

/// Issue 19 item 3, found by the simulator (its seeds 6 and 1645): a
/// destroy whose row removal was applied and its answer lost used to be
/// taken as failed, and the Actor was served again with no row, beside
/// the new incarnation a login elsewhere would create. The outcome is not
/// guessed: the removal is made again at its version (it finds the row
/// gone) and the destroy completes.
#[test]
fn a_destroy_whose_removal_answer_was_lost_removes_again_and_completes() {
    let (store, first, _second) = two_nodes();
    let _client = login(&first, "d");
    store.inner().fail_next_remove(CasFault::LoseReply);
    first
        .node
        .destroy_actor(&id("d"))
        .expect("the destroy completes once the store answers a removal");
    assert_eq!(
        store.inner().removes(),
        2,
        "made once more after the lost answer"
    );
    wait_until("node 1's Actor count to read 0", || {
        first.node.actor_count() == 0
    });
    // An unreachable store the first time: the same.
    let _client = login(&first, "e");
    store.inner().fail_next_remove(CasFault::Unreachable);
    first
        .node
        .destroy_actor(&id("e"))
        .expect("the destroy completes");
    assert_eq!(store.inner().removes(), 4);
}

#[test]
fn an_actor_whose_row_removal_waits_on_the_store_does_not_start_a_move() {
    let (store, first, _second) = two_nodes();
    // Given player "d" hosted on node 1 (one gated call: its create),
    let _client = login(&first, "d");
    // when its destroy waits on a store that does not answer,
    store.inner().close();
    let destroyed = std::thread::scope(|scope| {
        let destroy = scope.spawn(|| first.node.destroy_actor(&id("d")));
        store.inner().wait_entered(2);
        // then a move of it is refused at once (it is ending), not started
        // beside a removal that would leave the moved Actor without a row,
        let refused = first
            .node
            .relocate(&id("d"), RelocateTo::Node(2))
            .expect_err("a move of an Actor being destroyed");
        assert_eq!(refused.reason(), zlink::error::Reason::StaleLocation);
        // and once the store answers, the destroy completes.
        store.inner().open();
        destroy.join().unwrap()
    });
    destroyed.expect("the destroy completes once the store answers");
    // The count is published by the shard at the end of its loop turn,
    // which may come just after the destroy's answer (a CI run on epoll
    // read 1 here once).
    wait_until("node 1's Actor count to read 0", || {
        first.node.actor_count() == 0
    });
}

/// An Actor being destroyed is never a login's answer (src/core/creation.rs,
/// "an ending Actor"; the simulator's seed 26527): a login that comes while
/// the destroy's row removal waits on the store asks the store nothing and
/// waits for the destroy; then it gets a new incarnation, its state
/// starting afresh — not the ending instance, whose bind would be refused.
#[test]
fn a_login_while_the_actor_is_destroyed_waits_for_the_destroy_and_gets_a_new_incarnation() {
    let (store, first, _second) = two_nodes();
    let count = |client: &mut zlink::client::Client| {
        client
            .request(COUNT, payload("d", "count"), WAIT)
            .expect("a relay to d is answered")
    };
    // Given player "d" on node 1 with state (one gated call: its create),
    let mut client = login(&first, "d");
    assert_eq!(count(&mut client), Bytes::from_static(b"1"));
    assert_eq!(count(&mut client), Bytes::from_static(b"2"));
    // when its destroy's removal waits on a store that does not answer
    store.inner().close();
    std::thread::scope(|scope| {
        let destroy = scope.spawn(|| first.node.destroy_actor(&id("d")));
        store.inner().wait_entered(2);
        // and a login for it comes meanwhile,
        let mut again = first.client();
        let login = scope.spawn(move || {
            let bound = again.request(LOGIN, Bytes::from_static(b"d"), WAIT);
            (again, bound)
        });
        // then that login waits for the destroy, asking the store nothing,
        wait_until("the login to wait for the destroy", || {
            let waited = FlowTrace::HostWaitedForDestroy;
            first.node.flow_counters().get(waited) == 1
        });
        assert_eq!(
            store.inner().entered(),
            2,
            "the waiting login's store calls"
        );
        // and once the store answers, the destroy completes and the login
        // binds a new incarnation, whose state starts afresh.
        store.inner().open();
        destroy
            .join()
            .unwrap()
            .expect("the destroy completes once the store answers");
        let (mut again, bound) = login.join().unwrap();
        assert_eq!(bound.expect("the login"), Bytes::from_static(b"bound"));
        assert_eq!(count(&mut again), Bytes::from_static(b"1"));
    });
    assert_eq!(store.inner().entered(), 3, "the removal, then the create");
}

/// A create whose answer was lost (applied, and the login told
/// `Unavailable`) leaves a row naming node 1, which hosts nothing. Node 1
/// checks again by itself after its backoff (src/core/recheck.rs), finds
/// that orphan row and removes it at its version, creating nothing: a login
/// on node 2 then creates the player there, afresh.
#[test]
fn a_create_whose_answer_was_lost_is_checked_again_and_its_orphan_row_removed() {
    let (store, first, second) = two_nodes();
    store.inner().fail_next_create(CasFault::LoseReply);
    let mut client = first.client();
    let refused = client.request(LOGIN, Bytes::from_static(b"r"), WAIT);
    assert!(
        matches!(&refused, Err(zlink::client::ClientError::Remote(_))),
        "the login whose create's answer was lost: {refused:?}"
    );
    // The create was applied before its answer was lost: the row exists.
    assert!(store.inner().inner.lookup(&id("r")).unwrap().is_some());
    wait_until("node 1 to remove the row its lost create made", || {
        store.inner().inner.lookup(&id("r")).unwrap().is_none()
    });
    assert_eq!(store.inner().removes(), 1, "removed once, at its version");
    // The shard publishes its counters at the end of its loop turn, which
    // may come after the store worker removed the row.
    wait_counter(&first, FlowTrace::OrphanRowFound, 1);
    assert_eq!(first.node.flow_counters().get(FlowTrace::OrphanRowFound), 1);
    assert_eq!(first.node.actor_count(), 0, "nothing created for nobody");
    let mut again = login(&second, "r");
    let counted = again
        .request(COUNT, payload("r", "count"), WAIT)
        .expect("a relay to r is answered");
    assert_eq!(counted, Bytes::from_static(b"1"));
    assert_eq!(
        (first.node.actor_count(), second.node.actor_count()),
        (0, 1)
    );
}

/// docs/operations.md "Probes": a discovering node is `linking` until the
/// store has answered a listing of its membership. A listing the store
/// could not answer is not one that named no peer: the node does not turn
/// ready on it. A lease round is asked only once the last one was
/// answered, so when the third listing is asked, the shard has taken the
/// first two failed ones.
#[test]
fn a_discovering_node_is_not_ready_on_a_listing_the_store_could_not_answer() {
    let store = Arc::new(CountingStore::new(GatedStore::new()));
    store.inner().fail_listings(true);
    let options = GameOptions {
        discover_peers: true,
        settings: Some(NodeSettings {
            pin_cores: false,
            lease_renew_interval: Duration::from_millis(20),
            ready_link_wait: Duration::from_secs(600),
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    };
    let game = start_node(1, Arc::clone(&store), options, &[]);
    store.inner().wait_listings(3);
    assert_eq!(game.node.metrics().readiness(), Readiness::Linking);
    store.inner().fail_listings(false);
    wait_until("ready once a listing was read", || {
        game.node.metrics().readiness() == Readiness::Ready
    });
}

/// A node of RID `rid` over `store` that a test starts on a thread of its
/// own, with `cancel` (docs/operations.md "Stopping a start"), listening
/// at `listen`; the start's result comes on the returned channel.
fn start_cancellable(
    rid: u64,
    store: &Arc<GatedStore>,
    cancel: &StartCancel,
    listen: std::net::SocketAddr,
) -> std::sync::mpsc::Receiver<Result<zlink::api::Node, StartError>> {
    let builder = NodeBuilder::new(rid)
        .listen(listen)
        .object_role(ObjectRole::Server)
        .location_store(Arc::clone(store) as Arc<dyn LocationStore>)
        .enable_actor_dispatch()
        .cancel_with(cancel.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(builder.start());
    });
    rx
}

/// The start's result, waited for (bounded).
fn start_result(
    started: &std::sync::mpsc::Receiver<Result<zlink::api::Node, StartError>>,
) -> Result<zlink::api::Node, StartError> {
    started
        .recv_timeout(WAIT)
        .expect("the start ended within the bound")
}

#[test]
fn a_start_cancelled_while_its_lease_request_is_in_flight_gives_back_the_lease_it_took() {
    // Given a store that holds the start's owner lease request,
    let store = Arc::new(GatedStore::new());
    store.close_lease();
    let cancel = StartCancel::new();
    let started = start_cancellable(7, &store, &cancel, "127.0.0.1:0".parse().unwrap());
    store.wait_lease_requests(1);
    // when the start is cancelled and the request then takes the lease,
    cancel.cancel();
    store.open_lease();
    // then the start ends cancelled, with no node,
    let result = start_result(&started);
    assert!(matches!(result, Err(StartError::Cancelled)), "{result:?}");
    // and the lease it took is given back: the node's next start would
    // otherwise wait a whole term for it.
    assert_eq!(store.inner.lease(NodeRid(7)).unwrap(), None);
    assert_eq!(store.gate.lock().unwrap().lease_requests, 1);
}

#[test]
fn a_start_cancelled_after_an_unanswered_lease_request_gives_back_the_lease_it_may_have_taken() {
    // Given a lease request the store applied and whose answer was lost,
    let store = Arc::new(GatedStore::new());
    store.fail_next_lease(CasFault::LoseReply);
    let cancel = StartCancel::new();
    let started = start_cancellable(8, &store, &cancel, "127.0.0.1:0".parse().unwrap());
    store.wait_lease_requests(1);
    // when the start is cancelled while it waits to ask again,
    cancel.cancel();
    let result = start_result(&started);
    assert!(matches!(result, Err(StartError::Cancelled)), "{result:?}");
    // then it asked the store whose the lease is, and gave back its own.
    assert_eq!(store.inner.lease(NodeRid(8)).unwrap(), None);
}

#[test]
fn a_cancel_ends_a_start_waiting_out_a_predecessors_lease_and_leaves_that_lease_alone() {
    // Given node 9's lease held by an earlier lifecycle for a minute,
    let store = Arc::new(GatedStore::new());
    let mesh = MeshName::new("default").unwrap();
    let earlier = store
        .inner
        .acquire_lease(NodeRid(9), NodeGeneration(1), &mesh)
        .unwrap();
    let cancel = StartCancel::new();
    let started = start_cancellable(9, &store, &cancel, "127.0.0.1:0".parse().unwrap());
    // (the start reads the store's clock once it was refused, to know how
    // long to wait)
    store.wait_clock_reads(1);
    // when the start that waits it out is cancelled,
    let cancelled_at = std::time::Instant::now();
    cancel.cancel();
    // then it ends at once (the lease has most of its 60 s left),
    let result = start_result(&started);
    assert!(matches!(result, Err(StartError::Cancelled)), "{result:?}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(30));
    // and the earlier lifecycle's lease is not its to give back.
    let held = store.inner.lease(NodeRid(9)).unwrap().expect("still held");
    assert_eq!(held.node_generation, earlier.node_generation);
}

#[test]
fn a_start_that_fails_after_taking_its_lease_gives_it_back() {
    // Given the STREAM port held by another socket,
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let store = Arc::new(GatedStore::new());
    let started = start_cancellable(10, &store, &StartCancel::new(), taken.local_addr().unwrap());
    // when the start takes the lease and then cannot listen,
    let result = start_result(&started);
    assert!(matches!(result, Err(StartError::Io(_))), "{result:?}");
    assert_eq!(store.gate.lock().unwrap().lease_requests, 1);
    // then the lease is given back, so a start with the port freed is not
    // held up by it.
    assert_eq!(store.inner.lease(NodeRid(10)).unwrap(), None);
}

/// A lease request the store applied and whose answer was lost, then a
/// store outage longer than the lease: the lease this lifecycle took
/// lapsed before the start could use it, and §5 says a lapsed lifecycle
/// stays dead. The start ends `LeaseLapsed` (zlink-node exits 3, "restart
/// it as a new lifecycle"), not as a configuration error (exit 2, "do not
/// restart"), which left a node down after a store blip.
#[test]
fn a_lease_taken_by_a_lost_answer_that_lapses_before_the_retry_ends_the_start_lapsed() {
    // Given a 300 ms lease, a first request applied with its answer lost
    // and a second one that never reaches the store (the retries come
    // 250 ms, then 500 ms, apart: the third is past the lease),
    let store = Arc::new(GatedStore::with_term(Duration::from_millis(300)));
    store.fail_next_lease(CasFault::LoseReply);
    store.fail_next_lease(CasFault::Unreachable);
    let started = start_cancellable(
        11,
        &store,
        &StartCancel::new(),
        "127.0.0.1:0".parse().unwrap(),
    );
    // then the start ends with the lease lapsed, typed,
    let result = start_result(&started);
    assert!(
        matches!(result, Err(StartError::LeaseLapsed(_))),
        "{result:?}"
    );
    assert_eq!(store.gate.lock().unwrap().lease_requests, 3);
    assert_eq!(
        result.err().map(|e| e.error().reason()),
        Some(zlink::error::Reason::LeaseExpired)
    );
}

/// A store (or a proxy in front of it) that closes connections left idle
/// between two lease rounds: each round's renewal finds its connection
/// gone. A renewal is idempotent, so it is asked again at once on a fresh
/// connection, and the lease holds while the store is healthy. Before,
/// the renewal failed every round and the node fenced itself and exited 3
/// with nothing wrong (a hostile run's Redis `timeout 1` with renewals
/// every 2 s).
#[test]
fn a_renewal_whose_connection_was_closed_while_idle_is_asked_again_and_the_lease_holds() {
    let counted = Arc::new(CountingStore::new(GatedStore::with_term(
        Duration::from_millis(600),
    )));
    let store = counted.inner();
    store.gate.lock().unwrap().renewals_close_idle = true;
    let game = start_node(
        1,
        Arc::clone(&counted),
        GameOptions {
            settings: Some(NodeSettings {
                lease_renew_interval: Duration::from_millis(100),
                ..NodeSettings::default()
            }),
            ..GameOptions::default()
        },
        &[],
    );
    // Given renewals far past the lease's term (24 calls: 12 rounds of
    // 100 ms against a 600 ms lease), each round's first call failing,
    let gate = store.gate.lock().unwrap();
    let (gate, timeout) = store
        .changed
        .wait_timeout_while(gate, WAIT, |g| g.renewals < 24)
        .unwrap();
    assert!(!timeout.timed_out(), "{} renewals", gate.renewals);
    drop(gate);
    // then the lease holds: the node is ready and serves a login.
    assert_eq!(game.node.metrics().readiness(), Readiness::Ready);
    let _client = login(&game, "still-leased");
}

/// A clean stop whose give-back finds the store's connection closed while
/// it was idle (Redis's `timeout`): giving back this lifecycle's own lease
/// twice is harmless, so it is asked again at once, and a restart straight
/// after is not held up (before, the stop logged that the lease was not
/// released, and the next start waited out the term).
#[test]
fn a_clean_stop_whose_give_back_finds_its_connection_closed_asks_again() {
    let store = Arc::new(GatedStore::new());
    let started = start_cancellable(
        12,
        &store,
        &StartCancel::new(),
        "127.0.0.1:0".parse().unwrap(),
    );
    let node = start_result(&started).expect("the node starts");
    assert!(store.inner.lease(NodeRid(12)).unwrap().is_some());
    store.gate.lock().unwrap().release_closed = true;
    node.shutdown();
    assert!(
        !store.gate.lock().unwrap().release_closed,
        "the give-back was asked"
    );
    assert_eq!(store.inner.lease(NodeRid(12)).unwrap(), None);
}
