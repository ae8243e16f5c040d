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

if(MODE STREQUAL "find_package")
  # pkg-config: the installed ms.pc alone gives a one-line build of the same consumer.
  find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
  file(GLOB_RECURSE ms_pc ${prefix}/ms.pc)
  if(NOT ms_pc)
    message(FATAL_ERROR "[packaging.${MODE}] install did not put ms.pc under ${prefix}")
  endif()
  if(PKG_CONFIG_EXECUTABLE AND CXX_COMPILER)
    get_filename_component(pc_dir ${ms_pc} DIRECTORY)
    set(ENV{PKG_CONFIG_PATH} ${pc_dir})
    execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags --libs ms OUTPUT_VARIABLE pc_flags
                    RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "[packaging.${MODE}] pkg-config --cflags --libs ms failed (${rc})")
    endif()
    separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
    # One unit, header-only (the kernels compiled in it, for its flags: only the baseline level).
    file(WRITE ${WORK_DIR}/pc_main.cpp [=[
#include <ms/ms.hpp>
int main() {
  auto b = ms::ones<float>({2, 3}) + ms::ones<float>({2, 3});
  return b.sum().item() == 12.0f && ms::cpu::compiled_isas().size() == 1 ? 0 : 1;
}
]=])
    run("build consumer with pkg-config" ${CXX_COMPILER} -O0 ${WORK_DIR}/pc_main.cpp ${pc_flags}
        -o ${WORK_DIR}/ms_consumer_pc)
    run("run consumer built with pkg-config" ${WORK_DIR}/ms_consumer_pc)
    # A unit built with another MS_HAVE_BLAS than the kernels' unit must not link.
    set(mm ${CONSUMER_DIR}/../config_mismatch)
    run("compile kernels unit with MS_HAVE_BLAS" ${CXX_COMPILER} -std=c++20 -I${prefix}/include -DMS_SEPARATE_KERNELS
        -DMS_HAVE_BLAS=1 -c ${mm}/kernels.cpp -o ${WORK_DIR}/mm_kernels.o)
    run("compile user unit without it" ${CXX_COMPILER} -std=c++20 -I${prefix}/include -DMS_SEPARATE_KERNELS
        -c ${mm}/user.cpp -o ${WORK_DIR}/mm_user.o)
    execute_process(COMMAND ${CXX_COMPILER} ${WORK_DIR}/mm_kernels.o ${WORK_DIR}/mm_user.o -o ${WORK_DIR}/mm
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
    if(rc EQUAL 0 OR NOT "${err}${out}" MATCHES "ms_kernels_built_with_blas0_dnnl0")
      message(FATAL_ERROR "[packaging.${MODE}] mixing MS_HAVE_BLAS settings linked or gave another error "
                          "(${rc}): ${err}${out}")
    endif()
    message(STATUS "[packaging.${MODE}] mixed MS_HAVE_BLAS settings fail to link, naming the missing configuration")
    # Header-only units with different settings link, but the program stops at start-up.
    run("compile a header-only unit with MS_HAVE_BLAS" ${CXX_COMPILER} -std=c++20 -I${prefix}/include -DMS_HAVE_BLAS=1
        -c ${mm}/user.cpp -o ${WORK_DIR}/mm_user_blas.o)
    file(WRITE ${WORK_DIR}/mm_other.cpp "#include <ms/core/linkage.hpp>\nint ms_consumer_kernels() { return 0; }\n")
    run("compile another without it" ${CXX_COMPILER} -std=c++20 -I${prefix}/include -c ${WORK_DIR}/mm_other.cpp
        -o ${WORK_DIR}/mm_other.o)
    run("link them" ${CXX_COMPILER} ${WORK_DIR}/mm_user_blas.o ${WORK_DIR}/mm_other.o -o ${WORK_DIR}/mm_startup)
    execute_process(COMMAND ${WORK_DIR}/mm_startup RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
    if(rc EQUAL 0 OR NOT "${err}" MATCHES "mixes units compiled with different settings \\(MS_HAVE_BLAS=")
      message(FATAL_ERROR "[packaging.${MODE}] mixed header-only units ran (${rc}): ${err}${out}")
    endif()
    message(STATUS "[packaging.${MODE}] mixed header-only units stop at start-up: ${err}")
  endif()
endif()

# One job: the two packaging tests run beside each other and beside the rest of the suite
# (ctest -j), and Ninja's default (cores + 2 jobs each) made all of them slower.
run("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer --parallel 1)
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
