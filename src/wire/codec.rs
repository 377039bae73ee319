//! The one place that reads and writes primitive fields (docs/wire.md
//! "Primitives"): big-endian fixed-width integers, names with a one-byte
//! length, payloads with a four-byte length, presence bytes, outcomes, and the
//! length-prefixed frame around every record.
//!
//! Ground rules: a read checks the bytes are there before it takes them and
//! answers [`WireError::Truncated`] otherwise; a length is checked against the
//! bytes that remain before anything is sliced, so no length can cause an
//! allocation; payloads and names are `Bytes::slice`s of the frame. Every
//! encoding is canonical: a body that decodes re-encodes to the same bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{Error, ErrorKind, Reason};
use crate::ids::{
    ActorId, ActorTypeName, AuthorityOwnerGeneration, BindingGeneration, CallId, Correlation,
    MeshName, NodeGeneration, NodeRid, ObjectGeneration, OwnerLeaseGeneration, PacketKey,
    RelocationId, RequestId, SessionOwnerId, SessionRef, SessionRid, SessionSequence, TimerId,
};
use crate::wire::{DecodeLimits, WireError};

/// Bytes of the length prefix in front of every frame.
pub(crate) const LEN_PREFIX: usize = 4;

/// A bounded cursor over one complete frame.
///
/// The frame is kept whole and read at an offset: an integer is copied out
/// of the slice and the offset moves, so a field costs no `Bytes` update,
/// and a `Bytes` (one reference more on the frame's buffer) is made only
/// for a value that must own its bytes, a payload or a name. The last such
/// value, when it runs to the frame's end, takes the reader's own reference
/// instead of a new one.
pub(crate) struct Reader<'a> {
    frame: Bytes,
    /// Where the next field starts; never past `frame.len()`.
    pos: usize,
    limits: &'a DecodeLimits,
}

impl<'a> Reader<'a> {
    /// A reader over `frame`, the bytes after the length prefix.
    pub(crate) fn new(frame: Bytes, limits: &'a DecodeLimits) -> Self {
        Self {
            frame,
            pos: 0,
            limits,
        }
    }

    /// A reader over a whole frame as [`split_whole_frame`] splits it: the
    /// body starts after the length prefix, which is never read again.
    pub(crate) fn after_prefix(frame: Bytes, limits: &'a DecodeLimits) -> Self {
        let pos = LEN_PREFIX.min(frame.len());
        Self { frame, pos, limits }
    }

    /// The limits the frame is decoded under.
    pub(crate) fn limits(&self) -> &DecodeLimits {
        self.limits
    }

    /// The bytes not read yet.
    #[inline]
    fn rest(&self) -> &[u8] {
        self.frame.get(self.pos..).unwrap_or_default()
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let rest = self.rest();
        let Some(head) = rest.first_chunk::<N>().copied() else {
            return Err(truncated(N, rest.len()));
        };
        self.pos += N;
        Ok(head)
    }

    /// One byte.
    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, WireError> {
        self.array::<1>().map(|[b]| b)
    }

    /// A big-endian `u16`.
    #[inline]
    pub(crate) fn u16(&mut self) -> Result<u16, WireError> {
        self.array().map(u16::from_be_bytes)
    }

    /// A big-endian `u32`.
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, WireError> {
        self.array().map(u32::from_be_bytes)
    }

    /// A big-endian `u64`.
    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, WireError> {
        self.array().map(u64::from_be_bytes)
    }

    /// The next `len` bytes, borrowed: for a value that is copied out of
    /// the frame (a text, a fixed-size array) and needs no `Bytes`.
    pub(crate) fn slice(&mut self, len: usize) -> Result<&[u8], WireError> {
        let have = self.rest().len();
        if len > have {
            return Err(truncated(len, have));
        }
        let start = self.pos;
        self.pos += len;
        Ok(self.frame.get(start..self.pos).unwrap_or_default())
    }

    /// The next `len` bytes, as a slice of the frame.
    #[inline]
    pub(crate) fn take(&mut self, len: usize) -> Result<Bytes, WireError> {
        let have = self.rest().len();
        if len > have {
            return Err(truncated(len, have));
        }
        let start = self.pos;
        if len == have {
            // The rest of the frame: the reader's reference moves into the
            // value, and the reader is left empty (at its end).
            let mut rest = std::mem::take(&mut self.frame);
            rest.advance(start);
            self.pos = 0;
            return Ok(rest);
        }
        self.pos += len;
        Ok(self.frame.slice(start..self.pos))
    }

