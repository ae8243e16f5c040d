// Tests of the threads' floating-point mode (ms::set_flush_denormal, core/parallel.hpp):
// denormal operands and results become zero on every thread that runs a kernel, the
// default keeps them (IEEE), and switching back off restores them.

#include <cfloat>
#include <cstring>
#include <limits>

#include "test_util.hpp"

namespace parallel_test {

/// Restores the thread count and the calling thread's mode after a test.
struct ModeGuard {
  ms_test::ThreadGuard threads;
  bool was = ms::flush_denormal();
  ~ModeGuard() { ms::set_flush_denormal(was); }
};

/// Whether every element of t holds exactly v. Compared as bits, not as numbers: with
/// denormals-are-zero on the calling thread a denormal would compare equal to zero.
template <class T>
bool all_bits(const ms::Tensor<T>& t, T v) {
  const T* p = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (std::memcmp(&p[i], &v, sizeof v) != 0) return false;
  return true;
}

}  // namespace parallel_test

TEST_CASE("set_flush_denormal: denormals become zero on every kernel thread, and off restores IEEE", "[core][threads]") {
  using namespace parallel_test;
  ModeGuard guard;
  ms::set_num_threads(2);
  // Four parallel grains: the two threads each take a chunk of every op below.
  const std::int64_t n = 4 * ms::kParallelGrain;
  constexpr float tiny = std::numeric_limits<float>::denorm_min() * 8;  // a denormal operand
  const ms::Tensor<float> x = ms::full<float>({n}, tiny), smallest = ms::full<float>({n}, FLT_MIN);

  ms::set_flush_denormal(false);
  CHECK_FALSE(ms::flush_denormal());
  // IEEE: 8 * 3 = 24 times the smallest denormal, and FLT_MIN / 2 is a denormal result; both exact.
  CHECK(all_bits(x * 3.0f, tiny * 3.0f));
  CHECK(all_bits(smallest * 0.5f, FLT_MIN / 2));

  if (!ms::set_flush_denormal(true)) {
    CHECK_FALSE(ms::flush_denormal());
    SUCCEED("this CPU has no flush-to-zero mode");
    return;
  }
  CHECK(ms::flush_denormal());
  CHECK(all_bits(x * 3.0f, 0.0f));             // a denormal operand reads as zero
  CHECK(all_bits(smallest * 0.5f, 0.0f));      // a denormal result is flushed
  CHECK(all_bits(smallest * 2.0f, FLT_MIN * 2));  // normal numbers are untouched
  // A double kernel and a replayed graph run in the same mode.
  const ms::Tensor<double> xd = ms::full<double>({n}, DBL_MIN);
  CHECK(all_bits(xd * 0.5, 0.0));
  auto half = ms::jit([](const ms::Tensor<float>& t) { return t * 0.5f; });
  CHECK(all_bits(half(smallest), 0.0f));

  ms::set_flush_denormal(false);
  CHECK_FALSE(ms::flush_denormal());
  CHECK(all_bits(x * 3.0f, tiny * 3.0f));
  CHECK(all_bits(half(smallest), FLT_MIN / 2));
  CHECK(all_bits(xd * 0.5, DBL_MIN / 2));
}
