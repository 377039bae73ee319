//! The contract items that involve more than one node (R2, P1, S3, L1, L2),
//! written once and run on every layout of tests/layout_support: three
//! nodes in this process on the embedded store (`::embedded`), the same on
//! a real Redis (`::redis`), and three `zlink-node` processes on a real
//! Redis (`::processes`). Everything a test checks comes through the client
//! protocol, the nodes' diagnostics counters or a tapped link.

mod bound;
mod layout_support;
mod node_support;
mod redis_support;
mod runtime_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;

use layout_support::lobby::{
    Found, Join, Locate, Location, Login, Lookup, Move, Position, Replaced, Tick, Welcome,
    REPLACED_NOTICE, TICK,
};
use layout_support::{layout_matrix, Layout, Mesh};
use runtime_support::WAIT;
use zlink::client::{Client, ClientEvent};
use zlink::ids::PacketKey;
use zlink::typed::{self, Message};
use zlink::wire::client::CloseReason;
use zlink::wire::node::Command;

/// Sends a typed request of the lobby and returns its reply.
fn call<M: Message + std::fmt::Debug>(client: &mut Client, message: &M) -> M::Reply {
    client
        .call(message, WAIT)
        .unwrap_or_else(|e| panic!("{message:?}: {e:?}"))
}

/// Creates `player` on node `owner`: a LOOKUP there creates it (§1 step 2)
/// without binding it.
fn create(mesh: &mut Mesh, owner: u64, player: &str) {
    let mut client = mesh.client(owner);
    let found = call(
        &mut client,
        &Lookup {
            player: player.to_owned(),
        },
    );
    assert_eq!(
        found,
        Found {
            player: player.to_owned()
        }
    );
}

/// Binds `player` to the client's session.
fn login(client: &mut Client, player: &str) {
    let welcome = call(
        client,
        &Login {
            player: player.to_owned(),
        },
    );
    assert_eq!(
        welcome,
        Welcome {
            player: player.to_owned()
        }
    );
}

/// The MOVE of `player` by (1, 0).
fn step_of(player: &str) -> Move {
    Move {
        player: player.to_owned(),
        dx: 1,
        dy: 0,
    }
}

/// The x of a MOVE reply (a `Position` on the x axis).
fn x_of(reply: &[u8]) -> u64 {
    let at: Position = typed::decode(reply).expect("a Position");
    assert_eq!(at.y, 0, "only x moves");
    at.x.try_into().expect("a non-negative x")
}

/// MOVEs `player` by (1, 0); its new x, which counts the MOVEs it handled.
fn step(client: &mut Client, player: &str) -> u64 {
    let at = call(client, &step_of(player));
    assert_eq!(at.y, 0, "only x moves");
    at.x.try_into().expect("a non-negative x")
}

/// The next push the client gets: its key and its payload.
fn next_push(client: &mut Client) -> (PacketKey, bytes::Bytes) {
    match client.next_event(WAIT).expect("the connection is open") {
        Some(ClientEvent::Push { key, payload }) => (key, payload),
        other => panic!("expected a push, got {other:?}"),
    }
}

/// The next push, which must be the player's Tick.
fn next_tick(client: &mut Client) -> Tick {
    let (key, payload) = next_push(client);
    assert_eq!(key, TICK);
    typed::decode(&payload).expect("a Tick")
}

layout_matrix! {
    fn r2_bind_relay_and_push_cross_the_link_as_records_38_24_36(layout: Layout) {
        let (mut mesh, tap) = Mesh::start_tapped(layout, "r2", 1, 2);
        // Given player "a" on node 2 and a client of node 1,
        let a = mesh.player("a");
        create(&mut mesh, 2, &a);
        let mut client = mesh.client(1);
        // when the client binds it and MOVEs it four times (each relayed
        // and answered from node 2: the position counts up by one),
        login(&mut client, &a);
        for x in 1..=4 {
            assert_eq!(step(&mut client, &a), x);
        }
        // then the fourth MOVE's tick, pushed on node 2, reaches the client,
        assert_eq!(next_tick(&mut client), Tick { moves: 4 });
        // the bind, the relays and the push crossed the link 1 -> 2 as
        // records 38, 24 and 36,
        let seen = tap.commands.lock().unwrap().clone();
        for command in [
            Command::BoundSessionBind,
            Command::ActorSend,
            Command::BoundSessionSend,
        ] {
            assert!(
                seen.contains(&command.code()),
                "{command:?} did not cross the link: {seen:?}"
            );
        }
        // and node 2 handled every MOVE and pushed the tick, node 1 none.
        let (one, two) = (mesh.counters(1), mesh.counters(2));
        assert_eq!((two.get("moves"), two.get("pushes")), (4, 1), "{two:?}");
        assert_eq!(one.get("moves"), 0, "{one:?}");
    }
}

