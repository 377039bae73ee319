//! Fences and generations (§4, §5, §6, §12) over real nodes on loopback.

mod bound;
mod redis_support;
mod runtime_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::client::{Client, ClientEvent};
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{ActorId, MeshName, NodeRid, RelocationId};
use zlink::ids::{AuthorityOwnerGeneration, NodeGeneration};
use zlink::store::{
    AbortOutcome, CasOutcome, CountingStore, Created, LocationRow, LocationStore, MonotonicClock,
    OwnerClaim, OwnerLease, RedisStore, RedisStoreConfig, RemoveOutcome, RowVersion, StoreError,
};
use zlink::wire::node::{Command, NodeRecord};

fn stash(game: &Game, client: &mut Client, actor: &str) -> zlink::ids::ActorRef {
    assert_eq!(
        expect_reply(client, STASH, actor),
        Bytes::from_static(b"stashed")
    );
    game.observed.stash.lock().unwrap().clone().unwrap()
}

#[test]
fn x3_a_push_that_is_not_current_is_refused_and_counted() {
    let store = new_store();
    let two = start_node(2, store.clone(), GameOptions::default(), &[]);
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(1, store, GameOptions::default(), &[(2, tap.addr)]);
    assert!(one.node.wait_linked(2, WAIT));
    two.node.create_actor("player", &id("x")).unwrap();
    let push = Command::BoundSessionSend.code();
    let mut client = login(&one, "x");
    tap.set(Direction::ToDialer, push, TapAction::Keep);
    assert_eq!(
        client.request(PUSH, payload("x", "once"), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("x", "once")
        })
    );
    tap.set(Direction::ToDialer, push, TapAction::Forward);
    // The binding that push belonged to ends; a new one takes its place.
    assert_eq!(
        expect_reply(&mut client, NOTIFY, "x"),
        Bytes::from_static(b"notified")
    );
    assert_eq!(
        expect_reply(&mut client, LOGIN, "x"),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        one.node
            .flow_counters()
            .get(FlowTrace::PushRejectedNotCurrent),
        0
    );
    // The old push arrives again, late.
    assert_eq!(tap.replay(), 1);
    wait_counter(&one, FlowTrace::PushRejectedNotCurrent, 1);
    // A current push after it is the next thing the client gets: the
    // refused one never reached it.
    assert_push_is_next(&mut client, "x", "marker");
}

/// The next event is the push of `data` that a PUSH request now asks for.
fn assert_push_is_next(client: &mut Client, actor: &str, data: &str) {
    assert_eq!(
        client.request(PUSH, payload(actor, data), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload(actor, data)
        })
    );
}

/// A 36 as if sent by an earlier process lifecycle of its node.
fn from_an_earlier_lifecycle(record: NodeRecord) -> NodeRecord {
    match record {
        NodeRecord::BoundSessionSend(mut send) => {
            send.node_generation = NodeGeneration(send.node_generation.0 - 1);
            NodeRecord::BoundSessionSend(send)
        }
        other => other,
    }
}

