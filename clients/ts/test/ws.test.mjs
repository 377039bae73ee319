// The WebSocket transport's framing, against a stand-in WebSocket: one
// binary message is exactly one encoded client frame (prefix included),
// each way. The end-to-end run against a node's WebSocket listener waits
// for that listener (issue 22 item 1).
import { test } from "node:test";
import assert from "node:assert/strict";
import { webSocket, decodeWsMessage, encodeFrame, ZlinkClient, utf8, fromUtf8 } from "../dist/src/index.js";
import { flush } from "./support/fake.mjs";

class FakeWebSocket {
  static last;
  binaryType = "blob";
  bufferedAmount = 0;
  sent = [];
  closed = false;
  onopen = null;
  onmessage = null;
  onerror = null;
  onclose = null;
  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    FakeWebSocket.last = this;
  }
  send(data) {
    this.sent.push(data);
  }
  close() {
    this.closed = true;
  }
  // The server's side:
  open() {
    this.onopen?.({});
  }
  message(data) {
    this.onmessage?.({ data });
  }
  serverClose(code = 1000, reason = "") {
    this.onclose?.({ code, reason });
  }
}

function open(frameLenMax = 65536) {
  const got = { frames: [], malformed: [], closed: [] };
  const transport = webSocket("ws://127.0.0.1:7100/", { WebSocket: FakeWebSocket, protocols: ["zlink"] })({
    frameLenMax,
    events: {
      frame: (f) => got.frames.push(f),
      malformed: (e) => got.malformed.push(e),
      closed: (c) => got.closed.push(c),
    },
  });
  return { transport, ws: FakeWebSocket.last, got };
}

const pushFrame = { type: "push", key: 100, payload: utf8("tick 4") };

test("binary messages are received as ArrayBuffers and each is one frame", async () => {
  const { transport, ws, got } = open();
  assert.equal(ws.binaryType, "arraybuffer");
  assert.equal(ws.url, "ws://127.0.0.1:7100/");
  assert.deepEqual(ws.protocols, ["zlink"]);
  ws.open();
  await transport.opened;
  const bytes = encodeFrame(pushFrame);
  ws.message(bytes.slice().buffer);
  ws.message(new Uint8Array(encodeFrame({ type: "ping", nonce: 5n }))); // a view works too
  assert.deepEqual(got.frames, [pushFrame, { type: "ping", nonce: 5n }]);
  assert.equal(got.malformed.length, 0);
});

test("each frame sent is one message holding the whole encoded frame", async () => {
  const { transport, ws } = open();
  ws.open();
  await transport.opened;
  const a = encodeFrame({ type: "message", key: 2, payload: utf8("a") });
  const b = encodeFrame({ type: "pong", nonce: 9n });
  transport.send(a);
  transport.send(b);
  assert.deepEqual(ws.sent, [a, b]);
});

const badMessages = [
  ["two frames in one message", () => concat(encodeFrame(pushFrame), encodeFrame(pushFrame)).buffer, "TrailingBytes"],
  ["half a frame", () => encodeFrame(pushFrame).slice(0, 9).buffer, "Truncated"],
  ["fewer bytes than a prefix", () => new Uint8Array([0, 0]).buffer, "Truncated"],
  ["a text message", () => "hello", "NotBinary"],
  ["a Blob-like object", () => ({ size: 3 }), "NotBinary"],
  ["a prefix over the frame limit", () => new Uint8Array([0, 1, 0, 1, 0, 0]).buffer, "FrameTooLong"],
  ["a malformed body", () => new Uint8Array([0, 0, 0, 2, 42, 0]).buffer, "UnknownFrameKind"],
];
for (const [name, data, code] of badMessages) {
  test(`${name} is a typed WireError (${code}) and closes the WebSocket`, async () => {
    const { transport, ws, got } = open();
    ws.open();
    await transport.opened;
    ws.message(data());
    assert.equal(got.frames.length, 0);
    assert.deepEqual(got.malformed.map((e) => e.code), [code]);
    assert.equal(got.closed.length, 1);
    assert.ok(ws.closed);
    // Nothing after the close is reported.
    ws.message(encodeFrame(pushFrame).buffer);
    ws.serverClose();
    assert.equal(got.frames.length, 0);
    assert.equal(got.closed.length, 1);
  });
}

test("decodeWsMessage is total over odd values", () => {
  for (const v of [undefined, null, 0, {}, [], new ArrayBuffer(0), new Uint8Array(3), new DataView(new ArrayBuffer(8))]) {
    const r = decodeWsMessage(v, 65536);
    assert.equal(r.ok, false);
  }
});

test("a close before the open rejects `opened` and reports nothing", async () => {
  const { transport, ws, got } = open();
  ws.onerror?.({ type: "error" });
  ws.serverClose(1006);
  await assert.rejects(transport.opened);
  assert.equal(got.closed.length, 0);
});

test("a close after the open is reported once with its code", async () => {
  const { transport, ws, got } = open();
  ws.open();
  await transport.opened;
  ws.serverClose(1001, "going away");
  assert.equal(got.closed.length, 1);
  assert.equal(got.closed[0].code, 1001);
});

test("without a WebSocket constructor the transport fails to open, typed", async () => {
  const saved = globalThis.WebSocket;
  try {
    delete globalThis.WebSocket;
    const client = new ZlinkClient({ connect: webSocket("ws://127.0.0.1:1/"), keepalive: false });
    await assert.rejects(client.connect(), (e) => e.reason === "TransportFailed" && /no WebSocket/.test(e.message));
  } finally {
    if (saved !== undefined) globalThis.WebSocket = saved;
  }
});

test("the client runs over the WebSocket transport: login, request, push, close", async () => {
  const client = new ZlinkClient({
    connect: webSocket("ws://127.0.0.1:7100/", { WebSocket: FakeWebSocket }),
    login: { key: 1, payload: utf8("alice") },
    keepalive: false,
    reconnect: false,
  });
  const pushes = [];
  client.onPush((p) => pushes.push(fromUtf8(p.payload)));
  const done = client.connect();
  const ws = FakeWebSocket.last;
  ws.open();
  await flush();
  assert.equal(ws.sent.length, 1);
  const login = decodeWsMessage(ws.sent[0], 65536).frame;
  assert.deepEqual([login.type, login.key, fromUtf8(login.payload)], ["request", 1, "alice"]);
  ws.message(encodeFrame({ type: "reply", correlation: login.correlation, payload: utf8("welcome") }).buffer);
  assert.equal(fromUtf8(await done), "welcome");
  const move = client.request(2, utf8("alice:1,0"));
  const req = decodeWsMessage(ws.sent[1], 65536).frame;
  ws.message(encodeFrame({ type: "push", key: 100, payload: utf8("tick 4") }).buffer);
  ws.message(encodeFrame({ type: "reply", correlation: req.correlation, payload: utf8("1,0") }).buffer);
  assert.equal(fromUtf8(await move), "1,0");
  assert.deepEqual(pushes, ["tick 4"]);
  ws.message(encodeFrame({ type: "close", reason: "Replaced" }).buffer);
  assert.equal(client.state, "closed");
  assert.ok(ws.closed);
});

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
