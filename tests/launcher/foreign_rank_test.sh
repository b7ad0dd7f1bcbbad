#!/usr/bin/env bash
# launcher.foreign_rank: a rank that runs a libddl program as another user (uid nobody) is
# refused by ddlrun's PMIx server (it serves the job's user); deregistering that client at the
# end of the job left PMIx 4.2's thread stuck for good, and ddlrun waited for it without a
# deadline: it hung after "stopping ... process" (on --timeout or, here, rank 0's failure: it
# cannot read the topology file either) until SIGKILL. Now the job ends within seconds with
# rank 0's status (or 124), and nothing of the job is left.
# Needs root (setpriv --reuid); skips otherwise.
#   foreign_rank_test.sh DDLRUN HELLO_ALLREDUCE
set -uo pipefail
ddlrun=${1:?usage: foreign_rank_test.sh DDLRUN HELLO_ALLREDUCE}
hello=${2:?usage: foreign_rank_test.sh DDLRUN HELLO_ALLREDUCE}
fail() { echo "launcher.foreign_rank: $*" >&2; exit 1; }
((EUID == 0)) || { echo "launcher.foreign_rank: skipped: needs root for setpriv"; exit 77; }
command -v setpriv >/dev/null || { echo "launcher.foreign_rank: skipped: no setpriv"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$SECONDS
# shellcheck disable=SC2016
timeout -s KILL 60 "$ddlrun" -H localhost:2 --no-probe --timeout 10 sh -c \
  'echo $$ >"$0.$DDL_RANK"; if [ "$DDL_RANK" = 0 ]; then
     exec setpriv --reuid=65534 --regid=65534 --clear-groups "$1"; else exec "$1"; fi' \
  "$work/pid" "$hello" >"$work/out" 2>&1
rc=$?
secs=$((SECONDS - start))
out=$(cat "$work/out")
((rc != 137)) || fail "ddlrun hung (killed after 60 s): $out"
grep -q "ddl_init" <<<"$out" ||
  { echo "launcher.foreign_rank: skipped: rank 0 did not run as nobody: $out"; exit 77; }
((rc == 124 || rc == 1)) || fail "ddlrun exited $rc, not 124 or 1: $out"
# Rank 0 fails at once: the job ends in moments, or after the deadline (5 s) for PMIx to
# deregister the job when PMIx's thread is stuck all the same (seen under load).
((secs <= 15)) || fail "ddlrun took $secs s: $out"
for r in 0 1; do
  pid=$(cat "$work/pid.$r" 2>/dev/null) || fail "rank $r did not start: $out"
  kill -0 "$pid" 2>/dev/null && fail "rank $r ($pid) is still there"
done
echo "launcher.foreign_rank: ok ($secs s, status $rc)"
