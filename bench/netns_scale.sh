#!/usr/bin/env bash
# How long the namespace harness (tests/netns/hosts.sh; root) takes to bring up and tear down
# many fake hosts: for each count, netns_up N, one ssh login to the last host (it answers with
# its own name), netns_down; then a check that nothing is left (no namespace, no veth, no
# bridge, no process of the run, no directory). Prints one row per count: median and minimum
# of the runs for up and down, in seconds.
#
# With --launch, instead: for each count, netns_up N once, then `true` with
# one rank per host through ddlrun's ssh launcher flat (--tree-width 0), through its launch
# tree (--tree-width W) and through Open MPI's mpirun (its own tree spawn), RUNS times each;
# one row per count: the median seconds of each, and ddlrun's peak memory (VmHWM, MB) and
# most threads (sampled every 20 ms) flat and tree, and what the tree launch cost all of this
# machine's CPUs (/proc/stat: ddlrun, the fake hosts' sshd and agents, the kernel) with that
# over the CPUs, the least wall time the hosts' own work allows here whatever the launcher
# ("floor s"). Then a model fitted to those rows (least
# squares) and its launch time at 1,024 and 4,608 hosts: flat and mpirun as a + b*N, the tree
# as a + b*L, L its levels of hosts at fan-out W (ceil(log_W) of the hosts, as tree.h builds).
#
# Usage: bench/netns_scale.sh [-n RUNS] [--hosts "32 128 256"]
#        bench/netns_scale.sh --launch [-n RUNS] [--hosts "32 64 128"] [--width W]
#                             [--ddlrun PATH] [--no-mpirun] [--login-sleep S] [--probe]
#   -n RUNS       runs per count (default 1; 3 with --launch)
#   --hosts LIST  host counts, each 1..256 (default "32 128 256"; "32 64 128" with --launch)
#   --launch      time launches instead of the harness
#   --width W     the tree's fan-out (default 8)
#   --ddlrun PATH the ddlrun to time (default: this checkout's build/ddlrun/ddlrun)
#   --no-mpirun   leave mpirun out
#   --login-sleep S  every login sleeps S seconds first (`sleep S` in each host's .bashrc, as
#                 bench/launch_compare.sh does): a slow site's login
#   --probe       ddlrun probes the hosts' hardware (default --no-probe): flat from its host,
#                 through the launch tree beyond the fan-out, one login per host either way
# Exit status: 0, 1 when a run failed or left something behind, 2 bad usage, 77 when the
# namespace hosts cannot be made here (not root, no ip netns or sshd).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs="" counts="" launch=0 width=8 ddlrun=$here/../build/ddlrun/ddlrun mpirun=1 login_sleep=0
probe=0
while (($#)); do
  case $1 in
    -n) runs=${2:?-n takes a number}; shift ;;
    --hosts) counts=${2:?--hosts takes a list}; shift ;;
    --launch) launch=1 ;;
    --width) width=${2:?--width takes a number}; shift ;;
    --ddlrun) ddlrun=${2:?--ddlrun takes a path}; shift ;;
    --no-mpirun) mpirun=0 ;;
    --probe) probe=1 ;;
    --login-sleep) login_sleep=${2:?--login-sleep takes seconds}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "netns_scale: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
: "${runs:=$((launch ? 3 : 1))}" "${counts:=$( ((launch)) && echo "32 64 128" || echo "32 128 256")}"
[[ $width =~ ^[1-9][0-9]*$ ]] || { echo "netns_scale: --width takes a positive number" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "netns_scale: -n takes a positive number" >&2; exit 2; }
for n in $counts; do
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 256)) ||
    { echo "netns_scale: host counts are 1..256, not '$n'" >&2; exit 2; }
done
# shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
source "$here/../tests/netns/hosts.sh"
# shellcheck source=SCRIPTDIR/../tests/lib/procs.sh
source "$here/../tests/lib/procs.sh"
failed=0
# benchtable stats|median|ratio|share ...: bench/benchtable.py (netns_scale_launch.sh uses it too).
benchtable() { python3 "$here/benchtable.py" "$@"; }
if ((launch)); then
  # shellcheck source=SCRIPTDIR/netns_scale_launch.sh
  source "$here/netns_scale_launch.sh"
  launch_table
  exit "$failed"
fi

# leftovers BRIDGE DIR PIDS...: what netns_down left, one description a line.
leftovers() {
  local bridge=$1 dir=$2 pid n
  shift 2
  n=$(ip netns list | grep -c "^$NETNS_PREFIX-")
  ((n)) && echo "$n namespaces"
  n=$(ip -o link show | grep -c ": dt$$[a-z]")
  ((n)) && echo "$n links (veths, bridges)"
  ip link show "$bridge" >/dev/null 2>&1 && echo "the bridge $bridge"
  for pid in "$@"; do [[ -n $pid ]] && alive "$pid" && echo "process $pid"; done
  [[ -e $dir ]] && echo "$dir"
}

# stats VALUES...: "median min".
stats() { printf '%s\n' "$@" | benchtable stats; }

printf '%6s %12s %12s %12s %12s  %s\n' hosts "up median" "up min" "down median" "down min" check
for n in $counts; do
  ups=() downs=() note=ok
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    netns_up "$n"
    rc=$?
    ((rc == 77)) && exit 77
    if ((rc != 0)); then note="netns_up failed"; failed=1; break; fi
    ups+=("$(echo "$EPOCHREALTIME - $t0" | bc)")
    if [[ $(ssh -F "$NETNS_SSH_CONFIG" "node$n" hostname 2>&1) != "node$n" ]]; then
      note="node$n did not answer as node$n"
      failed=1
    fi
    pids=()
    for ((k = 1; k <= n; k++)); do pids+=("$(netns_sshd_pid "$k")" "${_netns_holder[$k]}"); done
    bridge=$NETNS_BRIDGE dir=$NETNS_DIR
    t0=$EPOCHREALTIME
    netns_down
    downs+=("$(echo "$EPOCHREALTIME - $t0" | bc)")
    left=$(leftovers "$bridge" "$dir" "${pids[@]}")
    if [[ -n $left ]]; then
      note="left after netns_down: $(tr '\n' ';' <<<"$left")"
      failed=1
    fi
  done
  ((${#ups[@]})) || { printf '%6s %12s %12s %12s %12s  %s\n' "$n" - - - - "$note"; continue; }
  read -r up_med up_min <<<"$(stats "${ups[@]}")"
  read -r down_med down_min <<<"$(stats "${downs[@]}")"
  printf '%6s %12.2f %12.2f %12.2f %12.2f  %s\n' "$n" "$up_med" "$up_min" "$down_med" "$down_min" \
    "$note"
done
exit "$failed"
