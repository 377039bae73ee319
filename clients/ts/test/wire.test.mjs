// The frame codec against docs/wire.md: the documented example bytes, every
// kind round-tripped, every strict prefix and every trailing byte refused,
// the closed enumerations, and the splitter's bounds on arbitrary input.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  encodeFrame,
  decodeBody,
  decodeWholeFrame,
  FrameSplitter,
  WireError,
  FRAME_LEN_MAX_DEFAULT,
} from "../dist/src/index.js";

const hex = (s) => Uint8Array.from(s.replace(/[\s|]/g, "").match(/../g).map((b) => parseInt(b, 16)));

const samples = [
  { type: "request", key: 0x0102, correlation: 0x03040506, payload: new TextEncoder().encode("hi") },
  { type: "message", key: 65535, payload: new Uint8Array([0, 255]) },
  { type: "reply", correlation: 0xffffffff, payload: new Uint8Array(0) },
  { type: "error", correlation: 7, kind: "NotFound", reason: "NoPacketHandler" },
  { type: "push", key: 100, payload: new TextEncoder().encode("tick 4") },
  { type: "close", reason: "Replaced" },
  { type: "ping", nonce: 0xfedcba9876543210n },
  { type: "pong", nonce: 1n },
  // Errors with a detail (flag 0x01): the game's own, and one that says
  // which Actor it is about (multi-byte text included).
  { type: "error", correlation: 8, kind: "Application", reason: "Application", code: 404, detail: "no sword: épée" },
  { type: "error", correlation: 9, kind: "Unavailable", reason: "StaleLocation", code: 0, detail: "actor player-7" },
];

test("the docs/wire.md example encodes byte for byte", () => {
  const bytes = encodeFrame(samples[0]);
  assert.deepEqual(bytes, hex("00 00 00 0e | 01 00 | 01 02 | 03 04 05 06 | 00 00 00 02 | 68 69"));
});

test("every kind round-trips, and every strict prefix is Truncated, every extra byte TrailingBytes", () => {
  for (const frame of samples) {
    const bytes = encodeFrame(frame);
    const body = bytes.subarray(4);
    const r = decodeBody(body);
    assert.ok(r.ok, `${frame.type}: ${r.error}`);
    assert.deepEqual(r.frame, frame);
    for (let n = 0; n < body.length; n++) {
      const p = decodeBody(body.subarray(0, n));
      assert.equal(p.ok, false);
      assert.equal(p.error.code, "Truncated", `${frame.type} prefix ${n}`);
    }
    const longer = new Uint8Array(body.length + 1);
    longer.set(body);
    const t = decodeBody(longer);
    assert.equal(t.ok, false);
    assert.equal(t.error.code, "TrailingBytes");
  }
});

test("flags, kinds, error codes and close reasons are closed", () => {
  const cases = [
    ["03 01 00000001 00000000", "InvalidFlags"],
    ["09 00", "UnknownFrameKind"],
    ["00 00", "UnknownFrameKind"],
    ["04 00 00000001 08 15", "UnknownErrorKind"],
    ["04 00 00000001 07 15", "ReasonKindMismatch"], // Application (7) is only reason 70
    ["03 02 00000001 00000000", "InvalidFlags"],
    ["04 02 00000001 01 0a", "InvalidFlags"],
    ["04 81 00000001 01 0a", "InvalidFlags"],
    ["04 00 00000001 03 63", "UnknownReason"],
    ["04 00 00000001 01 15", "ReasonKindMismatch"], // NoPacketHandler (21) is NotFound, not Unavailable
    ["06 00 00", "UnknownCloseReason"],
    ["06 00 0a", "UnknownCloseReason"],
  ];
  for (const [body, code] of cases) {
    const r = decodeBody(hex(body));
    assert.equal(r.ok, false, body);
    assert.ok(r.error instanceof WireError);
    assert.equal(r.error.code, code, body);
  }
});

test("an error without detail keeps its old bytes; the detail rides under flag 0x01", () => {
  // As before the flag existed: flags 0, kind, reason.
  assert.deepEqual(encodeFrame(samples[3]), hex("00 00 00 08 | 04 00 | 00 00 00 07 | 03 15"));
  // src/wire/client/frame.rs's test bytes: Application 7, reason 70, code, length, "no".
  const app = { type: "error", correlation: 2, kind: "Application", reason: "Application", code: 0x01020304, detail: "no" };
  assert.deepEqual(encodeFrame(app).subarray(4), hex("04 01 | 00000002 | 07 46 | 01020304 | 0002 | 6e 6f"));
});

