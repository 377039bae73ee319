// The client's rules, driven frame by frame through an in-memory transport
// and a virtual clock: login first on every connection, correlation,
// deadlines and late replies, pushes, keepalive, the reconnect policy, and
// that a request whose outcome is unknown is never sent again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ZlinkClient, ZlinkError, WireError, utf8, fromUtf8, backoffDelay } from "../dist/src/index.js";
import { FakeTimers, FakeServer, flush } from "./support/fake.mjs";

const LOGIN = 1;
const MOVE = 2;

function setup(options = {}) {
  const timers = new FakeTimers();
  const server = new FakeServer();
  const client = new ZlinkClient({
    connect: server.connector,
    login: { key: LOGIN, payload: utf8("alice") },
    timers,
    random: () => 0.5,
    keepalive: false,
    reconnect: { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0.5 },
    ...options,
  });
  const events = [];
  for (const name of ["open", "close", "reconnecting", "reconnectFailed", "dropped", "push"]) {
    client.on(name, (e) => events.push([name, e]));
  }
  return { timers, server, client, events };
}

/** Opens the last connection and answers its login. */
async function acceptLogin(server, reply = "welcome") {
  const conn = server.last;
  conn.open();
  await flush();
  const [login] = conn.requests();
  assert.equal(login.key, LOGIN);
  conn.reply(login.correlation, utf8(reply));
  await flush();
  return conn;
}

async function connected(options) {
  const s = setup(options);
  const done = s.client.connect();
  await acceptLogin(s.server);
  assert.equal(fromUtf8(await done), "welcome");
  assert.equal(s.client.state, "open");
  return s;
}

test("connect runs the login as the first request and resolves with its reply", async () => {
  const { server, events } = await connected();
  assert.equal(server.connections.length, 1);
  assert.deepEqual(server.last.sent.map((f) => f.type), ["request"]);
  assert.equal(fromUtf8(server.last.sent[0].payload), "alice");
  assert.deepEqual(events.map(([n]) => n), ["open"]);
  assert.equal(events[0][1].reconnect, false);
});

test("replies reach their request by correlation, in any order", async () => {
  const { server, client } = await connected();
  const a = client.request(MOVE, utf8("a"));
  const b = client.request(MOVE, utf8("b"));
  await flush();
  const [, ra, rb] = server.last.requests();
  assert.notEqual(ra.correlation, rb.correlation);
  server.last.reply(rb.correlation, utf8("B"));
  server.last.reply(ra.correlation, utf8("A"));
  assert.equal(fromUtf8(await a), "A");
  assert.equal(fromUtf8(await b), "B");
});

test("a server error is a typed ZlinkError of its kind and reason", async () => {
  const { server, client } = await connected();
  const p = client.request(999, utf8("x"));
  await flush();
  const req = server.last.requests().at(-1);
  server.last.push({ type: "error", correlation: req.correlation, kind: "NotFound", reason: "NoPacketHandler" });
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof ZlinkError);
    assert.equal(e.kind, "NotFound");
    assert.equal(e.reason, "NoPacketHandler");
    assert.equal(e.reasonCode, 21);
    assert.equal(e.remote, true);
    assert.equal(e.outcomeUnknown, false);
    return true;
  });
});

test("the server's OutcomeUnknown (a node link down in flight) is marked outcomeUnknown", async () => {
  const { server, client } = await connected();
  const p = client.request(MOVE, utf8("x"));
  await flush();
  const req = server.last.requests().at(-1);
  server.last.push({ type: "error", correlation: req.correlation, kind: "Unavailable", reason: "OutcomeUnknown" });
  await assert.rejects(p, (e) => {
    assert.deepEqual(
      [e.kind, e.reason, e.reasonCode, e.remote, e.outcomeUnknown],
      ["Unavailable", "OutcomeUnknown", 29, true, true],
    );
    return true;
  });
  assert.equal(client.state, "open");
});

test("the game's own error is kind Application with its code and detail", async () => {
  const { server, client } = await connected();
  const p = client.request(MOVE, utf8("x"));
  await flush();
  const req = server.last.requests().at(-1);
  const error = { type: "error", correlation: req.correlation, kind: "Application", reason: "Application" };
  server.last.push({ ...error, code: 7, detail: "not your turn" });
  await assert.rejects(p, (e) => {
    assert.deepEqual(
      [e.kind, e.reason, e.reasonCode, e.code, e.detail, e.remote],
      ["Application", "Application", 70, 7, "not your turn", true],
    );
    assert.equal(e.message, "application error 7: not your turn");
    return true;
  });
});

