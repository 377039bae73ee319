// The MessagePack codec (src/msgpack.ts) against bytes rmp-serde wrote:
// test/fixtures/msgpack.txt, written by tests/msgpack_fixtures.rs (which
// fails when rmp-serde's bytes and the file disagree). Each fixture decodes
// to its expected value and that value encodes to the same bytes, byte for
// byte. Then the formats rmp-serde's fixtures do not reach (32-bit lengths),
// the bounds (every prefix, trailing bytes, depth, huge lengths, random
// bytes: a value or MalformedPayload, never another exception), encoding
// errors, and `call` on an in-memory transport.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { pack, unpack, float64, Float64, MSGPACK_DEPTH_MAX, ZlinkClient, ZlinkError } from "../dist/src/index.js";
import { FakeTimers, FakeServer, flush } from "./support/fake.mjs";

const hex = (s) => Uint8Array.from((s.match(/../g) ?? []).map((b) => parseInt(b, 16)));
const toHex = (b) => Buffer.from(b).toString("hex");

const fixtures = new Map(
  readFileSync(new URL("./fixtures/msgpack.txt", import.meta.url), "utf8")
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const [name, bytes] = line.split(" ");
      return [name, hex(bytes ?? "")];
    }),
);

const position = (x, y) => ({ x, y });
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));

// The value each fixture holds, as this client writes it. `decodeOnly`: a
// form this client reads but never writes (float32).
const expected = {
  login: { value: { player: "ann" } },
  login_unicode: { value: { player: "zoë-🎮" } },
  move: { value: { dx: 1, dy: -1 } },
  move_far: { value: { dx: 1000, dy: -40000 } },
  position: { value: position(3, 1) },
  position_extremes: { value: position(-(2n ** 63n), 2n ** 63n - 1n) },
  ints: {
    value: {
      pos_fix: 127,
      u8_128: 128,
      u8_max: 255,
      u16_max: 65535,
      u32_max: 4294967295,
      u64_max: 2n ** 64n - 1n,
      neg_fix: -32,
      neg_33: -33,
      i8_min: -128,
      i16_min: -32768,
      i32_min: -2147483648,
      i64_min: -(2n ** 63n),
      i64_max: 2n ** 63n - 1n,
      safe_max: Number.MAX_SAFE_INTEGER,
      unsafe_min: -(2n ** 53n) - 1n,
    },
  },
  floats: { value: { half: 0.5, whole: float64(1), negative: -2.25 } },
  float32: { value: { small: 1.5 }, decodeOnly: true },
  profile_none: { value: { name: null, score: 7, online: true, banned: false } },
  profile_some: { value: { name: "ann", score: null, online: false, banned: true } },
  team: {
    value: {
      name: "red",
      members: [
        { player: "ann", at: position(0, 0) },
        { player: "bob", at: position(-5, 300) },
      ],
      tags: [],
    },
  },
  vec_i64: { value: [1, -1, 300, -300, 70000] },
  vec_16: { value: range(16, (i) => i) },
  enum_unit: { value: "Left" },
  enum_units: { value: ["Left", "Right"] },
  enum_unit_of_many: { value: "Stop" },
  enum_newtype: { value: { Say: "hi" } },
  enum_struct: { value: { Go: { dx: 2, dy: -3 } } },
  enum_tuple: { value: { Pair: [1, 2] } },
  unit: { value: null },
  empty_struct: { value: {} },
  newtype_struct: { value: 250 },
  tuple: { value: [1, "x", true] },
  str_31: { value: "a".repeat(31) },
  str_32: { value: "b".repeat(32) },
  str_300: { value: "c".repeat(300) },
  str_empty: { value: "" },
  bin: { value: new Uint8Array([0, 1, 2, 255]) },
  bin_300: { value: Uint8Array.from(range(300, (i) => i % 256)) },
  map_int_keys: {
    value: new Map([
      [1, "a"],
      [300, "b"],
    ]),
  },
  map_16: { value: Object.fromEntries(range(16, (i) => [`k${String(i).padStart(2, "0")}`, i])) },
  array_of_options: { value: [1, null, 3] },
};

/** The value as decoding gives it: Float64 wrappers are plain numbers. */
function plain(v) {
  if (v instanceof Float64) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [plain(k), plain(x)]));
  if (v !== null && typeof v === "object" && !(v instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

function assertMalformed(fn, what) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof ZlinkError, `${what}: ${e}`);
    assert.equal(e.reason, "MalformedPayload", what);
    assert.equal(e.kind, "InvalidOperation");
    assert.equal(e.remote, false);
    assert.match(e.detail, /^msgpack: /);
    return true;
  });
}

test("every fixture has an expected value and every expected value a fixture", () => {
  assert.deepEqual([...fixtures.keys()].sort(), Object.keys(expected).sort());
  assert.ok(fixtures.size >= 30);
});

for (const [name, { value, decodeOnly }] of Object.entries(expected)) {
  test(`fixture ${name}: rmp-serde's bytes decode to the value${decodeOnly ? "" : " and the value encodes to them"}`, () => {
    const bytes = fixtures.get(name);
    assert.ok(bytes, `no fixture ${name}`);
    assert.deepStrictEqual(unpack(bytes), plain(value));
    if (!decodeOnly) assert.equal(toHex(pack(value)), toHex(bytes));
  });
}

