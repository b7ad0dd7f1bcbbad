#!/usr/bin/env bash
# ddlrun's allreduce against Open MPI's MPI_Allreduce and Gloo's ring allreduce, on the same
# ranks and message sizes, and against what the machine allows: one table per setting, one row
# per size, each cell a bus bandwidth (nccl-tests' busbw, GB/s: size / time x 2(n-1)/n), the
# median over --runs runs of each benchmark (the runs take turns: run 1 of every benchmark,
# then run 2, ...; a row's time and busbw are the medians of the runs' rows).
#
# The columns:
#   ddl          ddl-bench under ddlrun (libddl's default algorithm for the job's mode)
#   mpi-tuned    mpi_allreduce_bench under mpirun with glibc's malloc tuned (below)
#   mpi-best(N)  the best, per size, of `--mca coll_tuned_use_dynamic_rules 1 --mca
#                coll_tuned_allreduce_algorithm N` for N = 1..6 (basic linear, nonoverlapping,
#                recursive doubling, ring, segmented ring, Rabenseifner), malloc tuned too; N
#                is the one that won
#   mpi-untuned  mpirun as installed
#   ddl-shared   (local only) ddl-bench -S: buffers from ddl_alloc, allreduce in place, so that
#                libddl takes its single pass (no copy through its slots); shr%1pass: its share
#                of the 1pass-limit
#   ddl-base     with --baseline DIR: ddl-bench of that build (another libddl, e.g. main's)
#   gloo         gloo_allreduce_bench (Debian's Gloo, its ring over TCP) under ddlrun; n/a when
#                not built
#   torch-gloo   torch.distributed's all_reduce on backend gloo (the Gloo bundled with torch;
#                bench/gpu_allreduce_torch.py --device cpu) under ddlrun, with --torch-python's
#                torch (default: build/venv's, else /opt/ddl-venv's); float32 only; n/a without
#   copy-limit / 1pass-limit / slot-limit / xchg-limit / link-limit   the busbw no allreduce
#                of that kind can beat here (below)
#   ddl/...      ddl's busbw over the other's (time over time); ddl%copy, ddl%1pass, ddl%slot,
#                ddl%xchg, ddl%lim: ddl's busbw as a share of the limit
#   #wrong       the most wrong elements any benchmark's check found at that size (must be 0)
#
# Why tune malloc: Open MPI 4.1's allreduce allocates a temporary buffer on every call, and
# glibc hands blocks above its mmap threshold (128 KiB, rising to at most 32 MiB) back to the
# kernel when freed, so each large call page-faults its buffer afresh (how much that costs
# depends on the kernel and on what else runs). `-x MALLOC_MMAP_THRESHOLD_=1073741824 -x
# MALLOC_TRIM_THRESHOLD_=4294967296` keeps the buffers in the heap. mpi-untuned is printed so
# that the difference stays visible. Where ranks outnumber this machine's cores,
# mpirun also gets `--mca mpi_yield_when_idle 1`: busy polling would starve the very rank a
# waiting one needs (the setting's header says when).
#
# The settings:
#   local  this host, 2 ranks and 4 ranks (two tables): ddl-bench and Gloo under `ddlrun -H
#          localhost:N`, MPI under `mpirun -np N`. The limits are memory's (copy-limit, and
#          1pass-limit below it):
#            memcpy_bench -p N (bench/comm/memcpy_bench.c) forks N processes that copy S bytes
#            between two pre-faulted buffers of their own, all at once, and gives one
#            process's copy rate R (bytes copied / s; it runs in every run beside the others,
#            and R is the median over the runs of its medians). A direct shared-memory
#            allreduce of S bytes on n ranks moves, per rank: (n-1)/n S copied in, a
#            reduction that reads S and writes S/n, and (n-1)/n S copied out. Counting the
#            bytes read and written, that is 2(n-1)/n S + (S + S/n) + 2(n-1)/n S = S (5 -
#            3/n), where a memcpy of S moves 2S. So
#              t_limit = S (5 - 3/n) / (2 R)     (R measured with n processes copying at once)
#              busbw_limit = 2(n-1)/n S / t_limit = 4(n-1) R / (5n - 3)
#          (n = 2: 0.57 R; n = 4: 0.71 R). The single-pass limit is the least any allreduce
#          must move when the ranks can read each other's buffers (registered or shared
#          memory): the n inputs read once, shared evenly (each rank reads its part of every
#          rank's input, S in all), and each rank's output written once (S): 2S per rank, one
#          memcpy of S, so t_1pass = S / R and busbw_1pass = 2(n-1)/n R (n = 2: R; n = 4: 1.5
#          R). Going through slots can approach it too where the slots stay in the cache (only
#          the input and output then reach memory). The slot limit is the least an allreduce
#          through shared slots must move when every rank's buffers are its own (private, as
#          ddl-bench's are): the copy limit's bytes plus the S/n that the reduced slice is
#          written twice, once to the rank's output and once where the others can read it (no
#          other rank can read the output): S (5 - 2/n) per rank, so busbw_slot = 4(n-1) R /
#          (5n - 2) (n = 2: 0.50 R, 7/8 of the copy limit; n = 4: 0.67 R, 17/18 of it).
#          The exchange limit counts what crosses between cores instead of what is copied:
#          with private buffers every rank must take in 2(n-1)/n S bytes that other cores have
#          just written (the peers' parts of its slice, then their reduced slices), which is
#          busbw's own numerator, so busbw_xchg = X, the rate at which one rank takes such
#          bytes in while every rank does (memcpy_bench -x -p N: the node group's slots and
#          steps without the reduction; median over the runs as R; only where the ranks do
#          not outnumber the cores, "-" otherwise). On a VM, X moves with where the host
#          places the vCPUs and can lie below the copy limit. Below ~64 KiB
#          every allreduce is bound by latency, not by these. The 8-byte row comes from a run
#          of its own with more iterations; its time (us) is printed for each benchmark under
#          the table.
#   flat   (root) 3 fake hosts x 2 ranks (network namespaces with their own sshd,
#          tests/netns/hosts.sh), every host's link shaped to --rate (1 Gbit/s) each way with
#          tc tbf: ddl and Gloo under `ddlrun --launcher ssh --tcp -H node1:2,node2:2,
#          node3:2`, MPI under mpirun over the same ssh, TCP on the hosts' network. The limit
#          is the links': every host must send 2(h-1)/h S of its data out over its link (h
#          hosts), so t_floor = 4/3 S / link; under the table, each one's ms at 16 MiB and
#          floor / time.
#   racks  (root) 2 racks x 2 hosts x 2 ranks: host links --rate (1 Gbit/s), the racks' two
#          bridges joined by one veth pair shaped to --uplink (250 Mbit/s) each way
#          (netns_up_racks, netns_shape_uplink). ddl runs twice: with `--nodes 2` (the PowerAI
#          DDL mode p:2x2x2x1: reduce within hosts, then within racks, then across) and as one
#          flat ring (`--mode r -x DDL_ALGO=ring`, column ddl-flat); the script prints the
#          mode ddlrun plans for each (ddlrun --dry-run -v). The floor is the uplink's: the
#          two racks' halves must each cross it once, t_floor = S / uplink (537 ms at 16 MiB
#          and 250 Mbit/s), or the hosts' 2(h-1)/h S / link when that is longer.
#          The namespace settings sweep up to --net-max (16M) with -w 1 -n 5 (--net-iters):
#          one 16 MiB allreduce takes 0.2 to several seconds on these links.
#
# How it works: each benchmark prints nccl-tests' table (bench/comm/bench_common.h); this
# script keeps every run's log in a temporary directory (<setting>/<benchmark>.<run>.<sweep|
# lat>), and bench/allreduce_table.py joins the rows by size, takes the medians and prints the
# comparison (python3 on PATH: Debian's or a venv's).
#
# Usage: bench/allreduce_compare.sh [--quick] [--build DIR] [--baseline DIR] [--torch-python PY]
#                                   [--runs N] [--only SETTING]
#                                   [--no-netns] [--rate RATE] [--uplink RATE] [--mtu MTU]
#                                   [--keep DIR] [--tables DIR]
#                                   [--net-max SIZE] [--net-iters N]
#                                   [-b MIN] [-e MAX] [-f FACTOR] [-w N] [-n N] [-t TYPE]
#   --quick        this host only, 2 and 4 ranks; sizes 8 (latency), 1K, 32K and 1M; 1 run,
#                  1 warm-up and 3 timed iterations; of the forced MPI algorithms only 4 (ring);
#                  a short memcpy_bench (the bench.allreduce_smoke test)
#   --build DIR    the build directory holding ddlrun and bench/comm (default: build/ of this
#                  checkout)
#   --baseline DIR a second build directory whose ddl-bench runs as column ddl-base (this
#                  host only), e.g. /work/main/build: before and after in one run
#   --torch-python PY  the python with torch for torch-gloo (none: the column says n/a)
#   --runs N       runs of every benchmark; the table shows the medians (default 3)
#   --only S       run one setting: local, flat or racks
#   --no-netns     this host only (the same as --only local)
#   --rate RATE    the fake hosts' link rate, as tc takes it (default 1gbit)
#   --uplink RATE  the racks' uplink rate (default 250mbit)
#   --mtu MTU      the fake network's MTU (default 1500: headers and ACKs then take ~6% of a
#                  link, so no TCP transfer reaches more than ~94% of the payload floor; 9000
#                  for jumbo frames, as HPC fabrics often run)
#   --keep DIR     keep every benchmark's output (and the command that made it) in DIR
#   --tables DIR   run nothing (no build or mpirun needed): print this host's tables from DIR's
#                  logs (a --keep directory, or logs laid out alike: DIR/local2/ddl.1.sweep,
#                  memcpy.1.lat, ...)
#   --net-max SIZE the namespace settings' largest size (default 16M)
#   --net-iters N  their timed iterations (default 5; 1 warm-up)
#   -b -e -f -w -n -t  this host's sweep, passed to every benchmark (default -b 1K -e 64M -f 4
#                  -w 3 -n 10 -t float32: 1K, 4K, 16K, 64K, 256K, 1M, 4M, 16M, 64M); the
#                  namespace settings take -b -f -t from here too
# Exit status: 0 when every benchmark ran and every row had #wrong 0 (Gloo may be missing: its
# column says n/a), 1 otherwise (the failing command and its output's end are printed), 2 bad
# usage. Without root the namespace settings are skipped, with a line saying so.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
baseline="" torch_python="" tables_from=""
only="" rate=1gbit uplink=250mbit mtu=1500 keep="" runs=3 quick=0
min=1K max=64M factor=4 warmup=3 iters=10 type=float32
net_max=16M net_iters=5
while (($#)); do
  case $1 in
    --quick) quick=1 only=local min=1K max=1M factor=32 warmup=1 iters=3 runs=1 ;;
    --build) build=${2:?--build takes a directory}; shift ;;
    --baseline) baseline=${2:?--baseline takes a build directory}; shift ;;
    --torch-python) torch_python=${2:?--torch-python takes a python}; shift ;;
    --runs) runs=${2:?--runs takes a count}; shift ;;
    --only) only=${2:?--only takes local, flat or racks}; shift ;;
    --no-netns) only=local ;;
    --rate) rate=${2:?--rate takes a rate like 1gbit}; shift ;;
    --uplink) uplink=${2:?--uplink takes a rate like 250mbit}; shift ;;
    --mtu) mtu=${2:?--mtu takes a number of bytes}; shift ;;
    --keep) keep=${2:?--keep takes a directory}; shift ;;
    --tables) tables_from=${2:?--tables takes a directory}; shift ;;
    --net-max) net_max=${2:?--net-max takes a size}; shift ;;
    --net-iters) net_iters=${2:?--net-iters takes a count}; shift ;;
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
case $only in
  "" | local | flat | racks) ;;
  *) echo "allreduce_compare: --only takes local, flat or racks, not '$only'" >&2; exit 2 ;;
