#!/usr/bin/env bash
# The ssh launcher's launch tree on N namespace hosts (hosts.sh) at fan-out
# W (default 64 hosts, W 4: three levels of hosts), one rank a host:
#   job     `ddlrun --tree-width W` with stdin: every rank's line arrives, rank 0 echoes its
#           stdin, ddlrun exits 0; only the first W hosts were logged in to from ddlrun's side,
#           every other host from another host's address (its tree parent);
#   status  the deepest rank exits 7: ddlrun exits 7;
#   probe   the same job probed (no --no-probe): the probe goes down the tree too, so ddlrun
#           logs in to the first W hosts only and every host sees exactly one login in all
#           (probe and launch), each below the first level from its tree parent; ranks run;
#           every inventory lands in the job's disk cache (--job-id); again with the cache,
#           two hosts below the first level left out of it (probed again through the tree,
#           the others only launched): still one login per host;
#   plan_wait  ddlrun plans for longer than the heartbeat deadline after the probe (the test
#           hook DDLRUN_TEST_PLAN_DELAY_MS): its heartbeats keep the waiting agents, and the
#           job runs, one login per host;
#   plan_kill  ddlrun SIGKILLed while it plans, an agent waiting on every host: every host is
#           empty within the heartbeat deadline;
#   plan_stop  the same with ddlrun frozen (SIGSTOP; its connections stay open, its heartbeats
#           stop): every host is empty within the heartbeat deadline + 2 s;
#   dry_run --dry-run probes through the tree too: one login per host, the first level's from
#           ddlrun's host, every inventory in the job's cache, and nothing left on any host;
#   restart --max-restarts 1: rank N-1 fails once every rank runs, and meanwhile the logins
#           of node2 (first level) and node W+1 (below node1) are broken: the restart's probe
#           goes down the tree (one login per host per attempt, again only the first level's
#           from ddlrun's host), names node W+1 with its tree parent, node2, and the hosts
#           below each as not reached, leaves them out, and the job runs again on the others
#           without a second login to any of them;
#   pmix    (given PMIX_CLIENT) a PMIx fence that collects data, then one that does not (each
#           Get of another host's key a direct modex), every rank's keys all found: fences
#           and modex travel the tree;
#   threads ddlrun's threads stay under W + 16 while every rank runs (no thread per host);
#   chaos   the agent of an interior host of the second level (node W+1, with hosts below it)
#           is SIGKILLed mid-job: ddlrun names that host and the hosts below it and exits 1
#           within the heartbeat deadline + 4 s; then nothing of the job is left on any host
#           (no rank, agent or keeper; no /tmp/ddlrun.*, ddlrun-pmix.* or ddlrun-agent.*);
#   unreach the sshds of the last host and of an interior one stopped, and the login of the
#           host before the last exiting 3, probed: ddlrun names each with its tree parent
#           (and the failed one's stderr) and the hosts below the interior one as not reached,
#           exits 1, and nothing is left on any host; the same with --dry-run.
# Prints the seconds each part took.
#
# Usage: tree_test.sh DDLRUN [N [W [PMIX_CLIENT]]]   (exit 77, skipped, when not root or without
# ip netns)
set -uo pipefail
ddlrun=$(realpath "$1")
n=${2:-64}
width=${3:-4}
pmix_client=${4:+$(realpath "$4")}
deadline=4
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
t0=$(now_ms)
netns_up "$n" || exit $?
echo "  netns_up $n hosts: $(($(now_ms) - t0)) ms"
netns_session
common=(--launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" --tree-width "$width"
  --heartbeat-timeout "$deadline" -H "$NETNS_LIST")

# nothing_left NAME SECONDS: within SECONDS no process of the job and no temporary directory of
# ddlrun's on any host (every host looked at together: netns_job_procs_of).
nothing_left() {
  local k i left mine
  for ((i = 0; i < $2 * 10; i++)); do
    left=$(netns_job_procs_of "${NETNS_NUMBERS[@]}")
    [[ -z $left ]] && break
    sleep 0.1
  done
  for ((k = 1; k <= n; k++)); do
    if [[ -n $left ]]; then
      mine=$(awk -v k="$k" '$1 == k { sub(/^[0-9]+ /, ""); print }' <<<"$left")
      [[ -z $mine ]] || fail "$1: left on node$k: $(tr '\n' ';' <<<"$mine")"
    fi
    # (not /tmp/ddlrun*: a checkout cloned there is bound into every host by hosts.sh)
    mine=$(netns_glob "$k" '/tmp/ddlrun.*' '/tmp/ddlrun-pmix.*' '/tmp/ddlrun-agent.*')
    [[ -z $mine ]] || fail "$1: left in node$k's /tmp: $mine"
  done
}
from_head() { grep -c "Accepted publickey for root from $NETNS_HOST_ADDR " "$NETNS_DIR/node$1/sshd.log"; }
logins() { grep -c "Accepted publickey for root from " "$NETNS_DIR/node$1/sshd.log"; }

