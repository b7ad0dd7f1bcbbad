# TensorFlow 2 / Keras 3 on ddl (python/tensorflow, ddl.tensorflow, ddl.keras,
# horovod.tensorflow[.keras]), as 2-rank jobs: the ops (values, dtypes, tf.function, gradients,
# exact errors), IBM's tf.keras recipe and a Keras 3 script on Horovod's API, each checked
# against one process trained on the combined batches. They need a ddlrun whose package has the
# TensorFlow ops: this build's when its Python has tensorflow (-DPython3_EXECUTABLE=...), else
# the venv's (DDL_VENV, made by scripts/setup: through ddl_venv_test of tests/venv.cmake when
# that is defined); skipped (77) without either.
set(ddl_tf_job ${CMAKE_CURRENT_SOURCE_DIR}/python/tf_job.sh)
function(ddl_tf_test name)
  if(TARGET ddl_tf_ops)
    add_test(NAME ${name} COMMAND ${ddl_tf_job} $<TARGET_FILE:ddlrun> ${Python3_EXECUTABLE} 2
                                  ${ARGN})
  elseif(COMMAND ddl_venv_test)
    ddl_venv_test(NAME ${name} TIMEOUT 180 LABELS python
                  COMMAND ${ddl_tf_job} ${DDL_VENV}/bin/ddlrun ${DDL_VENV}/bin/python 2 ${ARGN})
    return()
  elseif(DDL_VENV)
    add_test(NAME ${name} COMMAND ${ddl_tf_job} ${DDL_VENV}/bin/ddlrun ${DDL_VENV}/bin/python 2
                                  ${ARGN})
  else()
    add_test(NAME ${name} COMMAND ${ddl_tf_job} "" "" 2 ${ARGN})
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS python)
endfunction()
ddl_tf_test(python.tf_ops_2 ${CMAKE_CURRENT_SOURCE_DIR}/python/check_tf_ops.py)
ddl_tf_test(python.tf_keras_ibm_2 ${PROJECT_SOURCE_DIR}/examples/tf_keras_mnist_synthetic.py
            --epochs 2 --steps 4 --check)
ddl_tf_test(python.keras_horovod_2 ${PROJECT_SOURCE_DIR}/examples/keras_horovod_synthetic.py
            --epochs 2 --steps 4 --check)
