#!/usr/bin/env bash
# ddlrun --max-restarts across three fake hosts (hosts.sh) through the ssh launcher, running
# examples/train_elastic.py, 2 ranks a host:
#   1. host 3 is cut off mid-run (every process there killed: its agent, its ranks, its ssh
#      session) once the checkpoint of step 10 is written: ddlrun names the lost host, probes
#      node1 and node2 again, restarts on them with a new plan (4 ranks), the script resumes from
#      its last checkpoint and finishes; exit 0. The time from the fault to the first step of the
#      restarted job is printed.
#   2. the reference: the checkpoint the restarted job resumed from, resumed by a fresh 4-rank
#      job on node1 and node2: its final weights equal the restarted job's bit for bit.
#   3. --min-hosts 3, the same fault: no restart; the job ends with the failure's status.
#   4. --nnodes 2:3: host 3, cut off on the first attempt, answers ssh again and rejoins at the
#      restart after the next failure (6 ranks on 3 hosts again).
#   5. through mpirun (when Open MPI is installed), node3 stops answering ssh: mpirun fails, the
#      restart's probe leaves node3 out, mpirun runs again on node1 and node2.
#   6. nothing is left on any host, nor here.
# Skips (77) when fake hosts cannot be made here or the interpreter has no torch.
#   restart_netns_test.sh DDLRUN PYTHON_DIR PYTHON
set -uo pipefail
ddlrun=$1 pydir=$2 python=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "restart_netns: $python cannot import torch: skipped"
  exit 77
fi
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$here/../lib/procs.sh"
netns_up 3 || exit $?
netns_session
# Marks the ddlruns this test starts (and their keepers, which inherit it): other tests may run
# ddlrun here at the same time, and theirs are not this test's leftovers.
export RESTART_NETNS_MARK=$$
script=$here/../../examples/train_elastic.py
common=(--launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tag-output none --kill-grace 1
  --heartbeat-timeout 3 -x "PYTHONPATH=$pydir" -x DDL_TIMEOUT=5)
train=("$python" "$script" --steps 40 --every 5 --step-delay 0.1 --keep)

# cut_node3 FILE JOB: once FILE exists (or JOB ended; 60 s at most), kills every process on
# node3 (its agent, its ranks, its ssh session); $fault_ms says when.
cut_node3() {
  local i pids
  for ((i = 0; i < 1200; i++)); do
    [[ -e $1 ]] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  pids=$(netns_pids 3 | xargs)
  fault_ms=$(now_ms)
  # shellcheck disable=SC2086  # a list of PIDs
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
}

