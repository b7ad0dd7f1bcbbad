#!/usr/bin/env bash
# ddlrun's allreduce against MPI_Allreduce (Open MPI) and Gloo's ring allreduce (TCP), on the same
# ranks and message sizes: one row per size with each one's bus bandwidth (nccl-tests' busbw,
# GB/s) and ddl's over the others'. Two settings:
#   1. this host, 4 ranks: ddl-bench and gloo_allreduce_bench under `ddlrun -H localhost:4`,
#      mpi_allreduce_bench under `mpirun -np 4`;
#   2. (root) 3 fake hosts x 2 ranks (network namespaces with their own sshd, tests/netns/
#      hosts.sh), every host's link shaped to 1 Gbit/s each way (netns_shape, tc tbf): ddl and
#      Gloo under `ddlrun --launcher ssh -H node1:2,node2:2,node3:2`, MPI under mpirun over the
#      same ssh with its TCP on the bridge; extra columns give each one's busbw as a share of the
#      shaped rate (a ring crosses each host's link once per direction, so 100% is the ceiling).
# How it works: each benchmark prints nccl-tests' table (comm/bench/bench_common.h); this script
# keeps their logs in a temporary directory, joins the rows by size, and prints the comparison.
#
# Usage: bench/allreduce_compare.sh [--quick] [--build DIR] [--no-netns] [--rate RATE]
#                                   [-b MIN] [-e MAX] [-f FACTOR] [-w N] [-n N] [-t TYPE]
#   --quick        sizes 1K, 32K and 1M, 1 warm-up and 3 timed iterations, this host only (the
#                  bench.allreduce_smoke test)
#   --build DIR    the build directory holding ddlrun and comm/bench (default build)
#   --no-netns     this host only
#   --rate RATE    the fake hosts' link rate, as tc takes it (default 1gbit)
#   --keep DIR     keep every benchmark's output in DIR
#   -b -e -f -w -n -t  passed to every benchmark (default -b 8 -e 64M -f 4 -w 3 -n 10 -t float32)
# Exit status: 0 when every benchmark ran and every row had #wrong 0 (Gloo may be missing: its
# column says n/a), 1 otherwise (the failing command and its output's end are printed), 2 bad
# usage. Without root the namespace setting is skipped, with a line saying so.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
netns=1 rate=1gbit keep=""
min=8 max=64M factor=4 warmup=3 iters=10 type=float32
while (($#)); do
  case $1 in
    --quick) netns=0 min=1K max=1M factor=32 warmup=1 iters=3 ;;
    --build) build=${2:?--build takes a directory}; shift ;;
    --no-netns) netns=0 ;;
    --rate) rate=${2:?--rate takes a rate like 1gbit}; shift ;;
    --keep) keep=${2:?--keep takes a directory}; shift ;;
    -b) min=${2:?-b takes a size}; shift ;;
    -e) max=${2:?-e takes a size}; shift ;;
    -f) factor=${2:?-f takes a factor}; shift ;;
    -w) warmup=${2:?-w takes a count}; shift ;;
    -n) iters=${2:?-n takes a count}; shift ;;
    -t) type=${2:?-t takes a type}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "allreduce_compare: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

ddlrun="$build/ddlrun/ddlrun"
bin="$build/comm/bench"
for f in "$ddlrun" "$bin/ddl-bench" "$bin/mpi_allreduce_bench"; do
  if [[ ! -x $f ]]; then
    echo "allreduce_compare: no $f (build it: cmake --build $build, or give --build DIR)" >&2
    exit 2
  fi
done
if ! command -v mpirun >/dev/null; then
  echo "allreduce_compare: no mpirun (install openmpi-bin)" >&2
  exit 2
fi
ddlrun=$(realpath "$ddlrun")
bin=$(realpath "$bin")
gloo="$bin/gloo_allreduce_bench"
[[ -x $gloo ]] || gloo=""
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun as root

