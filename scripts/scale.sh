#!/usr/bin/env bash
# scale.sh: how p99 and throughput change with load and mesh shape
# (issue 5 item 4). Sweeps, one axis at a time from the base point
# (64 sessions, 2 nodes, 1 shard each):
#   sessions 100 -> 1k -> 10k (as far as the file-descriptor limit allows:
#            each session costs two descriptors, client and server side),
#   nodes    2 -> 3 -> 5 (zlink only),
#   shards   1 -> 2 (zlink only),
# and prints one table row per point: p50, p99 (µs) and messages/s. The JSON
# of every point stays in $OUT for plotting. Figures from a shared 2-core
# machine are provisional; no row is a pass/fail.
#
# usage: scripts/scale.sh [OUT_DIR]   (env: DURATION=3 WARMUP=1 SYSTEMS=zlink,tokio)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-scale-out}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
SYSTEMS=${SYSTEMS:-zlink,tokio,ractor}
mkdir -p "$OUT"

# 10k sessions need about 20k descriptors in this one process.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fd_limit=$(ulimit -n)

cargo build --release --features bench --bin zlink-bench
bench=target/release/zlink-bench

printf '%-28s %-10s %10s %10s %12s\n' point system p50_us p99_us msg_per_s
row() {
  local point=$1 json=$2
  # One line per system from the JSON, without needing jq.
  python3 - "$point" "$json" <<'PY'
import json, sys
point, path = sys.argv[1], sys.argv[2]
for s in json.load(open(path))["systems"]:
    l = s["latency_us"]
    print(f'{point:<28} {s["system"]:<10} {l["p50"]:>10.1} {l["p99"]:>10.1} {s["messages_per_second"]:>12.0f}')
PY
}
run() {
  local point=$1; shift
  local json="$OUT/$point.json"
  "$bench" --warmup "$WARMUP" --duration "$DURATION" --json "$json" "$@" >"$OUT/$point.txt" 2>"$OUT/$point.err" \
    || { echo "$point: failed, see $OUT/$point.err" >&2; return 0; }
  row "$point" "$json"
}

for sessions in 100 1000 10000; do
  if (( sessions * 2 + 256 > fd_limit )); then
    echo "sessions=$sessions: skipped, the descriptor limit is $fd_limit" >&2
    continue
  fi
  run "sessions-$sessions" --system "$SYSTEMS" --sessions "$sessions"
done
for nodes in 2 3 5; do
  run "nodes-$nodes" --system zlink --nodes "$nodes"
done
for shards in 1 2; do
  run "shards-$shards" --system zlink --shards "$shards"
done
