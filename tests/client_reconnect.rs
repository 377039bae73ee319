//! The Rust client's reconnect rules over a real `zlink-node` process
//! (docs/clients.md "Reconnect rules"; issue 22 item 5): a node killed with
//! SIGKILL and restarted on the same port under a [`ReconnectingClient`]
//! ends the request that was in flight `OutcomeUnknown`, never sends it
//! again, and the client logs in again by itself; a close for `Replaced`
//! never reconnects; a cancelled request's reply is never reported.

mod bound;
mod node_support;

use std::time::Duration;

use bytes::Bytes;
use node_support::*;
use zlink::client::{
    Client, ClientEvent, CloseReason, Endpoint, ReconnectEvent, ReconnectPolicy, ReconnectingClient,
};
use zlink::error::Reason;
use zlink::typed;

/// The lobby game's LOGIN payload for `player` (MessagePack).
fn login_of(player: &str) -> Bytes {
    payload(&lobby::Login {
        player: player.to_owned(),
    })
}

/// The lobby game's MOVE payload of `player` by (`dx`, `dy`).
fn move_of(player: &str, dx: i64, dy: i64) -> Bytes {
    payload(&lobby::Move {
        player: player.to_owned(),
        dx,
        dy,
    })
}

/// The position a MOVE reply carries.
fn position(reply: &[u8]) -> (i64, i64) {
    let at: lobby::Position = typed::decode(reply).expect("a Position");
    (at.x, at.y)
}

/// A node on the embedded store, its STREAM listener on `port` (0: any).
fn node_config(port: u16) -> String {
    format!(
        r#"
[node]
rid = 1
meshes = ["lobby"]
log_level = "warn"
shards = 1
pin_cores = false

[listen]
stream = "127.0.0.1:{port}"

[store]
url = "embedded"

[timeouts]
shutdown_deadline_ms = 1000
"#
    )
}

fn policy() -> ReconnectPolicy {
    ReconnectPolicy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        ..ReconnectPolicy::default()
    }
}

/// The next event of `client` that `pick` takes, within [`WAIT`].
fn next<T>(
    client: &mut ReconnectingClient,
    mut pick: impl FnMut(ReconnectEvent) -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "no such event within {WAIT:?}");
        if let Some(event) = client.next_event(left).expect("the client's events") {
            if let Some(found) = pick(event) {
                return found;
            }
        }
    }
}

#[test]
fn c2_a_node_killed_and_restarted_under_the_client_ends_the_request_in_flight_outcome_unknown_and_it_logs_in_again(
) {
    let dir = temp_dir("reconnect");
    let mut node = NodeProcess::start(1, &write_config(&dir, "a.toml", &node_config(0)));
    let port = node.stream.port();
    let mut client =
        ReconnectingClient::connect(Endpoint::Tcp(node.stream), LOGIN, login_of("ann"), policy())
            .expect("the first connection and login");
    let moved = client.request(MOVE, move_of("ann", 1, 0), WAIT).unwrap();
    assert_eq!(position(&moved), (1, 0));
    // A request in flight when the node dies: frozen, then killed.
    node.freeze(true);
    let lost = client.start_request(MOVE, move_of("ann", 1000, 0)).unwrap();
    node.kill9();
    let outcome = next(&mut client, |e| match e {
        ReconnectEvent::Reply { id, outcome } if id == lost => Some(outcome),
        _ => None,
    });
    let error = outcome.expect_err("a request whose connection dropped");
    assert_eq!(error.reason(), Reason::OutcomeUnknown, "{error}");
    // The node comes back on the same port; the client logs in by itself.
    let restarted = write_config(&dir, "b.toml", &node_config(port));
    let _node = NodeProcess::start(1, &restarted);
    next(&mut client, |e| {
        (e == ReconnectEvent::Reconnected).then_some(())
    });
    // The lost MOVE was not sent again: the new node's player (a fresh one,
    // on the embedded store) moves from the origin.
    let moved = client.request(MOVE, move_of("ann", 0, 1), WAIT).unwrap();
    assert_eq!(position(&moved), (0, 1), "the lost request ran again");
}

#[test]
fn a_close_for_replaced_never_reconnects() {
    let dir = temp_dir("replaced");
    let node = NodeProcess::start(1, &write_config(&dir, "a.toml", &node_config(0)));
    let mut first =
        ReconnectingClient::connect(Endpoint::Tcp(node.stream), LOGIN, login_of("bob"), policy())
            .unwrap();
    // Another connection of the same player takes over (§6).
    let mut second = Client::connect(node.stream).unwrap();
    login(&mut second, "bob").unwrap();
    let closed = next(&mut first, |e| match e {
        ReconnectEvent::Closed(reason) => Some(reason),
        ReconnectEvent::Reconnected => panic!("reconnected after Replaced"),
        _ => None,
    });
    assert_eq!(closed, Some(CloseReason::Replaced));
    assert!(!first.is_connected());
    assert!(first.start_request(MOVE, Bytes::new()).is_err());
    // The second connection is still the player's.
    let moved = second.request(MOVE, move_of("bob", 2, 2), WAIT).unwrap();
    assert_eq!(position(&moved), (2, 2));
}

#[test]
fn a_cancelled_request_is_never_reported_and_later_ones_are() {
    let dir = temp_dir("cancel");
    let node = NodeProcess::start(1, &write_config(&dir, "a.toml", &node_config(0)));
    let mut client = Client::connect(node.stream).unwrap();
    login(&mut client, "cid").unwrap();
    let cancelled = client.start_request(MOVE, move_of("cid", 5, 5)).unwrap();
    assert!(client.cancel(cancelled));
    // A later request's reply comes after the cancelled one's: by then the
    // cancelled reply was read and dropped.
    let later = client.start_request(MOVE, move_of("cid", 1, 1)).unwrap();
    match client.next_event(WAIT).unwrap().expect("the later reply") {
        ClientEvent::Reply {
            correlation,
            outcome,
        } => {
            assert_eq!(correlation, later, "the cancelled request was reported");
            // Cancelling does not undo a request: it ran (5,5 + 1,1).
            assert_eq!(position(&outcome.unwrap()), (6, 6));
        }
        other => panic!("{other:?}"),
    }
    assert!(!client.cancel(later), "its terminal was taken already");
}
