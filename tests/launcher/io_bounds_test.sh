#!/usr/bin/env bash
# ddlrun's output and stdin under readers and writers that do not keep up, with real
# ranks through the local launcher or the ssh one (fake hosts: hosts.sh):
#   - ranks running `yes` into a reader that never reads: ddlrun's VmRSS (and every agent's)
#     stays under 64 MiB, and SIGTERM ends the job within 5 s with 143;
#   - `yes` ranks into `head -1`: the job ends within 5 s with 141 and says stdout is closed;
#   - `yes | ddlrun ... sleep`: ddlrun's (and the agents') VmRSS stays under 64 MiB, exit 0;
#     5 MB on stdin reach rank 0 byte for byte;
#   - --tag-output none and --output-dir pass 200,000 bytes of binary (NUL bytes, no newline
#     at the end) byte for byte (cmp), and --tag-output none keeps lines that two ranks write
#     in pieces whole;
#   - stdout on /dev/full: exit 1 and "cannot write standard output: No space left on device";
#   - --output-dir naming a file: exit 2 before any rank runs.
#
#   - a libddl job with `yes` on its stdin runs (stdin never holds back PMIx or control frames).
#
# Usage: io_bounds_test.sh DDLRUN local|ssh [DDL_CHECK]   (ssh: exit 77, skipped, when not root
# or without ip netns or sshd)
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$(realpath "$1")
mode=$2
check=${3:+$(realpath "$3")}  # tests/comm_mp's ddl_check, when given
limit_kb=$((64 * 1024))

if [[ $mode == ssh ]]; then
  # shellcheck source=SCRIPTDIR/../netns/hosts.sh
  source "$(dirname "$0")/../netns/hosts.sh"
  netns_up 2 || exit $?
  unset SSH_AUTH_SOCK
  export HOME="$NETNS_DIR/home"
  mkdir -p "$HOME"
  work="$NETNS_DIR/io"  # every host sees it
  mkdir -p "$work"
  args=(--launcher ssh --ssh-config "$NETNS_SSH_CONFIG" --no-probe)
  two=(-H node1:1,node2:1)
  one=(-H node1:1)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  args=(--no-probe)
  two=(-H localhost:2)
  one=(-H localhost:1)
fi

