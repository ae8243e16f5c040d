#pragma once
// Creation ops: tensors made from attributes alone (fill, arange, linspace, eye,
// rand, randn, randint; category creation, zero inputs), plus the host-side
// constructors that are not ops (from_vector, from_blob, scalar). Random ops draw
// from the default generator, or from an explicit "seed" attribute, when their
// KERNEL runs, so a replayed graph draws new numbers each time.
// Must not hold any state of its own; the default generator lives in core/random.hpp.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "../core/linkage.hpp"
#include "../core/parallel.hpp"
#include "../core/random.hpp"
#include "dispatch.hpp"

namespace ms::ops {

/// A number given to a creation op: kept as int64 when it is an integer (so int64
/// values beyond 2^53 stay exact) and as double otherwise. Converts implicitly from
/// any arithmetic type and from ms::half / ms::bfloat16.
struct Number {
  AttrValue value = std::int64_t{0};
  template <class V>
    requires(std::is_arithmetic_v<V>)
  Number(V v) {  // NOLINT: implicit by design
    if constexpr (std::is_integral_v<V>) {
      if constexpr (std::is_unsigned_v<V> && sizeof(V) >= 8) {
        if (v > static_cast<V>(std::numeric_limits<std::int64_t>::max())) { value = static_cast<double>(v); return; }
      }
      value = static_cast<std::int64_t>(v);
    } else {
      value = static_cast<double>(v);
    }
  }
  Number(half v) : value(static_cast<double>(static_cast<float>(v))) {}      // NOLINT
  Number(bfloat16 v) : value(static_cast<double>(static_cast<float>(v))) {}  // NOLINT
  bool is_integer() const { return std::holds_alternative<std::int64_t>(value); }
  double as_double() const {
    return is_integer() ? static_cast<double>(std::get<std::int64_t>(value)) : std::get<double>(value);
  }
};

#if MS_KERNEL_BODIES  // used by the registrations only: core/linkage.hpp
namespace creation_detail {

inline constexpr DTypeSet kCreationFloatTypes{DType::f32, DType::f64, DType::f16, DType::bf16};
inline constexpr DTypeSet kArangeTypes = kNumericTypes | DTypeSet{DType::f16, DType::bf16};
inline constexpr DTypeSet kRandintTypes{DType::i32, DType::i64, DType::u8, DType::f32, DType::f64};

inline std::string dtype_set_str(DTypeSet set) {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i)
    if (set.contains(static_cast<DType>(i))) s += (s.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(i)));
  return s;
}

/// The output dtype attribute, checked against the dtypes the op can produce.
inline DType out_dtype(const OpDef& op, const Attrs& a) {
  DType d = a.dtype("dtype");
  MS_CHECK(op.cpu_dtypes.contains(d), DTypeError, "{}: unsupported dtype {} (supported: {})", op.name, d,
           dtype_set_str(op.cpu_dtypes));
  return d;
}

/// The "shape" attribute as a Shape; negative dims, and sizes whose byte count overflows int64, are ShapeErrors.
inline Shape shape_attr(const OpDef& op, const Attrs& a, DType dtype) {
  const IntList& dims = a.ints("shape");
  MS_CHECK(static_cast<int>(dims.size()) <= kMaxDims, ShapeError, "{}: shape {} has {} dimensions (at most {})",
           op.name, detail::ints_str(dims), dims.size(), kMaxDims);
  std::int64_t n = 1;
  for (auto d : dims) {
    MS_CHECK(d >= 0, ShapeError, "{}: negative dimension {} in shape {}", op.name, d, detail::ints_str(dims));
    MS_CHECK(!__builtin_mul_overflow(n, d, &n), ShapeError, "{}: shape {} has too many elements", op.name,
             detail::ints_str(dims));
  }
  std::int64_t bytes = 0;
  MS_CHECK(!__builtin_mul_overflow(n, static_cast<std::int64_t>(dtype_size(dtype)), &bytes), ShapeError,
           "{}: shape {} has too many elements", op.name, detail::ints_str(dims));
  return Shape(dims);
}

