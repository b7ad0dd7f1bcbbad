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
# Host k (1..31) is the ssh alias node<k>, hostname node<k>, address 10.200.R.(8k+2)/24; this
# side is 10.200.R.1/24 on a bridge (dt<pid>br) that holds every host's veth, so the hosts reach
# this one and each other (rank to rank) without routing. R is a /24 of 10.200.0.0/16 that no
# other run uses (chosen under a lock), the namespaces are ddlt<pid>-<k>, so runs in parallel do
# not meet. Traffic stays on loopback and this bridge; nothing is forwarded. Each host's
# /etc/hosts names node1..nodeN and "ddlrun-head" (this side). Each sshd takes root's key logins
# only (the key made here).
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
#   NETNS_HOST_ADDR    this side's address on the bridge (10.200.R.1), which every host reaches
#   NETNS_NET          the hosts' network, 10.200.R.0/24 (for --mca oob_tcp_if_include and such)
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
NETNS_HOST_ADDR=""
NETNS_NET=""
NETNS_BRIDGE="dt$$br"
_netns_net=""        # "10.200.R"
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
netns_addr() { echo "${_netns_net}.$((8 * $1 + 2))"; }    # host K's address
netns_spare_addr() { echo "${_netns_net}.$((8 * $1 + 3))"; }  # on the bridge, never answers
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

