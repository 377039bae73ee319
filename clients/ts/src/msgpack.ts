// MessagePack, the encoding of zlink's typed payloads (docs/wire.md "Typed
// payloads"): what rmp-serde writes on the server for a Rust type, a struct
// as a map of its fields by name. Written here, in a few hundred lines, so
// that the client keeps no runtime dependency (docs/clients.md
// "MessagePack payloads").
//
// The subset: nil, bool, integers (every width; 64-bit through BigInt),
// float32 and float64, str, bin, array and map. Ext types, which rmp-serde
// never writes for the types a game sends, are refused.
//
// Decoding is total and bounded like the server's (src/typed.rs): any bytes
// give a value or a ZlinkError `MalformedPayload` (kind InvalidOperation,
// `remote: false`) whose detail says what was wrong, never another
// exception; nesting is limited to MSGPACK_DEPTH_MAX levels; a length read
// from the payload is checked against the bytes left before anything is
// allocated for it; bytes after the value are refused.

import { ZlinkError } from "./errors.js";

/**
 * A value as this module encodes and decodes it.
 *
 * - `null` is nil (a Rust `None`, `()`, a unit struct); `undefined` is
 *   accepted only as an object's property, which is then left out (a Rust
 *   `Option` field that is missing reads as `None`).
 * - A `number` that is an integer is written as the smallest MessagePack
 *   integer that holds it (as rmp-serde writes every Rust integer); any other
 *   number as float64. Wrap a whole number in {@link float64} to write it as
 *   a float (a Rust `f64` field reads an integer too, so this matters only
 *   for the exact bytes).
 * - A `bigint` is an integer of up to 64 bits, signed or not.
 * - A `Uint8Array` is bin (a Rust `serde_bytes` field; a plain `Vec<u8>` is
 *   an array of integers).
 * - An array is an array; a plain object is a map with string keys, in the
 *   object's own key order (a Rust struct, field by field); a `Map` is a map
 *   whose keys may be any value.
 */
export type MsgValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | Float64
  | MsgValue[]
  | Map<MsgValue, MsgValue>
  | { [field: string]: MsgValue | undefined };

/** A number written as float64 even when it is whole (`float64(1)` is `cb 3f f0 00 …`). */
export class Float64 {
  constructor(readonly value: number) {}
}

/** `new Float64(value)`. */
export function float64(value: number): Float64 {
  return new Float64(value);
}

/** How deeply a value may nest (arrays and maps in each other): src/typed.rs `DEPTH_MAX`. */
export const MSGPACK_DEPTH_MAX = 64;

function malformed(detail: string): ZlinkError {
  return new ZlinkError("MalformedPayload", { detail: `msgpack: ${detail}` });
}

// ---- encoding ----------------------------------------------------------------

