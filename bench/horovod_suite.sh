#!/usr/bin/env bash
# Horovod's own test suite (test/parallel/*.py of a Horovod checkout, unchanged) against this
# project's horovod package, run as Horovod's CI runs it: `horovodrun -np N pytest -v MODULE`,
# here one ddlrun job per module in which every rank runs pytest over the whole module.
# How it works: for each module, ddlrun -H localhost:N starts N ranks of the venv's python, each
# with the variables Horovod's runner sets (HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK,
# HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE: from ddlrun's own) and its own
# junit XML and log under the output directory; then every rank's XML is read and the module's
# line printed: rank 0's passed / failed / skipped / errors, whether the ranks disagree, and the
# tests that failed on any rank. The packages the suites import (pytest, parameterized, mock,
# cloudpickle, packaging) are pip-installed into the venv when missing. PYTHONPATH, when set,
# is passed to the ranks (ahead of the installed horovod: a source tree's python/ for instance).
# Horovod's TensorFlow suites are written for Keras 2: the ranks get TF_USE_LEGACY_KERAS=1
# (tf.keras is tf-keras, which scripts/setup installs) unless --keras 3.
#
# Usage: bench/horovod_suite.sh --horovod DIR [--ranks N] [--venv DIR] [--out DIR]
#                               [--timeout S] [MODULE...]
#   --horovod DIR  a Horovod checkout (its test/ at least: git archive HEAD test)
#   --ranks N      ranks per job (default 2)
#   --venv DIR     the venv with ddlrun, ddl, torch, tensorflow (default build/venv)
#   --out DIR      where the logs and XML go (default: a new directory under /tmp, printed)
#   --timeout S    ddlrun --timeout of each job (default 1800)
#   --keras 2|3    the Keras tf.keras is in the TensorFlow suites (default 2: tf-keras)
#   MODULE         default: test_torch.py test_tensorflow.py test_tensorflow2_keras.py
# Exit status: 0 when every module's job ran (whatever the tests said), 1 when a job could not
# report (no XML from some rank), 2 bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
horovod="" ranks=2 venv="$here/../build/venv" out="" timeout=1800 keras=2 modules=()
while (($#)); do
  case $1 in
    --horovod) horovod=${2:?--horovod takes a directory}; shift ;;
    --ranks) ranks=${2:?--ranks takes a count}; shift ;;
    --venv) venv=${2:?--venv takes a directory}; shift ;;
    --out) out=${2:?--out takes a directory}; shift ;;
    --timeout) timeout=${2:?--timeout takes seconds}; shift ;;
    --keras) keras=${2:?--keras takes 2 or 3}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    -*) echo "horovod_suite: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) modules+=("$1") ;;
  esac
  shift
done
if [[ -z $horovod || ! -d $horovod/test/parallel ]]; then
  echo "horovod_suite: --horovod must name a Horovod checkout with test/parallel/ (got" \
    "'${horovod}'); make one with: git -C HOROVOD_GIT archive HEAD test | tar -x -C DIR" >&2
  exit 2
fi
horovod=$(cd "$horovod" && pwd)
if [[ $keras != 2 && $keras != 3 ]]; then
  echo "horovod_suite: --keras $keras: 2 (tf-keras) or 3" >&2
  exit 2
fi
((${#modules[@]})) || modules=(test_torch.py test_tensorflow.py test_tensorflow2_keras.py)
for tool in python ddlrun; do
  if [[ ! -x $venv/bin/$tool ]]; then
    echo "horovod_suite: no $venv/bin/$tool: make the venv with scripts/setup (or --venv)" >&2
    exit 2
  fi
done
if ! "$venv/bin/python" -c 'import pytest, parameterized, mock, cloudpickle, packaging' \
  2>/dev/null; then
  echo "horovod_suite: pip install pytest parameterized mock cloudpickle packaging into $venv"
  "$venv/bin/pip" install -q pytest parameterized mock cloudpickle packaging || exit 2
fi
out=${out:-$(mktemp -d /tmp/horovod_suite.XXXXXX)}
mkdir -p "$out"
echo "horovod_suite: $ranks ranks, logs and junit XML in $out"

# One rank: Horovod's runner's variables from ddlrun's, then pytest over the module; the rank
# ends with status 0 whatever pytest said (its status goes to the log), or ddlrun would stop the
# ranks still testing as soon as one rank's pytest exits 1.
rank_command='export HOROVOD_RANK=$RANK HOROVOD_SIZE=$WORLD_SIZE
export HOROVOD_LOCAL_RANK=$LOCAL_RANK HOROVOD_LOCAL_SIZE=$LOCAL_WORLD_SIZE
export HOROVOD_CROSS_RANK=${GROUP_RANK:-0} HOROVOD_CROSS_SIZE=$((WORLD_SIZE / LOCAL_WORLD_SIZE))
export HOROVOD_HOSTNAME=$(hostname) HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo
"$0" -m pytest -v -rA -p no:cacheprovider --junitxml="$1/$2.rank$RANK.xml" "$2" \
  >"$1/$2.rank$RANK.log" 2>&1
echo "pytest exit $?" >>"$1/$2.rank$RANK.log"'

status=0
for module in "${modules[@]}"; do
  passthrough=()
  [[ -n ${PYTHONPATH:-} ]] && passthrough=(-x "PYTHONPATH=$PYTHONPATH")
  ((keras == 2)) && passthrough+=(-x TF_USE_LEGACY_KERAS=1)
  passthrough+=(-x TF_CPP_MIN_LOG_LEVEL=3)
  start=$SECONDS
  (cd "$horovod/test/parallel" &&
    "$venv/bin/ddlrun" -H "localhost:$ranks" --timeout "$timeout" "${passthrough[@]}" \
      /bin/sh -c "$rank_command" "$venv/bin/python" "$out" "$module") >"$out/$module.ddlrun.log" 2>&1
  rc=$?
  "$venv/bin/python" "$here/horovod_suite_report.py" "$out" "$module" "$ranks" \
    "$((SECONDS - start))" "$rc" || status=1
done
exit $status
