#pragma once
// Optimizer update ops: adam_update, the whole Adam (and AdamW) update of one parameter in
// one pass, like MindSpore's Adam primitive or torch's fused Adam. optim::Adam calls it
// eagerly and inside captured training steps.
//
// One pass reads p, g, m and v once and writes p', m' and v': the composite form (about
// twelve elementwise ops) makes three passes over the optimizer state even when fused,
// and an Adam step is most of a small model's non-GEMM time. The result is bit-identical
// to the composite form (each operation rounded as the separate op would be, no FMA
// contraction), which is also the op's expansion into other registered ops: a backend
// without an adam_update kernel (the Ascend device graph) runs that instead.

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../core/parallel.hpp"
#include "../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../backend/cpu/kernels/adam.hpp"
#include "isa_dispatch.hpp"
#endif
#include "binary.hpp"
#include "elementwise.hpp"
#include "nn.hpp"
#include "unary.hpp"

namespace ms::ops {

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

template <class T>
void adam_update_run(const KernelArgs& k) {
  const AnyTensor pin = contiguous_raw(k.in[0]), gin = contiguous_raw(k.in[1]);
  const AnyTensor min = contiguous_raw(k.in[2]), vin = contiguous_raw(k.in[3]);
  auto scalar = [&](std::size_t i) { return *static_cast<const T*>(contiguous_raw(k.in[i]).raw_data()); };
  AdamScalars<T> s{};
  s.beta1 = static_cast<T>(k.attrs.f("beta1"));
  s.one_minus_beta1 = static_cast<T>(1.0 - k.attrs.f("beta1"));
  s.beta2 = static_cast<T>(k.attrs.f("beta2"));
  s.one_minus_beta2 = static_cast<T>(1.0 - k.attrs.f("beta2"));
  s.eps = static_cast<T>(k.attrs.f("eps"));
  s.weight_decay = static_cast<T>(k.attrs.f("weight_decay", 0.0));
  s.l2 = k.attrs.f("weight_decay", 0.0) != 0.0;
  s.step_size = scalar(4);
  s.bc2_sqrt = scalar(5);
  set_bc2_recip(s);
  s.decoupled = k.in.size() > 6;
  s.decay = s.decoupled ? scalar(6) : T(1);
  const T* pp = static_cast<const T*>(pin.raw_data());
  const T* gp = static_cast<const T*>(gin.raw_data());
  const T* mp = static_cast<const T*>(min.raw_data());
  const T* vp = static_cast<const T*>(vin.raw_data());
  T* po = static_cast<T*>(k.out[0].raw_data());
  T* mo = static_cast<T*>(k.out[1].raw_data());
  T* vo = static_cast<T*>(k.out[2].raw_data());
  // On the kernel of the CPU level in force (backend/cpu/kernels/adam.hpp). Outputs may
  // share storage with p, m and v (an optimizer step writes them in place).
  const IsaFn fn = cpu::isa_function_for<T>("adam_update_f32", "adam_update_f64", &adam_update_kernel<T>);
  parallel_for(pin.numel(), kParallelGrain / 4, [=](std::int64_t lo, std::int64_t hi) {
    const AdamArgs<T> a{s, pp, gp, mp, vp, po, mo, vo, lo, hi};
    fn(&a);
  });
}

/// The composite form, built from other registered ops (mul, add, sub, div, sqrt).
inline std::vector<std::int32_t> adam_update_expand(ExpansionBuilder& b, std::span<const std::int32_t> in, const Attrs& a) {
  const DType d = b.meta(in[0]).dtype;
  auto op2 = [&](const OpDef& op, std::int32_t x, std::int32_t y) { return b.node(op, {x, y})[0]; };
  auto mul_s = [&](std::int32_t x, double c) { return op2(mul_op, x, b.scalar(c, d)); };
  std::int32_t p = in[0], g = in[1];
  if (in.size() > 6) p = op2(mul_op, p, in[6]);
  if (a.f("weight_decay", 0.0) != 0.0) g = op2(add_op, g, mul_s(p, a.f("weight_decay")));
  const double b1 = a.f("beta1"), b2 = a.f("beta2");
  const std::int32_t m = op2(add_op, mul_s(in[2], b1), mul_s(g, 1.0 - b1));
  const std::int32_t v = op2(add_op, mul_s(in[3], b2), mul_s(op2(mul_op, g, g), 1.0 - b2));
  const std::int32_t denom = op2(add_op, op2(div_op, b.node(sqrt_op, {v})[0], in[5]), b.scalar(a.f("eps"), d));
  return {op2(sub_op, p, op2(mul_op, op2(div_op, m, denom), in[4])), m, v};
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// adam_update(p, g, m, v, step_size, bc2_sqrt[, decay]; beta1, beta2, eps, weight_decay)
//   -> (p', m', v'), see detail::adam_element. step_size = lr / (1 - beta1^t) and
// bc2_sqrt = sqrt(1 - beta2^t) are 0-d tensors (they change every step); decay (AdamW) is
// the 0-d factor 1 - lr * weight_decay, and with it weight_decay must be 0.
MS_REGISTRATION(const OpDef& adam_update_op, registry().add([] {
  OpDef d;
  d.name = "adam_update";
  d.category = Category::nn;
  d.num_inputs = -1;
  d.doc = "one Adam/AdamW step of a parameter in one pass: (p, g, m, v, step_size, bc2_sqrt[, decay]) -> (p', m', v')";
  d.attr_names = {"beta1", "beta2", "eps", "weight_decay"};
  d.cpu_dtypes = kFloatTypes;
  d.index_aligned = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 6 || in.size() == 7, ValueError,
             "{}: takes (p, g, m, v, step_size, bc2_sqrt[, decay]), got {} inputs", op.name, in.size());
    detail::check_float_dtype(op, in[0], "p");
    static constexpr const char* names[] = {"p", "g", "m", "v", "step_size", "bc2_sqrt", "decay"};
    for (std::size_t i = 1; i < in.size(); ++i) {
      MS_CHECK(in[i].dtype == in[0].dtype, DTypeError, "{}: {} is {}, p is {}", op.name, names[i], in[i].dtype,
               in[0].dtype);
      if (i < 4)
        MS_CHECK(in[i].shape == in[0].shape, ShapeError, "{}: {} has shape {}, p has {}", op.name, names[i],
                 shape_str(in[i].shape), shape_str(in[0].shape));
      else
        MS_CHECK(in[i].shape.rank() == 0, ShapeError, "{}: {} must be 0-d, got shape {}", op.name, names[i],
                 shape_str(in[i].shape));
    }
    for (const char* key : {"beta1", "beta2", "eps"})
      MS_CHECK(a.has(key), ValueError, "{}: missing attribute '{}'", op.name, key);
    MS_CHECK(in.size() == 6 || a.f("weight_decay", 0.0) == 0.0, ValueError,
             "{}: give either decay (AdamW) or weight_decay (Adam's L2 term), not both", op.name);
    out.push_back(in[0]);
    out.push_back(in[0]);
    out.push_back(in[0]);
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::adam_update_run<T>(k); });
  };
  d.expand = &detail::adam_update_expand;
  d.cost = &detail::per_input_cost<16>;
  return d;
}()));

