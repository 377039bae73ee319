// The WebSocket transport, for browsers and Node (its global WebSocket, or
// any constructor with the same shape): one WebSocket binary message
// carries exactly one encoded client frame of docs/wire.md, its 4-byte
// length prefix included. A message holding less or more than the frame its
// prefix announces, or a text message, is a typed WireError and closes the
// connection.

import type { Connector, Transport } from "./transport.js";
import { WireError, decodeWholeFrame, DecodeResult } from "./wire.js";

/** The part of the WebSocket API this transport uses. */
export interface WebSocketLike {
  binaryType: string;
  readonly bufferedAmount: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
}

export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface WebSocketOptions {
  /** The constructor; default `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor;
  /** Subprotocols to offer. */
  protocols?: string | string[];
  /** How long the opening handshake may take (default 5,000 ms). */
  connectTimeoutMs?: number;
}

/**
 * Decodes one WebSocket message: a binary message holding exactly one whole
 * frame. Total: any value gives a frame or a WireError.
 */
export function decodeWsMessage(data: unknown, frameLenMax: number): DecodeResult {
  let bytes: Uint8Array;
  if (data instanceof ArrayBuffer) {
    bytes = new Uint8Array(data);
  } else if (ArrayBuffer.isView(data)) {
    bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  } else {
    return { ok: false, error: new WireError("NotBinary", { type: typeof data }) };
  }
  return decodeWholeFrame(bytes, frameLenMax);
}

/** A connector to a node's WebSocket listener (`listen.websocket`). */
export function webSocket(url: string, options: WebSocketOptions = {}): Connector {
  return ({ events, frameLenMax }) => {
    const Ctor =
      options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (Ctor === undefined) {
      const failed = Promise.reject(
        new Error("no WebSocket in this runtime: pass options.WebSocket (Node >= 22 has a global one)"),
      );
      failed.catch(() => {});
      return { opened: failed, send() {}, bufferedAmount: 0, close() {} };
    }
    let state: "opening" | "open" | "done" = "opening";
    let settle: { resolve(): void; reject(e: unknown): void };
    const opened = new Promise<void>((resolve, reject) => {
      settle = { resolve, reject };
    });
    let ws: WebSocketLike;
    try {
      ws = new Ctor(url, options.protocols);
    } catch (e) {
      state = "done";
      settle!.reject(e);
      return { opened, send() {}, bufferedAmount: 0, close() {} };
    }
    ws.binaryType = "arraybuffer";
    const timer = setTimeout(() => {
      if (state !== "opening") return;
      state = "done";
      ws.close();
      settle.reject(new Error(`WebSocket handshake with ${url} timed out`));
    }, options.connectTimeoutMs ?? 5000);
    let cause: unknown;
    const finish = (why: unknown) => {
      if (state !== "open") return;
      state = "done";
      detach();
      try {
        ws.close();
      } catch {
        // already closing
      }
      events.closed(why);
    };
    const detach = () => {
      ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
    };
    ws.onopen = () => {
      clearTimeout(timer);
      if (state !== "opening") return;
      state = "open";
      settle.resolve();
    };
    ws.onmessage = (ev) => {
      if (state !== "open") return;
      const r = decodeWsMessage(ev.data, frameLenMax);
      if (r.ok) {
        events.frame(r.frame);
      } else {
        events.malformed(r.error);
        finish(r.error);
      }
    };
    ws.onerror = (ev) => {
      cause = ev;
    };
    ws.onclose = (ev) => {
      clearTimeout(timer);
      if (state === "opening") {
        state = "done";
        detach();
        settle.reject(cause ?? new Error(`WebSocket closed before it opened (code ${ev.code})`));
        return;
      }
      finish({ code: ev.code, reason: ev.reason, error: cause });
    };
    return {
      opened,
      send(frame) {
        if (state === "open") ws.send(frame);
      },
      get bufferedAmount() {
        return ws.bufferedAmount;
      },
      close() {
        if (state === "opening") {
          clearTimeout(timer);
          settle.reject(new Error("closed before it opened"));
        }
        state = "done";
        detach();
        try {
          ws.close();
        } catch {
          // already closing
        }
      },
    };
  };
}
