# shellcheck shell=bash
# Fake hosts for tests that need other machines: each is a network namespace joined to this one
# by a veth pair, with its own hostname (a UTS namespace) and its own sshd. Source this file:
#
#   source tests/netns/hosts.sh
#   netns_up 3 || exit $?      # 77 (skip) when not root, or without ip netns or sshd
#   ssh -F "$NETNS_SSH_CONFIG" node2 hostname      # prints node2
#   netns_down                 # also done on EXIT, INT and TERM
#
# Host k (1..31) is the ssh alias node<k>, hostname node<k>, address 10.200.R.(8k+2)/29 with
# this side at 10.200.R.(8k+1); R is a /24 of 10.200.0.0/16 that no other run uses (chosen under
# a lock), and the namespaces are ddlt<pid>-<k>, so runs in parallel do not meet. Traffic stays
# on loopback and these veth links. Each sshd takes root's key logins only (the key made here).
#
# After netns_up:
#   NETNS_DIR          temporary directory holding everything below; removed by netns_down
#   NETNS_SSH_CONFIG   ssh config: Host node<k> -> HostName, User root, IdentityFile,
#                      UserKnownHostsFile (ssh -F, or ddlrun --ssh-config)
#   NETNS_KNOWN_HOSTS  known_hosts with every host's key (by address)
#   NETNS_KEY          the private key that logs in as root on every host
#   NETNS_HOSTS        array of the aliases: node1 .. nodeN
# and the functions below (K is a host number).

NETNS_PREFIX="ddlt$$"
NETNS_DIR=""
NETNS_SSH_CONFIG=""
NETNS_KNOWN_HOSTS=""
NETNS_KEY=""
NETNS_HOSTS=()
_netns_net=""        # "10.200.R"
_netns_count=0
declare -A _netns_pid=()

_netns_say() { echo "netns: $*" >&2; }

# Prints why fake hosts cannot be made here, or nothing when they can.
_netns_missing() {
  if [[ $(id -u) -ne 0 ]]; then echo "not root"; return; fi
  if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
    echo "no 'ip netns' (install iproute2)"; return
  fi
  if [[ ! -x /usr/sbin/sshd ]]; then echo "no /usr/sbin/sshd (install openssh-server)"; return; fi
  local tool
  for tool in unshare nsenter flock ssh-keygen; do
    command -v "$tool" >/dev/null || { echo "no $tool"; return; }
  done
  if [[ $(getent shadow root 2>/dev/null | cut -d: -f2) == '!'* ]]; then
    echo "root's account is locked ('!' in /etc/shadow): sshd without PAM refuses it"; return
  fi
  if ! ip netns add "${NETNS_PREFIX}-probe" 2>/dev/null; then
    echo "cannot create network namespaces here"; return
  fi
  ip netns del "${NETNS_PREFIX}-probe"
}

netns_ns() { echo "${NETNS_PREFIX}-$1"; }                  # the namespace of host K
netns_addr() { echo "${_netns_net}.$((8 * $1 + 2))"; }    # host K's address
netns_spare_addr() { echo "${_netns_net}.$((8 * $1 + 3))"; }  # on K's link, never answers
netns_sshd_pid() { echo "${_netns_pid[$1]:-}"; }           # host K's sshd, empty once stopped
netns_hostkey() { echo "$NETNS_DIR/node$1/ssh_host_ed25519_key"; }

# Runs a command in host K's network, UTS and mount namespaces (as its sshd sees them).
netns_exec() {
  local k=$1
  shift
  nsenter --target "${_netns_pid[$k]}" --net --uts --mount -- "$@"
}

# Starts host K's sshd (netns_up does), and waits until it listens.
netns_start_sshd() {
  local k=$1 dir="$NETNS_DIR/node$1"
  rm -f "$dir/sshd.pid"
  # shellcheck disable=SC2016  # $1..$3 are the inner sh's
  ip netns exec "$(netns_ns "$k")" unshare --uts -- \
    sh -c 'hostname "$1" && exec /usr/sbin/sshd -D -f "$2" -E "$3"' \
    sh "node$k" "$dir/sshd_config" "$dir/sshd.log" </dev/null &
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

# Stops host K's sshd: connecting to it is then refused.
netns_stop_sshd() {
  local k=$1 pid=${_netns_pid[$1]:-}
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  _netns_pid[$k]=""
}

# Deletes what runs that were killed outright (SIGKILL, a CTest timeout) left: namespaces
# ddlt<pid>-<k> whose <pid> is gone, with the processes in them, and their directories.
_netns_reap_stale() {
  local ns pid pids
  for ns in $(ip netns list | cut -d' ' -f1 | grep -E '^ddlt[0-9]+-[0-9]+$'); do
    pid=${ns#ddlt}
    pid=${pid%%-*}
    if [[ $pid == "$$" ]] || kill -0 "$pid" 2>/dev/null; then continue; fi
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "${TMPDIR:-/tmp}/ddlt$pid".*
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
  NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ddlt$$.XXXXXX") || return 1
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
  for ((k = 1; k <= n; k++)); do
    local ns veth_here="dt$$h$k" veth_there="dt$$n$k"
    ns=$(netns_ns "$k")
    if ! { ip netns add "$ns" &&
      _netns_count=$k &&
      ip link add "$veth_here" type veth peer name "$veth_there" &&
      ip link set "$veth_there" netns "$ns" &&
      ip addr add "${_netns_net}.$((8 * k + 1))/29" dev "$veth_here" &&
      ip link set "$veth_here" up &&
      ip -n "$ns" addr add "$(netns_addr "$k")/29" dev "$veth_there" &&
      ip -n "$ns" link set "$veth_there" up &&
      ip -n "$ns" link set lo up; }; then
      exec {_netns_lock}>&-
      _netns_say "cannot set up the network of node$k"; netns_down; return 1
    fi
  done
  exec {_netns_lock}>&-  # closing it releases the lock

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
    netns_start_sshd "$k" || { netns_down; return 1; }
  done
  return 0
}

# Undoes netns_up: ends every process in our namespaces (sshd and its sessions), deletes the
# namespaces (and so the veth pairs) and the directory. Safe to call twice.
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
    ip netns del "$ns" 2>/dev/null
    ip link del "dt$$h$k" 2>/dev/null
  done
  _netns_count=0
  if [[ -n $NETNS_DIR && -d $NETNS_DIR ]]; then rm -rf "$NETNS_DIR"; fi
  NETNS_DIR=""
  return 0
}