namespace detail {
/// adam_update's attributes, as adam_update and adam_update_ pass them.
inline Attrs adam_attrs(double beta1, double beta2, double eps, double weight_decay) {
  return Attrs{{"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay}};
}
}  // namespace detail

/// One Adam step of parameter p: returns (p', m', v'). Pass decay (a 0-d tensor) for AdamW's
/// decoupled decay, or weight_decay for Adam's L2 term.
inline std::vector<AnyTensor> adam_update(const AnyTensor& p, const AnyTensor& g, const AnyTensor& m,
                                          const AnyTensor& v, const AnyTensor& step_size, const AnyTensor& bc2_sqrt,
                                          double beta1, double beta2, double eps, double weight_decay = 0,
                                          const AnyTensor& decay = {}) {
  const Attrs a = detail::adam_attrs(beta1, beta2, eps, weight_decay);
  const AnyTensor in[7] = {p, g, m, v, step_size, bc2_sqrt, decay};
  return call(adam_update_op, std::span<const AnyTensor>(in, decay.defined() ? 7 : 6), a);
}

/// adam_update writing p', m' and v' into p, m and v themselves (like torch's fused Adam):
/// no new tensors and no copies back. p, m and v must be contiguous CPU tensors, and g must
/// not share storage with them. Eager only: graph capture records the out-of-place op and
/// its copy_ nodes (the graph compiler then writes in place), so this throws while tracing.
inline void adam_update_(const AnyTensor& p, const AnyTensor& g, const AnyTensor& m, const AnyTensor& v,
                         const AnyTensor& step_size, const AnyTensor& bc2_sqrt, double beta1, double beta2,
                         double eps, double weight_decay = 0, const AnyTensor& decay = {}) {
  MS_CHECK(detail::tracer == nullptr, ValueError,
           "adam_update_: writes in place, which graph capture cannot record; use adam_update and copy_ in "
           "captured code");
  for (const AnyTensor* t : {&p, &m, &v})
    MS_CHECK(!g.defined() || !t->defined() || !g.shares_storage(*t), ValueError,
             "adam_update_: g shares storage with the tensor {} {} it would overwrite", t->dtype(),
             shape_str(t->shape()));
  const Attrs a = detail::adam_attrs(beta1, beta2, eps, weight_decay);
  const AnyTensor in[7] = {p, g, m, v, step_size, bc2_sqrt, decay};
  const std::span<const AnyTensor> ins(in, decay.defined() ? 7 : 6);
  AnyTensor out[3] = {p, m, v};
  run_op(adam_update_op, ins, a, infer_outputs(adam_update_op, ins, a), out);
}

}  // namespace ms::ops
