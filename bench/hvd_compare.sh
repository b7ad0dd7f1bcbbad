#!/usr/bin/env bash
# Horovod's synthetic benchmark on libddl (horovod.torch from the build tree) beside the same
# training step under DistributedDataParallel on backend ddl and on backend gloo: images per
# second of every rank together, side by side, N local ranks (default 4).
# How it works: four ddlrun jobs one after the other, each
#   ddlrun -H localhost:N --no-probe \
#     /usr/bin/python3 SCRIPT ...
# bench/pytorch_synthetic_benchmark.py (Horovod's script: plain BatchNorm, float32 allreduce;
# then hvd.SyncBatchNorm with fp16 compression) and bench/ddp_synthetic_benchmark.py (backend
# ddl, then gloo), the same model, batch, image size and counts; each prints "Total img/sec on N
# CPU(s): X +-Y". The four jobs run --rounds times in turn (a busy machine then slows them
# alike); the table shows each job's median round (the first row is the reference of the ratios).
#
# Usage: bench/hvd_compare.sh [--build DIR] [--ranks N] [--python PY] [--quick] [--rounds R]
#                             [--model M] [--batch-size B] [--image-size S] [--iters N]
#   --quick   resnet18, batch 2, 32x32 images, 1 warm-up batch, 2 iterations of 1 batch, 1 round
#   defaults: resnet18, batch 8, 64x64 images, 2 warm-up batches, 3 iterations of 3 batches,
#             3 rounds
# Exit status: 0 when every job ran, 1 when one failed, 2 bad usage, 77 without torch and
# torchvision or without the ddl backend.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build" ranks=4 python=/usr/bin/python3
model=resnet18 batch=8 size=64 warmup=2 per_iter=3 iters=3 rounds=3
while (($#)); do
  case $1 in
    --build) build=${2:?--build takes a directory}; shift ;;
    --ranks) ranks=${2:?--ranks takes a count}; shift ;;
    --python) python=${2:?--python takes an interpreter}; shift ;;
    --model) model=${2:?--model takes a torchvision model name}; shift ;;
    --batch-size) batch=${2:?--batch-size takes a count}; shift ;;
    --image-size) size=${2:?--image-size takes a pixel count}; shift ;;
    --iters) iters=${2:?--iters takes a count}; shift ;;
    --rounds) rounds=${2:?--rounds takes a count}; shift ;;
    --quick) batch=2 size=32 warmup=1 per_iter=1 iters=2 rounds=1 ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "hvd_compare: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
build=$(cd "$build" 2>/dev/null && pwd) || {
  echo "hvd_compare: no build directory (build ddlrun, or give --build DIR)" >&2
  exit 2
}
if ! "$python" -c 'import torch, torchvision' 2>/dev/null; then
  echo "hvd_compare: $python cannot import torch and torchvision (scripts/setup installs" \
    "python3-torch and python3-torchvision): skipped"
  exit 77
fi
if ! compgen -G "$build/python/ddl/_torch_pg*.so" >/dev/null; then
  echo "hvd_compare: no $build/python/ddl/_torch_pg*.so, the ddl backend: skipped"
  exit 77
fi
common=(--model "$model" --batch-size "$batch" --image-size "$size" --num-classes 10
  --num-warmup-batches "$warmup" --num-batches-per-iter "$per_iter" --num-iters "$iters")

# run NAME SCRIPT ARGS...: one job; prints "NAME TOTAL SPREAD" from its "Total img/sec" line.
run() {
  local name=$1 script=$2 out
  shift 2
  out=$("$build/ddlrun/ddlrun" --tag-output none -H "localhost:$ranks" --no-probe \
    "$python" "$here/$script" \
    "${common[@]}" "$@" 2>&1) || {
    echo "$out" >&2
    echo "hvd_compare: the $name job failed" >&2
    return 1
  }
  awk -v name="$name" '/^Total img\/sec on/ {print name, $(NF - 1), substr($NF, 3)}' <<<"$out"
}

echo "hvd_compare: $model, batch $batch per rank, ${size}x$size images, $ranks local ranks" \
  "($warmup warm-up batches, $iters iterations of $per_iter; median of $rounds rounds)"
rows=
for ((round = 0; round < rounds; round++)); do
  rows+=$(run horovod.torch pytorch_synthetic_benchmark.py &&
    run horovod.torch+fp16+SyncBN pytorch_synthetic_benchmark.py --fp16-allreduce \
      --sync-batch-norm &&
    run DDP-ddl ddp_synthetic_benchmark.py --backend ddl &&
    run DDP-gloo ddp_synthetic_benchmark.py --backend gloo)$'\n' || exit 1
done
rows=$(sed '/^$/d' <<<"$rows")
if (($(wc -l <<<"$rows") != 4 * rounds)); then
  echo "hvd_compare: a job printed no 'Total img/sec' line: $rows" >&2
  exit 1
fi
# Each job's median round (by total img/s), in the order the jobs ran.
median=$(for name in $(head -4 <<<"$rows" | awk '{print $1}'); do
  awk -v name="$name" '$1 == name' <<<"$rows" | sort -k2,2g | sed -n "$(((rounds + 1) / 2))p"
done)
awk 'NR == 1 {first = $2}
     {printf "%-26s %9.1f img/s  +-%6.1f  %5.2fx\n", $1, $2, $3, $2 / first}
     BEGIN {printf "%-26s %15s  %8s  %6s\n", "job", "total", "spread", "ratio"}' <<<"$median"
