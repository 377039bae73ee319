// The zlink client: a session over one transport at a time, with a login,
// requests with correlation and deadlines, one-way sends, pushes, keepalive
// and reconnection (docs/clients.md).
//
// Reconnection rules (docs/clients.md "Reconnect"):
// - A reconnect is a new session (spec §9): the login runs again on it,
//   and nothing of the old session is carried over.
// - A request in flight when its connection ends is never sent again: it
//   ends with ZlinkError `OutcomeUnknown` (kind Unavailable). The server
//   may or may not have run it.
// - A close for `Replaced` or `AuthenticationFailed` never reconnects.
// - Delays grow exponentially from `initialDelayMs` by `multiplier`, capped
//   at `maxDelayMs`, each one shortened by a random share of up to
//   `jitter` of it.

import {
  CloseReasonName,
  TERMINAL_CLOSE_REASONS,
  ZlinkError,
} from "./errors.js";
import type { Connector, Transport } from "./transport.js";
import { FRAME_LEN_MAX_DEFAULT, Frame, WireError, encodeFrame, encodedBodyLength } from "./wire.js";
import { MsgValue, pack, unpack } from "./msgpack.js";

/** The login as one request: a packet key and a payload. */
export interface LoginRequest {
  key: number;
  payload: Uint8Array;
  /** Its deadline; default the client's `requestDeadlineMs`. */
  deadlineMs?: number;
}

/** What a login function may do on the connection being opened. */
export interface LoginSession {
  request(key: number, payload: Uint8Array, options?: RequestOptions): Promise<Uint8Array>;
  send(key: number, payload: Uint8Array): void;
  /** `request` with a MessagePack value in and out (see `ZlinkClient.call`). */
  call<R = MsgValue>(key: number, value: unknown, options?: RequestOptions): Promise<R>;
}

/**
 * A request of a MessagePack value whose reply is a MessagePack value: what
 * `call` does over `request`. An encoding failure or a reply that does not
 * decode rejects with `MalformedPayload` (remote: false).
 */
async function callOver<R>(
  request: (key: number, payload: Uint8Array, options?: RequestOptions) => Promise<Uint8Array>,
  key: number,
  value: unknown,
  options?: RequestOptions,
): Promise<R> {
  const payload = pack(value as MsgValue);
  return unpack(await request(key, payload, options)) as R;
}

/**
 * A login of several steps. It runs on every new connection before the
 * client counts as open; what it resolves with is the `login` of the
 * `open` event.
 */
export type LoginFunction = (session: LoginSession) => Promise<unknown>;

export interface ReconnectOptions {
  /** The first delay, in ms (default 100). */
  initialDelayMs: number;
  /** The cap of every delay, in ms (default 5,000). */
  maxDelayMs: number;
  /** Growth per failed attempt (default 2). */
  multiplier: number;
  /** The share of each delay that is random, 0..1 (default 0.5; 1 is "full jitter"). */
  jitter: number;
  /** Attempts after one drop before the client gives up (default: no limit). */
  maxAttempts: number;
}

export interface KeepaliveOptions {
  /** How often the client pings the server, in ms. */
  intervalMs: number;
  /** How long a ping may wait for its pong before the connection counts as lost, in ms. */
  timeoutMs: number;
}

/** Timers, injectable so tests can drive time. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ClientOptions {
  /** Opens each connection: `tcp({host, port})` or `webSocket(url)`. */
  connect: Connector;
  /** Run on every new connection, the reconnects' too. */
  login?: LoginRequest | LoginFunction;
  /** Reconnect policy, or `false` for none (default: on, with the defaults above). */
  reconnect?: Partial<ReconnectOptions> | false;
  /** A request's deadline when the call gives none, in ms (default 10,000). */
  requestDeadlineMs?: number;
  /** Client pings, or `false` for none (default every 10 s, lost after 10 s without a pong). */
  keepalive?: KeepaliveOptions | false;
  /** The node's `limits.frame_len_max` (default 65,536): both ways. */
  frameLenMax?: number;
  /** Requests in flight at once before `QueueFull` (default 4,096). */
  maxInFlight?: number;
  /** Bytes the transport may hold unsent before `QueueFull` (default 4 MiB). */
  outboundMax?: number;
  /**
   * Called with an exception thrown by an event listener (the listener's
   * own bug). The client's state is never affected by it. Default: the
   * exception is rethrown from a microtask, so it surfaces as an uncaught
   * exception as it would from an EventEmitter.
   */
  onListenerError?: (error: unknown, event: keyof ClientEvents) => void;
  timers?: Timers;
  /** Uniform in [0, 1); the jitter's source (default Math.random). */
  random?: () => number;
}

