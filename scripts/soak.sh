#!/usr/bin/env bash
# The long soak of the seeded simulator (docs/TESTING.md "Simulation"):
# SEEDS seeds (default 100,000) of STEPS steps (default 2,000), starting at
# FIRST (default 0), built in the sim profile (release with debug assertions
# and overflow checks), niced, on every core. It prints zlink-sim's summary
# line and tally; on a violation it prints the seed, the step, the invariant
# and the replay command, and exits 1. The summary is also written to
# target/soak.txt, to copy into docs/TESTING.md "Soak".
#
# Usage: scripts/soak.sh [SEEDS] [STEPS] [FIRST]
set -euo pipefail
cd "$(dirname "$0")/.."

seeds="${1:-100000}"
steps="${2:-2000}"
first="${3:-0}"

cargo build --profile sim --features testing --bin zlink-sim
echo "== zlink-sim: seeds ${first}..$((first + seeds)), ${steps} steps each ($(date -u +%FT%TZ), $(git rev-parse --short HEAD))"
nice -n 10 ./target/sim/zlink-sim --first "$first" --seeds "$seeds" --steps "$steps" \
    2> >(grep -v ' seeds done$' >&2) | tee target/soak.txt
