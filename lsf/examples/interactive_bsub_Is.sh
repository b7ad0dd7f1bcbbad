#!/bin/bash
# An interactive session on Summit: ask LSF for nodes with `bsub -Is`, then run ddlrun by hand
# as often as you like inside the allocation (each run is one jsrun step; the nodes stay yours
# until you leave the shell or the wall time ends).
#
#   ./interactive_bsub_Is.sh [NODES]         on a login node: opens the session
#
# Run from a login node, this script asks for the session and runs itself again inside it
# (LSF starts it on the batch node, with $LSB_JOBID set); inside it shows the plan and runs a
# first job, then leaves you at a shell in the same allocation.

set -euo pipefail

if [[ -z ${LSB_JOBID:-} ]]; then
  exec bsub -Is -P "${PROJECT:-ABC123}" -nnodes "${1:-2}" -W "${WALLTIME:-30}" "$0"
fi

echo "LSF job $LSB_JOBID on: $LSB_MCPU_HOSTS"
# What ddlrun would do, nothing started: the compute nodes (the batch node left out), the
# ranks, their GPUs and CPUs, the jsrun command and its resource file.
ddlrun --dry-run python train.py
# A first job; try --jsrun-mode rs where ERF is broken, -v to see the jsrun command.
ddlrun -v hostname
if [[ -t 0 ]]; then
  echo "in the allocation: run 'ddlrun python train.py'; 'exit' ends the session"
  exec "${SHELL:-/bin/bash}" -i
fi
