#!/usr/bin/env bash
# stat.sh: what one bench scenario costs the machine, per message (issue 5
# item 5). Runs zlink-bench under `perf stat` and prints cycles,
# instructions, context switches and syscalls, each divided by the messages
# the run measured. Counters cover the whole process (load client included)
# and the whole run (setup and warm-up included), so compare systems with
# each other, not with the bench's own CPU-per-message column.
#
# Where perf is missing or the hardware counters are "not supported" (most
# VMs: then only task-clock, context switches and syscalls are counted), it
# says so and falls back to perf/callgrind.sh: instruction counts that are
# stable on a noisy machine, far slower, so it runs a short scenario.
# Valgrind does not drive io_uring (a run of zlink or raw-uring under it
# hangs at the first turn), so the fallback runs zlink on its epoll backend
# (zlink-epoll) and raw-uring's place is taken by raw-epoll, and says so.
#
# usage: perf/stat.sh [SYSTEM] [WORKLOAD]   (defaults: zlink relay)
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=${1:-zlink}
WORKLOAD=${2:-relay}
OUT=perf-out
mkdir -p "$OUT"
cargo build --release --features bench --bin zlink-bench
bench=target/release/zlink-bench
scenario=(--system "$SYSTEM" --workload "$WORKLOAD" --sessions 64 --warmup 1 --duration 5 --json "$OUT/stat.json")

# Messages measured over every run and system of a report ({"runs": [{"systems": [..]}]}).
messages() {
  python3 -c 'import json,sys; print(sum(s["messages"] for r in json.load(open(sys.argv[1]))["runs"] for s in r["systems"]))' "$1"
}

events=cycles,instructions,task-clock,context-switches,raw_syscalls:sys_enter
hardware=yes
if command -v perf >/dev/null 2>&1; then
  perf stat -e "$events" -x, -o "$OUT/stat.csv" "$bench" "${scenario[@]}" >"$OUT/stat.txt"
  n=$(messages "$OUT/stat.json")
  echo "$SYSTEM $WORKLOAD under perf stat: $n messages measured"
  awk -F, -v n="$n" '
    /^#/ || NF < 3 { next }
    $1 ~ /not supported/ { printf "  %-28s not supported here\n", $3; next }
    { printf "  %-28s %16.0f %-5s %12.4f per message\n", $3, $1, $2, $1 / n }' "$OUT/stat.csv"
  grep -q "not supported>,,instructions" "$OUT/stat.csv" && hardware=no
else
  echo "perf is missing (apt-get install linux-perf)" >&2
  hardware=no
fi
[ "$hardware" = yes ] && exit 0

echo "no hardware counters here (cycles, instructions): falling back to callgrind for instruction counts" >&2
perf/callgrind.sh "$SYSTEM" "$WORKLOAD"