echo "== job: every line, stdin to rank 0, exit 0"
t0=$(now_ms)
printf 'stdin-line-1\nstdin-line-2\n' |
  timeout 120 "$ddlrun" "${common[@]}" --tag-output none \
    sh -c 'echo "line of rank $RANK on $(hostname)"; if [ "$RANK" = 0 ]; then sed "s/^/echo /"; fi' \
    >"$out/job" 2>"$out/job.err"
rc=$?
echo "  job: exit $rc, $(($(now_ms) - t0)) ms"
[[ $rc == 0 ]] || fail "job: exit $rc, not 0" "$out/job.err"
for ((k = 1; k <= n; k++)); do
  grep -qx "line of rank $((k - 1)) on node$k" "$out/job" || fail "job: no line of rank $((k - 1))" "$out/job"
done
(($(grep -c '^line of rank ' "$out/job") == n)) || fail "job: not $n lines" "$out/job"
[[ $(grep '^echo ' "$out/job") == $'echo stdin-line-1\necho stdin-line-2' ]] ||
  fail "job: rank 0 did not get its stdin" "$out/job"
for ((k = 1; k <= n; k++)); do
  if ((k <= width)); then
    (($(from_head "$k") >= 1)) || fail "job: node$k (first level) not logged in to from ddlrun"
  else
    (($(from_head "$k") == 0)) || fail "job: ddlrun logged in to node$k itself (not in the tree)"
  fi
done
grep -q "Accepted publickey for root from $(netns_addr 1) " "$NETNS_DIR/node$((width + 1))/sshd.log" ||
  fail "job: node$((width + 1)) was not logged in to from node1, its tree parent"

echo "== status: the deepest rank exits 7"
t0=$(now_ms)
timeout 120 "$ddlrun" "${common[@]}" sh -c "exit \$((RANK == $((n - 1)) ? 7 : 0))" \
  </dev/null >"$out/status" 2>&1
rc=$?
echo "  status: exit $rc, $(($(now_ms) - t0)) ms"
[[ $rc == 7 ]] || fail "status: exit $rc, not 7" "$out/status"

# count_logins: each host's logins so far, in all and from ddlrun's host (before_all,
# before_head).
declare -A before_all before_head
# ranks_up PATTERN FILE JOB: waits (60 s at most, or until JOB has ended) until FILE holds n lines
# matching PATTERN (grep); true when it does.
ranks_up() {
  local i
  for ((i = 0; i < 600; i++)); do
    (($(grep -c "$1" "$2") >= n)) && return 0
    alive "$3" || break
    sleep 0.1
  done
  (($(grep -c "$1" "$2") >= n))
}

