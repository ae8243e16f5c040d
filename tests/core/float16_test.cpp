// Tests of ms::half and ms::bfloat16 (core/float16.hpp) against Eigen's types, which ms used
// before and which stay the reference: every 16-bit pattern to float, and float to 16 bits at
// every value, every midpoint between neighbours (round to nearest even) and one float ulp
// either side of it, the overflow and underflow edges, NaN and infinities.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include <ms/core/eigen.hpp>

#include "test_util.hpp"

namespace float16_test {

float next_up(float f) { return std::nextafter(f, std::numeric_limits<float>::infinity()); }
float next_down(float f) { return std::nextafter(f, -std::numeric_limits<float>::infinity()); }

/// The floats that decide rounding: each 16-bit value, the midpoints to its upper neighbour
/// and one float ulp either side of each midpoint, both signs; plus overflow/underflow edges.
std::vector<float> rounding_probes(float (*to_float)(std::uint16_t)) {
  std::vector<float> v;
  for (std::uint32_t b = 0; b < 0x7fffu; ++b) {
    const float lo = to_float(static_cast<std::uint16_t>(b)), hi = to_float(static_cast<std::uint16_t>(b + 1));
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    const float mid = static_cast<float>((static_cast<double>(lo) + static_cast<double>(hi)) / 2);
    for (float f : {lo, mid, next_up(mid), next_down(mid)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1p-26f,
                  0x1p-14f, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::infinity(), 0.0f}) {
    v.push_back(f);
    v.push_back(-f);
  }
  return v;
}

std::uint16_t bits(Eigen::half h) { return std::bit_cast<std::uint16_t>(h); }
std::uint16_t bits(Eigen::bfloat16 h) { return std::bit_cast<std::uint16_t>(h); }

}  // namespace float16_test

using namespace float16_test;

TEST_CASE("half: every bit pattern converts to the float Eigen::half gives", "[dtype][half]") {
  int mismatches = 0;
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto h = ms::half::from_bits(static_cast<std::uint16_t>(b));
    const float ours = static_cast<float>(h);
    const float ref = static_cast<float>(std::bit_cast<Eigen::half>(static_cast<std::uint16_t>(b)));
    if (std::isnan(ref) ? !std::isnan(ours) : std::bit_cast<std::uint32_t>(ours) != std::bit_cast<std::uint32_t>(ref))
      ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(static_cast<float>(ms::half::from_bits(0x0001)) == 0x1p-24f);  // the smallest subnormal
  CHECK(static_cast<float>(ms::half::from_bits(0x7bff)) == 65504.0f);
  CHECK(std::isinf(static_cast<float>(ms::half::from_bits(0xfc00))));
}

TEST_CASE("half: float rounds to nearest even like Eigen::half at every midpoint", "[dtype][half]") {
  const auto probes = rounding_probes(ms::detail::half_bits_to_float);
  REQUIRE(probes.size() > 200000);
  int mismatches = 0;
  for (float f : probes)
    if (ms::half(f).x != bits(Eigen::half(f))) {
      if (mismatches++ < 5) FAIL_CHECK("float " << f << ": ms " << ms::half(f).x << ", Eigen " << bits(Eigen::half(f)));
    }
  CHECK(mismatches == 0);
  // Hand-checked values: ties go to the even neighbour, overflow to infinity, NaN stays NaN.
  CHECK(ms::half(1.0f).x == 0x3c00);
  CHECK(ms::half(1.0f + 0x1p-11f).x == 0x3c00);            // tie between 1 and 1 + 2^-10: even is 1
  CHECK(ms::half(1.0f + 3 * 0x1p-11f).x == 0x3c02);        // tie between 1 + 2^-10 and 1 + 2^-9: even above
  CHECK(ms::half(65519.0f).x == 0x7bff);
  CHECK(ms::half(65520.0f).x == 0x7c00);                   // the tie above 65504 rounds to infinity
  CHECK(ms::half(0x1p-25f).x == 0x0000);                   // tie between 0 and 2^-24: even is 0
  CHECK(ms::half(0x1.8p-24f).x == 0x0002);                 // tie between 2^-24 and 2^-23: even above
  CHECK(ms::half(-0.0f).x == 0x8000);
  CHECK(std::isnan(static_cast<float>(ms::half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(ms::half(-std::numeric_limits<float>::quiet_NaN()).x == 0xfe00);
}

TEST_CASE("bfloat16: bit patterns and rounding agree with Eigen::bfloat16", "[dtype][half]") {
  int mismatches = 0;
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const float ours = static_cast<float>(ms::bfloat16::from_bits(static_cast<std::uint16_t>(b)));
    const float ref = static_cast<float>(std::bit_cast<Eigen::bfloat16>(static_cast<std::uint16_t>(b)));
    if (std::isnan(ref) ? !std::isnan(ours) : std::bit_cast<std::uint32_t>(ours) != std::bit_cast<std::uint32_t>(ref))
      ++mismatches;
  }
  CHECK(mismatches == 0);
  for (float f : rounding_probes(ms::detail::bfloat16_bits_to_float))
    if (ms::bfloat16(f).x != bits(Eigen::bfloat16(f))) ++mismatches;
  CHECK(mismatches == 0);
  CHECK(ms::bfloat16(1.0f + 0x1p-8f).x == 0x3f80);         // tie: even is 1
  CHECK(ms::bfloat16(1.0f + 3 * 0x1p-8f).x == 0x3f82);
  CHECK(ms::bfloat16(std::numeric_limits<float>::max()).x == 0x7f80);  // rounds up to infinity
  CHECK(ms::bfloat16(-std::numeric_limits<float>::quiet_NaN()).x == 0xffc0);
}

TEST_CASE("half and bfloat16: limits, arithmetic through float, comparisons", "[dtype][half]") {
  using HL = std::numeric_limits<ms::half>;
  using BL = std::numeric_limits<ms::bfloat16>;
  CHECK(static_cast<float>(HL::max()) == 65504.0f);
  CHECK(static_cast<float>(HL::lowest()) == -65504.0f);
  CHECK(static_cast<float>(HL::min()) == 0x1p-14f);
  CHECK(static_cast<float>(HL::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(HL::epsilon()) == 0x1p-10f);
  CHECK(std::isinf(static_cast<float>(HL::infinity())));
  CHECK(std::isnan(static_cast<float>(HL::quiet_NaN())));
  CHECK(HL::digits == 11);
  CHECK(static_cast<float>(BL::max()) == std::bit_cast<float>(0x7f7f0000u));
  CHECK(static_cast<float>(BL::min()) == 0x1p-126f);
  CHECK(static_cast<float>(BL::epsilon()) == 0x1p-7f);
  CHECK(BL::digits == 8);

  const ms::half a(1.5f), b(2.25f);
  CHECK(static_cast<float>(a + b) == 3.75f);
  CHECK(static_cast<float>(a - b) == -0.75f);
  CHECK(static_cast<float>(a * b) == 3.375f);
  CHECK(static_cast<float>(b / a) == 1.5f);
  CHECK(static_cast<float>(-a) == -1.5f);
  ms::half c = a;
  c += b;
  CHECK(c == ms::half(3.75f));
  CHECK(a < b);
  CHECK(b >= a);
  CHECK(ms::half(0.0f) == ms::half(-0.0f));
  const ms::half nan = HL::quiet_NaN();
  CHECK_FALSE(nan == nan);
  CHECK(nan != nan);
  CHECK_FALSE(nan < a);
  CHECK(static_cast<double>(ms::bfloat16(3)) == 3.0);
  CHECK(static_cast<float>(ms::half(std::int64_t{2049})) == 2048.0f);  // through float, rounded to even
}

TEST_CASE("as_eigen and from_eigen map 16-bit tensors as Eigen::half / Eigen::bfloat16", "[eigen][half]") {
  auto t = ms::cast<ms::half>(ms::arange<float>(6).reshape({2, 3}));
  auto m = ms::as_eigen(t);
  static_assert(std::is_same_v<typename decltype(m)::Scalar, Eigen::half>);
  CHECK(static_cast<float>(m(1, 2)) == 5.0f);
  m(0, 0) = Eigen::half(-2.5f);
  CHECK(static_cast<float>(t(0, 0)) == -2.5f);

  Eigen::Matrix<Eigen::bfloat16, 2, 2> e;
  e << Eigen::bfloat16(1.0f), Eigen::bfloat16(2.0f), Eigen::bfloat16(3.0f), Eigen::bfloat16(4.0f);
  auto u = ms::from_eigen(e);
  static_assert(std::is_same_v<decltype(u), ms::Tensor<ms::bfloat16>>);
  CHECK(u.dtype() == ms::DType::bf16);
  CHECK(static_cast<float>(u(0, 1)) == 2.0f);  // column-major: (0, 1) is the third element
  e(1, 1) = Eigen::bfloat16(8.0f);
  CHECK(static_cast<float>(u(1, 1)) == 8.0f);
}
