//! The core under hostile record scripts (`zlink::sim::script`, the ground of
//! the `core_records` fuzz target, docs/TESTING.md): the seed corpus
//! generator, and the regression tests of what the fuzzer found.

mod fuzz_seed;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use zlink::ids::{NodeGeneration, NodeRid, PacketKey, Peer};
use zlink::sim::actor_id;
use zlink::sim::script::{Ground, Step};

/// The record steps that replay `tapped` as its sender sent it.
fn record_step(from: NodeRid, to: NodeRid, record: &zlink::wire::node::NodeRecord) -> Step {
    let mut frame = BytesMut::new();
    record.encode(&mut frame);
    let peer = Peer {
        rid: from,
        generation: NodeGeneration(1),
    };
    Step::Record {
        from: Ground::peer_index(peer).unwrap(),
        to: Ground::node_index(to).unwrap(),
        body: Bytes::copy_from_slice(&frame[4..]),
    }
}

/// Writes the seeds (run by hand: `cargo test --test core_fuzz --
/// --ignored`): every record of a run on the ground — its own setup, then a
/// replacement, a request, a push, a relocation and a request that follows
/// it — each alone, and all of them in order with the time between them.
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_corpus() {
    let mut ground = Ground::new();
    let mesh = ground.mesh_mut();
    let (n1, n2, n3) = (NodeRid(1), NodeRid(2), NodeRid(3));
    let a = mesh
        .node(n2)
        .core()
        .actor_owner()
        .actor_ref(&actor_id("a"))
        .unwrap();
    let session = mesh.connect(n1);
    mesh.bind(n1, session, &a).unwrap();
    mesh.request(n1, session, &a, b"ping").unwrap();
    mesh.run();
    mesh.actors(n2)
        .push(&a.id, PacketKey(3), Bytes::from_static(b"news"))
        .unwrap();
    mesh.advance(Duration::from_millis(200));
    mesh.relocations(n2).relocate(&a.id, n3).unwrap();
    mesh.run();
    mesh.request(n1, session, &a, b"after").unwrap();
    mesh.advance(Duration::from_secs(31));

    let mut seeds = Vec::new();
    let mut all = Vec::new();
    let mut last = None;
    for (i, tapped) in mesh.tap().iter().enumerate() {
        let step = record_step(tapped.from, tapped.to, &tapped.record);
        let mut one = Vec::new();
        step.encode(&mut one);
        seeds.push((format!("{i:03}-{}", tapped.command().code()), one));
        if let Some(last) = last {
            Step::Advance(tapped.at - last).encode(&mut all);
        }
        last = Some(tapped.at);
        step.encode(&mut all);
    }
    Step::Advance(Duration::from_secs(31)).encode(&mut all);
    seeds.push(("all".to_string(), all));
    fuzz_seed::write("core_records", seeds);
}

/// The committed seeds of the `core_records` fuzz target, replayed on stable
/// with its checks: no panic, no endless record loop, and after every
/// advance no timer left overdue.
#[test]
fn every_core_seed_script_runs_and_leaves_no_timer_overdue() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/core_records");
    let mut seeds = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("seed-") {
            continue;
        }
        seeds += 1;
        let mut ground = Ground::new();
        for step in Step::parse(&std::fs::read(&path).unwrap()) {
            let advance = matches!(step, Step::Advance(_));
            ground.apply(step);
            if advance {
                assert_eq!(ground.overdue_timer(), None, "{name}");
            }
        }
        assert_eq!(ground.malformed(), 0, "{name}: every seed record decodes");
    }
    assert!(seeds > 10, "only {seeds} seeds in fuzz/corpus/core_records");
}