export interface RequestOptions {
  /** This request's deadline in ms. */
  deadlineMs?: number;
  /** Ends the request with `CallerCancelled` (a reply that comes later is dropped). */
  signal?: AbortSignal;
}

/** Why a connection ended. */
export type CloseCause =
  /** The server sent a Close frame (`reason` says why). */
  | "server-close"
  /** The transport ended without a Close frame. */
  | "connection-lost"
  /** The server's bytes did not decode, or it sent a client-only frame. */
  | "protocol-error"
  /** A ping got no pong in time. */
  | "keepalive-timeout"
  /** `close()` was called. */
  | "client-closed";

export interface CloseInfo {
  cause: CloseCause;
  /** The server's CloseReason, with cause "server-close". */
  reason?: CloseReasonName;
  /** The WireError, the platform error, or whatever the transport gave. */
  error?: unknown;
  /** Whether the client will try to reconnect. */
  willReconnect: boolean;
}

export interface OpenInfo {
  /** False for the first connection, true for each reconnect. */
  reconnect: boolean;
  /** What the login gave: the reply payload of a LoginRequest. */
  login: unknown;
}

export interface Push {
  key: number;
  payload: Uint8Array;
}

export interface ClientEvents {
  /** A push from a bound Actor. */
  push: [Push];
  /** A connection is open and logged in. */
  open: [OpenInfo];
  /** A connection ended (whatever happens next: see `willReconnect`). */
  close: [CloseInfo];
  /** A reconnect attempt is scheduled. */
  reconnecting: [{ attempt: number; delayMs: number }];
  /** A reconnect attempt failed (the transport, or its login). */
  reconnectFailed: [{ attempt: number; error: ZlinkError }];
  /** A reply or error frame whose request had already ended (its deadline passed, say) was dropped. */
  dropped: [{ correlation: number; frame: "reply" | "error" }];
}

export type ClientState = "idle" | "connecting" | "open" | "reconnecting" | "closed";

const RECONNECT_DEFAULTS: ReconnectOptions = {
  initialDelayMs: 100,
  maxDelayMs: 5000,
  multiplier: 2,
  jitter: 0.5,
  maxAttempts: Infinity,
};

/**
 * The delay before reconnect attempt `attempt` (0-based): exponential,
 * capped, then shortened by up to `jitter` of itself.
 */
export function backoffDelay(policy: ReconnectOptions, attempt: number, random: () => number): number {
  const exp = policy.initialDelayMs * Math.pow(policy.multiplier, Math.min(attempt, 64));
  const capped = Math.min(policy.maxDelayMs, exp);
  const jitter = Math.min(1, Math.max(0, policy.jitter));
  return Math.max(0, Math.round(capped * (1 - jitter * random())));
}

interface Pending {
  resolve(payload: Uint8Array): void;
  reject(error: ZlinkError): void;
  timer: unknown;
  unlisten?: () => void;
}

const globalTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** One transport's session: its requests in flight and its keepalive. */
class Connection {
  readonly pending = new Map<number, Pending>();
  transport!: Transport;
  ended: CloseInfo | null = null;
  private pingTimer: unknown = null;
  private pongTimer: unknown = null;
  private pingOutstanding: bigint | null = null;

  constructor(private readonly client: ZlinkClient) {}

  startKeepalive(options: KeepaliveOptions): void {
    const timers = this.client.timers;
    const tick = () => {
      this.pingTimer = null;
      if (this.ended) return;
      if (this.pingOutstanding === null) {
        const nonce = this.client.nextNonce();
        this.pingOutstanding = nonce;
        this.transport.send(encodeFrame({ type: "ping", nonce }));
        this.pongTimer = timers.setTimeout(() => {
          this.pongTimer = null;
          this.end({ cause: "keepalive-timeout" });
        }, options.timeoutMs);
      }
      this.pingTimer = timers.setTimeout(tick, options.intervalMs);
    };
    this.pingTimer = timers.setTimeout(tick, options.intervalMs);
  }

