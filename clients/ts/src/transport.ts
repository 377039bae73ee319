// The transport a client runs over: something that carries whole encoded
// client frames (docs/wire.md) both ways. Two are provided: TCP in Node
// (./tcp.ts, a byte stream split into frames) and WebSocket (./ws.ts, one
// binary message per frame). A test or a game may bring its own.

import type { Frame, WireError } from "./wire.js";

/** What a transport reports to the client that opened it. */
export interface TransportEvents {
  /** One decoded frame from the server. */
  frame(frame: Frame): void;
  /**
   * The server's bytes did not decode (a typed WireError). The transport
   * has closed itself; `closed` follows.
   */
  malformed(error: WireError): void;
  /** The connection ended; called once, last, and only after `opened` resolved. */
  closed(cause?: unknown): void;
}

/** One open (or opening) connection. */
export interface Transport {
  /**
   * Resolves once frames can be sent; rejects if the connection could not
   * be opened (then no event is ever reported).
   */
  readonly opened: Promise<void>;
  /** Sends one whole encoded frame, its length prefix included. */
  send(frame: Uint8Array): void;
  /** Bytes accepted by `send` and not yet handed to the operating system. */
  readonly bufferedAmount: number;
  /** Closes the connection; no event is reported after this call. */
  close(): void;
}

/** What a connector is given to open a transport. */
export interface ConnectParams {
  /** Where the transport reports. */
  events: TransportEvents;
  /** The largest frame body accepted from the server (docs/wire.md "Limits"). */
  frameLenMax: number;
}

/**
 * Opens one connection. The client calls it for the first connection and
 * again for each reconnect, so a connector may rotate through several
 * nodes.
 */
export type Connector = (params: ConnectParams) => Transport;
