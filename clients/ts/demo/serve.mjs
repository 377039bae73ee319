// The demo page's HTTP server, and a way to open the page by hand.
//
// `serveDemo()` serves clients/ts/demo/ and the built client
// (clients/ts/dist/) on a loopback port, nothing else: the page is an ES
// module importing ../dist/src/index.js, which a browser loads only over
// HTTP (a file:// page may not load modules, nor be an Origin a node's
// allow-list can name).
//
// By hand (after `cargo build --bin zlink-node` and `npx tsc -p .` in
// clients/ts): `node demo/serve.mjs [player]` starts a zlink-node with a
// WebSocket listener whose Origin allow-list is this server's origin, and
// prints the page's address; Ctrl-C stops both. Node 20 needs no
// --experimental-websocket for this: only the browser speaks WebSocket.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/ts/ */
const root = fileURLToPath(new URL("../", import.meta.url));

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".map": "application/json; charset=utf-8",
};

/**
 * Starts the static server on 127.0.0.1:`port` (0: any); resolves with
 * { server, origin, close() }. Only GET and HEAD of the .html, .js and
 * .map files under demo/ and dist/ are served; "/" and "/demo" lead to
 * the page.
 */
export async function serveDemo({ port = 0 } = {}) {
  const server = createServer(async (req, res) => {
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (path === "/" || path === "/demo") {
      res.writeHead(302, { location: "/demo/" + (req.url.includes("?") ? req.url.slice(req.url.indexOf("?")) : "") });
      return res.end();
    }
    const file = normalize(join(root, path.endsWith("/") ? path + "index.html" : path));
    const allowed = [join(root, "demo") + sep, join(root, "dist") + sep].some((dir) => file.startsWith(dir));
    const type = TYPES[file.slice(file.lastIndexOf("."))];
    if ((req.method !== "GET" && req.method !== "HEAD") || !allowed || !type) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": type, "cache-control": "no-store" });
      res.end(req.method === "HEAD" ? undefined : body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  const origin = `http://127.0.0.1:${server.address().port}`;
  const close = () =>
    new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
  return { server, origin, close };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === normalize(process.argv[1])) {
  const { NodeProcess } = await import("../test/support/node.mjs");
  const player = process.argv[2] || "ann";
  const site = await serveDemo({ port: Number(process.env.DEMO_HTTP_PORT ?? 0) });
  const node = await NodeProcess.start({ websocket: 0, websocketOrigins: [site.origin] });
  console.log(`zlink-node ${node.pid}: stream 127.0.0.1:${node.port}, websocket 127.0.0.1:${node.websocketPort}`);
  console.log(`open ${site.origin}/demo/?port=${node.websocketPort}&player=${encodeURIComponent(player)}`);
  const stop = async () => {
    await node.stop();
    await site.close();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
