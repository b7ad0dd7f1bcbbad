#!/usr/bin/env bash
# ddlrun --probe-links against fake hosts (hosts.sh): with no --nodes or --racks, the measured
# links alone give the racks.
#  - Two racks x 2 hosts (netns_up_racks 2 2), host links shaped to 1 Gbit/s, the uplink to
#    250 Mbit/s: ddlrun finds racks node1 node2 | node3 node4 and plans p:2x2x2x1; the topology
#    file (format 1.1) holds the links; the text, YAML and JSON dry runs show them; -v says how
#    long the measurement took; a batch job's second command reads them from the probe cache;
#    --nodes wins over them; nothing is left running on the hosts.
#  - Three hosts at 1 Gbit/s (netns_up 3): one rack, p:2x3x1x1; also with this host among
#    them, and with no host probed (--host-xml): one login per host, its ddlrun agent's, for a
#    dry run and for a job, which runs on the agents the measurement started. A real job started
#    with --probe-links runs.
#  - Five hosts, the agents on --probe-links-port 29555, each inside its host's ddlrun agent (no
#    `ddlrun --link-agent` command runs); a capture on node1's link during the
#    measurement finds a challenge opening every test and no secret-sized string twice (the
#    token, sent in clear on every connection, would be). Then node3's link drops the port
#    (tc, as a firewall's DROP would): every pair is still measured (node3's from its side),
#    one warning names node3, the port and what to do, and it takes at most 3 s longer than
#    the same run unblocked (it took 10 s, measured 21 of 276 pairs on 24 hosts and named no
#    host).
#
# Usage: probe_links_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns/sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"

# run NAME ARGS...: ddlrun with the hosts' ssh config; $out/NAME, NAME.err, NAME.rc
run() {
  local name=$1
  shift
  local start=$SECONDS
  "$ddlrun" --ssh-config "$NETNS_SSH_CONFIG" "$@" >"$out/$name" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
  echo "  $name: ddlrun $* -> exit $(cat "$out/$name.rc") ($((SECONDS - start)) s)"
  [[ $(cat "$out/$name.rc") == 0 ]] || fail "$name: exit $(cat "$out/$name.rc")" "$out/$name.err"
}

# nothing_left K...: no process of ours left on the hosts (only sshd).
nothing_left() {
  local k left
  sleep 0.3
  for k in "$@"; do
    left=$(netns_pids "$k")
    [[ -z $left ]] || fail "node$k: processes left: $(echo "$left" | tr '\n' ' ')"
  done
}

# 1. Two racks.
netns_up_racks 2 2 || exit $?
netns_session
for k in 1 2 3 4; do netns_shape "$k" 1gbit || fail "tc could not shape node$k"; done
netns_shape_uplink 250mbit || fail "tc could not shape the uplink"
hosts=node1:2,node2:2,node3:2,node4:2

run racks --dry-run --probe-links -v -H "$hosts" --topology-file "$out/topo" prog
grep -Fxq "mode:      p:2x2x2x1 (ranks per host x hosts per rack x racks per aisle x aisles, racks measured (--probe-links))" \
  "$out/racks" || fail "racks: not mode p:2x2x2x1 from measured racks" "$out/racks" "$out/racks.err"
grep -Fxq "  racks:   2 racks of 2 hosts: node1 node2 | node3 node4" "$out/racks" ||
  fail "racks: the racks found" "$out/racks"
grep -Eq '^  level nic: [0-9.]+ MB/s, [0-9.]+ [um]s$' "$out/racks" || fail "racks: nic level" "$out/racks"
grep -Eq '^  level uplink: [0-9.]+ MB/s, [0-9.]+ [um]s$' "$out/racks" || fail "racks: uplink level" "$out/racks"
grep -Eq '^links: +6 of 6 host pairs measured in [0-9]\.[0-9][0-9] s \(--probe-links\)$' "$out/racks" ||
  fail "racks: links summary" "$out/racks"
grep -Eq 'info.*--probe-links: 6 of 6 host pairs measured in [0-9.]+ s, 2 racks' "$out/racks.err" ||
  fail "racks: -v does not say how long it took" "$out/racks.err"
grep -q '^version: "1.1"$' "$out/topo" || fail "racks: topology file not format 1.1" "$out/topo"
grep -Fxq '    - [0, 1]' "$out/topo" && grep -Fxq '    - [2, 3]' "$out/topo" ||
  fail "racks: topology file racks" "$out/topo"
sed -n '/^links:/,$p' "$out/racks"
# The uplink measured well below the hosts' links (250 vs 1000 Mbit/s).
awk '/^  level nic:/ { nic = $4 } /^  level uplink:/ { up = $4 }
     END { exit !(up > 0 && nic > 2 * up) }' "$out/racks" ||
  fail "racks: the uplink is not clearly slower than the hosts' links" "$out/racks"

run racks_yaml --dry-run --output yaml --probe-links -H "$hosts" prog
grep -Eq '^  racks:$' "$out/racks_yaml" && grep -Eq '^      - node3$' "$out/racks_yaml" ||
  fail "racks_yaml: no racks" "$out/racks_yaml"
