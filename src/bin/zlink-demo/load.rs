//! The simulated clients: a bounded pool of threads, each driving its share
//! of blocking [`Client`]s round-robin, one request in flight per thread, so
//! that a few hundred connections do not need a few hundred threads on two
//! cores, and each latency sample is one request's own round trip rather
//! than time spent queued behind other clients of the same thread.
//!
//! Every request is tracked by its correlation until its terminal: a reply,
//! a typed error, or the connection's close. A terminal for a correlation
//! already answered is a duplicate; a request whose terminal never comes
//! (the wait outlasts the server's relay deadline) is a silent drop.
//!
//! The requests are the lobby's typed messages (src/bin/lobby/messages.rs),
//! MessagePack both ways. Each is sent with `start_request` and its
//! terminal awaited event by event rather than with `Client::call`, so that
//! every other event meanwhile (a push, a duplicate or unsolicited reply, a
//! close) is filed as it comes: [`call`] is `Client::call` with that
//! bookkeeping.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use zlink::client::{Client, ClientEvent, CloseReason};
use zlink::error::{Error, Reason};
use zlink::ids::{Correlation, PacketKey};
use zlink::typed::{self, Message};

use crate::game::{Login, Move, Position, Where, REPLACED_NOTICE, TICK};

/// How long a client waits for a terminal. Longer than the nodes' relay and
/// bind deadlines (5 s), so a request still unanswered then was dropped.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How long a replaced client waits for its close: the callback plus the
/// spec's 100 ms, with room for a loaded machine.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a drain waits for one more event before it calls a client quiet.
const DRAIN_WAIT: Duration = Duration::from_millis(1);
/// How long a client waits, after its last request, for ticks its player
/// pushed that have not arrived yet.
const PUSH_WAIT: Duration = Duration::from_secs(2);
/// A login refused because its player is mid-relocation is sent again after
/// this long, at most this many times.
const LOGIN_RETRY_AFTER: Duration = Duration::from_millis(5);
const LOGIN_RETRIES: usize = 400;
/// Anomalies described in full in the report; the rest are only counted.
const MAX_NOTES: usize = 8;

/// The node (0-based) client `index` connects to. Players are hosted on node
/// `index % 3`; this spreads sessions so that a third of the clients relay
/// to a player on their own node and two thirds across a link.
pub fn session_node(index: usize, nodes: usize) -> usize {
    (index + index / nodes) % nodes
}

/// The node player `index` is hosted on at the start: a room's players
/// live with their room (§5: one SpotWide gate), on its first player's node.
pub fn host_node(index: usize, nodes: usize) -> usize {
    room_of(index).map_or(index, |room| room * 10) % nodes
}

/// The room of player `index`, if it has one: players `10k` and `10k + 2`
/// share the SpotWide room `k` (a fifth of the players), which moves as one
/// unit. Both are even, so one mover owns the whole room.
pub fn room_of(index: usize) -> Option<usize> {
    matches!(index % 10, 0 | 2).then_some(index / 10)
}

/// The SpotId of room `room`.
pub fn room_name(room: usize) -> String {
    format!("room-{room}")
}

/// Whether client `index` is replaced by a second login (a quarter are).
pub fn is_replaced(index: usize) -> bool {
    index % 4 == 3
}

/// Whether client `index` disconnects and reconnects to another node
/// midway (an eighth, none of them replaced).
pub fn is_reconnected(index: usize) -> bool {
    index % 8 == 1
}

/// The player of client `index`: a room's players are named under it
/// (`room-3/player-30`), so they are placed with it.
pub fn player_name(index: usize) -> String {
    match room_of(index) {
        Some(room) => format!("{}/player-{index}", room_name(room)),
        None => format!("player-{index}"),
    }
}

