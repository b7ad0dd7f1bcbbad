#!/usr/bin/env bash
# libddl across three fake hosts (tests/netns/hosts.sh): ddl_check as 3 hosts x 2 ranks through
# ddlrun's ssh launcher (rendezvous bootstrap, shared memory inside a host, TCP between hosts),
# with the flat ring and with the 2x3 multi-dimensional rings, and through mpirun (PMIx
# bootstrap). Then a rank killed in the middle of an allreduce: the others must fail, naming it.
# Skips (77) when fake hosts cannot be made here.
#   netns_check.sh DDLRUN DDL_CHECK
set -uo pipefail
ddlrun=$1 check=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../netns/hosts.sh
source "$here/../netns/hosts.sh"
netns_up 3 || exit $?
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
hosts=(-H node1:2,node2:2,node3:2 --no-probe --ssh-config "$NETNS_SSH_CONFIG")

run() {
  local what=$1
  shift
  echo "== $what"
  if "$here/run_check.sh" "$ddlrun" "$check" 6 "$@"; then
    echo "PASS $what"
  else
    echo "FAIL $what"
    failed=1
  fi
}

run "ssh, flat ring" --launcher ssh "${hosts[@]}" -x DDL_ALGO=ring
run "ssh, multi-dimensional rings p:2x3" --launcher ssh "${hosts[@]}" --mode p:2x3
if command -v mpirun >/dev/null; then
  run "mpirun (PMIx)" --launcher mpirun "${hosts[@]}" --mpiarg "--mca plm_rsh_args '-F \
$NETNS_SSH_CONFIG' --mca oob_tcp_if_include $NETNS_NET --mca btl_tcp_if_include $NETNS_NET"
fi

# A peer that dies mid-allreduce: rank 3 exits while the others are inside a large allreduce.
# Their error must name rank 3 (what a user would read), and ddlrun must end the job.
echo "== peer killed mid-allreduce"
out=$(DDL_CHECK_DIE_RANK=3 "$ddlrun" --launcher ssh "${hosts[@]}" --tag-output none \
  --kill-grace 5 -x DDL_CHECK_DIE_RANK -x DDL_TIMEOUT=10 "$check" 2>&1)
status=$?
echo "$out" | tail -n 12
if ((status == 0)); then
  echo "FAIL peer killed: the job succeeded"
  failed=1
elif ! grep -qE "ddlrun: rank 3 \(node2\) exited with status 9|rank 3 \(node2\): " <<<"$out"; then
  # ddlrun names the first failure it hears of: rank 3's exit, or (when another host's agent
  # reports first) a rank whose libddl error names rank 3 in the last lines it printed.
  echo "FAIL peer killed: neither ddlrun nor a failing rank named rank 3"
  failed=1
else
  echo "PASS peer killed mid-allreduce (status $status)"
fi
# Nothing may stay on any host; an sshd session ends a moment after its agent, so 3 s to go.
for k in 1 2 3; do
  left=$(netns_pids "$k")
  for ((i = 0; i < 30 && ${#left} > 0; i++)); do
    sleep 0.1
    left=$(netns_pids "$k")
  done
  if [[ -n $left ]]; then
    echo "FAIL processes left on node$k: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
    failed=1
  fi
done
exit "$failed"
