#!/usr/bin/env bash
# examples/train_mnist_synthetic.py across three fake hosts (tests/netns/hosts.sh) through
# ddlrun's ssh launcher, 2 ranks each: every rank reports ok from its own host (node1..node3),
# the epoch losses printed by rank 0 fall (the last under half the first), and every rank's
# weights digest is the same (bitwise identical weights on every host). The hosts share this
# file system (not /tmp), so the build tree's package ddl is found through PYTHONPATH. Skips
# (77) when fake hosts cannot be made here or the interpreter has no torch. Then the same hosts
# run tests/python/check_ddp_backend.py: an unmodified DDP script on init_process_group("ddl"),
# the C++ ProcessGroup, across hosts, and tests/python/check_ibm_style.py with no PYTHONPATH (the
# agents give their ranks ddlrun's package and the hook that registers the backend).
#   netns_train.sh DDLRUN PYTHON_DIR PYTHON
set -uo pipefail
source "$(dirname "$0")/../lib/python.sh"
ddlrun=$1 pydir=$2 python=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! python_has "$python" torch; then
  echo "netns_train: $python has no torch (scripts/setup installs python3-torch): skipped"
  exit 77
fi
# shellcheck source=../netns/hosts.sh
source "$here/../netns/hosts.sh"
netns_up 3 || exit $?

fail() {
  echo "FAIL netns_train: $1" >&2
  exit 1
}
out=$("$ddlrun" --launcher ssh -H node1:2,node2:2,node3:2 --no-probe \
  --ssh-config "$NETNS_SSH_CONFIG" --tag-output none -x "PYTHONPATH=$pydir" \
  "$python" "$here/../../examples/train_mnist_synthetic.py" --epochs 3 2>&1)
status=$?
echo "$out"
((status == 0)) || fail "ddlrun exited with $status"
for ((r = 0; r < 6; r++)); do
  grep -qx "rank $r of 6 ok" <<<"$out" || fail "rank $r did not report ok"
done
hosts=$(sed -n 's/^rank [0-9]* on \([^:]*\): weights sha256 .*/\1/p' <<<"$out" | sort | uniq -c |
  awk '{print $2 "x" $1}' | xargs)
[[ $hosts == "node1x2 node2x2 node3x2" ]] || fail "ranks ran on '$hosts', not 2 on each node"
digests=$(sed -n 's/^rank [0-9]* on [^:]*: weights sha256 \([0-9a-f]*\)$/\1/p' <<<"$out")
(($(wc -l <<<"$digests") == 6)) || fail "not every rank printed its weights digest"
(($(sort -u <<<"$digests" | wc -l) == 1)) || fail "the ranks' weights differ: $(xargs <<<"$digests")"
losses=$(sed -n 's/^epoch [0-9]*: loss \([0-9.]*\)$/\1/p' <<<"$out" | xargs)
awk -v l="$losses" 'BEGIN { n = split(l, a, " "); exit !(n == 3 && a[3] < 0.5 * a[1]) }' ||
  fail "the losses '$losses' did not fall to under half"
echo "netns_train: training ok (losses $losses, weights $(head -1 <<<"$digests") on every rank)"

suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [[ -e $pydir/ddl/_torch_pg$suffix ]]; then
  out=$("$ddlrun" --launcher ssh -H node1:2,node2:2,node3:2 --no-probe \
    --ssh-config "$NETNS_SSH_CONFIG" --tag-output none -x "PYTHONPATH=$pydir" \
    "$python" "$here/check_ddp_backend.py" ddl 2>&1)
  status=$?
  echo "$out"
  ((status == 0)) || fail "DDP on backend ddl: ddlrun exited with $status"
  for ((r = 0; r < 6; r++)); do
    grep -qx "rank $r of 6 ok" <<<"$out" || fail "DDP on backend ddl: rank $r did not report ok"
  done
  echo "netns_train: DDP on backend ddl ok"
  # IBM's kind of script, no PYTHONPATH: the agents give their ranks ddlrun's package.
  out=$(env -u PYTHONPATH "$ddlrun" --launcher ssh -H node1:2,node2:2,node3:2 --no-probe \
    --ssh-config "$NETNS_SSH_CONFIG" --tag-output none "$python" "$here/check_ibm_style.py" 2>&1)
  status=$?
  echo "$out"
  ((status == 0)) || fail "the IBM-style script: ddlrun exited with $status"
  for ((r = 0; r < 6; r++)); do
    grep -qx "rank $r of 6 ok" <<<"$out" || fail "the IBM-style script: rank $r did not report ok"
  done
  echo "netns_train: IBM-style script ok"
else
  echo "netns_train: no ddl._torch_pg (libtorch-dev): DDP on backend ddl not run"
fi
# Nothing left on any host: 3 s to go (an agent's keeper and sshd's session end just after
# ddlrun does), as in the other namespace tests.
for k in 1 2 3; do
  for ((i = 0; i < 30; i++)); do
    left=$(netns_pids "$k")
    [[ -z $left ]] && break
    sleep 0.1
  done
  [[ -z $left ]] || fail "processes left on node$k: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
done
echo "netns_train: ok"
