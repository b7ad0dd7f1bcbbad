#!/usr/bin/env bash
# The seeds' Summit demo, unchanged: tensorflow/benchmarks' tf_cnn_benchmarks.py with
# --variable_update=horovod under ddlrun (horovod.tensorflow on libddl, graph mode), on 1, 2 and
# 4 local ranks, beside one process of the same script with no Horovod (--variable_update
# independent). Prints each run's "total images/sec" and the scaling against the one process:
# efficiency = total / (ranks * one process). The benchmark needs Keras 2 (tf-keras) on
# TensorFlow 2.16+: it runs with TF_USE_LEGACY_KERAS=1. Every run splits this host's cores
# between its ranks (--num_intra_threads), so a rank is never given more cores than it has.
#
# Usage: bench/tf_cnn_benchmarks.sh --benchmarks DIR [--ddlrun PATH] [--python PY]
#                                   [--ranks "1 2 4"] [--model M] [--data D] [--batch N]
#                                   [--batches N]
#   --benchmarks DIR  a checkout of github.com/tensorflow/benchmarks (its
#                     scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py is run as it is)
#   --ddlrun PATH     a ddlrun whose package ddl has the TensorFlow ops (default:
#                     $DDL_VENV/bin/ddlrun, else build/venv/bin/ddlrun)
#   --python PY       the interpreter with tensorflow and tf-keras (default: beside that ddlrun)
#   --ranks LIST      the rank counts to run under ddlrun (default "1 2 4")
#   --model M         tf_cnn_benchmarks' --model (default resnet20; resnet50 with --data
#                     imagenet is the seeds' Summit run)
#   --data D          its --data_name, synthetic data of that shape (default cifar10)
#   --batch N         per-rank --batch_size (default 32); --batches N: --num_batches (default 20)
# Exit status: 0 when every run printed its rate, 1 when one did not, 2 bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${DDL_VENV:-$here/../build/venv}
ddlrun=$venv/bin/ddlrun python="" benchmarks="" ranks="1 2 4" model=resnet20 data=cifar10 batch=32
batches=20
while (($#)); do
  case $1 in
    --benchmarks) benchmarks=${2:?--benchmarks takes a directory}; shift ;;
    --ddlrun) ddlrun=${2:?--ddlrun takes a path}; shift ;;
    --python) python=${2:?--python takes an interpreter}; shift ;;
    --ranks) ranks=${2:?--ranks takes a list}; shift ;;
    --model) model=${2:?--model takes a name}; shift ;;
    --data) data=${2:?--data takes a data set name}; shift ;;
    --batch) batch=${2:?--batch takes a count}; shift ;;
    --batches) batches=${2:?--batches takes a count}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "tf_cnn_benchmarks: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
script=$benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py
if [[ -z $benchmarks || ! -f $script ]]; then
  echo "tf_cnn_benchmarks: --benchmarks '$benchmarks' holds no scripts/tf_cnn_benchmarks/" \
    "tf_cnn_benchmarks.py: give a checkout of github.com/tensorflow/benchmarks" >&2
  exit 2
fi
[[ -n $python ]] || python=$(dirname "$ddlrun")/python
if [[ ! -x $ddlrun ]] || ! "$python" -c "import tensorflow, tf_keras" 2>/dev/null; then
  echo "tf_cnn_benchmarks: need $ddlrun and $python with tensorflow and tf-keras" \
    "(scripts/setup makes build/venv so)" >&2
  exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=3 TF_USE_LEGACY_KERAS=1 CUDA_VISIBLE_DEVICES=
cores=$(nproc)
common=(--device=cpu --data_format=NHWC --model="$model" --data_name="$data" --batch_size="$batch"
        --num_batches="$batches" --num_warmup_batches=5 --display_every=1000)

# Runs the benchmark with $1 ranks (0: one process, no ddlrun); prints its total images/sec.
rate() {
  local n=$1 threads out
  threads=$(((cores / (n > 0 ? n : 1)) > 0 ? cores / (n > 0 ? n : 1) : 1))
  local flags=("${common[@]}" --num_intra_threads="$threads" --num_inter_threads=2)
  if ((n == 0)); then
    out=$("$python" "$script" "${flags[@]}" --variable_update=independent 2>&1)
  else
    out=$("$ddlrun" --tag-output none -H "localhost:$n" "$python" "$script" "${flags[@]}" \
      --variable_update=horovod 2>&1)
  fi
  local total
  total=$(grep -E '^total images/sec:' <<<"$out" | tail -n 1 | awk '{print $3}')
  if [[ -z $total ]]; then
    printf '%s\n' "$out" | tail -n 20 >&2
    return 1
  fi
  echo "$total"
}

status=0
single=$(rate 0) || { echo "tf_cnn_benchmarks: the one-process run failed" >&2; exit 1; }
printf '%-22s %8s %14s %10s\n' "run ($model, b=$batch)" ranks "images/sec" efficiency
printf '%-22s %8s %14s %10s\n' "----" "-----" "----------" "----------"
printf '%-22s %8s %14s %10s\n' "one process" 1 "$single" "-"
for n in $ranks; do
  if ! total=$(rate "$n"); then
    echo "tf_cnn_benchmarks: the $n-rank ddlrun run failed (its output above)" >&2
    status=1
    continue
  fi
  eff=$(awk -v t="$total" -v s="$single" -v n="$n" 'BEGIN { printf "%.0f%%", 100 * t / (n * s) }')
  printf '%-22s %8s %14s %10s\n' "ddlrun horovod" "$n" "$total" "$eff"
done
exit "$status"
