#!/usr/bin/env bash
# What ddlrun leaves behind, and how fast it leaves, under the local launcher:
#   sigkill  ddlrun SIGKILLed while each rank has a child in its process group and one that
#            left it (setsid): within 5 s no process of the job is left and its TMPDIR is empty
#            (item 3; the keeper, launcher/keeper.h);
#   stale    ddlrun and its keeper SIGKILLed together: the next ddlrun removes the directories
#            they left (their owner file names a dead process), not those of live owners or
#            of other hosts;
#   term2    ranks that ignore SIGTERM, --kill-grace 30: a second SIGTERM ends ddlrun within 2 s
#            with 143 and kills them (item 11);
#   ctrlz    SIGTSTP stops every rank (and its children) and ddlrun; SIGCONT resumes them all
#            (item 6).
# Usage: leftovers_test.sh DDLRUN
set -uo pipefail
ddlrun=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"  # alive
# wait_for FILE N: until FILE has N lines starting "kids " (10 s at most).
wait_for() {
  local i
  for ((i = 0; i < 100; i++)); do
    (($(cat "$1" 2>/dev/null | grep -c '^kids ') >= $2)) && return 0
    sleep 0.1
  done
  return 1
}
# none_alive SECONDS PIDS...: true when all are gone within SECONDS.
none_alive() {
  local limit=$(($1 * 10)) i p any
  shift
  for ((i = 0; i <= limit; i++)); do
    any=""
    for p in "$@"; do alive "$p" && any+=" $p"; done
    [[ -z $any ]] && return 0
    sleep 0.1
  done
  echo "still alive:$any"
  ps -o pid=,args= -p "${any// /,}" | sed 's/^/    /'
  kill -KILL $any 2>/dev/null
  return 1
}

echo "== sigkill: SIGKILL of ddlrun"
mkdir -p "$work/tmp"
TMPDIR="$work/tmp" "$ddlrun" -H localhost:2 --no-probe --tag-output none sh -c \
  'setsid sleep 33 & a=$!; sleep 34 & echo "kids $$ $a $!"; wait' >"$work/sigkill" 2>&1 &
job=$!
if wait_for "$work/sigkill" 2; then
  # shellcheck disable=SC2207
  pids=($(awk '/^kids /{print $2, $3, $4}' "$work/sigkill"))
  ls -A "$work/tmp" | grep -q . || fail "sigkill: no temporary directory to check"
  kill -KILL "$job"
  t0=$(now_ms)
  none_alive 5 "${pids[@]}" || fail "sigkill: processes of the job outlived ddlrun by 5 s"
  for ((i = 0; i < 50; i++)); do
    [[ -z $(ls -A "$work/tmp") ]] && break
    sleep 0.1
  done
  [[ -z $(ls -A "$work/tmp") ]] || fail "sigkill: left in TMPDIR: $(ls -A "$work/tmp")"
  echo "  sigkill: all gone $(($(now_ms) - t0)) ms after SIGKILL"
else
  fail "sigkill: the ranks did not start" "$work/sigkill"
  kill -KILL "$job"
fi
wait "$job" 2>/dev/null

echo "== stale: what a ddlrun killed with its keeper left, the next ddlrun removes"
mkdir -p "$work/tmp2"
TMPDIR="$work/tmp2" "$ddlrun" -H localhost:2 --no-probe --tag-output none sh -c \
  'echo "kids $$"; sleep 30' >"$work/stale" 2>&1 &
