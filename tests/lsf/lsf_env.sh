# Simulated LSF jobs, for the tests of ddlrun's jsrun launcher (source this file). No LSF runs
# here; these are the variables an LSF job on Summit sees, for a job of N compute nodes plus
# the launch ("batch") node that runs the job script and no ranks:
#
#   lsf_job N [PREFIX] [SLOTS]   exports LSB_JOBID, LSB_JOBNAME, LSB_QUEUE, LSB_SUB_HOST,
#                                LSB_EXEC_CLUSTER, LSB_MCPU_HOSTS ("batch3 1 a01n01 42 ..."),
#                                LSB_HOSTS (one word per slot), LSB_DJOB_HOSTFILE (a file, one
#                                line per slot), LSB_DJOB_NUMPROC and LSB_MAX_NUM_PROCESSORS,
#                                for hosts PREFIX01..PREFIXNN (default a01n, Summit's names; 42
#                                slots each, Summit's usable cores)
#   lsf_summit_hardware          describes a Summit node to the jsrun test double
#                                (tests/lsf/bin/jsrun): usable threads 0-83 and 88-171 (the
#                                cores at 84-87 and 172-175 are isolated for the system), SMT4,
#                                6 GPUs
#
# The hostfile goes to $LSF_TEST_DIR (a directory the caller owns), and so does ddlrun's probe
# cache for the job (XDG_CACHE_HOME), so that every test probes afresh.

lsf_job() {
  local n=$1 prefix=${2:-a01n} slots=${3:-42}
  local batch=batch3 i host
  : "${LSF_TEST_DIR:?set LSF_TEST_DIR to a scratch directory}"
  export LSB_JOBID=${LSB_JOBID:-424242} XDG_CACHE_HOME=$LSF_TEST_DIR/cache
  export LSB_JOBNAME=ddlrun-test LSB_QUEUE=batch LSB_SUB_HOST=login1 LSB_EXEC_CLUSTER=summit
  LSB_MCPU_HOSTS="$batch 1"
  LSB_HOSTS=$batch
  LSB_DJOB_HOSTFILE=$LSF_TEST_DIR/$LSB_JOBID.hostfile
  echo "$batch" >"$LSB_DJOB_HOSTFILE"
  for ((i = 1; i <= n; i++)); do
    printf -v host '%s%02d' "$prefix" "$i"
    LSB_MCPU_HOSTS+=" $host $slots"
    for ((s = 0; s < slots; s++)); do
      LSB_HOSTS+=" $host"
      echo "$host" >>"$LSB_DJOB_HOSTFILE"
    done
  done
  export LSB_MCPU_HOSTS LSB_HOSTS LSB_DJOB_HOSTFILE
  export LSB_DJOB_NUMPROC=$((n * slots + 1)) LSB_MAX_NUM_PROCESSORS=$((n * slots + 1))
}

lsf_summit_hardware() {
  export JSRUN_DOUBLE_CPUS=0-83,88-171 JSRUN_DOUBLE_SMT=4 JSRUN_DOUBLE_GPUS=6
}
