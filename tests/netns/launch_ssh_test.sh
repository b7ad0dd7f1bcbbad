#!/usr/bin/env bash
# Starts real jobs on fake hosts (hosts.sh: network namespaces on one bridge, each with its own
# hostname, /tmp and sshd) through `ddlrun --launcher ssh`, and through `--launcher mpirun` when
# Open MPI's mpirun is installed, and checks what the ranks and the user see:
#   - every rank's variables (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, DDL_HOST_INDEX, ...,
#     -x VAR=VAL and -x VAR) match the host it runs on, and its output comes back tagged with
#     its rank;
#   - ranks on other hosts reach MASTER_ADDR:MASTER_PORT (rank 0's host), over TCP;
#   - a rank that exits 7 makes the job exit 7; a rank killed with SIGKILL on one host brings
#     the job down everywhere within 5 s with 137; SIGINT to ddlrun, and --timeout with a rank
#     that ignores SIGTERM, leave no process on any host;
#   - an unreachable host (an address that never answers, a stopped sshd) is named, exit 1
#     (under mpirun with --no-probe, mpirun's own ssh reports it and its status 255 is kept); a
#     program missing on one host is named with that host, exit 127;
#   - arguments with spaces, quotes, $(), ;, a newline, globs and an empty one arrive byte for
#     byte, and none of them runs on any host.
#
# Usage: launch_ssh_test.sh DDLRUN [LAUNCHER...]   (default: ssh, and mpirun when installed;
# exit 77, skipped, when not root or without ip netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
shift
launchers=("$@")
if ((${#launchers[@]} == 0)); then
  launchers=(ssh)
  command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q 'Open MPI' &&
    launchers+=(mpirun)
fi
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
netns_up 3 || exit $?

netns_session
hosts=node1:2,node2:2,node3:2  # 6 ranks, 2 a host
echo "hosts: node1=$(netns_addr 1) node2=$(netns_addr 2) node3=$(netns_addr 3)" \
  "this side=$NETNS_HOST_ADDR; launchers: ${launchers[*]}"

# The ddlrun options of launcher $1: ssh config, and for mpirun how it reaches the hosts and
# which network Open MPI's daemons and ranks use.
launcher_args() {
  local args=(--launcher "$1" --ssh-config "$NETNS_SSH_CONFIG")
  if [[ $1 == mpirun ]]; then
    args+=(--mpiarg "--mca plm_rsh_args '-F $NETNS_SSH_CONFIG' --mca oob_tcp_if_include \
$NETNS_NET --mca btl_tcp_if_include $NETNS_NET")
  fi
  printf '%s\n' "${args[@]}"
}
export DDLT_FROM_HERE="from here"  # -x DDLT_FROM_HERE passes it on
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun refuses root otherwise

# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"  # alive

# start NAME LAUNCHER ARGS...: ddlrun in the background (SIGINT not ignored, stdin /dev/null);
# $out/NAME, NAME.err; sets job_pid and job_start (ms).
start() {
  local name=$1 launcher=$2 largs
  shift 2
  mapfile -t largs < <(launcher_args "$launcher")
  job_start=$(now_ms)
  env --default-signal=INT "$ddlrun" "${largs[@]}" "$@" </dev/null >"$out/$name" 2>"$out/$name.err" &
  job_pid=$!
}

# finish NAME [SECONDS]: waits for the job started last (SIGKILL after SECONDS, default 60);
# $out/NAME.rc, NAME.ms (from start).
finish() {
  local name=$1 limit=$((${2:-60} * 10)) i=0 rc
  while ((i++ < limit)) && alive "$job_pid"; do sleep 0.1; done
  if alive "$job_pid"; then
    echo "  $name: still running after ${2:-60} s, killed"
    kill -KILL "$job_pid" 2>/dev/null
  fi
  wait "$job_pid"
  rc=$?
  echo "$rc" >"$out/$name.rc"
  echo $(($(now_ms) - job_start)) >"$out/$name.ms"
  echo "  $name -> exit $rc in $(cat "$out/$name.ms") ms"
}

# run NAME LAUNCHER ARGS...: start and finish.
run() {
  start "$@"
  finish "$1"
}
rc() { cat "$out/$1.rc"; }
expect_rc() { [[ $(rc "$1") == "$2" ]] || fail "$1: exit status $(rc "$1"), not $2" "$out/$1.err" "$out/$1"; }

# The lines rank output, without the [1,R]<stdout>: tag.
untag() { sed -E 's/^\[[0-9]+,[0-9]+\]<stdout>: ?//' "$out/$1"; }

# Processes (by PID) whose command line starts with $2, on host $1.
host_procs() {
  local k=$1 prefix=$2 pid cmd
  for pid in $(netns_pids "$k"); do
    cmd=$(tr "\\0" " " 2>/dev/null <"/proc/$pid/cmdline") || continue
    [[ $cmd == "$prefix"* ]] && echo "$pid"
  done
}
# wait_procs PREFIX N: until N processes start with PREFIX over all hosts (10 s at most).
wait_procs() {
  local i k n
  for ((i = 0; i < 100; i++)); do
    n=0
    for k in 1 2 3; do n=$((n + $(host_procs "$k" "$1" | wc -l))); done
    ((n >= $2)) && return 0
    alive "$job_pid" || return 1
    sleep 0.1
  done
  return 1
}
# no_leftovers NAME: nothing runs on any host once the job is over (2 s to go away).
no_leftovers() {
  local k i left
  for k in 1 2 3; do
    for ((i = 0; i < 20; i++)); do
      left=$(netns_pids "$k")
      [[ -z $left ]] && break
      sleep 0.1
    done
    if [[ -n $left ]]; then
      # shellcheck disable=SC2086
      fail "$1: processes left on node$k: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" | tr '\n' ';')"
      # shellcheck disable=SC2086
      kill -KILL $left 2>/dev/null  # so that the next check starts clean
    fi
  done
}

# The arguments that must arrive as they are, and what `printf '%s\0'` makes of them in hex.
# shellcheck disable=SC2016,SC1003  # none of them is meant to expand
tricky=('two words' "it's" 'say "hi"' '$(touch /tmp/ddlt-pwned1)' 'x; touch /tmp/ddlt-pwned2'
  $'line one\nline two' '*' '' '\' $'tab\there' '`touch /tmp/ddlt-pwned3`' '--' '-x' 'a|b&&c'
  "\$HOME" 'é')
tricky_hex=$(printf '%s\0' "${tricky[@]}" | od -An -v -tx1 | tr -d ' \n')
# A program that this side and node1 have (in /tmp, which each host has to itself), not node2.
only1=/tmp/ddlt$$-only-node1
printf '#!/bin/sh\necho here\n' >"$only1"
chmod +x "$only1"
netns_exec 1 sh -c "printf '#!/bin/sh\necho here\n' >$only1 && chmod +x $only1"
trap 'rm -f "$only1"; netns_down' EXIT
trap 'rm -f "$only1"; netns_down; exit 130' INT
trap 'rm -f "$only1"; netns_down; exit 143' TERM

for L in "${launchers[@]}"; do
  echo "launcher $L:"

  # Every rank's variables, its host and its tag; rank-to-rank TCP to MASTER_ADDR:MASTER_PORT.
  # shellcheck disable=SC2016  # expanded by each rank's shell
  run "$L.env" "$L" -x 'DDLT_SET=a b' -x DDLT_FROM_HERE -H "$hosts" sh -c 'echo "vars \
host=$(hostname) RANK=$RANK LOCAL_RANK=$LOCAL_RANK \
WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK \
DDL_RANK=$DDL_RANK DDL_SIZE=$DDL_SIZE DDL_LOCAL_RANK=$DDL_LOCAL_RANK \
DDL_LOCAL_SIZE=$DDL_LOCAL_SIZE DDL_HOST_INDEX=$DDL_HOST_INDEX DDL_NUM_HOSTS=$DDL_NUM_HOSTS \
DDL_GPU=$DDL_GPU token=${#DDL_JOB_TOKEN} topo=$(test -r "$DDL_TOPOLOGY_FILE" && echo ok) \
rdv=${DDL_RENDEZVOUS:+set} master=${MASTER_ADDR:+set}:${MASTER_PORT:+set} job=${DDL_JOB_ID:+set} \
options=${DDL_OPTIONS:+set} x=$DDLT_SET/$DDLT_FROM_HERE"'
  expect_rc "$L.env" 0
  for r in 0 1 2 3 4 5; do
    h=$((r / 2)) l=$((r % 2))
    want="vars host=node$((h + 1)) RANK=$r LOCAL_RANK=$l WORLD_SIZE=6 LOCAL_WORLD_SIZE=2 \
GROUP_RANK=$h DDL_RANK=$r DDL_SIZE=6 DDL_LOCAL_RANK=$l DDL_LOCAL_SIZE=2 DDL_HOST_INDEX=$h \
DDL_NUM_HOSTS=3 DDL_GPU=-1 token=64 topo=ok rdv=set master=set:set job=set options=set \
x=a b/from here"
    untag "$L.env" | grep -Fxq -- "$want" || fail "$L.env: rank $r: no line '$want'" "$out/$L.env"
    if [[ $L == ssh ]]; then
      grep -q "^\[1,$r\]<stdout>:vars host=[^ ]* RANK=$r " "$out/$L.env" ||
        fail "$L.env: rank $r's line is not tagged [1,$r]<stdout>:" "$out/$L.env"
    fi
  done
  [[ $(untag "$L.env" | grep -c '^vars ') == 6 ]] || fail "$L.env: not 6 lines" "$out/$L.env"
  no_leftovers "$L.env"

  # A variable of ddlrun's environment that is not exported with -x does not reach ranks on
  # other hosts: they start with their login environment there (ddlrun.1, ENVIRONMENT).
  # shellcheck disable=SC2016
  DDLT_NOT_EXPORTED=leaked run "$L.noexport" "$L" -H "$hosts" \
    sh -c 'echo "noexport ${DDLT_NOT_EXPORTED:-unset}"'
  expect_rc "$L.noexport" 0
  [[ $(untag "$L.noexport" | grep -cx 'noexport unset') == 6 ]] ||
    fail "$L.noexport: a variable not given with -x reached a remote rank" "$out/$L.noexport"

  # Binding: each rank runs on exactly the CPUs the plan gave it (DDL_CPUS), and the two ranks
  # of a host do not share one.
  # shellcheck disable=SC2016
  run "$L.bind" "$L" -H "$hosts" sh -c 'echo "bind $(hostname) $RANK [$DDL_CPUS] \
[$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)]"'
  expect_rc "$L.bind" 0
  for r in 0 1 2 3 4 5; do
    line=$(untag "$L.bind" | grep "^bind node$((r / 2 + 1)) $r ")
    cpus=$(sed -E 's/^bind [^ ]+ [0-9]+ \[([^]]*)\].*/\1/' <<<"$line")
    allowed=$(sed -E 's/.*\] \[([^]]*)\]$/\1/' <<<"$line")
    [[ -n $cpus && $cpus == "$allowed" ]] ||
      fail "$L.bind: rank $r planned [$cpus] but runs on [$allowed]" "$out/$L.bind"
    eval "cpus_$r=\$cpus"
  done
  for h in 0 1 2; do
    a="cpus_$((2 * h))" b="cpus_$((2 * h + 1))"
    [[ ${!a} != "${!b}" ]] || fail "$L.bind: both ranks of node$((h + 1)) on [${!a}]" "$out/$L.bind"
  done

  # shellcheck disable=SC2016
  run "$L.tcp" "$L" -H "$hosts" python3 -c '
import os, socket, time
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.listen(size)
    s.settimeout(20)
    got = []
    for _ in range(size - 1):
        c, _ = s.accept()
        got.append(c.recv(64).decode())
        c.close()
    print("rank 0 heard " + " ".join(sorted(got)), flush=True)
else:
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port), timeout=2)
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(("%d@%s" % (rank, socket.gethostname())).encode())
    c.close()
