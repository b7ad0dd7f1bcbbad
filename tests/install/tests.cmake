# `cmake --install` into a temporary prefix, then a C program (pkg-config) and a CMake project
# (find_package(ddl)) built against it, each run alone and as 2 ranks of the installed ddlrun.
add_test(NAME install.consumer
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR}
                 ${CMAKE_C_COMPILER})
set_tests_properties(install.consumer PROPERTIES TIMEOUT 300)
# One CMake error naming every missing system library and its Debian package.
add_test(NAME install.missing_libraries
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/missing_libraries.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(install.missing_libraries PROPERTIES TIMEOUT 120)
