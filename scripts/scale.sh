#!/usr/bin/env bash
# scale.sh: how p99 and throughput change with load and mesh shape
# (issue 5 item 4). Sweeps, one axis at a time from the base point
# (64 sessions, 2 nodes, 1 shard each):
#   sessions 100 -> 1k -> 10k (as far as the file-descriptor limit allows:
#            each session costs two descriptors, client and server side),
#   nodes    2 -> 3 -> 5 (zlink only: $ZLINK),
#   shards   1 -> 2 (zlink only: $ZLINK),
# then prints one table row per point and system (p50, p99 in µs, messages/s)
# and writes $OUT/scale.svg, p99 and throughput against each axis
# (`zlink-bench --scale-report`). Each point's JSON, table and stderr stay in
# $OUT as <axis>-<value>.{json,txt,err}. Figures from a shared 2-core machine
# are provisional; no row is a pass/fail.
#
# usage: scripts/scale.sh [OUT_DIR]
#   env: DURATION=3 WARMUP=1 SYSTEMS=zlink,tokio,ractor ZLINK=zlink (or zlink,zlink-epoll)
#        SESSIONS="100 1000 10000" NODES="2 3 5" SHARDS="1 2" (the points;
#        NODES may hold 1, the local path, whose rows are zlink-local)
# A check in seconds: DURATION=0.3 WARMUP=0 SESSIONS=10 NODES=3 SHARDS=2 scripts/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-scale-out}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
SYSTEMS=${SYSTEMS:-zlink,tokio,ractor}
# The zlink systems the nodes and shards axes sweep (zlink-epoll: epoll).
ZLINK=${ZLINK:-zlink}
SESSIONS=${SESSIONS:-100 1000 10000}
NODES=${NODES:-2 3 5}
SHARDS=${SHARDS:-1 2}
mkdir -p "$OUT"

# 10k sessions need about 20.5k descriptors in this one process (both ends).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fd_limit=$(ulimit -n)

cargo build --release --features bench --bin zlink-bench
bench=target/release/zlink-bench

run() {
  local point=$1; shift
  local json="$OUT/$point.json"
  echo "scale: $point" >&2
  "$bench" --warmup "$WARMUP" --duration "$DURATION" --json "$json" "$@" >"$OUT/$point.txt" 2>"$OUT/$point.err" \
    || echo "$point: failed (exit $?), see $OUT/$point.err; its JSON, if any, stays in the table" >&2
}

rm -f "$OUT"/sessions-*.json "$OUT"/nodes-*.json "$OUT"/shards-*.json
for sessions in $SESSIONS; do
  if (( sessions * 2 + 512 > fd_limit )); then  # zlink-bench needs as much (both ends + 512)
    echo "sessions=$sessions: skipped, the descriptor limit is $fd_limit" >&2
    continue
  fi
  run "sessions-$sessions" --system "$SYSTEMS" --sessions "$sessions"
done
for nodes in $NODES; do
  run "nodes-$nodes" --system "$ZLINK" --nodes "$nodes"
done
for shards in $SHARDS; do
  run "shards-$shards" --system "$ZLINK" --shards "$shards"
done
# The table (one row per point and system) and $OUT/scale.svg: p99 and
# messages/s against each axis, one line per system.
"$bench" --scale-report "$OUT"
