#!/usr/bin/env bash
# PMIx and MPI programs started by ddlrun's own PMIx server, without mpirun:
#   pmix_jobs.sh local DDLRUN PMIX_CLIENT [MPI_PROGRAM]   4 ranks on this host
#   pmix_jobs.sh netns DDLRUN PMIX_CLIENT [MPI_PROGRAM]   3 namespace hosts x 2 ranks (ssh);
#                                                          skips (77) unless root
# Each run: pmix_client with a collecting fence and with a non-collecting one (Gets of other
# hosts' keys by direct modex), the MPI program (MPI_Init/Allreduce/Finalize), PMIx_Abort from
# one rank (the job ends everywhere with its status 7 and message), and a fence that one rank
# never enters (it fails after the timeout, naming that rank). Locally also the plain launch of
# 2 ranks, whose PMIx server takes this host's topology from the probe cache.
set -uo pipefail
mode=$1 ddlrun=$2 client=$3 mpi=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
failed=0

if [[ $mode == netns ]]; then
  # shellcheck source=../netns/hosts.sh
  source "$here/../netns/hosts.sh"
  netns_up 3 || exit $?
  n=6
  where=(--launcher pmix -H node1:2,node2:2,node3:2 --no-probe --ssh-config "$NETNS_SSH_CONFIG")
  # One rank on node2, so that the rank missing from the fence is the whole of its host.
  where_skip=(--launcher pmix -H node1:2,node2:1,node3:2 --no-probe
    --ssh-config "$NETNS_SSH_CONFIG")
  skip_rank=2 skip_n=5 skip_where="rank 2 (node2)"
  abort_where="rank 3 (node2)"
  mpi_env=(-x "OMPI_MCA_btl_tcp_if_include=$NETNS_NET")
else
  n=4
  where=(--launcher pmix -H localhost:4 --no-probe)
  where_skip=()
  abort_where="rank 3 (localhost)"
  mpi_env=()
fi

pass() { echo "PASS $1"; }
fail() {
  echo "FAIL $1"
  failed=1
}

# no_leftovers NAME: on namespace hosts, nothing runs once a job is over (3 s to go away).
no_leftovers() {
  [[ $mode == netns ]] || return 0
  local k i left
  for k in 1 2 3; do
    for ((i = 0; i < 30; i++)); do
      left=$(netns_pids "$k")
      [[ -z $left ]] && break
      sleep 0.1
    done
    if [[ -n $left ]]; then
      # shellcheck disable=SC2086
      fail "$1: processes left on node$k: $(ps -o pid=,etimes=,args= -p "$(echo $left | tr ' ' ,)" | tr '\n' ';')"
      # shellcheck disable=SC2086
      kill -KILL $left 2>/dev/null # so that the next check starts clean
    fi
  done
}

# Runs a job whose every rank must print `pattern R`; prints its output.
every_rank() {
  local what=$1 pattern=$2
  shift 2
  echo "== $what"
  local out status r
  out=$("$ddlrun" --tag-output none --timeout 60 "$@" 2>&1)
  status=$?
  echo "$out" | tail -n "$((n + 4))"
  if ((status != 0)); then
    fail "$what: ddlrun exited with $status"
    no_leftovers "$what"
    return
  fi
  for ((r = 0; r < n; r++)); do
    if ! grep -q "${pattern/RANK/$r}" <<<"$out"; then
      fail "$what: rank $r did not report"
      return
    fi
  done
  pass "$what"
  no_leftovers "$what"
}

every_rank "pmix_client, collecting fence" "pmix_client: rank RANK of $n, .*collecting fence, $n keys ok" \
  "${where[@]}" "$client" collect
every_rank "pmix_client, non-collecting fence (direct modex)" \
  "pmix_client: rank RANK of $n, .*non-collecting fence, $n keys ok" \
  "${where[@]}" "$client" nocollect
if [[ -n $mpi ]]; then
  every_rank "Open MPI program without mpirun" "mpi_allreduce: rank RANK of $n on .*: sum .* ok" \
    "${where[@]}" "${mpi_env[@]}" "$mpi"
else
  echo "(no MPI program: mpicc was not found when this was built)"
fi

