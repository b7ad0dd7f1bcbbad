#!/usr/bin/env bash
# Per-node mode on two fake hosts (hosts.sh) that share the host name "vm" (cloned VMs, some
# containers) but not their machine identity (each has its own network namespace): node 0 takes
# the second under its address, and ddl_check on 2 x 2 ranks passes. With
# --no-probe (no identity to tell them apart) the second node is refused, saying why.
# Usage: per_node_names_test.sh DDLRUN DDL_CHECK   (77 without root, netns or sshd)
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
check=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
netns_up 2 || exit $?
out="$NETNS_DIR/out"
mkdir -p "$out"
export DDL_JOB_TOKEN=names-secret
for k in 1 2; do netns_exec "$k" hostname vm; done
# run NAME ARGS...: both nodes; their output in $out/NAME.K, statuses in rcs[K].
declare -A rcs=()
run() {
  local name=$1 k
  shift
  declare -A pids=()
  for k in 1 2; do
    nsenter --net="/run/netns/$(netns_ns "$k")" --target "${_netns_holder[$k]}" --uts --mount -- \
      "$ddlrun" --node-rank $((k - 1)) --nnodes 2 --rdzv node1:29400 --rdzv-timeout 10 \
      --tag-output rank "$@" </dev/null >"$out/$name.$k" 2>&1 &
    pids[$k]=$!
  done
  for k in 1 2; do
    wait "${pids[$k]}"
    rcs[$k]=$?
  done
}

run same -a 2 "$check"
for k in 1 2; do
  ((rcs[$k] == 0)) || fail "same name: node$k exited ${rcs[$k]}" "$out/same.$k"
done
for r in 0 1 2 3; do
  grep -q "rank $r of 4 ok$" "$out/same.$((r / 2 + 1))" || fail "same name: rank $r not ok" "$out/same.$((r / 2 + 1))"
done

run noprobe -a 1 --no-probe true
# The node that came second is refused (node 1, unless node 0's own hello came later).
grep -Eq "refused node [01]: its host name vm is node [01]'s too and, without a probe \(--no-probe\), ddlrun cannot tell the two apart; every node needs a host name of its own" \
  "$out/noprobe.1" "$out/noprobe.2" || fail "--no-probe: no node was refused saying why" "$out/noprobe.2"

for k in 1 2; do
  left=$(netns_leftovers "$k")
  [[ -z $left ]] || fail "processes left on node$k: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
done
cat "$out/same.1" "$out/same.2" | grep -E "ok$" | sed 's/^/  same | /'
((fails == 0)) && echo "per_node_names: ok"
exit $((fails > 0))
