//! A Location Store that is not left open (issue 20 item 5): the Redis
//! store authenticates with a password given apart from the URL (read by
//! `zlink-node` from a file or an environment variable, never from config
//! text), and a store that demands one refuses a client without it with a
//! clear, typed error.

mod bound;
mod node_support;
mod redis_support;

use node_support::*;
use redis_support::RedisServer;
use zlink::ids::{MeshName, NodeGeneration, NodeRid};
use zlink::store::{
    LocationStore, MonotonicClock, RedisPassword, RedisStore, RedisStoreConfig, StoreError,
};

const PASSWORD: &str = "zlink-test-store-password";

/// `config` with `store.password` read from a file in `dir` holding
/// [`PASSWORD`].
fn with_password_file(dir: &std::path::Path, config: &str) -> String {
    std::fs::write(dir.join("redis-password"), format!("{PASSWORD}\n")).unwrap();
    config.replace(
        "[store]\n",
        "[store]\npassword = { file = \"redis-password\" }\n",
    )
}

fn store(redis: &RedisServer, password: Option<&str>) -> RedisStore {
    let config = RedisStoreConfig {
        password: password.map(|p| RedisPassword(p.to_owned())),
        // Generous on a busy CI machine (issue 23 item 4): these tests
        // check answers, never how fast they come.
        call_timeout: std::time::Duration::from_secs(5),
        ..RedisStoreConfig::new(redis.url(), "auth")
    };
    RedisStore::open(config, MonotonicClock::new()).expect("a valid config")
}

#[test]
fn a_store_that_demands_a_password_serves_only_a_client_that_gives_it() {
    let redis = RedisServer::start_with_password(PASSWORD);
    let mesh = MeshName::new("lobby").unwrap();
    // Without the password, or with a wrong one: Refused (not Unavailable,
    // which a start waits out), naming why.
    for password in [None, Some("wrong")] {
        match store(&redis, password).acquire_lease(NodeRid(1), NodeGeneration(1), &mesh) {
            Err(StoreError::Refused(detail)) => {
                let detail = detail.to_lowercase();
                assert!(
                    detail.contains("auth") || detail.contains("password"),
                    "{password:?}: {detail}"
                )
            }
            other => panic!("{password:?}: a store without the password got {other:?}"),
        }
    }
    // With it: the store works.
    let store = store(&redis, Some(PASSWORD));
    let lease = store
        .acquire_lease(NodeRid(1), NodeGeneration(1), &mesh)
        .expect("the lease with the password");
    let actor = zlink::ids::ActorId::new("p").unwrap();
    store.create(&actor, &lease.claim()).expect("a create");
    assert!(store.lookup(&actor).unwrap().is_some());
    // And the password never shows in a config's debug form.
    let config = RedisStoreConfig {
        password: Some(RedisPassword(PASSWORD.to_owned())),
        ..RedisStoreConfig::new(redis.url(), "auth")
    };
    assert!(!format!("{config:?}").contains(PASSWORD));
}

#[test]
fn zlink_node_reads_the_store_password_from_a_file_and_refuses_to_start_without_it() {
    let redis = RedisServer::start_with_password(PASSWORD);
    let dir = temp_dir("store-auth");
    let peers = Peers::Static(Vec::new());
    let base = config(1, &redis.url(), "auth", &peers);
    // Given a node whose config names the password file,
    let with = with_password_file(&dir, &base);
    let path = write_config(&dir, "with.toml", &with);
    let mut node = NodeProcess::start(1, &path);
    // then it starts and serves a login (a create in the store),
    let mut client = connect(node.stream);
    login(&mut client, "p").expect("a login with the store's password");
    let (report, status) = node.terminate();
    assert!(status.success(), "{report}");
    // while one without it refuses to start, naming the store's refusal.
    let path = write_config(&dir, "without.toml", &base.replace("rid = 1", "rid = 2"));
    let failure = match NodeProcess::try_start(2, &path) {
        Err(failure) => failure,
        Ok(_) => panic!("a node without the store's password started"),
    };
    let printed = format!("{:?}", failure.printed).to_lowercase();
    assert!(printed.contains("auth"), "{printed}");
}

/// A store that starts refusing a serving node (its password changed, an
/// ACL narrowed) is a configuration problem the node cannot mend by asking
/// again: the node says so in a warning (rate-limited), and a login that
/// needs the store ends with a typed error, not a hang. Mended, the node
/// says the store serves it again, and logins work.
#[test]
fn a_store_that_starts_refusing_a_serving_node_is_logged_and_logins_end_typed() {
    let redis = RedisServer::start_with_password(PASSWORD);
    let dir = temp_dir("store-auth-rotated");
    let peers = Peers::Static(Vec::new());
    // A lease far longer than the test: the refused renewals fence nothing.
    let text = with_password_file(
        &dir,
        &config_with_lease(1, &redis.url(), "rotated", &peers, 60_000),
    );
    let mut node = NodeProcess::start(1, &write_config(&dir, "node.toml", &text));
    let mut client = connect(node.stream);
    login(&mut client, "before").expect("a login with the store's password");
    // The password changes under the node, and its connection is cut.
    let admin = redis::Client::open(format!("redis://:{PASSWORD}@127.0.0.1:{}/", redis.port()))
        .expect("a Redis URL");
    let mut admin = admin.get_connection().expect("the test's Redis connection");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("another-password")
        .query(&mut admin)
        .expect("the password changes");
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap_or(redis::Value::Nil);
    node.wait_line(Stream::Err, "the Location Store refused this node");
    let mut late = connect(node.stream);
    match login(&mut late, "after") {
        Err(error) => {
            let text = format!("{error:?}");
            assert!(text.contains("StoreUnavailable"), "{text}");
        }
        Ok(()) => panic!("a login that needs a refusing store succeeded"),
    }
    // The password is put back: the node says the store serves it again,
    // and logs in the next player.
    let admin = redis::Client::open(format!(
        "redis://:another-password@127.0.0.1:{}/",
        redis.port()
    ))
    .expect("a Redis URL");
    let mut admin = admin.get_connection().expect("the test's Redis connection");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(PASSWORD)
        .query(&mut admin)
        .expect("the password is put back");
    node.wait_line(Stream::Err, "the Location Store serves this node again");
    let mut again = connect(node.stream);
    login(&mut again, "again").expect("a login once the store serves the node again");
}
