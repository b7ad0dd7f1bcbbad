#!/usr/bin/env bash
# netns.sees_checkout: the harness's own check that a fake host sees this checkout. On a real
# host (netns_up 1) it passes for the checkout; for a directory under /tmp that the host does
# not share (each fake host has its own /tmp) it fails with the message that says why.
# Skipped (77) unless root with ip netns and sshd.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
netns_up 1 || exit $?
fail() {
  echo "netns.sees_checkout: FAILED: $*" >&2
  exit 1
}
_netns_check_checkout 1 || fail "node1 does not see the checkout netns_up checked"
hidden=$(mktemp -d /tmp/ddlt-hidden.XXXXXX)
mkdir -p "$hidden/tests/netns" && : >"$hidden/tests/netns/hosts.sh"
real=$_netns_checkout
_netns_checkout=$hidden
out=$(_netns_check_checkout 1 2>&1) && fail "a directory private to this host's /tmp passed"
_netns_checkout=$real
rm -rf "$hidden"
want="netns: node1 does not see this checkout at $hidden (it found: stat: cannot statx '$hidden/tests/netns/hosts.sh': No such file or directory); each fake host has its own /tmp and home, and binds back only a checkout that lies under /tmp or root's home; clone it there or to a path outside both"
[[ $out == "$want" ]] || fail "the message was: $out"
echo "netns.sees_checkout: passed"
