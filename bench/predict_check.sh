#!/usr/bin/env bash
# The cost model (ddlrun --dry-run's prediction, man ddlrun: COST MODEL) against measurement:
# on the namespace clusters of bench/allreduce_compare.sh, every mode the dry run predicts is
# run with ddl-bench, and the predicted time of one allreduce of --size (16 MiB) is printed
# beside the measured one (ddl-bench's mean over its timed iterations, max over ranks).
#
# The clusters (tests/netns/hosts.sh; root):
#   flat   3 hosts x 2 ranks, every host's link shaped to --rate (1gbit) each way (netns_up,
#          netns_shape); ddlrun gets --link host=RATE.
#   racks  2 racks x 2 hosts x 2 ranks, host links --rate, the racks' bridges joined by one
#          veth pair shaped to --uplink (250mbit) each way (netns_up_racks, netns_shape_uplink);
#          ddlrun gets --link host=RATE --link rack=UPLINK and --nodes 2 (the racks; with
#          --mode auto, so the model picks the mode).
#   ring   --hosts (32) hosts x --ranks (2) ranks, every host's link shaped to --rate: DDL's
#          layout p:RANKSxHOSTSx1x1 has one ring of all the hosts, which libddl runs as
#          sub-rings beyond 16 (DDL_MAX_RING: 32 as 8 x 4) in chunks that grow with the longest
#          (comm::pipeline_chunk_bytes); beside the flat ring. Up to 256 hosts
#          (tests/netns/hosts.sh); not run unless asked for with --only ring.
# The links are shaped with known rates, so ddlrun is told them with --link: the user's path
# (the probe sees a veth's nominal 10 Gbit/s, not tc's limit), in tc's spelling (--link takes
# 1gbit as 1Gbit). Latencies are the model's defaults.
#
# Every run is `ddlrun --launcher ssh --tcp --mode MODE ddl-bench -b SIZE -e SIZE -w 1 -n N`.
# Each row shows the predicted time, the measured one and the model's bandwidth bound (the
# busiest link's bytes alone: no latency, no pipeline fill).
# The check: each mode's prediction within --tolerance (20%) of its measured time, and the
# mode --mode auto picks the fastest measured, within --pick-slack (5%): two modes the model
# predicts within a few per cent of each other (on the racks, p:2x2x2x1 and p:4x2x1x1: the
# uplink bounds both) are a tie that measurement noise on a shared machine may order either way.
#
# Usage: bench/predict_check.sh [--build DIR] [--only flat|racks|ring] [--size SIZE] [--iters N]
#                               [--rate RATE] [--uplink RATE] [--tolerance PCT]
#                               [--pick-slack PCT] [--tell-rate RATE] [--hosts N] [--ranks R]
#                               [--run-timeout SECONDS]
#   --hosts N, --ranks R  the ring cluster: N hosts (2..256, default 32) of R ranks (default 2)
#   --tell-rate RATE  tell ddlrun the hosts' links run at RATE instead of --rate (a wrong
#                     fabric: the check should then fail)
#   --run-timeout S   each ddl-bench run's limit (default 300 s); a run that reaches it is named
#                     as timed out and its mode left out of the table (never shown as 0 ms)
# Exit status: 0 when every check passed, 1 when one failed (or a run did), 2 bad usage, 77
# when the namespace clusters cannot be made here (not root, no ip netns or sshd).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
only="" size=16M iters=3 rate=1gbit uplink=250mbit tolerance=20 slack=5 told="" hosts=32 ranks=2
run_timeout=300
while (($#)); do
  case $1 in
    --build) build=${2:?--build takes a directory}; shift ;;
    --only) only=${2:?--only takes flat or racks}; shift ;;
    --size) size=${2:?--size takes a size like 16M}; shift ;;
    --iters) iters=${2:?--iters takes a count}; shift ;;
    --rate) rate=${2:?--rate takes a rate like 1gbit}; shift ;;
    --uplink) uplink=${2:?--uplink takes a rate like 250mbit}; shift ;;
    --tell-rate) told=${2:?--tell-rate takes a rate like 2gbit}; shift ;;
    --tolerance) tolerance=${2:?--tolerance takes a percentage}; shift ;;
    --pick-slack) slack=${2:?--pick-slack takes a percentage}; shift ;;
    --hosts) hosts=${2:?--hosts takes a number}; shift ;;
    --ranks) ranks=${2:?--ranks takes a number}; shift ;;
    --run-timeout) run_timeout=${2:?--run-timeout takes seconds}; shift ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "predict_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $only in
  "" | flat | racks | ring) ;;
  *) echo "predict_check: --only takes flat, racks or ring, not '$only'" >&2; exit 2 ;;
