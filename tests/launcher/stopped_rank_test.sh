#!/usr/bin/env bash
# launcher.stopped_rank: a rank that is stopped (kill -STOP) when the job fails takes ddlrun's
# SIGTERM at once, because SIGCONT follows it: with --kill-grace 20, ddlrun ends within a few
# seconds (not after the grace) with the failed rank's status, without "sending SIGKILL", and
# nothing of the job is left. The same for a user's Ctrl-C (SIGINT to ddlrun) while a rank
# is stopped.
#   stopped_rank_test.sh DDLRUN
set -uo pipefail
ddlrun=${1:?usage: stopped_rank_test.sh DDLRUN}
fail() { echo "launcher.stopped_rank: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each rank writes its pid, rank 1 stops itself; rank 0 fails once rank 1 is stopped (or, with
# WAIT, waits for ddlrun's signal).
cat >"$work/rank.sh" <<'SH'
echo $$ >"$WORK/pid.$DDL_RANK"
if [ "$DDL_RANK" = 1 ]; then kill -STOP $$; echo "rank 1 resumed"; exit 0; fi
while ! grep -q '^State:.*T' "/proc/$(cat "$WORK/pid.1" 2>/dev/null)/status" 2>/dev/null; do
  sleep 0.05
done
if [ -n "${WAIT:-}" ]; then echo "rank 1 is stopped"; sleep 60; fi
exit 3
SH

# check NAME RC OUT ELAPSED_S: status, time and leftovers of one run
check() {
  local name=$1 rc=$2 want=$3 out=$4 secs=$5 r pid
  ((rc == want)) || fail "$name: ddlrun exited $rc, not $want: $out"
  ((secs <= 8)) || fail "$name: ddlrun took $secs s (the stopped rank waited for the grace?): $out"
  grep -q "sending SIGKILL" <<<"$out" && fail "$name: ddlrun needed SIGKILL: $out"
  for r in 0 1; do
    pid=$(cat "$work/pid.$r" 2>/dev/null) || fail "$name: rank $r did not start"
    kill -0 "$pid" 2>/dev/null && fail "$name: rank $r ($pid) is still there"
  done
  rm -f "$work"/pid.*
}

start=$SECONDS
out=$(WORK=$work "$ddlrun" -H localhost:2 --no-probe --kill-grace 20 -x WORK sh "$work/rank.sh" 2>&1)
check "a failure" $? 3 "$out" $((SECONDS - start))
grep -qxF "ddlrun: rank 0 (localhost) exited with status 3; stopping the other process" <<<"$out" ||
  fail "a failure: ddlrun did not name rank 0: $out"

WORK=$work WAIT=1 "$ddlrun" -H localhost:2 --no-probe --kill-grace 20 -x WORK -x WAIT \
  sh "$work/rank.sh" >"$work/out" 2>&1 &
job=$!
for _ in $(seq 200); do grep -q "rank 1 is stopped" "$work/out" && break; sleep 0.05; done
grep -q "rank 1 is stopped" "$work/out" || fail "Ctrl-C: rank 1 was not stopped: $(cat "$work/out")"
start=$SECONDS
kill -INT "$job"
wait "$job"
check "Ctrl-C" $? 130 "$(cat "$work/out")" $((SECONDS - start))
echo "launcher.stopped_rank: ok"
