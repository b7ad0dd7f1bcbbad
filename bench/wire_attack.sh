#!/usr/bin/env bash
# Strangers against per-node mode's rendezvous and the link agent: builds
# bench/wire_attack.cc against the rendezvous, link agent and base sources of each REF (default:
# main, then the working tree) and runs it, printing each version's figures.
#
#   bench/wire_attack.sh [REF|. ...]      (. is the working tree)
# Needs g++ (C++20); each version takes about a minute to build and 30 s to run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
refs=("$@")
((${#refs[@]})) || refs=(main .)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sources=(ddlrun/per_node/rendezvous.cc ddlrun/per_node/rendezvous_server.cc ddlrun/per_node/rendezvous.h ddlrun/per_node/node_wire.h
  mapper/link_agent.cc mapper/link_probe.h mapper/links.h ssh/session.h base comm/comm.h
  comm/mode.h comm/topology.h comm/bootstrap/bootstrap.h comm/bootstrap/rank_list.cc)
for ref in "${refs[@]}"; do
  tree=$work/${ref//\//_}
  mkdir -p "$tree"
  if [[ $ref == . ]]; then
    (cd "$here" && tar -cf - "${sources[@]}") | tar -xf - -C "$tree"
  else
    git -C "$here" archive "$ref" "${sources[@]}" | tar -xf - -C "$tree"
  fi
  mkdir -p "$tree/tests/lib"
  cp "$here/tests/lib/tcp_recorder.h" "$tree/tests/lib/"
  base=()
  for f in "$tree"/base/*.cc; do
    case $f in */yaml.cc | */subprocess.cc) ;; *) base+=("$f") ;; esac
  done
  g++ -std=c++20 -O2 -I"$tree" -o "$tree/wire_attack" "$here/bench/wire_attack.cc" \
    "$tree"/ddlrun/rendezvous*.cc "$tree/mapper/link_agent.cc" "$tree/comm/bootstrap/rank_list.cc" \
    "${base[@]}" -pthread
  echo "== ${ref/#./working tree} ($(git -C "$here" rev-parse --short "${ref/#./HEAD}")${ref/#./, with changes})"
  "$tree/wire_attack"
done
