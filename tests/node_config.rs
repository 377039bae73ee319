//! zlink-node's config (issue 6 item 3): each kind of mistake is refused at
//! startup with exit code 2 and a message naming the key; a good config
//! starts, serves and stops on SIGTERM. Real processes of the built binary.

mod bound;
mod node_support;

use std::path::Path;

use node_support::*;

/// A config that starts: one node on an embedded store, any free port.
const GOOD: &str = r#"
[node]
rid = 7
meshes = ["lobby"]
log_level = "warn"
shards = 1
pin_cores = false

[listen]
stream = "127.0.0.1:0"

[store]
url = "embedded"
lease_term_ms = 4000
"#;

/// `GOOD` with `old` replaced by `new` (the edit must apply).
fn edit(old: &str, new: &str) -> String {
    assert!(GOOD.contains(old), "{old:?} is in the good config");
    GOOD.replacen(old, new, 1)
}

/// Runs the binary on `text` and expects a refusal naming every one of
/// `needles`.
fn refused(dir: &Path, text: &str, needles: &[&str]) {
    let config = write_config(dir, "node.toml", text);
    let exited = run_to_exit(&["--config", config.to_str().unwrap()]);
    assert_eq!(
        exited.status.code(),
        Some(2),
        "exit code; stderr: {}",
        exited.stderr
    );
    for needle in needles {
        assert!(
            exited.stderr.contains(needle),
            "stderr names {needle:?}: {}",
            exited.stderr
        );
    }
}

#[test]
fn node_config_a_good_config_starts_serves_and_stops_on_sigterm() {
    let dir = temp_dir("good");
    let config = write_config(&dir, "node.toml", GOOD);
    let mut node = NodeProcess::start(7, &config);
    // The lobby game is registered: a LOGIN and a MOVE are answered.
    let mut client = zlink::client::Client::connect(node.stream).expect("the node accepts");
    let login = client
        .call(
            &lobby::Login {
                player: "p1".into(),
            },
            WAIT,
        )
        .expect("LOGIN is answered");
    assert_eq!(login.player, "p1");
    let moved = client
        .call(
            &lobby::Move {
                player: "p1".into(),
                dx: 2,
                dy: 3,
            },
            WAIT,
        )
        .expect("MOVE is answered");
    assert_eq!(moved, lobby::Position { x: 2, y: 3 });
    // The console (--console) answers each command, a bad one with an
    // error naming the commands; this node hosts p1 and has no peer to
    // move it to.
    let counters = node.control("counters");
    assert!(
        counters.starts_with("actors=1 store_row_operations=") && counters.contains(" moves=1 "),
        "{counters}"
    );
    assert!(node.control("relocate p1").starts_with("error "));
    assert!(node.control("relocate p1 x").contains("not a node rid"));
    assert!(node.control("fly p1").contains("commands: relocate"));
    let (report, status) = node.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(count(&report, "moves"), 1, "{report}");
}

