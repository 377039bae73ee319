//! A Location Store reached over TLS (issue 20 item 5): the Redis store
//! speaks `rediss://` to a redis-server that has only a TLS port, with a CA,
//! server and client certificates made here at test time (rcgen), and
//! always verifies the server's certificate. A server signed by another CA,
//! a plaintext URL against the TLS port, and a server that demands a client
//! certificate the store lacks are each refused with a clear, typed error;
//! TLS settings that cannot work are refused before anything connects,
//! naming their setting.

mod bound;
mod node_support;
mod redis_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use node_support::*;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use redis_support::{Mode, RedisServer, TlsFiles};
use zlink::ids::{ActorId, MeshName, NodeGeneration, NodeRid, RelocationId};
use zlink::store::{
    CasOutcome, LocationStore, MonotonicClock, RedisConfigError, RedisStore, RedisStoreConfig,
    RedisTls, StoreError,
};

/// A CA and what it signed, as PEM files in one folder.
struct Pki {
    dir: PathBuf,
    /// The CA's certificate: what a client trusts (`store.tls.ca_file`).
    ca: PathBuf,
    /// A certificate for `127.0.0.1` and `localhost`, and its key.
    server_cert: PathBuf,
    server_key: PathBuf,
    /// A client certificate, and its key (`tls-auth-clients yes`).
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Pki {
    /// A fresh CA named `name` in `dir`, with a server and a client
    /// certificate it signed.
    fn new(dir: &Path, name: &str) -> Self {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).expect("a folder for the certificates");
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, format!("zlink test CA {name}"));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).expect("the CA's certificate");
        let issuer = Issuer::new(ca, ca_key);
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().expect("a key");
            let mut params = CertificateParams::new(names).expect("leaf params");
            params.extended_key_usages = vec![usage];
            let cert = params
                .signed_by(&key, &issuer)
                .expect("a signed certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = leaf(
            vec!["zlink-node".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let write = |file: &str, text: &str| {
            let path = dir.join(file);
            std::fs::write(&path, text).expect("a PEM file");
            path
        };
        Self {
            ca: write("ca.pem", &ca_cert.pem()),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server-key.pem", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client-key.pem", &client_key),
            dir,
        }
    }

    /// A TLS redis-server with this CA's server certificate.
    fn server(&self, auth_clients: bool) -> RedisServer {
        RedisServer::start_tls(TlsFiles {
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
            ca: self.ca.clone(),
            auth_clients,
        })
    }

    /// TLS trusting this CA only, without a client certificate.
    fn trust(&self) -> RedisTls {
        RedisTls {
            ca_file: Some(self.ca.clone()),
            ..RedisTls::default()
        }
    }

    /// [`Pki::trust`] with this CA's client certificate.
    fn trust_with_client_cert(&self) -> RedisTls {
        RedisTls {
            cert_file: Some(self.client_cert.clone()),
            key_file: Some(self.client_key.clone()),
            ..self.trust()
        }
    }
}

fn open(url: &str, tls: Option<RedisTls>) -> Result<RedisStore, RedisConfigError> {
    let config = RedisStoreConfig {
        tls,
        ..RedisStoreConfig::new(url, "tls")
    };
    RedisStore::open(config, MonotonicClock::new())
}

fn mesh() -> MeshName {
    MeshName::new("lobby").unwrap()
}

/// The first store call's error, which must come within a bound: every
/// connect, write and read has the store's call timeout (500 ms). A
/// certificate or handshake the server or the client refused is `Refused`
/// (a start fails on it); a port that answers nothing a client can read is
/// `Unavailable` (a start waits on it): the detail says which mistake it
/// most likely is either way.
fn refusal(store: &RedisStore) -> String {
    let started = Instant::now();
    let outcome = store.acquire_lease(NodeRid(1), NodeGeneration(1), &mesh());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the refusal took {took:?}");
    match outcome {
        Err(StoreError::Unavailable(detail) | StoreError::Refused(detail)) => detail,
        other => panic!("expected Unavailable or Refused, got {other:?}"),
    }
}

