#!/bin/bash
# Real launches (not dry runs) of Summit plans through ddlrun's jsrun launcher: inside
# simulated LSF jobs of 2 and 18 Summit nodes (tests/lsf/lsf_env.sh), ddlrun writes its ERF and
# runs the jsrun test double (tests/lsf/bin/jsrun) with Summit's hardware, which checks the ERF
# or the resource-set flags strictly and, in its check-only mode, prints where each rank would
# run instead of running it (this machine is no Summit node). Each rank's host, hardware threads
# (jsrun's logical numbering mapped back to OS numbers) and GPU must be the plan's (the
# topology file), and the variables forwarded with -E must include the runtime's and LSF's.
#   check_launch.sh DDLRUN TESTS_DIR
set -uo pipefail

ddlrun=$1 tests=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LSF_TEST_DIR=$work
. "$tests/lsf/lsf_env.sh"
lsf_summit_hardware
export PATH=$tests/lsf/bin:$PATH PYTHONPATH=/ccs/proj/ddl/python LD_LIBRARY_PATH=/opt/ibm/lib
export JSRUN_DOUBLE_CHECK_ONLY=1
failed=0

# The placement the plan gives, one line per rank as the double prints it.
planned() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import re, sys
path, mode = sys.argv[1], sys.argv[2]
hosts, ranks = {}, []
for line in open(path):
    m = re.match(r'\s+- \{index: (\d+), name: "([^"]+)"', line)
    if m:
        hosts[m.group(1)] = m.group(2)
    m = re.match(r'\s+- \{rank: (\d+), local_rank: \d+, host: (\d+), gpu: (-?\d+), .*cpus: "([^"]*)"', line)
    if m:
        ranks.append(m.groups())
top = {}  # each host's highest GPU: every rank of the host sees GPUs 0 to it
for r, h, gpu, cpus in ranks:
    top[h] = max(top.get(h, -1), int(gpu))
for r, h, gpu, cpus in ranks:
    if mode == "rs":  # each set is its whole host
        cpus = "0-83,88-171"
    gpus = "-" if top[h] < 0 else "0" if top[h] == 0 else f"0-{top[h]}"
    print(f"rank {r}: host {hosts[h]} cpus {cpus or '-'} gpus {gpus}")
PY
}

for nodes in 2 18; do
  for mode in erf rs; do
    (
      lsf_job "$nodes"
      out=$("$ddlrun" --host-xml "*=$tests/topologies/summit-ac922.xml" --jsrun-mode "$mode" \
        --smpiargs=-gpu --topology-file "$work/plan.topology" python train.py 2>&1)
      status=$?
      if ((status != 0)); then
        echo "FAIL $nodes nodes, $mode: ddlrun exited with $status:" >&2
        echo "$out" >&2
        exit 1
      fi
      want=$(planned "$work/plan.topology" "$mode")
      got=$(grep '^rank ' <<<"$out")
      if [[ $got != "$want" || $(grep -c . <<<"$got") != $((nodes * 6)) ]]; then
        echo "FAIL $nodes nodes, $mode: jsrun would place the ranks elsewhere than planned:" >&2
        diff <(echo "$want") <(echo "$got") | head -20 >&2
        exit 1
      fi
      env_line=$(grep '^env: ' <<<"$out")
      for name in DDL_TOPOLOGY_FILE DDL_JOB_TOKEN DDL_RENDEZVOUS DDL_OPTIONS PATH PYTHONPATH \
        LD_LIBRARY_PATH LSB_JOBID LSB_MCPU_HOSTS; do
        if [[ " ${env_line#env: } " != *" $name "* ]]; then
          echo "FAIL $nodes nodes, $mode: $name is not forwarded: $env_line" >&2
          exit 1
        fi
      done
      echo "$nodes nodes, $mode: $((nodes * 6)) ranks where the plan puts them"
    ) || failed=1
  done
done

# What the double refuses reaches the user with jsrun's status: an ERF needing more GPUs than
# the (simulated) hosts have.
(
  lsf_job 2
  export JSRUN_DOUBLE_GPUS=4
  out=$("$ddlrun" --host-xml "*=$tests/topologies/summit-ac922.xml" python train.py 2>&1)
  status=$?
  if ((status != 1)) || [[ $out != *"ddlrun.erf:3: GPU 4 is out of range: host a01n01 has 4 GPUs (0-3)"* ]]; then
    echo "FAIL jsrun's refusal (status $status):" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "jsrun's refusal reaches the user: ${out##*error: }"
) || failed=1
# -H and --hostfile override LSF's hosts (the ERF names only those); resource sets cannot skip
# LSF's first host; a misspelt --jsrun-mode; the plan document names the jsrun command and the
# ERF.
(
  lsf_job 2
  xml=$tests/topologies/summit-ac922.xml
  out=$("$ddlrun" -H a01n02 --host-xml "*=$xml" true 2>&1)
  if [[ $? != 0 || $(grep -c '^rank .*: host a01n02 ' <<<"$out") != 6 ]]; then
    echo "FAIL -H a01n02 inside the LSF job:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo a01n02 >"$work/hosts.txt"
  out=$("$ddlrun" --hostfile "$work/hosts.txt" --host-xml "*=$xml" true 2>&1)
  if [[ $? != 0 || $(grep -c '^rank .*: host a01n02 ' <<<"$out") != 6 ||
    $(grep -c '^rank ' <<<"$out") != 6 ]]; then
    echo "FAIL --hostfile inside the LSF job:" >&2
    echo "$out" >&2
    exit 1
  fi
  out=$("$ddlrun" -H a01n02 --host-xml "*=$xml" --jsrun-mode rs true 2>&1)
  status=$?
  want="ddlrun: error: jsrun launcher: resource sets fill the LSF job's hosts in its order (a01n01), but the plan's hosts are a01n02; use --jsrun-mode erf, or drop -H/--hostfile"
  if [[ $status != 1 || $out != "$want" ]]; then
    echo "FAIL -H a01n02 --jsrun-mode rs: $out" >&2
    exit 1
  fi
  out=$("$ddlrun" --jsrun-mode ERF true 2>&1)
  status=$?
  want="ddlrun: error: --jsrun-mode: unknown jsrun mode 'ERF' (did you mean 'erf'?); use one of erf, rs"
  if [[ $status != 2 || $out != "$want" ]]; then
    echo "FAIL --jsrun-mode ERF: $out" >&2
    exit 1
  fi
  "$ddlrun" --dry-run --output yaml --host-xml "*=$xml" --smpiargs=-gpu true >"$work/plan.yaml" &&
    /usr/bin/python3 - "$work/plan.yaml" <<'PY' || exit 1
import sys, yaml
j = yaml.safe_load(open(sys.argv[1]))["jsrun"]
assert j["mode"] == "erf" and j["error"] is None, j
assert j["command"][:5] == ["jsrun", "--erf_input", "<work-dir>/ddlrun.erf", "--smpiargs", "-gpu"], j
lines = j["erf"].splitlines()
assert lines[:2] == ["cpu_index_using: logical", "overlapping_rs: allow"], lines
assert len(lines) == 14, lines
assert lines[5] == "rank: 3: { hostname: a01n01; cpu: {84-111}; gpu: {0-5} } : app 0", lines[5]
PY
  echo "-H and --hostfile inside LSF, -H under resource sets, --jsrun-mode errors, the plan document: ok"
) || failed=1
exit $failed
