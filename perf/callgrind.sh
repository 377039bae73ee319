#!/usr/bin/env bash
# callgrind.sh: instruction counts of one short bench scenario under
# `valgrind --tool=callgrind` (issue 5 item 5), for machines whose hardware
# counters perf cannot read (most VMs); perf/stat.sh and perf/flame.sh fall
# back to it. Counts are exact and repeat on a noisy machine; the run is
# ~50x slower, so it is short (8 sessions, 1 s). They cover the whole
# process (load client included) and the whole run (setup included): compare
# systems with each other. Valgrind does not drive io_uring, so zlink runs on
# its epoll backend (zlink-epoll) and raw-uring's place is taken by
# raw-epoll; the script says so.
#
# Prints the instructions per message; writes perf-out/callgrind.out.<pid>
# (open with callgrind_annotate or kcachegrind) and
# perf-out/callgrind-annotate.txt (functions by inclusive count: the share
# of each function with its callees).
#
# usage: perf/callgrind.sh [SYSTEM] [WORKLOAD]   (defaults: zlink relay)
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=${1:-zlink}
WORKLOAD=${2:-relay}
OUT=perf-out
BENCH=${BENCH:-target/release/zlink-bench}
mkdir -p "$OUT"
[ -x "$BENCH" ] || cargo build --release --features bench --bin zlink-bench
if ! command -v valgrind >/dev/null 2>&1; then
  echo "valgrind is missing: apt-get install valgrind" >&2
  exit 1
fi
case "$SYSTEM" in
  zlink) grind=zlink-epoll ;;
  raw-uring) grind=raw-epoll ;;
  *) grind=$SYSTEM ;;
esac
[ "$grind" != "$SYSTEM" ] && echo "callgrind runs $grind instead of $SYSTEM: valgrind does not drive io_uring" >&2
short=(--system "$grind" --workload "$WORKLOAD" --sessions 8 --warmup 0.2 --duration 1 --json "$OUT/callgrind.json")
rm -f "$OUT"/callgrind.out.*
timeout 600 valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p" \
  "$BENCH" "${short[@]}" >"$OUT/callgrind.txt" 2>"$OUT/callgrind.err"
# Messages measured over every run and system of the report.
n=$(python3 -c 'import json,sys; print(sum(s["messages"] for r in json.load(open(sys.argv[1]))["runs"] for s in r["systems"]))' "$OUT/callgrind.json")
ir=$(grep -h '^summary:' "$OUT"/callgrind.out.* | awk '{ s += $2 } END { print s }')
callgrind_annotate --inclusive=yes "$OUT"/callgrind.out.* >"$OUT/callgrind-annotate.txt" 2>/dev/null || true
echo "$grind $WORKLOAD under callgrind: $n messages, $ir instructions in all, $(( ir / (n > 0 ? n : 1) )) per message (setup and warm-up included); by function: $OUT/callgrind-annotate.txt"
