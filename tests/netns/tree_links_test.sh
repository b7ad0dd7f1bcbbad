#!/usr/bin/env bash
# ddlrun --probe-links down the launch tree (launcher/ssh/tree_links.h) on 3 racks x 4 namespace
# hosts (hosts.sh's netns_up_racks: host links shaped to 1 Gbit/s, the racks' uplinks to
# 250 Mbit/s), one rank a host, at --tree-width 2: node1 and node2 on the first level, three
# levels of hosts (node3 below node1, node5 and node6 below node3):
#   flat    --dry-run --probe-links --tree-width 0: the racks the flat measurement finds;
#   tree    the same at --tree-width 2: the same racks, pairs measured, and each host
#           logged in to exactly once, the first level from ddlrun's host only, every other
#           host from another host (its tree parent); nothing left on any host;
#   launch  a job with --probe-links at --tree-width 2: every rank's line, exit 0, and still
#           one login per host for the probe, the measurement and the launch;
#   nolisten  node3's port 29555 taken (--probe-links-port 29555): its link agent cannot
#           start; the warning names node3 in the same words, flat and through the tree;
#   killed  node3's agent SIGKILLed once its link agent listens, mid-measurement of a job
#           (inside the agent's process, no `ddlrun --link-agent` command runs there): ddlrun
#           names node3 in its --probe-links warnings, then the launch names node3 with the
#           2 hosts below it and starts no rank; exit 1 in bounded time, nothing left on any
#           host;
#   killed1 the same for node1, on the first level (its connection from ddlrun lost): the
#           launch names node1 once with the hosts below it, logs in to no host again (nor
#           runs a new agent on node1), starts no rank; exit 1, nothing left on any host;
#   gone1   node1's agent SIGKILLed after the probe, while ddlrun plans (the test hook
#           DDLRUN_TEST_PLAN_DELAY_MS), a job without --probe-links: the launch finds its kept
#           connection dead and names node1 once with the hosts below it, logs in to no host
#           again (a new agent on node1 would log in to its subtree again), starts no rank;
#           exit 1, nothing left on any host;
#   hung    node10's agent (a leaf) SIGSTOPped once its link agent listens, heartbeat deadline
#           3 s: its parent finds it silent, ddlrun names node10 in a --probe-links warning
#           within 30 s; continued, it finds its parent gone and exits: nothing is left.
# Then no namespace is left.
#
# Usage: tree_links_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns/sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
n=12
width=2

netns_up_racks 3 4 || exit $?
netns_session
for ((k = 1; k <= n; k++)); do netns_shape "$k" 1gbit || fail "tc could not shape node$k"; done
netns_shape_uplink 250mbit || fail "tc could not shape the uplinks"
hosts=$(printf 'node%d:1,' $(seq "$n"))
hosts=${hosts%,}

# run NAME EXPECTED_RC ARGS...: ddlrun with the hosts' ssh config; $out/NAME, NAME.err.
run() {
  local name=$1 want=$2 rc start=$SECONDS
  shift 2
  timeout 120 "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" "$@" >"$out/$name" \
    2>"$out/$name.err"
  rc=$?
  echo "  $name: exit $rc ($((SECONDS - start)) s)"
  ((rc == want)) || fail "$name: exit $rc, not $want" "$out/$name.err"
}