/// X3 for the source's NodeGeneration (§5 point 3: one of the four
/// generations that judge a push): a push that is stale only by it is
/// refused and counted, and the client never sees it.
#[test]
fn x3_a_push_with_a_stale_source_node_generation_is_refused_and_counted() {
    let store = new_store();
    let two = start_node(2, store.clone(), GameOptions::default(), &[]);
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(1, store, GameOptions::default(), &[(2, tap.addr)]);
    assert!(one.node.wait_linked(2, WAIT));
    two.node.create_actor("player", &id("x")).unwrap();
    let push = Command::BoundSessionSend.code();
    let mut client = login(&one, "x");
    tap.set(
        Direction::ToDialer,
        push,
        TapAction::Rewrite(from_an_earlier_lifecycle),
    );
    // The Actor's push call succeeds (a push has no ack); its 36 crossed
    // before the reply, on the same link.
    assert_eq!(
        client.request(PUSH, payload("x", "stale"), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    wait_counter(&one, FlowTrace::PushRejectedNotCurrent, 1);
    tap.set(Direction::ToDialer, push, TapAction::Forward);
    assert_push_is_next(&mut client, "x", "current");
    assert_eq!(
        one.node
            .flow_counters()
            .get(FlowTrace::PushRejectedNotCurrent),
        1
    );
}

#[test]
fn x5_no_actor_factory_is_not_found() {
    let mesh = start_mesh(2, GameOptions::default());
    let error = mesh[1]
        .node
        .create_actor("no-such-type", &id("player-1"))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert_eq!(error.reason(), Reason::NoActorFactory);
    let mut client = mesh[0].client();
    let error = expect_error(&mut client, STASH, "no-such-type/player-1");
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error:?}");
    assert_eq!(error.reason(), Reason::NoActorFactory);
}

#[test]
fn x5_a_stale_fence_is_unavailable_without_fallback() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = mesh[0].client();
    let good = stash(&mesh[0], &mut client, "player-1");
    let mut old_authority = good.clone();
    old_authority.location.authority = AuthorityOwnerGeneration(good.location.authority.0 - 1);
    let mut old_node = good.clone();
    old_node.location.node_generation = NodeGeneration(good.location.node_generation.0 - 1);
    for (stale, reason) in [
        (old_authority, Reason::StaleAuthority),
        (old_node, Reason::StaleNodeGeneration),
    ] {
        *mesh[0].observed.stash.lock().unwrap() = Some(stale);
        let before = mesh[0].store.counts().row_operations();
        let error = expect_error(&mut client, BIND_STASHED, "");
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
        assert_eq!(error.reason(), reason);
        assert_eq!(mesh[0].store.counts().row_operations(), before);
    }
    for game in &mesh {
        assert!(game.observed.bound_events.lock().unwrap().is_empty());
    }
    assert_eq!(expect_reply(&mut client, BOUND, ""), Bytes::new());
}

fn bind_from_store(game: &Game, client: &mut Client, actor: &str) {
    let row = game.store.lookup(&id(actor)).unwrap().expect("a live row");
    *game.observed.stash.lock().unwrap() = Some(row.actor_ref());
    assert_eq!(
        expect_reply(client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
}

#[test]
fn x19_after_a_session_owner_restart_a_smaller_binding_generation_is_accepted() {
    let store = new_store();
    let actors = start_node(2, store.clone(), GameOptions::default(), &[]);
    for name in ["a", "b", "c", "d", "x"] {
        actors.node.create_actor("player", &id(name)).unwrap();
    }
    let sessions = |generation| GameOptions {
        client_role: true,
        node_generation: Some(generation),
        ..GameOptions::default()
    };
    let first = start_node(
        1,
        store.clone(),
        sessions(100),
        &[(2, actors.node.peer_addr().unwrap())],
    );
    assert!(first.node.wait_linked(2, WAIT));
    let mut client = first.client();
    // x gets the fifth binding generation of that lifecycle.
    for name in ["a", "b", "c", "d", "x"] {
        bind_from_store(&first, &mut client, name);
    }
    first.node.shutdown();
    drop(client);

    let second = start_node(
        1,
        store,
        sessions(200),
        &[(2, actors.node.peer_addr().unwrap())],
    );
    assert!(second.node.wait_linked(2, WAIT));
    assert!(actors.node.wait_linked(1, WAIT));
    let mut client = second.client();
    // The first binding generation of the new lifecycle.
    bind_from_store(&second, &mut client, "x");
    assert_eq!(
        client.request(PUSH, payload("x", "tick"), WAIT).unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("x", "tick")
        })
    );
}

