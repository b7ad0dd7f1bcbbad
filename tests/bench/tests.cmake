# The bench/ scripts in small runs, so that they keep working (no timing is checked).

# The GPU path, prepared for a lent device: bench/gpu_check.sh in its no-GPU mode from the build
# tree (tests/bench_gpu/nogpu_test.sh): the CPU-side steps and the reasons for each skipped GPU
# step, so the script a GPU session runs stays working.
set(gpu_check_torch 0)
if(TARGET ddl_torch_pg)
  set(gpu_check_torch 1)
endif()
add_test(NAME bench.gpu_check_nogpu
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu/nogpu_test.sh ${CMAKE_BINARY_DIR}
                 ${gpu_check_torch})
set_tests_properties(bench.gpu_check_nogpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240
                     LABELS "bench;gpu")
# ddl-bench -G (GPU buffers through libddl's NCCL path) against the fake CUDA runtime and NCCL
# of comm.gpu_job_fake (a named test double): built where NCCL's headers are, as that test.
if(DDL_HAVE_NCCL)
  add_test(NAME bench.ddl_bench_gpu_fake
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu/ddl_bench_fake.sh $<TARGET_FILE:ddlrun>
                   $<TARGET_FILE:ddl_bench> ${CMAKE_CURRENT_BINARY_DIR}/fake_gpu)
  set_tests_properties(bench.ddl_bench_gpu_fake PROPERTIES TIMEOUT 120 LABELS "bench;gpu")
endif()
# scripts/gpu_bundle (the bundle a GPU session carries to the device) staged from this build and
# checked: self-contained (ldd, env -i, a chroot as root), gpu_check.sh runs from it, and its
# package ddl imports on Python 3.12. Skipped (77) where there is no Python 3.12.
if(DDL_HAVE_NCCL)
  add_test(NAME bench.gpu_bundle
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu/bundle_test.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(bench.gpu_bundle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                       LABELS "bench;gpu")
endif()

# bench/allreduce_compare.sh --quick: ddl-bench, MPI_Allreduce (tuned, forced ring, untuned),
# Gloo and torch's gloo backend on 2 and 4 local ranks against memcpy_bench's limits, 4 sizes,
# every row present with #wrong 0 and positive limits (no timing is checked).
add_test(NAME bench.allreduce_smoke
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce/smoke_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(bench.allreduce_smoke PROPERTIES TIMEOUT 300)
# bench/benchtable.py (the bench scripts' medians, ratios, shares and columns): its functions and
# its command line, under this Python and the PATH's python3.
# bench/allreduce_table.py on saved logs of 2 and 4 ranks: the tables allreduce_compare.sh has
# always printed for them, byte for byte (tests/bench_allreduce/table_expected.txt), exit 1 on
# wrong elements, the errors for a missing log and a bad --limit, and --tables end to end.
if(Python3_EXECUTABLE)
  add_test(NAME bench.benchtable
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench/benchtable_test.py
                   ${PROJECT_SOURCE_DIR})
  add_test(NAME bench.allreduce_table
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce/table_test.py
                   ${PROJECT_SOURCE_DIR})
  set_tests_properties(bench.benchtable bench.allreduce_table PROPERTIES TIMEOUT 60 LABELS unit)
endif()
# memcpy_bench -x (the exchange limit): rows on 2 and 3 processes, exact errors, and a process
# killed mid-round makes the others give up within 10 s, nothing left running.
add_test(NAME bench.memcpy_exchange
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce/memcpy_exchange_test.sh
                 $<TARGET_FILE:memcpy_bench>)
set_tests_properties(bench.memcpy_exchange PROPERTIES TIMEOUT 120)

# The cost model against measurement (bench/predict_check.sh): on 3 hosts x 2 ranks at 1 Gbit/s
# and on 2 racks x 2 hosts x 2 ranks with a 250 Mbit/s uplink (tc-shaped namespace hosts, the
# rates given to ddlrun with --link), every mode's predicted 16 MiB allreduce is within 20% of
# ddl-bench's time, and --mode auto's pick is the fastest measured (within 5%). About 30 s.
# Skipped (77) unless root with ip netns and sshd.
add_test(NAME bench.predict_check_netns
         COMMAND ${CMAKE_SOURCE_DIR}/bench/predict_check.sh --build ${CMAKE_BINARY_DIR})
set_tests_properties(bench.predict_check_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# predict_check when every run times out (--run-timeout 1): the modes named as timed out, "no
# mode was measured", no 0 ms shown as a measurement, status 1, its namespaces gone. About 10 s.
add_test(NAME bench.predict_check_timeout
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/netns/predict_timeout_test.sh ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR})
set_tests_properties(bench.predict_check_timeout PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# plan_bench's small sizes run to the end (no timing is checked).
add_test(NAME bench.plan_smoke COMMAND plan_bench --quick)

# bench/launch_bench.sh (run by hand) with 2 runs of each command: it runs to the end, with every
# launcher working (no timing is checked); skipped (77) unless root.
add_test(NAME bench.launch_smoke
         COMMAND ${PROJECT_SOURCE_DIR}/bench/launch_bench.sh --quick --ddlrun $<TARGET_FILE:ddlrun>)
set_tests_properties(bench.launch_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# bench/launch_compare.sh once, small (2 namespace hosts, no .bashrc sleep), so it keeps working.
add_test(NAME bench.launch_compare_smoke
         COMMAND ${PROJECT_SOURCE_DIR}/bench/launch_compare.sh -n 1 --hosts 2 --sleep 0
                 --ddlrun $<TARGET_FILE:ddlrun>)
set_tests_properties(bench.launch_compare_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# bench/netns_scale.sh once, small (4 hosts), so it keeps working; bench/netns_scale.sh with
# its defaults times 32, 128 and 256 hosts.
add_test(NAME bench.netns_scale_smoke COMMAND ${PROJECT_SOURCE_DIR}/bench/netns_scale.sh --hosts 4)
set_tests_properties(bench.netns_scale_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# bench/netns_scale.sh --launch once, small (4 and 8 hosts, fan-out 2, one
# run each), so that its columns (ddlrun flat and tree, mpirun, RSS, threads) and its fitted
# model keep working; the lead times 32, 64 and 128 hosts on a quiet machine.
add_test(NAME bench.netns_scale_launch_smoke
         COMMAND ${PROJECT_SOURCE_DIR}/bench/netns_scale.sh --launch --hosts "4 8" --width 2 -n 1
                 --ddlrun $<TARGET_FILE:ddlrun>)
set_tests_properties(bench.netns_scale_launch_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# bench/test_cpu.py (each test's share of a core, measured alone in a cgroup: the evidence for the
# `waits` label) on a CTest folder the test writes: CPU time counted, a sleeper flagged, ENVIRONMENT
# passed, a leftover process named and killed. Skipped (77) where no cgroup can be made.
add_test(NAME bench.test_cpu
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench/test_cpu_test.sh ${CMAKE_SOURCE_DIR}/bench/test_cpu.py)
set_tests_properties(bench.test_cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