from_head() { grep -c "Accepted publickey for root from $NETNS_HOST_ADDR " "$NETNS_DIR/node$1/sshd.log"; }
logins() { grep -c "Accepted publickey for root from " "$NETNS_DIR/node$1/sshd.log"; }
declare -A before_all before_head
count_logins() {
  local k
  for ((k = 1; k <= n; k++)); do
    before_all[$k]=$(logins "$k")
    before_head[$k]=$(from_head "$k")
  done
}
# check_logins NAME: since count_logins, every host was logged in to exactly once, from
# ddlrun's host for the first level only.
check_logins() {
  local k got head
  for ((k = 1; k <= n; k++)); do
    got=$(($(logins "$k") - before_all[$k]))
    head=$(($(from_head "$k") - before_head[$k]))
    ((got == 1)) || fail "$1: node$k was logged in to $got times, not once"
    if ((k <= width)); then
      ((head == 1)) || fail "$1: node$k (first level) not logged in to from ddlrun"
    else
      ((head == 0)) || fail "$1: ddlrun logged in to node$k itself (not through the tree)"
    fi
  done
}
# nothing_left NAME: within 5 s no process of ddlrun's on any host (only sshd's), and no
# directory of its agents' in their /tmp.
nothing_left() {
  local k left
  for ((k = 1; k <= n; k++)); do
    left=$(netns_job_left "$k" 5)
    [[ -z $left ]] || fail "$1: left on node$k: $(tr '\n' ';' <<<"$left")"
    left=$(netns_exec "$k" sh -c 'ls -d /tmp/ddlrun-pmix.* /tmp/ddlrun-agent.* 2>/dev/null')
    [[ -z $left ]] || fail "$1: left in node$k's /tmp: $left"
  done
}
racks_of() { grep '^  racks:' "$out/$1"; }

echo "== flat and tree: the same racks"
# A loaded machine can blur one measurement (the rounds run all at once): the pair of runs is
# made once more when their racks differ, and must then agree.
for attempt in 1 2; do
  run flat 0 --dry-run --probe-links --tree-width 0 -H "$hosts" prog
  count_logins
  run tree 0 --dry-run --probe-links -v --tree-width "$width" -H "$hosts" prog
  check_logins tree
  echo "  flat: $(racks_of flat)"
  echo "  tree: $(racks_of tree)"
  [[ -n $(racks_of tree) && $(racks_of tree) == "$(racks_of flat)" ]] && break
  ((attempt == 1)) && echo "  the racks differ: both measured again"
done
grep -Fxq "  racks:   3 racks of 4 hosts: node1 node2 node3 node4 | node5 node6 node7 node8 | node9 node10 node11 node12" \
  "$out/flat" || fail "flat: not the three racks" "$out/flat" "$out/flat.err"
[[ -n $(racks_of tree) && $(racks_of tree) == "$(racks_of flat)" ]] ||
  fail "tree: other racks than flat" "$out/tree" "$out/tree.err"
# (every pair when the 1.5 s allow, a sample spread over every host when they do not)
grep -Eq "^links: +[1-9][0-9]* of 66 host pairs measured in " "$out/tree" ||
  fail "tree: no pair measured" "$out/tree"
grep -q "link agent" "$out/tree.err" && fail "tree: a link agent's warning" "$out/tree.err"
nothing_left tree

echo "== launch: the job takes over the tree the links were measured through"
count_logins
run launch 0 --probe-links --tree-width "$width" --tag-output none -H "$hosts" \
  sh -c 'echo "rank $RANK on $(hostname)"'
check_logins launch
(($(grep -c '^rank ' "$out/launch") == n)) || fail "launch: not $n lines" "$out/launch" "$out/launch.err"
grep -q "link agent" "$out/launch.err" && fail "launch: a link agent's warning" "$out/launch.err"
nothing_left launch

