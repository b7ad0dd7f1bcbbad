#!/usr/bin/env bash
# Installs the project into a temporary prefix and uses it from outside the source tree, as a
# user would: the consumer project (consumer/) through find_package(ddl) and consumer.c through
# pkg-config ddl, each run as a job of one (DDL_ALLOW_SINGLE=1) and as a 2-rank job through the
# installed ddlrun. Also checks the installed files: libddl and its SONAME links, only the two
# public headers, ddl.pc, ddlConfig.cmake, the man pages and ddlrun, which must find the
# installed libddl.
#   tests/install/run.sh CMAKE BUILD_DIR [CC]
set -uo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 CMAKE BUILD_DIR [CC]" >&2
  exit 2
fi
cmake=$1 build=$2 cc=${3:-cc}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-install-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
  echo "install test: $*" >&2
  exit 1
}
step() {
  echo "== $*"
}
# Runs "$@", showing its output only when it fails.
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "failed: $*"
  fi
}

# The launcher variables of whatever runs this test must not reach the consumers.
for v in $(env | sed -n 's/^\(DDL_[A-Z_]*\|OMPI_[A-Z_]*\|PMIX_[A-Z0-9_]*\|PMI_[A-Z_]*\|SLURM_[A-Z_]*\|JSM_[A-Z_]*\)=.*/\1/p'); do
  unset "$v"
done

step "cmake --install $build --prefix $prefix"
quiet "$cmake" --install "$build" --prefix "$prefix"

step "installed files"
lib=$(find "$prefix" -name 'libddl.so.*.*' -type f | head -n 1)
[[ -n $lib ]] || fail "no libddl.so.X.Y.Z under $prefix"
libdir=$(dirname "$lib")
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
[[ -n $soname ]] || fail "$lib has no SONAME"
[[ -L $libdir/$soname ]] || fail "no SONAME link $libdir/$soname"
[[ -L $libdir/libddl.so ]] || fail "no development link $libdir/libddl.so"
[[ $(readlink -f "$libdir/libddl.so") == "$(readlink -f "$lib")" ]] ||
  fail "$libdir/libddl.so does not lead to $lib"
headers=$(cd "$prefix/include" 2>/dev/null && find . -type f | sort | tr '\n' ' ')
[[ $headers == "./ddl/ddl.h ./ddl/ddl.hpp " ]] ||
  fail "installed headers are '$headers', expected ./ddl/ddl.h ./ddl/ddl.hpp"
for f in "$libdir/pkgconfig/ddl.pc" "$libdir/cmake/ddl/ddlConfig.cmake" \
  "$libdir/cmake/ddl/ddlConfigVersion.cmake" "$prefix/bin/ddlrun" "$prefix/bin/ddlrun-keeper" \
  "$prefix/share/man/man3/libddl.3" "$prefix/share/man/man1/ddlrun.1" \
  "$prefix/share/man/man5/ddl-topology.5"; do
  [[ -f $f ]] || fail "missing $f"
done
# ddlrun (and every consumer) must load the installed libddl, not the build tree's.
uses_installed_lib() {
  local got
  got=$(ldd "$1" | awk -v so="$soname" '$1 == so { print $3 }')
  [[ $(readlink -f "$got") == "$(readlink -f "$lib")" ]] ||
    fail "$1 loads '$got', not the installed $lib"
}
uses_installed_lib "$prefix/bin/ddlrun"
quiet "$prefix/bin/ddlrun" --help

step "pkg-config ddl: cc consumer.c"
export PKG_CONFIG_PATH=$libdir/pkgconfig
version=$(pkg-config --modversion ddl) || fail "pkg-config cannot find ddl in $PKG_CONFIG_PATH"
echo "ddl $version"
cflags=$(pkg-config --cflags ddl)
libs=$(pkg-config --libs ddl)
pc_libdir=$(pkg-config --variable=libdir ddl)
[[ $(readlink -f "$pc_libdir") == "$(readlink -f "$libdir")" ]] ||
  fail "ddl.pc's libdir is $pc_libdir, not $libdir"
mkdir -p "$tmp/pc"
# shellcheck disable=SC2086 # the flags are words
quiet "$cc" -std=c99 -Wall -Wextra -Werror -pedantic $cflags -o "$tmp/pc/consumer" \
  "$here/consumer/consumer.c" $libs -Wl,-rpath,"$pc_libdir"
# ddl.h is C89.
echo '#include <ddl/ddl.h>' >"$tmp/pc/c89.c"
# shellcheck disable=SC2086
quiet "$cc" -std=c89 -Wall -Wextra -Werror -pedantic $cflags -c -o "$tmp/pc/c89.o" "$tmp/pc/c89.c"

step "find_package(ddl): the consumer project"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
quiet "$cmake" -S "$here/consumer" -B "$tmp/cmake" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
ddl_dir=$(sed -n 's/^ddl_DIR:PATH=//p' "$tmp/cmake/CMakeCache.txt")
[[ $(readlink -f "$ddl_dir") == "$(readlink -f "$libdir/cmake/ddl")" ]] ||
  fail "find_package(ddl) found $ddl_dir, not $libdir/cmake/ddl"
