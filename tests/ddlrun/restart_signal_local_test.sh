#!/usr/bin/env bash
# Signals to ddlrun --max-restarts with the local launcher:
#   1. SIGTERM while a failed attempt is being stopped (a rank that ignores SIGTERM holds the
#      stop for --kill-grace): the job ends at once with 143, not restarted;
#   2. a rank that fails on every attempt: from restart 2 on, each restart waits (0.25 s, 0.5 s:
#      said), and SIGTERM during that pause ends ddlrun with 143, a note and the summary of the
#      restarts so far;
#   3. nothing is left running.
#   restart_signal_local_test.sh DDLRUN
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
# Rank 1 fails only once rank 0 ignores SIGTERM (a loaded CI machine once ran rank 1's exit
# before rank 0's trap: rank 0 died at the stop's SIGTERM, and the stop ended before the test's).
cat >"$work/rank.sh" <<'EOS'
#!/bin/sh
echo "attempt $DDL_RESTART_COUNT: rank $RANK"
armed="ARMED.$DDL_RESTART_COUNT"
if [ "$RANK" = 1 ]; then
  i=0
  while [ ! -e "$armed" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
  exit 3
fi
trap '' TERM
: >"$armed"
sleep 30 &
wait
EOS
sed -i "s|ARMED|$work/armed|" "$work/rank.sh"
chmod +x "$work/rank.sh"
# grep_wait PATTERN FILE: until FILE has a line matching PATTERN (20 s at most).
grep_wait() {
  local i
  for ((i = 0; i < 400; i++)); do
    grep -Eq "$1" "$2" && return 0
    sleep 0.05
  done
  return 1
}

# 1. SIGTERM during the stop of a failed attempt.
"$ddlrun" -H localhost:2 --tag-output none --max-restarts 3 --kill-grace 10 "$work/rank.sh" \
  >"$work/stop.out" 2>"$work/stop.err" &
job=$!
grep_wait "^ddlrun: rank 1 \(localhost\) exited with status 3" "$work/stop.err" ||
  fail "stop: rank 1 did not fail" "$work/stop.err"
kill -TERM "$job"
wait "$job"
status=$?
((status == 143)) || fail "stop: exit $status, not 143" "$work/stop.err"
grep -qx "ddlrun: got SIGTERM while stopping: killing every process now" "$work/stop.err" ||
  fail "stop: no note of the signal" "$work/stop.err"
grep -q "restart 1" "$work/stop.err" && fail "stop: restarted after SIGTERM" "$work/stop.err"

# 2. SIGTERM during the pause before restart 3.
cat >"$work/fail.sh" <<'EOS'
#!/bin/sh
exit 3
EOS
chmod +x "$work/fail.sh"
"$ddlrun" -H localhost:2 --tag-output none --max-restarts 5 "$work/fail.sh" \
  >"$work/pause.out" 2>"$work/pause.err" &
job=$!
grep_wait "^ddlrun: restart 3 starts in" "$work/pause.err" || fail "pause: no restart 3" "$work/pause.err"
kill -TERM "$job"
wait "$job"
status=$?
((status == 143)) || fail "pause: exit $status, not 143" "$work/pause.err"
want=$(
  cat <<'EOS'
ddlrun: restart 1 of 5 after rank 0 (localhost) exited with status 3; 2 ranks on 1 host
ddlrun: restart 2 of 5 after rank 0 (localhost) exited with status 3; 2 ranks on 1 host
ddlrun: restart 2 starts in 0.25 s (the pause doubles with each restart, up to 8 s)
ddlrun: restart 3 of 5 after rank 0 (localhost) exited with status 3; 2 ranks on 1 host
ddlrun: restart 3 starts in 0.5 s (the pause doubles with each restart, up to 8 s)
ddlrun: got SIGTERM while restart 3 was being prepared (after rank 0 (localhost) exited with status 3); leaving now
ddlrun: the job was restarted 2 times and ended with status 143:
  1. after rank 0 (localhost) exited with status 3; 2 ranks on 1 host
  2. after rank 0 (localhost) exited with status 3; 2 ranks on 1 host
EOS
)
got=$(grep -E '^ddlrun: (restart|got|the job)|^  [0-9]\. after' "$work/pause.err" |
  sed 's/rank 1 (localhost)/rank 0 (localhost)/')
[[ $got == "$want" ]] || fail "pause: the notes differ:"$'\n'"$got" "$work/pause.err"

sleep 0.5
left=$(own_pids "^(sleep|/bin/sh $work/)" "TMPDIR=$work" | paste -sd,)
[[ -z $left ]] || fail "processes left: $(ps -o pid=,args= -p "$left")"
((fails == 0)) && echo "restart_signal_local: ok"
exit $((fails > 0))