  onFrame(frame: Frame): void {
    if (this.ended) return;
    switch (frame.type) {
      case "reply":
      case "error": {
        const p = this.pending.get(frame.correlation);
        if (p === undefined) {
          this.client.stats.dropped++;
          this.client.emit("dropped", { correlation: frame.correlation, frame: frame.type });
          return;
        }
        this.settle(frame.correlation, p);
        if (frame.type === "reply") p.resolve(frame.payload);
        else p.reject(new ZlinkError(frame.reason, { remote: true, code: frame.code, detail: frame.detail }));
        return;
      }
      case "push":
        this.client.emit("push", { key: frame.key, payload: frame.payload });
        return;
      case "ping":
        this.transport.send(encodeFrame({ type: "pong", nonce: frame.nonce }));
        return;
      case "pong":
        if (this.pingOutstanding !== null && frame.nonce === this.pingOutstanding) {
          this.pingOutstanding = null;
          if (this.pongTimer !== null) this.client.timers.clearTimeout(this.pongTimer);
          this.pongTimer = null;
        }
        return;
      case "close":
        this.end({ cause: "server-close", reason: frame.reason });
        return;
      case "request":
      case "message":
        // Client → server kinds: a server never sends them (the server
        // closes a client that sends it a server kind, too).
        this.end({ cause: "protocol-error", error: new Error(`the server sent a ${frame.type} frame`) });
        return;
    }
  }

  private settle(correlation: number, p: Pending): void {
    this.pending.delete(correlation);
    this.client.timers.clearTimeout(p.timer);
    p.unlisten?.();
  }

  /** Sends a request on this connection (the caller checked the state). */
  request(key: number, payload: Uint8Array, options: RequestOptions = {}): Promise<Uint8Array> {
    const client = this.client;
    if (this.ended) return Promise.reject(new ZlinkError("NotConnected"));
    if (options.signal?.aborted) return Promise.reject(new ZlinkError("CallerCancelled"));
    if (this.pending.size >= client.maxInFlight) {
      return Promise.reject(new ZlinkError("QueueFull", { detail: `${client.maxInFlight} requests in flight` }));
    }
    const correlation = client.nextCorrelation(this.pending);
    const frame: Frame = { type: "request", key, correlation, payload };
    const bytes = client.encodeChecked(frame, this.transport);
    if (bytes instanceof ZlinkError) return Promise.reject(bytes);
    const deadlineMs = options.deadlineMs ?? client.requestDeadlineMs;
    return new Promise<Uint8Array>((resolve, reject) => {
      const p: Pending = { resolve, reject, timer: null };
      p.timer = client.timers.setTimeout(() => {
        if (this.pending.get(correlation) !== p) return;
        this.settle(correlation, p);
        reject(new ZlinkError("Deadline", { outcomeUnknown: true, detail: `${deadlineMs} ms` }));
      }, deadlineMs);
      const signal = options.signal;
      if (signal) {
        const onAbort = () => {
          if (this.pending.get(correlation) !== p) return;
          this.settle(correlation, p);
          reject(new ZlinkError("CallerCancelled", { outcomeUnknown: true }));
        };
        signal.addEventListener("abort", onAbort, { once: true });
        p.unlisten = () => signal.removeEventListener("abort", onAbort);
      }
      this.pending.set(correlation, p);
      this.transport.send(bytes);
    });
  }

  send(key: number, payload: Uint8Array): void {
    if (this.ended) throw new ZlinkError("NotConnected");
    const bytes = this.client.encodeChecked({ type: "message", key, payload }, this.transport);
    if (bytes instanceof ZlinkError) throw bytes;
    this.transport.send(bytes);
  }

  /**
   * Ends this connection once: closes the transport, ends every request in
   * flight with OutcomeUnknown (never resent), and tells the client.
   */
  end(info: Omit<CloseInfo, "willReconnect">): void {
    if (this.ended) return;
    this.ended = { ...info, willReconnect: false };
    const timers = this.client.timers;
    if (this.pingTimer !== null) timers.clearTimeout(this.pingTimer);
    if (this.pongTimer !== null) timers.clearTimeout(this.pongTimer);
    this.pingTimer = this.pongTimer = null;
    this.transport.close();
    const inFlight = [...this.pending.entries()];
    for (const [correlation, p] of inFlight) {
      this.settle(correlation, p);
      p.reject(new ZlinkError("OutcomeUnknown", { detail: info.cause, cause: info.error }));
    }
    this.client.connectionEnded(this);
  }
}

/**
 * A client of one zlink node (or of several, through a connector that
 * rotates). See docs/clients.md.
 */