#[test]
fn the_store_over_tls_creates_looks_up_and_moves_a_row() {
    let dir = temp_dir("store-tls");
    let pki = Pki::new(&dir, "ca");
    let redis = pki.server(false);
    assert!(redis.url().starts_with("rediss://"));
    let store = open(&redis.url(), Some(pki.trust())).expect("a TLS config");
    let source = store
        .acquire_lease(NodeRid(1), NodeGeneration(1), &mesh())
        .expect("a lease over TLS");
    let target = store
        .acquire_lease(NodeRid(2), NodeGeneration(1), &mesh())
        .expect("a second lease");
    let player = ActorId::new("player-1").unwrap();
    let created = store
        .create(&player, &source.claim())
        .expect("a create over TLS")
        .into_row();
    assert_eq!(store.lookup(&player).unwrap(), Some(created.clone()));
    let relocation = RelocationId {
        coordinator: NodeRid(1),
        sequence: 1,
    };
    let CasOutcome::Swapped(moved) = store
        .compare_and_set(&player, created.version(), relocation, &target.claim())
        .expect("a CAS over TLS")
    else {
        panic!("the CAS at the current version did not swap");
    };
    assert_eq!(moved.location.owner, NodeRid(2));
    assert_eq!(store.lookup(&player).unwrap(), Some(moved));
    // `localhost` is in the certificate too: a DNS name is verified as well.
    let by_name = format!("rediss://localhost:{}/", redis.port());
    let store = open(&by_name, Some(pki.trust())).unwrap();
    assert!(store.lookup(&player).unwrap().is_some());
}

#[test]
fn a_server_certificate_of_another_ca_is_refused() {
    let dir = temp_dir("store-tls-wrong-ca");
    let pki = Pki::new(&dir, "ca");
    let other = Pki::new(&dir, "other");
    let redis = pki.server(false);
    let store = open(&redis.url(), Some(other.trust())).unwrap();
    let detail = refusal(&store);
    assert!(
        detail.contains("TLS") && detail.contains("certificate") && detail.contains("ca_file"),
        "{detail}"
    );
    // A public-root client (no CA file) refuses the private CA as well.
    let store = open(&redis.url(), None).unwrap();
    let detail = refusal(&store);
    assert!(detail.contains("certificate"), "{detail}");
}

#[test]
fn a_plaintext_url_against_the_tls_port_and_tls_against_a_plaintext_port_fail_clearly() {
    let dir = temp_dir("store-tls-plain");
    let pki = Pki::new(&dir, "ca");
    let tls = pki.server(false);
    let plaintext_url = format!("redis://127.0.0.1:{}/", tls.port());
    let store = open(&plaintext_url, None).unwrap();
    let detail = refusal(&store);
    assert!(detail.contains("rediss://"), "{detail}");

    let plain = RedisServer::start(Mode::Volatile);
    let tls_url = format!("rediss://127.0.0.1:{}/", plain.port());
    let store = open(&tls_url, Some(pki.trust())).unwrap();
    let detail = refusal(&store);
    assert!(
        detail.contains("TLS") && detail.contains("redis://"),
        "{detail}"
    );
}

#[test]
fn a_server_that_demands_a_client_certificate_serves_only_a_client_with_one() {
    let dir = temp_dir("store-tls-mutual");
    let pki = Pki::new(&dir, "ca");
    let redis = pki.server(true);
    let store = open(&redis.url(), Some(pki.trust())).unwrap();
    let detail = refusal(&store);
    assert!(detail.contains("TLS"), "{detail}");
    // A client certificate of another CA is refused too.
    let other = Pki::new(&dir, "other");
    let foreign = RedisTls {
        ca_file: Some(pki.ca.clone()),
        ..other.trust_with_client_cert()
    };
    let detail = refusal(&open(&redis.url(), Some(foreign)).unwrap());
    assert!(detail.contains("TLS"), "{detail}");
    // With its own CA's client certificate, the store serves.
    let store = open(&redis.url(), Some(pki.trust_with_client_cert())).unwrap();
    store
        .acquire_lease(NodeRid(1), NodeGeneration(1), &mesh())
        .expect("a lease with a client certificate");
}