    /// The next field of type `T`.
    #[inline]
    pub(crate) fn get<T: Field>(&mut self) -> Result<T, WireError> {
        T::get(self)
    }

    /// Ends the body: any byte left over is an error, so that exactly one
    /// byte string encodes each value.
    pub(crate) fn finish(self) -> Result<(), WireError> {
        match self.rest().len() {
            0 => Ok(()),
            len => Err(WireError::TrailingBytes { len }),
        }
    }
}

/// The error of a read past the frame's end, kept out of the readers'
/// inlined bodies.
#[cold]
fn truncated(need: usize, have: usize) -> WireError {
    WireError::Truncated { need, have }
}

/// A value with one wire encoding, read and written field by field.
pub(crate) trait Field: Sized {
    /// Appends the encoding.
    fn put(&self, dst: &mut BytesMut);
    /// Reads the encoding.
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError>;
}

macro_rules! int_field {
    ($($ty:ident: $put:ident, $get:ident;)*) => {$(
        impl Field for $ty {
            #[inline]
            fn put(&self, dst: &mut BytesMut) {
                dst.$put(self.0);
            }
            #[inline]
            fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
                r.$get().map($ty)
            }
        }
    )*};
}

int_field! {
    NodeRid: put_u64, u64;
    NodeGeneration: put_u64, u64;
    ObjectGeneration: put_u64, u64;
    AuthorityOwnerGeneration: put_u64, u64;
    OwnerLeaseGeneration: put_u64, u64;
    BindingGeneration: put_u64, u64;
    SessionSequence: put_u64, u64;
    SessionRid: put_u64, u64;
    RequestId: put_u64, u64;
    SessionOwnerId: put_u16, u16;
    PacketKey: put_u16, u16;
    Correlation: put_u32, u32;
    TimerId: put_u64, u64;
    CallId: put_u64, u64;
}

macro_rules! name_field {
    ($($ty:ident),*) => {$(
        // The one-byte length is enough: the type bounds the name to
        // `LEN_MAX` <= 255 bytes, checked at compile time below.
        const _: () = assert!($ty::LEN_MAX <= u8::MAX as usize);

        impl Field for $ty {
            #[inline]
            fn put(&self, dst: &mut BytesMut) {
                let bytes = self.as_bytes();
                dst.put_u8(bytes.len() as u8);
                dst.put_slice(bytes);
            }
            #[inline]
            fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
                let len = r.u8()?;
                let bytes = r.take(usize::from(len))?;
                $ty::from_bytes(bytes).map_err(|source| WireError::BadName {
                    name: stringify!($ty),
                    source,
                })
            }
        }
    )*};
}

name_field!(ActorId, MeshName, ActorTypeName);

/// A payload: a four-byte length, then the bytes (a slice of the frame).
impl Field for Bytes {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        // A payload over 4 GiB saturates the prefix; the receiver's frame
        // limit refuses that frame, so the saturation is never decoded.
        dst.put_u32(u32::try_from(self.len()).unwrap_or(u32::MAX));
        dst.put_slice(self);
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let len = r.u32()?;
        r.take(usize::try_from(len).unwrap_or(usize::MAX))
    }
}

/// Nothing: the success of an outcome that carries no value (43).
impl Field for () {
    fn put(&self, _: &mut BytesMut) {}
    fn get(_: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(())
    }
}

/// A presence byte (0 absent, 1 present), then the value when present.
impl<T: Field> Field for Option<T> {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        match self {
            None => dst.put_u8(0),
            Some(value) => {
                dst.put_u8(1);
                value.put(dst);
            }
        }
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        match r.u8()? {
            0 => Ok(None),
            1 => r.get().map(Some),
            other => Err(WireError::InvalidPresence(other)),
        }
    }
}

