#!/usr/bin/env bash
# The chaos suite: random faults during a real libddl allreduce loop (chaos_loop.c), through
# the local launcher (4 ranks on this host), the ssh launcher (3 namespace hosts x 2 ranks,
# tests/netns/hosts.sh, real sshd) and per-node mode (the same hosts, one ddlrun each), and
# what every run must show afterwards. Launcher "tree" (not in the default list) is the ssh
# launcher's launch tree at --tree-width 1 on the same hosts: a chain node1 -> node2 -> node3,
# three levels, so that node2 is an interior host (node1's agent starts it, it starts node3's).
#
#   chaos.sh DDLRUN CHAOS_LOOP [--runs N] [--launchers "local ssh pernode tree"] [--faults "kind ..."]
#            [--seed S] [--seconds S]
#
# Without --runs it runs each fault kind once per launcher (the CTest sample); with --runs N it
# runs N faults, cycling through the kinds, victims and delays chosen at random (--seed).
#
# How it works: each run starts ddlrun on the loop, waits until every rank has written its pid
# file (so it is past ddl_init and in the loop), waits a random 0.2-1.5 s, injects the fault,
# and waits for ddlrun to end. Then it checks:
#   - time: from the fault to ddlrun's exit (for a SIGKILLed ddlrun: until nothing of the job
#     is left, the figure printed), within the fault's bound (5 s; DDL_TIMEOUT + 5 s
#     for a stalled rank; the agents' heartbeat deadline + 5 s for a frozen agent or a lost
#     link);
#   - exit status: the documented one (137 for a SIGKILLed rank, non-zero for the other
#     failures, 0 where the fault must not fail the job);
#   - blame: ddlrun's own messages (not the ranks') name the faulty rank ("rank R") or host ("nodeK");
#   - leftovers, within 5 s of the end (of the SIGKILL, for a killed ddlrun): no rank and no
#     rank's child (each rank forks a `sleep`) alive, no process in any host's namespace but
#     its sshd, no ddlrun temp dir (/tmp/ddlrun.*, ddlrun-pmix.*, ddlrun-agent.*; not
#     /tmp/ddlrun*, which on a namespace host also matched, and removed, a checkout cloned
#     to /tmp/ddlrun*, bound there by hosts.sh) on any host nor on this one, no new
#     /dev/shm/ddl-* segment;
#   - memory: ddlrun's peak resident size under 64 MiB (sampled every 0.1 s).
# A slow reader pauses 3 s, in the launch tree the heartbeat deadline + 2 s: no host may be lost
# behind it.
# An early signal (early_sigint, early_sigterm) comes 0.1-1.0 s after ddlrun started, without
# waiting for the ranks (ddlrun may still probe the hosts or start their agents): ddlrun must
# end within 3 s with 128 + the signal, saying "ddlrun: got SIGINT while starting the job;
# leaving now" or, once the job had started, "ddlrun: got SIGINT; passing it to N processes"
# (never killed by the default action without a word), remove its temp files and leave nothing
# on any host. The victim column says which: (before) or (started).
# Per-node mode has one fault, rdzv_flood: a stranger on this side floods node 0's rendezvous
# (rdzv_flood.py: 64 MiB length prefixes, huge fields, trickles, refused hellos that never
# read, idle connections) from before the nodes start until after they end, with
# DDL_JOB_TOKEN set: the job must end 0 on every node, node 0's ddlrun stay under 64 MiB, and
# nothing be left on any host.
# A frozen agent (SIGSTOP) cannot clean up while frozen: the suite SIGCONTs it once ddlrun has
# ended, as an operator would, and then expects its host clean within 5 s. A lost link comes
# back once the host's agent has had its deadline to clean up on its own (sshd's session process
# for the cut connection is not counted: sshd ends it when TCP gives up, or the link returns).
# It prints one line per run and the figures: runs, faults by kind, worst time to tear down,
# leftovers found. Exits 1 when any check failed, 77 when it can run nothing here.
set -uo pipefail
ddlrun=$(realpath "$1")
loop=$(realpath "$2")
shift 2
runs=0
launchers="local ssh pernode"
faults=""
seed=$$
seconds=3
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --launchers) launchers=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "chaos.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
RANDOM=$seed
timeout_s=${CHAOS_DDL_TIMEOUT:-5}  # DDL_TIMEOUT the ranks get
lost_s=${CHAOS_LOST_S:-10}         # the ssh launchers' --heartbeat-timeout (10: ddlrun's default)
kinds_local="kill_rank stop_rank kill_ddlrun close_stdout slow_reader fast_stdin early_sigint \
early_sigterm"
kinds_ssh="kill_rank stop_rank kill_agent stop_agent kill_ddlrun link_down close_stdout \
slow_reader fast_stdin early_sigint early_sigterm"
kinds_pernode="rdzv_flood"

