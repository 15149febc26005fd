# `cmake --install` of kleaf into a temp prefix, then examples/ configured and built as a project
# of its own against it (find_package(kleaf)), and the installed example run (--help-like: no
# arguments prints usage and exits 1). Fails on the first step that fails.
string(RANDOM LENGTH 8 nonce)
set(prefix "${BUILD_DIR}/install-test-${nonce}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    file(REMOVE_RECURSE "${prefix}")
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}/usr")
foreach(f include/kleaf/batch_consumer.h include/kleaf/http_client.h include/kleaf/batch.h
          include/kleaf/client_error.h)
  if(NOT EXISTS "${prefix}/usr/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
# The public headers must stand alone: no librdkafka, Beast or kleaf internals.
file(GLOB headers "${prefix}/usr/include/kleaf/*.h")
foreach(h ${headers})
  file(STRINGS "${h}" bad REGEX "#include [<\"](librdkafka|boost|base/|kafka/|nlohmann)")
  if(bad)
    message(FATAL_ERROR "${h} includes a private dependency: ${bad}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${EXAMPLES_DIR}" -B "${prefix}/build" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix}/usr)
run(${CMAKE_COMMAND} --build "${prefix}/build")
execute_process(COMMAND "${prefix}/build/http_client_example" "127.0.0.1:1" "t" "1"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
file(REMOVE_RECURSE "${prefix}")
# Exit 2: it ran (linked against the installed library) and reported the refused connection.
if(NOT rc EQUAL 2 OR NOT err MATCHES "no gateway answered")
  message(FATAL_ERROR "installed http_client_example: exit ${rc}\n${out}\n${err}")
endif()
