#!/usr/bin/env bash
# torch.distributed's "ddl" backend (the C++ ProcessGroup over libddl) against "gloo" from Python,
# in one job of 4 local ranks: all_reduce time and bus bandwidth per message size, and the step
# time of the same DistributedDataParallel model on the same batches, with ddl's over gloo's.
# How it works: bench/ddp_compare.py runs as every rank under
#   ddlrun -H localhost:N --no-probe /usr/bin/python3 bench/ddp_compare.py ...
# with the build tree's package ddl on PYTHONPATH; each rank holds both backends (gloo the
# default group, ddl a second group of the same ranks) and measures them round by round. It
# checks every all_reduce result, that DDP's weights end bitwise identical on every rank for each
# backend, and that the two backends' weights agree within float tolerance.
#
# With --netns the job is 3 fake hosts x 2 ranks instead (network namespaces with their own sshd,
# tests/netns/hosts.sh; root), through ddlrun's ssh launcher, every host's link shaped to RATE
# each way (tc tbf), so the network is what the backends share.
#
# Usage: bench/ddp_compare.sh [--build DIR] [--ranks N] [--python PY | --venv V] [--netns [--rate RATE]]
#                             [ddp_compare.py options]
#   --build DIR   the build directory holding ddlrun and python/ddl (default build)
#   --ranks N     ranks on this host (default 4)
#   --python PY   the interpreter with torch (default /usr/bin/python3)
#   --venv V      a venv where `pip install .` put ddlrun and ddl (scripts/setup's build/venv:
#                 torch 2.13): its bin/ddlrun and bin/python, no PYTHONPATH (instead of --build)
#   --netns       3 fake hosts x 2 ranks (root; skipped, 77, where fake hosts cannot be made)
#   --rate RATE   the fake hosts' link rate, as tc takes it (default 1gbit)
#   --quick       (ddp_compare.py) 3 sizes, 3 calls, 4 steps, 1 round: the bench.ddp_smoke test
#   --sizes 4K,1M,..  --iters N  --steps N  --rounds N  --hidden N  --batch N   (ddp_compare.py)
# Exit status: 0 when the job ran and every check passed, 1 when a check failed or the job did
# not run, 2 bad usage, 77 when the interpreter has no torch or the ddl backend was not built.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build" ranks=4 python=/usr/bin/python3 netns=0 rate=1gbit
args=()
while (($#)); do
  case $1 in
    --build) build=${2:?--build takes a directory}; shift ;;
    --ranks) ranks=${2:?--ranks takes a count}; shift ;;
    --python) python=${2:?--python takes an interpreter}; shift ;;
    --venv) venv=${2:?--venv takes a directory}; shift ;;
    --netns) netns=1 ;;
    --rate) rate=${2:?--rate takes a rate like 1gbit}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done
pythonpath=()
if [[ -n ${venv:-} ]]; then
  venv=$(cd "$venv" 2>/dev/null && pwd) || { echo "ddp_compare: no venv $venv" >&2; exit 2; }
  ddlrun="$venv/bin/ddlrun" python="$venv/bin/python"
  [[ -x $ddlrun ]] || { echo "ddp_compare: no $ddlrun (pip install . into $venv)" >&2; exit 2; }
  backend_check=("$python" -c 'import torch, ddl._torch_pg')
else
  build=$(cd "$build" 2>/dev/null && pwd) || {
    echo "ddp_compare: no build directory (build ddlrun, or give --build DIR)" >&2
    exit 2
  }
  ddlrun="$build/ddlrun/ddlrun"
  if [[ ! -x $ddlrun ]]; then
    echo "ddp_compare: no $ddlrun (build it: cmake --build $build, or give --build DIR)" >&2
    exit 2
  fi
  backend_check=(compgen -G "$build/python/ddl/_torch_pg*.so")
  pythonpath=(-x "PYTHONPATH=$build/python")
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "ddp_compare: $python cannot import torch (scripts/setup installs python3-torch): skipped"
  exit 77
fi
if ! "${backend_check[@]}" >/dev/null 2>&1; then
  echo "ddp_compare: the ddl backend (ddl._torch_pg) is not built for $python (it is built" \
    "when libtorch-dev or the interpreter's torch is there: scripts/setup, then rebuild): skipped"
  exit 77
fi
hosts=(-H "localhost:$ranks" --no-probe)
if ((netns)); then
  # shellcheck source=../tests/netns/hosts.sh
  source "$here/../tests/netns/hosts.sh"
  netns_up 3 || exit $?
  for k in 1 2 3; do
    netns_shape "$k" "$rate" || { echo "ddp_compare: cannot shape node$k to $rate" >&2; exit 1; }
  done
  echo "ddp_compare: 3 fake hosts x 2 ranks, links shaped to $rate each way"
  hosts=(--launcher ssh -H node1:2,node2:2,node3:2 --no-probe --ssh-config "$NETNS_SSH_CONFIG")
fi
"$ddlrun" --tag-output none "${hosts[@]}" "${pythonpath[@]}" \
  "$python" "$here/ddp_compare.py" "${args[@]}"
status=$?
if ((status != 0)); then
  echo "ddp_compare: the job exited with $status" >&2
  exit 1
fi
