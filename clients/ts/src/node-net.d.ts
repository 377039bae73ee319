// The few parts of Node's `net` module the TCP transport uses, declared here
// so that the package needs no @types/node (its only dev dependency is
// TypeScript).
declare module "node:net" {
  interface Socket {
    setNoDelay(noDelay?: boolean): this;
    write(data: Uint8Array): boolean;
    destroy(error?: Error): this;
    readonly writableLength: number;
    on(event: "connect", listener: () => void): this;
    on(event: "data", listener: (data: Uint8Array) => void): this;
    on(event: "error", listener: (err: Error) => void): this;
    on(event: "close", listener: (hadError: boolean) => void): this;
  }
  function createConnection(options: { host: string; port: number }): Socket;
}
