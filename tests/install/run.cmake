# ctest driver: install the build tree to a prefix, then configure, build and
# run the consumer against it with find_package(posenc).
foreach(step
    "${CMAKE_COMMAND};--install;${BUILD_DIR};--prefix;${WORK_DIR}/prefix"
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${WORK_DIR}/build;-G;Ninja;-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/build"
    "${WORK_DIR}/build/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "step failed: ${step}\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "${out}")
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
