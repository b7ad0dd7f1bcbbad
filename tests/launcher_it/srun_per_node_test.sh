#!/usr/bin/env bash
# Per-node mode under a real Slurm (one node: munged, slurmctld and slurmd started by
# slurm_cluster.sh): `srun --ntasks-per-node=1 ddlrun ...` with no per-node flag at all. ddlrun,
# a step task of one task per node, takes its node rank and count from Slurm (SLURM_NODEID,
# SLURM_STEP_NUM_NODES), serves the rendezvous on the step's first node and starts its own
# ranks: a libddl job (ddl_loop, every allreduce's sum checked) and the rank variables; a failing
# rank's status comes back through srun. `salloc ddlrun` (not a step task) stays a whole job.
# Usage: srun_per_node_test.sh DDLRUN DDL_LOOP. Skips (77) when not root or Slurm cannot start.
set -euo pipefail
ddlrun=$1 loop=$2
here=$(dirname "$0")
source "$here/common.sh"
source "$here/slurm_cluster.sh"
cpus=$(nproc)

# 1. Two ranks of a libddl job through one ddlrun per node, no flag.
rc=0
timeout 120 salloc -Q -N 1 -c "$cpus" srun --ntasks-per-node=1 --cpus-per-task="$cpus" "$ddlrun" -v --nproc_per_node 2 \
  --tag-output rank "$loop" 2 >"$it_tmp/loop.out" 2>"$it_tmp/loop.err" || rc=$?
((rc == 0)) || fail "srun ddlrun exited $rc: $(cat "$it_tmp/loop.err" "$it_tmp/loop.out")"
grep -q "per-node mode (a Slurm step of one task per node): node 0 of 1, rendezvous at " \
  "$it_tmp/loop.err" || fail "-v does not name per-node mode: $(cat "$it_tmp/loop.err")"
for r in 0 1; do
  grep -q "^\[$r\] rank $r step [1-9]" "$it_tmp/loop.out" ||
    fail "rank $r did not loop: $(cat "$it_tmp/loop.out")"
done
pass "srun --ntasks-per-node=1 ddlrun: per-node mode from Slurm's variables, libddl job ok"

# 2. A failing rank: its status comes back through ddlrun and srun.
rc=0
timeout 120 salloc -Q -N 1 -c "$cpus" srun --ntasks-per-node=1 --cpus-per-task="$cpus" "$ddlrun" -a 2 -- \
  sh -c '[ "$RANK" = 1 ] && exit 5; sleep 30' >/dev/null 2>"$it_tmp/five.err" || rc=$?
((rc == 5)) || fail "exit status $rc, want 5: $(cat "$it_tmp/five.err")"
pass "a failing rank's status 5 came back through srun"

# 3. ddlrun in the allocation but not as a step task: a whole job, as before.
rc=0
timeout 120 salloc -Q -N 1 -n 1 "$ddlrun" -v --launcher local -n 1 true \
  >/dev/null 2>"$it_tmp/whole.err" || rc=$?
((rc == 0)) || fail "salloc ddlrun exited $rc: $(cat "$it_tmp/whole.err")"
if grep -q "per-node mode" "$it_tmp/whole.err"; then
  fail "salloc ddlrun (no step task) took per-node mode: $(cat "$it_tmp/whole.err")"
fi
pass "salloc ddlrun (not a step task) is a whole job"
