# shellcheck shell=bash
# bench/netns_scale.sh --launch (sourced by it): `true` on N namespace hosts, one rank each,
# through ddlrun flat, ddlrun's launch tree and mpirun; see netns_scale.sh's head. Uses its
# variables: counts, runs, width, ddlrun, mpirun, login_sleep, failed.

# sample PID: "peak_rss_kb most_threads" of PID until it ends (every 20 ms).
sample() {
  local pid=$1 rss=0 thr=0 r t
  while read -r r t < <(awk '/^VmHWM:/ {r = $2} /^Threads:/ {t = $2} END {print r + 0, t + 0}' \
    "/proc/$pid/status" 2>/dev/null) && ((t > 0)); do
    ((r > rss)) && rss=$r
    ((t > thr)) && thr=$t
    sleep 0.02
  done
  echo "$rss $thr"
}

# busy: the CPU time every process of this machine has spent, in jiffies (/proc/stat: user,
# nice, system, irq, softirq), so that a run's difference is what the run cost all CPUs: the
# launcher, every fake host's sshd and agent, and the kernel's share of their traffic.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# time_runs KEY CMD...: runs CMD `runs` times; sets secs[KEY] (median), rss[KEY] (MB) and
# thr[KEY] (most threads) for ddlrun, and cpu[KEY], the machine's CPU seconds of the median
# run (busy); a failed run marks KEY "failed".
time_runs() {
  local key=$1 i t0 b0 pid rc times=() cpus=() peak=0 most=0 r t
  shift
  for ((i = 0; i < runs; i++)); do
    b0=$(busy)
    t0=$EPOCHREALTIME
    "$@" </dev/null >"$work/out" 2>&1 &
    pid=$!
    read -r r t <<<"$(sample "$pid")"
    wait "$pid"
    rc=$?
    if ((rc != 0)); then
      echo "  $key: exit $rc: $(grep -v '^$' "$work/out" | head -n2 | tr '\n' ' ' | cut -c1-150)" >&2
      secs[$key]=failed
      failed=1
      return
    fi
    times+=("$(echo "$EPOCHREALTIME - $t0" | bc)")
    cpus+=("$(( $(busy) - b0 ))")
    ((r > peak)) && peak=$r
    ((t > most)) && most=$t
  done
  secs[$key]=$(printf '%s\n' "${times[@]}" | benchtable median --format %.2f)
  rss[$key]=$(awk -v k="$peak" 'BEGIN { printf "%.1f", k / 1024 }')
  thr[$key]=$most
  cpu[$key]=$(printf '%s\n' "${cpus[@]}" |  # clock ticks
    benchtable median --scale "1/$(getconf CLK_TCK)" --format %.2f)
}

# floor_of CPU_SECONDS: the least wall time that CPU time takes on this machine's CPUs.
floor_of() {
  [[ -n $1 ]] || { echo -; return; }
  awk -v c="$1" -v n="$(nproc)" 'BEGIN { printf "%.2f", c / n }'
}

# levels N: the launch tree's levels of hosts at fan-out `width` (tree.h: W + W^2 + ... >= N).
levels() {
  awk -v n="$1" -v w="$width" 'BEGIN { c = 0; p = 1; for (d = 1; ; d++) { p *= w; c += p; if (c >= n) { print d; exit } } }'
}