/// A typed failure in a node record: the kind code, then the reason code
/// (error.rs owns both), then its detail as an `Option` (presence byte, then
/// [`put_error_detail`]'s fields). The kind is redundant with the reason,
/// and checked against it, so that a peer speaking another reason table is
/// caught instead of misread. A client frame carries the same detail under
/// a flag instead (`client/frame.rs`).
impl Field for Error {
    fn put(&self, dst: &mut BytesMut) {
        put_error_reason(dst, self);
        dst.put_u8(u8::from(self.has_detail()));
        if self.has_detail() {
            put_error_detail(dst, self);
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let reason = get_error_reason(r)?;
        match r.u8()? {
            0 => Ok(Error::new(reason)),
            1 => get_error_detail(r, reason),
            other => Err(WireError::InvalidPresence(other)),
        }
    }
}

/// The kind code and the reason code of `error`.
pub(crate) fn put_error_reason(dst: &mut BytesMut, error: &Error) {
    dst.put_u8(error.kind().code());
    dst.put_u8(error.reason().code());
}

/// A kind code and a reason code that belong together.
pub(crate) fn get_error_reason(r: &mut Reader<'_>) -> Result<Reason, WireError> {
    let kind_code = r.u8()?;
    let reason_code = r.u8()?;
    let kind = ErrorKind::from_code(kind_code).ok_or(WireError::UnknownErrorKind(kind_code))?;
    let reason = Reason::from_code(reason_code).ok_or(WireError::UnknownReason(reason_code))?;
    if reason.kind() != kind {
        return Err(WireError::ReasonKindMismatch { kind, reason });
    }
    Ok(reason)
}

/// An error's detail (docs/wire.md "Primitive fields"): the application's
/// code `u32` (0 for a framework error), then the text with a `u16` length
/// (at most [`Error::DETAIL_MAX`] bytes of UTF-8).
pub(crate) fn put_error_detail(dst: &mut BytesMut, error: &Error) {
    dst.put_u32(error.code());
    let text = error.detail().as_bytes();
    // Error's constructors bound the text; the cast cannot saturate.
    let len = text.len().min(Error::DETAIL_MAX);
    dst.put_u16(u16::try_from(len).unwrap_or(u16::MAX));
    dst.put_slice(&text[..len]);
}

/// The detail of an error of `reason`, checked to be one the encoder
/// writes, so that decoding stays canonical.
pub(crate) fn get_error_detail(r: &mut Reader<'_>, reason: Reason) -> Result<Error, WireError> {
    let code = r.u32()?;
    let len = r.u16()?;
    let max = u16::try_from(Error::DETAIL_MAX).unwrap_or(u16::MAX);
    if len > max {
        return Err(WireError::ErrorDetailTooLong { len, max });
    }
    let text = r.slice(usize::from(len))?;
    let text = std::str::from_utf8(text)
        .map_err(|_| WireError::InvalidErrorDetail("the text is not UTF-8"))?;
    if code != 0 && reason != Reason::Application {
        return Err(WireError::InvalidErrorDetail("a code on a framework error"));
    }
    if code == 0 && text.is_empty() {
        return Err(WireError::InvalidErrorDetail(
            "neither code nor text: written as no detail",
        ));
    }
    Ok(Error::with_detail(reason, code, text.to_owned()))
}

/// An outcome: tag 0 then the value, or tag 1 then the typed failure.
impl<T: Field> Field for Result<T, Error> {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        match self {
            Ok(value) => {
                dst.put_u8(0);
                value.put(dst);
            }
            Err(error) => {
                dst.put_u8(1);
                error.put(dst);
            }
        }
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        match r.u8()? {
            0 => r.get().map(Ok),
            1 => r.get().map(Err),
            other => Err(WireError::InvalidOutcome(other)),
        }
    }
}

impl Field for SessionRef {
    #[inline]
    fn put(&self, dst: &mut BytesMut) {
        self.owner.put(dst);
        self.lifecycle.put(dst);
        self.owner_id.put(dst);
        self.session.put(dst);
    }
    #[inline]
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            owner: r.get()?,
            lifecycle: r.get()?,
            owner_id: r.get()?,
            session: r.get()?,
        })
    }
}

impl Field for RelocationId {
    fn put(&self, dst: &mut BytesMut) {
        self.coordinator.put(dst);
        dst.put_u64(self.sequence);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            coordinator: r.get()?,
            sequence: r.u64()?,
        })
    }
}

/// Appends one frame: a `u32` length prefix, then what `body` writes. The
/// prefix is patched once the body is written, so nothing is measured twice.
pub(crate) fn put_frame(dst: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = dst.len();
    dst.put_u32(0);
    body(dst);
    // A body over 4 GiB saturates; the receiver refuses it as too long.
    let len = u32::try_from(dst.len() - start - LEN_PREFIX).unwrap_or(u32::MAX);
    dst[start..start + LEN_PREFIX].copy_from_slice(&len.to_be_bytes());
}

/// Refuses a frame longer than the limit.
pub(crate) fn check_frame_len(len: usize, limits: &DecodeLimits) -> Result<(), WireError> {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    if len > limits.frame_len_max {
        return Err(WireError::FrameTooLong {
            len,
            max: limits.frame_len_max,
        });
    }
    Ok(())
}

