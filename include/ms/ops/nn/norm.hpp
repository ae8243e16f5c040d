#pragma once
// Normalization over a batch or a layer (float32 and float64): batch_norm (updates its
// running statistics in place, inside the kernel, so a replayed graph updates them too) and
// layer_norm. Belongs here: their definitions, inference, kernels and costs, and their
// backward ops (batch_norm_grad, layer_norm_grad). The gradient table rows live in
// autograd/nn_rules.hpp; softmax and log_softmax in ops/softmax.hpp.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../../core/parallel.hpp"
#include "../../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../../backend/cpu/kernels/norm.hpp"
#include "../isa_dispatch.hpp"
#endif
#include "../dispatch.hpp"
#include "../factory.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// Batch normalization over axis 1 of x (N, C, ...). weight/bias (C,) may be undefined (1 and 0).
/// training: normalizes with the batch statistics (biased variance) and, when running_mean and
/// running_var are given, updates them IN PLACE: r = (1 - momentum) * r + momentum * batch stat
/// (the variance unbiased). Eval: normalizes with the running statistics.
MS_IMPL AnyTensor batch_norm(const AnyTensor& x, const AnyTensor& weight, const AnyTensor& bias,
                             const AnyTensor& running_mean, const AnyTensor& running_var, bool training,
                             double momentum = 0.1, double eps = 1e-5);
/// Layer normalization over the trailing dims `normalized_shape`; weight/bias of that shape, optional.
MS_IMPL AnyTensor layer_norm(const AnyTensor& x, const IntList& normalized_shape, const AnyTensor& weight = AnyTensor(),
                             const AnyTensor& bias = AnyTensor(), double eps = 1e-5);

}  // namespace ms::ops

namespace ms {
/// Batch normalization (see ops::batch_norm); training updates running_mean/running_var in place.
template <Element T>
Tensor<T> batch_norm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                     const Tensor<T>& running_mean, const Tensor<T>& running_var, bool training,
                     double momentum = 0.1, double eps = 1e-5) {
  return ops::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
}
/// Layer normalization over the trailing `normalized_shape` dims.
template <Element T>
Tensor<T> layer_norm(const Tensor<T>& x, const ops::IntList& normalized_shape, const Tensor<T>& weight = Tensor<T>(),
                     const Tensor<T>& bias = Tensor<T>(), double eps = 1e-5) {
  return ops::layer_norm(x, normalized_shape, weight, bias, eps);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of batch_norm (see ops/attr_struct.hpp).
struct BatchNormAttrs {
  bool training = false;
  double momentum = 0.1, eps = 1e-5;
  static auto fields() {
    using S = BatchNormAttrs;
    return std::tuple{field("training", &S::training, false), field("momentum", &S::momentum, 0.1),
                      field("eps", &S::eps, 1e-5)};
  }
  void validate(const OpDef& op) const {
    MS_CHECK(eps >= 0, ValueError, "{}: eps must be non-negative, got {}", op.name, eps);
  }
};
/// The attributes of batch_norm_grad.
struct BatchNormGradAttrs {
  bool training = false;
  static auto fields() { return std::tuple{field("training", &BatchNormGradAttrs::training, false)}; }
};
/// The attributes of layer_norm.
struct LayerNormAttrs {
  IntList normalized_shape;
  double eps = 1e-5;
  static auto fields() {
    return std::tuple{required_field("normalized_shape", &LayerNormAttrs::normalized_shape),
                      field("eps", &LayerNormAttrs::eps, 1e-5)};
  }
  void validate(const OpDef& op) const {
    MS_CHECK(eps >= 0, ValueError, "{}: eps must be non-negative, got {}", op.name, eps);
  }
};
/// The attributes of layer_norm_grad.
struct LayerNormGradAttrs {
  IntList normalized_shape;
  static auto fields() {
    return std::tuple{required_field("normalized_shape", &LayerNormGradAttrs::normalized_shape)};
  }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

// ---- normalization ------------------------------------------------------------------------------

inline void check_channel_vec(const OpDef& op, const TensorMeta& x, const TensorMeta& v, std::string_view what) {
  check_same_dtype(op, x, v);
  MS_CHECK(v.shape == Shape{x.shape[1]}, ShapeError, "{}: {} shape {} does not match the {} channels of input {}",
           op.name, what, shape_str(v.shape), x.shape[1], shape_str(x.shape));
}

/// (N, C, S): batch, channels and the product of the spatial dims of a batch_norm input.
inline void bn_dims(const Shape& s, std::int64_t& N, std::int64_t& C, std::int64_t& S) {
  N = s[0], C = s[1], S = 1;
  for (int i = 2; i < s.rank(); ++i) S *= s[i];
}

template <class T>
void batch_norm_run(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const auto at = attrs_as<BatchNormAttrs>(k.op, k.attrs);
  const bool training = at.training;
  const double momentum = at.momentum, eps = at.eps;
  std::int64_t N, C, S;
  bn_dims(x.shape(), N, C, S);
  const std::int64_t M = N * S;
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(k.in[1].raw_data());
  const T* bp = static_cast<const T*>(k.in[2].raw_data());
  const std::int64_t ws = k.in[1].strides()[0], bs = k.in[2].strides()[0];
  const bool has_running = k.in.size() == 5;
  T* rm = has_running ? static_cast<T*>(k.in[3].raw_data()) : nullptr;
  T* rv = has_running ? static_cast<T*>(k.in[4].raw_data()) : nullptr;
  const std::int64_t rms = has_running ? k.in[3].strides()[0] : 0, rvs = has_running ? k.in[4].strides()[0] : 0;
  T* yp = static_cast<T*>(k.out[0].raw_data());
  T* mean_out = static_cast<T*>(k.out[1].raw_data());
  T* invstd_out = static_cast<T*>(k.out[2].raw_data());
  const IsaFn fn = cpu::isa_function_for<T>("batch_norm_f32", "batch_norm_f64", &batch_norm_kernel<T>);
  parallel_for(C, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, M)),
               [&](std::int64_t cb, std::int64_t ce) {
    const BatchNormArgs<T> a{xp, wp, bp, ws, bs, rm, rv, rms, rvs, yp, mean_out, invstd_out, N, C, S, M,
                             training, has_running, momentum, eps, cb, ce};
    fn(&a);
  }, 1);
}

