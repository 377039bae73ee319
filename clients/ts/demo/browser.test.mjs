// The demo page (demo/index.html, demo/demo.js) in a real browser: headless
// Chromium, driven over the DevTools protocol (demo/chromium.mjs), against
// a real zlink-node through its WebSocket listener, whose Origin allow-list
// is the page's origin. The page logs in, four arrow keys move the player
// (each position the page shows is checked as it comes), the fourth move's
// push is shown, and the node's side agrees: its MOVE counter, and WHERE
// asked by a second client (over TCP) that logs in as the same player —
// which the page shows as Replaced, without reconnecting. A page from an
// origin not on the list is refused its WebSocket.
//
// Run: `cargo build --bin zlink-node`, then in clients/ts `npx tsc -p .`
// and `npm run test:browser` (Node 20: NODE_OPTIONS=--experimental-websocket).
// ZLINK_DEMO_SCREENSHOT=<path> saves a PNG of the page after the moves
// (docs/img/browser-demo.png is one). Every wait is bounded.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { ZlinkClient, pack } from "../dist/src/index.js";
import { tcp } from "../dist/src/tcp.js";
import { NodeProcess } from "../test/support/node.mjs";
import { Chromium } from "./chromium.mjs";
import { serveDemo } from "./serve.mjs";

const LOGIN = 1;
const WHERE = 3;
const WIDTH = 680;

describe("the demo page in headless Chromium", () => {
  let site;
  let node;
  let browser;

  before(async () => {
    site = await serveDemo();
    node = await NodeProcess.start({ websocket: 0, websocketOrigins: [site.origin] });
    browser = await Chromium.launch();
  });

  after(async () => {
    await browser?.close();
    await node?.stop();
    await site?.close();
  });

  test("logs in, moves with the arrow keys, shows each position and the push", async () => {
    const page = await browser.newPage({ width: WIDTH });
    await page.goto(`${site.origin}/demo/?port=${node.websocketPort}&player=ann`);
    const state = "document.body?.dataset.state";
    await page.waitFor(state, (s) => s === "ready" || s === "failed", "the page logging in");
    const text = (id) => page.evaluate(`document.getElementById(${JSON.stringify(id)}).textContent`);
    assert.equal(await page.evaluate(state), "ready", `the page did not log in: ${await text("error")}`);
    assert.equal(await text("pos"), "0,0");

    // Each key, then the position the page shows once its MOVE is answered.
    const steps = [
      ["ArrowRight", "1,0"],
      ["ArrowRight", "2,0"],
      ["ArrowRight", "3,0"],
      ["ArrowDown", "3,1"],
    ];
    for (const [i, [key, want]] of steps.entries()) {
      await page.press(key);
      const moves = `${i + 1} sent, ${i + 1} answered`;
      await page.waitFor(`document.getElementById("moves").textContent`, (s) => s === moves, `"${moves}"`);
      assert.equal(await text("pos"), want, `the position after ${key}`);
    }
    // The player pushes {moves} on every fourth MOVE, shown as "tick <moves>".
    await page.waitFor(`document.getElementById("push").textContent`, (s) => s === "tick 4", "the page showing the push");
    assert.equal(await text("moves"), "4 sent, 4 answered");
    assert.equal(await text("error"), "none");
    assert.equal((await node.counters()).moves, 4, "one MOVE per key, none lost or doubled");

    const png = await page.screenshot(WIDTH);
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "a PNG");
    if (process.env.ZLINK_DEMO_SCREENSHOT) writeFileSync(process.env.ZLINK_DEMO_SCREENSHOT, png);

    // The node's own answer, through another client: logging in as ann
    // replaces the page's session (§6), which must not reconnect.
    const other = new ZlinkClient({
      connect: tcp({ host: "127.0.0.1", port: node.port }),
      login: { key: LOGIN, payload: pack({ player: "ann" }) },
      requestDeadlineMs: 5000,
      reconnect: false,
    });
    try {
      await other.connect();
      assert.deepEqual(await other.call(WHERE, { player: "ann" }), { x: 3, y: 1 }, "WHERE agrees with the page");
      await page.waitFor(state, (s) => s === "closed", "the page showing its session replaced");
      assert.match(await text("state"), /Replaced/);
    } finally {
      other.close();
    }
    assert.deepEqual(page.log.filter((l) => l.startsWith("uncaught")), [], "no uncaught exception in the page");
  });

  test("a page from an origin not on the node's list gets no WebSocket", async () => {
    // The console prints the counters that are not zero.
    const refusedBefore = (await node.counters()).websocket_origin_refused ?? 0;
    const page = await browser.newPage({ width: WIDTH });
    // localhost is another origin than 127.0.0.1; the page still dials 127.0.0.1.
    const port = new URL(site.origin).port;
    await page.goto(`http://localhost:${port}/demo/?port=${node.websocketPort}&host=127.0.0.1&player=bob`);
    const state = await page.waitFor("document.body?.dataset.state", (s) => s !== "connecting", "the login's end");
    assert.equal(state, "failed", "the page logged in from an origin not on the list");
    assert.match(await page.evaluate(`document.getElementById("error").textContent`), /TransportFailed/);
    assert.equal((await node.counters()).websocket_origin_refused, refusedBefore + 1, "refused by its Origin");
  });
});
