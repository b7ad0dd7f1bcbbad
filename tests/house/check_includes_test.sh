#!/usr/bin/env bash
# The include check (cmake/check_includes.cmake) on small trees: the real tree passes; a
# forbidden arrow and a private header each fail with the exact message; other folders
# (tests/) may include anything.
set -uo pipefail
src=$1
check=$src/cmake/check_includes.cmake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

expect() {  # expect NAME WANT_RC WANT_OUTPUT TREE
  local out rc
  out=$(cmake -DSOURCE_DIR="$4" -DARROWS="$tmp/arrows.cmake" -P "$check" 2>&1)
  rc=$?
  if [[ $rc -ne $2 ]] || ! grep -qxF -- "$3" <<<"$out"; then
    echo "FAIL $1: rc $rc, wanted $2 and the line: $3"
    echo "$out"
    fail=1
  fi
}

if ! out=$(cmake -DSOURCE_DIR="$src" -P "$check" 2>&1); then
  echo "FAIL: the tree itself breaks the arrows:"; echo "$out"; fail=1
fi

# A small declaration of its own, so that the texts below do not follow the real lists.
cat >"$tmp/arrows.cmake" <<'ARROWS'
set(DDL_COMPONENTS base comm mapper launcher)
set(DDL_USES_base "")
set(DDL_USES_comm base)
set(DDL_USES_mapper base comm)
set(DDL_USES_launcher base comm mapper)
set(DDL_OFFERS_base "base/*")
set(DDL_OFFERS_comm comm/topology.h)
set(DDL_OFFERS_mapper mapper/mapper.h mapper/plan.h)
set(DDL_OFFERS_launcher launcher/launcher.h)
ARROWS

mkdir -p "$tmp/t1/comm" "$tmp/t1/launcher" "$tmp/t1/tests"
printf '#include <vector>\n\n#include "launcher/launcher.h"\n' >"$tmp/t1/comm/reader.cc"
printf '#include "mapper/place.h"\n#include "comm/x.h"\n' >"$tmp/t1/tests/any_test.cc"
expect arrow 1 "comm/reader.cc:3: includes launcher/launcher.h: comm/ may not include launcher/ (comm/ may include base/; the arrows are declared in cmake/arrows.cmake)" "$tmp/t1"

mkdir -p "$tmp/t2/base"
printf '#include "comm/topology.h"\n' >"$tmp/t2/base/text.h"
expect none 1 "base/text.h:1: includes comm/topology.h: base/ may not include comm/ (base/ may include none of our folders; the arrows are declared in cmake/arrows.cmake)" "$tmp/t2"

mkdir -p "$tmp/t3/launcher"
printf '#include "mapper/mapper.h"\n  #  include "mapper/place_internal.h" // why\n' >"$tmp/t3/launcher/x.h"
expect private 1 "launcher/x.h:2: includes mapper/place_internal.h: mapper/place_internal.h is private to mapper/ (other folders include mapper/mapper.h, mapper/plan.h; declared in cmake/arrows.cmake)" "$tmp/t3"

mkdir -p "$tmp/t4/mapper/sub"
printf '#include "base/anything.h"\n#include "comm/topology.h"\n#include "mapper/x.h"\n' >"$tmp/t4/mapper/sub/a.cc"
expect clean 0 "" "$tmp/t4"
[[ $fail == 0 ]] && echo "include check: all cases behave"
exit $fail