test("a deadline ends the request with DeadlineExceeded; the late reply is dropped", async () => {
  const { server, client, timers, events } = await connected();
  const p = client.request(MOVE, utf8("slow"), { deadlineMs: 250 });
  const settled = p.catch((e) => e);
  await timers.advance(249);
  assert.equal(client.state, "open");
  await timers.advance(1);
  const e = await settled;
  assert.equal(e.kind, "DeadlineExceeded");
  assert.equal(e.reason, "Deadline");
  assert.equal(e.remote, false);
  assert.equal(e.outcomeUnknown, true);
  const req = server.last.requests().at(-1);
  server.last.reply(req.correlation, utf8("late"));
  assert.deepEqual(events.at(-1), ["dropped", { correlation: req.correlation, frame: "reply" }]);
  assert.equal(client.stats.dropped, 1);
  assert.equal(client.state, "open");
});

test("pushes reach the push handlers", async () => {
  const { server, client } = await connected();
  const seen = [];
  const off = client.onPush((p) => seen.push([p.key, fromUtf8(p.payload)]));
  server.last.push({ type: "push", key: 100, payload: utf8("tick 4") });
  off();
  server.last.push({ type: "push", key: 100, payload: utf8("tick 8") });
  assert.deepEqual(seen, [[100, "tick 4"]]);
});

test("one-way sends are Message frames", async () => {
  const { server, client } = await connected();
  client.send(7, utf8("hello"));
  const last = server.last.sent.at(-1);
  assert.equal(last.type, "message");
  assert.equal(last.key, 7);
  assert.equal(fromUtf8(last.payload), "hello");
});

test("the server's Ping is answered with a Pong of its nonce", async () => {
  const { server } = await connected();
  server.last.push({ type: "ping", nonce: 0xdeadbeefcafen });
  assert.deepEqual(server.last.sent.at(-1), { type: "pong", nonce: 0xdeadbeefcafen });
});

test("keepalive: a ping without a pong ends the connection, a pong keeps it", async () => {
  const { server, client, timers, events } = await connected({ keepalive: { intervalMs: 1000, timeoutMs: 500 } });
  await timers.advance(1000);
  const ping = server.last.sent.at(-1);
  assert.equal(ping.type, "ping");
  server.last.push({ type: "pong", nonce: ping.nonce });
  await timers.advance(1000);
  const ping2 = server.last.sent.at(-1);
  assert.equal(ping2.type, "ping");
  assert.notEqual(ping2.nonce, ping.nonce);
  await timers.advance(499);
  assert.equal(client.state, "open");
  await timers.advance(1);
  assert.equal(client.state, "reconnecting");
  const close = events.find(([n]) => n === "close")[1];
  assert.equal(close.cause, "keepalive-timeout");
  assert.equal(close.willReconnect, true);
  assert.ok(server.connections[0].closedByClient);
});

test("a dropped connection ends requests in flight OutcomeUnknown, relogs in, and never resends them", async () => {
  const { server, client, timers, events } = await connected();
  const inFlight = client.request(MOVE, utf8("alice:1000,0"), { deadlineMs: 60_000 });
  const settled = inFlight.catch((e) => e);
  await flush();
  server.last.drop();
  const e = await settled;
  assert.ok(e instanceof ZlinkError);
  assert.equal(e.kind, "Unavailable");
  assert.equal(e.reason, "OutcomeUnknown");
  assert.equal(e.outcomeUnknown, true);
  assert.equal(client.state, "reconnecting");
  const close = events.find(([n]) => n === "close")[1];
  assert.equal(close.cause, "connection-lost");
  assert.equal(close.willReconnect, true);
  // Requests while reconnecting are refused, not queued: nothing is sent.
  await assert.rejects(client.request(MOVE, utf8("alice:1,0")), (err) => err.reason === "NotConnected");
  assert.throws(() => client.send(MOVE, utf8("x")), (err) => err.reason === "NotConnected");
  // The first attempt after the backoff's first delay (100 ms, jitter 0.5 x 0.5).
  assert.deepEqual(timers.delays(), [75]);
  await timers.advance(75);
  assert.equal(server.connections.length, 2);
  await acceptLogin(server);
  assert.equal(client.state, "open");
  assert.deepEqual(events.filter(([n]) => n === "open").map(([, o]) => o.reconnect), [false, true]);
  // The new connection carried the login only.
  assert.deepEqual(server.last.sent.map((f) => [f.type, fromUtf8(f.payload)]), [["request", "alice"]]);
  const everyMove = server.connections.flatMap((c) => c.requests()).filter((f) => f.key === MOVE);
  assert.equal(everyMove.length, 1);
  // And the outcome-unknown request's reply, had it come late, would have no taker.
  assert.equal(client.stats.reconnects, 1);
});