/// What one client thread (and, merged, the whole run) observed.
pub struct Tally {
    pub connected: u64,
    pub connect_failures: u64,
    pub logins_sent: u64,
    pub logins_ok: u64,
    /// Clients that closed their connection and logged in again elsewhere.
    pub reconnects: u64,
    /// Logins refused while their player was being relocated (X5), and
    /// sent again.
    pub login_retries: u64,
    pub moves_sent: u64,
    pub moves_ok: u64,
    pub wheres_sent: u64,
    pub wheres_ok: u64,
    /// Ticks the players pushed for these clients that never arrived.
    pub ticks_missing: u64,
    /// Typed errors, by kind and reason.
    pub errors: BTreeMap<(String, String), u64>,
    /// Requests whose connection closed, with a reason, before their terminal.
    pub ended_by_close: BTreeMap<String, u64>,
    /// Requests sent that never got a terminal.
    pub dropped: u64,
    /// Terminals for a correlation that had already been answered.
    pub duplicated: u64,
    /// Terminals for a correlation that was never sent.
    pub unsolicited: u64,
    /// MOVE replies whose position is not the sum of this player's accepted
    /// steps: a MOVE applied twice, or one lost after it was answered.
    pub position_mismatches: u64,
    pub ticks: u64,
    pub replaced_notices: u64,
    pub other_pushes: u64,
    pub replacements_expected: u64,
    pub replacements_seen: u64,
    /// Replaced clients that closed with another reason, or not at all.
    pub replacements_missed: u64,
    /// A MOVE from a replaced session right after the new login: refused
    /// with a typed error, ended by the close, or (a contract breach) accepted.
    pub late_moves_refused: u64,
    pub late_moves_closed: u64,
    pub late_moves_accepted: u64,
    /// Live (not replaced) clients that the server closed.
    pub unexpected_closes: u64,
    /// Sessions still open and bound to their player before the final
    /// disconnect: the `on_disconnect_actor` calls it must cause (§7).
    pub live_bindings: u64,
    pub move_latency: Histogram<u64>,
    pub login_latency: Histogram<u64>,
    pub notes: Vec<String>,
}

/// Latencies are kept in µs from 1 µs to 60 s with 3 significant digits.
fn histogram() -> Histogram<u64> {
    // Constant bounds: this fails only if they are edited into nonsense.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid constant histogram bounds")
}

impl Tally {
    pub fn new() -> Self {
        Self {
            connected: 0,
            connect_failures: 0,
            logins_sent: 0,
            logins_ok: 0,
            login_retries: 0,
            reconnects: 0,
            moves_sent: 0,
            moves_ok: 0,
            wheres_sent: 0,
            wheres_ok: 0,
            ticks_missing: 0,
            errors: BTreeMap::new(),
            ended_by_close: BTreeMap::new(),
            dropped: 0,
            duplicated: 0,
            unsolicited: 0,
            position_mismatches: 0,
            ticks: 0,
            replaced_notices: 0,
            other_pushes: 0,
            replacements_expected: 0,
            replacements_seen: 0,
            replacements_missed: 0,
            late_moves_refused: 0,
            late_moves_closed: 0,
            late_moves_accepted: 0,
            unexpected_closes: 0,
            live_bindings: 0,
            move_latency: histogram(),
            login_latency: histogram(),
            notes: Vec::new(),
        }
    }

