#pragma once
// The x86-64 levels that ms compiles its elementwise kernels for, and which one runs.
//
// A program built with CMake (ms::ms, or ms_add_kernel_library) compiles the kernels of
// the elementwise ops (unary, binary, comparisons, where; these also make up every fused
// program of the graph compiler) once per level, each unit with its own -march:
//
//   level     MS_CPU_ISA  compiled with        the CPU needs
//   sse4      sse4        -march=x86-64-v2     SSE4.2, POPCNT
//   avx2      avx2        -march=x86-64-v3     AVX2, FMA, BMI2, F16C
//   avx512    avx512      -march=x86-64-v4     AVX-512 F, BW, DQ, VL, CD
//
// plus the `baseline` copy compiled with the program's own flags, which every program has.
// At start-up the registry binds each op to the best level that the running CPU supports
// and that the program contains (cpuid); the environment variable MS_CPU_ISA picks a lower
// one (`baseline`, `sse4`, `avx2` or `avx512`). A level above the CPU's is refused with an
// error; an unknown name is an error that lists the valid ones. Each level's code lives in
// a namespace of its own (ms::simd::isa_v3, ...), so no inline function compiled for a
// higher level can stand in for the rest of the program's (see <ms/backend/cpu/isa_unit.hpp>).

#include <cstdlib>
#include <string>
#include <string_view>

#include "error.hpp"

namespace ms::cpu {

enum class Isa : int { baseline = 0, sse4 = 1, avx2 = 2, avx512 = 3 };
inline constexpr int kNumIsas = 4;

/// "baseline", "sse4", "avx2", "avx512".
constexpr std::string_view isa_name(Isa l) {
  switch (l) {
    case Isa::sse4: return "sse4";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    default: return "baseline";
  }
}

/// What the level means on x86-64 ("x86-64-v3 (AVX2, FMA)").
constexpr std::string_view isa_description(Isa l) {
  switch (l) {
    case Isa::sse4: return "x86-64-v2 (SSE4.2)";
    case Isa::avx2: return "x86-64-v3 (AVX2, FMA)";
    case Isa::avx512: return "x86-64-v4 (AVX-512 F/BW/DQ/VL)";
    default: return "the program's own compiler flags";
  }
}

/// The level named `s` (MS_CPU_ISA's values); ValueError naming the valid ones otherwise.
inline Isa parse_isa(std::string_view s, std::string_view what = "MS_CPU_ISA") {
  for (int i = 0; i < kNumIsas; ++i)
    if (s == isa_name(static_cast<Isa>(i))) return static_cast<Isa>(i);
  MS_THROW(ValueError, "{}: unknown CPU level '{}' (valid: baseline, sse4, avx2, avx512)", what, s);
}

/// The highest level the running CPU (and the OS, for the AVX register state) supports.
inline Isa detected_isa() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
                  __builtin_cpu_supports("ssse3");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512cd");
  return v4 ? Isa::avx512 : v3 ? Isa::avx2 : v2 ? Isa::sse4 : Isa::baseline;
#else
  return Isa::baseline;
#endif
}

/// Checks that a CPU whose best level is `cpu` can run level `want`; ValueError otherwise.
inline void check_isa_supported(Isa want, Isa cpu, std::string_view what = "MS_CPU_ISA") {
  MS_CHECK(static_cast<int>(want) <= static_cast<int>(cpu), ValueError,
           "{}: this CPU cannot run the {} kernels ({}); its best level is {}", what, isa_name(want),
           isa_description(want), isa_name(cpu));
}

/// The level asked for: MS_CPU_ISA if set (checked against the CPU), else the CPU's best.
/// Read once per process.
inline Isa requested_isa() {
  static const Isa level = [] {
    const Isa cpu = detected_isa();
    const char* env = std::getenv("MS_CPU_ISA");
    if (!env || !*env) return cpu;
    const Isa want = parse_isa(env);
    check_isa_supported(want, cpu);
    return want;
  }();
  return level;
}

}  // namespace ms::cpu
