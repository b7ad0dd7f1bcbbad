#!/usr/bin/env bash
# The GPU check for a lent one-GPU machine, in one call of under 10 minutes: each step under a
# timeout of its own inside an overall budget, each printed with its outcome, then one summary.
#
#   env          the host, the driver (nvidia-smi -L), CUDA/NCCL libraries found, python/torch
#   bundle       (bundle only) every program and library of the bundle resolves its libraries
#                inside it or the host's C/C++ runtime (ldd: nothing 'not found')
#   probe        `ddlrun --probe`: the GPUs as hwloc and NVML see them (gpus: in the YAML)
#   plan         `ddlrun --dry-run -H localhost:1`: the plan of one rank on this host
#   nccl-1       libddl's NCCL allreduce on device buffers: `ddl-bench -G` (correctness and
#                busbw, float32 sum, -b 8 to -e 256M) as one rank under ddlrun
#   torch-build  (bundle only) the torch backend ddl built on this machine against its torch
#                (bench/gpu_build_torch_pg.py: torch's cpp_extension, the device's compiler)
#   torch-ddl    torch.distributed all_reduce on CUDA tensors with backend ddl (one rank)
#   torch-nccl   the same with backend nccl
#   table        libddl, torch ddl and torch nccl side by side, per size
#   nccl-2       (tried last) `ddl-bench -G` asking for 2 ranks (--np 2) on the one GPU: ddlrun
#                places one rank per GPU and refuses with its error
#   torch-nccl-2 (tried last) torch's nccl with 2 ranks both on GPU 0, the same refusal; NCCL
#                would refuse a shared GPU too ("Duplicate GPU"); both steps print what happened
#                and count as tried, not failed
#
# Without a GPU (no GPU in `ddlrun --probe`), every GPU step is skipped with the reason and the
# CPU side still runs: env, bundle, probe, plan, and in place of the GPU runs the same
# programs on host memory, 2 ranks (ddl-bench without -G, torch backends ddl and gloo on CPU
# tensors) and their table, so the harness itself is exercised (CTest: bench.gpu_check_nogpu).
#
#   bench/gpu_check.sh [--bundle DIR | --build DIR] [--quick] [-e MAX] [--budget SECONDS]
#
# --bundle DIR: what scripts/gpu_bundle staged (default: .gpu when it holds bin/ddlrun, else
# the build tree build/). --quick: sizes up to 64K, fewer iterations (CTest). --budget: the
# whole run's seconds (default 540: a 600 s call with room to return); a step gets at most what
# is left, and a step that would get under 15 s is skipped as out of time. Exits 0 when no step
# failed (skips are not failures), 1 otherwise, 2 on a usage error.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle="" build="" quick=0 max=256M budget=540
usage() { sed -n '/^#   bench\/gpu_check.sh/p' "$0" | sed 's/^#   /usage: /' >&2; exit 2; }
while (($#)); do
  case $1 in
    --bundle) bundle=${2:?--bundle takes a folder}; shift ;;
    --build) build=${2:?--build takes a folder}; shift ;;
    --quick) quick=1; max=64K ;;
    -e) max=${2:?-e takes a size}; shift ;;
    --budget) budget=${2:?--budget takes seconds}; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget takes whole seconds, not '$budget'" >&2; exit 2; }
if [[ -z $bundle && -z $build ]]; then
  if [[ -x $root/.gpu/bin/ddlrun ]]; then bundle=$root/.gpu; else build=$root/build; fi
fi

# The programs, from the bundle or the build tree.
if [[ -n $bundle ]]; then
  [[ -d $bundle ]] || { echo "gpu_check: no folder '$bundle' (--bundle)" >&2; exit 2; }
  bundle=$(cd "$bundle" && pwd)
  ddlrun=$bundle/bin/ddlrun bench=$bundle/bin/ddl-bench pydir=$bundle/python
  python=python3
  want_python=$(sed -n 's/^python //p' "$bundle/MANIFEST" 2>/dev/null)
  # PMIx (ddlrun's server) and hwloc open plugins from Debian's paths: the bundle has copies.
  export PMIX_MCA_mca_base_component_path=$bundle/lib/pmix HWLOC_PLUGINS_PATH=$bundle/lib/hwloc
else
  [[ -d $build ]] || { echo "gpu_check: no folder '$build' (--build)" >&2; exit 2; }
  build=$(cd "$build" && pwd)
  ddlrun=$build/ddlrun/ddlrun bench=$build/bench/comm/ddl-bench pydir=$build/python
  python=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  python=${python:-python3} want_python=""
