#!/usr/bin/env bash
# flame.sh: where one bench scenario spends its CPU, as a flamegraph (issue 5
# item 5). Runs zlink-bench under `perf record -g` (DWARF call stacks, every
# thread: the load client, the nodes' shards, the runtimes), folds the stacks
# and draws perf-out/flame-SYSTEM-WORKLOAD.svg with the inferno crate
# (installed into target/tools by this script when missing).
#
# How to read it: the width of a frame is its share of the sampled CPU time,
# its own and its callees'; the stacks are sorted by name, not by time. Look
# for wide frames near the top (the work itself) and for the share of the
# load client (client.rs frames, tokio's in the `load-client` thread) next
# to the system's threads: every system pays the same client.
#
# Where the hardware counters are "not supported" (`perf stat -e
# instructions true`, most VMs), the samples are taken on the cpu-clock
# timer instead of cycles (coarser, still a CPU profile), and the script
# also runs perf/callgrind.sh: exact instruction counts per function under
# `valgrind --tool=callgrind`, stable on a noisy machine. Valgrind does not
# drive io_uring, so that run puts zlink on its epoll backend (`zlink-epoll`)
# and the raw forwarder on tokio (`raw-epoll`); read it in
# perf-out/callgrind-annotate.txt (inclusive counts) or with
# `callgrind_annotate perf-out/callgrind.out.*`.
#
# usage: perf/flame.sh [SYSTEM] [WORKLOAD]   (defaults: zlink relay)
#   env: DURATION=3 (measured seconds under perf), SESSIONS=64
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=${1:-zlink}
WORKLOAD=${2:-relay}
DURATION=${DURATION:-3}
SESSIONS=${SESSIONS:-64}
OUT=perf-out
mkdir -p "$OUT"

# Release code with line tables, so that the stacks have names and files;
# its own target dir keeps the plain release build untouched.
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
  cargo build --release --features bench --bin zlink-bench --target-dir target/flame
bench=target/flame/release/zlink-bench

if ! command -v perf >/dev/null 2>&1; then
  echo "perf is missing: apt-get install linux-perf" >&2
  exit 1
fi
tools=target/tools/bin
if [ ! -x "$tools/inferno-flamegraph" ]; then
  echo "installing the inferno flamegraph tools into target/tools" >&2
  cargo install --locked --root target/tools inferno
fi

hardware=yes
if perf stat -e instructions true 2>&1 | grep -q "not supported"; then
  hardware=no
fi
event=cycles
if [ "$hardware" = no ]; then
  event=cpu-clock
  echo "hardware counters are not supported here: sampling on the cpu-clock timer" >&2
fi

scenario=(--system "$SYSTEM" --workload "$WORKLOAD" --sessions "$SESSIONS" --warmup 0.5 --duration "$DURATION")
data="$OUT/flame-$SYSTEM-$WORKLOAD.data"
perf record -e "$event" -F 499 -g --call-graph dwarf,16384 -o "$data" \
  "$bench" "${scenario[@]}" >"$OUT/flame-$SYSTEM-$WORKLOAD.txt" 2>"$OUT/flame-$SYSTEM-$WORKLOAD.err"
perf script -i "$data" 2>/dev/null | "$tools/inferno-collapse-perf" >"$OUT/flame-$SYSTEM-$WORKLOAD.folded"
"$tools/inferno-flamegraph" --title "zlink-bench $SYSTEM $WORKLOAD ($event samples)" \
  <"$OUT/flame-$SYSTEM-$WORKLOAD.folded" >"$OUT/flame-$SYSTEM-$WORKLOAD.svg"
echo "flamegraph: $OUT/flame-$SYSTEM-$WORKLOAD.svg ($(wc -l <"$OUT/flame-$SYSTEM-$WORKLOAD.folded") distinct stacks; the run's table in $OUT/flame-$SYSTEM-$WORKLOAD.txt)"
[ "$hardware" = yes ] && exit 0

echo "no hardware counters: instruction counts from callgrind instead" >&2
BENCH=$bench perf/callgrind.sh "$SYSTEM" "$WORKLOAD"
