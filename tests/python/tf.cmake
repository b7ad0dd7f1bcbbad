# TensorFlow 2 / Keras 3 on ddl (python/ext/tensorflow, ddl.tensorflow, ddl.keras,
# horovod.tensorflow[.keras]), as 2-rank jobs: the ops (values, dtypes, tf.function, gradients,
# exact errors), IBM's tf.keras recipe and a Keras 3 script on Horovod's API, each checked
# against one process trained on the combined batches. They need a ddlrun whose package has the
# TensorFlow ops: this build's when its Python has tensorflow (-DPython3_EXECUTABLE=...), else
# the venv's (DDL_VENV, made by scripts/setup: through ddl_venv_test of tests/pip/venv.cmake when
# that is defined); skipped (77) without either. bench.keras_smoke runs bench/keras_compare.sh tiny.
# DDLRUN and PYTHON of the tests: this build's, the venv's, or none (the tests skip).
set(ddl_tf_ddlrun "")
set(ddl_tf_python "")
if(TARGET ddl_tf_ops)
  set(ddl_tf_ddlrun $<TARGET_FILE:ddlrun>)
  set(ddl_tf_python ${Python3_EXECUTABLE})
elseif(DDL_VENV)
  set(ddl_tf_ddlrun ${DDL_VENV}/bin/ddlrun)
  set(ddl_tf_python ${DDL_VENV}/bin/python)
endif()
function(ddl_tf_test name)
  if(NOT TARGET ddl_tf_ops AND COMMAND ddl_venv_test)
    ddl_venv_test(NAME ${name} TIMEOUT 180 LABELS python COMMAND ${ARGN})
  else()
    add_test(NAME ${name} COMMAND ${ARGN})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS python)
  endif()
endfunction()
set(tf_job ${CMAKE_CURRENT_SOURCE_DIR}/python/tf_job.sh "${ddl_tf_ddlrun}" "${ddl_tf_python}" 2)
ddl_tf_test(python.tf_ops_2 ${tf_job} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_tf_ops.py)
ddl_tf_test(python.tf_keras_ibm_2 ${tf_job}
            ${PROJECT_SOURCE_DIR}/examples/tf_keras_mnist_synthetic.py --epochs 2 --steps 4 --check)
ddl_tf_test(python.keras_horovod_2 ${tf_job}
            ${PROJECT_SOURCE_DIR}/examples/keras_horovod_synthetic.py --epochs 2 --steps 4 --check)
# The same script on Keras 2 (tf-keras under TF_USE_LEGACY_KERAS=1, a legacy optimizer).
ddl_tf_test(python.keras2_horovod_2 ${tf_job}
            ${PROJECT_SOURCE_DIR}/examples/keras_horovod_synthetic.py --epochs 2 --steps 4 --check
            --legacy-keras)
# Graph-mode TensorFlow pairs ops by name, never by the order an executor starts them; a call
# made differently fails on every rank and the job goes on (tests/python/check_tf_pairing.py).
set(tf_job3 ${CMAKE_CURRENT_SOURCE_DIR}/python/tf_job.sh "${ddl_tf_ddlrun}" "${ddl_tf_python}" 3)
ddl_tf_test(python.tf_pairing_2 ${tf_job} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_tf_pairing.py)
ddl_tf_test(python.tf_pairing_3 ${tf_job3} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_tf_pairing.py)
# bench/keras_compare.sh runs both modes (ddl and MultiWorkerMirroredStrategy), tiny.
ddl_tf_test(bench.keras_smoke ${PROJECT_SOURCE_DIR}/bench/keras_compare.sh
            --ddlrun "${ddl_tf_ddlrun}" --python "${ddl_tf_python}" --ranks 2 --hidden 32
            --layers 1 --batch 16 --warmup 2 --steps 3)
# horovod.tensorflow beyond the four basic calls: join with uneven data, reducescatter,
# grouped_allgather, broadcast_, *_op, broadcast_global_variables in a graph,
# SyncBatchNormalization, tf-keras backward_passes_per_step (tests/python/check_hvd_tf.py).
ddl_tf_test(python.hvd_tf_3 ${tf_job3} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_hvd_tf.py)
# IBM's recipe, `import ddl` alone: Keras 3 fit, a GradientTape loop and a tf.compat.v1
# optimizer train together, said once; IBM's op names (tests/python/check_import_ddl_tf.py);
# the same on tf-keras.
ddl_tf_test(python.import_ddl_tf_2 ${tf_job}
            ${CMAKE_CURRENT_SOURCE_DIR}/python/check_import_ddl_tf.py)
ddl_tf_test(python.import_ddl_tf_keras2_2 ${tf_job}
            ${CMAKE_CURRENT_SOURCE_DIR}/python/check_import_ddl_tf.py --tf-keras)
