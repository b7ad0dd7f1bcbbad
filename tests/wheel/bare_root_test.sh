#!/usr/bin/env bash
# wheel.bare_root: the binary wheel (scripts/build_wheel) as a cluster user without root installs
# it: in a chroot holding only Debian's Python 3.11 (the interpreter, its standard library and
# the libraries that loads), glibc and the C++ runtime (libstdc++, libgcc_s: what manylinux
# wheels such as torch's assume), run as user nobody (no root inside), with no compiler and no
# -dev package, a fresh venv gets `pip install FILE.whl` (pip from Debian's pip wheel, packages
# from a read-only wheelhouse mounted in: torch 2.13's CPU wheel from local disk, tensorflow-cpu
# and numpy downloaded once into BUILD/wheelhouse). Then, through the venv's ddlrun:
#   - 2 ranks import ddl and allreduce numpy arrays;
#   - 2 ranks of torch 2.13: init_process_group("ddl") and all_reduce;
#   - 2 ranks of TensorFlow: ddl.tensorflow.allreduce;
#   - each rank's PMIx plugins are the wheel's (/proc/self/maps);
#   - a torch or TensorFlow version the wheel was not built for gets the exact message.
# As root only (the chroot and its private mounts): skipped (77) otherwise.
#   bare_root_test.sh SOURCE_DIR BUILD_DIR WHEEL_DIR
set -uo pipefail
source=$(cd "$1" && pwd) build=$(cd "$2" && pwd) dist=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() {
  echo "wheel.bare_root: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] || { echo "wheel.bare_root: skipped: needs root (chroot)"; exit 77; }
wheel=$(compgen -G "$dist/ddlrun-*-manylinux_*.whl" | sort | tail -n 1)
[[ -n $wheel ]] || fail "no wheel in $dist: scripts/build_wheel $dist (scripts/setup does)"
echo "== $wheel: $(($(stat -c %s "$wheel") / 1024)) KiB"
pip_wheel=$(compgen -G "/usr/share/python-wheels/pip-*.whl" | head -n 1)
[[ -n $pip_wheel ]] || fail "no Debian pip wheel in /usr/share/python-wheels (apt-get install python3-pip-whl)"

# The wheelhouse: offline when it already holds everything, else from pip's index.
# TensorFlow: the version the wheel's ops are for.
tf=$(unzip -l "$wheel" | sed -n 's|.* ddl/_variants/tf-\([0-9.]*\)/_tf_ops.so$|\1|p' | tail -n 1)
[[ -n $tf ]] || fail "$wheel has no TensorFlow ops (built with a Python without tensorflow?)"
house=$build/wheelhouse
want=(torch==2.13.0 "tensorflow-cpu==$tf.*" numpy)
mkdir -p "$house"
if ! python3 "$pip_wheel/pip" download -q --no-index --find-links "$house" -d "$house" \
  "${want[@]}" >/dev/null 2>&1; then
  echo "== pip download ${want[*]} into $house"
  python3 "$pip_wheel/pip" download -q -d "$house" "${want[@]}" >/dev/null ||
    fail "pip cannot download ${want[*]} into $house (its index out of reach?)"
fi

work=$(mktemp -d "$build/wheel-bare.XXXXXX") || exit 1
root=$work/root
cleanup() {
  if grep -q " $root/" /proc/mounts; then
    echo "wheel.bare_root: $root still has mounts; not removing it" >&2
    return
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
"$here/make_bare_root.sh" "$root" || fail "could not make the bare root $root"
cp "$wheel" "$pip_wheel" "$root/tmp/" && cp "$here/bare_jobs.py" "$root/tmp/" || exit 1
mkdir -p "$root/wheelhouse" "$root/home/user" && chown 65534:65534 "$root/home/user"
log=$work/jobs.log
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin unshare --mount --propagation private -- /bin/sh -c \
  'mount -t proc proc "$1/proc" && mount -t sysfs sysfs "$1/sys" &&
   mount --bind "$2" "$1/wheelhouse" && mount -o remount,bind,ro "$1/wheelhouse" &&
   exec chroot --userspec=65534:65534 "$1" /usr/bin/python3 /tmp/bare_jobs.py "$3"' \
  sh "$root" "$house" "$tf" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
((status == 0)) || fail "the jobs in the bare root failed ($status; above)"
grep -qx "bare_jobs: ok" "$log" || fail "the jobs did not all run"
echo "wheel.bare_root: ok"
