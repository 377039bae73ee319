//! Node-to-node records: one Rust type per command of the §5 table, and the
//! relocation handoff between source and target (60–65, `handoff.rs`).
//!
//! What the spec implies without a number is a variant of the command it
//! belongs to: the tombstone is a transition of 38 (§6), the disconnect notice
//! and the request reply are variants of 24, the abort a variant of 44.
//! Command 45 is reserved: it has no type, and decoding refuses it
//! (docs/wire.md).
//!
//! A record is `[u32 len][u8 command][u8 variant][body]`: the variant byte
//! names the transition the record makes, so a receiver dispatches on two
//! bytes before it reads a field. Each command's body is encoded next to its
//! type; this file owns the dispatch and the request header.

/// The `Body` of a command with one variant (its byte is 1) whose fields
/// go in the order listed, each in its own encoding: what most of the
/// handoff's and the seal's records are (docs/wire.md per command). A
/// variant byte other than 1 is refused as unknown.
macro_rules! one_variant_body {
    ($ty:ident { $($field:ident),+ $(,)? }) => {
        impl Body for $ty {
            const COMMAND: Command = Command::$ty;

            fn variant(&self) -> u8 {
                1
            }

            fn put_body(&self, dst: &mut BytesMut) {
                $(self.$field.put(dst);)+
            }

            fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
                if variant != 1 {
                    return Err(Self::unknown(variant));
                }
                Ok(Self {
                    $($field: r.get()?,)+
                })
            }
        }
    };
}

mod actor_call;
mod actor_host;
mod actor_send;
mod bind;
mod bound_send;
mod handoff;
mod relocation;
mod replaced;

pub use actor_call::{ActorCall, CallBody};
pub use actor_host::{ActorHost, HostAnswer, HostAsk};
pub use actor_send::{ActorMessage, ActorReply, ActorSend, ActorSendBody, BoundSessionTail};
pub use bind::{
    BindRequest, BindTerminal, BindTombstone, BoundRoute, BoundSessionBind, TombstoneCause,
};
pub use bound_send::{BoundSessionBody, BoundSessionSend};
pub use handoff::{
    BindingHandoff, CallsHandoff, RelocationCutover, RelocationDiscard, RelocationFinished,
    RelocationIngressHold, RelocationPrepare, RelocationReady, SavedWork, TimerHandoff,
    TimersHandoff,
};
pub use relocation::{
    RouteCommit, SealIdentity, SessionRelocationRoute, SessionRelocationSeal,
    SessionRelocationSealed,
};
pub use replaced::{AuthorityFence, BoundSessionReplaced};

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::ids::RequestId;
use crate::wire::codec::{self, Field, Reader};
use crate::wire::{DecodeLimits, WireError};

/// The command numbers of the §5 table.
// Reachable from the public surface only inside `WireError::UnknownVariant`
// (a node record's error, which a client never gets), so it is left without
// a public name rather than made part of that surface.
#[allow(unnameable_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    /// actorSend: session → Actor payload, with the bound-session tail.
    ActorSend = 24,
    /// boundSessionSend: Actor → session push or close.
    BoundSessionSend = 36,
    /// boundSessionBind: bind request, its terminal, and the tombstone.
    BoundSessionBind = 38,
    /// sessionRelocationSeal: install a seal on a binding.
    SessionRelocationSeal = 42,
    /// sessionRelocationSealed: the seal-installation result.
    SessionRelocationSealed = 43,
    /// sessionRelocationRoute: route apply (commit) or abort; one-way.
    SessionRelocationRoute = 44,
    /// boundSessionReplaced: one-way notice to the replaced binding.
    BoundSessionReplaced = 51,
    /// Relocation prepare: temporary queue and Restore at the target (request).
    RelocationPrepare = 60,
    /// Relocation relay-ready: the target's reply to 60.
    RelocationReady = 61,
    /// Relocation ingress hold: one item that reached the source after capture.
    RelocationIngressHold = 62,
    /// Relocation cutover: the ingress hold is complete.
    RelocationCutover = 63,
    /// Relocation discard: the coordinator aborted before relay-ready.
    RelocationDiscard = 64,
    /// Relocation finished: the target's commit or failure, to the source.
    RelocationFinished = 65,
    /// actorCall: one Actor to another by ActorId (docs/actors.md).
    ActorCall = 70,
    /// actorHost: BindOrGet asked of the row's owner, and its answer
    /// (docs/store.md).
    ActorHost = 71,
}

