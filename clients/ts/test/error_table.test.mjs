// The TypeScript tables must be src/error.rs's and frame.rs's: this test
// reads the Rust sources and fails on any difference (a code, a kind, a
// name, a text, a missing or extra entry).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Reasons, ErrorKind, CloseReason } from "../dist/src/index.js";

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const read = (path) => readFileSync(repo + path, "utf8");

test("Reasons is the reasons! table of src/error.rs", () => {
  const src = read("src/error.rs");
  const start = src.indexOf("reasons! {");
  assert.ok(start >= 0, "src/error.rs has a `reasons! {` table");
  const end = src.indexOf("\n}\n", start);
  const table = src.slice(start, end);
  const rows = [...table.matchAll(/^\s*(\w+)\s*=\s*(\d+)\s*=>\s*(\w+),\s*"((?:[^"\\]|\\.)*)";/gm)].map((m) => [
    m[1],
    { code: Number(m[2]), kind: m[3], text: m[4].replace(/\\"/g, '"') },
  ]);
  assert.ok(rows.length >= 30, `parsed ${rows.length} rows`);
  // Every entry line of the table is a row the pattern read.
  const entryLines = table.split("\n").filter((l) => /=>/.test(l) && !l.trim().startsWith("///"));
  assert.equal(rows.length, entryLines.length, "every `=>` line of the table parses");
  assert.deepEqual(Object.entries(Reasons).map(([n, r]) => [n, { ...r }]), rows);
});

test("ErrorKind is src/error.rs's enum", () => {
  const src = read("src/error.rs");
  const body = src.slice(src.indexOf("pub enum ErrorKind {"), src.indexOf("impl ErrorKind"));
  const rows = [...body.matchAll(/^\s*(\w+)\s*=\s*(\d+),/gm)].map((m) => [m[1], Number(m[2])]);
  assert.deepEqual(Object.entries(ErrorKind), rows);
});

test("CloseReason is src/wire/client/frame.rs's enum", () => {
  const src = read("src/wire/client/frame.rs");
  const body = src.slice(src.indexOf("pub enum CloseReason {"), src.indexOf("impl CloseReason"));
  const rows = [...body.matchAll(/^\s*(\w+)\s*=\s*(\d+),/gm)].map((m) => [m[1], Number(m[2])]);
  assert.ok(rows.length >= 9);
  assert.deepEqual(Object.entries(CloseReason), rows);
});
