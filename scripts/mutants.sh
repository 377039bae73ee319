#!/usr/bin/env bash
# Mutation testing over the sans-IO core and the wire layer with
# cargo-mutants (issue 23 item 3; docs/TESTING.md "Mutation testing"):
# each mutant (a function body replaced, an operator flipped) is built and
# the core's and the wire's tests run against it; a mutant no test fails is
# reported as missed.
#
# Each mutant rebuilds the library and runs the library's unit tests, the
# core tests (tests/core_*.rs), the wire tests (tests/wire_*.rs) and the
# lane tests (one crate, tests/mutants_suite.rs): about 8 s a mutant on
# 2 cores, so the whole set (some hundreds of mutants) is a long run, and
# the script runs a slice of it within a time budget:
#
#   scripts/mutants.sh sample K N [MINUTES]   # shard K of N (0-based), e.g. 0 40
#   scripts/mutants.sh diff BASE [MINUTES]    # the mutants of lines changed since BASE
#   scripts/mutants.sh all [MINUTES]          # every mutant (hours)
#   scripts/mutants.sh ci [BASE] [MINUTES]    # .ci/run's slice (below)
#
# ci: the mutants of the core and wire lines changed since BASE (default
# HEAD~1: the commit under test), judged in place with the build
# `cargo test` just made (the default features), so that nothing is built
# before the first mutant; nothing to do, and no cargo-mutants needed, when
# the commit changed no such line. A missed mutant fails the run. The
# budget (default 4 minutes) bounds it: what it did not reach is printed,
# not failed. For a clean checkout at the end of a CI run only: it mutates
# the tree itself.
#
# ZLINK_MUTANTS_IN_PLACE=1 mutates the tree itself instead of a copy (cargo-
# mutants' --in-place): for a worktree kept for mutation runs only, where no
# one edits meanwhile. Each run in a fresh copy rebuilt the library and its
# tests from scratch for the baseline (36 to 65 s a slice); in place the
# baseline finds them built. A run cut short can leave a mutated file:
# `git checkout src` before the next.
#
# MINUTES (default 30) bounds the run: cargo-mutants writes each outcome to
# target/mutants/mutants.out as it goes, so what finished before the bound
# is kept. The summary (caught, missed, unviable, timeouts) and the missed
# mutants are printed at the end. Installs cargo-mutants when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh checkout or worktree has no target directory yet; diff mode
# writes its diff there before cargo-mutants runs.
mkdir -p target

mode="${1:-sample}"
shift || true
slice=()
ci=0
case "$mode" in
  sample)
    shard="${1:-0}"
    of="${2:-40}"
    budget="${3:-30}"
    slice=(--shard "$shard/$of")
    ;;
  diff)
    base="${1:-HEAD~1}"
    budget="${2:-30}"
    git diff "$base" -- src/core src/wire > target/mutants.diff
    slice=(--in-diff target/mutants.diff)
    ;;
  all)
    budget="${1:-600}"
    ;;
  ci)
    base="${1:-HEAD~1}"
    budget="${2:-4}"
    ci=1
    if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
      echo "mutants: no commit $base in this clone (a shallow clone?): no change to judge"
      exit 0
    fi
    git diff "$base" -- src/core src/wire > target/mutants.diff
    if [ ! -s target/mutants.diff ]; then
      echo "mutants: no line of src/core or src/wire changed since $base ($(git rev-parse --short "$base")): nothing to judge"
      exit 0
    fi
    slice=(--in-diff target/mutants.diff)
    ;;
  *)
    echo "usage: scripts/mutants.sh sample K N [MINUTES] | diff BASE [MINUTES] | all [MINUTES] | ci [BASE] [MINUTES]" >&2
    exit 2
    ;;
esac

# Its own target directory, but in ci mode: cargo-mutants builds each mutant
# in a copy of the tree, and a mutant's build left in the tree's own target
# directory was taken as fresh by the next ordinary `cargo test` there (seen
# once: a test failed against a mutant's library until zlink was rebuilt).
# In place (ci) the restored file is newer than any mutant's build, so the
# next build sees it changed.
# The judges: the library's unit tests and tests/mutants_suite.rs, the
# core, wire and lane tests as one crate (built with the `mutants-suite`
# feature), so that a mutant's build rebuilds one test crate, not 22.
features=(--no-default-features --features mutants-suite)
targets=(-C --lib -C --test=mutants_suite)
in_place=()
if [ "$ci" = 1 ]; then
  features=()
  # The build `cargo test` made: the same files as their own crates.
  targets=(-C --lib -C '--test=core_*' -C '--test=wire_*' -C --test=lanes)
  in_place=(--in-place)
else
  export CARGO_TARGET_DIR="$PWD/target/mutants-build"
fi
if [ "${ZLINK_MUTANTS_IN_PLACE:-0}" = 1 ]; then
  in_place=(--in-place)
fi

if ! cargo mutants --version >/dev/null 2>&1; then
  cargo install cargo-mutants --locked
fi

# The tests that judge the core and the wire layer; the real-socket suites
# prove the same rules through the runtime but take minutes a mutant.
# The targets are named as cargo arguments (-C), not after `--`:
# cargo-mutants passes those to every cargo call, its build of each mutant
# (`cargo test --no-run`) included, where arguments after `--` reach only
# the test run, so each mutant built all 70-odd test binaries (30 to 55 s
# a mutant) to run 24 of them. Without the default features the node's
# binaries, which no test named here runs, are not linked either (ci keeps
# them: its build is the one `cargo test` made).
status=0
timeout --signal=INT "${budget}m" cargo mutants \
  --file 'src/core/**/*.rs' --file 'src/wire/**/*.rs' \
  "${slice[@]}" "${in_place[@]}" \
  --output target/mutants \
  --timeout 120 \
  --no-shuffle \
  "${features[@]}" \
  "${targets[@]}" \
  || status=$?

out=target/mutants/mutants.out
for kind in caught missed unviable timeout; do
  if [ -f "$out/$kind.txt" ]; then
    printf '%-9s %s\n' "$kind" "$(wc -l < "$out/$kind.txt")"
  fi
done
if [ -s "$out/missed.txt" ]; then
  echo "missed:"
  cat "$out/missed.txt"
fi
# cargo-mutants exits 2 when a mutant was missed, 3 on a timeout; 124 or
# 130 here is the budget running out.
if [ "$ci" = 1 ]; then
  if [ -s "$out/missed.txt" ]; then
    exit 2
  fi
  case "$status" in
    124 | 130)
      judged=$(cat "$out"/{caught,missed,unviable,timeout}.txt 2>/dev/null | wc -l)
      listed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$out/mutants.json")
      echo "mutants: the ${budget}-minute budget ran out after $judged of $listed; the rest: scripts/mutants.sh diff $base"
      exit 0
      ;;
    # A mutant that makes a test hang was noticed by the suite.
    3) exit 0 ;;
  esac
fi
exit "$status"
