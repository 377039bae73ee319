//! A TCP fault proxy for the fault-injection tests (issue 7): it sits
//! between a client and a node, or between two nodes' link endpoints, and
//! forwards bytes both ways while the test makes the network misbehave —
//! each forwarded chunk delayed, reads cut into small pieces, every live
//! connection reset (RST) or cut (FIN), new connections refused. It knows
//! nothing of the protocol; it does to the bytes what a real network does.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Faults {
    /// Each forwarded chunk waits this long (µs) before it is written.
    delay_micros: AtomicU64,
    /// Reads take at most this many bytes (0: a whole buffer).
    read_max: AtomicUsize,
    /// New connections are reset at once (the path is down).
    refusing: AtomicBool,
    /// Bytes from the target are not read (the way back is stalled: what
    /// the target sends fills its socket, then its own queue).
    stalled_back: AtomicBool,
    /// Both halves of every live connection.
    live: Mutex<Vec<(TcpStream, TcpStream)>>,
    /// Connections accepted (and forwarded) so far.
    accepted: AtomicUsize,
    /// Times the proxy broke connections: each reset or cut of the live
    /// ones, and each refused new one.
    disruptions: AtomicUsize,
    /// Connections numbered below this one (in the order accepted) are
    /// partitioned for good: their bytes are dropped and their closes are
    /// not passed on, as when a host dies or a network splits without a
    /// FIN or RST reaching the other end.
    partitioned_below: AtomicUsize,
    /// Bytes dropped in a partition so far.
    partition_dropped: AtomicUsize,
}

/// A running fault proxy; connect to [`FaultProxy::addr`] instead of the
/// target.
pub struct FaultProxy {
    pub addr: SocketAddr,
    faults: Arc<Faults>,
}

impl FaultProxy {
    /// Starts forwarding connections made to the returned proxy's address
    /// to `target`.
    pub fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let faults = Arc::new(Faults::default());
        let shared = Arc::clone(&faults);
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { return };
                if shared.refusing.load(Ordering::SeqCst) {
                    shared.disruptions.fetch_add(1, Ordering::SeqCst);
                    reset(&inbound);
                    continue;
                }
                let Ok(outbound) = TcpStream::connect(target) else {
                    reset(&inbound);
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let (Ok(a), Ok(b)) = (inbound.try_clone(), outbound.try_clone()) else {
                    continue;
                };
                shared.live.lock().unwrap().push((a, b));
                let index = shared.accepted.fetch_add(1, Ordering::SeqCst);
                pipe(&shared, &inbound, &outbound, false, index);
                pipe(&shared, &outbound, &inbound, true, index);
            }
        });
        FaultProxy { addr, faults }
    }

    /// Every chunk forwarded from now on waits `delay` first (a slow path).
    pub fn set_delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.faults.delay_micros.store(micros, Ordering::SeqCst);
    }

    /// Reads take at most `bytes` at a time from now on (0: no limit): frames
    /// arrive in small pieces.
    pub fn set_read_max(&self, bytes: usize) {
        self.faults.read_max.store(bytes, Ordering::SeqCst);
    }

    /// While `true`, new connections are reset as soon as they arrive.
    pub fn set_refusing(&self, refusing: bool) {
        self.faults.refusing.store(refusing, Ordering::SeqCst);
    }

    /// While `true`, nothing the target sends is read or forwarded; what
    /// it sent meanwhile is forwarded, in order, once it is `false` again.
    pub fn set_stalled_back(&self, stalled: bool) {
        self.faults.stalled_back.store(stalled, Ordering::SeqCst);
    }

    /// Resets every live connection (RST both ways): what was in flight is
    /// lost. Returns how many there were.
    pub fn reset_all(&self) -> usize {
        self.faults.disruptions.fetch_add(1, Ordering::SeqCst);
        let live = std::mem::take(&mut *self.faults.live.lock().unwrap());
        for (a, b) in &live {
            reset(a);
            reset(b);
        }
        live.len()
    }

    /// Closes every live connection in order (FIN both ways).
    pub fn cut_all(&self) -> usize {
        self.faults.disruptions.fetch_add(1, Ordering::SeqCst);
        let live = std::mem::take(&mut *self.faults.live.lock().unwrap());
        for (a, b) in &live {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
        live.len()
    }

    /// Partitions every live connection for good: from now on nothing
    /// crosses it either way and neither end learns that the other closed.
    /// Connections made later are forwarded as usual.
    pub fn partition_live(&self) {
        let accepted = self.faults.accepted.load(Ordering::SeqCst);
        self.faults
            .partitioned_below
            .store(accepted, Ordering::SeqCst);
    }

    /// Bytes the partition dropped so far (something was sent into it).
    pub fn partition_dropped(&self) -> usize {
        self.faults.partition_dropped.load(Ordering::SeqCst)
    }

    /// Times the proxy has broken connections so far (counted before it
    /// breaks them): a connection that closes without a reason is explained
    /// by the network only if this changed since it was opened.
    pub fn disruptions(&self) -> usize {
        self.faults.disruptions.load(Ordering::SeqCst)
    }

    /// Ends every fault in force: no delay, whole reads, connections accepted.
    pub fn heal(&self) {
        self.set_delay(Duration::ZERO);
        self.set_read_max(0);
        self.set_refusing(false);
    }

    /// Connections forwarded so far (a reconnect adds one).
    pub fn accepted(&self) -> usize {
        self.faults.accepted.load(Ordering::SeqCst)
    }
}

/// Closes with SO_LINGER 0: the peer sees a reset, not an orderly close.
fn reset(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
    let _ = stream.shutdown(Shutdown::Both);
}

/// Copies `from` to `to` on a thread of its own, with the faults in force;
/// `back` is the direction from the target; `index` numbers the connection.
fn pipe(faults: &Arc<Faults>, from: &TcpStream, to: &TcpStream, back: bool, index: usize) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let faults = Arc::clone(faults);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            while back && faults.stalled_back.load(Ordering::SeqCst) {
                // The proxy is the stalled network here; no test waits on it.
                std::thread::sleep(Duration::from_millis(1));
            }
            let max = match faults.read_max.load(Ordering::SeqCst) {
                0 => buf.len(),
                n => n.min(buf.len()),
            };
            let partitioned = || index < faults.partitioned_below.load(Ordering::SeqCst);
            let n = match from.read(&mut buf[..max]) {
                // A close does not cross a partition.
                Ok(0) | Err(_) if partitioned() => return,
                Ok(0) | Err(_) => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) if partitioned() => {
                    faults.partition_dropped.fetch_add(n, Ordering::SeqCst);
                    continue;
                }
                Ok(n) => n,
            };
            let delay = faults.delay_micros.load(Ordering::SeqCst);
            if delay > 0 {
                // The proxy is the slow network here; no test waits on it.
                std::thread::sleep(Duration::from_micros(delay));
            }
            if to.write_all(&buf[..n]).is_err() {
                let _ = from.shutdown(Shutdown::Both);
                return;
            }
        }
    });
}
