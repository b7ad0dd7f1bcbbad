#!/usr/bin/env bash
# ddlrun's summary names the rank at fault, not a bystander, with
# a real libddl loop (ddl_loop.c) on 4 local ranks:
#   stall  rank 2 SIGSTOPped mid-loop, DDL_TIMEOUT=3: the others time out, and the summary
#          says the first to fail was "waiting for rank 2 (localhost), which made no progress
#          for 3 s" (in a ring some of them name their neighbour, not rank 2);
#   left   rank 2 exits 0 at step 5: "rank 2 (localhost) exited (status 0) while the others
#          were still running a collective; rank R ... because of it".
# Usage: blame_job_test.sh DDLRUN DDL_LOOP
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
loop=$(realpath "$2")
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "== stall: rank 2 stopped"
"$ddlrun" -H localhost:4 --no-probe --tag-output rank --kill-grace 1 -x DDL_TIMEOUT=3 \
  "$loop" 60 >"$out" 2>&1 &
job=$!
for ((i = 0; i < 100; i++)); do
  pid=$(awk '$2 == "rank" && $3 == "2" && $4 == "pid" {print $5}' "$out")
  [[ -n $pid ]] && grep -q '^\[2\] rank 2 step [1-9]' "$out" && break
  sleep 0.1
done
if [[ -n $pid ]]; then
  kill -STOP "$pid"
  wait "$job"
  rc=$?
  kill -CONT "$pid" 2>/dev/null
  ((rc == 1)) || fail "stall: exit $rc, not 1"
  grep -qE "^ddlrun: rank [0-3] \(localhost\) exited with status 1 waiting for rank 2 \(localhost\), which made no progress for 3 s; stopping the other 3 processes$" "$out" ||
    fail "stall: the summary does not name rank 2"
else
  fail "stall: rank 2 did not start"
  kill -KILL "$job"
fi

echo "== left: rank 2 exits 0 early"
DDL_LOOP_EXIT_RANK=2 "$ddlrun" -H localhost:4 --no-probe --tag-output rank -x DDL_TIMEOUT=5 \
  -x DDL_LOOP_EXIT_RANK "$loop" 60 >"$out" 2>&1
rc=$?
((rc == 1)) || fail "left: exit $rc, not 1"
grep -qE "^ddlrun: rank 2 \(localhost\) exited \(status 0\) while the others were still running a collective; rank [013] \(localhost\) exited with status 1 because of it; stopping the other [0-9]+ process" "$out" ||
  fail "left: the summary does not name rank 2"

passed_or_exit
