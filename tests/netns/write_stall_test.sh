#!/usr/bin/env bash
# No write to a cut-off host stalls the other hosts: 3 namespace hosts (hosts.sh)
# through the ssh launcher, flat, so one talker thread of ddlrun's drives all three. Rank 0 on
# node1 never reads its stdin; ranks 1 and 2 (node2, node3) print a tick every 0.2 s. Once
# every rank runs, node1's link goes down (no RST), and then 200 MB of stdin for rank 0 flows
# into ddlrun: far more than the socket to node1 takes, so a blocking write would hold the
# talker (libssh waits up to the connect timeout, 10 s, on each write). Checked, on each line's
# arrival time in ddlrun's output (bash's EPOCHREALTIME):
#   - node2's and node3's ticks keep coming: no gap over 2.5 s from the cut until ddlrun names
#     node1 (main's blocking writes let none through at all);
#   - ddlrun names node1 lost (no heartbeat, or took no data, for the deadline of 4 s) and
#     exits 1 within the deadline + 4 s of the cut, losing no other host;
#   - nothing of the job is left on any host (node1's agent gives ddlrun up on its own);
#   - before the cut, every ssh connection of ddlrun is non-blocking (O_NONBLOCK in its fdinfo):
#     libssh makes its socket blocking once connected, and a blocking send() bigger than the room
#     left waits for a cut-off host's acknowledgement, holding the talker (and node2's and
#     node3's output with it) until TCP gives up; the stall itself shows in about 1 run in 4 on
#     2 busy cores, this check in every run.
# Usage: write_stall_test.sh DDLRUN   (77, skipped, without root, ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
netns_up 3 || exit $?
netns_session
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"  # alive
deadline=4
# Each line of stdin with its arrival time in microseconds in front.
stamp() {
  local line
  while IFS= read -r line; do printf '%s %s\n' "${EPOCHREALTIME/./}" "$line"; done
}
# blocking_ssh_fds PID: the descriptors of PID's established ssh connections that lack
# O_NONBLOCK (fdinfo's flags are octal; O_NONBLOCK is 04000).
blocking_ssh_fds() {
  local fd flags
  for fd in $(ss -Htnp state established '( dport = :22 )' | grep -o "pid=$1,fd=[0-9]*" |
    sed 's/.*fd=//'); do
    flags=$(awk '/^flags:/ {print $2}' "/proc/$1/fdinfo/$fd" 2>/dev/null) || continue
    [[ -n $flags ]] && (((8#$flags & 8#4000) == 0)) && echo "$fd"
  done
}
# gone K SECONDS: nothing of the job on host K within SECONDS.
gone() {
  local left
  left=$(netns_job_left "$1" "$2")
  [[ -z $left ]] && return 0
  fail "left on node$1 after $2 s: $(tr '\n' ';' <<<"$left")"
  # shellcheck disable=SC2046
  kill -KILL $(awk '{print $1}' <<<"$left") 2>/dev/null
}

# shellcheck disable=SC2016  # $RANK is the rank's
# Lines come tagged "[1,R]<stdout>:tick R I" (ddlrun tags them when more than one rank runs).
program='if [ "$RANK" = 0 ]; then echo "up 0"; exec sleep 60; fi
i=0; while :; do echo "tick $RANK $i"; i=$((i + 1)); sleep 0.2; done'
mkfifo "$out/stdin"
log="$out/log"
: >"$log"  # before the job starts writing to it, so that the wait below can grep it at once
"$ddlrun" --launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" \
  --heartbeat-timeout "$deadline" -H node1:1,node2:1,node3:1 sh -c "$program" \
  <"$out/stdin" > >(stamp >"$log") 2>&1 &
job_pid=$!
exec 7>"$out/stdin"
for ((i = 0; i < 300; i++)); do
  grep -q 'up 0$' "$log" && grep -q 'tick 1 2$' "$log" && grep -q 'tick 2 2$' "$log" && break
  alive "$job_pid" || break
  sleep 0.1
done
if ! grep -q 'tick 2 2$' "$log" || ! grep -q 'up 0$' "$log"; then
  fail "the job did not start" "$log"
else
  ssh_fds=$(ss -Htnp state established '( dport = :22 )' | grep -c "pid=$job_pid,")
  blocking=$(blocking_ssh_fds "$job_pid")
  echo "  ddlrun's ssh connections: $ssh_fds; blocking: $(echo ${blocking:-none})"
  ((ssh_fds == 3)) || fail "ddlrun has $ssh_fds ssh connections, not 3"
  [[ -z $blocking ]] || fail "ddlrun's ssh sockets $(echo $blocking) are blocking"
  ip -n "$(netns_ns 1)" link set "$(netns_veth 1)" down
  cut=$(now_us)
  echo "  node1 cut off; 200 MB of stdin for rank 0 follows"
  head -c 200000000 /dev/zero >&7 &
  feeder=$!
  while alive "$job_pid" && (($(now_us) - cut < (deadline + 4) * 1000000)); do sleep 0.1; done
  if alive "$job_pid"; then
    fail "ddlrun still runs $((deadline + 4)) s after the cut" "$log"
    kill -KILL "$job_pid"
  fi
  wait "$job_pid"
  rc=$?
  ended=$(now_us)
  kill "$feeder" 2>/dev/null
  wait "$feeder" 2>/dev/null
  sleep 0.2  # the last lines through stamp
  echo "  ddlrun: exit $rc, $(((ended - cut) / 1000)) ms after the cut"
  grep ' ddlrun' "$log" | cut -d' ' -f2- | sed 's/^/    /'
  [[ $rc == 1 ]] || fail "exit $rc, not 1" "$log"
  grep -Eq " ddlrun: node1: (no heartbeat|took no data) for $deadline s" "$log" ||
    fail "node1 is not named lost" "$log"
  grep -Eq " ddlrun: node[23]: (no heartbeat|took no data|lost)" "$log" &&
    fail "a healthy host was lost" "$log"
  # The widest gap between ticks of ranks 1 and 2 from the cut until ddlrun began to stop them
  # (its first line about node1).
  stop=$(awk '/ ddlrun: node1: / {print $1; exit}' "$log")
  for r in 1 2; do
    gap=$(awk -v c="$cut" -v s="${stop:-$ended}" -v r="$r" '
      $0 ~ (":tick " r " ") && $1 >= c && $1 <= s {
        if (last) { g = $1 - last; if (g > w) w = g } else { g = $1 - c; if (g > w) w = g }
        last = $1 }
      END { if (!last) print -1; else print int(w / 1000) }' "$log")
    echo "  rank $r: widest gap between its lines after the cut: $gap ms"
    ((gap >= 0 && gap < 2500)) || fail "rank $r's output stalled ($gap ms)" "$log"
  done
fi
exec 7>&-
for k in 2 3; do gone "$k" 3; done
gone 1 $((deadline + 4))  # its agent hears nothing from ddlrun either
ip -n "$(netns_ns 1)" link set "$(netns_veth 1)" up

passed_or_exit