#[test]
fn node_config_listen_websocket_serves_the_game_over_websocket() {
    let dir = temp_dir("websocket");
    let text = edit(
        "stream = \"127.0.0.1:0\"",
        "stream = \"127.0.0.1:0\"\nwebsocket = \"127.0.0.1:0\"\n\
         websocket_origins = [\"https://game.example\"]",
    );
    let config = write_config(&dir, "node.toml", &text);
    let mut node = NodeProcess::start(7, &config);
    let ready = node
        .seen
        .iter()
        .find(|(_, line)| line.contains("zlink-node ready:"))
        .map(|(_, line)| line.clone())
        .expect("the ready line");
    let websocket = field(&ready, "websocket");
    let mut client = zlink::client::Client::connect_websocket(&format!("ws://{websocket}/"))
        .expect("the node upgrades");
    let login = client
        .call(
            &lobby::Login {
                player: "p1".into(),
            },
            WAIT,
        )
        .expect("LOGIN is answered over WebSocket");
    assert_eq!(login.player, "p1");
    let (_, status) = node.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn node_config_an_unknown_key_is_refused_by_name() {
    let dir = temp_dir("unknown");
    refused(
        &dir,
        &edit("shards = 1", "shards = 1\ncolour = \"red\""),
        &["node.colour", "unknown field"],
    );
    refused(
        &dir,
        &format!("{GOOD}\n[limits]\nmax_players = 10\n"),
        &["limits.max_players", "unknown field"],
    );
    refused(
        &dir,
        &format!("{GOOD}\n[extra]\n"),
        &["extra", "unknown field"],
    );
}

#[test]
fn node_config_a_bad_value_is_refused_by_name() {
    let dir = temp_dir("bad-value");
    for (old, new, key) in [
        ("rid = 7", "rid = \"seven\"", "node.rid"),
        ("shards = 1", "shards = -1", "node.shards"),
        ("shards = 1", "shards = 1\nrole = \"boss\"", "node.role"),
        ("shards = 1", "shards = 1\ncores = [100000]", "node.cores"),
        ("shards = 1", "shards = 1\ncores = [-1]", "node.cores"),
        ("shards = 1", "shards = 1\ncores = [0]", "node.cores"),
        (
            "log_level = \"warn\"",
            "log_level = \"loud\"",
            "node.log_level",
        ),
        (
            "pin_cores = false",
            "pin_cores = false\nio_backend = \"kqueue\"",
            "node.io_backend",
        ),
        (
            "stream = \"127.0.0.1:0\"",
            "stream = \"here\"",
            "listen.stream",
        ),
        ("url = \"embedded\"", "url = \"mysql://x\"", "store.url"),
        (
            "lease_term_ms = 4000",
            "lease_term_ms = 0",
            "store.lease_term_ms",
        ),
        (
            "lease_term_ms = 4000",
            "lease_term_ms = 4000\nlease_renew_interval_ms = 3000",
            "store.lease_renew_interval_ms",
        ),
    ] {
        refused(&dir, &edit(old, new), &[key]);
    }
    for (section, line, key) in [
        (
            "timeouts",
            "session_relocation_seal_timeout_ms = 0",
            "timeouts.session_relocation_seal_timeout_ms",
        ),
        (
            "timeouts",
            "session_replacement_callback_timeout_ms = \"3s\"",
            "timeouts.session_replacement_callback_timeout_ms",
        ),
        (
            "relocation",
            "follow_lifetime_ms = 0",
            "relocation.follow_lifetime_ms",
        ),
        ("limits", "frame_len_max = 0", "limits.frame_len_max"),
        ("limits", "frame_len_max = 16777217", "limits.frame_len_max"),
        ("limits", "session_queue_max = 0", "session_queue_max"),
        ("limits", "max_sessions = 0", "limits.max_sessions"),
        ("limits", "max_sessions = -1", "limits.max_sessions"),
    ] {
        refused(&dir, &format!("{GOOD}\n[{section}]\n{line}\n"), &[key]);
    }
}

#[test]
fn node_config_a_missing_required_key_is_refused_by_name() {
    let dir = temp_dir("missing");
    refused(
        &dir,
        &edit("rid = 7\n", ""),
        &["node", "missing field `rid`"],
    );
    refused(
        &dir,
        &edit("[store]\nurl = \"embedded\"\nlease_term_ms = 4000\n", ""),
        &["missing field `store`"],
    );
    // Peers need the address they link to, and the cluster secret.
    refused(
        &dir,
        &format!("{GOOD}\n[peers]\nstatic = [{{ rid = 2, address = \"127.0.0.1:1\" }}]\n"),
        &["listen.peer"],
    );
    refused(
        &dir,
        &edit(
            "stream = \"127.0.0.1:0\"",
            "stream = \"127.0.0.1:0\"\npeer = \"127.0.0.1:0\"\n\n[peers]\nstatic = [{ rid = 2, address = \"127.0.0.1:1\" }]",
        ),
        &["secret", "required"],
    );
    refused(
        &dir,
        &format!("{GOOD}\n[secret]\nenv = \"ZLINK_NODE_TEST_UNSET_VARIABLE\"\n"),
        &["secret.env", "ZLINK_NODE_TEST_UNSET_VARIABLE", "not set"],
    );
}

#[test]
fn node_config_a_secret_on_the_command_line_or_as_a_literal_is_refused() {
    let dir = temp_dir("secret");
    let config = write_config(&dir, "node.toml", GOOD);
    let path = config.to_str().unwrap();
    for flag in ["--secret", "--cluster-secret"] {
        let exited = run_to_exit(&["--config", path, flag, "0123456789abcdef0123"]);
        assert_eq!(exited.status.code(), Some(2), "{flag}: {}", exited.stderr);
        assert!(
            exited.stderr.contains("never taken from the command line"),
            "{flag}: {}",
            exited.stderr
        );
    }
    refused(
        &dir,
        &format!("secret = \"0123456789abcdef0123\"\n{GOOD}"),
        &["secret", "literal secret", "secret.file", "secret.env"],
    );
    refused(
        &dir,
        &format!("{GOOD}\n[secret]\nvalue = \"0123456789abcdef0123\"\n"),
        &["secret", "unknown field `value`"],
    );
    // A secret file too short to authenticate links is refused by its key.
    std::fs::write(dir.join("short.secret"), "short\n").unwrap();
    refused(
        &dir,
        &format!("{GOOD}\n[secret]\nfile = \"short.secret\"\n"),
        &["secret.file"],
    );
}

#[test]
fn node_config_a_short_secret_or_a_dialled_peer_without_an_address_is_refused_by_name() {
    let dir = temp_dir("short-or-unaddressed");
    std::fs::write(dir.join("lobby.secret"), "lobby-secret-0123456789\n").unwrap();
    // 15 bytes: one short of the minimum.
    std::fs::write(dir.join("short.secret"), "0123456789abcde\n").unwrap();
    let linked = edit(
        "stream = \"127.0.0.1:0\"",
        "stream = \"127.0.0.1:0\"\npeer = \"127.0.0.1:0\"",
    );
    // A secret under 16 bytes, for the home mesh or a joined one, is
    // refused by its key, with the minimum;
    refused(
        &dir,
        &format!("{linked}\n[secret]\nfile = \"short.secret\"\n"),
        &["secret.file", "15 bytes", "at least 16"],
    );
    let two = linked.replacen("meshes = [\"lobby\"]", "meshes = [\"lobby\", \"arena\"]", 1)
        + "\n[secret]\nfile = \"lobby.secret\"\n";
    refused(
        &dir,
        &format!("{two}\n[mesh.arena]\nsecret = {{ file = \"short.secret\" }}\n"),
        &["mesh.arena.secret.file", "at least 16"],
    );
    // and so is a peer this node dials (node 9 > node 7) given by its rid
    // alone: a link that would never come up.
    let with_secret = format!("{linked}\n[secret]\nfile = \"lobby.secret\"\n");
    refused(
        &dir,
        &format!("{with_secret}\n[peers]\nstatic = [{{ rid = 9 }}]\n"),
        &["peers.static", "rid 9 needs an address"],
    );
    // A peer that dials this node (node 3 < node 7) needs none.
    let config = write_config(
        &dir,
        "dialled.toml",
        &format!("{with_secret}\n[peers]\nstatic = [{{ rid = 3 }}]\n"),
    );
    let mut node = NodeProcess::start(7, &config);
    let (_, status) = node.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn node_config_several_meshes_each_with_its_secret_and_peers() {
    let dir = temp_dir("meshes");
    std::fs::write(dir.join("lobby.secret"), "lobby-secret-0123456789\n").unwrap();
    std::fs::write(dir.join("arena.secret"), "arena-secret-0123456789\n").unwrap();
    let two = edit("meshes = [\"lobby\"]", "meshes = [\"lobby\", \"arena\"]").replacen(
        "stream = \"127.0.0.1:0\"",
        "stream = \"127.0.0.1:0\"\npeer = \"127.0.0.1:0\"",
        1,
    ) + "\n[secret]\nfile = \"lobby.secret\"\n";
    let arena = "\n[mesh.arena]\nsecret = { file = \"arena.secret\" }\n\
                 static = [{ rid = 9, address = \"127.0.0.1:9\" }]\n";

    // Each mistake is refused by its key: a joined mesh without its table,
    // a table for a mesh not listed after the home one, a mesh listed
    // twice, none at all, a literal secret, a peer listed in two meshes.
    refused(&dir, &two, &["mesh.arena", "secret"]);
    refused(
        &dir,
        &format!("{two}{arena}\n[mesh.other]\nsecret = {{ env = \"X\" }}\n"),
        &["mesh.other", "node.meshes"],
    );
    refused(
        &dir,
        &edit("meshes = [\"lobby\"]", "meshes = [\"lobby\", \"lobby\"]"),
        &["node.meshes", "twice"],
    );
    refused(
        &dir,
        &edit("meshes = [\"lobby\"]", "meshes = []"),
        &["node.meshes"],
    );
    refused(
        &dir,
        &format!("{two}\n[mesh.arena]\nsecret = \"arena-secret-0123456789\"\n"),
        &["mesh.arena.secret", "literal"],
    );
    refused(
        &dir,
        &format!("{two}{arena}\n[peers]\nstatic = [{{ rid = 9, address = \"127.0.0.1:9\" }}]\n"),
        &["peer 9", "lobby", "arena"],
    );

    // And a node in two meshes, each with its own secret and peers, starts
    // and serves its game.
    let config = write_config(&dir, "two.toml", &format!("{two}{arena}"));
    let mut node = NodeProcess::start(7, &config);
    let mut client = zlink::client::Client::connect(node.stream).expect("the node accepts");
    let login = client.call(
        &lobby::Login {
            player: "p1".into(),
        },
        WAIT,
    );
    assert_eq!(login.expect("LOGIN is answered").player, "p1");
    let (_, status) = node.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn node_config_role_and_max_sessions_reach_the_node() {
    let dir = temp_dir("role-limit");
    // Given a node that holds at most one session, its shard pinned to the
    // first core this process may run on,
    let core = core_affinity::get_core_ids().expect("the cores")[0].id;
    let pinned = edit(
        "pin_cores = false",
        &format!("pin_cores = true\ncores = [{core}]"),
    );
    let text = format!("{pinned}\n[limits]\nmax_sessions = 1\n");
    let mut node = NodeProcess::start(7, &write_config(&dir, "one.toml", &text));
    let mut first = zlink::client::Client::connect(node.stream).expect("the node accepts");
    let login = first.call(
        &lobby::Login {
            player: "p1".into(),
        },
        WAIT,
    );
    assert_eq!(login.expect("LOGIN is answered").player, "p1");
    // a second client is told SessionLimit and closed, and it is counted.
    let mut second = zlink::client::Client::connect(node.stream).expect("the node accepts");
    match second.next_event(WAIT) {
        Ok(Some(zlink::client::ClientEvent::Closed(Some(
            zlink::wire::client::CloseReason::SessionLimit,
        )))) => {}
        other => panic!("the second connection got {other:?}"),
    }
    let counters = node.control("counters");
    assert!(counters.contains(" session_limit_refused=1"), "{counters}");
    let (_, status) = node.terminate();
    assert!(status.success(), "{status:?}");

    // Given a node with no object role (a STREAM-only node), the game's
    // LOGIN, which needs Actor dispatch, ends with a typed error.
    let text = edit("shards = 1", "shards = 1\nrole = \"none\"");
    let mut node = NodeProcess::start(7, &write_config(&dir, "none.toml", &text));
    let mut client = zlink::client::Client::connect(node.stream).expect("the node accepts");
    match client.call(
        &lobby::Login {
            player: "p1".into(),
        },
        WAIT,
    ) {
        // Today NotFound (NoActorFactory): no Actor type is dispatched here.
        Err(zlink::client::ClientError::Remote(_)) => {}
        other => panic!("LOGIN on a node without an object role got {other:?}"),
    }
    let (_, status) = node.terminate();
    assert!(status.success(), "{status:?}");
}
