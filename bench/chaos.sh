#!/usr/bin/env bash
# The chaos suite for long runs: tests/chaos/chaos.sh with many faults (default 120: the 16
# launcher/fault kinds 7 or 8 times each, victims and delays at random), through the local
# launcher, 3 namespace hosts x 2 ranks over ssh, and per-node mode on the same hosts with a
# stranger flooding its rendezvous (root). Prints one line a run and the figures (runs,
# faults by kind, worst time to tear down, leftovers found); exits 1 when any run failed.
#
#   bench/chaos.sh [--build DIR] [--runs N] [--seed S] [chaos.sh options...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
args=()
runs=120
while (($#)); do
  case $1 in
    --build) build=$(realpath "$2"); shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
for f in "$build/ddlrun/ddlrun" "$build/tests/chaos_loop"; do
  [[ -x $f ]] || { echo "bench/chaos.sh: $f is missing: build first (scripts/setup)" >&2; exit 1; }
done
exec "$here/tests/chaos/chaos.sh" "$build/ddlrun/ddlrun" "$build/tests/chaos_loop" \
  --runs "$runs" "${args[@]}"
