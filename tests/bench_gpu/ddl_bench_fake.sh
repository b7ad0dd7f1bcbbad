#!/usr/bin/env bash
# ddl-bench -G (buffers in GPU memory through libcudart, bench/comm/cuda_memory.c) as a real
# 4-rank job through ddlrun, against the fake libcudart.so.13 and libnccl.so.2 of
# tests/comm_gpu/fake_cuda_nccl.cc (a TEST DOUBLE: 4 pretend GPUs, collectives through shared
# memory) first on LD_LIBRARY_PATH: every row is checked (#wrong 0), the header says the buffers
# are device memory, and every rank's NCCL communicator ran collectives (so the data went
# through libddl's NCCL path, not its host transports). Then -G where the runtime has no GPU:
# each rank that reports fails with the exact message (the first one ddlrun names always
# does) and the job ends non-zero.
#   ddl_bench_fake.sh DDLRUN DDL_BENCH FAKE_LIB_DIR
set -uo pipefail
ddlrun=$1 bench=$2 fake=$3
export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset FAKE_NCCL_FAIL_AT
fail() { echo "bench.ddl_bench_gpu_fake: $*" >&2; exit 1; }

out=$(FAKE_CUDA_DEVICES=4 FAKE_NCCL_REPORT=1 "$ddlrun" -H localhost:4 --no-probe --tag-output none \
  -x FAKE_CUDA_DEVICES -x FAKE_NCCL_REPORT "$bench" -G -b 8 -e 64K -w 1 -n 2 2>&1)
rc=$?
echo "$out"
((rc == 0)) || fail "ddl-bench -G exited $rc"
grep -qxF "# buffers: cuda device memory (filled and checked through host copies)" <<<"$out" ||
  fail "the header does not say the buffers are device memory"
rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 8' <<<"$out")
sizes=$(awk '{ printf "%s ", $1 }' <<<"$rows")
[[ $sizes == "8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536 " ]] ||
  fail "rows for sizes '$sizes', expected 8 to 65536"
awk '$8 != "0" { exit 1 }' <<<"$rows" || fail "a row has wrong elements"
reports=$(grep -cE "fake nccl: member [0-3] of 4: [1-9][0-9]* collectives" <<<"$out")
((reports == 4)) || fail "expected 4 NCCL communicators to report collectives, got $reports"

# No GPU: the runtime loads but has no device.
out=$(FAKE_CUDA_DEVICES=0 "$ddlrun" -H localhost:2 --no-probe --tag-output none \
  -x FAKE_CUDA_DEVICES "$bench" -G -b 8 -e 1K 2>&1)
rc=$?
echo "$out"
((rc != 0)) || fail "ddl-bench -G without a GPU exited 0"
# The rank that fails first is stopped-for by ddlrun, which may stop the other before it
# prints: the first one ddlrun names must have printed the exact line (and ddlrun repeats it),
# and every rank's error line that did appear must be the exact one.
want() { echo "ddl-bench: error: rank $1: -G: no GPU on this host (cudaGetDeviceCount: no CUDA-capable device is detected (fake))"; }
first=$(sed -nE 's/^ddlrun: rank ([01]) \(localhost\) exited with status 1; stopping the other process$/\1/p' <<<"$out")
[[ $first == [01] ]] || fail "ddlrun did not name the one rank that failed first"
grep -qxF "$(want "$first")" <<<"$out" || fail "missing: $(want "$first")"
grep -qxF "  $(want "$first")" <<<"$out" || fail "ddlrun did not repeat rank $first's last line"
while IFS= read -r line; do
  [[ $line == "$(want 0)" || $line == "$(want 1)" ]] || fail "unexpected error line: $line"
done < <(grep "^ddl-bench: error:" <<<"$out")
echo "bench.ddl_bench_gpu_fake: ok"
