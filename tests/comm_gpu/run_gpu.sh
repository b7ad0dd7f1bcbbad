#!/usr/bin/env bash
# libddl's NCCL path as a real job: one rank per GPU of this host through ddlrun's local
# launcher (with two ring dimensions when there are 4 GPUs or more). Skipped (77) without a
# GPU, which is the case in CI.
#   run_gpu.sh DDLRUN GPU_CHECK RUN_CHECK
set -uo pipefail
ddlrun=$1 check=$2 run_check=$3
n=$("$check" --count) || { echo "comm_gpu: skipped: $n"; exit 77; }
"$run_check" "$ddlrun" "$check" "$n" -H "localhost:$n" --no-probe || exit 1
if ((n >= 4)); then
  "$run_check" "$ddlrun" "$check" 4 -H localhost:4 --no-probe --mode p:2x2 -x DDL_ALGO=multiring ||
    exit 1
fi