test("a decoded struct is a plain object with its fields in order; a map with other keys is a Map", () => {
  const team = unpack(fixtures.get("team"));
  assert.equal(Object.getPrototypeOf(team), Object.prototype);
  assert.deepEqual(Object.keys(team), ["name", "members", "tags"]);
  assert.ok(unpack(fixtures.get("map_int_keys")) instanceof Map);
  // A key "__proto__" is a field, not the object's prototype.
  const sneaky = unpack(hex("81a95f5f70726f746f5f5f81a161" + "01"));
  assert.equal(Object.getPrototypeOf(sneaky), Object.prototype);
  assert.deepEqual(Object.keys(sneaky), ["__proto__"]);
  assert.equal({}.a, undefined);
});

test("integers: the smallest form both ways, 64-bit ones as bigint only past 2^53", () => {
  const cases = [
    [0, "00"], [127, "7f"], [128, "cc80"], [255, "ccff"], [256, "cd0100"], [65535, "cdffff"],
    [65536, "ce00010000"], [4294967295, "ceffffffff"], [4294967296, "cf0000000100000000"],
    [-1, "ff"], [-32, "e0"], [-33, "d0df"], [-128, "d080"], [-129, "d1ff7f"], [-32768, "d18000"],
    [-32769, "d2ffff7fff"], [-2147483648, "d280000000"], [-2147483649, "d3ffffffff7fffffff"],
    [Number.MAX_SAFE_INTEGER, "cf001fffffffffffff"], [Number.MIN_SAFE_INTEGER, "d3ffe0000000000001"],
  ];
  for (const [n, h] of cases) {
    assert.equal(toHex(pack(n)), h, `${n}`);
    assert.equal(toHex(pack(BigInt(n))), h, `${n}n`);
    assert.strictEqual(unpack(hex(h)), n, h);
  }
  assert.strictEqual(unpack(hex("cf0020000000000000")), 2n ** 53n);
  assert.strictEqual(unpack(hex("d3ffdfffffffffffff")), -(2n ** 53n) - 1n);
  // A whole number past 2^53 is written exactly as the integer it is.
  assert.equal(toHex(pack(2 ** 60)), "cf1000000000000000");
  // Narrow forms holding small values still decode (rmp-serde reads them too).
  assert.strictEqual(unpack(hex("cc01")), 1);
  assert.strictEqual(unpack(hex("d3ffffffffffffffff")), -1);
  assertMalformed(() => pack(2n ** 64n), "2^64");
  assertMalformed(() => pack(-(2n ** 63n) - 1n), "-2^63-1");
});

test("floats: non-integers, -0, NaN and the infinities are float64; float32 decodes", () => {
  assert.equal(toHex(pack(0.5)), "cb3fe0000000000000");
  assert.equal(toHex(pack(float64(2))), "cb4000000000000000");
  assert.equal(toHex(pack(-0)), "cb8000000000000000");
  assert.ok(Object.is(unpack(pack(-0)), -0));
  assert.ok(Number.isNaN(unpack(pack(NaN))));
  assert.equal(unpack(pack(Infinity)), Infinity);
  assert.equal(unpack(pack(-Infinity)), -Infinity);
  assert.equal(unpack(hex("ca3fc00000")), 1.5);
});

test("32-bit lengths and the other wide forms round-trip", () => {
  const long = "é".repeat(40000); // 80,000 bytes: str32
  const s = pack(long);
  assert.equal(toHex(s.subarray(0, 5)), "db00013880");
  assert.equal(unpack(s), long);
  const str16 = pack("x".repeat(65535));
  assert.equal(toHex(str16.subarray(0, 3)), "daffff");
  const bin = new Uint8Array(70000).fill(7);
  assert.equal(toHex(pack(bin).subarray(0, 5)), "c600011170");
  assert.deepStrictEqual(unpack(pack(bin)), bin);
  assert.equal(toHex(pack(new Uint8Array(256)).subarray(0, 3)), "c50100");
  const arr = range(70000, (i) => i % 3);
  assert.equal(toHex(pack(arr).subarray(0, 5)), "dd00011170");
  assert.deepStrictEqual(unpack(pack(arr)), arr);
  const obj = Object.fromEntries(range(70000, (i) => [`f${i}`, i]));
  assert.equal(toHex(pack(obj).subarray(0, 5)), "df00011170");
  assert.deepStrictEqual(unpack(pack(obj)), obj);
  const m = new Map(range(20, (i) => [i, [i]]));
  assert.equal(toHex(pack(m).subarray(0, 3)), "de0014");
  assert.deepStrictEqual(unpack(pack(m)), m);
  // A subarray encodes only its own bytes.
  assert.equal(toHex(pack(new Uint8Array([9, 1, 2, 9]).subarray(1, 3))), "c4020102");
  // And decodes from a view into a larger buffer.
  const framed = new Uint8Array([0xff, 0x92, 0x01, 0x02, 0xff]);
  assert.deepStrictEqual(unpack(framed.subarray(1, 4)), [1, 2]);
});