/// A number attribute (int64 or double).
inline Number number_attr(const Attrs& a, std::string_view key) {
  const AttrValue* v = a.find(key);
  MS_CHECK(v != nullptr, ValueError, "attribute '{}' is missing", key);
  if (auto* i = std::get_if<std::int64_t>(v)) return Number(*i);
  if (auto* d = std::get_if<double>(v)) return Number(*d);
  if (auto* b = std::get_if<bool>(v)) return Number(std::int64_t{*b});
  MS_THROW(ValueError, "attribute '{}' has the wrong type (expected a number)", key);
}

/// Converts a number to element type T; ValueError when T cannot represent it
/// (a fraction or an out-of-range value for an integer type, overflow to inf for a float type).
template <class T>
T number_to(std::string_view op, const Number& num, std::string_view what = "value") {
  if constexpr (std::is_same_v<T, bool>) {
    return num.is_integer() ? std::get<std::int64_t>(num.value) != 0 : std::get<double>(num.value) != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    constexpr auto lo = static_cast<std::int64_t>(std::numeric_limits<T>::lowest());
    constexpr auto hi = std::numeric_limits<T>::max();
    if (num.is_integer()) {
      std::int64_t v = std::get<std::int64_t>(num.value);
      MS_CHECK(v >= lo && static_cast<std::uint64_t>(v < 0 ? 0 : v) <= static_cast<std::uint64_t>(hi), ValueError,
               "{}: {} {} is out of range for {}", op, what, v, dtype_v<T>);
      return static_cast<T>(v);
    }
    double v = std::get<double>(num.value);
    MS_CHECK(std::isfinite(v) && v == std::floor(v), ValueError, "{}: {} {} is not an integer, as {} requires", op,
             what, v, dtype_v<T>);
    MS_CHECK(v >= static_cast<double>(lo) && v < std::ldexp(1.0, std::numeric_limits<T>::digits), ValueError,
             "{}: {} {} is out of range for {}", op, what, v, dtype_v<T>);
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return num.as_double();
  } else {  // float, half, bfloat16: a finite value must stay finite
    double v = num.as_double();
    T t = static_cast<T>(v);
    MS_CHECK(!std::isfinite(v) || std::isfinite(static_cast<float>(t)), ValueError, "{}: {} {} overflows {}", op,
             what, v, dtype_v<T>);
    return t;
  }
}

/// Validates a number against a runtime dtype (used by inference, so capture checks it too).
inline void check_number(std::string_view op, const Number& num, DType d, std::string_view what = "value") {
  visit_dtype(d, [&]<class T>() { (void)number_to<T>(op, num, what); });
}

/// Writes `n` copies of `v` to `out`, in parallel when large.
template <class T>
void fill_n(T* out, std::int64_t n, T v) {
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { std::fill(out + b, out + e, v); });
}

/// Cost of a creation op: its output bytes, and `F` flops per element.
template <int F>
Cost creation_cost(const OpDef&, std::span<const TensorMeta>, std::span<const TensorMeta> out, const Attrs&) {
  Cost c;
  for (auto& m : out) {
    c.bytes += static_cast<double>(numel(m.shape) * static_cast<std::int64_t>(dtype_size(m.dtype)));
    c.flops += static_cast<double>(numel(m.shape)) * F;
  }
  return c;
}

inline OpDef creation_def(std::string name, std::string doc, std::vector<std::string> attrs, DTypeSet dtypes) {
  OpDef d;
  d.name = std::move(name);
  d.category = Category::creation;
  d.num_inputs = 0;
  d.doc = std::move(doc);
  d.attr_names = std::move(attrs);
  d.cpu_dtypes = dtypes;
  d.nondiff_reason = "creation op: no inputs to differentiate";
  return d;
}

// ---- arange / linspace parameters (shared by inference and kernel) -------------------------

/// Length and integer parameters of an arange over an integer dtype (exact int64 arithmetic).
struct IntRange {
  std::int64_t start = 0, step = 1, n = 0;
};
/// Length and parameters of an arange over a floating dtype (values start + i * step in double).
struct FloatRange {
  double start = 0, step = 1;
  std::int64_t n = 0;
};

inline std::int64_t integral_number(std::string_view op, const Number& num, std::string_view what) {
  if (num.is_integer()) return std::get<std::int64_t>(num.value);
  double v = std::get<double>(num.value);
  MS_CHECK(std::isfinite(v) && v == std::floor(v) && v >= -0x1p63 && v < 0x1p63, ValueError,
           "{}: {} {} is not an integer, as an integer dtype requires", op, what, v);
  return static_cast<std::int64_t>(v);
}