impl Command {
    /// The command's number on the wire.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The command a number names; 45 is refused with its own error.
    pub fn from_code(code: u8) -> Result<Self, WireError> {
        Ok(match code {
            24 => Self::ActorSend,
            36 => Self::BoundSessionSend,
            38 => Self::BoundSessionBind,
            42 => Self::SessionRelocationSeal,
            43 => Self::SessionRelocationSealed,
            44 => Self::SessionRelocationRoute,
            51 => Self::BoundSessionReplaced,
            60 => Self::RelocationPrepare,
            61 => Self::RelocationReady,
            62 => Self::RelocationIngressHold,
            63 => Self::RelocationCutover,
            64 => Self::RelocationDiscard,
            65 => Self::RelocationFinished,
            70 => Self::ActorCall,
            71 => Self::ActorHost,
            RESERVED_COMMAND => return Err(WireError::ReservedCommand),
            other => return Err(WireError::UnknownCommand(other)),
        })
    }
}

/// The reserved command number that is neither sent nor accepted (§5, §8.2).
pub const RESERVED_COMMAND: u8 = 45;

/// A request's correlation and its remaining time budget (docs/wire.md,
/// "Requests and deadlines"): the budget travels relative, because the nodes'
/// clocks are not shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// Names the request; its reply carries the same id.
    pub id: RequestId,
    /// Time left until the requester gives up.
    pub budget: Duration,
}

/// `[u64 id][u32 budget_ms]`. On encode the budget is truncated to whole
/// milliseconds (rounding never lengthens it) and saturates at `u32::MAX` ms
/// (49 days). Decoding refuses a budget above
/// [`DecodeLimits::budget_max_ms`]: it bounds how long a receiver holds a
/// request's state on a peer's word.
impl Field for RequestHeader {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        self.id.put(dst);
        dst.put_u32(u32::try_from(self.budget.as_millis()).unwrap_or(u32::MAX));
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let id = r.get()?;
        let budget_ms = r.u32()?;
        let max_ms = r.limits().budget_max_ms;
        if budget_ms > max_ms {
            return Err(WireError::BudgetOutOfRange { budget_ms, max_ms });
        }
        Ok(Self {
            id,
            budget: Duration::from_millis(u64::from(budget_ms)),
        })
    }
}

/// The body of one command: its variant byte, and its fields after it.
trait Body: Sized {
    /// The command whose body this is.
    const COMMAND: Command;
    /// The variant byte of this value (1-based; docs/wire.md per command).
    fn variant(&self) -> u8;
    /// Appends the fields after the variant byte.
    fn put_body(&self, dst: &mut BytesMut);
    /// Reads the fields of `variant`.
    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError>;

    /// The error for a variant byte this command does not define.
    fn unknown(variant: u8) -> WireError {
        WireError::UnknownVariant {
            command: Self::COMMAND,
            variant,
        }
    }
}

/// One node-to-node record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRecord {
    /// 24.
    ActorSend(ActorSend),
    /// 36.
    BoundSessionSend(BoundSessionSend),
    /// 38.
    BoundSessionBind(BoundSessionBind),
    /// 42.
    SessionRelocationSeal(SessionRelocationSeal),
    /// 43.
    SessionRelocationSealed(SessionRelocationSealed),
    /// 44.
    SessionRelocationRoute(SessionRelocationRoute),
    /// 51.
    BoundSessionReplaced(BoundSessionReplaced),
    /// 60.
    ///
    /// Boxed: it carries the Actor's state and saved work, and is the
    /// largest body by far (264 bytes against the 24's 176); unboxed, every
    /// record of every kind was that large, and each move of a record from
    /// layer to layer copied it (docs/PERFORMANCE.md "Where the rest goes").
    RelocationPrepare(Box<RelocationPrepare>),
    /// 61.
    RelocationReady(RelocationReady),
    /// 62.
    RelocationIngressHold(RelocationIngressHold),
    /// 63.
    RelocationCutover(RelocationCutover),
    /// 64.
    RelocationDiscard(RelocationDiscard),
    /// 65.
    RelocationFinished(RelocationFinished),
    /// 70.
    ActorCall(ActorCall),
    /// 71.
    ActorHost(ActorHost),
}

