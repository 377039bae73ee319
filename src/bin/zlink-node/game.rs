//! The sample game every zlink-node runs out of the box: the lobby game
//! shared with zlink-demo (src/bin/lobby/game.rs). Its messages are
//! MessagePack maps (src/bin/lobby/messages.rs, docs/wire.md "The lobby
//! game's messages"): a client sends LOGIN (key 1) `{player}`, then MOVE
//! (key 2) `{player, dx, dy}` and WHERE (key 3) `{player}`, relayed to the
//! player wherever it lives, which answers `{x, y}`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

#[path = "../lobby/game.rs"]
mod lobby;
pub use lobby::{register, NodeStats};

/// One line of what the game code on this node counted, for the stop
/// report: `moves=… pushes=… push_refused=… disconnects=… replaced=…`.
pub fn report(stats: &NodeStats) -> String {
    let mut line = String::new();
    for (name, counter) in [
        ("moves", &stats.moves),
        ("pushes", &stats.pushes),
        ("push_refused", &stats.push_refused),
        ("disconnects", &stats.disconnects),
        ("replaced", &stats.replaced_callbacks),
    ] {
        let _ = write!(line, "{name}={} ", counter.load(Ordering::Relaxed));
    }
    line.truncate(line.trim_end().len());
    line
}