inline IntRange int_range(const OpDef& op, const Attrs& a, DType d) {
  std::int64_t start = integral_number(op.name, number_attr(a, "start"), "start");
  std::int64_t stop = integral_number(op.name, number_attr(a, "stop"), "stop");
  std::int64_t step = integral_number(op.name, number_attr(a, "step"), "step");
  MS_CHECK(step != 0, ValueError, "{}: step must be nonzero", op.name);
  // ceil((stop - start) / step) without overflow: the distance fits in uint64.
  std::uint64_t n = 0;
  if (step > 0 && stop > start) {
    std::uint64_t dist = static_cast<std::uint64_t>(stop) - static_cast<std::uint64_t>(start);
    n = (dist - 1) / static_cast<std::uint64_t>(step) + 1;
  } else if (step < 0 && stop < start) {
    std::uint64_t dist = static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(stop);
    n = (dist - 1) / (0 - static_cast<std::uint64_t>(step)) + 1;
  }
  IntRange r{start, step, static_cast<std::int64_t>(n)};
  if (r.n > 0) {
    std::int64_t last = static_cast<std::int64_t>(static_cast<std::uint64_t>(start) +
                                                  static_cast<std::uint64_t>(r.n - 1) * static_cast<std::uint64_t>(step));
    check_number(op.name, Number(start), d, "start");
    check_number(op.name, Number(last), d, "last value");
  }
  return r;
}

inline FloatRange float_range(const OpDef& op, const Attrs& a) {
  double start = number_attr(a, "start").as_double();
  double stop = number_attr(a, "stop").as_double();
  double step = number_attr(a, "step").as_double();
  MS_CHECK(std::isfinite(start) && std::isfinite(stop) && std::isfinite(step), ValueError,
           "{}: start, stop and step must be finite, got {}, {}, {}", op.name, start, stop, step);
  MS_CHECK(step != 0, ValueError, "{}: step must be nonzero", op.name);
  double len = std::ceil((stop - start) / step);  // NumPy's length rule
  MS_CHECK(!(len > 0x1p53), ValueError, "{}: [{}, {}) with step {} has too many elements", op.name, start, stop, step);
  return {start, step, len > 0 ? static_cast<std::int64_t>(len) : 0};
}

inline std::int64_t arange_length(const OpDef& op, const Attrs& a, DType d) {
  return is_floating(d) ? float_range(op, a).n : int_range(op, a, d).n;
}

}  // namespace creation_detail
#endif

// fill: attrs shape, dtype, value. Serves zeros/ones/full for every storage dtype.
MS_REGISTRATION(const OpDef& fill_op, registry().add([] {
  OpDef d = creation_detail::creation_def("fill", "a tensor of one repeated value (zeros, ones, full)",
                                 {"shape", "dtype", "value"}, kStorageTypes);
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    creation_detail::check_number(op.name, creation_detail::number_attr(a, "value"), dt);
    out.push_back({dt, creation_detail::shape_attr(op, a, dt)});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    visit_dtype(y.dtype(), [&]<class T>() {
      T v = creation_detail::number_to<T>(k.op.name, creation_detail::number_attr(k.attrs, "value"));
      unsigned char bytes[sizeof(T)];
      std::memcpy(bytes, &v, sizeof(T));
      bool zero = std::all_of(bytes, bytes + sizeof(T), [](unsigned char b) { return b == 0; });
      if (zero) std::memset(y.raw_data(), 0, y.nbytes());  // zeros: one memset whatever the dtype
      else creation_detail::fill_n(static_cast<T*>(y.raw_data()), y.numel(), v);
    });
  };
  d.cost = &creation_detail::creation_cost<0>;
  return d;
}()));