export class ZlinkClient {
  readonly timers: Timers;
  readonly requestDeadlineMs: number;
  readonly maxInFlight: number;
  readonly frameLenMax: number;
  readonly stats = { connections: 0, reconnects: 0, dropped: 0 };

  private readonly options: ClientOptions;
  private readonly reconnectPolicy: ReconnectOptions | null;
  private readonly outboundMax: number;
  private readonly random: () => number;
  private readonly listeners: { [K in keyof ClientEvents]?: Set<(...args: ClientEvents[K]) => void> } = {};
  private conn: Connection | null = null;
  private _state: ClientState = "idle";
  private correlation = 0;
  private nonce = 0n;
  private reconnectTimer: unknown = null;
  private attempt = 0;
  private readyWaiters: { resolve(): void; reject(e: ZlinkError): void }[] = [];
  private finalError: ZlinkError | null = null;

  constructor(options: ClientOptions) {
    this.options = options;
    this.timers = options.timers ?? globalTimers;
    this.requestDeadlineMs = options.requestDeadlineMs ?? 10_000;
    this.maxInFlight = options.maxInFlight ?? 4096;
    this.frameLenMax = options.frameLenMax ?? FRAME_LEN_MAX_DEFAULT;
    this.outboundMax = options.outboundMax ?? 4 * 1024 * 1024;
    this.random = options.random ?? Math.random;
    this.reconnectPolicy =
      options.reconnect === false ? null : { ...RECONNECT_DEFAULTS, ...(options.reconnect ?? {}) };
  }

  /** Where the client is: idle, connecting (first time), open, reconnecting, closed (for good). */
  get state(): ClientState {
    return this._state;
  }

  /**
   * Opens the first connection and runs the login; resolves with what the
   * login gave (a LoginRequest's reply payload). A failure here is final:
   * the client closes and the promise rejects with `TransportFailed` or
   * `LoginFailed` (reconnects are for sessions that were open).
   */
  async connect(): Promise<unknown> {
    if (this._state !== "idle") throw new ZlinkError("NotConnected", { detail: `connect() in state ${this._state}` });
    this._state = "connecting";
    try {
      const login = await this.openSession();
      this.opened({ reconnect: false, login });
      return login;
    } catch (e) {
      const error = asZlinkError(e);
      this.closeForGood(error);
      throw error;
    }
  }

