#!/usr/bin/env bash
# A real job whose rank 1 passes another count (or type) to ddl_allreduce than the others
# (tests/comm_mp/mismatch.c): every rank's call must fail with DDL_ERR_MISMATCH (9) and the same
# text naming rank 0's and rank 1's calls, and so must the next call.
#   check_mismatch.sh DDLRUN MISMATCH N count|type [ddlrun options...]
set -uo pipefail
ddlrun=$1 prog=$2 n=$3 what=$4
shift 4
if [[ $what == count ]]; then
  theirs="allreduce(count=11, float32, sum)"
else
  theirs="allreduce(count=10, float64, sum)"
fi
text="collective mismatch: rank 0 called allreduce(count=10, float32, sum) #1 but rank 1 called"
text+=" $theirs #1 (every rank must make the same calls in the same order; this communicator"
text+=" now fails every call)"
out=$(DDL_TIMEOUT=20 timeout 60 "$ddlrun" --tag-output none -H "localhost:$n" --no-probe "$@" \
  "$prog" "$what" 2>&1)
status=$?
echo "$out"
if ((status != 0)); then
  echo "check_mismatch: ddlrun exited with $status" >&2
  exit 1
fi
for ((r = 0; r < n; r++)); do
  for call in "allreduce" "next allreduce"; do
    want="rank $r: $call: 9: $text"
    if ! grep -qxF "$want" <<<"$out"; then
      echo "check_mismatch: missing line: $want" >&2
      exit 1
    fi
  done
done
echo "check_mismatch: all $n ranks failed both calls with the mismatch"
