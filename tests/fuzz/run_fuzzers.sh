#!/usr/bin/env bash
# Builds the libFuzzer targets in a separate clang build tree (through ccache when installed) and
# runs each for a bounded time on a copy of its hand-written seeds (tests/fuzz/corpus/<target>)
# and of the corpus a longer run kept (tests/fuzz/grown/<target>.b64); fails if any fuzzer finds
# a crash, a leak, a timeout or a sanitizer report. The ctest test fuzz.smoke runs it.
#
# Usage: run_fuzzers.sh SOURCE_DIR BUILD_DIR [TARGET...]
#   The clang tree is BUILD_DIR/fuzz-build; corpora, logs and crash inputs go to
#   BUILD_DIR/fuzz-build/fuzz-run (never into the source tree, but with FUZZ_GROW=1).
# Environment: FUZZ_SECONDS (per target, default 3: each run starts from the coverage the kept
#   corpus reaches, more than 9 s from the seeds alone reached; each fuzzer's line shows its
#   coverage before and after), FUZZ_JOBS (build parallelism, and how many fuzzers run at once;
#   default 2), FUZZ_GROW=1 (after
#   each target's run, its corpus, minimised, replaces tests/fuzz/grown/<target>.b64: run
#   with FUZZ_SECONDS=60 or more after changing a parser or a fuzz target, and commit it).
# Exits 77 (ctest: skipped) when clang or the libFuzzer runtime is missing.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR [TARGET...]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fuzz_hosts_option fuzz_hostlist_expand fuzz_hostfile fuzz_lsf fuzz_slurm fuzz_rankfile
           fuzz_mode fuzz_topology fuzz_inventory fuzz_node_wire fuzz_link_agent fuzz_agent_wire
           fuzz_tcp_hello fuzz_rendezvous_server fuzz_net)
fi
seconds=${FUZZ_SECONDS:-3}
grow=${FUZZ_GROW:-0}
jobs=${FUZZ_JOBS:-2}
fuzz_build=$build/fuzz-build
run_dir=$fuzz_build/fuzz-run

if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "run_fuzzers: clang is not installed; skipping" >&2
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "run_fuzzers: clang++ -fsanitize=fuzzer does not link (libFuzzer runtime missing); skipping" >&2
  exit 77
fi

generator=()
if command -v ninja >/dev/null && [[ ! -f $fuzz_build/CMakeCache.txt ]]; then
  generator=(-G Ninja)
fi
# ccache (when installed, and no other launcher is in the environment) compiles the clang tree
# too, shared by every checkout: CCACHE_BASEDIR makes the paths under the source relative, and
# the build directory is mapped out of the debug information (-fdebug-prefix-map; ninja compiles
# in it), so ccache leaves the directory out of its hash. A fresh clone (CI) then hits what an
# earlier run in any other directory compiled.
launcher=${CMAKE_CXX_COMPILER_LAUNCHER:-}
if [[ -z $launcher ]] && command -v ccache >/dev/null; then
  launcher=ccache
fi
export CCACHE_BASEDIR=$src
prefix_map="-fdebug-prefix-map=$fuzz_build=."
[[ $fuzz_build == *[[:space:]]* ]] && prefix_map=""  # CMake would split the flag at a space
start=$SECONDS
echo "run_fuzzers: configuring $fuzz_build${launcher:+ (compiler launcher $launcher)}"
mkdir -p "$fuzz_build"
CC=clang CXX=clang++ cmake -S "$src" -B "$fuzz_build" "${generator[@]}" -DDDL_FUZZ=ON \
  -DDDL_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
  -DCMAKE_C_FLAGS="$prefix_map" -DCMAKE_CXX_FLAGS="$prefix_map" \
  >"$fuzz_build/configure.log" 2>&1 || {
  cat "$fuzz_build/configure.log" >&2
  exit 1
}
echo "run_fuzzers: building ${targets[*]}"
cmake --build "$fuzz_build" --parallel "$jobs" --target "${targets[@]}"
echo "run_fuzzers: configured and built in $((SECONDS - start)) s"
start=$SECONDS

# coverage LOG: "A -> B edges": what the corpus reached before the fuzzing and after it.
coverage() {
  local inited final
  inited=$(sed -n 's/^#[0-9]*[[:space:]]*INITED cov: \([0-9]*\).*/\1/p' "$1" | head -n 1)
  final=$(sed -n 's/^#[0-9]*[[:space:]]*DONE *cov: \([0-9]*\).*/\1/p' "$1" | tail -n 1)
  echo "${inited:-?} -> ${final:-?} edges"
}

