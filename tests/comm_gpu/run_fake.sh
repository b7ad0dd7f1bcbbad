#!/usr/bin/env bash
# libddl's real NCCL code (dlopen, non-blocking init, polling, abort) as real jobs through
# ddlrun, on a machine without a GPU: the fake libcudart.so.13 and libnccl.so.2 of
# fake_cuda_nccl.cc (a TEST DOUBLE) come first on LD_LIBRARY_PATH and pretend to be 4 GPUs.
#   run_fake.sh DDLRUN GPU_CHECK RUN_CHECK FAKE_LIB_DIR
set -uo pipefail
ddlrun=$1 check=$2 run_check=$3 fake=$4
export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKE_CUDA_DEVICES=4
unset FAKE_NCCL_FAIL_AT
n=$("$check" --count) || { echo "comm_gpu: the fake libcudart was not loaded: $n" >&2; exit 1; }
[[ $n == 4 ]] || { echo "comm_gpu: expected the fake's 4 GPUs, got $n" >&2; exit 1; }
# Each job must really have gone through NCCL: every communicator reports its collectives.
expect_nccl() {  # OUTPUT PATTERN COUNT
  local got
  got=$(grep -cE "$2" <<<"$1")
  if ((got != $3)); then
    echo "comm_gpu: expected $3 lines matching '$2' from the fake NCCL, got $got" >&2
    exit 1
  fi
}
# Flat: every collective on "GPU" buffers through the job's NCCL communicator (one per rank,
# and one per rank for the ring of the only dimension with more than one rank).
out=$(FAKE_NCCL_REPORT=1 "$run_check" "$ddlrun" "$check" 4 -H localhost:4 --no-probe \
  -x FAKE_NCCL_REPORT) || { echo "$out"; exit 1; }
echo "$out"
expect_nccl "$out" "fake nccl: member [0-3] of 4: 1[0-9] collectives" 4
# Two dimensions: the multi-dimensional allreduce (reduce-scatter, allreduce, allgather) on
# two rings of 2 per rank, as well as the job's communicator.
out=$(FAKE_NCCL_REPORT=1 "$run_check" "$ddlrun" "$check" 4 -H localhost:4 --no-probe \
  --mode p:2x2 -x FAKE_NCCL_REPORT) || { echo "$out"; exit 1; }
echo "$out"
expect_nccl "$out" "fake nccl: member [01] of 2: [1-9][0-9]* collectives" 8
# An NCCL error on rank 0 (its 3rd collective): the communicator is aborted, the rank exits
# with the runtime's message, and ddlrun brings the others down (they wait in NCCL).
start=$(date +%s)
out=$(FAKE_NCCL_FAIL_AT=3 FAKE_NCCL_FAIL_RANK=0 "$ddlrun" --tag-output none -H localhost:4 \
  --no-probe -x FAKE_NCCL_FAIL_AT -x FAKE_NCCL_FAIL_RANK "$check" 2>&1)
status=$?
echo "$out"
want="rank 0: allreduce out of place failed: a GPU collective failed (NCCL or CUDA): rank 0 of an NCCL ring of 4 on GPU 0: ncclAllReduce: remote process exited or there was a network error (fake) (fake: injected failure)"
if ((status != 1)); then
  echo "comm_gpu: ddlrun exited with $status, expected 1" >&2
  exit 1
fi
if ! grep -qxF "$want" <<<"$out"; then
  echo "comm_gpu: the injected NCCL failure was not reported as expected: $want" >&2
  exit 1
fi
if (($(date +%s) - start > 30)); then
  echo "comm_gpu: the failed job took more than 30 s to end" >&2
  exit 1
fi
echo "comm_gpu: fake NCCL jobs ok"
