#pragma once
// Element types: the DType enum, the C++ type <-> DType mapping, sizes, names,
// and visit_dtype() which turns a runtime DType into a compile-time type.
// Must not know about shapes, tensors or ops.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <fmt/core.h>

#include "error.hpp"
#include "float16.hpp"

namespace ms {

/// Runtime element type of a tensor.
enum class DType : std::uint8_t { f32 = 0, f64, i32, i64, u8, b8, f16, bf16 };
inline constexpr int kNumDTypes = 8;

template <class T>
struct dtype_of;
#define MS_DTYPE_OF(T, D)                      \
  template <>                                  \
  struct dtype_of<T> {                         \
    static constexpr DType value = DType::D;   \
  };
MS_DTYPE_OF(float, f32)
MS_DTYPE_OF(double, f64)
MS_DTYPE_OF(std::int32_t, i32)
MS_DTYPE_OF(std::int64_t, i64)
MS_DTYPE_OF(std::uint8_t, u8)
MS_DTYPE_OF(bool, b8)
MS_DTYPE_OF(half, f16)
MS_DTYPE_OF(bfloat16, bf16)
#undef MS_DTYPE_OF

/// The DType of a C++ element type, e.g. dtype_v<float> == DType::f32.
template <class T>
inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

/// True for the element types a Tensor<T> may hold.
template <class T>
concept Element = requires { dtype_of<std::remove_cv_t<T>>::value; };

/// NumPy-style name: "float32", "int64", "bool", ...
constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::b8: return "bool";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

/// Bytes per element.
constexpr std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::u8: case DType::b8: return 1;
    case DType::f16: case DType::bf16: return 2;
  }
  return 0;
}

constexpr bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16;
}
constexpr bool is_integral(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::u8; }

/// Parses a NumPy-style name ("float32", "f32", "int64", ...); throws DTypeError.
inline DType dtype_from_name(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto d = static_cast<DType>(i);
    if (dtype_name(d) == s) return d;
  }
  if (s == "f32" || s == "float") return DType::f32;
  if (s == "f64" || s == "double") return DType::f64;
  if (s == "i32" || s == "int") return DType::i32;
  if (s == "i64" || s == "long") return DType::i64;
  if (s == "u8") return DType::u8;
  if (s == "b8") return DType::b8;
  if (s == "f16" || s == "half") return DType::f16;
  if (s == "bf16") return DType::bf16;
  MS_THROW(DTypeError, "unknown dtype name '{}' (expected float32, float64, int32, int64, uint8, bool, float16, bfloat16)", s);
}

/// A set of dtypes as a bitmask (used for per-backend op support).
struct DTypeSet {
  std::uint32_t bits = 0;
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> ds) {
    for (DType d : ds) bits |= 1u << static_cast<int>(d);
  }
  constexpr bool contains(DType d) const { return (bits >> static_cast<int>(d)) & 1u; }
  constexpr DTypeSet operator|(DTypeSet o) const { DTypeSet r; r.bits = bits | o.bits; return r; }
  constexpr bool empty() const { return bits == 0; }
};
inline constexpr DTypeSet kFloatTypes{DType::f32, DType::f64};
inline constexpr DTypeSet kIntTypes{DType::i32, DType::i64, DType::u8};
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr DTypeSet kAllTypes = kNumericTypes | DTypeSet{DType::b8};
inline constexpr DTypeSet kStorageTypes = kAllTypes | DTypeSet{DType::f16, DType::bf16};

/// Calls f.template operator()<T>() with the C++ type of d.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::i32: return f.template operator()<std::int32_t>();
    case DType::i64: return f.template operator()<std::int64_t>();
    case DType::u8: return f.template operator()<std::uint8_t>();
    case DType::b8: return f.template operator()<bool>();
    case DType::f16: return f.template operator()<half>();
    case DType::bf16: return f.template operator()<bfloat16>();
  }
  MS_THROW(DTypeError, "invalid dtype code {}", static_cast<int>(d));
}

}  // namespace ms

template <>
struct fmt::formatter<ms::DType> : ms::detail::TextFormatter {
  template <class Ctx>
  auto format(ms::DType d, Ctx& ctx) const {
    return format_text(ms::dtype_name(d), ctx);
  }
};