# The corpus a longer run kept (FUZZ_GROW=1) lies in tests/fuzz/grown/TARGET.b64, one input a
# line in base64 (a few hundred small inputs a target: one text file, not hundreds).
# unpack B64 DIR: one file a line of B64 in DIR (grown-N).
unpack() {
  python3 -c 'import base64, sys
for n, line in enumerate(open(sys.argv[1])):
    with open(f"{sys.argv[2]}/grown-{n}", "wb") as f:
        f.write(base64.b64decode(line))' "$1" "$2"
}

# grow TARGET RUN_CORPUS (FUZZ_GROW=1): the run's corpus, minimised by libFuzzer's merge (the
# fewest inputs that keep every feature it reached) and less the hand-written seeds, replaces
# tests/fuzz/grown/TARGET.b64 in the source tree.
grow() {
  local target=$1 corpus=$2 seeds=$src/tests/fuzz/corpus/$1 merged=$run_dir/$1/merged
  local out=$src/tests/fuzz/grown/$1.b64 file
  rm -rf "$merged"
  mkdir -p "$merged" "$src/tests/fuzz/grown"
  [[ -d $seeds ]] && find "$seeds" -maxdepth 1 -type f -exec cp {} "$merged/" \;
  if ! "$fuzz_build/tests/fuzz/$target" -merge=1 -timeout=20 -rss_limit_mb=2048 -max_len=4096 \
      "$merged" "$corpus" >"$run_dir/$target/merge.log" 2>&1; then
    echo "run_fuzzers: $target: the merge failed; last lines of $run_dir/$target/merge.log:"
    tail -n 20 "$run_dir/$target/merge.log"
    return 1
  fi
  [[ -d $seeds ]] && find "$seeds" -maxdepth 1 -type f -printf '%f\0' |
    (cd "$merged" && xargs -0 -r rm -f --)
  # fuzz.smoke replays every kept input in each run: one slower than 20 ms (a host list of
  # 100,000s of names; the seeds keep such cases) is left out.
  "$fuzz_build/tests/fuzz/$target" -timeout=20 -rss_limit_mb=2048 "$merged"/* \
    >"$run_dir/$target/times.log" 2>&1 || true
  awk '/^Executed .* in [0-9]+ ms$/ && $(NF - 1) > 20 { print $2 }' "$run_dir/$target/times.log" |
    xargs -r rm -f --
  : >"$out"
  for file in "$merged"/*; do
    [[ -f $file ]] && { base64 -w0 "$file"; echo; } >>"$out"
  done
  echo "run_fuzzers: $target: $(wc -l <"$out") inputs in $out"
}

rm -rf "$run_dir"
mkdir -p "$run_dir"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
# fuzz_one TARGET: one fuzzer's run (and its grow); prints its report, returns 1 if it failed.
fuzz_one() {
  local target=$1 corpus artifacts log status execs crash
  corpus=$run_dir/$target/corpus
  artifacts=$run_dir/$target/artifacts
  mkdir -p "$corpus" "$artifacts"
  if [[ -d $src/tests/fuzz/corpus/$target ]]; then
    cp -R "$src/tests/fuzz/corpus/$target/." "$corpus/"
  fi
  if [[ -f $src/tests/fuzz/grown/$target.b64 ]]; then
    unpack "$src/tests/fuzz/grown/$target.b64" "$corpus"
  fi
  log=$run_dir/$target/fuzz.log
  status=0
  # -timeout: an input may legitimately expand to 1,000,000 host names (the parsers' limit),
  # which takes about 3 s under ASan here, and 20 s and more when ctest runs other tests beside
  # this one and another fuzzer (fuzz_hostfile's 'gpu[01-906]a[01-906]ax-sh', 820,836 names,
  # was reported so at load 10): a hang still ends the run, after 60 s.
  "$fuzz_build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 ||
    status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [[ $status -ne 0 ]]; then
    echo "run_fuzzers: $target FAILED (exit $status); last lines of $log:"
    tail -n 60 "$log"
    for crash in "$artifacts"/*; do
      [[ -f $crash ]] || continue
      echo "run_fuzzers: $target input $crash (base64): $(base64 -w0 "$crash")"
    done
    return 1
  fi
  echo "run_fuzzers: $target ok: ${execs:-?} runs in ${seconds}s, coverage $(coverage "$log"),"\
    "corpus $(find "$corpus" -type f | wc -l) inputs"
  [[ $grow != 1 ]] || grow "$target" "$corpus"
}

# FUZZ_JOBS fuzzers run at once, each for its FUZZ_SECONDS as when run alone (the same targets,
# seeds and kept corpus, less wall time); their reports print in the list's order.
pids=()
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  mkdir -p "$run_dir/$target"
  fuzz_one "$target" >"$run_dir/$target/report" 2>&1 &
  pids+=($!)
done
for i in "${!targets[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  cat "$run_dir/${targets[$i]}/report"
  ((status == 0)) || failed+=("${targets[$i]}")
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_fuzzers: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzzers: all ${#targets[@]} fuzzers ran clean ($((SECONDS - start)) s)"