// arange: attrs start, stop, step (numbers), dtype. Length ceil((stop - start) / step), like NumPy.
MS_REGISTRATION(const OpDef& arange_op, registry().add([] {
  OpDef d = creation_detail::creation_def("arange", "start, start + step, ... up to (excluding) stop",
                                 {"start", "stop", "step", "dtype"}, creation_detail::kArangeTypes);
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    out.push_back({dt, Shape{creation_detail::arange_length(op, a, dt)}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    visit_dtype(y.dtype(), [&]<class T>() {
      T* out = static_cast<T*>(y.raw_data());
      if constexpr (std::is_same_v<T, bool>) {
        MS_THROW(DTypeError, "arange: unsupported dtype bool");
      } else if constexpr (std::is_integral_v<T>) {
        auto r = creation_detail::int_range(k.op, k.attrs, y.dtype());
        parallel_for(r.n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i)  // in range: checked by int_range
            out[i] = static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(r.start) +
                                                              static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(r.step)));
        });
      } else {
        auto r = creation_detail::float_range(k.op, k.attrs);
        parallel_for(r.n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) out[i] = static_cast<T>(r.start + static_cast<double>(i) * r.step);
        });
      }
    });
  };
  d.cost = &creation_detail::creation_cost<1>;
  return d;
}()));

// linspace: attrs start, stop (double), num, dtype. num evenly spaced points including both ends.
MS_REGISTRATION(const OpDef& linspace_op, registry().add([] {
  OpDef d = creation_detail::creation_def("linspace", "num evenly spaced points from start to stop, both included",
                                 {"start", "stop", "num", "dtype"}, creation_detail::kCreationFloatTypes);
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    std::int64_t num = a.i("num");
    MS_CHECK(num >= 0, ValueError, "{}: num must be non-negative, got {}", op.name, num);
    out.push_back({dt, Shape{num}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    double start = k.attrs.f("start"), stop = k.attrs.f("stop");
    std::int64_t num = k.attrs.i("num");
    visit_dtype(y.dtype(), [&]<class T>() {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        T* out = static_cast<T*>(y.raw_data());
        // NumPy's formula (start + i * step in double, last point exactly stop), then one rounding to T.
        double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
        parallel_for(num, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) out[i] = static_cast<T>(start + static_cast<double>(i) * step);
        });
        if (num > 1) out[num - 1] = static_cast<T>(stop);
      } else {
        MS_THROW(DTypeError, "linspace: unsupported dtype {}", y.dtype());
      }
    });
  };
  d.cost = &creation_detail::creation_cost<2>;
  return d;
}()));

// eye: attrs n, m, dtype. An n x m matrix with ones on the main diagonal.
MS_REGISTRATION(const OpDef& eye_op, registry().add([] {
  OpDef d = creation_detail::creation_def("eye", "n x m matrix with ones on the diagonal and zeros elsewhere",
                                 {"n", "m", "dtype"}, kStorageTypes);
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    std::int64_t n = a.i("n"), m = a.i("m");
    MS_CHECK(n >= 0 && m >= 0, ShapeError, "{}: n and m must be non-negative, got n={}, m={}", op.name, n, m);
    std::int64_t total = 0;
    MS_CHECK(!__builtin_mul_overflow(n, m, &total) &&
                 !__builtin_mul_overflow(total, static_cast<std::int64_t>(dtype_size(dt)), &total),
             ShapeError, "{}: {} x {} has too many elements", op.name, n, m);
    out.push_back({dt, Shape{n, m}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    std::memset(y.raw_data(), 0, y.nbytes());
    std::int64_t n = y.shape()[0], m = y.shape()[1];
    visit_dtype(y.dtype(), [&]<class T>() {
      T* out = static_cast<T*>(y.raw_data());
      const T one = static_cast<T>(1);
      for (std::int64_t i = 0; i < std::min(n, m); ++i) out[i * m + i] = one;
    });
  };
  d.cost = &creation_detail::creation_cost<0>;
  return d;
}()));

// rand: attrs shape, dtype, optional seed. Uniform in [0, 1).
MS_REGISTRATION(const OpDef& rand_op, registry().add([] {
  OpDef d = creation_detail::creation_def("rand", "uniform random numbers in [0, 1)", {"shape", "dtype", "seed"},
                                 creation_detail::kCreationFloatTypes);
  d.is_random = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    out.push_back({dt, creation_detail::shape_attr(op, a, dt)});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    visit_dtype(y.dtype(), [&]<class T>() {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        T* out = static_cast<T*>(y.raw_data());
        std::int64_t n = y.numel();
        with_generator(k.attrs.maybe_i("seed"), [&](Generator& g) {
          for (std::int64_t i = 0; i < n; ++i) out[i] = g.uniform_as<T>();
        });
      } else {
        MS_THROW(DTypeError, "rand: unsupported dtype {}", y.dtype());
      }
    });
  };
  d.cost = &creation_detail::creation_cost<2>;
  return d;
}()));