    fn note(&mut self, text: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(text);
        }
    }

    /// Adds another thread's tally to this one.
    pub fn merge(&mut self, other: Tally) {
        self.connected += other.connected;
        self.connect_failures += other.connect_failures;
        self.logins_sent += other.logins_sent;
        self.logins_ok += other.logins_ok;
        self.login_retries += other.login_retries;
        self.reconnects += other.reconnects;
        self.moves_sent += other.moves_sent;
        self.moves_ok += other.moves_ok;
        self.wheres_sent += other.wheres_sent;
        self.wheres_ok += other.wheres_ok;
        self.ticks_missing += other.ticks_missing;
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
        for (k, n) in other.ended_by_close {
            *self.ended_by_close.entry(k).or_default() += n;
        }
        self.dropped += other.dropped;
        self.duplicated += other.duplicated;
        self.unsolicited += other.unsolicited;
        self.position_mismatches += other.position_mismatches;
        self.ticks += other.ticks;
        self.replaced_notices += other.replaced_notices;
        self.other_pushes += other.other_pushes;
        self.replacements_expected += other.replacements_expected;
        self.replacements_seen += other.replacements_seen;
        self.replacements_missed += other.replacements_missed;
        self.late_moves_refused += other.late_moves_refused;
        self.late_moves_closed += other.late_moves_closed;
        self.late_moves_accepted += other.late_moves_accepted;
        self.unexpected_closes += other.unexpected_closes;
        self.live_bindings += other.live_bindings;
        if self.move_latency.add(&other.move_latency).is_err()
            || self.login_latency.add(&other.login_latency).is_err()
        {
            self.note("a latency histogram could not be merged".to_owned());
        }
        for note in other.notes {
            self.note(note);
        }
    }

    pub fn requests_sent(&self) -> u64 {
        self.logins_sent + self.moves_sent + self.wheres_sent
    }

    pub fn replies(&self) -> u64 {
        self.logins_ok + self.moves_ok + self.late_moves_accepted + self.wheres_ok
    }

    pub fn typed_errors(&self) -> u64 {
        self.errors.values().sum()
    }

    fn error(&mut self, error: Error) {
        let key = (
            format!("{:?}", error.kind()),
            format!("{:?}", error.reason()),
        );
        *self.errors.entry(key).or_default() += 1;
    }

    fn push(&mut self, key: PacketKey) {
        match key {
            TICK => self.ticks += 1,
            REPLACED_NOTICE => self.replaced_notices += 1,
            _ => self.other_pushes += 1,
        }
    }
}

/// The end of one request, as the client saw it.
enum Outcome<T> {
    Reply(T),
    Error(Error),
    /// The connection closed before the terminal.
    Closed(Option<CloseReason>),
    /// Not sent, or no terminal: already counted and noted.
    Lost,
}

/// One connection and the correlations it has answered.
struct Conn {
    client: Client,
    node: usize,
    answered: HashSet<Correlation>,
    closed: Option<Option<CloseReason>>,
    logged_in: bool,
    /// Ticks received on this connection.
    ticks: u64,
}

/// One simulated player's client.
struct Sim {
    index: usize,
    player: String,
    conn: Option<Conn>,
    /// The position the player must be at: the sum of its accepted steps.
    position: (i64, i64),
    steps: usize,
    /// MOVEs the player accepted from this client's sessions: it pushed a
    /// tick on every fourth.
    accepted: u64,
    /// Ticks received on sessions that were replaced.
    ticks_before: u64,
}

impl Sim {
    /// The deterministic step of this client's next MOVE, in -1..=1.
    fn next_step(&mut self) -> (i64, i64) {
        self.steps += 1;
        let spread = |n: usize| (n % 3) as i64 - 1;
        (
            spread(self.index + self.steps),
            spread(self.index * 7 + self.steps * 5),
        )
    }
}

/// Which part of the run the threads are in; they meet at a barrier after
/// each, so the main thread can time phases and read the store's counts.
pub const PHASES: [&str; 6] = [
    "connect and log in",
    "MOVE rounds, first half",
    "replace a quarter, reconnect an eighth",
    "MOVE rounds, second half",
    "final WHERE, wait for owed pushes",
    "disconnect",
];

/// The work of one client thread: `indices` are its clients.
pub fn run_thread(
    indices: Vec<usize>,
    addrs: &[SocketAddr],
    rounds: usize,
    barrier: &Barrier,
) -> Tally {
    let mut tally = Tally::new();
    let mut sims: Vec<Sim> = indices
        .into_iter()
        .map(|index| Sim {
            index,
            player: player_name(index),
            conn: None,
            position: (0, 0),
            steps: 0,
            accepted: 0,
            ticks_before: 0,
        })
        .collect();
    let nodes = addrs.len();

    // Connect and log in.
    for sim in &mut sims {
        let node = session_node(sim.index, nodes);
        sim.conn = connect_and_login(&mut tally, addrs, node, &sim.player);
    }
    barrier.wait();

    let first_half = rounds / 2;
    move_rounds(&mut tally, &mut sims, first_half);
    barrier.wait();

    replace_quarter(&mut tally, &mut sims, addrs);
    reconnect_eighth(&mut tally, &mut sims, addrs);
    barrier.wait();

    move_rounds(&mut tally, &mut sims, rounds - first_half);
    barrier.wait();

    for sim in &mut sims {
        final_check(&mut tally, sim);
    }
    barrier.wait();

    // Disconnect, once the main thread has counted the disconnect callbacks
    // so far: dropping a client closes its socket.
    barrier.wait();
    sims.clear();
    barrier.wait();
    tally
}

