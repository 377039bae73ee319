// The demo page's game loop: the lobby game of every zlink-node
// (src/bin/lobby/game.rs) through the TypeScript client's WebSocket
// transport, its messages MessagePack maps through the client's `call`,
// `pack` and `unpack` (docs/wire.md "The lobby game's messages"): LOGIN (1)
// {player} binds the player; MOVE (2) {player, dx, dy} answers the new
// position {x, y}; WHERE (3) {player} answers it without moving; the
// player pushes TICK (100) {moves} on every fourth MOVE, shown as
// "tick <moves>".
//
// The page says where it is for a test to read: <body data-state> is
// "connecting", "ready" (logged in, position known), "reconnecting",
// "closed" or "failed"; data-pending counts MOVEs not yet answered; #pos,
// #push, #moves and #error hold what is shown. No framework, no bundler:
// the built client is imported as it is.
import { ZlinkClient, ZlinkError, webSocket, pack, unpack } from "../dist/src/index.js";

const LOGIN = 1;
const MOVE = 2;
const WHERE = 3;
const TICK = 100;

const params = new URLSearchParams(location.search);
const player = params.get("player") || "ann";
const host = params.get("host") || location.hostname || "127.0.0.1";
const port = params.get("port") || "7101";
const url = `ws://${host}:${port}/`;

const $ = (id) => document.getElementById(id);
const board = $("board");
const ctx = board.getContext("2d");
const CELL = 20;
const COLS = board.width / CELL;
const ROWS = board.height / CELL;

const view = { x: null, y: null, sent: 0, answered: 0, applied: 0 };

function show(state, text) {
  document.body.dataset.state = state;
  $("state").textContent = text;
  draw();
}

function showMoves() {
  $("moves").textContent = `${view.sent} sent, ${view.answered} answered`;
  document.body.dataset.pending = String(view.sent - view.answered);
}

function showError(e) {
  const z = e instanceof ZlinkError ? e : null;
  $("error").textContent = z
    ? `${z.kind}/${z.reason}${z.code ? ` code ${z.code}` : ""}${z.detail ? `: ${z.detail}` : ""}`
    : String(e);
}

function setPosition(position) {
  const { x, y } = position ?? {};
  if (!Number.isSafeInteger(x) || !Number.isSafeInteger(y)) throw new Error(`not a position: ${JSON.stringify(position)}`);
  view.x = x;
  view.y = y;
  $("pos").textContent = `${view.x},${view.y}`;
  draw();
}

/** The board: screens of COLS x ROWS squares, the one holding the player shown, the origin marked. */
function draw() {
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, board.width, board.height);
  ctx.strokeStyle = "#e3e6ec";
  ctx.lineWidth = 1;
  for (let c = 0; c <= COLS; c++) line(c * CELL + 0.5, 0, c * CELL + 0.5, board.height);
  for (let r = 0; r <= ROWS; r++) line(0, r * CELL + 0.5, board.width, r * CELL + 0.5);
  const px = view.x ?? 0;
  const py = view.y ?? 0;
  // The screen's top-left square, in game coordinates: the origin sits at
  // the middle of the first screen.
  const left = Math.floor((px + COLS / 2) / COLS) * COLS - COLS / 2;
  const top = Math.floor((py + ROWS / 2) / ROWS) * ROWS - ROWS / 2;
  const at = (x, y) => [(x - left) * CELL, (y - top) * CELL];
  const [ox, oy] = at(0, 0);
  if (ox >= 0 && ox < board.width && oy >= 0 && oy < board.height) {
    ctx.strokeStyle = "#9aa3b5";
    line(ox + 4, oy + CELL / 2, ox + CELL - 4, oy + CELL / 2);
    line(ox + CELL / 2, oy + 4, ox + CELL / 2, oy + CELL - 4);
  }
  if (view.x === null) return;
  const [sx, sy] = at(px, py);
  const live = document.body.dataset.state === "ready";
  ctx.fillStyle = live ? "#2f6fde" : "#9aa3b5";
  ctx.fillRect(sx + 2, sy + 2, CELL - 4, CELL - 4);
  ctx.fillStyle = "#1d2330";
  ctx.font = "12px system-ui, sans-serif";
  ctx.textBaseline = "bottom";
  ctx.fillText(`${player} (${px},${py})`, Math.min(sx, board.width - 90), sy > 16 ? sy - 1 : sy + CELL + 14);
}

function line(x0, y0, x1, y1) {
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
}

const client = new ZlinkClient({
  connect: webSocket(url),
  login: { key: LOGIN, payload: pack({ player }) },
  requestDeadlineMs: 5000,
});

/** A push's payload as text: the tick's count, or the value as JSON. */
function pushText(key, payload) {
  try {
    const value = unpack(payload);
    if (key === TICK && Number.isSafeInteger(value?.moves)) return `tick ${value.moves}`;
    return `key ${key}: ${JSON.stringify(value, (_, v) => (typeof v === "bigint" ? String(v) : v))}`;
  } catch (e) {
    return `key ${key}: ${e.message}`;
  }
}

client.onPush(({ key, payload }) => {
  $("push").textContent = pushText(key, payload);
});

// Every login (the first and each reconnect's) asks where the player is:
// a player that moved before (another tab, a reload) is shown where it is.
client.on("open", ({ reconnect }) => {
  client
    .call(WHERE, { player })
    .then((position) => {
      setPosition(position);
      show("ready", `${reconnect ? "logged in again" : "logged in"} as ${player} at ${url}`);
    })
    .catch((e) => {
      showError(e);
      // A connection that ended meanwhile has said so already.
      if (client.state === "open") show("failed", "logged in, but could not read the position");
    });
});

client.on("close", (info) => {
  const why = info.reason ?? info.cause;
  if (info.willReconnect) show("reconnecting", `connection lost (${why}): reconnecting`);
  else show("closed", `closed for good: ${why}${info.reason === "Replaced" ? " (another login took the player)" : ""}`);
});

const STEPS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

window.addEventListener("keydown", (event) => {
  const step = STEPS[event.key];
  if (!step) return;
  event.preventDefault();
  if (client.state !== "open") return;
  // Sent at once, not queued behind the last reply: a MOVE is answered by
  // the player in turn order, and a late reply never overwrites a newer one.
  const seq = ++view.sent;
  showMoves();
  client
    .call(MOVE, { player, dx: step[0], dy: step[1] })
    .then((position) => {
      if (seq > view.applied) {
        view.applied = seq;
        setPosition(position);
      }
    })
    .catch(showError)
    .finally(() => {
      view.answered++;
      showMoves();
    });
});

$("player").textContent = player;
document.title = `zlink lobby: ${player}`;
showMoves();
show("connecting", `connecting to ${url}`);
client.connect().catch((e) => {
  showError(e);
  show("failed", `could not log in at ${url}`);
});
