#!/usr/bin/env bash
# PyTorch's own distributed suite (bench/torch_dist_suite.py) on gloo and on ddl, side by side:
# for each world size, gloo's run then ddl's, then each pair's counts and the tests whose
# outcome differs. Each test runs in new rank processes, forked from one server that imported
# torch and the suite once (torch_dist_suite.py, _start_ranks): the whole class, 285 tests (194
# skip on a CPU host), takes minutes a backend; TORCH_DIST_SUITE_START=spawn starts every rank
# as torch's driver does, a new interpreter importing everything again (30-60 s a test on the
# loaded 2-core machine, hours a backend). -k narrows it.
#   bench/torch_dist_suite.sh [--python PY] [--ranks "2 3"] [--debug DETAIL] [--out DIR]
#                             [-k pattern ...]
# PY (default build/venv/bin/python) needs torch 2.x, expecttest and the package ddl (the
# venv's, or build/python first on PYTHONPATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=build/venv/bin/python ranks="2 3" out=$(mktemp -d /tmp/torch_dist_suite.XXXXXX) debug=OFF
patterns=()
while (($#)); do
  case $1 in
    --python) python=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --debug) debug=$2; shift 2 ;;
    --out) out=$2; mkdir -p "$out"; shift 2 ;;
    -k) patterns+=(-k "$2"); shift 2 ;;
    *) echo "torch_dist_suite.sh: unknown argument '$1' (see the comment atop the script)" >&2
       exit 2 ;;
  esac
done
"$python" -c 'import expecttest' 2>/dev/null || {
  echo "torch_dist_suite.sh: $python has no expecttest (torch's test helpers need it):" \
    "$python -m pip install expecttest" >&2
  exit 1
}
for n in $ranks; do
  for backend in gloo ddl; do
    echo "torch_dist_suite: $backend, $n ranks (log $out/$backend.$n.log)"
    BACKEND=$backend WORLD_SIZE=$n TORCH_DISTRIBUTED_DEBUG=$debug \
      "$python" "$here/torch_dist_suite.py" --out "$out/$backend.$n.json" "${patterns[@]}" \
      >"$out/$backend.$n.log" 2>&1 || true
  done
  "$python" "$here/torch_dist_suite.py" --compare "$out/gloo.$n.json" "$out/ddl.$n.json"
done
