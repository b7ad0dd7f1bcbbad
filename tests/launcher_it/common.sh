# Helpers for the launcher integration tests (sourced). Each test runs ddlrun for real, with
# the real launcher, and checks what every rank saw.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

# A private directory removed at exit (after any other cleanup the test registers).
it_tmp=$(mktemp -d /tmp/ddl_launcher_it.XXXXXX)
chmod 755 "$it_tmp"
cleanups=()
cleanup_all() {
  local i
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[i]}" || true; done
  rm -rf "$it_tmp"
}
trap cleanup_all EXIT

# value NAME FILE: the value of NAME in a file of `env -0`-style NUL-separated NAME=value.
value() { tr '\0' '\n' <"$2" | sed -n "s/^$1=//p" | head -1; }

# The script every rank runs: its environment (NUL separated) to $dir/env.$RANK, its arguments
# (NUL separated) to $dir/args.$RANK, then `exit ${FAIL_RANK_CODE}` on rank $FAIL_RANK.
rank_script='dir=$0; env -0 > "$dir/env.$RANK"; printf "%s\0" "$@" > "$dir/args.$RANK";
if [ "$RANK" = "${FAIL_RANK:-none}" ]; then exit "$FAIL_RANK_CODE"; fi
if [ -n "${FAIL_RANK:-}" ]; then sleep 60; fi; exit 0'

# The awkward arguments every rank must receive byte for byte.
awkward_args=('a b' "it's" '"double"' '$(touch /tmp/ddl_pwned)' 'x;y' $'tab\there' $'new\nline' '' '*' '\\back')

# check_ranks DIR N: every rank 0..N-1 wrote its files, with the right variables and the
# awkward arguments byte for byte; the job-wide variables agree across ranks.
check_ranks() {
  local dir=$1 n=$2 r token="" port="" want
  want="$it_tmp/args.want"
  printf '%s\0' "${awkward_args[@]}" >"$want"
  for ((r = 0; r < n; r++)); do
    [[ -f $dir/env.$r ]] || fail "rank $r did not run (no $dir/env.$r)"
    local e=$dir/env.$r
    [[ $(value RANK "$e") == "$r" ]] || fail "rank $r: RANK=$(value RANK "$e")"
    [[ $(value DDL_RANK "$e") == "$r" ]] || fail "rank $r: DDL_RANK=$(value DDL_RANK "$e")"
    [[ $(value WORLD_SIZE "$e") == "$n" ]] || fail "rank $r: WORLD_SIZE=$(value WORLD_SIZE "$e")"
    [[ $(value DDL_SIZE "$e") == "$n" ]] || fail "rank $r: DDL_SIZE"
    [[ $(value LOCAL_RANK "$e") == "$r" ]] || fail "rank $r: LOCAL_RANK=$(value LOCAL_RANK "$e")"
    [[ $(value DDL_LOCAL_RANK "$e") == "$r" ]] || fail "rank $r: DDL_LOCAL_RANK"
    [[ $(value LOCAL_WORLD_SIZE "$e") == "$n" ]] || fail "rank $r: LOCAL_WORLD_SIZE"
    [[ $(value DDL_OPTIONS "$e") == "-mode "* ]] || fail "rank $r: DDL_OPTIONS=$(value DDL_OPTIONS "$e")"
    [[ $(value DDL_TOPOLOGY_FILE "$e") == /* ]] || fail "rank $r: DDL_TOPOLOGY_FILE=$(value DDL_TOPOLOGY_FILE "$e")"
    [[ $(value IT_EXPORT "$e") == "from -x" ]] || fail "rank $r: IT_EXPORT=$(value IT_EXPORT "$e")"
    local t p
    t=$(value DDL_JOB_TOKEN "$e")
    p=$(value MASTER_PORT "$e")
    [[ $t =~ ^[0-9a-f]{64}$ ]] || fail "rank $r: DDL_JOB_TOKEN='$t'"
    [[ $p =~ ^[0-9]+$ ]] || fail "rank $r: MASTER_PORT='$p'"
    [[ -z $token || $token == "$t" ]] || fail "rank $r: another token than rank 0"
    [[ -z $port || $port == "$p" ]] || fail "rank $r: another MASTER_PORT than rank 0"
    token=$t port=$p
    cmp -s "$want" "$dir/args.$r" || fail "rank $r: arguments differ: $(od -c "$dir/args.$r" | head -5)"
  done
  [[ ! -e /tmp/ddl_pwned ]] || fail "an argument was run by a shell"
}
