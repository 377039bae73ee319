//! What both raw forwarders share (issue 5 item 2: the limit of each io
//! stack): the link between hop A and hop B and hop B's answer. Like
//! zlink's nodes, A multiplexes every client onto one link connection to B;
//! each chunk of client bytes travels with an 8-byte header (the client's
//! tag and the chunk's length, little-endian u32s), so that one send on the
//! link carries the bytes of every client that had some in that loop turn.
//! A chunk of length 0 says that the client closed (B forgets its partial
//! frame). B answers each request frame with a reply frame carrying the
//! same correlation and payload, in a chunk with the same tag; A copies the
//! chunk's bytes to that client. No protocol logic runs on A.
//!
//! The one-hop forwarders (`raw-uring-1hop`, `raw-epoll-1hop`: the limit of
//! the local path, a session and its player on one node) answer on the
//! connection that read the request, with the same [`answer_frames`] and
//! no link.

use std::collections::HashMap;

use bytes::{Buf, BufMut, BytesMut};
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

/// Bytes of a link chunk's header: tag, then length.
pub const HEADER: usize = 8;

/// Appends one chunk of `bytes` from client `tag` to the link's outbound.
pub fn push_chunk(out: &mut BytesMut, tag: u32, bytes: &[u8]) {
    out.reserve(HEADER + bytes.len());
    out.put_u32_le(tag);
    out.put_u32_le(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(bytes);
}

/// Appends the chunk that says client `tag` closed.
pub fn push_closed(out: &mut BytesMut, tag: u32) {
    push_chunk(out, tag, &[]);
}

/// Splits the next complete chunk off `inbound`: its tag and bytes (empty:
/// the client closed). `None` until a whole chunk has arrived.
pub fn next_chunk(inbound: &mut BytesMut) -> Option<(u32, BytesMut)> {
    let header: [u8; HEADER] = inbound.get(..HEADER)?.try_into().ok()?;
    let tag = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    if inbound.len() < HEADER + len {
        return None;
    }
    inbound.advance(HEADER);
    Some((tag, inbound.split_to(len)))
}

/// Answers every complete request frame at the front of `bytes` with a
/// reply frame (same correlation, same payload) appended to `out`, and
/// leaves a partial frame in `bytes` for the bytes still to come. The one
/// piece of protocol every raw forwarder runs: hop B of the two-hop ones
/// ([`Reflector`]) calls it on each client's chunk, the one-hop ones
/// (`raw-*-1hop`) straight on the client's connection.
pub fn answer_frames(
    bytes: &mut BytesMut,
    out: &mut BytesMut,
    limits: &DecodeLimits,
) -> Result<(), Malformed> {
    loop {
        match ClientFrame::decode_from(bytes, limits) {
            Ok(Some(ClientFrame::Request {
                correlation,
                payload,
                ..
            })) => ClientFrame::Reply {
                correlation,
                payload,
            }
            .encode(out),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(()),
            Err(_) => return Err(Malformed),
        }
    }
}

/// Hop B's side of one link: every client's partial frame, by tag.
#[derive(Default)]
pub struct Reflector {
    limits: DecodeLimits,
    partial: HashMap<u32, BytesMut>,
}

/// A link that sent a malformed client frame: B closes it.
#[derive(Debug)]
pub struct Malformed;

impl Reflector {
    /// Answers every request in the complete chunks of `inbound`, each
    /// client's replies in one chunk appended to `out`.
    pub fn answer(&mut self, inbound: &mut BytesMut, out: &mut BytesMut) -> Result<(), Malformed> {
        while let Some((tag, mut bytes)) = next_chunk(inbound) {
            if bytes.is_empty() {
                self.partial.remove(&tag);
                continue;
            }
            let pending = self.partial.entry(tag).or_default();
            if !pending.is_empty() {
                pending.extend_from_slice(&bytes);
                bytes = std::mem::take(pending);
            }
            // The reply chunk's header first; its length once the replies
            // are encoded behind it.
            let start = out.len();
            out.put_u32_le(tag);
            out.put_u32_le(0);
            answer_frames(&mut bytes, out, &self.limits)?;
            let len = out.len() - start - HEADER;
            if len == 0 {
                out.truncate(start);
            } else {
                let len = u32::try_from(len).map_err(|_| Malformed)?;
                out[start + 4..start + HEADER].copy_from_slice(&len.to_le_bytes());
            }
            if !bytes.is_empty() {
                *self.partial.entry(tag).or_default() = bytes;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use zlink::ids::{Correlation, PacketKey};

    use super::*;

    fn request(correlation: u32) -> BytesMut {
        let mut out = BytesMut::new();
        ClientFrame::Request {
            key: PacketKey(2),
            correlation: Correlation(correlation),
            payload: Bytes::from_static(b"payload!"),
        }
        .encode(&mut out);
        out
    }

    /// A request split over two chunks, another client's in between, is
    /// answered once whole, in a chunk of its own client's tag.
    #[test]
    fn partial_frames_are_kept_per_client_until_whole() {
        let (one, two) = (request(1), request(2));
        let mut link = BytesMut::new();
        push_chunk(&mut link, 7, &one[..3]);
        push_chunk(&mut link, 9, &two);
        push_chunk(&mut link, 7, &one[3..]);
        let mut out = BytesMut::new();
        Reflector::default().answer(&mut link, &mut out).unwrap();
        assert!(link.is_empty());
        let mut tags = Vec::new();
        while let Some((tag, mut bytes)) = next_chunk(&mut out) {
            let frame = ClientFrame::decode_from(&mut bytes, &DecodeLimits::default());
            let Ok(Some(ClientFrame::Reply { correlation, .. })) = frame else {
                panic!("not a reply: {frame:?}");
            };
            tags.push((tag, correlation.0));
        }
        assert_eq!(tags, [(9, 2), (7, 1)]);
    }

    /// One hop: the complete requests are answered, a partial one stays
    /// for the bytes still to come.
    #[test]
    fn answer_frames_answers_whole_requests_and_keeps_a_partial_one() {
        let (one, two) = (request(1), request(2));
        let mut bytes = one.clone();
        bytes.extend_from_slice(&two[..4]);
        let mut out = BytesMut::new();
        answer_frames(&mut bytes, &mut out, &DecodeLimits::default()).unwrap();
        assert_eq!(&bytes[..], &two[..4]);
        bytes.extend_from_slice(&two[4..]);
        answer_frames(&mut bytes, &mut out, &DecodeLimits::default()).unwrap();
        assert!(bytes.is_empty());
        let mut correlations = Vec::new();
        while let Ok(Some(frame)) = ClientFrame::decode_from(&mut out, &DecodeLimits::default()) {
            let ClientFrame::Reply {
                correlation,
                payload,
            } = frame
            else {
                panic!("not a reply: {frame:?}");
            };
            assert_eq!(&payload[..], b"payload!");
            correlations.push(correlation.0);
        }
        assert_eq!(correlations, [1, 2]);
    }

    #[test]
    fn a_chunk_waits_for_its_whole_length() {
        let mut link = BytesMut::new();
        push_chunk(&mut link, 1, b"abcdef");
        let mut head = link.split_to(HEADER + 2);
        assert!(next_chunk(&mut head).is_none());
        head.unsplit(link);
        assert_eq!(
            next_chunk(&mut head).map(|(t, b)| (t, b.to_vec())),
            Some((1, b"abcdef".to_vec()))
        );
    }
}