# end_of JOB: waits for JOB (SIGKILL after 120 s); returns its exit status.
end_of() {
  local i
  for ((i = 0; i < 1200; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null
  wait "$1"
}

# faulted NAME CHECKPOINT_STEP DDLRUN_ARGS...: the job on node1..node3 in the background, node3
# cut off once the checkpoint of CHECKPOINT_STEP is written; then its end: $out/NAME, NAME.err,
# NAME.rc, NAME.fault (ms, when node3 was cut off).
faulted() {
  local name=$1 step=$2
  shift 2
  mkdir -p "$out/$name.ckpt"
  "$ddlrun" "${common[@]}" -H node1:2,node2:2,node3:2 "$@" "${train[@]}" \
    --checkpoint-dir "$out/$name.ckpt" </dev/null >"$out/$name" 2>"$out/$name.err" &
  local job=$!
  cut_node3 "$out/$name.ckpt/ckpt-$step.pt" "$job"
  echo "$fault_ms" >"$out/$name.fault"
  end_of "$job"
  echo $? >"$out/$name.rc"
  echo "  $name -> exit $(cat "$out/$name.rc")"
}
digest() { sed -n 's/^final weights sha256 \([0-9a-f]*\) .*/\1/p' "$out/$1"; }

# 1. Restarted on the two hosts left.
faulted lost 10 --max-restarts 1 --min-hosts 2
[[ $(cat "$out/lost.rc") == 0 ]] || fail "lost: exit $(cat "$out/lost.rc"), not 0" "$out/lost.err" "$out/lost"
grep -Eq "^ddlrun: restart 1 of 1 after node3: .*; 4 ranks on 2 hosts without node3$" \
  "$out/lost.err" || fail "lost: no restart note naming node3" "$out/lost.err"
resumed=$(sed -n 's/^attempt 1: 4 ranks, starting at step \([0-9]*\)$/\1/p' "$out/lost")
[[ -n $resumed && $resumed -ge 10 ]] ||
  fail "lost: attempt 1 did not resume from a checkpoint at step 10 or later" "$out/lost"
for r in 0 1 2 3; do
  grep -qx "rank $r of 4 ok" "$out/lost" || fail "lost: rank $r of 4 did not finish" "$out/lost"
done
first=$(sed -n 's/^attempt 1: first step done at \([0-9.]*\)$/\1/p' "$out/lost")
if [[ -n $first ]]; then
  echo "restart_netns: fault to the first step of the restarted job:" \
    "$(awk -v a="$first" -v b="$(cat "$out/lost.fault")" 'BEGIN { printf "%d", a * 1000 - b }') ms"
fi

grep '^ddlrun: ' "$out/lost.err" | grep -v warning | sed 's/^/  lost | /'

# 2. The reference: the same checkpoint resumed by a fresh job on node1 and node2.
if [[ -z $resumed || ! -e $out/lost.ckpt/ckpt-$resumed.pt ]]; then
  fail "no checkpoint of step '$resumed' to resume the reference from" "$out/lost"
else
  mkdir -p "$out/ref.ckpt"
  cp "$out/lost.ckpt/ckpt-$resumed.pt" "$out/ref.ckpt/ckpt.pt"
  "$ddlrun" "${common[@]}" -H node1:2,node2:2 "${train[@]}" --checkpoint-dir "$out/ref.ckpt" \
    </dev/null >"$out/ref" 2>"$out/ref.err"
  status=$?
  ((status == 0)) || fail "ref: exit $status" "$out/ref.err"
  [[ -n $(digest lost) && $(digest lost) == "$(digest ref)" ]] ||
    fail "the restarted job's weights ($(digest lost)) differ from the reference's ($(digest ref))" \
      "$out/lost" "$out/ref"
  echo "restart_netns: final weights $(digest lost), the reference's $(digest ref)"
fi

# 3. --min-hosts 3: the same fault ends the job, with the failure's status.
faulted strict 5 --max-restarts 1 --min-hosts 3
status=$(cat "$out/strict.rc")
said=$(sed -n 's/^ddlrun: not restarting the job: only 2 of its 3 hosts remain, fewer than the 3 it needs (--min-hosts); it ends with status \([0-9]*\)$/\1/p' \
  "$out/strict.err")
[[ $status != 0 && $status == "$said" ]] ||
  fail "strict: exit $status, not the failure's status ('$said') with a note" "$out/strict.err"
grep -q "^attempt 1" "$out/strict" && fail "strict: a second attempt ran" "$out/strict"
grep '^ddlrun: ' "$out/strict.err" | grep -v warning | sed 's/^/  strict | /'

# 4. --nnodes 2:3: node3, lost on attempt 0, answers ssh again (only its processes were
# killed) and rejoins at the restart after the next failure (rank 0 exits 5 on attempt 1).
cat >"$out/rejoin.sh" <<'EOF'
#!/bin/sh
echo "attempt $DDL_RESTART_COUNT: rank $RANK of $WORLD_SIZE on $(hostname)"
case $DDL_RESTART_COUNT in
0) : >"$REJOIN_DIR/$(hostname).$RANK"; sleep 60 ;;
1) if [ -z "$FAIL_ON_RESTART" ]; then exit 0; fi
   if [ "$RANK" = 0 ]; then sleep 0.5; exit 5; fi; sleep 60 ;;