fi
for f in "$ddlrun" "$bench"; do
  [[ -x $f ]] || { echo "gpu_check: $f is missing: build it (scripts/setup) or stage the bundle (scripts/gpu_bundle)" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/gpu_check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
declare -a ok=() skipped=() failed=()

# skip NAME REASON
skip() {
  echo "== $1: skipped: $2"
  skipped+=("$1 ($2)")
}

# step NAME SECONDS [--tried] CMD...: CMD under a timeout of SECONDS or what is left of the
# budget, its output to the terminal and $tmp/NAME.log. --tried: a failure is an outcome to
# report, not a failed check.
step() {
  local name=$1 want=$2 tried=0 left status t0=$SECONDS
  shift 2
  [[ $1 == --tried ]] && { tried=1; shift; }
  left=$((budget - (SECONDS - start) - 10))
  ((want > left)) && want=$left
  if ((want < 15)); then
    skip "$name" "out of time (budget ${budget}s)"
    return 1
  fi
  echo "== $name (timeout ${want}s): $*"
  # A function of this script runs in a child bash (timeout runs programs): exported below.
  declare -F "$1" >/dev/null && set -- bash -c "$*"
  # A pipeline, not a process substitution: the step's last lines are printed (tee ended)
  # before its verdict line, which the tests look for.
  timeout -k 5 "$want" "$@" 2>&1 | tee "$tmp/$name.log"
  status=${PIPESTATUS[0]}
  if ((status == 0)); then
    echo "-- $name: ok ($((SECONDS - t0)) s)"
    ok+=("$name")
  elif ((status == 124 || status == 137)); then
    echo "-- $name: TIMED OUT after ${want}s"
    ((tried)) && ok+=("$name (tried: timed out)") || failed+=("$name (timed out)")
  else
    echo "-- $name: exit $status"
    ((tried)) && ok+=("$name (tried: exit $status)") || failed+=("$name (exit $status)")
  fi
  return "$status"
}

# Libraries the device's CUDA stack keeps outside the loader's default path: the driver's
# (NVML), CUDA's, and the NCCL/CUDA runtime wheels of the Python that holds torch.
library_path() {
  local dirs=() d
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64; do
    [[ -d $d ]] && dirs+=("$d")
  done
  while read -r d; do [[ -d $d ]] && dirs+=("$d"); done < <(timeout 60 "$python" - <<'PY' 2>/dev/null
import importlib.util, os
for name, sub in (("nvidia.nccl", "lib"), ("nvidia.cu13", "lib"), ("nvidia.cuda_runtime", "lib")):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    for p in (spec.submodule_search_locations or []) if spec else []:
        print(os.path.join(p, sub))
PY
  )
  local IFS=:
  echo "${dirs[*]}"
}
extra=$(library_path)
export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

show_env() {
  echo "host: $(hostname), $(uname -srm), $(nproc) cores"
  echo "programs: $ddlrun, $bench; python package: $pydir"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || true
    nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader || true
  else
    echo "nvidia-smi: not installed"
  fi
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-(empty)}"
  echo "C library: $(ldd --version 2>&1 | head -n 1)"
  [[ -n $bundle ]] && sed 's/^/bundle: /' "$bundle/MANIFEST"
  local lib
  for lib in libnvidia-ml.so.1 libcudart.so.13 libnccl.so.2; do
    if "$python" -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$lib" 2>/dev/null; then
      echo "$lib: loads"
    else
      echo "$lib: does not load"
    fi
  done
  "$python" --version
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())' 2>&1 |
    tail -n 1 | sed 's/^ModuleNotFoundError: /torch: /'
  return 0
}

# bundle: ldd of every ELF file in the bundle; 'not found' fails.
check_bundle() {
  local f bad=0 missing
  while read -r f; do
    file -b "$f" 2>/dev/null | grep -q ELF || head -c 4 "$f" | grep -q ELF || continue
    missing=$(ldd "$f" 2>&1 | grep 'not found')
    if [[ -n $missing ]]; then
      echo "$f:"
      echo "$missing"
      bad=1
    fi
  done < <(find "$bundle/bin" "$bundle/lib" "$bundle/python" -type f \( -perm -u+x -o -name '*.so*' \))
  ((bad == 0)) && echo "every program and library of $bundle finds its libraries"
  return $bad
}

# The number of GPUs in `ddlrun --probe`'s YAML (the gpus: list), from its log.
gpu_count() {
  awk '/^gpus:/ { on = ($0 !~ /\[\]/); next }
       on && /^[^ -]/ { on = 0 }
       on && /^(  )?- / { n++ }
       END { print n + 0 }' "$tmp/probe.log" 2>/dev/null || echo 0
}

torch_ready() {  # "" when the python has torch and the ddl package imports, else why not
  if [[ -n $want_python ]] && ! "$python" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$want_python' else 1)"; then
    echo "the bundle's extensions are for Python $want_python, $python is $("$python" --version 2>&1)"
  elif ! "$python" -c 'import torch' 2>/dev/null; then
    echo "$python has no torch"
  elif [[ -z $bundle ]] && ! compgen -G "$pydir/ddl/_torch_pg*.so" >/dev/null; then
    echo "the torch backend ddl was not built ($pydir/ddl has no _torch_pg)"
  fi
}

# table: the runs of $cols side by side.
table() {
  if command -v "$python" >/dev/null; then
    step table 30 "$python" "$root/bench/gpu_allreduce_torch.py" --merge "${cols[@]}"
  else
    skip table "no $python to print it"
  fi
}