for (const reason of ["Replaced", "AuthenticationFailed"]) {
  test(`a Close(${reason}) never reconnects`, async () => {
    const { server, client, timers, events } = await connected();
    const inFlight = client.request(MOVE, utf8("alice:1,0")).catch((e) => e);
    await flush();
    server.last.push({ type: "close", reason });
    assert.equal((await inFlight).reason, "OutcomeUnknown");
    assert.equal(client.state, "closed");
    assert.equal(timers.pending, 0, "no timer left: no reconnect is scheduled");
    const close = events.find(([n]) => n === "close")[1];
    assert.deepEqual([close.cause, close.reason, close.willReconnect], ["server-close", reason, false]);
    await assert.rejects(client.ready(), (e) => e.reason === "ClientClosed");
    await assert.rejects(client.request(MOVE, utf8("x")), (e) => e.reason === "ClientClosed");
    assert.equal(server.connections.length, 1);
  });
}

test("other server closes (Shutdown) reconnect", async () => {
  const { server, client, events } = await connected();
  server.last.push({ type: "close", reason: "Shutdown" });
  assert.equal(client.state, "reconnecting");
  assert.equal(events.find(([n]) => n === "close")[1].willReconnect, true);
  assert.ok(server.last.closedByClient);
});

test("an AuthenticationFailed close during the relogin stops the reconnects", async () => {
  const { server, client, timers, events } = await connected();
  server.last.drop();
  await timers.advance(75);
  server.last.open();
  await flush();
  server.last.push({ type: "close", reason: "AuthenticationFailed" });
  await flush();
  assert.equal(client.state, "closed");
  assert.equal(timers.pending, 0);
  const failed = events.find(([n]) => n === "reconnectFailed")[1];
  assert.equal(failed.error.reason, "LoginFailed");
  assert.equal(failed.error.cause.reason, "AuthenticationFailed");
});

test("a relogin refused with Unavailable is retried; one refused NotFound is final", async () => {
  const { server, client, timers } = await connected();
  server.last.drop();
  await timers.advance(75);
  server.last.open();
  await flush();
  let login = server.last.requests()[0];
  server.last.push({ type: "error", correlation: login.correlation, kind: "Unavailable", reason: "StoreUnavailable" });
  await flush();
  assert.equal(client.state, "reconnecting");
  assert.ok(server.connections[1].closedByClient);
  await timers.advance(timers.delays()[0]);
  server.last.open();
  await flush();
  login = server.last.requests()[0];
  server.last.push({ type: "error", correlation: login.correlation, kind: "NotFound", reason: "NoActorFactory" });
  await flush();
  assert.equal(client.state, "closed");
  assert.equal(timers.pending, 0);
});

test("reconnect delays grow exponentially with jitter up to the cap, and reset after a login", async () => {
  const { server, client, timers, events } = await connected();
  server.refuse = true;
  server.last.drop();
  for (let i = 0; i < 6; i++) await timers.advance(timers.delays()[0]);
  const delays = events.filter(([n]) => n === "reconnecting").map(([, r]) => r.delayMs);
  // random 0.5 and jitter 0.5: each delay is 75% of min(1000, 100 * 2^n).
  assert.deepEqual(delays, [75, 150, 300, 600, 750, 750, 750]);
  assert.equal(events.filter(([n]) => n === "reconnectFailed").length, 6);
  server.refuse = false;
  await timers.advance(750);
  await acceptLogin(server);
  assert.equal(client.state, "open");
  server.last.drop();
  assert.equal(events.filter(([n]) => n === "reconnecting").at(-1)[1].delayMs, 75);
});

test("backoffDelay: capped, and jitter only shortens, within its share", () => {
  const policy = { initialDelayMs: 100, maxDelayMs: 5000, multiplier: 2, jitter: 0.3, maxAttempts: Infinity };
  for (let attempt = 0; attempt < 100; attempt++) {
    const cap = Math.min(5000, 100 * 2 ** attempt);
    assert.equal(backoffDelay(policy, attempt, () => 0), cap);
    const low = backoffDelay(policy, attempt, () => 0.999999);
    assert.ok(low >= Math.floor(cap * 0.7) && low <= cap, `${attempt}: ${low}`);
  }
});

test("reconnect: false ends the client on the first drop", async () => {
  const { server, client, timers } = await connected({ reconnect: false });
  server.last.drop();
  assert.equal(client.state, "closed");
  assert.equal(timers.pending, 0);
});

test("maxAttempts gives up with ClientClosed", async () => {
  const { server, client, timers } = await connected({ reconnect: { maxAttempts: 2, initialDelayMs: 10 } });
  server.refuse = true;
  server.last.drop();
  await timers.advance(10_000);
  assert.equal(client.state, "closed");
  assert.equal(server.connections.length, 3);
  await assert.rejects(client.ready(), (e) => /2 reconnect attempts/.test(e.message));
});

