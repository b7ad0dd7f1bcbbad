# Fails when a file of one of our folders includes another folder's header against the arrows
# declared in arrows.cmake. Run by the build (target check_includes) and by its test:
#   cmake -DSOURCE_DIR=<tree> [-DARROWS=<arrows.cmake>] [-DSTAMP=<file>] -P check_includes.cmake
#
# How it works: for each folder in DDL_COMPONENTS, every .h/.cc/.c below it is read for lines
# `#include "X/..."`; when X is another of our folders, X must be in the folder's DDL_USES list
# and the path one of X's DDL_OFFERS headers. Each violation is printed as
# "FILE:LINE: includes HEADER: ..." naming both folders and the fix; any violation fails.

cmake_minimum_required(VERSION 3.25)

if(NOT ARROWS)
  set(ARROWS "${CMAKE_CURRENT_LIST_DIR}/arrows.cmake")
endif()
include("${ARROWS}")

function(ddl_line_of file header out)
  file(STRINGS "${file}" lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(FIND "${line}" "\"${header}\"" at)
    if(at GREATER -1)
      set(${out} ${n} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} 0 PARENT_SCOPE)
endfunction()

# Sets `problem` to why `folder` may not include `header` (of folder `target`), or "".
function(ddl_arrow_problem folder target header problem)
  set(${problem} "" PARENT_SCOPE)
  if(NOT target IN_LIST DDL_USES_${folder})
    string(JOIN "/, " allowed ${DDL_USES_${folder}})
    if(allowed)
      set(allowed "${allowed}/")
    else()
      set(allowed "none of our folders")
    endif()
    set(${problem} "${folder}/ may not include ${target}/ (${folder}/ may include ${allowed}; the arrows are declared in cmake/arrows.cmake)" PARENT_SCOPE)
  elseif(NOT header IN_LIST DDL_OFFERS_${target} AND NOT "${target}/*" IN_LIST DDL_OFFERS_${target})
    string(JOIN ", " offered ${DDL_OFFERS_${target}})
    set(${problem} "${header} is private to ${target}/ (other folders include ${offered}; declared in cmake/arrows.cmake)" PARENT_SCOPE)
  endif()
endfunction()

set(failures 0)
foreach(folder IN LISTS DDL_COMPONENTS)
  file(GLOB_RECURSE files "${SOURCE_DIR}/${folder}/*.h" "${SOURCE_DIR}/${folder}/*.cc"
       "${SOURCE_DIR}/${folder}/*.c")
  foreach(file IN LISTS files)
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_0-9]+/")
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${include}")
      string(REGEX REPLACE "/.*" "" target "${header}")
      if(target STREQUAL folder OR NOT target IN_LIST DDL_COMPONENTS)
        continue()
      endif()
      ddl_arrow_problem(${folder} ${target} ${header} problem)
      if(problem)
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${file}")
        ddl_line_of("${file}" "${header}" line)
        message("${rel}:${line}: includes ${header}: ${problem}")
        math(EXPR failures "${failures} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} include(s) against the folders' arrows")
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
