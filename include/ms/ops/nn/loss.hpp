#pragma once
// The losses (float32 and float64): cross_entropy (fused, numerically stable log_softmax;
// label smoothing, ignore_index), nll_loss and mse_loss, each reduced by "mean", "sum" or
// "none". Belongs here: their definitions, inference, kernels and costs, and the backward
// ops their gradient rules need (cross_entropy_grad, nll_loss_grad). The gradient table
// rows live in autograd/nn_rules.hpp.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "../../core/parallel.hpp"
#include "../../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../../backend/cpu/kernels/loss.hpp"
#include "../isa_dispatch.hpp"
#endif
#include "../dispatch.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// Cross entropy of logits (N, C) against int64 class targets (N,), computed with a fused,
/// numerically stable log_softmax. reduction "mean" (over non-ignored rows), "sum" or "none";
/// label_smoothing mixes the one-hot target with the uniform distribution; rows whose target is
/// ignore_index contribute nothing.
MS_IMPL AnyTensor cross_entropy(const AnyTensor& logits, const AnyTensor& target, std::string_view reduction = "mean",
                                double label_smoothing = 0.0, std::int64_t ignore_index = -100);
/// Negative log likelihood of log-probabilities (N, C) at int64 targets (N,).
MS_IMPL AnyTensor nll_loss(const AnyTensor& log_probs, const AnyTensor& target, std::string_view reduction = "mean",
                           std::int64_t ignore_index = -100);
/// Mean (or sum, or elementwise) squared error of two tensors of the same shape.
MS_IMPL AnyTensor mse_loss(const AnyTensor& a, const AnyTensor& b, std::string_view reduction = "mean");

}  // namespace ms::ops

