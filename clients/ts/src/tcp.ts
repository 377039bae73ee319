// The TCP transport, for Node: a `net.Socket` carrying the length-prefixed
// frames of docs/wire.md as one byte stream, split by a bounded
// FrameSplitter (at most one partial frame is held).

import { createConnection } from "node:net";
import type { Connector, Transport } from "./transport.js";
import { FrameSplitter } from "./wire.js";

export interface TcpOptions {
  host: string;
  port: number;
  /** How long the TCP connect may take (default 5,000 ms). */
  connectTimeoutMs?: number;
}

/** A connector to a node's STREAM listener (`listen.stream`). */
export function tcp(options: TcpOptions): Connector {
  return ({ events, frameLenMax }) => {
    const socket = createConnection({ host: options.host, port: options.port });
    socket.setNoDelay(true);
    const splitter = new FrameSplitter(frameLenMax);
    let state: "opening" | "open" | "done" = "opening";
    let cause: unknown;
    let settle: { resolve(): void; reject(e: unknown): void };
    const opened = new Promise<void>((resolve, reject) => {
      settle = { resolve, reject };
    });
    const timer = setTimeout(() => {
      if (state !== "opening") return;
      state = "done";
      socket.destroy();
      settle.reject(new Error(`TCP connect to ${options.host}:${options.port} timed out`));
    }, options.connectTimeoutMs ?? 5000);
    socket.on("connect", () => {
      clearTimeout(timer);
      if (state !== "opening") return;
      state = "open";
      settle.resolve();
    });
    socket.on("data", (chunk) => {
      if (state !== "open") return;
      const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      const error = splitter.feed(bytes, (frame) => {
        if (state === "open") events.frame(frame);
      });
      if (error && state === "open") {
        events.malformed(error);
        finish(error);
      }
    });
    socket.on("error", (err) => {
      cause = err;
    });
    socket.on("close", () => {
      clearTimeout(timer);
      if (state === "opening") {
        state = "done";
        settle.reject(cause ?? new Error("the connection closed before it opened"));
        return;
      }
      finish(cause);
    });
    const finish = (why: unknown) => {
      if (state !== "open") return;
      state = "done";
      socket.destroy();
      events.closed(why);
    };
    const transport: Transport = {
      opened,
      send(frame) {
        if (state === "open") socket.write(frame);
      },
      get bufferedAmount() {
        return socket.writableLength;
      },
      close() {
        if (state === "opening") {
          state = "done";
          clearTimeout(timer);
          settle.reject(new Error("closed before it opened"));
        }
        state = "done";
        socket.destroy();
      },
    };
    return transport;
  };
}
