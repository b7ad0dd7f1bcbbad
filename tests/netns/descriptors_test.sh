#!/usr/bin/env bash
# Descriptors and logins across 8 fake hosts (hosts.sh) through the ssh launcher:
#   - with a soft open-files limit of 24 (ulimit -Sn 24) the job runs: ddlrun raises its soft
#     limit to the hard one at start (it used to fail with a false "unknown host key" for 7
#     hosts and "Too many open files" for one);
#   - each host sees one ssh login for probe and launch together (its sshd's "Accepted
#     publickey" lines), not one for each, and one login shell (.bashrc runs once: the agent
#     starts in the probe's channel);
#   - with a hard limit too low (ulimit -n 12) every host's failure says so, with the limit and
#     the fix, and none says "unknown host key".
#
# Usage: descriptors_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up 8 || exit $?

netns_session
args=(--ssh-config "$NETNS_SSH_CONFIG" --launcher ssh --tag-output none -H "$NETNS_LIST")
logins() { grep -c "Accepted publickey" "$NETNS_DIR/node$1/sshd.log"; }
# Each login shell (one per command ssh runs) counts itself in the host's own /tmp.
root_home=$(getent passwd root | cut -d: -f6)
for k in $(seq 1 8); do
  netns_exec "$k" sh -c "echo 'echo x >>/tmp/login-shells' >'$root_home/.bashrc'"
done
shells() { netns_exec "$1" sh -c 'cat /tmp/login-shells 2>/dev/null' | wc -l; }
declare -A before=()
for k in $(seq 1 8); do before[$k]=$(logins "$k"); done
"$ddlrun" "${args[@]}" true >"$out/plain" 2>"$out/plain.err"
rc=$?
[[ $rc == 0 ]] || fail "plain run: exit $rc, not 0" "$out/plain.err"
for k in $(seq 1 8); do
  n=$(($(logins "$k") - before[$k]))
  ((n == 1)) || fail "node$k: $n ssh logins for one job (probe and launch), not 1" \
    "$NETNS_DIR/node$k/sshd.log"
  n=$(shells "$k")
  ((n == 1)) || fail "node$k: $n login shells for one job (probe and agent), not 1"
done

(ulimit -Sn 24 && "$ddlrun" "${args[@]}" hostname) >"$out/soft" 2>"$out/soft.err"
rc=$?
[[ $rc == 0 ]] || fail "ulimit -Sn 24: exit $rc, not 0" "$out/soft.err"
[[ $(sort "$out/soft" | tr '\n' ' ') == "node1 node2 node3 node4 node5 node6 node7 node8 " ]] ||
  fail "ulimit -Sn 24: not one line from every host" "$out/soft"

hard=12
(ulimit -n "$hard" && "$ddlrun" "${args[@]}" true) >"$out/hard" 2>"$out/hard.err"
rc=$?
[[ $rc == 1 ]] || fail "ulimit -n $hard: exit $rc, not 1" "$out/hard.err"
grep -q "unknown host key" "$out/hard.err" && fail "ulimit -n $hard: a false 'unknown host key'" "$out/hard.err"
named=$(grep -c "^  node[1-8]: .*: too many open files (limit $hard): raise ulimit -n$" "$out/hard.err")
((named >= 1)) || fail "ulimit -n $hard: no host's failure names the open-files limit" "$out/hard.err"
other=$(grep "^  node[1-8]: " "$out/hard.err" | grep -vc "too many open files (limit $hard)")
((other == 0)) || fail "ulimit -n $hard: $other failures that are not the open-files limit" "$out/hard.err"

netns_down
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
