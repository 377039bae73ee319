//! `raw-epoll`: the same two-hop forwarder as `raw-uring` on plain tokio
//! current-thread runtimes (epoll), one thread per hop (issue 5 item 2).
//! Node A copies bytes both ways between a client and its connection to
//! node B (`copy_bidirectional`); node B answers each request frame with a
//! reply frame carrying the same correlation and payload.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use super::Running;

struct HopThread {
    thread: JoinHandle<()>,
    stop: oneshot::Sender<()>,
}

struct Forwarder {
    entry: SocketAddr,
    hops: Vec<HopThread>,
}

impl Running for Forwarder {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn io_stack(&self) -> &'static str {
        "epoll (tokio)"
    }

    fn stop(self: Box<Self>) -> Vec<super::Move> {
        for hop in self.hops {
            let _ = hop.stop.send(());
            let _ = hop.thread.join();
        }
        Vec::new()
    }
}

/// Node A's work for one client: its own connection to B, bytes copied.
async fn relay(mut client: TcpStream, upstream: SocketAddr) {
    let Ok(mut up) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = up.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
}

/// Node B's work for one connection: every request answered in kind. The
/// replies of one read go out in one write; one read holds at most what
/// the socket had, so the batch is bounded by the frame limit and the read.
async fn reflect(mut conn: TcpStream) {
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(16 * 1024);
    let mut replies = BytesMut::with_capacity(16 * 1024);
    loop {
        match conn.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            match ClientFrame::decode_from(&mut inbound, &limits) {
                Ok(Some(ClientFrame::Request {
                    correlation,
                    payload,
                    ..
                })) => ClientFrame::Reply {
                    correlation,
                    payload,
                }
                .encode(&mut replies),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if conn.write_all(&replies).await.is_err() {
            return;
        }
        replies.clear();
    }
}

/// Starts a hop on its own current-thread runtime; `serve` handles each
/// accepted connection in its own task.
fn spawn_hop<F, Fut>(name: &str, serve: F) -> Result<(SocketAddr, HopThread), String>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = tx.send(Err(format!("runtime: {e}")));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                let listener = match TcpListener::bind(("127.0.0.1", 0)).await {
                    Ok(listener) => listener,
                    Err(e) => {
                        let _ = tx.send(Err(format!("listen: {e}")));
                        return;
                    }
                };
                let _ = tx.send(listener.local_addr().map_err(|e| e.to_string()));
                let accept = async {
                    while let Ok((conn, _)) = listener.accept().await {
                        let _ = conn.set_nodelay(true);
                        tokio::task::spawn_local(serve(conn));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        })
        .map_err(|e| format!("spawning {name}: {e}"))?;
    let addr = rx
        .recv()
        .map_err(|_| format!("{name} ended during setup"))??;
    Ok((addr, HopThread { thread, stop }))
}

pub fn start() -> Result<Box<dyn Running>, String> {
    let (b_addr, b) = spawn_hop("raw-epoll-b", reflect)?;
    let (entry, a) = spawn_hop("raw-epoll-a", move |client| relay(client, b_addr))?;
    Ok(Box::new(Forwarder {
        entry,
        hops: vec![a, b],
    }))
}
