# Usage: cmake -DMODE=add_subdirectory|find_package -DMS_SOURCE_DIR=<ms>
#              -DCONSUMER_DIR=<consumer> -DWORK_DIR=<scratch>
#              [-DGENERATOR=...] [-DCXX_COMPILER=...] [-DC_COMPILER=...]
#              -P run.cmake
#
# add_subdirectory: configure, build and run the consumer with ms added as a
#                   subdirectory of it.
# find_package:     configure ms alone (tests, examples, tools, benchmarks off),
#                   install it into WORK_DIR/prefix, then configure, build and
#                   run the consumer with find_package(ms) against that prefix.
cmake_minimum_required(VERSION 3.20)

foreach(var MODE MS_SOURCE_DIR CONSUMER_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()

set(common_args)
if(GENERATOR)
  list(APPEND common_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND common_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
if(C_COMPILER)
  list(APPEND common_args -DCMAKE_C_COMPILER=${C_COMPILER})
endif()

# run(<what> <command...>): run a command, echo it, stop on failure.
function(run what)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "[packaging.${MODE}] ${what}: ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[packaging.${MODE}] ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# The consumer and ms::ms's kernel library are built at -O0: only whether they compile,
# link and give the right answer matters here (and the level units at -O0 are the
# hardest case for the instruction check below: nothing is inlined away).
set(consumer_args ${common_args}
    -DCMAKE_BUILD_TYPE=
    -DCMAKE_CXX_FLAGS=-O0
    -DMS_KERNELS_OPT=-O0)

if(MODE STREQUAL "add_subdirectory")
  run("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer
      ${consumer_args} -DMS_SOURCE_DIR=${MS_SOURCE_DIR})
elseif(MODE STREQUAL "find_package")
  set(prefix ${WORK_DIR}/prefix)
  run("configure ms" ${CMAKE_COMMAND} -S ${MS_SOURCE_DIR} -B ${WORK_DIR}/ms
      ${common_args}
      -DCMAKE_INSTALL_PREFIX=${prefix}
      -DMS_BUILD_TESTS=OFF -DMS_BUILD_EXAMPLES=OFF
      -DMS_BUILD_BENCHMARKS=OFF -DMS_BUILD_TOOLS=OFF)
  run("install ms" ${CMAKE_COMMAND} --install ${WORK_DIR}/ms)
  # Every header of the source tree is installed.
  file(GLOB_RECURSE src_headers RELATIVE ${MS_SOURCE_DIR}/include ${MS_SOURCE_DIR}/include/ms/*.hpp)
  foreach(h IN LISTS src_headers)
    if(NOT EXISTS ${prefix}/include/${h})
      message(FATAL_ERROR "[packaging.${MODE}] install did not put include/${h} under ${prefix}")
    endif()
  endforeach()
  list(LENGTH src_headers n_headers)
  message(STATUS "[packaging.${MODE}] all ${n_headers} headers are installed")
  run("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer
      ${consumer_args} -DCMAKE_PREFIX_PATH=${prefix})
  # Make sure the package came from the prefix, not from somewhere else.
  file(STRINGS ${WORK_DIR}/consumer/CMakeCache.txt ms_dir_line REGEX "^ms_DIR:")
  string(FIND "${ms_dir_line}" "${prefix}/" at)
  if(NOT at GREATER -1)
    message(FATAL_ERROR "[packaging.${MODE}] ms was not found in ${prefix}: ${ms_dir_line}")
  endif()
else()
  message(FATAL_ERROR "run.cmake: unknown MODE '${MODE}'")
endif()

run("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
if(EXISTS ${WORK_DIR}/consumer/ms_consumer)
  set(exe ${WORK_DIR}/consumer/ms_consumer)
else()
  file(GLOB_RECURSE exe ${WORK_DIR}/consumer/ms_consumer ${WORK_DIR}/consumer/ms_consumer.exe)
  list(GET exe 0 exe)
endif()
# The kernels were compiled once for the two units: one unit defining the ops and, on
# x86-64, one per level (sse4, avx2, avx512), none of them twice.
file(GLOB_RECURSE kernel_objects ${WORK_DIR}/consumer/*kernels.cpp.o ${WORK_DIR}/consumer/*kernels.cpp.obj)
file(GLOB_RECURSE level_objects ${WORK_DIR}/consumer/*isa_*.cpp.o)
list(LENGTH kernel_objects n_kernel)
list(LENGTH level_objects n_level)
message(STATUS "[packaging.${MODE}] kernel units compiled: ${n_kernel} op unit(s), ${n_level} level unit(s)")
if(NOT n_kernel EQUAL 1)
  message(FATAL_ERROR "[packaging.${MODE}] expected the ops' kernel unit compiled once, found ${n_kernel}: ${kernel_objects}")
endif()
cmake_host_system_information(RESULT host_arch QUERY OS_PLATFORM)
if(host_arch MATCHES "^(x86_64|AMD64|amd64)$")
  if(NOT n_level EQUAL 3)
    message(FATAL_ERROR "[packaging.${MODE}] expected 3 level units (sse4, avx2, avx512), found ${n_level}")
  endif()
  # Built without -march: nothing above x86-64 may be reachable outside the level code.
  find_program(OBJDUMP objdump REQUIRED)
  find_program(PYTHON3 python3 REQUIRED)
  run("check level code" ${PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/check_isa_leaks.py ${exe})
endif()
run("run consumer" ${exe})
# On CPUs without AVX-512 and without AVX (emulated): the program runs, picks the best
# level each has (the consumer checks it) and never executes an instruction it lacks.
find_program(QEMU qemu-x86_64)
if(QEMU AND host_arch MATCHES "^(x86_64|AMD64|amd64)$")
  foreach(cpu IN ITEMS Haswell Nehalem)
    run("run consumer on an emulated ${cpu}" ${QEMU} -cpu ${cpu} ${exe})
  endforeach()
endif()
# Each level the CPU has, forced through MS_CPU_ISA, gives the same answer.
foreach(level IN ITEMS baseline sse4)
  run("run consumer at ${level}" ${CMAKE_COMMAND} -E env MS_CPU_ISA=${level} ${exe})
endforeach()
message(STATUS "[packaging.${MODE}] OK")