/// The end of a client's run: a WHERE that must find the player where the
/// accepted MOVEs put it, then a wait for any tick the player pushed that
/// has not arrived. The WHERE's wait also files any late duplicate of an
/// earlier reply. Waiting only for what is owed keeps the blocking client's
/// read timeouts (a scheduler tick at least) off the quiet clients.
fn final_check(tally: &mut Tally, sim: &mut Sim) {
    let Some(conn) = sim.conn.as_mut() else {
        return;
    };
    if conn.closed.is_none() && conn.logged_in {
        tally.wheres_sent += 1;
        let at = Where {
            player: sim.player.clone(),
        };
        if let Outcome::Reply(reply) = call(tally, conn, &at) {
            tally.wheres_ok += 1;
            if (reply.x, reply.y) != sim.position {
                tally.position_mismatches += 1;
                tally.note(format!(
                    "{} is finally at {reply:?}, expected {:?}",
                    sim.player, sim.position
                ));
            }
        }
    }
    let owed = sim.accepted / 4;
    let deadline = Instant::now() + PUSH_WAIT;
    while sim.ticks_before + conn.ticks < owed && conn.closed.is_none() && Instant::now() < deadline
    {
        drain(tally, conn, DRAIN_WAIT);
    }
    let received = sim.ticks_before + conn.ticks;
    if received < owed {
        tally.ticks_missing += owed - received;
        tally.note(format!(
            "{}: {received} of {owed} ticks arrived",
            sim.player
        ));
    }
    if conn.closed.is_some() {
        tally.unexpected_closes += 1;
        tally.note(format!(
            "{} was closed by the server ({:?})",
            sim.player, conn.closed
        ));
    } else if conn.logged_in {
        tally.live_bindings += 1;
    }
}

fn connect_and_login(
    tally: &mut Tally,
    addrs: &[SocketAddr],
    node: usize,
    player: &str,
) -> Option<Conn> {
    let Some(&addr) = addrs.get(node) else {
        tally.connect_failures += 1;
        return None;
    };
    let client = match Client::connect(addr) {
        Ok(client) => client,
        Err(e) => {
            tally.connect_failures += 1;
            tally.note(format!("{player}: connect to node {}: {e}", node + 1));
            return None;
        }
    };
    tally.connected += 1;
    let mut conn = Conn {
        client,
        node,
        answered: HashSet::new(),
        closed: None,
        logged_in: false,
        ticks: 0,
    };
    let started = Instant::now();
    for attempt in 0..=LOGIN_RETRIES {
        tally.logins_sent += 1;
        let login = Login {
            player: player.to_owned(),
        };
        match call(tally, &mut conn, &login) {
            Outcome::Reply(_) => {
                tally.logins_ok += 1;
                conn.logged_in = true;
                record(&mut tally.login_latency, started);
                break;
            }
            // §12, X5: the player is being relocated; its owner refused the
            // bind before the commit. A game client tries again shortly.
            Outcome::Error(error)
                if error.reason() == Reason::RelocationSealed && attempt < LOGIN_RETRIES =>
            {
                tally.login_retries += 1;
                std::thread::sleep(LOGIN_RETRY_AFTER);
            }
            Outcome::Error(_) | Outcome::Closed(_) | Outcome::Lost => {
                tally.note(format!("{player}: login on node {} failed", node + 1));
                break;
            }
        }
    }
    Some(conn)
}