# The plain launch (auto launcher, this host probed through its cache) of 2 ranks: ddlrun's PMIx
# server takes this host's topology from the probe cache (written by the first run, read by the
# second) and PMIx clients and an Open MPI program still work.
if [[ $mode == local ]]; then
  cache=$(mktemp -d "${TMPDIR:-/tmp}/pmix_jobs_cache.XXXXXX")
  saved=("${XDG_CACHE_HOME-}" "${DDL_PROBE_CACHE-}") saved_n=$n n=2
  export XDG_CACHE_HOME=$cache
  unset DDL_PROBE_CACHE
  for run in writes reads; do
    every_rank "pmix_client under -H localhost:2 (the probe cache $run the topology)" \
      "pmix_client: rank RANK of 2, .*collecting fence, 2 keys ok" -H localhost:2 "$client" collect
  done
  if [[ -n $mpi ]]; then
    every_rank "Open MPI program under -H localhost:2" "mpi_allreduce: rank RANK of 2 on .*: sum .* ok" \
      -H localhost:2 "$mpi"
  fi
  if compgen -G "$cache/ddlrun/hwloc/*.xml" >/dev/null; then
    pass "the launch kept this host's topology in the probe cache"
  else
    fail "no topology was kept in $cache/ddlrun/hwloc"
  fi
  rm -rf "$cache"
  n=$saved_n
  if [[ -n ${saved[0]} ]]; then export XDG_CACHE_HOME=${saved[0]}; else unset XDG_CACHE_HOME; fi
  [[ -n ${saved[1]} ]] && export DDL_PROBE_CACHE=${saved[1]}
fi

echo "== PMIx_Abort from rank 3"
out=$(PMIX_CLIENT_ABORT=3 "$ddlrun" --tag-output none --timeout 60 --kill-grace 2 \
  -x PMIX_CLIENT_ABORT "${where[@]}" "$client" 2>&1)
status=$?
echo "$out" | tail -n 8
if ((status != 7)); then
  fail "abort: ddlrun exited with $status, not 7"
elif ! grep -qx "ddlrun: $abort_where exited with status 7; stopping the other $((n - 1)) processes" <<<"$out" ||
  ! grep -qx "  PMIx_Abort(status 7): rank 3 gives up" <<<"$out"; then
  fail "abort: ddlrun did not name rank 3, its status and its message"
else
  pass "PMIx_Abort ends the job with status 7"
fi
no_leftovers "abort"

# missing_rank WHAT TIMEOUT_VAR: rank $skip_rank never enters the fence; the fence's timeout (3 s)
# comes from the ranks' PMIX_TIMEOUT (PMIX_CLIENT_TIMEOUT) or from ddlrun's
# DDL_PMIX_FENCE_TIMEOUT.
missing_rank() {
  local what=$1 var=$2 start out status want
  echo "== $what"
  start=$SECONDS
  out=$(env "$var=3" PMIX_CLIENT_SKIP=$skip_rank "$ddlrun" --tag-output none --timeout 60 \
    --kill-grace 2 -x PMIX_CLIENT_SKIP -x PMIX_CLIENT_TIMEOUT "${where_skip[@]}" "$client" 2>&1)
  status=$?
  echo "$out" | tail -n 8
  want="ddlrun: a PMIx fence of all $skip_n ranks timed out after 3 s waiting for $skip_where: it never entered the fence (is it stuck, or does it skip the call?)"
  if ((status == 0)); then
    fail "$what: the job succeeded"
  elif ! grep -qxF "$want" <<<"$out"; then
    fail "$what: no line '$want'"
  elif ((SECONDS - start > 30)); then
    fail "$what: the job took $((SECONDS - start)) s"
  else
    pass "$what: the fence fails naming rank $skip_rank (status $status)"
  fi
  no_leftovers "$what"
}

if ((${#where_skip[@]} > 0)); then
  missing_rank "a rank missing from a fence with PMIX_TIMEOUT" PMIX_CLIENT_TIMEOUT
  missing_rank "a rank missing from a fence, DDL_PMIX_FENCE_TIMEOUT" DDL_PMIX_FENCE_TIMEOUT
fi
exit "$failed"