impl NodeRecord {
    /// The record's command number.
    #[cfg(feature = "testing")]
    pub fn command(&self) -> Command {
        match self {
            NodeRecord::ActorSend(_) => Command::ActorSend,
            NodeRecord::BoundSessionSend(_) => Command::BoundSessionSend,
            NodeRecord::BoundSessionBind(_) => Command::BoundSessionBind,
            NodeRecord::SessionRelocationSeal(_) => Command::SessionRelocationSeal,
            NodeRecord::SessionRelocationSealed(_) => Command::SessionRelocationSealed,
            NodeRecord::SessionRelocationRoute(_) => Command::SessionRelocationRoute,
            NodeRecord::BoundSessionReplaced(_) => Command::BoundSessionReplaced,
            NodeRecord::RelocationPrepare(_) => Command::RelocationPrepare,
            NodeRecord::RelocationReady(_) => Command::RelocationReady,
            NodeRecord::RelocationIngressHold(_) => Command::RelocationIngressHold,
            NodeRecord::RelocationCutover(_) => Command::RelocationCutover,
            NodeRecord::RelocationDiscard(_) => Command::RelocationDiscard,
            NodeRecord::RelocationFinished(_) => Command::RelocationFinished,
            NodeRecord::ActorCall(_) => Command::ActorCall,
            NodeRecord::ActorHost(_) => Command::ActorHost,
        }
    }
}

