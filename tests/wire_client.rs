//! The client frame codec (docs/wire.md "Client frames"): every kind
//! round-trips, the flags byte is reserved, every malformation is typed, and
//! no byte string panics.

mod fuzz_seed;
mod wire_support;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{ActorId, Correlation, PacketKey};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::{DecodeLimits, WireError};

use wire_support::{
    assert_every_byte_substitution_total, assert_every_prefix_truncated,
    assert_total_and_canonical, edits, error, frame_and_body, payload,
};

const CLOSE_REASONS: [CloseReason; 9] = [
    CloseReason::Replaced,
    CloseReason::SealTimeout,
    CloseReason::ActorRequested,
    CloseReason::Shutdown,
    CloseReason::ProtocolError,
    CloseReason::KeepaliveTimeout,
    CloseReason::Application,
    CloseReason::AuthenticationFailed,
    CloseReason::SessionLimit,
];

/// Every frame kind.
fn client_frame() -> impl Strategy<Value = ClientFrame> {
    let key = || any::<u16>().prop_map(PacketKey);
    let correlation = || any::<u32>().prop_map(Correlation);
    prop_oneof![
        (key(), correlation(), payload()).prop_map(|(key, correlation, payload)| {
            ClientFrame::Request {
                key,
                correlation,
                payload,
            }
        }),
        (key(), payload()).prop_map(|(key, payload)| ClientFrame::Message { key, payload }),
        (correlation(), payload()).prop_map(|(correlation, payload)| ClientFrame::Reply {
            correlation,
            payload
        }),
        (correlation(), error())
            .prop_map(|(correlation, error)| ClientFrame::Error { correlation, error }),
        (key(), payload()).prop_map(|(key, payload)| ClientFrame::Push { key, payload }),
        select(CLOSE_REASONS.to_vec()).prop_map(|reason| ClientFrame::Close { reason }),
        any::<u64>().prop_map(|nonce| ClientFrame::Ping { nonce }),
        any::<u64>().prop_map(|nonce| ClientFrame::Pong { nonce }),
    ]
}

fn samples() -> Vec<ClientFrame> {
    let payload = Bytes::from_static(b"jump");
    vec![
        ClientFrame::Request {
            key: PacketKey(1),
            correlation: Correlation(2),
            payload: payload.clone(),
        },
        ClientFrame::Message {
            key: PacketKey(1),
            payload: payload.clone(),
        },
        ClientFrame::Reply {
            correlation: Correlation(2),
            payload: payload.clone(),
        },
        ClientFrame::Error {
            correlation: Correlation(2),
            error: Error::new(Reason::SessionNotBound),
        },
        ClientFrame::Error {
            correlation: Correlation(2),
            error: Error::app(404, "no such item"),
        },
        ClientFrame::Error {
            correlation: Correlation(2),
            error: Error::new(Reason::StaleLocation)
                .about_actor(&ActorId::new("player-7").unwrap()),
        },
        ClientFrame::Push {
            key: PacketKey(3),
            payload,
        },
        ClientFrame::Close {
            reason: CloseReason::Replaced,
        },
        ClientFrame::Ping { nonce: 7 },
        ClientFrame::Pong { nonce: 7 },
    ]
}

fn body_of(frame: &ClientFrame) -> Bytes {
    frame_and_body(frame, ClientFrame::encode).1
}

fn decode(body: &[u8]) -> Result<ClientFrame, WireError> {
    ClientFrame::decode(Bytes::copy_from_slice(body), &DecodeLimits::default())
}

#[test]
fn the_layout_is_length_kind_flags_fields() {
    let mut frame = BytesMut::new();
    ClientFrame::Request {
        key: PacketKey(0x0102),
        correlation: Correlation(0x0304_0506),
        payload: Bytes::from_static(b"hi"),
    }
    .encode(&mut frame);
    assert_eq!(
        frame[..],
        [0, 0, 0, 14, 1, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 2, b'h', b'i']
    );
    let mut frame = BytesMut::new();
    ClientFrame::Close {
        reason: CloseReason::SealTimeout,
    }
    .encode(&mut frame);
    assert_eq!(frame[..], [0, 0, 0, 3, 6, 0, 2]);
}

