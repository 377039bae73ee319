//! Node records (src/wire/node): any byte stream a peer sends splits, decodes
//! or errors without a panic, what decodes is canonical, the undecoded
//! splitter agrees, and a request's RequestId is read the same from a body
//! that decodes as from the record (§6: a malformed request still gets its
//! typed error, so `request_of` must name the same request).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use zlink::wire::node::NodeRecord;
use zlink::wire::DecodeLimits;
use zlink_fuzz::{check_stream, Codec};

fuzz_target!(|stream: &[u8]| {
    let frames = check_stream(
        stream,
        &Codec {
            decode: NodeRecord::decode,
            decode_from: NodeRecord::decode_from,
            encode: NodeRecord::encode,
        },
    );
    let mut buf = BytesMut::from(stream);
    for (body, decoded) in frames {
        let split = NodeRecord::split_from(&mut buf, &DecodeLimits::default());
        assert_eq!(split, Ok(Some(body.clone())), "split_from splits elsewhere");
        let named = NodeRecord::request_of(&body);
        if let Ok(record) = decoded {
            let id = record.request_id();
            assert_eq!(
                named.map(|(_, id)| id),
                id,
                "request_of misreads {record:?}"
            );
            if let Some((command, _)) = named {
                assert_eq!(command, record.command());
            }
        }
    }
});