have_ssh=0
if [[ " $launchers " == *" ssh "* || " $launchers " == *" pernode "* || " $launchers " == *" tree "* ]]; then
  # shellcheck source=SCRIPTDIR/../netns/hosts.sh
  source "$(dirname "$0")/../netns/hosts.sh"
  if netns_up 3; then
    have_ssh=1
    unset SSH_AUTH_SOCK
    export HOME="$NETNS_DIR/home"
    mkdir -p "$HOME"
  else
    rc=$?
    [[ $rc == 77 ]] || exit 1
    launchers=${launchers//pernode/}
    launchers=${launchers//ssh/}
    launchers=${launchers//tree/}
    echo "chaos: no namespace hosts here; local launcher only"
  fi
fi
[[ -n ${launchers// /} ]] || exit 77
work=$(mktemp -d "${NETNS_DIR:-/tmp}/chaos.XXXXXX")
mkdir -p "$work/tmp"
[[ -n ${NETNS_DIR:-} ]] || trap 'rm -rf "$work"' EXIT

# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"  # alive PID [NAME]
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# ddlrun's TMPDIR here (its own, so that other jobs' files are not counted) and the job's
# shared-memory segments (/dev/shm/ddl-<job id>-...).
tmp_entries() { find "$work/tmp" -mindepth 1 -maxdepth 1 2>/dev/null | sort; }
shm_entries() { find /dev/shm -maxdepth 1 -name "ddl-$job_id-*" 2>/dev/null | sort; }

declare -A runs_of=() passed_of=() worst_of=()
total=0 failed=0 left_procs=0 left_files=0 left_shm=0
failures=()

# The hosts of launcher $1 and their ranks, as ddlrun options.
job_args() {
  if [[ $1 == local ]]; then
    printf '%s\n' --launcher local -H localhost:4 --no-probe
  elif [[ $1 == tree ]]; then
    printf '%s\n' --launcher ssh --tree-width 1 --heartbeat-timeout "$lost_s" \
      --ssh-config "$NETNS_SSH_CONFIG" -H node1:2,node2:2,node3:2
  else
    printf '%s\n' --launcher ssh --heartbeat-timeout "$lost_s" --ssh-config "$NETNS_SSH_CONFIG" \
      -H node1:2,node2:2,node3:2
  fi
}
nranks() { [[ $1 == local ]] && echo 4 || echo 6; }
on_hosts() { [[ $1 == ssh || $1 == tree ]]; }  # launcher $1 runs on the namespace hosts

# host_of_rank R: the host name in rank R's pid file.
host_of_rank() { awk '{ print $3 }' "$dir/pid.$1" 2>/dev/null; }

# inject KIND LAUNCHER: the fault; sets `victim` (what must be named) and `bound` (ms).
inject() {
  local kind=$1 launcher=$2 n r k
  n=$(nranks "$launcher")
  r=$((RANDOM % n))
  k=$((RANDOM % 3 + 1))
  bound=5000
  case $kind in
    kill_rank) victim="rank $r"; kill -KILL "$(awk '{ print $1 }' "$dir/pid.$r")" ;;
    stop_rank)
      victim="rank $r"; bound=$(((timeout_s + 5) * 1000))
      kill -STOP "$(awk '{ print $1 }' "$dir/pid.$r")" ;;
    kill_agent) victim="node$k"; kill -KILL "$(netns_agent_pid "$k")" ;;
    stop_agent)
      victim="node$k"; bound=$(((lost_s + 5) * 1000)); stopped_agent=$(netns_agent_pid "$k")
      kill -STOP "$stopped_agent" ;;
    kill_ddlrun) victim=""; kill -KILL "$job_pid" ;;
    link_down)
      victim="node$k"; down_host=$k
      bound=$(((lost_s > timeout_s ? lost_s : timeout_s) * 1000 + 5000))
      ip -n "$(netns_ns "$k")" link set "$(netns_veth "$k")" down ;;
    close_stdout | slow_reader | fast_stdin) victim="" ;;  # set up at the start
    early_sigint | early_sigterm)
      victim="" bound=3000
      # the job has started once every rank wrote its pid file (then the ranks get the signal)
      started_before=0
      (($(find "$dir" -name 'pid.[0-9]*' ! -name '*.tmp' | wc -l) == n)) && started_before=1
      kill "-$(tr a-z A-Z <<<"${kind#early_sig}")" "$job_pid" ;;
  esac
}