#[test]
fn every_sample_round_trips_and_is_truncated_at_every_prefix_length() {
    let limits = DecodeLimits::default();
    for sample in samples() {
        let (mut frame, body) = frame_and_body(&sample, ClientFrame::encode);
        assert_every_prefix_truncated(&frame, &body, ClientFrame::decode, ClientFrame::decode_from);
        assert_eq!(ClientFrame::decode(body, &limits), Ok(sample.clone()));
        assert_eq!(
            ClientFrame::decode_from(&mut frame, &limits),
            Ok(Some(sample))
        );
        assert!(frame.is_empty());
    }
}

#[test]
fn every_single_byte_substitution_of_every_sample_is_total_and_canonical() {
    for sample in samples() {
        assert_every_byte_substitution_total(
            &body_of(&sample),
            ClientFrame::decode,
            ClientFrame::encode,
        );
    }
}

#[test]
fn an_oversized_length_prefix_is_refused_before_the_frame_arrives() {
    let limits = DecodeLimits {
        frame_len_max: 1024,
        ..DecodeLimits::default()
    };
    let mut stream = BytesMut::from(&1025u32.to_be_bytes()[..]);
    assert_eq!(
        ClientFrame::decode_from(&mut stream, &limits),
        Err(WireError::FrameTooLong {
            len: 1025,
            max: 1024
        })
    );
    assert_eq!(stream.len(), 4, "nothing is consumed");
}

#[test]
fn an_unknown_kind_is_refused() {
    for kind in [0u8, 9, 255] {
        assert_eq!(decode(&[kind, 0]), Err(WireError::UnknownFrameKind(kind)));
    }
}

#[test]
fn nonzero_flags_are_refused_but_the_detail_flag_of_an_error() {
    for sample in samples() {
        let mut body = body_of(&sample).to_vec();
        for flags in [2u8, 0x80, 0x81, 0xff] {
            body[1] = flags;
            assert_eq!(decode(&body), Err(WireError::InvalidFlags(flags)));
        }
        if !matches!(sample, ClientFrame::Error { .. }) {
            body[1] = 1;
            assert_eq!(decode(&body), Err(WireError::InvalidFlags(1)));
        }
    }
}

#[test]
fn an_error_without_detail_keeps_the_layout_it_had_before_the_flag() {
    // An older client reads a plain error as before: flags 0, kind, reason.
    let plain = ClientFrame::Error {
        correlation: Correlation(2),
        error: Error::new(Reason::SessionNotBound),
    };
    assert_eq!(
        body_of(&plain).as_ref(),
        [4, 0, 0, 0, 0, 2, 2, Reason::SessionNotBound.code()]
    );
}

#[test]
fn an_application_error_travels_with_its_code_and_detail_under_the_flag() {
    let frame = ClientFrame::Error {
        correlation: Correlation(2),
        error: Error::app(0x0102_0304, "no"),
    };
    // kind 4, flags 1 (detail), correlation, kind 7 Application, reason 70,
    // code u32, text length u16, text.
    let body = [4, 1, 0, 0, 0, 2, 7, 70, 1, 2, 3, 4, 0, 2, b'n', b'o'];
    assert_eq!(body_of(&frame).as_ref(), body);
    let ClientFrame::Error { error, .. } = decode(&body).unwrap() else {
        panic!("an error frame")
    };
    assert_eq!(error.kind(), ErrorKind::Application);
    assert_eq!((error.code(), error.detail()), (0x0102_0304, "no"));
}

