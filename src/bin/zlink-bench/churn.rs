//! The `churn` workload's session driver (issue 5 item 1): a player's
//! sessions come and go as players' do, and each operation is timed by its
//! kind. One cycle, repeated until the measured window ends:
//!
//! - `login`: connect, LOGIN (which binds the player) and one RELAY that
//!   proves the binding carries requests;
//! - `replace`: a second connection logs in as the same player (§6: the new
//!   binding replaces the first at once) and its RELAY is answered; the
//!   first connection is then dropped;
//! - `disconnect`: the client closes the current connection (its FIN is
//!   sent); the server's cleanup (§7) is what the next login meets;
//! - `reconnect`: a new connection logs in and relays (§9: a new session,
//!   nothing carried over), then closes; the next cycle's `login` follows.
//!
//! Every operation is bounded by [`OP_WAIT`]; one that fails ends the
//! session's run, counted with its reason. Operations begun inside the
//! measured window are measured.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use zlink::ids::Correlation;
use zlink::wire::client::ClientFrame;

use crate::args::Workload;
use crate::client::{answer, login, login_payload, Phases, Tally, RELAY};

/// How long one operation may take before the session counts it lost.
const OP_WAIT: Duration = Duration::from_secs(10);

/// Why an operation did not complete: lost (no answer in time) or failed.
enum Failure {
    Lost(String),
    Failed(String),
}

async fn bounded<T>(
    what: &str,
    op: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(OP_WAIT, op).await {
        Err(_) => Err(Failure::Lost(format!("{what}: no answer in {OP_WAIT:?}"))),
        Ok(Err(why)) => Err(Failure::Failed(format!("{what}: {why}"))),
        Ok(Ok(value)) => Ok(value),
    }
}

/// One RELAY on `stream`, answered with its own payload.
async fn relay_once(stream: &mut TcpStream, seq: u32, payload_len: usize) -> Result<(), String> {
    let mut payload = BytesMut::zeroed(payload_len.max(8));
    payload[..4].copy_from_slice(&seq.to_le_bytes());
    let payload = payload.freeze();
    let mut out = BytesMut::new();
    ClientFrame::Request {
        key: RELAY,
        correlation: Correlation(seq),
        payload: payload.clone(),
    }
    .encode(&mut out);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("relay write: {e}"))?;
    let reply: Bytes = answer(stream, Correlation(seq)).await?;
    if reply != payload {
        return Err("the relay reply carries another payload".to_owned());
    }
    Ok(())
}

/// Connects, logs in as the session's player and relays once.
async fn log_in(
    entry: SocketAddr,
    payload: &str,
    seq: u32,
    payload_len: usize,
) -> Result<TcpStream, String> {
    let mut stream = login(entry, payload).await?;
    relay_once(&mut stream, seq, payload_len).await?;
    Ok(stream)
}

/// Records `kind` begun at `start` when it began inside the measured window.
fn measure(tally: &RefCell<Tally>, phases: &Phases, kind: &'static str, start: Instant) {
    if start >= phases.warm_end && start < phases.measure_end {
        tally.borrow_mut().record(kind, start.elapsed());
    }
}

/// Runs session `index`'s churn cycles until the measured window ends.
pub async fn drive(
    entry: SocketAddr,
    index: usize,
    payload_len: usize,
    phases: Phases,
    tally: Rc<RefCell<Tally>>,
) {
    let player = login_payload(index, Workload::Churn);
    let mut seq = 0u32;
    let mut next = || {
        seq = seq.wrapping_add(1).max(1);
        seq
    };
    let outcome: Result<(), Failure> = async {
        while Instant::now() < phases.measure_end {
            let start = Instant::now();
            let first = bounded("login", log_in(entry, &player, next(), payload_len)).await?;
            measure(&tally, &phases, "login", start);

            let start = Instant::now();
            let mut second =
                bounded("replace", log_in(entry, &player, next(), payload_len)).await?;
            measure(&tally, &phases, "replace", start);
            drop(first);

            let start = Instant::now();
            bounded("disconnect", async {
                second.shutdown().await.map_err(|e| format!("close: {e}"))
            })
            .await?;
            drop(second);
            measure(&tally, &phases, "disconnect", start);

            let start = Instant::now();
            let third = bounded("reconnect", log_in(entry, &player, next(), payload_len)).await?;
            measure(&tally, &phases, "reconnect", start);
            drop(third);
        }
        Ok(())
    }
    .await;
    let mut t = tally.borrow_mut();
    match outcome {
        Ok(()) => {}
        Err(Failure::Lost(why)) => {
            t.lost += 1;
            t.note(format!("{player}: {why}"));
        }
        Err(Failure::Failed(why)) => {
            t.failed_sessions += 1;
            t.note(format!("{player}: {why}"));
        }
    }
}
