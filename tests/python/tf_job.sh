#!/usr/bin/env bash
# Runs a TensorFlow script as an N-rank job of a ddlrun whose package ddl has the TensorFlow ops,
# with that ddlrun's own package on the ranks' path (no PYTHONPATH), and checks that each rank
# printed "rank R of N ok" (run_job.sh --plain).
#   tf_job.sh DDLRUN PYTHON N SCRIPT [args...]
# Skipped (77) when DDLRUN is empty or missing, or PYTHON cannot import tensorflow. TensorFlow
# is kept quiet and small: no start-up logs, one intra-op and two inter-op threads per rank.
set -uo pipefail
source "$(dirname "$0")/../lib/python.sh"
ddlrun=$1 python=$2
shift 2
if [[ -z $ddlrun || ! -x $ddlrun ]]; then
  echo "tf_job: no ddlrun built for a Python with tensorflow ('$ddlrun'; scripts/setup makes" \
    "the venv, or configure a build with -DPython3_EXECUTABLE=<python with tensorflow>): skipped"
  exit 77
fi
if ! python_has "$python" tensorflow; then
  echo "tf_job: $python has no tensorflow: skipped"
  exit 77
fi
export TF_CPP_MIN_LOG_LEVEL=3 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=2
export OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
exec "$(dirname "$0")/run_job.sh" --plain "$ddlrun" unused "$python" "$@"