esac
if [[ ! $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "allreduce_compare: --runs takes a count >= 1, not '$runs'" >&2
  exit 2
fi
want() { [[ -z $only || $only == "$1" ]]; }
cores=$(nproc)
failed=0

# table DIR TITLE RANKS LIMIT: the comparison of DIR's logs (bench/allreduce_table.py). LIMIT
# is "mem" (memcpy logs in DIR: the memory limit of RANKS ranks) or "link:SECONDS_PER_BYTE" (the
# floor time of S bytes is S times that).
table() {
  local dir=$1 title=$2 rc
  python3 "$here/allreduce_table.py" --title "$title" --type "$type" --runs "$runs" \
    --ranks "$3" --cores "$cores" --limit "$4" ${gloo:+--have-gloo} \
    --torch-version "$torch_version" "$dir"/*.sweep "$dir"/*.lat
  rc=$?
  if ((rc == 1)); then
    echo "allreduce_compare: wrong elements in $title (the #wrong column)" >&2
  elif ((rc != 0)); then
    echo "allreduce_compare: no table for $title (allreduce_table.py exited $rc)" >&2
  fi
  ((rc == 0)) || failed=1
}

# --tables: the tables of logs made before (elsewhere: a quiet machine), nothing run.
if [[ -n $tables_from ]]; then
  for n in 2 4; do
    dir="$tables_from/local$n"
    [[ -d $dir ]] || continue
    runs=$(find "$dir" -name 'ddl.*.sweep' | wc -l)
    gloo=$(find "$dir" -name 'gloo.*' -print -quit)
    torch_version=$(sed -n 's/^# torch \([^ ]*\) gloo.*/\1/p' "$dir"/torch.1.sweep 2>/dev/null)
    table "$dir" "this host, $n ranks" "$n" mem
  done
  exit $failed
fi

ddlrun="$build/ddlrun/ddlrun"
bin="$build/bench/comm"
for f in "$ddlrun" "$bin/ddl-bench" "$bin/mpi_allreduce_bench" "$bin/memcpy_bench"; do
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
if [[ -n $baseline ]]; then
  base_bench=$baseline/bench/comm/ddl-bench  # comm/bench/ in a build from before bench/comm
  [[ -x $base_bench ]] || base_bench=$baseline/comm/bench/ddl-bench
  if [[ ! -x $base_bench || ! -x $baseline/ddlrun/ddlrun ]]; then
    echo "allreduce_compare: --baseline $baseline has no ddlrun/ddlrun and bench/comm/ddl-bench" >&2
    exit 2
  fi
  baseline=$(realpath "$baseline")
  base_bench=$(realpath "$base_bench")
fi
# torch-gloo: the given python, else build/venv's, else /opt/ddl-venv's, if it imports torch.
torch_script="$here/gpu_allreduce_torch.py"
if [[ -z $torch_python ]]; then
  for py in "$build/venv/bin/python" /opt/ddl-venv/bin/python; do
    if [[ -x $py ]]; then torch_python=$py; break; fi
  done
fi
torch_version=""
if [[ -n $torch_python ]]; then
  torch_version=$("$torch_python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
  if [[ -z $torch_version ]]; then
    echo "allreduce_compare: $torch_python cannot import torch: no torch-gloo column"
    torch_python=""
  fi
fi
[[ $type == float32 ]] || torch_python=""  # the torch benchmark reduces float32 only
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun as root

work=$(mktemp -d "${TMPDIR:-/tmp}/allreduce_compare.XXXXXX") || exit 1
chmod 755 "$work"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n $keep ]]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The peers' settings (see the header).
mpi_tuned=(-x MALLOC_MMAP_THRESHOLD_=1073741824 -x MALLOC_TRIM_THRESHOLD_=4294967296)
if ((quick)); then forced_algos=(4); else forced_algos=(1 2 3 4 5 6); fi
# The 8-byte latency run: many iterations, since one takes microseconds.
if ((quick)); then lat_args=(-b 8 -e 8 -w 5 -n 50); else lat_args=(-b 8 -e 8 -w 50 -n 500); fi

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

# rate_bytes RATE: tc's rate (1gbit, 250mbit, 100kbit, 8bit) in bytes per second.
rate_bytes() {
  awk -v r="$1" 'BEGIN {
    n = r + 0; u = tolower(substr(r, length(n "") + 1))
    m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" ? 1 : 0
    printf "%.0f", n * m / 8 }'
}

# mpi_yield RANKS: prints the MCA option that makes MPI's waiting ranks yield their core, when
# RANKS outnumber this machine's cores (all ranks run here, fake hosts included).
mpi_yield() {
  if (($1 > cores)); then echo "--mca mpi_yield_when_idle 1"; fi
}

# run_setting DIR RANKS SWEEP_ARGS -- LAUNCH... -- MPI...: every benchmark of one setting,
# --runs times each, the sweep and the 8-byte run, logs in DIR. LAUNCH is ddlrun and its options
# (for ddl-bench and Gloo), MPI is mpirun and its options (the malloc and algorithm options are
# added here). ddl runs once per entry of ddl_variants ("NAME|DDLRUN OPTIONS"), Gloo with
# gloo_args added. With mem_args set (memcpy_bench's options, -p and the rounds), memcpy_bench
# runs in each run too, at the same sizes, so that its rate is a median over the same span of
# time as the others' (a compile on the other core halves it for as long as it lasts).
ddl_variants=("ddl|") gloo_args=() mem_args=()
run_setting() {
  local dir=$1 ranks=$2 sweep=() launch=() mpi=()
  shift 2
  while [[ $1 != -- ]]; do sweep+=("$1"); shift; done
  shift
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done
  shift
  mpi=("$@")
  mkdir -p "$dir"
  local run phase args mem_sizes algo variant name opts
  for ((run = 1; run <= runs; run++)); do
    for phase in sweep lat; do
      if [[ $phase == sweep ]]; then
        args=("${sweep[@]}" -t "$type" -o sum -c 1)
        mem_sizes=("${sweep[@]:0:6}")  # -b -e -f
      else
        args=("${lat_args[@]}" -t "$type" -o sum -c 1)
        mem_sizes=(-b 8 -e 8)
      fi
      echo "allreduce_compare:   run $run/$runs, ${phase/lat/8 bytes}" >&2
      if ((${#mem_args[@]})); then
        run_bench "$dir/memcpy.$run.$phase" "$bin/memcpy_bench" "${mem_args[@]}" "${mem_sizes[@]}"
        if ((ranks <= cores)); then  # (ranks sharing a core hand bytes over in its cache)
          run_bench "$dir/xchg.$run.$phase" "$bin/memcpy_bench" -x "${mem_args[@]}" "${mem_sizes[@]}"
        fi
      fi
      for variant in "${ddl_variants[@]}"; do
        name=${variant%%|*}
        read -ra opts <<<"${variant#*|}"
        run_bench "$dir/$name.$run.$phase" "${launch[@]}" "${opts[@]}" "$bin/ddl-bench" "${args[@]}"
      done
      if [[ ${dir##*/} == local* ]]; then
        # ddl_alloc'd buffers, in place: libddl's single pass.
        run_bench "$dir/ddlshared.$run.$phase" "${launch[@]}" "$bin/ddl-bench" -S "${args[@]}"
      fi
      if [[ -n $baseline && ${dir##*/} == local* ]]; then
        # Its own ddlrun too: the runtime it was built with.
        run_bench "$dir/ddlbase.$run.$phase" "$baseline/ddlrun/ddlrun" "${launch[@]:1}" \
          "$base_bench" "${args[@]}"
      fi
      if [[ -n $torch_python && ${dir##*/} == local* ]]; then
        local targs=("${args[@]:0:10}")  # -b -e -f -w -n (the torch script: float32 sum)
        [[ $phase == lat ]] && targs=("${lat_args[@]}")
        run_bench "$dir/torch.$run.$phase" "${launch[@]}" "$torch_python" "$torch_script" \
          --backend gloo --device cpu "${targs[@]}"
      fi
      run_bench "$dir/mpi.$run.$phase" "${mpi[@]}" "${mpi_tuned[@]}" \
        "$bin/mpi_allreduce_bench" "${args[@]}"
      for algo in "${forced_algos[@]}"; do
        run_bench "$dir/mpi$algo.$run.$phase" "${mpi[@]}" "${mpi_tuned[@]}" \
          --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$algo" \
          "$bin/mpi_allreduce_bench" "${args[@]}"
      done
      run_bench "$dir/mpiu.$run.$phase" "${mpi[@]}" "$bin/mpi_allreduce_bench" "${args[@]}"
      if [[ -n $gloo ]]; then
        # Every invocation gets a store directory of its own (Gloo's file store keeps keys).
        run_bench "$dir/gloo.$run.$phase" "${launch[@]}" "$gloo" "${args[@]}" "${gloo_args[@]}" \
          -s "$gloo_store/${dir##*/}.$run.$phase"
      fi
    done
  done
}

gloo_store="$work/gloo-store"
mkdir -p "$gloo_store"
[[ -n $gloo ]] || echo "allreduce_compare: no $bin/gloo_allreduce_bench (install libgloo-dev and rebuild)"

# 1. This host, 2 and 4 ranks; the memory limit.
if want local; then
  for n in 2 4; do
    dir="$work/local$n"
    mkdir -p "$dir"
    yield=$(mpi_yield "$n")
    read -ra yield_args <<<"$yield"
    echo "allreduce_compare: this host, $n ranks, $cores cores: -b $min -e $max -f $factor" \
      "-w $warmup -n $iters${yield:+; mpirun $yield (ranks outnumber cores)}"
    if ((quick)); then mem_args=(-p "$n" -r 2 -m 20); else mem_args=(-p "$n" -r 3 -m 100); fi
    ddl_variants=("ddl|") gloo_args=(-i lo)
    run_setting "$dir" "$n" -b "$min" -e "$max" -f "$factor" -w "$warmup" -n "$iters" -- \
      "$ddlrun" -q --tag-output none -H "localhost:$n" -- \
      mpirun "${yield_args[@]}" --oversubscribe -np "$n"
    table "$dir" "this host, $n ranks" "$n" mem
  done
  mem_args=()
fi

# The namespace settings.
net_sweep=(-b "$min" -e "$net_max" -f "$factor" -w 1 -n "$net_iters")
link_bytes=$(rate_bytes "$rate")
uplink_bytes=$(rate_bytes "$uplink")
if ((link_bytes <= 0 || uplink_bytes <= 0)); then
  echo "allreduce_compare: --rate $rate / --uplink $uplink: not a rate like 1gbit, 250mbit" >&2
  exit 2
fi
netns_loaded=0
# netns_load: tests/netns/hosts.sh, once.
netns_load() {
  if ((!netns_loaded)); then
    # shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
    source "$here/../tests/netns/hosts.sh"
    netns_loaded=1
  fi
}

# mpirun on the fake hosts: over their ssh, TCP on their network, shared memory within a host.
netns_mpirun() {  # netns_mpirun HOSTS RANKS
  local yield
  yield=$(mpi_yield "$2")
  read -ra yield_args <<<"$yield"
  # shellcheck disable=SC2054  # self,vader,tcp is one argument
  netns_mpi=(mpirun "${yield_args[@]}" --host "$1" -np "$2" --mca plm_rsh_args
    "-F $NETNS_SSH_CONFIG" --mca oob_tcp_if_include "$NETNS_NET"
    --mca btl_tcp_if_include "$NETNS_NET" --mca btl self,vader,tcp)
}

# shape_hosts N: every fake host's link (1..N) shaped to --rate; set_mtu: --mtu on the whole
# fake network (after any racks' uplinks exist). A failure is counted, and the run goes on.
shape_hosts() {
  local k
  for ((k = 1; k <= $1; k++)); do
    netns_shape "$k" "$rate" || { echo "allreduce_compare: tc could not shape node$k" >&2; failed=1; }
  done
}
set_mtu() {
  netns_mtu "$mtu" || { echo "allreduce_compare: could not set MTU $mtu" >&2; failed=1; }
}

# 2. Three fake hosts x 2 ranks, links shaped.
if want flat; then
  netns_load
  netns_up 3
  rc=$?
  trap 'netns_down; cleanup' EXIT
  if ((rc == 77)); then
    echo "allreduce_compare: skipped the 3-host setting (see the netns line above)"
  elif ((rc != 0)); then
    echo "allreduce_compare: could not make the fake hosts" >&2
    failed=1
  else
    shape_hosts 3
    set_mtu
    hosts=node1:2,node2:2,node3:2
    ssh_ddlrun=("$ddlrun" -q --tag-output none --launcher ssh --ssh-config "$NETNS_SSH_CONFIG"
      --tcp -H "$hosts")
    netns_mpirun "$hosts" 6
    echo
    echo "allreduce_compare: 3 hosts x 2 ranks, links shaped to $rate, MTU $mtu: ${net_sweep[*]};" \
      "mpirun $(mpi_yield 6) (6 ranks on $cores cores)"
    ddl_variants=("ddl|") gloo_args=()
    # Gloo's store lies under $NETNS_DIR, which every fake host sees (their /tmp are their own).
    gloo_store="$NETNS_DIR/gloo-store"
    mkdir -p "$gloo_store"
    run_setting "$work/flat" 6 "${net_sweep[@]}" -- "${ssh_ddlrun[@]}" -- "${netns_mpi[@]}"
    # The floor: each host sends 2(h-1)/h S over its link (h = 3).
    floor=$(awk -v l="$link_bytes" 'BEGIN { printf "%.6e", 2 * 2 / 3 / l }')
    table "$work/flat" "3 hosts x 2 ranks, links shaped to $rate, MTU $mtu (floor 4/3 S / link)" 6 \
      "link:$floor"
    netns_down
  fi
fi

# 3. Two racks x 2 hosts x 2 ranks, the uplink shaped.
if want racks; then
  netns_load
  netns_up_racks 2 2
  rc=$?
  trap 'netns_down; cleanup' EXIT
  if ((rc == 77)); then
    echo "allreduce_compare: skipped the 2-rack setting (see the netns line above)"
  elif ((rc != 0)); then
    echo "allreduce_compare: could not make the racks" >&2
    failed=1
  else
    shape_hosts 4
    netns_shape_uplink "$uplink" || { echo "allreduce_compare: tc could not shape the uplink" >&2; failed=1; }
    set_mtu
    hosts=node1:2,node2:2,node3:2,node4:2
    ssh_ddlrun=("$ddlrun" -q --tag-output none --launcher ssh --ssh-config "$NETNS_SSH_CONFIG"
      --tcp -H "$hosts")
    netns_mpirun "$hosts" 8
    echo
    echo "allreduce_compare: 2 racks x 2 hosts x 2 ranks, host links $rate, uplink $uplink, MTU $mtu:" \
      "${net_sweep[*]}; mpirun $(mpi_yield 8) (8 ranks on $cores cores)"
    # The modes, as ddlrun plans them.
    for m in "--nodes 2" "--mode r"; do  # ddl-flat adds -x DDL_ALGO=ring
      read -ra opts <<<"$m"
      plan=$("$ddlrun" --dry-run -v --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tcp \
        -H "$hosts" "${opts[@]}" true 2>&1 | awk '/^mode:/ { print $2 }')
      echo "allreduce_compare: ddlrun $m plans mode ${plan:-?}"
    done
    ddl_variants=("ddl|--nodes 2" "ddlflat|--mode r -x DDL_ALGO=ring") gloo_args=()
    gloo_store="$NETNS_DIR/gloo-store"
    mkdir -p "$gloo_store"
    run_setting "$work/racks" 8 "${net_sweep[@]}" -- "${ssh_ddlrun[@]}" -- "${netns_mpi[@]}"
    # The floor: the racks' halves cross the uplink, 2(r-1)/r S / uplink (r = 2), unless the
    # hosts' links, 2(h-1)/h S / link (h = 4), take longer.
    floor=$(awk -v l="$link_bytes" -v u="$uplink_bytes" 'BEGIN {
      a = 2 * 1 / 2 / u; b = 2 * 3 / 4 / l; printf "%.6e", (a > b ? a : b) }')
    table "$work/racks" "2 racks x 2 hosts x 2 ranks, links $rate, uplink $uplink, MTU $mtu (floor S / uplink)" \
      8 "link:$floor"
    netns_down
  fi
fi

if ((failed)); then
  echo
  echo "allreduce_compare: FAILED (see above)"
  exit 1
fi
exit 0
