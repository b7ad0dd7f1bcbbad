#!/bin/bash
# The jsrun test double (tests/lsf/bin/jsrun) itself: what it accepts it runs with JSM's
# variables, and what real jsrun would refuse it refuses with a clear message and status 1
# (the tests of ddlrun's jsrun launcher rely on both). Error text compared exactly.
#   check_double.sh TESTS_DIR
set -uo pipefail

tests=$(cd "$1" && pwd)
jsrun=$tests/lsf/bin/jsrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LSF_TEST_DIR=$work
. "$tests/lsf/lsf_env.sh"
lsf_job 2
lsf_summit_hardware
failed=0

# expect_error NAME "MESSAGE" ARGS...: jsrun ARGS fails with status 1 and exactly MESSAGE.
expect_error() {
  local name=$1 want=$2
  shift 2
  local got status
  got=$("$jsrun" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status != 1 || $got != "jsrun (test double): error: $want" ]]; then
    echo "FAIL $name: status $status, said:" >&2
    echo "  $got" >&2
    echo "expected:" >&2
    echo "  jsrun (test double): error: $want" >&2
    failed=1
  fi
}

# erf NAME LINES...: writes $work/NAME.erf.
erf() {
  local name=$1
  shift
  printf '%s\n' "$@" >"$work/$name.erf"
}

erf good 'cpu_index_using: logical' \
  'rank: 0: { hostname: a01n01; cpu: {0-27}; gpu: {0} } : app 0' \
  'rank: 1: { hostname: a01n01; cpu: {84-111}; gpu: {3} } : app 0' \
  'rank: 2: { host: 2; cpu: {0-3},{8-11}; gpu: {5} } : app 0'
out=$(JSRUN_DOUBLE_CHECK_ONLY=1 "$jsrun" --erf_input "$work/good.erf" -E PATH true)
want='rank 0: host a01n01 cpus 0-27 gpus 0
rank 1: host a01n01 cpus 88-115 gpus 3
rank 2: host a01n02 cpus 0-3,8-11 gpus 5
env: PATH
program: ["true"]'
if [[ $out != "$want" ]]; then
  echo "FAIL good ERF (logical CPU 84 is thread 88 on Summit):" >&2
  echo "$out" >&2
  failed=1
fi

# Ranks run with JSM's variables, only the forwarded ones, and their GPUs.
unset JSRUN_DOUBLE_CPUS JSRUN_DOUBLE_SMT
export FORWARDED=yes NOT_FORWARDED=no
erf local 'rank: 0: { hostname: a01n01; cpu: {0}; gpu: {0} } : app 0' \
  'rank: 1: { hostname: a01n01; cpu: {1}; gpu: {3} } : app 0' \
  'rank: 2: { hostname: a01n02; cpu: {0}; gpu: {5} } : app 0'
out=$(JSRUN_DOUBLE_GPUS=6 JSRUN_DOUBLE_CPUS=0-1 "$jsrun" --erf_input "$work/local.erf" -E FORWARDED -E SET=1 sh -c \
  'echo "$JSM_NAMESPACE_RANK/$JSM_NAMESPACE_SIZE/$JSM_NAMESPACE_LOCAL_RANK/$JSM_NAMESPACE_LOCAL_SIZE gpu=$CUDA_VISIBLE_DEVICES $FORWARDED$SET${NOT_FORWARDED:-}"' 2>&1)
status=$?
sorted=$(sort <<<"$out")
want='0/3/0/2 gpu=0 yes1
1/3/1/2 gpu=3 yes1
2/3/0/1 gpu=5 yes1'
if [[ $status != 0 || $sorted != "$want" ]]; then
  echo "FAIL ranks' variables (status $status):" >&2
  echo "$out" >&2
  failed=1
fi
lsf_summit_hardware

# A failing rank's status is jsrun's; the others are killed.
start=$SECONDS
"$jsrun" -n 2 -r 1 -a 2 -c 1 -b none sh -c '[ "$JSM_NAMESPACE_RANK" = 2 ] && exit 7; sleep 30' \
  2>/dev/null
status=$?
if [[ $status != 7 || $((SECONDS - start)) -gt 20 ]]; then
  echo "FAIL failing rank: status $status after $((SECONDS - start)) s (want 7, the others killed)" >&2
  failed=1
fi

# Prepended output.
out=$("$jsrun" -n 2 -r 1 -a 1 -c ALL_CPUS -g ALL_GPUS -b none --stdio_mode prepended sh -c \
  'echo "on $JSM_NAMESPACE_RANK"' | sort)
if [[ $out != $'0: on 0\n1: on 1' ]]; then
  echo "FAIL --stdio_mode prepended:" >&2
  echo "$out" >&2
  failed=1
fi