# The exit statuses KIND may end with (a regex).
expected_status() {
  case $1 in
    kill_rank) echo '^137$' ;;
    kill_ddlrun) echo '^137$' ;;  # ddlrun's own death
    early_sigint) echo '^130$' ;;
    early_sigterm) echo '^143$' ;;
    close_stdout | slow_reader | fast_stdin) echo '^0$' ;;
    *) echo '^([1-9][0-9]*)$' ;;
  esac
}

# check_leftovers LAUNCHER KIND DEADLINE_MS: waits until nothing of the job is left or the deadline;
# counts and removes what is left, and prints what it was.
check_leftovers() {
  local launcher=$1 kind=$2 deadline=$3 f pid child what="" cmd
  local pids=()
  for f in "$dir"/pid.*; do
    [[ -e $f ]] || continue
    read -r pid child _ <"$f"
    pids+=("$pid" "$child")
  done
  while :; do
    what=""
    for pid in "${pids[@]}"; do
      alive "$pid" && what+=" $pid($(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-40))"
    done
    if ((have_ssh)) && on_hosts "$launcher"; then
      for k in 1 2 3; do
        for pid in $(netns_pids "$k"); do
          cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-40)
          # sshd's own session process of a cut link ends when TCP gives up: not the job's;
          # nor is one that was there before the job (an earlier run's cut link)
          [[ $kind == link_down && $cmd == sshd:* ]] && continue
          [[ -n ${stale_sshd[$pid]:-} ]] && continue
          what+=" node$k:$pid($cmd)"
        done
      done
    fi
    if [[ -z $what ]]; then clean_at=$(now_ms); break; fi
    (($(now_ms) >= deadline)) && break
    sleep 0.1
  done
  local procs=0 files=0 shm=0
  if [[ -n $what ]]; then
    procs=$(wc -w <<<"$what")
    for pid in "${pids[@]}"; do alive "$pid" && kill -KILL "$pid" 2>/dev/null; done
    if on_hosts "$launcher"; then
      for k in 1 2 3; do
        # shellcheck disable=SC2046
        kill -CONT $(netns_pids "$k") 2>/dev/null
        # shellcheck disable=SC2046
        kill -KILL $(netns_pids "$k") 2>/dev/null
      done
    fi
    echo "    left running:$what"
  fi
  local t
  t=$(tmp_entries)
  if [[ -n $t && $kind == kill_ddlrun ]]; then
    # What a SIGKILLed ddlrun could not remove, the next ddlrun does.
    TMPDIR="$work/tmp" "$ddlrun" --launcher local -H localhost:1 --no-probe true
    t=$(tmp_entries)
  fi
  if [[ -n $t ]]; then
    files=$(wc -l <<<"$t"); echo "    left in /tmp here: $t" | tr '\n' ' '; echo; rm -rf $t
  fi
  if on_hosts "$launcher"; then
    for k in 1 2 3; do
      t=$(netns_exec "$k" sh -c 'ls -d /tmp/ddlrun.* /tmp/ddlrun-pmix.* /tmp/ddlrun-agent.* 2>/dev/null')
      if [[ -n $t ]]; then
        files=$((files + $(wc -l <<<"$t"))); echo "    left in node$k:/tmp: $t" | tr '\n' ' '
        echo; netns_exec "$k" sh -c 'rm -rf /tmp/ddlrun.* /tmp/ddlrun-pmix.* /tmp/ddlrun-agent.*'
      fi
    done
  fi
  t=$(shm_entries)
  if [[ -n $t ]]; then
    shm=$(wc -l <<<"$t"); echo "    left in /dev/shm: $t" | tr '\n' ' '; echo; rm -f $t
  fi
  left_procs=$((left_procs + procs)) left_files=$((left_files + files))
  left_shm=$((left_shm + shm))
  ((procs + files + shm == 0))
}

