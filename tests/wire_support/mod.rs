//! Strategies and checks shared by the wire tests (tests/wire_node.rs,
//! tests/wire_client.rs).

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use zlink::error::{Error, Reason};
use zlink::ids::ActorId;
use zlink::wire::{DecodeLimits, WireError};

/// Any typed failure: every reason, with its own kind; an application
/// error with any code and a detail up to its bound (multi-byte characters
/// included); a framework error that says which Actor it is about.
pub fn error() -> impl Strategy<Value = Error> {
    prop_oneof![
        select(Reason::ALL.to_vec()).prop_map(Error::new),
        (any::<u32>(), "\\PC{0,300}").prop_map(|(code, detail)| Error::app(code, detail)),
        (any::<u32>(), Just("é".repeat(Error::DETAIL_MAX)))
            .prop_map(|(code, detail)| Error::app(code, detail)),
        (select(Reason::ALL.to_vec()), "[a-z0-9/-]{1,255}").prop_map(|(reason, id)| {
            let id = ActorId::new(&id).expect("1 to 255 ASCII bytes");
            Error::new(reason).about_actor(&id)
        }),
    ]
}

/// A payload, empty included.
pub fn payload() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..200).prop_map(Bytes::from)
}

/// Edits to a valid body: a few bytes overwritten, maybe a cut, maybe a tail.
pub fn edits() -> impl Strategy<Value = Edits> {
    (
        // Small values and 255 hit tags, presence bytes and codes often.
        vec(
            (
                any::<Index>(),
                prop_oneof![0u8..4, Just(u8::MAX), any::<u8>()],
            ),
            0..4,
        ),
        proptest::option::of(any::<Index>()),
        vec(any::<u8>(), 0..3),
    )
        .prop_map(|(writes, cut, tail)| Edits { writes, cut, tail })
}

/// A mutation of a valid body, to reach the decoder's deep error paths.
#[derive(Debug, Clone)]
pub struct Edits {
    writes: Vec<(Index, u8)>,
    cut: Option<Index>,
    tail: Vec<u8>,
}

impl Edits {
    /// The body after the edits.
    pub fn apply(&self, body: &[u8]) -> Bytes {
        let mut out = body.to_vec();
        if !out.is_empty() {
            for (at, byte) in &self.writes {
                let i = at.index(out.len());
                out[i] = *byte;
            }
        }
        if let Some(cut) = self.cut {
            out.truncate(cut.index(out.len() + 1));
        }
        out.extend_from_slice(&self.tail);
        Bytes::from(out)
    }
}

/// The encoded frame of `value`, and its body (the bytes after the prefix).
pub fn frame_and_body<T>(value: &T, encode: impl Fn(&T, &mut BytesMut)) -> (BytesMut, Bytes) {
    let mut frame = BytesMut::new();
    encode(value, &mut frame);
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap());
    assert_eq!(len as usize, frame.len() - 4, "the prefix counts the body");
    let body = Bytes::copy_from_slice(&frame[4..]);
    (frame, body)
}

/// Whatever `body` is, decoding does not panic; when it decodes, the value
/// re-encodes to exactly `body` (the encoding is canonical).
pub fn assert_total_and_canonical<T: std::fmt::Debug>(
    body: Bytes,
    decode: impl Fn(Bytes, &DecodeLimits) -> Result<T, WireError>,
    encode: impl Fn(&T, &mut BytesMut),
) {
    if let Ok(value) = decode(body.clone(), &DecodeLimits::default()) {
        let (_, again) = frame_and_body(&value, encode);
        assert_eq!(again, body, "{value:?} re-encodes to other bytes");
    }
}

/// Every strict prefix of `body` is `Truncated`, and every strict prefix of
/// `frame` is incomplete for the stream splitter (which consumes nothing).
pub fn assert_every_prefix_truncated<T: std::fmt::Debug>(
    frame: &BytesMut,
    body: &Bytes,
    decode: impl Fn(Bytes, &DecodeLimits) -> Result<T, WireError>,
    decode_from: impl Fn(&mut BytesMut, &DecodeLimits) -> Result<Option<T>, WireError>,
) {
    let limits = DecodeLimits::default();
    for cut in 0..body.len() {
        let got = decode(body.slice(..cut), &limits);
        assert!(
            matches!(got, Err(WireError::Truncated { .. })),
            "prefix {cut}/{}: {got:?}",
            body.len()
        );
    }
    for cut in 0..frame.len() {
        let mut partial = BytesMut::from(&frame[..cut]);
        let got = decode_from(&mut partial, &limits);
        assert!(matches!(got, Ok(None)), "frame prefix {cut}: {got:?}");
        assert_eq!(partial.len(), cut, "an incomplete frame is not consumed");
    }
}

/// Every single-byte substitution of `body` (with values that name tags,
/// presence bytes and codes, and neighbours of the original) decodes or
/// errors, and what decodes is canonical.
pub fn assert_every_byte_substitution_total<T: std::fmt::Debug>(
    body: &Bytes,
    decode: impl Fn(Bytes, &DecodeLimits) -> Result<T, WireError>,
    encode: impl Fn(&T, &mut BytesMut),
) {
    for at in 0..body.len() {
        let original = body[at];
        for byte in [0, 1, 2, 3, u8::MAX, original ^ 1, original.wrapping_add(1)] {
            let mut mutated = body.to_vec();
            mutated[at] = byte;
            assert_total_and_canonical(Bytes::from(mutated), &decode, &encode);
        }
    }
}