impl NodeRecord {
    /// Appends the whole length-prefixed record to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        codec::put_frame(dst, |dst| match self {
            NodeRecord::ActorSend(b) => put(b, dst),
            NodeRecord::BoundSessionSend(b) => put(b, dst),
            NodeRecord::BoundSessionBind(b) => put(b, dst),
            NodeRecord::SessionRelocationSeal(b) => put(b, dst),
            NodeRecord::SessionRelocationSealed(b) => put(b, dst),
            NodeRecord::SessionRelocationRoute(b) => put(b, dst),
            NodeRecord::BoundSessionReplaced(b) => put(b, dst),
            NodeRecord::RelocationPrepare(b) => put(&**b, dst),
            NodeRecord::RelocationReady(b) => put(b, dst),
            NodeRecord::RelocationIngressHold(b) => put(b, dst),
            NodeRecord::RelocationCutover(b) => put(b, dst),
            NodeRecord::RelocationDiscard(b) => put(b, dst),
            NodeRecord::RelocationFinished(b) => put(b, dst),
            NodeRecord::ActorCall(b) => put(b, dst),
            NodeRecord::ActorHost(b) => put(b, dst),
        });
    }

    /// The RequestId of a request record (24 or 70 with a header, 38
    /// request, 42, 60, 71 ask).
    pub fn request_id(&self) -> Option<RequestId> {
        match self {
            NodeRecord::ActorSend(ActorSend::Message(m)) => m.request.map(|h| h.id),
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => Some(r.request.id),
            NodeRecord::SessionRelocationSeal(s) => Some(s.request.id),
            NodeRecord::RelocationPrepare(p) => Some(p.request.id),
            NodeRecord::ActorCall(c) => c.request_id(),
            NodeRecord::ActorHost(ActorHost::Ask(a)) => Some(a.request.id),
            _ => None,
        }
    }

    /// Splits one whole record body off a link's receive buffer without
    /// decoding it (`Ok(None)` while incomplete), so that a body that fails
    /// to decode can still be looked at by [`NodeRecord::request_of`]. The
    /// node's links split with [`NodeRecord::split_frames`] instead; this is
    /// for the tests and the fuzz targets.
    #[cfg(feature = "testing")]
    pub fn split_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Bytes>, WireError> {
        codec::split_frame(buf, limits)
    }

    /// The command and RequestId of a request record whose body did not
    /// decode, when its start still names one: every request (24 with a
    /// header, 38 request, 42, 60, 71 ask) begins with its RequestHeader, so a
    /// malformed request can be answered with a typed error instead of
    /// silence (§6).
    pub fn request_of(body: &Bytes) -> Option<(Command, RequestId)> {
        let limits = DecodeLimits::default();
        let mut r = Reader::new(body.clone(), &limits);
        let command = Command::from_code(r.u8().ok()?).ok()?;
        let variant = r.u8().ok()?;
        let is_request = match command {
            Command::ActorSend => variant == 1 || variant == 2,
            Command::BoundSessionBind
            | Command::SessionRelocationSeal
            | Command::RelocationPrepare
            | Command::ActorHost => variant == 1,
            // Both variants of a 70 start with the optional request
            // header; an outcome that carries one is malformed, and is
            // answered under it like any request that does not hold
            // (found by the node_record fuzz target).
            Command::ActorCall => variant == 1 || variant == 2,
            _ => false,
        };
        if !is_request {
            return None;
        }
        if matches!(command, Command::ActorSend | Command::ActorCall) && r.u8().ok()? != 1 {
            // A one-way 24 or 70: no request to answer.
            return None;
        }
        r.u64().ok().map(|id| (command, RequestId(id)))
    }

    /// Decodes one complete record from `frame`, the bytes after the length
    /// prefix. Payloads and names are slices of `frame`. The node's links
    /// decode with [`NodeRecord::decode_framed`] instead; this is for the
    /// tests and the fuzz targets.
    #[cfg(feature = "testing")]
    pub fn decode(frame: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        codec::check_frame_len(frame.len(), limits)?;
        Self::read(Reader::new(frame, limits))
    }

    /// Splits one record off the front of a link's receive buffer.
    ///
    /// `Ok(None)` while the record is incomplete (nothing is consumed). An
    /// oversized length prefix is refused at once, leaving `buf` untouched:
    /// the link cannot resynchronise and must close. Any other error has
    /// consumed exactly the bad record, so the next one can still be read.
    #[cfg(feature = "testing")]
    pub fn decode_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Self>, WireError> {
        codec::read_whole_frame(buf, limits, Self::read)
    }

    /// Splits every complete record, each with its length prefix, off the
    /// front of a link's receive buffer, for [`NodeRecord::decode_framed`]:
    /// the link's hot path, which splits the buffer once for all the
    /// records one read brought, and reads each where it lies. Empty while
    /// the first record is incomplete; an oversized length prefix is
    /// refused when it is the first, leaving `buf` untouched (the link must
    /// close), and is left for the next call after other records.
    pub(crate) fn split_frames(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<codec::Frames, WireError> {
        codec::Frames::split(buf, limits)
    }

    /// Decodes a record [`NodeRecord::split_frames`] split off. The caller
    /// takes the frame's [`RequestHead`] first when a record that does not
    /// decode is to be answered (§6): the frame itself is not kept for
    /// that, since keeping it is a reference more on the receive buffer,
    /// taken and dropped for every record.
    pub(crate) fn decode_framed(frame: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        Self::read(Reader::after_prefix(frame, limits))
    }

    /// The fields of one record, to the end of the frame.
    #[inline]
    fn read(mut r: Reader<'_>) -> Result<Self, WireError> {
        let command = Command::from_code(r.u8()?)?;
        let variant = r.u8()?;
        let record = match command {
            Command::ActorSend => NodeRecord::ActorSend(Body::get_body(variant, &mut r)?),
            Command::BoundSessionSend => {
                NodeRecord::BoundSessionSend(Body::get_body(variant, &mut r)?)
            }
            Command::BoundSessionBind => {
                NodeRecord::BoundSessionBind(Body::get_body(variant, &mut r)?)
            }
            Command::SessionRelocationSeal => {
                NodeRecord::SessionRelocationSeal(Body::get_body(variant, &mut r)?)
            }
            Command::SessionRelocationSealed => {
                NodeRecord::SessionRelocationSealed(Body::get_body(variant, &mut r)?)
            }
            Command::SessionRelocationRoute => {
                NodeRecord::SessionRelocationRoute(Body::get_body(variant, &mut r)?)
            }
            Command::BoundSessionReplaced => {
                NodeRecord::BoundSessionReplaced(Body::get_body(variant, &mut r)?)
            }
            Command::RelocationPrepare => {
                NodeRecord::RelocationPrepare(Box::new(Body::get_body(variant, &mut r)?))
            }
            Command::RelocationReady => {
                NodeRecord::RelocationReady(Body::get_body(variant, &mut r)?)
            }
            Command::RelocationIngressHold => {
                NodeRecord::RelocationIngressHold(Body::get_body(variant, &mut r)?)
            }
            Command::RelocationCutover => {
                NodeRecord::RelocationCutover(Body::get_body(variant, &mut r)?)
            }
            Command::RelocationDiscard => {
                NodeRecord::RelocationDiscard(Body::get_body(variant, &mut r)?)
            }
            Command::RelocationFinished => {
                NodeRecord::RelocationFinished(Body::get_body(variant, &mut r)?)
            }
            Command::ActorCall => NodeRecord::ActorCall(Body::get_body(variant, &mut r)?),
            Command::ActorHost => NodeRecord::ActorHost(Body::get_body(variant, &mut r)?),
        };
        r.finish()?;
        Ok(record)
    }
}

