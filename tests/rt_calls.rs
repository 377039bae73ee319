//! Messages between Actors over real sockets (docs/actors.md "Messages
//! between Actors"): a request across nodes comes back once as a later
//! message of the caller; requests made while the target relocates, or
//! while the caller does, each end exactly once, with the reply or a typed
//! error, none twice and none silently; one-way messages between two
//! Actors keep their order.

mod bound;
mod runtime_support;

use std::collections::HashMap;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::RelocateTo;
use zlink::client::{Client, ClientEvent};
use zlink::error::Reason;

/// Waits for the REPLIED pushes of `calls` (their numbers): each must come
/// exactly once; returns them by number. A later marker request shows
/// none came twice.
fn outcomes(client: &mut Client, calls: &[u64]) -> HashMap<u64, String> {
    let mut got: HashMap<u64, String> = HashMap::new();
    while calls.iter().any(|c| !got.contains_key(c)) {
        let event = client.next_event(WAIT).unwrap();
        match event.expect("every outcome within the wait") {
            ClientEvent::Push { key, payload } if key == REPLIED => {
                let text = String::from_utf8(payload.to_vec()).unwrap();
                let (call, rest) = text.split_once(':').unwrap();
                let call: u64 = call.parse().unwrap();
                assert!(
                    got.insert(call, rest.to_owned()).is_none(),
                    "call {call} ended twice"
                );
            }
            ClientEvent::Closed(reason) => panic!("closed: {reason:?}"),
            _ => {}
        }
    }
    // The marker: a request relayed now comes back after any outcome sent
    // before it; none of them may be a second one.
    let marker = client
        .start_request(RELAY, payload("caller", "marker"))
        .unwrap();
    loop {
        match client
            .next_event(WAIT)
            .unwrap()
            .expect("the marker's reply")
        {
            ClientEvent::Push { key, payload } if key == REPLIED => {
                panic!("an outcome after all had ended: {payload:?}")
            }
            ClientEvent::Reply { correlation, .. } if correlation == marker => return got,
            _ => {}
        }
    }
}

/// What the node's players were sent by "caller" (`caller><data>`).
fn from_caller(game: &Game) -> Vec<Bytes> {
    from_sender(game, "caller")
}

/// What the node's players were sent by `sender` (`<sender>><data>`; ""
/// for node code).
fn from_sender(game: &Game, sender: &str) -> Vec<Bytes> {
    let prefix = format!("{sender}>");
    let delivered = game.observed.delivered.lock().unwrap();
    delivered
        .iter()
        .filter(|d| d.starts_with(prefix.as_bytes()))
        .cloned()
        .collect()
}

fn call_number(reply: Bytes) -> u64 {
    std::str::from_utf8(&reply).unwrap().parse().unwrap()
}

#[test]
fn a_request_across_nodes_comes_back_once_as_a_later_message_of_the_caller() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[0].node.create_actor("player", &id("caller")).unwrap();
    mesh[1].node.create_actor("player", &id("callee")).unwrap();
    let mut client = login(&mesh[0], "caller");
    let call = call_number(
        client
            .request(CALL_REQUEST, payload("caller", "callee:hello"), WAIT)
            .unwrap(),
    );
    let got = outcomes(&mut client, &[call]);
    assert_eq!(got[&call], "ok:echo:hello");
    assert_eq!(
        from_caller(&mesh[1]),
        vec![Bytes::from_static(b"caller>hello")]
    );
}

