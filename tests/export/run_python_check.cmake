# Runs numpy_forward_check.py with PYTHON; fails (never skips) with the fix when the interpreter
# or its packages are missing.
if(NOT EXISTS "${PYTHON}")
  message(FATAL_ERROR "${PYTHON} does not exist: run scripts/setup.sh (it creates build/pyenv "
                      "with numpy and safetensors), or configure with -DPIPETRAIN_TEST_PYTHON=...")
endif()
execute_process(COMMAND "${PYTHON}" -c "import numpy, safetensors.numpy" RESULT_VARIABLE missing)
if(missing)
  message(FATAL_ERROR "${PYTHON} lacks numpy or safetensors: run scripts/setup.sh")
endif()
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" --fixture "${FIXTURE}" --dir "${DIR}"
                RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "numpy_forward_check.py failed (${failed})")
endif()
