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
