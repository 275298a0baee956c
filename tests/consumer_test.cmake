# Installs the built project into WORK_DIR/prefix, builds examples/consumer against it with
# find_package(attn 0.2 CONFIG), and runs it on the seed notebook's config and weights.
file(REMOVE_RECURSE ${WORK_DIR})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${WORK_DIR}/build/consumer ${SOURCE_DIR}/configs/gqa.json ${SOURCE_DIR}/weights/gqa.safetensors)
message("${step_output}")
foreach(expected "prefill: kv cache shape: key: \\[1, 2, 7, 3\\], value: \\[1, 2, 7, 3\\]"
                 "decode: kv cache shape: key: \\[1, 2, 8, 3\\], value: \\[1, 2, 8, 3\\]")
  if(NOT step_output MATCHES "${expected}")
    message(FATAL_ERROR "the consumer printed an unexpected cache shape:\n${step_output}")
  endif()
endforeach()
