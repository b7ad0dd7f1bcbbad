#!/bin/bash
# Golden-file test of `ddlrun --dry-run` inside simulated LSF jobs on Summit (tests/lsf/lsf_env.sh):
# 1, 2 and 18 compute nodes plus the batch node, each node's hardware from the Summit recording
# (tests/topologies/summit-ac922.xml, through --host-xml), with the ERF form (the default) and
# the resource-set form (--jsrun-mode rs). The text must equal tests/golden/lsf/<case>.txt: the
# hosts taken from LSF without the batch node, the plan, the jsrun command and the ERF.
#
#   check_dry_run.sh DDLRUN TESTS_DIR            compare; print a diff and fail on any change
#   check_dry_run.sh DDLRUN TESTS_DIR --update   rewrite the golden files (then review the diff)
set -euo pipefail

ddlrun=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tests=$(cd "$2" && pwd)
update=${3:-}
if [[ -n $update && $update != --update ]]; then
  echo "usage: $0 DDLRUN TESTS_DIR [--update]" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$tests/topologies" "$work/topologies"
mkdir "$work/.lsbatch"  # LSF's hostfile, named relative to the scratch directory
cd "$work"

failed=0
checked=0
# case name, nodes, ddlrun options
cases=(
  "summit-1node|1|"
  "summit-2nodes|2|"
  "summit-2nodes-rs|2|--jsrun-mode rs"
  "summit-18nodes|18|--smpiargs=-gpu"
  "summit-18nodes-rs|18|--jsrun-mode rs --smpiargs=-gpu"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name nodes opts <<<"$c"
  # A clean environment, as a batch job's with the paths IBM's ddlrun forwarded; only their
  # names reach the output.
  # shellcheck disable=SC2086
  if ! env -i HOME="$work" PATH=/usr/bin:/bin PYTHONPATH=/ccs/proj/ddl/python \
    LD_LIBRARY_PATH=/opt/ibm/spectrum_mpi/lib LSF_TEST_DIR=.lsbatch bash -c '
      . "$1/lsf/lsf_env.sh"
      lsf_job "$2"
      shift 2
      exec "$@"' _ "$tests" "$nodes" \
    "$ddlrun" --dry-run --host-xml '*=topologies/summit-ac922.xml' $opts \
    python tf_cnn_benchmarks.py --model resnet50 >"$work/out" 2>"$work/err"; then
    echo "FAIL $name: ddlrun exited non-zero:" >&2
    cat "$work/err" >&2
    failed=1
    continue
  fi
  if [[ -s $work/err ]]; then
    { echo "# stderr:"; sed 's/^/# /' "$work/err"; } >>"$work/out"
  fi
  golden=$tests/golden/lsf/$name.txt
  checked=$((checked + 1))
  if [[ -n $update ]]; then
    mkdir -p "$tests/golden/lsf"
    cp "$work/out" "$golden"
  elif ! diff -u "$golden" "$work/out" >"$work/diff" 2>&1; then
    echo "FAIL golden/lsf/$name.txt differs from what ddlrun prints now:" >&2
    head -n 60 "$work/diff" >&2
    failed=1
  fi
done

if [[ -n $update && $failed == 0 ]]; then
  echo "rewrote $checked golden files under $tests/golden/lsf; review them with git diff"
elif [[ $failed == 0 ]]; then
  echo "all $checked golden dry runs match"
else
  echo "golden dry runs differ; if intended, run $0 DDLRUN TESTS_DIR --update and commit" >&2
  exit 1
fi
