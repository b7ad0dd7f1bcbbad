#!/usr/bin/env bash
# Starting `true` on many hosts whose logins are slow: ddlrun beside Open MPI's mpirun, on 10
# and 24 fake hosts (network namespaces with their own sshd, tests/netns/hosts.sh; root) whose
# root login runs a .bashrc that sleeps (1 s by default), one rank a host. What it shows is how
# many logins each launcher pays per host and how many it makes at once. Prints the median and
# minimum of N runs in seconds, side by side, and each row's median over mpirun's; with
# --before PATH also an older ddlrun (it must be readable at the same path on every host, as
# any ddlrun; a build in another checkout is).
#
# Usage: bench/launch_compare.sh [-n N] [--hosts "10 24"] [--sleep S] [--ddlrun PATH]
#                                [--before PATH]
#   -n N           runs per command (default 3)
#   --hosts LIST   host counts to measure, each 1..31 (default "10 24")
#   --sleep S      seconds each login's .bashrc sleeps (default 1)
#   --ddlrun PATH  the binary (default build/ddlrun/ddlrun)
#   --before PATH  another ddlrun to measure beside it (e.g. the main checkout's build)
# Exit status: 0, 1 when a command failed (its row says how), 2 bad usage, 77 when not root.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=3 counts="10 24" pause=1 before=""
ddlrun="$here/../build/ddlrun/ddlrun"
while (($#)); do
  case $1 in
    -n) runs=${2:?-n takes a number}; shift ;;
    --hosts) counts=${2:?--hosts takes a list}; shift ;;
    --sleep) pause=${2:?--sleep takes seconds}; shift ;;
    --ddlrun) ddlrun=${2:?--ddlrun takes a path}; shift ;;
    --before) before=${2:?--before takes a path}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "launch_compare: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "launch_compare: -n takes a positive number" >&2; exit 2; }
max=0
for n in $counts; do
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 31)) ||
    { echo "launch_compare: host counts are 1..31, not '$n'" >&2; exit 2; }
  ((n > max)) && max=$n
done
for b in "$ddlrun" ${before:+"$before"}; do
  [[ -x $b ]] || { echo "launch_compare: no ddlrun at $b" >&2; exit 2; }
done
ddlrun=$(realpath "$ddlrun")
[[ -n $before ]] && before=$(realpath "$before")
command -v mpirun >/dev/null || { echo "launch_compare: no mpirun (install openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
source "$here/../tests/netns/hosts.sh"
netns_up "$max" || exit $?
unset SSH_AUTH_SOCK
export HOME="$NETNS_DIR/home" XDG_CACHE_HOME="$NETNS_DIR/cache"  # no probe cache between runs
mkdir -p "$HOME"
root_home=$(getent passwd root | cut -d: -f6)  # each host's own (hosts.sh mounts one)
for ((k = 1; k <= max; k++)); do
  netns_exec "$k" sh -c "echo 'sleep $pause' >'$root_home/.bashrc'" || exit 1
done
t0=$(date +%s%N)
ssh -F "$NETNS_SSH_CONFIG" node1 true
login_ms=$((($(date +%s%N) - t0) / 1000000))
failed=0
declare -A median=()

# benchtable stats|median|ratio|share ...: bench/benchtable.py.
benchtable() { python3 "$here/benchtable.py" "$@"; }

# measure LABEL CMD...: prints "label  median  min  ratio" (ratio over the row labelled mpirun).
measure() {
  local label=$1 i t0 rc
  shift
  : >"$work/times"
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$@" </dev/null >"$work/out" 2>&1
    rc=$?
    if ((rc != 0)); then
      failed=1
      printf '  %-44s failed, exit %d: %s\n' "$label" "$rc" "$(grep -v '^$' "$work/out" | head -n1 | cut -c1-60)"
      return
    fi
    echo $(($(date +%s%N) - t0)) >>"$work/times"
  done
  local med min ratio=""
  read -r med min < <(benchtable stats --scale 1e-9 --format %.2f <"$work/times")
  median[$label]=$med
  [[ -n ${median[mpirun]:-} ]] && ratio=$(benchtable ratio "$med" "${median[mpirun]}")
  printf '  %-44s %9s %9s %7s\n' "$label" "$med" "$min" "$ratio"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/launch_compare.XXXXXX") || exit 1
trap 'netns_down; rm -rf "$work"' EXIT
echo "launch_compare: $runs runs each; every login sleeps ${pause} s in .bashrc (one ssh true: ${login_ms} ms);"
echo "  $(nproc) CPUs; $(mpirun --version | head -n1)"
for n in $counts; do
  hosts=$(printf 'node%d,' $(seq 1 "$n"))
  hosts=${hosts%,}
  echo
  printf '%d hosts, 1 rank each: %-26s %9s %9s %7s\n' "$n" "" "median s" "min s" "ratio"
  median=()
  measure mpirun mpirun --mca plm_rsh_args "-F $NETNS_SSH_CONFIG" --mca oob_tcp_if_include \
    "$NETNS_NET" --mca btl_tcp_if_include "$NETNS_NET" -H "$hosts" -np "$n" true
  for bin in "$ddlrun" ${before:+"$before"}; do
    tag=""
    [[ -n $before ]] && tag=$([[ $bin == "$before" ]] && echo " (before)" || echo " (after)")
    measure "ddlrun --launcher ssh$tag" "$bin" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" \
      -H "$hosts" true
    measure "ddlrun --launcher ssh --no-probe$tag" "$bin" --launcher ssh --no-probe \
      --ssh-config "$NETNS_SSH_CONFIG" -H "$hosts" true
  done
done
exit "$failed"