/// The longest start of a record body [`NodeRecord::request_of`] reads:
/// command (1), variant (1), the presence byte of an optional header (1),
/// the RequestId (8).
const REQUEST_HEAD_LEN: usize = 11;

/// The first bytes of a record as [`NodeRecord::split_frames`] splits it,
/// copied out before it is decoded: enough for [`NodeRecord::request_of`]
/// to name the request a record that does not decode was (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestHead {
    bytes: [u8; REQUEST_HEAD_LEN],
    len: usize,
}

impl RequestHead {
    /// The head of `frame`, its length prefix included.
    pub(crate) fn of(frame: &[u8]) -> Self {
        let body = frame.get(codec::LEN_PREFIX..).unwrap_or_default();
        // A whole head is copied at a fixed size, without a call.
        if let Some(bytes) = body.first_chunk::<REQUEST_HEAD_LEN>() {
            return Self {
                bytes: *bytes,
                len: REQUEST_HEAD_LEN,
            };
        }
        let mut head = Self {
            bytes: [0; REQUEST_HEAD_LEN],
            len: body.len(),
        };
        head.bytes[..body.len()].copy_from_slice(body);
        head
    }

    /// The command and RequestId of the request the record was, when its
    /// start names one ([`NodeRecord::request_of`]).
    pub(crate) fn request(&self) -> Option<(Command, RequestId)> {
        let head = self.bytes.get(..self.len).unwrap_or_default();
        NodeRecord::request_of(&Bytes::copy_from_slice(head))
    }
}

