#pragma once
// The 16-bit floating-point storage types: ms::half (IEEE 754 binary16) and ms::bfloat16
// (the upper half of a float32). Both hold their bits in a std::uint16_t (`x`) and convert
// to and from float by round-to-nearest-even, NaN staying NaN; arithmetic goes through
// float. They are ms's own types so that the API headers need no numerics library:
// a unit that includes <ms/ms.hpp> parses this file, not Eigen. Their layout is Eigen's
// (Eigen::half, Eigen::bfloat16), which <ms/core/eigen.hpp> uses to map such tensors.
// Must not know about dtypes, shapes or tensors.

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ms {

namespace detail {

/// float -> binary16 bits, round to nearest even; overflow gives infinity, NaN the quiet
/// NaN 0x7e00 (with the sign).
constexpr std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (the tie above 65504 rounds to even: inf)
  if (x < 0x38800000u) {                        // below 2^-14: a subnormal half or zero
    if (x < 0x33000000u) return sign;           // below 2^-25: zero
    const std::uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;       // the value in units of 2^-24 is m >> shift
    std::uint32_t q = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
    if (rest > tie || (rest == tie && (q & 1u))) ++q;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t r = x - 0x38000000u;            // rebias the exponent: 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

/// binary16 bits -> float (exact).
constexpr float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

/// float -> bfloat16 bits, round to nearest even; NaN gives the quiet NaN 0x7fc0 (with the sign).
constexpr std::uint16_t float_to_bfloat16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// bfloat16 bits -> float (exact).
constexpr float bfloat16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// The shared surface of the two types; ToBits and FromBits convert from and to float.
template <class Self, std::uint16_t (*ToBits)(float), float (*FromBits)(std::uint16_t)>
struct Float16Base {
  std::uint16_t x = 0;  ///< the raw bits

  constexpr Float16Base() = default;
  constexpr explicit Float16Base(float f) : x(ToBits(f)) {}
  /// From any arithmetic value, through float (as Eigen's types do).
  template <class T>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, float>)
  constexpr explicit Float16Base(T v) : x(ToBits(static_cast<float>(v))) {}

  /// The value with these raw bits.
  static constexpr Self from_bits(std::uint16_t bits) {
    Self s;
    s.x = bits;
    return s;
  }
  constexpr explicit operator float() const { return FromBits(x); }
  constexpr explicit operator double() const { return static_cast<double>(FromBits(x)); }

  friend constexpr Self operator+(Self a, Self b) { return Self(float(a) + float(b)); }
  friend constexpr Self operator-(Self a, Self b) { return Self(float(a) - float(b)); }
  friend constexpr Self operator*(Self a, Self b) { return Self(float(a) * float(b)); }
  friend constexpr Self operator/(Self a, Self b) { return Self(float(a) / float(b)); }
  friend constexpr Self operator-(Self a) { return from_bits(static_cast<std::uint16_t>(a.x ^ 0x8000u)); }
  friend constexpr Self& operator+=(Self& a, Self b) { return a = a + b; }
  friend constexpr Self& operator-=(Self& a, Self b) { return a = a - b; }
  friend constexpr Self& operator*=(Self& a, Self b) { return a = a * b; }
  friend constexpr Self& operator/=(Self& a, Self b) { return a = a / b; }
  friend constexpr bool operator==(Self a, Self b) { return float(a) == float(b); }
  friend constexpr bool operator<(Self a, Self b) { return float(a) < float(b); }
  friend constexpr bool operator<=(Self a, Self b) { return float(a) <= float(b); }
  friend constexpr bool operator>(Self a, Self b) { return float(a) > float(b); }
  friend constexpr bool operator>=(Self a, Self b) { return float(a) >= float(b); }
};

/// The numeric_limits members of half and bfloat16.
template <class T, int Digits, int MinExp, int MaxExp, int MinExp10, int MaxExp10, std::uint16_t Max,
          std::uint16_t Min, std::uint16_t Denorm, std::uint16_t Eps, std::uint16_t Qnan>
struct Float16Limits {
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false, is_iec559 = true, is_bounded = true, is_modulo = false;
  static constexpr bool traps = false, tinyness_before = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr int digits = Digits, radix = 2, min_exponent = MinExp, max_exponent = MaxExp;
  static constexpr int min_exponent10 = MinExp10, max_exponent10 = MaxExp10;
  static constexpr int digits10 = Digits == 11 ? 3 : 2, max_digits10 = Digits == 11 ? 5 : 4;
  static constexpr T min() noexcept { return T::from_bits(Min); }
  static constexpr T lowest() noexcept { return T::from_bits(static_cast<std::uint16_t>(Max | 0x8000u)); }
  static constexpr T max() noexcept { return T::from_bits(Max); }
  static constexpr T epsilon() noexcept { return T::from_bits(Eps); }
  static constexpr T round_error() noexcept { return T(0.5f); }
  static constexpr T infinity() noexcept { return T::from_bits(Max == 0x7bffu ? 0x7c00u : 0x7f80u); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(Qnan); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(Max == 0x7bffu ? 0x7d00u : 0x7f81u); }
  static constexpr T denorm_min() noexcept { return T::from_bits(Denorm); }
};

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits (largest finite 65504).
struct half : detail::Float16Base<half, detail::float_to_half_bits, detail::half_bits_to_float> {
  using Float16Base::Float16Base;
};

/// bfloat16: float32's sign and 8 exponent bits, 7 fraction bits.
struct bfloat16 : detail::Float16Base<bfloat16, detail::float_to_bfloat16_bits, detail::bfloat16_bits_to_float> {
  using Float16Base::Float16Base;
};

static_assert(sizeof(half) == 2 && std::is_trivially_copyable_v<half> && std::is_standard_layout_v<half>);
static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16> && std::is_standard_layout_v<bfloat16>);

}  // namespace ms

namespace std {

/// numeric_limits for the two types (the values of IEEE binary16 and of bfloat16).
template <>
struct numeric_limits<ms::half>
    : ms::detail::Float16Limits<ms::half, 11, -13, 16, -4, 4, 0x7bffu, 0x0400u, 0x0001u, 0x1400u, 0x7e00u> {};
template <>
struct numeric_limits<ms::bfloat16>
    : ms::detail::Float16Limits<ms::bfloat16, 8, -125, 128, -37, 38, 0x7f7fu, 0x0080u, 0x0001u, 0x3c00u, 0x7fc0u> {};

}  // namespace std
