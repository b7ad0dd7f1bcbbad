#!/usr/bin/env bash
# bench.memcpy_exchange: memcpy_bench -x (the exchange limit of bench/allreduce_compare.sh).
# 2 processes and 3 (more than this machine's 2 cores: the waits must yield) print one row per
# size with positive rates; bad options get their exact errors; and when one process is killed
# mid-round the others give up with the exact message after -g 2 s and the benchmark
# exits 1, leaving no process behind. No timing is checked.
#   memcpy_exchange_test.sh MEMCPY_BENCH
set -uo pipefail
bench=${1:?usage: memcpy_exchange_test.sh MEMCPY_BENCH}
fail() { echo "bench.memcpy_exchange: $*" >&2; exit 1; }

for p in 2 3; do
  out=$(timeout 60 "$bench" -x -p "$p" -c 256K -b 8 -e 1M -f 32 -r 2 -m 20 2>&1) ||
    fail "-x -p $p failed: $out"
  echo "$out"
  grep -qxF "# memcpy_bench -x: $p processes handing each other pieces through shared slots of 262144 bytes" \
    <<<"$out" || fail "-x -p $p: no header naming the slots"
  # (a rate is printed to 0.0001 GB/s: at 8 B on a loaded machine it shows as 0.0000, while
  # the time of S bytes at that rate, finite and positive, says that it is not 0)
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 5 && $2 ~ /^[0-9.]+$/ && $2 + 0 > 0 && $3 ~ /^[0-9.]+$/ {
    printf "%s ", $1 }' <<<"$out")
  [[ $rows == "8 256 8192 262144 " ]] || fail "-x -p $p: rows with positive rates for '$rows'"
done

expect_error() {  # WANT ARGS...: exits 2 with exactly WANT as its first line on stderr
  local want=$1 got rc
  shift
  got=$("$bench" "$@" 2>&1 >/dev/null)
  rc=$?
  ((rc == 2)) || fail "memcpy_bench $* exited $rc, not 2"
  [[ ${got%%$'\n'*} == "$want" ]] || fail "memcpy_bench $*: '${got%%$'\n'*}', not '$want'"
}
expect_error "memcpy_bench: error: -x needs at least 2 processes (-p 2 or more)" -x -p 1
expect_error "memcpy_bench: error: -c 100: takes a size of at least 4K, like 1M" -x -c 100
expect_error "memcpy_bench: error: -c sets the slots of -x: add -x" -c 1M
expect_error "memcpy_bench: error: -g 0: takes seconds > 0" -x -g 0

# A process killed mid-round: the other gives up, the benchmark fails, nothing is left.
"$bench" -x -g 2 -p 2 -c 256K -b 1M -e 1M -r 1 -m 60000 >/dev/null 2>/tmp/memcpy_exchange.$$ &
parent=$!
for _ in $(seq 50); do
  kids=$(pgrep -P "$parent" | sort -n)
  [[ $(wc -w <<<"$kids") == 2 ]] && break
  sleep 0.1
done
[[ $(wc -w <<<"$kids") == 2 ]] || fail "the 2 processes did not start"
sleep 0.5
victim=$(head -1 <<<"$kids")
other=$(tail -1 <<<"$kids")
kill -9 "$victim"
start=$SECONDS
wait "$parent"
rc=$?
err=$(cat /tmp/memcpy_exchange.$$)
rm -f /tmp/memcpy_exchange.$$
((rc == 1)) || fail "after a process was killed the benchmark exited $rc, not 1: $err"
((SECONDS - start <= 10)) || fail "the benchmark took $((SECONDS - start)) s to end"
grep -qxE "memcpy_bench: error: -x: process (0 waited 2 s for process 1|1 waited 2 s for process 0): it died or was stopped" \
  <<<"$err" || fail "no give-up message: $err"
kill -0 "$other" 2>/dev/null && fail "process $other is still running"
echo "bench.memcpy_exchange: ok"
