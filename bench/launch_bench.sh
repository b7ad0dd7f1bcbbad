#!/usr/bin/env bash
# How long starting (and ending) a job of `true` takes through ddlrun, side by side with Open
# MPI's mpirun doing the same: 4 ranks on this host, and 6 ranks on 3 fake hosts (network
# namespaces with their own sshd, tests/netns/hosts.sh) through `ddlrun --launcher ssh`,
# `ddlrun --launcher mpirun` and plain mpirun over the same ssh. Prints the median and the
# minimum of N runs in milliseconds, and each ddlrun row's median over its mpirun row's.
# Timed with hyperfine when it is installed (shell start-up subtracted), else with a loop. The
# plain ddlrun row runs with this host's probe cache warm (man ddlrun: PLACEMENT); the next
# row turns the cache off. On this host, the goal (ddlrun -H localhost:4 true in at most half
# of mpirun's time) is checked on the medians, and --before PATH measures an older
# ddlrun in the same run (the rows "before"), so that before and after share the machine's load.
#
# Usage: bench/launch_bench.sh [--quick] [-n N] [--ddlrun PATH] [--before PATH] [--shape RATE]
#                              [--no-netns]
#   --quick        2 runs, no warm-up (the bench.launch_smoke test)
#   -n N           runs per command (default 20)
#   --ddlrun PATH  the binary (default build/ddlrun/ddlrun)
#   --before PATH  another ddlrun measured beside it on this host (e.g. main's build)
#   --shape RATE   shape each fake host's link with tc tbf (e.g. 1gbit)
#   --no-netns     this host only (the fake hosts need root)
# Exit status: 0, 1 when a command failed (its row says how), 2 bad usage, 77 when not root
# with --quick (the smoke test is skipped then).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=20 warmup=2 quick=0 netns=1 shape="" before=""
ddlrun="$here/../build/ddlrun/ddlrun"
while (($#)); do
  case $1 in
    --quick) quick=1 runs=2 warmup=0 ;;
    -n) runs=${2:?-n takes a number}; shift ;;
    --ddlrun) ddlrun=${2:?--ddlrun takes a path}; shift ;;
    --before) before=${2:?--before takes a path}; shift ;;
    --shape) shape=${2:?--shape takes a rate}; shift ;;
    --no-netns) netns=0 ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "launch_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "launch_bench: -n takes a positive number" >&2; exit 2; }
if [[ ! -x $ddlrun ]]; then
  echo "launch_bench: no ddlrun at $ddlrun (build it, or give --ddlrun PATH)" >&2
  exit 2
fi
ddlrun=$(realpath "$ddlrun")
if [[ -n $before ]]; then
  [[ -x $before ]] || { echo "launch_bench: no ddlrun at $before (--before)" >&2; exit 2; }
  before=$(realpath "$before")
fi
if ((quick)) && [[ $(id -u) -ne 0 ]]; then
  echo "launch_bench: skipped: not root (mpirun's and the fake hosts' set-up need it)"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "launch_bench: no mpirun (install openmpi-bin)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun as root
work=$(mktemp -d "${TMPDIR:-/tmp}/launch_bench.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failed=0
rows=()
# benchtable stats|median|ratio|share ...: bench/benchtable.py.
benchtable() { python3 "$here/benchtable.py" "$@"; }

# measure LABEL BASELINE_LABEL CMD...: runs CMD once to check it works (its failure is shown in
# the row), then `runs` times; adds a row "label|median|min|baseline".
declare -A median=() minimum=()
measure() {
  local label=$1 base=$2 rc
  shift 2
  "$@" </dev/null >"$work/out" 2>&1
  rc=$?
  if ((rc != 0)); then
    failed=1
    rows+=("$label|failed, exit $rc: $(grep -v '^$' "$work/out" | head -n1 | cut -c1-70)||")
    return
  fi
  if command -v hyperfine >/dev/null; then
    local cmd
    cmd=$(printf '%q ' "$@")
    hyperfine --style none --runs "$runs" --warmup "$warmup" --export-csv "$work/t.csv" \
      --command-name x -- "$cmd" >/dev/null 2>"$work/hf.err" || {
      failed=1
      rows+=("$label|hyperfine failed: $(head -n1 "$work/hf.err")||")
      return
    }
    # command,mean,stddev,median,user,system,min,max (seconds)
    IFS=, read -r _ _ _ med _ _ min _ < <(sed -n 2p "$work/t.csv")
    printf -v "median[$label]" '%.1f' "${med}e3"  # (ms)
    printf -v "minimum[$label]" '%.1f' "${min}e3"
  else
    local i t0 t1
    : >"$work/times"
    for ((i = 0; i < warmup; i++)); do "$@" </dev/null >/dev/null 2>&1; done
    for ((i = 0; i < runs; i++)); do
      t0=$(date +%s%N)
      "$@" </dev/null >/dev/null 2>&1
      t1=$(date +%s%N)
      echo $((t1 - t0)) >>"$work/times"
    done
    read -r "median[$label]" "minimum[$label]" < <(benchtable stats --scale 1e-6 --format %.1f \
      <"$work/times")
  fi
  rows+=("$label|${median[$label]}|${minimum[$label]}|$base")
}

print_rows() {
  local row label med min base ratio
  printf '%-56s %10s %10s %7s\n' "$1" "median ms" "min ms" "ratio"
  for row in "${rows[@]}"; do
    IFS='|' read -r label med min base <<<"$row"
    ratio=""
    if [[ -n $base && -n ${median[$base]:-} && -n $min ]]; then
      ratio=$(benchtable ratio "$med" "${median[$base]}")
    fi
    if [[ -z $min ]]; then
      printf '%-56s %s\n' "$label" "$med"
    else
      printf '%-56s %10s %10s %7s\n' "$label" "$med" "$min" "$ratio"
    fi
  done
  rows=()
}

# goal LABEL BASELINE MAX: a line saying whether LABEL's median is at most MAX times BASELINE's.
goal() {
  [[ -n ${median[$1]:-} && -n ${median[$2]:-} ]] || return 0
  awk -v a="${median[$1]}" -v b="${median[$2]}" -v max="$3" -v what="$1" 'BEGIN {
    printf "goal: %s in at most %.2fx of mpirun'"'"'s median: %.2fx, %s\n", what, max,
      a / b, a <= max * b ? "met" : "NOT met" }'
}