grep -q '^  string: "p:2x2x2x1"$' "$out/racks_yaml" || fail "racks_yaml: mode" "$out/racks_yaml"
run racks_json --dry-run --output json --probe-links -H "$hosts" prog
grep -q '"pairs_measured": 6,' "$out/racks_json" || fail "racks_json: links" "$out/racks_json"

# In a batch job (a job id) the measurement is cached with the probe: the second command of
# the job reads it.
run job1 --dry-run --probe-links -v --job-id links-job -H "$hosts" prog
run job2 --dry-run --probe-links -v --job-id links-job -H "$hosts" prog
grep -q "host pairs measured in .* s, 2 racks" "$out/job1.err" || fail "job1: not measured" "$out/job1.err"
grep -q "host pairs measured in .* s (the job's cache), 2 racks" "$out/job2.err" ||
  fail "job2: not from the job's cache" "$out/job2.err"
grep -q '^mode:      p:2x2x2x1 ' "$out/job2" || fail "job2: mode" "$out/job2"

# A job started with it: the ssh launcher's agents share the sessions the links were measured
# through.
run launch --probe-links -q -H "$hosts" true

# --nodes still wins over the measurement.
run nodes --dry-run --probe-links --nodes 4 -H "$hosts" prog
grep -q '^mode:      p:2x4x1x1 ' "$out/nodes" || fail "nodes: --nodes 4 not kept" "$out/nodes"
nothing_left 1 2 3 4
netns_down

# 2. Flat: three hosts at 1 Gbit/s.
netns_up 3 || exit $?
netns_session
for k in 1 2 3; do netns_shape "$k" 1gbit || fail "tc could not shape node$k"; done
run flat --dry-run --probe-links -H node1:2,node2:2,node3:2 prog
grep -q '^mode:      p:2x3x1x1 (ranks per host x hosts per rack x racks per aisle x aisles)$' \
  "$out/flat" || fail "flat: mode" "$out/flat" "$out/flat.err"
grep -Fxq "  racks:   1 rack of 3 hosts: node1 node2 node3" "$out/flat" || fail "flat: racks" "$out/flat"
grep -q '^  level uplink' "$out/flat" && fail "flat: an uplink level" "$out/flat"
sed -n '/^links:/,$p' "$out/flat"
# This host among them: the others reach it at the address they saw ddlrun log in from.
run local --dry-run --probe-links -H localhost:2,node1:2,node2:2 prog
grep -Eq '^links: +3 of 3 host pairs measured in ' "$out/local" || fail "local: links" "$out/local" "$out/local.err"
grep -Fxq "  racks:   1 rack of 3 hosts: localhost node1 node2" "$out/local" || fail "local: racks" "$out/local"
# No host probed (their hardware from --host-xml): each host's agent is started for the
# measurement alone, one login running `ddlrun --probe-agent` (each login shell notes its
# command in the host's own /tmp), and exits after it.
root_home=$(getent passwd root | cut -d: -f6)
for k in 1 2 3; do
  netns_exec "$k" sh -c "cat >'$root_home/.bashrc'" <<'RC'
printf '%s\n' "$BASH_EXECUTION_STRING" >>/tmp/login-commands
RC
done
xml=$(dirname "$0")/../topologies/laptop-1p4c8t.xml
run xml --dry-run --probe-links --host-xml "node*=$xml" -H node1:2,node2:2,node3:2 prog
grep -Eq '^links: +3 of 3 host pairs measured in ' "$out/xml" || fail "xml: links" "$out/xml" "$out/xml.err"
for k in 1 2 3; do
  got=$(netns_exec "$k" sh -c 'cat /tmp/login-commands 2>/dev/null; rm -f /tmp/login-commands')
  [[ $got == "$ddlrun --probe-agent" ]] || fail "xml: node$k's logins ran '$got', not ddlrun's agent once"
done
# A job so measured runs on the agents the measurement started: one login per host still (its
# hosts described by this machine's own hwloc XML, so that the CPUs it binds exist).
lstopo --of xml "$out/self.xml" || fail "lstopo could not write this host's XML"
run xml_job --probe-links -q --host-xml "node*=$out/self.xml" -H node1:1,node2:1,node3:1 true
for k in 1 2 3; do
  got=$(netns_exec "$k" sh -c 'cat /tmp/login-commands 2>/dev/null')
  [[ $got == "$ddlrun --probe-agent" ]] || fail "xml_job: node$k's logins ran '$got', not ddlrun's agent once"
  netns_exec "$k" rm -f "$root_home/.bashrc"
done
nothing_left 1 2 3

netns_down

# 3. A host whose agent's port a firewall drops.
netns_up 5 || exit $?
netns_session
hosts5=node1:1,node2:1,node3:1,node4:1,node5:1
# The agents' traffic on node1's link, captured: every test starts with a challenge, and no
# secret-sized string crosses twice (the token itself used to open every test connection).
capture=0
if command -v tcpdump >/dev/null; then
  # nsenter execs tcpdump (only the network namespace): $! is tcpdump itself
  nsenter --net="/run/netns/$(netns_ns 1)" tcpdump -i any -U -s 256 -w "$out/links.pcap" \
    tcp port 29555 2>"$out/tcpdump.err" &
  dump=$!
  for _ in $(seq 50); do grep -q "listening on" "$out/tcpdump.err" && break; sleep 0.1; done
  capture=1
