#!/usr/bin/env bash
# Fails when a tracked C/C++ source differs from what clang-format ($1) makes of it.
set -euo pipefail
clang_format=$1
cd "$2"
mapfile -t files < <(git ls-files -co --exclude-standard '*.cc' '*.h' | grep -v '^build')
bad=0
for f in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror "$f" 2>/dev/null; then
    echo "not formatted: $f (run: $clang_format -i $f)"
    bad=1
  fi
done
exit $bad
