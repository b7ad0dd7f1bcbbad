#!/usr/bin/env bash
# netns.racks_up: the two-level cluster of bench/allreduce_compare.sh (tests/netns/hosts.sh's
# netns_up_racks 2 2: node1, node2 on rack 1's bridge, node3, node4 on rack 2's, the bridges
# joined by one veth pair) with host links shaped to 1 Gbit/s and the uplink to 250 Mbit/s.
# Checks, with real transfers of 16 MiB over TCP (python3 on both ends), that the uplink is the
# bottleneck: node1 -> node2 (same rack) runs at more than 450 Mbit/s, node1 -> node3 and
# node4 -> node2 (across) at 125-330 Mbit/s, and those bytes, and only those, went through the
# uplink's qdiscs (tc -s), each the way it should. With a ddlrun given, also a job of one rank
# on each of the 4 hosts over ssh. Every address is in one 10.200.R.0/24; nothing leaves the
# namespaces. netns_down (on exit) must leave no bridge or uplink behind: checked at the end.
# Skipped (77) unless root with ip netns, sshd and python3.
# Usage: racks_up_test.sh [DDLRUN]
set -uo pipefail
ddlrun=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null; then
  echo "netns.racks_up: skipping: no python3" >&2
  exit 77
fi
# shellcheck source=SCRIPTDIR/../netns/hosts.sh
source "$here/../netns/hosts.sh"
netns_up_racks 2 2 || exit $?
fail() {
  echo "netns.racks_up: FAILED: $*" >&2
  exit 1
}
for k in 1 2 3 4; do netns_shape "$k" 1gbit || fail "tc could not shape node$k"; done
netns_shape_uplink 250mbit || fail "tc could not shape the uplink"

# Where everything is.
for k in 1 2 3 4; do
  want=$((k <= 2 ? 1 : 2))
  [[ $(netns_rack_of "$k") == "$want" ]] || fail "netns_rack_of $k is not $want"
  master=$(ip -o link show "dt$$h$k" | grep -o 'master [^ ]*' | cut -d' ' -f2)
  [[ $master == "$(netns_rack_bridge "$want")" ]] ||
    fail "node$k's veth is on '$master', not rack $want's bridge $(netns_rack_bridge "$want")"
  [[ $(netns_addr "$k") == "${NETNS_NET%.0/24}".* ]] || fail "node$k's address is outside $NETNS_NET"
done
[[ $NETNS_NET == 10.200.* ]] || fail "the hosts' network $NETNS_NET is outside 10.200.0.0/16"

# transfer SRC DST: sends 16 MiB from host SRC to host DST over TCP; prints DST's Mbit/s (first
# byte to end).
transfer() {
  local src=$1 dst=$2 ready="$NETNS_DIR/ready.$1.$2" out="$NETNS_DIR/rate.$1.$2" pid i
  # shellcheck disable=SC2016  # Python, not shell
  netns_exec "$dst" python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1)
open(sys.argv[2], "w").close()
s.settimeout(20)
c, _ = s.accept()
c.settimeout(20)
got, start = 0, None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if start is None: start = time.monotonic()
    got += len(b)
secs = time.monotonic() - start
print("%d %.1f" % (got, got * 8 / secs / 1e6))
' "$(netns_addr "$dst")" "$ready" >"$out" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do [[ -e $ready ]] && break; sleep 0.05; done
  [[ -e $ready ]] || { kill "$pid" 2>/dev/null; fail "node$dst's receiver did not start: $(cat "$out")"; }
  netns_exec "$src" python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], 5001), timeout=20)
c.sendall(bytes(16 << 20))
c.close()
' "$(netns_addr "$dst")" || fail "node$src could not send to node$dst"
  wait "$pid" || fail "node$dst's receiver failed: $(cat "$out")"
  read -r got mbit <"$out"
  [[ $got == $((16 << 20)) ]] || fail "node$dst got $got bytes of $((16 << 20))"
  echo "$mbit"
}

# in_range X LO HI: whether LO <= X <= HI (decimals).
in_range() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }

read -r to1_before to2_before < <(netns_uplink_bytes 2)
same=$(transfer 1 2)
read -r to1_mid to2_mid < <(netns_uplink_bytes 2)
across=$(transfer 1 3)
read -r to1_after to2_after < <(netns_uplink_bytes 2)
back=$(transfer 4 2)
read -r to1_end to2_end < <(netns_uplink_bytes 2)
echo "netns.racks_up: node1 -> node2 (rack 1): $same Mbit/s; node1 -> node3 (across):" \
  "$across Mbit/s; node4 -> node2 (across): $back Mbit/s"
echo "netns.racks_up: uplink bytes toward rack 2 / rack 1: $to2_before/$to1_before," \
  "$to2_mid/$to1_mid, $to2_after/$to1_after, $to2_end/$to1_end"
in_range "$same" 450 2000 || fail "node1 -> node2 within rack 1 ran at $same Mbit/s, not > 450"
in_range "$across" 125 330 || fail "node1 -> node3 across the uplink ran at $across Mbit/s, not 125-330"
in_range "$back" 125 330 || fail "node4 -> node2 across the uplink ran at $back Mbit/s, not 125-330"
mib=$((16 << 20))
# Within rack 1: at most some ARP and acknowledgements through the uplink.
((to2_mid - to2_before < mib / 16)) || fail "node1 -> node2 went through the uplink"
((to2_after - to2_mid >= mib)) || fail "node1 -> node3 did not go through the uplink toward rack 2"
((to1_end - to1_after >= mib)) || fail "node4 -> node2 did not go through the uplink toward rack 1"

if [[ -n $ddlrun ]]; then
  out=$("$ddlrun" -q --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tcp \
    -H node1,node2,node3,node4 --nodes 2 --tag-output none hostname 2>&1) ||
    fail "ddlrun on the 4 hosts: $out"
  [[ $(sort <<<"$out" | tr '\n' ' ') == "node1 node2 node3 node4 " ]] ||
    fail "ddlrun on the 4 hosts printed: $out"
  echo "netns.racks_up: ddlrun ran one rank on each of node1..node4"
fi

bridge2=$(netns_rack_bridge 2) uplink=$(netns_uplink 2)
netns_down
for link in "$bridge2" "$uplink" "$NETNS_BRIDGE"; do
  if ip link show "$link" >/dev/null 2>&1; then fail "netns_down left $link behind"; fi
done
echo "netns.racks_up: ok"