#[test]
fn rt_restart_with_the_same_rid_refuses_records_of_the_old_node_generation() {
    // Given an Actor owner (node 2) and a session owner (node 1, lifecycle
    // 100) linked through a tap, a session of node 1 bound to "hero",
    let store = new_store();
    let actors = start_node(2, store.clone(), GameOptions::default(), &[]);
    actors.node.create_actor("player", &id("hero")).unwrap();
    let tap = link_tap(actors.node.peer_addr().unwrap());
    let sessions = |generation| GameOptions {
        client_role: true,
        node_generation: Some(generation),
        ..GameOptions::default()
    };
    let first = start_node(1, store.clone(), sessions(100), &[(2, tap.addr)]);
    assert!(first.node.wait_linked(2, WAIT));
    // the bind (38) and a relay (24) of that lifecycle kept by the tap on
    // their way to node 2,
    let (bind, relay) = (Command::BoundSessionBind.code(), Command::ActorSend.code());
    tap.set(Direction::ToAcceptor, bind, TapAction::Keep);
    let mut client = first.client();
    bind_from_store(&first, &mut client, "hero");
    tap.set(Direction::ToAcceptor, bind, TapAction::Forward);
    tap.set(Direction::ToAcceptor, relay, TapAction::Keep);
    assert_eq!(
        expect_reply(&mut client, RELAY, "hero:old"),
        payload("hero", "old")
    );
    tap.set(Direction::ToAcceptor, relay, TapAction::Forward);
    // when node 1 stops at once and starts again with the same RID
    // (lifecycle 200) and links to node 2 through the tap again,
    drop(first);
    drop(client);
    let second = start_node(1, store, sessions(200), &[(2, tap.addr)]);
    assert!(second.node.wait_linked(2, WAIT));
    assert!(actors.node.wait_linked(1, WAIT));
    let delivered = || actors.observed.delivered.lock().unwrap().len();
    let before = delivered();
    let stale = actors
        .node
        .flow_counters()
        .get(FlowTrace::StaleLifecycleRecord);
    // then the old lifecycle's bind and relay, replayed on the new link,
    // are refused and counted, and the relay never reaches the Actor;
    assert_eq!(tap.replay(), 2);
    wait_counter(&actors, FlowTrace::StaleLifecycleRecord, stale + 2);
    assert_eq!(
        delivered(),
        before,
        "the old lifecycle's relay was delivered"
    );
    // the new lifecycle is served.
    let mut client = second.client();
    bind_from_store(&second, &mut client, "hero");
    assert_eq!(
        expect_reply(&mut client, RELAY, "hero:new"),
        payload("hero", "new")
    );
    assert_eq!(delivered(), before + 1);
}

#[test]
fn x6_recreated_actor_never_revalidates_the_old_binding() {
    let mesh = start_mesh(2, GameOptions::default());
    let old = mesh[1].node.create_actor("player", &id("x")).unwrap();
    let mut client = login(&mesh[0], "x");
    assert_eq!(
        expect_reply(&mut client, RELAY, "x:before"),
        payload("x", "before")
    );

    mesh[1].node.destroy_actor(&id("x")).unwrap();
    assert_eq!(mesh[0].store.lookup(&id("x")).unwrap(), None);
    let new = mesh[1].node.create_actor("player", &id("x")).unwrap();
    assert!(new.generation > old.generation, "{old:?} then {new:?}");

    // The old binding's token is refused at the Actor owner as stale: it
    // never reaches the new incarnation's handler.
    let delivered = mesh[1].observed.delivered.lock().unwrap().len();
    let error = expect_error(&mut client, RELAY, "x:late");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::StaleBinding);
    assert_eq!(mesh[1].observed.delivered.lock().unwrap().len(), delivered);

    // A late disconnect notification for the old binding runs no Spot
    // callback of the new incarnation, and its tombstone is refused.
    let _ = client.request(NOTIFY, Bytes::from_static(b"x"), WAIT);
    drop(client);
    wait_counter(&mesh[1], FlowTrace::TombstoneStale, 1);
    assert!(mesh[1].observed.disconnects.lock().unwrap().is_empty());

    // A fresh bind reaches the new incarnation, which has handled nothing.
    let mut client = login(&mesh[0], "x");
    assert_eq!(expect_reply(&mut client, COUNT, "x"), Bytes::from("1"));
    assert!(mesh[1].node.destroy_actor(&id("nobody")).is_err());
}

/// Forwards to a store and remembers the newest lease its node was given and
/// how many renewals failed and succeeded, so that a test knows the
/// `expires_at` the node fences at and sees renewals resume. Once `cut`, renewals and membership registrations fail as if
/// this node alone lost the store (its lease then lapses while it runs).
struct LeaseWatch<S> {
    inner: S,
    latest: Mutex<Option<OwnerLease>>,
    failed_renewals: AtomicU64,
    renewals: AtomicU64,
    cut: AtomicBool,
}

