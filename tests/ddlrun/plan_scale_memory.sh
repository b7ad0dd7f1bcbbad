#!/usr/bin/env bash
# A plan of 262,144 ranks (43,691 Summit nodes from the committed AC922 recording, -n 262144)
# stays under a generous bound on the whole process's peak memory (RSS, GNU time; not time,
# which a loaded machine makes meaningless). Its topology file lists every rank, its text plan
# summarises the hosts and ranks, and its JSON lists every rank. bench/plan_scale.sh measures
# the same at 27,648 to 1,048,576 ranks. Then a plan of the most hosts a list may hold, a
# 1,000,000-line hostfile of one slot each (--no-probe), under HOSTS_MAX_MB: a plan keeps each
# rank's placement once, and no string a host where none is needed.
#
#   plan_scale_memory.sh DDLRUN TESTS_DIR [MAX_MB [HOSTS_MAX_MB]]   (defaults 1000, 1100)
set -euo pipefail
ddlrun=$1
tests=$2
max_mb=${3:-1000}
hosts_max_mb=${4:-1100}
[[ -x /usr/bin/time ]] || { echo "plan_scale_memory: skipped: no GNU time (/usr/bin/time)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--dry-run --job-id scale --host-xml "*=$tests/topologies/summit-ac922.xml"
  -H 'a[000001-043691]' -n 262144 --topology-file "$work/plan.topology")
/usr/bin/time -f '%M' -o "$work/rss" "$ddlrun" "${args[@]}" python train.py >"$work/plan.txt"
kb=$(tail -n1 "$work/rss")
echo "262,144 ranks, text plan: peak RSS $((kb / 1024)) MB (bound $max_mb MB)"
fail=0
if ((kb / 1024 > max_mb)); then
  echo "FAIL: peak RSS $((kb / 1024)) MB is above $max_mb MB" >&2
  fail=1
fi
ranks=$(grep -c '^  - {rank: ' "$work/plan.topology")
if [[ $ranks != 262144 ]]; then
  echo "FAIL: the topology file lists $ranks ranks, not 262144" >&2
  fail=1
fi
for line in '^  (43687 hosts not listed: above 36 hosts' '^  (262134 ranks not listed: above 36 hosts' \
  '^ranks:     262144 (43691 hosts: 43690 x 6 + 1 x 4)$' \
  '^  a043691 ' '^  262143 '; do
  if ! grep -q -- "$line" "$work/plan.txt"; then
    echo "FAIL: the text plan has no line matching '$line':" >&2
    head -n 30 "$work/plan.txt" >&2
    fail=1
  fi
done
if (($(wc -l <"$work/plan.txt") > 200)) || (($(wc -L <"$work/plan.txt") > 300)); then
  echo "FAIL: the text plan of 43,691 hosts has $(wc -l <"$work/plan.txt") lines, the longest" \
    "$(wc -L <"$work/plan.txt") characters" >&2
  fail=1
fi
/usr/bin/time -f '%M' -o "$work/rss" "$ddlrun" "${args[@]}" --output json python train.py >"$work/plan.json"
kb=$(tail -n1 "$work/rss")
echo "262,144 ranks, JSON plan: peak RSS $((kb / 1024)) MB"
listed=$(grep -c '^      "rank": ' "$work/plan.json" || true)
if [[ $listed != 262144 ]]; then
  echo "FAIL: the JSON plan lists $listed ranks, not 262144" >&2
  fail=1
fi
awk 'BEGIN { for (i = 1; i <= 1000000; i++) printf "n%07d\n", i }' >"$work/hosts"
/usr/bin/time -f '%M' -o "$work/rss" "$ddlrun" --dry-run --no-probe --job-id scale \
  --hostfile "$work/hosts" true >"$work/hosts.txt"
kb=$(tail -n1 "$work/rss")
echo "1,000,000 hosts from a hostfile, --no-probe: peak RSS $((kb / 1024)) MB (bound $hosts_max_mb MB)"
if ((kb / 1024 > hosts_max_mb)); then
  echo "FAIL: peak RSS $((kb / 1024)) MB is above $hosts_max_mb MB" >&2
  fail=1
fi
if ! grep -q '^ranks:     1000000 (1000000 hosts x 1)$' "$work/hosts.txt" ||
  ! grep -q '^  n1000000  .* not probed ' "$work/hosts.txt"; then
  echo "FAIL: the plan of 1,000,000 hosts does not say so:" >&2
  head -n 20 "$work/hosts.txt" >&2
  fail=1
fi
exit "$fail"
