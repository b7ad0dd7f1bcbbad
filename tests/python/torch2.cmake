# The torch backend "ddl" as torch 2.x users call it (tests/python/check_torch2.py): on torch
# 2.x, run with the ddlrun and python of a torch 2.x build, and on this build's torch (Debian's
# 1.13) where it has the features. Each job: init_process_group(backend="ddl") with nothing else.
#   collectives  every ReduceOp (AVG) and the refused ones' errors, the *_tensor and the other
#                collectives, object collectives, new_group, barrier, monitored_barrier;
#   train        DDP (bucket views, static_graph, comm hooks), ZeroRedundancyOptimizer, FSDP2
#                (torch 2.x) against one process's weights;
#   features     what torch's own distributed suite asks (bench/torch_dist_suite.sh): the name
#                ddl, sequence numbers, sparse all_reduce and DDP on a sparse embedding,
#                all_gather_coalesced, TORCH_DISTRIBUTED_DEBUG=DETAIL (torch 2.x);
#   timeouts     a group's own timeout (new_group(timeout=) once libddl runs): "Timed out";
#   messages     recv and irecv from any source (torch's test_send_recv_any_source), tags, a
#                subgroup's;
#   split        (torch 2.x, 4 ranks) split_group's path (supports_splitting, the backend's
#                options, ProcessGroup.split_group) and a 2-D DeviceMesh on the CPU;
#   torchrun     the ranks meet through torch's store under torchrun (no ddlrun).
# DDL_TORCH2_DDLRUN and DDL_TORCH2_PYTHON name the torch 2.x build's ddlrun and python: those of
# the venv DDL_VENV (pip install) by default; for a build tree configured with
# -DPython3_EXECUTABLE=/opt/ddl-venv/bin/python, its ddlrun/ddlrun, with DDL_TORCH2_PYDIR its
# python/ directory (the package for torchrun's workers; empty: the venv's own). Without them
# the torch 2.x jobs skip (77).
if(DEFINED DDL_VENV AND NOT DDL_VENV STREQUAL "")
  set(ddl_torch2_ddlrun_default ${DDL_VENV}/bin/ddlrun)
  set(ddl_torch2_python_default ${DDL_VENV}/bin/python)
else()
  set(ddl_torch2_ddlrun_default "")
  set(ddl_torch2_python_default "")
endif()
set(DDL_TORCH2_DDLRUN "${ddl_torch2_ddlrun_default}" CACHE FILEPATH
    "The ddlrun of a torch 2.x build (tests python.torch2_*)")
set(DDL_TORCH2_PYTHON "${ddl_torch2_python_default}" CACHE FILEPATH
    "The python with torch 2.x that DDL_TORCH2_DDLRUN's package is built for")
set(DDL_TORCH2_PYDIR "" CACHE PATH
    "DDL_TORCH2_DDLRUN's python/ build directory, for torchrun's workers (empty: installed)")
set(ddl_torch2_job ${CMAKE_CURRENT_SOURCE_DIR}/python/torch2_job.sh)
set(ddl_torch2_check ${CMAKE_CURRENT_SOURCE_DIR}/python/check_torch2.py)
set(ddl_torch2_pydir "${DDL_TORCH2_PYDIR}")
if(ddl_torch2_pydir STREQUAL "")
  set(ddl_torch2_pydir -)
endif()
# ddl_torch2_test(NAME LAUNCHER WHERE RANKS SCRIPT [ARGS...]): torch2_job.sh runs SCRIPT on RANKS
# ranks of the torch 2.x Python through LAUNCHER (ddlrun, with its path WHERE; or torchrun, with
# the package's build directory WHERE); skipped (77) without that Python.
function(ddl_torch2_test name launcher where ranks)
  add_test(NAME ${name}
           COMMAND ${ddl_torch2_job} ${launcher} "${where}" "${DDL_TORCH2_PYTHON}" ${ranks} ${ARGN})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Run from the venv: after pip.venv_current has brought its package up to date.
  if(DDL_TORCH2_DDLRUN STREQUAL "${DDL_VENV}/bin/ddlrun")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ddl_venv LABELS "venv;python")
  endif()
endfunction()

foreach(mode IN ITEMS collectives train features timeouts messages)
  ddl_torch2_test(python.torch2_${mode}_3 ddlrun "${DDL_TORCH2_DDLRUN}" 3 ${ddl_torch2_check} ${mode})
endforeach()
ddl_torch2_test(python.torch2_split_4 ddlrun "${DDL_TORCH2_DDLRUN}" 4 ${ddl_torch2_check} split)
ddl_torch2_test(python.torch2_torchrun_2 torchrun ${ddl_torch2_pydir} 2 ${ddl_torch2_check}
                torchrun)
# A rank that never calls init: named with its host, not torch's store's "1/2 clients joined".
ddl_torch2_test(python.torch2_missing_rank_2 ddlrun "${DDL_TORCH2_DDLRUN}" 2
                ${CMAKE_CURRENT_SOURCE_DIR}/python/check_torch_missing_rank.py)
# horovod.torch on torch 2.x: every call of the API with its errors.
ddl_torch2_test(python.torch2_hvd_api_4 ddlrun "${DDL_TORCH2_DDLRUN}" 4
                ${CMAKE_CURRENT_SOURCE_DIR}/python/check_hvd_api.py)

# The same checks on this build's torch (1.13: no FSDP2).
if(TARGET ddl_torch_pg)
  foreach(mode IN ITEMS collectives train features timeouts messages)
    add_test(NAME python.torch_${mode}_3
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python/run_job.sh --torch --plain
                     $<TARGET_FILE:ddlrun> - ${Python3_EXECUTABLE} 3 ${ddl_torch2_check} ${mode})
    set_tests_properties(python.torch_${mode}_3 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
  add_test(NAME python.torch_torchrun_2
           COMMAND ${ddl_torch2_job} torchrun ${PROJECT_BINARY_DIR}/python ${Python3_EXECUTABLE}
                   2 ${ddl_torch2_check} torchrun)
  set_tests_properties(python.torch_torchrun_2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# This build's package run by the torch 2.x Python (a torch it was not built against): the
# backend's error naming both torches, not a crash (skipped, 77, when the torches match).
if(TARGET ddl_torch_pg AND NOT DDL_TORCH2_PYTHON STREQUAL "")
  add_test(NAME python.torch_mismatch
           COMMAND ${DDL_TORCH2_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_torch_mismatch.py
                   ${PROJECT_BINARY_DIR}/python)
  set_tests_properties(python.torch_mismatch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
endif()