export -f show_env check_bundle
export ddlrun bench pydir python bundle
iters=(-w 5 -n 20)
((quick)) && iters=(-w 1 -n 3)
run1=("$ddlrun" -H localhost:1 --tag-output none)

step env 60 show_env
if [[ -n $bundle ]]; then
  step bundle 60 check_bundle
else
  skip bundle "not a bundle (programs from the build tree $build)"
fi
step probe 60 "$ddlrun" --probe
gpus=$(gpu_count)
echo "probe: $gpus GPU(s) in ddlrun --probe"
step plan 60 "$ddlrun" --dry-run -H localhost:1 "$bench" -G

nogpu=""
((gpus > 0)) || nogpu="no GPU: ddlrun --probe (hwloc and NVML) lists none on this host"
why_torch=$(torch_ready)
# libddl sends GPU buffers to NCCL only when it loads libcudart and libnccl (else it would take
# them for host memory): say so rather than let ddl-bench crash.
for lib in libcudart.so.13 libnccl.so.2; do
  [[ -z $nogpu ]] || break
  "$python" -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$lib" 2>/dev/null ||
    nogpu="$lib does not load (LD_LIBRARY_PATH: $LD_LIBRARY_PATH): libddl has no NCCL path here"
done
if [[ -z $nogpu ]]; then
  step nccl-1 120 "${run1[@]}" -x DDL_TIMEOUT=60 "$bench" -G -b 8 -e "$max" "${iters[@]}"
  cp "$tmp/nccl-1.log" "$tmp/libddl.txt" 2>/dev/null
  if [[ -n $why_torch ]]; then
    for s in torch-build torch-ddl torch-nccl; do skip "$s" "$why_torch"; done
  else
    no_ddl=""
    if [[ -n $bundle ]]; then
      step torch-build 300 "$python" "$root/bench/gpu_build_torch_pg.py" "$bundle" ||
        no_ddl="the torch backend ddl did not build (torch-build)"
    else
      skip torch-build "the build tree's backend is CMake's (build/python/ddl)"
    fi
    for backend in ddl nccl; do
      [[ $backend == ddl && -n $no_ddl ]] && { skip torch-ddl "$no_ddl"; continue; }
      step "torch-$backend" 120 "${run1[@]}" "$python" "$root/bench/gpu_allreduce_torch.py" \
        --backend "$backend" --device cuda -b 8 -e "$max" "${iters[@]}" \
        --out "$tmp/torch-$backend.txt"
    done
  fi
  cols=(libddl="$tmp/libddl.txt" torch-ddl="$tmp/torch-ddl.txt" torch-nccl="$tmp/torch-nccl.txt")
  table
  # Two ranks on the one GPU, tried last: libddl (the mapper gives the one GPU to one rank) and
  # torch's nccl with both ranks on GPU 0 (NCCL refuses a GPU shared by two ranks).
  step nccl-2 90 --tried "$ddlrun" -H localhost:2 --np 2 --tag-output rank -x DDL_TIMEOUT=30 "$bench" -G \
    -b 8 -e 1M -w 1 -n 5
  if [[ -z $why_torch ]]; then
    step torch-nccl-2 90 --tried "$ddlrun" -H localhost:2 --np 2 --tag-output rank "$python" \
      "$root/bench/gpu_allreduce_torch.py" --backend nccl --device cuda --gpu0 -b 8 -e 1M \
      -w 1 -n 5
  else
    skip torch-nccl-2 "$why_torch"
  fi
else
  for s in nccl-1 torch-build torch-ddl torch-nccl nccl-2 torch-nccl-2; do skip "$s" "$nogpu"; done
  # The CPU side of the same harness: host buffers, 2 ranks, small sizes.
  step host-ddl 60 "$ddlrun" -H localhost:2 --tag-output none "$bench" -b 8 -e 64K -w 1 -n 3
  cp "$tmp/host-ddl.log" "$tmp/libddl.txt" 2>/dev/null
  if [[ -n $why_torch ]]; then
    skip torch-cpu "$why_torch"
  else
    for backend in ddl gloo; do
      step "torch-$backend-cpu" 90 "$ddlrun" -H localhost:2 --tag-output none "$python" \
        "$root/bench/gpu_allreduce_torch.py" --backend "$backend" --device cpu -b 8 -e 64K \
        -w 1 -n 3 --out "$tmp/torch-$backend.txt"
    done
  fi
  cols=(libddl-host="$tmp/libddl.txt" torch-ddl-cpu="$tmp/torch-ddl.txt"
        torch-gloo-cpu="$tmp/torch-gloo.txt")
  table
fi

echo "== gpu_check: $((SECONDS - start)) s; ${#ok[@]} ran, ${#skipped[@]} skipped, ${#failed[@]} failed"
for s in "${ok[@]}"; do echo "   ok       $s"; done
for s in "${skipped[@]}"; do echo "   skipped  $s"; done
for s in "${failed[@]}"; do echo "   FAILED   $s"; done
((${#failed[@]} == 0))