#[test]
fn tls_settings_that_cannot_work_are_refused_before_connecting_naming_the_setting() {
    let dir = temp_dir("store-tls-config");
    let pki = Pki::new(&dir, "ca");
    // Nothing listens here: every refusal below comes from `open`.
    let url = "rediss://127.0.0.1:1/";
    let setting = |case: &str, result: Result<RedisStore, RedisConfigError>| match result {
        Err(RedisConfigError::Tls { setting, detail }) => (setting, detail),
        Err(other) => panic!("{case}: not a TLS refusal: {other}"),
        Ok(_) => panic!("{case}: a TLS config that cannot work was accepted"),
    };
    // TLS files with a plaintext URL: the link would silently be unencrypted.
    let (key, _) = setting(
        "TLS files on redis://",
        open("redis://127.0.0.1:1/", Some(pki.trust())),
    );
    assert_eq!(key, "store.url");
    // A URL that asks to skip verifying the server.
    let (key, detail) = setting("#insecure", open("rediss://127.0.0.1:1/#insecure", None));
    assert_eq!(key, "store.url");
    assert!(detail.contains("insecure"), "{detail}");
    // A CA file that is missing, empty, or not a certificate.
    let missing = RedisTls {
        ca_file: Some(dir.join("nowhere.pem")),
        ..RedisTls::default()
    };
    let (key, detail) = setting("a missing CA file", open(url, Some(missing)));
    assert_eq!(key, "store.tls.ca_file");
    assert!(detail.contains("nowhere.pem"), "{detail}");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let with_ca = |ca: &Path| RedisTls {
        ca_file: Some(ca.to_owned()),
        ..RedisTls::default()
    };
    let (key, _) = setting("an empty CA file", open(url, Some(with_ca(&empty))));
    assert_eq!(key, "store.tls.ca_file");
    let (key, _) = setting(
        "a key as CA file",
        open(url, Some(with_ca(&pki.client_key))),
    );
    assert_eq!(key, "store.tls.ca_file");
    // A client certificate without its key, or with another's.
    let without_key = RedisTls {
        key_file: None,
        ..pki.trust_with_client_cert()
    };
    assert_eq!(
        setting(
            "a certificate without its key",
            open(url, Some(without_key))
        )
        .0,
        "store.tls.key_file"
    );
    let other = Pki::new(&dir, "other");
    let wrong_key = RedisTls {
        key_file: Some(other.client_key.clone()),
        ..pki.trust_with_client_cert()
    };
    assert_eq!(
        setting("another's key", open(url, Some(wrong_key))).0,
        "store.tls.key_file"
    );
    // And the key file's contents never show in a config's debug form.
    let key_text = std::fs::read_to_string(&pki.client_key).unwrap();
    let shown = format!("{:?}", pki.trust_with_client_cert());
    assert!(!shown.contains(key_text.lines().nth(1).unwrap()), "{shown}");
    // Well formed, it opens (and connects only on the first call).
    open(url, Some(pki.trust_with_client_cert())).expect("a good TLS config");
    let _ = std::fs::remove_dir_all(&pki.dir);
}

#[test]
fn zlink_node_serves_over_a_tls_store_and_refuses_to_start_with_another_ca() {
    let dir = temp_dir("store-tls-node");
    let pki = Pki::new(&dir, "ca");
    let other = Pki::new(&dir, "other");
    let redis = pki.server(true);
    let peers = Peers::Static(Vec::new());
    let base = config(1, &redis.url(), "tls", &peers);
    // The client certificate is always the right one: only the CA trusted
    // for the server's certificate changes.
    let tls_table = |ca: &Path| {
        format!(
            "[store.tls]\nca_file = {:?}\ncert_file = {:?}\nkey_file = {:?}\n\n[timeouts]\n",
            ca, pki.client_cert, pki.client_key
        )
    };
    // Given a node whose [store.tls] names the CA and its client certificate,
    let with = base.replace("[timeouts]\n", &tls_table(&pki.ca));
    let mut node = NodeProcess::start(1, &write_config(&dir, "with.toml", &with));
    // then it starts and serves a login (a create in the store),
    let mut client = connect(node.stream);
    login(&mut client, "p").expect("a login over a TLS store");
    let (report, status) = node.terminate();
    assert!(status.success(), "{report}");
    // while one that trusts another CA refuses to start, saying why;
    let wrong = base
        .replace("rid = 1", "rid = 2")
        .replace("[timeouts]\n", &tls_table(&other.ca));
    let refused = |name: &str, text: &str| {
        let path = write_config(&dir, name, text);
        match NodeProcess::try_start(2, &path) {
            Err(failure) => {
                assert_eq!(failure.status.code(), Some(2), "{failure:?}");
                format!("{:?}", failure.printed)
            }
            Ok(_) => panic!("{name}: a node started with a store it cannot trust"),
        }
    };
    let printed = refused("wrong-ca.toml", &wrong);
    assert!(
        printed.contains("TLS: the server's certificate was refused"),
        "{printed}"
    );
    // and a CA file that is not there is refused by its key.
    let missing = wrong.replace(&format!("{:?}", other.ca), "\"no-such-ca.pem\"");
    let printed = refused("missing-ca.toml", &missing);
    assert!(printed.contains("store.tls.ca_file"), "{printed}");
}
