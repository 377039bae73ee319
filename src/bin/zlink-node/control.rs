//! The operator console (`zlink-node --console`): one command per line on
//! stdin, one answer line per command on stdout, in order, each starting
//! with `zlink-node control: `. It is how an operator at a terminal (and the
//! multi-process tests) moves an Actor by hand (§8: the relocation runtime
//! moves Actors; an operator may hint the target, §2) and reads the node's
//! diagnostics. It is off by default, since a node started in the
//! background of an interactive shell would be stopped (SIGTTIN) for
//! reading the terminal (docs/store.md "zlink-node").
//!
//! Commands:
//! - `relocate <actor-id> [<rid>]`: `Node::relocate` of an Actor this node
//!   hosts, to node `<rid>` or to the placement policy's choice; answers
//!   `ok` once the move committed, or `error <kind>: <reason>`.
//! - `counters`: `actors=<n> store_row_operations=<n>`, the game's counts
//!   and every non-zero flow-trace counter, as `name=value` words.

use std::io::BufRead;
use std::sync::mpsc;

use zlink::api::{Node, RelocateTo};
use zlink::ids::ActorId;

use crate::signals::StopSignals;

/// Answers console commands for `node` until SIGINT or SIGTERM; returns
/// the signal's name. `diagnostics` gives what `counters` adds to the
/// node's own counts, as `name=value` words: the store's row operations
/// and the game's counts. A command still running then (a relocation, bounded
/// by the flow's waits) finishes first.
pub fn serve_until_stop(
    node: &Node,
    diagnostics: &(dyn Fn() -> String + Sync),
    stop: &StopSignals,
) -> &'static str {
    let (lines, commands) = mpsc::channel::<Option<String>>();
    let reader = lines.clone();
    // Detached: a read of stdin cannot be interrupted, and the process ends
    // with it. The stop signals stay blocked in it (inherited mask).
    let _ = std::thread::Builder::new()
        .name("zlink-node-console".to_owned())
        .spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if reader.send(Some(line)).is_err() {
                    break;
                }
            }
        });
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Ok(Some(line)) = commands.recv() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let answer = answer(node, diagnostics, line);
                say!("zlink-node control: {answer}");
            }
        });
        let signal = stop.wait_for_stop();
        let _ = lines.send(None);
        signal
    })
}

/// The answer to one command line.
fn answer(node: &Node, diagnostics: &(dyn Fn() -> String + Sync), line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["relocate", actor] => relocate(node, actor, RelocateTo::Any),
        ["relocate", actor, rid] => match rid.parse() {
            Ok(rid) => relocate(node, actor, RelocateTo::Node(rid)),
            Err(_) => format!("error {rid:?} is not a node rid"),
        },
        ["counters"] => {
            let mut out = format!("actors={} {}", node.actor_count(), diagnostics());
            for (event, n) in node.flow_counters().nonzero() {
                out.push_str(&format!(" {}={n}", event.name()));
            }
            out
        }
        _ => format!(
            "error unknown command {line:?}; commands: relocate <actor-id> [<rid>], counters"
        ),
    }
}

/// Moves the Actor `actor` this node hosts; `ok` once committed.
fn relocate(node: &Node, actor: &str, to: RelocateTo) -> String {
    let Ok(id) = ActorId::new(actor) else {
        return format!("error {actor:?} is not an ActorId");
    };
    match node.relocate(&id, to) {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("error {:?}: {e}", e.kind()),
    }
}
