// Headless Chromium driven over the Chrome DevTools Protocol, with no
// dependency: the browser is started with --remote-debugging-port=0, the
// DevTools address read from the line it prints on stderr, and the
// protocol's JSON spoken over Node's WebSocket (global from Node 22,
// --experimental-websocket on Node 20). Every wait is bounded; the browser
// (its whole process group) is killed at the end, or when this process
// exits, whatever happened.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { bounded } from "../test/support/node.mjs";

/** How long one protocol command, or a page condition, may take. */
export const CDP_MS = 20_000;
/** How long the browser may take to start (a cold start on a loaded 2-core machine). */
export const LAUNCH_MS = 30_000;

/** The browser: $CHROMIUM_BIN, else `chromium` on the PATH (Debian's package). */
export function chromiumBinary() {
  return process.env.CHROMIUM_BIN || "chromium";
}

/** Every browser started, so that none outlives this process. */
const live = new Set();
process.on("exit", () => {
  for (const child of live) killGroup(child);
});

function killGroup(child) {
  try {
    process.kill(-child.pid, "SIGKILL"); // detached: the browser leads its own group
  } catch {
    // already gone
  }
}

/** One WebSocket to the browser's DevTools endpoint; commands by id, events to listeners. */
export class Cdp {
  #ws;
  #id = 0;
  #pending = new Map();
  #listeners = new Set();
  #closed = null;

  static async connect(url, ms = CDP_MS) {
    if (typeof WebSocket !== "function") {
      throw new Error("no global WebSocket: Node 22 has one, Node 20 needs --experimental-websocket (NODE_OPTIONS)");
    }
    const cdp = new Cdp(new WebSocket(url));
    await bounded(
      new Promise((resolve, reject) => {
        cdp.#ws.addEventListener("open", resolve, { once: true });
        cdp.#ws.addEventListener("error", () => reject(new Error(`DevTools WebSocket ${url} failed`)), { once: true });
      }),
      ms,
      `the DevTools WebSocket ${url} opening`,
    );
    return cdp;
  }