count_logins() {
  local k
  for ((k = 1; k <= n; k++)); do
    before_all[$k]=$(logins "$k")
    before_head[$k]=$(from_head "$k")
  done
}
# check_logins NAME [SKIP...]: since count_logins, every host but the SKIP ones was logged in
# to exactly once, from ddlrun's host for the first level only, from another host below it.
check_logins() {
  local k got head head_logins=0 all_logins=0 name=$1
  shift
  for ((k = 1; k <= n; k++)); do
    [[ " $* " == *" $k "* ]] && continue
    got=$(($(logins "$k") - before_all[$k]))
    head=$(($(from_head "$k") - before_head[$k]))
    all_logins=$((all_logins + got)) head_logins=$((head_logins + head))
    ((got == 1)) || fail "$name: node$k was logged in to $got times, not once"
    if ((k <= width)); then
      ((head == 1)) || fail "$name: node$k (first level) not logged in to from ddlrun"
    else
      ((head == 0)) || fail "$name: ddlrun logged in to node$k itself (not through the tree)"
    fi
  done
  echo "  $name: $head_logins logins from ddlrun's host, $all_logins in all, for $((n - $#)) hosts"
}
# probe_job NAME [JOB_ID]: a probed job of the job id JOB_ID (default tree-probe; its
# inventories in the job's disk cache): every rank's line, exactly one login per host in all,
# from ddlrun's host for the first level only.
probe_job() {
  local rc t0
  count_logins
  t0=$(now_ms)
  timeout 120 "$ddlrun" "${probed[@]}" --job-id "${2:-tree-probe}" --tag-output none \
    sh -c 'echo "probed rank $RANK"' </dev/null >"$out/$1" 2>&1
  rc=$?
  echo "  $1: exit $rc, $(($(now_ms) - t0)) ms"
  [[ $rc == 0 ]] || fail "$1: exit $rc, not 0" "$out/$1"
  (($(grep -c '^probed rank ' "$out/$1") == n)) || fail "$1: not $n lines" "$out/$1"
  check_logins "$1"
}
probed=()
for a in "${common[@]}"; do [[ $a == --no-probe ]] || probed+=("$a"); done
cache="$XDG_CACHE_HOME/ddlrun/probe/tree-probe"
echo "== probe: one login per host in all, through the tree"
probe_job probe
(($(ls "$cache" | grep -c '\.yaml$') == n)) || fail "probe: not $n inventories in the job's cache"
echo "== probe_cached: the same with the cache, two hosts below the first level left out of it"
rm -f "$cache/node$((width + 2)).yaml" "$cache/node$((n - 1)).yaml"
sleep 1.1 && touch "$out/marker"
probe_job probe_cached
for k in 1 $((width + 1)) "$n"; do
  [[ $cache/node$k.yaml -nt $out/marker ]] && fail "probe_cached: node$k probed again, not read from the cache"
done
for k in $((width + 2)) $((n - 1)); do
  [[ -s $cache/node$k.yaml ]] || fail "probe_cached: node$k not probed again into the cache"
done

# agents_up: how many hosts run an agent of ddlrun's (--agent, --probe-agent).
agents_up() {
  local k pid args
  local -A up=()
  while read -r k pid args; do
    [[ " $args" == *" --"*agent* ]] && up[$k]=1
  done < <(netns_job_procs_of "${NETNS_NUMBERS[@]}")
  echo "${#up[@]}"
}

echo "== plan_wait: ddlrun plans for longer than the heartbeat deadline after the probe"
export DDLRUN_TEST_PLAN_DELAY_MS=$(((deadline + 2) * 1000))
probe_job plan_wait tree-plan-wait
unset DDLRUN_TEST_PLAN_DELAY_MS
grep -q 'DDLRUN_TEST_PLAN_DELAY_MS: planning' "$out/plan_wait" ||
  fail "plan_wait: planning was not delayed" "$out/plan_wait"

# plan_fault NAME SIGNAL SECONDS: ddlrun gets SIGNAL while it plans, an agent waiting on every
# host; then within SECONDS every host is empty, and ddlrun is gone.
plan_fault() {
  local up
  : >"$out/$1"
  DDLRUN_TEST_PLAN_DELAY_MS=120000 "$ddlrun" "${probed[@]}" --job-id "tree-$1" true \
    </dev/null >"$out/$1" 2>&1 &
  job_pid=$!
  for ((i = 0; i < 600; i++)); do
    grep -q 'DDLRUN_TEST_PLAN_DELAY_MS: planning' "$out/$1" && break
    alive "$job_pid" || break
    sleep 0.1
  done
  grep -q 'DDLRUN_TEST_PLAN_DELAY_MS: planning' "$out/$1" ||
    fail "$1: ddlrun did not get to its planning" "$out/$1"
  sleep 1
  up=$(agents_up)
  echo "  $1: $up hosts run an agent while ddlrun plans"
  ((up == n)) || fail "$1: $up of $n hosts run an agent while ddlrun plans" "$out/$1"
  kill -"$2" "$job_pid"
  t0=$(now_ms)
  nothing_left "$1" "$3"
  echo "  $1: every host checked empty $(($(now_ms) - t0)) ms after the SIG$2"
  kill -KILL "$job_pid" 2>/dev/null
  wait "$job_pid" 2>/dev/null
}
echo "== plan_kill: ddlrun SIGKILLed while it plans, every host's agent waiting for its job"
plan_fault plan_kill KILL "$deadline"
echo "== plan_stop: ddlrun frozen (SIGSTOP) while it plans: its heartbeats stop"
plan_fault plan_stop STOP $((deadline + 2))

