# libddl (comm/) in real jobs: every collective checked by each rank, through each bootstrap;
# the GPU path; mismatched calls and missing ranks named on every rank.

# libddl in real jobs: ddl_check (C, every collective checked by each rank) through ddlrun's
# local launcher (rendezvous bootstrap) and through mpirun (PMIx bootstrap).
add_executable(ddl_check comm_mp/ddl_check.c)
target_link_libraries(ddl_check PRIVATE ddl)
add_test(NAME comm.job_local_4
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check> 4 -H localhost:4 --no-probe)
add_test(NAME comm.job_local_multiring
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check> 6 -H localhost:6 --no-probe --mode p:2x3)
add_test(NAME comm.job_mpirun_3
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check> 3 --launcher mpirun -H localhost:3 --no-probe)
# The C++ layer (ddl.hpp): groups, alltoall and messages in a job of 5 local ranks.
add_executable(hpp_check comm_mp/hpp_check.cc)
target_link_libraries(hpp_check PRIVATE ddl)
add_test(NAME comm.hpp_job_local_5
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:hpp_check> 5 -H localhost:5 --no-probe)
set_tests_properties(comm.job_mpirun_3 PROPERTIES ENVIRONMENT
                     "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# 16 ranks that finalise right after init, through the rendezvous (local) and PMIx (pmix).
add_executable(init_finalize comm_mp/init_finalize.c)
target_link_libraries(init_finalize PRIVATE ddl)
foreach(launcher local pmix)
  add_test(NAME comm.init_finalize_16_${launcher}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh $<TARGET_FILE:ddlrun>
                   $<TARGET_FILE:init_finalize> 16 -H localhost:16 --no-probe
                   --launcher ${launcher})
  set_tests_properties(comm.init_finalize_16_${launcher} PROPERTIES TIMEOUT 120
                       ENVIRONMENT DDL_TIMEOUT=20)
endforeach()
# Across three namespace hosts (tests/netns/hosts.sh): ssh launcher with the flat and the 2x3
# rings, mpirun (PMIx), and a rank that dies mid-allreduce; skipped (77) when not root.
add_test(NAME comm.job_netns_3x2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/netns_check.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check>)
set_tests_properties(comm.job_netns_3x2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# libddl's NCCL path on real GPUs (every collective on device buffers, one rank per GPU):
# built when CUDA and NCCL are found, skipped (77) where there is no GPU, as in CI.
if(DDL_HAVE_NCCL)
  find_path(CUDA_RUNTIME_INCLUDE_DIR cuda_runtime_api.h HINTS ${DDL_CUDA_HOME}/include)
  add_executable(gpu_check comm_gpu/gpu_check.cc)
  target_include_directories(gpu_check SYSTEM PRIVATE ${CUDA_RUNTIME_INCLUDE_DIR})
  target_link_libraries(gpu_check PRIVATE ddl ${CUDART_LIBRARY})
  add_test(NAME comm.gpu_job
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_gpu/run_gpu.sh $<TARGET_FILE:ddlrun>
                   $<TARGET_FILE:gpu_check> ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh)
  set_tests_properties(comm.gpu_job PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Without a GPU: the same jobs against a fake libcudart.so.13 and libnccl.so.2 (a test
  # double, comm_gpu/fake_cuda_nccl.cc), so that libddl's real NCCL code runs in CI.
  set(fake_gpu_dir ${CMAKE_CURRENT_BINARY_DIR}/fake_gpu)
  foreach(lib cudart nccl)
    add_library(fake_${lib} SHARED comm_gpu/fake_cuda_nccl.cc)
    target_include_directories(fake_${lib} SYSTEM PRIVATE ${CUDA_RUNTIME_INCLUDE_DIR}
                                                          ${NCCL_INCLUDE_DIR})
    string(TOUPPER ${lib} upper)
    target_compile_definitions(fake_${lib} PRIVATE FAKE_${upper})
    set_target_properties(fake_${lib} PROPERTIES OUTPUT_NAME ${lib}
                          LIBRARY_OUTPUT_DIRECTORY ${fake_gpu_dir})
  endforeach()
  set_target_properties(fake_cudart PROPERTIES SUFFIX ".so.13")
  set_target_properties(fake_nccl PROPERTIES SUFFIX ".so.2")
  target_link_options(fake_cudart PRIVATE
                      -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/comm_gpu/fake_cudart.map)
  add_dependencies(gpu_check fake_cudart fake_nccl)
  add_test(NAME comm.gpu_job_fake
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_gpu/run_fake.sh $<TARGET_FILE:ddlrun>
                   $<TARGET_FILE:gpu_check> ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/run_check.sh
                   ${fake_gpu_dir})
  set_tests_properties(comm.gpu_job_fake PROPERTIES TIMEOUT 180)
endif()

add_executable(ddl_mismatch comm_mp/mismatch.c)
target_link_libraries(ddl_mismatch PRIVATE ddl)
add_test(NAME comm.mismatch_count_local_4
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_mismatch.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_mismatch> 4 count --launcher local)
add_test(NAME comm.mismatch_type_pmix_3
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_mismatch.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_mismatch> 3 type --launcher pmix)
set_tests_properties(comm.mismatch_count_local_4 comm.mismatch_type_pmix_3 PROPERTIES TIMEOUT 90)

# A rank that never calls ddl_init is named, with its host, by the others (PMIx: ddlrun's own
# server, through the local and pmix launchers; the rendezvous).
add_test(NAME comm.missing_rank_local_pmix
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_missing_rank.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:init_finalize> pmix --launcher local)
add_test(NAME comm.missing_rank_pmix
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_missing_rank.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:init_finalize> pmix --launcher pmix)
add_test(NAME comm.missing_rank_rendezvous
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_missing_rank.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:init_finalize> rendezvous --launcher local)
set_tests_properties(comm.missing_rank_local_pmix comm.missing_rank_pmix
                     comm.missing_rank_rendezvous PROPERTIES TIMEOUT 60)