# The ddlrun agents running on the fake hosts (none under the local launcher).
agents() {
  [[ $mode == ssh ]] || return 0
  local k pid
  for k in 1 2; do
    for pid in $(netns_pids "$k"); do
      tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- '--agent' && echo "$pid"
    done
  done
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# sample SECONDS PID: the peak VmRSS (kB) of PID and of the agents over SECONDS, as
# "ddlrun=N agents=M".
sample() {
  local end=$((SECONDS + $1)) pid=$2 peak=0 apeak=0 r a
  while ((SECONDS < end)) && [[ -e /proc/$pid ]]; do
    r=$(rss_kb "$pid")
    ((${r:-0} > peak)) && peak=$r
    for a in $(agents); do
      r=$(rss_kb "$a")
      ((${r:-0} > apeak)) && apeak=$r
    done
    sleep 0.1
  done
  echo "ddlrun=$peak agents=$apeak"
}
check_rss() {  # check_rss WHAT "ddlrun=N agents=M"
  local d=${2#ddlrun=} a=${2#*agents=}
  d=${d%% *}
  echo "$1: peak VmRSS ddlrun ${d} kB, agents ${a} kB"
  ((d > 0 && d < limit_kb)) || fail "$1: ddlrun's VmRSS reached ${d} kB (limit $limit_kb)"
  ((a < limit_kb)) || fail "$1: an agent's VmRSS reached ${a} kB (limit $limit_kb)"
  if [[ $mode == ssh ]] && ((a == 0)); then fail "$1: no agent found to measure"; fi
}

# 1. A reader that never reads; then SIGTERM.
fifo="$work/fifo"
mkfifo "$fifo"
sleep 60 <"$fifo" &
reader=$!
"$ddlrun" "${args[@]}" "${two[@]}" sh -c yes >"$fifo" 2>"$work/stalled.err" &
job=$!
check_rss "yes into a stalled reader" "$(sample 4 "$job")"
t0=$(now_ms)
kill -TERM "$job"
for _ in $(seq 100); do [[ -e /proc/$job ]] || break; sleep 0.05; done
if [[ -e /proc/$job ]]; then
  fail "SIGTERM did not end ddlrun within 5 s while its stdout is stalled"
  kill -KILL "$job"
fi
wait "$job"
rc=$?
echo "SIGTERM with stdout stalled: exit $rc after $(($(now_ms) - t0)) ms"
((rc == 143)) || { fail "exit $rc after SIGTERM, expected 143"; sed 's/^/    | /' "$work/stalled.err"; }
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null

# 2. The reader leaves: EPIPE.
t0=$(now_ms)
"$ddlrun" "${args[@]}" "${two[@]}" sh -c yes 2>"$work/epipe.err" | head -1 >"$work/epipe.out"
rc=${PIPESTATUS[0]}
ms=$(($(now_ms) - t0))
echo "yes | head -1: exit $rc after $ms ms"
((rc == 141)) || fail "exit $rc with stdout closed, expected 141"
((ms < 5000)) || fail "with stdout closed the job took $ms ms"
grep -q '^ddlrun: standard output is closed (EPIPE); stopping 2 processes$' "$work/epipe.err" ||
  { fail "no EPIPE message"; sed 's/^/    | /' "$work/epipe.err"; }
[[ $(cat "$work/epipe.out") == *y ]] || fail "head -1 got '$(cat "$work/epipe.out")'"

# 3. A stdin producer faster than rank 0 reads (it never does).
mkfifo "$work/in"
yes >"$work/in" 2>/dev/null &
producer=$!
"$ddlrun" "${args[@]}" "${two[@]}" sh -c 'sleep 4' <"$work/in" >"$work/stdin.out" 2>&1 &
job=$!
check_rss "yes into ddlrun's stdin" "$(sample 4 "$job")"
wait "$job"
rc=$?
((rc == 0)) || { fail "yes | ddlrun sh -c 'sleep 4' exited $rc"; sed 's/^/    | /' "$work/stdin.out"; }
kill "$producer" 2>/dev/null
wait "$producer" 2>/dev/null

# ... and what rank 0 does read arrives whole, past every window and queue bound.
head -c 5000000 /dev/urandom >"$work/stdin.data"
"$ddlrun" "${args[@]}" "${two[@]}" sh -c "[ \$RANK = 0 ] && cat >$work/stdin.got; exit 0" \
  <"$work/stdin.data" || fail "5 MB on stdin: exit $?"
cmp "$work/stdin.data" "$work/stdin.got" || fail "5 MB on stdin: rank 0 read other bytes"

# ... and never holds back the job's own traffic: a libddl job (PMIx fences through the
# agents, then an allreduce) with yes on stdin runs as it would without.
if [[ -n $check ]]; then
  t0=$(now_ms)
  timeout 60 "$ddlrun" "${args[@]}" "${two[@]}" --tag-output none "$check" < <(yes 2>/dev/null) \
    >"$work/check.out" 2>&1
  rc=$?
  echo "libddl job with yes on stdin: exit $rc after $(($(now_ms) - t0)) ms"
  ((rc == 0)) || { fail "libddl job with yes on stdin: exit $rc"; sed 's/^/    | /' "$work/check.out"; }
fi

# 4. Bytes unchanged: binary, NUL bytes, no newline at the end, a 200,000-byte "line".
head -c 200000 /dev/urandom | tr -d '\n' >"$work/data"
printf 'a\0b' >>"$work/data"
"$ddlrun" "${args[@]}" "${one[@]}" --tag-output none cat "$work/data" >"$work/none.out" ||
  fail "--tag-output none: exit $?"
cmp "$work/data" "$work/none.out" || fail "--tag-output none changed the bytes"
# ... in whole lines, though, when ranks write their lines in pieces.
"$ddlrun" "${args[@]}" "${two[@]}" --tag-output none sh -c \
  'for i in $(seq 300); do printf "rank$RANK-"; sleep 0.001; printf "line$i\n"; done' \
  >"$work/pieces.out" || fail "lines in pieces: exit $?"
n=$(grep -c -E '^rank[01]-line[0-9]+$' "$work/pieces.out")
((n == 600)) || { fail "lines in pieces: $n of 600 whole"; grep -v -m5 -E '^rank[01]-line[0-9]+$' "$work/pieces.out"; }
"$ddlrun" "${args[@]}" "${two[@]}" --output-dir "$work/dir" sh -c "cat $work/data; cat $work/data >&2" ||
  fail "--output-dir: exit $?"
for f in rank.0/stdout rank.0/stderr rank.1/stdout rank.1/stderr; do
  cmp "$work/data" "$work/dir/$f" || fail "--output-dir changed the bytes of $f"
done

# 5. A full disk behind stdout.
"$ddlrun" "${args[@]}" "${two[@]}" sh -c 'echo hi' >/dev/full 2>"$work/full.err"
rc=$?
((rc == 1)) || fail "stdout on /dev/full: exit $rc, expected 1"
grep -q '^ddlrun: cannot write standard output: No space left on device' "$work/full.err" ||
  { fail "stdout on /dev/full: no message"; sed 's/^/    | /' "$work/full.err"; }

# 6. --output-dir naming a file: refused before anything runs.
touch "$work/afile"
"$ddlrun" "${args[@]}" "${two[@]}" --output-dir "$work/afile" sh -c "touch $work/ran" \
  2>"$work/afile.err"
rc=$?
((rc == 2)) || fail "--output-dir naming a file: exit $rc, expected 2"
grep -q "output-dir $work/afile: exists and is not a directory" "$work/afile.err" ||
  { fail "--output-dir naming a file: no message"; sed 's/^/    | /' "$work/afile.err"; }
[[ ! -e $work/ran ]] || fail "--output-dir naming a file: a rank ran"

((fails == 0)) && echo "io bounds ($mode): all passed"
((fails == 0))
