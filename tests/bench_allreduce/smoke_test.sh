#!/usr/bin/env bash
# bench.allreduce_smoke: bench/allreduce_compare.sh --quick on this host (2 and 4 ranks;
# ddl-bench, Gloo's ring and torch's gloo backend under ddlrun, MPI_Allreduce under mpirun
# tuned, forced to the ring and untuned, memcpy_bench for the memory limits). Passes when the
# script exits 0 and prints two tables ("this host, 2 ranks", "this host, 4 ranks") whose header
# names every column, each with one row per size (8, 1K, 32K, 1M) in which every benchmark has a
# busbw (ddl-shared too: ddl-bench -S, libddl's single pass on ddl_alloc buffers) (Gloo and torch-gloo may say n/a when not built or without torch), the best forced MPI
# algorithm is named, the copy, single-pass and slot limits are positive numbers (the single-pass
# one above the copy limit, the slot one below it), the exchange limit and ddl%xchg too from
# 64 KiB up where the ranks do not outnumber the cores ("-" otherwise), ddl%slot is a share and #wrong is 0; and an 8-byte latency line under each. No timing is checked.
# Usage: smoke_test.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: smoke_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/../../bench/allreduce_compare.sh" --quick --build "$build" 2>&1)
rc=$?
echo "$out"
if ((rc != 0)); then
  echo "bench.allreduce_smoke: allreduce_compare.sh --quick exited $rc" >&2
  exit 1
fi
# check_table TITLE XCHG: the table under "== TITLE:" (XCHG 1: with an exchange limit); prints
# what is wrong with it, nothing if all is right.
check_table() {
  awk -v title="== $1:" -v xchg="$2" '
    function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
    index($0, title) == 1 { state = 1; next }
    state == 1 {  # the header
      want = "size(B) ddl ddl-shared mpi-tuned mpi-best(N) mpi-untuned gloo torch-gloo copy-limit 1pass-limit slot-limit xchg-limit ddl/tuned ddl/best ddl/gloo ddl/torch ddl%copy ddl%1pass ddl%slot ddl%xchg shr%1pass #wrong"
      got = $0; gsub(/ +/, " ", got); sub(/^ /, "", got)
      if (got != want) { print "header is \"" got "\", not \"" want "\""; exit }
      state = 2; next
    }
    state == 2 && /^  8 B latency \(us\): ddl [0-9.]+, ddl-shared [0-9.]+, mpi-tuned/ { latency = 1; next }
    state == 2 && $1 ~ /^[0-9]+$/ {
      rows[$1] = 1
      if (NF != 22) { print "row " $1 " has " NF " columns, not 22: " $0; next }
      if (!num($2) || !num($3) || !num($4) || !num($6)) print "row " $1 ": ddl, ddl-shared, mpi-tuned or mpi-untuned missing: " $0
      if ($5 !~ /^[0-9.]+\([1-6]\)$/) print "row " $1 ": no best forced MPI algorithm: " $0
      if (!num($7) && $7 != "n/a") print "row " $1 ": gloo missing: " $0
      if (!num($8) && $8 != "n/a") print "row " $1 ": torch-gloo missing: " $0
      if (!num($9) || $9 + 0 <= 0) print "row " $1 ": the copy limit is not positive: " $0
      if (!num($10) || $10 + 0 <= $9 + 0) print "row " $1 ": the single-pass limit is not above the copy limit: " $0
      if (!num($11) || $11 + 0 <= 0 || $11 + 0 >= $9 + 0) print "row " $1 ": the slot limit is not positive and below the copy limit: " $0
      if (xchg && $1 >= 65536 && (!num($12) || $12 + 0 <= 0)) print "row " $1 ": the exchange limit is not positive: " $0
      if ((!xchg || $1 < 65536) && ($12 != "-" || $20 != "-")) print "row " $1 ": an exchange limit below 64 KiB or with more ranks than cores: " $0
      if ($19 !~ /^[0-9]+%$/) print "row " $1 ": no ddl%slot: " $0
      if (xchg && $1 >= 65536 && $20 !~ /^[0-9]+%$/) print "row " $1 ": no ddl%xchg: " $0
      if ($21 !~ /^[0-9]+%$/) print "row " $1 ": no shr%1pass: " $0
      if ($22 != "0") print "row " $1 ": #wrong is " $22 ": " $0
      next
    }
    state == 2 && /^(==|allreduce_compare:)/ { state = 3 }
    END {
      if (state == 0) { print "no table"; exit }
      n = split("8 1024 32768 1048576", sizes, " ")
      for (i = 1; i <= n; ++i) if (!(sizes[i] in rows)) print "no row for " sizes[i] " bytes"
      for (s in rows) if (s != 8 && s != 1024 && s != 32768 && s != 1048576) print "a row for " s " bytes"
      if (!latency) print "no 8-byte latency line"
    }' <<<"$out"
}
bad=0
cores=$(nproc)
for ranks in 2 4; do
  title="this host, $ranks ranks"
  problems=$(check_table "$title" $((ranks <= cores)))
  if [[ -n $problems ]]; then
    echo "bench.allreduce_smoke: table \"$title\":" >&2
    while IFS= read -r line; do echo "  $line" >&2; done <<<"$problems"
    bad=1
  fi
done
((bad == 0)) || exit 1
echo "bench.allreduce_smoke: ok"
