#!/usr/bin/env bash
# Per-node mode on three fake hosts (hosts.sh): each host runs its own
#   ddlrun --node-rank K --nnodes 3 --rdzv node1:29400 ...
# started in its namespaces by nsenter, as a Kubernetes pod would be, with DDL_JOB_TOKEN set:
#   plan       the three --dry-run plans (topology files and text) equal one another, and the
#              topology file equals the one a single ddlrun -H node1,node2,node3 makes (probing
#              over ssh);
#   libddl     ddl_check (every collective checked by each rank) on 3 x 2 ranks: every node 0;
#   vars       without --max-restarts every rank sees DDL_RESTART_COUNT=0 and TORCHELASTIC_*;
#   DDP        tests/python/check_ddp_backend.py on init_process_group("ddl"), 3 x 2 ranks;
#   rank lost  a rank of node3 SIGKILLed: the other nodes end within 5 s with 137, naming
#              node rank 2 (node3); nothing is left on any host;
#   node lost  node3's ddlrun SIGKILLed: the others end within 5 s naming it, nothing is left;
#   pod deleted  node3's ddlrun gets SIGTERM: every node ends within 5 s with 143;
#   silent     node3's ddlrun SIGSTOPped: with --heartbeat-timeout 2 the others end within 5 s
#              naming it; after SIGCONT it stops its own ranks;
#   stopped    node3's ddlrun gets SIGTSTP (Ctrl-Z): the others end within 5 s saying so;
#   missing    the program missing on node3: every node ends with 127, naming node3;
#   restart    --max-restarts 1, rank 3 failing in attempt 0 only (DDL_RESTART_COUNT): every
#              node restarts, and ddl_check on 6 ranks passes in attempt 1: every node 0;
#   shrink     --nnodes 2:3 --max-restarts 1, node3's ddlrun and ranks SIGKILLed: node1 and
#              node2 restart as a 2-node job (ddl_check on 4 ranks): both 0, nothing left;
#   node 0 lost  the same with node1's ddlrun SIGKILLed: node2 and node3 do not restart, and
#              end within 5 s naming node 0 and its rendezvous;
#   token      node3 with a wrong token: it is refused with the reason, node 0 names it, and
#              the others time out naming node 2.
# Usage: per_node_test.sh DDLRUN DDL_CHECK DDL_LOOP PYTHON_DIR PYTHON   (77 without root, netns or sshd)
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
check=$(realpath "$2")
loop=$(realpath "$3")
pydir=$4 python=$5
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
netns_up 3 || exit $?
netns_session
export DDL_JOB_TOKEN=pernode-secret

# node K NAME ARGS...: ddlrun --node-rank K-1 on host K in the background, its output in
# $out/NAME.K; pids[K] is ddlrun itself (nsenter execs it). @K@ in ARGS becomes K.
declare -A pids=()
node() {
  local k=$1 name=$2
  shift 2
  set -- "${@//@K@/$k}"
  nsenter --net="/run/netns/$(netns_ns "$k")" --target "${_netns_holder[$k]}" --uts --mount -- \
    env --default-signal=INT "$ddlrun" --node-rank $((k - 1)) --nnodes "${nnodes:-3}" --rdzv node1:29400 \
    --rdzv-timeout "${rdzv_timeout:-20}" --tag-output rank "$@" </dev/null >"$out/$name.$k" 2>&1 &
  pids[$k]=$!
}
# all NAME ARGS...: the three nodes; statuses in rcs[K].
declare -A rcs=()
all() {
  local name=$1 k
  shift
  for k in 1 2 3; do node "$k" "$name" "$@"; done
  for k in 1 2 3; do
    wait "${pids[$k]}"
    rcs[$k]=$?
  done
}
# nothing_left: no process of a job on any host (sshd's listener aside) within 5 s.
nothing_left() {
  local k i left
  for k in 1 2 3; do
    for ((i = 0; i < 50; i++)); do
      left=$(netns_pids "$k" | xargs -r ps -o pid=,args= -p 2>/dev/null | grep -v sshd)
      [[ -z $left ]] && break
      sleep 0.1
    done
    [[ -z $left ]] || fail "$1: left on node$k: $(tr '\n' ';' <<<"$left")"
  done
}

echo "== plan"
all plan -a 2 --job-id pn --dry-run --topology-file "$NETNS_DIR/topology.@K@" true
for k in 1 2 3; do
  ((rcs[$k] == 0)) || fail "plan: node$k's dry run exited ${rcs[$k]}" "$out/plan.$k"
done
grep -q "^This node: node 1 of 3 (node2), ranks 2 and 3 of 6; rendezvous at node1:29400" \
  "$out/plan.2" || fail "plan: node2's first line" "$out/plan.2"
