#!/usr/bin/env bash
# A host lost mid-run, across three fake hosts (tests/netns/hosts.sh; root): the time from the
# fault (every process on node3 killed, once examples/train_elastic.py wrote its checkpoint of
# step 10) to the first step of the restarted job on node1 and node2, 2 ranks a host, through
#   ddlrun --max-restarts 1 --min-hosts 2              (ssh launcher; the ddl package, and gloo)
#   torchrun --nnodes 2:3 --max_restarts 1 on each host (c10d rendezvous on node1; gloo)
# torchrun's c10d rendezvous waits --rdzv-last-call seconds (its last_call_timeout, default
# here 1; torch's own default is 30) for more hosts once the minimum has joined. Debian's torch
# 1.13 under Python 3.11 needs --redirects 1 --tee 1 (restart_bench.sh says why).
#
#   bench/restart_compare_netns.sh [--build DIR] [--runs K] [--rdzv-last-call SECONDS]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build runs=1 last_call=1 python=/usr/bin/python3
while (($#)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --rdzv-last-call) last_call=$2; shift 2 ;;
  *) echo "usage: $0 [--build DIR] [--runs K] [--rdzv-last-call SECONDS]" >&2; exit 2 ;;
  esac
done
ddlrun=$(realpath "$build/ddlrun/ddlrun")
pydir=$(realpath "$build/python")
script=$(realpath "$here/../examples/train_elastic.py")
# shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
source "$here/../tests/netns/hosts.sh"
netns_up 3 || exit $?
unset SSH_AUTH_SOCK
export HOME="$NETNS_DIR/home"
mkdir -p "$HOME"
out=$NETNS_DIR/out
mkdir -p "$out"
now_ms() { echo $(($(date +%s%N) / 1000000)); }
train=(--steps 60 --every 5 --step-delay 0.05 --keep)

# cut_node3 CKPT_DIR: waits for the checkpoint of step 10, kills every process on node3; prints
# the time of the fault (ms).
cut_node3() {
  local i
  for ((i = 0; i < 1200; i++)); do
    [[ -e $1/ckpt-10.pt ]] && break
    sleep 0.05
  done
  # shellcheck disable=SC2046  # a list of PIDs
  kill -KILL $(netns_pids 3) 2>/dev/null
  now_ms
}

# report NAME FAULT_MS FILES...: the time from the fault to "attempt 1: first step done".
report() {
  local name=$1 fault=$2 first
  shift 2
  first=$(sed -n 's/^\(\[[a-z0-9]*\]:\)\?attempt 1: first step done at \([0-9.]*\)$/\2/p' "$@" |
    head -1)
  if [[ -z $first ]]; then
    echo "$name: no restarted step (output in $*)"
    tail -5 "$@"
    return
  fi
  awk -v n="$name" -v a="$first" -v b="$fault" \
    'BEGIN { printf "%s: fault to first step of the restarted job %d ms\n", n, a * 1000 - b }'
}

ddlrun_case() {
  local name=$1 ck=$out/$1.ckpt fault
  shift
  rm -rf "$ck"
  "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tag-output none --kill-grace 1 \
    -H node1:2,node2:2,node3:2 --max-restarts 1 --min-hosts 2 -x "PYTHONPATH=$pydir" \
    "$python" "$script" --checkpoint-dir "$ck" "${train[@]}" "$@" \
    </dev/null >"$out/$name" 2>"$out/$name.err" &
  local job=$!
  fault=$(cut_node3 "$ck")
  wait "$job"
  report "$name" "$fault" "$out/$name"
}

torchrun_case() {
  local name=$1 ck=$out/$1.ckpt fault k pids=()
  rm -rf "$ck"
  for k in 1 2 3; do
    netns_exec "$k" env PYTHONPATH="$pydir" "$python" -m torch.distributed.run --nnodes 2:3 \
      --nproc_per_node 2 --max_restarts 1 --rdzv_backend c10d --rdzv_endpoint node1:29400 \
      --rdzv_id "bench$$" --rdzv_conf "last_call_timeout=$last_call" --redirects 1 --tee 1 \
      "$script" --backend gloo --checkpoint-dir "$ck" "${train[@]}" \
      </dev/null >"$out/$name.$k" 2>"$out/$name.$k.err" &
    pids+=($!)
  done
  fault=$(cut_node3 "$ck")
  for k in 0 1 2; do
    timeout 120 tail --pid="${pids[$k]}" -f /dev/null
    kill -KILL "${pids[$k]}" 2>/dev/null
    wait "${pids[$k]}"
  done
  report "$name" "$fault" "$out/$name.1" "$out/$name.2"
}

for ((r = 1; r <= runs; r++)); do
  ddlrun_case ddlrun_ddl
  ddlrun_case ddlrun_gloo --backend gloo
  torchrun_case torchrun_gloo
done
