#pragma once
// Definitions of the op methods declared on Tensor<T> (a.reshape(), a.sum(), ...).
// Included after every op header so each method can forward to its free function.

#include "views.hpp"

namespace ms {

template <Element T>
Tensor<T> Tensor<T>::clone() const { return ops::clone(*this); }
template <Element T>
Tensor<T> Tensor<T>::contiguous() const { return ops::contiguous(*this); }
template <Element T>
Tensor<T> Tensor<T>::reshape(const Shape& s) const { return ops::reshape(*this, s.vec()); }
template <Element T>
Tensor<T> Tensor<T>::view(const Shape& s) const { return ops::view(*this, s.vec()); }
template <Element T>
Tensor<T> Tensor<T>::transpose(std::int64_t a, std::int64_t b) const { return ops::transpose(*this, a, b); }
template <Element T>
Tensor<T> Tensor<T>::permute(const Shape& p) const { return ops::permute(*this, p.vec()); }
template <Element T>
Tensor<T> Tensor<T>::t() const {
  MS_CHECK(dim() <= 2, ShapeError, "t: expects a tensor of at most 2 dims, got shape {}", shape_str(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}
template <Element T>
Tensor<T> Tensor<T>::slice(std::int64_t dim, std::optional<std::int64_t> start, std::optional<std::int64_t> end,
                           std::int64_t step) const {
  return ops::slice(*this, dim, start, end, step);
}
template <Element T>
Tensor<T> Tensor<T>::squeeze(std::int64_t axis) const { return ops::squeeze(*this, axis); }
template <Element T>
Tensor<T> Tensor<T>::squeeze() const { return ops::squeeze(*this); }
template <Element T>
Tensor<T> Tensor<T>::unsqueeze(std::int64_t axis) const { return ops::unsqueeze(*this, axis); }
template <Element T>
Tensor<T> Tensor<T>::expand(const Shape& s) const { return ops::expand(*this, s.vec()); }
template <Element T>
Tensor<T> Tensor<T>::flatten(std::int64_t start, std::int64_t end) const { return ops::flatten(*this, start, end); }
// Reductions over all elements (ops/reduce.hpp: ops::sum(x, axes, keepdim), ...).
template <Element T>
Tensor<T> Tensor<T>::sum() const { return ops::sum(*this, {}, false); }
template <Element T>
Tensor<T> Tensor<T>::mean() const { return ops::mean(*this, {}, false); }
template <Element T>
Tensor<T> Tensor<T>::max() const { return ops::max(*this, {}, false); }
template <Element T>
Tensor<T> Tensor<T>::min() const { return ops::min(*this, {}, false); }
template <Element T>
template <Element U>
Tensor<U> Tensor<T>::to() const { return ops::cast(*this, dtype_v<U>); }

}  // namespace ms