echo "== nolisten: node3's link agent cannot listen, named alike flat and through the tree"
# (not a job of this shell's: the listener is killed by its pid below)
(netns_exec 3 /usr/bin/python3 -c '
import socket, time
s = socket.socket()
s.bind(("0.0.0.0", 29555))
s.listen()
time.sleep(300)' &) 2>/dev/null
for _ in $(seq 50); do
  ip netns exec "$(netns_ns 3)" ss -ltnH 'sport = :29555' | grep -q . && break
  sleep 0.1
done
run nolisten_flat 0 --dry-run --probe-links --probe-links-port 29555 --tree-width 0 -H "$hosts" prog
run nolisten_tree 0 --dry-run --probe-links --probe-links-port 29555 --tree-width "$width" \
  -H "$hosts" prog
for pid in $(netns_job_procs 3 | awk '/python3/ { print $1 }'); do kill "$pid"; done
expected="ddlrun: warning: --probe-links: cannot start the link agent on 1 of 12 hosts:"
for run_name in nolisten_flat nolisten_tree; do
  grep -Fxq "$expected" "$out/$run_name.err" || fail "$run_name: no warning '$expected'" "$out/$run_name.err"
  grep -Eq "^  node3: its link agent printed 'error cannot listen on TCP port 29555: .*', not a link agent's greeting; is ddlrun the same version there\?; planned without measured links$" \
    "$out/$run_name.err" || fail "$run_name: node3 not named" "$out/$run_name.err"
done
diff <(grep -A1 -- "--probe-links" "$out/nolisten_flat.err") \
  <(grep -A1 -- "--probe-links" "$out/nolisten_tree.err") >"$out/nolisten.diff" ||
  fail "nolisten: the tree's warning is not the flat one's" "$out/nolisten.diff"
nothing_left nolisten

# listening K JOB: waits (30 s at most) until node K's link agent listens on port 29555; false
# when the job JOB ended first or it never did.
listening() {
  for _ in $(seq 600); do
    ip netns exec "$(netns_ns "$1")" ss -ltnH 'sport = :29555' | grep -q . && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# failed_launch NAME RC KILLED WHY: the checks of a job whose host was killed (KILLED 1; WHY
# says why it was not): it exited 1 within 30 s of SECONDS=0 and no rank ran.
failed_launch() {
  local name=$1 rc=$2
  echo "  $name: exit $rc ($SECONDS s)"
  (($3)) || fail "$name: $4" "$out/$name.err"
  ((rc == 1)) || fail "$name: exit $rc, not 1" "$out/$name.err"
  ((SECONDS <= 30)) || fail "$name: took $SECONDS s"
  grep -q "^rank " "$out/$name" && fail "$name: ranks ran" "$out/$name"
}

# kill_mid_measurement NAME K: a job with --probe-links at --tree-width 2, node K's agent
# SIGKILLed once its link agent listens (inside the agent's process: no `ddlrun --link-agent`
# command runs there, so no token on a command line); the job must exit 1 within 30 s, naming
# node K in $out/NAME.err and starting no rank.
kill_mid_measurement() {
  local name=$1 k=$2 killed=0 job rc pid
  SECONDS=0
  "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --probe-links --probe-links-port 29555 \
    --tree-width "$width" -H "$hosts" sh -c 'echo "rank $RANK"' </dev/null >"$out/$name" \
    2>"$out/$name.err" &
  job=$!
  if listening "$k" "$job"; then
    netns_job_procs "$k" | grep -q -- "--link-agent" && fail "$name: node$k runs a --link-agent command"
    for pid in $(netns_job_procs "$k" | awk '/--probe-agent/ { print $1 }'); do kill -9 "$pid"; done
    killed=1
  fi
  wait "$job"
  rc=$?
  failed_launch "$name" "$rc" "$killed" "node$k's link agent was never seen listening"
}

echo "== killed: node3 (interior, below node1) dies mid-measurement of a job"
kill_mid_measurement killed 3
grep -E "^ddlrun: warning: --probe-links: " "$out/killed.err" | grep -q "node3" ||
  grep -A12 "^ddlrun: warning: --probe-links: cannot start the link agent" "$out/killed.err" |
  grep -q "^  node3: the link agent ended" ||
  fail "killed: node3 not named in a --probe-links warning" "$out/killed.err"
# The launch that takes the tree over names it too, with the hosts below it, and starts none.
grep -Fxq "ddlrun: error: cannot start the job on 1 of 12 hosts:" "$out/killed.err" &&
  grep -Eq "^  node3: .* \(from node1, its parent in the launch tree\); the 2 hosts below it in the launch tree are lost with it$" \
    "$out/killed.err" || fail "killed: the launch does not name node3 and its subtree" "$out/killed.err"
grep -E "probe-links: node3|node3:" "$out/killed.err" | head -4 | sed 's/^/    /'
nothing_left killed

echo "== killed1: node1 (first level, logged in to by ddlrun) dies mid-measurement of a job"
count_logins
kill_mid_measurement killed1 1
# Named once, by the launch, with the hosts below it; no host logged in to again (the launch
# ran no new agent on node1, which would have logged in to its subtree once more).
grep -Fxq "ddlrun: error: cannot start the job on 1 of 12 hosts:" "$out/killed1.err" &&
  grep -Eq "^  node1: the connection to its agent closed; the [0-9]+ hosts below it in the launch tree are lost with it$" \
    "$out/killed1.err" || fail "killed1: the launch does not name node1 and its subtree" "$out/killed1.err"
# (The measurement's own warning may name a host below node1 whose link agent had not started
# yet when node1 died, "lost with its tree parent ...": timing; the launch names node1 alone.)
(($(sed -n '/^ddlrun: error: cannot start the job/,$p' "$out/killed1.err" | grep -c "^  node") == 1)) ||
  fail "killed1: the launch does not name one host" "$out/killed1.err"
check_logins killed1
grep -E "^  node1:" "$out/killed1.err" | sed 's/^/    /'
nothing_left killed1

echo "== gone1: node1's agent dies after the probe, before the launch takes its connection over"
count_logins
SECONDS=0
DDLRUN_TEST_PLAN_DELAY_MS=3000 "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" \
  --tree-width "$width" -H "$hosts" sh -c 'echo "rank $RANK"' </dev/null >"$out/gone1" \
  2>"$out/gone1.err" &
job=$!
killed=0
for _ in $(seq 600); do  # ddlrun plans 3 s longer once the probe is done: its agents wait
  if grep -q "DDLRUN_TEST_PLAN_DELAY_MS: planning" "$out/gone1.err"; then
    for pid in $(netns_job_procs 1 | awk '/--probe-agent/ { print $1 }'); do kill -9 "$pid"; done
    killed=1
    break
  fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
wait "$job"
failed_launch gone1 $? "$killed" "ddlrun never said it plans"
# Named once, with the hosts below it; no host logged in to again (a new agent on node1 would
# have logged in to its subtree a second time).
grep -Fxq "ddlrun: error: cannot start the job on 1 of 12 hosts:" "$out/gone1.err" &&
  grep -Eq "^  node1: the connection to its agent closed; the [0-9]+ hosts below it in the launch tree are lost with it$" \
    "$out/gone1.err" || fail "gone1: the launch does not name node1 and its subtree" "$out/gone1.err"
(($(sed -n '/^ddlrun: error: cannot start the job/,$p' "$out/gone1.err" | grep -c "^  node") == 1)) ||
  fail "gone1: the launch does not name one host" "$out/gone1.err"
check_logins gone1
grep -E "^  node1:" "$out/gone1.err" | sed 's/^/    /'
nothing_left gone1

echo "== hung: node10 (a leaf, below node8) stops mid-measurement (SIGSTOP), heartbeat deadline 3 s"
SECONDS=0
"$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --dry-run --probe-links \
  --probe-links-port 29555 --heartbeat-timeout 3 --tree-width "$width" -H "$hosts" prog \
  >"$out/hung" 2>"$out/hung.err" &
job=$!
stopped=()
if listening 10 "$job"; then
  stopped=($(netns_job_procs 10 | awk '/--probe-agent/ { print $1 }'))
  for pid in "${stopped[@]}"; do kill -STOP "$pid"; done
fi
wait "$job"
rc=$?
echo "  hung: exit $rc ($SECONDS s)"
for pid in "${stopped[@]}"; do kill -CONT "$pid"; done  # it finds its parent gone, and exits
((${#stopped[@]})) || fail "hung: node10's link agent was never seen listening" "$out/hung.err"
((rc == 0)) || fail "hung: exit $rc, not 0" "$out/hung.err"
((SECONDS <= 30)) || fail "hung: took $SECONDS s"
grep -E "^ddlrun: warning: --probe-links: .*node10.*: the link agent ended: no heartbeat for 3 s" \
  "$out/hung.err" | head -2 | sed 's/^/    /' | grep -q . ||
  grep -A12 "^ddlrun: warning: --probe-links: cannot start the link agent" "$out/hung.err" |
  grep -q "^  node10: the link agent ended: no heartbeat for 3 s" ||
  fail "hung: node10 not named as silent" "$out/hung.err"
grep -E "node10" "$out/hung.err" | head -3 | sed 's/^/    /'
nothing_left hung

prefix=$NETNS_PREFIX
netns_down
if ip netns list | grep -q "^$prefix-"; then fail "namespaces left"; fi
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