test("an error detail the server never writes is refused, typed", () => {
  const cases = [
    ["04 01 00000001 01 0a 00000009 0001 61", "InvalidErrorDetail"], // a code on a framework error
    ["04 01 00000001 07 46 00000000 0000", "InvalidErrorDetail"], // neither code nor text
    ["04 01 00000001 07 46 00000001 0002 fffe", "InvalidErrorDetail"], // not UTF-8
    ["04 01 00000001 07 46 00000001 0401", "ErrorDetailTooLong"], // 1,025 bytes announced
    ["04 01 00000001 07 46 00000001 0005 6162", "Truncated"],
  ];
  for (const [body, code] of cases) {
    const r = decodeBody(hex(body));
    assert.equal(r.ok, false, body);
    assert.equal(r.error.code, code, body);
  }
  const longest = new Uint8Array(1024).fill(0x78);
  const ok = decodeBody(concat([hex("04 01 00000001 07 46 00000001 0400"), longest]));
  assert.ok(ok.ok, String(ok.error));
  assert.equal(ok.frame.detail.length, 1024);
});

test("a payload length larger than the frame is Truncated before anything is sliced", () => {
  const r = decodeBody(hex("03 00 00000001 ffffffff"));
  assert.equal(r.ok, false);
  assert.deepEqual({ code: r.error.code, ...r.error.detail }, { code: "Truncated", need: 0xffffffff, have: 0 });
});

test("a body over the limit is FrameTooLong", () => {
  const big = encodeFrame({ type: "reply", correlation: 1, payload: new Uint8Array(FRAME_LEN_MAX_DEFAULT) });
  const r = decodeBody(big.subarray(4));
  assert.equal(r.error.code, "FrameTooLong");
  const small = decodeBody(big.subarray(4), 1 << 20);
  assert.ok(small.ok);
});

test("the splitter decides FrameTooLong from the prefix alone, before buffering the frame", () => {
  const s = new FrameSplitter(1024);
  const seen = [];
  assert.equal(s.feed(hex("00 00 04"), (f) => seen.push(f)), undefined);
  const e = s.feed(hex("01"), (f) => seen.push(f));
  assert.equal(e.code, "FrameTooLong");
  assert.equal(s.buffered, 0);
  // Latched: the stream is not trusted any further.
  assert.equal(s.feed(encodeFrame(samples[7]), (f) => seen.push(f)).code, "FrameTooLong");
  assert.equal(seen.length, 0);
});

test("the splitter gives the same frames for every way of cutting the stream", () => {
  const stream = concat(samples.map(encodeFrame));
  for (let cut = 1; cut <= stream.length; cut++) {
    const s = new FrameSplitter();
    const seen = [];
    for (let at = 0; at < stream.length; at += cut) {
      assert.equal(s.feed(stream.subarray(at, at + cut), (f) => seen.push(f)), undefined);
    }
    assert.deepEqual(seen, samples, `chunks of ${cut}`);
    assert.equal(s.buffered, 0);
  }
});

test("payloads are copies: reusing the received chunk does not change a decoded frame", () => {
  const chunk = encodeFrame(samples[4]);
  const seen = [];
  new FrameSplitter().feed(chunk, (f) => seen.push(f));
  chunk.fill(0);
  assert.equal(new TextDecoder().decode(seen[0].payload), "tick 4");
});

test("arbitrary bytes never throw, and the splitter never holds more than one frame", () => {
  let seed = 0x2545f491;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  const max = 256;
  let frames = 0;
  let errors = 0;
  for (let round = 0; round < 3000; round++) {
    const s = new FrameSplitter(max);
    // Half the rounds start from valid frames and mutate a byte, half are noise.
    let bytes;
    if (round % 2 === 0) {
      bytes = concat(samples.slice(0, 1 + Math.floor(rand() * samples.length)).map(encodeFrame));
      bytes[Math.floor(rand() * bytes.length)] = Math.floor(rand() * 256);
    } else {
      bytes = Uint8Array.from({ length: Math.floor(rand() * 600) }, () => Math.floor(rand() * 256));
    }
    let at = 0;
    while (at < bytes.length) {
      const n = 1 + Math.floor(rand() * 40);
      const e = s.feed(bytes.subarray(at, at + n), () => frames++);
      assert.ok(s.buffered <= 4 + max, `buffered ${s.buffered}`);
      if (e) {
        assert.ok(e instanceof WireError);
        errors++;
        break;
      }
      at += n;
    }
    const whole = decodeWholeFrame(bytes, max);
    assert.equal(typeof whole.ok, "boolean");
  }
  assert.ok(frames > 0 && errors > 0, `frames ${frames}, errors ${errors}`);
});

test("encoding refuses fields out of range instead of writing wrong bytes", () => {
  assert.throws(() => encodeFrame({ type: "message", key: 65536, payload: new Uint8Array() }), RangeError);
  assert.throws(() => encodeFrame({ type: "request", key: 1, correlation: -1, payload: new Uint8Array() }), RangeError);
  assert.throws(() => encodeFrame({ type: "ping", nonce: 1n << 64n }), RangeError);
  assert.throws(() => encodeFrame({ type: "error", correlation: 1, kind: "Unavailable", reason: "NoPacketHandler" }), RangeError);
  const stale = { type: "error", correlation: 1, kind: "Unavailable", reason: "StaleLocation" };
  assert.throws(() => encodeFrame({ ...stale, code: 3 }), RangeError);
  assert.throws(() => encodeFrame({ ...stale, detail: "x".repeat(1025) }), RangeError);
});

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