'
  expect_rc "$L.tcp" 0
  untag "$L.tcp" | grep -Fxq "rank 0 heard 1@node1 2@node2 3@node2 4@node3 5@node3" ||
    fail "$L.tcp: rank 0 did not hear every other rank at MASTER_ADDR:MASTER_PORT" "$out/$L.tcp" \
      "$out/$L.tcp.err"

  # A rank that fails: its status is the job's, and the others are stopped.
  # shellcheck disable=SC2016
  run "$L.exit7" "$L" -H "$hosts" sh -c '[ "$RANK" = 4 ] && exit 7; exec sleep 62'
  expect_rc "$L.exit7" 7
  (($(cat "$out/$L.exit7.ms") < 15000)) || fail "$L.exit7: took $(cat "$out/$L.exit7.ms") ms"
  no_leftovers "$L.exit7"

  # SIGKILL to a rank on node2: everything stops within 5 s, exit 137.
  start "$L.sigkill" "$L" -H "$hosts" sh -c 'exec sleep 61'
  if wait_procs "sleep 61" 6; then
    victim=$(host_procs 2 "sleep 61" | head -n1)
    killed=$(now_ms)
    kill -KILL "$victim"
    finish "$L.sigkill" 20
    took=$(($(now_ms) - killed))
    echo "    down $took ms after the SIGKILL"
    expect_rc "$L.sigkill" 137
    ((took <= 5000)) || fail "$L.sigkill: took $took ms to stop after a rank was killed"
  else
    finish "$L.sigkill" 1
    fail "$L.sigkill: the 6 ranks did not start" "$out/$L.sigkill.err"
  fi
  no_leftovers "$L.sigkill"

  # SIGINT to ddlrun: it stops every rank on every host and leaves nothing.
  start "$L.sigint" "$L" -H "$hosts" sh -c 'exec sleep 63'
  if wait_procs "sleep 63" 6; then
    kill -INT "$job_pid"
    finish "$L.sigint" 20
    [[ $(rc "$L.sigint") != 0 ]] || fail "$L.sigint: exit 0 after SIGINT" "$out/$L.sigint.err"
  else
    finish "$L.sigint" 1
    fail "$L.sigint: the 6 ranks did not start" "$out/$L.sigint.err"
  fi
  no_leftovers "$L.sigint"

  # --timeout, with a rank that ignores SIGTERM: 124, killed after --kill-grace.
  # shellcheck disable=SC2016
  run "$L.timeout" "$L" --timeout 2 --kill-grace 1 -H "$hosts" \
    sh -c 'if [ "$RANK" = 3 ]; then trap "" TERM; while :; do sleep 1; done; fi; exec sleep 64'
  expect_rc "$L.timeout" 124
  (($(cat "$out/$L.timeout.ms") < 10000)) || fail "$L.timeout: took $(cat "$out/$L.timeout.ms") ms"
  no_leftovers "$L.timeout"

  # Arguments arrive byte for byte, and nothing in them runs.
  # shellcheck disable=SC2016
  run "$L.args" "$L" -H node1,node2 sh -c 'echo "args $RANK $(printf "%s\0" "$@" | od -An -v -tx1 |
