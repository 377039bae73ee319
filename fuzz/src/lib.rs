//! Checks shared by the decoder fuzz targets (docs/TESTING.md "Fuzzing").
//!
//! A target's input is a byte stream as a socket delivers it: frames with
//! their `u32` length prefixes, back to back, the last one possibly cut. The
//! stream splitter (`decode_from`) is checked against a reference split, and
//! every frame body against the whole-body decoder: both must agree, and
//! what decodes must re-encode to exactly its bytes (docs/wire.md: every
//! encoding is canonical).

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use zlink::wire::{DecodeLimits, WireError};

/// One decoder's three entry points.
pub struct Codec<T> {
    /// Decodes one complete body.
    pub decode: fn(Bytes, &DecodeLimits) -> Result<T, WireError>,
    /// Splits and decodes one frame off a stream buffer.
    pub decode_from: fn(&mut BytesMut, &DecodeLimits) -> Result<Option<T>, WireError>,
    /// Appends a whole length-prefixed frame.
    pub encode: fn(&T, &mut BytesMut),
}

/// Reads `stream` frame by frame with `decode_from` until it stops, checking
/// each step against the reference split; returns the bodies it split off
/// and what each decoded to.
pub fn check_stream<T: Debug + PartialEq>(
    stream: &[u8],
    codec: &Codec<T>,
) -> Vec<(Bytes, Result<T, WireError>)> {
    let limits = DecodeLimits::default();
    let mut buf = BytesMut::from(stream);
    let mut rest = stream;
    let mut frames = Vec::new();
    loop {
        let before = buf.len();
        let got = (codec.decode_from)(&mut buf, &limits);
        let Some((prefix, after)) = rest.split_first_chunk::<4>() else {
            assert!(matches!(got, Ok(None)), "no whole prefix, yet {got:?}");
            assert_eq!(buf.len(), before, "an incomplete frame is not consumed");
            return frames;
        };
        let len = u32::from_be_bytes(*prefix);
        if len > limits.frame_len_max {
            assert!(
                matches!(got, Err(WireError::FrameTooLong { .. })),
                "a {len}-byte prefix gave {got:?}"
            );
            assert_eq!(buf.len(), before, "an oversized prefix is not consumed");
            return frames;
        }
        let len = len as usize;
        if after.len() < len {
            assert!(matches!(got, Ok(None)), "a cut frame gave {got:?}");
            assert_eq!(buf.len(), before, "an incomplete frame is not consumed");
            return frames;
        }
        let (body, after) = after.split_at(len);
        rest = after;
        assert_eq!(buf.len(), rest.len(), "exactly one frame is consumed");
        let body = Bytes::copy_from_slice(body);
        let whole = (codec.decode)(body.clone(), &limits);
        match (&got, &whole) {
            (Ok(Some(split)), Ok(value)) => {
                assert_eq!(split, value, "the stream and the body decode differently");
                let mut again = BytesMut::new();
                (codec.encode)(value, &mut again);
                assert_eq!(&again[..4], prefix, "{value:?} re-encodes another length");
                assert_eq!(
                    &again[4..],
                    &body[..],
                    "{value:?} re-encodes to other bytes"
                );
            }
            (Err(split), Err(error)) => assert_eq!(split, error),
            _ => panic!("the stream gave {got:?}, the body {whole:?}"),
        }
        frames.push((body, whole));
    }
}
