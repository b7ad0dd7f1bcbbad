#!/usr/bin/env bash
# bench/test_cpu.py on a CTest folder of its own (a CTestTestfile.cmake written here, so that no
# other suite's tests or logs are touched): a test that uses half a second of CPU shows at least
# that, one that sleeps is flagged as one that could be labelled `waits`, a test's ENVIRONMENT
# reaches it, and one that leaves a process behind is named, the process killed, status 1.
# Skipped (77) where no cgroup can be made (not root).
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
script=${1:?usage: test_cpu_test.sh BENCH_TEST_CPU_PY}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/CTestTestfile.cmake" <<'CMAKE'
add_test(spins "python3" "-c" "import time\nwhile time.process_time() < 0.5: pass")
add_test(sleeps "sleep" "1")
add_test(env "sh" "-c" "test \"$DDL_TEST_CPU_X\" = 7")
set_tests_properties(env PROPERTIES ENVIRONMENT "DDL_TEST_CPU_X=7" LABELS "waits")
add_test(leaves "sh" "-c" "sleep 300 & echo $! > leftover.pid")
CMAKE
out=$(python3 "$script" "$dir" --min 0)
rc=$?
echo "$out"
((rc == 77)) && exit 77
((rc == 1)) || fail "exit status $rc, not 1 (a test left a process)"
row() { grep -E "^$1 " <<<"$out"; }
[[ $(head -n 1 <<<"$out") == test*wall\(s\)*cpu\(s\)*share*label*note ]] || fail "no header"
cpu=$(row spins | awk '{print $3}')
awk -v c="$cpu" 'BEGIN { exit !(c >= 0.5) }' || fail "spins used ${cpu:-no} CPU seconds, not 0.5 or more"
row sleeps | grep -q "cpu *mostly waits: could be labelled waits$" || fail "sleeps not flagged"
row env | grep -qE " waits *$" || fail "env's row is not a waits test that passed: $(row env)"
row leaves | grep -q "left 1 processes (killed)" || fail "the leftover is not named"
pid=$(cat "$dir/leftover.pid")
alive "$pid" && fail "the leftover sleep ($pid) still runs"
passed_or_exit
