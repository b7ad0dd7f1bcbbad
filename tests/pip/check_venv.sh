#!/usr/bin/env bash
# The venv's pip-installed ddlrun, as a user of the wheel runs it (through in_venv.sh: no
# PYTHONPATH, no LD_LIBRARY_PATH): `ddlrun` on PATH is the venv's; `import ddl` in the venv's
# python outside a job loads the installed package; a 2-rank job of `ddlrun ... python -c`
# allreduces numpy arrays with the package from site-packages; and when the venv has torch and
# the package its backend, init_process_group("ddl") + all_reduce on 2 ranks of that torch.
#   check_venv.sh VENV
set -uo pipefail
venv=$(cd "$1" && pwd) || exit 1
fail() {
  echo "check_venv: $*" >&2
  exit 1
}
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
[[ -z ${PYTHONPATH:-}${LD_LIBRARY_PATH:-} ]] || fail "PYTHONPATH or LD_LIBRARY_PATH is set"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-venv-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

[[ $(command -v ddlrun) == "$venv/bin/ddlrun" ]] || fail "ddlrun on PATH is $(command -v ddlrun)"
site=$(python -c 'import sysconfig; print(sysconfig.get_path("platlib"))') || fail "no python"
site=$(readlink -f "$site")
echo "== import ddl outside a job"
out=$(python -c 'import ddl; print(ddl.__file__); print(ddl._ddl.__file__)' 2>&1) ||
  fail "import ddl: $out"
echo "$out"
expect "$out" "$site/ddl/__init__.py"
grep -qx "$site/ddl/_ddl\..*\.so" <<<"$out" || fail "the extension is not the installed one"

echo "== ddlrun -H localhost:2 python -c (numpy allreduce)"
out=$(ddlrun -v -H localhost:2 --no-probe --tag-output none python -c 'import numpy, ddl
x = numpy.full(3, ddl.rank() + 1.0); ddl.allreduce(x)
print(f"rank {ddl.rank()} of {ddl.size()}: {x.tolist()} from {ddl.__file__}")' 2>&1) ||
  fail "the job failed: $out"
echo "$out"
expect "$out" "ddlrun: info: python package ddl for the ranks: $site/ddl (first on their PYTHONPATH)"
for r in 0 1; do
  expect "$out" "rank $r of 2: [3.0, 3.0, 3.0] from $site/ddl/__init__.py"
done

if ! python -c 'import torch' 2>/dev/null; then
  echo "check_venv: ok (no torch in $venv)"
  exit 0
fi
compgen -G "$site/ddl/_torch_pg*.so" >/dev/null ||
  fail "$venv has torch $(python -c 'import torch; print(torch.__version__)') but the package" \
    "no torch backend (ddl/_torch_pg)"
echo "== ddlrun -H localhost:2 python: init_process_group(\"ddl\") on the venv's torch"
out=$(ddlrun -H localhost:2 --no-probe --tag-output none python -c 'import torch
import torch.distributed as dist
dist.init_process_group("ddl")
t = torch.full((4,), float(dist.get_rank() + 1)); dist.all_reduce(t)
print(f"rank {dist.get_rank()} torch {torch.__version__}: {t.tolist()}")
dist.destroy_process_group()' 2>&1) || fail "the torch job failed: $out"
echo "$out"
version=$(python -c 'import torch; print(torch.__version__)')
for r in 0 1; do
  expect "$out" "rank $r torch $version: [3.0, 3.0, 3.0, 3.0]"
done
echo "check_venv: ok"