quiet "$cmake" --build "$tmp/cmake"
grep -q -- "$prefix/include" "$tmp/cmake/compile_commands.json" ||
  fail "the consumer was not compiled with $prefix/include"
if grep -q -- "comm/include" "$tmp/cmake/compile_commands.json"; then
  fail "the consumer was compiled with the source tree's comm/include"
fi

consumers=("$tmp/pc/consumer" "$tmp/cmake/consumer_c" "$tmp/cmake/consumer_cxx")
for c in "${consumers[@]}"; do
  uses_installed_lib "$c"
done

# Each line given after the output must be in it.
expect() {
  local out=$1 line
  shift
  for line in "$@"; do
    grep -qxF -- "$line" <<<"$out" || {
      printf '%s\n' "$out" >&2
      fail "expected the line '$line'"
    }
  done
}

for c in "${consumers[@]}"; do
  name=${c#"$tmp/"}
  step "$name: a job of one"
  out=$(cd "$tmp" && DDL_ALLOW_SINGLE=1 "$c" 2>&1)
  status=$?
  if ((status != 0)); then
    printf '%s\n' "$out" >&2
    fail "$name exited with $status"
  fi
  printf '%s\n' "$out"
  expect "$out" "rank 0 of 1: 1 2 3 4"

  step "$name: 2 ranks through $prefix/bin/ddlrun"
  out=$(cd "$tmp" && "$prefix/bin/ddlrun" -H localhost:2 --no-probe --tag-output none "$c" 2>&1)
  status=$?
  if ((status != 0)); then
    printf '%s\n' "$out" >&2
    fail "ddlrun $name exited with $status"
  fi
  printf '%s\n' "$out"
  expect "$out" "rank 0 of 2: 3 6 9 12" "rank 1 of 2: 3 6 9 12"
done
python_package() {
  local cache=$build/CMakeCache.txt python rel configured site ext out r
  python=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$cache")
  [[ -f $build/python/ddl/__init__.py ]] || {
    echo "(no Python package in this build)"
    return
  }
  site=$(find "$prefix" -path '*/ddl/__init__.py' -printf '%h\n' | head -n 1)
  [[ -n $site ]] || fail "no package ddl under $prefix"
  site=$(dirname "$site")
  rel=${site#"$prefix/"}
  step "the Python package ddl in $site for $python"
  [[ -f $site/ddl/__init__.py && -f $site/ddl/torch.py && -f $site/ddl/_site/sitecustomize.py ]] ||
    fail "the package ddl is not complete in $site"
  for ext in "$build"/python/ddl/_*.so; do
    [[ -f $site/ddl/$(basename "$ext") ]] || fail "missing $site/ddl/$(basename "$ext")"
    uses_installed_lib "$site/ddl/$(basename "$ext")"
  done
  # For the configured prefix, the interpreter reads the package without PYTHONPATH when cmake
  # said so at configure time.
  configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$cache")
  if [[ $("$python" "$here/../../cmake/python_site_dir.py" "$configured") == "$rel;TRUE" ]]; then
    "$python" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$configured/$rel" ||
      fail "$python does not read $configured/$rel"
  fi
  out=$(cd "$tmp" && PYTHONPATH=$site "$python" -c 'import ddl; print(ddl._ddl.__file__)' 2>&1) ||
    fail "import ddl from $site: $out"
  [[ $out == "$site/ddl/"* ]] || fail "import ddl from $site loaded $out"

  step "python3 ranks of $prefix/bin/ddlrun, no PYTHONPATH"
  out=$(cd "$tmp" && env -u PYTHONPATH "$prefix/bin/ddlrun" -v -H localhost:2 --no-probe \
    --tag-output none "$python" -c 'import numpy, ddl
x = numpy.full(3, ddl.rank() + 1.0); ddl.allreduce(x)
print(f"rank {ddl.rank()}: {x.tolist()} from {ddl.__file__}")' 2>&1) || {
    printf '%s\n' "$out" >&2
    fail "the numpy job failed"
  }
  printf '%s\n' "$out"
  expect "$out" \
    "ddlrun: info: python package ddl for the ranks: $(readlink -f "$site")/ddl (first on their PYTHONPATH)"
  for r in 0 1; do
    expect "$out" "rank $r: [3.0, 3.0, 3.0] from $(readlink -f "$site")/ddl/__init__.py"
  done
  if "$python" -c 'import torch' 2>/dev/null && compgen -G "$site/ddl/_torch_pg*.so" >/dev/null; then
    out=$(cd "$tmp" && env -u PYTHONPATH "$prefix/bin/ddlrun" -H localhost:2 --no-probe \
      --tag-output none "$python" "$here/../python/check_ibm_style.py" 2>&1) || {
      printf '%s\n' "$out" >&2
      fail "the IBM-style torch script failed"
    }
    printf '%s\n' "$out"
    expect "$out" "rank 0 of 2 ok" "rank 1 of 2 ok"
  fi
}
python_package
echo "install test: ok"