// randn: attrs shape, dtype, optional seed. Standard normal (Box-Muller).
MS_REGISTRATION(const OpDef& randn_op, registry().add([] {
  OpDef d = creation_detail::creation_def("randn", "standard normal random numbers (mean 0, variance 1)",
                                 {"shape", "dtype", "seed"}, creation_detail::kCreationFloatTypes);
  d.is_random = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    out.push_back({dt, creation_detail::shape_attr(op, a, dt)});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    visit_dtype(y.dtype(), [&]<class T>() {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        T* out = static_cast<T*>(y.raw_data());
        std::int64_t n = y.numel();
        with_generator(k.attrs.maybe_i("seed"), [&](Generator& g) {
          for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(g.normal());
        });
      } else {
        MS_THROW(DTypeError, "randn: unsupported dtype {}", y.dtype());
      }
    });
  };
  d.cost = &creation_detail::creation_cost<30>;
  return d;
}()));

// randint: attrs low, high, shape, dtype, optional seed. Uniform integers in [low, high).
MS_REGISTRATION(const OpDef& randint_op, registry().add([] {
  OpDef d = creation_detail::creation_def("randint", "uniform random integers in [low, high)",
                                 {"low", "high", "shape", "dtype", "seed"}, creation_detail::kRandintTypes);
  d.is_random = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta>, const Attrs& a, MetaList& out) {
    DType dt = creation_detail::out_dtype(op, a);
    std::int64_t low = a.i("low"), high = a.i("high");
    MS_CHECK(low < high, ValueError, "{}: low ({}) must be less than high ({})", op.name, low, high);
    creation_detail::check_number(op.name, Number(low), dt, "low");
    creation_detail::check_number(op.name, Number(high - 1), dt, "largest value");
    if (is_floating(dt)) {  // every integer in the range must be exact in the float type
      double lim = dt == DType::f32 ? 0x1p24 : 0x1p53;
      MS_CHECK(static_cast<double>(low) >= -lim && static_cast<double>(high - 1) <= lim, ValueError,
               "{}: [{}, {}) is not exactly representable in {}", op.name, low, high, dt);
    }
    out.push_back({dt, creation_detail::shape_attr(op, a, dt)});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    std::int64_t low = k.attrs.i("low"), high = k.attrs.i("high");
    visit_dtype(y.dtype(), [&]<class T>() {
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        T* out = static_cast<T*>(y.raw_data());
        std::int64_t n = y.numel();
        with_generator(k.attrs.maybe_i("seed"), [&](Generator& g) {
          for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(g.randint(low, high));
        });
      } else {
        MS_THROW(DTypeError, "randint: unsupported dtype {}", y.dtype());
      }
    });
  };
  d.cost = &creation_detail::creation_cost<3>;
  return d;
}()));

// ---- untyped API ----------------------------------------------------------------------------

/// A tensor of `shape` filled with `value` (ValueError when dtype cannot represent it).
MS_IMPL AnyTensor full(const Shape& shape, Number value, DType dtype);
inline AnyTensor zeros(const Shape& shape, DType dtype = DType::f32) { return full(shape, 0, dtype); }
inline AnyTensor ones(const Shape& shape, DType dtype = DType::f32) { return full(shape, 1, dtype); }
/// Same shape and dtype as x (always on the cpu).
inline AnyTensor zeros_like(const AnyTensor& x) { return zeros(x.shape(), x.dtype()); }
inline AnyTensor ones_like(const AnyTensor& x) { return ones(x.shape(), x.dtype()); }
inline AnyTensor full_like(const AnyTensor& x, Number value) { return full(x.shape(), value, x.dtype()); }
/// [start, stop) in steps of step; integer dtypes need integer start/stop/step.
MS_IMPL AnyTensor arange(Number start, Number stop, Number step, DType dtype);
/// num points from start to stop, both included (floating dtypes).
MS_IMPL AnyTensor linspace(double start, double stop, std::int64_t num, DType dtype = DType::f32);
/// n x m identity-like matrix (m = -1: square).
MS_IMPL AnyTensor eye(std::int64_t n, std::int64_t m = -1, DType dtype = DType::f32);
namespace creation_detail {
}  // namespace creation_detail
/// Uniform [0, 1); with a seed the op draws from its own generator (the same numbers on every run).
MS_IMPL AnyTensor rand(const Shape& shape, DType dtype = DType::f32, std::optional<std::uint64_t> seed = {});
/// Standard normal.
MS_IMPL AnyTensor randn(const Shape& shape, DType dtype = DType::f32, std::optional<std::uint64_t> seed = {});
/// Uniform integers in [low, high).
MS_IMPL AnyTensor randint(std::int64_t low, std::int64_t high, const Shape& shape, DType dtype = DType::i64,
                         std::optional<std::uint64_t> seed = {});

}  // namespace ms::ops