impl<S: LocationStore> LeaseWatch<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            latest: Mutex::new(None),
            failed_renewals: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            cut: AtomicBool::new(false),
        }
    }

    fn check_cut(&self) -> Result<(), StoreError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("cut by the test".into()));
        }
        Ok(())
    }

    fn keep(&self, lease: Result<OwnerLease, StoreError>) -> Result<OwnerLease, StoreError> {
        match &lease {
            Ok(held) => *self.latest.lock().unwrap() = Some(held.clone()),
            Err(_) => {
                self.failed_renewals.fetch_add(1, Ordering::SeqCst);
            }
        }
        lease
    }
}

impl<S: LocationStore> LocationStore for LeaseWatch<S> {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        self.inner.lookup(actor)
    }
    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        self.inner.create(actor, owner)
    }
    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        self.inner
            .compare_and_set(actor, expected, relocation, new_owner)
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
        self.inner.remove(actor, expected)
    }
    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: zlink::ids::NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        self.keep(self.inner.acquire_lease(node, node_generation, mesh))
    }
    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        let renewed = self
            .check_cut()
            .and_then(|()| self.inner.renew_lease(lease));
        if renewed.is_ok() {
            self.renewals.fetch_add(1, Ordering::SeqCst);
        }
        self.keep(renewed)
    }
    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        self.inner.release_lease(lease)
    }
    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        self.inner.lease(node)
    }
    fn register_member(
        &self,
        lease: &OwnerLease,
        address: std::net::SocketAddr,
    ) -> Result<zlink::store::Member, StoreError> {
        self.check_cut()?;
        self.inner.register_member(lease, address)
    }
    fn members(&self, mesh: &MeshName) -> Result<Vec<zlink::store::Member>, StoreError> {
        self.inner.members(mesh)
    }
    fn now(&self) -> Instant {
        self.inner.now()
    }
}

type Watched = CountingStore<LeaseWatch<RedisStore>>;

/// A node's own connection to the Redis at `url` (keys under `cluster`,
/// leases of `term`, each call bounded by `call_timeout` when given), its
/// lease watched and its calls counted.
fn watched_store(
    url: &str,
    cluster: &str,
    term: Duration,
    call_timeout: Option<Duration>,
) -> Arc<Watched> {
    let mut config = RedisStoreConfig::new(url.to_owned(), cluster);
    config.lease_term = term;
    if let Some(timeout) = call_timeout {
        config.call_timeout = timeout;
    }
    let redis = RedisStore::open(config, MonotonicClock::new()).unwrap();
    Arc::new(CountingStore::new(LeaseWatch::new(redis)))
}

/// Game options whose lease renews every 100 ms (shortened settings).
fn renewing_every_100ms(discover_peers: bool) -> GameOptions {
    GameOptions {
        settings: Some(NodeSettings {
            lease_renew_interval: Duration::from_millis(100),
            ..NodeSettings::default()
        }),
        discover_peers,
        ..GameOptions::default()
    }
}

