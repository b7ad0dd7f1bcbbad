# Issue 14 (reliability), items 1, 5 and 13: ddlrun's output and stdin stay bounded under slow,
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