# Prints the processes still in host K (netns_pids) after giving them up to 3 s to end (an
# agent's keeper and sshd's session end just after ddlrun does); empty when none are left.
netns_leftovers() {
  local k=$1 i left
  for ((i = 0; i < 30; i++)); do
    left=$(netns_pids "$k")
    [[ -z $left ]] && return 0
    sleep 0.1
  done
  echo "$left"
}

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
# its own /etc/hosts, and /sys showing its network namespace's interfaces.
_netns_start_holder() {
  local k=$1 dir="$NETNS_DIR/node$1"
  rm -f "$dir/holder.ready"
  # The checkout (ddlrun and the test programs) stays visible at its path when it lies under
  # /tmp or root's home, as a checkout on a shared file system would be: it is bound aside
  # before the empty /tmp and home cover it, then back at its path.
  mkdir -p "$dir/checkout"
  # shellcheck disable=SC2016  # $1..$8 are the inner bash's
  unshare --uts --mount --propagation private -- bash -c '
    keep=0
    case $7/ in /tmp/* | "$6"/*) keep=1 ;; esac
    if ((keep)); then mount --bind "$7" "$8" || exit 1; fi
    hostname "$1" && mount -t tmpfs -o mode=1777 "tmpfs-$1" /tmp &&
      mount -t tmpfs -o mode=700 "home-$1" "$6" &&
      { ((!keep)) || { mkdir -p "$7" && mount --bind "$8" "$7"; }; } &&
      mount --bind "$2" /etc/hosts &&
      nsenter --net="$3" -- mount -t sysfs "sysfs-$1" /sys &&
      : >"$4" && exec -a "$5" sleep infinity' \
    bash "node$k" "$NETNS_DIR/etc_hosts" "/run/netns/$(netns_ns "$k")" "$dir/holder.ready" \
    "$(netns_ns "$k")-holder" "$(getent passwd root | cut -d: -f6)" "$_netns_checkout" \
    "$dir/checkout" \
    </dev/null >/dev/null 2>"$dir/holder.log" &
  _netns_holder[$k]=$!
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -e $dir/holder.ready ]] && return 0
    if ! kill -0 "${_netns_holder[$k]}" 2>/dev/null; then break; fi
    sleep 0.02
  done
  _netns_say "the namespaces of node$k could not be made:"
  cat "$dir/holder.log" >&2
  return 1
}

# Starts host K's sshd (netns_up does), and waits until it listens.
netns_start_sshd() {
  local k=$1 dir="$NETNS_DIR/node$1"
  rm -f "$dir/sshd.pid"
  # nsenter itself, not netns_exec (a function: $! would be a subshell); it execs sshd (it
  # forks only to enter a PID namespace), so $! is sshd.
  nsenter --net="/run/netns/$(netns_ns "$k")" --target "${_netns_holder[$k]}" --uts --mount -- \
    /usr/sbin/sshd -D -f "$dir/sshd_config" -E "$dir/sshd.log" </dev/null &
  _netns_pid[$k]=$!
  local i
  for ((i = 0; i < 100; i++)); do  # sshd writes its PidFile once it listens
    [[ -s $dir/sshd.pid ]] && return 0
    if ! kill -0 "${_netns_pid[$k]}" 2>/dev/null; then break; fi
    sleep 0.05
  done
  _netns_say "sshd of node$k did not start; its log:"
  cat "$dir/sshd.log" >&2
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

# Deletes what runs that were killed outright (SIGKILL, a CTest timeout) left: namespaces
# ddlt<pid>-<k> whose <pid> is gone, with the processes in them, their holders, bridges and
# directories.
_netns_reap_stale() {
  local ns pid pids holder args link
  for ns in $(ip netns list | cut -d' ' -f1 | grep -E '^ddlt[0-9]+-[0-9]+$'); do
    pid=${ns#ddlt}
    pid=${pid%%-*}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  while read -r holder args; do  # holders are named ddlt<pid>-<k>-holder
    [[ $args =~ ^ddlt([0-9]+)-[0-9]+-holder ]] || continue
    pid=${BASH_REMATCH[1]}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    kill -KILL "$holder" 2>/dev/null
  done < <(ps -eo pid=,args=)
  for link in $(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
    grep -E '^dt[0-9]+(br[0-9]*|u[0-9]+)$'); do
    pid=${link#dt}
    pid=${pid%%[bu]*}
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

# Makes N hosts. Returns 77 when this machine cannot, 1 when something failed (and undoes it).
netns_up() {
  local n=$1 why k
  if ((n < 1 || n > 31)); then _netns_say "netns_up takes 1 to 31 hosts"; return 1; fi
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
  ssh-keygen -q -t ed25519 -N '' -C "ddlrun-netns-test" -f "$NETNS_KEY" || { netns_down; return 1; }
  cp "$NETNS_KEY.pub" "$NETNS_DIR/authorized_keys"
  : >"$NETNS_KNOWN_HOSTS"
  : >"$NETNS_SSH_CONFIG"
  mkdir -p /run/sshd  # sshd's privilege separation directory (the package makes it at boot)

  # Pick a free 10.200.R.0/24 and claim it, under a lock shared by all runs.
  local lock_dir=/run/lock
  [[ -d $lock_dir ]] || lock_dir=/tmp
  exec {_netns_lock}>"$lock_dir/ddlrun-netns.lock"
  flock "$_netns_lock"
  _netns_reap_stale
  local r
  for ((r = 0; r < 256; r++)); do
    [[ -z $(ip -4 -o addr show to "10.200.$r.0/24") ]] && break
  done
  if ((r == 256)); then
    exec {_netns_lock}>&-
    _netns_say "no free /24 left in 10.200.0.0/16"; netns_down; return 1
  fi
  _netns_net="10.200.$r"
  # shellcheck disable=SC2034  # for the tests that source this file
  NETNS_NET="10.200.$r.0/24"
  NETNS_HOST_ADDR="10.200.$r.1"
  _netns_count=-1  # from here on, netns_down deletes the bridge
  # The bridge: bridged frames skip iptables (nf_call_iptables 0, whatever br_netfilter's
  # defaults), and it has no port but our veths, so nothing leaves it.
  if ! { ip link add "$NETNS_BRIDGE" type bridge &&
    { ip link set "$NETNS_BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 \
      nf_call_arptables 0 2>/dev/null || true; } &&
    ip addr add "$NETNS_HOST_ADDR/24" dev "$NETNS_BRIDGE" &&
    ip link set "$NETNS_BRIDGE" up; }; then
    exec {_netns_lock}>&-
    _netns_say "cannot set up the bridge $NETNS_BRIDGE"; netns_down; return 1
  fi
  for ((k = 1; k <= n; k++)); do
    local ns veth_here="dt$$h$k" veth_there
    ns=$(netns_ns "$k")
    veth_there=$(netns_veth "$k")
    if ! { ip netns add "$ns" &&
      _netns_count=$k &&
      ip link add "$veth_here" type veth peer name "$veth_there" &&
      ip link set "$veth_there" netns "$ns" &&
      ip link set "$veth_here" master "$NETNS_BRIDGE" &&
      ip link set "$veth_here" up &&
      ip -n "$ns" addr add "$(netns_addr "$k")/24" dev "$veth_there" &&
      ip -n "$ns" link set "$veth_there" up &&
      ip -n "$ns" link set lo up; }; then
      exec {_netns_lock}>&-
      _netns_say "cannot set up the network of node$k"; netns_down; return 1
    fi
  done
  exec {_netns_lock}>&-  # closing it releases the lock

  {
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
    printf '%s\tddlrun-head\n' "$NETNS_HOST_ADDR"
    for ((k = 1; k <= n; k++)); do printf '%s\tnode%d\n' "$(netns_addr "$k")" "$k"; done
  } >"$NETNS_DIR/etc_hosts"
  chmod 644 "$NETNS_DIR/etc_hosts"

  for ((k = 1; k <= n; k++)); do
    local dir="$NETNS_DIR/node$k" addr
    addr=$(netns_addr "$k")
    mkdir -p "$dir"
    ssh-keygen -q -t ed25519 -N '' -C "node$k" -f "$dir/ssh_host_ed25519_key" || {
      netns_down; return 1; }
    cat >"$dir/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $NETNS_DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
PrintLastLog no
MaxStartups 100
MaxSessions 100
EOF
    echo "$addr $(cut -d' ' -f1-2 "$dir/ssh_host_ed25519_key.pub")" >>"$NETNS_KNOWN_HOSTS"
    cat >>"$NETNS_SSH_CONFIG" <<EOF
Host node$k
  HostName $addr
  User root
  Port 22
  IdentityFile $NETNS_KEY
  UserKnownHostsFile $NETNS_KNOWN_HOSTS
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes

EOF
    NETNS_HOSTS+=("node$k")
    _netns_start_holder "$k" || { netns_down; return 1; }
    _netns_check_checkout "$k" || { netns_down; return 1; }
    netns_start_sshd "$k" || { netns_down; return 1; }
  done
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

# Undoes netns_up: ends every process in our namespaces (sshd and its sessions) and their
# holders, deletes the namespaces (and so the veth pairs), the bridge and the directory. Safe
# to call twice.
netns_down() {
  local k ns pids i
  for ((k = 1; k <= _netns_count; k++)); do
    netns_stop_sshd "$k"
    ns=$(netns_ns "$k")
    for ((i = 0; i < 20; i++)); do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [[ -z $pids ]] && break
      # shellcheck disable=SC2086
      kill -s "$( ((i < 10)) && echo TERM || echo KILL)" $pids 2>/dev/null
      sleep 0.1
    done
    if [[ -n ${_netns_holder[$k]:-} ]]; then
      kill -KILL "${_netns_holder[$k]}" 2>/dev/null
      wait "${_netns_holder[$k]}" 2>/dev/null
      _netns_holder[$k]=""
    fi
    ip netns del "$ns" 2>/dev/null
    ip link del "dt$$h$k" 2>/dev/null
  done
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
