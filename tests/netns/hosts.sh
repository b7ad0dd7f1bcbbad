# shellcheck shell=bash
# Fake hosts for tests that need other machines: each is a network namespace on a bridge shared
# with this one, with its own hostname (a UTS namespace), its own /tmp, /etc/hosts and root's
# home (a mount namespace; the home starts empty, as on a fresh host: none of this machine's
# dotfiles run at each ssh login) and its own sshd. Source this file:
#
#   source tests/netns/hosts.sh
#   netns_up 3 || exit $?      # 77 (skip) when not root, or without ip netns or sshd
#   ssh -F "$NETNS_SSH_CONFIG" node2 hostname      # prints node2
#   netns_down                 # also done on EXIT, INT and TERM
#
# Host k (1..256) is the ssh alias node<k>, hostname node<k>, address B + 8k + 2, where B is the
# first address of a block of 10.200.0.0/16 that no other run uses (chosen under a lock): up to
# 31 hosts a /24 (10.200.R.0/24, host k at 10.200.R.(8k+2)), 32 to 63 hosts a /23, up to 127 a
# /22, up to 255 a /21 and 256 a /20 (node40 of a /23 at 10.200.R.0 is 10.200.(R+1).66). This
# side is B + 1 (10.200.R.1) on a bridge (dt<pid>br) that holds every host's veth (one bridge
# takes up to 1024), so the hosts reach this one and each other (rank to rank) without routing;
# it also holds 10.200.(R+i).1 for every further /24 of the block, so that runs of older copies
# of this file, which look for a free /24 by its .1, stay out of the block. The namespaces are
# ddlt<pid>-<k>, so runs in parallel do not meet. Traffic stays on loopback and this bridge;
# nothing is forwarded. Each host's /etc/hosts names node1..nodeN and "ddlrun-head" (this
# side). Each sshd takes root's key logins only (the key made here).
#
# Speed: one `ip -batch` makes every namespace and veth; the host keys, the hosts' own network
# settings, their namespace holders and their sshds each start all at once and are waited for
# together; netns_down ends every process in the namespaces in one sweep and deletes the links
# and namespaces with one `ip -batch`. bench/netns_scale.sh times 128 hosts up and down.
#
# A host's mount and UTS namespaces are held by a process of their own (outside its network
# namespace, so `ip netns pids` lists sshd and what it started only): stopping and restarting
# sshd keeps the host's /tmp, and netns_exec works while sshd is stopped.
#
# After netns_up:
#   NETNS_DIR          directory under /run/ddlrun-netns holding everything below (every host
#                      sees it: it is not under /tmp); removed by netns_down
#   NETNS_SSH_CONFIG   ssh config: Host node<k> -> HostName, User root, IdentityFile,
#                      UserKnownHostsFile (ssh -F, or ddlrun --ssh-config)
#   NETNS_KNOWN_HOSTS  known_hosts with every host's key (by address)
#   NETNS_KEY          the private key that logs in as root on every host
#   NETNS_HOSTS        array of the aliases: node1 .. nodeN
#   NETNS_LIST         the same joined by commas ("node1,node2,..."), for ddlrun -H
#   NETNS_NUMBERS      array of the host numbers: 1 .. N (for netns_job_procs_of and such)
#   NETNS_HOST_ADDR    this side's address on the bridge (10.200.R.1), which every host reaches
#   NETNS_NET          the hosts' network, 10.200.R.0/24 (/23 .. /20 for more than 31 hosts; for
#                      --mca oob_tcp_if_include and such)
#   NETNS_BRIDGE       the bridge's name
# and the functions below (K is a host number).
#
# Racks (netns_up_racks RACKS HOSTS_PER_RACK, then netns_shape_uplink RATE): the same hosts,
# numbered rack by rack, but rack r's hosts sit on a bridge of their own (rack 1's is
# NETNS_BRIDGE), and each rack r >= 2 reaches rack 1 through one veth pair between the two
# bridges, both ends in this namespace (the "uplink", which netns_shape_uplink shapes). All
# addresses stay in NETNS_NET (one L2 segment across the bridges), so everything above holds
# unchanged; netns_down removes the extra bridges and uplinks too.

NETNS_PREFIX="ddlt$$"
_netns_checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
NETNS_ROOT=/run/ddlrun-netns
NETNS_DIR=""
NETNS_SSH_CONFIG=""
NETNS_KNOWN_HOSTS=""
NETNS_KEY=""
NETNS_HOSTS=()
NETNS_LIST=""
NETNS_NUMBERS=()
NETNS_HOST_ADDR=""
NETNS_NET=""
NETNS_BRIDGE="dt$$br"
NETNS_MAX_HOSTS=256
_netns_base=0        # the block's first address, less 10.200.0.0
_netns_prefix=24     # the block's prefix length
_netns_root_home=""
_netns_count=0
declare -A _netns_pid=()     # host -> its sshd
declare -A _netns_holder=()  # host -> the process holding its mount and UTS namespaces

_netns_say() { echo "netns: $*" >&2; }

