# Driver of the consumer.install_and_use test (cmake -P): install, build the consumer, run it.
cmake_minimum_required(VERSION 3.25)

foreach(required BUILD_DIR PREFIX CONSUMER_SOURCE_DIR CONSUMER_BINARY_DIR GENERATOR CXX_COMPILER)
  if(NOT ${required})
    message(FATAL_ERROR "install_and_use.cmake: -D${required}=... is required")
  endif()
endforeach()

function(run_step description)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${description} failed (${code}):\n${out}\n${err}")
  endif()
  message(STATUS "${description}: ok")
endfunction()

file(REMOVE_RECURSE "${PREFIX}" "${CONSUMER_BINARY_DIR}")

set(install_command "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}")
if(BUILD_CONFIG)
  list(APPEND install_command --config "${BUILD_CONFIG}")
endif()
run_step("cmake --install" ${install_command})

# Only the scratch prefix may provide the package: no package registries, no other prefixes.
set(configure_command "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${CONSUMER_BINARY_DIR}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_command "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CUDA_ROOT)
  list(APPEND configure_command "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
run_step("configure the consumer" ${configure_command})

file(STRINGS "${CONSUMER_BINARY_DIR}/CMakeCache.txt" found_dir REGEX "^bsgemm_DIR:")
string(REGEX REPLACE "^bsgemm_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${PREFIX}" real_prefix)
file(REAL_PATH "${found_dir}" real_found_dir)
string(FIND "${real_found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "find_package(bsgemm) found '${found_dir}', not the installed package under ${PREFIX}")
endif()

run_step("build the consumer" "${CMAKE_COMMAND}" --build "${CONSUMER_BINARY_DIR}")
execute_process(COMMAND "${CONSUMER_BINARY_DIR}/bsgemm_consumer" RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "bsgemm_consumer: ${out}${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "bsgemm_consumer exited with ${code}")
endif()
