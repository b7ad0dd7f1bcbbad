#!/usr/bin/env bash
# Runs a check of the torch backend "ddl" on torch 2.x with the ddlrun and python of a torch 2.x
# build (DDL_TORCH2_DDLRUN, DDL_TORCH2_PYTHON in tests/torch2.cmake), or skips (77) when there is
# none.
#   torch2_job.sh ddlrun DDLRUN PYTHON N SCRIPT [args...]     N ranks of DDLRUN's local launcher
#   torch2_job.sh torchrun PYDIR PYTHON N SCRIPT [args...]    torchrun --standalone, N workers;
#                                                             PYDIR (or -) first on PYTHONPATH
set -uo pipefail
here=$(dirname "$0")
how=$1 first=$2 python=$3 n=$4 script=$5
shift 5
if [[ -z $python || ! -x $python ]]; then
  echo "torch2_job: no torch 2.x Python (DDL_TORCH2_PYTHON='$python'; the venv of pip install" \
    "or -DDDL_TORCH2_PYTHON=): skipped"
  exit 77
fi
if ! "$python" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
  2>/dev/null; then
  echo "torch2_job: $python has no torch 2.x: skipped"
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
out=$(timeout 120 "$python" -m torch.distributed.run --standalone --nproc-per-node "$n" \
  "$script" "$@" 2>&1)
status=$?
echo "$out"
if ((status != 0)); then
  echo "torch2_job: torchrun exited with $status" >&2
  exit 1
fi
for ((r = 0; r < n; r++)); do
  if ! grep -qx "rank $r of $n ok" <<<"$out"; then
    echo "torch2_job: rank $r did not report ok" >&2
    exit 1
  fi
done
echo "torch2_job: all $n workers ok"
