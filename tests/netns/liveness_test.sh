#!/usr/bin/env bash
# Nothing in ddlrun may wait for ever on one host, on fake hosts
# (hosts.sh) through the ssh launcher with a libddl loop (ddl_loop.c) on 3 hosts x 2 ranks:
#   partition  node3's link goes down mid-job: ddlrun names node3 and "no heartbeat for 4 s"
#              and exits 1 within the deadline + 4 s; node3's agent, hearing nothing from
#              ddlrun, kills its ranks: nothing of the job is left there after deadline + 4 s;
#   frozen     node2's agent is SIGSTOPped: --timeout still fires, and one SIGTERM while
#              ddlrun waits for the frozen host ends it within 2 s with 124; after SIGCONT the
#              agent finds ddlrun gone and nothing of the job is left;
#   window     the same with 4 MB of stdin for rank 0 behind the frozen agent: writes wait for
#              the remote window instead of blocking, so the SIGTERM still ends ddlrun at once;
#   agent TERM node2's agent gets SIGTERM: ddlrun shows the agent's reason, and no
#              /tmp/ddlrun-agent.* stays on node2 (item 17a);
#   sigkill    ddlrun SIGKILLed: within 5 s nothing of the job on any host, children that left
#              their rank's process group (setsid) included, and no ddlrun temp dir
#              (/tmp/ddlrun.*, ddlrun-pmix.*, ddlrun-agent.*; item 3);
#   Ctrl-Z     SIGTSTP stops every rank on every host and ddlrun, for longer than the
#              deadline; SIGCONT resumes them all (item 6);
#   starting   SIGTERM while ddlrun waits for a host that never answers (--connect-timeout
#              30): ddlrun leaves within 2 s with 143, nothing left on the host that answered;
#   lost ddlrun  ddlrun itself is SIGSTOPped: every agent stops its ranks and exits within the
#              deadline + 4 s.
# Usage: liveness_test.sh DDLRUN DDL_LOOP   (77, skipped, without root, ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
loop=$(realpath "$2")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
netns_up 3 || exit $?
netns_session
deadline=4
common=(--launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" --tag-output rank
  -x DDL_TIMEOUT=60)

# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"  # alive

# gone K SECONDS NAME: nothing of the job on host K within SECONDS.
gone() {
  local left
  left=$(netns_job_left "$1" "$2")
  [[ -z $left ]] && return 0
  fail "$3: left on node$1 after $2 s: $(tr '\n' ';' <<<"$left")"
  # shellcheck disable=SC2046
  kill -KILL $(awk '{print $1}' <<<"$left") 2>/dev/null
}
# start NAME ARGS...: ddlrun in the background; job_pid, $out/NAME.
start() {
  local name=$1
  shift
  : >"$out/$name"
  env --default-signal=INT "$ddlrun" "${common[@]}" "$@" </dev/null >"$out/$name" 2>&1 &
  job_pid=$!
}
# running NAME N: until N ranks have been through their loop for a second (20 s at most).
running() {
  local i
  for ((i = 0; i < 200; i++)); do
    (($(grep -E ' rank [0-9]+ step [1-9]' "$out/$1" | awk '{print $3}' | sort -u | wc -l) >= $2)) &&
      return 0
    alive "$job_pid" || break
    sleep 0.1
  done
  fail "$1: the job did not start" "$out/$1"
  return 1
}
# ends NAME SECONDS: waits for ddlrun at most SECONDS; sets rc and took_ms (from now).
ends() {
  local t0 i
  t0=$(now_ms)
  for ((i = 0; i < $2 * 10; i++)); do
    alive "$job_pid" || break
    sleep 0.1
  done
  if alive "$job_pid"; then
    fail "$1: ddlrun still running $2 s later" "$out/$1"
    kill -KILL "$job_pid"
  fi
  wait "$job_pid"
  rc=$?
  took_ms=$(($(now_ms) - t0))
  echo "  $1: exit $rc, $took_ms ms"
}
# timed_out NAME: until ddlrun's --timeout has fired (its note in $out/NAME; 15 s at most), then
# its --kill-grace of 1 s and half a second more: the SIGKILL has gone out.
timed_out() {
  local i
  for ((i = 0; i < 150; i++)); do
    grep -q "timed out after" "$out/$1" && break
    sleep 0.1
  done
  sleep 1.5
}
agent_on() {
  local pid
  for pid in $(netns_pids "$1"); do
    [[ $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null) == *"--agent"* ]] && echo "$pid"
  done
}

