# What the shell tests share (sourced, not run): process checks, clocks, failure counting.

# alive PID [WORDS]: PID runs and is not a zombie (and, with WORDS, its command line holds
# them). A process reaped between two looks is gone: ps then prints nothing, which must not
# read as "not a zombie".
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ -n $state && $state != Z* ]] || return 1
  [[ -z ${2:-} ]] || tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$2"
}

# own_pids PATTERN ENTRY: the processes pgrep -f PATTERN finds whose environment holds ENTRY
# ("VAR=value") exactly, one a line: a test's own processes, not those of another test that
# runs the same program at the same time.
own_pids() {
  local pid
  for pid in $(pgrep -f "$1" || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF -- "$2" && echo "$pid"
  done
}

# most_threads_of_children PID: until PID ends, samples the thread count of each of its children
# every 10 ms and prints the most seen (0 if none was seen). A job run under `timeout` has
# the program as that child.
most_threads_of_children() {
  local most=0 p t
  while kill -0 "$1" 2>/dev/null; do
    for p in $(pgrep -P "$1"); do
      t=$(awk '/^Threads:/ {print $2}' "/proc/$p/status" 2>/dev/null)
      ((${t:-0} > most)) && most=$t
    done
    sleep 0.01
  done
  echo "$most"
}

# What every test script counts and prints the same way.
now_ms() { echo $(($(date +%s%N) / 1000000)); }  # milliseconds since the epoch
now_us() { echo "${EPOCHREALTIME/./}"; }         # microseconds since the epoch

# fail WHAT [FILE...]: one failed check: "FAIL: WHAT", then the first FAIL_LINES (default 40)
# lines of each FILE indented (a command's output, to see why); counted in `fails`.
fails=0
fail() {
  echo "FAIL: $1"
  shift
  local f
  for f in "$@"; do
    [[ -n $f ]] && sed -n "1,${FAIL_LINES:-40}s/^/    | /p" "$f"
  done
  fails=$((fails + 1))
}

# passed_or_exit: exits 1 after "N failure(s)" when a check failed, else says "all passed".
passed_or_exit() {
  if ((fails > 0)); then
    echo "$fails failure(s)"
    exit 1
  fi
  echo "all passed"
}