layout_matrix! {
    fn p1_rebind_from_another_node_completes_and_pushes_go_only_there(layout: Layout) {
        let mut mesh = Mesh::start(layout, "p1");
        // Given player "b" on node 2, bound from a session on node 3 that
        // moved it three times,
        let b = mesh.player("b");
        create(&mut mesh, 2, &b);
        let mut old = mesh.client(3);
        login(&mut old, &b);
        for x in 1..=3 {
            assert_eq!(step(&mut old, &b), x);
        }
        // when a session on node 1 binds it, the bind completes,
        let mut new = mesh.client(1);
        login(&mut new, &b);
        // the next MOVE continues the same player and its tick arrives on
        // the new session,
        assert_eq!(step(&mut new, &b), 4);
        assert_eq!(next_tick(&mut new), Tick { moves: 4 });
        // and the old session gets the duplicate-connection notice and its
        // close, never the tick.
        let (key, notice) = next_push(&mut old);
        assert_eq!(key, REPLACED_NOTICE);
        assert_eq!(typed::decode::<Replaced>(&notice).unwrap(), Replaced { player: b.clone() });
        assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
        assert_eq!(mesh.counters(3).get("replaced"), 1);
    }
}

layout_matrix! {
    fn s3_binding_a_stale_actor_ref_after_a_move_is_followed_once_without_a_store_read(
        layout: Layout,
    ) {
        let mut mesh = Mesh::start(layout, "s3");
        // Given, on a session of node 1, the ActorRef of player "c" as
        // found on node 2,
        let c = mesh.player("c");
        create(&mut mesh, 2, &c);
        let mut client = mesh.client(1);
        assert_eq!(call(&mut client, &Lookup { player: c.clone() }), Found { player: c.clone() });
        // when it moves to node 3,
        mesh.relocate(2, &c, 3).unwrap();
        let reads = mesh.counters(1).get("store_row_operations");
        // then binding that stale ActorRef succeeds, followed once over
        // node 2's Message Follow route, with no store read on node 1,
        assert_eq!(call(&mut client, &Join {}), Welcome { player: c.clone() });
        assert_eq!(mesh.counters(1).get("store_row_operations"), reads);
        assert_eq!(mesh.counters(2).get("message_followed"), 1);
        // and the binding's route is the target's: a relay goes to node 3
        // directly.
        assert_eq!(step(&mut client, &c), 1);
        assert_eq!(mesh.counters(2).get("message_followed"), 1);
        assert_eq!(mesh.counters(3).get("moves"), 1);
        assert_eq!(mesh.counters(2).get("moves"), 0);
    }
}

/// The player and ObjectGeneration of a LOCATE reply, without the tag.
fn identity(located: &Location) -> (&str, u64) {
    (&located.player, located.generation)
}

layout_matrix! {
    fn l1_relocated_actor_keeps_the_connection_and_serves_relays_on_the_target(
        layout: Layout,
    ) {
        let mut mesh = Mesh::start(layout, "l1");
        // Given player "d" on node 2, bound from a session on node 1,
        let d = mesh.player("d");
        create(&mut mesh, 2, &d);
        let mut client = mesh.client(1);
        login(&mut client, &d);
        assert_eq!(step(&mut client, &d), 1);
        let before = call(&mut client, &Locate { player: d.clone() });
        // when node 2 moves it to node 3,
        mesh.relocate(2, &d, 3).unwrap();
        // then a MOVE over the same connection is processed on node 3,
        // with the state the player had,
        assert_eq!(step(&mut client, &d), 2);
        let (two, three) = (mesh.counters(2), mesh.counters(3));
        assert_eq!((two.get("moves"), three.get("moves")), (1, 1));
        assert_eq!((two.get("actors"), three.get("actors")), (0, 1));
        // its ActorId and ObjectGeneration are kept, the session's
        // location snapshot changed,
        let after = call(&mut client, &Locate { player: d.clone() });
        assert_eq!(identity(&after), identity(&before));
        assert_ne!(after, before, "the snapshot names the target");
        // a push from the moved player reaches the client,
        assert_eq!(step(&mut client, &d), 3);
        assert_eq!(step(&mut client, &d), 4);
        assert_eq!(next_tick(&mut client), Tick { moves: 4 });
        // and the connection stayed, with no disconnect callback (§8.1).
        assert!(!client.is_closed());
        assert_eq!(mesh.counters(2).get("disconnects"), 0);
        assert_eq!(mesh.counters(3).get("disconnects"), 0);
    }
}

