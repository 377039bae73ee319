//! Several meshes per node (§3, §4; docs/threading.md "Several meshes"),
//! over real sockets: node 1 is in "lobby" (its home mesh) and "battle",
//! node 2 only in "lobby", node 3 only in "battle", each mesh with its own
//! cluster secret.

mod bound;
mod runtime_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{Mesh, NodeBuilder, RelocateTo, StartError};
use zlink::client::{ClientError, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::ActorId;
use zlink::net::handshake::ClusterSecret;
use zlink::store::{CountingStore, EmbeddedStore, MonotonicClock};

fn lobby_secret() -> ClusterSecret {
    ClusterSecret::new(b"zlink-test-lobby-secret".to_vec()).unwrap()
}

fn battle_secret() -> ClusterSecret {
    ClusterSecret::new(b"zlink-test-battle-secret".to_vec()).unwrap()
}

type Store = Arc<CountingStore<EmbeddedStore>>;

fn store() -> Store {
    Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )))
}

/// A game node whose meshes `configure` sets (its home mesh, secret and
/// peers; the meshes it joins).
fn node(
    rid: u64,
    store: &Store,
    configure: impl Fn(NodeBuilder) -> NodeBuilder + Send + Sync + 'static,
) -> Game {
    let options = GameOptions {
        configure: Some(Arc::new(configure)),
        ..GameOptions::default()
    };
    start_node(rid, Arc::clone(store), options, &[])
}

fn peer_addr(game: &Game) -> SocketAddr {
    game.node.peer_addr().unwrap()
}

/// Only in "lobby" or only in "battle", with node 1 as its one peer (it
/// dials: a node takes links only from its peers).
fn single(mesh: &'static str, secret: ClusterSecret) -> impl Fn(NodeBuilder) -> NodeBuilder {
    move |b| b.mesh(mesh).cluster_secret(secret.clone()).accept_peer(1)
}

fn id(name: &str) -> ActorId {
    ActorId::new(name).unwrap()
}

fn refused(result: Result<Bytes, ClientError>) -> Reason {
    match result {
        Err(ClientError::Remote(e)) => {
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            e.reason()
        }
        other => panic!("expected a typed refusal, got {other:?}"),
    }
}

#[test]
fn a_node_in_two_meshes_reaches_actors_in_both_and_the_others_stay_apart() {
    let store = store();
    let b = node(2, &store, single("lobby", lobby_secret()));
    let c = node(3, &store, single("battle", battle_secret()));
    // Node 4 has "battle" as its home and joins "lobby" without listing node
    // 1 there: its link with node 1 is in "battle", not in the mesh node 1's
    // rows name.
    let d = node(4, &store, |b| {
        b.mesh("battle")
            .cluster_secret(battle_secret())
            .accept_peer(1)
            .join_mesh(Mesh::new("lobby", lobby_secret()))
    });
    let (b_addr, c_addr, d_addr) = (peer_addr(&b), peer_addr(&c), peer_addr(&d));
    let a = node(1, &store, move |builder| {
        builder
            .mesh("lobby")
            .cluster_secret(lobby_secret())
            .peer(2, b_addr)
            .join_mesh(
                Mesh::new("battle", battle_secret())
                    .peer(3, c_addr)
                    .peer(4, d_addr),
            )
    });
    for rid in [2, 3, 4] {
        assert!(a.node.wait_linked(rid, WAIT), "link 1 -> {rid}");
    }
    b.node.create_actor("player", &id("on-b")).unwrap();
    c.node.create_actor("player", &id("on-c")).unwrap();
    a.node.create_actor("player", &id("on-a")).unwrap();

    // A client on node 1 binds and relays to an Actor in each mesh and gets
    // pushes from both.
    let mut client = login(&a, "on-b");
    let bound = client.request(LOGIN, Bytes::from_static(b"on-c"), WAIT);
    assert_eq!(bound.unwrap(), Bytes::from_static(b"bound"));
    for actor in ["on-b", "on-c"] {
        let reply = client.request(PUSH, payload(actor, "tick"), WAIT).unwrap();
        assert_eq!(reply, Bytes::from_static(b"pushed"));
        assert_eq!(
            client.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload(actor, "tick")
            })
        );
    }

    // A client on node 2 (only in "lobby") cannot reach node 3's Actor,
    // whose route names "battle": refused before any record.
    let mut on_b = b.client();
    let reason = refused(on_b.request(LOGIN, Bytes::from_static(b"on-c"), WAIT));
    assert_eq!(reason, Reason::MeshUnreachable);

    // Node 4 is in "lobby", but reaches node 1 through "battle": node 1
    // refuses the bind at the link's ingress, typed and counted.
    let mut on_d = d.client();
    let reason = refused(on_d.request(LOGIN, Bytes::from_static(b"on-a"), WAIT));
    assert_eq!(reason, Reason::MeshUnreachable);
    wait_counter(&a, FlowTrace::RecordFromOtherMesh, 1);
    assert_eq!(
        a.node.flow_counters().get(FlowTrace::RecordFromOtherMesh),
        1
    );

    // Node 1's Actors move only to peers of its home mesh, where their
    // rows still name the mesh they are reached through.
    let moved = a.node.relocate(&id("on-a"), RelocateTo::Node(3));
    assert_eq!(moved.unwrap_err().reason(), Reason::RelocationTargetInvalid);
}