template <class T>
void batch_norm_grad_run(const KernelArgs& k) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const bool training = attrs_as<BatchNormGradAttrs>(k.op, k.attrs).training;
  std::int64_t N, C, S;
  bn_dims(x.shape(), N, C, S);
  const std::int64_t M = N * S;
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(k.in[2].raw_data());
  const T* mp = static_cast<const T*>(k.in[3].raw_data());
  const T* ip = static_cast<const T*>(k.in[4].raw_data());
  const std::int64_t ws = k.in[2].strides()[0], ms_ = k.in[3].strides()[0], is = k.in[4].strides()[0];
  T* gx = static_cast<T*>(k.out[0].raw_data());
  T* gw = static_cast<T*>(k.out[1].raw_data());
  T* gb = static_cast<T*>(k.out[2].raw_data());
  const IsaFn fn = cpu::isa_function_for<T>("batch_norm_grad_f32", "batch_norm_grad_f64", &batch_norm_grad_kernel<T>);
  parallel_for(C, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, M)),
               [&](std::int64_t cb, std::int64_t ce) {
    const BatchNormGradArgs<T> a{gp, xp, wp, mp, ip, ws, ms_, is, gx, gw, gb, N, C, S, M, training, cb, ce};
    fn(&a);
  }, 1);
}

/// (rows, D): D is the product of normalized_shape, validated against the input's trailing dims.
inline std::int64_t ln_cols(const OpDef& op, const Shape& xs, const IntList& ns, Shape* outer = nullptr) {
  const int k = static_cast<int>(ns.size());
  MS_CHECK(k >= 1 && k <= xs.rank(), ShapeError, "{}: normalized_shape {} does not fit input {}", op.name, ints_str(ns),
           shape_str(xs));
  std::int64_t D = 1;
  for (int i = 0; i < k; ++i) {
    MS_CHECK(xs[xs.rank() - k + i] == ns[static_cast<std::size_t>(i)], ShapeError,
             "{}: normalized_shape {} does not match the trailing dims of input {}", op.name, ints_str(ns),
             shape_str(xs));
    D *= ns[static_cast<std::size_t>(i)];
  }
  if (outer) {
    *outer = Shape{};
    for (int i = 0; i < xs.rank() - k; ++i) outer->push_back(xs[i]);
  }
  return D;
}

