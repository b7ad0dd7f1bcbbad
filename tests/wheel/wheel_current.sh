#!/usr/bin/env bash
# The fixture of the wheel tests: BUILD/dist holds a binary wheel (scripts/build_wheel, which
# scripts/setup runs) no older than any file git tracks or sees here; else it is built again
# (incremental: pip's build/wheel/ of scripts/setup_venv). Skipped (77) without the venv of
# scripts/setup, whose torch and TensorFlow the wheel's extensions are built against.
#   wheel_current.sh SOURCE_DIR VENV DIST_DIR
set -uo pipefail
source=$1 venv=$2 dist=$3
if [[ ! -x $venv/bin/python ]]; then
  echo "wheel_current: no venv at $venv (scripts/setup makes it): skipped"
  exit 77
fi
wheel=$(compgen -G "$dist/ddlrun-*-manylinux_*.whl" | sort | tail -n 1)
if [[ -n $wheel ]]; then
  wheel=$(realpath "$wheel")
  newer=$(cd "$source" && git ls-files -co --exclude-standard |
    while read -r f; do [[ -f $f && $f -nt $wheel ]] && echo "$f"; done | head -n 3)
  if [[ -z $newer ]]; then
    echo "wheel_current: $wheel is newer than every source file"
    exit 0
  fi
  echo "wheel_current: $wheel is older than $(tr '\n' ' ' <<<"$newer")"
fi
rm -f "$dist"/ddlrun-*.whl
"$source/scripts/build_wheel" --python "$venv/bin/python" "$dist"
