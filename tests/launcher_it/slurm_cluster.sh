# Starts a one-node Slurm cluster on this host for a test (sourced after common.sh): munged,
# slurmctld and slurmd with their own key, socket, ports, slurm.conf and state under $it_tmp,
# listening on loopback only, and registers their teardown (by PID). Exports SLURM_CONF.
# Skips (77) when not root or when the daemons are missing or cannot start.

[[ $(id -u) -eq 0 ]] || skip "needs root to run slurmd and munged"
for d in munged slurmctld slurmd srun salloc; do
  command -v "$d" >/dev/null || skip "$d is not installed (apt-get install slurm-wlm munge)"
done

slurm_dir=$it_tmp/slurm
mkdir -p "$slurm_dir/state" "$slurm_dir/spool"
chmod 711 "$slurm_dir"

# kill_pidfile FILE: stops the daemon whose PID the file holds, and waits for it.
kill_pidfile() {
  local pid i
  pid=$(cat "$1" 2>/dev/null) || return 0
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

# Three free loopback ports.
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

head -c 1024 /dev/urandom >"$slurm_dir/munge.key"
chmod 400 "$slurm_dir/munge.key"
munged -f --socket="$slurm_dir/munge.socket" --key-file="$slurm_dir/munge.key" \
  --log-file="$slurm_dir/munged.log" --pid-file="$slurm_dir/munged.pid" \
  --seed-file="$slurm_dir/munged.seed" || skip "munged does not start: $(cat "$slurm_dir/munged.log" 2>/dev/null)"
cleanups+=("kill_pidfile '$slurm_dir/munged.pid'")

node=$(hostname -s)
cat >"$slurm_dir/slurm.conf" <<CONF
ClusterName=ddlit
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=it Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$slurm_dir/slurm.conf

slurmctld -c -f "$SLURM_CONF" || skip "slurmctld does not start: $(tail -5 "$slurm_dir/slurmctld.log" 2>/dev/null)"
cleanups+=("kill_pidfile '$slurm_dir/slurmctld.pid'")
slurmd -f "$SLURM_CONF" || skip "slurmd does not start: $(tail -5 "$slurm_dir/slurmd.log" 2>/dev/null)"
cleanups+=("kill_pidfile '$slurm_dir/slurmd.pid'")

for ((i = 0; i < 100; i++)); do
  [[ $(sinfo -h -N -o %t 2>/dev/null) == idle* ]] && break
  sleep 0.2
done
[[ $(sinfo -h -N -o %t 2>/dev/null) == idle* ]] ||
  skip "the Slurm node does not come up: $(sinfo -N 2>&1; tail -5 "$slurm_dir/slurmd.log")"
