# Issue 26 item 1: the namespace harness (tests/netns/hosts.sh) beyond one /24, up to 256 hosts.

# 40 namespace hosts (a /23): their addresses, hostnames and /tmp; `ddlrun -H node1,...,node40
# true` over ssh (one rank a host, every host logged in); netns_down leaves no namespace,
# process, veth, bridge or directory. About 20 s on a loaded 2-core machine.
add_test(NAME netns.many_hosts_40
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/many_hosts_test.sh $<TARGET_FILE:ddlrun> 40)
set_tests_properties(netns.many_hosts_40 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# bench/netns_scale.sh once, small (4 hosts), so it keeps working; bench/netns_scale.sh with
# its defaults times 32, 128 and 256 hosts.
add_test(NAME bench.netns_scale_smoke COMMAND ${PROJECT_SOURCE_DIR}/bench/netns_scale.sh --hosts 4)
set_tests_properties(bench.netns_scale_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# Issue 26 item 2: the launch tree. 64 namespace hosts at --tree-width 4 (three levels of
# hosts): every rank's line, stdin to rank 0, the exit status, ddlrun's threads, and an
# interior agent SIGKILLed mid-job (named with its subtree, nothing left on any host).
add_test(NAME netns.tree_64x4
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/tree_test.sh $<TARGET_FILE:ddlrun> 64 4)
set_tests_properties(netns.tree_64x4 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS "netns")