esac
if ! [[ $hosts =~ ^[0-9]+$ ]] || ((hosts < 2 || hosts > 256)); then
  echo "predict_check: --hosts takes 2 to 256, not '$hosts'" >&2
  exit 2
fi
if ! [[ $run_timeout =~ ^[1-9][0-9]*$ ]]; then
  echo "predict_check: --run-timeout takes a whole number of seconds, not '$run_timeout'" >&2
  exit 2
fi
if ! [[ $ranks =~ ^[0-9]+$ ]] || ((ranks < 2 || ranks > 64)); then
  echo "predict_check: --ranks takes 2 to 64 (DDL's layout needs two dimensions), not '$ranks'" >&2
  exit 2
fi
ddlrun=$(realpath "$build/ddlrun/ddlrun" 2>/dev/null)
bench=$(realpath "$build/bench/comm/ddl-bench" 2>/dev/null)
if [[ ! -x $ddlrun || ! -x $bench ]]; then
  echo "predict_check: no ddlrun or ddl-bench under $build (build it, or give --build DIR)" >&2
  exit 2
fi

# shellcheck source=SCRIPTDIR/../tests/netns/hosts.sh
source "$here/../tests/netns/hosts.sh"
failed=0
told=${told:-$rate}

# predictions HOSTS OPTS...: the dry run's modes, one a line: "MODE SECONDS CHOSEN BOUND" at
# --size (its prediction for exactly that size: --predict-bytes), the picked one's CHOSEN 1.
predictions() {
  local hosts=$1
  shift
  "$ddlrun" --dry-run --output json --launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --tcp \
    -H "$hosts" --predict-bytes "$size" "$@" true </dev/null |
    /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)["prediction"]
for m in p["modes"]:
    print(m["mode"], m["seconds_at_predict_bytes"], int(m["chosen"]),
          m["bound_seconds_at_predict_bytes"])'
}

# measure HOSTS MODE: ddl-bench's time of one allreduce of --size in MODE, seconds.
measure() {
  local out
  out=$(timeout "$run_timeout" "$ddlrun" -q --tag-output none --launcher ssh \
    --ssh-config "$NETNS_SSH_CONFIG" --tcp -H "$1" --mode "$2" "$bench" -b "$size" -e "$size" \
    -w 1 -n "$iters" -t float32 -o sum -c 1 2>&1 </dev/null)
  local rc=$?
  if ((rc == 124)); then
    echo "predict_check: ddl-bench in mode $2 timed out ($run_timeout s); its last lines:" >&2
    tail -n 10 <<<"$out" | sed 's/^/  | /' >&2
    return 1
  elif ((rc != 0)); then
    echo "predict_check: ddl-bench in mode $2 failed (exit $rc):" >&2
    tail -n 10 <<<"$out" | sed 's/^/  | /' >&2
    return 1
  fi
  awk '$1 ~ /^[0-9]+$/ && NF == 8 { if ($8 != 0) exit 1; printf "%.6f\n", $5 / 1e6 }' <<<"$out"
}

