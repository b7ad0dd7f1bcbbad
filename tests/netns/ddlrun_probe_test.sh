#!/usr/bin/env bash
# ddlrun --dry-run against fake hosts (hosts.sh: network namespaces with their own hostname and
# sshd): ddlrun runs its agent (`ddlrun --probe-agent`) on every host over ssh and asks it for
# the host's inventory, for a dry run and a plan for another launcher too, places the ranks on
# what came back, writes the topology file, and reports hosts it cannot reach all together.
#
# Usage: ddlrun_probe_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns/sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up 3 || exit $?

netns_session

# run NAME ARGS...: ddlrun with the hosts' ssh config; $out/NAME, NAME.err, NAME.rc
run() {
  local name=$1
  shift
  "$ddlrun" --ssh-config "$NETNS_SSH_CONFIG" "$@" >"$out/$name" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
  echo "  $name: ddlrun $* -> exit $(cat "$out/$name.rc")"
}
rc() { cat "$out/$1.rc"; }

# Two reachable hosts: probed over ssh, each reporting its own hostname in the inventory.
run two --dry-run --output yaml --job-id netns -H node1,node2 --topology-file "$out/topo" prog
[[ $(rc two) == 0 ]] || fail "two: exit $(rc two)" "$out/two.err"
[[ $(grep -c '^      from: ssh$' "$out/two") == 2 ]] || fail "two: not both hosts probed" "$out/two"
grep -q '^  - name: node2$' "$out/two" || fail "two: node2 missing" "$out/two"
[[ -f $out/topo && $(stat -c %a "$out/topo") == 600 ]] || fail "two: topology file not 0600"
grep -q '^job_id: "netns"$' "$out/topo" || fail "two: job id not in the topology file" "$out/topo"
# This machine's cores, split among as many ranks as the hosts' slots (no GPU here).
grep -q '^  - {index: 1, name: "node2", address: "node2"' "$out/topo" ||
  fail "two: node2 not host 1 of the topology file" "$out/topo"

# The text plan names where each host's hardware came from.
run text --dry-run -H node1,node2:2 prog
[[ $(rc text) == 0 ]] || fail "text: exit $(rc text)" "$out/text.err"
grep -Eq '^  node2 +2 +1-2 +0 +[0-9]+ +ssh +-H$' "$out/text" || fail "text: node2's row" "$out/text"

# A dry run asks each host's agent for its inventory (one login running `ddlrun --probe-agent`,
# its session closed once it answered: nothing is left, checked below), and so does a plan that
# another launcher runs. Each login shell notes its command in the host's own /tmp.
root_home=$(getent passwd root | cut -d: -f6)
for k in 1 2; do
  netns_exec "$k" sh -c "cat >'$root_home/.bashrc'" <<'RC'
printf '%s\n' "$BASH_EXECUTION_STRING" >>/tmp/login-commands
RC
done
run agents --dry-run -H node1,node2 prog
run agents_mpirun --dry-run --launcher mpirun -H node1,node2 prog
for name in agents agents_mpirun; do
  [[ $(rc $name) == 0 ]] || fail "$name: exit $(rc $name)" "$out/$name.err"
done
for k in 1 2; do
  got=$(netns_exec "$k" sh -c 'cat /tmp/login-commands 2>/dev/null')
  [[ $got == "$ddlrun --probe-agent"$'\n'"$ddlrun --probe-agent" ]] ||
    fail "node$k: its logins ran '$got', not ddlrun's agent once for each plan"
  netns_exec "$k" rm -f "$root_home/.bashrc"
done

# A stopped sshd and a second one: both reported in one message, nothing planned.
netns_stop_sshd 3
cat >>"$NETNS_SSH_CONFIG" <<CFG
Host ghost
  HostName $(netns_spare_addr 1)
  User root
  IdentityFile $NETNS_KEY
  UserKnownHostsFile $NETNS_KNOWN_HOSTS
CFG
run down --dry-run --connect-timeout 1 -H node1,node3,ghost prog
[[ $(rc down) == 1 ]] || fail "down: exit $(rc down), not 1" "$out/down.err"
[[ ! -s $out/down ]] || fail "down: printed a plan" "$out/down"
grep -Fxq "ddlrun: error: cannot probe 2 of 3 hosts:" "$out/down.err" || fail "down: summary" "$out/down.err"
grep -Fxq "  node3: connection refused ($(netns_addr 3):22)" "$out/down.err" ||
  fail "down: node3's reason" "$out/down.err"
grep -Fq "  ghost: timed out after 1 s" "$out/down.err" || fail "down: ghost's reason" "$out/down.err"

# No session is left on the hosts.
sleep 0.2
for k in 1 2; do
  left=$(ip netns pids "$(netns_ns "$k")" | grep -vx "$(netns_sshd_pid "$k")")
  [[ -z $left ]] || fail "node$k: processes left: $(echo "$left" | tr '\n' ' ')"
done

prefix=$NETNS_PREFIX
netns_down
if ip netns list | grep -q "^$prefix-"; then fail "namespaces left"; fi
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
