#pragma once
// Intra-op parallelism: the thread count (ms::set_num_threads) and parallel_for,
// which splits a range over OpenMP threads when the work is big enough to pay for
// waking them. Without OpenMP everything runs on the calling thread.

#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
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
