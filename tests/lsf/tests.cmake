# LSF and jsrun (tests/lsf): jsrun cannot exist here, so tests/lsf/bin/jsrun is a test double
# that checks ERFs and resource-set flags strictly and runs the ranks on this machine, inside
# simulated LSF jobs (tests/lsf/lsf_env.sh). Dry runs of Summit plans against
# tests/golden/lsf (check_dry_run.sh --update rewrites them), the ERF of real launches checked
# by the double, and a real libddl job through ddlrun -> jsrun double -> ranks.
ddl_component_tests(lsf ddl_lsf ddl_mapper)
add_test(NAME lsf.golden_dry_run
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lsf/check_dry_run.sh $<TARGET_FILE:ddlrun>
                 ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME lsf.launch_checked
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lsf/check_launch.sh $<TARGET_FILE:ddlrun>
                 ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME lsf.jsrun_double COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lsf/check_double.sh
                                       ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME lsf.job_ddl_check
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lsf/run_job.sh $<TARGET_FILE:ddlrun>
                 $<TARGET_FILE:ddl_check> ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(lsf.job_ddl_check PROPERTIES TIMEOUT 180)
add_test(NAME lsf.examples
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lsf/check_examples.sh $<TARGET_FILE:ddlrun>
                 ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/lsf/examples
                 $<$<TARGET_EXISTS:ddl_python>:${PROJECT_BINARY_DIR}/python>)
set_tests_properties(lsf.examples PROPERTIES TIMEOUT 300)
