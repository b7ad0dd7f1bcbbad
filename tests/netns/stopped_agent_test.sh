#!/usr/bin/env bash
# A frozen interior agent of the launch tree, on N namespace hosts (hosts.sh, default 7) at
# --tree-width W (default 2): the agent of node W+1 (below node1, with hosts below it) is
# SIGSTOPped mid-job and never resumed. ddlrun names it (and the hosts below it) lost and exits
# 1 within the heartbeat deadline D + 4 s; then, once its parent has given the host up, its
# keeper kills it and cleans up: within D + 4 s more nothing of the job is left on any host (no
# rank, agent or keeper; no /tmp/ddlrun.*, ddlrun-pmix.* or ddlrun-agent.*), without SIGCONT.
# Prints the seconds each part took.
#
# Usage: stopped_agent_test.sh DDLRUN [N [W [D]]]   (77, skipped, without root, ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
n=${2:-7}
width=${3:-2}
deadline=${4:-3}
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up "$n" || exit $?
netns_session
victim=$((width + 1))

# left: what of the job is on any host: "K pid args" lines, then "K path" lines.
left() {
  local k
  netns_job_procs_of "${NETNS_NUMBERS[@]}"
  for ((k = 1; k <= n; k++)); do
    netns_glob "$k" '/tmp/ddlrun.*' '/tmp/ddlrun-pmix.*' '/tmp/ddlrun-agent.*' | sed "s/^/$k /"
  done
}

echo "== node$victim's agent (interior) SIGSTOPped mid-job, never resumed"
env --default-signal=INT "$ddlrun" --launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" \
  --tree-width "$width" --heartbeat-timeout "$deadline" -H "$NETNS_LIST" --tag-output rank \
  sh -c 'echo "up $RANK"; sleep 60' </dev/null >"$out/stop" 2>&1 &
job_pid=$!
for ((i = 0; i < 600; i++)); do
  (($(grep -c ' up ' "$out/stop") >= n)) && break
  alive "$job_pid" || break
  sleep 0.1
done
(($(grep -c ' up ' "$out/stop") >= n)) || fail "not every rank started" "$out/stop"
agent=$(netns_agent_pid "$victim")
[[ -n $agent ]] || fail "no agent on node$victim"
kill -STOP "$agent"
t0=$(now_ms)
for ((i = 0; i < (deadline + 4) * 10; i++)); do
  alive "$job_pid" || break
  sleep 0.1
done
if alive "$job_pid"; then
  fail "ddlrun still running $((deadline + 4)) s after the agent's SIGSTOP" "$out/stop"
  kill -KILL "$job_pid"
fi
wait "$job_pid"
rc=$?
echo "  exit $rc, $(($(now_ms) - t0)) ms after the SIGSTOP"
[[ $rc == 1 ]] || fail "exit $rc, not 1" "$out/stop"
grep -Eq "^ddlrun: node$victim: .*; the [0-9]+ hosts? below it in the launch tree (is|are) lost with it" \
  "$out/stop" || fail "node$victim and its subtree are not named" "$out/stop"
t0=$(now_ms)
for ((i = 0; i < (deadline + 4) * 10; i++)); do
  [[ -z $(left) ]] && break
  sleep 0.1
done
rest=$(left)
[[ -z $rest ]] || fail "left $((deadline + 4)) s after ddlrun's end: $(tr '\n' ';' <<<"$rest")"
echo "  every host empty $(($(now_ms) - t0)) ms after ddlrun's end"
[[ -n $agent ]] && kill -CONT "$agent" 2>/dev/null  # (the test's own cleanup, after the check)

passed_or_exit