# Prints why fake hosts cannot be made here, or nothing when they can.
_netns_missing() {
  if [[ $(id -u) -ne 0 ]]; then echo "not root"; return; fi
  if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
    echo "no 'ip netns' (install iproute2)"; return
  fi
  if [[ ! -x /usr/sbin/sshd ]]; then echo "no /usr/sbin/sshd (install openssh-server)"; return; fi
  local tool
  for tool in unshare nsenter flock ssh-keygen mount; do
    command -v "$tool" >/dev/null || { echo "no $tool"; return; }
  done
  if [[ $(getent shadow root 2>/dev/null | cut -d: -f2) == '!'* ]]; then
    echo "root's account is locked ('!' in /etc/shadow): sshd without PAM refuses it"; return
  fi
  if ! ip netns add "${NETNS_PREFIX}-probe" 2>/dev/null; then
    echo "cannot create network namespaces here"; return
  fi
  ip netns del "${NETNS_PREFIX}-probe"
  if ! unshare --mount --propagation private -- mount -t tmpfs tmpfs /tmp 2>/dev/null; then
    echo "cannot make mount namespaces with their own /tmp here"; return
  fi
  if ! ip link add "${NETNS_PREFIX}probe" type bridge 2>/dev/null; then
    echo "cannot create bridges here"; return
  fi
  ip link del "${NETNS_PREFIX}probe"
}

netns_ns() { echo "${NETNS_PREFIX}-$1"; }                  # the namespace of host K
# 10.200.0.0 + OFFSET, dotted, into the variable VAR: _netns_dotted VAR OFFSET.
_netns_dotted() { printf -v "$1" '10.200.%d.%d' $(($2 >> 8)) $(($2 & 255)); }
netns_addr() {  # host K's address
  local a
  _netns_dotted a $((_netns_base + 8 * $1 + 2))
  echo "$a"
}
netns_spare_addr() {  # on the bridge, never answers
  local a
  _netns_dotted a $((_netns_base + 8 * $1 + 3))
  echo "$a"
}
netns_sshd_pid() { echo "${_netns_pid[$1]:-}"; }           # host K's sshd, empty once stopped
netns_hostkey() { echo "$NETNS_DIR/node$1/ssh_host_ed25519_key"; }
netns_veth() { echo "dt$$n$1"; }                           # host K's interface (inside it)

# Runs a command in host K's network, UTS and mount namespaces (as its sshd sees them: its
# hostname, its /tmp), whether or not its sshd runs.
netns_exec() {
  local k=$1
  shift
  nsenter --net="/run/netns/$(netns_ns "$k")" --target "${_netns_holder[$k]}" --uts --mount -- "$@"
}

# Prints the processes in host K, one PID a line: all in its network namespace but its sshd
# (the listener; the sessions it forked count). Empty when nothing runs there.
netns_pids() {
  local k=$1 sshd=${_netns_pid[$1]:-}
  ip netns pids "$(netns_ns "$k")" 2>/dev/null | while read -r pid; do
    [[ $pid == "$sshd" ]] || echo "$pid"
  done
}

# netns_agent_pid K: host K's ddlrun agent (`ddlrun --agent`, or `--probe-agent` while a probed
# host's agent waits for its job); empty when there is none. Looked for up to 10 times, 0.1 s
# apart: `ip netns pids` scans /proc, and a busy machine's short-lived processes can end its scan
# early (seen once beside parallel builds: a chaos fault then killed nothing).
netns_agent_pid() {
  local pid try
  for ((try = 0; try < 10; try++)); do
    for pid in $(netns_pids "$1"); do
      [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *-agent\ * ]] && {
        echo "$pid"
        return 0
      }
    done
    sleep 0.1
  done
}

# netns_job_procs K: the processes in host K's namespace but sshd's (the listener and the
# sessions, which may outlive a cut link), as "pid args" lines: what a job left there.
netns_job_procs() {
  local pid
  for pid in $(netns_pids "$1"); do
    [[ $(ps -o comm= -p "$pid" 2>/dev/null) == sshd* ]] && continue
    ps -o pid=,args= -p "$pid" 2>/dev/null
  done
}

# netns_left_after LIST K SECONDS: what `LIST K` (netns_pids, netns_job_procs) still prints
# after giving those processes up to SECONDS to end (looking every 0.1 s); empty as soon as
# none are left.
netns_left_after() {
  local i left
  for ((i = 0; i < $3 * 10; i++)); do
    left=$("$1" "$2")
    [[ -z $left ]] && return 0
    sleep 0.1
  done
  echo "$left"
}

# netns_job_left K SECONDS: what netns_job_procs still lists on host K after giving the job's
# processes up to SECONDS to end; empty as soon as none are left.
netns_job_left() { netns_left_after netns_job_procs "$1" "$2"; }

# netns_session: what a test on these hosts starts from, after netns_up: no ssh agent (only
# the key the ssh config names), HOME and XDG_CACHE_HOME fresh under NETNS_DIR (no user ssh
# config, keys or probe cache), and the directory out (NETNS_DIR/out) for the test's files.
netns_session() {
  unset SSH_AUTH_SOCK
  export HOME="$NETNS_DIR/home" XDG_CACHE_HOME="$NETNS_DIR/cache"
  out="$NETNS_DIR/out"
  mkdir -p "$HOME" "$out"
}