echo "== dry_run: --dry-run probes through the tree too, and leaves nothing"
count_logins
t0=$(now_ms)
timeout 120 "$ddlrun" "${probed[@]}" --job-id tree-dry --dry-run true </dev/null \
  >"$out/dry_run" 2>&1
rc=$?
echo "  dry_run: exit $rc, $(($(now_ms) - t0)) ms"
[[ $rc == 0 ]] || fail "dry_run: exit $rc, not 0" "$out/dry_run"
(($(ls "$XDG_CACHE_HOME/ddlrun/probe/tree-dry" | grep -c '\.yaml$') == n)) ||
  fail "dry_run: not $n inventories in the job's cache" "$out/dry_run"
check_logins dry_run
nothing_left dry_run 5

victim=$((width + 1)) top=2 go=/tmp/tree-restart-go
home=$(getent passwd root | cut -d: -f6)
echo "== restart: rank $((n - 1)) fails; the logins of node$top (first level) and node$victim" \
  "(below node1) broken before the restart's probe"
count_logins
t0=$(now_ms)
: >"$out/restart"
"$ddlrun" "${probed[@]}" --job-id tree-restart --max-restarts 1 --min-hosts $((n / 2)) \
  --tag-output none sh -c '
  if [ "${DDL_RESTART_COUNT:-0}" = 0 ]; then
    echo "up $RANK"
    if [ "$RANK" = '"$((n - 1))"' ]; then
      while [ ! -e '"$go"' ]; do sleep 0.1; done
      exit 5
    fi
    exec sleep 60
  fi
  echo "again $RANK"' </dev/null >"$out/restart" 2>&1 &
job_pid=$!
ranks_up '^up ' "$out/restart" "$job_pid" || fail "restart: not every rank started" "$out/restart"
check_logins restart_first
count_logins
for k in "$top" "$victim"; do
  netns_exec "$k" sh -c "echo 'echo broken login >&2; exit 3' >'$home/.bashrc'"
done
netns_exec "$n" touch "$go"
for ((i = 0; i < 1200; i++)); do
  alive "$job_pid" || break
  sleep 0.1
done
alive "$job_pid" && kill -KILL "$job_pid"
wait "$job_pid"
rc=$?
echo "  restart: exit $rc, $(($(now_ms) - t0)) ms"
grep '^ddlrun' "$out/restart" | grep -v 'not reached' | head -5
[[ $rc == 0 ]] || fail "restart: exit $rc, not 0" "$out/restart"
grep -Eq "^ddlrun: node$victim does not answer \('.*--probe-agent' exited with status 3 \(from node1, its parent in the launch tree\); its stderr:" \
  "$out/restart" || fail "restart: node$victim's failed probe is not named with its tree parent" "$out/restart"
grep -Eq "^ddlrun: node$top does not answer \('.*--probe-agent' exited with status 3; its stderr:" \
  "$out/restart" || fail "restart: node$top's failed probe is not named" "$out/restart"
left_out="$top $victim"
for k in "$top" "$victim"; do
  below=$(sed -nE "s/^ddlrun: node([0-9]+) does not answer \(not reached: node$k, above it in the launch tree, failed\); left out$/\1/p" "$out/restart")
  (($(wc -w <<<"$below") >= 1)) || fail "restart: the hosts below node$k are not named" "$out/restart"
  left_out+=" $below"
  for j in $below; do
    (($(logins "$j") == before_all[$j])) || fail "restart: node$j, below node$k, logged in to"
  done
done
again=$((n - $(wc -w <<<"$left_out")))
(($(grep -c '^again ' "$out/restart") == again)) ||
  fail "restart: not $again ranks ran again" "$out/restart"
# shellcheck disable=SC2086  # a list of host numbers
check_logins restart_again $left_out
for k in "$top" "$victim"; do
  (($(logins "$k") - before_all[$k] == 1)) || fail "restart: node$k's login not tried once"
  netns_exec "$k" sh -c "rm -f '$home/.bashrc'"
done
netns_exec "$n" rm -f "$go"
nothing_left restart 5

if [[ -n $pmix_client ]]; then
  for mode in collect nocollect; do
    echo "== pmix: $mode"
    t0=$(now_ms)
    timeout 120 "$ddlrun" "${common[@]}" --tag-output none "$pmix_client" "$mode" </dev/null \
      >"$out/pmix_$mode" 2>&1
    rc=$?
    echo "  pmix $mode: exit $rc, $(($(now_ms) - t0)) ms"
    [[ $rc == 0 ]] || fail "pmix $mode: exit $rc, not 0" "$out/pmix_$mode"
    ok=$(grep -c "fence, $n keys ok\$" "$out/pmix_$mode")
    ((ok == n)) || fail "pmix $mode: $ok of $n ranks found every key" "$out/pmix_$mode"
  done
