# ddlrun end to end: plans, probes, restarts, per-node mode, signals.

# A plan of 262,144 ranks stays under a generous peak memory (RSS, not time), its
# topology file complete, its text plan summarised, its JSON complete (bench/plan_scale.sh
# measures 27,648 to 1,048,576 ranks); a plan of 1,000,000 one-slot hosts from a hostfile
# (--no-probe) under 1100 MB.
add_test(NAME ddlrun.plan_scale_memory
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/plan_scale_memory.sh $<TARGET_FILE:ddlrun>
                 ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(ddlrun.plan_scale_memory PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# The plan as a picture (--output svg) of Summit plans of 2, 36 and 72 hosts, rendered by
# rsvg-convert (Debian's librsvg2-bin): every rank, host and ring edge in it; and the README's
# picture (docs/summit-2host.svg) what ddlrun draws now (scripts/update-golden redraws it).
# Skipped (77) without rsvg-convert, except under CI.
add_test(NAME ddlrun.golden_svg
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/check_svg.py $<TARGET_FILE:ddlrun>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(ddlrun.golden_svg PROPERTIES SKIP_RETURN_CODE 77)

# ddlrun --dry-run probing namespace hosts over real sshd (`ddlrun --probe` on each).
add_test(NAME ddlrun.probe_ssh_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/ddlrun_probe_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.probe_ssh_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# --probe-links on the two-rack namespace cluster (1 Gbit/s hosts, 250 Mbit/s uplink: racks
# found, p:2x2x2x1 with no --nodes) and on three flat hosts (one rack), each link agent inside
# its host's ddlrun agent; about 10 s.
add_test(NAME ddlrun.probe_links_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/probe_links_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.probe_links_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)

# One machine under two names (node1 and its address, an ssh-config alias) is refused; the
# namespace hosts, which share machine and boot id, stay distinct.
add_test(NAME ddlrun.same_machine_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/same_machine_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.same_machine_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# --probe-links down the launch tree (launcher/ssh/tree_links.h): 3 racks x 4
# namespace hosts (shaped host links and uplinks) at --tree-width 2 (three levels): the racks
# found are the flat measurement's, every host is logged in to once (the first level from
# ddlrun's host), a job measured so takes over the tree; a host whose link agent cannot listen
# is named in the flat path's words; an interior host killed mid-measurement of a job is named
# (the warnings, then the launch with its subtree), as is a first-level host killed so (named
# once, no host logged in to again) or killed after the probe while ddlrun plans (the same),
# a leaf stopped mid-measurement is named within the heartbeat deadline, and nothing is left
# on any host. About 27 s.
add_test(NAME ddlrun.probe_links_tree_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/tree_links_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.probe_links_tree_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                     LABELS "netns")

# Plans in JSON and YAML read by Python's strict readers when an argument is not UTF-8.
add_test(NAME ddlrun.plan_utf8
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/plan_utf8_test.sh $<TARGET_FILE:ddlrun>
                 /usr/bin/python3)
set_tests_properties(ddlrun.plan_utf8 PROPERTIES TIMEOUT 30)

# Signals to ddlrun --max-restarts: SIGTERM while a failed attempt is stopped ends the job (143);
# the growing pause between restarts, and SIGTERM during it (note, summary, 143).
add_test(NAME ddlrun.restart_signal_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/restart_signal_local_test.sh
                 $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.restart_signal_local PROPERTIES TIMEOUT 60)

# Between attempts on namespace hosts: --timeout and SIGINT while the restart's probe hangs on a
# frozen sshd; a host lost as a restart starts is one more lost host.
add_test(NAME ddlrun.restart_signal_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/restart_signal_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.restart_signal_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# Per-node nodes that share a host name but not their machine identity are taken (2 namespace
# hosts both named vm); without probes they are refused, saying why.
add_test(NAME ddlrun.per_node_names_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/per_node_names_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check>)
set_tests_properties(ddlrun.per_node_names_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# Small defects' messages: a deleted current directory, out of descriptors (ulimit -n).
add_test(NAME ddlrun.messages_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/messages_local_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.messages_local PROPERTIES TIMEOUT 60)

# ddlrun's first seconds on this host (a listener that never answers as a frozen sshd):
# SIGINT and SIGTERM 0.2 to 1 s in end it with the note and 130/143, its TMPDIR empty;
# --timeout 2 ends the probe in 2 s (124), saying so, and a slow plan too; a probe that goes on
# names the hosts not answered every 5 s; --tree-width 1 over 40 hosts is refused up front (2).
# About 20 s.
add_test(NAME ddlrun.startup_signals
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/startup_signals_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.startup_signals PROPERTIES TIMEOUT 60)

# ddlrun --max-restarts with the local launcher (tests/ddlrun/restart_local_test.sh): a rank that
# fails on the first attempt only, restarts that run out, a frozen (SIGSTOP) libddl rank.
add_test(NAME ddlrun.restart_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/restart_local_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop>)
set_tests_properties(ddlrun.restart_local PROPERTIES TIMEOUT 120)

# ddlrun --max-restarts across three namespace hosts (tests/netns/restart_netns_test.sh):
# examples/train_elastic.py loses host 3 mid-run, restarts on two hosts from its checkpoint and
# ends with the weights of a reference that resumed the same way; with --min-hosts 3 the same
# fault ends the job with the failure's status; --nnodes 2:3 lets the host rejoin; through
# mpirun, a host that stops answering is left out and mpirun started again; nothing left.
if(TARGET ddl_python)
  add_test(NAME ddlrun.restart_netns_3x2
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/restart_netns_test.sh $<TARGET_FILE:ddlrun>
                   ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE})
  set_tests_properties(ddlrun.restart_netns_3x2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# Per-node mode: three namespace hosts each running ddlrun --node-rank K --nnodes 3
# (as Kubernetes pods would): the plan of a single ddlrun, a libddl job, a DDP script, a lost
# rank and a lost node ending every node within 5 s, a wrong token refused; with --max-restarts
# a failed rank restarting every node, a lost node with --nnodes 2:3 restarting the other two as a
# 2-node job, node 0 lost ending the others naming it.
if(TARGET ddl_python)
  add_test(NAME pernode.netns_3x2
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/per_node_test.sh $<TARGET_FILE:ddlrun>
                   $<TARGET_FILE:ddl_check> $<TARGET_FILE:ddl_loop> ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE})
  set_tests_properties(pernode.netns_3x2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# Per-node mode's secrets never cross the network (tcpdump on node 0's host, streams
# reassembled) and a stranger flooding the rendezvous during a job (every node ends 0, node 0
# under 64 MiB). Skipped (77) without root, ip netns, sshd or tcpdump.
add_test(NAME pernode.wire_netns_3x2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/per_node_wire_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check>)
set_tests_properties(pernode.wire_netns_3x2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)
