#!/usr/bin/env bash
# A Keras 3 model's training step time on N local ranks, ddl (under ddlrun, its fused allreduce)
# against TensorFlow's own MultiWorkerMirroredStrategy (N worker processes on localhost ports,
# TF_CONFIG), the same model, data and per-rank batch: bench/keras_compare.py in both modes.
# Prints both lines and a table side by side.
#
# Usage: bench/keras_compare.sh [--ddlrun PATH] [--python PY] [--ranks N] [keras_compare.py
#                               options: --batch N --hidden N --layers N --steps N --warmup N]
#   --ddlrun PATH  a ddlrun whose package ddl has the TensorFlow ops (default: $DDL_VENV/bin/ddlrun,
#                  else build-venv/ddlrun/ddlrun)
#   --python PY    the interpreter with tensorflow (default: $DDL_VENV/bin/python, else
#                  /opt/ddl-venv/bin/python)
#   --ranks N      ranks (workers) on this host (default 2)
# Exit status: 0 when both ran, 1 when one failed, 2 bad usage, 77 without tensorflow.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -n ${DDL_VENV:-} ]]; then
  ddlrun=$DDL_VENV/bin/ddlrun python=$DDL_VENV/bin/python
else
  ddlrun=$here/../build-venv/ddlrun/ddlrun python=/opt/ddl-venv/bin/python
fi
ranks=2
args=()
while (($#)); do
  case $1 in
    --ddlrun) ddlrun=${2?--ddlrun takes a path}; shift ;;
    --python) python=${2?--python takes an interpreter}; shift ;;
    --ranks) ranks=${2:?--ranks takes a count}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [[ ! $ranks =~ ^[1-9][0-9]*$ ]]; then
  echo "keras_compare: --ranks $ranks: a positive count is needed" >&2
  exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=
if ! "$python" -c "import tensorflow" 2>/dev/null; then
  echo "keras_compare: $python cannot import tensorflow: skipped"
  exit 77
fi
if [[ ! -x $ddlrun ]]; then
  echo "keras_compare: $ddlrun is not an executable ddlrun (pass --ddlrun)" >&2
  exit 2
fi
script=$here/keras_compare.py

ddl_out=$("$ddlrun" --tag-output none -H "localhost:$ranks" --no-probe "$python" "$script" \
  --mode ddl "${args[@]}" 2>&1)
ddl_status=$?
echo "$ddl_out" | grep -v '^$'

# MultiWorkerMirroredStrategy: N processes, each told the cluster and its index by TF_CONFIG.
ports=$("$python" - "$ranks" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
workers=$(printf '"localhost:%s",' $ports)
workers=[${workers%,}]
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for ((i = 0; i < ranks; i++)); do
  TF_CONFIG="{\"cluster\":{\"worker\":$workers},\"task\":{\"type\":\"worker\",\"index\":$i}}" \
    "$python" "$script" --mode mwms "${args[@]}" >"$logs/$i" 2>&1 &
  pids+=($!)
done
mwms_status=0
for pid in "${pids[@]}"; do
  wait "$pid" || mwms_status=1
done
grep -h 'keras_compare:' "$logs"/0 || tail -n 20 "$logs"/*
mwms_out=$(cat "$logs"/0)

field() { grep -o "$1=[^ ]*" <<<"$2" | head -1 | cut -d= -f2; }
printf '\n%-8s %6s %10s %12s\n' ranks batch ddl_ms mwms_ms
printf '%-8s %6s %10s %12s\n' "$ranks" "$(field batch "$ddl_out")" \
  "$(field step_ms "$ddl_out")" "$(field step_ms "$mwms_out")"
ddl_ms=$(field step_ms "$ddl_out") mwms_ms=$(field step_ms "$mwms_out")
if [[ -z $ddl_ms || -z $mwms_ms ]] && ((ddl_status == 0 && mwms_status == 0)); then
  echo "keras_compare: a mode printed no step_ms (ddl '$ddl_ms', mwms '$mwms_ms')" >&2
  exit 1
fi
if ((ddl_status != 0 || mwms_status != 0)); then
  echo "keras_compare: ddl exited with $ddl_status, MultiWorkerMirroredStrategy with" \
    "$mwms_status" >&2
  exit 1
fi
