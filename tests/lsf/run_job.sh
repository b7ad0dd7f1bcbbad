#!/bin/bash
# Real libddl jobs through ddlrun's jsrun launcher: inside a simulated LSF job of 2 compute
# nodes (tests/lsf/lsf_env.sh), ddlrun finds the hosts in LSF's variables, writes the ERF (or
# the resource-set flags) and runs the jsrun test double (tests/lsf/bin/jsrun), which starts
# the ranks on this machine with JSM's variables; the ranks find their rank in
# $JSM_NAMESPACE_RANK (`ddlrun --rank-exec`) and run ddl_check, every collective checked by
# every rank. Both hosts have this machine's hardware (lstopo's recording, through --host-xml).
# Also: each rank runs on its planned CPUs with the variables ddlrun gives it, and a failing
# rank's status is ddlrun's.
#   run_job.sh DDLRUN DDL_CHECK TESTS_DIR
set -uo pipefail

ddlrun=$(readlink -f "$1") check=$2 tests=$(cd "$3" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LSF_TEST_DIR=$work
. "$tests/lsf/lsf_env.sh"
lsf_job 2 c01n 2
export PATH=$tests/lsf/bin:$PATH
unset JSRUN_DOUBLE_CPUS JSRUN_DOUBLE_SMT JSRUN_DOUBLE_GPUS JSRUN_DOUBLE_CHECK_ONLY
export JSRUN_DOUBLE_LOG=$work/jsrun.log
if ! lstopo-no-graphics --of xml "$work/host.xml" 2>"$work/err"; then
  echo "run_job: lstopo cannot record this machine:" >&2
  cat "$work/err" >&2
  exit 1
fi
failed=0

for mode in erf rs; do
  : >"$JSRUN_DOUBLE_LOG"
  out=$("$ddlrun" --tag-output none --host-xml "*=$work/host.xml" --jsrun-mode "$mode" \
    --topology-file "$work/plan.topology" "$check" 2>&1)
  status=$?
  n=$(grep -c '^  - {rank: ' "$work/plan.topology")
  if ((status != 0 || n < 2)); then
    echo "FAIL $mode: ddlrun exited with $status ($n ranks planned):" >&2
    echo "$out" >&2
    failed=1
    continue
  fi
  for ((r = 0; r < n; r++)); do
    if ! grep -qx "rank $r of $n ok" <<<"$out"; then
      echo "FAIL $mode: rank $r of $n did not report ok:" >&2
      echo "$out" >&2
      failed=1
    fi
  done
  if [[ $(wc -l <"$JSRUN_DOUBLE_LOG") != 1 ]] || ! grep -q "\"--rank-exec\"" "$JSRUN_DOUBLE_LOG"; then
    echo "FAIL $mode: ddlrun did not run the job through jsrun once:" >&2
    cat "$JSRUN_DOUBLE_LOG" >&2
    failed=1
  fi
  echo "$mode: $n ranks of ddl_check ok through jsrun ($(head -c 200 "$JSRUN_DOUBLE_LOG"))"
done

# Each rank: its rank from JSM, its host, and the CPUs it runs on, against the plan.
out=$("$ddlrun" --tag-output none --host-xml "*=$work/host.xml" \
  --topology-file "$work/plan.topology" sh -c \
  'echo "rank=$DDL_RANK jsm=$JSM_NAMESPACE_RANK/$JSM_NAMESPACE_SIZE local=$DDL_LOCAL_RANK lsf=$LSB_JOBID cpus=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' 2>&1)
status=$?
want=$(/usr/bin/python3 - "$work/plan.topology" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r'\s+- \{rank: (\d+), local_rank: (\d+), .*cpus: "([^"]*)"', line)
    if m:
        r, local, cpus = m.groups()
        print(f"rank={r} jsm={r}/N local={local} lsf=424242 cpus={cpus}")
PY
)
n=$(grep -c . <<<"$want")
want=${want//\/N /\/$n }
if ((status != 0)) || [[ $(sort <<<"$out") != $(sort <<<"$want") ]]; then
  echo "FAIL ranks' placement (status $status): got" >&2
  echo "$out" >&2
  echo "want (from the plan):" >&2
  echo "$want" >&2
  failed=1
else
  echo "every rank ran on its planned CPUs with its JSM rank"
fi

# Without --host-xml, ddlrun probes the compute hosts through jsrun (no ssh): the double runs
# each task as on its own node (JSRUN_DOUBLE_NODES=1, root only: the host's name, the host's
# own /tmp), and the job runs on what the probes found, every rank reading the topology from
# its environment since ddlrun's copy is not on its node, on 2 nodes and on 1. Without the
# hosts' names the probes cannot be told apart: an error.
if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null; then
  : >"$JSRUN_DOUBLE_LOG"
  out=$(JSRUN_DOUBLE_NODES=1 "$ddlrun" --tag-output none -v "$check" 2>&1)
  status=$?
  if ((status != 0)) || [[ $(grep -c ' of 4 ok$' <<<"$out") != 4 ]] ||
    ! grep -q '"--probe"' "$JSRUN_DOUBLE_LOG"; then
    echo "FAIL probing through jsrun (status $status):" >&2
    echo "$out" >&2
    cat "$JSRUN_DOUBLE_LOG" >&2
    failed=1
  else
    echo "probed through jsrun, then 4 ranks of ddl_check ok"
  fi
  out=$(
    export LSB_JOBID=424243 LSF_TEST_DIR=$work/one
    mkdir -p "$LSF_TEST_DIR"
    lsf_job 1 c02n 2
    JSRUN_DOUBLE_NODES=1 "$ddlrun" --tag-output none "$check" 2>&1
  )
  status=$?
  if ((status != 0)) || [[ $(grep -c ' of 2 ok$' <<<"$out") != 2 ]]; then
    echo "FAIL one compute node, apart from ddlrun's (status $status):" >&2
    echo "$out" >&2
    failed=1
  else
    echo "one compute node apart from ddlrun's node: 2 ranks of ddl_check ok"
  fi
  # A later ddlrun of the same job reads the probe cache: no jsrun step.
  : >"$JSRUN_DOUBLE_LOG"
  out=$("$ddlrun" --dry-run true 2>&1)
  if [[ $? != 0 || $(grep -c '  jsrun (cached)  ' <<<"$out") != 2 || -s $JSRUN_DOUBLE_LOG ]]; then
    echo "FAIL the second ddlrun of the job did not use the probe cache:" >&2
    echo "$out" >&2
    cat "$JSRUN_DOUBLE_LOG" >&2
    failed=1
  fi
  export XDG_CACHE_HOME=$work/cache2  # a fresh cache for what follows
  out=$("$ddlrun" --dry-run true 2>&1)
  status=$?
  if ((status != 1)) || [[ $out != *"c01n02: no probe task of 'jsrun -n 2 -r 1 -a 1 -c ALL_CPUS -g ALL_GPUS -b none --stdio_mode prepended -E PATH "*"$ddlrun --probe' reported this host (tasks reported: $(hostname -s))"*"fix them (jsrun must run 'ddlrun --probe' on each; try 'jsrun -n 1 hostname'), leave them out of the host list"* ]]; then
    echo "FAIL probes that all report this machine's name (status $status):" >&2
    echo "$out" >&2
    failed=1
  fi
else
  echo "skipped probing through jsrun: needs root and unshare"
fi

# A failing rank makes ddlrun fail with its status.
"$ddlrun" --tag-output none --host-xml "*=$work/host.xml" sh -c \
  '[ "$DDL_RANK" = 1 ] && exit 5; sleep 20' >"$work/out" 2>&1
status=$?
if ((status != 5)); then
  echo "FAIL a rank exiting with 5: ddlrun exited with $status:" >&2
  cat "$work/out" >&2
  failed=1
fi

# Outside an LSF job, --launcher jsrun says what to do.
out=$(env -u LSB_JOBID "$ddlrun" --launcher jsrun --host-xml "*=$work/host.xml" true 2>&1)
status=$?
if ((status == 0)) || [[ $out != *"jsrun launcher: not inside an LSF job (\$LSB_JOBID is not set); run ddlrun inside a bsub script or \`bsub -Is\`"* ]]; then
  echo "FAIL --launcher jsrun outside LSF (status $status): $out" >&2
  failed=1
fi
exit $failed