tr -d " \n")"' sh "${tricky[@]}"
  expect_rc "$L.args" 0
  for r in 0 1; do
    untag "$L.args" | grep -Fxq "args $r $tricky_hex" ||
      fail "$L.args: rank $r did not get the arguments byte for byte (want $tricky_hex)" "$out/$L.args"
  done
  for k in 1 2 3; do
    for f in /tmp/ddlt-pwned1 /tmp/ddlt-pwned2 /tmp/ddlt-pwned3; do
      if netns_exec "$k" test -e "$f"; then fail "$L.args: an argument ran on node$k ($f)"; fi
    done
  done

  # A program that node2 lacks: 127, and the message names node2.
  run "$L.missing" "$L" -H node1,node2 "$only1"
  expect_rc "$L.missing" 127
  grep -q node2 "$out/$L.missing.err" || fail "$L.missing: node2 not named" "$out/$L.missing.err"
  no_leftovers "$L.missing"
done

# Hosts that cannot be reached, named (last: it stops node3's sshd). With --no-probe the
# launcher meets them itself; without, the probe does.
cat >>"$NETNS_SSH_CONFIG" <<CFG
Host ghost
  HostName $(netns_spare_addr 1)
  User root
  IdentityFile $NETNS_KEY
  UserKnownHostsFile $NETNS_KNOWN_HOSTS