test("bytes from the server that do not decode end the connection as a protocol error, never a throw", async () => {
  const { server, client, events } = await connected();
  const inFlight = client.request(MOVE, utf8("x")).catch((e) => e);
  await flush();
  server.last.malformed(new WireError("UnknownFrameKind", { kind: 42 }));
  assert.equal((await inFlight).reason, "OutcomeUnknown");
  const close = events.find(([n]) => n === "close")[1];
  assert.equal(close.cause, "protocol-error");
  assert.equal(close.error.code, "UnknownFrameKind");
  assert.equal(client.state, "reconnecting");
});

test("a client-only frame kind from the server is a protocol error", async () => {
  const { server, client, events } = await connected();
  server.last.push({ type: "request", key: 1, correlation: 1, payload: new Uint8Array() });
  assert.equal(events.find(([n]) => n === "close")[1].cause, "protocol-error");
  assert.equal(client.state, "reconnecting");
});

test("what the server would refuse is refused locally, before anything is sent", async () => {
  const { server, client } = await connected({ frameLenMax: 64, maxInFlight: 2 });
  const before = server.last.sent.length;
  await assert.rejects(client.request(MOVE, new Uint8Array(53)), (e) => e.reason === "MessageTooLarge" && !e.remote);
  assert.throws(() => client.send(MOVE, new Uint8Array(57)), (e) => e.reason === "MessageTooLarge");
  client.send(MOVE, new Uint8Array(56)); // kind, flags 2 + key 2 + length 4 + 56 = 64: fits
  const a = client.request(MOVE, new Uint8Array(1));
  const b = client.request(MOVE, new Uint8Array(1));
  await assert.rejects(client.request(MOVE, new Uint8Array(1)), (e) => e.reason === "QueueFull");
  assert.equal(server.last.sent.length, before + 3);
  client.close();
  await assert.rejects(a, (e) => e.reason === "OutcomeUnknown");
  await assert.rejects(b, (e) => e.reason === "OutcomeUnknown");
});

test("an aborted request ends CallerCancelled, and its late reply is dropped", async () => {
  const { server, client, events } = await connected();
  const ac = new AbortController();
  const p = client.request(MOVE, utf8("x"), { signal: ac.signal }).catch((e) => e);
  await flush();
  ac.abort();
  const e = await p;
  assert.equal(e.kind, "Cancelled");
  assert.equal(e.reason, "CallerCancelled");
  server.last.reply(server.last.requests().at(-1).correlation);
  assert.equal(events.at(-1)[0], "dropped");
});

test("close() ends the client for good: no reconnect, no timers", async () => {
  const { server, client, timers, events } = await connected({ keepalive: { intervalMs: 1000, timeoutMs: 1000 } });
  client.close();
  assert.equal(client.state, "closed");
  assert.equal(timers.pending, 0);
  assert.ok(server.last.closedByClient);
  assert.deepEqual(events.at(-1)[1], { cause: "client-closed", willReconnect: false });
});

test("a first connect that fails rejects with TransportFailed and closes the client", async () => {
  const { server, client } = setup();
  server.refuse = true;
  await assert.rejects(client.connect(), (e) => e.reason === "TransportFailed" && e.kind === "Unavailable");
  assert.equal(client.state, "closed");
});

test("a login function may make several requests", async () => {
  const timers = new FakeTimers();
  const server = new FakeServer();
  const client = new ZlinkClient({
    connect: server.connector,
    timers,
    keepalive: false,
    login: async (session) => {
      await session.request(4, utf8("alice"));
      return fromUtf8(await session.request(5, new Uint8Array()));
    },
  });
  const done = client.connect();
  server.last.open();
  await flush();
  server.last.reply(server.last.requests()[0].correlation, utf8("found"));
  await flush();
  assert.equal(server.last.requests()[1].key, 5);
  server.last.reply(server.last.requests()[1].correlation, utf8("welcome"));
  assert.equal(await done, "welcome");
});

test("a listener that throws does not break the client", async () => {
  const reported = [];
  const { server, client } = await connected({ onListenerError: (e, event) => reported.push([e.message, event]) });
  client.onPush(() => {
    throw new Error("the game's bug");
  });
  const seen = [];
  client.onPush((p) => seen.push(p.key));
  server.last.push({ type: "push", key: 9, payload: new Uint8Array() });
  assert.deepEqual(seen, [9]);
  assert.deepEqual(reported, [["the game's bug", "push"]]);
  assert.equal(client.state, "open");
});
