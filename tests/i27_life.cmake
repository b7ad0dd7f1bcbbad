# Issue 27 (hardening), the life helper's part: signals and --timeout during restarts, Horovod
# names, plans in valid UTF-8, the topology reader's limits, shared host names, messages.

# horovod.torch's asynchronous calls matched by name: ranks calling a, b and b, a get their own
# sums; differently named calls raise NameMismatch on every rank (2 ranks).
if(TARGET ddl_python)
  add_test(NAME python.hvd_names_2
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/run_job.sh --torch --plain
                   $<TARGET_FILE:ddlrun> - ${Python3_EXECUTABLE} 2
                   ${CMAKE_CURRENT_SOURCE_DIR}/python/check_hvd_names.py)
  set_tests_properties(python.hvd_names_2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

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