#[test]
fn a_link_with_the_wrong_mesh_secret_is_refused_and_counted() {
    let store = store();
    // Node 5 says it is in "battle" but holds the lobby's secret.
    let e = node(5, &store, single("battle", lobby_secret()));
    let e_addr = peer_addr(&e);
    let a = node(1, &store, move |builder| {
        builder
            .mesh("lobby")
            .cluster_secret(lobby_secret())
            .join_mesh(Mesh::new("battle", battle_secret()).peer(5, e_addr))
    });
    wait_counter(&a, FlowTrace::LinkHandshakeFailed, 1);
    assert!(!a.node.wait_linked(5, Duration::ZERO));
    assert!(!e.node.wait_linked(1, Duration::ZERO));
}

#[test]
fn a_peer_is_linked_in_one_mesh_of_a_node() {
    let shared = store();
    let a = node(2, &shared, |builder| {
        builder
            .mesh("lobby")
            .cluster_secret(lobby_secret())
            .join_mesh(Mesh::new("battle", battle_secret()).accept_peer(1))
    });
    let a_addr = peer_addr(&a);
    // Node 1 dials node 2 in "battle": node 2 answers with that mesh's
    // secret, not its home mesh's.
    let in_battle = node(1, &shared, move |b| {
        b.mesh("battle")
            .cluster_secret(battle_secret())
            .peer(2, a_addr)
            .node_generation(1)
    });
    assert!(a.node.wait_linked(1, WAIT));
    // A second process calling itself node 1, in "lobby" and in a newer
    // lifecycle (with a store of its own: the shared one leases node 1 to
    // the first): without the checks its link would replace the first.
    // Node 2 expects node 1 in "battle" only, so this Hello gets no
    // Welcome.
    let _in_lobby = node(1, &store(), move |b| {
        b.mesh("lobby")
            .cluster_secret(lobby_secret())
            .peer(2, a_addr)
            .node_generation(2)
    });
    wait_counter(&a, FlowTrace::LinkHandshakeFailed, 1);
    assert!(a.node.wait_linked(1, Duration::ZERO));
    assert!(in_battle.node.wait_linked(2, Duration::ZERO));
    assert_eq!(
        a.node.flow_counters().get(FlowTrace::StaleLinkGeneration),
        0
    );
}

fn start_error(builder: NodeBuilder) -> String {
    match builder.start() {
        Err(error @ StartError::Invalid(_)) => error.to_string(),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

#[test]
fn a_duplicate_mesh_or_a_peer_in_two_meshes_fails_startup() {
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let home = || {
        NodeBuilder::new(1)
            .mesh("lobby")
            .cluster_secret(lobby_secret())
    };
    let twice = start_error(home().join_mesh(Mesh::new("lobby", battle_secret())));
    assert!(twice.contains("mesh lobby is joined twice"), "{twice}");
    let two_meshes = start_error(
        home()
            .peer(2, addr)
            .join_mesh(Mesh::new("battle", battle_secret()).peer(2, addr)),
    );
    assert!(
        two_meshes.contains("peer 2 is listed in meshes lobby and battle"),
        "{two_meshes}"
    );
    let no_home = start_error(NodeBuilder::new(1).join_mesh(Mesh::new("battle", battle_secret())));
    assert!(no_home.contains("join_mesh needs"), "{no_home}");
    // A peer without a secret: a node that would start and never link.
    let no_secret = start_error(NodeBuilder::new(1).peer(2, addr));
    assert!(
        no_secret.contains("peer 2 needs the home mesh's cluster_secret"),
        "{no_secret}"
    );
    // A peer this node dials (a higher RID) given without an address: a
    // link that would never come up.
    let no_address = start_error(home().accept_peer(2));
    assert!(
        no_address.contains("peer 2 is given without an address"),
        "{no_address}"
    );
    // A peer at the node's own peer address: a link to itself.
    let own: SocketAddr = "127.0.0.1:7201".parse().unwrap();
    let itself = start_error(home().peer_listen(own).peer(2, own));
    assert!(
        itself.contains("this node's own peer_listen address"),
        "{itself}"
    );
}
