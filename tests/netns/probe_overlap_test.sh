#!/usr/bin/env bash
# A slow host holds no thread of ddlrun's probe: N namespace hosts (default 40, more
# than the probe's 32 logins at once), each whose login shell sleeps 3 s before it runs the
# command (`sleep` in root's .bashrc, noting when each sleep starts and ends in a file every host
# sees). `ddlrun --dry-run --tree-width 0` probes them all flat over ssh, and so does a job
# (`ddlrun --tree-width 0 true`), whose probe asks each host's agent, which then runs the job.
# Checked for each:
#   - it exits 0 and every host was logged in to once (N sleeps);
#   - more than 32 hosts slept at the same moment: the probe's login threads start each host's
#     agent and move on, one thread reads them all (launcher/ssh/agent_tree.cc: ask_agents). A
#     thread that waits for its host's answer allows at most 32 (its pool);
#   - ddlrun never had 64 threads or more.
# Usage: probe_overlap_test.sh DDLRUN [N]   (77, skipped, without root, ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
n=${2:-40}
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up "$n" || exit $?
netns_session

sleeps="$NETNS_DIR/sleeps"
: >"$sleeps"
root_home=$(getent passwd root | cut -d: -f6)
for ((k = 1; k <= n; k++)); do
  # shellcheck disable=SC2016  # expanded by each host's shell
  netns_exec "$k" sh -c "cat >'$root_home/.bashrc'" <<RC
printf '%s +\n' "\${EPOCHREALTIME/./}" >>'$sleeps'
sleep 3
printf '%s -\n' "\${EPOCHREALTIME/./}" >>'$sleeps'
RC
done

# overlap WHAT ARGS...: ddlrun ARGS on every host, its probe's sleeps and threads checked.
overlap() {
  local what=$1 start job most rc began together
  shift
  : >"$sleeps"
  start=$EPOCHREALTIME
  timeout 120 "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tree-width 0 "$@" \
    -H "$NETNS_LIST" true >"$out/plan" 2>"$out/err" &
  job=$!
  most=$(most_threads_of_children "$job")  # timeout's child is ddlrun
  wait "$job"
  rc=$?
  echo "  ddlrun $what on $n hosts whose logins sleep 3 s: exit $rc in" \
    "$(echo "$EPOCHREALTIME - $start" | bc) s, $most threads at most"
  [[ $rc == 0 ]] || fail "$what: exit $rc, not 0" "$out/err"
  began=$(grep -c ' +$' "$sleeps")
  ((began == n)) || fail "$what: $began logins slept, not $n (one per host)" "$sleeps"
  together=$(sort -n "$sleeps" | awk '$2 == "+" {now++; if (now > most) most = now}
    $2 == "-" {now--} END {print most + 0}')
  echo "  at most $together hosts slept at once"
  ((together > 32)) ||
    fail "$what: at most $together of $n hosts slept at once: a thread waited for each"
  ((most > 0 && most < 64)) || fail "$what: ddlrun had $most threads at most, not 1 to 63"
}
overlap --dry-run --dry-run
overlap job
passed_or_exit