#[test]
fn a3_one_way_messages_between_two_actors_keep_their_order_across_nodes() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[0].node.create_actor("player", &id("caller")).unwrap();
    mesh[1].node.create_actor("player", &id("callee")).unwrap();
    let mut client = login(&mesh[0], "caller");
    for n in 0..50 {
        let data = format!("callee:{n}");
        let reply = client
            .request(CALL_SEND, payload("caller", &data), WAIT)
            .unwrap();
        assert_eq!(reply, Bytes::from_static(b"sent"));
    }
    // A request after them is answered after all 50 arrived, in order.
    let call = call_number(
        client
            .request(CALL_REQUEST, payload("caller", "callee:last"), WAIT)
            .unwrap(),
    );
    assert_eq!(outcomes(&mut client, &[call])[&call], "ok:echo:last");
    let seen = from_caller(&mesh[1]);
    let expected: Vec<Bytes> = (0..50)
        .map(|n| Bytes::from(format!("caller>{n}")))
        .chain([Bytes::from_static(b"caller>last")])
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn a1_requests_made_while_the_target_relocates_each_end_exactly_once() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[0].node.create_actor("player", &id("caller")).unwrap();
    mesh[1].node.create_actor("player", &id("callee")).unwrap();
    let mut client = login(&mesh[0], "caller");
    let mut calls = Vec::new();
    // The callee moves between nodes 2 and 3 ten times, with requests made
    // before and after each move.
    for round in 0..10 {
        for n in 0..3 {
            let data = format!("callee:{round}-{n}");
            let reply = client
                .request(CALL_REQUEST, payload("caller", &data), WAIT)
                .unwrap();
            calls.push((call_number(reply), format!("{round}-{n}")));
        }
        let (from, to) = if round % 2 == 0 { (1, 3) } else { (2, 2) };
        mesh[from]
            .node
            .relocate(&id("callee"), RelocateTo::Node(to))
            .unwrap_or_else(|e| panic!("move {round}: {e}"));
    }
    let numbers: Vec<u64> = calls.iter().map(|c| c.0).collect();
    let got = outcomes(&mut client, &numbers);
    // Each ended once, with its own reply or a typed error; none twice (the
    // callee ran each at most once).
    let mut replied = 0;
    for (call, data) in &calls {
        let outcome = &got[call];
        if outcome.starts_with("ok:") {
            assert_eq!(outcome, &format!("ok:echo:{data}"));
            replied += 1;
        } else {
            assert!(outcome.starts_with("err:"), "{outcome}");
        }
    }
    let mut seen = from_caller(&mesh[1]);
    seen.extend(from_caller(&mesh[2]));
    for (_, data) in &calls {
        let wanted = format!("caller>{data}");
        let copies = seen.iter().filter(|s| s[..] == *wanted.as_bytes()).count();
        assert!(copies <= 1, "{data} processed {copies} times");
    }
    assert!(
        replied >= calls.len() / 2,
        "only {replied} of {} replied",
        calls.len()
    );
}

#[test]
fn a2_requests_whose_caller_relocates_before_the_reply_each_end_once_at_the_caller() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[0].node.create_actor("player", &id("caller")).unwrap();
    mesh[1].node.create_actor("player", &id("callee")).unwrap();
    // The client connects through node 3, so it stays while the caller
    // moves between nodes 1 and 2.
    let mut client = login(&mesh[2], "caller");
    let mut calls = Vec::new();
    for round in 0..10 {
        let data = format!("callee:{round}");
        let reply = client
            .request(CALL_REQUEST, payload("caller", &data), WAIT)
            .unwrap();
        calls.push((call_number(reply), round));
        let (from, to) = if round % 2 == 0 { (0, 2) } else { (1, 1) };
        mesh[from]
            .node
            .relocate(&id("caller"), RelocateTo::Node(to))
            .unwrap_or_else(|e| panic!("move {round}: {e}"));
    }
    let numbers: Vec<u64> = calls.iter().map(|c| c.0).collect();
    let got = outcomes(&mut client, &numbers);
    for (call, round) in &calls {
        assert_eq!(got[call], format!("ok:echo:{round}"), "call {call}");
    }
}

