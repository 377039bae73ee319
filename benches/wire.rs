//! The relay's hot record: a 24 actorSend message carrying a 64-byte payload
//! (DESIGN "How a relay travels"), encoded into a reused buffer and decoded
//! from a complete frame. `cargo bench --bench wire`.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zlink::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, Correlation, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, PacketKey, RequestId, SessionOwnerId, SessionRef,
    SessionRid, SessionSequence,
};
use zlink::wire::node::{
    ActorMessage, ActorSend, ActorSendBody, BoundSessionTail, NodeRecord, RequestHeader,
};
use zlink::wire::DecodeLimits;

fn relay_record() -> NodeRecord {
    NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
        request: Some(RequestHeader {
            id: RequestId(1_000_001),
            budget: Duration::from_millis(5_000),
        }),
        actor: ActorId::new("zone-7/player-123456").expect("a valid ActorId"),
        object_generation: ObjectGeneration(3),
        authority: AuthorityOwnerGeneration(9),
        lease: OwnerLeaseGeneration(4),
        tail: BoundSessionTail {
            session: SessionRef {
                owner: NodeRid(2),
                lifecycle: NodeGeneration(17),
                owner_id: SessionOwnerId(1),
                session: SessionRid(88_001),
            },
            binding: BindingGeneration(12),
            sequence: SessionSequence(4_242),
        },
        body: ActorSendBody::Payload {
            key: PacketKey(31),
            correlation: Some(Correlation(77)),
            payload: Bytes::from(vec![0xa5; 64]),
        },
    }))
}

fn bench_actor_send(c: &mut Criterion) {
    let record = relay_record();
    let mut frame = BytesMut::with_capacity(256);
    record.encode(&mut frame);
    let body = Bytes::copy_from_slice(&frame[4..]);
    let limits = DecodeLimits::default();

    let mut group = c.benchmark_group("wire/actor_send_64B");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("encode", |b| {
        let mut dst = BytesMut::with_capacity(256);
        b.iter(|| {
            dst.clear();
            black_box(&record).encode(&mut dst);
            black_box(dst.len())
        });
    });
    group.bench_function("decode", |b| {
        b.iter(|| NodeRecord::decode(black_box(body.clone()), &limits));
    });
    group.finish();
}

criterion_group!(benches, bench_actor_send);
criterion_main!(benches);
