#!/usr/bin/env bash
# Per-node mode's secrets on the wire and strangers at its rendezvous on three fake
# hosts (hosts.sh), each running ddlrun --node-rank K --nnodes 3 --rdzv node1:29400 with
# DDL_JOB_TOKEN set, started in its namespaces by nsenter:
#   capture  tcpdump on node1 (node 0: every interface, its loopback too) during a job of
#            ddl_check on 3 x 2 ranks, each rank writing down its $DDL_JOB_TOKEN: the TCP
#            streams (reassembled, tests/netns/pcap_streams.py) hold the rendezvous (DDLNODE4)
#            and the ranks' hellos (DDLRV2), but neither the secret nor the ranks' token, which
#            every rank has, the same;
#   flood    a stranger on this side floods node 0's rendezvous (tests/chaos/rdzv_flood.py: 64
#            MiB length prefixes, 64 x 1 MiB fields, trickles, refused hellos that never read,
#            idle connections) from 1 s before the nodes start until after they end: every node
#            ends 0, node 0's ddlrun stays under 64 MiB (resident size sampled every 0.1 s), and
#            node 0 says why it closes connections without naming more than a few.
# Usage: per_node_wire_test.sh DDLRUN DDL_CHECK   (77 without root, netns, sshd or tcpdump)
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
check=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
command -v tcpdump >/dev/null || { echo "SKIP: no tcpdump (scripts/setup installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
netns_up 3 || exit $?
netns_session
secret="pernode-wire-secret-$$-$RANDOM"
export DDL_JOB_TOKEN=$secret

# on K CMD...: CMD in host K's namespaces; nsenter execs it (so that $! of `on K CMD &` is CMD).
on() {
  local k=$1
  shift
  exec nsenter --net="/run/netns/$(netns_ns "$k")" --target "${_netns_holder[$k]}" --uts \
    --mount -- "$@"
}
# node K NAME ARGS...: ddlrun --node-rank K-1 on host K in the background, its output in
# $out/NAME.K; pids[K] is ddlrun itself.
declare -A pids=() rcs=()
node() {
  local k=$1 name=$2
  shift 2
  (on "$k" "$ddlrun" --node-rank $((k - 1)) --nnodes 3 --rdzv node1:29400 --rdzv-timeout 30 \
    --tag-output rank "$@" </dev/null >"$out/$name.$k" 2>&1) &
  pids[$k]=$!
}
# all NAME ARGS...: the three nodes; statuses in rcs[K]; node 0's peak resident size (KiB)
# in peak.
all() {
  local name=$1 k r
  shift
  for k in 1 2 3; do node "$k" "$name" "$@"; done
  peak=0
  while kill -0 "${pids[1]}" 2>/dev/null; do
    r=$(awk '/^VmRSS:/ { print $2 }' "/proc/${pids[1]}/status" 2>/dev/null)
    ((${r:-0} > peak)) && peak=$r
    sleep 0.1
  done
  for k in 1 2 3; do
    wait "${pids[$k]}"
    rcs[$k]=$?
  done
}

echo "== capture"
(on 1 tcpdump -i any -U -s 0 -w "$out/capture.pcap" tcp 2>"$out/tcpdump.err") &
dump=$!
for _ in $(seq 50); do grep -q "listening on" "$out/tcpdump.err" && break; sleep 0.1; done
all capture -a 2 sh -c "printf '%s\n' \"\$DDL_JOB_TOKEN\" >$out/token.\$RANK; exec $check"
sleep 0.5
kill -INT "$dump"
wait "$dump"
for k in 1 2 3; do
  ((rcs[$k] == 0)) || fail "capture: node$k exited ${rcs[$k]}" "$out/capture.$k"
done
python3 "$here/pcap_streams.py" "$out/capture.pcap" >"$out/streams" ||
  fail "capture: cannot read $out/capture.pcap"
token=$(cat "$out/token.0" 2>/dev/null)
for r in 1 2 3 4 5; do
  [[ $(cat "$out/token.$r" 2>/dev/null) == "$token" ]] || fail "capture: rank $r's token differs"
done
[[ ${#token} == 64 ]] || fail "capture: the ranks' token is '$token', not 64 hex digits"
[[ $token != "$secret" ]] || fail "capture: the ranks' token is the secret"
grep -aq DDLNODE4 "$out/streams" || fail "capture: no rendezvous in the capture"
grep -aq DDLRV2 "$out/streams" || fail "capture: no rank's hello in the capture"
n=$(grep -ac -- "$secret" "$out/streams")
((n == 0)) || fail "capture: the secret crossed the network ($n times)"
n=$(grep -ac -- "$token" "$out/streams")
((n == 0)) || fail "capture: the ranks' token crossed the network ($n times)"
((fails == 0)) &&
  echo "PASS capture: $(stat -c %s "$out/streams") bytes of TCP on node1, no secret, no token"

echo "== flood"
python3 "$here/../chaos/rdzv_flood.py" "$(netns_addr 1)" 29400 14 >"$out/flood" 2>&1 &
flooder=$!
sleep 1
all flood -a 2 sh -c "$check && sleep 6"
wait "$flooder"
for k in 1 2 3; do
  ((rcs[$k] == 0)) || fail "flood: node$k exited ${rcs[$k]}" "$out/flood.$k"
done
((peak < 65536)) || fail "flood: node 0's ddlrun reached $((peak / 1024)) MiB" "$out/flood.1"
grep -q "connections have not said hello; closing the oldest" "$out/flood.1" ||
  fail "flood: node 0 does not say why it closes connections" "$out/flood.1"
refusals=$(grep -c "rendezvous: refused\|sent garbage" "$out/flood.1")
((refusals <= 10)) || fail "flood: node 0 printed $refusals refusals" "$out/flood.1"
((fails == 0)) && echo "PASS flood: $(cat "$out/flood"); every node 0, node 0 peak $((peak / 1024)) MiB"

((fails == 0)) || exit 1
