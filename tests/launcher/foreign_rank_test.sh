#!/usr/bin/env bash
# launcher.foreign_rank: a rank that runs a libddl program as another user (uid nobody) is
# refused by ddlrun's PMIx server (it serves the job's user); deregistering that client at the
# end of the job left PMIx 4.2's thread stuck for good, and ddlrun waited for it without a
# deadline: it hung after "stopping ... process" (on --timeout, or on rank 0's failure when it
# cannot read the topology file) until SIGKILL. Now the job ends within seconds with
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

# A copy of the program and its libddl that uid nobody can reach wherever the build tree is (a
# clone under /root is not); the ranks find that libddl through LD_LIBRARY_PATH (theirs only:
# ddlrun keeps its own).
chmod 755 "$work"
lib=$(ldd "$hello" | awk '$1 ~ /^libddl\.so/ { print $3 }')
[ -n "$lib" ] || fail "$hello does not link libddl: $(ldd "$hello")"
cp "$hello" "$work/hello" && cp "$lib" "$work/" || fail "cannot copy $hello and $lib"
hello=$work/hello

# run NAME WANT_RC PREFIX...: the job, with rank 0 run through PREFIX... then setpriv; checks
# that ddlrun ended with WANT_RC within seconds and left nothing.
run() {
  local name=$1 want=$2 rc secs out pid r
  shift 2
  rm -f "$work"/pid.*
  start=$SECONDS
  # shellcheck disable=SC2016
  timeout -s KILL 60 "$ddlrun" -H localhost:2 --no-probe --timeout 3 sh -c \
    'echo $$ >"$0.$DDL_RANK"; export LD_LIBRARY_PATH="${0%/*}"; h=$1; shift
     if [ "$DDL_RANK" = 0 ]; then
       exec "$@" setpriv --reuid=65534 --regid=65534 --clear-groups "$h"; else exec "$h"; fi' \
    "$work/pid" "$hello" "$@" >"$work/out" 2>&1
  rc=$?
  secs=$((SECONDS - start))
  out=$(cat "$work/out")
  ((rc != 137)) || fail "$name: ddlrun hung (killed after 60 s): $out"
  if [ -n "${skip_unless:-}" ] && ! grep -q "$skip_unless" <<<"$out"; then
    echo "launcher.foreign_rank: skipped: rank 0 did not run as nobody: $out"
    exit 77
  fi
  ((rc == want)) || fail "$name: ddlrun exited $rc, not $want: $out"
  # The job ends in moments, or after the deadline (5 s) for PMIx to deregister the job when
  # PMIx's thread is stuck all the same (seen under load).
  ((secs <= 15)) || fail "$name: ddlrun took $secs s: $out"
  for r in 0 1; do
    pid=$(cat "$work/pid.$r" 2>/dev/null) || fail "$name: rank $r did not start: $out"
    kill -0 "$pid" 2>/dev/null && fail "$name: rank $r ($pid) is still there"
  done
  echo "launcher.foreign_rank: $name: ok ($secs s, status $rc)"
}

# Rank 0 cannot read the topology file (mode 0600) as nobody: it fails, the job stops.
skip_unless="ddl_init: cannot read topology file" run "a failed rank" 1 env
# Without the topology file rank 0 waits on PMIx, which refused it: the job times out (the
# review's case: "the job timed out after 3 s (--timeout); stopping 2 processes").
run "a timeout" 124 env -u DDL_TOPOLOGY_FILE
grep -q "stopping 2 processes" "$work/out" || fail "a timeout: $(cat "$work/out")"