fn put<B: Body>(body: &B, dst: &mut BytesMut) {
    dst.put_u8(B::COMMAND.code());
    dst.put_u8(body.variant());
    body.put_body(dst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Reason};
    use crate::ids::{
        ActorId, AuthorityOwnerGeneration, BindingGeneration, Correlation, NodeGeneration, NodeRid,
        ObjectGeneration, OwnerLeaseGeneration, PacketKey, SessionOwnerId, SessionRef, SessionRid,
        SessionSequence,
    };

    fn header(id: u64) -> Option<RequestHeader> {
        Some(RequestHeader {
            id: RequestId(id),
            budget: Duration::from_millis(1_500),
        })
    }

    fn message(request: Option<RequestHeader>) -> NodeRecord {
        NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
            request,
            actor: ActorId::new("room-7").unwrap(),
            object_generation: ObjectGeneration(3),
            authority: AuthorityOwnerGeneration(4),
            lease: OwnerLeaseGeneration(5),
            tail: BoundSessionTail {
                session: SessionRef {
                    owner: NodeRid(6),
                    lifecycle: NodeGeneration(7),
                    owner_id: SessionOwnerId(8),
                    session: SessionRid(9),
                },
                binding: BindingGeneration(10),
                sequence: SessionSequence(11),
            },
            body: ActorSendBody::Payload {
                key: PacketKey(12),
                correlation: Some(Correlation(13)),
                payload: Bytes::from_static(b"payload"),
            },
        }))
    }

    fn samples() -> Vec<NodeRecord> {
        vec![
            message(header(77)),
            message(None),
            NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
                request: RequestId(78),
                outcome: Ok(Bytes::from_static(b"reply")),
            })),
            NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
                request: RequestId(79),
                outcome: Err(Error::new(Reason::MalformedRecord)),
            })),
        ]
    }

    fn framed(body: &[u8]) -> BytesMut {
        let mut frame = BytesMut::new();
        frame.put_u32(u32::try_from(body.len()).unwrap());
        frame.put_slice(body);
        frame
    }

    /// Every record of a stream, split at once, then one at a time.
    fn split_all(stream: &mut BytesMut) -> Vec<Bytes> {
        let frames = NodeRecord::split_frames(stream, &DecodeLimits::default()).unwrap();
        assert!(!frames.is_empty());
        frames.collect()
    }

    #[test]
    fn split_frames_and_decode_framed_read_back_to_back_records_as_decode_does() {
        let limits = DecodeLimits::default();
        let mut stream = BytesMut::new();
        for record in samples() {
            record.encode(&mut stream);
        }
        let mut next = BytesMut::new();
        message(header(2)).encode(&mut next);
        stream.extend_from_slice(&next[..next.len() - 1]);
        let frames = split_all(&mut stream);
        assert_eq!(frames.len(), samples().len());
        for (frame, record) in frames.into_iter().zip(samples()) {
            assert_eq!(NodeRecord::decode_framed(frame, &limits), Ok(record));
        }
        // The incomplete record stays, whole, for the next read.
        assert_eq!(&stream[..], &next[..next.len() - 1]);
        let frames = NodeRecord::split_frames(&mut stream, &limits).unwrap();
        assert!(frames.is_empty());
        assert_eq!(frames.count(), 0);
        assert_eq!(stream.len(), next.len() - 1);
        stream.extend_from_slice(&next[next.len() - 1..]);
        let frames = split_all(&mut stream);
        assert_eq!(frames.len(), 1);
        let decoded = NodeRecord::decode_framed(frames[0].clone(), &limits);
        assert_eq!(decoded, Ok(message(header(2))));
        assert!(stream.is_empty());
    }

    /// A cut record answers with `request_of`'s request, however far the
    /// decoder got: past a name or payload that took the rest of the frame
    /// too.
    #[test]
    fn a_record_that_does_not_decode_names_the_request_its_start_names() {
        let limits = DecodeLimits::default();
        for record in samples() {
            let mut whole = BytesMut::new();
            record.encode(&mut whole);
            let body = whole.split_off(4).freeze();
            for cut in 0..body.len() {
                let part = body.slice(..cut);
                let mut stream = framed(&part);
                let frames = split_all(&mut stream);
                assert!(stream.is_empty(), "the bad record is split off");
                let [frame] = <[Bytes; 1]>::try_from(frames).unwrap();
                let head = RequestHead::of(&frame);
                let got = NodeRecord::decode_framed(frame, &limits);
                assert_eq!(got, NodeRecord::decode(part.clone(), &limits));
                assert!(got.is_err());
                let request = head.request();
                assert_eq!(
                    request,
                    NodeRecord::request_of(&part),
                    "{record:?} cut at {cut}"
                );
                if cut >= REQUEST_HEAD_LEN {
                    let named = record.request_id().map(|id| (Command::ActorSend, id));
                    assert_eq!(request, named, "{record:?} cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn split_frames_leaves_an_incomplete_record_and_refuses_an_oversized_one() {
        let limits = DecodeLimits::default();
        let mut whole = BytesMut::new();
        message(header(1)).encode(&mut whole);
        for cut in 0..whole.len() {
            let mut partial = BytesMut::from(&whole[..cut]);
            let frames = NodeRecord::split_frames(&mut partial, &limits).unwrap();
            assert!(frames.is_empty());
            assert_eq!(partial.len(), cut);
        }
        let max = limits.frame_len_max;
        let mut oversized = framed(&[24, 1]);
        oversized[..4].copy_from_slice(&(max + 1).to_be_bytes());
        let refused = Err(WireError::FrameTooLong { len: max + 1, max });
        let got = NodeRecord::split_frames(&mut oversized, &limits).map(Iterator::count);
        assert_eq!(got, refused);
        assert_eq!(oversized.len(), 6, "nothing is consumed");
        // After whole records, the oversized prefix waits for the next call.
        let mut stream = whole.clone();
        stream.extend_from_slice(&oversized);
        let frames = split_all(&mut stream);
        assert_eq!(frames, [whole.clone().freeze()]);
        assert_eq!(stream, oversized);
        let got = NodeRecord::split_frames(&mut stream, &limits).map(Iterator::count);
        assert_eq!(got, refused);
        assert_eq!(stream, oversized);
        // A frame at the limit is split.
        let mut at_limit = framed(&vec![0; max as usize]);
        assert_eq!(split_all(&mut at_limit).len(), 1);
    }
}
