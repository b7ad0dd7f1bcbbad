#!/usr/bin/env bash
# bench.allreduce_smoke: bench/allreduce_compare.sh --quick on this host (4 ranks; ddl-bench
# under ddlrun, MPI_Allreduce under mpirun, Gloo's ring under ddlrun when it was built). Passes
# when the script exits 0 and its table has a row per size (1K, 32K, 1M), each with #wrong 0
# for every benchmark (n/a for a Gloo that was not built). No timing is checked.
# Usage: smoke_test.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: smoke_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/../../bench/allreduce_compare.sh" --quick --build "$build" 2>&1)
rc=$?
echo "$out"
if ((rc != 0)); then
  echo "bench.allreduce_smoke: allreduce_compare.sh --quick exited $rc" >&2
  exit 1
fi
# The table's rows: a size, then the columns; the last is #wrong as ddl/mpi/gloo.
rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 7' <<<"$out")
if [[ $(wc -l <<<"$rows") -ne 3 || -z $rows ]]; then
  echo "bench.allreduce_smoke: expected 3 rows (1K, 32K, 1M) in the table" >&2
  exit 1
fi
bad=$(awk '$NF !~ /^0\/0\/(0|n\/a)$/' <<<"$rows")
if [[ -n $bad ]]; then
  echo "bench.allreduce_smoke: rows with wrong elements (or a benchmark missing):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "bench.allreduce_smoke: ok"
