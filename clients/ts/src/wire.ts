// The client STREAM frames of docs/wire.md "Client frames", byte for byte
// (src/wire/client/frame.rs is the Rust side).
//
//   [u32 len][u8 kind][u8 flags][fields of the kind]
//
// All integers are big-endian. Decoding is total and bounded: any bytes give
// a frame or a typed WireError, never an exception, and a frame is buffered
// only after its length prefix was checked against the frame limit.

import {
  CloseReasonName,
  CloseReason,
  ErrorKind,
  ErrorKindName,
  ServerReasonName,
  Reasons,
  closeReasonFromCode,
  errorKindFromCode,
  reasonFromCode,
} from "./errors.js";

/** The default `frame_len_max` of a node (`limits.frame_len_max`): 64 KiB. */
export const FRAME_LEN_MAX_DEFAULT = 65536;

/** Bytes of the length prefix. */
export const LEN_PREFIX = 4;

/** The kind bytes, 1-based so that a zeroed frame names nothing. */
export const FrameKind = {
  Request: 1,
  Message: 2,
  Reply: 3,
  Error: 4,
  Push: 5,
  Close: 6,
  Ping: 7,
  Pong: 8,
} as const;

/**
 * One client frame. Payloads are copies the caller owns. An error may carry
 * a detail (flag 0x01 on the wire): `code` is the application's own code
 * (kind `Application` only) and `detail` its text, or what a framework
 * error is about; a decoded error has them only when the frame had the flag.
 */
export type Frame =
  | { type: "request"; key: number; correlation: number; payload: Uint8Array }
  | { type: "message"; key: number; payload: Uint8Array }
  | { type: "reply"; correlation: number; payload: Uint8Array }
  | {
      type: "error";
      correlation: number;
      kind: ErrorKindName;
      reason: ServerReasonName;
      code?: number;
      detail?: string;
    }
  | { type: "push"; key: number; payload: Uint8Array }
  | { type: "close"; reason: CloseReasonName }
  | { type: "ping"; nonce: bigint }
  | { type: "pong"; nonce: bigint };

/** Every way bytes can fail to be a frame (the Rust `WireError` names). */
export type WireErrorCode =
  | "Truncated"
  | "FrameTooLong"
  | "UnknownFrameKind"
  | "InvalidFlags"
  | "UnknownErrorKind"
  | "UnknownReason"
  | "ReasonKindMismatch"
  | "ErrorDetailTooLong"
  | "InvalidErrorDetail"
  | "UnknownCloseReason"
  | "TrailingBytes"
  /** A WebSocket message that is not binary. */
  | "NotBinary";

/** A typed decoding failure. Returned, never thrown. */
export class WireError extends Error {
  readonly code: WireErrorCode;
  readonly detail: Readonly<Record<string, number | string>>;
  constructor(code: WireErrorCode, detail: Record<string, number | string> = {}) {
    const parts = Object.entries(detail).map(([k, v]) => `${k}=${v}`);
    super(`malformed frame: ${code}${parts.length ? ` (${parts.join(", ")})` : ""}`);
    this.name = "WireError";
    this.code = code;
    this.detail = detail;
  }
}

export type DecodeResult = { ok: true; frame: Frame } | { ok: false; error: WireError };

const FLAGS_NONE = 0;
/** On an Error frame: the detail (code u32, text u16 + UTF-8) follows. */
const FLAG_DETAIL = 0x01;
/** The longest error detail text, in bytes (src/error.rs `DETAIL_MAX`). */
export const ERROR_DETAIL_MAX = 1024;
const U16_MAX = 0xffff;
const U32_MAX = 0xffffffff;
const U64_MAX = (1n << 64n) - 1n;

function isU16(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= U16_MAX;
}
function isU32(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= U32_MAX;
}