# netns_job_procs_of K...: netns_job_procs of every host K given, as "K pid args" lines, with one
# look at every process for them all (netns_job_procs looks at every process once per host:
# seconds for 64 hosts).
netns_job_procs_of() {
  local k map pid comm keep=() line
  local -A host_of=()
  map=$(cd /run/netns 2>/dev/null && for k in "$@"; do echo "$NETNS_PREFIX-$k"; done |
    xargs -r stat -L -c '%i %n' 2>/dev/null) || true
  [[ -n $map ]] || return 0
  while read -r k pid; do
    read -r comm <"/proc/$pid/comm" 2>/dev/null || continue
    [[ $comm == sshd* ]] && continue
    host_of[$pid]=$k
    keep+=("$pid")
  done < <(stat -c '%N' /proc/[0-9]*/ns/net 2>/dev/null | awk -v map="$map" -v pre="$NETNS_PREFIX-" '
    BEGIN { n = split(map, a, "\n")
            for (i = 1; i <= n; i++) { split(a[i], f, " "); sub(pre, "", f[2]); host["net:[" f[1] "]"] = f[2] } }
    { t = $3; gsub(/[^a-z0-9:\[\]]/, "", t); if (t in host) { split($1, p, "/"); print host[t], p[3] } }')
  ((${#keep[@]})) || return 0
  ps -o pid=,args= -p "$(IFS=,; echo "${keep[*]}")" 2>/dev/null | while read -r pid line; do
    echo "${host_of[$pid]} $pid $line"
  done
}

# netns_glob K PATTERN...: the paths in host K that match each glob PATTERN (an absolute path,
# as host K sees it: its own /tmp), one a line; through its holder's root, no process started.
netns_glob() {
  local root="/proc/${_netns_holder[$1]}/root" pattern path
  shift
  for pattern in "$@"; do
    for path in "$root"$pattern; do
      [[ -e $path || -L $path ]] && echo "${path#"$root"}"
    done
  done
  return 0
}

# Prints the processes still in host K (netns_pids) after giving them up to 3 s to end (an
# agent's keeper and sshd's session end just after ddlrun does); empty when none are left.
netns_leftovers() { netns_left_after netns_pids "$1" 3; }

# Shapes host K's link both ways with a token bucket: netns_shape K 1gbit [BURST]; RATE "off"
# takes it away. BURST (tc's units, default 1mb) must hold at least RATE/HZ.
netns_shape() {
  local k=$1 rate=$2 burst=${3:-1mb} ns
  ns=$(netns_ns "$k")
  if [[ $rate == off ]]; then
    tc qdisc del dev "dt$$h$k" root 2>/dev/null
    ip netns exec "$ns" tc qdisc del dev "$(netns_veth "$k")" root 2>/dev/null
    return 0
  fi
  tc qdisc replace dev "dt$$h$k" root tbf rate "$rate" burst "$burst" latency 50ms &&
    ip netns exec "$ns" tc qdisc replace dev "$(netns_veth "$k")" root tbf rate "$rate" \
      burst "$burst" latency 50ms
}

# Starts the process that holds host K's UTS and mount namespaces: hostname node<k>, a tmpfs
# on /tmp and on root's home (this checkout bound back at its path when it lies under either),
# its own /etc/hosts, and /sys showing its network namespace's interfaces. On the way it sets
# the host's network up (node<k>/net.batch: its address, its links up) and notes what it sees
# at this checkout's path (checkout.seen, for _netns_check_checkouts), so that hosts started
# together do all this in parallel. Does not wait: it touches holder.ready once done
# (_netns_await). As few processes as can be: netns_up starts up to 256 at once.
_netns_spawn_holder() {
  local k=$1 dir="$NETNS_DIR/node$1" ns="$NETNS_PREFIX-$1"
  [[ -e $dir/holder.ready ]] && rm -f "$dir/holder.ready"
  # The checkout (ddlrun and the test programs) stays visible at its path when it lies under
  # /tmp or root's home, as a checkout on a shared file system would be: it is bound aside
  # (to node<k>/checkout, made by _netns_write_hosts) before the empty /tmp and home cover
  # it, then back at its path.
  # shellcheck disable=SC2016  # $1..$8 are the inner bash's
  unshare --uts --mount --propagation private -- bash -c '
    keep=0 dir=${4%/*}
    case $7/ in /tmp/* | "$6"/*) keep=1 ;; esac
    if ((keep)); then mount --bind "$7" "$dir/checkout" || exit 1; fi
    ip -n "$3" -batch "$dir/net.batch" && echo "$1" >/proc/sys/kernel/hostname &&
      mount -t tmpfs -o mode=1777 "tmpfs-$1" /tmp &&
      mount -t tmpfs -o mode=700 "home-$1" "$6" &&
      { ((!keep)) || { mkdir -p "$7" && mount --bind "$dir/checkout" "$7"; }; } &&
      mount --bind "$2" /etc/hosts &&
      nsenter --net="/run/netns/$3" -- mount -t sysfs "sysfs-$1" /sys &&
      { stat -c "%d:%i" "$7/tests/netns/hosts.sh" >"$dir/checkout.seen" 2>&1; : >"$4"; } &&
      exec -a "$5" sleep infinity' \
    bash "node$k" "$NETNS_DIR/etc_hosts" "$ns" "$dir/holder.ready" "$ns-holder" \
    "$_netns_root_home" "$_netns_checkout" </dev/null >/dev/null 2>"$dir/holder.log" &
  _netns_holder[$k]=$!
}

# Starts host K's sshd without waiting for it (it writes sshd.pid once it listens).
_netns_spawn_sshd() {
  local k=$1 dir="$NETNS_DIR/node$1"
  [[ -e $dir/sshd.pid ]] && rm -f "$dir/sshd.pid"
  # nsenter itself, not netns_exec (a function: $! would be a subshell); it execs sshd (it
  # forks only to enter a PID namespace), so $! is sshd.
  nsenter --net="/run/netns/$NETNS_PREFIX-$k" --target "${_netns_holder[$k]}" --uts --mount -- \
    /usr/sbin/sshd -D -f "$dir/sshd_config" -E "$dir/sshd.log" </dev/null &
  _netns_pid[$k]=$!
}

# Waits until every host K given has the file node<K>/FILE (holder.ready, or sshd.pid: written
# once sshd listens) while the process PIDS[K] (an associative array's name) runs, for up to
# 10 s + 0.2 s a host (hosts started together share a loaded machine). Prints the hosts that
# did not get there, one a line; returns 1 if any.
_netns_await() {
  local file=$1 k i
  local -n pids=$2
  shift 2
  local pending=("$@") left=() rounds=$((200 + 4 * $#))
  for ((i = 0; i < rounds && ${#pending[@]}; i++)); do
    left=()
    for k in "${pending[@]}"; do
      [[ -s $NETNS_DIR/node$k/$file || ($file == holder.ready && -e $NETNS_DIR/node$k/$file) ]] &&
        continue
      if ! kill -0 "${pids[$k]}" 2>/dev/null; then echo "$k"; continue; fi
      left+=("$k")
    done
    pending=("${left[@]}")
    ((${#pending[@]})) && sleep 0.05
  done
  ((${#pending[@]})) && printf '%s\n' "${pending[@]}"
  [[ ${#pending[@]} -eq 0 ]]
}

# Starts host K's sshd (netns_up does), and waits until it listens.
netns_start_sshd() {
  local k=$1 failed
  _netns_spawn_sshd "$k"
  failed=$(_netns_await sshd.pid _netns_pid "$k") && return 0
  _netns_say "sshd of node$k did not start; its log:"
  cat "$NETNS_DIR/node$k/sshd.log" >&2
  return 1
}

# Stops host K's sshd: connecting to it is then refused. What its sessions started runs on.
netns_stop_sshd() {
  local k=$1 pid=${_netns_pid[$1]:-}
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  _netns_pid[$k]=""
}

# Prints the processes in any of the network namespaces NAMES (under /run/netns), one PID a
# line, with one look at every process (ip netns pids looks at them all once per namespace).
_netns_pids_in() {
  local ids
  ids=$(cd /run/netns 2>/dev/null && stat -L -c '%i' "$@" 2>/dev/null) || true
  [[ -n $ids ]] || return 0
  stat -c '%N' /proc/[0-9]*/ns/net 2>/dev/null | awk -v ids="$ids" '
    BEGIN { n = split(ids, a, "\n"); for (i = 1; i <= n; i++) want["net:[" a[i] "]"] = 1 }
    { t = $3; gsub(/[^a-z0-9:\[\]]/, "", t); if (t in want) { split($1, p, "/"); print p[3] } }'
}

# Ends every process in the network namespaces NAMES: TERM, then after 1 s KILL, until none
# is left (up to 2 s).
_netns_end_pids_in() {
  local i pids
  for ((i = 0; i < 20; i++)); do
    pids=$(_netns_pids_in "$@")
    [[ -z $pids ]] && return 0
    # shellcheck disable=SC2086
    kill -s "$( ((i < 10)) && echo TERM || echo KILL)" $pids 2>/dev/null
    sleep 0.1
  done
}

# Deletes what runs that were killed outright (SIGKILL, a CTest timeout) left: namespaces
# ddlt<pid>-<k> whose <pid> is gone, with the processes in them, their holders, bridges and
# directories.
_netns_reap_stale() {
  local ns pid holder args link stale=()
  for ns in $(ip netns list | cut -d' ' -f1 | grep -E '^ddlt[0-9]+-[0-9]+$'); do
    pid=${ns#ddlt}
    pid=${pid%%-*}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    stale+=("$ns")
  done
  if ((${#stale[@]})); then
    _netns_end_pids_in "${stale[@]}"
    printf 'netns del %s\n' "${stale[@]}" | ip -force -batch - 2>/dev/null
  fi
  while read -r holder args; do  # holders are named ddlt<pid>-<k>-holder
    [[ $args =~ ^ddlt([0-9]+)-[0-9]+-holder ]] || continue
    pid=${BASH_REMATCH[1]}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    kill -KILL "$holder" 2>/dev/null
  done < <(ps -eo pid=,args=)
  for link in $(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
    grep -E '^dt[0-9]+(br[0-9]*|u[0-9]+|h[0-9]+)$'); do
    pid=${link#dt}
    pid=${pid%%[buh]*}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    ip link del "$link" 2>/dev/null
  done
  for link in "$NETNS_ROOT"/ddlt*; do
    [[ -d $link ]] || continue
    pid=${link##*/ddlt}
    pid=${pid%%.*}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    rm -rf "$link"
  done
}

# Prints the first R (a multiple of BLOCKS) such that no address of this namespace lies in
# 10.200.R.0 .. 10.200.(R+BLOCKS-1).255 and none of their networks overlaps it; nothing when
# 10.200.0.0/16 has no such block left.
_netns_free_block() {
  local blocks=$1 a o1 o2 len size lo hi i r
  local -A used=()
  while read -r a; do  # 10.200.X.Y/LEN
    IFS=./ read -r _ _ o1 o2 len <<<"$a"
    ((len < 16)) && len=16
    size=$((1 << (32 - len)))
    lo=$(((o1 * 256 + o2) & ~(size - 1)))
    hi=$((lo + size - 1))
    for ((i = lo >> 8; i <= hi >> 8; i++)); do used[$i]=1; done
  done < <(ip -4 -o addr show to 10.200.0.0/16 | awk '{ print $4 }')
  for ((r = 0; r + blocks <= 256; r += blocks)); do
    for ((i = r; i < r + blocks; i++)); do [[ -n ${used[$i]:-} ]] && continue 2; done
    echo "$r"
    return 0
  done
}

# The number of /24s the addresses of N hosts take: 1 up to 31 hosts, else the smallest power
# of two that holds 8N + 4 addresses.
_netns_blocks_for() {
  local blocks=1
  while ((8 * $1 + 4 > 256 * blocks)); do blocks=$((blocks * 2)); done
  echo "$blocks"
}

# Claims a free block of 10.200.0.0/16 for N hosts (under the lock, which it takes and
# releases) and makes the bridge, every namespace and every veth pair, the host's end on the
# bridge (the holders set up the other ends). Sets _netns_base, _netns_prefix, NETNS_NET and
# NETNS_HOST_ADDR.
_netns_make_links() {
  local n=$1 blocks r lock_dir=/run/lock k i
  blocks=$(_netns_blocks_for "$n")
  _netns_prefix=24
  for ((i = blocks; i > 1; i /= 2)); do _netns_prefix=$((_netns_prefix - 1)); done
  [[ -d $lock_dir ]] || lock_dir=/tmp
  exec {_netns_lock}>"$lock_dir/ddlrun-netns.lock"
  flock "$_netns_lock"
  _netns_reap_stale
  r=$(_netns_free_block "$blocks")
  if [[ -z $r ]]; then
    exec {_netns_lock}>&-
    _netns_say "no free /$_netns_prefix left in 10.200.0.0/16"
    return 1
  fi
  _netns_base=$((r * 256))
  NETNS_NET="10.200.$r.0/$_netns_prefix"
  NETNS_HOST_ADDR="10.200.$r.1"
  _netns_count=$n  # from here on, netns_down deletes the bridge and the namespaces
  {
    # The bridge: bridged frames skip iptables (nf_call_iptables 0, whatever br_netfilter's
    # defaults), and it has no port but our veths, so nothing leaves it.
    echo "link add $NETNS_BRIDGE type bridge"
    echo "addr add $NETNS_HOST_ADDR/$_netns_prefix dev $NETNS_BRIDGE"
    for ((i = 1; i < blocks; i++)); do
      echo "addr add 10.200.$((r + i)).1/$_netns_prefix dev $NETNS_BRIDGE"
    done
    echo "link set $NETNS_BRIDGE up"
    for ((k = 1; k <= n; k++)); do
      echo "netns add $NETNS_PREFIX-$k"
      echo "link add dt$$h$k type veth peer name dt$$n$k netns $NETNS_PREFIX-$k"
      echo "link set dt$$h$k master $NETNS_BRIDGE up"
    done
  } >"$NETNS_DIR/links.batch"
  if ! ip -batch "$NETNS_DIR/links.batch" 2>"$NETNS_DIR/links.log"; then
    exec {_netns_lock}>&-
    _netns_say "cannot set up the bridge $NETNS_BRIDGE and the hosts' links: $(cat "$NETNS_DIR/links.log")"
    return 1
  fi
  ip link set "$NETNS_BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 \
    nf_call_arptables 0 2>/dev/null
  exec {_netns_lock}>&-  # closing it releases the lock
}

# Waits for the background jobs PIDS (one per host, host k's k-th); on a failure names the
# first failed host (WHAT<k>) and prints its log (LOG_PATTERN with %s for k). Returns 1 then.
_netns_wait_all() {
  local what=$1 log=$2 k=0 pid failed=0
  shift 2
  for pid in "$@"; do
    k=$((k + 1))
    if ! wait "$pid" && ((!failed)); then
      failed=$k
    fi
  done
  ((failed)) || return 0
  # shellcheck disable=SC2059  # the pattern is ours
  _netns_say "cannot set up $what$failed: $(cat "$(printf "$log" "$failed")" 2>/dev/null)"
  return 1
}

# Writes every host's directory, host key, sshd_config, network settings (net.batch), and its
# entries in /etc/hosts, the ssh config and known_hosts. The keys are made all at once.
_netns_write_hosts() {
  local n=$1 k addr dir a b pids=() dirs=()
  {
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
    printf '%s\tddlrun-head\n' "$NETNS_HOST_ADDR"
    for ((k = 1; k <= n; k++)); do
      _netns_dotted addr $((_netns_base + 8 * k + 2))
      printf '%s\tnode%d\n' "$addr" "$k"
    done
  } >"$NETNS_DIR/etc_hosts"
  chmod 644 "$NETNS_DIR/etc_hosts"
  for ((k = 1; k <= n; k++)); do dirs+=("$NETNS_DIR/node$k/checkout"); done
  mkdir -p "${dirs[@]}" || return 1
  for ((k = 1; k <= n; k++)); do
    dir="$NETNS_DIR/node$k"
    ssh-keygen -q -t ed25519 -N '' -C "node$k" -f "$dir/ssh_host_ed25519_key" \
      </dev/null >"$dir/keygen.log" 2>&1 &
    pids+=($!)
  done
  _netns_wait_all "the host key of node" "$NETNS_DIR/node%s/keygen.log" "${pids[@]}" || return 1
  for ((k = 1; k <= n; k++)); do
    dir="$NETNS_DIR/node$k"
    _netns_dotted addr $((_netns_base + 8 * k + 2))
    printf '%s\n' "ListenAddress $addr" "Port 22" "HostKey $dir/ssh_host_ed25519_key" \
      "PidFile $dir/sshd.pid" "AuthorizedKeysFile $NETNS_DIR/authorized_keys" \
      "PermitRootLogin prohibit-password" "PubkeyAuthentication yes" \
      "PasswordAuthentication no" "KbdInteractiveAuthentication no" "UsePAM no" \
      "StrictModes no" "X11Forwarding no" "PrintMotd no" "PrintLastLog no" \
      "MaxStartups 100" "MaxSessions 100" >"$dir/sshd_config"
    printf 'addr add %s/%s dev dt%sn%s\nlink set dt%sn%s up\nlink set lo up\n' \
      "$addr" "$_netns_prefix" "$$" "$k" "$$" "$k" >"$dir/net.batch"
    read -r a b _ <"$dir/ssh_host_ed25519_key.pub"
    echo "$addr $a $b" >>"$NETNS_KNOWN_HOSTS"
    printf 'Host node%d\n  HostName %s\n  User root\n  Port 22\n  IdentityFile %s\n' \
      "$k" "$addr" "$NETNS_KEY" >>"$NETNS_SSH_CONFIG"
    printf '  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n' \
      "$NETNS_KNOWN_HOSTS" >>"$NETNS_SSH_CONFIG"
    printf '  StrictHostKeyChecking yes\n  BatchMode yes\n\n' >>"$NETNS_SSH_CONFIG"
    NETNS_HOSTS+=("node$k")
  done
}

# Starts every host's holder, then (once all hold their namespaces, and see this checkout)
# every host's sshd, and waits until all listen.
_netns_start_hosts() {
  local n=$1 k failed all=()
  for ((k = 1; k <= n; k++)); do all+=("$k"); done
  for k in "${all[@]}"; do _netns_spawn_holder "$k"; done
  failed=$(_netns_await holder.ready _netns_holder "${all[@]}")
  if [[ -n $failed ]]; then
    k=${failed%%$'\n'*}
    _netns_say "the namespaces of node$k could not be made:"
    cat "$NETNS_DIR/node$k/holder.log" >&2
    return 1
  fi
  _netns_check_checkouts "$n" || return 1
  for k in "${all[@]}"; do _netns_spawn_sshd "$k"; done
  failed=$(_netns_await sshd.pid _netns_pid "${all[@]}")
  if [[ -n $failed ]]; then
    k=${failed%%$'\n'*}
    _netns_say "sshd of node$k did not start; its log:"
    cat "$NETNS_DIR/node$k/sshd.log" >&2
    return 1
  fi
}

# Makes N hosts (1 to NETNS_MAX_HOSTS). Returns 77 when this machine cannot, 1 when something
# failed (and undoes it).
netns_up() {
  local n=$1 why
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > NETNS_MAX_HOSTS)); then
    _netns_say "netns_up takes 1 to $NETNS_MAX_HOSTS hosts, not '$n'"
    return 1
  fi
  why=$(_netns_missing)
  if [[ -n $why ]]; then _netns_say "skipping: $why"; return 77; fi
  trap netns_down EXIT
  trap 'netns_down; exit 130' INT
  trap 'netns_down; exit 143' TERM
  [[ -d $NETNS_ROOT ]] || mkdir -m 700 "$NETNS_ROOT" || return 1
  NETNS_DIR=$(mktemp -d "$NETNS_ROOT/ddlt$$.XXXXXX") || return 1
  chmod 700 "$NETNS_DIR"
  NETNS_SSH_CONFIG="$NETNS_DIR/ssh_config"
  NETNS_KNOWN_HOSTS="$NETNS_DIR/known_hosts"
  NETNS_KEY="$NETNS_DIR/id_ed25519"
  NETNS_HOSTS=()
  _netns_root_home=$(getent passwd root | cut -d: -f6)
  ssh-keygen -q -t ed25519 -N '' -C "ddlrun-netns-test" -f "$NETNS_KEY" || { netns_down; return 1; }
  cp "$NETNS_KEY.pub" "$NETNS_DIR/authorized_keys"
  : >"$NETNS_KNOWN_HOSTS"
  : >"$NETNS_SSH_CONFIG"
  mkdir -p /run/sshd  # sshd's privilege separation directory (the package makes it at boot)
  if ! _netns_make_links "$n" || ! _netns_write_hosts "$n" || ! _netns_start_hosts "$n"; then
    netns_down
    return 1
  fi
  NETNS_LIST=$(IFS=,; echo "${NETNS_HOSTS[*]}")
  NETNS_NUMBERS=()
  local k
  for ((k = 1; k <= n; k++)); do NETNS_NUMBERS+=("$k"); done
  return 0
}

# Checks that host K sees this checkout (ddlrun, the build and the test programs) at the same
# path, as every host of a real cluster sees a shared installation; says why when it does not,
# before a test fails later with "ddlrun: not found" on that host.
_netns_check_checkout() {
  local k=$1 probe="$_netns_checkout/tests/netns/hosts.sh" here there
  here=$(stat -c '%d:%i' "$probe")
  there=$(netns_exec "$k" stat -c '%d:%i' "$probe" 2>&1)
  [[ $there == "$here" ]] && return 0
  _netns_say "node$k does not see this checkout at $_netns_checkout (it found: ${there:-nothing});" \
    "each fake host has its own /tmp and home, and binds back only a checkout that lies" \
    "under /tmp or root's home; clone it there or to a path outside both"
  return 1
}

# _netns_check_checkout for hosts 1..N, from what each holder saw (checkout.seen); the first
# that fails says why.
_netns_check_checkouts() {
  local n=$1 k here
  here=$(stat -c '%d:%i' "$_netns_checkout/tests/netns/hosts.sh")
  for ((k = 1; k <= n; k++)); do
    [[ $(<"$NETNS_DIR/node$k/checkout.seen") == "$here" ]] || {
      _netns_check_checkout "$k"
      return 1
    }
  done
}

# Prints the host ends of our veth pairs that still exist, one a line.
_netns_veths_left() {
  # (ip may complain about a peer whose namespace the kernel is freeing just then)
  ip -o link show 2>/dev/null |
    awk -F': ' -v re="^dt$$h[0-9]+$" '{ sub(/@.*/, "", $2) } $2 ~ re { print $2 }'
}

# Once the namespaces are deleted and nothing holds them, the kernel frees them all together,
# and their veth pairs with them, a little later (much sooner than deleting 256 pairs one by
# one). Waits up to 10 s for that, then deletes the pairs still there.
_netns_await_veths_gone() {
  local i left
  for ((i = 0; i < 200; i++)); do
    left=$(_netns_veths_left)
    [[ -z $left ]] && return 0
    sleep 0.05
  done
  printf 'link del %s\n' $left | ip -force -batch - >/dev/null 2>&1
}

# Undoes netns_up: ends every process in our namespaces (sshd and its sessions) and their
# holders, deletes the namespaces (and so the veth pairs), the bridges and the directory, all
# hosts at once. Safe to call twice.
netns_down() {
  local k names=() listeners=() holders=()
  for ((k = 1; k <= _netns_count; k++)); do
    names+=("$NETNS_PREFIX-$k")
    [[ -n ${_netns_pid[$k]:-} ]] && listeners+=("${_netns_pid[$k]}")
    [[ -n ${_netns_holder[$k]:-} ]] && holders+=("${_netns_holder[$k]}")
    _netns_pid[$k]=""
    _netns_holder[$k]=""
  done
  if ((${#listeners[@]})); then
    kill -TERM "${listeners[@]}" 2>/dev/null
    wait "${listeners[@]}" 2>/dev/null
  fi
  ((${#names[@]})) && _netns_end_pids_in "${names[@]}"
  if ((${#holders[@]})); then
    kill -KILL "${holders[@]}" 2>/dev/null
    wait "${holders[@]}" 2>/dev/null
  fi
  if ((${#names[@]})); then
    printf 'netns del %s\n' "${names[@]}" | ip -force -batch - >/dev/null 2>&1
    _netns_await_veths_gone
  fi
  _netns_racks_down
  if ((_netns_count != 0)); then ip link del "$NETNS_BRIDGE" 2>/dev/null; fi
  _netns_count=0
  if [[ -n $NETNS_DIR && -d $NETNS_DIR ]]; then rm -rf "$NETNS_DIR"; fi
  NETNS_DIR=""
  return 0
}

# Racks: see the header. _netns_racks is the number of racks (0: netns_up's single bridge).
_netns_racks=0
_netns_per_rack=0
netns_rack_bridge() { (($1 == 1)) && echo "$NETNS_BRIDGE" || echo "dt$$br$1"; }  # rack R's
netns_uplink() { echo "dt$$u$1"; }   # rack R's (R >= 2) uplink end on rack 1's bridge
netns_downlink() { echo "dt$$v$1"; } # its other end, on rack R's bridge
netns_rack_of() { echo $((($1 - 1) / _netns_per_rack + 1)); }  # host K's rack

# Makes RACKS x HOSTS_PER_RACK hosts (netns_up's, host k in rack (k-1)/HOSTS_PER_RACK + 1)
# and moves each rack r >= 2 onto a bridge of its own, joined to rack 1's by a veth pair.
# Returns as netns_up does (77: cannot here; 1: failed, and undone).
netns_up_racks() {
  local racks=$1 per=$2 rc r k bridge
  if ((racks < 1 || per < 1)); then
    _netns_say "netns_up_racks takes RACKS >= 1 and HOSTS_PER_RACK >= 1"
    return 1
  fi
  netns_up $((racks * per))
  rc=$?
  ((rc == 0)) || return $rc
  _netns_per_rack=$per
  for ((r = 2; r <= racks; r++)); do
    bridge=$(netns_rack_bridge "$r")
    _netns_racks=$r  # from here on, netns_down deletes rack r's bridge and uplink
    if ! { ip link add "$bridge" type bridge &&
      { ip link set "$bridge" type bridge nf_call_iptables 0 nf_call_ip6tables 0 \
        nf_call_arptables 0 2>/dev/null || true; } &&
      ip link set "$bridge" up &&
      ip link add "$(netns_uplink "$r")" type veth peer name "$(netns_downlink "$r")" &&
      ip link set "$(netns_uplink "$r")" master "$NETNS_BRIDGE" &&
      ip link set "$(netns_downlink "$r")" master "$bridge" &&
      ip link set "$(netns_uplink "$r")" up &&
      ip link set "$(netns_downlink "$r")" up; }; then
      _netns_say "cannot set up rack $r's bridge $bridge and its uplink"
      netns_down
      return 1
    fi
    for ((k = (r - 1) * per + 1; k <= r * per; k++)); do
      if ! ip link set "dt$$h$k" master "$bridge"; then
        _netns_say "cannot move node$k onto rack $r's bridge"
        netns_down
        return 1
      fi
    done
  done
  _netns_racks=$racks
  return 0
}

# Shapes every uplink both ways with a token bucket, as netns_shape does a host's link:
# netns_shape_uplink 250mbit [BURST]; RATE "off" takes it away.
netns_shape_uplink() {
  local rate=$1 burst=${2:-1mb} r dev
  for ((r = 2; r <= _netns_racks; r++)); do
    for dev in "$(netns_uplink "$r")" "$(netns_downlink "$r")"; do
      if [[ $rate == off ]]; then
        tc qdisc del dev "$dev" root 2>/dev/null
      else
        tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms || return 1
      fi
    done
  done
  return 0
}

# Sets the MTU of every link of the fake network: each host's veth (both ends), the bridges
# and the racks' uplinks. netns_mtu 9000 gives jumbo frames, as HPC fabrics often run;
# with the default 1500, Ethernet, IP and TCP headers and TCP's ACKs take about 6% of a link.
netns_mtu() {
  local mtu=$1 k r
  ip link set "$NETNS_BRIDGE" mtu "$mtu" || return 1
  for ((k = 1; k <= _netns_count; k++)); do
    ip link set "dt$$h$k" mtu "$mtu" &&
      ip netns exec "$(netns_ns "$k")" ip link set "$(netns_veth "$k")" mtu "$mtu" || return 1
  done
  for ((r = 2; r <= _netns_racks; r++)); do
    ip link set "$(netns_rack_bridge "$r")" mtu "$mtu" &&
      ip link set "$(netns_uplink "$r")" mtu "$mtu" &&
      ip link set "$(netns_downlink "$r")" mtu "$mtu" || return 1
  done
}

# Prints the bytes that left through rack R's uplink toward rack 1 and toward rack R (tc's
# counters of the two ends' root qdiscs): "TO_RACK1 TO_RACKR".
netns_uplink_bytes() {
  local r=$1 up down
  up=$(tc -s qdisc show dev "$(netns_downlink "$r")" root | awk '/Sent/ { print $2; exit }')
  down=$(tc -s qdisc show dev "$(netns_uplink "$r")" root | awk '/Sent/ { print $2; exit }')
  echo "${up:-0} ${down:-0}"
}

# Deletes the racks' bridges and uplinks (netns_down calls it).
_netns_racks_down() {
  local r
  for ((r = 2; r <= _netns_racks; r++)); do
    ip link del "$(netns_uplink "$r")" 2>/dev/null
    ip link del "$(netns_rack_bridge "$r")" 2>/dev/null
  done
  _netns_racks=0
}
