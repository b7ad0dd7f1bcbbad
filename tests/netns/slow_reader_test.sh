#!/usr/bin/env bash
# Supervision under a reader that does not read, on N namespace hosts
# (hosts.sh, default 5) through the ssh launcher, one rank a host, heartbeat deadline D s:
#   tree   --tree-width W (default 2): the rank of the last host (below the first level) prints
#          MB MB (`seq`) into `ddlrun | (sleep PAUSE; cat)`, PAUSE > D: every byte arrives
#          (sha256), ddlrun exits 0 and loses no host (no heartbeat is starved behind the
#          output that waits: back-pressure slows the rank only);
#   flat   the same without the tree;
#   fail_flat / fail_tree  rank 0 `sleep 1; exit 3`, every other rank `yes`, into `| sleep 60`
#          (a reader that never reads): ddlrun exits 3 within 12 s naming rank 0, as the local
#          launcher does, and not 141 once the reader leaves;
# and after each, nothing of the job on any host.
# Prints the seconds each part took.
#
# Usage: slow_reader_test.sh DDLRUN [N [W [MB [PAUSE [D]]]]]   (77, skipped, without root, ip
# netns or sshd)
set -uo pipefail
ddlrun=$(realpath "$1")
n=${2:-5}
width=${3:-2}
mb=${4:-12}
pause=${5:-7}
deadline=${6:-3}
# shellcheck source=SCRIPTDIR/hosts.sh
source "$(dirname "$0")/hosts.sh"
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
netns_up "$n" || exit $?
netns_session
common=(--launcher ssh --no-probe --ssh-config "$NETNS_SSH_CONFIG" --heartbeat-timeout "$deadline"
  -H "$NETNS_LIST")

# nothing_left NAME: within 5 s no process of the job and no directory of ddlrun's on any host.
nothing_left() {
  local i left
  for ((i = 0; i < 50; i++)); do
    left=$(netns_job_procs_of "${NETNS_NUMBERS[@]}")
    [[ -z $left ]] && break
    sleep 0.1
  done
  [[ -z $left ]] || fail "$1: left behind: $(tr '\n' ';' <<<"$left")"
}

# Numbers up to `count` make MB MB of output whose every byte and its order sha256 checks.
count=$(seq 1 10000000 | head -c $((mb * 1000000)) | wc -l)
want=$(seq 1 "$count" | sha256sum | cut -d' ' -f1)
bytes=$(seq 1 "$count" | wc -c)

# slow NAME WIDTH: the last host's rank prints, the reader pauses.
slow() {
  local t0 rc got
  echo "== $1: rank $((n - 1)) prints $bytes bytes, the reader pauses $pause s"
  t0=$(now_ms)
  # shellcheck disable=SC2016  # $RANK is the rank's
  timeout 120 "$ddlrun" "${common[@]}" --tree-width "$2" --tag-output none \
    sh -c "if [ \"\$RANK\" = $((n - 1)) ]; then seq 1 $count; fi" 2>"$out/$1.err" |
    (sleep "$pause"; cat) >"$out/$1.out"
  rc=${PIPESTATUS[0]}
  got=$(sha256sum <"$out/$1.out" | cut -d' ' -f1)
  echo "  $1: exit $rc, $(wc -c <"$out/$1.out") of $bytes bytes, $(($(now_ms) - t0)) ms"
  [[ $rc == 0 ]] || fail "$1: exit $rc, not 0" "$out/$1.err"
  [[ $got == "$want" ]] || fail "$1: the output is not every byte in order" "$out/$1.err"
  grep -Eq 'heartbeat|lost|took no data|closed' "$out/$1.err" && fail "$1: a host was lost" "$out/$1.err"
  nothing_left "$1"
}

# failing NAME WIDTH: rank 0 fails while the others flood a reader that never reads.
failing() {
  local t0 rc ms reader
  echo "== $1: rank 0 exits 3 after 1 s, the others print without end, nobody reads"
  mkfifo "$out/$1.pipe"
  sleep 60 <"$out/$1.pipe" &
  reader=$!
  t0=$(now_ms)
  # shellcheck disable=SC2016  # $RANK is the rank's
  timeout 50 "$ddlrun" "${common[@]}" --tree-width "$2" \
    sh -c 'if [ "$RANK" = 0 ]; then sleep 1; exit 3; fi; exec yes' >"$out/$1.pipe" 2>"$out/$1.err"
  rc=$?
  ms=$(($(now_ms) - t0))
  kill "$reader" 2>/dev/null
  wait "$reader" 2>/dev/null
  echo "  $1: exit $rc after $ms ms"
  [[ $rc == 3 ]] || fail "$1: exit $rc, not 3" "$out/$1.err"
  ((ms < 12000)) || fail "$1: took $ms ms" "$out/$1.err"
  grep -q 'rank 0 .*exited with status 3' "$out/$1.err" || fail "$1: rank 0 is not named" "$out/$1.err"
  nothing_left "$1"
}

slow tree "$width"
slow flat 0
failing fail_flat 0
failing fail_tree "$width"

passed_or_exit