layout_matrix! {
    fn l2_messages_relayed_during_the_move_are_processed_once_on_the_target(
        layout: Layout,
    ) {
        /// MOVEs the client keeps in flight, so that some are on their way
        /// whenever the move seals, hands off and commits.
        const IN_FLIGHT: usize = 64;
        /// Replies before the move, and after it, before the load stops.
        const AROUND: u64 = 50;
        /// Moves tried until one meets MOVEs on their way.
        const MOVES_MAX: u32 = 8;
        let mut mesh = Mesh::start(layout, "l2");
        // Given player "e" on node 2, bound from a session on node 1 that
        // keeps MOVEs in flight, each reply checked as it comes: its x is
        // the number of replies so far, so every MOVE before it was
        // processed exactly once, in the connection's order,
        let e = mesh.player("e");
        create(&mut mesh, 2, &e);
        let mut client = mesh.client(1);
        login(&mut client, &e);
        let step_e = typed::encode(&step_of(&e)).unwrap();
        let (progress_tx, progress) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let load = std::thread::spawn(move || {
            let mut in_flight = std::collections::VecDeque::new();
            let mut replies = 0;
            loop {
                while in_flight.len() < IN_FLIGHT && !stopping.load(Ordering::SeqCst) {
                    let moving = client.start_request(Move::KEY, step_e.clone());
                    in_flight.push_back(moving.expect("the connection is open"));
                }
                let Some(correlation) = in_flight.pop_front() else {
                    return replies;
                };
                let reply = client.wait_reply(correlation, WAIT).expect("a terminal");
                replies += 1;
                let reply = reply.unwrap_or_else(|e| panic!("MOVE {replies} failed: {e}"));
                assert_eq!(x_of(&reply), replies, "reply {replies}: a MOVE lost or run twice");
                let _ = progress_tx.send(replies);
            }
        });
        let wait_replies = |at_least: u64| loop {
            let replies = progress.recv_timeout(WAIT).expect("the load goes on");
            if replies >= at_least {
                return replies;
            }
        };
        // The newest reply count the load has reported.
        let latest = || {
            let mut last = wait_replies(0);
            while let Ok(replies) = progress.try_recv() {
                last = last.max(replies);
            }
            last
        };
        // Whether some MOVEs met a move: held at the session's node by the
        // seal, or carried to the target as saved work or ingress hold.
        let met = |mesh: &mut Mesh| {
            mesh.counters(1).get("held_message_released")
                + mesh.counters(2).get("relocation_work_merged")
                + mesh.counters(3).get("relocation_work_merged")
        };
        // when node 2 moves it to node 3 under that load — back and forth
        // until a move met MOVEs on their way (the load keeps 64 in flight,
        // but a loaded machine can leave a gap; at most MOVES_MAX tries,
        // always ending on node 3) — and the load goes on after the last
        // commit until the target has answered AROUND MOVEs sent after it
        // (a reply past the newest count plus IN_FLIGHT was sent after the
        // commit),
        wait_replies(AROUND);
        for tries in 1.. {
            mesh.relocate(2, &e, 3).unwrap();
            if met(&mut mesh) > 0 || tries == MOVES_MAX {
                break;
            }
            wait_replies(latest() + IN_FLIGHT as u64);
            mesh.relocate(3, &e, 2).unwrap();
            wait_replies(latest() + IN_FLIGHT as u64);
        }
        let at_commit = latest();
        wait_replies(at_commit + IN_FLIGHT as u64 + AROUND);
        stop.store(true, Ordering::SeqCst);
        let total = load.join().expect("every MOVE was answered in order");
        // then nodes 2 and 3 handled exactly the MOVEs the client sent
        // between them, each once, the later ones on the target,
        let (two, three) = (mesh.counters(2), mesh.counters(3));
        assert_eq!(two.get("moves") + three.get("moves"), total, "{two:?} {three:?}");
        assert!(three.get("moves") >= AROUND, "{three:?}");
        // Some of them were on their way while it moved: held at the
        // session's node (an ingress hold) or carried as saved work.
        let one = mesh.counters(1);
        let (held, saved) = (
            one.get("held_message_released"),
            two.get("relocation_work_merged") + three.get("relocation_work_merged"),
        );
        assert!(held + saved > 0, "no MOVE met a move: {one:?} {two:?} {three:?}");
        println!(
            "l2 on {layout:?}: {total} MOVEs, {} on node 2, {} on node 3; \
             {held} held at node 1, {saved} merged as saved work or hold",
            two.get("moves"),
            three.get("moves"),
        );
    }
}