  constructor(ws) {
    this.#ws = ws;
    ws.addEventListener("message", (event) => {
      const msg = JSON.parse(typeof event.data === "string" ? event.data : Buffer.from(event.data).toString());
      if (msg.id !== undefined) {
        const p = this.#pending.get(msg.id);
        if (!p) return;
        this.#pending.delete(msg.id);
        if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message} (${msg.error.code})`));
        else p.resolve(msg.result);
      } else {
        for (const listener of [...this.#listeners]) listener(msg);
      }
    });
    ws.addEventListener("close", () => {
      this.#closed = new Error("the DevTools WebSocket closed");
      for (const p of this.#pending.values()) p.reject(this.#closed);
      this.#pending.clear();
    });
  }

  /** Sends a command (to a page with its `sessionId`); resolves with its result, within `ms`. */
  send(method, params = {}, sessionId = undefined, ms = CDP_MS) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = ++this.#id;
    const result = new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject, method }));
    this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return bounded(result, ms, `the DevTools command ${method}`).finally(() => this.#pending.delete(id));
  }

  /** Every event ({ method, params, sessionId }); returns the unsubscribe function. */
  on(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close() {
    try {
      this.#ws.close();
    } catch {
      // already closed
    }
  }
}

/** A tab: its protocol session, and what its console and uncaught exceptions said. */
export class Page {
  /** Console messages, uncaught exceptions and browser log entries, as text. */
  log = [];

  constructor(cdp, sessionId, targetId) {
    this.cdp = cdp;
    this.sessionId = sessionId;
    this.targetId = targetId;
    cdp.on(({ method, params, sessionId: from }) => {
      if (from !== sessionId) return;
      if (method === "Runtime.consoleAPICalled") {
        this.log.push(`console.${params.type}: ${params.args.map((a) => a.value ?? a.description ?? a.type).join(" ")}`);
      } else if (method === "Runtime.exceptionThrown") {
        const d = params.exceptionDetails;
        this.log.push(`uncaught: ${d.exception?.description ?? d.text}`);
      } else if (method === "Log.entryAdded") {
        this.log.push(`${params.entry.level}: ${params.entry.text}${params.entry.url ? ` (${params.entry.url})` : ""}`);
      }
    });
  }

  send(method, params = {}, ms = CDP_MS) {
    return this.cdp.send(method, params, this.sessionId, ms);
  }

  /**
   * Navigates and resolves once the page fired its load event (its module
   * scripts have run by then; what they started, a login say, is the
   * page's own state to wait on).
   */
  async goto(url, ms = CDP_MS) {
    let off;
    const loaded = new Promise((resolve) => {
      off = this.cdp.on(({ method, sessionId }) => {
        if (method === "Page.loadEventFired" && sessionId === this.sessionId) resolve();
      });
    });
    try {
      const { errorText } = await this.send("Page.navigate", { url });
      if (errorText) throw new Error(`navigating to ${url}: ${errorText}`);
      await bounded(loaded, ms, `${url} loading; page log: ${JSON.stringify(this.log)}`);
    } finally {
      off();
    }
  }

  /** The value of a JavaScript expression in the page (by value: JSON-able results). */
  async evaluate(expression) {
    const { result, exceptionDetails } = await this.send("Runtime.evaluate", { expression, returnByValue: true });
    if (exceptionDetails) {
      throw new Error(`${expression}: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
    }
    return result.value;
  }

  /**
   * Evaluates `expression` every few ms until `accept` takes its value;
   * resolves with that value, or rejects after `ms` with the last value
   * seen and the page's log. A bounded poll of the page's own state, not a
   * sleep standing in for an event.
   */
  async waitFor(expression, accept, what, ms = CDP_MS) {
    const deadline = Date.now() + ms;
    let last;
    for (;;) {
      last = await this.evaluate(expression);
      if (accept(last)) return last;
      if (Date.now() > deadline) {
        throw new Error(
          `timed out after ${ms} ms waiting for ${what}: ${expression} is ${JSON.stringify(last)}; ` +
            `page log: ${JSON.stringify(this.log)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Presses and releases a key that types no text (an arrow key). */
  async press(key) {
    const codes = { ArrowLeft: 37, ArrowUp: 38, ArrowRight: 39, ArrowDown: 40 };
    if (!(key in codes)) throw new Error(`press: no key code for ${key}`);
    const common = { key, code: key, windowsVirtualKeyCode: codes[key], nativeVirtualKeyCode: codes[key] };
    await this.send("Input.dispatchKeyEvent", { type: "rawKeyDown", ...common });
    await this.send("Input.dispatchKeyEvent", { type: "keyUp", ...common });
  }

  /** A PNG of the whole page, `width` CSS pixels wide. */
  async screenshot(width) {
    const height = await this.evaluate("Math.ceil(document.documentElement.scrollHeight)");
    const { data } = await this.send("Page.captureScreenshot", {
      format: "png",
      captureBeyondViewport: true,
      clip: { x: 0, y: 0, width, height, scale: 1 },
    });
    return Buffer.from(data, "base64");
  }
}

/** A running headless Chromium. */
export class Chromium {
  stderr = [];

  /** Starts the browser; resolves once its DevTools endpoint is connected. */
  static async launch({ width = 700, height = 640 } = {}) {
    const browser = new Chromium(width, height);
    await browser.started;
    return browser;
  }

  constructor(width, height) {
    this.profile = mkdtempSync(join(tmpdir(), "zlink-chromium-"));
    const args = [
      "--headless=new",
      "--remote-debugging-port=0",
      `--user-data-dir=${this.profile}`,
      "--no-sandbox", // root in CI containers has no user namespace for the sandbox
      "--disable-dev-shm-usage", // a container's /dev/shm may be 64 MiB
      "--disable-gpu",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--hide-scrollbars",
      "--mute-audio",
      `--window-size=${width},${height}`,
      "about:blank",
    ];
    this.child = spawn(chromiumBinary(), args, { stdio: ["ignore", "ignore", "pipe"], detached: true });
    live.add(this.child);
    this.exit = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        live.delete(this.child);
        resolve({ code, signal });
      });
      this.child.once("error", (error) => {
        live.delete(this.child);
        resolve({ error });
      });
    });
    const endpoint = new Promise((resolve, reject) => {
      createInterface({ input: this.child.stderr }).on("line", (line) => {
        this.stderr.push(line);
        if (this.stderr.length > 200) this.stderr.shift();
        const m = line.match(/^DevTools listening on (ws:\/\/\S+)/);
        if (m) resolve(m[1]);
      });
      this.exit.then(({ code, signal, error }) =>
        reject(
          new Error(
            `${chromiumBinary()} ${error ? `did not start: ${error.message}` : `exited (${code ?? signal})`} ` +
              `before its DevTools endpoint was up; stderr: ${this.stderr.join("\n")}`,
          ),
        ),
      );
    });
    this.started = bounded(endpoint, LAUNCH_MS, `${chromiumBinary()} printing its DevTools address`).then(async (url) => {
      this.cdp = await Cdp.connect(url);
      return this;
    });
  }

  /** Opens a tab at about:blank, attached, with its console and log reported. */
  async newPage({ width = 700, height = 640 } = {}) {
    const { targetId } = await this.cdp.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.cdp.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this.cdp, sessionId, targetId);
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    await page.send("Log.enable");
    await page.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
    return page;
  }

  /** Closes the browser: Browser.close, and its process group killed if it lingers. Never throws. */
  async close() {
    try {
      if (this.cdp) {
        await this.cdp.send("Browser.close", {}, undefined, 5000).catch(() => {});
        this.cdp.close();
      }
      await bounded(this.exit, 5000, "chromium exiting").catch(() => {});
    } finally {
      killGroup(this.child); // its helpers too, whatever Browser.close left
      await bounded(this.exit, 5000, "chromium exiting after SIGKILL").catch(() => {});
      rmSync(this.profile, { recursive: true, force: true });
    }
  }
}