# check TITLE HOSTS OPTS...: predicts, measures every mode, prints the table and checks it.
check() {
  local title=$1 hosts=$2
  shift 2
  local lines mode pred chosen meas picked="" picked_mode="" rows=() best="" best_t="" lost=()
  if ! lines=$(predictions "$hosts" "$@"); then
    echo "predict_check: ddlrun --dry-run failed on $title" >&2
    failed=1
    return
  fi
  echo
  echo "== $title; ddlrun $*; allreduce of $size float32, $iters timed iterations"
  while read -r mode pred chosen bound; do
    ((chosen)) && picked_mode=$mode
    if ! meas=$(measure "$hosts" "$mode") || [[ -z $meas ]]; then
      failed=1 lost+=("$mode")
      continue
    fi
    rows+=("$mode $pred $meas $chosen $bound")
    ((chosen)) && picked="$mode $meas"
    if [[ -z $best_t ]] || awk -v a="$meas" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then
      best=$mode best_t=$meas
    fi
  done <<<"$lines"
  # A mode whose run failed or timed out has no measurement: it is named, never shown as 0.
  if ((${#lost[@]})); then
    echo "  not measured (the run failed or timed out, above): ${lost[*]}"
  fi
  if ((${#rows[@]} == 0)); then
    echo "  no mode was measured: nothing to compare the predictions with"
    return
  fi
  if [[ -z $picked ]]; then
    echo "  the picked mode ${picked_mode:-(none)} was not measured: the pick is not checked"
  fi
  printf '%s\n' "${rows[@]}" | awk -v tol="$tolerance" -v slack="$slack" -v picked="$picked" \
    -v best="$best" -v best_t="$best_t" '
    BEGIN {
      printf "  %-14s %12s %12s %9s %12s %10s\n", "MODE", "predicted", "measured", "pred/meas",
        "bound", "meas/bound"
    }
    {
      r = $2 / $3
      ok = r >= 1 - tol / 100 && r <= 1 + tol / 100
      printf "  %-14s %9.1f ms %9.1f ms %9.2f %9.1f ms %10.2f%s%s\n", $1 ($4 ? "*" : ""), $2 * 1e3,
        $3 * 1e3, r, $5 * 1e3, $3 / $5, ok ? "" : "  OFF BY MORE THAN " tol "%",
        $4 ? "  (picked)" : ""
      if (!ok) bad = 1
    }
    END {
      if (picked == "") exit 1
      split(picked, p, " ")
      fast = p[2] <= best_t * (1 + slack / 100)
      printf "  picked %s (%.1f ms); fastest measured %s (%.1f ms): %s\n", p[1], p[2] * 1e3, best,
        best_t * 1e3, fast ? "ok" : "NOT THE FASTEST (beyond " slack "%)"
      exit bad || !fast
    }' || failed=1
}

if [[ -z $only || $only == flat ]]; then
  netns_up 3 || exit $?
  for k in 1 2 3; do netns_shape "$k" "$rate" || { echo "predict_check: tc failed" >&2; exit 1; }; done
  check "3 hosts x 2 ranks, links $rate" node1:2,node2:2,node3:2 --link "host=$told"
  netns_down
fi
if [[ -z $only || $only == racks ]]; then
  netns_up_racks 2 2 || exit $?
  for k in 1 2 3 4; do netns_shape "$k" "$rate" || { echo "predict_check: tc failed" >&2; exit 1; }; done
  netns_shape_uplink "$uplink" || { echo "predict_check: tc failed on the uplink" >&2; exit 1; }
  check "2 racks x 2 hosts x 2 ranks, links $rate, uplink $uplink" \
    node1:2,node2:2,node3:2,node4:2 --mode auto --nodes 2 --link "host=$told" \
    --link "rack=$uplink"
  netns_down
fi
if [[ $only == ring ]]; then
  netns_up "$hosts" || exit $?
  for ((k = 1; k <= hosts; k++)); do
    netns_shape "$k" "$rate" || { echo "predict_check: tc failed on node$k" >&2; exit 1; }
  done
  list=$(for ((k = 1; k <= hosts; k++)); do printf 'node%d:%d,' "$k" "$ranks"; done)
  check "$hosts hosts x $ranks ranks, one ring of $hosts, links $rate" "${list%,}" \
    --link "host=$told"
  netns_down
fi
if ((failed)); then
  echo "predict_check: FAILED (see above)"
  exit 1
fi
echo "predict_check: every prediction within $tolerance%, every pick the fastest"