template <class T>
void layer_norm_run(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const auto at = attrs_as<LayerNormAttrs>(k.op, k.attrs);
  const double eps = at.eps;
  const std::int64_t D = ln_cols(k.op, x.shape(), at.normalized_shape), R = D == 0 ? 0 : x.numel() / D;
  AnyTensor w = k.in.size() > 1 ? contiguous_raw(k.in[1]) : AnyTensor();
  AnyTensor b = k.in.size() > 2 ? contiguous_raw(k.in[2]) : AnyTensor();
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  const T* bp = b.defined() ? static_cast<const T*>(b.raw_data()) : nullptr;
  T* yp = static_cast<T*>(k.out[0].raw_data());
  T* mo = static_cast<T*>(k.out[1].raw_data());
  T* ro = static_cast<T*>(k.out[2].raw_data());
  if (D == 0) {  // nothing to normalize: mean 0, rstd of eps
    for (std::int64_t i = 0; i < k.out[1].numel(); ++i) mo[i] = T(0), ro[i] = static_cast<T>(1.0 / std::sqrt(eps));
    return;
  }
  const IsaFn fn = cpu::isa_function_for<T>("layer_norm_f32", "layer_norm_f64", &layer_norm_kernel<T>);
  parallel_for(R, std::max<std::int64_t>(1, kParallelGrain / D), [&](std::int64_t rb, std::int64_t re) {
    const LayerNormArgs<T> a{xp, wp, bp, nullptr, nullptr, nullptr, yp, mo, ro,
                             nullptr, nullptr, nullptr, R, D, eps, rb, re};
    fn(&a);
  }, 1);
}

