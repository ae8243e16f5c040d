#pragma once
// dropout (float32 and float64): a random op that also returns its mask, so that its
// gradient is g * mask. Belongs here: its definition, inference and kernel, and the choice
// of generator (its own seed or the default one). The gradient table row lives in
// autograd/nn_rules.hpp.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "../../core/random.hpp"
#include "../dispatch.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// Zeroes each element with probability p and scales the rest by 1 / (1 - p) (training only;
/// identity otherwise). Draws from the default generator, or from its own when `seed` is given.
inline AnyTensor dropout(const AnyTensor& x, double p = 0.5, bool training = true,
                         std::optional<std::uint64_t> seed = std::nullopt);
/// dropout and its mask (same dtype as x: 0 or 1 / (1 - p)), so that y = x * mask.
inline std::pair<AnyTensor, AnyTensor> dropout_with_mask(const AnyTensor& x, double p = 0.5, bool training = true,
                                                         std::optional<std::uint64_t> seed = std::nullopt);

}  // namespace ms::ops

namespace ms {
/// Dropout (see ops::dropout).
template <Element T>
Tensor<T> dropout(const Tensor<T>& x, double p = 0.5, bool training = true,
                  std::optional<std::uint64_t> seed = std::nullopt) {
  return ops::dropout(x, p, training, seed);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {
namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// dropout(x; p, training, seed) -> (y, mask); y = x * mask, mask 0 or 1 / (1 - p).
MS_REGISTRATION(const OpDef& dropout_op, registry().add([] {
  OpDef d;
  d.name = "dropout";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "zeroes elements with probability p and scales the rest by 1/(1-p) (training only); outputs y and the mask";
  d.attr_names = {"p", "training", "seed"};
  d.cpu_dtypes = kFloatTypes;
  d.is_random = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const double p = a.f("p", 0.5);
    MS_CHECK(p >= 0.0 && p <= 1.0, ValueError, "{}: p must be in [0, 1], got {}", op.name, p);
    out.push_back(in[0]);
    out.push_back(in[0]);
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor x = detail::contiguous_raw(k.in[0]);
    const double p = k.attrs.f("p", 0.5);
    const bool active = k.attrs.b("training", true) && p > 0.0;
    detail::visit_float(k, x.dtype(), [&]<class T>() {
      const T* xp = static_cast<const T*>(x.raw_data());
      T* yp = static_cast<T*>(k.out[0].raw_data());
      T* mp = static_cast<T*>(k.out[1].raw_data());
      const std::int64_t n = x.numel();
      if (!active) {
        std::copy(xp, xp + n, yp);
        std::fill(mp, mp + n, T(1));
        return;
      }
      const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
      // One uniform double per element, in row-major order: the same seed gives the same
      // mask for float32 and float64.
      with_generator(k.attrs.maybe_i("seed"), [&](Generator& g) {
        for (std::int64_t i = 0; i < n; ++i) mp[i] = g.uniform() < p ? T(0) : scale;
      });
      for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * mp[i];
    });
  };
  d.cost = &detail::per_input_cost<3>;
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

inline std::pair<AnyTensor, AnyTensor> dropout_with_mask(const AnyTensor& x, double p, bool training,
                                                         std::optional<std::uint64_t> seed) {
  Attrs a{{"p", p}, {"training", training}};
  if (seed) a.set("seed", static_cast<std::int64_t>(*seed));
  const AnyTensor in[1] = {x};
  auto out = call(dropout_op, in, a);
  return {out[0], out[1]};
}
inline AnyTensor dropout(const AnyTensor& x, double p, bool training, std::optional<std::uint64_t> seed) {
  return dropout_with_mask(x, p, training, seed).first;
}

}  // namespace ms::ops
