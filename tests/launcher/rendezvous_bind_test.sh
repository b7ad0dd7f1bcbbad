#!/usr/bin/env bash
# launcher.rendezvous_bind_local: under the local launcher, ddlrun's rendezvous for the ranks
# listens on the address it tells them ($DDL_RENDEZVOUS, 127.0.0.1) only, not on every address:
# the kernel's table of listening sockets (/proc/net/tcp, tcp6) has it on 127.0.0.1 alone.
#   rendezvous_bind_test.sh DDLRUN
set -uo pipefail
ddlrun=${1:?usage: rendezvous_bind_test.sh DDLRUN}
fail() { echo "launcher.rendezvous_bind_local: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# listening TABLE PORT: the local addresses (kernel hex) listening on PORT in /proc/net/TABLE
listening() {
  awk -v p="$(printf ':%04X' "$2")" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p {
    print substr($2, 1, length($2) - 5) }' "/proc/net/$1"
}

# Rank 0 says where the rendezvous is, then waits for the test to look.
# shellcheck disable=SC2016
"$ddlrun" -H localhost:2 --no-probe --timeout 30 sh -c \
  'if [ "$DDL_RANK" = 0 ]; then echo "$DDL_RENDEZVOUS" >"$0/rv"; fi
   while [ ! -e "$0/done" ]; do sleep 0.05; done' "$work" >"$work/out" 2>&1 &
job=$!
for _ in $(seq 200); do [ -s "$work/rv" ] && break; sleep 0.05; done
rv=$(cat "$work/rv" 2>/dev/null)
[ -n "$rv" ] || { touch "$work/done"; wait "$job"; fail "no DDL_RENDEZVOUS: $(cat "$work/out")"; }
port=${rv##*:}
v4=$(listening tcp "$port")
v6=$(listening tcp6 "$port")
touch "$work/done"
wait "$job" || fail "ddlrun exited $?: $(cat "$work/out")"
[ "${rv%:*}" = 127.0.0.1 ] || fail "the ranks were told $rv, not 127.0.0.1:PORT"
[ "$v4" = 0100007F ] && [ -z "$v6" ] ||
  fail "the rendezvous at $rv listens on tcp '$v4', tcp6 '$v6', not 127.0.0.1 alone"
echo "launcher.rendezvous_bind_local: ok ($rv)"
