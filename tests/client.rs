//! The STREAM client against a scripted server on a real loopback socket.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use zlink::client::{Client, ClientError, ClientEvent};
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{Correlation, PacketKey};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::DecodeLimits;

/// Reads frames from the socket until `n` have arrived.
fn read_frames(stream: &mut std::net::TcpStream, n: usize) -> Vec<ClientFrame> {
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut chunk = [0u8; 4096];
    while frames.len() < n {
        let got = stream.read(&mut chunk).expect("server read");
        assert!(got > 0, "client closed early");
        buf.extend_from_slice(&chunk[..got]);
        while let Some(f) = ClientFrame::decode_from(&mut buf, &DecodeLimits::default()).unwrap() {
            frames.push(f);
        }
    }
    frames
}

fn write_frames(stream: &mut std::net::TcpStream, frames: &[ClientFrame]) {
    let mut buf = BytesMut::new();
    for f in frames {
        f.encode(&mut buf);
    }
    stream.write_all(&buf).expect("server write");
}

#[test]
fn client_matches_replies_by_correlation_and_keeps_pushes_queued() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let frames = read_frames(&mut s, 2);
        let correlations: Vec<Correlation> = frames
            .iter()
            .map(|f| match f {
                ClientFrame::Request { correlation, .. } => *correlation,
                other => panic!("expected a request, got {other:?}"),
            })
            .collect();
        // Answer out of order, with a push and a ping in between.
        write_frames(
            &mut s,
            &[
                ClientFrame::Error {
                    correlation: correlations[1],
                    error: Error::new(Reason::SessionNotBound),
                },
                ClientFrame::Push {
                    key: PacketKey(9),
                    payload: Bytes::from_static(b"tick"),
                },
                ClientFrame::Ping { nonce: 77 },
                ClientFrame::Reply {
                    correlation: correlations[0],
                    payload: Bytes::from_static(b"first"),
                },
            ],
        );
        let pong = read_frames(&mut s, 1);
        assert_eq!(pong, vec![ClientFrame::Pong { nonce: 77 }]);
        write_frames(
            &mut s,
            &[ClientFrame::Close {
                reason: CloseReason::Replaced,
            }],
        );
    });

    let mut client = Client::connect(addr).unwrap();
    let first = client
        .start_request(PacketKey(1), Bytes::from_static(b"a"))
        .unwrap();
    let second = client
        .start_request(PacketKey(1), Bytes::from_static(b"b"))
        .unwrap();
    assert_ne!(first, second);
    let reply = client.wait_reply(first, Duration::from_secs(5)).unwrap();
    assert_eq!(reply, Ok(Bytes::from_static(b"first")));
    let error = client
        .wait_reply(second, Duration::from_secs(5))
        .unwrap()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidOperation);
    assert_eq!(
        client.next_event(Duration::from_secs(5)).unwrap(),
        Some(ClientEvent::Push {
            key: PacketKey(9),
            payload: Bytes::from_static(b"tick")
        })
    );
    assert_eq!(
        client.wait_closed(Duration::from_secs(5)).unwrap(),
        Some(CloseReason::Replaced)
    );
    assert!(matches!(
        client.send(PacketKey(1), Bytes::new()),
        Err(ClientError::Closed(Some(CloseReason::Replaced)))
    ));
    server.join().unwrap();
}

#[test]
fn client_times_out_instead_of_hanging() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let server = thread::spawn(move || {
        // Accept, never answer, and hold the connection open until the client is done.
        let (s, _) = listener.accept().unwrap();
        let _ = done_rx.recv();
        drop(s);
    });
    let mut client = Client::connect(addr).unwrap();
    let started = std::time::Instant::now();
    let outcome = client.request(PacketKey(1), Bytes::new(), Duration::from_millis(50));
    assert!(matches!(outcome, Err(ClientError::TimedOut)), "{outcome:?}");
    assert!(started.elapsed() >= Duration::from_millis(50));
    done_tx.send(()).unwrap();
    server.join().unwrap();
}