job=$!
if wait_for "$work/stale" 2; then
  keeper=$(ps -o pid=,args= --ppid "$job" | awk '/--keeper|ddlrun-keeper/ {print $1}')
  kill -KILL "$job" $keeper
  wait "$job" 2>/dev/null
  for g in $(awk '/^kids /{print $2}' "$work/stale"); do kill -KILL -- "-$g" 2>/dev/null; done
  sleep 0.5
  left=$(ls -A "$work/tmp2")
  [[ -n $left ]] || fail "stale: killing ddlrun and its keeper left nothing to test with"
  # A live owner's directory stays, and so does another host's.
  read -r stat </proc/$$/stat
  # shellcheck disable=SC2086
  set -- ${stat##*) }
  mkdir "$work/tmp2/ddlrun-agent.live" "$work/tmp2/ddlrun-agent.other"
  echo "$$ ${20} $(hostname)" >"$work/tmp2/ddlrun-agent.live/owner"
  echo "999999999 1 not-$(hostname)" >"$work/tmp2/ddlrun-agent.other/owner"
  TMPDIR="$work/tmp2" "$ddlrun" -H localhost:1 --no-probe true
  kept=$(ls -A "$work/tmp2" | tr '\n' ' ')
  [[ $kept == "ddlrun-agent.live ddlrun-agent.other " ]] ||
    fail "stale: after the next ddlrun $work/tmp2 holds '$kept', not only the live and the other host's (was: $left)"
else
  fail "stale: the ranks did not start" "$work/stale"
  kill -KILL "$job"
fi

echo "== term2: a second SIGTERM ends ddlrun at once"
"$ddlrun" -H localhost:2 --no-probe --tag-output none --kill-grace 30 sh -c \
  'trap "" TERM; sleep 40 & echo "kids $$ $!"; while :; do wait; done' >"$work/term2" 2>&1 &
job=$!
if wait_for "$work/term2" 2; then
  # shellcheck disable=SC2207
  pids=($(awk '/^kids /{print $2, $3}' "$work/term2"))
  kill -TERM "$job"
  sleep 0.5
  alive "$job" || fail "term2: the first SIGTERM ended ddlrun (the ranks ignore it)" "$work/term2"
  t0=$(now_ms)
  kill -TERM "$job"
  for ((i = 0; i < 20; i++)); do
    alive "$job" || break
    sleep 0.1
  done
  if alive "$job"; then
    fail "term2: ddlrun still runs 2 s after the second SIGTERM" "$work/term2"
    kill -KILL "$job"
  fi
  wait "$job"
  rc=$?
  echo "  term2: exit $rc $(($(now_ms) - t0)) ms after the second SIGTERM"
  ((rc == 143)) || fail "term2: exit $rc, not 143" "$work/term2"
  grep -qx "ddlrun: got SIGTERM while stopping: killing every process now" "$work/term2" ||
    fail "term2: no note of the second SIGTERM" "$work/term2"
  none_alive 2 "${pids[@]}" || fail "term2: the ranks outlived ddlrun"
else
  fail "term2: the ranks did not start" "$work/term2"
  kill -KILL "$job"
fi

echo "== ctrlz: SIGTSTP stops the ranks and ddlrun, SIGCONT resumes them"
# stat_of PID: its state letter (T: stopped).
stat_of() { ps -o stat= -p "$1" 2>/dev/null | cut -c1; }
# states_are LETTER PIDS...: every one in that state within 2 s.
states_are() {
  local want=$1 i p ok
  shift
  for ((i = 0; i < 20; i++)); do
    ok=1
    for p in "$@"; do [[ $(stat_of "$p") == "$want" ]] || ok=0; done
    ((ok)) && return 0
    sleep 0.1
  done
  for p in "$@"; do echo "    pid $p: state $(stat_of "$p"), not $want"; done
  return 1
}
"$ddlrun" -H localhost:2 --no-probe --tag-output none sh -c \
  'sleep 60 & echo "kids $$ $!"; while :; do echo tick; sleep 0.2; done' >"$work/ctrlz" 2>&1 &
job=$!
if wait_for "$work/ctrlz" 2; then
  # shellcheck disable=SC2207
  pids=($(awk '/^kids /{print $2, $3}' "$work/ctrlz"))
  kill -TSTP "$job"
  states_are T "$job" "${pids[@]}" || fail "ctrlz: not everything stopped after SIGTSTP"
  ticks=$(grep -c '^tick' "$work/ctrlz")
  sleep 1
  [[ $(grep -c '^tick' "$work/ctrlz") == "$ticks" ]] || fail "ctrlz: the ranks still print"
  kill -CONT "$job"
  for ((i = 0; i < 20; i++)); do
    stopped=""
    for p in "${pids[@]}"; do [[ $(stat_of "$p") == T ]] && stopped+=" $p"; done
    [[ -z $stopped ]] && break
    sleep 0.1
  done
  [[ -z $stopped ]] || fail "ctrlz: still stopped 2 s after SIGCONT:$stopped"
  sleep 1
  (($(grep -c '^tick' "$work/ctrlz") > ticks)) || fail "ctrlz: no output after SIGCONT"
  kill -INT "$job"
  wait "$job"
  rc=$?
  ((rc == 130)) || fail "ctrlz: exit $rc after SIGINT, not 130" "$work/ctrlz"
else
  fail "ctrlz: the ranks did not start" "$work/ctrlz"
  kill -KILL "$job"
fi

passed_or_exit
