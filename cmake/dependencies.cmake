# ddl_find_dependencies(): finds every system library the build needs, each from its Debian
# package (scripts/setup installs them all), and stops with ONE error naming every one missing
# and the apt-get line that installs them, instead of one error per configure.
#
# How it works: each dependency is looked for QUIET (find_package in CONFIG mode, pkg-config for
# hwloc and PMIx, which ship only a .pc file); a missing one adds "what it is (debian-package)"
# to a list, and at the end ddl_missing_message() turns the list into the error. A macro, not a
# function, so the variables and imported targets the finds define stay visible to the caller.
# MPI is needed only by the benchmarks and tests (DDL_BUILD_TESTS); pybind11 and the Python
# headers only by a wheel build (SKBUILD: `pip install .`), which is nothing without the package.

# ddl_missing_message(OUT MISSING): the error text for MISSING, a list of "name|debian-package":
# one line per library, then the apt-get line (lines CMake prints as they are, unwrapped).
function(ddl_missing_message out missing)
  set(lines "")
  set(packages "")
  foreach(entry IN LISTS missing)
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 0 name)
    list(GET entry 1 package)
    string(APPEND lines "\n  ${name} (${package})")
    list(APPEND packages ${package})
  endforeach()
  list(REMOVE_DUPLICATES packages)
  list(JOIN packages " " packages)
  list(LENGTH missing count)
  if(count EQUAL 1)
    set(what "a system library is missing")
  else()
    set(what "${count} system libraries are missing")
  endif()
  set(${out} "ddlrun: ${what}:${lines}\nInstall them (Debian, Ubuntu) and configure again:\n\
  sudo apt-get install ${packages}\nor run scripts/setup, which installs every package the \
build needs." PARENT_SCOPE)
endfunction()

macro(ddl_find_dependencies)
  set(ddl_missing "")
  foreach(ddl_dep IN ITEMS "CLI11;2.1;libcli11-dev" "spdlog;1.10;libspdlog-dev"
                           "yaml-cpp;0.7;libyaml-cpp-dev" "libssh;0.10;libssh-dev")
    list(GET ddl_dep 0 ddl_dep_name)
    list(GET ddl_dep 1 ddl_dep_version)
    list(GET ddl_dep 2 ddl_dep_package)
    find_package(${ddl_dep_name} ${ddl_dep_version} QUIET CONFIG)
    if(NOT ${ddl_dep_name}_FOUND)
      list(APPEND ddl_missing "${ddl_dep_name} >= ${ddl_dep_version}|${ddl_dep_package}")
    endif()
  endforeach()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.9)
    pkg_check_modules(PMIX QUIET IMPORTED_TARGET pmix>=4.2)
    if(NOT HWLOC_FOUND)
      list(APPEND ddl_missing "hwloc >= 2.9|libhwloc-dev")
    endif()
    if(NOT PMIX_FOUND)
      list(APPEND ddl_missing "PMIx >= 4.2|libpmix-dev")
    endif()
  else()
    list(APPEND ddl_missing "pkg-config (to find hwloc and PMIx)|pkg-config")
  endif()
  if(DDL_BUILD_TESTS)
    find_package(MPI QUIET COMPONENTS C)
    if(NOT MPI_C_FOUND)
      list(APPEND ddl_missing "MPI for C (benchmarks, tests)|libopenmpi-dev")
    endif()
  endif()
  if(SKBUILD)
    find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
    if(NOT Python3_FOUND)
      list(APPEND ddl_missing "the C headers of ${Python3_EXECUTABLE}|python3-dev")
    endif()
    find_package(pybind11 QUIET CONFIG)
    if(NOT pybind11_FOUND)
      list(APPEND ddl_missing "pybind11|pybind11-dev")
    endif()
  endif()
  find_package(Threads REQUIRED)
  if(ddl_missing)
    ddl_missing_message(ddl_missing_text "${ddl_missing}")
    message(FATAL_ERROR "${ddl_missing_text}")
  endif()
endmacro()