echo "== partition: node3's link goes down"
start partition --heartbeat-timeout "$deadline" -H node1:2,node2:2,node3:2 "$loop"
if running partition 6; then
  ip -n "$(netns_ns 3)" link set "$(netns_veth 3)" down
  ends partition $((deadline + 4))
  grep '^ddlrun' "$out/partition"
  [[ $rc == 1 ]] || fail "partition: exit $rc, not 1" "$out/partition"
  grep -q "^ddlrun: node3: no heartbeat for $deadline s" "$out/partition" ||
    fail "partition: no 'node3: no heartbeat for $deadline s'" "$out/partition"
  gone 3 4 partition  # the agent's deadline ran from the cut, as ddlrun's did
  gone 1 3 partition
  gone 2 3 partition
  ip -n "$(netns_ns 3)" link set "$(netns_veth 3)" up
fi

echo "== frozen agent: node2's agent SIGSTOPped; --timeout, then one SIGTERM"
start frozen -H node1:2,node2:2 --timeout 6 --kill-grace 1 --heartbeat-timeout 60 "$loop"
if running frozen 4; then
  agent=$(agent_on 2)
  kill -STOP "$agent"
  timed_out frozen  # --timeout fired, SIGKILL went out; node2 cannot answer
  alive "$job_pid" || fail "frozen: ddlrun ended before the signal (no frozen host?)" "$out/frozen"
  kill -TERM "$job_pid"
  ends frozen 2
  grep '^ddlrun' "$out/frozen"
  [[ $rc == 124 ]] || fail "frozen: exit $rc, not 124" "$out/frozen"
  grep -q "timed out after 6 s" "$out/frozen" || fail "frozen: no timeout note" "$out/frozen"
  grep -q "got SIGTERM while stopping: killing every process now" "$out/frozen" ||
    fail "frozen: no note of the SIGTERM" "$out/frozen"
  kill -CONT "$agent"
  gone 2 4 frozen
  gone 1 3 frozen
fi

echo "== frozen agent, full window: 4 MB of stdin for rank 0 whose agent is SIGSTOPped"
mkfifo "$out/stdin"
: >"$out/window"
env --default-signal=INT "$ddlrun" "${common[@]}" -H node1:1,node2:1 --timeout 4 --kill-grace 1 \
  --heartbeat-timeout 60 sh -c 'echo "kids $RANK"; sleep 60' <"$out/stdin" >"$out/window" 2>&1 &
job_pid=$!
exec 7>"$out/stdin"
for ((i = 0; i < 100; i++)); do
  (($(grep -c 'kids' "$out/window") >= 2)) && break
  sleep 0.1
done
agent=$(agent_on 1)
kill -STOP "$agent"
head -c 4000000 /dev/zero >&7 &
feeder=$!
timed_out window  # --timeout fired; the window to node1 is full, the rest waits in ddlrun
kill -TERM "$job_pid"
ends window 2
[[ $rc == 124 ]] || fail "window: exit $rc, not 124" "$out/window"
kill "$feeder" 2>/dev/null
exec 7>&-
kill -CONT "$agent"
gone 1 4 window
gone 2 3 window

