# ddlrun-probe, the build tree's inventory printer: live, from a recording, and with a bad file.
add_test(NAME mapper.probe_live COMMAND ddlrun-probe)
set_tests_properties(mapper.probe_live PROPERTIES PASS_REGULAR_EXPRESSION "^version: 1\nhostname: ")
add_test(NAME mapper.probe_xml
         COMMAND ddlrun-probe --xml ${CMAKE_CURRENT_SOURCE_DIR}/topologies/power8gpudistances.xml)
set_tests_properties(mapper.probe_xml PROPERTIES PASS_REGULAR_EXPRESSION "pci_bus_id: \"0003:01:00.0\"")
add_test(NAME mapper.probe_bad_xml COMMAND ddlrun-probe --xml /nonexistent/host.xml)
set_tests_properties(mapper.probe_bad_xml PROPERTIES WILL_FAIL TRUE)

# The plans for every recording x 1, 2, 18, 36 hosts against tests/golden (scripts/update-golden
# rewrites them).
add_test(NAME mapper.golden_plans
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/golden/check_golden.sh $<TARGET_FILE:ddlrun>
                 ${CMAKE_CURRENT_SOURCE_DIR})

# Probing over ssh through ddlrun's agents against real sshd, each in a network namespace of its
# own (tests/netns/hosts.sh); skipped (77) unless root with ip netns and sshd.
add_executable(agent_probe_driver netns/agent_probe_driver.cc)
target_link_libraries(agent_probe_driver PRIVATE ddlrun_core)
add_test(NAME mapper.probe_ssh_netns
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/probe_ssh_test.sh
                 $<TARGET_FILE:agent_probe_driver> $<TARGET_FILE:ddlrun>)
set_tests_properties(mapper.probe_ssh_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
