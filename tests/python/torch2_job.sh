#!/usr/bin/env bash
# Runs a check of the torch backend "ddl" with a given ddlrun and python (for torch 2.x those of a
# torch 2.x build: DDL_TORCH2_DDLRUN, DDL_TORCH2_PYTHON in tests/python/torch2.cmake), or under
# torchrun; skips (77) when they are not given or the python has no torch.
#   torch2_job.sh ddlrun DDLRUN PYTHON N SCRIPT [args...]     N ranks of DDLRUN's local launcher
#   torch2_job.sh torchrun PYDIR PYTHON N SCRIPT [args...]    torchrun --standalone, N workers;
#                                                             PYDIR (or -) first on PYTHONPATH
set -uo pipefail
here=$(dirname "$0")
source "$here/../lib/python.sh"
how=$1 first=$2 python=$3 n=$4 script=$5
shift 5
if [[ -z $python || ! -x $python ]]; then
  echo "torch2_job: no torch 2.x Python (DDL_TORCH2_PYTHON='$python'; the venv of pip install" \
    "or -DDDL_TORCH2_PYTHON=): skipped"
  exit 77
fi
if ! python_has "$python" torch; then
  echo "torch2_job: $python has no torch: skipped"
  exit 77
fi
if [[ $how == ddlrun ]]; then
  if [[ -z $first || ! -x $first ]]; then
    echo "torch2_job: no ddlrun built for $python (DDL_TORCH2_DDLRUN='$first'): skipped"
    exit 77
  fi
  exec "$here/run_job.sh" --torch --plain "$first" - "$python" "$n" "$script" "$@"
fi
if [[ $first != - ]]; then
  export PYTHONPATH=$first/ddl/_site:$first
fi
# torch 1.13's torchrun under Python 3.11 cannot read its own default --redirects 0 (3.11's
# IntFlag iteration skips 0), so there its workers' stdout is teed: lines come as "[default0]:...".
tee=()
if "$python" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) != 1)'; then
  tee=(--redirects 1 --tee 1)
fi
out=$(timeout 280 "$python" -m torch.distributed.run --standalone --nproc_per_node "$n" \
  "${tee[@]}" "$script" "$@" 2>&1)
status=$?
echo "$out"
if ((status != 0)); then
  echo "torch2_job: torchrun exited with $status" >&2
  exit 1
fi
for ((r = 0; r < n; r++)); do
  if ! grep -qxE "(\[default[0-9]+\]:)?rank $r of $n ok" <<<"$out"; then
    echo "torch2_job: rank $r did not report ok" >&2
    exit 1
  fi
done
echo "torch2_job: all $n workers ok"