/// Splits one complete frame (without its prefix) off the front of `buf`.
/// `Ok(None)` while incomplete; an oversized prefix is refused at once, with
/// `buf` untouched, before the rest of the frame is waited for.
pub(crate) fn split_frame(
    buf: &mut BytesMut,
    limits: &DecodeLimits,
) -> Result<Option<Bytes>, WireError> {
    let frame = split_whole_frame(buf, limits)?;
    Ok(frame.map(|mut frame| {
        frame.advance(LEN_PREFIX);
        frame
    }))
}

/// Splits one complete frame, its length prefix included, off the front of
/// `buf`, under [`split_frame`]'s rules; [`Reader::after_prefix`] reads it.
/// The prefix stays in the frame so that the buffer is split once and not
/// advanced past the prefix first (each is a pass through `BytesMut`'s
/// representation checks, on every frame of the hot path).
pub(crate) fn split_whole_frame(
    buf: &mut BytesMut,
    limits: &DecodeLimits,
) -> Result<Option<Bytes>, WireError> {
    let Some(prefix) = buf.first_chunk::<LEN_PREFIX>() else {
        return Ok(None);
    };
    let len = usize::try_from(u32::from_be_bytes(*prefix)).unwrap_or(usize::MAX);
    check_frame_len(len, limits)?;
    if buf.len() - LEN_PREFIX < len {
        return Ok(None);
    }
    Ok(Some(buf.split_to(LEN_PREFIX + len).freeze()))
}

/// Splits one complete frame off `buf` ([`split_whole_frame`]) and reads it
/// with `read`: the `decode_from` of every frame type. `Ok(None)` while the
/// frame is incomplete.
#[inline]
pub(crate) fn read_whole_frame<T>(
    buf: &mut BytesMut,
    limits: &DecodeLimits,
    read: impl FnOnce(Reader<'_>) -> Result<T, WireError>,
) -> Result<Option<T>, WireError> {
    match split_whole_frame(buf, limits)? {
        None => Ok(None),
        Some(frame) => read(Reader::after_prefix(frame, limits)).map(Some),
    }
}

/// Every complete frame at the front of a receive buffer, split off it at
/// once ([`Frames::split`]) and handed out one by one, each with its length
/// prefix, for [`Reader::after_prefix`].
///
/// A link's reads carry many records each. Splitting them off the buffer
/// one by one cost a `BytesMut::split_to` each (a pass through the
/// buffer's representation, an atomic increment, and an advance); split
/// together, each record costs a `Bytes::split_to` of the batch (an
/// increment), and the last one takes the batch's own reference.
#[derive(Debug, Default)]
pub(crate) struct Frames(Bytes);

impl Frames {
    /// Splits off the complete frames at the front of `buf`, stopping at the
    /// first incomplete one or the first whose prefix is over the limit.
    /// Empty while the first frame is incomplete. An oversized prefix on the
    /// first frame is refused at once, with `buf` untouched, as
    /// [`split_frame`] refuses it; after other frames it is left in `buf`
    /// and refused by the next call, once those frames are read.
    pub(crate) fn split(buf: &mut BytesMut, limits: &DecodeLimits) -> Result<Self, WireError> {
        // What follows the complete frames found so far: it only shrinks
        // (by a prefix and a body a frame), so the scan always ends.
        let mut rest = &buf[..];
        while let Some((prefix, after)) = rest.split_first_chunk::<LEN_PREFIX>() {
            let len = usize::try_from(u32::from_be_bytes(*prefix)).unwrap_or(usize::MAX);
            if let Err(error) = check_frame_len(len, limits) {
                if rest.len() == buf.len() {
                    return Err(error);
                }
                break;
            }
            let Some(next) = after.get(len..) else {
                break;
            };
            rest = next;
        }
        let end = buf.len() - rest.len();
        if end == 0 {
            // Not even an empty split: it would share the buffer for nothing.
            return Ok(Self::default());
        }
        Ok(Self(buf.split_to(end).freeze()))
    }

    /// Whether no frame was complete.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Iterator for Frames {
    type Item = Bytes;

    /// The next frame, its prefix included.
    fn next(&mut self) -> Option<Bytes> {
        let prefix = self.0.first_chunk::<LEN_PREFIX>()?;
        let len = usize::try_from(u32::from_be_bytes(*prefix)).unwrap_or(usize::MAX);
        // `split` checked every frame whole; a shorter rest cannot happen,
        // and ends the frames rather than panics.
        let end = LEN_PREFIX.saturating_add(len);
        if end > self.0.len() {
            return None;
        }
        Some(self.0.split_to(end))
    }
}