for k in 2 3; do
  # Each node wrote its own topology file (the line that names it aside), all the same.
  diff <(tail -n +2 "$out/plan.1" | grep -v '^topology: ') \
    <(tail -n +2 "$out/plan.$k" | grep -v '^topology: ') >"$out/plan.diff$k" ||
    fail "plan: node$k's dry run differs from node1's" "$out/plan.diff$k"
done
nsenter --net="/run/netns/$(netns_ns 1)" --target "${_netns_holder[1]}" --uts --mount -- \
  "$ddlrun" -H node1,node2,node3 -a 2 --job-id pn --ssh-config "$NETNS_SSH_CONFIG" --dry-run \
  --topology-file "$NETNS_DIR/topology.single" true >"$out/plan.single" 2>&1 ||
  fail "plan: the single ddlrun's dry run failed" "$out/plan.single"
for k in 1 2 3; do
  cmp -s "$NETNS_DIR/topology.$k" "$NETNS_DIR/topology.single" ||
    fail "plan: node$k's topology file differs from the single ddlrun's: $(diff \
      "$NETNS_DIR/topology.$k" "$NETNS_DIR/topology.single" | head -5 | tr '\n' ';')"
done
((fails == 0)) && echo "PASS plan: every node's plan is the single ddlrun's"

echo "== libddl"
all check -a 2 "$check"
for k in 1 2 3; do
  ((rcs[$k] == 0)) || fail "libddl: node$k exited ${rcs[$k]}" "$out/check.$k"
done
for r in 0 1 2 3 4 5; do
  k=$((r / 2 + 1))
  grep -q "rank $r of 6 ok$" "$out/check.$k" || fail "libddl: rank $r not ok on node$k" "$out/check.$k"
done
echo "PASS libddl: ddl_check on 6 ranks of 3 nodes, every collective right"

# Without --max-restarts the ranks see DDL_RESTART_COUNT and torchrun's variables (0), as under
# a single ddlrun.
all vars sh -c 'echo "count=$DDL_RESTART_COUNT te=$TORCHELASTIC_RESTART_COUNT max=$TORCHELASTIC_MAX_RESTARTS"'
for k in 1 2 3; do
  grep -q "count=0 te=0 max=0$" "$out/vars.$k" || fail "vars: node$k's rank lacks the variables" "$out/vars.$k"
done

echo "== DDP"
if "$python" -c 'import torch' 2>/dev/null; then
  all ddp -a 2 -x "PYTHONPATH=$pydir" "$python" "$here/../python/check_ddp_backend.py" ddl
  for k in 1 2 3; do
    ((rcs[$k] == 0)) || fail "DDP: node$k exited ${rcs[$k]}" "$out/ddp.$k"
  done
  for r in 0 1 2 3 4 5; do
    grep -q "rank $r of 6 ok" "$out/ddp.$((r / 2 + 1))" || fail "DDP: rank $r not ok" "$out/ddp.$((r / 2 + 1))"
  done
  echo "PASS DDP on backend ddl, 3 x 2 ranks"
else
  echo "SKIP DDP: $python has no torch"
fi

# running NAME: until the 6 ranks of job NAME loop (20 s at most).
running() {
  local i
  for ((i = 0; i < 200; i++)); do
    (($(cat "$out/$1".{1,2,3} 2>/dev/null | grep -c ' step [1-9]') >= 6)) && return 0
    sleep 0.1
  done
  fail "$1: the ranks did not start" "$out/$1.1"
  return 1
}
# ended NAME: nodes 1 and 2 end within 5 s of now; their statuses in rcs.
ended() {
  local start k i
  start=$(now_ms)
  for k in 1 2; do
    for ((i = 0; i < 60; i++)); do
      [[ -e /proc/${pids[$k]} && $(ps -o stat= -p "${pids[$k]}") != Z* ]] || break
      sleep 0.1
    done
    wait "${pids[$k]}"
    rcs[$k]=$?
  done
  local took=$(($(now_ms) - start))
  ((took < 5000)) || fail "$1: the other nodes took $took ms to end"
  echo "$1: the other nodes ended $took ms after the fault"
}

echo "== rank lost"
for k in 1 2 3; do node "$k" rank -a 2 -x DDL_TIMEOUT=30 "$loop" 60; done
if running rank; then
  victim=$(sed -n 's/^\[5\] rank 5 pid \([0-9]*\)$/\1/p' "$out/rank.3")
  netns_exec 3 kill -KILL "$victim"
  ended "rank lost"
  wait "${pids[3]}"
  rcs[3]=$?
  for k in 1 2 3; do
    ((rcs[$k] == 137)) || fail "rank lost: node$k exited ${rcs[$k]}, want 137" "$out/rank.$k"
  done
  grep -q "node3: node rank 2: rank 5 was killed by SIGKILL (exit status 137); stopping" \
    "$out/rank.1" ||
    fail "rank lost: node1 does not name rank 5 of node3" "$out/rank.1"
