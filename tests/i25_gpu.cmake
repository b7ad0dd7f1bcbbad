# Issue 25, item 5 (the GPU path, prepared for a lent device). bench/gpu_check.sh in its no-GPU
# mode from the build tree (tests/bench_gpu/nogpu_test.sh): the CPU-side steps and the reasons
# for each skipped GPU step, so the script a GPU session runs stays working.
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
