//! The WebSocket listener's edges over real sockets (issue 22 item 1;
//! docs/wire.md "WebSocket", docs/threading.md "Timeouts on the edges"):
//! an upgrade not finished is closed at the handshake deadline, never
//! sooner; a message over the client frame limit is refused from its header
//! with a reason; a frame of exactly the limit works; a browser `Origin` off
//! the allow-list gets no upgrade; a message that is not one binary client
//! frame closes with `ProtocolError`. The contract itself (relay, push,
//! replacement, session callbacks) runs over WebSocket as the transport
//! matrix of tests/runtime_support (`ZLINK_CLIENT_TRANSPORT=websocket`).

mod bound;
mod runtime_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use runtime_support::*;
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::{Message, WebSocket};
use zlink::api::{Node, NodeSettings};
use zlink::client::{Client, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::DecodeLimits;

const DEADLINE: Duration = Duration::from_millis(300);
const ALLOWED: &str = "https://game.example";

/// A game node that also listens for WebSocket clients from [`ALLOWED`],
/// with short edge deadlines.
fn game() -> Game {
    start_game(GameOptions {
        settings: Some(NodeSettings {
            client_frame_deadline: DEADLINE,
            websocket_handshake_deadline: DEADLINE,
            ..NodeSettings::default()
        }),
        configure: Some(Arc::new(|builder| {
            builder
                .websocket_listen("127.0.0.1:0".parse().unwrap())
                .websocket_origins([ALLOWED])
        })),
        ..GameOptions::default()
    })
}

/// A game node with `settings` that also listens for WebSocket clients,
/// from any origin.
fn websocket_game(settings: NodeSettings) -> Game {
    start_game(GameOptions {
        settings: Some(settings),
        configure: Some(Arc::new(|builder| {
            builder.websocket_listen("127.0.0.1:0".parse().unwrap())
        })),
        ..GameOptions::default()
    })
}

/// Upgrades a fresh connection to `node`'s WebSocket listener, with an
/// `Origin` header when given.
fn upgrade(node: &Node, origin: Option<&str>) -> Result<WebSocket<TcpStream>, tungstenite::Error> {
    let mut request = ws_url(node).into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    let stream = TcpStream::connect(node.websocket_addr().unwrap()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    match tungstenite::client::client(request, stream) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(error)) => Err(error),
        Err(tungstenite::HandshakeError::Interrupted(_)) => panic!("no answer to the upgrade"),
    }
}

/// Reads until the peer closes; how long that took from `since`.
fn closed_after(mut stream: TcpStream, since: Instant) -> Duration {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return since.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return since.elapsed(),
            Err(e) => panic!("the connection was not closed within {WAIT:?}: {e}"),
        }
    }
}

/// What the server says before it closes: the Close client frame's reason
/// and the WebSocket close code.
fn close_of(ws: &mut WebSocket<TcpStream>) -> (CloseReason, CloseCode) {
    let mut reason = None;
    loop {
        match ws.read() {
            Ok(Message::Binary(message)) => {
                match ClientFrame::decode_message(message, &DecodeLimits::default()) {
                    Ok(ClientFrame::Close { reason: r }) => reason = Some(r),
                    other => panic!("before the close: {other:?}"),
                }
            }
            Ok(Message::Close(Some(frame))) => {
                return (reason.expect("a Close frame first"), frame.code)
            }
            other => panic!("expected the close, got {other:?}"),
        }
    }
}

fn login_websocket(game: &Game, actor: &str) -> Client {
    let mut client = Client::connect_websocket(&ws_url(&game.node)).expect("upgrade");
    assert!(client.is_websocket());
    let reply = client
        .request(LOGIN, Bytes::copy_from_slice(actor.as_bytes()), WAIT)
        .expect("login");
    assert_eq!(reply, Bytes::from_static(b"bound"));
    client
}

