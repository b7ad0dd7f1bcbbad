#!/usr/bin/env bash
# Runs a Python script as an N-rank job of ddlrun's local launcher with the build tree's package
# `ddl` on PYTHONPATH, and checks that each rank printed "rank R of N ok".
#   run_job.sh [--torch | --torchvision] [--plain] DDLRUN PYTHON_DIR PYTHON N SCRIPT [args...]
# --torch: skipped (77) when PYTHON cannot import torch; --torchvision: torch and torchvision
# (Debian's python3-torchvision). --plain: no PYTHONPATH at all, as a user would run it (the
# ranks find ddlrun's own package).
set -uo pipefail
source "$(dirname "$0")/../lib/python.sh"
need_torch=0 plain=0 modules=torch
while [[ ${1:-} == --* ]]; do
  case $1 in
    --torch) need_torch=1 ;;
    --torchvision) need_torch=1 modules=torch,torchvision ;;
    --plain) plain=1 ;;
  esac
  shift
done
ddlrun=$1 pydir=$2 python=$3 n=$4 script=$5
shift 5
if ((need_torch)) && ! python_has "$python" ${modules//,/ }; then
  echo "run_job: $python has no $modules (scripts/setup installs python3-torch and" \
    "python3-torchvision): skipped"
  exit 77
fi
path=(-x "PYTHONPATH=$pydir")
if ((plain)); then
  path=()
  unset PYTHONPATH
fi
out=$("$ddlrun" --tag-output none -H "localhost:$n" --no-probe "${path[@]}" "$python" "$script" \
  "$@" 2>&1)
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
