#!/usr/bin/env bash
# How long the namespace harness (tests/netns/hosts.sh; root) takes to bring up and tear down
# many fake hosts: for each count, netns_up N, one ssh login to the last host (it answers with
# its own name), netns_down; then a check that nothing is left (no namespace, no veth, no
# bridge, no process of the run, no directory). Prints one row per count: median and minimum
# of the runs for up and down, in seconds.
#
# Usage: bench/netns_scale.sh [-n RUNS] [--hosts "32 128 256"]
#   -n RUNS       runs per count (default 1)
#   --hosts LIST  host counts, each 1..256 (default "32 128 256")
# Exit status: 0, 1 when a run failed or left something behind, 2 bad usage, 77 when the
# namespace hosts cannot be made here (not root, no ip netns or sshd).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=1 counts="32 128 256"
while (($#)); do
  case $1 in
    -n) runs=${2:?-n takes a number}; shift ;;
    --hosts) counts=${2:?--hosts takes a list}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "netns_scale: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
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
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1] }'; }

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