/// A4: node code outside any Actor (a service thread here) sends to and
/// requests from Actors by ActorId, on its own node and across the mesh,
/// by the same path as an Actor's turn: a request comes back once with the
/// reply, one-way messages keep their order, an Actor that does not exist
/// ends the request with a typed error, and once a route is known no
/// message reads the store.
#[test]
fn a4_node_code_sends_to_and_requests_from_actors_by_id_without_a_store_read_per_message() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[0].node.create_actor("player", &id("here")).unwrap();
    mesh[1].node.create_actor("player", &id("there")).unwrap();
    let caller = mesh[0].node.caller();
    let ask = |to: &str, data: &'static [u8]| {
        caller
            .request(&id(to), CALLED, Bytes::from_static(data), WAIT)
            .wait()
    };
    // A request to an Actor on this node and to one across the mesh: the
    // handler sees no sender, and its reply comes back.
    assert_eq!(ask("here", b"q1").unwrap(), Bytes::from_static(b"echo:q1"));
    assert_eq!(ask("there", b"q2").unwrap(), Bytes::from_static(b"echo:q2"));
    assert_eq!(from_sender(&mesh[0], ""), vec![Bytes::from_static(b">q1")]);
    // The routes are known now: what follows reads no row of the store,
    let before = mesh[0].store.counts().row_operations();
    // one-way messages from another thread keep their order, and a
    // request after them is answered after all of them arrived.
    let sender = caller.clone();
    std::thread::spawn(move || {
        for n in 0..50 {
            let data = Bytes::from(format!("{n}"));
            sender.send(&id("there"), CALLED, data).unwrap();
        }
    })
    .join()
    .unwrap();
    assert_eq!(
        ask("there", b"last").unwrap(),
        Bytes::from_static(b"echo:last")
    );
    let expected: Vec<Bytes> = [Bytes::from_static(b">q2")]
        .into_iter()
        .chain((0..50).map(|n| Bytes::from(format!(">{n}"))))
        .chain([Bytes::from_static(b">last")])
        .collect();
    assert_eq!(from_sender(&mesh[1], ""), expected);
    assert_eq!(mesh[0].store.counts().row_operations(), before);
    // An Actor no node hosts: a typed error, not a hang.
    let error = ask("nobody", b"q3").expect_err("no such Actor");
    assert_eq!(error.reason(), Reason::StaleLocation, "{error}");
    // A payload no client could be sent is refused at once.
    let big = Bytes::from(vec![0u8; 1 << 20]);
    let error = caller
        .request(&id("there"), CALLED, big.clone(), WAIT)
        .wait()
        .expect_err("too large");
    assert_eq!(error.reason(), Reason::MessageTooLarge, "{error}");
    assert_eq!(
        caller.send(&id("there"), CALLED, big).unwrap_err().reason(),
        Reason::MessageTooLarge
    );
}

/// A4 from a session callback: the callback awaits an Actor's reply through
/// `Session::caller()` — on its shard, without blocking it — and answers
/// its client with it; the Actor sees no sender.
#[test]
fn a4_a_session_callback_awaits_an_actors_reply_through_its_caller() {
    use std::sync::Arc;
    use zlink::api::{Actor, ActorContext, ActorMessage, NodeBuilder, ObjectRole, Spot};
    use zlink::error::Error;
    use zlink::ids::{ActorId, PacketKey};
    use zlink::store::{EmbeddedStore, MonotonicClock};

    struct Echo;
    impl Actor for Echo {
        fn handle(
            &mut self,
            _: &mut dyn ActorContext,
            m: ActorMessage,
        ) -> Option<Result<Bytes, Error>> {
            let from = if m.from.is_none() { "node" } else { "actor" };
            Some(Ok(Bytes::from(format!(
                "{from}:{}",
                String::from_utf8_lossy(&m.payload)
            ))))
        }
    }
    struct Entry;
    impl Spot for Entry {
        fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> {
            Ok(())
        }
    }
    const ASK: PacketKey = PacketKey(1);
    let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), WAIT));
    let node = NodeBuilder::new(1)
        .listen("127.0.0.1:0".parse().unwrap())
        .object_role(ObjectRole::Server)
        .location_store(store)
        .enable_actor_dispatch()
        .actor_type("echo", Arc::new(Entry), |_| Box::new(Echo))
        .on_packet(ASK, |session, packet| async move {
            let target = ActorId::new("echo-1").unwrap();
            let reply = session
                .caller()
                .request(&target, PacketKey(9), packet.payload.clone(), WAIT)
                .await;
            session.reply(packet, reply)
        })
        .start()
        .unwrap();
    node.create_actor("echo", &id("echo-1")).unwrap();
    let mut client = Client::connect(node.stream_addr().unwrap()).unwrap();
    let reply = client
        .request(ASK, Bytes::from_static(b"hi"), WAIT)
        .unwrap();
    assert_eq!(reply, Bytes::from_static(b"node:hi"));
}
