//! Client STREAM frames (src/wire/client): any byte stream a client sends
//! splits, decodes or errors without a panic, and what decodes is canonical.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zlink::wire::client::ClientFrame;
use zlink_fuzz::{check_stream, Codec};

fuzz_target!(|stream: &[u8]| {
    check_stream(
        stream,
        &Codec {
            decode: ClientFrame::decode,
            decode_from: ClientFrame::decode_from,
            encode: ClientFrame::encode,
        },
    );
});
