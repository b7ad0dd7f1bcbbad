#!/usr/bin/env bash
# bench.gpu_check_nogpu: bench/gpu_check.sh --quick from the build tree on a host without a GPU
# (as CI's), so that the script a lent GPU machine runs cannot rot here. Passes when it exits 0;
# every GPU step is skipped with the no-GPU reason; probe, plan and the host-memory ddl-bench
# ran; the torch steps on CPU tensors ran when the torch backend was built (TORCH=1), else were
# skipped with a reason; the side-by-side table has one row per size from 8 to 65536 with
# #wrong 0 in every column that ran; and the summary counts no failure. Also the script's usage
# errors (exit 2, exact text). Skipped (77) where the probe finds a GPU.
#   nogpu_test.sh BUILD_DIR TORCH(0|1)
set -uo pipefail
build=$1 torch=$2
script=$(cd "$(dirname "$0")/../.." && pwd)/bench/gpu_check.sh
fail() { echo "bench.gpu_check_nogpu: $*" >&2; exit 1; }

out=$("$script" --build "$build" --quick 2>&1)
rc=$?
echo "$out"
if grep -qE '^probe: [1-9][0-9]* GPU' <<<"$out"; then
  echo "bench.gpu_check_nogpu: skipped: this host has a GPU"
  exit 77
fi
((rc == 0)) || fail "gpu_check.sh exited $rc"
reason="no GPU: ddlrun --probe (hwloc and NVML) lists none on this host"
for s in nccl-1 torch-build torch-ddl torch-nccl nccl-2 torch-nccl-2; do
  grep -qxF "== $s: skipped: $reason" <<<"$out" || fail "step $s was not skipped for want of a GPU"
done
grep -qxF "== bundle: skipped: not a bundle (programs from the build tree $(cd "$build" && pwd))" \
  <<<"$out" || fail "the bundle step was not skipped as it should be in a build tree"
for s in env probe plan host-ddl table; do
  grep -qE "^-- $s: ok \(" <<<"$out" || fail "step $s did not run ok"
done
if ((torch)); then
  for s in torch-ddl-cpu torch-gloo-cpu; do
    grep -qE "^-- $s: ok \(" <<<"$out" || fail "step $s did not run ok"
  done
else
  grep -qE "^== torch-cpu: skipped: " <<<"$out" || fail "torch-cpu was neither run nor skipped"
fi
grep -qE '^gpus: \[\]$|^gpus:$' <<<"$out" || fail "the probe's YAML has no gpus: entry"
# The table: "size | libddl-host us busbw #wrong | torch-ddl-cpu ... | torch-gloo-cpu ...".
rows=$(awk '/^# all_reduce float32 sum/ { on = 1; next } on && $1 ~ /^[0-9]+$/' <<<"$out")
sizes=$(awk '{ printf "%s ", $1 }' <<<"$rows")
[[ $sizes == "8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536 " ]] ||
  fail "table rows for sizes '$sizes', expected 8 to 65536"
bad=$(awk -F'|' -v torch="$torch" '{
  for (c = 2; c <= NF; ++c) {
    split($c, f, " ")
    if (c == 2 || torch) { if (f[3] != "0") print "size " $1 " column " c - 1 ": " $c }
    else if (f[1] != "-") print "size " $1 " column " c - 1 " should be empty: " $c
  }
}' <<<"$rows")
[[ -z $bad ]] || fail "table cells wrong: $bad"
grep -qE '^== gpu_check: [0-9]+ s; [0-9]+ ran, [0-9]+ skipped, 0 failed$' <<<"$out" ||
  fail "the summary line is missing or counts failures"

# Usage errors.
expect_usage() {  # WANT ARGS...
  local want=$1 got rc
  shift
  got=$("$script" "$@" 2>&1)
  rc=$?
  ((rc == 2)) || fail "gpu_check.sh $* exited $rc, not 2"
  grep -qxF "$want" <<<"$got" || fail "gpu_check.sh $*: expected '$want', got: $got"
}
expect_usage "gpu_check: --budget takes whole seconds, not 'soon'" --build "$build" --budget soon
expect_usage "gpu_check: no folder '/nonexistent/.gpu' (--bundle)" --bundle /nonexistent/.gpu
expect_usage "gpu_check: unknown argument '--gpus'" --gpus 2
echo "bench.gpu_check_nogpu: ok"