/** The detail an error frame carries, encoded; `undefined` for none. */
function errorDetail(frame: Frame): { code: number; text: Uint8Array } | undefined {
  if (frame.type !== "error") return undefined;
  const code = frame.code ?? 0;
  const text = new TextEncoder().encode(frame.detail ?? "");
  return code === 0 && text.length === 0 ? undefined : { code, text };
}

/** The body length (after the prefix) `frame` encodes to. */
export function encodedBodyLength(frame: Frame): number {
  switch (frame.type) {
    case "request":
      return 2 + 2 + 4 + 4 + frame.payload.length;
    case "message":
    case "push":
      return 2 + 2 + 4 + frame.payload.length;
    case "reply":
      return 2 + 4 + 4 + frame.payload.length;
    case "error": {
      const detail = errorDetail(frame);
      return 2 + 4 + 2 + (detail ? 4 + 2 + detail.text.length : 0);
    }
    case "close":
      return 2 + 1;
    case "ping":
    case "pong":
      return 2 + 8;
  }
}

/**
 * Encodes one whole frame, length prefix included. Throws a RangeError for
 * a field out of its range (a key over u16, a correlation over u32, a body
 * over 4 GiB): those are the caller's bugs, not the peer's bytes.
 */
export function encodeFrame(frame: Frame): Uint8Array {
  const bodyLen = encodedBodyLength(frame);
  if (bodyLen > U32_MAX) throw new RangeError("frame body over 4 GiB");
  const out = new Uint8Array(LEN_PREFIX + bodyLen);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setUint32(0, bodyLen);
  view.setUint8(5, FLAGS_NONE);
  let at = 6;
  const key = (k: number) => {
    if (!isU16(k)) throw new RangeError(`packet key ${k} is not a u16`);
    view.setUint16(at, k);
    at += 2;
  };
  const corr = (c: number) => {
    if (!isU32(c)) throw new RangeError(`correlation ${c} is not a u32`);
    view.setUint32(at, c);
    at += 4;
  };
  const payload = (p: Uint8Array) => {
    view.setUint32(at, p.length);
    at += 4;
    out.set(p, at);
    at += p.length;
  };
  const nonce = (n: bigint) => {
    if (typeof n !== "bigint" || n < 0n || n > U64_MAX) throw new RangeError(`nonce ${n} is not a u64`);
    view.setBigUint64(at, n);
    at += 8;
  };
  switch (frame.type) {
    case "request":
      view.setUint8(4, FrameKind.Request);
      key(frame.key);
      corr(frame.correlation);
      payload(frame.payload);
      break;
    case "message":
      view.setUint8(4, FrameKind.Message);
      key(frame.key);
      payload(frame.payload);
      break;
    case "reply":
      view.setUint8(4, FrameKind.Reply);
      corr(frame.correlation);
      payload(frame.payload);
      break;
    case "error": {
      view.setUint8(4, FrameKind.Error);
      corr(frame.correlation);
      const reason = Reasons[frame.reason];
      if (reason === undefined || reason.kind !== frame.kind) {
        throw new RangeError(`reason ${frame.reason} does not belong to kind ${frame.kind}`);
      }
      view.setUint8(at++, ErrorKind[frame.kind]);
      view.setUint8(at++, reason.code);
      const detail = errorDetail(frame);
      if (detail) {
        if (!isU32(detail.code)) throw new RangeError(`error code ${detail.code} is not a u32`);
        if (detail.code !== 0 && frame.reason !== "Application") {
          throw new RangeError(`an error code belongs to an Application error, not ${frame.reason}`);
        }
        if (detail.text.length > ERROR_DETAIL_MAX) {
          throw new RangeError(`error detail of ${detail.text.length} bytes over ${ERROR_DETAIL_MAX}`);
        }
        view.setUint8(5, FLAG_DETAIL);
        view.setUint32(at, detail.code);
        at += 4;
        view.setUint16(at, detail.text.length);
        at += 2;
        out.set(detail.text, at);
        at += detail.text.length;
      }
      break;
    }
    case "push":
      view.setUint8(4, FrameKind.Push);
      key(frame.key);
      payload(frame.payload);
      break;
    case "close": {
      view.setUint8(4, FrameKind.Close);
      const code = CloseReason[frame.reason];
      if (code === undefined) throw new RangeError(`unknown close reason ${frame.reason}`);
      view.setUint8(at++, code);
      break;
    }
    case "ping":
      view.setUint8(4, FrameKind.Ping);
      nonce(frame.nonce);
      break;
    case "pong":
      view.setUint8(4, FrameKind.Pong);
      nonce(frame.nonce);
      break;
  }
  return out;
}

