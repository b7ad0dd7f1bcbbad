# The installed layout of a wheel (`pip install .`: scikit-build-core sets SKBUILD and installs
# into the wheel's site-packages as the prefix). What lands where in the environment pip installs
# into (a venv: V):
#   V/bin/ddlrun                          the scripts tree (SKBUILD_SCRIPTS_DIR)
#   V/lib/python3.X/site-packages/ddl/    the package: _ddl, _torch_pg, _horovod/, _site/, and
#       lib/libddl.so*, lib/pkgconfig/, lib/cmake/ddl/, include/ddl/   (libddl for C and C++)
#   V/share/man/man1/ddlrun.1 ...         the data tree (SKBUILD_DATA_DIR)
# Every file finds the others relative to itself ($ORIGIN): ddlrun its libddl and its package
# through DDL_WHEEL_BIN_TO_SITE, the path from the scripts directory to site-packages that the
# target interpreter's sysconfig gives (../lib/python3.X/site-packages in a venv), so nothing
# needs PYTHONPATH or LD_LIBRARY_PATH. Outside a wheel build this file changes nothing.
if(NOT SKBUILD)
  set(DDL_WHEEL OFF)
  return()
endif()
set(DDL_WHEEL ON)
include(${PROJECT_SOURCE_DIR}/cmake/python_query.cmake)
ddl_python_query(DDL_WHEEL_BIN_TO_SITE [=[
import os, sysconfig
print(os.path.relpath(sysconfig.get_path('platlib'), sysconfig.get_path('scripts')))]=])
if(NOT DDL_WHEEL_BIN_TO_SITE)
  message(FATAL_ERROR "ddlrun: ${Python3_EXECUTABLE} does not say where its scripts and "
                      "site-packages are (sysconfig); build the wheel with another Python")
endif()
set(CMAKE_INSTALL_BINDIR "${SKBUILD_SCRIPTS_DIR}")
set(CMAKE_INSTALL_LIBDIR ddl/lib)
set(CMAKE_INSTALL_INCLUDEDIR ddl/include)
set(CMAKE_INSTALL_MANDIR "${SKBUILD_DATA_DIR}/share/man")
message(STATUS "ddlrun: wheel for ${Python3_EXECUTABLE}: ddlrun finds its package in "
               "${DDL_WHEEL_BIN_TO_SITE}")