# fit LABEL X... -- Y...: least squares y = a + b x, and its value at 1,024 and 4,608 hosts
# (X given by `xof`).
fit() {
  local label=$1 xs=() ys=() x1 x2
  shift
  while [[ $1 != -- ]]; do xs+=("$1"); shift; done
  shift
  ys=("$@")
  x1=$($xof 1024) x2=$($xof 4608)
  if ((${#xs[@]} < 2)); then
    printf '  %-28s needs two counts\n' "$label"
    return
  fi
  awk -v xs="${xs[*]}" -v ys="${ys[*]}" -v x1="$x1" -v x2="$x2" -v label="$label" -v var="$var" 'BEGIN {
    n = split(xs, x, " "); split(ys, y, " ")
    for (i = 1; i <= n; i++) { sx += x[i]; sy += y[i]; sxx += x[i] * x[i]; sxy += x[i] * y[i] }
    d = n * sxx - sx * sx
    b = d == 0 ? 0 : (n * sxy - sx * sy) / d
    a = (sy - b * sx) / n
    printf "  %-28s t = %.3f + %.5f*%s   1,024 hosts: %7.2f s   4,608 hosts: %7.2f s\n",
           label, a, b, var, a + b * x1, a + b * x2 }'
}
hosts_n() { echo "$1"; }

# slow_logins N: `sleep login_sleep` in root's .bashrc on each of the N hosts (each has its own
# home), when asked for.
slow_logins() {
  local k root_home
  [[ $login_sleep == 0 ]] && return 0
  root_home=$(getent passwd root | cut -d: -f6)
  for ((k = 1; k <= $1; k++)); do
    netns_exec "$k" sh -c "echo 'sleep $login_sleep' >'$root_home/.bashrc'" || exit 1
  done
}

# published: what the peers' own projects publish about launch at scale, beside the model
# (sources in ../shared/REFERENCE.md, "Launching on thousands of hosts"). None of them is a
# launch of `true` timed like the rows above: they are targets and reports, not measurements.
published() {
  echo "published, for comparison (targets and reports, not runs of this benchmark):"
  echo "  PMIx (design target)           10^6 processes on 10^5 nodes through MPI_Init in < 30 s"
  echo "  Open MPI (ORTE report)         1,024 hosts: ~30 s for the daemons to call back"
  echo "  Slurm                          fans out through slurmd's tree, TreeWidth 50; srun opens one"
  echo "                                 I/O port per 48 nodes (no launch time published)"
  echo "  PRRTE                          ssh tree spawn, routed radix 64, 128 ssh in flight"
}

launch_table() {
  [[ -x $ddlrun ]] || { echo "netns_scale: no ddlrun at $ddlrun (--ddlrun)" >&2; exit 2; }
  ddlrun=$(realpath "$ddlrun")
  if ((mpirun)) && ! command -v mpirun >/dev/null; then
    echo "netns_scale: no mpirun: its column stays empty (install openmpi-bin)" >&2
    mpirun=0
  fi
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  work=$(mktemp -d "${TMPDIR:-/tmp}/netns_scale.XXXXXX") || exit 1
  trap 'netns_down; rm -rf "$work"' EXIT
  declare -gA secs=() rss=() thr=() cpu=()
  local n hosts xs_n=() xs_l=() xs_m=() y_flat=() y_tree=() y_mpi=()
  echo "netns_scale --launch: true, 1 rank a host, median of $runs; tree fan-out $width; every login" \
    "sleeps $login_sleep s; $( ((probe)) && echo "probed (down the tree with it)" || echo "--no-probe");" \
    "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
  printf '%6s %8s %8s %8s %8s %9s %9s %9s %9s %10s %9s\n' hosts "flat s" "tree s" "mpirun s" \
    levels "flat MB" "flat thr" "tree MB" "tree thr" "tree CPU s" "floor s"
  for n in $counts; do
    netns_up "$n" || exit $?
    unset SSH_AUTH_SOCK
    export HOME="$NETNS_DIR/home" XDG_CACHE_HOME="$NETNS_DIR/cache"
    mkdir -p "$HOME"
    hosts=$(IFS=,; echo "${NETNS_HOSTS[*]}")
    slow_logins "$n"
    secs=() rss=() thr=() cpu=()
    local d=(--launcher ssh --ssh-config "$NETNS_SSH_CONFIG" -H "$hosts")
    ((probe)) || d+=(--no-probe)
    time_runs flat "$ddlrun" "${d[@]}" --tree-width 0 true
    time_runs tree "$ddlrun" "${d[@]}" --tree-width "$width" true
    secs[mpirun]=-
    if ((mpirun)); then
      time_runs mpirun mpirun --mca plm_rsh_args "-F $NETNS_SSH_CONFIG" --mca oob_tcp_if_include \
        "$NETNS_NET" --mca btl_tcp_if_include "$NETNS_NET" -H "$hosts" -np "$n" true
    fi
    printf '%6s %8s %8s %8s %8s %9s %9s %9s %9s %10s %9s\n' "$n" "${secs[flat]}" "${secs[tree]}" \
      "${secs[mpirun]}" "$(levels "$n")" "${rss[flat]:--}" "${thr[flat]:--}" "${rss[tree]:--}" \
      "${thr[tree]:--}" "${cpu[tree]:--}" "$(floor_of "${cpu[tree]:-}")"
    [[ ${secs[flat]} != failed ]] && xs_n+=("$n") && y_flat+=("${secs[flat]}")
    [[ ${secs[tree]} != failed ]] && xs_l+=("$(levels "$n")") && y_tree+=("${secs[tree]}")
    [[ ${secs[mpirun]} != failed && ${secs[mpirun]} != - ]] && xs_m+=("$n") && y_mpi+=("${secs[mpirun]}")
    netns_down
  done
  echo "model (least squares over the rows above; N hosts, L levels of the tree):"
  xof=hosts_n var=N fit "ddlrun flat" "${xs_n[@]}" -- "${y_flat[@]}"
  xof=levels var=L fit "ddlrun tree (fan-out $width)" "${xs_l[@]}" -- "${y_tree[@]}"
  ((${#y_mpi[@]})) && xof=hosts_n var=N fit "mpirun" "${xs_m[@]}" -- "${y_mpi[@]}"
  echo "  (namespace hosts share this machine's $(nproc) CPUs, so every launcher's time here also grows"
  echo "  with N; the tree's model assumes hosts with CPUs of their own, each level costing alike)"
  echo "tree CPU s: what the tree launch cost all of this machine's CPUs (ddlrun, every fake host's"
  echo "  sshd and agent, the kernel); floor s: that over the $(nproc) CPUs, the least wall time those"
  echo "  hosts' own work allows here, whatever the launcher"
  published
  return 0
}