/** A bounded reader over one frame body: every read checks what remains. */
class Reader {
  private at = 0;
  private readonly view: DataView;
  constructor(private readonly body: Uint8Array) {
    this.view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  }
  private need(n: number): WireError | undefined {
    const have = this.body.length - this.at;
    return have < n ? new WireError("Truncated", { need: n, have }) : undefined;
  }
  u8(): number | WireError {
    const e = this.need(1);
    if (e) return e;
    return this.view.getUint8(this.at++);
  }
  u16(): number | WireError {
    const e = this.need(2);
    if (e) return e;
    const v = this.view.getUint16(this.at);
    this.at += 2;
    return v;
  }
  u32(): number | WireError {
    const e = this.need(4);
    if (e) return e;
    const v = this.view.getUint32(this.at);
    this.at += 4;
    return v;
  }
  u64(): bigint | WireError {
    const e = this.need(8);
    if (e) return e;
    const v = this.view.getBigUint64(this.at);
    this.at += 8;
    return v;
  }
  /** `len` bytes, as a view of the body (the caller copies what it keeps). */
  bytes(len: number): Uint8Array | WireError {
    const e = this.need(len);
    if (e) return e;
    const b = this.body.subarray(this.at, this.at + len);
    this.at += len;
    return b;
  }
  /** A `u32` length then that many bytes, the length checked first. */
  payload(): Uint8Array | WireError {
    const len = this.u32();
    if (len instanceof WireError) return len;
    const e = this.need(len);
    if (e) return e;
    // A copy, and a plain Uint8Array even when the input is a Node Buffer
    // (whose slice() would share the input's memory).
    const p = new Uint8Array(this.body.subarray(this.at, this.at + len));
    this.at += len;
    return p;
  }
  finish(): WireError | undefined {
    const left = this.body.length - this.at;
    return left > 0 ? new WireError("TrailingBytes", { len: left }) : undefined;
  }
}

function fail(error: WireError): DecodeResult {
  return { ok: false, error };
}

/**
 * Decodes one frame body (the bytes after the length prefix). Total: any
 * input gives a frame or a WireError.
 */
export function decodeBody(body: Uint8Array, frameLenMax: number = FRAME_LEN_MAX_DEFAULT): DecodeResult {
  try {
    return decodeBodyInner(body, frameLenMax);
  } catch (e) {
    // Unreachable by construction (every read is checked); kept so that a
    // bug here can never throw into the game.
    return fail(new WireError("Truncated", { need: 0, have: body.length, internal: String(e) }));
  }
}

