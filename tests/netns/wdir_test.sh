#!/usr/bin/env bash
# The directory ranks start in, across two fake hosts (hosts.sh) through the ssh launcher, and
# on this host through the local launcher:
#   - ddlrun run from a directory that node2 lacks stops before anything starts anywhere, exit
#     1, with a message naming node2 and the directory (it used to start node2's ranks in $HOME,
#     where ./prog was "no such file");
#   - --wdir DIR (and -wdir, --wd) starts every rank in DIR on every host, ./prog found there;
#   - locally, --wdir works the same, and a missing --wdir is named before anything starts.
#
# Usage: wdir_test.sh DDLRUN   (exit 77, skipped, when not root or without ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up 2 || exit $?

netns_session
ssh_args=(--launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --no-probe --tag-output none)

# A directory that this host and node1 have (each its own /tmp) but node2 has not.
only_here=/tmp/ddlrun-wdir-test.$$
mkdir -p "$only_here"
# A directory every host has (NETNS_DIR is seen by all), with a program in it.
shared="$NETNS_DIR/shared dir"
mkdir -p "$shared"
printf '#!/bin/sh\necho "$(hostname) $(pwd)"\n' >"$shared/prog"
chmod +x "$shared/prog"
printf '#!/bin/sh\ntouch "%s/ran.$(hostname)"\n' "$out" >"$only_here/prog"
chmod +x "$only_here/prog"
netns_exec 1 mkdir -p "$only_here"
netns_exec 1 sh -c "cat >\"$only_here/prog\" && chmod +x \"$only_here/prog\"" <"$only_here/prog"  # node1: its own /tmp

# 1. ddlrun's directory is missing on node2: nothing starts, node2 and the directory named.
(cd "$only_here" && "$ddlrun" "${ssh_args[@]}" -H node1,node2 ./prog) >"$out/missing" 2>"$out/missing.err"
rc=$?
[[ $rc == 1 ]] || fail "missing: exit $rc, not 1" "$out/missing.err"
expected="ddlrun: error: cannot start the job on 1 of 2 hosts:
  node2: working directory $only_here is missing (No such file or directory): create it there, or give --wdir DIR naming a directory every host has"
[[ $(cat "$out/missing.err") == "$expected" ]] ||
  fail "missing: message is not the expected one" "$out/missing.err"
ls "$out"/ran.* >/dev/null 2>&1 && fail "missing: a rank ran: $(ls "$out"/ran.*)"
# The same with probing: each agent then starts in its probe's channel (ddlrun --probe-agent).
(cd "$only_here" && "$ddlrun" --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" -H node1,node2 ./prog) \
  >"$out/missing_probed" 2>"$out/missing_probed.err"
rc=$?
[[ $rc == 1 ]] || fail "missing, probed: exit $rc, not 1" "$out/missing_probed.err"
[[ $(cat "$out/missing_probed.err") == "$expected" ]] ||
  fail "missing, probed: message is not the expected one" "$out/missing_probed.err"
ls "$out"/ran.* >/dev/null 2>&1 && fail "missing, probed: a rank ran: $(ls "$out"/ran.*)"

# 2. --wdir names a directory every host has: ./prog runs there on both hosts.
for spelling in --wdir -wdir --wd; do
  (cd "$only_here" && "$ddlrun" "${ssh_args[@]}" -H node1,node2 "$spelling" "$shared" ./prog) \
    >"$out/wdir$spelling" 2>"$out/wdir$spelling.err"
  rc=$?
  [[ $rc == 0 ]] || fail "$spelling: exit $rc, not 0" "$out/wdir$spelling.err"
  [[ $(sort "$out/wdir$spelling") == "node1 $shared
node2 $shared" ]] || fail "$spelling: ranks did not start in '$shared'" "$out/wdir$spelling"
done

# 3. --wdir that no host has: named, nothing runs.
"$ddlrun" "${ssh_args[@]}" -H node1,node2 --wdir /nowhere/at/all ./prog >"$out/nowhere" 2>"$out/nowhere.err"
rc=$?
[[ $rc == 1 ]] || fail "nowhere: exit $rc, not 1" "$out/nowhere.err"
for host in node1 node2; do
  grep -qxF "  $host: working directory /nowhere/at/all is missing (No such file or directory): create it there, or give --wdir DIR naming a directory every host has" "$out/nowhere.err" ||
    fail "nowhere: $host not named" "$out/nowhere.err"
done

# 4. The local launcher: --wdir works, and a missing one is named before anything starts.
(cd / && "$ddlrun" --no-probe --tag-output none -H localhost:2 --wdir "$shared" ./prog) \
  >"$out/local" 2>"$out/local.err"
rc=$?
[[ $rc == 0 ]] || fail "local: exit $rc, not 0" "$out/local.err"
[[ $(sort -u "$out/local") == "$(hostname) $shared" ]] || fail "local: not started in '$shared'" "$out/local"
"$ddlrun" --no-probe -H localhost --wdir /nowhere/at/all true >"$out/local_missing" 2>"$out/local_missing.err"
rc=$?
[[ $rc == 1 ]] || fail "local_missing: exit $rc, not 1" "$out/local_missing.err"
[[ $(cat "$out/local_missing.err") == "ddlrun: error: localhost: working directory /nowhere/at/all is missing (No such file or directory): create it there, or give --wdir DIR naming a directory every host has" ]] ||
  fail "local_missing: message is not the expected one" "$out/local_missing.err"

rm -rf "$only_here"
netns_down
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
