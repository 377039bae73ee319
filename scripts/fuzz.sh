#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/, docs/TESTING.md) one after another for
# SECONDS each (default 600), niced, one job and one worker, on the nightly
# toolchain. Each target starts from its seeds in fuzz/corpus/<target>/ and
# adds what it finds there; a crash stops the script and leaves its input in
# fuzz/artifacts/<target>/. The last libFuzzer lines of each run (cov:, ft:,
# corp:, exec/s) are printed, and the full logs kept in fuzz/logs/ (with
# -jobs, libFuzzer writes the run's own lines to fuzz-<job>.log; they are
# appended to the target's log).
#
# A failed run (a crash, a 10 s timeout, a leak or an out-of-memory) prints
# the input's path (libFuzzer's "Test unit written to …") and the commands
# that replay and minimise it. .ci/run calls it with a short SECONDS after
# `cargo +nightly fuzz build` (docs/TESTING.md "Fuzzing").
#
# FUZZ_BUILD_FLAGS (default none) are given to `cargo fuzz run`, e.g. "-s
# none" for a build without AddressSanitizer: they must be the flags the
# targets were built with, or cargo-fuzz rebuilds them.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail

cd "$(dirname "$0")/../fuzz"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(client_frame node_record link_handshake core_records)
fi

mkdir -p logs
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    echo "== $target: ${seconds}s"
    began=$(date +%s)
    # shellcheck disable=SC2086 # the flags are words
    nice -n 19 cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} "$target" "corpus/$target" -- \
        -max_total_time="$seconds" -jobs=1 -workers=1 -timeout=10 -print_final_stats=1 \
        >"logs/$target.log" 2>&1 || failed=1
    if [ -f fuzz-0.log ]; then
        cat fuzz-0.log >>"logs/$target.log"
        rm -f fuzz-0.log
    fi
    if [ "${failed:-0}" = 1 ]; then
        tail -n 40 "logs/$target.log"
        echo "!! $target failed: its log is fuzz/logs/$target.log"
        artifacts=$(grep -oE 'Test unit written to [^ ]+' "logs/$target.log" | awk '{print $5}' | sort -u)
        if [ -z "$artifacts" ]; then
            echo "!! no input was written (a build or setup failure?); see the log"
        fi
        for artifact in $artifacts; do
            # A relative path is libFuzzer's, from fuzz/.
            case "$artifact" in /*) ;; *) artifact="$PWD/${artifact#./}" ;; esac
            echo "!! the input is $artifact"
            echo "!!   replay:   (cd fuzz && cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} $target $artifact)"
            echo "!!   minimise: (cd fuzz && cargo +nightly fuzz tmin ${FUZZ_BUILD_FLAGS:-} $target $artifact)"
        done
        exit 1
    fi
    grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|REDUCE|NEW)' "logs/$target.log" | tail -n 1 || true
    grep -E '^stat::' "logs/$target.log" | tail -n 5 || true
    echo "   $target took $(( $(date +%s) - began ))s"
done
