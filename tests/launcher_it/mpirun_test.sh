#!/usr/bin/env bash
# ddlrun --launcher mpirun with the real Open MPI mpirun on this host: every rank's variables,
# arguments byte for byte, the token never on a command line, a failing rank's exit status,
# and the command printed at -v. Usage: mpirun_test.sh DDLRUN. Skips (77) without mpirun.
set -euo pipefail
ddlrun=$1
here=$(dirname "$0")
source "$here/common.sh"

command -v mpirun >/dev/null || skip "mpirun is not installed (apt-get install openmpi-bin)"
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export IT_EXPORT="from -x"

# 1. Four ranks: variables, arguments, and -v's mpirun command.
out=$it_tmp/ok
mkdir "$out"
"$ddlrun" -v --launcher mpirun -H localhost:4 -x IT_EXPORT -- sh -c "$rank_script" "$out" \
  "${awkward_args[@]}" >"$it_tmp/ok.stdout" 2>"$it_tmp/ok.stderr" ||
  fail "4-rank job failed ($?): $(cat "$it_tmp/ok.stderr")"
check_ranks "$out" 4
[[ $(value OMPI_COMM_WORLD_RANK "$out/env.3") == 3 ]] || fail "rank 3 did not run under mpirun"
grep -q "mpirun command: .*mpirun .*--rankfile .* -x DDL_JOB_TOKEN .*--rank-exec -- sh -c" \
  "$it_tmp/ok.stderr" || fail "-v did not print the mpirun command: $(cat "$it_tmp/ok.stderr")"
token=$(value DDL_JOB_TOKEN "$out/env.0")
if grep -q -- "$token" "$it_tmp/ok.stderr" "$it_tmp/ok.stdout"; then
  fail "the job token was printed"
fi
pass "4 ranks under mpirun: variables, arguments byte for byte, -v command"

# 2. The token is on no process's command line while the job runs.
out=$it_tmp/cmdline
mkdir "$out"
"$ddlrun" --launcher mpirun -H localhost:2 -- sh -c \
  'for f in /proc/[0-9]*/cmdline; do tr "\0" " " < "$f" 2>/dev/null; echo; done > "$0/cmdlines.$RANK"
   printf %s "$DDL_JOB_TOKEN" > "$0/token.$RANK"' "$out" 2>"$it_tmp/cmdline.stderr" ||
  fail "cmdline job failed: $(cat "$it_tmp/cmdline.stderr")"
grep -q -- "--rank-exec" "$out/cmdlines.0" || fail "could not see the processes' command lines"
if grep -q -F -- "$(cat "$out/token.0")" "$out/cmdlines.0" "$out/cmdlines.1"; then
  fail "the job token is on a command line"
fi
pass "the token is on no command line"

# 3. A failing rank's exit status is the job's, and the other ranks are stopped.
out=$it_tmp/fail
mkdir "$out"
start=$SECONDS
rc=0
FAIL_RANK=2 FAIL_RANK_CODE=7 "$ddlrun" --launcher mpirun -H localhost:4 -x IT_EXPORT -- \
  sh -c "$rank_script" "$out" "${awkward_args[@]}" >/dev/null 2>"$it_tmp/fail.stderr" || rc=$?
((rc == 7)) || fail "exit status $rc, want 7: $(cat "$it_tmp/fail.stderr")"
((SECONDS - start < 45)) || fail "the other ranks were not stopped ($((SECONDS - start)) s)"
pass "rank 2's exit status 7 came back in $((SECONDS - start)) s"

# 4. Bound ranks: two ranks get one PU each when the host has two.
if (($(nproc) >= 2)); then
  out=$it_tmp/bound
  mkdir "$out"
  "$ddlrun" --launcher mpirun -H localhost:2 -- sh -c \
    'echo "$DDL_CPUS $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)" > "$0/cpus.$RANK"' \
    "$out" 2>"$it_tmp/bound.stderr" || fail "bound job failed: $(cat "$it_tmp/bound.stderr")"
  for r in 0 1; do
    read -r planned actual <"$out/cpus.$r"
    [[ -n $planned && $planned == "$actual" ]] ||
      fail "rank $r: planned CPUs '$planned', bound to '$actual'"
  done
  pass "bound ranks run on their planned CPUs"
fi