/// A client that relays PUSH to its bound `actor` over and over, each
/// answered by the push and then the reply, until `stop`; it counts the
/// round trips done and keeps the first failure.
struct Load {
    done: Arc<AtomicU64>,
    failure: Arc<Mutex<Option<String>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Load {
    fn start(mut client: Client, actor: &'static str, stop: Arc<AtomicBool>) -> Self {
        let done = Arc::new(AtomicU64::new(0));
        let failure = Arc::new(Mutex::new(None));
        let (count, failed) = (Arc::clone(&done), Arc::clone(&failure));
        let thread = std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let sent = payload(actor, &n.to_string());
                let outcome = client
                    .request(PUSH, sent.clone(), WAIT)
                    .map_err(|e| format!("{actor}: PUSH {n}: {e:?}"))
                    .and_then(|reply| match client.next_event(WAIT) {
                        Ok(Some(ClientEvent::Push { key, payload }))
                            if reply == "pushed" && key == PUSHED && payload == sent =>
                        {
                            Ok(())
                        }
                        other => Err(format!("{actor}: PUSH {n}: {reply:?} then {other:?}")),
                    });
                if let Err(error) = outcome {
                    *failed.lock().unwrap() = Some(error);
                    return;
                }
                n += 1;
                count.store(n, Ordering::SeqCst);
            }
        });
        Load {
            done,
            failure,
            thread,
        }
    }

    /// Waits until this client did one more round trip than now.
    fn wait_progress(&self, what: &str) {
        let from = self.done.load(Ordering::SeqCst);
        wait_until(what, || {
            self.failure.lock().unwrap().is_some() || self.done.load(Ordering::SeqCst) > from
        });
        self.check();
    }

    fn check(&self) {
        if let Some(error) = self.failure.lock().unwrap().as_ref() {
            panic!("a relay or push failed: {error}");
        }
    }
}

#[test]
fn x21_store_outage_within_the_lease_keeps_relay_push_and_binds_and_logins_return_with_redis() {
    // Given three linked nodes on one durable Redis (the append-only file a
    // production store runs with, docs/store.md "Durability"), leases of
    // 6 s renewed every 100 ms (shortened settings; the outage below lasts
    // a few store calls),
    let mut redis = redis_support::RedisServer::start(redis_support::Mode::Durable);
    let url = redis.url();
    let store = || {
        watched_store(
            &url,
            "outage",
            Duration::from_secs(6),
            Some(Duration::from_secs(5)),
        )
    };
    let options = renewing_every_100ms(false);
    let three = start_node(3, store(), options.clone(), &[]);
    let two = start_node(
        2,
        store(),
        options.clone(),
        &[(3, three.node.peer_addr().unwrap())],
    );
    let peers = [
        (2, two.node.peer_addr().unwrap()),
        (3, three.node.peer_addr().unwrap()),
    ];
    let one = start_node(1, store(), options, &peers);
    assert!(one.node.wait_linked(2, WAIT) && one.node.wait_linked(3, WAIT));
    assert!(two.node.wait_linked(3, WAIT));
    let mesh = [&one, &two, &three];
    // one client per node bound to a player of the next node, relaying
    // PUSH (the player pushes, then replies) in a loop,
    let players = [("ann", &two), ("bob", &three), ("cat", &one)];
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<Load> = mesh
        .iter()
        .zip(players)
        .map(|(session_node, (player, owner))| {
            owner.node.create_actor("player", &id(player)).unwrap();
            let mut client = session_node.client();
            assert_eq!(expect_reply(&mut client, LOGIN, player), "bound");
            Load::start(client, player, Arc::clone(&stop))
        })
        .collect();
    for client in &load {
        client.wait_progress("the load before the outage");
    }
    // players not bound yet, and node 1 holding the ActorRef of one of them.
    for (player, owner) in [("dan", &two), ("eve", &three)] {
        owner.node.create_actor("player", &id(player)).unwrap();
    }
    let mut holder = one.client();
    assert_eq!(expect_reply(&mut holder, STASH, "dan"), "stashed");
    let leases_at_kill: Vec<_> = mesh
        .iter()
        .map(|game| game.store.inner().latest.lock().unwrap().clone().unwrap())
        .collect();

    // When Redis is killed under that load,
    redis.kill();
    for game in mesh {
        let failed = &game.store.inner().failed_renewals;
        let at_kill = failed.load(Ordering::SeqCst);
        wait_until("a renewal failing on every node", || {
            failed.load(Ordering::SeqCst) > at_kill
        });
    }
    // Then relay and push keep working through the outage,
    for client in &load {
        client.wait_progress("the load during the outage");
    }
    // a bind with the ActorRef in hand succeeds (it reads no store),
    assert_eq!(expect_reply(&mut holder, BIND_STASHED, ""), "bound");
    // and a login that needs the store — a lookup of an existing player or
    // the creation of a new one — ends with Unavailable.
    for player in ["eve", "fay"] {
        let mut late = one.client();
        let error = expect_error(&mut late, LOGIN, player);
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{player}: {error:?}");
    }
    for (game, lease) in mesh.iter().zip(&leases_at_kill) {
        assert!(
            game.store.now() < lease.expires_at,
            "the outage outlasted the lease: the test's settings are too short for this machine"
        );
    }

    // When Redis comes back with its data,
    redis.restart();
    // Then logins that look up or create succeed again,
    for player in ["eve", "fay"] {
        let mut late = one.client();
        assert_eq!(expect_reply(&mut late, LOGIN, player), "bound", "{player}");
    }
    // the leases are renewed in the lifecycle that held them (same
    // generation, a later expiry), and the nodes serve past the expiry
    // they had when the store went down.
    for (game, lease) in mesh.iter().zip(&leases_at_kill) {
        let watch = game.store.inner();
        let renewed = || watch.latest.lock().unwrap().clone().unwrap();
        wait_until("a renewal after Redis returned", || {
            renewed().expires_at > lease.expires_at
        });
        assert_eq!(renewed().generation, lease.generation);
        assert_eq!(renewed().node_generation, lease.node_generation);
    }
    let last_expiry = leases_at_kill.iter().map(|l| l.expires_at).max().unwrap();
    wait_until("the leases of the outage's start to pass", || {
        one.store.now() > last_expiry
    });
    for client in &load {
        client.wait_progress("the load past the lease the outage began in");
    }
    stop.store(true, Ordering::SeqCst);
    for client in load {
        assert!(client.thread.join().is_ok());
        let failure = client.failure.lock().unwrap().take();
        assert!(failure.is_none(), "a relay or push failed: {failure:?}");
    }
}

