#!/usr/bin/env bash
# scripts/setup_venv with pip's index out of reach (PIP_INDEX_URL on a closed local port, pip's
# configuration files ignored: no local wheels either) stops with status 1 and the message that
# says the index cannot be reached and how to set up without the venv, exactly.
#   setup_offline.sh SOURCE_DIR [PYTHON]
set -uo pipefail
source=$1 python=${2:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-setup-offline.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_NO_INDEX
out=$(PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 \
  PIP_DEFAULT_TIMEOUT=5 DDL_PYTHON=$python "$source/scripts/setup_venv" "$tmp/venv" 2>&1)
status=$?
printf '%s\n' "$out"
if ((status != 1)); then
  echo "setup_offline: setup_venv exited with $status, not 1" >&2
  exit 1
fi
want="setup: pip cannot install torch==2.13.0 tensorflow-cpu tf-keras numpy scikit-build-core>=0.10 into\
 $tmp/venv: its package index (PyPI, or PIP_INDEX_URL) cannot be reached or lacks a package\
 (pip's output above). Connect to PyPI and run scripts/setup again; DDL_NO_VENV=1 scripts/setup\
 sets up everything but the venv (its tests then skip)."
if [[ $(tail -n 1 <<<"$out") != "$want" ]]; then
  echo "setup_offline: the last line is not: $want" >&2
  exit 1
fi
echo "setup_offline: ok"