timer=loop
command -v hyperfine >/dev/null && timer="hyperfine $(hyperfine --version | cut -d' ' -f2)"
echo "launch_bench: $runs runs each (timer: $timer); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$(mpirun --version | head -n1)"
echo

# This host: 4 ranks.
measure "mpirun -np 4 --oversubscribe true" "" mpirun -np 4 --oversubscribe true
measure "ddlrun -H localhost:4 true" "mpirun -np 4 --oversubscribe true" \
  "$ddlrun" -H localhost:4 true
measure "  the same, probe cache off (DDL_PROBE_CACHE=0)" "mpirun -np 4 --oversubscribe true" \
  env DDL_PROBE_CACHE=0 "$ddlrun" -H localhost:4 true
measure "  the same, --no-probe" "mpirun -np 4 --oversubscribe true" \
  "$ddlrun" --no-probe -H localhost:4 true
if [[ -n $before ]]; then
  measure "before: ddlrun -H localhost:4 true" "mpirun -np 4 --oversubscribe true" \
    "$before" -H localhost:4 true
  measure "  before, probe cache off" "mpirun -np 4 --oversubscribe true" \
    env DDL_PROBE_CACHE=0 "$before" -H localhost:4 true
fi
print_rows "this host, 4 ranks"
goal "ddlrun -H localhost:4 true" "mpirun -np 4 --oversubscribe true" 0.5

if ((netns)); then
  # shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
  source "$here/../tests/netns/hosts.sh"
  netns_up 3
  rc=$?
  if ((rc == 77)); then
    echo
    echo "(no fake hosts here: see above; --no-netns leaves them out)"
  elif ((rc != 0)); then
    failed=1
  else
    trap 'netns_down; rm -rf "$work"' EXIT
    unset SSH_AUTH_SOCK
    export HOME="$NETNS_DIR/home"  # no user ssh config or probe cache
    mkdir -p "$HOME"
    if [[ -n $shape ]]; then
      for k in 1 2 3; do netns_shape "$k" "$shape" || failed=1; done
    fi
    hosts=node1:2,node2:2,node3:2
    mca=(--mca plm_rsh_args "-F $NETNS_SSH_CONFIG" --mca oob_tcp_if_include "$NETNS_NET"
      --mca btl_tcp_if_include "$NETNS_NET")
    base="mpirun (ssh) -H $hosts -np 6 true"
    echo
    measure "$base" "" mpirun "${mca[@]}" -H "$hosts" -np 6 true
    measure "ddlrun --launcher ssh -H $hosts true" "$base" \
      "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" -H "$hosts" true
    measure "  the same, --no-probe" "$base" \
      "$ddlrun" --launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" -H "$hosts" true
    measure "ddlrun --launcher mpirun -H $hosts true" "$base" \
      "$ddlrun" --launcher mpirun --ssh-config "$NETNS_SSH_CONFIG" \
      --mpiarg "$(printf '%q ' "${mca[@]}")" -H "$hosts" true
    print_rows "3 namespace hosts over ssh, 6 ranks${shape:+, links shaped to $shape}"
  fi
fi
trap - EXIT
[[ -n ${NETNS_DIR:-} ]] && netns_down
rm -rf "$work"
exit "$failed"