fi

echo "== chaos: node$((width + 1))'s agent (an interior host) SIGKILLed mid-job"
: >"$out/chaos"
env --default-signal=INT "$ddlrun" "${common[@]}" --tag-output rank \
  sh -c 'echo "up $RANK"; sleep 60' </dev/null >"$out/chaos" 2>&1 &
job_pid=$!
ranks_up ' up ' "$out/chaos" "$job_pid" || fail "chaos: not every rank started" "$out/chaos"
threads=$(awk '/^Threads:/ {print $2}' "/proc/$job_pid/status")
echo "  ddlrun's threads with $n ranks running: $threads"
((threads <= width + 16)) || fail "chaos: ddlrun runs $threads threads for $n hosts at width $width"
victim=$((width + 1))
agent=$(netns_agent_pid "$victim")
[[ -n $agent ]] || fail "chaos: no agent on node$victim"
kill -KILL "$agent"
t0=$(now_ms)
for ((i = 0; i < (deadline + 4) * 10; i++)); do
  alive "$job_pid" || break
  sleep 0.1
done
if alive "$job_pid"; then
  fail "chaos: ddlrun still running $((deadline + 4)) s after the agent's SIGKILL" "$out/chaos"
  kill -KILL "$job_pid"
fi
wait "$job_pid"
rc=$?
echo "  chaos: exit $rc, $(($(now_ms) - t0)) ms after the SIGKILL"
grep '^ddlrun' "$out/chaos" | head -3
[[ $rc == 1 ]] || fail "chaos: exit $rc, not 1" "$out/chaos"
grep -Eq "^ddlrun: node$victim: .*; the [0-9]+ hosts? below it in the launch tree (is|are) lost with it" \
  "$out/chaos" || fail "chaos: node$victim and its subtree are not named" "$out/chaos"
t0=$(now_ms)
nothing_left chaos $((deadline + 4))
echo "  chaos: every host checked empty $(($(now_ms) - t0)) ms later"

victim=$((width + 1)) broken=$((n - 1))
echo "== unreach: the sshds of node$n (a leaf) and node$victim (interior) stopped, node$broken's" \
  "login exits 3, probed"
netns_stop_sshd "$n"
netns_stop_sshd "$victim"
netns_exec "$broken" sh -c "echo 'echo broken login >&2; exit 3' >'$(getent passwd root | cut -d: -f6)/.bashrc'"
for run in unreach unreach_dry; do
  extra=()
  [[ $run == unreach_dry ]] && extra=(--dry-run)
  t0=$(now_ms)
  timeout 120 "$ddlrun" "${probed[@]}" "${extra[@]}" true </dev/null >"$out/$run" 2>&1
  rc=$?
  echo "  $run: exit $rc, $(($(now_ms) - t0)) ms"
  [[ $run == unreach ]] && grep '^ddlrun\|^  node' "$out/$run" | head -6
  [[ $rc == 1 ]] || fail "$run: exit $rc, not 1" "$out/$run"
  below=$(grep -cE "^  node[0-9]+: not reached: node$victim, above it in the launch tree, failed$" "$out/$run")
  grep -q "cannot probe $((below + 3)) of $n hosts:" "$out/$run" ||
    fail "$run: not $((below + 3)) of $n hosts" "$out/$run"
  grep -A1 -E "^  node$broken: '.*--probe-agent' exited with status 3 \(from node[0-9]+, its parent in the launch tree\); its stderr:$" \
    "$out/$run" | grep -qx "      broken login" || fail "$run: node$broken's failed probe is not named" "$out/$run"
  ((below >= 1)) || fail "$run: the hosts below node$victim are not named" "$out/$run"
  for k in "$n" "$victim"; do
    grep -Eq "^  node$k: connection refused \(.*\) \(from node[0-9]+, its parent in the launch tree\)$" \
      "$out/$run" || fail "$run: node$k is not named with its tree parent" "$out/$run"
  done
  nothing_left "$run" 5
done

((fails == 0)) || {
  echo "$fails check(s) failed"
  exit 1
}
echo "PASS"
