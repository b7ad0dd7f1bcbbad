#!/usr/bin/env bash
# Ctrl-C of a Python job: 4 ranks in an allreduce loop (tests/python/sigint_loop.py, through
# `import ddl`, ddl's worker thread or the torch backend "ddl"), SIGINT to ddlrun once every
# rank has started. The job must end with status 130 within 20 s, every rank by itself (not
# killed by ddlrun after --kill-grace), and each rank may print at most one line on stderr,
# "rank R: interrupted (KeyboardInterrupt)": no traceback, no interpreter dump ("object repr",
# "lost sys.stderr").
#   check_sigint.sh DDLRUN PYTHON_DIR PYTHON numpy|worker|torch
set -uo pipefail
source "$(dirname "$0")/../lib/python.sh"
ddlrun=$1 pydir=$2 python=$3 what=$4
here=$(cd "$(dirname "$0")" && pwd)
n=4
if [[ $what == torch ]] && ! python_has "$python" torch; then
  echo "check_sigint: $python has no torch: skipped"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/check_sigint.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
"$ddlrun" -H "localhost:$n" --no-probe -x "PYTHONPATH=$pydir" "$python" \
  "$here/sigint_loop.py" "$what" >"$out" 2>&1 &
pid=$!
for ((i = 0; i < 600; i++)); do
  (($(grep -c '<stdout>:rank [0-9]* started$' "$out") == n)) && break
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
kill -INT "$pid"
for ((i = 0; i < 200; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  cat "$out"
  echo "check_sigint: ddlrun still runs 20 s after SIGINT" >&2
  kill -KILL "$pid"
  exit 1
fi
wait "$pid"
status=$?
cat "$out"
failed=0
if ((status != 130)); then
  echo "check_sigint: ddlrun exited with $status, not 130" >&2
  failed=1
fi
if grep -q "sending SIGKILL" "$out"; then
  echo "check_sigint: the ranks did not end by themselves after SIGINT" >&2
  failed=1
fi
for bad in "object repr" "lost sys.stderr" "Traceback"; do
  if grep -qF "$bad" "$out"; then
    echo "check_sigint: the output holds '$bad'" >&2
    failed=1
  fi
done
for ((r = 0; r < n; r++)); do
  lines=$(grep -c "^\[1,$r\]<stderr>:" "$out")
  if ((lines > 1)); then
    echo "check_sigint: rank $r printed $lines lines on stderr" >&2
    failed=1
  elif ((lines == 1)) &&
    ! grep -qxF "[1,$r]<stderr>:rank $r: interrupted (KeyboardInterrupt)" "$out"; then
    echo "check_sigint: rank $r's line is not 'rank $r: interrupted (KeyboardInterrupt)'" >&2
    failed=1
  fi
done
((failed == 0)) && echo "check_sigint: the job ended with status 130, at most one line per rank"
exit "$failed"