work=$(mktemp -d "${TMPDIR:-/tmp}/allreduce_compare.XXXXXX") || exit 1
chmod 755 "$work"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n $keep ]]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
  rm -rf "$work"
}
trap cleanup EXIT
bench_args=(-b "$min" -e "$max" -f "$factor" -w "$warmup" -n "$iters" -t "$type" -o sum -c 1)
# Ranks may outnumber the cores (fake hosts share this machine's): MPI's busy polling would
# then starve the rank it waits for, so its ranks yield the core while they wait.
mpi_args=(--mca mpi_yield_when_idle 1)
failed=0

# run_bench LOG CMD...: runs CMD (10 minutes at most) with its output in LOG. On failure says
# so with the command and the end of its output, and returns 1.
run_bench() {
  local log=$1
  shift
  echo "$*" >"$log.cmd"
  timeout 600 "$@" >"$log" 2>&1
  local rc=$?
  ((rc == 0)) && return 0
  echo "allreduce_compare: failed (exit $rc): $*" >&2
  tail -n 15 "$log" | sed 's/^/  | /' >&2
  failed=1
  return 1
}

# table TITLE RATE_GBPS DDL_LOG MPI_LOG GLOO_LOG: the rows of the three logs joined by size.
# RATE_GBPS 0 leaves out the share-of-link columns. A missing log shows n/a, a missing row -.
table() {
  local title=$1 link=$2 logs=("$3" "$4" "$5") i
  for i in 0 1 2; do [[ -e ${logs[$i]} ]] || : >"${logs[$i]}"; done
  echo
  echo "== $title (allreduce $type sum, busbw in GB/s)"
  awk -v link="$link" -v a="${logs[0]}" -v b="${logs[1]}" -v c="${logs[2]}" \
    -v have_c="$([[ -s ${logs[2]} ]] && echo 1 || echo 0)" '
    function cell(k, s) { return (k SUBSEP s) in bw ? sprintf("%.4f", bw[k, s]) : "-" }
    # Same size and ranks: busbw over busbw is time over time, which has more digits.
    function ratio(s, k) {
      if (!((1 SUBSEP s) in t) || !((k SUBSEP s) in t) || t[1, s] <= 0) return "-"
      return sprintf("%.2f", t[k, s] / t[1, s])
    }
    function share(k, s) {
      return (k SUBSEP s) in bw ? sprintf("%.0f%%", 100 * bw[k, s] / link) : "-"
    }
    function wrong_of(k, s) { return (k SUBSEP s) in wrong ? wrong[k, s] : "-" }
    /^#/ || NF != 8 || $1 !~ /^[0-9]+$/ { next }
    {
      k = FILENAME == a ? 1 : FILENAME == b ? 2 : 3
      if (!($1 in seen)) { seen[$1] = 1; sizes[++n] = $1 }
      t[k, $1] = $5; bw[k, $1] = $7; wrong[k, $1] = $8
    }
    END {
      printf "%12s %10s %10s %10s %8s %9s", "size(B)", "ddl", "mpi", "gloo", "ddl/mpi", "ddl/gloo"
      if (link > 0) printf " %7s %7s %7s", "ddl%", "mpi%", "gloo%"
      printf " %12s\n", "#wrong d/m/g"
      for (i = 1; i <= n; ++i) {
        s = sizes[i]
        printf "%12s %10s %10s %10s %8s %9s", s, cell(1, s), cell(2, s),
          have_c ? cell(3, s) : "n/a", ratio(s, 2), have_c ? ratio(s, 3) : "n/a"
        if (link > 0) printf " %7s %7s %7s", share(1, s), share(2, s), have_c ? share(3, s) : "n/a"
        printf " %12s\n", wrong_of(1, s) "/" wrong_of(2, s) "/" (have_c ? wrong_of(3, s) : "n/a")
      }
      if (n == 0) print "  (no rows: every benchmark failed)"
    }' "${logs[@]}"
  # Every row present in a log must have #wrong 0.
  if awk '!/^#/ && NF == 8 && $1 ~ /^[0-9]+$/ && $8 != "0" { bad = 1 } END { exit !bad }' \
    "${logs[@]}"; then
    echo "allreduce_compare: wrong elements in $title (the #wrong column)" >&2
    failed=1
  fi
}

