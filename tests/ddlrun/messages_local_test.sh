#!/usr/bin/env bash
# Messages of small defects, with the local launcher:
#   1. a deleted current directory: one clear error before any rank starts (PMIx printed an
#      error per rank), exit 1; with --wdir the job runs;
#   2. out of descriptors (ulimit -n 24, 8 ranks): "cannot create a pipe" says the limit and
#      what to do;
#   3. per-node mode on a host whose name -H syntax cannot take: the error cites the nodes'
#      host names (it cited '-H:1:2' when no -H was given).
#   messages_local_test.sh DDLRUN
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/procs.sh
source "$(dirname "$0")/../lib/procs.sh"
ddlrun=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/gone"
(cd "$work/gone" && rmdir "$work/gone" && "$ddlrun" -H localhost:2 --no-probe true) 2>"$work/gone.err"
status=$?
((status == 1)) || fail "deleted directory: exit $status, not 1" "$work/gone.err"
want="ddlrun: error: the current directory cannot be the ranks' working directory (No such file or directory; was it deleted?): cd to a directory that exists, or give --wdir DIR"
[[ $(cat "$work/gone.err") == "$want" ]] || fail "deleted directory: not the one error" "$work/gone.err"
mkdir "$work/gone"
(cd "$work/gone" && rmdir "$work/gone" && "$ddlrun" -H localhost:2 --no-probe --wdir "$work" true) \
  2>"$work/wdir.err" || fail "deleted directory with --wdir: the job failed" "$work/wdir.err"

(ulimit -n 24 && "$ddlrun" -H localhost:8 --no-probe true) 2>"$work/fds.err"
status=$?
((status == 1)) || fail "ulimit -n 24: exit $status, not 1" "$work/fds.err"
grep -qx "ddlrun: error: cannot create a pipe: Too many open files; ddlrun holds 3 to 4 descriptors for each rank it starts here, and this process may open 24 (ulimit -n): raise the limit (ulimit -n 4096) or start fewer ranks here" \
  "$work/fds.err" || fail "ulimit -n 24: no hint" "$work/fds.err"
# 3. per-node mode on a host named 'x[1' (a UTS namespace, when root): the error cites the
# nodes' host names, not a -H that was never given.
if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null && command -v python3 >/dev/null; then
  unshare --uts python3 -c "import os, socket, sys; socket.sethostname('x[1'); os.execv(sys.argv[1], sys.argv[1:])" \
    "$ddlrun" --node-rank 0 --nnodes 1 --rdzv 127.0.0.1:29617 --dry-run true 2>"$work/name.err"
  grep -qx "ddlrun: error: the nodes' host names:1:2: unclosed '\[' in 'x\[1': add '\]' after the range" \
    "$work/name.err" || fail "per-node host name: the error does not cite the nodes' host names" "$work/name.err"
fi
((fails == 0)) && echo "messages_local: ok"
exit $((fails > 0))
