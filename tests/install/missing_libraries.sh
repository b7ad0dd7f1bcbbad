#!/usr/bin/env bash
# A missing system library stops the configure with one error that names every missing one and
# the Debian packages to install (cmake/dependencies.cmake), text compared exactly:
#  1. ddl_missing_message for one library (cmake -P);
#  2. a real configure of the project with CLI11 and libssh hidden from find_package
#     (CMAKE_DISABLE_FIND_PACKAGE_*) and hwloc and PMIx from pkg-config (an empty
#     PKG_CONFIG_LIBDIR): all four in one error, not the first alone.
#   missing_libraries.sh CMAKE SOURCE_DIR
set -uo pipefail
cmake=$1 source=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-missing-libs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "missing_libraries: $*" >&2
  exit 1
}
# The message of CMake's first error in $1, without its header and call stack.
error_text() {
  sed -n '/^CMake Error/,/^Call Stack\|^-- Configuring incomplete/p' <<<"$1" |
    sed '1d;/^Call Stack/d;/^-- Configuring incomplete/d' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
}
same() {
  local what=$1 got=$2 want=$3
  if [[ $got != "$want" ]]; then
    printf 'got:\n%s\nwanted:\n%s\n' "$got" "$want" >&2
    diff <(echo "$want") <(echo "$got") >&2
    fail "$what: the error text differs"
  fi
  echo "missing_libraries: $what: ok"
}

cat >"$tmp/one.cmake" <<CMAKE
include($source/cmake/dependencies.cmake)
ddl_missing_message(text "hwloc >= 2.9|libhwloc-dev")
message(FATAL_ERROR "\${text}")
CMAKE
out=$("$cmake" -P "$tmp/one.cmake" 2>&1)
same "one library" "$(error_text "$out")" "  ddlrun: a system library is missing:

    hwloc >= 2.9 (libhwloc-dev)

  Install them (Debian, Ubuntu) and configure again:

    sudo apt-get install libhwloc-dev

  or run scripts/setup, which installs every package the build needs."

mkdir -p "$tmp/pkgconfig"
out=$(PKG_CONFIG_LIBDIR=$tmp/pkgconfig PKG_CONFIG_PATH='' "$cmake" -S "$source" -B "$tmp/build" \
  -DDDL_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_libssh=ON 2>&1)
status=$?
((status != 0)) || fail "the configure succeeded without CLI11, libssh, hwloc and PMIx"
[[ $(grep -c '^CMake Error' <<<"$out") == 1 ]] || {
  printf '%s\n' "$out" >&2
  fail "expected exactly one CMake error"
}
same "a configure without four libraries" "$(error_text "$out")" \
  "  ddlrun: 4 system libraries are missing:

    CLI11 >= 2.1 (libcli11-dev)
    libssh >= 0.10 (libssh-dev)
    hwloc >= 2.9 (libhwloc-dev)
    PMIx >= 4.2 (libpmix-dev)

  Install them (Debian, Ubuntu) and configure again:

    sudo apt-get install libcli11-dev libssh-dev libhwloc-dev libpmix-dev

  or run scripts/setup, which installs every package the build needs."
