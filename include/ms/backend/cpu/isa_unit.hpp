#pragma once
// The body of a unit that compiles ms's per-level kernels for one x86-64 level: the
// elementwise kernels, and the kernels bound by name (im2col and col2im, direct
// convolution, max and average pooling, the Adam update, the reductions, normalization,
// softmax, cross entropy, the built-in GEMM).
//
//   // ms_isa_avx2.cpp, compiled with -march=x86-64-v3 -ffp-contract=off (cmake/msKernels.cmake
//   // writes it; without FP contraction a level gives the same bits at every -O)
//   #define MS_ISA_LEVEL 2
//   #include <ms/backend/cpu/isa_unit.hpp>
//
// MS_ISA_LEVEL is 1 (sse4: -march=x86-64-v2), 2 (avx2: -march=x86-64-v3) or 3 (avx512:
// -march=x86-64-v4). The unit sees the elementwise headers (ops/unary.hpp, ops/binary.hpp)
// with every registration turned into a constant row of kernel tables for its level (see
// MS_ELEMENTWISE_REGISTRATION in core/linkage.hpp), in the section `ms_isa_rows`; the
// program's own registrations bind to the rows of the selected level (ops/isa_dispatch.hpp).
// The other kernels (backend/cpu/kernels/conv_col.hpp, conv_direct.hpp, max_pool.hpp,
// avg_pool.hpp, adam.hpp, reduce.hpp, norm.hpp, softmax.hpp, loss.hpp, gemm.hpp) each leave rows
// (MS_ISA_FUNCTION, kernels/abi.hpp) in the section `ms_isa_fns`, which the ops look up by
// name through cpu::isa_function.
//
// Why this is safe on a CPU below the level: the rows are constants (ms's own code adds
// nothing that runs at start-up; only Eigen's `last`/`all` objects do, at -O0), and the
// unit's kernels, formulas and SIMD facade live in a namespace of its own (MS_ISA_NS), so
// the linker cannot take one of them for the baseline's copy. What it shares with the rest
// of the program (libstdc++'s, Eigen's and xsimd's inline helpers) comes first from the
// baseline unit, which the kernel library links ahead of the level units, lowest level
// first. tests/packaging/check_isa_leaks.py disassembles a program built without -march
// and fails if any function that code outside the level namespaces can reach (start-up
// code included) holds an instruction above x86-64.

#if !defined(MS_ISA_LEVEL)
#error "define MS_ISA_LEVEL (1, 2 or 3) before including <ms/backend/cpu/isa_unit.hpp>"
#endif
#if defined(MS_KERNELS_IMPLEMENTATION)
#error "a level unit holds only the per-level kernels: do not define MS_KERNELS_IMPLEMENTATION in it"
#endif
#if !defined(MS_SEPARATE_KERNELS)
#define MS_SEPARATE_KERNELS  // the ops themselves are registered by the program's kernel unit
#endif
// No start-up code: the configuration check of core/config_check.hpp (a per-unit static
// initializer) stays out of a level unit; the unit that defines the ops checks the program.
#if !defined(MS_NO_CONFIG_CHECK)
#define MS_NO_CONFIG_CHECK
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

#include "../../ops/unary.hpp"
#include "../../ops/binary.hpp"
// Kernels bound by name (MS_ISA_FUNCTION rows in the section `ms_isa_fns`).
#include "kernels/conv_col.hpp"
#include "kernels/conv_direct.hpp"
#include "kernels/max_pool.hpp"
#include "kernels/avg_pool.hpp"
#include "kernels/adam.hpp"
#include "kernels/reduce.hpp"
#include "kernels/norm.hpp"
#include "kernels/softmax.hpp"
#include "kernels/loss.hpp"
#include "kernels/gemm.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
