#pragma once
// Catches a program whose units were compiled with different ABI-affecting settings
// (MS_HAVE_BLAS, MS_HAVE_DNNL, MS_SEPARATE_KERNELS). Such units would share inline
// functions and op registrations compiled for another setting: wrong results, no error.
// Two checks, both free at run time:
//   * separate kernels (core/linkage.hpp): every unit references a symbol whose name spells
//     its settings, ms_kernels_built_with_blas<0|1>_dnnl<0|1>, and only the unit that
//     compiles the kernels defines one. A unit whose settings differ from the kernels' fails
//     to link with "undefined reference to `ms_kernels_built_with_blas1_dnnl0'".
//   * any build: at start-up each unit compares its settings with those of the one copy of
//     program_config() the linker kept, and a mismatch stops the program with a message.
// A unit that uses only formulas and never the kernels (the code that backend/cpu/codegen.hpp
// generates and loads at run time) defines MS_NO_CONFIG_CHECK to leave both checks out.
// Must not include anything of ms: linkage.hpp includes it before the registry.

#if !defined(MS_NO_CONFIG_CHECK)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(MS_HAVE_BLAS)
#define MS_CONFIG_BLAS_ 1
#else
#define MS_CONFIG_BLAS_ 0
#endif
#if defined(MS_HAVE_DNNL)
#define MS_CONFIG_DNNL_ 1
#else
#define MS_CONFIG_DNNL_ 0
#endif
#if defined(MS_SEPARATE_KERNELS)
#define MS_CONFIG_SEPARATE_ 1
#else
#define MS_CONFIG_SEPARATE_ 0
#endif
#define MS_CONFIG_STR2_(x) #x
#define MS_CONFIG_STR_(x) MS_CONFIG_STR2_(x)
/// This unit's settings as text: "MS_HAVE_BLAS=1 MS_HAVE_DNNL=0 MS_SEPARATE_KERNELS=1".
#define MS_CONFIG_STRING                                                                         \
  "MS_HAVE_BLAS=" MS_CONFIG_STR_(MS_CONFIG_BLAS_) " MS_HAVE_DNNL=" MS_CONFIG_STR_(MS_CONFIG_DNNL_) \
  " MS_SEPARATE_KERNELS=" MS_CONFIG_STR_(MS_CONFIG_SEPARATE_)
#define MS_CONFIG_CAT2_(a, b, c) a##b##_dnnl##c
#define MS_CONFIG_CAT_(a, b, c) MS_CONFIG_CAT2_(a, b, c)
/// The symbol that the kernel unit defines and every unit of a separate-kernels program uses.
#define MS_KERNELS_CONFIG_SYMBOL MS_CONFIG_CAT_(ms_kernels_built_with_blas, MS_CONFIG_BLAS_, MS_CONFIG_DNNL_)

namespace ms::detail {

/// The settings of one unit, as the linker kept it (inline: one copy per program). Opaque to
/// the optimizer, so each unit compares against the kept copy rather than its own literal.
#if defined(__clang__)
[[clang::optnone]] [[gnu::noinline]]
#elif defined(__GNUC__)
[[gnu::noipa]]
#endif
inline const char* program_config() {
  return MS_CONFIG_STRING;
}

inline bool check_program_config(const char* mine) {
  const char* kept = program_config();
  if (std::strcmp(kept, mine) != 0) {
    std::fprintf(stderr,
                 "ms: this program mixes units compiled with different settings (%s in one, %s in another); "
                 "compile every unit with the flags of ms::ms (pkg-config --cflags ms)\n",
                 mine, kept);
    std::abort();
  }
  return true;
}
// One check per unit, during static initialization.
[[maybe_unused]] static const bool program_config_checked = check_program_config(MS_CONFIG_STRING);

}  // namespace ms::detail

#if defined(MS_SEPARATE_KERNELS)
extern "C" const int MS_KERNELS_CONFIG_SYMBOL;
#if defined(MS_KERNELS_IMPLEMENTATION)
extern "C" const int MS_KERNELS_CONFIG_SYMBOL = 1;
#endif
namespace ms::detail {
// A reference the compiler must keep (used): a unit whose settings differ from the
// kernels' names a symbol that nobody defines, and the link fails naming it.
[[maybe_unused]] __attribute__((used)) static const int* const kernels_config_ref = &MS_KERNELS_CONFIG_SYMBOL;
}  // namespace ms::detail
#endif
#endif  // !MS_NO_CONFIG_CHECK
