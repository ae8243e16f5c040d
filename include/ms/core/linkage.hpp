#pragma once
// Where the op registrations (and with them every CPU kernel) are compiled.
//
// By default ms is header-only: each registration is an inline variable, so every
// translation unit that includes <ms/ms.hpp> instantiates and compiles all kernels
// (about a minute per unit at -O1), and the linker keeps one copy. A program with
// many units can compile them once instead:
//
//   * define MS_SEPARATE_KERNELS in every unit of the program (-DMS_SEPARATE_KERNELS);
//   * in exactly one unit, also define MS_KERNELS_IMPLEMENTATION before including
//     <ms/ms.hpp>. That unit defines the registrations; the others only declare them.
//
// CMake does both with ms_add_kernel_library(<name>) (see cmake/msKernels.cmake):
// an object library holding that one unit, which also passes MS_SEPARATE_KERNELS on
// to whatever links it. Results are identical in both modes; only the build differs.
// A unit that uses ops during static initialization must not rely on the other
// units' registrations in separate mode (their order across units is unspecified).

#if defined(MS_KERNELS_IMPLEMENTATION) && !defined(MS_SEPARATE_KERNELS)
#define MS_SEPARATE_KERNELS
#endif

/// MS_KERNEL_BODIES: 1 in a unit that compiles ms's kernels (header-only mode, the unit that
/// defines the ops, a level unit, code generated at run time), 0 in the other units of a
/// program with separate kernels. There the registrations are declarations only, so nothing
/// refers to a kernel, and the headers leave the kernels' bodies out (`#if MS_KERNEL_BODIES`):
/// such a unit parses the API, not the kernels, templates and libraries behind them.
#if !defined(MS_KERNEL_BODIES)
#if !defined(MS_SEPARATE_KERNELS) || defined(MS_KERNELS_IMPLEMENTATION) || defined(MS_ISA_LEVEL)
#define MS_KERNEL_BODIES 1
#else
#define MS_KERNEL_BODIES 0
#endif
#endif

/// MS_IMPL_BODIES and MS_IMPL: a function that only needs compiling once (one that writes a
/// file through a JSON library, say) is declared in its header with MS_IMPL in place of
/// `inline` and defined under `#if MS_IMPL_BODIES` with MS_IMPL again. In header-only mode it
/// is an ordinary inline function; with separate kernels the unit that defines the ops
/// compiles it (an external definition), and every other unit sees only its declaration.
#if !defined(MS_SEPARATE_KERNELS) || defined(MS_KERNELS_IMPLEMENTATION)
#define MS_IMPL_BODIES 1
#else
#define MS_IMPL_BODIES 0
#endif
#if !defined(MS_SEPARATE_KERNELS)
#define MS_IMPL inline
#else
#define MS_IMPL
#endif

/// MS_REGISTRATION(declaration, initializer): a namespace-scope registration such as
/// `MS_REGISTRATION(const OpDef& exp_op, register_elementwise<...>(...));`.
#if !defined(MS_SEPARATE_KERNELS)
#define MS_REGISTRATION(decl, ...) inline decl = __VA_ARGS__
#elif defined(MS_KERNELS_IMPLEMENTATION)
// The extern declaration first gives the definition external linkage (a const
// object at namespace scope would otherwise be internal to its unit).
#define MS_REGISTRATION(decl, ...) extern decl; decl = __VA_ARGS__
#else
#define MS_REGISTRATION(decl, ...) extern decl
#endif

// A unit whose settings differ from the kernels' (or from the other units') fails at link
// time or start-up instead of computing with mismatched code (see core/config_check.hpp).
#include "config_check.hpp"

/// MS_ELEMENTWISE_REGISTRATION(declaration, op): the registration of an elementwise op, `op`
/// being make_elementwise_op<F, ...>({...}) (or another expression of that kind). Like
/// MS_REGISTRATION, and it binds the op to the kernels of the CPU level in force
/// (ops/isa_dispatch.hpp). In a unit compiled for one CPU level (MS_ISA_LEVEL, see
/// <ms/backend/cpu/isa_unit.hpp>) the same line instead evaluates `op` at compile time into
/// that level's constant row of kernel tables, kept in the section `ms_isa_rows`.
#define MS_PP_CAT_(a, b) a##b
#define MS_PP_CAT(a, b) MS_PP_CAT_(a, b)
#if !defined(MS_ISA_LEVEL)
#define MS_ELEMENTWISE_REGISTRATION(decl, ...) MS_REGISTRATION(decl, ::ms::ops::add_elementwise_op(__VA_ARGS__))
#else
#define MS_ELEMENTWISE_REGISTRATION(decl, ...)                                                      \
  extern decl;                                                                                    \
  [[gnu::section("ms_isa_rows"), gnu::used]] constinit static const ::ms::ops::IsaKernelRow MS_PP_CAT( \
      ms_isa_row_, __COUNTER__) = __VA_ARGS__
#endif

/// MS_ISA_FUNCTION("name", &fn): in a unit compiled for one CPU level (MS_ISA_LEVEL, see
/// <ms/backend/cpu/isa_unit.hpp>), that level's row for kernel fn (an ops::IsaFn, see
/// backend/cpu/kernels/abi.hpp) in the section `ms_isa_fns`; elsewhere nothing (the program
/// calls its own copy when the level in force has none; ops/isa_dispatch.hpp).
#if defined(MS_ISA_LEVEL)
#define MS_ISA_FUNCTION(name, fn)                                                                    \
  [[gnu::section("ms_isa_fns"), gnu::used]] constinit static const ::ms::ops::IsaFnRow MS_PP_CAT( \
      ms_isa_fn_, __COUNTER__){MS_ISA_LEVEL, name, fn}
#else
#define MS_ISA_FUNCTION(name, fn) static_assert(true, name)
#endif
