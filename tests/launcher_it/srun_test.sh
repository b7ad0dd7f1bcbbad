#!/usr/bin/env bash
# ddlrun --launcher srun inside an allocation of a real Slurm (slurmctld + slurmd + munged
# started on this host by slurm_cluster.sh): every rank's variables, arguments byte for byte,
# the PMIx plugin, a failing rank's exit status, binding by Slurm from the plan, and a restart
# (--max-restarts) that starts srun again.
# Usage: srun_test.sh DDLRUN. Skips (77) when not root or Slurm cannot start here.
set -euo pipefail
ddlrun=$1
here=$(dirname "$0")
source "$here/common.sh"
source "$here/slurm_cluster.sh"
export IT_EXPORT="from -x"

# 1. Four ranks on this host's CPUs (oversubscribed when it has fewer).
out=$it_tmp/ok
mkdir "$out"
timeout 120 salloc -Q -O -n 4 "$ddlrun" -v --launcher srun -n 4 -x IT_EXPORT -- \
  sh -c "$rank_script" "$out" "${awkward_args[@]}" >"$it_tmp/ok.stdout" 2>"$it_tmp/ok.stderr" ||
  fail "4-rank job failed ($?): $(cat "$it_tmp/ok.stderr")"
check_ranks "$out" 4
[[ -n $(value PMIX_RANK "$out/env.3") ]] || fail "rank 3 has no PMIX_RANK (not --mpi=pmix?)"
[[ $(value SLURM_PROCID "$out/env.2") == 2 ]] || fail "rank 2 is Slurm task $(value SLURM_PROCID "$out/env.2")"
grep -q "srun command: SLURM_HOSTFILE=.*/srun --mpi=pmix -N 1 -n 4 .*--export=ALL,DDL_TOPOLOGY_FILE,DDL_JOB_TOKEN" \
  "$it_tmp/ok.stderr" || fail "-v did not print the srun command: $(cat "$it_tmp/ok.stderr")"
pass "4 ranks under srun --mpi=pmix: variables, arguments byte for byte"

# 2. A failing rank: the step is killed and srun's status (the failed rank's, or 143 for the
#    ranks Slurm terminated) comes back promptly.
out=$it_tmp/fail
mkdir "$out"
start=$SECONDS
rc=0
FAIL_RANK=1 FAIL_RANK_CODE=7 timeout 120 salloc -Q -O -n 4 "$ddlrun" --launcher srun -n 4 \
  -x IT_EXPORT -- sh -c "$rank_script" "$out" >/dev/null 2>"$it_tmp/fail.stderr" || rc=$?
((rc == 7 || rc == 143)) || fail "exit status $rc, want 7 or 143: $(cat "$it_tmp/fail.stderr")"
((SECONDS - start < 60)) || fail "the other ranks were not stopped ($((SECONDS - start)) s)"
pass "a failing rank ended the step with status $rc in $((SECONDS - start)) s"

# 3. The only failing rank, after the others ended: exactly its status.
rc=0
timeout 120 salloc -Q -O -n 2 "$ddlrun" --launcher srun -n 2 -- \
  sh -c '[ "$RANK" = 1 ] && { sleep 1; exit 5; }; exit 0' >/dev/null 2>"$it_tmp/five.stderr" || rc=$?
((rc == 5)) || fail "exit status $rc, want 5: $(cat "$it_tmp/five.stderr")"
pass "rank 1's exit status 5 came back"

# 4. Bound ranks: Slurm binds each to its planned CPU (map_cpu).
if (($(nproc) >= 2)); then
  out=$it_tmp/bound
  mkdir "$out"
  timeout 120 salloc -Q -n 2 "$ddlrun" -v --launcher srun -n 2 -- sh -c \
    'echo "$DDL_CPUS $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)" > "$0/cpus.$RANK"' \
    "$out" 2>"$it_tmp/bound.stderr" || fail "bound job failed: $(cat "$it_tmp/bound.stderr")"
  grep -q -- "--cpu-bind=map_cpu:" "$it_tmp/bound.stderr" || fail "no map_cpu: $(cat "$it_tmp/bound.stderr")"
  for r in 0 1; do
    read -r planned actual <"$out/cpus.$r"
    [[ -n $planned && $planned == "$actual" ]] ||
      fail "rank $r: planned CPUs '$planned', bound to '$actual'"
  done
  pass "Slurm binds the ranks to their planned CPUs"
fi

# 5. --max-restarts through srun: rank 1 fails on the first attempt only; ddlrun starts srun
#    again and the second attempt succeeds.
rc=0
timeout 120 salloc -Q -O -n 2 "$ddlrun" --launcher srun -n 2 --max-restarts 1 -- \
  sh -c '[ "$RANK" = 1 ] && [ "$DDL_RESTART_COUNT" = 0 ] && { sleep 1; exit 5; }; exit 0' \
  >/dev/null 2>"$it_tmp/restart.stderr" || rc=$?
((rc == 0)) || fail "restarted job: exit status $rc, want 0: $(cat "$it_tmp/restart.stderr")"
grep -q "^ddlrun: restart 1 of 1 after .*; 2 ranks on 1 host$" "$it_tmp/restart.stderr" ||
  fail "no restart note: $(cat "$it_tmp/restart.stderr")"
pass "srun started again after a failure (--max-restarts 1)"
