#!/usr/bin/env bash
# wheel.debian_torch: the binary wheel serves Debian's own torch (1.13, python3-torch) too: a
# venv of /usr/bin/python3 with --system-site-packages (Debian's torch and numpy) gets
# `pip install --no-deps FILE.whl`, and its ddlrun runs a 2-rank init_process_group("ddl") +
# all_reduce on that torch, whose backend is the wheel's variant for it. This host has Debian's
# PMIx, and the job's environment points PMIx at that PMIx's plugins: every rank's plugins must
# still be the wheel's (/proc/self/maps; scripts/wheel/plugin_paths.c). Skipped (77) where
# /usr/bin/python3 has no torch or the wheel was built without a variant for it.
#   debian_torch_test.sh WHEEL_DIR
set -uo pipefail
dist=$1
fail() {
  echo "wheel.debian_torch: $*" >&2
  exit 1
}
wheel=$(compgen -G "$dist/ddlrun-*-manylinux_*.whl" | sort | tail -n 1)
[[ -n $wheel ]] || fail "no wheel in $dist: scripts/build_wheel $dist (scripts/setup does)"
torch=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  { echo "wheel.debian_torch: skipped: /usr/bin/python3 has no torch"; exit 77; }
minor=$(cut -d. -f1-2 <<<"$torch")
if ! unzip -l "$wheel" | grep -q " ddl/_variants/torch-$minor/_torch_pg"; then
  echo "wheel.debian_torch: skipped: $wheel has no torch backend for torch $minor"
  exit 77
fi
pip_wheel=$(compgen -G "/usr/share/python-wheels/pip-*.whl" | head -n 1)
[[ -n $pip_wheel ]] || fail "no Debian pip wheel in /usr/share/python-wheels"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-wheel-debian.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages --without-pip "$venv" || fail "python3 -m venv failed"
"$venv/bin/python" "$pip_wheel/pip" install -q --no-deps --no-index "$wheel" ||
  fail "pip install $wheel failed"
host_pmix=$(dirname "$(readlink -f /usr/lib/x86_64-linux-gnu/libpmix.so.2)")/pmix
out=$(env -i HOME="$tmp" PATH="$venv/bin:/usr/bin:/bin" \
  PMIX_MCA_mca_base_component_path="$host_pmix" PMIX_PKGLIBDIR="$host_pmix" \
  ddlrun -H localhost:2 --tag-output none \
  python -c 'import os, sys, torch, torch.distributed as dist
dist.init_process_group("ddl")
t = torch.full((4,), float(dist.get_rank() + 1)); dist.all_reduce(t)
pg = sys.modules["ddl._torch_pg"].__file__.split("/site-packages/")[1]
maps = open("/proc/self/maps").read().split()
pmix = sorted({os.path.dirname(p) for p in maps if "/pmix" in p and p.endswith(".so")})
print(f"rank {dist.get_rank()} torch {torch.__version__}: {t.tolist()} {pg} pmix from {pmix}")
dist.destroy_process_group()' 2>&1) || fail "the torch $torch job failed: $out"
echo "$out"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
backend=ddl/_variants/torch-$minor/_torch_pg.cpython-311-x86_64-linux-gnu.so
for r in 0 1; do
  grep -qxF "rank $r torch $torch: [3.0, 3.0, 3.0, 3.0] $backend pmix from ['$site/ddl/lib/pmix']" \
    <<<"$out" || fail "rank $r did not all_reduce on torch $torch through the wheel's backend" \
    "and PMIx plugins"
done
echo "wheel.debian_torch: ok"
