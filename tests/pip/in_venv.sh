#!/usr/bin/env bash
# Runs a command of a venv test (tests/pip/venv.cmake) as a user of the wheel would: the venv's bin/
# first on PATH, no PYTHONPATH, no LD_LIBRARY_PATH, none of the launcher variables of whatever
# runs the test. Skipped (77) when the venv or its ddlrun is absent.
#   in_venv.sh VENV COMMAND [ARGS...]
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 VENV COMMAND [ARGS...]" >&2
  exit 2
fi
venv=$1
shift
[[ -d $venv ]] && venv=$(cd "$venv" && pwd)
for f in python ddlrun; do
  if [[ ! -x $venv/bin/$f ]]; then
    echo "in_venv: no $venv/bin/$f (scripts/setup makes the venv and pip-installs ddlrun" \
      "into it): skipped"
    exit 77
  fi
done
for v in $(env | sed -n 's/^\(DDL_[A-Z_]*\|OMPI_[A-Z_]*\|PMIX_[A-Z0-9_]*\|PMI_[A-Z_]*\|SLURM_[A-Z_]*\|JSM_[A-Z_]*\)=.*/\1/p'); do
  unset "$v"
done
unset PYTHONPATH LD_LIBRARY_PATH PYTHONHOME
export PATH=$venv/bin:$PATH VIRTUAL_ENV=$venv
exec "$@"
