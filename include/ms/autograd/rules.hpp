#pragma once
// The gradient table: one row per op, each rule written with registered ops (so a
// captured backward pass is an ordinary graph that fuses and replays). A rule gets
// the forward inputs/outputs and the output gradients, and returns one gradient per
// input (undefined = none). Gradients of broadcast inputs may keep the broadcast
// shape: the engine sums them back (detail::sum_to). Ops without a rule state why.

#include "../ops/indexing.hpp"
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

namespace rules {
using namespace ms::ops;

inline AnyTensor g0(const GradArgs& a) { return a.grad_out[0]; }
inline AnyTensor x0(const GradArgs& a) { return a.in[0]; }
inline AnyTensor y0(const GradArgs& a) { return a.out[0]; }
inline AnyTensor zero_like_scalar(const AnyTensor& t) { return scalar_tensor(0.0, t.dtype(), "grad"); }
/// g where mask is true, else 0.
inline AnyTensor mask(const AnyTensor& m, const AnyTensor& g) { return where(m, g, zero_like_scalar(g)); }
/// Reshapes a reduced gradient back to keepdim form so it broadcasts against the input.
inline AnyTensor keepdim_shape(const AnyTensor& g, const Shape& in_shape, const Attrs& attrs) {
  if (attrs.b("keepdim")) return g;
  const IntList& axes = attrs.ints("axes");
  IntList s = in_shape.vec();
  if (axes.empty()) {
    for (auto& d : s) d = 1;
  } else {
    for (auto ax : axes) s[static_cast<std::size_t>(normalize_axis(ax, in_shape.rank(), "grad"))] = 1;
  }
  return reshape(g, s);
}
inline double reduced_count(const Shape& in_shape, const Attrs& attrs) {
  const IntList& axes = attrs.ints("axes");
  if (axes.empty()) return static_cast<double>(numel(in_shape));
  double n = 1;
  for (auto ax : axes) n *= static_cast<double>(in_shape[normalize_axis(ax, in_shape.rank(), "grad")]);
  return n;
}
inline AnyTensor matmul_t(const AnyTensor& a) { return transpose(a, -1, -2); }

struct Row {
  const char* op;
  ops::GradFn rule;
  const char* nondiff_reason;
};

// clang-format off
inline const Row table[] = {
  {"neg",        [](const GradArgs& a) -> Grads { return {neg(g0(a))}; }, nullptr},
  {"abs",        [](const GradArgs& a) -> Grads { return {mul(g0(a), sign(x0(a)))}; }, nullptr},
  {"exp",        [](const GradArgs& a) -> Grads { return {mul(g0(a), y0(a))}; }, nullptr},
  {"log",        [](const GradArgs& a) -> Grads { return {div(g0(a), x0(a))}; }, nullptr},
  {"log1p",      [](const GradArgs& a) -> Grads { return {div(g0(a), add(x0(a), 1.0))}; }, nullptr},
  {"expm1",      [](const GradArgs& a) -> Grads { return {mul(g0(a), add(y0(a), 1.0))}; }, nullptr},
  {"sqrt",       [](const GradArgs& a) -> Grads { return {div(mul(g0(a), 0.5), y0(a))}; }, nullptr},
  {"rsqrt",      [](const GradArgs& a) -> Grads { return {mul(mul(g0(a), -0.5), mul(y0(a), square(y0(a))))}; }, nullptr},
  {"square",     [](const GradArgs& a) -> Grads { return {mul(g0(a), mul(x0(a), 2.0))}; }, nullptr},
  {"reciprocal", [](const GradArgs& a) -> Grads { return {neg(mul(g0(a), square(y0(a))))}; }, nullptr},
  {"sin",        [](const GradArgs& a) -> Grads { return {mul(g0(a), cos(x0(a)))}; }, nullptr},
  {"cos",        [](const GradArgs& a) -> Grads { return {neg(mul(g0(a), sin(x0(a))))}; }, nullptr},
  {"tanh",       [](const GradArgs& a) -> Grads { return {mul(g0(a), sub(1.0, square(y0(a))))}; }, nullptr},
  {"sigmoid",    [](const GradArgs& a) -> Grads { return {mul(g0(a), mul(y0(a), sub(1.0, y0(a))))}; }, nullptr},
  {"erf",        [](const GradArgs& a) -> Grads {
                   return {mul(g0(a), mul(exp(neg(square(x0(a)))), 1.1283791670955126))}; }, nullptr},
  {"relu",       [](const GradArgs& a) -> Grads { return {mask(gt(x0(a), 0.0), g0(a))}; }, nullptr},
  {"gelu",       [](const GradArgs& a) -> Grads {
                   AnyTensor x = x0(a);
                   AnyTensor cdf = mul(add(erf(mul(x, 0.70710678118654752440)), 1.0), 0.5);
                   AnyTensor pdf = mul(exp(mul(square(x), -0.5)), 0.39894228040143267794);
                   return {mul(g0(a), add(cdf, mul(x, pdf)))}; }, nullptr},
  {"gelu_tanh",  [](const GradArgs& a) -> Grads {
                   AnyTensor x = x0(a);
                   constexpr double k = 0.79788456080286535588, c = 0.044715;
                   AnyTensor t = tanh(mul(add(x, mul(mul(square(x), x), c)), k));
                   AnyTensor du = mul(add(mul(square(x), 3 * c), 1.0), k);
                   AnyTensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, sub(1.0, square(t))), du), 0.5));
                   return {mul(g0(a), d)}; }, nullptr},
  {"silu",       [](const GradArgs& a) -> Grads {
                   AnyTensor s = sigmoid(x0(a));
                   return {mul(g0(a), mul(s, add(mul(x0(a), sub(1.0, s)), 1.0)))}; }, nullptr},
  {"softplus",   [](const GradArgs& a) -> Grads { return {mul(g0(a), sigmoid(x0(a)))}; }, nullptr},
  {"leaky_relu", [](const GradArgs& a) -> Grads {
                   return {where(gt(x0(a), 0.0), g0(a), mul(g0(a), a.attrs.f("slope", 0.01)))}; }, nullptr},
  {"elu",        [](const GradArgs& a) -> Grads {
                   return {where(gt(x0(a), 0.0), g0(a), mul(g0(a), add(y0(a), a.attrs.f("alpha", 1.0))))}; }, nullptr},
  {"hardsigmoid", [](const GradArgs& a) -> Grads {
                   return {mask(logical_and(gt(x0(a), -3.0), lt(x0(a), 3.0)), mul(g0(a), 1.0 / 6.0))}; }, nullptr},
  {"clamp",      [](const GradArgs& a) -> Grads {
                   AnyTensor inside = logical_and(ge(x0(a), a.attrs.f("lo")), le(x0(a), a.attrs.f("hi")));
                   return {mask(inside, g0(a))}; }, nullptr},
  {"pow_scalar", [](const GradArgs& a) -> Grads {
                   double e = a.attrs.f("exponent");
                   return {mul(g0(a), mul(pow(x0(a), e - 1), e))}; }, nullptr},
  {"sign",  nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {"floor", nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {"ceil",  nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {"round", nullptr, "piecewise constant (zero gradient almost everywhere)"},
  {"logical_not", nullptr, "bool output"},
  // binary
  {"add", [](const GradArgs& a) -> Grads { return {g0(a), g0(a)}; }, nullptr},
  {"sub", [](const GradArgs& a) -> Grads { return {g0(a), neg(g0(a))}; }, nullptr},
  {"mul", [](const GradArgs& a) -> Grads { return {mul(g0(a), a.in[1]), mul(g0(a), a.in[0])}; }, nullptr},
  {"div", [](const GradArgs& a) -> Grads {
            AnyTensor ga = div(g0(a), a.in[1]);
            return {ga, neg(mul(ga, y0(a)))}; }, nullptr},
  {"pow", [](const GradArgs& a) -> Grads {
            AnyTensor ga = mul(g0(a), mul(a.in[1], pow(a.in[0], sub(a.in[1], 1.0))));
            AnyTensor gb = mul(g0(a), mul(y0(a), log(a.in[0])));
            return {ga, gb}; }, nullptr},
  {"maximum", [](const GradArgs& a) -> Grads {
            AnyTensor m = ge(a.in[0], a.in[1]);
            return {mask(m, g0(a)), mask(logical_not(m), g0(a))}; }, nullptr},
  {"minimum", [](const GradArgs& a) -> Grads {
            AnyTensor m = le(a.in[0], a.in[1]);
            return {mask(m, g0(a)), mask(logical_not(m), g0(a))}; }, nullptr},
  {"eq", nullptr, "bool output"}, {"ne", nullptr, "bool output"}, {"lt", nullptr, "bool output"},
  {"le", nullptr, "bool output"}, {"gt", nullptr, "bool output"}, {"ge", nullptr, "bool output"},
  {"logical_and", nullptr, "bool output"}, {"logical_or", nullptr, "bool output"},
  {"where", [](const GradArgs& a) -> Grads {
            return {AnyTensor(), mask(a.in[0], g0(a)), mask(logical_not(a.in[0]), g0(a))}; }, nullptr},
  // movement and views
  {"copy", [](const GradArgs& a) -> Grads { return {g0(a)}; }, nullptr},
  {"cast", [](const GradArgs& a) -> Grads {
            if (!is_floating(x0(a).dtype())) return {AnyTensor()};
            return {cast(g0(a), x0(a).dtype())}; }, nullptr},
  {"reshape", [](const GradArgs& a) -> Grads { return {reshape(g0(a), x0(a).shape().vec())}; }, nullptr},
  {"permute", [](const GradArgs& a) -> Grads {
            const IntList& p = a.attrs.ints("perm");
            IntList inv(p.size());
            for (std::size_t i = 0; i < p.size(); ++i)
              inv[static_cast<std::size_t>(normalize_axis(p[i], static_cast<int>(p.size()), "permute"))] = static_cast<std::int64_t>(i);
            return {permute(g0(a), inv)}; }, nullptr},
  {"expand", [](const GradArgs& a) -> Grads { return {g0(a)}; }, nullptr},  // the engine sums to the input shape
  {"slice", [](const GradArgs& a) -> Grads {
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {call1(slice_scatter_op, {z, g0(a)}, a.attrs)}; }, nullptr},
  {"slice_scatter", [](const GradArgs& a) -> Grads {
            AnyTensor gs = call1(slice_op, {g0(a)}, a.attrs);
            AnyTensor gb = call1(slice_scatter_op, {g0(a), zeros(a.in[1].shape(), a.in[1].dtype())}, a.attrs);
            return {gb, gs}; }, nullptr},
  {"concat", [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis"), pos = 0;
            int ax = normalize_axis(axis, y0(a).dim(), "concat");
            Grads r;
            for (auto& x : a.in) {
              std::int64_t n = x.shape()[ax];
              r.push_back(slice(g0(a), ax, pos, pos + n));
              pos += n;
            }
            return r; }, nullptr},
  {"stack", [](const GradArgs& a) -> Grads {
            int ax = normalize_axis(a.attrs.i("axis"), y0(a).dim(), "stack");
            Grads r;
            for (std::size_t i = 0; i < a.in.size(); ++i) {
              auto k = static_cast<std::int64_t>(i);
              r.push_back(reshape(slice(g0(a), ax, k, k + 1), a.in[i].shape().vec()));
            }
            return r; }, nullptr},
  {"split", [](const GradArgs& a) -> Grads {
            Grads parts;
            for (std::size_t i = 0; i < a.out.size(); ++i)
              parts.push_back(a.grad_out[i].defined() ? a.grad_out[i] : zeros(a.out[i].shape(), a.out[i].dtype()));
            return {concat(std::span<const AnyTensor>(parts), a.attrs.i("axis"))}; }, nullptr},
  {"gather", [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis");
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {scatter_add(z, axis, a.in[1], g0(a)), AnyTensor()}; }, nullptr},
  {"index_select", [](const GradArgs& a) -> Grads {
            std::int64_t axis = a.attrs.i("axis");
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {index_add(z, axis, a.in[1], g0(a)), AnyTensor()}; }, nullptr},
  {"scatter_add", [](const GradArgs& a) -> Grads {
            return {g0(a), AnyTensor(), gather(g0(a), a.attrs.i("axis"), a.in[1])}; }, nullptr},
  {"index_add", [](const GradArgs& a) -> Grads {
            return {g0(a), AnyTensor(), index_select(g0(a), a.attrs.i("axis"), a.in[1])}; }, nullptr},
  {"remainder", [](const GradArgs& a) -> Grads {  // a - floor(a / b) * b
            return {g0(a), a.needs_grad(1) ? neg(mul(g0(a), floor(div(a.in[0], a.in[1])))) : AnyTensor()}; }, nullptr},
  {"fmod", [](const GradArgs& a) -> Grads {  // a - trunc(a / b) * b
            if (!a.needs_grad(1)) return {g0(a), AnyTensor()};
            AnyTensor q = div(a.in[0], a.in[1]);
            return {g0(a), neg(mul(g0(a), where(lt(q, 0.0), ceil(q), floor(q))))}; }, nullptr},
  {"tile", [](const GradArgs& a) -> Grads {  // each input element gets the sum of its copies
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
  {"cumsum", [](const GradArgs& a) -> Grads {  // the running sum of g the other way round
            Attrs back = a.attrs;
            back.set("reverse", !a.attrs.b("reverse"));
            return {call1(cumsum_op, {g0(a)}, back)}; }, nullptr},
  {"topk", [](const GradArgs& a) -> Grads {  // values: g goes back to where each came from
            if (!a.grad_out[0].defined()) return {AnyTensor()};
            AnyTensor z = zeros(x0(a).shape(), x0(a).dtype());
            return {scatter_add(z, normalize_axis(a.attrs.i("axis", -1), x0(a).dim(), "topk"), a.out[1], g0(a))}; }, nullptr},
  {"triu", [](const GradArgs& a) -> Grads { return {call1(triu_op, {g0(a)}, a.attrs)}; }, nullptr},
  {"tril", [](const GradArgs& a) -> Grads { return {call1(tril_op, {g0(a)}, a.attrs)}; }, nullptr},
  {"pad", [](const GradArgs& a) -> Grads {
            Attrs at;
            for (const char* k : {"begin", "end", "mode"})
              if (const AttrValue* v = a.attrs.find(k)) at.set(k, *v);
            at.set("input_shape", x0(a).shape().vec());
            return {call1(pad_grad_op, {g0(a)}, at)}; }, nullptr},
  {"pad_grad", [](const GradArgs& a) -> Grads {  // linear: its adjoint is pad with a zero constant
            Attrs at;
            for (const char* k : {"begin", "end", "mode"})
              if (const AttrValue* v = a.attrs.find(k)) at.set(k, *v);
            at.set("value", 0.0);
            return {call1(pad_op, {g0(a)}, at)}; }, nullptr},
  {"one_hot", nullptr, "integer input and output"},
  {"copy_", nullptr, "in-place write (run optimizer updates under NoGradGuard)"},
  {"fill", nullptr, "creation op (no tensor inputs)"},
  {"arange", nullptr, "creation op (no tensor inputs)"},
  {"linspace", nullptr, "creation op (no tensor inputs)"},
  {"eye", nullptr, "creation op (no tensor inputs)"},
  {"rand", nullptr, "creation op (no tensor inputs)"},
  {"randn", nullptr, "creation op (no tensor inputs)"},
  {"randint", nullptr, "creation op (no tensor inputs)"},
  {"fused", nullptr, "exists only in compiled graphs, made after differentiation"},
  // reductions
  {"sum", [](const GradArgs& a) -> Grads {
            return {expand(keepdim_shape(g0(a), x0(a).shape(), a.attrs), x0(a).shape().vec())}; }, nullptr},
  {"mean", [](const GradArgs& a) -> Grads {
            AnyTensor g = div(keepdim_shape(g0(a), x0(a).shape(), a.attrs), reduced_count(x0(a).shape(), a.attrs));
            return {expand(g, x0(a).shape().vec())}; }, nullptr},
  {"max", [](const GradArgs& a) -> Grads {  // ties share the gradient equally
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), a.attrs);
            AnyTensor m = cast(eq(x0(a), y), x0(a).dtype());
            AnyTensor cnt = sum(m, a.attrs.ints("axes"), true);
            return {mul(m, div(keepdim_shape(g0(a), x0(a).shape(), a.attrs), cnt))}; }, nullptr},
  {"min", [](const GradArgs& a) -> Grads {
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), a.attrs);
            AnyTensor m = cast(eq(x0(a), y), x0(a).dtype());
            AnyTensor cnt = sum(m, a.attrs.ints("axes"), true);
            return {mul(m, div(keepdim_shape(g0(a), x0(a).shape(), a.attrs), cnt))}; }, nullptr},
  {"prod", [](const GradArgs& a) -> Grads {  // y / x: exact when no element is zero
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), a.attrs);
            return {mul(keepdim_shape(g0(a), x0(a).shape(), a.attrs), div(y, x0(a)))}; }, nullptr},
  {"var", [](const GradArgs& a) -> Grads {
            const IntList& axes = a.attrs.ints("axes");
            double n = reduced_count(x0(a).shape(), a.attrs) - static_cast<double>(a.attrs.i("correction", 1));
            AnyTensor d = sub(x0(a), mean(x0(a), axes, true));
            return {mul(keepdim_shape(g0(a), x0(a).shape(), a.attrs), mul(d, 2.0 / n))}; }, nullptr},
  {"std", [](const GradArgs& a) -> Grads {
            const IntList& axes = a.attrs.ints("axes");
            double n = reduced_count(x0(a).shape(), a.attrs) - static_cast<double>(a.attrs.i("correction", 1));
            AnyTensor d = sub(x0(a), mean(x0(a), axes, true));
            AnyTensor y = keepdim_shape(y0(a), x0(a).shape(), a.attrs);
            return {mul(div(keepdim_shape(g0(a), x0(a).shape(), a.attrs), y), div(d, n))}; }, nullptr},
  {"argmax", nullptr, "integer output"},
  {"argmin", nullptr, "integer output"},
  // normalization and linear algebra
  {"softmax", [](const GradArgs& a) -> Grads {
            std::int64_t ax = a.attrs.i("axis", -1);
            AnyTensor gy = mul(g0(a), y0(a));
            return {sub(gy, mul(y0(a), sum(gy, {ax}, true)))}; }, nullptr},
  {"log_softmax", [](const GradArgs& a) -> Grads {
            std::int64_t ax = a.attrs.i("axis", -1);
            return {sub(g0(a), mul(exp(y0(a)), sum(g0(a), {ax}, true)))}; }, nullptr},
  {"matmul", [](const GradArgs& a) -> Grads {
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
  {"linear", [](const GradArgs& a) -> Grads {
            AnyTensor x = a.in[0], w = a.in[1], g = g0(a);
            std::int64_t out = w.shape()[0], in = w.shape()[1];
            AnyTensor g2 = reshape(g, {-1, out}), x2 = reshape(x, {-1, in});
            Grads r{a.needs_grad(0) ? matmul(g, w) : AnyTensor(), a.needs_grad(1) ? matmul(matmul_t(g2), x2) : AnyTensor()};
            if (a.in.size() > 2) r.push_back(a.needs_grad(2) ? sum(g2, {0}, false) : AnyTensor());
            return r; }, nullptr},
};
// clang-format on

inline bool install() {
  for (const Row& r : table) {
    if (!ops::registry().find(r.op)) continue;  // op not compiled into this program
    ops::registry().set_grad(r.op, r.rule, r.nondiff_reason ? r.nondiff_reason : "");
  }
  return true;
}
}  // namespace rules

/// Installs the gradient table into the registry when this header is included.
MS_REGISTRATION(const bool rules_installed, rules::install());

}  // namespace ms::autograd