class Writer {
  private buf = new Uint8Array(64);
  private view = new DataView(this.buf.buffer);
  len = 0;

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): void {
    this.reserve(1);
    this.buf[this.len++] = v;
  }
  u16(v: number): void {
    this.reserve(2);
    this.view.setUint16(this.len, v);
    this.len += 2;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.len, v);
    this.len += 4;
  }
  u64(v: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.len, v);
    this.len += 8;
  }
  i64(v: bigint): void {
    this.reserve(8);
    this.view.setBigInt64(this.len, v);
    this.len += 8;
  }
  f64(v: number): void {
    this.reserve(8);
    this.view.setFloat64(this.len, v);
    this.len += 8;
  }
  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  done(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const utf8Encoder = new TextEncoder();

/** An integer in the smallest form, as rmp's `write_sint`/`write_uint` choose it. */
function writeInt(w: Writer, v: bigint): void {
  if (v > U64_MAX || v < I64_MIN) throw malformed(`integer ${v} does not fit 64 bits`);
  if (v >= 0n) {
    if (v < 128n) w.u8(Number(v));
    else if (v < 256n) (w.u8(0xcc), w.u8(Number(v)));
    else if (v < 65536n) (w.u8(0xcd), w.u16(Number(v)));
    else if (v < 4294967296n) (w.u8(0xce), w.u32(Number(v)));
    else (w.u8(0xcf), w.u64(v));
  } else if (v >= -32n) {
    w.u8(Number(v) & 0xff);
  } else if (v >= -128n) {
    (w.u8(0xd0), w.u8(Number(v) & 0xff));
  } else if (v >= -32768n) {
    (w.u8(0xd1), w.u16(Number(v) & 0xffff));
  } else if (v >= -2147483648n) {
    (w.u8(0xd2), w.u32(Number(v) >>> 0));
  } else {
    (w.u8(0xd3), w.i64(v));
  }
}

function writeLen(w: Writer, n: number, fix: number, fixMax: number, c8: number | null, c16: number, c32: number): void {
  if (n <= fixMax) w.u8(fix | n);
  else if (c8 !== null && n < 256) (w.u8(c8), w.u8(n));
  else if (n < 65536) (w.u8(c16), w.u16(n));
  else if (n <= 0xffffffff) (w.u8(c32), w.u32(n));
  else throw malformed(`a length of ${n} does not fit 32 bits`);
}

function writeValue(w: Writer, value: unknown, depth: number): void {
  if (depth > MSGPACK_DEPTH_MAX) throw malformed(`nested deeper than ${MSGPACK_DEPTH_MAX} levels`);
  switch (typeof value) {
    case "boolean":
      w.u8(value ? 0xc3 : 0xc2);
      return;
    case "bigint":
      writeInt(w, value);
      return;
    case "number":
      if (Number.isInteger(value)) {
        // -0 is an integer to JavaScript; writing it as 0 would lose the sign.
        if (Object.is(value, -0)) (w.u8(0xcb), w.f64(value));
        else writeInt(w, BigInt(value));
      } else {
        (w.u8(0xcb), w.f64(value));
      }
      return;
    case "string": {
      const b = utf8Encoder.encode(value);
      writeLen(w, b.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
      w.bytes(b);
      return;
    }
    case "object":
      break;
    default:
      throw malformed(`a ${typeof value} has no MessagePack form`);
  }
  if (value === null) {
    w.u8(0xc0);
  } else if (value instanceof Float64) {
    (w.u8(0xcb), w.f64(value.value));
  } else if (value instanceof Uint8Array) {
    writeLen(w, value.length, 0, -1, 0xc4, 0xc5, 0xc6);
    w.bytes(value);
  } else if (Array.isArray(value)) {
    writeLen(w, value.length, 0x90, 15, null, 0xdc, 0xdd);
    for (const item of value) writeValue(w, item, depth + 1);
  } else if (value instanceof Map) {
    writeLen(w, value.size, 0x80, 15, null, 0xde, 0xdf);
    for (const [k, v] of value) {
      writeValue(w, k, depth + 1);
      writeValue(w, v, depth + 1);
    }
  } else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    writeLen(w, entries.length, 0x80, 15, null, 0xde, 0xdf);
    for (const [k, v] of entries) {
      writeValue(w, k, depth + 1);
      writeValue(w, v, depth + 1);
    }
  } else {
    throw malformed(`a ${value.constructor?.name ?? "object"} has no MessagePack form`);
  }
}

/**
 * The MessagePack bytes of `value` (see {@link MsgValue}). Throws a
 * ZlinkError `MalformedPayload` for a value that has none (`undefined` at
 * the top or in an array, a function, a symbol, a class instance, an
 * integer beyond 64 bits, nesting past MSGPACK_DEPTH_MAX).
 */
export function pack(value: MsgValue): Uint8Array {
  const w = new Writer();
  writeValue(w, value, 0);
  return w.done();
}

// ---- decoding ----------------------------------------------------------------

const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

class Reader {
  pos = 0;
  private readonly view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  left(): number {
    return this.bytes.length - this.pos;
  }
  need(n: number, what: string): void {
    if (n > this.left()) {
      throw malformed(`${what} needs ${n} bytes at offset ${this.pos}, ${this.left()} left`);
    }
  }
  u8(): number {
    this.need(1, "a value");
    return this.bytes[this.pos++]!;
  }
  u16(): number {
    this.need(2, "a 16-bit field");
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4, "a 32-bit field");
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  take(n: number, what: string): Uint8Array {
    this.need(n, what);
    const b = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  int(width: 1 | 2 | 4 | 8, signed: boolean): number | bigint {
    this.need(width, "an integer");
    const at = this.pos;
    this.pos += width;
    const v = this.view;
    switch (width) {
      case 1:
        return signed ? v.getInt8(at) : v.getUint8(at);
      case 2:
        return signed ? v.getInt16(at) : v.getUint16(at);
      case 4:
        return signed ? v.getInt32(at) : v.getUint32(at);
      case 8: {
        const big = signed ? v.getBigInt64(at) : v.getBigUint64(at);
        return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      }
    }
  }
  float(width: 4 | 8): number {
    this.need(width, "a float");
    const v = width === 4 ? this.view.getFloat32(this.pos) : this.view.getFloat64(this.pos);
    this.pos += width;
    return v;
  }
}

function readStr(r: Reader, n: number): string {
  const b = r.take(n, "a string");
  try {
    return utf8Decoder.decode(b);
  } catch {
    throw malformed(`a string at offset ${r.pos - n} is not UTF-8`);
  }
}

function readArray(r: Reader, n: number, depth: number): MsgValue[] {
  // Every element takes at least one byte: nothing is reserved for more.
  r.need(n, `an array of ${n}`);
  const out: MsgValue[] = [];
  for (let i = 0; i < n; i++) out.push(readValue(r, depth + 1));
  return out;
}

function readMap(r: Reader, n: number, depth: number): MsgValue {
  r.need(2 * n, `a map of ${n}`);
  const keys: MsgValue[] = [];
  const values: MsgValue[] = [];
  let allStrings = true;
  for (let i = 0; i < n; i++) {
    const k = readValue(r, depth + 1);
    if (typeof k !== "string") allStrings = false;
    keys.push(k);
    values.push(readValue(r, depth + 1));
  }
  if (!allStrings) {
    const map = new Map<MsgValue, MsgValue>();
    keys.forEach((k, i) => map.set(k, values[i]!));
    return map;
  }
  const obj: { [field: string]: MsgValue } = {};
  keys.forEach((k, i) => {
    const name = k as string;
    if (Object.prototype.hasOwnProperty.call(obj, name)) throw malformed(`the map repeats the key "${name}"`);
    // defineProperty, not assignment: a key "__proto__" is a field like any other.
    Object.defineProperty(obj, name, { value: values[i], enumerable: true, writable: true, configurable: true });
  });
  return obj;
}

function readValue(r: Reader, depth: number): MsgValue {
  if (depth > MSGPACK_DEPTH_MAX) throw malformed(`nested deeper than ${MSGPACK_DEPTH_MAX} levels`);
  const at = r.pos;
  const b = r.u8();
  if (b <= 0x7f) return b;
  if (b >= 0xe0) return b - 0x100;
  if (b >= 0x80 && b <= 0x8f) return readMap(r, b & 0x0f, depth);
  if (b >= 0x90 && b <= 0x9f) return readArray(r, b & 0x0f, depth);
  if (b >= 0xa0 && b <= 0xbf) return readStr(r, b & 0x1f);
  switch (b) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xc4:
      return r.take(r.u8(), "a bin").slice();
    case 0xc5:
      return r.take(r.u16(), "a bin").slice();
    case 0xc6:
      return r.take(r.u32(), "a bin").slice();
    case 0xca:
      return r.float(4);
    case 0xcb:
      return r.float(8);
    case 0xcc:
      return r.int(1, false);
    case 0xcd:
      return r.int(2, false);
    case 0xce:
      return r.int(4, false);
    case 0xcf:
      return r.int(8, false);
    case 0xd0:
      return r.int(1, true);
    case 0xd1:
      return r.int(2, true);
    case 0xd2:
      return r.int(4, true);
    case 0xd3:
      return r.int(8, true);
    case 0xd9:
      return readStr(r, r.u8());
    case 0xda:
      return readStr(r, r.u16());
    case 0xdb:
      return readStr(r, r.u32());
    case 0xdc:
      return readArray(r, r.u16(), depth);
    case 0xdd:
      return readArray(r, r.u32(), depth);
    case 0xde:
      return readMap(r, r.u16(), depth);
    case 0xdf:
      return readMap(r, r.u32(), depth);
    case 0xc1:
      throw malformed(`byte 0xc1 at offset ${at} is never used`);
    default:
      // 0xc7-0xc9 and 0xd4-0xd8: ext types, which rmp-serde does not write.
      throw malformed(`ext type 0x${b.toString(16)} at offset ${at} is not supported`);
  }
}

/**
 * The value of MessagePack `bytes`: the whole of them, nothing after the
 * value. Integers that fit a JavaScript number exactly are numbers, larger
 * 64-bit ones bigints; floats are numbers; a map whose keys are all strings
 * is a plain object (a Rust struct: its fields by name), any other map a
 * `Map`; bin is a `Uint8Array`. Any other bytes throw a ZlinkError
 * `MalformedPayload` naming what was wrong.
 */
export function unpack(bytes: Uint8Array): MsgValue {
  const r = new Reader(bytes);
  const value = readValue(r, 0);
  if (r.left() !== 0) throw malformed(`${r.left()} bytes after the value`);
  return value;
}