# 1. This host, 4 ranks.
echo "allreduce_compare: this host, 4 ranks: ${bench_args[*]}"
run_bench "$work/local.ddl" "$ddlrun" -q --tag-output none -H localhost:4 "$bin/ddl-bench" \
  "${bench_args[@]}"
run_bench "$work/local.mpi" mpirun "${mpi_args[@]}" --oversubscribe -np 4 \
  "$bin/mpi_allreduce_bench" "${bench_args[@]}"
if [[ -n $gloo ]]; then
  run_bench "$work/local.gloo" "$ddlrun" -q --tag-output none -H localhost:4 "$gloo" \
    "${bench_args[@]}" -i lo -s "$work/gloo-store.local"
else
  echo "allreduce_compare: no $bin/gloo_allreduce_bench (install libgloo-dev and rebuild)"
fi
table "this host, 4 ranks" 0 "$work/local.ddl" "$work/local.mpi" "$work/local.gloo"

# 2. Three fake hosts x 2 ranks, links shaped.
if ((netns)); then
  # shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
  source "$here/../tests/netns/hosts.sh"
  netns_up 3
  rc=$?
  trap 'netns_down; cleanup' EXIT
  if ((rc == 77)); then
    echo "allreduce_compare: skipped the 3-host setting (see the netns line above)"
  elif ((rc != 0)); then
    echo "allreduce_compare: could not make the fake hosts" >&2
    failed=1
  else
    for k in 1 2 3; do
      netns_shape "$k" "$rate" || { echo "allreduce_compare: tc could not shape node$k" >&2; failed=1; }
    done
    # The rate in GB/s (10^9 bytes), for the share columns: tc's rates are bits per second.
    link=$(awk -v r="$rate" 'BEGIN {
      n = r + 0; u = tolower(substr(r, length(n "") + 1))
      m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" ? 1 : 0
      printf "%.6f", n * m / 8e9 }')
    hosts=node1:2,node2:2,node3:2
    ssh_ddlrun=("$ddlrun" -q --tag-output none --launcher ssh --ssh-config "$NETNS_SSH_CONFIG"
      --tcp -H "$hosts")
    echo
    echo "allreduce_compare: 3 hosts x 2 ranks, links shaped to $rate: ${bench_args[*]}"
    run_bench "$work/netns.ddl" "${ssh_ddlrun[@]}" "$bin/ddl-bench" "${bench_args[@]}"
    run_bench "$work/netns.mpi" mpirun "${mpi_args[@]}" --host "$hosts" -np 6 \
      --mca plm_rsh_args "-F $NETNS_SSH_CONFIG" --mca oob_tcp_if_include "$NETNS_NET" \
      --mca btl_tcp_if_include "$NETNS_NET" --mca btl self,vader,tcp \
      "$bin/mpi_allreduce_bench" "${bench_args[@]}"
    if [[ -n $gloo ]]; then
      # The store lies under $NETNS_DIR, which every fake host sees (their /tmp are their own).
      run_bench "$work/netns.gloo" "${ssh_ddlrun[@]}" "$gloo" "${bench_args[@]}" \
        -s "$NETNS_DIR/gloo-store"
    fi
    table "3 hosts x 2 ranks, links shaped to $rate (%: busbw over the link rate)" "$link" \
      "$work/netns.ddl" "$work/netns.mpi" "$work/netns.gloo"
  fi
fi

if ((failed)); then
  echo
  echo "allreduce_compare: FAILED (see above)"
  exit 1
fi
exit 0
