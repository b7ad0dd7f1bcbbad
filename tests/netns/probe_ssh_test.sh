#!/usr/bin/env bash
# Probes fake hosts over ssh (hosts.sh: network namespaces, each with its own hostname and sshd)
# through ddlrun's agents (ddlrun/plan/agents.h), with agent_probe_driver, and checks what
# comes back: each host's own hostname, in parallel; a stopped sshd and a silent address among
# them, reported together; unknown and changed host keys; accept-new; a key the hosts do not
# take; a missing probe, a failing and a babbling command; the job's disk cache; no ssh session
# left behind.
#
# Usage: probe_ssh_test.sh DRIVER DDLRUN  (exit 77, skipped, when not root or without ip netns
# or sshd)
set -uo pipefail
driver=$(realpath "$1")
probe=$(realpath "$2")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up 4 || exit $?

netns_session

# run NAME ARGS...: the driver with the hosts' ssh config; stdout in $out/NAME, stderr in
# $out/NAME.err, exit status in $out/NAME.rc, seconds taken in $out/NAME.s
run() {
  local name=$1 start end
  shift
  start=$(date +%s%N)
  "$driver" --config "$NETNS_SSH_CONFIG" --probe "$probe" "$@" >"$out/$name" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.2f\n", ns / 1e9 }' >"$out/$name.s"
  echo "  $name: $* -> exit $(cat "$out/$name.rc") in $(cat "$out/$name.s") s"
}


# has NAME LINE: the output has exactly this line. starts NAME TEXT: a line starts with it.
has() { grep -Fxq -- "$2" "$out/$1" || fail "$1: no line '$2'" "$out/$1"; }
starts() {
  awk -v p="$2" 'index($0, p) == 1 { found = 1 } END { exit !found }' "$out/$1" ||
    fail "$1: no line starting '$2'" "$out/$1"
}
status() { [[ $(cat "$out/$1.rc") == "$2" ]] || fail "$1: exit status $(cat "$out/$1.rc"), not $2" "$out/$1.err"; }
fingerprint() { ssh-keygen -lf "$(netns_hostkey "$1").pub" | cut -d' ' -f2; }

a1=$(netns_addr 1) a2=$(netns_addr 2) a4=$(netns_addr 4) ghost=$(netns_spare_addr 1)
echo "hosts: node1=$a1 node2=$a2 node3=$(netns_addr 3) node4=$a4 (sshd stopped) ghost=$ghost"

# A host whose sshd is stopped and an address nobody answers, beside three good hosts.
netns_stop_sshd 4
cat >>"$NETNS_SSH_CONFIG" <<EOF
Host ghost
  HostName $ghost
  User root
  IdentityFile $NETNS_KEY
  UserKnownHostsFile $NETNS_KNOWN_HOSTS
EOF
run all node1 node2 node3 node4 ghost --timeout-ms 1000
for k in 1 2 3; do has all "node$k: ok hostname=node$k cached=no"; done
has all "node4: error: connection refused ($a4:22)"
has all "ghost: error: timed out after 1 s connecting to $ghost:22"
status all 1
grep -Fxq "cannot probe 2 of 5 hosts:" "$out/all.err" || fail "all: no summary" "$out/all.err"
[[ $(hostname) != node1 ]] || fail "this host is called node1 too: the hostname check proves nothing"

# Three hosts whose probe takes a second each answer in about one second, not three.
run parallel node1 node2 node3 --command "sleep 1; $probe --probe-agent"
for k in 1 2 3; do has parallel "node$k: ok hostname=node$k cached=no"; done
awk '{ exit !($1 < 2.5) }' "$out/parallel.s" || fail "parallel: took $(cat "$out/parallel.s") s"

# A host key that known_hosts lacks, and one that changed.
grep -v "^$a2 " "$NETNS_KNOWN_HOSTS" >"$NETNS_DIR/kh_lacks2"
run unknown node1 node2 --known-hosts "$NETNS_DIR/kh_lacks2"
has unknown "node1: ok hostname=node1 cached=no"
has unknown "node2: error: unknown host key: $a2 is not in $NETNS_DIR/kh_lacks2 (it offers \
ssh-ed25519 key $(fingerprint 2)); if that is the host you expect, add its key with 'ssh-keyscan \
-H $a2 >> $NETNS_DIR/kh_lacks2' or by connecting once with 'ssh node2'"
status unknown 1

