# Supervision under slow readers and in the first second.

# A slow reader in a launch tree (5 namespace hosts, --tree-width 2): the rank of the last host
# prints 12 MB into `ddlrun | (sleep 7; cat)` (heartbeat deadline 3 s): every byte arrives
# (sha256), no host is lost, flat too; rank 0 failing while the others print into a reader
# that never reads is named at once (exit 3), flat and in the tree. main loses node5 and
# 4 MB of output, and runs the failing jobs until they are killed. About 40 s.
add_test(NAME netns.slow_reader
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/slow_reader_test.sh $<TARGET_FILE:ddlrun> 5 2 12 7 3)
set_tests_properties(netns.slow_reader PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 150 LABELS "netns")

# ddlrun's first seconds on this host (a listener that never answers as a frozen sshd):
# SIGINT and SIGTERM 0.2 to 1 s in end it with the note and 130/143, its TMPDIR empty;
# --timeout 2 ends the probe in 2 s (124), saying so, and a slow plan too; a probe that goes on
# names the hosts not answered every 5 s; --tree-width 1 over 40 hosts is refused up front (2).
# About 20 s.
add_test(NAME ddlrun.startup_signals
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ddlrun/startup_signals_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(ddlrun.startup_signals PROPERTIES TIMEOUT 60)

# A frozen (SIGSTOP) interior agent of a launch tree (7 namespace hosts, --tree-width 2): once
# its parent gave the host up, its keeper kills it and cleans up; nothing of the job is left on
# any host without SIGCONT. main leaves the agent, its rank and its /tmp entry. About 20 s.
add_test(NAME netns.stopped_agent
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/stopped_agent_test.sh $<TARGET_FILE:ddlrun> 7 2 3)
set_tests_properties(netns.stopped_agent PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "netns")
