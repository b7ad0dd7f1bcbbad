#!/usr/bin/env bash
# The files `pip install .` put into the venv stand on their own: every ELF file (bin/ddlrun,
# libddl, the extensions) finds libddl through a run path relative to itself ($ORIGIN) and no
# run path names the source or build tree, ldd resolves libddl to the installed copy beside the
# package, and no installed text file (package files, ddl.pc, ddlConfig.cmake) names the source
# or build tree. libddl is there once (a wheel holds no links: libddl.so is a linker script),
# and a C program builds against it through the package's ddl.pc and runs as a job of one.
#   check_files.sh VENV SOURCE_DIR
set -uo pipefail
venv=$1 source=$(readlink -f "$2")
fail() {
  echo "check_files: $*" >&2
  exit 1
}
site=$(readlink -f "$(python -c 'import sysconfig; print(sysconfig.get_path("platlib"))')")
[[ -d $site/ddl ]] || fail "no package ddl in $site"
lib=$(find "$site/ddl/lib" -maxdepth 1 -name 'libddl.so.*' -type f | sort | head -n 1)
[[ -n $lib ]] || fail "no libddl.so.* in $site/ddl/lib"
copies=$(find "$site/ddl/lib" -maxdepth 1 -name 'libddl.so*' -type f -size +4k | wc -l)
((copies == 1)) || fail "libddl is in $site/ddl/lib $copies times: $(ls "$site/ddl/lib")"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ -n $soname ]] || fail "$lib has no SONAME"

# ddlrun's keeper (launcher/keeper_main.cc) beside it, loading the C library alone.
[[ -x $venv/bin/ddlrun-keeper ]] || fail "no $venv/bin/ddlrun-keeper beside ddlrun"
keeper_libs=$(ldd "$venv/bin/ddlrun-keeper" | awk '$1 ~ /^lib/ { print $1 }' | tr '\n' ' ')
[[ $keeper_libs == "libc.so.6 " ]] || fail "ddlrun-keeper loads '$keeper_libs', not libc.so.6 alone"
mapfile -t elves < <(find "$venv/bin/ddlrun" "$site/ddl" -type f \( -name '*.so*' -o -name ddlrun \) \
  -exec sh -c 'head -c 4 "$1" | grep -q ELF' sh {} \; -print)
((${#elves[@]} >= 3)) || fail "expected ddlrun, libddl and _ddl, found: ${elves[*]}"
for f in "${elves[@]}"; do
  paths=$(readelf -d "$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
  echo "$f: run path '${paths}'"
  IFS=: read -ra entries <<<"$paths"
  # $ORIGIN/..., or a system directory (Debian's PMIx lies in its own); never the tree built in.
  for e in "${entries[@]}"; do
    [[ $e == '$ORIGIN'* || ($e == /* && $e != "$source"*) ]] ||
      fail "$f: run path entry '$e' is neither relative to the file (\$ORIGIN) nor a system path"
  done
  [[ $f == "$lib" || $f == */lib/libddl.so* ]] && continue
  # The torch backend's libtorch and libc10 are loaded by `import torch` before it: ldd cannot
  # know, so only libddl is checked for it.
  got=$(ldd "$f" | awk -v so="$soname" '$1 == so { print $3 }')
  [[ $(readlink -f "$got") == "$(readlink -f "$site/ddl/lib/$soname")" ]] ||
    fail "$f loads $soname from '$got', not $site/ddl/lib"
  if [[ $f != */_torch_pg* ]] && ldd "$f" | grep -q 'not found'; then
    ldd "$f" >&2
    fail "$f: a library is not found"
  fi
done

while IFS= read -r -d '' f; do
  if grep -qF -- "$source" "$f"; then
    grep -nF -- "$source" "$f" | head -n 3 >&2
    fail "$f names the source tree $source"
  fi
done < <(find "$site/ddl" -type f ! -name '*.so*' ! -name '*.pyc' -print0)

# A C user of the wheel's libddl: pkg-config's flags, the run path to the package's lib/.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' '#include <ddl/ddl.h>' '#include <stdio.h>' \
  'int main(void) { if (ddl_init() != DDL_SUCCESS) return 1;' \
  '  printf("c consumer: rank %d of %d\n", ddl_rank(), ddl_size()); return ddl_finalize(); }' \
  >"$tmp/consumer.c"
flags=$(PKG_CONFIG_PATH=$site/ddl/lib/pkgconfig pkg-config --cflags --libs ddl) ||
  fail "pkg-config cannot read $site/ddl/lib/pkgconfig/ddl.pc"
# shellcheck disable=SC2086
cc "$tmp/consumer.c" -o "$tmp/consumer" $flags -Wl,-rpath,"$site/ddl/lib" ||
  fail "cc consumer.c $flags: cannot build against the wheel's libddl"
out=$(DDL_ALLOW_SINGLE=1 "$tmp/consumer") || fail "the C consumer failed: $out"
[[ $out == "c consumer: rank 0 of 1" ]] || fail "the C consumer printed '$out'"
echo "$out"
echo "check_files: ok (${#elves[@]} ELF files, no run path into $source)"
