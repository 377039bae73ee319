// A virtual clock and an in-memory transport, so the client's unit tests
// drive time and the server's side frame by frame.
import { decodeWholeFrame, encodeFrame } from "../../dist/src/index.js";

export class FakeTimers {
  now = 0;
  #next = 1;
  #timers = new Map();
  setTimeout = (fn, ms) => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.now + Math.max(0, ms), fn });
    return id;
  };
  clearTimeout = (id) => {
    this.#timers.delete(id);
  };
  /** Timers still to fire. */
  get pending() {
    return this.#timers.size;
  }
  /** The delays from now of the timers still to fire. */
  delays() {
    return [...this.#timers.values()].map((t) => t.at - this.now).sort((a, b) => a - b);
  }
  /** Moves time forward by `ms`, firing what falls due in order (and flushing promise jobs between). */
  async advance(ms) {
    const end = this.now + ms;
    for (;;) {
      let due = null;
      for (const [id, t] of this.#timers) {
        if (t.at <= end && (due === null || t.at < due[1].at)) due = [id, t];
      }
      if (due === null) break;
      this.#timers.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
      await flush();
    }
    this.now = end;
    await flush();
  }
}

/** Runs every queued promise job (and I/O callbacks due): not a wait for time. */
export function flush() {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A connector whose connections the test plays the server of. */
export class FakeServer {
  connections = [];
  /** Set to make the next opens fail. */
  refuse = false;

  connector = ({ events, frameLenMax }) => {
    const conn = new FakeConnection(events, frameLenMax);
    this.connections.push(conn);
    if (this.refuse) conn.fail(new Error("connection refused"));
    return conn.transport;
  };

  get last() {
    return this.connections[this.connections.length - 1];
  }
}

export class FakeConnection {
  /** Frames the client sent, decoded. */
  sent = [];
  closedByClient = false;
  #state = "opening";
  #settle;

  constructor(events, frameLenMax) {
    this.events = events;
    this.frameLenMax = frameLenMax;
    const opened = new Promise((resolve, reject) => {
      this.#settle = { resolve, reject };
    });
    const self = this;
    this.transport = {
      opened,
      send(bytes) {
        if (self.#state !== "open") return;
        const r = decodeWholeFrame(bytes, 1 << 30);
        if (!r.ok) throw new Error(`the client sent a malformed frame: ${r.error}`);
        self.sent.push(r.frame);
      },
      bufferedAmount: 0,
      close() {
        self.closedByClient = true;
        if (self.#state === "opening") self.#settle.reject(new Error("closed before it opened"));
        self.#state = "done";
      },
    };
  }
  open() {
    this.#state = "open";
    this.#settle.resolve();
  }
  fail(error) {
    this.#state = "done";
    this.#settle.reject(error);
  }
  get isOpen() {
    return this.#state === "open";
  }
  /** The server sends a frame (encoded and decoded, as on a wire). */
  push(frame) {
    const r = decodeWholeFrame(encodeFrame(frame), this.frameLenMax);
    if (this.#state === "open") this.events.frame(r.frame);
  }
  /** The server's bytes were malformed. */
  malformed(error) {
    if (this.#state !== "open") return;
    this.#state = "done";
    this.events.malformed(error);
    this.events.closed(error);
  }
  /** The connection drops without a Close frame. */
  drop() {
    if (this.#state !== "open") return;
    this.#state = "done";
    this.events.closed(new Error("reset"));
  }
  /** The requests the client sent, in order. */
  requests() {
    return this.sent.filter((f) => f.type === "request");
  }
  /** Answers the client's request `correlation` with `payload`. */
  reply(correlation, payload = new Uint8Array()) {
    this.push({ type: "reply", correlation, payload });
  }
}