/// C1: a WebSocket session keeps the TCP session's contract, side by side
/// on one node: it relays to its Actor and gets the Actor's pushes; a TCP
/// session binding that Actor replaces it (the WebSocket session closes
/// with `Replaced`, §6), the TCP one then relays and gets the pushes; and
/// the TCP session's end notifies the Actor's Spot once (§7). The whole
/// contract suite also runs over WebSocket (the transport matrix).
#[test]
fn c1_a_websocket_session_keeps_the_tcp_contract_relay_push_replacement_and_disconnect() {
    let game = game();
    let mut ws = login_websocket(&game, "p");
    assert_eq!(
        expect_reply(&mut ws, RELAY, "p:over-ws"),
        payload("p", "over-ws")
    );
    let pushed = ws.request(PUSH, payload("p", "to-ws"), WAIT).unwrap();
    assert_eq!(pushed, Bytes::from_static(b"pushed"));
    assert_eq!(
        ws.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("p", "to-ws")
        })
    );

    // A TCP session binds "p": the WebSocket session is replaced.
    let mut tcp = Client::connect(game.node.stream_addr().unwrap()).unwrap();
    assert!(!tcp.is_websocket());
    let bound = tcp.request(LOGIN, Bytes::from_static(b"p"), WAIT).unwrap();
    assert_eq!(bound, Bytes::from_static(b"bound"));
    loop {
        match ws.next_event(WAIT).unwrap() {
            Some(ClientEvent::Closed(reason)) => {
                assert_eq!(reason, Some(CloseReason::Replaced));
                break;
            }
            Some(_) => {}
            None => panic!("the replaced WebSocket session did not close"),
        }
    }
    assert_eq!(
        expect_reply(&mut tcp, RELAY, "p:over-tcp"),
        payload("p", "over-tcp")
    );
    let pushed = tcp.request(PUSH, payload("p", "to-tcp"), WAIT).unwrap();
    assert_eq!(pushed, Bytes::from_static(b"pushed"));
    assert_eq!(
        tcp.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("p", "to-tcp")
        })
    );

    // The TCP session ends: the Actor's Spot hears of it once.
    drop(tcp);
    assert_eq!(game.disconnect_events.recv_timeout(WAIT).unwrap(), "p");
}

#[test]
fn an_upgrade_not_finished_is_closed_at_the_handshake_deadline_never_sooner() {
    let game = game();
    // Given a WebSocket client that logged in and then stays quiet,
    let mut quiet = login_websocket(&game, "q");
    // when one connection sends nothing and another part of an upgrade,
    for first in [&b""[..], &b"GET / HTTP/1.1\r\nHost: game\r\n"[..]] {
        let mut slow = TcpStream::connect(game.node.websocket_addr().unwrap()).unwrap();
        let started = Instant::now();
        slow.write_all(first).unwrap();
        // then each is closed at the deadline, not sooner, with no answer,
        let after = closed_after(slow, started);
        assert!(
            after >= DEADLINE,
            "closed after {after:?}, before the deadline"
        );
    }
    assert_eq!(
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketHandshakeTimeout),
        2
    );
    // while the quiet client, idle for longer than both deadlines, plays on.
    let reply = quiet.request(RELAY, payload("q", "still"), WAIT).unwrap();
    assert_eq!(reply, payload("q", "still"));
}

#[test]
fn a_message_begun_and_not_whole_is_closed_at_the_client_frame_deadline() {
    let game = game();
    let mut ws = upgrade(&game.node, None).unwrap();
    // The header of a 100-byte binary message, and 10 bytes of it.
    let mut bytes = Vec::new();
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Binary),
        mask: Some([1, 2, 3, 4]),
        ..FrameHeader::default()
    };
    header.format(100, &mut bytes).unwrap();
    bytes.extend_from_slice(&[0; 10]);
    let started = Instant::now();
    ws.get_mut().write_all(&bytes).unwrap();
    assert_eq!(
        close_of(&mut ws),
        (CloseReason::ProtocolError, CloseCode::Protocol)
    );
    let after = started.elapsed();
    assert!(
        after >= DEADLINE,
        "closed after {after:?}, before the deadline"
    );
    assert_eq!(
        game.node.flow_counters().get(FlowTrace::ClientFrameTimeout),
        1
    );
}

