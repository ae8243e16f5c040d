#pragma once
// The aclnn mapping: one row per ms op that the Ascend adapter runs natively,
// naming the aclnn kernels it launches, when it applies (dtypes, attributes),
// and how it launches them (two-phase: aclnnXxxGetWorkspaceSize, then aclnnXxx
// on the stream). Ops without a row run on the host (ascend_backend.hpp).
// Must not allocate tensors or pick streams: the caller passes both in.

#include <span>
#include <string_view>
#include <vector>

#include "../../ops/binary.hpp"
#include "../../ops/linalg.hpp"
#include "../../ops/nn.hpp"
#include "../../ops/reduce.hpp"
#include "../../ops/registry.hpp"
#include "../../ops/softmax.hpp"
#include "../../ops/unary.hpp"
#include "../../ops/views.hpp"
#include "acl_handles.hpp"

namespace ms::backend::ascend {

/// What a launch needs besides its tensors.
struct LaunchCtx {
  const AclApi& api;
  aclrtStream stream = nullptr;
  /// Device scratch memory that stays valid until the work queued now has run.
  std::function<void*(std::size_t)> scratch;
  /// A 32-byte aligned device block of floats: 1.0 at element 0, 0.0 at element 1. A tensor
  /// over one of them is the block's address with an element offset: aclCreateTensor needs
  /// an aligned data address.
  void* consts = nullptr;
  /// cubeMathType of Matmul/BatchMatMul (AscendBackend::cube_math_type()).
  std::int8_t cube_math = ACLNN_CUBE_KEEP_DTYPE;
};

/// One row of the mapping.
struct AclnnRule {
  const ops::OpDef* op;      ///< the ms op (its registered handle)
  std::string_view kernels;  ///< the aclnn kernels launched, for IR dumps: "aclnnMatmul+aclnnAdd"
  bool (*supports)(const AclApi& api, std::span<const ops::TensorMeta> in, const ops::Attrs& attrs);
  void (*launch)(LaunchCtx& ctx, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs& attrs);
};

/// The mapping table (see the end of this file).
const std::vector<AclnnRule>& aclnn_rules();

/// The row for `op`, or nullptr.
inline const AclnnRule* find_aclnn_rule(const ops::OpDef& op) {
  for (const AclnnRule& r : aclnn_rules())
    if (r.op == &op) return &r;
  return nullptr;
}

// ====================================================================== implementation

namespace detail {

/// The two phases of one aclnn op; every status checked, the executor never leaked.
template <class GetWs, class... A>
void two_phase(LaunchCtx& ctx, GetWs* get_ws, acl_fn::aclnnLaunch* run, const char* ws_name, const char* run_name,
               A... args) {
  MS_CHECK(get_ws != nullptr && run != nullptr, BackendError, "{}: not found in the AscendCL libraries ({})", run_name,
           ctx.api.libraries);
  std::uint64_t ws = 0;
  ExecutorGuard ex(ctx.api);
  acl_check(ctx.api, get_ws(args..., &ws, ex.out()), ws_name);
  void* wsp = ws > 0 ? ctx.scratch(ws) : nullptr;
  acl_check(ctx.api, run(wsp, ws, ex.release(), ctx.stream), run_name);
}

#define MS_ACLNN(ctx, Name, ...)                                                                              \
  ::ms::backend::ascend::detail::two_phase(ctx, (ctx).api.aclnn##Name##GetWorkspaceSize, (ctx).api.aclnn##Name, \
                                           "aclnn" #Name "GetWorkspaceSize", "aclnn" #Name, __VA_ARGS__)

inline TensorHandle T(LaunchCtx& ctx, const AnyTensor& t, const char* what) { return make_acl_tensor(ctx.api, t, what); }

inline bool has(const AclApi& api, std::string_view kernel) { return api.has_op(kernel); }
inline bool floating(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16; }
inline bool all_dtype(std::span<const ops::TensorMeta> in, bool (*ok)(DType)) {
  for (auto& m : in)
    if (!ok(m.dtype)) return false;
  return true;
}
inline bool numeric(DType d) { return d != DType::b8; }
// The dtype rows of the kernels whose CANN tables are narrower than "floating" or "numeric":
// Matmul/BatchMatMul and the activations Gelu, Tanh, Sigmoid take float16/float (and bf16
// where the chip has it, checked centrally in AscendBackend::supports), never double;
// Relu takes no double and no uint8; Neg no uint8.
inline bool cube_or_act(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }
inline bool relu_dtype(DType d) { return cube_or_act(d) || d == DType::i32 || d == DType::i64; }
inline bool neg_dtype(DType d) { return numeric(d) && d != DType::u8; }
inline bool any_dtype(DType d) { return acl_dtype(d).has_value(); }

/// Axes of a reduction, normalized and all axes when the attribute is empty.
inline std::vector<std::int64_t> reduce_axes(const ops::Attrs& a, int rank) {
  std::vector<std::int64_t> axes = a.has("axes") ? a.ints("axes") : std::vector<std::int64_t>{};
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& x : axes)
    if (x < 0) x += rank;
  return axes;
}

// ---- rows

template <bool Sub>
void launch_add(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs&) {
  auto a = T(c, in[0], "self"), b = T(c, in[1], "other"), o = T(c, out[0], "out");
  auto one = make_acl_scalar(c.api, 1.0, in[0].dtype());
  if constexpr (Sub) MS_ACLNN(c, Sub, a.get(), b.get(), one.get(), o.get());
  else MS_ACLNN(c, Add, a.get(), b.get(), one.get(), o.get());
}

#define MS_ACLNN_BINARY_ROW(Name)                                                                       \
  [](LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs&) {          \
    auto a = T(c, in[0], "self"), b = T(c, in[1], "other"), o = T(c, out[0], "out");                     \
    MS_ACLNN(c, Name, a.get(), b.get(), o.get());                                                         \
  }
#define MS_ACLNN_UNARY_ROW(Name)                                                                        \
  [](LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs&) {          \
    auto a = T(c, in[0], "self"), o = T(c, out[0], "out");                                                \
    MS_ACLNN(c, Name, a.get(), o.get());                                                                  \
  }

/// matmul with NumPy rules for operands of rank >= 2 (batch dims broadcast).
inline void launch_matmul(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs&) {
  auto a = T(c, in[0], "self"), b = T(c, in[1], "mat2"), o = T(c, out[0], "out");
  if (in[0].dim() == 3 && in[1].dim() == 3 && in[0].shape()[0] == in[1].shape()[0])
    MS_ACLNN(c, BatchMatMul, a.get(), b.get(), o.get(), c.cube_math);
  else
    MS_ACLNN(c, Matmul, a.get(), b.get(), o.get(), c.cube_math);
}

/// linear(x, w, b) = x @ w^T (+ b): w^T is a strided view, so no transpose kernel runs.
inline void launch_linear(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs&) {
  const AnyTensor& w = in[1];
  auto x = T(c, in[0], "x");
  auto wt = make_acl_tensor(c.api, w.storage()->data, w.storage()->nbytes, w.dtype(), {w.shape()[1], w.shape()[0]},
                            {w.strides()[1], w.strides()[0]}, w.offset(), "weight^T");
  auto o = T(c, out[0], "out");
  MS_ACLNN(c, Matmul, x.get(), wt.get(), o.get(), c.cube_math);
  if (in.size() == 3) {
    auto b = T(c, in[2], "bias");
    auto one = make_acl_scalar(c.api, 1.0, out[0].dtype());
    MS_ACLNN(c, Add, o.get(), b.get(), one.get(), o.get());  // in place: elementwise, same index
  }
}

template <bool Mean>
void launch_reduce(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs& a) {
  auto x = T(c, in[0], "self"), o = T(c, out[0], "out");
  auto dims = make_acl_int_array(c.api, reduce_axes(a, in[0].dim()));
  const bool keep = a.b("keepdim");
  const aclDataType dt = *acl_dtype(out[0].dtype());
  if constexpr (Mean) MS_ACLNN(c, Mean, x.get(), dims.get(), keep, dt, o.get());
  else MS_ACLNN(c, ReduceSum, x.get(), dims.get(), keep, dt, o.get());
}

/// Row losses and d(row loss)/d(logits) of softmax cross entropy against one-hot targets,
/// into scratch buffers: OneHot, then SoftmaxCrossEntropyWithLogits.
struct CeParts {
  AnyTensor rows, backprop;
};
inline CeParts ce_parts(LaunchCtx& c, const AnyTensor& logits, const AnyTensor& target) {
  const std::int64_t n = logits.shape()[0], k = logits.shape()[1];
  auto scratch_tensor = [&](Shape s) {
    const std::size_t bytes = static_cast<std::size_t>(numel(s)) * dtype_size(logits.dtype());
    auto st = Storage::borrowed(c.scratch(bytes), bytes, Device::ascend());
    return AnyTensor::view_of(std::move(st), s, contiguous_strides(s), 0, logits.dtype());
  };
  AnyTensor onehot = scratch_tensor(Shape{n, k});
  CeParts p{scratch_tensor(Shape{n}), scratch_tensor(Shape{n, k})};
  auto on = make_acl_tensor(c.api, c.consts, 2 * sizeof(float), DType::f32, {1}, {1}, 0, "onValue");
  auto off = make_acl_tensor(c.api, c.consts, 2 * sizeof(float), DType::f32, {1}, {1}, 1, "offValue");
  auto y = T(c, target, "target"), oh = T(c, onehot, "onehot");
  MS_ACLNN(c, OneHot, y.get(), static_cast<int>(k), on.get(), off.get(), std::int64_t{-1}, oh.get());
  auto x = T(c, logits, "logits"), rows = T(c, p.rows, "loss"), bp = T(c, p.backprop, "backprop");
  MS_ACLNN(c, SoftmaxCrossEntropyWithLogits, x.get(), oh.get(), rows.get(), bp.get());
  return p;
}

inline bool ce_supports(const AclApi& api, std::span<const ops::TensorMeta> in, const ops::Attrs& a) {
  // Label smoothing and ignored targets have no one-kernel form here: those calls run on the host.
  return in[0].dtype == DType::f32 && in[0].shape.rank() == 2 && a.f("label_smoothing", 0.0) == 0.0 &&
         a.i("ignore_index", -100) < 0 && has(api, "OneHot") && has(api, "SoftmaxCrossEntropyWithLogits") &&
         has(api, "Mean") && has(api, "ReduceSum") && has(api, "Mul") && has(api, "Muls");
}

inline std::string ce_reduction(const ops::Attrs& a) { return a.has("reduction") ? a.str("reduction") : "mean"; }

inline void launch_cross_entropy(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out,
                                 const ops::Attrs& a) {
  CeParts p = ce_parts(c, in[0], in[1]);
  const std::string red = ce_reduction(a);
  auto rows = T(c, p.rows, "loss"), o = T(c, out[0], "out");
  if (red == "none") {
    auto one = make_acl_scalar(c.api, 1.0, DType::f32);
    MS_ACLNN(c, Muls, rows.get(), one.get(), o.get());
    return;
  }
  auto dims = make_acl_int_array(c.api, {0});
  if (red == "mean") MS_ACLNN(c, Mean, rows.get(), dims.get(), false, ACL_FLOAT, o.get());
  else MS_ACLNN(c, ReduceSum, rows.get(), dims.get(), false, ACL_FLOAT, o.get());
}

/// d loss / d logits = g * (softmax - onehot) (/ N for mean); g is 0-d, or (N,) for reduction none.
inline void launch_cross_entropy_grad(LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out,
                                      const ops::Attrs& a) {
  CeParts p = ce_parts(c, in[0], in[1]);
  const AnyTensor& g = in[2];
  const std::string red = ce_reduction(a);
  auto bp = T(c, p.backprop, "backprop"), o = T(c, out[0], "out");
  TensorHandle gt = g.dim() == 1 ? make_acl_tensor(c.api, g.storage()->data, g.storage()->nbytes, g.dtype(),
                                                   {g.shape()[0], 1}, {g.strides()[0], 0}, g.offset(), "grad")
                                 : T(c, g, "grad");
  MS_ACLNN(c, Mul, bp.get(), gt.get(), o.get());
  if (red == "mean") {
    auto inv = make_acl_scalar(c.api, 1.0 / static_cast<double>(in[0].shape()[0]), DType::f32);
    MS_ACLNN(c, Muls, o.get(), inv.get(), o.get());
  }
}

}  // namespace detail

inline const std::vector<AclnnRule>& aclnn_rules() {
  using namespace detail;
  using M = std::span<const ops::TensorMeta>;
  using A = const ops::Attrs&;
  using Api = const AclApi&;
  static const std::vector<AclnnRule> rules = {
      {&ops::add_op, "aclnnAdd", [](Api api, M in, A) { return all_dtype(in, numeric) && has(api, "Add"); }, &launch_add<false>},
      {&ops::sub_op, "aclnnSub", [](Api api, M in, A) { return all_dtype(in, numeric) && has(api, "Sub"); }, &launch_add<true>},
      {&ops::mul_op, "aclnnMul", [](Api api, M in, A) { return all_dtype(in, numeric) && has(api, "Mul"); }, MS_ACLNN_BINARY_ROW(Mul)},
      {&ops::div_op, "aclnnDiv", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Div"); }, MS_ACLNN_BINARY_ROW(Div)},
      {&ops::pow_op, "aclnnPowTensorTensor", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "PowTensorTensor"); },
       MS_ACLNN_BINARY_ROW(PowTensorTensor)},
      {&ops::gt_op, "aclnnGtTensor", [](Api api, M in, A) { return all_dtype(in, numeric) && has(api, "GtTensor"); },
       MS_ACLNN_BINARY_ROW(GtTensor)},
      {&ops::where_op, "aclnnSWhere",
       [](Api api, M in, A) { return in[0].dtype == DType::b8 && in[1].dtype == in[2].dtype && has(api, "SWhere"); },
       [](LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, A) {
         auto w = T(c, in[0], "condition"), a = T(c, in[1], "self"), b = T(c, in[2], "other"), o = T(c, out[0], "out");
         MS_ACLNN(c, SWhere, w.get(), a.get(), b.get(), o.get());
       }},
      {&ops::neg_op, "aclnnNeg", [](Api api, M in, A) { return all_dtype(in, neg_dtype) && has(api, "Neg"); }, MS_ACLNN_UNARY_ROW(Neg)},
      {&ops::exp_op, "aclnnExp", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Exp"); }, MS_ACLNN_UNARY_ROW(Exp)},
      {&ops::log_op, "aclnnLog", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Log"); }, MS_ACLNN_UNARY_ROW(Log)},
      {&ops::sqrt_op, "aclnnSqrt", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Sqrt"); }, MS_ACLNN_UNARY_ROW(Sqrt)},
      {&ops::relu_op, "aclnnRelu", [](Api api, M in, A) { return all_dtype(in, relu_dtype) && has(api, "Relu"); }, MS_ACLNN_UNARY_ROW(Relu)},
      {&ops::sigmoid_op, "aclnnSigmoid", [](Api api, M in, A) { return all_dtype(in, cube_or_act) && has(api, "Sigmoid"); },
       MS_ACLNN_UNARY_ROW(Sigmoid)},
      {&ops::tanh_op, "aclnnTanh", [](Api api, M in, A) { return all_dtype(in, cube_or_act) && has(api, "Tanh"); }, MS_ACLNN_UNARY_ROW(Tanh)},
      {&ops::gelu_op, "aclnnGelu", [](Api api, M in, A) { return all_dtype(in, cube_or_act) && has(api, "Gelu"); }, MS_ACLNN_UNARY_ROW(Gelu)},
      {&ops::matmul_op, "aclnnMatmul|aclnnBatchMatMul",
       [](Api api, M in, A) {
         return all_dtype(in, cube_or_act) && in[0].shape.rank() >= 2 && in[1].shape.rank() >= 2 && has(api, "Matmul") &&
                has(api, "BatchMatMul");
       },
       &launch_matmul},
      {&ops::linear_op, "aclnnMatmul+aclnnAdd",
       [](Api api, M in, A) {
         return all_dtype(in, cube_or_act) && in[0].shape.rank() >= 2 && has(api, "Matmul") && has(api, "Add");
       },
       &launch_linear},
      {&ops::softmax_op, "aclnnSoftmax", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Softmax"); },
       [](LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, A a) {
         auto x = T(c, in[0], "self"), o = T(c, out[0], "out");
         std::int64_t axis = a.i("axis", -1);
         MS_ACLNN(c, Softmax, x.get(), axis, o.get());
       }},
      {&ops::sum_op, "aclnnReduceSum", [](Api api, M in, A) { return all_dtype(in, numeric) && has(api, "ReduceSum"); },
       &launch_reduce<false>},
      {&ops::mean_op, "aclnnMean", [](Api api, M in, A) { return all_dtype(in, floating) && has(api, "Mean"); }, &launch_reduce<true>},
      {&ops::cast_op, "aclnnCast",
       [](Api api, M in, A a) { return any_dtype(in[0].dtype) && any_dtype(a.dtype("dtype")) && has(api, "Cast"); },
       [](LaunchCtx& c, std::span<const AnyTensor> in, std::span<AnyTensor> out, A) {
         auto x = T(c, in[0], "self"), o = T(c, out[0], "out");
         MS_ACLNN(c, Cast, x.get(), *acl_dtype(out[0].dtype()), o.get());
       }},
      {&ops::cross_entropy_op, "aclnnOneHot+aclnnSoftmaxCrossEntropyWithLogits+aclnnMean", &ce_supports, &launch_cross_entropy},
      {&ops::cross_entropy_grad_op, "aclnnOneHot+aclnnSoftmaxCrossEntropyWithLogits+aclnnMul+aclnnMuls", &ce_supports,
       &launch_cross_entropy_grad},
  };
  return rules;
}

}  // namespace ms::backend::ascend