#[test]
fn x21_store_outage_past_the_lease_makes_relay_unavailable() {
    // Given two nodes on one durable Redis store, leases of 2 s renewed
    // every 100 ms (shortened settings),
    let mut redis = redis_support::RedisServer::start(redis_support::Mode::Durable);
    let term = Duration::from_secs(2);
    let url = redis.url();
    let store = || watched_store(&url, "x21", term, None);
    let options = renewing_every_100ms(false);
    let two = start_node(2, store(), options.clone(), &[]);
    let one = start_node(1, store(), options, &[(2, two.node.peer_addr().unwrap())]);
    assert!(one.node.wait_linked(2, WAIT));
    // and a session on node 1 bound to an Actor of node 2, relaying fine,
    // with the ActorRef of a second Actor in hand.
    let in_hand = |name: &str| {
        two.node.create_actor("player", &id(name)).unwrap();
        two.store.lookup(&id(name)).unwrap().unwrap().actor_ref()
    };
    let (hero, mage) = (in_hand("hero"), in_hand("mage"));
    assert_eq!(hero.location.owner, NodeRid(2));
    let mut client = one.client();
    *one.observed.stash.lock().unwrap() = Some(hero);
    assert_eq!(
        expect_reply(&mut client, BIND_STASHED, ""),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        expect_reply(&mut client, RELAY, "hero:before"),
        payload("hero", "before")
    );
    *one.observed.stash.lock().unwrap() = Some(mage);

    // When the store goes down, node 2 keeps the lease it last renewed: it
    // is final once a renewal has failed after the kill.
    redis.kill();
    let renewals = &two.store.inner().failed_renewals;
    wait_until("a failed renewal on node 2", || {
        renewals.load(Ordering::SeqCst) > 0
    });
    let expires_at = two
        .store
        .inner()
        .latest
        .lock()
        .unwrap()
        .clone()
        .unwrap()
        .expires_at;
    let clock = &two.store;
    let rows = || one.store.counts().row_operations() + two.store.counts().row_operations();
    let rows_at_kill = rows();

    // Then a bind with an ActorRef in hand reads no store and, while the
    // lease holds, succeeds;
    let mut late = one.client();
    match late.request(BIND_STASHED, Bytes::new(), WAIT) {
        Ok(reply) => assert_eq!(reply, Bytes::from_static(b"bound")),
        Err(error) => assert!(
            clock.now() >= expires_at,
            "bind failed in the lease: {error:?}"
        ),
    }
    // relay keeps working until the lease's expiry and never ends with
    // Unavailable before it, and after it ends with Unavailable (lease
    // expired) rather than using the old route.
    let mut relayed = 0u64;
    let error = loop {
        assert!(
            clock.now() < expires_at + Duration::from_secs(5),
            "relay still used the route 5 s past the lease"
        );
        match client.request(RELAY, payload("hero", "during"), WAIT) {
            Ok(reply) => {
                assert_eq!(reply, payload("hero", "during"));
                relayed += 1;
            }
            Err(zlink::client::ClientError::Remote(error)) => break error,
            Err(other) => panic!("relay failed without a typed error: {other:?}"),
        }
    };
    let answered_at = clock.now();
    assert!(
        answered_at >= expires_at,
        "Unavailable {:?} before the lease expired",
        expires_at.saturating_duration_since(answered_at)
    );
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::LeaseExpired);
    assert!(relayed > 0, "no relay succeeded during the outage");
    // A bind with an ActorRef in hand after the lease is refused by the
    // fenced owner, and still reads no store.
    let mut later = one.client();
    let error = expect_error(&mut later, BIND_STASHED, "");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(rows(), rows_at_kill, "a bind or relay read the store");

    // When Redis comes back with its data, the fenced lifecycle stays
    // fenced (docs/store.md "Leases": it renews no more and must restart):
    // relay still ends with Unavailable, never the old route, and so does
    // a bind with the ActorRef in hand.
    redis.restart();
    wait_until("node 2's store answering again", || {
        two.store.inner().inner.lease(NodeRid(2)).is_ok()
    });
    let renewed = two.store.inner().renewals.load(Ordering::SeqCst);
    let error = expect_error(&mut client, RELAY, "hero:after");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(error.reason(), Reason::LeaseExpired);
    let mut again = one.client();
    let error = expect_error(&mut again, BIND_STASHED, "");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(
        two.store.inner().renewals.load(Ordering::SeqCst),
        renewed,
        "a fenced lifecycle renewed its lease"
    );
}

