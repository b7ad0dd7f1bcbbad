# ddl_python_query(OUT CODE): runs CODE (Python source that prints one line) in the interpreter the
# package ddl is built for (Python3_EXECUTABLE) and sets OUT to what it printed, or to
# "OUT-NOTFOUND" when the code failed (a module it imports is missing).
#
# How it works: under `pip install .` the build runs in pip's isolated build environment, whose
# PYTHONPATH holds a sitecustomize that hides the target environment's site-packages, so a plain
# `import torch` there would miss the venv's torch. The interpreter itself is the target's
# (pip runs the build backend with its own sys.executable), so running it again without pip's
# PYTHONPATH and PYTHONNOUSERSITE sees exactly the packages the user installed beside ddl.
function(ddl_python_query out code)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
            ${Python3_EXECUTABLE} -c "${code}"
    OUTPUT_VARIABLE answer
    ERROR_VARIABLE error
    RESULT_VARIABLE status
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(status EQUAL 0)
    set(${out} "${answer}" PARENT_SCOPE)
  else()
    set(${out} "${out}-NOTFOUND" PARENT_SCOPE)
  endif()
endfunction()
