#!/usr/bin/env bash
# bench.ddp_smoke: bench/ddp_compare.sh --quick (4 local ranks, ddl and gloo in one job). Passes
# when the job exits 0 having checked every all_reduce result and DDP's weights (bitwise
# identical on the ranks, ddl's equal to gloo's within tolerance): it prints "ddp_compare: ok",
# an all_reduce row per size (4K, 256K, 4M) and a DDP row per backend. No timing is checked.
# Usage: ddp_bench_smoke.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: ddp_bench_smoke.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/../../bench/ddp_compare.sh" --quick --build "$build" 2>&1)
rc=$?
echo "$out"
if ((rc == 77)); then
  exit 77
fi
if ((rc != 0)); then
  echo "bench.ddp_smoke: ddp_compare.sh --quick exited $rc" >&2
  exit 1
fi
fail() {
  echo "bench.ddp_smoke: $1" >&2
  exit 1
}
grep -qx "ddp_compare: ok" <<<"$out" || fail "no 'ddp_compare: ok' line"
sizes=$(awk '$1 ~ /^[0-9]+[KMG]?$/ && NF == 6 && $6 ~ /x$/ {print $1}' <<<"$out" | xargs)
[[ $sizes == "4K 256K 4M" ]] || fail "all_reduce rows for '$sizes', not '4K 256K 4M'"
backends=$(awk '($1 == "ddl" || $1 == "gloo") && NF == 3 && $2 > 0 {print $1}' <<<"$out" | xargs)
[[ $backends == "ddl gloo" ]] || fail "DDP rows for '$backends', not 'ddl gloo'"
echo "bench.ddp_smoke: ok"
