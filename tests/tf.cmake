# TensorFlow 2 / Keras 3 on ddl (python/tensorflow, ddl.tensorflow, ddl.keras,
# horovod.tensorflow[.keras]), as 2-rank jobs: the ops (values, dtypes, tf.function, gradients,
# exact errors), IBM's tf.keras recipe and a Keras 3 script on Horovod's API, each checked
# against one process trained on the combined batches. They need a ddlrun whose package has the
# TensorFlow ops: this build's when its Python has tensorflow, else the venv's (DDL_VENV, made by
# scripts/setup); skipped (77) without either.
set(ddl_tf_ddlrun "")
set(ddl_tf_python "")
if(TARGET ddl_tf_ops)
  set(ddl_tf_ddlrun $<TARGET_FILE:ddlrun>)
  set(ddl_tf_python ${Python3_EXECUTABLE})
elseif(DDL_VENV)
  set(ddl_tf_ddlrun ${DDL_VENV}/bin/ddlrun)
  set(ddl_tf_python ${DDL_VENV}/bin/python)
endif()
set(tf_job ${CMAKE_CURRENT_SOURCE_DIR}/python/tf_job.sh "${ddl_tf_ddlrun}" "${ddl_tf_python}" 2)
add_test(NAME python.tf_ops_2 COMMAND ${tf_job} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_tf_ops.py)
add_test(NAME python.tf_keras_ibm_2
         COMMAND ${tf_job} ${PROJECT_SOURCE_DIR}/examples/tf_keras_mnist_synthetic.py --epochs 2
                 --steps 4 --check)
add_test(NAME python.keras_horovod_2
         COMMAND ${tf_job} ${PROJECT_SOURCE_DIR}/examples/keras_horovod_synthetic.py --epochs 2
                 --steps 4 --check)
set_tests_properties(python.tf_ops_2 python.tf_keras_ibm_2 python.keras_horovod_2 PROPERTIES
                     SKIP_RETURN_CODE 77 TIMEOUT 180)
