//! Micro-benchmarks of the core's hot primitives: one lane turn and one
//! timer insert with its cancel (DESIGN "Performance": benches report, tests
//! check behaviour).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use zlink::core::lane::{ActorDeliveryLane, LaneEngine, Ordinary};
use zlink::core::time::Instant;
use zlink::core::timer::TimerWheel;

/// Submit, start and finish one turn, with 1,024 idle lanes beside it.
fn lane_turn(c: &mut Criterion) {
    let mut lanes: LaneEngine<ActorDeliveryLane, u64> = LaneEngine::new();
    let ids: Vec<_> = (0..1_024).map(|_| lanes.add_lane(64)).collect();
    let mut at = 0usize;
    c.bench_function("lane turn", |b| {
        b.iter(|| {
            let id = ids[at % ids.len()];
            at += 1;
            let submitted = lanes.submit(id, Ordinary, black_box(at as u64));
            assert!(submitted.is_ok());
            let turn = lanes.next_turn();
            let Some((id, item)) = turn else {
                panic!("a lane with work must be ready");
            };
            black_box(item);
            lanes.finish_turn(id);
        });
    });
}

/// Arm a 100 ms timer and cancel it, in a wheel holding 10,000 others.
fn timer_insert_cancel(c: &mut Criterion) {
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    for i in 0..10_000u64 {
        wheel.insert(Instant::from_micros(i * 3_001), i);
    }
    let deadline = Instant::ZERO + Duration::from_millis(100);
    c.bench_function("timer insert+cancel", |b| {
        b.iter(|| {
            let key = wheel.insert(black_box(deadline), 7);
            black_box(wheel.cancel(key));
        });
    });
}

criterion_group!(benches, lane_turn, timer_insert_cancel);
criterion_main!(benches);