fi
run open --dry-run --probe-links --probe-links-port 29555 -H "$hosts5" prog
if ((capture)); then
  sleep 0.3
  kill -INT "$dump"
  wait "$dump"
  tcpdump -r "$out/links.pcap" -A 2>/dev/null >"$out/links.txt"
  n=$(grep -aoE 'ddl-link-test 2 [0-9a-f]{32}' "$out/links.txt" | sort -u | wc -l)
  ((n >= 4)) || fail "capture: $n challenges on node1's link, not 4 or more" "$out/tcpdump.err"
  twice=$(grep -aoE '[0-9a-f]{32,}' "$out/links.txt" | sort | uniq -d)
  [[ -z $twice ]] || fail "capture: the same secret-sized string crossed twice: $twice"
  echo "  capture: $n challenges, $(grep -aoE '[0-9a-f]{64}' "$out/links.txt" | wc -l) answers" \
    "on node1's link, no string twice"
fi
open_s=$(sed -n 's/^links: .* measured in \([0-9.]*\) s .*/\1/p' "$out/open")
grep -Eq '^links: +10 of 10 host pairs measured in ' "$out/open" || fail "open: links" "$out/open"
# Flat as down the launch tree, each link agent runs inside its host's ddlrun agent: while
# node1's listens, no `ddlrun --link-agent` command runs there.
"$ddlrun" --ssh-config "$NETNS_SSH_CONFIG" --dry-run --probe-links --probe-links-port 29555 \
  -H "$hosts5" prog >"$out/inside" 2>"$out/inside.err" &
job=$!
seen=0
for _ in $(seq 600); do
  if ip netns exec "$(netns_ns 1)" ss -ltnH 'sport = :29555' | grep -q .; then
    seen=1
    netns_job_procs 1 | grep -q -- "--link-agent" && fail "inside: node1 runs a --link-agent command"
    break
  fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
wait "$job" || fail "inside: ddlrun exited $?" "$out/inside.err"
((seen)) || fail "inside: node1's link agent was never seen listening" "$out/inside.err"
# Every TCP segment to node3's port 29555 is dropped on its link, as a firewall's DROP would:
# an htb class whose queue holds nothing, the segments sent there by a u32 filter (tc actions
# such as drop need kernel modules that containers may lack; htb, bfifo and u32 are there).
link3="dt$$h3"
tc qdisc add dev "$link3" root handle 1: htb default 10 &&
  tc class add dev "$link3" parent 1: classid 1:10 htb rate 10gbit 2>/dev/null &&
  tc class add dev "$link3" parent 1: classid 1:20 htb rate 8bit 2>/dev/null &&
  tc qdisc add dev "$link3" parent 1:20 handle 20: bfifo limit 0 &&
  tc filter add dev "$link3" parent 1: protocol ip u32 match ip protocol 6 0xff \
    match ip dport 29555 0xffff flowid 1:20 2>/dev/null ||
  fail "tc could not drop node3's port 29555"
run blocked --dry-run --probe-links --probe-links-port 29555 -H "$hosts5" prog
grep -Eq '^links: +10 of 10 host pairs measured in ' "$out/blocked" ||
  fail "blocked: not every pair measured" "$out/blocked" "$out/blocked.err"
blocked_s=$(sed -n 's/^links: .* measured in \([0-9.]*\) s .*/\1/p' "$out/blocked")
awk -v a="$open_s" -v b="$blocked_s" 'BEGIN { exit !(b != "" && b <= a + 3) }' ||
  fail "blocked: measured in ${blocked_s:-?} s, unblocked in ${open_s:-?} s"
expected="ddlrun: warning: --probe-links: node3: its link agent's TCP port 29555 cannot be \
reached (from node2: no answer from $(netns_addr 3):29555 within 1 s); its links were measured \
from node3 outward. Let TCP port 29555 in through node3's firewall (--probe-links-port PORT gives \
every agent that port), or leave --probe-links out (--nodes gives the hosts per rack)"
grep -Fxq "$expected" "$out/blocked.err" || fail "blocked: the warning naming node3" "$out/blocked.err"
echo "  open:    $(grep '^links:' "$out/open")"
echo "  blocked: $(grep '^links:' "$out/blocked")"
grep -F -- "--probe-links: node3" "$out/blocked.err"
n=$(($(grep -c warning "$out/blocked.err") - $(grep -c warning "$out/open.err")))
((n == 1)) || fail "blocked: $n more warnings than unblocked, not 1" "$out/blocked.err"
nothing_left 1 2 3 4 5

prefix=$NETNS_PREFIX
netns_down
if ip netns list | grep -q "^$prefix-"; then fail "namespaces left"; fi
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
