#!/usr/bin/env bash
# python.hvd_choice: which horovod the ranks import. A stand-in for an installed Horovod (a
# test double: no Horovod package exists in Debian) lies on the ranks' PYTHONPATH; with
# --horovod auto (the default) `import horovod` finds it, with --horovod ddl libddl's
# horovod.torch; outside ddlrun nothing of ours is importable; -v names the choice.
#   hvd_choice.sh DDLRUN PYTHON
set -uo pipefail
ddlrun=$1 python=$2
fake=$(mktemp -d /tmp/hvd_choice.XXXXXX)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/horovod"
echo 'WHO = "installed"' >"$fake/horovod/__init__.py"
probe='import horovod; print("horovod:", getattr(horovod, "WHO", "ddl"), flush=True)'
fail=0
check() {  # check NAME WANT ddlrun-args...
  local name=$1 want=$2 out
  shift 2
  out=$("$ddlrun" --tag-output none -H localhost:2 --no-probe -x "PYTHONPATH=$fake" "$@" \
    "$python" -c "$probe" 2>&1)
  if [[ $(grep -c "^horovod: $want\$" <<<"$out") != 2 ]]; then
    echo "FAIL $name: wanted 'horovod: $want' from both ranks, got:"; echo "$out"; fail=1
  fi
}
check auto installed
check auto_explicit installed --horovod auto
check ddl ddl --horovod ddl
out=$("$ddlrun" -v --dry-run -H localhost:1 --no-probe --horovod ddl true 2>&1)
out+=$("$ddlrun" -v -H localhost:1 --no-probe --horovod ddl true 2>&1)
if ! grep -q "horovod for the ranks: libddl's horovod.torch (.*/ddl/_horovod), ahead of any installed Horovod (--horovod ddl)" <<<"$out"; then
  echo "FAIL -v: no line naming the choice:"; echo "$out"; fail=1
fi
if (cd / && env -u PYTHONPATH "$python" -c 'import horovod' 2>/dev/null); then
  echo "FAIL: horovod is importable outside a job"; fail=1
fi
out=$("$ddlrun" -H localhost:1 --no-probe --horovod mpi true 2>&1)
if [[ $out != "ddlrun: error: --horovod: unknown horovod 'mpi'; use one of auto, ddl" ]]; then
  echo "FAIL: --horovod mpi: $out"; fail=1
fi
((fail == 0)) && echo "hvd_choice: auto keeps an installed Horovod first, ddl puts libddl's first"
exit $fail
