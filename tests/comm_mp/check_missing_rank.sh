#!/usr/bin/env bash
# A job whose rank 1 never calls ddl_init (it sleeps): the ranks that did must fail within
# DDL_TIMEOUT (2 s) naming rank 1 and its host, through each bootstrap of ddlrun's local
# launcher.
#   check_missing_rank.sh DDLRUN INIT_FINALIZE pmix|rendezvous [ddlrun options...]
# pmix: the ranks are clients of ddlrun's PMIx server (the local launcher's default);
# rendezvous: the ranks' PMIx variables are removed, so they meet at ddlrun's rendezvous.
# shellcheck disable=SC2016  # $0 and $DDL_RANK are the rank shell's, expanded there
set -uo pipefail
ddlrun=$1 prog=$2 how=$3
shift 3
if [[ $how == pmix ]]; then
  want="rank 1 (localhost) did not reach ddl_init within 2 s (PMIx_Fence: TIMEOUT; did it"
  want+=" start? see its output)"
  wrap='exec "$0"'
else
  want="rank 1 (localhost) has not joined the rendezvous in time (did they start? see their"
  want+=" output)"
  wrap='exec env -u PMIX_NAMESPACE -u PMIX_SERVER_URI4 -u PMIX_SERVER_URI3 -u PMIX_SERVER_URI2 \
    -u PMIX_SERVER_URI21 "$0"'
fi
start=$SECONDS
out=$(DDL_TIMEOUT=2 timeout 60 "$ddlrun" --tag-output none -H localhost:3 --no-probe "$@" \
  sh -c 'if [ "$DDL_RANK" = 1 ]; then exec sleep 30; fi; '"$wrap" "$prog" 2>&1)
status=$?
echo "$out"
if ((status == 0)); then
  echo "check_missing_rank: the job succeeded" >&2
  exit 1
fi
if ((SECONDS - start > 20)); then
  echo "check_missing_rank: the job took $((SECONDS - start)) s" >&2
  exit 1
fi
# Whichever rank fails first is reported (ddlrun may stop the other before it prints).
if [[ $how == pmix ]]; then
  lines=(-e "ddl_init: rank 0: $want" -e "ddl_init: rank 2: $want")
else
  lines=(-e "ddl_init: $want")
fi
if ! grep -qxF "${lines[@]}" <<<"$out"; then
  echo "check_missing_rank: no line 'ddl_init: [rank 0: ]$want'" >&2
  exit 1
fi
echo "check_missing_rank: rank 1 was named ($how)"
