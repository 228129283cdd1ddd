# ctest driver: install the build tree to a prefix, then configure, build and
# run two consumers against it with find_package(posenc): one of every layer
# (posenc::posenc, tests/install/CMakeLists.txt) and one of the core layer
# alone (posenc::core, tests/install/core).
find_program(NINJA NAMES ninja ninja-build REQUIRED)
# A fresh prefix: nothing left from an earlier install (the one libposenc.a
# before the layers) can stand in for what this one installs.
file(REMOVE_RECURSE ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "install failed\n${out}\n${err}")
endif()
foreach(consumer "consumer;." "core_consumer;core")
  list(GET consumer 0 program)
  list(GET consumer 1 folder)
  set(build ${WORK_DIR}/build_${program})
  # The core project also links all of core, and all of engine, into
  # whole_core and whole_engine (tests/install/core/CMakeLists.txt).
  foreach(step
      "${CMAKE_COMMAND};-S;${SOURCE_DIR}/${folder};-B;${build};-G;Ninja;-DCMAKE_MAKE_PROGRAM=${NINJA};-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
      "${CMAKE_COMMAND};--build;${build}"
      "${build}/${program}")
    execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "step failed: ${step}\n${out}\n${err}")
    endif()
  endforeach()
  message(STATUS "${out}")
endforeach()

# The core consumer links the core library and no other posenc layer: the
# link command, the last of those that build it.
execute_process(COMMAND ${NINJA} -C ${WORK_DIR}/build_core_consumer -t commands core_consumer
                OUTPUT_VARIABLE commands RESULT_VARIABLE result)
string(REGEX MATCH "[^\n]*-o core_consumer[^\n]*" link "${commands}")
if(NOT result EQUAL 0 OR NOT link)
  message(FATAL_ERROR "no link command for core_consumer in:\n${commands}")
endif()
message(STATUS "core_consumer link: ${link}")
if(NOT link MATCHES "libposenc_core\\.a" OR link MATCHES "libposenc_(engine|lab)\\.a")
  message(FATAL_ERROR "core_consumer should link libposenc_core.a and no other posenc library: ${link}")
endif()

# The exported link interface names only what a consumer links: a private
# $<BUILD_INTERFACE:...> link item of the static library would be exported
# as an empty $<LINK_ONLY:> entry.
file(GLOB_RECURSE targets_files "${WORK_DIR}/prefix/*/posencTargets.cmake")
if(NOT targets_files)
  message(FATAL_ERROR "no posencTargets.cmake under ${WORK_DIR}/prefix")
endif()
foreach(file ${targets_files})
  file(READ "${file}" exported)
  string(FIND "${exported}" "$<LINK_ONLY:>" empty_entry)
  if(NOT empty_entry EQUAL -1)
    message(FATAL_ERROR "${file} exports an empty $<LINK_ONLY:> link entry")
  endif()
endforeach()