#[test]
fn a_frame_of_exactly_the_limit_works_and_a_message_over_it_is_refused_from_its_header() {
    let game = game();
    let limit = DecodeLimits::default().frame_len_max as usize;
    // A Request of exactly the limit: kind, flags, key, correlation and the
    // payload's length take 12 bytes of it.
    let mut client = login_websocket(&game, "big");
    let data = "x".repeat(limit - 12 - "big:".len());
    let reply = client.request(RELAY, payload("big", &data), WAIT).unwrap();
    assert_eq!(reply.len(), limit - 12);
    // A message one byte over (the frame, its 4-byte prefix and one more):
    // its header alone is refused; no byte of its payload is ever sent.
    let mut ws = upgrade(&game.node, None).unwrap();
    let mut bytes = Vec::new();
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Binary),
        mask: Some([1, 2, 3, 4]),
        ..FrameHeader::default()
    };
    header.format((limit + 5) as u64, &mut bytes).unwrap();
    ws.get_mut().write_all(&bytes).unwrap();
    assert_eq!(
        close_of(&mut ws),
        (CloseReason::ProtocolError, CloseCode::Size)
    );
    assert_eq!(
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketMessageTooLarge),
        1
    );
    // The session that sent the frame of the limit plays on.
    assert_eq!(
        client.request(RELAY, payload("big", "on"), WAIT).unwrap(),
        payload("big", "on")
    );
}

#[test]
fn a_browser_origin_off_the_list_gets_403_and_no_session() {
    let game = game();
    let refused = upgrade(&game.node, Some("https://evil.example"));
    match refused {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!("an Origin off the list was answered {other:?}"),
    }
    assert_eq!(
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketOriginRefused),
        1
    );
    // The same client from the allowed Origin, or with no Origin (not a
    // browser), is upgraded and served.
    for origin in [Some(ALLOWED), None] {
        let mut ws = upgrade(&game.node, origin).unwrap();
        let mut frame = BytesMut::new();
        Raw::request(SHARD, 1, Bytes::new()).encode(&mut frame);
        ws.send(Message::Binary(frame.freeze())).unwrap();
        match ws.read().unwrap() {
            Message::Binary(message) => assert!(matches!(
                ClientFrame::decode_message(message, &DecodeLimits::default()),
                Ok(ClientFrame::Reply { .. })
            )),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketOriginRefused),
        1
    );
}

#[test]
fn a_message_that_is_not_one_binary_client_frame_closes_with_protocol_error() {
    let game = game();
    let mut two = BytesMut::new();
    Raw::request(SHARD, 1, Bytes::new()).encode(&mut two);
    Raw::request(SHARD, 2, Bytes::new()).encode(&mut two);
    let cases = [
        (Message::Text("hello".into()), CloseCode::Unsupported),
        (Message::Binary(two.freeze()), CloseCode::Protocol),
        (
            Message::Binary(Bytes::from_static(&[0, 0])),
            CloseCode::Protocol,
        ),
    ];
    for (message, code) in cases {
        let mut ws = upgrade(&game.node, None).unwrap();
        ws.send(message).unwrap();
        assert_eq!(close_of(&mut ws), (CloseReason::ProtocolError, code));
    }
    assert_eq!(
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketProtocolError),
        1
    );
}

#[test]
fn a_clients_close_frame_is_answered_and_ends_its_session_as_a_tcp_close_does() {
    let game = game();
    let mut ws = upgrade(&game.node, None).unwrap();
    let mut login = BytesMut::new();
    Raw::request(LOGIN, 1, Bytes::from_static(b"leaver")).encode(&mut login);
    ws.send(Message::Binary(login.freeze())).unwrap();
    assert!(matches!(ws.read().unwrap(), Message::Binary(_)));
    ws.close(None).unwrap();
    match ws.read() {
        Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => {}
        other => panic!("the close was answered {other:?}"),
    }
    // §7: the bound Actor is told, once.
    assert_eq!(game.disconnect_events.recv_timeout(WAIT).unwrap(), "leaver");
}