#[test]
fn rt_membership_peers_found_in_the_store_and_a_lapsed_node_dropped_and_refused() {
    // Given three nodes on one Redis store that know no peer addresses and
    // find each other in the store's membership (leases of 2 s renewed, and
    // the membership followed, every 100 ms: shortened settings),
    let redis = redis_support::RedisServer::start(redis_support::Mode::Volatile);
    let url = redis.url();
    let store = || watched_store(&url, "membership", Duration::from_secs(2), None);
    let options = renewing_every_100ms(true);
    let mesh: Vec<Game<LeaseWatch<RedisStore>>> = (1..=3)
        .map(|rid| start_node(rid, store(), options.clone(), &[]))
        .collect();
    // then every pair links,
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        assert!(mesh[a].node.wait_linked(b as u64 + 1, WAIT), "{a} to {b}");
        assert!(mesh[b].node.wait_linked(a as u64 + 1, WAIT), "{b} to {a}");
    }
    // and the membership lists each lifecycle at the address it listens on.
    let listed = mesh[1]
        .store
        .members(&MeshName::new("default").unwrap())
        .unwrap();
    let expected: Vec<_> = mesh
        .iter()
        .map(|g| (NodeRid(g.rid), g.node.peer_addr().unwrap()))
        .collect();
    assert_eq!(
        listed
            .iter()
            .map(|m| (m.node, m.address))
            .collect::<Vec<_>>(),
        expected
    );

    // When node 1 alone loses the store, its lease runs out while it runs:
    let one = &mesh[0];
    one.store.inner().cut.store(true, Ordering::SeqCst);
    wait_until("a failed renewal on node 1", || {
        one.store.inner().failed_renewals.load(Ordering::SeqCst) > 0
    });
    let expires_at = one
        .store
        .inner()
        .latest
        .lock()
        .unwrap()
        .clone()
        .unwrap()
        .expires_at;
    // then nodes 2 and 3 drop their links to it, never before its lease's
    // expiry,
    for peer in &mesh[1..] {
        assert!(peer.node.wait_unlinked(1, WAIT + Duration::from_secs(2)));
        assert!(
            one.store.now() >= expires_at,
            "node {} dropped node 1 {:?} before its lease expired",
            peer.rid,
            expires_at.saturating_duration_since(one.store.now())
        );
        wait_counter(peer, FlowTrace::PeerLeaseLapsed, 1);
    }
    // and refuse that lifecycle when it dials again (it still lists them
    // and keeps dialling), while they stay linked to each other.
    for peer in &mesh[1..] {
        let refused = peer
            .node
            .flow_counters()
            .get(FlowTrace::StaleLinkGeneration);
        wait_counter(peer, FlowTrace::StaleLinkGeneration, refused + 1);
        assert!(
            !peer.node.wait_linked(1, Duration::ZERO),
            "node 1 linked again"
        );
    }
    assert!(mesh[1].node.wait_linked(3, Duration::ZERO));
    assert!(mesh[2].node.wait_linked(2, Duration::ZERO));
}