namespace ms {
/// Cross entropy of logits (N, C) and int64 targets (N,).
template <Element T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const Tensor<std::int64_t>& target, std::string_view reduction = "mean",
                        double label_smoothing = 0.0, std::int64_t ignore_index = -100) {
  return ops::cross_entropy(logits, target, reduction, label_smoothing, ignore_index);
}
/// Negative log likelihood of log-probabilities (N, C) at int64 targets (N,).
template <Element T>
Tensor<T> nll_loss(const Tensor<T>& log_probs, const Tensor<std::int64_t>& target, std::string_view reduction = "mean",
                   std::int64_t ignore_index = -100) {
  return ops::nll_loss(log_probs, target, reduction, ignore_index);
}
/// Mean squared error ("mean", "sum" or "none").
template <Element T>
Tensor<T> mse_loss(const Tensor<T>& a, const Tensor<T>& b, std::string_view reduction = "mean") {
  return ops::mse_loss(a, b, reduction);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {
namespace detail {

/// The reduction attribute: "mean", "sum" or "none".
enum class Reduction : std::uint8_t { mean, sum, none };
inline std::optional<Reduction> parse_reduction(std::string_view r) {
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  return std::nullopt;
}
inline Reduction reduction_kind(const OpDef& op, const std::string& r) {
  if (const auto k = parse_reduction(r)) return *k;
  MS_THROW(ValueError, "{}: reduction must be \"mean\", \"sum\" or \"none\", got \"{}\"", op.name, r);
}

}  // namespace detail

/// The attributes of mse_loss (see ops/attr_struct.hpp).
struct MseLossAttrs {
  std::string reduction = "mean";
  static auto fields() { return std::tuple{field("reduction", &MseLossAttrs::reduction, "mean")}; }
  void validate(const OpDef& op) const { detail::reduction_kind(op, reduction); }
  /// The reduction as an enum (validate has checked the name).
  detail::Reduction kind() const { return detail::parse_reduction(reduction).value_or(detail::Reduction::mean); }
};
/// The attributes of cross_entropy and cross_entropy_grad.
struct CrossEntropyAttrs : MseLossAttrs {
  double label_smoothing = 0.0;
  std::int64_t ignore_index = -100;
  static auto fields() {
    return std::tuple_cat(MseLossAttrs::fields(),
                          std::tuple{field("label_smoothing", &CrossEntropyAttrs::label_smoothing, 0.0),
                                     field("ignore_index", &CrossEntropyAttrs::ignore_index, -100)});
  }
  void validate(const OpDef& op) const {
    MseLossAttrs::validate(op);
    const double ls = label_smoothing;
    MS_CHECK(ls >= 0.0 && ls <= 1.0, ValueError, "{}: label_smoothing must be in [0, 1], got {}", op.name, ls);
  }
};
/// The attributes of nll_loss.
struct NllLossAttrs : MseLossAttrs {
  std::int64_t ignore_index = -100;
  static auto fields() {
    return std::tuple_cat(MseLossAttrs::fields(), std::tuple{field("ignore_index", &NllLossAttrs::ignore_index, -100)});
  }
};
/// The attributes of nll_loss_grad: nll_loss's and the number of classes.
struct NllLossGradAttrs : NllLossAttrs {
  std::int64_t num_classes = 0;
  static auto fields() {
    return std::tuple_cat(NllLossAttrs::fields(),
                          std::tuple{required_field("num_classes", &NllLossGradAttrs::num_classes)});
  }
  void validate(const OpDef& op) const {
    NllLossAttrs::validate(op);
    MS_CHECK(num_classes >= 0, ValueError, "{}: num_classes must be non-negative, got {}", op.name, num_classes);
  }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

// ---- losses ---------------------------------------------------------------------------------------

/// Checks a (N, C) float input and its int64 target (N,).
inline void check_class_target(const OpDef& op, const TensorMeta& in, const TensorMeta& target, std::string_view what) {
  MS_CHECK(in.shape.rank() == 2, ShapeError, "{}: {} must be 2-D (N, C), got shape {}", op.name, what,
           shape_str(in.shape));
  MS_CHECK(target.dtype == DType::i64, DTypeError, "{}: target must be int64, got {} (shape {})", op.name,
           target.dtype, shape_str(target.shape));
  MS_CHECK(target.shape == Shape{in.shape[0]}, ShapeError, "{}: target shape {} does not match {} of shape {}",
           op.name, shape_str(target.shape), what, shape_str(in.shape));
}

/// Checks every target is in [0, C) or equals ignore_index, before any parallel work.
inline void check_targets(const OpDef& op, const AnyTensor& target, std::int64_t C, std::int64_t ignore_index) {
  const std::int64_t* t = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t st = target.strides().empty() ? 1 : target.strides()[0];
  for (std::int64_t i = 0; i < target.numel(); ++i) {
    const std::int64_t v = t[i * st];
    MS_CHECK(v == ignore_index || (v >= 0 && v < C), IndexError,
             "{}: target {} at position {} is out of range for {} classes", op.name, v, i, C);
  }
}

/// The loss output: () for mean/sum, (N,) for none.
inline Shape loss_shape(Reduction r, std::int64_t n) { return r == Reduction::none ? Shape{n} : Shape{}; }

/// The gradient of a loss output: () for mean/sum, (N,) for none.
inline void check_loss_grad(const OpDef& op, const TensorMeta& g, Reduction r, std::int64_t n, DType dt) {
  MS_CHECK(g.shape == loss_shape(r, n), ShapeError, "{}: gradient shape {} does not match the loss shape {}", op.name,
           shape_str(g.shape), shape_str(loss_shape(r, n)));
  MS_CHECK(g.dtype == dt, DTypeError, "{}: gradient dtype {} does not match {}", op.name, g.dtype, dt);
}

/// Writes per-row losses `row` (n of them, `keep` marks non-ignored rows) to out by reduction.
template <class T>
void reduce_loss(const std::vector<double>& row, const std::vector<char>& keep, Reduction r, T* out) {
  if (r == Reduction::none) {
    for (std::size_t i = 0; i < row.size(); ++i) out[i] = static_cast<T>(row[i]);
    return;
  }
  double s = 0;
  std::int64_t cnt = 0;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (keep[i]) s += row[i], ++cnt;
  out[0] = static_cast<T>(r == Reduction::sum ? s : s / static_cast<double>(cnt));  // all ignored: NaN
}

/// Number of targets that are not ignore_index.
inline std::int64_t count_kept(const AnyTensor& target, std::int64_t ignore_index) {
  const std::int64_t* t = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t st = target.strides().empty() ? 1 : target.strides()[0];
  std::int64_t cnt = 0;
  for (std::int64_t i = 0; i < target.numel(); ++i) cnt += t[i * st] != ignore_index;
  return cnt;
}

/// The arguments both cross-entropy kernels read: logits z (N, C), targets, ignore_index
/// and label smoothing.
template <class T>
CrossEntropyArgs<T> cross_entropy_args(const AnyTensor& z, const AnyTensor& target, const CrossEntropyAttrs& at) {
  CrossEntropyArgs<T> a{};
  a.z = static_cast<const T*>(z.raw_data()), a.target = static_cast<const std::int64_t*>(target.raw_data());
  a.ts = target.strides()[0], a.ignore = at.ignore_index, a.C = z.shape()[1], a.eps = at.label_smoothing;
  return a;
}

template <class T>
void cross_entropy_run(const KernelArgs& k) {
  const AnyTensor z = contiguous_raw(k.in[0]);
  const AnyTensor& target = k.in[1];
  const auto at = attrs_as<CrossEntropyAttrs>(k.op, k.attrs);
  const Reduction red = at.kind();
  const std::int64_t N = z.shape()[0], C = z.shape()[1];
  check_targets(k.op, target, C, at.ignore_index);
  std::vector<double> row(static_cast<std::size_t>(N), 0.0);
  std::vector<char> keep(static_cast<std::size_t>(N), 0);
  // On the kernels of the CPU level in force (backend/cpu/kernels/loss.hpp).
  const IsaFn fn = cpu::isa_function_for<T>("cross_entropy_f32", "cross_entropy_f64", &cross_entropy_kernel<T>);
  parallel_for(N, std::max<std::int64_t>(1, kParallelGrain / 8 / std::max<std::int64_t>(1, C)),
               [&](std::int64_t b, std::int64_t end) {
    std::vector<double> e(cross_entropy_scratch(C));
    CrossEntropyArgs<T> a = cross_entropy_args<T>(z, target, at);
    a.row = row.data(), a.keep = keep.data(), a.e = e.data(), a.i0 = b, a.i1 = end;
    fn(&a);
  }, 1);
  reduce_loss(row, keep, red, static_cast<T*>(k.out[0].raw_data()));
}

template <class T>
void cross_entropy_grad_run(const KernelArgs& k) {
  const AnyTensor z = contiguous_raw(k.in[0]);
  const AnyTensor& target = k.in[1];
  const AnyTensor g = contiguous_raw(k.in[2]);
  const auto at = attrs_as<CrossEntropyAttrs>(k.op, k.attrs);
  const Reduction red = at.kind();
  const std::int64_t N = z.shape()[0], C = z.shape()[1];
  check_targets(k.op, target, C, at.ignore_index);
  const double denom = red == Reduction::mean ? static_cast<double>(count_kept(target, at.ignore_index)) : 1.0;
  const IsaFn fn =
      cpu::isa_function_for<T>("cross_entropy_grad_f32", "cross_entropy_grad_f64", &cross_entropy_grad_kernel<T>);
  parallel_for(N, std::max<std::int64_t>(1, kParallelGrain / 8 / std::max<std::int64_t>(1, C)),
               [&](std::int64_t b, std::int64_t end) {
    std::vector<double> e(cross_entropy_scratch(C));
    CrossEntropyArgs<T> a = cross_entropy_args<T>(z, target, at);
    a.g = static_cast<const T*>(g.raw_data()), a.g_per_row = red == Reduction::none, a.denom = denom;
    a.out = static_cast<T*>(k.out[0].raw_data()), a.e = e.data(), a.i0 = b, a.i1 = end;
    fn(&a);
  }, 1);
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// cross_entropy(logits, target; reduction, label_smoothing, ignore_index).
MS_REGISTRATION(const OpDef& cross_entropy_op, registry().add([] {
  OpDef d;
  d.name = "cross_entropy";
  d.input_names = {"logits", "target"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "cross entropy of logits (N, C) and int64 targets (N,) with a fused, stable log_softmax; label smoothing";
  d.attr_schema = &attr_schema<CrossEntropyAttrs>("CrossEntropyAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "logits");
    const auto at = attrs_as<CrossEntropyAttrs>(op, a);
    out.push_back({in[0].dtype, detail::loss_shape(at.kind(), in[0].shape[0])});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::cross_entropy_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<20>;
  return d;
}()));

// cross_entropy_grad(logits, target, g; reduction, label_smoothing, ignore_index) -> grad logits.
MS_REGISTRATION(const OpDef& cross_entropy_grad_op, registry().add([] {
  OpDef d;
  d.name = "cross_entropy_grad";
  d.category = Category::nn;
  d.num_inputs = 3;
  d.doc = "gradient of cross_entropy w.r.t. the logits: g * (softmax - smoothed one-hot) (/ count for mean)";
  d.attr_schema = &attr_schema<CrossEntropyAttrs>("CrossEntropyAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "logits");
    const auto at = attrs_as<CrossEntropyAttrs>(op, a);
    detail::check_loss_grad(op, in[2], at.kind(), in[0].shape[0], in[0].dtype);
    out.push_back(in[0]);
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::cross_entropy_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<20>;
  return d;
}()));

// nll_loss(log_probs, target; reduction, ignore_index).
MS_REGISTRATION(const OpDef& nll_loss_op, registry().add([] {
  OpDef d;
  d.name = "nll_loss";
  d.input_names = {"log_probs", "target"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "negative log likelihood: -log_probs[i, target[i]] for log_probs (N, C), reduced by mean/sum/none";
  d.attr_schema = &attr_schema<NllLossAttrs>("NllLossAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "log_probs");
    out.push_back({in[0].dtype, detail::loss_shape(attrs_as<NllLossAttrs>(op, a).kind(), in[0].shape[0])});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor lp = detail::contiguous_raw(k.in[0]);
    const AnyTensor& target = k.in[1];
    const auto at = attrs_as<NllLossAttrs>(k.op, k.attrs);
    const std::int64_t ignore = at.ignore_index;
    const std::int64_t N = lp.shape()[0], C = lp.shape()[1];
    detail::check_targets(k.op, target, C, ignore);
    const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
    const std::int64_t ts = target.strides()[0];
    detail::visit_float(k, lp.dtype(), [&]<class T>() {
      const T* p = static_cast<const T*>(lp.raw_data());
      std::vector<double> row(static_cast<std::size_t>(N), 0.0);
      std::vector<char> keep(static_cast<std::size_t>(N), 0);
      for (std::int64_t i = 0; i < N; ++i) {
        const std::int64_t t = tp[i * ts];
        if (t == ignore) continue;
        row[static_cast<std::size_t>(i)] = -static_cast<double>(p[i * C + t]);
        keep[static_cast<std::size_t>(i)] = 1;
      }
      detail::reduce_loss(row, keep, at.kind(), static_cast<T*>(k.out[0].raw_data()));
    });
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    return Cost{static_cast<double>(numel(in[1].shape)), detail::bytes_of(in.subspan(1)) + detail::bytes_of(out)};
  };
  return d;
}()));

// nll_loss_grad(target, g; num_classes, reduction, ignore_index) -> grad log_probs (N, C).
MS_REGISTRATION(const OpDef& nll_loss_grad_op, registry().add([] {
  OpDef d;
  d.name = "nll_loss_grad";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of nll_loss w.r.t. log_probs: -g at [i, target[i]] (/ count for mean), 0 elsewhere";
  d.attr_names = {"num_classes", "reduction", "ignore_index"};
  d.attr_schema = &attr_schema<NllLossGradAttrs>("NllLossGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.elementwise.dispatch_input = 1;  // the dtype is the gradient's
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in[0].dtype == DType::i64 && in[0].shape.rank() == 1, DTypeError,
             "{}: target must be 1-D int64, got {} {}", op.name, in[0].dtype, shape_str(in[0].shape));
    const auto at = attrs_as<NllLossGradAttrs>(op, a);
    const std::int64_t C = at.num_classes;
    detail::check_loss_grad(op, in[1], at.kind(), in[0].shape[0], in[1].dtype);
    out.push_back({in[1].dtype, Shape{in[0].shape[0], C}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& target = k.in[0];
    const AnyTensor g = detail::contiguous_raw(k.in[1]);
    const auto at = attrs_as<NllLossGradAttrs>(k.op, k.attrs);
    const std::int64_t ignore = at.ignore_index, C = at.num_classes;
    const detail::Reduction red = at.kind();
    detail::check_targets(k.op, target, C, ignore);
    const std::int64_t N = target.shape()[0], ts = target.strides()[0];
    const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
    const double denom = red == detail::Reduction::mean ? static_cast<double>(detail::count_kept(target, ignore)) : 1.0;
    detail::visit_float(k, g.dtype(), [&]<class T>() {
      const T* gp = static_cast<const T*>(g.raw_data());
      T* o = static_cast<T*>(k.out[0].raw_data());
      std::fill(o, o + N * C, T(0));
      for (std::int64_t i = 0; i < N; ++i) {
        const std::int64_t t = tp[i * ts];
        if (t == ignore) continue;
        o[i * C + t] = static_cast<T>(-static_cast<double>(red == detail::Reduction::none ? gp[i] : gp[0]) / denom);
      }
    });
  };
  d.cost = &detail::per_output_cost<0>;
  return d;
}()));

// mse_loss(a, b; reduction).
MS_REGISTRATION(const OpDef& mse_loss_op, registry().add([] {
  OpDef d;
  d.name = "mse_loss";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "squared error (a - b)^2 of two same-shape tensors, reduced by mean/sum/none";
  d.attr_schema = &attr_schema<MseLossAttrs>("MseLossAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    MS_CHECK(in[0].shape == in[1].shape, ShapeError, "{}: shapes {} and {} differ", op.name, shape_str(in[0].shape),
             shape_str(in[1].shape));
    const bool none = attrs_as<MseLossAttrs>(op, a).kind() == detail::Reduction::none;
    out.push_back({in[0].dtype, none ? in[0].shape : Shape{}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor a = detail::contiguous_raw(k.in[0]), b = detail::contiguous_raw(k.in[1]);
    const detail::Reduction red = attrs_as<MseLossAttrs>(k.op, k.attrs).kind();
    const std::int64_t n = a.numel();
    detail::visit_float(k, a.dtype(), [&]<class T>() {
      const T* ap = static_cast<const T*>(a.raw_data());
      const T* bp = static_cast<const T*>(b.raw_data());
      T* o = static_cast<T*>(k.out[0].raw_data());
      if (red == detail::Reduction::none) {
        parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t i = lo; i < hi; ++i) o[i] = (ap[i] - bp[i]) * (ap[i] - bp[i]);
        });
        return;
      }
      double s = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double dv = static_cast<double>(ap[i]) - static_cast<double>(bp[i]);
        s += dv * dv;
      }
      o[0] = static_cast<T>(red == detail::Reduction::sum ? s : s / static_cast<double>(n));  // empty mean: NaN
    });
  };
  d.cost = &detail::per_input_cost<3>;
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor cross_entropy(const AnyTensor& logits, const AnyTensor& target, std::string_view reduction,
                                double label_smoothing, std::int64_t ignore_index) {
  return call1(cross_entropy_op, {logits, target},
               to_attrs(CrossEntropyAttrs{{std::string(reduction)}, label_smoothing, ignore_index}));
}
MS_IMPL AnyTensor nll_loss(const AnyTensor& log_probs, const AnyTensor& target, std::string_view reduction,
                           std::int64_t ignore_index) {
  return call1(nll_loss_op, {log_probs, target},
               to_attrs(NllLossAttrs{{std::string(reduction)}, ignore_index}));
}
MS_IMPL AnyTensor mse_loss(const AnyTensor& a, const AnyTensor& b, std::string_view reduction) {
  return call1(mse_loss_op, {a, b}, to_attrs(MseLossAttrs{std::string(reduction)}));
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