sed "s|^$a2 .*|$a2 $(cut -d' ' -f1-2 "$(netns_hostkey 3).pub")|" "$NETNS_KNOWN_HOSTS" \
  >"$NETNS_DIR/kh_changed"
for policy in strict accept-new; do
  extra=()
  [[ $policy == accept-new ]] && extra=(--accept-new)
  run "changed_$policy" node2 --known-hosts "$NETNS_DIR/kh_changed" "${extra[@]}"
  has "changed_$policy" "node2: error: WARNING: the host key of $a2 has CHANGED (now ssh-ed25519 \
key $(fingerprint 2)), refusing to connect: someone may be intercepting the connection \
(man-in-the-middle), or the host was reinstalled; if you know it was, remove the old key with \
'ssh-keygen -f $NETNS_DIR/kh_changed -R $a2' and connect once with 'ssh node2'"
done

# accept-new adds the key, and the strict check then passes.
: >"$NETNS_DIR/kh_new"
run accept_new node1 --known-hosts "$NETNS_DIR/kh_new" --accept-new
has accept_new "node1: ok hostname=node1 cached=no"
ssh-keygen -F "$a1" -f "$NETNS_DIR/kh_new" >/dev/null || fail "accept_new: $a1 not added" "$NETNS_DIR/kh_new"
run accept_new_then_strict node1 --known-hosts "$NETNS_DIR/kh_new"
has accept_new_then_strict "node1: ok hostname=node1 cached=no"

# A key the hosts do not take.
ssh-keygen -q -t ed25519 -N '' -f "$NETNS_DIR/other_key"
sed "s|IdentityFile .*|IdentityFile $NETNS_DIR/other_key|" "$NETNS_SSH_CONFIG" >"$NETNS_DIR/other_config"
run auth node1 --config "$NETNS_DIR/other_config"
has auth "node1: error: authentication failed for root@$a1:22: no key was accepted (tried: \
publickey with the identity files, no ssh-agent (SSH_AUTH_SOCK is not set); the server allows: \
publickey); ddlrun logs in with keys only, never a password: make 'ssh -o BatchMode=yes node1 true' \
work"

# The remote command: missing, failing, printing something else.
run missing node1 --probe /nonexistent/ddlrun-probe
starts missing "node1: error: ddlrun-probe is not installed at /nonexistent/ddlrun-probe on node1 \
(exit status 127, \""
grep -Fq "\"); install ddlrun there at the same path as here, or plan offline with --host-xml \
node1=FILE" "$out/missing" || fail "missing: no next step" "$out/missing"
run failing node1 --command 'echo first >&2; echo second >&2; exit 3'
has failing "node1: error: 'echo first >&2; echo second >&2; exit 3' exited with status 3; its \
stderr: | first | second"
run babbling node1 --command 'echo Welcome to node1'
starts babbling "node1: error: its output is not an inventory: inventory of node1"

# The job's disk cache: written 0600 in a 0700 directory, then read instead of probing.
run cache_write node1 node2 --job-id 777 --cache-dir "$NETNS_DIR/cache"
has cache_write "node1: ok hostname=node1 cached=no"
[[ $(stat -c %a "$NETNS_DIR/cache/777") == 700 ]] || fail "cache: directory not 0700"
[[ $(stat -c %a "$NETNS_DIR/cache/777/node2.yaml") == 600 ]] || fail "cache: file not 0600"
run cache_read node1 node2 --job-id 777 --cache-dir "$NETNS_DIR/cache" --probe /nonexistent/x
has cache_read "node1: ok hostname=node1 cached=yes"
has cache_read "node2: ok hostname=node2 cached=yes"

# No ssh session is left on the hosts: only each sshd remains in its namespace.
sleep 0.2
for k in 1 2 3; do
  left=$(ip netns pids "$(netns_ns "$k")" | grep -vx "$(netns_sshd_pid "$k")")
  [[ -z $left ]] || fail "node$k: processes left after the probes: $(echo "$left" | tr '\n' ' ')"
done

# Tear down, and check that nothing of ours is left.
pids=$(for k in 1 2 3; do netns_sshd_pid "$k"; done)
prefix=$NETNS_PREFIX
netns_down
if ip netns list | grep -q "^$prefix-"; then fail "namespaces left: $(ip netns list | grep "^$prefix-")"; fi
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "sshd $p still running"; fi
done

if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