#[test]
fn rt_membership_discovery_without_store_secret_or_reachable_address_is_refused_at_start() {
    let reachable: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let unspecified: std::net::SocketAddr = "0.0.0.0:0".parse().unwrap();
    let store: Arc<dyn LocationStore> = new_store();
    let builders = [
        // No store,
        zlink::api::NodeBuilder::new(1)
            .peer_listen(reachable)
            .cluster_secret(secret()),
        // no secret,
        zlink::api::NodeBuilder::new(1)
            .peer_listen(reachable)
            .location_store(store.clone()),
        // no peer address, or one peers cannot reach.
        zlink::api::NodeBuilder::new(1)
            .location_store(store.clone())
            .cluster_secret(secret()),
        zlink::api::NodeBuilder::new(1)
            .peer_listen(unspecified)
            .location_store(store.clone())
            .cluster_secret(secret()),
    ];
    for builder in builders {
        let started = builder.discover_peers().start();
        assert!(
            matches!(&started, Err(zlink::api::StartError::Invalid(why)) if why.contains("discover_peers")),
            "{:?}",
            started.err()
        );
    }
}

#[test]
fn rt_membership_a_restarted_node_is_found_in_its_new_lifecycle_at_its_new_address() {
    // Given three nodes on one Redis store finding each other there (leases
    // of 2 s renewed every 100 ms: shortened settings),
    let redis = redis_support::RedisServer::start(redis_support::Mode::Volatile);
    let url = redis.url();
    let store = || watched_store(&url, "restart", Duration::from_secs(2), None);
    let options = renewing_every_100ms(true);
    let mut mesh: Vec<Game<LeaseWatch<RedisStore>>> = (1..=3)
        .map(|rid| start_node(rid, store(), options.clone(), &[]))
        .collect();
    for peer in &mesh[..2] {
        assert!(peer.node.wait_linked(3, WAIT));
    }
    // when node 3 stops at once (its lease is not given back) and, once its
    // lease lapsed, starts again: a new NodeGeneration on a new port,
    let old = mesh.pop().unwrap();
    let old_generation = old.store.inner().latest.lock().unwrap().clone().unwrap();
    drop(old);
    let observer = &mesh[0].store;
    wait_until("node 3's old lease lapses", || {
        observer.lease(NodeRid(3)).unwrap().is_none()
    });
    let restarted = start_node(3, store(), options, &[]);
    let new_lease = restarted
        .store
        .inner()
        .latest
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert!(new_lease.node_generation > old_generation.node_generation);
    // then both peers bury the old lifecycle and link to the new one, which
    // the membership lists at its new address.
    for peer in &mesh {
        wait_counter(peer, FlowTrace::PeerLeaseLapsed, 1);
        assert!(peer.node.wait_linked(3, WAIT), "node {} to 3", peer.rid);
    }
    let listed = observer
        .members(&MeshName::new("default").unwrap())
        .unwrap();
    let three = listed.iter().find(|m| m.node == NodeRid(3)).unwrap();
    assert_eq!(three.node_generation, new_lease.node_generation);
    assert_eq!(three.lease, new_lease.generation);
    assert_eq!(three.address, restarted.node.peer_addr().unwrap());
}
