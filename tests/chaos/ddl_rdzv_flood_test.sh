#!/usr/bin/env bash
# A stranger floods libddl's rendezvous (where the ranks meet: ddlrun's RendezvousServer)
# during a real job: one per-node ddlrun (--nnodes 1, whose ranks meet there, not
# through PMIx) on 4 ranks of the chaos loop (chaos_loop.c: libddl allreduces, every sum
# checked); rank 0 starts ddl_rdzv_flood.py against $DDL_RENDEZVOUS a second before the ranks
# call ddl_init, and it floods until the job ends. The job must end 0 with every sum right,
# ddlrun stay under 64 MiB (sampled every 0.1 s), its log show the cap on strangers and at
# most ten refusals and one line for the rest, and nothing be left running.
#
# Usage: ddl_rdzv_flood_test.sh DDLRUN CHAOS_LOOP
set -uo pipefail
ddlrun=$(realpath "$1")
loop=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$here/../lib/procs.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# Rank 0 starts the flood at the ranks' rendezvous, then every rank waits a second.
rank="if [ \"\$DDL_RANK\" = 0 ]; then
  echo \"\${DDL_RENDEZVOUS##*:}\" >$dir/port
  python3 $here/ddl_rdzv_flood.py \"\${DDL_RENDEZVOUS%:*}\" \"\${DDL_RENDEZVOUS##*:}\" 40 \\
    >$dir/flood 2>&1 </dev/null & echo \$! >$dir/flood.pid
fi
sleep 1
exec $loop"
DDL_JOB_TOKEN="flood-secret-$$" "$ddlrun" --node-rank 0 --nnodes 1 --rdzv "127.0.0.1:$port" \
  -a 4 -x "CHAOS_DIR=$dir" -x CHAOS_SECONDS=3 -x DDL_TIMEOUT=20 sh -c "$rank" \
  </dev/null >"$dir/out" 2>"$dir/err" &
job=$!
start=$SECONDS peak=0
while alive "$job"; do
  r=$(rss_kib "$job")
  ((r > peak)) && peak=$r
  if ((SECONDS - start > 60)); then
    fail "ddlrun still ran after 60 s"
    kill -KILL "$job"
    break
  fi
  sleep 0.1
done
wait "$job"
rc=$?
flooder=$(cat "$dir/flood.pid" 2>/dev/null)
if [[ -n $flooder ]] && alive "$flooder" ddl_rdzv_flood; then
  kill "$flooder"
  for _ in $(seq 30); do alive "$flooder" || break; sleep 0.1; done
fi
flood=$(tail -1 "$dir/flood")
echo "ddlrun exited $rc after $((SECONDS - start)) s, peak $((peak / 1024)) MiB; $flood"
((rc == 0)) || fail "ddlrun exited $rc" "$dir/err" "$dir/out"
((peak < 65536)) || fail "ddlrun reached $((peak / 1024)) MiB"
grep -q "wrong sum" "$dir/out" "$dir/err" && fail "a wrong sum" "$dir/out"
n=$(grep -o 'idle [0-9]*' <<<"$flood" | awk '{ print $2 }')
((${n:-0} > 32)) || fail "the flood made ${n:-no} idle connections, not more than 32" "$dir/flood"
grep -Fxq "ddlrun: warning: rendezvous: more than 32 connections have not said hello; closing \
the oldest (is something other than this job's ranks connecting to port $(cat "$dir/port")?)" \
  "$dir/err" || fail "no warning about the strangers' cap" "$dir/err"
refused=$(grep -c "rendezvous: refused a connection from" "$dir/err")
((refused >= 1 && refused <= 10)) || fail "$refused refusals reported, not 1 to 10" "$dir/err"
grep -Fxq "ddlrun: warning: rendezvous: more refused connections are not shown (is something \
other than this job's ranks connecting to port $(cat "$dir/port")?)" "$dir/err" ||
  fail "no line for the refusals not shown" "$dir/err"
awk 'length($0) > 400 { exit 1 }' "$dir/err" || fail "a line over 400 bytes in ddlrun's log" "$dir/err"
sleep 0.3
left=$(own_pids "$loop" "CHAOS_DIR=$dir" 2>/dev/null; own_pids ddl_rdzv_flood "CHAOS_DIR=$dir" 2>/dev/null)
[[ -z $left ]] || fail "left running: $left"
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
