#pragma once
// The gradient table of the nn ops (ops/nn/): one row per op, in the style of
// rules.hpp, each rule written with registered ops (the backward kernels that
// convolution, pooling, normalization and the losses need are ops of their own),
// so a captured backward pass is an ordinary graph. The convolution and pooling
// backward ops are linear in their inputs and have rows too (second order); the
// normalization and cross-entropy backward ops state why they have none.
// Gradients flowing into the helper outputs (batch_norm's mean/invstd, layer_norm's
// mean/rstd, dropout's mask) are ignored: the public API does not return them.

#include "../ops/nn.hpp"
#include "../ops/optim_ops.hpp"
#include "rules.hpp"

namespace ms::autograd {

#if MS_KERNEL_BODIES  // the rows are registered by the unit that defines the ops: core/linkage.hpp
namespace nn_rules {
using namespace ms::ops;
using rules::g0;
using rules::Row;

/// The conv2d geometry of a node of conv2d or of one of its backward ops (whose typed
/// attributes extend conv2d's).
inline Conv2dAttrs conv_of(const GradArgs& a) {
  if (&a.op == &conv2d_grad_input_op) return attrs_as<Conv2dGradInputAttrs>(a.op, a.attrs);
  if (&a.op == &conv2d_grad_weight_op) return attrs_as<Conv2dGradWeightAttrs>(a.op, a.attrs);
  return attrs_as<Conv2dAttrs>(a.op, a.attrs);
}
/// conv2d(x, w) without bias under the same geometry.
inline AnyTensor conv(const AnyTensor& x, const AnyTensor& w, const Conv2dAttrs& c) {
  return call1(conv2d_op, {x, w}, to_attrs(c));
}
inline AnyTensor conv_grad_input(const AnyTensor& g, const AnyTensor& w, const Conv2dAttrs& c, const Shape& x_shape) {
  return call1(conv2d_grad_input_op, {g, w}, to_attrs(Conv2dGradInputAttrs{c, x_shape.vec()}));
}
inline AnyTensor conv_grad_weight(const AnyTensor& g, const AnyTensor& x, const Conv2dAttrs& c, const Shape& w_shape) {
  return call1(conv2d_grad_weight_op, {g, x}, to_attrs(Conv2dGradWeightAttrs{c, w_shape.vec()}));
}
/// The attributes of the backward op G of a pooling node with attributes F (input_shape added).
template <class G, class F>
inline Attrs pool_grad_attrs(const GradArgs& a) {
  return to_attrs(G{attrs_as<F>(a.op, a.attrs), a.in[0].shape().vec()});
}
/// The forward attributes F of a pooling backward node with attributes G (input_shape left out).
template <class G, class F>
inline Attrs pool_forward_attrs(const GradArgs& a) {
  return to_attrs<F>(attrs_as<G>(a.op, a.attrs));
}
inline Grads none(std::size_t n) { return Grads(n); }

// clang-format off
MS_REGISTRATION(const std::vector<Row> table, {
  {&conv2d_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(a.in.size());
            const AnyTensor &x = a.in[0], &w = a.in[1], g = g0(a);
            const Conv2dAttrs c = conv_of(a);
            Grads r{a.needs_grad(0) ? conv_grad_input(g, w, c, x.shape()) : AnyTensor(),
                    a.needs_grad(1) ? conv_grad_weight(g, x, c, w.shape()) : AnyTensor()};
            if (a.in.size() > 2) r.push_back(a.needs_grad(2) ? sum(g, {0, 2, 3}, false) : AnyTensor());
            return r; }, nullptr},
  // gx = A_w^T g is bilinear in (g, w): d/dg = conv2d(G, w), d/dw = conv2d_grad_weight(g, G).
  {&conv2d_grad_input_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            const AnyTensor &g = a.in[0], &w = a.in[1], G = g0(a);
            return {conv(G, w, conv_of(a)), conv_grad_weight(g, G, conv_of(a), w.shape())}; }, nullptr},
  // gw = d<g, conv(x, w)>/dw is bilinear in (g, x): d/dg = conv2d(x, G), d/dx = conv2d_grad_input(g, G).
  {&conv2d_grad_weight_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            const AnyTensor &g = a.in[0], &x = a.in[1], G = g0(a);
            return {conv(x, G, conv_of(a)), conv_grad_input(g, G, conv_of(a), x.shape())}; }, nullptr},
  {&max_pool2d_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(1);
            Attrs at = pool_grad_attrs<MaxPool2dGradAttrs, MaxPool2dAttrs>(a);
            return {call1(max_pool2d_grad_op, {g0(a), a.out[1]}, at)}; }, nullptr},
  // max_pool2d_grad scatters g to the argmax; its adjoint gathers G there.
  {&max_pool2d_grad_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            const Shape& gs = a.in[0].shape();
            const Shape& xs = a.out[0].shape();
            AnyTensor G = reshape(g0(a), {xs[0], xs[1], xs[2] * xs[3]});
            AnyTensor idx = reshape(a.in[1], {gs[0], gs[1], gs[2] * gs[3]});
            return {reshape(gather(G, 2, idx), gs.vec()), AnyTensor()}; }, nullptr},
  {&avg_pool2d_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(1);
            return {call1(avg_pool2d_grad_op, {g0(a)}, pool_grad_attrs<AvgPool2dGradAttrs, AvgPool2dAttrs>(a))}; }, nullptr},
  {&avg_pool2d_grad_op, [](const GradArgs& a) -> Grads {  // the adjoint of the adjoint
            if (!g0(a).defined()) return none(1);
            return {call1(avg_pool2d_op, {g0(a)}, pool_forward_attrs<AvgPool2dGradAttrs, AvgPool2dAttrs>(a))}; }, nullptr},
  {&adaptive_avg_pool2d_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(1);
            Attrs at = pool_grad_attrs<AdaptiveAvgPool2dGradAttrs, AdaptiveAvgPool2dAttrs>(a);
            return {call1(adaptive_avg_pool2d_grad_op, {g0(a)}, at)}; }, nullptr},
  {&adaptive_avg_pool2d_grad_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(1);
            Attrs at = pool_forward_attrs<AdaptiveAvgPool2dGradAttrs, AdaptiveAvgPool2dAttrs>(a);
            return {call1(adaptive_avg_pool2d_op, {g0(a)}, at)}; }, nullptr},
  {&batch_norm_op, [](const GradArgs& a) -> Grads {
            Grads r = none(a.in.size());
            if (!g0(a).defined()) return r;
            const AnyTensor in[5] = {g0(a), a.in[0], a.in[1], a.out[1], a.out[2]};
            const bool training = attrs_as<BatchNormAttrs>(a.op, a.attrs).training;
            auto g = call(batch_norm_grad_op, in, to_attrs(BatchNormGradAttrs{training}));
            r[0] = g[0], r[1] = g[1], r[2] = g[2];  // none for the running statistics
            return r; }, nullptr},
  {&batch_norm_grad_op, nullptr, "second-order gradient not implemented"},
  {&layer_norm_op, [](const GradArgs& a) -> Grads {
            Grads r = none(a.in.size());
            if (!g0(a).defined()) return r;
            std::vector<AnyTensor> in{g0(a), a.in[0], a.out[1], a.out[2]};
            if (a.in.size() > 1) in.push_back(a.in[1]);
            const IntList ns = attrs_as<LayerNormAttrs>(a.op, a.attrs).normalized_shape;
            auto g = call(layer_norm_grad_op, in, to_attrs(LayerNormGradAttrs{ns}));
            for (std::size_t i = 0; i < r.size(); ++i) r[i] = g[i];
            return r; }, nullptr},
  {&layer_norm_grad_op, nullptr, "second-order gradient not implemented"},
  {&dropout_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(1);
            return {mul(g0(a), a.out[1])}; }, nullptr},
  {&embedding_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            const AnyTensor& w = a.in[0];
            const std::int64_t D = w.shape()[1];
            AnyTensor idx = reshape(a.in[1], {-1});
            AnyTensor z = zeros(w.shape(), w.dtype());
            return {index_add(z, 0, idx, reshape(g0(a), {idx.shape()[0], D})), AnyTensor()}; }, nullptr},
  {&cross_entropy_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            return {call1(cross_entropy_grad_op, {a.in[0], a.in[1], g0(a)}, a.attrs), AnyTensor()}; }, nullptr},
  {&cross_entropy_grad_op, nullptr, "second-order gradient not implemented"},
  {&nll_loss_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            Attrs at = to_attrs(NllLossGradAttrs{attrs_as<NllLossAttrs>(a.op, a.attrs), a.in[0].shape()[1]});
            return {call1(nll_loss_grad_op, {a.in[1], g0(a)}, at), AnyTensor()}; }, nullptr},
  // nll_loss_grad is linear in g; its adjoint is nll_loss itself under the same reduction.
  {&nll_loss_grad_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            Attrs at = to_attrs<NllLossAttrs>(attrs_as<NllLossGradAttrs>(a.op, a.attrs));
            return {AnyTensor(), call1(nll_loss_op, {g0(a), a.in[0]}, at)}; }, nullptr},
  {&adam_update_op, nullptr, "an optimizer update, applied outside autodiff (under no_grad)"},
  {&mse_loss_op, [](const GradArgs& a) -> Grads {
            if (!g0(a).defined()) return none(2);
            AnyTensor d = sub(a.in[0], a.in[1]);
            const std::string red = attrs_as<MseLossAttrs>(a.op, a.attrs).reduction;
            const double n = static_cast<double>(a.in[0].numel());
            const double k = red == "mean" ? 2.0 / n : 2.0;
            AnyTensor ga = mul(mul(d, g0(a)), k);  // g is 0-d for mean/sum: it broadcasts
            return {ga, neg(ga)}; }, nullptr},
});
// clang-format on

inline bool install() {
  for (const Row& r : table) ops::registry().set_grad(*r.op, r.rule, r.nondiff_reason ? r.nondiff_reason : "");
  return true;
}
}  // namespace nn_rules

/// Installs the nn gradient rows into the registry when this header is included.
MS_REGISTRATION(const bool nn_rules_installed, nn_rules::install());
#endif  // MS_KERNEL_BODIES

}  // namespace ms::autograd