fi
nothing_left "rank lost"

echo "== node lost"
for k in 1 2 3; do node "$k" gone -a 2 -x DDL_TIMEOUT=30 "$loop" 60; done
if running gone; then
  kill -KILL "${pids[3]}"
  ended "node lost"
  wait "${pids[3]}" 2>/dev/null
  for k in 1 2; do
    ((rcs[$k] != 0)) || fail "node lost: node$k exited 0" "$out/gone.$k"
    # Whichever the node hears first names node3: node 0's word that its ddlrun is gone, or
    # a rank's libddl error blaming a rank of node3 (its ranks die with their ddlrun, and a
    # loaded machine may deliver that closed connection first).
    grep -Eq "node3: node rank 2: its ddlrun is gone|rank [45] \(node3\): the connection was (closed|reset)" \
      "$out/gone.$k" || fail "node lost: node$k does not name node3" "$out/gone.$k"
  done
fi
nothing_left "node lost"

echo "== pod deleted"
# node3's ddlrun gets SIGTERM (Kubernetes deleting its pod): it stops its ranks, and every node
# ends within 5 s with 143, naming node3.
for k in 1 2 3; do node "$k" term -a 2 -x DDL_TIMEOUT=30 "$loop" 60; done
if running term; then
  kill -TERM "${pids[3]}"
  ended "pod deleted"
  wait "${pids[3]}"
  rcs[3]=$?
  for k in 1 2 3; do
    ((rcs[$k] == 143)) || fail "pod deleted: node$k exited ${rcs[$k]}, want 143" "$out/term.$k"
  done
  # node 0's word on node3 (also after node1's own rank failed, when node 0 heard node3 first)
  # or node1's rank blaming a rank of node3, whichever came first.
  grep -Eq "node3: node rank 2: its ranks ended with status 143|rank [45] \(node3\): the connection was (closed|reset)" \
    "$out/term.1" || fail "pod deleted: node1 does not name node3" "$out/term.1"
fi
nothing_left "pod deleted"

echo "== node silent"
# node3's ddlrun stopped (SIGSTOP): no heartbeat for 2 s ends the others within 5 s; once it
# runs again it finds node 0 gone and stops its ranks.
for k in 1 2 3; do node "$k" silent -a 2 --heartbeat-timeout 2 -x DDL_TIMEOUT=30 "$loop" 60; done
if running silent; then
  kill -STOP "${pids[3]}"
  ended "node silent"
  kill -CONT "${pids[3]}"
  wait "${pids[3]}"
  rcs[3]=$?
  for k in 1 2; do
    grep -q "node3: node rank 2: its ddlrun is silent: no heartbeat for 2 s (exit status 1)" \
      "$out/silent.$k" || fail "node silent: node$k does not name node3" "$out/silent.$k"
  done
  ((rcs[3] != 0)) || fail "node silent: node3 exited 0" "$out/silent.3"
fi
nothing_left "node silent"

echo "== node stopped"
# Ctrl-Z (SIGTSTP) on node3's ddlrun: it tells node 0 and stops its ranks rather than pause
# alone, and the others end within 5 s saying so (not "silent", 10 s later).
for k in 1 2 3; do node "$k" tstp -a 2 -x DDL_TIMEOUT=30 "$loop" 60; done
if running tstp; then
  kill -TSTP "${pids[3]}"
  ended "node stopped"
  wait "${pids[3]}"
  for k in 1 2; do
    grep -q "node3: node rank 2: its ddlrun was stopped (SIGTSTP, Ctrl-Z); a node cannot pause alone (exit status 148)" \
      "$out/tstp.$k" || fail "node stopped: node$k does not say node3 was stopped" "$out/tstp.$k"
  done
fi
nothing_left "node stopped"

echo "== missing program"
# The program is in the /tmp of node1 and node2 only: node3 cannot start its ranks, and the
# others end with its status (127), naming it.
for k in 1 2; do netns_exec "$k" cp "$loop" /tmp/per_node_loop; done
all missing -a 2 /tmp/per_node_loop 30
for k in 1 2 3; do
  ((rcs[$k] == 127)) || fail "missing program: node$k exited ${rcs[$k]}, want 127" "$out/missing.$k"
done
grep -q "node3: node rank 2: its ranks could not start: .*/tmp/per_node_loop" "$out/missing.1" ||
  fail "missing program: node1 does not name node3's failure" "$out/missing.1"
nothing_left "missing program"

