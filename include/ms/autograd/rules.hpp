#pragma once
// The gradient table: one row per op, each rule written with registered ops (so a
// captured backward pass is an ordinary graph that fuses and replays). A rule gets
// the forward inputs/outputs and the output gradients, and returns one gradient per
// input (undefined = none). Gradients of broadcast inputs may keep the broadcast
// shape: the engine sums them back (detail::sum_to). Ops without a rule state why.

#include <vector>

#include "../ops/factory.hpp"
#include "../ops/indexing.hpp"
#include "../ops/inplace.hpp"
#include "../ops/linalg.hpp"
#include "../ops/movement.hpp"
#include "../ops/pad.hpp"
#include "../ops/softmax.hpp"
#include "../ops/scatter.hpp"
#include "../ops/unary.hpp"
#include "tape.hpp"

namespace ms::autograd {

using ops::GradArgs;
using Grads = std::vector<AnyTensor>;

#if MS_KERNEL_BODIES  // the rows are registered by the unit that defines the ops: core/linkage.hpp
namespace rules {
using namespace ms::ops;

inline AnyTensor g0(const GradArgs& a) { return a.grad_out[0]; }
inline AnyTensor x0(const GradArgs& a) { return a.in[0]; }
inline AnyTensor y0(const GradArgs& a) { return a.out[0]; }
inline AnyTensor zero_like_scalar(const AnyTensor& t) { return scalar_tensor(0.0, t.dtype(), "grad"); }
/// g where mask is true, else 0.
inline AnyTensor mask(const AnyTensor& m, const AnyTensor& g) { return where(m, g, zero_like_scalar(g)); }
/// Reshapes a reduced gradient back to keepdim form so it broadcasts against the input.
inline AnyTensor keepdim_shape(const AnyTensor& g, const Shape& in_shape, const ReduceAttrs& attrs) {
  if (attrs.keepdim) return g;
  const IntList& axes = attrs.axes;
  IntList s = in_shape.vec();
  if (axes.empty()) {
    for (auto& d : s) d = 1;
  } else {
    for (auto ax : axes) s[static_cast<std::size_t>(normalize_axis(ax, in_shape.rank(), "grad"))] = 1;
  }
  return reshape(g, s);
}
inline double reduced_count(const Shape& in_shape, const ReduceAttrs& attrs) {
  const IntList& axes = attrs.axes;
  if (axes.empty()) return static_cast<double>(numel(in_shape));
  double n = 1;
  for (auto ax : axes) n *= static_cast<double>(in_shape[normalize_axis(ax, in_shape.rank(), "grad")]);
  return n;
}
inline AnyTensor matmul_t(const AnyTensor& a) { return transpose(a, -1, -2); }

/// One row of a gradient table: the op (its registered handle, so a row for an op that does
/// not exist does not compile), its rule, or the reason it has none.
struct Row {
  const ops::OpDef* op;
  ops::GradFn rule;
  const char* nondiff_reason;
};

// clang-format off
MS_REGISTRATION(const std::vector<Row> table, {
  {&neg_op,        [](const GradArgs& a) -> Grads { return {neg(g0(a))}; }, nullptr},
  {&abs_op,        [](const GradArgs& a) -> Grads { return {mul(g0(a), sign(x0(a)))}; }, nullptr},
  {&exp_op,        [](const GradArgs& a) -> Grads { return {mul(g0(a), y0(a))}; }, nullptr},
  {&log_op,        [](const GradArgs& a) -> Grads { return {div(g0(a), x0(a))}; }, nullptr},
  {&log1p_op,      [](const GradArgs& a) -> Grads { return {div(g0(a), add(x0(a), 1.0))}; }, nullptr},
  {&expm1_op,      [](const GradArgs& a) -> Grads { return {mul(g0(a), add(y0(a), 1.0))}; }, nullptr},
  {&sqrt_op,       [](const GradArgs& a) -> Grads { return {div(mul(g0(a), 0.5), y0(a))}; }, nullptr},
  {&rsqrt_op,      [](const GradArgs& a) -> Grads { return {mul(mul(g0(a), -0.5), mul(y0(a), square(y0(a))))}; }, nullptr},
  {&square_op,     [](const GradArgs& a) -> Grads { return {mul(g0(a), mul(x0(a), 2.0))}; }, nullptr},
  {&reciprocal_op, [](const GradArgs& a) -> Grads { return {neg(mul(g0(a), square(y0(a))))}; }, nullptr},
  {&sin_op,        [](const GradArgs& a) -> Grads { return {mul(g0(a), cos(x0(a)))}; }, nullptr},
  {&cos_op,        [](const GradArgs& a) -> Grads { return {neg(mul(g0(a), sin(x0(a))))}; }, nullptr},
  {&tanh_op,       [](const GradArgs& a) -> Grads { return {mul(g0(a), sub(1.0, square(y0(a))))}; }, nullptr},
  {&sigmoid_op,    [](const GradArgs& a) -> Grads { return {mul(g0(a), mul(y0(a), sub(1.0, y0(a))))}; }, nullptr},
  {&erf_op,        [](const GradArgs& a) -> Grads {
                   return {mul(g0(a), mul(exp(neg(square(x0(a)))), 1.1283791670955126))}; }, nullptr},
  // From the output (y > 0 exactly where x > 0): the pre-activation is then not kept for the
  // backward pass, so a captured linear + relu fuses into one GEMM with a relu epilogue.
  {&relu_op,       [](const GradArgs& a) -> Grads { return {mask(gt(y0(a), 0.0), g0(a))}; }, nullptr},
  {&gelu_op,       [](const GradArgs& a) -> Grads {
                   AnyTensor x = x0(a);
                   AnyTensor cdf = mul(add(erf(mul(x, 0.70710678118654752440)), 1.0), 0.5);
                   AnyTensor pdf = mul(exp(mul(square(x), -0.5)), 0.39894228040143267794);
                   return {mul(g0(a), add(cdf, mul(x, pdf)))}; }, nullptr},
  {&gelu_tanh_op,  [](const GradArgs& a) -> Grads {
                   AnyTensor x = x0(a);
                   constexpr double k = 0.79788456080286535588, c = 0.044715;
                   AnyTensor t = tanh(mul(add(x, mul(mul(square(x), x), c)), k));
                   AnyTensor du = mul(add(mul(square(x), 3 * c), 1.0), k);
                   AnyTensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, sub(1.0, square(t))), du), 0.5));
                   return {mul(g0(a), d)}; }, nullptr},
  {&silu_op,       [](const GradArgs& a) -> Grads {
                   AnyTensor s = sigmoid(x0(a));
                   return {mul(g0(a), mul(s, add(mul(x0(a), sub(1.0, s)), 1.0)))}; }, nullptr},
  {&softplus_op,   [](const GradArgs& a) -> Grads { return {mul(g0(a), sigmoid(x0(a)))}; }, nullptr},
  {&leaky_relu_op, [](const GradArgs& a) -> Grads {
                   return {where(gt(x0(a), 0.0), g0(a), mul(g0(a), a.attrs.f("slope", 0.01)))}; }, nullptr},
  {&elu_op,        [](const GradArgs& a) -> Grads {
                   return {where(gt(x0(a), 0.0), g0(a), mul(g0(a), add(y0(a), a.attrs.f("alpha", 1.0))))}; }, nullptr},
  {&hardsigmoid_op, [](const GradArgs& a) -> Grads {
                   return {mask(logical_and(gt(x0(a), -3.0), lt(x0(a), 3.0)), mul(g0(a), 1.0 / 6.0))}; }, nullptr},
  {&clamp_op,      [](const GradArgs& a) -> Grads {
                   AnyTensor inside = logical_and(ge(x0(a), a.attrs.f("lo")), le(x0(a), a.attrs.f("hi")));
                   return {mask(inside, g0(a))}; }, nullptr},
  {&pow_scalar_op, [](const GradArgs& a) -> Grads {
                   double e = a.attrs.f("exponent");
                   return {mul(g0(a), mul(pow(x0(a), e - 1), e))}; }, nullptr},
  {&sign_op,  nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {&floor_op, nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {&ceil_op,  nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {&round_op, nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {&logical_not_op, nullptr, "bool output"},
  // binary
  {&add_op, [](const GradArgs& a) -> Grads { return {g0(a), g0(a)}; }, nullptr},
  {&sub_op, [](const GradArgs& a) -> Grads { return {g0(a), neg(g0(a))}; }, nullptr},
  {&mul_op, [](const GradArgs& a) -> Grads { return {mul(g0(a), a.in[1]), mul(g0(a), a.in[0])}; }, nullptr},
  {&div_op, [](const GradArgs& a) -> Grads {
            AnyTensor ga = div(g0(a), a.in[1]);
            return {ga, neg(mul(ga, y0(a)))}; }, nullptr},
  {&pow_op, [](const GradArgs& a) -> Grads {
            AnyTensor ga = mul(g0(a), mul(a.in[1], pow(a.in[0], sub(a.in[1], 1.0))));
            AnyTensor gb = mul(g0(a), mul(y0(a), log(a.in[0])));
            return {ga, gb}; }, nullptr},
  {&maximum_op, [](const GradArgs& a) -> Grads {
            AnyTensor m = ge(a.in[0], a.in[1]);
            return {mask(m, g0(a)), mask(logical_not(m), g0(a))}; }, nullptr},
  {&minimum_op, [](const GradArgs& a) -> Grads {
            AnyTensor m = le(a.in[0], a.in[1]);
            return {mask(m, g0(a)), mask(logical_not(m), g0(a))}; }, nullptr},
  {&eq_op, nullptr, "bool output"}, {&ne_op, nullptr, "bool output"}, {&lt_op, nullptr, "bool output"},
  {&le_op, nullptr, "bool output"}, {&gt_op, nullptr, "bool output"}, {&ge_op, nullptr, "bool output"},
  {&logical_and_op, nullptr, "bool output"}, {&logical_or_op, nullptr, "bool output"},
  {&where_op, [](const GradArgs& a) -> Grads {
            return {AnyTensor(), mask(a.in[0], g0(a)), mask(logical_not(a.in[0]), g0(a))}; }, nullptr},
  // movement and views
  {&copy_op, [](const GradArgs& a) -> Grads { return {g0(a)}; }, nullptr},
  {&cast_op, [](const GradArgs& a) -> Grads {
            if (!is_floating(x0(a).dtype())) return {AnyTensor()};
            return {cast(g0(a), x0(a).dtype())}; }, nullptr},
  {&reshape_op, [](const GradArgs& a) -> Grads { return {reshape(g0(a), x0(a).shape().vec())}; }, nullptr},
  {&permute_op, [](const GradArgs& a) -> Grads {
            const IntList& p = a.attrs.ints("perm");
            IntList inv(p.size());
            for (std::size_t i = 0; i < p.size(); ++i)
              inv[static_cast<std::size_t>(normalize_axis(p[i], static_cast<int>(p.size()), "permute"))] = static_cast<std::int64_t>(i);
            return {permute(g0(a), inv)}; }, nullptr},
  {&expand_op, [](const GradArgs& a) -> Grads { return {g0(a)}; }, nullptr},  // the engine sums to the input shape
  {&slice_op, [](const GradArgs& a) -> Grads {
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {call1(slice_scatter_op, {z, g0(a)}, a.attrs)}; }, nullptr},
  {&slice_scatter_op, [](const GradArgs& a) -> Grads {
            AnyTensor gs = call1(slice_op, {g0(a)}, a.attrs);
            AnyTensor gb = call1(slice_scatter_op, {g0(a), zeros(a.in[1].shape(), a.in[1].dtype())}, a.attrs);
            return {gb, gs}; }, nullptr},
  {&concat_op, [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis"), pos = 0;
            int ax = normalize_axis(axis, y0(a).dim(), "concat");
            Grads r;
            for (auto& x : a.in) {
              std::int64_t n = x.shape()[ax];
              r.push_back(slice(g0(a), ax, pos, pos + n));
              pos += n;
            }
            return r; }, nullptr},
  {&stack_op, [](const GradArgs& a) -> Grads {
            int ax = normalize_axis(a.attrs.i("axis"), y0(a).dim(), "stack");
            Grads r;
            for (std::size_t i = 0; i < a.in.size(); ++i) {
              auto k = static_cast<std::int64_t>(i);
              r.push_back(reshape(slice(g0(a), ax, k, k + 1), a.in[i].shape().vec()));
            }
            return r; }, nullptr},
  {&split_op, [](const GradArgs& a) -> Grads {
            Grads parts;
            for (std::size_t i = 0; i < a.out.size(); ++i)
              parts.push_back(a.grad_out[i].defined() ? a.grad_out[i] : zeros(a.out[i].shape(), a.out[i].dtype()));
            return {concat(std::span<const AnyTensor>(parts), a.attrs.i("axis"))}; }, nullptr},
  {&gather_op, [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis");
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {scatter_add(z, axis, a.in[1], g0(a)), AnyTensor()}; }, nullptr},
  {&index_select_op, [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis");
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {index_add(z, axis, a.in[1], g0(a)), AnyTensor()}; }, nullptr},
  {&scatter_add_op, [](const GradArgs& a) -> Grads {
            return {g0(a), AnyTensor(), gather(g0(a), a.attrs.i("axis"), a.in[1])}; }, nullptr},
  {&index_add_op, [](const GradArgs& a) -> Grads {
            return {g0(a), AnyTensor(), index_select(g0(a), a.attrs.i("axis"), a.in[1])}; }, nullptr},
  {&remainder_op, [](const GradArgs& a) -> Grads {  // a - floor(a / b) * b
            return {g0(a), a.needs_grad(1) ? neg(mul(g0(a), floor(div(a.in[0], a.in[1])))) : AnyTensor()}; }, nullptr},
  {&fmod_op, [](const GradArgs& a) -> Grads {  // a - trunc(a / b) * b
            if (!a.needs_grad(1)) return {g0(a), AnyTensor()};
            AnyTensor q = div(a.in[0], a.in[1]);
            return {g0(a), neg(mul(g0(a), where(lt(q, 0.0), ceil(q), floor(q))))}; }, nullptr},
  {&tile_op, [](const GradArgs& a) -> Grads {  // each input element gets the sum of its copies
            const Shape& xs = x0(a).shape();
            AnyTensor g = g0(a);
            const int r = g.dim(), lead = r - xs.rank();
            if (g.numel() == 0) return {zeros(xs, x0(a).dtype())};
            for (int d = 0; d < r; ++d) {
              const std::int64_t n = d >= lead ? xs[d - lead] : 1, rep = g.shape()[d] / n;
              if (rep == 1) continue;
              IntList s = g.shape().vec();  // dim d split into (rep, n), then the copies summed
              s[static_cast<std::size_t>(d)] = n;
              s.insert(s.begin() + d, rep);
              g = sum(reshape(g, s), {d}, false);
            }
            return {reshape(g, xs.vec())}; }, nullptr},
  {&cumsum_op, [](const GradArgs& a) -> Grads {  // the running sum of g the other way round
            Attrs back = a.attrs;
            back.set("reverse", !a.attrs.b("reverse"));
            return {call1(cumsum_op, {g0(a)}, back)}; }, nullptr},
  {&topk_op, [](const GradArgs& a) -> Grads {  // values: g goes back to where each came from
            if (!a.grad_out[0].defined()) return {AnyTensor()};
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {scatter_add(z, normalize_axis(a.attrs.i("axis", -1), x0(a).dim(), "topk"), a.out[1], g0(a))}; }, nullptr},
  {&triu_op, [](const GradArgs& a) -> Grads { return {call1(triu_op, {g0(a)}, a.attrs)}; }, nullptr},
  {&tril_op, [](const GradArgs& a) -> Grads { return {call1(tril_op, {g0(a)}, a.attrs)}; }, nullptr},
  {&pad_op, [](const GradArgs& a) -> Grads {
            Attrs at;
            for (const char* k : {"begin", "end", "mode"})
              if (const AttrValue* v = a.attrs.find(k)) at.set(k, *v);
            at.set("input_shape", x0(a).shape().vec());
            return {call1(pad_grad_op, {g0(a)}, at)}; }, nullptr},
  {&pad_grad_op, [](const GradArgs& a) -> Grads {  // linear: its adjoint is pad with a zero constant
            Attrs at;
            for (const char* k : {"begin", "end", "mode"})
              if (const AttrValue* v = a.attrs.find(k)) at.set(k, *v);
            at.set("value", 0.0);
            return {call1(pad_op, {g0(a)}, at)}; }, nullptr},
  {&one_hot_op, nullptr, "integer input and output"},
  {&copy__op, nullptr, "in-place write (run optimizer updates under NoGradGuard)"},
  {&fill_op, nullptr, "creation op (no tensor inputs)"},
  {&arange_op, nullptr, "creation op (no tensor inputs)"},
  {&linspace_op, nullptr, "creation op (no tensor inputs)"},
  {&eye_op, nullptr, "creation op (no tensor inputs)"},
  {&rand_op, nullptr, "creation op (no tensor inputs)"},
  {&randn_op, nullptr, "creation op (no tensor inputs)"},
  {&randint_op, nullptr, "creation op (no tensor inputs)"},
  // reductions
  {&sum_op, [](const GradArgs& a) -> Grads {
            const auto r = attrs_as<ReduceAttrs>(a.op, a.attrs);
            return {expand(keepdim_shape(g0(a), x0(a).shape(), r), x0(a).shape().vec())}; }, nullptr},
  {&mean_op, [](const GradArgs& a) -> Grads {
            const auto r = attrs_as<ReduceAttrs>(a.op, a.attrs);
            AnyTensor g = div(keepdim_shape(g0(a), x0(a).shape(), r), reduced_count(x0(a).shape(), r));
            return {expand(g, x0(a).shape().vec())}; }, nullptr},
  {&max_op, [](const GradArgs& a) -> Grads {  // ties share the gradient equally
            const auto r = attrs_as<ReduceAttrs>(a.op, a.attrs);
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), r);
            AnyTensor m = cast(eq(x0(a), y), x0(a).dtype());
            AnyTensor cnt = sum(m, r.axes, true);
            return {mul(m, div(keepdim_shape(g0(a), x0(a).shape(), r), cnt))}; }, nullptr},
  {&min_op, [](const GradArgs& a) -> Grads {
            const auto r = attrs_as<ReduceAttrs>(a.op, a.attrs);
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), r);
            AnyTensor m = cast(eq(x0(a), y), x0(a).dtype());
            AnyTensor cnt = sum(m, r.axes, true);
            return {mul(m, div(keepdim_shape(g0(a), x0(a).shape(), r), cnt))}; }, nullptr},
  {&prod_op, [](const GradArgs& a) -> Grads {  // y / x: exact when no element is zero
            const auto r = attrs_as<ReduceAttrs>(a.op, a.attrs);
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), r);
            return {mul(keepdim_shape(g0(a), x0(a).shape(), r), div(y, x0(a)))}; }, nullptr},
  {&var_op, [](const GradArgs& a) -> Grads {
            const auto r = attrs_as<VarAttrs>(a.op, a.attrs);
            double n = reduced_count(x0(a).shape(), r) - static_cast<double>(r.correction);
            AnyTensor d = sub(x0(a), mean(x0(a), r.axes, true));
            return {mul(keepdim_shape(g0(a), x0(a).shape(), r), mul(d, 2.0 / n))}; }, nullptr},
  {&std_op, [](const GradArgs& a) -> Grads {
            const auto r = attrs_as<VarAttrs>(a.op, a.attrs);
            double n = reduced_count(x0(a).shape(), r) - static_cast<double>(r.correction);
            AnyTensor d = sub(x0(a), mean(x0(a), r.axes, true));
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), r);
            return {mul(div(keepdim_shape(g0(a), x0(a).shape(), r), y), div(d, n))}; }, nullptr},
  {&argmax_op, nullptr, "integer output"},
  {&argmin_op, nullptr, "integer output"},
  // normalization and linear algebra
  {&softmax_op, [](const GradArgs& a) -> Grads {
            std::int64_t ax = attrs_as<SoftmaxAttrs>(a.op, a.attrs).axis;
            AnyTensor gy = mul(g0(a), y0(a));
            return {sub(gy, mul(y0(a), sum(gy, {ax}, true)))}; }, nullptr},
  {&log_softmax_op, [](const GradArgs& a) -> Grads {
            std::int64_t ax = attrs_as<SoftmaxAttrs>(a.op, a.attrs).axis;
            return {sub(g0(a), mul(exp(y0(a)), sum(g0(a), {ax}, true)))}; }, nullptr},
  {&matmul_op, [](const GradArgs& a) -> Grads {
            AnyTensor A = a.in[0], B = a.in[1], G = g0(a);
            bool a1 = A.dim() == 1, b1 = B.dim() == 1;
            if (a1) A = reshape(A, {1, A.shape()[0]});
            if (b1) B = reshape(B, {B.shape()[0], 1});
            IntList gs = G.shape().vec();
            if (a1) gs.insert(gs.end() - (b1 ? 0 : 1), 1);
            if (b1) gs.push_back(1);
            G = reshape(G, gs);
            return {a.needs_grad(0) ? matmul(G, matmul_t(B)) : AnyTensor(),
                    a.needs_grad(1) ? matmul(matmul_t(A), G) : AnyTensor()}; }, nullptr},
  {&linear_op, [](const GradArgs& a) -> Grads {
            AnyTensor x = a.in[0], w = a.in[1], g = g0(a);
            std::int64_t out = w.shape()[0], in = w.shape()[1];
            AnyTensor g2 = reshape(g, {-1, out}), x2 = reshape(x, {-1, in});
            Grads r{a.needs_grad(0) ? matmul(g, w) : AnyTensor(), a.needs_grad(1) ? matmul(matmul_t(g2), x2) : AnyTensor()};
            if (a.in.size() > 2) r.push_back(a.needs_grad(2) ? sum(g2, {0}, false) : AnyTensor());
            return r; }, nullptr},
});
// clang-format on

inline bool install() {
  for (const Row& r : table) ops::registry().set_grad(*r.op, r.rule, r.nondiff_reason ? r.nondiff_reason : "");
  return true;
}
}  // namespace rules

/// Installs the gradient table into the registry when this header is included.
MS_REGISTRATION(const bool rules_installed, rules::install());
#endif  // MS_KERNEL_BODIES

}  // namespace ms::autograd
