// zlink-node processes for the end-to-end tests: the built binary run on a
// config the test writes (one shard, the embedded Location Store, the
// lobby game every zlink-node registers), its stdout read line by line so a
// test waits on what the node prints (its ready line, a console answer),
// never on a sleep. Every wait is bounded.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

/** How long a node may take to print a line a test waits for. */
export const WAIT_MS = 20_000;

const repo = fileURLToPath(new URL("../../../../", import.meta.url));

/** The zlink-node binary: $ZLINK_NODE_BIN, else the cargo target dir's debug (or release) build. */
export function nodeBinary() {
  const explicit = process.env.ZLINK_NODE_BIN;
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`ZLINK_NODE_BIN=${explicit} does not exist`);
    return explicit;
  }
  const target = process.env.CARGO_TARGET_DIR || join(repo, "target");
  for (const profile of ["debug", "release"]) {
    const path = join(target, profile, "zlink-node");
    if (existsSync(path)) return path;
  }
  throw new Error(
    `no zlink-node in ${target}/{debug,release}: build it first (cargo build --bin zlink-node) or set ZLINK_NODE_BIN`,
  );
}

function config(port, websocket, websocketOrigins) {
  // listen.websocket: the node's WebSocket listener (issue 22 item 1);
  // listen.websocket_origins: the page origins it lets upgrade (empty: any).
  let ws = websocket === undefined ? "" : `websocket = "127.0.0.1:${websocket}"\n`;
  if (websocketOrigins?.length) ws += `websocket_origins = ${JSON.stringify(websocketOrigins)}\n`;
  return `
[node]
rid = 1
meshes = ["lobby"]
log_level = "warn"
shards = 1
pin_cores = false

[listen]
stream = "127.0.0.1:${port}"
${ws}
[store]
url = "embedded"

[timeouts]
shutdown_deadline_ms = 1000
`;
}

/** Rejects after `ms` with `what` unless `promise` settles first. */
export function bounded(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Resolves with the first event `name` of `client` that `accept` takes, within `ms`. */
export function nextEvent(client, name, ms = WAIT_MS, accept = () => true) {
  let off;
  const got = new Promise((resolve) => {
    off = client.on(name, (e) => {
      if (accept(e)) resolve(e);
    });
  });
  return bounded(got, ms, `the client's "${name}" event`).finally(() => off());
}

/** Every node started, so that none outlives the test process. */
const live = new Set();
process.on("exit", () => {
  for (const child of live) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
});

export class NodeProcess {
  /** Every stdout line so far. */
  lines = [];
  stderr = [];
  #waiters = [];
  #exit;

  /**
   * Starts a node listening for clients on `port` (0: any) and, with
   * `websocket` (a port, 0: any), for WebSocket clients too; resolves once
   * it printed its ready line. `websocketOrigins`: the listener's Origin
   * allow-list (`listen.websocket_origins`; the browser demo's).
   */
  static async start({ port = 0, websocket, websocketOrigins } = {}) {
    const node = new NodeProcess(port, websocket, websocketOrigins);
    await node.ready;
    return node;
  }

  constructor(port, websocket, websocketOrigins) {
    const dir = mkdtempSync(join(tmpdir(), "zlink-ts-"));
    const path = join(dir, "node.toml");
    writeFileSync(path, config(port, websocket, websocketOrigins));
    this.child = spawn(nodeBinary(), ["--config", path, "--console"], { stdio: ["pipe", "pipe", "pipe"] });
    this.pid = this.child.pid;
    live.add(this.child);
    this.child.once("exit", () => live.delete(this.child));
    this.#exit = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      this.lines.push(line);
      for (const w of [...this.#waiters]) w(line);
    });
    createInterface({ input: this.child.stderr }).on("line", (line) => this.stderr.push(line));
    this.ready = this.waitLine(/^zlink-node ready: .* stream=127\.0\.0\.1:(\d+) /).then((m) => {
      this.port = Number(m[1]);
      const ws = m.input.match(/ websocket=127\.0\.0\.1:(\d+)/);
      if (websocket !== undefined && !ws) throw new Error(`the ready line names no websocket address: ${m.input}`);
      this.websocketPort = ws ? Number(ws[1]) : undefined;
      return this;
    });
  }

  /** Waits for a stdout line (from now on, or already printed) matching `re`. */
  waitLine(re, ms = WAIT_MS, from = 0) {
    for (const line of this.lines.slice(from)) {
      const m = line.match(re);
      if (m) return Promise.resolve(m);
    }
    let waiter;
    const found = new Promise((resolve, reject) => {
      waiter = (line) => {
        const m = line.match(re);
        if (m) resolve(m);
      };
      this.#waiters.push(waiter);
      this.#exit.then(({ code, signal }) =>
        reject(new Error(`zlink-node exited (${code ?? signal}) before printing ${re}; stderr: ${this.stderr.join("\n")}`)),
      );
    });
    return bounded(found, ms, `zlink-node printing ${re}`).finally(() => {
      this.#waiters = this.#waiters.filter((w) => w !== waiter);
    });
  }

  /** The console's `counters` answer as { name: number }. */
  async counters() {
    const from = this.lines.length;
    this.child.stdin.write("counters\n");
    const m = await this.waitLine(/^zlink-node control: (actors=.*)$/, WAIT_MS, from);
    return Object.fromEntries(m[1].split(/\s+/).map((w) => w.split("=")).map(([k, v]) => [k, Number(v)]));
  }

  signal(name) {
    process.kill(this.pid, name);
  }

  /**
   * SIGSTOP, then waits (bounded) until every thread of the node is
   * stopped: from then on it answers nothing.
   */
  async freeze(ms = WAIT_MS) {
    this.signal("SIGSTOP");
    const stateOf = (task) => {
      try {
        const stat = readFileSync(`/proc/${this.pid}/task/${task}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      } catch {
        return "T"; // a thread that is gone answers nothing either
      }
    };
    const deadline = Date.now() + ms;
    for (;;) {
      const tasks = readdirSync(`/proc/${this.pid}/task`);
      if (tasks.every((t) => stateOf(t) === "T")) return;
      if (Date.now() > deadline) throw new Error(`zlink-node ${this.pid} did not stop within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /** Waits (bounded) for the process to exit; its code and signal. */
  exited(ms = WAIT_MS) {
    return bounded(this.#exit, ms, "zlink-node exiting");
  }

  /** SIGKILL and wait for the exit. */
  async kill() {
    try {
      this.signal("SIGKILL");
    } catch {
      // already gone
    }
    return this.exited();
  }

  /** SIGTERM (a SIGKILL if it has not exited in time). */
  async stop() {
    try {
      this.signal("SIGCONT");
      this.signal("SIGTERM");
      return await this.exited();
    } catch {
      return this.kill();
    }
  }
}
