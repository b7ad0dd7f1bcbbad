# ddlrun's own PMIx server (launcher/pmix_server): a PMIx client and an Open MPI program started
# without mpirun, on this host and across three namespace hosts (skipped, 77, unless root);
# PMIx_Abort, and a fence that one rank never enters.
add_executable(pmix_client pmix/pmix_client.c)
target_link_libraries(pmix_client PRIVATE PkgConfig::PMIX)
find_program(DDL_MPICC NAMES mpicc)
set(pmix_mpi_program "")
if(DDL_MPICC)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/mpi_allreduce
                     COMMAND ${DDL_MPICC} -O1 -o ${CMAKE_CURRENT_BINARY_DIR}/mpi_allreduce
                             ${CMAKE_CURRENT_SOURCE_DIR}/pmix/mpi_allreduce.c
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/pmix/mpi_allreduce.c)
  add_custom_target(pmix_mpi_allreduce ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/mpi_allreduce)
  set(pmix_mpi_program ${CMAKE_CURRENT_BINARY_DIR}/mpi_allreduce)
endif()
add_test(NAME pmix.jobs_local
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pmix/pmix_jobs.sh local $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:pmix_client> ${pmix_mpi_program})
set_tests_properties(pmix.jobs_local PROPERTIES TIMEOUT 180)
add_test(NAME pmix.jobs_netns_3x2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pmix/pmix_jobs.sh netns $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:pmix_client> ${pmix_mpi_program})
set_tests_properties(pmix.jobs_netns_3x2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
