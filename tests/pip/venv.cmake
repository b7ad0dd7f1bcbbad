# The venv of scripts/setup (DDL_VENV, build/venv): the PATH's Python 3.11 with torch 2.13.0,
# tensorflow-cpu and numpy, and this project installed by `pip install .` (pyproject.toml), so
# ${DDL_VENV}/bin/ddlrun and ${DDL_VENV}/bin/python are what a user of the wheel runs. A test
# that needs it is declared with
#   ddl_venv_test(NAME python.tf_keras_2 [TIMEOUT 300] [LABELS more]
#                 COMMAND ${DDL_VENV}/bin/ddlrun -H localhost:2 ${DDL_VENV}/bin/python x.py)
# It runs through tests/pip/in_venv.sh: skipped (77, with the reason) when the venv is absent,
# else with ${DDL_VENV}/bin first on PATH and no PYTHONPATH nor LD_LIBRARY_PATH. Label "venv".
# Every such test requires the fixture pip.venv_current, which first re-installs the project
# into the venv when its sources changed since (incremental: build/wheel/), so a test never runs
# an outdated package.
set(DDL_VENV "${PROJECT_BINARY_DIR}/venv" CACHE PATH
    "The venv of scripts/setup that the venv tests run (ddl_venv_test)")

add_test(NAME pip.venv_current
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/venv_current.sh ${DDL_VENV} ${PROJECT_SOURCE_DIR})
set_tests_properties(pip.venv_current PROPERTIES FIXTURES_SETUP ddl_venv SKIP_RETURN_CODE 77
                                                 TIMEOUT 600 LABELS "venv;pip")

function(ddl_venv_test)
  cmake_parse_arguments(arg "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  add_test(NAME ${arg_NAME}
           COMMAND ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/in_venv.sh ${DDL_VENV} ${arg_COMMAND})
  set_tests_properties(${arg_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${arg_TIMEOUT}
                       FIXTURES_REQUIRED ddl_venv LABELS "venv;${arg_LABELS}")
endfunction()