/// A client that sends WebSocket pings and never reads: every ping is
/// answered with a pong that tungstenite writes on its own, and those
/// answers count against the client's outbound bound as frames do. Once
/// they pass it the connection is cut and counted
/// (`client_outbound_overflow`), so a ping flood cannot grow the node's
/// memory (before, a hostile helper took one node from 82 MB to 1 GB this
/// way). A session beside it is served throughout.
#[test]
fn a_client_that_pings_and_never_reads_is_cut_at_the_outbound_bound() {
    const BOUND: usize = 64 * 1024;
    let game = websocket_game(NodeSettings {
        outbound_max: BOUND,
        ..NodeSettings::default()
    });
    let mut served = login(&game, "served");
    let mut ws = upgrade(&game.node, None).unwrap();
    let overflows = || {
        game.node
            .flow_counters()
            .get(FlowTrace::ClientOutboundOverflow)
    };
    // Given pings of 125 bytes (the largest a control frame carries), sent
    // in batches and never read (at most 64 MB),
    let mut batch = Vec::new();
    for _ in 0..1_000 {
        let mut frame = tungstenite::protocol::frame::Frame::ping(vec![7u8; 125]);
        frame.header_mut().mask = Some([1, 2, 3, 4]);
        frame.format(&mut batch).unwrap();
    }
    for _ in 0..500 {
        if overflows() > 0 || ws.get_mut().write_all(&batch).is_err() {
            break;
        }
    }
    // then the node cuts the connection once, counted,
    wait_until("the pinging reader is cut and counted", || overflows() == 1);
    // and the session beside it is answered.
    let small = Bytes::from_static(b"served:ping flood beside");
    assert_eq!(served.request(RELAY, small.clone(), WAIT).unwrap(), small);
}

/// A connection to the WebSocket listener is no session until its upgrade,
/// so `max_sessions` does not bound it; `websocket_upgrades_max` does: with
/// that many upgrades in progress on the shard, the next connection is
/// closed at its accept and counted (`websocket_upgrades_full`), and once
/// one of them ends, an upgrade is taken again.
#[test]
fn connections_past_the_upgrades_in_progress_are_closed_at_accept_and_counted() {
    const MAX: usize = 4;
    let game = websocket_game(NodeSettings {
        websocket_upgrades_max: MAX,
        ..NodeSettings::default()
    });
    let address = game.node.websocket_addr().unwrap();
    let full = || {
        game.node
            .flow_counters()
            .get(FlowTrace::WebSocketUpgradesFull)
    };
    // Given as many connections as the shard takes upgrades, each with
    // half a request (the shard takes accepts in their order, so these
    // are in progress when the next one comes),
    let mut waiting: Vec<TcpStream> = (0..MAX)
        .map(|_| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .write_all(b"GET /play HTTP/1.1\r\nHost: game\r\n")
                .unwrap();
            stream
        })
        .collect();
    // when one more connects, it is closed at once, counted,
    let over = TcpStream::connect(address).unwrap();
    let _ = closed_after(over, Instant::now());
    assert_eq!(full(), 1);
    // and once one of the waiting ones goes away, a browser is upgraded
    // and served.
    drop(waiting.pop());
    let mut ws = None;
    wait_until("an upgrade is taken again", || {
        ws = upgrade(&game.node, None).ok();
        ws.is_some()
    });
    let mut ws = ws.expect("upgraded");
    let mut frame = BytesMut::new();
    Raw::request(SHARD, 1, Bytes::new()).encode(&mut frame);
    ws.send(Message::Binary(frame.freeze())).unwrap();
    assert!(matches!(ws.read().unwrap(), Message::Binary(_)));
    drop(waiting);
}
