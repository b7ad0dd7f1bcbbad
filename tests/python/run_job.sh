#!/usr/bin/env bash
# Runs a Python script as an N-rank job of ddlrun's local launcher with the build tree's package
# `ddl` on PYTHONPATH, and checks that each rank printed "rank R of N ok".
#   run_job.sh [--torch | --torchvision] DDLRUN PYTHON_DIR PYTHON N SCRIPT [args...]
# --torch: skipped (77) when PYTHON cannot import torch; --torchvision: torch and torchvision
# (Debian's python3-torchvision).
set -uo pipefail
need_torch=0 modules=torch
if [[ ${1:-} == --torch || ${1:-} == --torchvision ]]; then
  need_torch=1
  [[ $1 == --torchvision ]] && modules=torch,torchvision
  shift
fi
ddlrun=$1 pydir=$2 python=$3 n=$4 script=$5
shift 5
if ((need_torch)) && ! "$python" -c "import $modules" 2>/dev/null; then
  echo "run_job: $python cannot import $modules (scripts/setup installs python3-torch and" \
    "python3-torchvision): skipped"
  exit 77
fi
out=$("$ddlrun" --tag-output none -H "localhost:$n" --no-probe -x "PYTHONPATH=$pydir" \
  "$python" "$script" "$@" 2>&1)
status=$?
echo "$out"
if ((status != 0)); then
  echo "run_job: ddlrun exited with $status" >&2
  exit 1
fi
for ((r = 0; r < n; r++)); do
  if ! grep -qx "rank $r of $n ok" <<<"$out"; then
    echo "run_job: rank $r did not report ok" >&2
    exit 1
  fi
done
echo "run_job: all $n ranks ok"
