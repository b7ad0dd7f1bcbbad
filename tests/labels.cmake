# Labels for `ctest -L`. Every test carries its component (the first word of its name:
# `ctest -L launcher`) and those of these rules its name matches:
#   unit    the GoogleTest executables (given where they are discovered) and the static checks:
#           no job, no host, no network; `ctest -L unit` takes about a minute
#   netns   namespace hosts with their own sshd (root; elsewhere they skip, 77)
#   python  the Python package in jobs: numpy, torch, TensorFlow, Horovod's API, pip and venvs
#   gpu     the GPU path, on a device or its test doubles
#   slow    over 30 s on a 2-core machine (`ctest -LE slow` leaves them out)
set(ddl_label_rules
  unit   "^(man|house|format)\\.|^mapper\\.probe_(live|xml|bad_xml)$|^lsf\\.(golden_dry_run|jsrun_double)$"
  netns  "netns|^chaos\\.sample_(ssh|tree)$|^bench\\.(predict_check|launch_smoke|launch_compare)"
  python "^python\\.|^pip\\.|^bench\\.(hvd|keras|ddp|torch)"
  gpu    "gpu"
  slow   "^pip\\.(venv_current|fresh_venv)$|^bench\\.(hvd_smoke|keras_smoke|allreduce_smoke)$|^python\\.(hvd_tf_3|hvd_train_4|hvd_benchmark_4|torch2_hvd_api_4|torch2_hvd_negotiated_2|keras_horovod_2|keras2_horovod_2|train_netns_3x2)$|^fuzz\\.smoke$|^netns\\.(tree_64x4|many_hosts_64|slow_reader|slow_parent)$|^chaos\\.|^pernode\\.netns_3x2$|^ddlrun\\.restart_netns_3x2$|^launcher\\.(launch_ssh_netns|liveness_netns)$")

# The labels of `test`: what it has, its component, and each rule's that its name matches.
function(ddl_labels_of test out)
  get_test_property(${test} LABELS labels)
  if(NOT labels)
    set(labels "")
  endif()
  string(REGEX REPLACE "\\..*" "" component ${test})
  list(APPEND labels ${component})
  set(rules ${ddl_label_rules})
  while(rules)
    list(POP_FRONT rules label regex)
    if(test MATCHES "${regex}")
      list(APPEND labels ${label})
    endif()
  endwhile()
  list(REMOVE_DUPLICATES labels)
  set(${out} "${labels}" PARENT_SCOPE)
endfunction()

# Labels every test registered in the calling directory (the end of each tests/ CMakeLists).
function(ddl_label_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test ${tests})
    ddl_labels_of(${test} labels)
    set_tests_properties(${test} PROPERTIES LABELS "${labels}")
  endforeach()
endfunction()
