# Issue 14 (reliability), libddl's part: mismatched collectives fail on every rank with
# DDL_ERR_MISMATCH instead of corrupting (C jobs through both local bootstraps, and Python).
add_executable(ddl_mismatch comm_mp/mismatch.c)
target_link_libraries(ddl_mismatch PRIVATE ddl)
add_test(NAME comm.mismatch_count_local_4
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_mismatch.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_mismatch> 4 count --launcher local)
add_test(NAME comm.mismatch_type_pmix_3
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_mp/check_mismatch.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_mismatch> 3 type --launcher pmix)
set_tests_properties(comm.mismatch_count_local_4 comm.mismatch_type_pmix_3 PROPERTIES TIMEOUT 90)
if(TARGET ddl_python)
  add_test(NAME python.mismatch_numpy_4
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/run_job.sh $<TARGET_FILE:ddlrun>
                   ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE} 4
                   ${CMAKE_CURRENT_SOURCE_DIR}/python/check_mismatch.py numpy-count)
  set_tests_properties(python.mismatch_numpy_4 PROPERTIES TIMEOUT 120)
endif()
if(TARGET ddl_torch_pg)
  foreach(what count dtype)
    add_test(NAME python.mismatch_torch_${what}_4
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/run_job.sh --torch $<TARGET_FILE:ddlrun>
                     ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE} 4
                     ${CMAKE_CURRENT_SOURCE_DIR}/python/check_mismatch.py torch-${what})
    set_tests_properties(python.mismatch_torch_${what}_4 PROPERTIES SKIP_RETURN_CODE 77
                         TIMEOUT 120)
  endforeach()
endif()

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

# Ctrl-C (SIGINT to ddlrun) of 4 Python ranks in an allreduce loop: status 130, at most one line
# per rank, each ending by itself, no traceback or interpreter dump (numpy through `import ddl`,
# on ddl's worker thread, and the torch backend).
if(TARGET ddl_python)
  foreach(what numpy worker torch)
    add_test(NAME python.sigint_${what}_4
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/check_sigint.sh $<TARGET_FILE:ddlrun>
                     ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE} ${what})
    set_tests_properties(python.sigint_${what}_4 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endif()
# The same with the venv's ddlrun and torch 2.x, whose process groups (and excepthook, which
# holds stderr in a buffer) kept the interrupted ranks alive until ddlrun's SIGKILL.
ddl_venv_test(NAME python.sigint_torch2_4 TIMEOUT 120 LABELS python
              COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/check_sigint.sh ${DDL_VENV}/bin/ddlrun
                      ${CMAKE_CURRENT_BINARY_DIR} ${DDL_VENV}/bin/python torch)
