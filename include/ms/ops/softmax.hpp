#pragma once
// Softmax and log_softmax over one axis (numerically stable: the
// maximum is subtracted before exp). Belongs here: their op definitions and the CPU
// kernels' thread split; the loops (xsimd exp along contiguous rows, column tiles for any
// other axis) are in backend/cpu/kernels/softmax.hpp, per CPU level.
// Layer-level normalizations (batch/layer norm) belong with nn.

#include <algorithm>
#include <vector>

#include "../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../backend/cpu/kernels/softmax.hpp"
#include "isa_dispatch.hpp"
#endif

#include "../core/parallel.hpp"
#include "attr_struct.hpp"
#include "views.hpp"

namespace ms::ops {

/// exp(x - max) / sum(exp(x - max)) along `axis` (default the last); float dtypes.
MS_IMPL AnyTensor softmax(const AnyTensor& x, std::int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`: the log of softmax without its underflow.
MS_IMPL AnyTensor log_softmax(const AnyTensor& x, std::int64_t axis = -1);

}  // namespace ms::ops

namespace ms {
/// Softmax along `axis` (default the last).
template <Element T>
Tensor<T> softmax(const Tensor<T>& x, std::int64_t axis = -1) { return ops::softmax(x, axis); }
/// Log-softmax along `axis` (default the last).
template <Element T>
Tensor<T> log_softmax(const Tensor<T>& x, std::int64_t axis = -1) { return ops::log_softmax(x, axis); }
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of softmax and log_softmax (see ops/attr_struct.hpp).
struct SoftmaxAttrs {
  std::int64_t axis = -1;
  static auto fields() { return std::tuple{field("axis", &SoftmaxAttrs::axis, -1)}; }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

inline void infer_softmax(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  normalize_axis(attrs_as<SoftmaxAttrs>(op, a).axis, in[0].shape.rank(), op.name);
  out.push_back(in[0]);
}

template <bool Log>
void softmax_kernel(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const AnyTensor& y = k.out[0];
  if (y.numel() == 0) return;
  const int rank = x.dim();
  const int ax = rank == 0 ? 0 : normalize_axis(attrs_as<SoftmaxAttrs>(k.op, k.attrs).axis, rank, k.op.name);
  std::int64_t A = 1, R = 1, C = 1;
  for (int i = 0; i < rank; ++i) (i < ax ? A : i == ax ? R : C) *= x.shape()[i];
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (simd::vectorized_v<T>) {
      const T* xp = static_cast<const T*>(x.raw_data());
      T* yp = static_cast<T*>(y.raw_data());
      // exp costs ~10 flops an element, so threads pay off sooner than for a copy.
      constexpr std::int64_t grain = kParallelGrain / 4;
      // On the kernels of the CPU level in force (backend/cpu/kernels/softmax.hpp).
      static constexpr const char* kRows[2][2] = {{"softmax_rows_f32", "softmax_rows_f64"},
                                                  {"log_softmax_rows_f32", "log_softmax_rows_f64"}};
      static constexpr const char* kCols[2][2] = {{"softmax_cols_f32", "softmax_cols_f64"},
                                                  {"log_softmax_cols_f32", "log_softmax_cols_f64"}};
      if (C == 1) {
        const IsaFn fn = cpu::isa_function_for<T>(kRows[Log][0], kRows[Log][1], &softmax_rows_kernel<Log, T>);
        parallel_for(A, std::max<std::int64_t>(1, grain / R), [&](std::int64_t b, std::int64_t e) {
          const SoftmaxArgs<T> args{xp, yp, R, 1, 1, nullptr, nullptr, b, e};
          fn(&args);
        }, 1);
        return;
      }
      const IsaFn fn = cpu::isa_function_for<T>(kCols[Log][0], kCols[Log][1], &softmax_cols_kernel<Log, T>);
      constexpr std::int64_t TW = 256;
      const std::int64_t ntile = (C + TW - 1) / TW;
      parallel_for(A * ntile, std::max<std::int64_t>(1, grain / (R * std::min(C, TW))), [&](std::int64_t b, std::int64_t e) {
        T m[TW], s[TW];
        for (std::int64_t t = b; t < e; ++t) {
          const std::int64_t a = t / ntile, c0 = (t % ntile) * TW;
          const std::int64_t off = a * R * C + c0;
          const SoftmaxArgs<T> args{xp + off, yp + off, R, C, std::min(TW, C - c0), m, s, 0, 0};
          fn(&args);
        }
      }, 1);
    } else {
      MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, x.dtype());
    }
  });
}

template <bool Log>
OpDef make_softmax_op() {
  OpDef d;
  d.name = Log ? "log_softmax" : "softmax";
  d.doc = Log ? "log of softmax along an axis (x - max - log sum exp)" : "exp(x - max) normalized to sum 1 along an axis";
  d.category = Category::softmax;
  d.num_inputs = 1;
  d.attr_schema = &attr_schema<SoftmaxAttrs>("SoftmaxAttrs");
  d.infer = &infer_softmax;
  d.kernel = &softmax_kernel<Log>;
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    double n = static_cast<double>(numel(in[0].shape));
    return Cost{n * 15, n * static_cast<double>(dtype_size(in[0].dtype) + dtype_size(out[0].dtype))};
  };
  d.cpu_dtypes = kFloatTypes;
  return d;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

MS_REGISTRATION(const OpDef& softmax_op, registry().add(detail::make_softmax_op<false>()));
MS_REGISTRATION(const OpDef& log_softmax_op, registry().add(detail::make_softmax_op<true>()));

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor softmax(const AnyTensor& x, std::int64_t axis) {
  return call1(softmax_op, {x}, to_attrs(SoftmaxAttrs{axis}));
}
MS_IMPL AnyTensor log_softmax(const AnyTensor& x, std::int64_t axis) {
  return call1(log_softmax_op, {x}, to_attrs(SoftmaxAttrs{axis}));
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