# ranks_ok NAME N: ddl_check said "rank R of N ok" for each of the N ranks (2 on each node).
ranks_ok() {
  local r k
  for ((r = 0; r < $2; r++)); do
    k=$((r / 2 + 1))
    grep -q "rank $r of $2 ok$" "$out/$1.$k" || fail "$1: rank $r of $2 not ok on node$k" "$out/$1.$k"
  done
}

# ended_with NAME K STATUS LINE: node K of job NAME exits STATUS, having printed LINE (grep).
ended_with() {
  wait "${pids[$2]}"
  rcs[$2]=$?
  ((rcs[$2] == $3)) || fail "$1: node$2 exited ${rcs[$2]}, want $3" "$out/$1.$2"
  grep -q -- "$4" "$out/$1.$2" || fail "$1: node$2 did not print '$4'" "$out/$1.$2"
}

echo "== restart"
# Attempt 0: rank 3 (node2) exits 3, the others wait; attempt 1: ddl_check everywhere.
attempt="if [ \"\$DDL_RESTART_COUNT\" = 0 ]; then [ \"\$RANK\" = 3 ] && exit 3; exec sleep 30; fi"
for k in 1 2 3; do node "$k" restart -a 2 --max-restarts 1 sh -c "$attempt; exec $check"; done
for k in 1 2 3; do
  ended_with restart "$k" 0 "^ddlrun: restart 1 of 1 after .*; 3 nodes meet again at node1:29400"
done
ranks_ok restart 6
nothing_left restart
((fails == 0)) && echo "PASS restart: a rank failing in attempt 0 restarts every node"

# ranged NAME ARGS...: the three nodes with --nnodes 2:3 --max-restarts 1, 2 ranks each.
ranged() {
  local name=$1 k
  shift
  for k in 1 2 3; do
    nnodes=2:3 node "$k" "$name" -a 2 --max-restarts 1 -x DDL_TIMEOUT=30 "$@"
  done
}

echo "== shrink"
# Attempt 0 loops until node3's ddlrun and ranks are killed; attempt 1 (nodes 1 and 2 only)
# runs ddl_check on 4 ranks.
ranged shrink sh -c "if [ \"\$DDL_RESTART_COUNT\" = 0 ]; then exec $loop 60; fi; exec $check"
if running shrink; then
  kill -KILL "${pids[3]}"
  netns_pids 3 | xargs -r ps -o pid=,args= -p 2>/dev/null | grep -F "$loop" | awk '{print $1}' |
    xargs -r kill -KILL 2>/dev/null
  wait "${pids[3]}" 2>/dev/null
  for k in 1 2; do
    ended_with shrink "$k" 0 "^ddlrun: restart 1 of 1 after node 2 (node3) lost; 2 nodes meet again"
  done
  ranks_ok shrink 4
fi
nothing_left shrink
((fails == 0)) && echo "PASS shrink: node3 lost, nodes 1 and 2 restarted as a 2-node job"

echo "== node 0 lost"
ranged zero "$loop" 60
if running zero; then
  kill -KILL "${pids[1]}"
  start=$(now_ms)
  for k in 2 3; do
    ended_with zero "$k" 1 "^ddlrun: not restarting the job: node 0 (node1) is lost, and with it the rendezvous at node1:29400 that every restart meets at; it ends with status 1$"
  done
  took=$(($(now_ms) - start))
  ((took < 5000)) || fail "node 0 lost: the other nodes took $took ms to end"
  wait "${pids[1]}" 2>/dev/null
fi
nothing_left "node 0 lost"
((fails == 0)) && echo "PASS node 0 lost: the others end naming it ($took ms)"

echo "== token"
rdzv_timeout=3
node 1 token true
node 2 token true
DDL_JOB_TOKEN=guess node 3 token true
for k in 1 2 3; do
  wait "${pids[$k]}"
  rcs[$k]=$?
  ((rcs[$k] == 1)) || fail "token: node$k exited ${rcs[$k]}, want 1" "$out/token.$k"
done
grep -qF "ddlrun: error: the rendezvous at node1:29400: refused node 2: wrong token; give every node the same secret (DDL_JOB_TOKEN or --rdzv-token-file)" \
  "$out/token.3" || fail "token: node3's error" "$out/token.3"
grep -qE "ddlrun: error: rendezvous: refused node 2 \(node3, from 10\.200\.[0-9]+\.26\): wrong token" \
  "$out/token.1" || fail "token: node1 does not name node 2" "$out/token.1"
grep -qF "the rendezvous timed out after 3 s: node 2 did not come (came: node 0 (node1), node 1 (node2))" \
  "$out/token.2" || fail "token: node2's timeout" "$out/token.2"
nothing_left token

if ((fails > 0)); then
  echo "per_node_test: $fails failures"
  exit 1
fi
echo "per_node_test: all passed"