namespace ms {

// ---- typed API ------------------------------------------------------------------------------

/// An uninitialized contiguous tensor (not an op: nothing to record).
template <Element T = float>
Tensor<T> empty(const Shape& shape) { return AnyTensor::empty(shape, dtype_v<T>); }
/// A tensor of zeros.
template <Element T = float>
Tensor<T> zeros(const Shape& shape) { return ops::zeros(shape, dtype_v<T>); }
/// A tensor of ones.
template <Element T = float>
Tensor<T> ones(const Shape& shape) { return ops::ones(shape, dtype_v<T>); }
/// A tensor filled with `value`; ValueError when T cannot represent it (full<int>(s, 2.5)).
template <Element T = float>
Tensor<T> full(const Shape& shape, ops::Number value) { return ops::full(shape, value, dtype_v<T>); }
template <Element T>
Tensor<T> zeros_like(const Tensor<T>& x) { return ops::zeros_like(x); }
template <Element T>
Tensor<T> ones_like(const Tensor<T>& x) { return ops::ones_like(x); }
template <Element T>
Tensor<T> full_like(const Tensor<T>& x, ops::Number value) { return ops::full_like(x, value); }
/// 0, 1, ..., up to (excluding) stop.
template <Element T>
Tensor<T> arange(ops::Number stop) { return ops::arange(0, stop, 1, dtype_v<T>); }
/// start, start + step, ..., up to (excluding) stop; ceil((stop - start) / step) elements.
template <Element T>
Tensor<T> arange(ops::Number start, ops::Number stop, ops::Number step = 1) {
  return ops::arange(start, stop, step, dtype_v<T>);
}
/// num evenly spaced points from start to stop, both included.
template <Element T = float>
Tensor<T> linspace(double start, double stop, std::int64_t num) { return ops::linspace(start, stop, num, dtype_v<T>); }
/// n x m matrix with ones on the diagonal (m = -1: n x n).
template <Element T = float>
Tensor<T> eye(std::int64_t n, std::int64_t m = -1) { return ops::eye(n, m, dtype_v<T>); }
/// Uniform [0, 1) from the default generator.
template <Element T = float>
Tensor<T> rand(const Shape& shape) { return ops::rand(shape, dtype_v<T>); }
/// Standard normal from the default generator.
template <Element T = float>
Tensor<T> randn(const Shape& shape) { return ops::randn(shape, dtype_v<T>); }
/// Uniform integers in [low, high) from the default generator.
template <Element T = std::int64_t>
Tensor<T> randint(std::int64_t low, std::int64_t high, const Shape& shape) {
  return ops::randint(low, high, shape, dtype_v<T>);
}
/// A 0-d tensor holding `value`.
template <Element T>
Tensor<T> scalar(ops::Number value) { return ops::full(Shape{}, value, dtype_v<T>); }

/// A contiguous tensor holding a copy of `values`; ShapeError when their count is not numel(shape).
template <Element T>
Tensor<T> from_vector(const std::vector<T>& values, const Shape& shape) {
  std::int64_t n = numel(shape);
  for (auto d : shape) MS_CHECK(d >= 0, ShapeError, "from_vector: negative dimension in shape {}", shape_str(shape));
  MS_CHECK(static_cast<std::int64_t>(values.size()) == n, ShapeError,
           "from_vector: {} values cannot fill shape {} ({} elements)", values.size(), shape_str(shape), n);
  Tensor<T> t = AnyTensor::empty(shape, dtype_v<T>);
  T* p = static_cast<T*>(t.raw_data());
  for (std::int64_t i = 0; i < n; ++i) p[i] = values[static_cast<std::size_t>(i)];  // vector<bool> has no data()
  return t;
}
/// A 1-D tensor holding a copy of `values`.
template <Element T>
Tensor<T> from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{static_cast<std::int64_t>(values.size())});
}