  /** Resolves when the client is open (at once if it is); rejects once it is closed for good. */
  ready(): Promise<void> {
    if (this._state === "open") return Promise.resolve();
    if (this._state === "closed") return Promise.reject(this.finalError ?? new ZlinkError("ClientClosed"));
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /**
   * Sends a request and resolves with its reply payload, or rejects with a
   * ZlinkError: the server's typed error (`remote`), `Deadline`,
   * `OutcomeUnknown` if the connection ended first, `NotConnected` if the
   * client was not open (nothing sent), `MessageTooLarge`/`QueueFull` if it
   * could not be sent.
   */
  request(key: number, payload: Uint8Array, options?: RequestOptions): Promise<Uint8Array> {
    if (this._state !== "open" || this.conn === null) return Promise.reject(this.notOpen());
    return this.conn.request(key, payload, options);
  }

  /**
   * A typed request: `value` encoded as MessagePack (docs/wire.md "Typed
   * payloads": an object is a map of its fields by name, as rmp-serde
   * writes a Rust struct), the reply decoded the same way. `R` is the
   * reply's shape as the caller knows it (nothing checks it at run time).
   * Rejects like `request`, and with `MalformedPayload` (remote: false)
   * when `value` has no MessagePack form or the reply does not decode; a
   * server that could not decode the request answers `MalformedPayload`
   * itself (remote: true), its detail naming the Rust type.
   */
  call<R = MsgValue>(key: number, value: unknown, options?: RequestOptions): Promise<R> {
    return callOver((k, p, o) => this.request(k, p, o), key, value, options);
  }

  /**
   * Sends a one-way message. Throws a ZlinkError when it cannot be sent
   * (`NotConnected`, `MessageTooLarge`, `QueueFull`); once sent, nothing
   * tells whether it arrived.
   */
  send(key: number, payload: Uint8Array): void {
    if (this._state !== "open" || this.conn === null) throw this.notOpen();
    this.conn.send(key, payload);
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<K extends keyof ClientEvents>(event: K, listener: (...args: ClientEvents[K]) => void): () => void {
    let set = this.listeners[event] as Set<(...args: ClientEvents[K]) => void> | undefined;
    if (set === undefined) {
      set = new Set();
      (this.listeners as Record<string, unknown>)[event] = set;
    }
    set.add(listener);
    return () => set!.delete(listener);
  }

  /** `on("push", handler)`. */
  onPush(handler: (push: Push) => void): () => void {
    return this.on("push", handler);
  }

  /**
   * Closes the client for good: no reconnect; requests in flight end with
   * `OutcomeUnknown`.
   */
  close(): void {
    if (this._state === "closed") return;
    const error = new ZlinkError("ClientClosed");
    this.closeForGood(error);
  }

  // ---- internals (used by Connection) -------------------------------------

  /** @internal */
  emit<K extends keyof ClientEvents>(event: K, ...args: ClientEvents[K]): void {
    const set = this.listeners[event] as Set<(...args: ClientEvents[K]) => void> | undefined;
    if (set === undefined) return;
    for (const listener of [...set]) {
      try {
        listener(...args);
      } catch (e) {
        // The game's own exception: surfaced, but never inside the
        // client's frame handling.
        const report = this.options.onListenerError;
        if (report) {
          try {
            report(e, event);
          } catch {
            // The reporter's own failure has nowhere else to go.
          }
        } else {
          queueMicrotask(() => {
            throw e;
          });
        }
      }
    }
  }

  /** @internal */
  nextCorrelation(inUse: Map<number, unknown>): number {
    do {
      this.correlation = (this.correlation + 1) >>> 0;
    } while (inUse.has(this.correlation));
    return this.correlation;
  }

  /** @internal */
  nextNonce(): bigint {
    this.nonce = (this.nonce + 1n) & ((1n << 64n) - 1n);
    return this.nonce;
  }

  /** @internal Encodes a client frame, refusing what the server or the transport would not take. */
  encodeChecked(frame: Frame, transport: Transport): Uint8Array | ZlinkError {
    const body = encodedBodyLength(frame);
    if (body > this.frameLenMax) {
      return new ZlinkError("MessageTooLarge", { detail: `a ${body}-byte frame over the ${this.frameLenMax}-byte limit` });
    }
    if (transport.bufferedAmount + 4 + body > this.outboundMax) {
      return new ZlinkError("QueueFull", { detail: `over ${this.outboundMax} bytes unsent` });
    }
    return encodeFrame(frame);
  }

  /** @internal A connection ended. */
  connectionEnded(conn: Connection): void {
    if (conn !== this.conn) return;
    const info = conn.ended!;
    if (this._state !== "open") {
      // The login in progress sees the end through its own request and
      // decides (openSession's caller).
      return;
    }
    this.conn = null;
    const terminal = info.reason !== undefined && TERMINAL_CLOSE_REASONS.has(info.reason);
    const willReconnect = !terminal && this.reconnectPolicy !== null && info.cause !== "client-closed";
    info.willReconnect = willReconnect;
    if (willReconnect) {
      this._state = "reconnecting";
      this.emit("close", info);
      this.attempt = 0;
      this.scheduleReconnect();
    } else {
      this.emit("close", info);
      this.closeForGood(
        new ZlinkError("ClientClosed", { detail: info.reason ?? info.cause, cause: info.error }),
        false,
      );
    }
  }

  private notOpen(): ZlinkError {
    return this._state === "closed"
      ? this.finalError ?? new ZlinkError("ClientClosed")
      : new ZlinkError("NotConnected", { detail: `the client is ${this._state}` });
  }

  /** Opens a transport and runs the login on it; the new connection on success. */
  private async openSession(): Promise<unknown> {
    const conn = new Connection(this);
    this.conn = conn;
    let transport: Transport;
    try {
      transport = this.options.connect({
        frameLenMax: this.frameLenMax,
        events: {
          frame: (frame) => conn.onFrame(frame),
          malformed: (error: WireError) => conn.end({ cause: "protocol-error", error }),
          closed: (cause) => conn.end({ cause: "connection-lost", error: cause }),
        },
      });
    } catch (e) {
      this.conn = null;
      throw new ZlinkError("TransportFailed", { cause: e, detail: String(e) });
    }
    conn.transport = transport;
    try {
      await transport.opened;
    } catch (e) {
      this.conn = null;
      throw new ZlinkError("TransportFailed", { cause: e, detail: String((e as Error)?.message ?? e) });
    }
    this.stats.connections++;
    if (this.options.keepalive !== false) {
      conn.startKeepalive(this.options.keepalive ?? { intervalMs: 10_000, timeoutMs: 10_000 });
    }
    const login = this.options.login;
    try {
      if (login === undefined) return undefined;
      if (typeof login === "function") {
        return await login({
          request: (key, payload, options) => conn.request(key, payload, options),
          send: (key, payload) => conn.send(key, payload),
          call: (key, value, options) => callOver(conn.request.bind(conn), key, value, options),
        });
      }
      return await conn.request(login.key, login.payload, { deadlineMs: login.deadlineMs });
    } catch (e) {
      const cause = asZlinkError(e);
      const ended = conn.ended;
      conn.end({ cause: "client-closed" });
      this.conn = null;
      throw new ZlinkError("LoginFailed", {
        cause: ended?.reason !== undefined ? new LoginClosed(ended.reason, cause) : cause,
        detail: ended?.reason !== undefined ? `the server closed with ${ended.reason}` : cause.message,
      });
    }
  }

  private opened(info: OpenInfo): void {
    this._state = "open";
    this.emit("open", info);
    const waiters = this.readyWaiters;
    this.readyWaiters = [];
    for (const w of waiters) w.resolve();
  }

  private scheduleReconnect(): void {
    const policy = this.reconnectPolicy!;
    if (this.attempt >= policy.maxAttempts) {
      this.closeForGood(new ZlinkError("ClientClosed", { detail: `gave up after ${this.attempt} reconnect attempts` }));
      return;
    }
    const attempt = this.attempt;
    const delayMs = backoffDelay(policy, attempt, this.random);
    this.emit("reconnecting", { attempt: attempt + 1, delayMs });
    this.reconnectTimer = this.timers.setTimeout(() => {
      this.reconnectTimer = null;
      if (this._state !== "reconnecting") return;
      this.openSession().then(
        (login) => {
          if (this._state !== "reconnecting") {
            // close() ran meanwhile.
            this.conn?.end({ cause: "client-closed" });
            return;
          }
          this.stats.reconnects++;
          this.attempt = 0;
          this.opened({ reconnect: true, login });
        },
        (e) => {
          if (this._state !== "reconnecting") return;
          const error = asZlinkError(e);
          this.emit("reconnectFailed", { attempt: attempt + 1, error });
          if (!retryable(error)) {
            this.closeForGood(error);
            return;
          }
          this.attempt = attempt + 1;
          this.scheduleReconnect();
        },
      );
    }, delayMs);
  }

  private closeForGood(error: ZlinkError, emitClose = true): void {
    if (this._state === "closed") return;
    const wasOpen = this._state === "open";
    this._state = "closed";
    this.finalError = error;
    if (this.reconnectTimer !== null) {
      this.timers.clearTimeout(this.reconnectTimer);
      this.reconnectTimer = null;
    }
    const conn = this.conn;
    this.conn = null;
    if (conn !== null && !conn.ended) {
      conn.end({ cause: "client-closed" });
      if (wasOpen && emitClose) this.emit("close", { ...conn.ended!, willReconnect: false });
    }
    const waiters = this.readyWaiters;
    this.readyWaiters = [];
    for (const w of waiters) w.reject(error);
  }
}

/** The cause of a LoginFailed when the server closed the connection during the login. */
export class LoginClosed extends Error {
  constructor(
    readonly reason: CloseReasonName,
    readonly requestError: ZlinkError,
  ) {
    super(`the server closed the connection during the login: ${reason}`);
    this.name = "LoginClosed";
  }
}

/** Whether a failed reconnect attempt may be tried again. */
function retryable(error: ZlinkError): boolean {
  if (error.reason === "TransportFailed") return true;
  if (error.reason !== "LoginFailed") return false;
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof LoginClosed) return !TERMINAL_CLOSE_REASONS.has(cause.reason);
  if (cause instanceof ZlinkError) {
    // The server may answer the same login differently later (its store
    // is back, the player moved on): Unavailable and DeadlineExceeded are
    // retried; a login refused for good (NotFound, InvalidOperation…) is not.
    return cause.kind === "Unavailable" || cause.kind === "DeadlineExceeded";
  }
  return false;
}

function asZlinkError(e: unknown): ZlinkError {
  if (e instanceof ZlinkError) return e;
  return new ZlinkError("LoginFailed", { cause: e, detail: String((e as Error)?.message ?? e) });
}
