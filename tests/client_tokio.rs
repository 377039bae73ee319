//! The async client on tokio (feature `client-tokio`; docs/clients.md) over
//! a real `zlink-node` process: overlapping requests, pushes, and the
//! reconnect rules — a node killed with SIGKILL and restarted on the same
//! port ends the request in flight `OutcomeUnknown` (never sent again) and
//! the client logs in again by itself; `Replaced` never reconnects.
#![cfg(feature = "client-tokio")]

mod bound;
mod node_support;

use std::time::Duration;

use bytes::Bytes;
use node_support::*;
use zlink::client::tokio::{AsyncClient, AsyncEvent};
use zlink::client::{Client, ClientError, CloseReason, ReconnectPolicy};
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

fn node_config(port: u16) -> String {
    format!(
        "[node]\nrid = 1\nmeshes = [\"lobby\"]\nlog_level = \"warn\"\nshards = 1\npin_cores = false\n\n\
         [listen]\nstream = \"127.0.0.1:{port}\"\n\n[store]\nurl = \"embedded\"\n\n\
         [timeouts]\nshutdown_deadline_ms = 1000\n"
    )
}

fn policy() -> ReconnectPolicy {
    ReconnectPolicy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        ..ReconnectPolicy::default()
    }
}

/// The next event `pick` takes, within [`WAIT`].
async fn next<T>(client: &mut AsyncClient, mut pick: impl FnMut(AsyncEvent) -> Option<T>) -> T {
    tokio::time::timeout(WAIT, async {
        loop {
            let event = client.next_event().await.expect("the client's events");
            if let Some(found) = pick(event) {
                return found;
            }
        }
    })
    .await
    .expect("the event within the wait")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_requests_pushes_and_a_restart_under_the_client() {
    let dir = temp_dir("tokio-client");
    let mut node = NodeProcess::start(1, &write_config(&dir, "a.toml", &node_config(0)));
    let port = node.stream.port();
    let mut client = AsyncClient::connect(node.stream, LOGIN, login_of("ann"), policy())
        .await
        .expect("the first connection and login");
    // Four moves at once: each gets its own reply; every fourth move pushes.
    let step = || client.request(MOVE, move_of("ann", 1, 0), WAIT);
    let (a, b, c, d) = tokio::join!(step(), step(), step(), step());
    let mut xs: Vec<i64> = [a, b, c, d]
        .into_iter()
        .map(|reply| position(&reply.unwrap()).0)
        .collect();
    xs.sort_unstable();
    assert_eq!(xs, [1, 2, 3, 4]);
    let tick = next(&mut client, |e| match e {
        AsyncEvent::Push { key, payload } if key == lobby::TICK => Some(payload),
        _ => None,
    })
    .await;
    let tick: lobby::Tick = typed::decode(&tick).expect("a Tick");
    assert_eq!(tick.moves, 4);
    // A request in flight when the node dies (frozen, then killed).
    node.freeze(true);
    let lost = client.request(MOVE, move_of("ann", 1000, 0), WAIT);
    let killer = async {
        // The request is written before the kill: the frozen node's socket
        // takes it.
        tokio::task::yield_now().await;
        node.kill9();
    };
    let (lost, ()) = tokio::join!(lost, killer);
    match lost {
        Err(ClientError::Remote(error)) => assert_eq!(error.reason(), Reason::OutcomeUnknown),
        other => panic!("the lost request ended {other:?}"),
    }
    next(&mut client, |e| {
        matches!(e, AsyncEvent::Disconnected(_)).then_some(())
    })
    .await;
    let _node = NodeProcess::start(1, &write_config(&dir, "b.toml", &node_config(port)));
    next(&mut client, |e| {
        (e == AsyncEvent::Reconnected).then_some(())
    })
    .await;
    // The lost move was not sent again: the new node's player starts at 0.
    let moved = client
        .request(MOVE, move_of("ann", 0, 1), WAIT)
        .await
        .unwrap();
    assert_eq!(position(&moved), (0, 1), "the lost request ran again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_for_replaced_never_reconnects() {
    let dir = temp_dir("tokio-replaced");
    let node = NodeProcess::start(1, &write_config(&dir, "a.toml", &node_config(0)));
    let mut client = AsyncClient::connect(node.stream, LOGIN, login_of("bob"), policy())
        .await
        .unwrap();
    let stream = node.stream;
    let mut second = tokio::task::spawn_blocking(move || {
        let mut second = Client::connect(stream).unwrap();
        second.request(LOGIN, login_of("bob"), WAIT).unwrap();
        second
    })
    .await
    .unwrap();
    let closed = next(&mut client, |e| match e {
        AsyncEvent::Closed(reason) => Some(reason),
        AsyncEvent::Reconnected => panic!("reconnected after Replaced"),
        _ => None,
    })
    .await;
    assert_eq!(closed, Some(CloseReason::Replaced));
    assert!(client.request(MOVE, Bytes::new(), WAIT).await.is_err());
    let reply = tokio::task::spawn_blocking(move || {
        second.request(MOVE, move_of("bob", 2, 2), WAIT).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(position(&reply), (2, 2));
}