function decodeBodyInner(body: Uint8Array, frameLenMax: number): DecodeResult {
  if (body.length > frameLenMax) return fail(new WireError("FrameTooLong", { len: body.length, max: frameLenMax }));
  const r = new Reader(body);
  const kind = r.u8();
  if (kind instanceof WireError) return fail(kind);
  const flags = r.u8();
  if (flags instanceof WireError) return fail(flags);
  // Flags are checked before the kind: the one flag only on an Error.
  if ((flags & ~FLAG_DETAIL) !== 0 || (flags !== FLAGS_NONE && kind !== FrameKind.Error)) {
    return fail(new WireError("InvalidFlags", { flags }));
  }
  let frame: Frame;
  switch (kind) {
    case FrameKind.Request: {
      const key = r.u16();
      if (key instanceof WireError) return fail(key);
      const correlation = r.u32();
      if (correlation instanceof WireError) return fail(correlation);
      const payload = r.payload();
      if (payload instanceof WireError) return fail(payload);
      frame = { type: "request", key, correlation, payload };
      break;
    }
    case FrameKind.Message:
    case FrameKind.Push: {
      const key = r.u16();
      if (key instanceof WireError) return fail(key);
      const payload = r.payload();
      if (payload instanceof WireError) return fail(payload);
      frame = kind === FrameKind.Push ? { type: "push", key, payload } : { type: "message", key, payload };
      break;
    }
    case FrameKind.Reply: {
      const correlation = r.u32();
      if (correlation instanceof WireError) return fail(correlation);
      const payload = r.payload();
      if (payload instanceof WireError) return fail(payload);
      frame = { type: "reply", correlation, payload };
      break;
    }
    case FrameKind.Error: {
      const correlation = r.u32();
      if (correlation instanceof WireError) return fail(correlation);
      const kindCode = r.u8();
      if (kindCode instanceof WireError) return fail(kindCode);
      const reasonCode = r.u8();
      if (reasonCode instanceof WireError) return fail(reasonCode);
      const errorKind = errorKindFromCode(kindCode);
      if (errorKind === undefined) return fail(new WireError("UnknownErrorKind", { code: kindCode }));
      const reason = reasonFromCode(reasonCode);
      if (reason === undefined) return fail(new WireError("UnknownReason", { code: reasonCode }));
      if (Reasons[reason].kind !== errorKind) {
        return fail(new WireError("ReasonKindMismatch", { kind: errorKind, reason }));
      }
      if (flags === FLAGS_NONE) {
        frame = { type: "error", correlation, kind: errorKind, reason };
        break;
      }
      const code = r.u32();
      if (code instanceof WireError) return fail(code);
      const len = r.u16();
      if (len instanceof WireError) return fail(len);
      if (len > ERROR_DETAIL_MAX) return fail(new WireError("ErrorDetailTooLong", { len, max: ERROR_DETAIL_MAX }));
      const text = r.bytes(len);
      if (text instanceof WireError) return fail(text);
      let detail: string;
      try {
        detail = new TextDecoder("utf-8", { fatal: true }).decode(text);
      } catch {
        return fail(new WireError("InvalidErrorDetail", { why: "the text is not UTF-8" }));
      }
      if (code !== 0 && reason !== "Application") {
        return fail(new WireError("InvalidErrorDetail", { why: "a code on a framework error" }));
      }
      if (code === 0 && detail.length === 0) {
        return fail(new WireError("InvalidErrorDetail", { why: "neither code nor text: written as no detail" }));
      }
      frame = { type: "error", correlation, kind: errorKind, reason, code, detail };
      break;
    }
    case FrameKind.Close: {
      const code = r.u8();
      if (code instanceof WireError) return fail(code);
      const reason = closeReasonFromCode(code);
      if (reason === undefined) return fail(new WireError("UnknownCloseReason", { code }));
      frame = { type: "close", reason };
      break;
    }
    case FrameKind.Ping:
    case FrameKind.Pong: {
      const nonce = r.u64();
      if (nonce instanceof WireError) return fail(nonce);
      frame = kind === FrameKind.Ping ? { type: "ping", nonce } : { type: "pong", nonce };
      break;
    }
    default:
      return fail(new WireError("UnknownFrameKind", { kind }));
  }
  const trailing = r.finish();
  if (trailing) return fail(trailing);
  return { ok: true, frame };
}

/**
 * Decodes one whole encoded frame, length prefix included, that must hold
 * exactly one frame: one WebSocket binary message (docs/clients.md). Fewer
 * bytes than the prefix announces are `Truncated`; more (a second frame in
 * the same message, say) are `TrailingBytes`.
 */
