# The chaos suite (tests/chaos/chaos.sh): each fault kind once per launcher during a real
# libddl allreduce loop (tests/chaos/chaos_loop.c): SIGKILL/SIGSTOP of a rank, of a host's agent
# and of ddlrun, a host's link set down, a rank closing its stdout, a slow reader, a fast stdin
# producer; local launcher (4 ranks) and ssh launcher (3 namespace hosts x 2 ranks, skipped
# without root). bench/chaos.sh runs the same for 100+ runs.
add_executable(chaos_loop chaos/chaos_loop.c)
target_link_libraries(chaos_loop PRIVATE ddl)
add_test(NAME chaos.sample_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/chaos.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop> --launchers local)
add_test(NAME chaos.sample_ssh
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/chaos.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop> --launchers ssh)
set_tests_properties(chaos.sample_local chaos.sample_ssh PROPERTIES SKIP_RETURN_CODE 77
                     TIMEOUT 300)
# A heartbeat deadline of 4 s (not the default 10), as chaos.sample_tree and the liveness tests
# have: a frozen agent or a cut link is then found in about 4 s, not 10.
set_tests_properties(chaos.sample_ssh PROPERTIES ENVIRONMENT CHAOS_LOST_S=4)
# A stranger flooding per-node mode's rendezvous during a job on the 3 namespace
# hosts: every node ends 0, node 0's ddlrun under 64 MiB, nothing left (skipped without root).
add_test(NAME chaos.sample_pernode
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/chaos.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop> --launchers pernode)
set_tests_properties(chaos.sample_pernode PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# A stranger flooding libddl's rendezvous (where the ranks meet) during a real job:
# the job ends 0, ddlrun under 64 MiB, the strangers capped and their refusals reported briefly.
add_test(NAME chaos.ddl_rdzv_flood
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/ddl_rdzv_flood_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop>)
set_tests_properties(chaos.ddl_rdzv_flood PROPERTIES TIMEOUT 120)

# The chaos suite on a launch tree: a chain node1 -> node2 -> node3
# (--tree-width 1, three levels) under a real libddl allreduce loop (its PMIx fences and modex
# routed through the tree); an agent SIGKILLed, an agent SIGSTOPped, a link cut (random host,
# an interior one included), heartbeat deadline 4 s: named, ended in time, nothing left; a
# reader pausing past that deadline (no host lost); SIGINT and SIGTERM 0.1-1.0 s into the launch
# (its note, 130 or 143, nothing left on any host).
add_test(NAME chaos.sample_tree
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/chaos.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:chaos_loop> --launchers tree
                 --faults
                 "kill_agent stop_agent link_down slow_reader early_sigint early_sigterm")
set_tests_properties(chaos.sample_tree PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 150
                     ENVIRONMENT CHAOS_LOST_S=4)