fn move_rounds(tally: &mut Tally, sims: &mut [Sim], rounds: usize) {
    for _ in 0..rounds {
        for sim in sims.iter_mut() {
            let (dx, dy) = sim.next_step();
            let Some(conn) = sim.conn.as_mut() else {
                continue;
            };
            if conn.closed.is_some() {
                continue;
            }
            let step = Move {
                player: sim.player.clone(),
                dx,
                dy,
            };
            tally.moves_sent += 1;
            let started = Instant::now();
            match call(tally, conn, &step) {
                Outcome::Reply(Position { x, y }) => {
                    record(&mut tally.move_latency, started);
                    tally.moves_ok += 1;
                    sim.accepted += 1;
                    sim.position.0 += dx;
                    sim.position.1 += dy;
                    if (x, y) != sim.position {
                        tally.position_mismatches += 1;
                        tally.note(format!(
                            "{} is at {x},{y}, expected {:?}",
                            sim.player, sim.position
                        ));
                        // Follow the server from here, so that one anomaly
                        // is counted once.
                        sim.position = (x, y);
                    }
                }
                Outcome::Closed(reason) => {
                    // Counted as an unexpected close after the last round,
                    // unless it is a replaced session's (checked there).
                    tally.note(format!("{} closed during a MOVE ({reason:?})", sim.player));
                }
                Outcome::Error(_) | Outcome::Lost => {}
            }
        }
    }
}

/// Logs a quarter of the players in a second time from the next node, sends
/// one late MOVE on each old session, then waits for every old session's
/// close. The closes are awaited after all the new logins, so that the
/// spec's 100 ms close delays run side by side rather than one after another.
fn replace_quarter(tally: &mut Tally, sims: &mut [Sim], addrs: &[SocketAddr]) {
    let nodes = addrs.len();
    let mut pending: Vec<(usize, Conn, bool)> = Vec::new();
    for (slot, sim) in sims.iter_mut().enumerate() {
        if !is_replaced(sim.index) {
            continue;
        }
        let Some(mut old) = sim.conn.take() else {
            continue;
        };
        tally.replacements_expected += 1;
        let node = (old.node + 1) % nodes;
        let Some(new) = connect_and_login(tally, addrs, node, &sim.player) else {
            sim.conn = Some(old);
            continue;
        };
        sim.conn = Some(new);
        // A late MOVE from the replaced session: the player must not move.
        let late = Move {
            player: sim.player.clone(),
            dx: 100,
            dy: 100,
        };
        tally.moves_sent += 1;
        let mut seen_close = false;
        match call(tally, &mut old, &late) {
            Outcome::Error(_) => tally.late_moves_refused += 1,
            Outcome::Reply(_) => {
                tally.late_moves_accepted += 1;
                sim.accepted += 1;
                sim.position.0 += 100;
                sim.position.1 += 100;
                tally.note(format!(
                    "{}: a replaced session's MOVE was accepted",
                    sim.player
                ));
            }
            Outcome::Closed(reason) => {
                tally.late_moves_closed += 1;
                seen_close = reason == Some(CloseReason::Replaced);
            }
            Outcome::Lost => {}
        }
        pending.push((slot, old, seen_close));
    }
    for (slot, mut old, seen_close) in pending {
        let reason = if seen_close {
            Some(Some(CloseReason::Replaced))
        } else {
            wait_closed(tally, &mut old)
        };
        let player = match sims.get_mut(slot) {
            Some(sim) => {
                sim.ticks_before += old.ticks;
                sim.player.clone()
            }
            None => String::new(),
        };
        match reason {
            Some(Some(CloseReason::Replaced)) => tally.replacements_seen += 1,
            other => {
                tally.replacements_missed += 1;
                tally.note(format!(
                    "{player}: the replaced session ended with {other:?}, not Close(Replaced)"
                ));
            }
        }
    }
}

/// An eighth of the clients close their connection and connect again to the
/// next node, logging in anew (§9: a reconnect is a new session; D4: it
/// gets no old binding back, it binds again). Every tick their player owes
/// them arrived before the MOVE reply that caused it, so draining what has
/// arrived collects them all before the old connection goes.
fn reconnect_eighth(tally: &mut Tally, sims: &mut [Sim], addrs: &[SocketAddr]) {
    let nodes = addrs.len();
    for sim in sims.iter_mut().filter(|s| is_reconnected(s.index)) {
        let Some(mut old) = sim.conn.take() else {
            continue;
        };
        drain(tally, &mut old, DRAIN_WAIT);
        sim.ticks_before += old.ticks;
        let node = (old.node + 1) % nodes;
        drop(old);
        tally.reconnects += 1;
        sim.conn = connect_and_login(tally, addrs, node, &sim.player);
    }
}

