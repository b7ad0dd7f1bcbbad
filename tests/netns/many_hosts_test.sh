#!/usr/bin/env bash
# Many fake hosts (hosts.sh beyond one /24): netns_up N (default 40), then
#   - the addresses: every host's in NETNS_NET (a /23 for 32 to 63 hosts), all different, and
#     host N's interface really has it; NETNS_NET lies in 10.200.0.0/16;
#   - each host is its own: node1 and nodeN answer ssh with their own hostname, and a file
#     written to node1's /tmp is not in nodeN's;
#   - `ddlrun --tree-width 0 -H node1,...,nodeN true` over ssh (one rank a host, flat) exits
#     0, every host's sshd logged a login for it, and ddlrun never had more than 46 threads
#     (its fixed pool, not a thread per host);
#   - netns_down leaves nothing: no namespace, no process of the run (sshd, sessions, holders;
#     a zombie that init has yet to reap has left its namespaces and counts as gone), no veth
#     or bridge, no address of the block, no directory.
# Prints the seconds netns_up, the job and netns_down took.
#
# Usage: many_hosts_test.sh DDLRUN [N]   (exit 77, skipped, when not root or without ip netns)
set -uo pipefail
ddlrun=$(realpath "$1")
n=${2:-40}
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
start=$EPOCHREALTIME
netns_up "$n" || exit $?
up_s=$(echo "$EPOCHREALTIME - $start" | bc)

netns_session

[[ $NETNS_NET == 10.200.* ]] || fail "the hosts' network $NETNS_NET is outside 10.200.0.0/16"
want_prefix=$( ((n <= 31)) && echo 24 || echo $((n <= 63 ? 23 : n <= 127 ? 22 : n <= 255 ? 21 : 20)))
[[ ${NETNS_NET#*/} == "$want_prefix" ]] || fail "$n hosts got $NETNS_NET, not a /$want_prefix"
declare -A seen=()
net_base=${NETNS_NET%/*}
IFS=. read -r _ _ o3 o4 <<<"$net_base"
base=$((o3 * 256 + o4))
size=$((1 << (32 - ${NETNS_NET#*/})))
for ((k = 1; k <= n; k++)); do
  a=$(netns_addr "$k")
  IFS=. read -r b1 b2 o3 o4 <<<"$a"
  off=$((o3 * 256 + o4 - base))
  [[ $b1.$b2 == 10.200 ]] && ((off > 1 && off < size - 1)) ||
    fail "node$k's address $a is outside $NETNS_NET"
  [[ -z ${seen[$a]:-} ]] || fail "node$k and ${seen[$a]} share the address $a"
  seen[$a]=node$k
done
netns_exec "$n" ip -o -4 addr show >"$out/addr"
grep -q " inet $(netns_addr "$n")/$want_prefix " "$out/addr" ||
  fail "node$n's interface does not have $(netns_addr "$n")/$want_prefix" "$out/addr"

ssh=(ssh -F "$NETNS_SSH_CONFIG")
[[ $("${ssh[@]}" node1 hostname 2>&1) == node1 ]] || fail "node1 does not answer as node1"
[[ $("${ssh[@]}" "node$n" hostname 2>&1) == "node$n" ]] || fail "node$n does not answer as node$n"
"${ssh[@]}" node1 'echo mine >/tmp/many-hosts-probe'
"${ssh[@]}" "node$n" 'test ! -e /tmp/many-hosts-probe' || fail "node$n sees node1's /tmp"

logins() { grep -c "Accepted publickey" "$NETNS_DIR/node$1/sshd.log"; }
declare -A before=()
for ((k = 1; k <= n; k++)); do before[$k]=$(logins "$k"); done
start=$EPOCHREALTIME
timeout 120 "$ddlrun" --launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" \
  --tree-width 0 --tag-output none -H "$NETNS_LIST" true >"$out/job" 2>"$out/job.err" &
job=$!
most=$(most_threads_of_children "$job")  # timeout's child is ddlrun
wait "$job"
rc=$?
job_s=$(echo "$EPOCHREALTIME - $start" | bc)
[[ $rc == 0 ]] || fail "ddlrun -H node1,...,node$n true: exit $rc, not 0" "$out/job.err"
# Flat (--tree-width 0), ddlrun logs in to every host, but on a fixed pool of threads (ssh.cc):
# at most 32 login threads and 8 talkers (tree.h), and ddlrun's own few; a thread per host
# (n + 5) fails this from 42 hosts on (CTest runs it at 64 too).
max_threads=46
((most > 0 && most <= max_threads)) ||
  fail "ddlrun flat on $n hosts had $most threads at most, not 1 to $max_threads"
missing=()
for ((k = 1; k <= n; k++)); do
  (($(logins "$k") > before[$k])) || missing+=("node$k")
done
((${#missing[@]} == 0)) || fail "no ssh login for the job on ${missing[*]}"

# What netns_down must take away, noted before it does.
pids=()
for ((k = 1; k <= n; k++)); do
  pids+=("$(netns_sshd_pid "$k")" "${_netns_holder[$k]}")
  # shellcheck disable=SC2207
  pids+=($(netns_pids "$k"))
done
dir=$NETNS_DIR bridge=$NETNS_BRIDGE net=$NETNS_NET
start=$EPOCHREALTIME
netns_down
down_s=$(echo "$EPOCHREALTIME - $start" | bc)

left=$(ip netns list | grep -c "^$NETNS_PREFIX-")
((left == 0)) || fail "$left namespaces $NETNS_PREFIX-* left after netns_down"
running=()
for pid in "${pids[@]}"; do
  [[ -n $pid ]] && alive "$pid" && running+=("$pid")  # a zombie has left its namespaces
done
((${#running[@]} == 0)) || fail "processes left after netns_down: $(ps -o pid=,args= -p "${running[*]}")"
links=$(ip -o link show | grep -c ": dt$$[a-z]")
((links == 0)) || fail "$links links dt$$* (veths, bridges) left after netns_down"
ip link show "$bridge" >/dev/null 2>&1 && fail "the bridge $bridge is left"
ip -4 -o addr show to "$net" | grep -q " dt$$" && fail "addresses of $net left after netns_down"
[[ -e $dir ]] && fail "$dir left after netns_down"

echo "many_hosts: $n hosts: netns_up ${up_s} s, ddlrun true ${job_s} s (flat, $most threads at most)," \
  "netns_down ${down_s} s"
((fails == 0)) || {
  echo "$fails check(s) failed"
  exit 1
}
echo "PASS"