#[test]
fn an_error_detail_the_encoder_never_writes_is_refused() {
    let with = |kind: u8, reason: u8, code: u32, text: &[u8]| {
        let mut body = vec![4, 1, 0, 0, 0, 2, kind, reason];
        body.extend_from_slice(&code.to_be_bytes());
        body.extend_from_slice(&(text.len() as u16).to_be_bytes());
        body.extend_from_slice(text);
        body
    };
    let (app, stale) = (Reason::Application, Reason::StaleLocation);
    let app_kind = ErrorKind::Application.code();
    let unavailable = ErrorKind::Unavailable.code();
    // A code belongs to an application error only.
    assert_eq!(
        decode(&with(unavailable, stale.code(), 9, b"actor a")),
        Err(WireError::InvalidErrorDetail("a code on a framework error"))
    );
    // Neither code nor text is written without the flag.
    assert!(matches!(
        decode(&with(app_kind, app.code(), 0, b"")),
        Err(WireError::InvalidErrorDetail(_))
    ));
    assert!(matches!(
        decode(&with(app_kind, app.code(), 1, &[0xff, 0xfe])),
        Err(WireError::InvalidErrorDetail(_))
    ));
    let long = vec![b'x'; Error::DETAIL_MAX + 1];
    assert_eq!(
        decode(&with(app_kind, app.code(), 1, &long)),
        Err(WireError::ErrorDetailTooLong {
            len: Error::DETAIL_MAX as u16 + 1,
            max: Error::DETAIL_MAX as u16
        })
    );
    // The longest text is accepted.
    let longest = vec![b'x'; Error::DETAIL_MAX];
    assert!(decode(&with(app_kind, app.code(), 1, &longest)).is_ok());
}

#[test]
fn a_bad_error_or_close_code_is_refused() {
    let error = |kind: u8, reason: u8| [4, 0, 0, 0, 0, 2, kind, reason];
    assert_eq!(decode(&error(0, 1)), Err(WireError::UnknownErrorKind(0)));
    assert_eq!(
        decode(&error(ErrorKind::InvalidOperation.code(), 0)),
        Err(WireError::UnknownReason(0))
    );
    assert_eq!(
        decode(&error(ErrorKind::NotFound.code(), Reason::Deadline.code())),
        Err(WireError::ReasonKindMismatch {
            kind: ErrorKind::NotFound,
            reason: Reason::Deadline
        })
    );
    for code in [0u8, 10, 255] {
        assert_eq!(
            decode(&[6, 0, code]),
            Err(WireError::UnknownCloseReason(code))
        );
    }
}

#[test]
fn trailing_bytes_after_the_fields_are_refused() {
    for sample in samples() {
        let mut body = body_of(&sample).to_vec();
        body.extend_from_slice(&[0, 0]);
        assert_eq!(
            decode(&body),
            Err(WireError::TrailingBytes { len: 2 }),
            "{sample:?}"
        );
    }
}

#[test]
fn a_websocket_message_holds_exactly_one_frame_with_its_prefix() {
    let limits = DecodeLimits::default();
    for sample in samples() {
        let (message, _) = frame_and_body(&sample, ClientFrame::encode);
        let message = message.freeze();
        assert_eq!(
            ClientFrame::decode_message(message.clone(), &limits),
            Ok(sample.clone())
        );
        // Cut anywhere, or with anything after it (a second frame), it is refused.
        for cut in 0..message.len() {
            assert!(ClientFrame::decode_message(message.slice(..cut), &limits).is_err());
        }
        let mut two = message.to_vec();
        two.extend_from_slice(&message);
        assert_eq!(
            ClientFrame::decode_message(Bytes::from(two), &limits),
            Err(WireError::TrailingBytes { len: message.len() })
        );
    }
    // A prefix over the limit is refused before the body is looked at.
    let over = limits.frame_len_max + 1;
    assert_eq!(
        ClientFrame::decode_message(Bytes::copy_from_slice(&over.to_be_bytes()), &limits),
        Err(WireError::FrameTooLong {
            len: over,
            max: limits.frame_len_max
        })
    );
}

/// docs/wire.md "Limits", "WebSocket": `frame_len_max` bounds the length
/// a prefix announces, inclusively. A WebSocket message holding a frame
/// exactly that long decodes; one byte over is refused `FrameTooLong`.
#[test]
fn a_websocket_message_of_exactly_the_frame_limit_decodes_and_one_byte_over_is_refused() {
    for sample in samples() {
        let (message, _) = frame_and_body(&sample, ClientFrame::encode);
        let message = message.freeze();
        let len = u32::try_from(message.len() - 4).unwrap();
        let at = DecodeLimits {
            frame_len_max: len,
            ..DecodeLimits::default()
        };
        assert_eq!(
            ClientFrame::decode_message(message.clone(), &at),
            Ok(sample.clone())
        );
        let under = DecodeLimits {
            frame_len_max: len - 1,
            ..DecodeLimits::default()
        };
        assert_eq!(
            ClientFrame::decode_message(message, &under),
            Err(WireError::FrameTooLong { len, max: len - 1 }),
            "{sample:?}"
        );
    }
}

