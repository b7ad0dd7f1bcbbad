#!/usr/bin/env bash
# Runs ddl_check (every collective, checked by each rank) as a real job through ddlrun and
# checks that each of the N ranks said "rank R of N ok".
#   run_check.sh DDLRUN DDL_CHECK N [ddlrun options...]
set -uo pipefail
ddlrun=$1 check=$2 n=$3
shift 3
out=$("$ddlrun" --tag-output none "$@" "$check" 2>&1)
status=$?
echo "$out"
if ((status != 0)); then
  echo "run_check: ddlrun exited with $status" >&2
  exit 1
fi
for ((r = 0; r < n; r++)); do
  if ! grep -qx "rank $r of $n ok" <<<"$out"; then
    echo "run_check: rank $r did not report ok" >&2
    exit 1
  fi
done
echo "run_check: all $n ranks ok"