# What jsrun refuses.
expect_error unknown-flag "unknown option '--tasks_per_host'" --tasks_per_host 2 true
expect_error both-forms "--erf_input and resource-set flags (-n -a -c -g -r -b) exclude each other" \
  --erf_input "$work/good.erf" -n 2 true
expect_error no-program "no program to run" -n 1
erf key 'rank: 0: { hostname: a01n01; cpus: {0-3} } : app 0'
expect_error unknown-key "$work/key.erf:1: unknown resource-set key 'cpus' (jsrun knows host, hostname, cpu, gpu, mem)" \
  --erf_input "$work/key.erf" true
erf symbol 'cpu_index: logical' 'rank: 0: { hostname: a01n01; cpu: {0-3} } : app 0'
expect_error unknown-symbol "$work/symbol.erf:1: unknown preamble symbol 'cpu_index' (jsrun knows cpu_index_using, launch_distribution, overlapping_rs, oversubscribe_cpu, oversubscribe_gpu, oversubscribe_mem, skip_missing_cpu, skip_missing_gpu, skip_missing_mem)" \
  --erf_input "$work/symbol.erf" true
erf overlap 'rank: 0: { hostname: a01n01; cpu: {0-27} } : app 0' \
  'rank: 1: { hostname: a01n01; cpu: {24-51} } : app 0'
expect_error overlap "$work/overlap.erf:2: the CPU set of rank 1 overlaps rank 0's on a01n01 (CPU 24); give each rank its own CPUs or write 'overlapping_rs: allow'" \
  --erf_input "$work/overlap.erf" true
erf gpu 'rank: 0: { hostname: a01n01; cpu: {0-3}; gpu: {6} } : app 0'
expect_error gpu-range "$work/gpu.erf:1: GPU 6 is out of range: host a01n01 has 6 GPUs (0-5)" \
  --erf_input "$work/gpu.erf" true
erf shared 'rank: 0: { hostname: a01n01; cpu: {0-3}; gpu: {1} } : app 0' \
  'rank: 1: { hostname: a01n01; cpu: {4-7}; gpu: {1} } : app 0'
expect_error gpu-shared "$work/shared.erf:2: GPU 1 of a01n01 is given to rank 0 and rank 1; give each rank its own GPU or write 'oversubscribe_gpu: allow'" \
  --erf_input "$work/shared.erf" true
erf beyond 'rank: 0: { hostname: a01n01; cpu: {160-171} } : app 0'
expect_error cpu-beyond "$work/beyond.erf:1: CPU 168 is beyond host a01n01, which has 168 usable hardware threads (logical 0-167)" \
  --erf_input "$work/beyond.erf" true
erf isolated 'cpu_index_using: physical' 'rank: 0: { hostname: a01n01; cpu: {84} } : app 0'
expect_error cpu-isolated "$work/isolated.erf:2: CPU 84 is not a usable hardware thread of host a01n01 (physical 0-83,88-171)" \
  --erf_input "$work/isolated.erf" true
erf host 'rank: 0: { hostname: batch3; cpu: {0} } : app 0'
expect_error batch-host "$work/host.erf:1: host 'batch3' is not a compute host of this job (a01n01 a01n02)" \
  --erf_input "$work/host.erf" true
erf missing 'rank: 0: { hostname: a01n01; cpu: {0} } : app 0' 'rank: 2: { hostname: a01n01; cpu: {1} } : app 0'
expect_error missing-rank "$work/missing.erf: rank 1 is missing (ranks must be 0-1)" \
  --erf_input "$work/missing.erf" true
erf nocpu 'rank: 0: { hostname: a01n01; gpu: {0} } : app 0'
expect_error no-cpu "$work/nocpu.erf:1: rank 0 has no 'cpu' key (every resource set needs one)" \
  --erf_input "$work/nocpu.erf" true
expect_error rs-too-many "-n 3 resource sets do not fit: 2 hosts x 1 sets per host hold 2" \
  -n 3 -r 1 -a 6 -c ALL_CPUS -g ALL_GPUS -b none true
expect_error rs-cores "-r 2 sets of -c 22 cores need 44 cores per host, but each host has 42" \
  -n 2 -r 2 -c 22 true
expect_error rs-gpus "-r 1 sets of -g 7 GPUs need 7 GPUs per host, but each host has 6" \
  -n 2 -r 1 -g 7 true
expect_error rs-bind "-b spread: expected none, rs or packed:N" -n 1 -b spread true
(
  unset LSB_JOBID
  expect_error outside-lsf "not inside an LSF job: \$LSB_JOBID is not set (run jsrun inside bsub)" \
    -n 1 true
  exit $failed
) || failed=1

if [[ $failed == 0 ]]; then echo "jsrun test double: all checks pass"; fi
exit $failed
