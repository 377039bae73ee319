// @zlink/client: the TypeScript client of zlink's STREAM protocol
// (docs/clients.md). This entry point runs anywhere (browsers, Node, Deno,
// Bun); the TCP transport, which needs Node's `net`, is `@zlink/client/tcp`.

export * from "./errors.js";
export * from "./wire.js";
export * from "./transport.js";
export * from "./ws.js";
export * from "./client.js";
export * from "./msgpack.js";

/** UTF-8 bytes of a string (a raw payload; typed ones are MessagePack: `pack`, `call`). */
export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** The string of UTF-8 bytes (invalid sequences become U+FFFD). */
export function fromUtf8(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}