/// Waits for the server to close `conn`, counting what arrives meanwhile;
/// `None` if it did not close in time.
fn wait_closed(tally: &mut Tally, conn: &mut Conn) -> Option<Option<CloseReason>> {
    let deadline = Instant::now() + CLOSE_WAIT;
    while conn.closed.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match conn.client.next_event(left) {
            Ok(Some(event)) => file(tally, conn, event),
            Ok(None) => {}
            Err(e) => {
                tally.note(format!("waiting for a close: {e}"));
                return None;
            }
        }
    }
    conn.closed
}

/// Reads what has arrived until the client is quiet for `wait`.
fn drain(tally: &mut Tally, conn: &mut Conn, wait: Duration) {
    while conn.closed.is_none() {
        match conn.client.next_event(wait) {
            Ok(Some(event)) => file(tally, conn, event),
            Ok(None) => return,
            Err(e) => {
                tally.note(format!("draining: {e}"));
                return;
            }
        }
    }
}

/// Files an event that is not the terminal being waited for.
fn file(tally: &mut Tally, conn: &mut Conn, event: ClientEvent) {
    match event {
        ClientEvent::Push { key, .. } => {
            if key == TICK {
                conn.ticks += 1;
            }
            tally.push(key);
        }
        ClientEvent::Reply { correlation, .. } => {
            if conn.answered.contains(&correlation) {
                tally.duplicated += 1;
                tally.note(format!("correlation {} answered twice", correlation.0));
            } else {
                tally.unsolicited += 1;
                tally.note(format!("a reply for unsent correlation {}", correlation.0));
            }
        }
        ClientEvent::Closed(reason) => conn.closed = Some(reason),
    }
}

/// Sends one typed request and waits for its terminal, filing every other
/// event; the reply decoded as `M::Reply`. A message that does not encode
/// or a reply that does not decode is a typed error (`MalformedPayload`),
/// which fails the run.
fn call<M: Message>(tally: &mut Tally, conn: &mut Conn, message: &M) -> Outcome<M::Reply> {
    let payload = match typed::encode(message) {
        Ok(payload) => payload,
        Err(error) => {
            tally.error(error.clone());
            return Outcome::Error(error);
        }
    };
    let correlation = match conn.client.start_request(M::KEY, payload) {
        Ok(correlation) => correlation,
        Err(e) => {
            // Never reached the server: not a request without a terminal,
            // but the run must not pass as if it had been answered.
            tally.dropped += 1;
            tally.note(format!("could not send on node {}: {e}", conn.node + 1));
            return Outcome::Lost;
        }
    };
    let deadline = Instant::now() + REQUEST_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tally.dropped += 1;
            tally.note(format!(
                "no terminal for correlation {} on node {} within {REQUEST_WAIT:?}",
                correlation.0,
                conn.node + 1
            ));
            return Outcome::Lost;
        }
        let event = match conn.client.next_event(left) {
            Ok(Some(event)) => event,
            Ok(None) => continue,
            Err(e) => {
                tally.dropped += 1;
                tally.note(format!("correlation {}: {e}", correlation.0));
                return Outcome::Lost;
            }
        };
        match event {
            ClientEvent::Reply {
                correlation: c,
                outcome,
            } if c == correlation => {
                conn.answered.insert(c);
                return match typed::decode_reply::<M>(outcome) {
                    Ok(reply) => Outcome::Reply(reply),
                    Err(error) => {
                        tally.error(error.clone());
                        Outcome::Error(error)
                    }
                };
            }
            ClientEvent::Closed(reason) => {
                conn.closed = Some(reason);
                match reason {
                    Some(reason) => {
                        *tally
                            .ended_by_close
                            .entry(format!("{reason:?}"))
                            .or_default() += 1;
                    }
                    None => {
                        tally.dropped += 1;
                        tally.note(format!(
                            "correlation {}: the connection ended without a close reason",
                            correlation.0
                        ));
                    }
                }
                return Outcome::Closed(reason);
            }
            other => file(tally, conn, other),
        }
    }
}

fn record(histogram: &mut Histogram<u64>, started: Instant) {
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    histogram.saturating_record(micros.max(1));
}
