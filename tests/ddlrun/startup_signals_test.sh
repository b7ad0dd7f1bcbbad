#!/usr/bin/env bash
# ddlrun's first seconds, on this host alone: a "host" whose sshd
# accepts the connection and never answers (a frozen sshd: a listener on loopback that reads
# nothing), probed over ssh with a 30 s connect timeout:
#   sigint   SIGINT 0.2, 0.5 and 1 s after ddlrun starts: exit 130 within 3 s, with the line
#            "ddlrun: got SIGINT while starting the job; leaving now", nothing left in its TMPDIR;
#   sigterm  the same with SIGTERM: 143;
#   timeout  --timeout 2: exit 124 within 5 s (not after the connect timeout), the note saying
#            that it was probing; --timeout 7: after 5 s a line names the hosts not answered;
#   plan     --timeout 2 with a 30 s plan (the test hook DDLRUN_TEST_PLAN_DELAY_MS): 124 in 2 s;
# and --tree-width 1 over 40 hosts is refused up front (exit 2, its text), before any login.
# Usage: startup_signals_test.sh DDLRUN
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
tmp=$(mktemp -d)
listener=""
cleanup() {
  [[ -n $listener ]] && kill "$listener" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

python3 - "$tmp/port" <<'EOF' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
while True:
    held.append(s.accept()[0])
EOF
listener=$!
for ((i = 0; i < 100; i++)); do
  [[ -s $tmp/port ]] && break
  sleep 0.05
done
port=$(cat "$tmp/port")
printf 'Host frozen\n  HostName 127.0.0.1\n  Port %s\n  User root\n' "$port" >"$tmp/ssh_config"
export HOME=$tmp/home XDG_CACHE_HOME=$tmp/cache TMPDIR=$tmp/t
mkdir -p "$HOME" "$TMPDIR"
job=(--launcher ssh --ssh-config "$tmp/ssh_config" --connect-timeout 30 -H frozen,frozen2 true)
printf 'Host frozen2\n  HostName 127.0.0.1\n  Port %s\n  User root\n' "$port" >>"$tmp/ssh_config"

# ends PID SECONDS: waits up to SECONDS for PID, killing it after; prints its status.
ends() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$1" 2>/dev/null
  wait "$1"
}

for sig in INT TERM; do
  for delay in 0.2 0.5 1; do
    name="SIG$sig at $delay s"
    # (a background job of a script starts with SIGINT ignored: as from a terminal, not so)
    env --default-signal=INT "$ddlrun" "${job[@]}" 2>"$tmp/err" &
    pid=$!
    sleep "$delay"
    t0=$(now_ms)
    kill -"$sig" "$pid"
    ends "$pid" 3
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    echo "  $name: exit $rc after $(($(now_ms) - t0)) ms"
    [[ $rc == "$want" ]] || fail "$name: exit $rc, not $want" "$tmp/err"
    grep -qx "ddlrun: got SIG$sig while starting the job; leaving now" "$tmp/err" ||
      fail "$name: no note" "$tmp/err"
    [[ -z $(ls -A "$TMPDIR") ]] || fail "$name: left in TMPDIR: $(ls -A "$TMPDIR")"
  done
done

t0=$(now_ms)
"$ddlrun" --timeout 2 "${job[@]}" 2>"$tmp/err" &
pid=$!
ends "$pid" 8
rc=$?
ms=$(($(now_ms) - t0))
echo "  --timeout 2: exit $rc after $ms ms"
[[ $rc == 124 ]] || fail "--timeout: exit $rc, not 124" "$tmp/err"
((ms < 5000)) || fail "--timeout: took $ms ms" "$tmp/err"
grep -qx "ddlrun: the job timed out after 2 s (--timeout) while probing 2 hosts over ssh (--no-probe or --host-xml skip it), before it started; leaving now" "$tmp/err" ||
  fail "--timeout: not the note" "$tmp/err"

t0=$(now_ms)
"$ddlrun" --timeout 7 "${job[@]}" 2>"$tmp/err" &
pid=$!
ends "$pid" 12
rc=$?
ms=$(($(now_ms) - t0))
echo "  --timeout 7: exit $rc after $ms ms"
[[ $rc == 124 ]] || fail "--timeout 7: exit $rc, not 124" "$tmp/err"
((ms < 10000)) || fail "--timeout 7: took $ms ms" "$tmp/err"
grep -qx "ddlrun: still probing after 5 s: 2 of 2 hosts have not answered: frozen, frozen2" "$tmp/err" ||
  fail "--timeout 7: no progress line naming the hosts waited for" "$tmp/err"

t0=$(now_ms)
DDLRUN_TEST_PLAN_DELAY_MS=30000 "$ddlrun" --timeout 2 -H localhost:1 --no-probe true 2>"$tmp/err" &
pid=$!
ends "$pid" 8
rc=$?
ms=$(($(now_ms) - t0))
echo "  --timeout 2, a 30 s plan: exit $rc after $ms ms"
[[ $rc == 124 ]] || fail "slow plan: exit $rc, not 124" "$tmp/err"
((ms < 5000)) || fail "slow plan: took $ms ms" "$tmp/err"
grep -qx "ddlrun: the job timed out after 2 s (--timeout) while planning the job, before it started; leaving now" "$tmp/err" ||
  fail "slow plan: not the note" "$tmp/err"

hosts=$(for ((k = 1; k <= 40; k++)); do printf 'frozen%s,' "$k"; done)
"$ddlrun" --launcher ssh --no-probe --ssh-config "$tmp/ssh_config" --tree-width 1 \
  -H "${hosts%,}" true 2>"$tmp/err"
rc=$?
echo "  --tree-width 1 over 40 hosts: exit $rc"
[[ $rc == 2 ]] || fail "--tree-width 1: exit $rc, not 2" "$tmp/err"
grep -qx "ddlrun: error: 40 hosts at --tree-width 1 make a launch tree 40 levels deep, and it may be at most 32: give --tree-width 2 or more" "$tmp/err" ||
  fail "--tree-width 1: not the error" "$tmp/err"

passed_or_exit
