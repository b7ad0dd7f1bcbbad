# Process checks the shell tests share (sourced, not run).

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
