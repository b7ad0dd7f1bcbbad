#!/usr/bin/env bash
# How long a restart takes: from the SIGKILL of one rank of examples/train_elastic.py (once its
# checkpoint of step 10 is written) to the first step of the restarted job, on N ranks of this
# host, through
#   ddlrun --max-restarts 1                       (the ddl package)
#   ddlrun --max-restarts 1 ... --backend gloo    (torch.distributed, gloo)
#   torchrun --max_restarts 1 ... --backend gloo  (torch's elastic agent, c10d rendezvous)
# Prints each run's time from the fault to the first step after it and the whole job's, then
# the median of each. Debian's torch 1.13 under Python 3.11 cannot start torchrun with its
# default --redirects 0 (Std.NONE is not iterated there), so torchrun gets --redirects 1 --tee 1.
#
#   bench/restart_bench.sh [--build DIR] [--ranks N] [--runs K] [--python PYTHON] [--only NAME]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build ranks=4 runs=3 python=/usr/bin/python3 only=""
while (($#)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  --ranks) ranks=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --python) python=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  *) echo "usage: $0 [--build DIR] [--ranks N] [--runs K] [--python PYTHON] [--only NAME]" >&2
     exit 2 ;;
  esac
done
ddlrun=$(realpath "$build/ddlrun/ddlrun")
script=$(realpath "$here/../examples/train_elastic.py")
export PYTHONPATH=$build/python
work=$(mktemp -d)
keep=${TMPDIR:-/tmp}
trap 'rm -rf "$work"' EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# one NAME COMMAND...: runs the job (the script's arguments, then "${extra[@]}"), kills one rank
# after checkpoint 10; prints
# "FAULT_TO_FIRST_STEP_MS TOTAL_MS" (or "- -" when it did not restart).
one() {
  local name=$1 ck=$work/$1.ckpt i pid fault start
  shift
  rm -rf "$ck"
  start=$(now_ms)
  "$@" "$script" --checkpoint-dir "$ck" --steps 60 --every 5 --step-delay 0.05 --keep "${extra[@]}" \
    >"$work/$name.out" 2>"$work/$name.err" &
  local job=$!
  for ((i = 0; i < 1200; i++)); do
    [[ -e $ck/ckpt-10.pt ]] && break  # (ddlrun's stdout to a file comes in blocks)
    sleep 0.05
  done
  pid=$(pgrep -f "^$python (-u )?$script --checkpoint-dir $ck" | tail -1)
  fault=$(now_ms)
  [[ -n $pid ]] && kill -KILL "$pid"
  wait "$job"
  local total=$(($(now_ms) - start)) first
  first=$(sed -n 's/^\(\[default[0-9]*\]:\)\?attempt 1: first step done at \([0-9.]*\)$/\2/p' \
    "$work/$name.out")
  if [[ -z $first ]]; then
    echo "- - (no restart; its output: $keep/$name.$(date +%s).out, .err)"
    cp "$work/$name.out" "$keep/$name.$(date +%s).out"
    cp "$work/$name.err" "$keep/$name.$(date +%s).err"
    return
  fi
  awk -v a="$first" -v b="$fault" -v t="$total" 'BEGIN { printf "%d %d\n", a * 1000 - b, t }'
}

median() { grep -v '^-' | python3 "$here/benchtable.py" median --format %.0f; }  # "-" if none

declare -A cmd=(
  [ddlrun_ddl]="$ddlrun -H localhost:$ranks --max-restarts 1 --tag-output none $python"
  [ddlrun_gloo]="$ddlrun -H localhost:$ranks --max-restarts 1 --tag-output none $python"
  [torchrun_gloo]="$python -m torch.distributed.run --nproc_per_node $ranks --max_restarts 1 --redirects 1 --tee 1"
)
for name in ${only:-ddlrun_ddl ddlrun_gloo torchrun_gloo}; do
  : >"$work/$name.times"
  extra=()
  [[ $name == *gloo ]] && extra=(--backend gloo)
  read -ra argv <<<"${cmd[$name]}"
  for ((r = 1; r <= runs; r++)); do
    t=$(one "$name" "${argv[@]}")
    echo "$name run $r: fault to first step, whole job (ms): $t"
    echo "$t" >>"$work/$name.times"
  done
done
echo
for name in ${only:-ddlrun_ddl ddlrun_gloo torchrun_gloo}; do
  echo "$name: median fault to first step $(cut -d' ' -f1 "$work/$name.times" | median) ms," \
    "whole job $(cut -d' ' -f2 "$work/$name.times" | median) ms ($ranks ranks, $runs runs)"
done
