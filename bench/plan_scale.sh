#!/usr/bin/env bash
# Plans for the largest clusters: `ddlrun --dry-run --topology-file` of Summit-sized and larger
# jobs, planned offline from the committed AC922 recording (6 GPUs a host), as the README's
# Summit example does. Prints, for each rank count, the hosts, the wall time and the peak memory
# of the whole ddlrun process (GNU time), and the size of the topology file it wrote.
#
# Usage: bench/plan_scale.sh [--quick] [--ddlrun PATH] [--xml FILE] [--ranks "27648 262144 ..."]
#                            [--output text|json|yaml]
#   --quick        27,648 ranks only
#   --ddlrun PATH  the binary (default build/ddlrun/ddlrun)
#   --xml FILE     the recording every host is (default tests/topologies/summit-ac922.xml)
#   --ranks LIST   rank counts (default "27648 262144 1048576"); hosts = ranks / GPUs a host,
#                  rounded up, and -n caps the ranks when that does not divide
#   --output FMT   the dry run's format (default text)
# Exit status: 0, 1 when a plan failed (its row says how), 2 bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ddlrun="$here/../build/ddlrun/ddlrun"
xml="$here/../tests/topologies/summit-ac922.xml"
counts="27648 262144 1048576" output=text
while (($#)); do
  case $1 in
    --quick) counts=27648 ;;
    --ddlrun) ddlrun=${2:?--ddlrun takes a path}; shift ;;
    --xml) xml=${2:?--xml takes a file}; shift ;;
    --ranks) counts=${2:?--ranks takes a list}; shift ;;
    --output) output=${2:?--output takes a format}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "plan_scale: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $ddlrun ]] || { echo "plan_scale: no ddlrun at $ddlrun (build it, or give --ddlrun)" >&2; exit 2; }
[[ -r $xml ]] || { echo "plan_scale: cannot read $xml" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "plan_scale: needs GNU time (/usr/bin/time, package time)" >&2; exit 2; }
gpus=$("$ddlrun" --dry-run --output json --host-xml "*=$xml" -H one true |
  sed -n 's/^ *"gpus": \([0-9]*\),*$/\1/p' | head -n1)
[[ $gpus =~ ^[1-9][0-9]*$ ]] || gpus=1
work=$(mktemp -d "${TMPDIR:-/tmp}/plan_scale.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failed=0
echo "plan_scale: $(basename "$xml") ($gpus GPUs a host), --output $output; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%10s %8s %9s %9s %13s\n' ranks hosts seconds "peak MB" "topology MB"
for n in $counts; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "plan_scale: rank counts are numbers, not '$n'" >&2; exit 2; }
  hosts=$(((n + gpus - 1) / gpus))
  args=(--dry-run --output "$output" --job-id scale --host-xml "*=$xml"
    -H "a[$(printf %06d 1)-$(printf %06d "$hosts")]" --topology-file "$work/plan.topology")
  ((hosts * gpus != n)) && args+=(-n "$n")
  if ! /usr/bin/time -f '%e %M' -o "$work/time" "$ddlrun" "${args[@]}" python train.py \
    >"$work/out" 2>"$work/err"; then
    failed=1
    printf '%10s %8s failed: %s\n' "$n" "$hosts" "$(grep -v '^$' "$work/err" | head -n1 | cut -c1-70)"
    continue
  fi
  read -r secs kb <"$work/time"
  size=$(stat -c %s "$work/plan.topology")
  awk -v n="$n" -v h="$hosts" -v s="$secs" -v kb="$kb" -v b="$size" \
    'BEGIN { printf "%10d %8d %9.2f %9.0f %13.1f\n", n, h, s, kb / 1024, b / 1e6 }'
  rm -f "$work/plan.topology"
done
exit "$failed"
