# The launchers in real jobs: ssh, output and stdin bounds, liveness, leftovers, blame.

# `ddlrun --agent` answers an inventory request (Hw) with what `ddlrun --probe` prints.
add_test(NAME launcher.agent_inventory
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/agent_inventory_test.py $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.agent_inventory PROPERTIES TIMEOUT 60)

# Jobs on namespace hosts over real sshd: ddlrun --launcher ssh (and mpirun when installed), the
# ranks' variables, failures, signals, unreachable hosts, arguments byte for byte.
add_test(NAME launcher.launch_ssh_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/launch_ssh_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.launch_ssh_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# ddlrun's output and stdin stay bounded under slow,
# stalled and closed readers and fast stdin producers; untagged output passes byte for byte.
add_test(NAME launcher.io_bounds_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/io_bounds_test.sh $<TARGET_FILE:ddlrun> local
                 $<TARGET_FILE:ddl_check>)
set_tests_properties(launcher.io_bounds_local PROPERTIES TIMEOUT 120)
# The same through the ssh launcher on two fake hosts (tests/netns/hosts.sh): skipped (77)
# unless root with ip netns and sshd.
add_test(NAME launcher.io_bounds_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/io_bounds_test.sh $<TARGET_FILE:ddlrun> ssh
                 $<TARGET_FILE:ddl_check>)
set_tests_properties(launcher.io_bounds_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)

# --wdir and a working directory missing on one host (ssh launcher), and --wdir locally.
add_test(NAME launcher.wdir_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/wdir_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.wdir_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# 8 namespace hosts: a soft open-files limit of 24 is raised and the job runs; one ssh login
# per host for probe and launch; a hard limit too low is named as such, never as a host key.
add_test(NAME launcher.descriptors_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/descriptors_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.descriptors_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 90)

# The launcher's side: no wait without a deadline (partitions, frozen
# agents, signals while stopping), nothing left behind (SIGKILL of ddlrun), Ctrl-Z, blame.
add_executable(ddl_loop netns/ddl_loop.c)
target_link_libraries(ddl_loop PRIVATE ddl)

# Partition, frozen agent, stopped ddlrun on namespace hosts through the ssh launcher.
add_test(NAME launcher.liveness_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/liveness_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_loop>)
set_tests_properties(launcher.liveness_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)

# SIGKILL of ddlrun leaves no process (children that left their rank's group included) and no
# temporary directory; a second SIGTERM ends ddlrun at once (local launcher, no root needed).
add_test(NAME launcher.leftovers_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/leftovers_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.leftovers_local PROPERTIES TIMEOUT 60)

# The summary names the stalled rank, or the rank that left early, not a bystander.
add_test(NAME launcher.blame_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/blame_job_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_loop>)
set_tests_properties(launcher.blame_local PROPERTIES TIMEOUT 60)

# A rank stopped (kill -STOP) when the job fails, or when the user interrupts it, takes ddlrun's
# signal at once (SIGCONT follows it): ddlrun ends within seconds, not after --kill-grace 20.
add_test(NAME launcher.stopped_rank
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/stopped_rank_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.stopped_rank PROPERTIES TIMEOUT 90)

# A rank running a libddl program as another user (uid nobody, setpriv: root only) leaves
# PMIx's thread stuck; ddlrun still ends on --timeout: it waits for PMIx with a deadline.
add_test(NAME launcher.foreign_rank
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/foreign_rank_test.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:hello_allreduce>)
set_tests_properties(launcher.foreign_rank PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 90)

# The local launcher's rendezvous for the ranks listens on 127.0.0.1 only, the address the
# ranks are told (/proc/net/tcp, tcp6).
add_test(NAME launcher.rendezvous_bind_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/rendezvous_bind_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(launcher.rendezvous_bind_local PROPERTIES TIMEOUT 60)

# Flux (tests/launcher/bin/flux): no Flux instance can run here, so a test double of `flux run`
# checks the command and runs the tasks on this machine; ddlrun's flux launcher against it: the
# dry run's command, a job's variables, a real libddl job (ddl_check) and a failing rank.
add_test(NAME launcher.flux_job
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher/flux_job.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check> ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(launcher.flux_job PROPERTIES TIMEOUT 180)