echo "== agent SIGTERMed: it stops its ranks and leaves no /tmp/ddlrun-agent.* behind"
start agent_term -H node1:2,node2:2 "$loop"
if running agent_term 4; then
  kill -TERM "$(agent_on 2)"
  ends agent_term 5
  # Its ranks die of its SIGTERM (143), or the channel closes first (1).
  [[ $rc == 143 || $rc == 1 ]] || fail "agent_term: exit $rc, not 143 or 1" "$out/agent_term"
  grep -q "^node2: ddlrun agent on node2: got SIGTERM; stopping its ranks" "$out/agent_term" ||
    fail "agent_term: the agent's reason is not shown" "$out/agent_term"
  gone 2 3 agent_term
  left=$(netns_exec 2 sh -c 'ls -d /tmp/ddlrun-agent.* 2>/dev/null')
  [[ -z $left ]] || fail "agent_term: left on node2: $left"
fi

echo "== ddlrun SIGKILLed: within 5 s nothing of the job on any host, setsid children included"
start sigkill -H node1:2,node2:2,node3:2 sh -c 'setsid sleep 33 & sleep 34 & echo "kids $$"; wait'
for ((i = 0; i < 100; i++)); do
  (($(grep -c 'kids ' "$out/sigkill") >= 6)) && break
  sleep 0.1
done
kill -KILL "$job_pid"
wait "$job_pid" 2>/dev/null
t0=$(now_ms)
for k in 1 2 3; do gone "$k" 5 sigkill; done
echo "  sigkill: every host empty $(($(now_ms) - t0)) ms after SIGKILL"
for k in 1 2 3; do
  left=$(netns_exec "$k" sh -c 'ls -d /tmp/ddlrun.* /tmp/ddlrun-pmix.* /tmp/ddlrun-agent.* 2>/dev/null')
  [[ -z $left ]] || fail "sigkill: left on node$k: $left"
done

echo "== Ctrl-Z: SIGTSTP stops every rank and ddlrun, longer than the deadline; SIGCONT resumes"
start ctrlz --heartbeat-timeout "$deadline" -H node1:2,node2:2,node3:2 "$loop"
if running ctrlz 6; then
  mapfile -t rank_pids < <(awk '$3 == "pid" {print $4}' "$out/ctrlz")
  kill -TSTP "$job_pid"
  sleep $((deadline + 2))
  for p in "$job_pid" "${rank_pids[@]}"; do
    [[ $(ps -o stat= -p "$p" | cut -c1) == T ]] || fail "ctrlz: pid $p is not stopped" "$out/ctrlz"
  done
  lines=$(wc -l <"$out/ctrlz")
  kill -CONT "$job_pid"
  sleep 2
  alive "$job_pid" || fail "ctrlz: the job did not survive the suspension" "$out/ctrlz"
  (($(wc -l <"$out/ctrlz") > lines)) || fail "ctrlz: the ranks did not resume" "$out/ctrlz"
  kill -INT "$job_pid"
  ends ctrlz 5
  [[ $rc == 130 ]] || fail "ctrlz: exit $rc after SIGINT, not 130" "$out/ctrlz"
fi

echo "== starting: SIGTERM while ddlrun waits for a host that does not answer"
cat >>"$NETNS_SSH_CONFIG" <<CFG
Host ghost
  HostName $(netns_spare_addr 1)
  User root
  IdentityFile $NETNS_KEY
  UserKnownHostsFile $NETNS_KNOWN_HOSTS
CFG
start starting --connect-timeout 30 -H node1,ghost true
sleep 1.5
kill -TERM "$job_pid"
ends starting 2
[[ $rc == 143 ]] || fail "starting: exit $rc, not 143" "$out/starting"
grep -qx "ddlrun: got SIGTERM while starting the job; leaving now" "$out/starting" ||
  fail "starting: no note of the SIGTERM" "$out/starting"
gone 1 3 starting

echo "== lost ddlrun: ddlrun SIGSTOPped, every agent gives it up"
start stopped --heartbeat-timeout "$deadline" -H node1:2,node2:2,node3:2 "$loop"
if running stopped 6; then
  kill -STOP "$job_pid"
  t0=$(now_ms)
  for k in 1 2 3; do gone "$k" $((deadline + 4)) stopped; done
  echo "  stopped: every host empty $(($(now_ms) - t0)) ms after ddlrun stopped"
  kill -KILL "$job_pid"
  wait "$job_pid" 2>/dev/null
fi

passed_or_exit