template <class T>
void layer_norm_grad_run(const KernelArgs& k) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const AnyTensor mean = contiguous_raw(k.in[2]), rstd = contiguous_raw(k.in[3]);
  const AnyTensor w = k.in.size() > 4 ? contiguous_raw(k.in[4]) : AnyTensor();
  const auto at = attrs_as<LayerNormGradAttrs>(k.op, k.attrs);
  const std::int64_t D = ln_cols(k.op, x.shape(), at.normalized_shape), R = D == 0 ? 0 : x.numel() / D;
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* mp = static_cast<const T*>(mean.raw_data());
  const T* rp = static_cast<const T*>(rstd.raw_data());
  const T* wp = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  T* gx = static_cast<T*>(k.out[0].raw_data());
  T* gw = static_cast<T*>(k.out[1].raw_data());
  T* gb = static_cast<T*>(k.out[2].raw_data());
  if (D == 0) return;
  const IsaFn rows_fn =
      cpu::isa_function_for<T>("layer_norm_grad_rows_f32", "layer_norm_grad_rows_f64", &layer_norm_grad_rows_kernel<T>);
  const IsaFn cols_fn =
      cpu::isa_function_for<T>("layer_norm_grad_cols_f32", "layer_norm_grad_cols_f64", &layer_norm_grad_cols_kernel<T>);
  parallel_for(R, std::max<std::int64_t>(1, kParallelGrain / D), [&](std::int64_t rb, std::int64_t re) {
    const LayerNormArgs<T> a{xp, wp, nullptr, gp, mp, rp, nullptr, nullptr, nullptr, gx, gw, gb, R, D, 0.0, rb, re};
    rows_fn(&a);
  }, 1);
  // weight and bias gradients: column sums over the rows (parallel over columns, no races)
  parallel_for(D, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, R)),
               [&](std::int64_t cb, std::int64_t ce) {
    const LayerNormArgs<T> a{xp, wp, nullptr, gp, mp, rp, nullptr, nullptr, nullptr, gx, gw, gb, R, D, 0.0, cb, ce};
    cols_fn(&a);
  }, 1);
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// batch_norm(x, weight, bias[, running_mean, running_var]; training, momentum, eps)
//   -> (y, mean, invstd). SIDE EFFECT: with training=true the kernel writes the updated running
//   statistics into the running_mean / running_var input buffers (so a replayed graph updates them).
MS_REGISTRATION(const OpDef& batch_norm_op, registry().add([] {
  OpDef d;
  d.name = "batch_norm";
  d.category = Category::nn;
  d.num_inputs = -1;  // x, weight, bias and optionally running_mean, running_var
  d.doc = "batch normalization over axis 1 of x (N, C, ...); outputs y, mean, invstd. SIDE EFFECT: training=true "
          "updates the running_mean/running_var INPUTS in place (momentum, unbiased variance), in eager mode and on "
          "every graph replay";
  d.attr_schema = &attr_schema<BatchNormAttrs>("BatchNormAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.writes_inputs = (1u << 3) | (1u << 4);  // running_mean, running_var
  d.writes_when = [](const Attrs& a, std::size_t num_inputs) { return num_inputs == 5 && a.b("training"); };
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 3 || in.size() == 5, ValueError,
             "{}: expected 3 or 5 inputs (x, weight, bias[, running_mean, running_var]), got {}", op.name, in.size());
    const TensorMeta& x = in[0];
    MS_CHECK(x.shape.rank() >= 2, ShapeError, "{}: input must have at least 2 dims (N, C, ...), got shape {}", op.name,
             shape_str(x.shape));
    detail::check_channel_vec(op, x, in[1], "weight");
    detail::check_channel_vec(op, x, in[2], "bias");
    if (in.size() == 5) {
      detail::check_channel_vec(op, x, in[3], "running_mean");
      detail::check_channel_vec(op, x, in[4], "running_var");
    }
    const auto at = attrs_as<BatchNormAttrs>(op, a);
    const bool training = at.training;
    MS_CHECK(training || in.size() == 5, ValueError, "{}: eval mode (training=false) needs running_mean and running_var",
             op.name);
    MS_CHECK(!training || numel(x.shape) / std::max<std::int64_t>(1, x.shape[1]) > 1 || numel(x.shape) == 0, ValueError,
             "{}: training needs more than 1 value per channel, got input shape {}", op.name, shape_str(x.shape));
    out.push_back(x);
    out.push_back({x.dtype, Shape{x.shape[1]}});
    out.push_back({x.dtype, Shape{x.shape[1]}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::batch_norm_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// batch_norm_grad(g, x, weight, mean, invstd; training) -> (grad x, grad weight, grad bias).
MS_REGISTRATION(const OpDef& batch_norm_grad_op, registry().add([] {
  OpDef d;
  d.name = "batch_norm_grad";
  d.category = Category::nn;
  d.num_inputs = 5;
  d.doc = "gradient of batch_norm w.r.t. x, weight and bias, from the saved mean and invstd";
  d.attr_schema = &attr_schema<BatchNormGradAttrs>("BatchNormGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    attrs_as<BatchNormGradAttrs>(op, a);  // known names and kinds
    const TensorMeta& x = in[1];
    MS_CHECK(x.shape.rank() >= 2, ShapeError, "{}: input must have at least 2 dims (N, C, ...), got shape {}", op.name,
             shape_str(x.shape));
    check_same_dtype(op, in[0], x);
    MS_CHECK(in[0].shape == x.shape, ShapeError, "{}: gradient shape {} does not match input {}", op.name,
             shape_str(in[0].shape), shape_str(x.shape));
    detail::check_channel_vec(op, x, in[2], "weight");
    detail::check_channel_vec(op, x, in[3], "mean");
    detail::check_channel_vec(op, x, in[4], "invstd");
    out.push_back(x);
    out.push_back(in[2]);
    out.push_back(in[2]);
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::batch_norm_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// layer_norm(x[, weight[, bias]]; normalized_shape, eps) -> (y, mean, rstd).
MS_REGISTRATION(const OpDef& layer_norm_op, registry().add([] {
  OpDef d;
  d.name = "layer_norm";
  d.category = Category::nn;
  d.num_inputs = -1;  // x and optionally weight, bias
  d.doc = "layer normalization over the trailing normalized_shape dims; outputs y, mean, rstd";
  d.attr_schema = &attr_schema<LayerNormAttrs>("LayerNormAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() >= 1 && in.size() <= 3, ValueError, "{}: expected 1 to 3 inputs (x[, weight[, bias]]), got {}",
             op.name, in.size());
    const auto at = attrs_as<LayerNormAttrs>(op, a);
    Shape outer;
    detail::ln_cols(op, in[0].shape, at.normalized_shape, &outer);
    const Shape ns(at.normalized_shape);
    for (std::size_t i = 1; i < in.size(); ++i) {
      check_same_dtype(op, in[0], in[i]);
      MS_CHECK(in[i].shape == ns, ShapeError, "{}: {} shape {} does not match normalized_shape {}", op.name,
               i == 1 ? "weight" : "bias", shape_str(in[i].shape), shape_str(ns));
    }
    out.push_back(in[0]);
    out.push_back({in[0].dtype, outer});
    out.push_back({in[0].dtype, outer});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::layer_norm_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// layer_norm_grad(g, x, mean, rstd[, weight]; normalized_shape) -> (grad x, grad weight, grad bias).
MS_REGISTRATION(const OpDef& layer_norm_grad_op, registry().add([] {
  OpDef d;
  d.name = "layer_norm_grad";
  d.category = Category::nn;
  d.num_inputs = -1;  // g, x, mean, rstd and optionally weight
  d.doc = "gradient of layer_norm w.r.t. x, weight and bias, from the saved mean and rstd";
  d.attr_schema = &attr_schema<LayerNormGradAttrs>("LayerNormGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 4 || in.size() == 5, ValueError,
             "{}: expected 4 or 5 inputs (g, x, mean, rstd[, weight]), got {}", op.name, in.size());
    const auto at = attrs_as<LayerNormGradAttrs>(op, a);
    Shape outer;
    detail::ln_cols(op, in[1].shape, at.normalized_shape, &outer);
    const Shape ns(at.normalized_shape);
    for (std::size_t i = 0; i < in.size(); ++i) check_same_dtype(op, in[1], in[i]);
    MS_CHECK(in[0].shape == in[1].shape, ShapeError, "{}: gradient shape {} does not match input {}", op.name,
             shape_str(in[0].shape), shape_str(in[1].shape));
    MS_CHECK(in[2].shape == outer && in[3].shape == outer, ShapeError,
             "{}: mean {} and rstd {} must have the leading shape {} of input {}", op.name, shape_str(in[2].shape),
             shape_str(in[3].shape), shape_str(outer), shape_str(in[1].shape));
    MS_CHECK(in.size() < 5 || in[4].shape == ns, ShapeError, "{}: weight shape {} does not match normalized_shape {}",
             op.name, in.size() < 5 ? "" : shape_str(in[4].shape), shape_str(ns));
    out.push_back(in[1]);
    out.push_back({in[1].dtype, ns});
    out.push_back({in[1].dtype, ns});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::layer_norm_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<10>;
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor batch_norm(const AnyTensor& x, const AnyTensor& weight, const AnyTensor& bias,
                             const AnyTensor& running_mean, const AnyTensor& running_var, bool training, double momentum,
                             double eps) {
  MS_CHECK(x.defined() && x.dim() >= 2, ShapeError, "batch_norm: input must have at least 2 dims (N, C, ...), got shape {}",
           x.defined() ? shape_str(x.shape()) : std::string("(undefined)"));
  MS_CHECK(running_mean.defined() == running_var.defined(), ValueError,
           "batch_norm: give both running_mean and running_var, or neither");
  const Shape c{x.shape()[1]};
  AnyTensor w = weight.defined() ? weight : ones(c, x.dtype());
  AnyTensor b = bias.defined() ? bias : zeros(c, x.dtype());
  const Attrs a = to_attrs(BatchNormAttrs{training, momentum, eps});
  std::vector<AnyTensor> in{x, w, b};
  if (running_mean.defined()) {
    in.push_back(running_mean);
    in.push_back(running_var);
  }
  return call(batch_norm_op, in, a)[0];
}
MS_IMPL AnyTensor layer_norm(const AnyTensor& x, const IntList& normalized_shape, const AnyTensor& weight,
                             const AnyTensor& bias, double eps) {
  const Attrs a = to_attrs(LayerNormAttrs{normalized_shape, eps});
  std::vector<AnyTensor> in{x};
  if (weight.defined() || bias.defined()) in.push_back(weight.defined() ? weight : ones(Shape(normalized_shape), x.dtype()));
  if (bias.defined()) in.push_back(bias);
  return call(layer_norm_op, in, a)[0];
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
