#!/bin/bash
# Golden-file test of the mapper's plans: for every hwloc recording in tests/topologies and for
# 1, 2, 18 and 36 hosts, `ddlrun --dry-run` (text) and the topology file it writes must equal the
# files committed under tests/golden/<recording>/. The plans are made offline (--host-xml), so
# they are the same on every machine.
#
#   check_golden.sh DDLRUN TESTS_DIR            compare; print a diff and fail on any change
#   check_golden.sh DDLRUN TESTS_DIR --update   rewrite the golden files (then review the diff)
#
# scripts/update-golden builds ddlrun and runs the second form.
set -euo pipefail

ddlrun=$1
tests=$2
update=${3:-}
if [[ -n $update && $update != --update ]]; then
  echo "usage: $0 DDLRUN TESTS_DIR [--update]" >&2
  exit 2
fi

tests=$(cd "$tests" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ddlrun runs in a scratch directory where the recordings and the topology file have short
# relative names, so its output is the same on every machine.
ln -s "$tests/topologies" "$work/topologies"
cd "$work"

failed=0
checked=0
for xml in topologies/*.xml; do
  name=$(basename "$xml" .xml)
  mkdir -p "$tests/golden/$name"
  for hosts in 1 2 18 36; do
    args=(--dry-run --job-id golden --host-xml "*=$xml" -H "node[01-$(printf %02d "$hosts")]")
    # 36 hosts: two racks of 18, so the third ring dimension is exercised too.
    if [[ $hosts == 36 ]]; then args+=(--nodes 18); fi
    args+=(--topology-file plan.topology python train.py)
    base="$tests/golden/$name/${hosts}hosts"
    if ! "$ddlrun" "${args[@]}" >"$work/plan" 2>"$work/err"; then
      echo "FAIL $base: ddlrun ${args[*]} exited non-zero:" >&2
      cat "$work/err" >&2
      failed=1
      continue
    fi
    # Warnings on stderr are part of the plan's story; keep them with it.
    if [[ -s $work/err ]]; then
      { echo "# stderr:"; sed 's/^/# /' "$work/err"; } >>"$work/plan"
    fi
    for kind in txt topology; do
      src=$work/plan
      [[ $kind == topology ]] && src=$work/plan.topology
      checked=$((checked + 1))
      if [[ -n $update ]]; then
        cp "$src" "$base.$kind"
      elif ! diff -u "$base.$kind" "$src" >"$work/diff" 2>&1; then
        echo "FAIL golden/$name/${hosts}hosts.$kind differs from the plan ddlrun makes now:" >&2
        head -n 60 "$work/diff" >&2
        failed=1
      fi
    done
  done
done

if [[ -n $update ]]; then
  echo "rewrote $checked golden files under $tests/golden; review them with git diff"
elif [[ $failed == 0 ]]; then
  echo "all $checked golden files match"
else
  echo "golden files differ; if the change is intended, run scripts/update-golden and commit" >&2
  exit 1
fi