/// docs/wire.md "WebSocket": a message holds exactly the frame its prefix
/// announces. One whose prefix announces a byte less than follows is
/// refused `TrailingBytes` before its body is decoded, even when the whole
/// body would decode as the frame (its fields running past the announced
/// length).
#[test]
fn a_websocket_message_whose_prefix_announces_less_than_its_body_is_refused_trailing_bytes() {
    let limits = DecodeLimits::default();
    for sample in samples() {
        let (message, _) = frame_and_body(&sample, ClientFrame::encode);
        let mut message = message.to_vec();
        let len = u32::from_be_bytes(message[..4].try_into().unwrap());
        message[..4].copy_from_slice(&(len - 1).to_be_bytes());
        assert_eq!(
            ClientFrame::decode_message(Bytes::from(message), &limits),
            Err(WireError::TrailingBytes { len: 1 }),
            "{sample:?}"
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_messages_decode_or_error_never_panic(bytes in vec(any::<u8>(), 0..64)) {
        let limits = DecodeLimits::default();
        if let Ok(frame) = ClientFrame::decode_message(Bytes::from(bytes.clone()), &limits) {
            let mut again = BytesMut::new();
            frame.encode(&mut again);
            prop_assert_eq!(&again[..], &bytes[..]);
        }
    }

    #[test]
    fn every_frame_round_trips(frame in client_frame()) {
        let limits = DecodeLimits::default();
        let (mut stream, body) = frame_and_body(&frame, ClientFrame::encode);
        prop_assert_eq!(ClientFrame::decode(body, &limits), Ok(frame.clone()));
        prop_assert_eq!(ClientFrame::decode_from(&mut stream, &limits), Ok(Some(frame)));
        prop_assert!(stream.is_empty());
    }

    #[test]
    fn every_strict_prefix_of_a_frame_is_truncated(frame in client_frame()) {
        let (stream, body) = frame_and_body(&frame, ClientFrame::encode);
        assert_every_prefix_truncated(&stream, &body, ClientFrame::decode, ClientFrame::decode_from);
    }

    #[test]
    fn arbitrary_bytes_decode_or_error_never_panic(bytes in vec(any::<u8>(), 0..64)) {
        assert_total_and_canonical(Bytes::from(bytes), ClientFrame::decode, ClientFrame::encode);
    }

    #[test]
    fn arbitrary_fields_after_a_kind_decode_or_error(
        kind in 0u8..10,
        rest in vec(any::<u8>(), 0..64),
    ) {
        let mut body = vec![kind, 0];
        body.extend_from_slice(&rest);
        assert_total_and_canonical(Bytes::from(body), ClientFrame::decode, ClientFrame::encode);
    }

    #[test]
    fn mutated_frames_decode_or_error_never_panic(frame in client_frame(), edits in edits()) {
        let body = edits.apply(&body_of(&frame));
        assert_total_and_canonical(body, ClientFrame::decode, ClientFrame::encode);
    }
}

/// Writes every sample as a seed of the `client_frame` fuzz target, alone and
/// all back to back in one stream (run by hand: `cargo test --test
/// wire_client -- --ignored`; docs/TESTING.md).
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_corpus() {
    let mut stream = BytesMut::new();
    let mut seeds = Vec::new();
    for (i, sample) in samples().iter().enumerate() {
        let mut frame = BytesMut::new();
        sample.encode(&mut frame);
        stream.extend_from_slice(&frame);
        seeds.push((format!("{i:02}"), frame.to_vec()));
    }
    seeds.push(("all".to_string(), stream.to_vec()));
    fuzz_seed::write("client_frame", seeds);
}