esac
EOF
chmod +x "$out/rejoin.sh"
mkdir -p "$out/rejoin.d"
"$ddlrun" "${common[@]}" -H node1:2,node2:2,node3:2 --max-restarts 2 --nnodes 2:3 \
  -x "REJOIN_DIR=$out/rejoin.d" -x FAIL_ON_RESTART=1 "$out/rejoin.sh" </dev/null >"$out/rejoin" \
  2>"$out/rejoin.err" &
job=$!
cut_node3 "$out/rejoin.d/node3.5" "$job"
end_of "$job"
status=$?
((status == 0)) || fail "rejoin: exit $status, not 0" "$out/rejoin.err"
grep -Eq "^ddlrun: restart 1 of 2 after node3: .*; 4 ranks on 2 hosts without node3$" \
  "$out/rejoin.err" || fail "rejoin: no restart without node3" "$out/rejoin.err"
grep -qx "ddlrun: restart 2 of 2 after rank 0 (node1) exited with status 5; 6 ranks on 3 hosts" \
  "$out/rejoin.err" || fail "rejoin: node3 did not rejoin at restart 2" "$out/rejoin.err"
grep -qx "attempt 2: rank 5 of 6 on node3" "$out/rejoin" || fail "rejoin: no rank on node3" "$out/rejoin"
grep '^ddlrun: ' "$out/rejoin.err" | grep -v warning | sed 's/^/  rejoin | /'

# 5. Through mpirun (Open MPI, when installed): node3 stops answering (its sshd stopped, its
# processes killed); mpirun fails, the probe of the restart leaves node3 out, and mpirun is
# started again on node1 and node2.
if command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q 'Open MPI'; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rm -rf "$out/rejoin.d" && mkdir -p "$out/rejoin.d"
  "$ddlrun" --launcher mpirun "${common[@]:2}" -H node1:2,node2:2,node3:2 --max-restarts 1 --min-hosts 2 \
    --mpiarg "--mca plm_rsh_args '-F $NETNS_SSH_CONFIG' --mca oob_tcp_if_include $NETNS_NET \
--mca btl_tcp_if_include $NETNS_NET" -x "REJOIN_DIR=$out/rejoin.d" "$out/rejoin.sh" \
    </dev/null >"$out/mpirun" 2>"$out/mpirun.err" &
  job=$!
  for ((i = 0; i < 400; i++)); do
    [[ -e $out/rejoin.d/node3.5 ]] && break
    sleep 0.05
  done
  netns_stop_sshd 3
  cut_node3 "$out/rejoin.d/node3.5" "$job"
  end_of "$job"
  status=$?
  netns_start_sshd 3
  ((status == 0)) || fail "mpirun: exit $status, not 0" "$out/mpirun.err"
  grep -q "^ddlrun: node3 does not answer (.*); left out$" "$out/mpirun.err" ||
    fail "mpirun: node3 was not left out" "$out/mpirun.err"
  grep -q "^ddlrun: restart 1 of 1 after mpirun exited with status [0-9]*; 4 ranks on 2 hosts without node3$" \
    "$out/mpirun.err" || fail "mpirun: no restart on node1 and node2" "$out/mpirun.err"
  (($(grep -c "^attempt 1: rank [0-3] of 4 on node[12]$" "$out/mpirun") == 4)) ||
    fail "mpirun: attempt 1 did not run 4 ranks on node1 and node2" "$out/mpirun"
  grep '^ddlrun: ' "$out/mpirun.err" | grep -v warning | sed 's/^/  mpirun | /'
fi

# 6. Nothing left on any host (3 s for sessions to end), nor here.
for k in 1 2 3; do
  left=$(netns_leftovers "$k")
  [[ -z $left ]] || fail "processes left on node$k: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
done
# ddlruns of this test (and their keepers, which clean up after them): 3 s to be gone.
for ((i = 0; i < 30; i++)); do
  left=$(own_pids "^$ddlrun " "RESTART_NETNS_MARK=$$" | paste -sd,)
  [[ -z $left ]] && break
  sleep 0.1
done
[[ -z $left ]] || fail "ddlrun processes left here: $(ps -o pid=,args= -p "$left")"
((fails == 0)) && echo "restart_netns: ok"
exit $((fails > 0))
