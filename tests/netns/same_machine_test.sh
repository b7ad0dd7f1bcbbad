#!/usr/bin/env bash
# One machine under two names, on fake hosts (hosts.sh: each a network namespace with its own
# host name and sshd, all sharing this kernel's machine and boot ids):
#   - node1 and its address (and an ssh-config alias of it) are refused as one machine, exit 2,
#     naming both spellings (they used to be planned as two hosts, two ranks per CPU);
#   - node1 and node2, which share machine and boot id but not the network namespace, are two.
#
# Usage: same_machine_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up 2 || exit $?

netns_session
addr1=$(netns_addr 1)
config="$NETNS_DIR/ssh_config_same"
{
  cat "$NETNS_SSH_CONFIG"
  printf 'Host %s first\n  HostName %s\n  User root\n  IdentityFile %s\n' "$addr1" "$addr1" "$NETNS_KEY"
  printf '  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n' \
    "$NETNS_KNOWN_HOSTS"
} >"$config"
args=(--ssh-config "$config" --launcher ssh --dry-run)

"$ddlrun" "${args[@]}" -H "node1,$addr1" true >"$out/addr" 2>"$out/addr.err"
rc=$?
[[ $rc == 2 ]] || fail "node1 and its address: exit $rc, not 2" "$out/addr.err" "$out/addr"
[[ $(cat "$out/addr.err") == "ddlrun: error: '$addr1' (-H) and 'node1' (-H) are the same machine: their probes found one machine (the same machine id, boot id and network namespace, host name 'node1'); list each machine once, under one name, with all its slots" ]] ||
  fail "node1 and its address: message is not the expected one" "$out/addr.err"

printf 'first slots=2\nnode2 slots=2\nnode1 slots=2\n' >"$out/hosts.txt"
"$ddlrun" "${args[@]}" --hostfile "$out/hosts.txt" true >"$out/alias" 2>"$out/alias.err"
rc=$?
[[ $rc == 2 ]] || fail "alias and name: exit $rc, not 2" "$out/alias.err" "$out/alias"
[[ $(cat "$out/alias.err") == "ddlrun: error: 'node1' ($out/hosts.txt:3) and 'first' ($out/hosts.txt:1) are the same machine: their probes found one machine (the same machine id, boot id and network namespace, host name 'node1'); list each machine once, under one name, with all its slots" ]] ||
  fail "alias and name: message is not the expected one" "$out/alias.err"

"$ddlrun" "${args[@]}" -H node1:2,node2:2 true >"$out/two" 2>"$out/two.err"
rc=$?
[[ $rc == 0 ]] || fail "node1 and node2: exit $rc, not 0" "$out/two.err"
grep -q '^ranks: *4 (2 hosts x 2)' "$out/two" || fail "node1 and node2: not 2 hosts x 2" "$out/two"

netns_down
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
