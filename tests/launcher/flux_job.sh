#!/bin/bash
# ddlrun's flux launcher against the flux test double (tests/launcher/bin/flux, first on
# $PATH): the dry run prints the flux command and the host file; a job's ranks find their rank
# in $PMIX_RANK (`ddlrun --rank-exec`) and get ddlrun's variables; a real libddl job
# (ddl_check, every collective checked by each rank) runs through it; a failing rank's status
# is ddlrun's.
#   flux_job.sh DDLRUN DDL_CHECK TESTS_DIR
set -uo pipefail

ddlrun=$(readlink -f "$1") check=$2 tests=$(cd "$3" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PATH=$tests/launcher/bin:$PATH FLUX_DOUBLE_LOG=$work/flux.log
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

out=$("$ddlrun" --dry-run --launcher flux -H localhost:2 prog 2>&1)
grep -q "^launcher:  flux (asked for with --launcher flux)$" <<<"$out" || fail "dry run: $out"
grep -q "^flux:      flux run -N 1 -n 2 '--taskmap=hostfile:<work-dir>/hosts' -o pmi=pmix -o cpu-affinity=off ddlrun --rank-exec -- prog$" <<<"$out" ||
  fail "dry run has no flux command: $out"
grep -q "^host file: <work-dir>/hosts$" <<<"$out" || fail "dry run has no host file: $out"

out=$("$ddlrun" --launcher flux -H localhost:2 --tag-output none \
  sh -c 'echo "rank $DDL_RANK of $DDL_SIZE pmix $PMIX_RANK"' 2>&1)
status=$?
want=$'rank 0 of 2 pmix 0\nrank 1 of 2 pmix 1'
[[ $status == 0 && $(sort <<<"$out") == "$want" ]] || fail "job ($status): $out"
grep -q '"flux", "run", "-N", "1", "-n", "2"' "$FLUX_DOUBLE_LOG" || fail "log: $(cat "$FLUX_DOUBLE_LOG")"

out=$("$ddlrun" --launcher flux -H localhost:3 --tag-output none "$check" 2>&1)
status=$?
((status == 0)) || fail "ddl_check through flux ($status): $out"

"$ddlrun" --launcher flux -H localhost:2 --tag-output none sh -c 'exit $((DDL_RANK + 3))' \
  >"$work/out" 2>&1
status=$?
((status == 4)) || fail "a failing rank: ddlrun exited with $status: $(cat "$work/out")"

((failed == 0)) && echo "flux_job: OK"
exit $failed