CFG
netns_stop_sshd 3
for L in "${launchers[@]}"; do
  for probe in probe no-probe; do
    extra=()
    [[ $probe == no-probe ]] && extra=(--no-probe)
    run "$L.ghost.$probe" "$L" "${extra[@]}" --connect-timeout 1 -H node1,ghost true
    if [[ $L == mpirun && $probe == no-probe ]]; then
      # Nothing of ddlrun's touches the hosts: mpirun's own ssh fails, names the address, and
      # its status (255) is the job's.
      expect_rc "$L.ghost.$probe" 255
      no_leftovers "$L.ghost.$probe"
      run "$L.refused.$probe" "$L" "${extra[@]}" --connect-timeout 1 -H node1,node3 true
      expect_rc "$L.refused.$probe" 255
      no_leftovers "$L.refused.$probe"
      continue
    fi
    expect_rc "$L.ghost.$probe" 1
    grep -q ghost "$out/$L.ghost.$probe.err" || fail "$L.ghost.$probe: ghost not named" "$out/$L.ghost.$probe.err"
    (($(cat "$out/$L.ghost.$probe.ms") < 15000)) ||
      fail "$L.ghost.$probe: took $(cat "$out/$L.ghost.$probe.ms") ms with --connect-timeout 1"
    no_leftovers "$L.ghost.$probe"
    run "$L.refused.$probe" "$L" "${extra[@]}" --connect-timeout 1 -H node1,node3 true
    expect_rc "$L.refused.$probe" 1
    grep -q node3 "$out/$L.refused.$probe.err" ||
      fail "$L.refused.$probe: node3 not named" "$out/$L.refused.$probe.err"
    no_leftovers "$L.refused.$probe"
  done
done

prefix=$NETNS_PREFIX
rm -f "$only1"
netns_down
if ip netns list | grep -q "^$prefix-"; then fail "namespaces left"; fi
if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
