#!/usr/bin/env bash
# Plans (--dry-run --output json|yaml) with arguments that are not UTF-8 ($'\xff', a cut
# sequence, an encoded surrogate) are read by Python's strict json and yaml readers; each bad
# byte shows as U+FFFD, valid UTF-8 passes as it is.
#   plan_utf8_test.sh DDLRUN PYTHON
set -uo pipefail
ddlrun=$1 python=$2
fail() {
  echo "plan_utf8_test: $*" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
args=(prog $'\xff' $'a\xc3' $'\xed\xa0\x80' 'é✓')
want='["prog", "\ufffd", "a\ufffd", "\ufffd\ufffd\ufffd", "\u00e9\u2713"]'
"$ddlrun" --dry-run --output json "${args[@]}" >json.out || fail "ddlrun --output json failed"
got=$("$python" -c 'import json, sys; print(json.dumps(json.load(sys.stdin.buffer)["program"]))' \
  <json.out) || fail "python's json cannot read the plan: $(grep -a program json.out)"
[[ $got == "$want" ]] || fail "json program: $got, expected $want"
"$ddlrun" --dry-run --output yaml "${args[@]}" >yaml.out || fail "ddlrun --output yaml failed"
if "$python" -c 'import yaml' 2>/dev/null; then
  got=$("$python" -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.buffer)["program"]))' \
    <yaml.out) || fail "python's yaml cannot read the plan: $(grep -a -A6 program yaml.out)"
  [[ $got == "$want" ]] || fail "yaml program: $got, expected $want"
fi
echo "plan_utf8_test: ok"
