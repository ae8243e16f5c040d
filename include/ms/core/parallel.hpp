#pragma once
// Intra-op parallelism: the thread count (ms::set_num_threads) and parallel_for,
// which splits a range over OpenMP threads when the work is big enough to pay for
// waking them. Without OpenMP everything runs on the calling thread. Also the
// floating-point mode of those threads (ms::set_flush_denormal).

#include <algorithm>
#include <cstdint>

#include "linkage.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif
#if MS_IMPL_BODIES && (defined(__x86_64__) || defined(_M_X64))
#include <xmmintrin.h>
#endif

namespace ms {

namespace detail {
inline int& num_threads_setting() {
  static int n = [] {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
  }();
  return n;
}
/// Set inside a parallel region so nested kernels run serially.
inline thread_local bool in_parallel_region = false;
}  // namespace detail

/// Threads used by one op (default: OpenMP's default, i.e. the core count or OMP_NUM_THREADS).
inline int get_num_threads() { return detail::num_threads_setting(); }
/// Sets the threads used by one op; 1 disables intra-op parallelism.
inline void set_num_threads(int n) { detail::num_threads_setting() = std::max(1, n); }

/// Flushes denormal floats to zero on the CPU (off by default, as in IEEE 754 and in
/// torch.set_flush_denormal): with `on`, a float or double result too small to be normal
/// becomes zero and a denormal operand reads as zero (x86's FTZ and DAZ modes). Applies to
/// the calling thread and to every thread of the OpenMP pool that runs ms's kernels and
/// oneDNN's; threads created later inherit the mode from the thread that creates them.
/// Returns whether the CPU has the mode (x86-64: always; elsewhere false, nothing changes).
///
/// Why a training loop wants it: an operation on a denormal costs about a hundred cycles
/// on many x86 cores, and training drives state through that range. A dead unit's Adam
/// moment decays by beta1 every step (0.9^800 * 1e-3 is below 1e-38); a model that fits
/// its batch has gradients that underflow. Measured on the MLP of benchmarks/train_step
/// (fixed batch, 1 thread): 1.05 ms per step for the first 700 steps, then 2.2 ms; with
/// flushing, 1.04 ms throughout. Results change only where a value is denormal.
MS_IMPL bool set_flush_denormal(bool on);
/// Whether the calling thread flushes denormals (see set_flush_denormal).
MS_IMPL bool flush_denormal();

#if MS_IMPL_BODIES
#if defined(__x86_64__) || defined(_M_X64)
namespace detail {
inline constexpr unsigned kFtzDaz = 0x8040;  ///< MXCSR bits 15 (flush to zero) and 6 (denormals are zero)
}  // namespace detail
MS_IMPL bool set_flush_denormal(bool on) {
  auto apply = [=] { _mm_setcsr(on ? (_mm_getcsr() | detail::kFtzDaz) : (_mm_getcsr() & ~detail::kFtzDaz)); };
  apply();
#if defined(_OPENMP)
  // One region as wide as any team ms or oneDNN asks for, so every pooled thread runs it.
  const int team = std::max({omp_get_max_threads(), omp_get_num_procs(), get_num_threads()});
#pragma omp parallel num_threads(team)
  apply();
#endif
  return true;
}
MS_IMPL bool flush_denormal() { return (_mm_getcsr() & detail::kFtzDaz) == detail::kFtzDaz; }
#else
MS_IMPL bool set_flush_denormal(bool) { return false; }
MS_IMPL bool flush_denormal() { return false; }
#endif
#endif  // MS_IMPL_BODIES

/// Elements below which an elementwise op runs on one thread (waking threads costs ~2 us).
inline constexpr std::int64_t kParallelGrain = 32768;

/// Calls f(begin, end) on disjoint sub-ranges covering [0, n), in parallel when n >= grain.
/// Sub-range boundaries are multiples of `align` (so SIMD blocks stay whole).
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f, std::int64_t align = 64) {
  if (n <= 0) return;
  int nt = get_num_threads();
#if defined(_OPENMP)
  if (nt > 1 && n >= grain && !detail::in_parallel_region) {
    std::int64_t chunks = std::min<std::int64_t>(nt, (n + grain - 1) / grain);
    if (chunks > 1) {
#pragma omp parallel num_threads(static_cast<int>(chunks))
      {
        detail::in_parallel_region = true;
        std::int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        std::int64_t per = (n + k - 1) / k;
        per = (per + align - 1) / align * align;
        std::int64_t b = std::min(n, t * per), e = std::min(n, b + per);
        if (b < e) f(b, e);
        detail::in_parallel_region = false;
      }
      return;
    }
  }
#endif
  (void)nt;
  (void)align;
  f(std::int64_t{0}, n);
}

}  // namespace ms
