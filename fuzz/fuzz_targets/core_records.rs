//! The core state machines under arbitrary records from arbitrary peers and
//! arbitrary advances of virtual time (`zlink::sim::script`): three nodes'
//! real `ShardCore`s in a known state (sessions bound to local and remote
//! Actors), fed `handle_record` with whatever decodes, from current, stale,
//! later and unknown peer generations, and `handle_timeout` as time moves.
//! Nothing may panic or loop forever (bad input from a peer is a typed error
//! or a counted drop, never a crash or a hang); after an advance no timer
//! is left overdue (every timer due by the new time has fired).
#![no_main]

use libfuzzer_sys::fuzz_target;
use zlink::sim::script::{Ground, Step};

fuzz_target!(|script: &[u8]| {
    let mut ground = Ground::new();
    for step in Step::parse(script) {
        let advance = matches!(step, Step::Advance(_));
        ground.apply(step);
        if advance {
            let overdue = ground.overdue_timer();
            assert_eq!(
                overdue,
                None,
                "a timer due by {:?} is still armed",
                ground.mesh().now()
            );
        }
    }
});
