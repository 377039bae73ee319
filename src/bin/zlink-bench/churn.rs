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

/// Ephemeral ports churn wants from the machine.
const PORTS_WANTED: u32 = 50_000;

/// A warning for the report when this machine's ephemeral ports are
/// short for churn, `None` when they are not or cannot be read. Every
/// operation opens a connection that the client closes first, so its
/// TIME_WAIT holds the client's port until the kernel reuses it for a new
/// connect (loopback reuse, `tcp_tw_reuse` 1 or 2) or for 60 s (0). At
/// churn's 15–25k connections per second the default range (32768–60999)
/// fills, and `connect` then scans it on the load client's one thread,
/// stalling every session at once for tens of ms whatever system runs
/// (measured on zlink and tokio: p99.9 104 ms, and 10.6 ms with
/// 10000–65535; docs/PERFORMANCE.md "churn and the ephemeral ports").
pub fn port_range_warning() -> Option<String> {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok();
    ports_warning(
        &read("ip_local_port_range")?,
        read("tcp_tw_reuse").as_deref(),
    )
}

/// [`port_range_warning`] for the files' texts: the range ("low high") and
/// `tcp_tw_reuse` ("0", "1" or "2"), when readable.
fn ports_warning(range: &str, tw_reuse: Option<&str>) -> Option<String> {
    let mut bounds = range.split_whitespace().map(str::parse::<u32>);
    let (Some(Ok(low)), Some(Ok(high))) = (bounds.next(), bounds.next()) else {
        return None;
    };
    let ports = high.checked_sub(low)? + 1;
    if tw_reuse.map(str::trim) == Some("0") {
        return Some(format!(
            "tcp_tw_reuse is 0: churn's closed connections keep their client ports for 60 s and fill the ephemeral range ({low}-{high}, {ports} ports) within seconds, and the load client's connect then stalls every session; for churn: sysctl -w net.ipv4.tcp_tw_reuse=2 net.ipv4.ip_local_port_range='10000 65535'"
        ));
    }
    (ports < PORTS_WANTED).then(|| {
        format!(
            "the ephemeral port range is {low}-{high} ({ports} ports): churn's closed connections fill it (TIME_WAIT), and the load client's connect then stalls every session; widen it for churn: sysctl -w net.ipv4.ip_local_port_range='10000 65535'"
        )
    })
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

#[cfg(test)]
mod tests {
    use super::ports_warning;

    #[test]
    fn the_default_port_range_is_warned_about_and_a_wide_one_is_not() {
        let warning = ports_warning("32768\t60999\n", Some("2\n")).expect("a warning");
        assert!(warning.contains("32768-60999 (28232 ports)"), "{warning}");
        assert!(ports_warning("10000 65535", Some("2")).is_none());
        assert!(ports_warning("10000 65535", None).is_none());
    }

    #[test]
    fn no_time_wait_reuse_is_warned_about_even_with_a_wide_range() {
        let warning = ports_warning("10000 65535", Some("0\n")).expect("a warning");
        assert!(warning.contains("tcp_tw_reuse is 0"), "{warning}");
    }

    #[test]
    fn an_unreadable_port_range_gives_no_warning() {
        assert!(ports_warning("", Some("0")).is_none());
        assert!(ports_warning("low high", None).is_none());
        assert!(ports_warning("60999 32768", None).is_none());
    }
}
