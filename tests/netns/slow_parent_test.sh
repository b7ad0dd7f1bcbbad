#!/usr/bin/env bash
# An interior agent whose own link is slow, on 3 namespace hosts (hosts.sh), one rank a host,
# heartbeat deadline D s (default 3); node3's rank prints KB kB (default 1200, `seq`), read at
# once by ddlrun's reader:
#   tree  --tree-width 1 (ddlrun -> node1 -> node2 -> node3): what node1 sends is shaped to
#         RATE (default 512kbit; tc tbf on its interface), so node3's output crawls up through
#         node1's relay for many times D, while the relay's heartbeats down to node2 share that
#         link and must not wait behind the output it writes up;
#   flat  the same bytes over the same slow link, node3's own (shaped likewise), no tree.
# Both must end 0 with every byte in order (sha256), no host lost, nothing of the job left on
# any host. A relay whose upward writes starved its subtree would lose node2 or node3 in the
# tree ("no heartbeat from ddlrun") where the flat job loses nothing. It does not: the relay
# writes up synchronously, but sshd takes each write into the channel's buffers at once (what is
# in flight is bounded by the output windows ddlrun grants, M), so the relay's turns, and the
# heartbeats down, go on while the bytes crawl. At 256kbit and D = 3 both
# lose the slow host itself now and then, flat as often as in the tree (ddlrun hears nothing of
# it for 3 s: ssh's packets of up to 32 KiB arrive whole), below 160kbit always: that is the
# link's limit, not the tree's. tbf drops what overflows its 1 s queue, and TCP's retransmission
# timeouts after a drop can leave a shaped link silent for over 3 s even at 512kbit (the tree
# lost node1 so once in a CI run: nothing at all came from it for 3 s): CTest gives D = 5.
# Prints how long each took.
#
# Usage: slow_parent_test.sh DDLRUN [RATE [KB [D]]]   (77, skipped, without root, ip netns, tc or
# sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
rate=${2:-512kbit}
kb=${3:-1200}
deadline=${4:-3}
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
command -v tc >/dev/null || { echo "slow_parent: no tc (install iproute2): skipped"; exit 77; }
netns_up 3 || exit $?
netns_session
out=$NETNS_DIR/out
mkdir -p "$out"

# shape K RATE|off: what host K sends goes through a token bucket (what comes to it does not).
shape() {
  if [[ $2 == off ]]; then
    ip netns exec "$(netns_ns "$1")" tc qdisc del dev "$(netns_veth "$1")" root 2>/dev/null
    return 0
  fi
  ip netns exec "$(netns_ns "$1")" tc qdisc replace dev "$(netns_veth "$1")" root tbf \
    rate "$2" burst 16kb latency 1s
}

count=$(seq 1 10000000 | head -c $((kb * 1000)) | wc -l)
want=$(seq 1 "$count" | sha256sum | cut -d' ' -f1)
bytes=$(seq 1 "$count" | wc -c)

# crawl NAME WIDTH HOST: node3's rank prints, host HOST's link is slow.
crawl() {
  local name=$1 t0 rc ms got i left
  shape "$3" "$rate" || { echo "slow_parent: cannot shape node$3's link here: skipped"; exit 77; }
  echo "== $name: rank 2 (node3) prints $bytes bytes, node$3 sends at $rate"
  t0=$(now_ms)
  # shellcheck disable=SC2016  # $RANK is the rank's
  timeout 180 "$ddlrun" --launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" \
    --heartbeat-timeout "$deadline" --tree-width "$2" --tag-output none -H "$NETNS_LIST" \
    sh -c 'if [ "$RANK" = 2 ]; then seq 1 '"$count"'; fi' >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  ms=$(($(now_ms) - t0))
  shape "$3" off
  got=$(sha256sum <"$out/$name.out" | cut -d' ' -f1)
  echo "  $name: exit $rc, $(wc -c <"$out/$name.out") of $bytes bytes, $ms ms"
  [[ $rc == 0 ]] || fail "$name: exit $rc, not 0" "$out/$name.err"
  [[ $got == "$want" ]] || fail "$name: the output is not every byte in order" "$out/$name.err"
  grep -Eq 'heartbeat|lost|took no data|closed' "$out/$name.err" &&
    fail "$name: a host was lost behind node$3's slow link" "$out/$name.err"
  ((ms > 2 * deadline * 1000)) ||
    fail "$name: the output took $ms ms, not over twice the heartbeat deadline: nothing shown"
  for ((i = 0; i < 50; i++)); do
    left=$(netns_job_procs_of "${NETNS_NUMBERS[@]}")
    [[ -z $left ]] && break
    sleep 0.1
  done
  [[ -z $left ]] || fail "$name: left behind: $(tr '\n' ';' <<<"$left")"
}

crawl tree 1 1
crawl flat 0 3
passed_or_exit
