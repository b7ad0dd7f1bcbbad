#!/usr/bin/env bash
# bench.gpu_bundle: scripts/gpu_bundle stages a bundle from this build (it checks itself: ldd,
# a 2-rank job from env -i and, as root, in a chroot of glibc and libstdc++ alone, the size);
# then bench/gpu_check.sh --bundle runs from it on this GPU-less host (bundle, probe, plan and
# the host ddl-bench ok; the Python steps skipped unless python3 is the bundle's 3.12); and a
# 2-rank Python job of the bundle's Python 3.12 imports the bundle's package ddl through the
# staged ddlrun with an empty environment. Skipped (77) without a Python 3.12 (pyenv's).
#   bundle_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/gpu-bundle-test
fail() { echo "bench.gpu_bundle: $*" >&2; exit 1; }

log=$("$root/scripts/gpu_bundle" --build "$build" --no-build --out "$out" 2>&1)
rc=$?
echo "$log"
if grep -q "no Python 3.12 here" <<<"$log"; then
  echo "bench.gpu_bundle: skipped: no Python 3.12"
  exit 77
fi
((rc == 0)) || fail "scripts/gpu_bundle exited $rc"
grep -qxF "python 3.12" "$out/MANIFEST" || fail "the MANIFEST does not say python 3.12"
grep -qE '^gpu_bundle: .*: [0-9]+ KiB in [0-9]+ files$' <<<"$log" || fail "no size line"

check=$("$root/bench/gpu_check.sh" --bundle "$out" --quick 2>&1)
rc=$?
echo "$check"
((rc == 0)) || fail "gpu_check.sh --bundle exited $rc"
for s in env bundle probe plan host-ddl table; do
  grep -qE "^-- $s: ok \(" <<<"$check" || fail "gpu_check step $s did not run ok from the bundle"
done

python=$(sed -n 's/^gpu_bundle: compiling ddl._ddl for Python //p' <<<"$log")
py=""
for p in "$(pyenv root 2>/dev/null || echo ~/.pyenv)"/versions/"$python"/bin/python3.12; do
  [[ -x $p ]] && py=$p
done
[[ -n $py ]] || fail "cannot find the Python $python the bundle was built with"
job=$(env -i PATH=/usr/bin:/bin PMIX_MCA_mca_base_component_path="$out/lib/pmix" \
  "$out/bin/ddlrun" -H localhost:2 --tag-output none "$py" -c \
  'import ddl; ddl.init(); ddl.barrier(); print("rank", ddl.rank(), "of", ddl.size(), ddl.__file__); ddl.finalize()' 2>&1)
rc=$?
echo "$job"
((rc == 0)) || fail "the Python job from the bundle exited $rc"
for r in 0 1; do
  grep -qxF "rank $r of 2 $out/python/ddl/__init__.py" <<<"$job" ||
    fail "rank $r did not import the bundle's ddl"
done
rm -rf --one-file-system "$out"
echo "bench.gpu_bundle: ok"