export function decodeWholeFrame(bytes: Uint8Array, frameLenMax: number = FRAME_LEN_MAX_DEFAULT): DecodeResult {
  if (bytes.length < LEN_PREFIX) return fail(new WireError("Truncated", { need: LEN_PREFIX, have: bytes.length }));
  const len = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  if (len > frameLenMax) return fail(new WireError("FrameTooLong", { len, max: frameLenMax }));
  const have = bytes.length - LEN_PREFIX;
  if (have < len) return fail(new WireError("Truncated", { need: len, have }));
  if (have > len) return fail(new WireError("TrailingBytes", { len: have - len }));
  return decodeBody(bytes.subarray(LEN_PREFIX), frameLenMax);
}

/**
 * Splits a byte stream (TCP) into frames. It holds at most one partial
 * frame: its 4-byte prefix, then, once the prefix was checked against
 * `frameLenMax`, a buffer of exactly the announced length. The first error
 * latches: a stream that carried a malformed frame is not trusted further
 * (the connection must close, as the server closes a client's with
 * `ProtocolError`), and every later `feed` returns the same error.
 */
export class FrameSplitter {
  private readonly header = new Uint8Array(LEN_PREFIX);
  private headerFill = 0;
  private body: Uint8Array | null = null;
  private bodyFill = 0;
  private failed: WireError | null = null;

  constructor(readonly frameLenMax: number = FRAME_LEN_MAX_DEFAULT) {}

  /** Bytes held for the frame not yet whole: at most 4 + frameLenMax. */
  get buffered(): number {
    return this.body === null ? this.headerFill : LEN_PREFIX + this.bodyFill;
  }

  /**
   * Feeds received bytes; calls `onFrame` for each whole frame in order.
   * Returns the first WireError met (and then stops), or undefined.
   */
  feed(chunk: Uint8Array, onFrame: (frame: Frame) => void): WireError | undefined {
    if (this.failed) return this.failed;
    let off = 0;
    while (off < chunk.length) {
      if (this.body === null) {
        if (this.headerFill === 0 && chunk.length - off >= LEN_PREFIX) {
          const len = readU32(chunk, off);
          if (len > this.frameLenMax) return this.fail(new WireError("FrameTooLong", { len, max: this.frameLenMax }));
          if (chunk.length - off - LEN_PREFIX >= len) {
            // The whole frame is in this chunk: decode it in place.
            const r = decodeBody(chunk.subarray(off + LEN_PREFIX, off + LEN_PREFIX + len), this.frameLenMax);
            off += LEN_PREFIX + len;
            if (!r.ok) return this.fail(r.error);
            onFrame(r.frame);
            continue;
          }
          this.body = new Uint8Array(len);
          this.bodyFill = 0;
          off += LEN_PREFIX;
          continue;
        }
        const take = Math.min(LEN_PREFIX - this.headerFill, chunk.length - off);
        this.header.set(chunk.subarray(off, off + take), this.headerFill);
        this.headerFill += take;
        off += take;
        if (this.headerFill < LEN_PREFIX) break;
        this.headerFill = 0;
        const len = readU32(this.header, 0);
        if (len > this.frameLenMax) return this.fail(new WireError("FrameTooLong", { len, max: this.frameLenMax }));
        this.body = new Uint8Array(len);
        this.bodyFill = 0;
      } else {
        const take = Math.min(this.body.length - this.bodyFill, chunk.length - off);
        this.body.set(chunk.subarray(off, off + take), this.bodyFill);
        this.bodyFill += take;
        off += take;
      }
      if (this.body !== null && this.bodyFill === this.body.length) {
        const body = this.body;
        this.body = null;
        this.bodyFill = 0;
        const r = decodeBody(body, this.frameLenMax);
        if (!r.ok) return this.fail(r.error);
        onFrame(r.frame);
      }
    }
    return undefined;
  }

  private fail(error: WireError): WireError {
    this.failed = error;
    this.body = null;
    this.headerFill = 0;
    return error;
  }
}

function readU32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) >>> 0) + (bytes[at + 1]! << 16) + (bytes[at + 2]! << 8) + bytes[at + 3]!;
}
