# The namespace-host harness (tests/netns/hosts.sh) and jobs across many namespace hosts;
# skipped (77) unless root with ip netns and sshd.

# The benchmark's two racks of namespace hosts (netns_up_racks): 16 MiB transfers show the
# 250 Mbit/s uplink as the bottleneck and pass through its qdiscs; a ddlrun job on all 4 hosts;
# nothing left after netns_down. Skipped (77) unless root with ip netns, sshd and python3.
add_test(NAME netns.racks_up COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce/racks_up_test.sh
                                     $<TARGET_FILE:ddlrun>)
set_tests_properties(netns.racks_up PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# The harness's own check that each fake host sees this checkout (wherever it was cloned):
# passes for the checkout, fails with its message for a directory only this host sees.
add_test(NAME netns.sees_checkout COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/sees_checkout_test.sh)
set_tests_properties(netns.sees_checkout PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# 40 namespace hosts (a /23): their addresses, hostnames and /tmp; `ddlrun -H node1,...,node40
# true` over ssh (one rank a host, every host logged in); netns_down leaves no namespace,
# process, veth, bridge or directory. About 20 s on a loaded 2-core machine.
add_test(NAME netns.many_hosts_40
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/many_hosts_test.sh $<TARGET_FILE:ddlrun> 40)
set_tests_properties(netns.many_hosts_40 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# The same at 64 hosts (a /22), where a thread per host in ddlrun would
# exceed the check's 46 threads: its flat launch runs on a fixed pool (launcher/ssh/ssh.cc).
add_test(NAME netns.many_hosts_64
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/many_hosts_test.sh $<TARGET_FILE:ddlrun> 64)
set_tests_properties(netns.many_hosts_64 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)

# The launch tree. 64 namespace hosts at --tree-width 4 (three levels of
# hosts): every rank's line, stdin to rank 0, the exit status, PMIx fences with and without
# data (direct modex) across the tree, ddlrun's threads, and an interior agent SIGKILLed
# mid-job (named with its subtree, nothing left on any host); probed jobs: the probe goes down
# the tree (4 logins from ddlrun's host, 64 in all, the job's disk cache filled and read), and
# hosts below that cannot be reached or probed are named with their tree parent; the probe of
# --dry-run and of a restart (a host whose login broke left out with its subtree) go down the
# tree too, one login per host per attempt; ddlrun planning past the heartbeat deadline after
# the probe keeps its agents, and SIGKILLed then leaves nothing.
add_test(NAME netns.tree_64x4
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/tree_test.sh $<TARGET_FILE:ddlrun> 64 4
                 $<TARGET_FILE:pmix_client>)
set_tests_properties(netns.tree_64x4 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS "netns")

# The head's talkers never wait on one host (pool2): 3 namespace hosts on one talker,
# node1 cut off (link down) while 200 MB of stdin head for its rank 0; node2's and node3's
# output keeps arriving (no gap over 2.5 s), node1 is named lost within the heartbeat deadline
# (4 s) + 4 s, and nothing is left on any host. main's blocking writes stall every host.
add_test(NAME netns.write_stall
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/write_stall_test.sh $<TARGET_FILE:ddlrun>)
set_tests_properties(netns.write_stall PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS "netns")
# A slow host holds no thread of the probe (pool2): 40 namespace hosts whose login
# shells sleep 3 s, probed flat by `ddlrun --dry-run --tree-width 0` and by a job (its agents
# asked): more than 32 (the logins at once) sleep at the same moment, as one thread reads every
# started probe or agent, and ddlrun keeps under 64 threads. A thread waiting for each host's
# answer lets at most 32 sleep at once.
add_test(NAME netns.probe_overlap
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/probe_overlap_test.sh $<TARGET_FILE:ddlrun> 40)
set_tests_properties(netns.probe_overlap PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "netns")

# A slow reader in a launch tree (5 namespace hosts, --tree-width 2): the rank of the last host
# prints 12 MB into `ddlrun | (sleep 7; cat)` (heartbeat deadline 3 s): every byte arrives
# (sha256), no host is lost, flat too; rank 0 failing while the others print into a reader
# that never reads is named at once (exit 3), flat and in the tree. main loses node5 and
# 4 MB of output, and runs the failing jobs until they are killed. About 40 s.
add_test(NAME netns.slow_reader
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/slow_reader_test.sh $<TARGET_FILE:ddlrun> 5 2 12 7 3)
set_tests_properties(netns.slow_reader PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 150 LABELS "netns")

# An interior agent's link crawls (512 kbit/s, tc tbf on node1 of a chain node1 -> node2 ->
# node3, heartbeat deadline 3 s) while node3's rank prints 1.2 MB through it: every byte
# arrives, no host below it is lost (its relay's heartbeats down do not starve behind the
# output it writes up), as flat over the same link. About 45 s.
add_test(NAME netns.slow_parent
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/slow_parent_test.sh $<TARGET_FILE:ddlrun>
                 512kbit 800 5)  # 800 kB crawl up for about 13 s, over twice the deadline
set_tests_properties(netns.slow_parent PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 150 LABELS "netns")

# A frozen (SIGSTOP) interior agent of a launch tree (7 namespace hosts, --tree-width 2): once
# its parent gave the host up, its keeper kills it and cleans up; nothing of the job is left on
# any host without SIGCONT. main leaves the agent, its rank and its /tmp entry. About 20 s.
add_test(NAME netns.stopped_agent
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/stopped_agent_test.sh $<TARGET_FILE:ddlrun> 7 2 3)
set_tests_properties(netns.stopped_agent PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "netns")
