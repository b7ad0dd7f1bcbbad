# What the Python job scripts share (sourced, not run).

# python_has PYTHON MODULE...: PYTHON finds every MODULE (importlib's find_spec, without importing
# it: TensorFlow takes 4 s of CPU to import, torch 1.5, and each job's ranks import them anyway).
# A module that is there but does not import makes the job fail rather than skip.
python_has() {
  local python=$1
  shift
  "$python" -c 'import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))' "$@" 2>/dev/null
}