# pernode_run INDEX KIND: the 3 hosts' ddlruns in per-node mode on the loop, a stranger
# flooding node 0's rendezvous (from 1 s before they start until they end).
pernode_run() {
  local i=$1 kind=$2 k r rc peak=0 problems=() pids=() started took
  dir="$work/run.$i"
  mkdir -p "$dir"
  python3 "$(dirname "$0")/rdzv_flood.py" "$(netns_addr 1)" 29400 $((seconds + 14)) \
    >"$dir/flood" 2>&1 &
  local flooder=$!
  sleep 1
  started=$(now_ms)
  for k in 1 2 3; do
    # nsenter execs ddlrun: its pid is ddlrun's, whose memory is sampled
    DDL_JOB_TOKEN="chaos-secret-$$-$i" nsenter --net="/run/netns/$(netns_ns "$k")" \
      --target "${_netns_holder[$k]}" --uts --mount -- "$ddlrun" --node-rank $((k - 1)) \
      --nnodes 3 --rdzv node1:29400 --rdzv-timeout 30 -a 2 -x "CHAOS_DIR=$dir" \
      -x "CHAOS_SECONDS=$seconds" -x "DDL_TIMEOUT=$timeout_s" "$loop" \
      </dev/null >"$dir/out.$k" 2>"$dir/err.$k" &
    pids+=($!)
  done
  while alive "${pids[0]}"; do
    r=$(rss_kib "${pids[0]}")
    ((r > peak)) && peak=$r
    if (($(now_ms) - started > (seconds + 40) * 1000)); then
      problems+=("node 0 still ran $((seconds + 40)) s after the start")
      kill -KILL "${pids[@]}" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  for k in 0 1 2; do
    wait "${pids[$k]}"
    rc=$?
    ((rc == 0)) || problems+=("node$((k + 1)) exited $rc")
  done
  took=$(($(now_ms) - started))
  kill "$flooder" 2>/dev/null
  wait "$flooder" 2>/dev/null
  ((peak < 65536)) || problems+=("node 0's ddlrun reached $((peak / 1024)) MiB")
  for k in 1 2 3; do
    r=$(netns_leftovers "$k")
    [[ -z $r ]] || problems+=("left on node$k: $(tr '\n' ' ' <<<"$r")")
  done
  local key="pernode/$kind"
  runs_of[$key]=$((${runs_of[$key]:-0} + 1))
  total=$((total + 1))
  if ((${#problems[@]} == 0)); then
    passed_of[$key]=$((${passed_of[$key]:-0} + 1))
    printf 'ok   %3d %-6s %-12s %-8s exit %3d, ran %5d ms, peak %3d MiB (%s)\n' "$i" pernode \
      "$kind" - 0 "$took" $((peak / 1024)) "$(sed 's/^rdzv_flood: //' "$dir/flood")"
  else
    failed=$((failed + 1))
    printf 'FAIL %3d %-6s %-12s\n' "$i" pernode "$kind"
    local p
    for p in "${problems[@]}"; do echo "       $p"; done
    grep -h '^ddlrun' "$dir"/err.* | head -12 | sed 's/^/       | /'
    failures+=("$i $key")
  fi
}

# note_stale_sshd LAUNCHER: the sshd session processes on the hosts before a run (stale_sshd):
# those of an earlier run's cut link live until TCP gives up on them, and are not this job's.
declare -A stale_sshd=()
note_stale_sshd() {
  local k pid
  stale_sshd=()
  ((have_ssh)) && on_hosts "$1" || return 0
  for k in 1 2 3; do
    for pid in $(netns_pids "$k"); do
      [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == sshd:* ]] && stale_sshd[$pid]=1
    done
  done
  return 0
}

# one_run INDEX LAUNCHER KIND
one_run() {
  local i=$1 launcher=$2 kind=$3 n rc=0 problems=() started fault_at end_at took peak=0
  if [[ $launcher == pernode ]]; then
    pernode_run "$i" "$kind"
    return
  fi
  dir="$work/run.$i"
  mkdir -p "$dir"
  n=$(nranks "$launcher")
  victim="" bound=5000 stopped_agent="" down_host="" started_before=0 early_when=""
  note_stale_sshd "$launcher"
  job_id="chaos$$r$i"
  local args
  mapfile -t args < <(job_args "$launcher")
  args+=(--job-id "$job_id")
  # In the launch tree the slow reader pauses past the heartbeat deadline (a full channel
  # starved the interior agents' heartbeats, and healthy hosts were lost). A rank blocked on its
  # stdout meanwhile makes no progress, so its peers' DDL_TIMEOUT outlasts the pause: what the
  # fault checks is that ddlrun loses no host and no byte, not the ranks' own timeout.
  local pause=3 rank_timeout=$timeout_s
  [[ $launcher == tree ]] && pause=$((lost_s + 2))
  [[ $kind == slow_reader ]] && rank_timeout=$((timeout_s + pause))
  local env=(-x "CHAOS_DIR=$dir" -x "CHAOS_SECONDS=$seconds" -x "DDL_TIMEOUT=$rank_timeout")
  case $kind in
    close_stdout) env+=(-x CHAOS_CLOSE_STDOUT=1) ;;
    slow_reader) env+=(-x CHAOS_PRINT_EVERY=1 -x CHAOS_PRINT_BYTES=8000) ;;
  esac
  export CHAOS_DIR=$dir CHAOS_SECONDS=$seconds DDL_TIMEOUT=$rank_timeout TMPDIR=$work/tmp
  case $kind in
    slow_reader)
      "$ddlrun" "${args[@]}" "${env[@]}" "$loop" 2>"$dir/err" \
        > >(sleep "$pause"; cat >/dev/null) </dev/null &
      ;;
    fast_stdin) "$ddlrun" "${args[@]}" "${env[@]}" "$loop" >"$dir/out" 2>"$dir/err" < <(yes) & ;;
    early_*)
      # (a background job of a script starts with SIGINT ignored: as from a terminal, not so)
      env --default-signal=INT "$ddlrun" "${args[@]}" "${env[@]}" "$loop" >"$dir/out" \
        2>"$dir/err" </dev/null &
      ;;
    *) "$ddlrun" "${args[@]}" "${env[@]}" "$loop" >"$dir/out" 2>"$dir/err" </dev/null & ;;
  esac
  job_pid=$!
  started=$(now_ms)
  local ok=1
  [[ $kind == early_* ]] && ok=2  # the fault does not wait for the ranks
  while ((ok == 1)) && (($(find "$dir" -name 'pid.[0-9]*' ! -name '*.tmp' | wc -l) < n)); do
    if ! alive "$job_pid" || (($(now_ms) - started > 30000)); then ok=0; break; fi
    sleep 0.05
  done
  if ((!ok)); then
    problems+=("the job did not start: $(head -c 300 "$dir/err" | tr '\n' ' ')")
    fault_at=$(now_ms)
  elif ((ok == 2)); then
    local early_ms=$((RANDOM % 901 + 100))
    sleep "$(printf '%d.%03d' $((early_ms / 1000)) $((early_ms % 1000)))"
    fault_at=$(now_ms)
    inject "$kind" "$launcher"
  else
    sleep "0.$((RANDOM % 13 + 2))"
    fault_at=$(now_ms)
    inject "$kind" "$launcher"
  fi
  local limit=$((fault_at + bound + 15000 + seconds * 1000))
  while alive "$job_pid"; do
    local r
    r=$(rss_kib "$job_pid")
    ((r > peak)) && peak=$r
    if (($(now_ms) > limit)); then
      problems+=("ddlrun still ran $(((limit - fault_at) / 1000)) s after the fault")
      kill -KILL "$job_pid" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  { wait "$job_pid"; } 2>/dev/null  # no "Killed" from the shell for a SIGKILLed ddlrun
  rc=$?
  end_at=$(now_ms)
  took=$((end_at - fault_at))
  clean_at=""
  [[ $kind == kill_ddlrun ]] && took=0
  case $kind in
    close_stdout | slow_reader | fast_stdin) ;;  # no fault to end: the loop's own end
    *) ((took <= bound)) || problems+=("ended ${took} ms after the fault (bound ${bound} ms)") ;;
  esac
  [[ $rc =~ $(expected_status "$kind") ]] || problems+=("exit status $rc")
  if [[ $kind == early_* ]]; then
    # Before the ranks started, ddlrun's note; after, the signal passed on to them.
    local sig=SIG$(tr a-z A-Z <<<"${kind#early_sig}")
    if grep -qx "ddlrun: got $sig while starting the job; leaving now" "$dir/err"; then
      early_when="(before)"
    elif grep -q "^ddlrun: got $sig; passing it to" "$dir/err"; then
      early_when="(started)"
    else
      problems+=("neither \"ddlrun: got $sig while starting the job; leaving now\" nor" \
        "\"ddlrun: got $sig; passing it to ...\"")
    fi
    ((started_before)) && [[ $early_when == "(before)" ]] &&
      problems+=("the ranks had started, yet ddlrun said it was starting the job")
  fi
  if [[ -n $victim ]] && ! grep '^ddlrun' "$dir/err" | grep -q "$victim\b"; then
    problems+=("ddlrun's messages do not name $victim")
  fi
  ((peak < 65536)) || problems+=("ddlrun's resident size reached $((peak / 1024)) MiB")
  [[ -n $stopped_agent ]] && kill -CONT "$stopped_agent" 2>/dev/null
  local leftover_deadline=$(($(now_ms) + 5000))
  [[ -n $down_host ]] && leftover_deadline=$((fault_at + (lost_s + 5) * 1000))
  if ! check_leftovers "$launcher" "$kind" "$leftover_deadline" >"$dir/leftovers"; then
    problems+=("leftovers: $(tr '\n' ' ' <"$dir/leftovers")")
  fi
  # A killed ddlrun's teardown is the time until nothing of the job is left.
  [[ $kind == kill_ddlrun && -n $clean_at ]] && took=$((clean_at - fault_at))
  [[ -n $down_host ]] && ip -n "$(netns_ns "$down_host")" link set "$(netns_veth "$down_host")" up
  local key="$launcher/$kind"
  runs_of[$key]=$((${runs_of[$key]:-0} + 1))
  total=$((total + 1))
  ((took > ${worst_of[$key]:-0})) && worst_of[$key]=$took
  if ((${#problems[@]} == 0)); then
    passed_of[$key]=$((${passed_of[$key]:-0} + 1))
    printf 'ok   %3d %-6s %-12s %-8s exit %3d, down in %5d ms, peak %3d MiB\n' "$i" \
      "$launcher" "$kind" "${victim:-${early_when:--}}" "$rc" "$took" $((peak / 1024))
  else
    failed=$((failed + 1))
    printf 'FAIL %3d %-6s %-12s %-8s exit %3d, down in %5d ms\n' "$i" "$launcher" "$kind" \
      "${victim:-${early_when:--}}" "$rc" "$took"
    local p
    for p in "${problems[@]}"; do echo "       $p"; done
    grep -E '^ddlrun|chaos_loop: rank' "$dir/err" | head -12 | sed 's/^/       | /'
    failures+=("$i $key")
  fi
}

# The plan: each (launcher, kind) once, or --runs N cycling through them.
plan=()
for l in $launchers; do
  case $l in
    local) ks=$kinds_local ;;
    pernode) ks=$kinds_pernode ;;
    *) ks=$kinds_ssh ;;
  esac
  for k in $ks; do
    [[ -z $faults || " $faults " == *" $k "* ]] && plan+=("$l $k")
  done
done
((${#plan[@]})) || { echo "chaos.sh: no fault kind left to run" >&2; exit 2; }
((runs > 0)) || runs=${#plan[@]}
echo "chaos: $runs runs, seed $seed, DDL_TIMEOUT=$timeout_s, lost after ${lost_s} s"
for ((i = 0; i < runs; i++)); do
  entry=${plan[$((i % ${#plan[@]}))]}
  one_run "$i" ${entry}
done

echo "chaos: figures"
printf '  %-20s %5s %7s %16s\n' "launcher/fault" runs passed "worst teardown"
for key in $(printf '%s\n' "${!runs_of[@]}" | sort); do
  printf '  %-20s %5d %7d %13d ms\n' "$key" "${runs_of[$key]}" "${passed_of[$key]:-0}" \
    "${worst_of[$key]:-0}"
done
echo "  runs $total, failed $failed; leftovers found: $left_procs processes, $left_files temp" \
  "files, $left_shm shm segments"
((failed == 0))