/// A tensor over a user buffer, without a copy. `strides` are in elements and must be
/// non-negative. The buffer must outlive every tensor (and view) made from it; when a
/// `deleter` is given it is called with `data` once the last of them is gone.
template <Element T>
Tensor<T> from_blob(T* data, const Shape& shape, const Shape& strides, std::function<void(void*)> deleter = {}) {
  MS_CHECK(strides.rank() == shape.rank(), ShapeError, "from_blob: strides {} do not match shape {}",
           shape_str(strides), shape_str(shape));
  std::int64_t n = 1, extent = 0;
  for (int i = 0; i < shape.rank(); ++i) {
    MS_CHECK(shape[i] >= 0, ShapeError, "from_blob: negative dimension in shape {}", shape_str(shape));
    MS_CHECK(strides[i] >= 0, ValueError, "from_blob: negative stride in {} (shape {})", shape_str(strides),
             shape_str(shape));
    n *= shape[i];
    if (shape[i] > 0) extent += (shape[i] - 1) * strides[i];
  }
  MS_CHECK(data != nullptr || n == 0, ValueError, "from_blob: data is null for shape {}", shape_str(shape));
  std::size_t nbytes = n == 0 ? 0 : static_cast<std::size_t>(extent + 1) * sizeof(T);
  auto storage = Storage::borrowed(static_cast<void*>(data), nbytes, Device::cpu(), std::move(deleter));
  return AnyTensor::view_of(std::move(storage), shape, strides, 0, dtype_v<T>);
}
/// A contiguous (row-major) tensor over a user buffer, without a copy.
template <Element T>
Tensor<T> from_blob(T* data, const Shape& shape, std::function<void(void*)> deleter = {}) {
  return from_blob(data, shape, contiguous_strides(shape), std::move(deleter));
}

}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::ops {
MS_IMPL AnyTensor full(const Shape& shape, Number value, DType dtype) {
  return call1(fill_op, {}, Attrs{{"shape", shape.vec()}, {"dtype", dtype}, {"value", value.value}});
}

MS_IMPL AnyTensor arange(Number start, Number stop, Number step, DType dtype) {
  return call1(arange_op, {}, Attrs{{"start", start.value}, {"stop", stop.value}, {"step", step.value}, {"dtype", dtype}});
}

MS_IMPL AnyTensor linspace(double start, double stop, std::int64_t num, DType dtype) {
  return call1(linspace_op, {}, Attrs{{"start", start}, {"stop", stop}, {"num", num}, {"dtype", dtype}});
}

MS_IMPL AnyTensor eye(std::int64_t n, std::int64_t m, DType dtype) {
  return call1(eye_op, {}, Attrs{{"n", n}, {"m", m == -1 ? n : m}, {"dtype", dtype}});
}

namespace creation_detail {
inline Attrs random_attrs(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed) {
  Attrs a{{"shape", shape.vec()}, {"dtype", dtype}};
  if (seed) a.set("seed", static_cast<std::int64_t>(*seed));
  return a;
}

}  // namespace creation_detail
MS_IMPL AnyTensor rand(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed) {
  return call1(rand_op, {}, creation_detail::random_attrs(shape, dtype, seed));
}

MS_IMPL AnyTensor randn(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed) {
  return call1(randn_op, {}, creation_detail::random_attrs(shape, dtype, seed));
}

MS_IMPL AnyTensor randint(std::int64_t low, std::int64_t high, const Shape& shape, DType dtype,
                         std::optional<std::uint64_t> seed) {
  Attrs a = creation_detail::random_attrs(shape, dtype, seed);
  a.set("low", low);
  a.set("high", high);
  return call1(randint_op, {}, a);
}

}  // namespace ms::ops
#endif
