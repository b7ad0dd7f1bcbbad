#!/usr/bin/env bash
# ddlrun --max-restarts with the local launcher, real jobs:
#   - 4 ranks, rank 2 exits 3 on the first attempt only (DDL_RESTART_COUNT): with
#     --max-restarts 1 the job restarts, every rank of attempt 1 sees DDL_RESTART_COUNT=1,
#     TORCHELASTIC_RESTART_COUNT=1, TORCHELASTIC_MAX_RESTARTS=1 and a job id of its own, the
#     restart and the summary are printed (-v: the new plan too), and the job exits 0; without the option (and with
#     --max-restarts 0) it exits 3 as before, with no restart note;
#   - the same through --launcher mpirun (Open MPI), when installed: mpirun is started again;
#   - a rank that fails on every attempt: the restarts run out, the exit status is the last
#     failure's;
#   - a libddl job (tests/chaos/chaos_loop) whose rank 1 is frozen (SIGSTOP) on the first
#     attempt: the others time out in their allreduce after DDL_TIMEOUT (2 s), the job restarts
#     and the second attempt finishes;
#   - nothing is left running.
# Usage: restart_local_test.sh DDLRUN CHAOS_LOOP
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$1 chaos_loop=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work

cat >"$work/rank.sh" <<'EOF'
#!/bin/sh
echo "rank $RANK of $WORLD_SIZE: attempt $DDL_RESTART_COUNT te $TORCHELASTIC_RESTART_COUNT max $TORCHELASTIC_MAX_RESTARTS job $DDL_JOB_ID"
if [ "$RANK" = 2 ] && [ "$DDL_RESTART_COUNT" -lt "${FAIL_ATTEMPTS:-1}" ]; then exit 3; fi
sleep 0.3
EOF
chmod +x "$work/rank.sh"

# job NAME ARGS...: ddlrun with 4 local ranks; $work/NAME.out, NAME.err, NAME.rc.
job() {
  local name=$1
  shift
  "$ddlrun" -H localhost:4 --tag-output none "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
}
rc() { cat "$work/$1.rc"; }

job once --max-restarts 1 -v "$work/rank.sh"
[[ $(rc once) == 0 ]] || fail "once: exit $(rc once), not 0" "$work/once.err"
grep -qx "ddlrun: restart 1 of 1 after rank 2 (localhost) exited with status 3; 4 ranks on 1 host" \
  "$work/once.err" || fail "once: no restart note" "$work/once.err"
grep -qx "ddlrun: the job was restarted 1 time and ended with status 0:" "$work/once.err" ||
  fail "once: no summary" "$work/once.err"
if ! grep -qx "ddlrun: info: restart 1: the new plan:" "$work/once.err" ||
  ! grep -Eqx "job id: +ddlrun-[0-9]+-r1" "$work/once.err"; then
  fail "once: -v did not print the new plan" "$work/once.err"
fi
for r in 0 1 2 3; do
  grep -Eqx "rank $r of 4: attempt 1 te 1 max 1 job ddlrun-[0-9]+-r1" "$work/once.out" ||
    fail "once: rank $r of attempt 1 missing or with the wrong variables" "$work/once.out"
done

# Through mpirun (Open MPI), when installed: the loop starts mpirun again.
if command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q 'Open MPI'; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    job mpirun --launcher mpirun --max-restarts 1 "$work/rank.sh"
  [[ $(rc mpirun) == 0 ]] || fail "mpirun: exit $(rc mpirun), not 0" "$work/mpirun.err"
  grep -qx "ddlrun: restart 1 of 1 after mpirun exited with status 3; 4 ranks on 1 host" \
    "$work/mpirun.err" || fail "mpirun: no restart note" "$work/mpirun.err"
  (($(grep -c "^rank [0-3] of 4: attempt 1 te 1 max 1 job ddlrun-[0-9]*-r1$" "$work/mpirun.out") == 4)) ||
    fail "mpirun: attempt 1 did not run 4 ranks" "$work/mpirun.out"
fi

for flags in "" "--max-restarts 0"; do
  # shellcheck disable=SC2086  # no flag, or two words
  job today $flags "$work/rank.sh"
  [[ $(rc today) == 3 ]] || fail "'$flags': exit $(rc today), not 3" "$work/today.err"
  grep -q "restart" "$work/today.err" && fail "'$flags': a restart note" "$work/today.err"
  grep -q "attempt 1" "$work/today.out" && fail "'$flags': a second attempt ran" "$work/today.out"
done

FAIL_ATTEMPTS=9 job always --max-restarts 2 "$work/rank.sh"
[[ $(rc always) == 3 ]] || fail "always: exit $(rc always), not 3" "$work/always.err"
grep -qx "ddlrun: not restarting the job: no restart left (--max-restarts 2); it ends with status 3" \
  "$work/always.err" || fail "always: no note that the restarts ran out" "$work/always.err"
(($(grep -c "^rank 2 of 4: attempt" "$work/always.out") == 3)) ||
  fail "always: not 3 attempts" "$work/always.out"

# A frozen rank: its peers' allreduce times out (DDL_TIMEOUT), the job restarts.
mkdir -p "$work/chaos"
CHAOS_DIR=$work/chaos CHAOS_SECONDS=2 DDL_TIMEOUT=2 \
  "$ddlrun" -H localhost:3 --max-restarts 1 --kill-grace 1 --tag-output none "$chaos_loop" \
  >"$work/stop.out" 2>"$work/stop.err" &
job_pid=$!
for ((i = 0; i < 100; i++)); do
  [[ -s $work/chaos/pid.1 ]] && break
  sleep 0.1
done
stopped=$(awk '{ print $1 }' "$work/chaos/pid.1" 2>/dev/null)
if [[ -n $stopped ]]; then
  kill -STOP "$stopped"
  started=$(date +%s%N)
  wait "$job_pid"
  status=$?
  echo "stop: exit $status after $((($(date +%s%N) - started) / 1000000)) ms from the SIGSTOP"
  ((status == 0)) || fail "stop: exit $status, not 0" "$work/stop.err"
  grep -Eq "^ddlrun: restart 1 of 1 after rank [0-9] \(localhost\) exited with status 1 waiting for rank 1 \(localhost\), which made no progress for 2 s" \
    "$work/stop.err" || fail "stop: no restart naming the frozen rank 1" "$work/stop.err"
else
  kill "$job_pid"
  wait "$job_pid"
  fail "stop: chaos_loop rank 1 never started" "$work/stop.err"
fi

sleep 0.5
# Only this test's processes: they alone have TMPDIR=$work (chaos tests may run chaos_loop now).
left=$(own_pids "^($chaos_loop|/bin/sh $work/)" "TMPDIR=$work" | paste -sd,)
[[ -z $left ]] || fail "processes left: $(ps -o pid=,args= -p "$left")"
((fails == 0)) && echo "restart_local: ok"
exit $((fails > 0))