test("an undefined field is left out (a Rust Option field missing reads as None)", () => {
  assert.equal(toHex(pack({ name: undefined, score: 7 })), toHex(pack({ score: 7 })));
});

test("values with no MessagePack form are refused with MalformedPayload", () => {
  for (const [what, v] of [
    ["undefined", undefined],
    ["an undefined element", [1, undefined]],
    ["a function", () => 1],
    ["a symbol", Symbol("s")],
    ["a Date", new Date(0)],
    ["a class instance", new (class Thing {})()],
    ["a Set", new Set([1])],
  ]) {
    assertMalformed(() => pack(v), what);
  }
  let deep = [];
  for (let i = 0; i < MSGPACK_DEPTH_MAX + 5; i++) deep = [deep];
  assertMalformed(() => pack(deep), "too deep");
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  assertMalformed(() => pack(cyclic), "a cycle");
});

test("every strict prefix of every fixture, and every fixture with a byte after it, is refused", () => {
  for (const [name, bytes] of fixtures) {
    for (let n = 0; n < bytes.length; n++) assertMalformed(() => unpack(bytes.subarray(0, n)), `${name}[..${n}]`);
    const longer = new Uint8Array(bytes.length + 1);
    longer.set(bytes);
    assertMalformed(() => unpack(longer), `${name} + 1`);
  }
});

test("the bytes MessagePack never uses, ext types, bad UTF-8 and repeated keys are refused", () => {
  for (const h of ["c1", "c700", "c80000", "c900000000", "d40000", "d5000000", "d6", "d7", "d8", "a2c328", "82a16101a16102", "c4"]) {
    assertMalformed(() => unpack(hex(h)), h);
  }
});

test("nesting is bounded and a huge announced length reserves nothing", () => {
  const nested = (levels) => new Uint8Array([...new Array(levels).fill(0x91), 0x90]);
  assert.ok(Array.isArray(unpack(nested(MSGPACK_DEPTH_MAX - 2))));
  assertMalformed(() => unpack(nested(100000)), "deep"); // not a RangeError from the stack
  for (const h of ["ddffffffff", "dfffffffff", "dbffffffff", "c6ffffffff", "dcffff", "deffff"]) {
    assertMalformed(() => unpack(hex(h)), h);
  }
});

test("random and mutated bytes give a value or MalformedPayload, never another exception", () => {
  let seed = 7;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  const inputs = [];
  for (let i = 0; i < 3000; i++) inputs.push(Uint8Array.from(range(rand() % 24, () => rand() & 0xff)));
  for (const bytes of fixtures.values()) {
    for (let i = 0; i < 30; i++) {
      const m = bytes.slice();
      m[rand() % m.length] = rand() & 0xff;
      inputs.push(m);
    }
  }
  let values = 0;
  for (const bytes of inputs) {
    try {
      unpack(bytes);
      values++;
    } catch (e) {
      assert.ok(e instanceof ZlinkError && e.reason === "MalformedPayload", `${toHex(bytes)}: ${e}`);
    }
  }
  assert.ok(values > 0);
});

test("call encodes the request as MessagePack and decodes the reply; request stays raw", async () => {
  const timers = new FakeTimers();
  const server = new FakeServer();
  const client = new ZlinkClient({
    connect: server.connector,
    login: async (session) => session.call(1, { player: "ann" }),
    timers,
    keepalive: false,
    reconnect: false,
  });
  const connected = client.connect();
  server.last.open();
  await flush();
  const [login] = server.last.requests();
  assert.equal(toHex(login.payload), toHex(fixtures.get("login")));
  server.last.reply(login.correlation, pack(null));
  assert.equal(await connected, null);

  const moved = client.call(2, { dx: 1, dy: -1 });
  await flush();
  const move = server.last.requests().at(-1);
  assert.equal(toHex(move.payload), toHex(fixtures.get("move")));
  server.last.reply(move.correlation, fixtures.get("position"));
  assert.deepStrictEqual(await moved, { x: 3, y: 1 });

  // A reply that is not MessagePack: the client's own MalformedPayload.
  const bad = client.call(2, { dx: 0, dy: 0 });
  await flush();
  server.last.reply(server.last.requests().at(-1).correlation, hex("c1"));
  await assert.rejects(bad, (e) => e instanceof ZlinkError && e.reason === "MalformedPayload" && !e.remote);
  // A value with no form: rejected, nothing sent.
  const before = server.last.sent.length;
  await assert.rejects(client.call(2, () => 1), (e) => e.reason === "MalformedPayload");
  assert.equal(server.last.sent.length, before);
  // The server's error stays the server's.
  const refused = client.call(2, { dx: "x" });
  await flush();
  server.last.push({
    type: "error",
    correlation: server.last.requests().at(-1).correlation,
    kind: "InvalidOperation",
    reason: "MalformedPayload",
    code: 0,
    detail: 'type game::Move: missing field "dy"',
  });
  await assert.rejects(refused, (e) => e.remote && e.reason === "MalformedPayload" && /Move/.test(e.detail));
  client.close();
});
