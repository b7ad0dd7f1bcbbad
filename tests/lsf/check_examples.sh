#!/bin/bash
# The bsub scripts of lsf/examples, run as LSF would run them on the batch node, inside
# simulated LSF jobs (tests/lsf/lsf_env.sh) with the jsrun test double (tests/lsf/bin/jsrun):
#   - on Summit nodes (18 for tf_cnn_benchmarks, 2 for PyTorch and the interactive session),
#     each node's hardware from the Summit recording (a `ddlrun` on PATH that adds --host-xml),
#     the double in check-only mode (it checks the ERF and prints where each rank would run);
#   - the PyTorch script as a real job on this machine's hardware (2 simulated nodes), when the
#     Python package ddl is built (PYTHON_DIR) and torch imports: every rank trains and
#     reports ok.
#   check_examples.sh DDLRUN TESTS_DIR EXAMPLES_DIR [PYTHON_DIR]
set -uo pipefail

ddlrun=$(readlink -f "$1") tests=$(cd "$2" && pwd) examples=$(cd "$3" && pwd) pydir=${4:+$(readlink -f "$4")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LSF_TEST_DIR=$work
. "$tests/lsf/lsf_env.sh"
failed=0
fail() {
  echo "FAIL $*" >&2
  failed=1
}

for f in "$examples"/*; do
  bash -n "$f" || fail "$f: not valid bash"
done

# ddlrun as the examples call it, planning on recorded hardware.
mkdir -p "$work/bin" "$work/run"
cat >"$work/bin/ddlrun" <<WRAP
#!/bin/bash
exec "$ddlrun" --host-xml "*=\$DDL_TEST_HOST_XML" "\$@"
WRAP
chmod +x "$work/bin/ddlrun"
export PATH=$work/bin:$tests/lsf/bin:$PATH
cd "$work/run"

# summit_example NODES SCRIPT: runs SCRIPT in a simulated job of NODES Summit nodes; its
# output is in $work/out.
summit_example() {
  (
    lsf_job "$1"
    lsf_summit_hardware
    export JSRUN_DOUBLE_CHECK_ONLY=1 DDL_TEST_HOST_XML=$tests/topologies/summit-ac922.xml
    "$examples/$2" </dev/null >"$work/out" 2>&1
  )
}

if ! summit_example 18 summit_tf_cnn_benchmarks.lsf; then
  fail "summit_tf_cnn_benchmarks.lsf on 18 nodes:"
  cat "$work/out" >&2
elif [[ $(grep -c '^rank .*: host a01n.. cpus .* gpus 0-5$' "$work/out") != 108 ]] ||
  ! grep -q '^ranks:     108 (18 hosts x 6)$' tf_cnn_ddl.424242.plan ||
  ! grep -q '^mode:      p:6x18x1x1 ' tf_cnn_ddl.424242.plan ||
  ! grep -q '^ddlrun: jsrun command: .*/jsrun --erf_input ' "$work/out"; then
  fail "summit_tf_cnn_benchmarks.lsf: not 108 ranks through jsrun on 18 nodes:"
  cat "$work/out" tf_cnn_ddl.424242.plan >&2
else
  echo "summit_tf_cnn_benchmarks.lsf: 108 ranks on 18 nodes, ERF accepted"
fi

if ! summit_example 2 summit_pytorch.lsf; then
  fail "summit_pytorch.lsf on 2 nodes:"
  cat "$work/out" >&2
elif [[ $(grep -c '^rank .*: host a01n0[12] cpus .* gpus 0-5$' "$work/out") != 12 ]] ||
  ! grep -q 'train_mnist_synthetic.py", "--epochs", "4"\]$' "$work/out"; then
  fail "summit_pytorch.lsf: not 12 ranks of the training script:"
  cat "$work/out" >&2
else
  echo "summit_pytorch.lsf: 12 ranks on 2 nodes, ERF accepted"
fi

if ! summit_example 2 interactive_bsub_Is.sh; then
  fail "interactive_bsub_Is.sh inside the session:"
  cat "$work/out" >&2
elif ! grep -q '^jsrun:     jsrun --erf_input' "$work/out" ||
  [[ $(grep -c '^rank ' "$work/out") != 12 ]]; then
  fail "interactive_bsub_Is.sh: no dry run or no job:"
  cat "$work/out" >&2
else
  echo "interactive_bsub_Is.sh: dry run and a 12-rank job inside the session"
fi

# The PyTorch example for real, on this machine's hardware.
if [[ -z $pydir ]] || ! PYTHONPATH=$pydir /usr/bin/python3 -c 'import ddl, torch' 2>/dev/null; then
  echo "skipped the real PyTorch job: the Python package ddl (in '$pydir') or torch is missing"
elif ! lstopo-no-graphics --of xml "$work/host.xml" 2>/dev/null; then
  fail "lstopo cannot record this machine"
else
  (
    lsf_job 2 c01n 1
    unset JSRUN_DOUBLE_CPUS JSRUN_DOUBLE_SMT JSRUN_DOUBLE_GPUS JSRUN_DOUBLE_CHECK_ONLY
    export DDL_TEST_HOST_XML=$work/host.xml DDL_SRC=$tests/.. DDL_PYTHONPATH=$pydir
    export PYTHON=/usr/bin/python3
    "$examples/summit_pytorch.lsf" </dev/null >"$work/out" 2>&1
  )
  status=$?
  n=$(grep -c '^rank [0-9]* of [0-9]* ok$' "$work/out")
  if ((status != 0 || n < 2)) || ! grep -q "^rank $((n - 1)) of $n ok$" "$work/out"; then
    fail "summit_pytorch.lsf as a real job (status $status):"
    cat "$work/out" >&2
  else
    echo "summit_pytorch.lsf: $n ranks trained through jsrun and agree"
  fi
fi
exit $failed
