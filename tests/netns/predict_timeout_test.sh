#!/usr/bin/env bash
# bench/predict_check.sh when every ddl-bench run times out (--run-timeout 1 on its 3 hosts x 2
# ranks, each run moving 256 MiB at 1 Gbit/s): every mode is named as timed out, the check says
# that no mode was measured, no time of 0 (nor nan) is printed as a measurement, the status is
# 1, and nothing is left running. Skipped (77) like predict_check (not root, no ip netns or sshd).
#   predict_timeout_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source=$1 build=$2
fail() {
  echo "predict_timeout: $*" >&2
  exit 1
}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
"$source/bench/predict_check.sh" --build "$build" --only flat --size 256M --run-timeout 1 \
  >"$tmp" 2>&1 </dev/null &
pid=$!
wait "$pid"
status=$?
out=$(<"$tmp")
printf '%s\n' "$out"
((status == 77)) && exit 77
((status == 1)) || fail "predict_check exited $status, not 1"
timed_out=$(grep -c "^predict_check: ddl-bench in mode .* timed out (1 s); its last lines:$" \
  <<<"$out")
((timed_out >= 2)) || fail "not every mode's run was named as timed out ($timed_out named)"
grep -qxF "  not measured (the run failed or timed out, above): $(
  sed -n 's/^predict_check: ddl-bench in mode \(.*\) timed out (1 s).*/\1/p' <<<"$out" |
    tr '\n' ' ' | sed 's/ $//')" <<<"$out" || fail "the modes not measured are not listed"
grep -qxF "  no mode was measured: nothing to compare the predictions with" <<<"$out" ||
  fail "it does not say that no mode was measured"
if grep -qE '(^| )0\.0 ms|nan|picked  ' <<<"$out"; then
  fail "a run that timed out is shown as a measurement"
fi
grep -qxF "predict_check: FAILED (see above)" <<<"$out" || fail "no FAILED line"
# Its namespaces are ddlt<its PID>-<k> (tests/netns/hosts.sh).
if ip netns list | grep -q "^ddlt$pid-"; then
  fail "its namespaces are left: $(ip netns list | grep "^ddlt$pid-" | tr '\n' ' ')"
fi
echo "predict_timeout: ok"
