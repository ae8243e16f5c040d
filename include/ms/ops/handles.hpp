#pragma once
// One API for both tensor handles: the ms:: free functions for AnyTensor (a dtype known
// only at run time) beside their Tensor<T> forms, and the PyTorch spellings (cat, dim,
// broadcast_to, softplus(beta, threshold), clamp_min...). Typed in gives typed out; AnyTensor
// in gives AnyTensor out. Only forwarding lives here: every op is defined in its own header.

#include <concepts>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "binary.hpp"
#include "indexing.hpp"
#include "linalg.hpp"
#include "movement.hpp"
#include "nn.hpp"
#include "pad.hpp"
#include "softmax.hpp"
#include "reduce.hpp"
#include "unary.hpp"
#include "views.hpp"

namespace ms {

namespace detail {
/// Exactly the runtime-typed handle (not a Tensor<T>). The AnyTensor forms are templates on
/// this concept, not plain functions: a plain ms::f(const AnyTensor&) would tie with
/// ops::f(const AnyTensor&) when code inside ms::ops calls f unqualified (argument-dependent
/// lookup finds both); a template loses such a tie to the plain function instead.
template <class X>
concept Untyped = std::same_as<std::remove_cvref_t<X>, AnyTensor>;
/// Any tensor handle: AnyTensor, Tensor<T> or a class derived from them.
template <class X>
concept TensorHandle = std::derived_from<std::remove_cvref_t<X>, AnyTensor>;
/// Two handles of which at least one is runtime-typed (both typed: the Tensor<T> forms).
template <class A, class B>
concept MixedHandles = TensorHandle<A> && TensorHandle<B> && (Untyped<A> || Untyped<B>);

template <Element T>
Tensor<T> handle_of(const Tensor<T>*);  // declarations only: used in decltype
AnyTensor handle_of(const AnyTensor*);
}  // namespace detail

/// The handle an op returns for an input of handle type X: Tensor<T> for a Tensor<T> (or a
/// class derived from one), AnyTensor for an AnyTensor.
template <detail::TensorHandle X>
using handle_t = decltype(detail::handle_of(static_cast<const std::remove_cvref_t<X>*>(nullptr)));
/// handle_t with the element type U (an argmax gives Tensor<int64_t> for any typed input).
template <detail::TensorHandle X, Element U>
using handle_as_t = std::conditional_t<std::is_same_v<handle_t<X>, AnyTensor>, AnyTensor, Tensor<U>>;

// ---- elementwise ------------------------------------------------------------------------------

#define MS_ANY_UNARY(name) \
  template <detail::Untyped A> \
  AnyTensor name(const A& x) { return ops::name(x); }
MS_ANY_UNARY(neg)
MS_ANY_UNARY(abs)
MS_ANY_UNARY(sign)
MS_ANY_UNARY(exp)
MS_ANY_UNARY(log)
MS_ANY_UNARY(log1p)
MS_ANY_UNARY(expm1)
MS_ANY_UNARY(sqrt)
MS_ANY_UNARY(rsqrt)
MS_ANY_UNARY(square)
MS_ANY_UNARY(reciprocal)
MS_ANY_UNARY(erf)
MS_ANY_UNARY(sin)
MS_ANY_UNARY(cos)
MS_ANY_UNARY(tanh)
MS_ANY_UNARY(sigmoid)
MS_ANY_UNARY(relu)
MS_ANY_UNARY(gelu)
MS_ANY_UNARY(gelu_tanh)
MS_ANY_UNARY(silu)
MS_ANY_UNARY(softplus)
MS_ANY_UNARY(hardsigmoid)
MS_ANY_UNARY(floor)
MS_ANY_UNARY(ceil)
MS_ANY_UNARY(round)
MS_ANY_UNARY(logical_not)
#undef MS_ANY_UNARY

/// x if x > 0 else negative_slope * x (torch.nn.functional.leaky_relu).
template <detail::Untyped A>
AnyTensor leaky_relu(const A& x, double negative_slope = 0.01) { return ops::leaky_relu(x, negative_slope); }
template <detail::Untyped A>
AnyTensor elu(const A& x, double alpha = 1.0) { return ops::elu(x, alpha); }
template <detail::Untyped A>
AnyTensor clamp(const A& x, std::optional<double> min, std::optional<double> max = std::nullopt) {
  return ops::clamp(x, min, max);
}
template <detail::Untyped A>
AnyTensor clamp_min(const A& x, double min) { return ops::clamp_min(x, min); }
template <detail::Untyped A>
AnyTensor clamp_max(const A& x, double max) { return ops::clamp_max(x, max); }
template <detail::Untyped A>
AnyTensor pow(const A& x, double exponent) { return ops::pow(x, exponent); }
/// GELU; approximate = "tanh" selects the tanh form (torch.nn.functional.gelu).
template <detail::Untyped A>
AnyTensor gelu(const A& x, std::string_view approximate) {
  MS_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return approximate == "tanh" ? ops::gelu_tanh(x) : ops::gelu(x);
}
/// softplus(x) = log(1 + e^(beta x)) / beta, and x itself where beta x > threshold
/// (torch.nn.functional.softplus). Built from registered ops, so it differentiates, captures
/// and freezes like them; ms::softplus(x) is the one-op form with beta 1 and no threshold.
template <detail::TensorHandle X>
handle_t<X> softplus(const X& x, double beta, double threshold = 20.0) {
  MS_CHECK(beta > 0, ValueError, "softplus: beta must be positive, got {}", beta);
  const AnyTensor bx = beta == 1.0 ? AnyTensor(x) : ops::mul(x, beta);
  AnyTensor soft = ops::softplus(bx);
  if (beta != 1.0) soft = ops::div(soft, beta);
  return ops::where(ops::gt(bx, threshold), x, soft);
}

#define MS_ANY_BINARY(name) \
  template <class A, class B> \
    requires detail::MixedHandles<A, B> \
  AnyTensor name(const A& a, const B& b) { return ops::name(a, b); } \
  template <detail::Untyped A, Scalar S> \
  AnyTensor name(const A& a, S b) { return ops::name(a, static_cast<double>(b)); } \
  template <Scalar S, detail::Untyped B> \
  AnyTensor name(S a, const B& b) { return ops::name(static_cast<double>(a), b); }
MS_ANY_BINARY(add)
MS_ANY_BINARY(sub)
MS_ANY_BINARY(mul)
MS_ANY_BINARY(div)
MS_ANY_BINARY(maximum)
MS_ANY_BINARY(minimum)
MS_ANY_BINARY(eq)
MS_ANY_BINARY(ne)
MS_ANY_BINARY(lt)
MS_ANY_BINARY(le)
MS_ANY_BINARY(gt)
MS_ANY_BINARY(ge)
MS_ANY_BINARY(remainder)
MS_ANY_BINARY(fmod)
#undef MS_ANY_BINARY
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor pow(const A& a, const B& b) { return ops::pow(a, b); }
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor logical_and(const A& a, const B& b) { return ops::logical_and(a, b); }
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor logical_or(const A& a, const B& b) { return ops::logical_or(a, b); }
/// cond ? a : b elementwise; AnyTensor out when any operand is runtime-typed.
template <detail::TensorHandle C, detail::TensorHandle A, detail::TensorHandle B>
  requires(detail::Untyped<C> || detail::Untyped<A> || detail::Untyped<B>)
AnyTensor where(const C& cond, const A& a, const B& b) { return ops::where(cond, a, b); }

// Operators on AnyTensor (and mixed with Tensor<T> or a scalar). No operator! or && here:
// on an AnyTensor those keep their meaning "is this handle defined" (explicit operator bool).
#define MS_ANY_OPERATOR(sym, name) \
  template <class A, class B> \
    requires detail::MixedHandles<A, B> \
  AnyTensor operator sym(const A& a, const B& b) { return name(a, b); } \
  template <detail::Untyped A, Scalar S> \
  AnyTensor operator sym(const A& a, S b) { return name(a, b); } \
  template <Scalar S, detail::Untyped B> \
  AnyTensor operator sym(S a, const B& b) { return name(a, b); }
MS_ANY_OPERATOR(+, add)
MS_ANY_OPERATOR(-, sub)
MS_ANY_OPERATOR(*, mul)
MS_ANY_OPERATOR(/, div)
MS_ANY_OPERATOR(<, lt)
MS_ANY_OPERATOR(<=, le)
MS_ANY_OPERATOR(>, gt)
MS_ANY_OPERATOR(>=, ge)
#undef MS_ANY_OPERATOR
template <detail::Untyped A>
AnyTensor operator-(const A& a) { return ops::neg(a); }

// ---- reductions (dim: the dims to reduce, all when empty; keepdim as in torch) -----------------

#define MS_ANY_REDUCE(name) \
  template <detail::Untyped A> \
  AnyTensor name(const A& x, const ops::IntList& dim = {}, bool keepdim = false) { return ops::name(x, dim, keepdim); }
MS_ANY_REDUCE(sum)
MS_ANY_REDUCE(prod)
MS_ANY_REDUCE(mean)
MS_ANY_REDUCE(max)
MS_ANY_REDUCE(min)
#undef MS_ANY_REDUCE
template <detail::Untyped A>
AnyTensor var(const A& x, const ops::IntList& dim = {}, bool keepdim = false, std::int64_t correction = 1) {
  return ops::var(x, dim, keepdim, correction);
}
template <detail::Untyped A>
AnyTensor std(const A& x, const ops::IntList& dim = {}, bool keepdim = false, std::int64_t correction = 1) {
  return ops::std(x, dim, keepdim, correction);
}
template <detail::Untyped A>
AnyTensor argmax(const A& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) {
  return ops::argmax(x, dim, keepdim);
}
template <detail::Untyped A>
AnyTensor argmin(const A& x, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) {
  return ops::argmin(x, dim, keepdim);
}
template <detail::Untyped A>
AnyTensor softmax(const A& x, std::int64_t dim = -1) { return ops::softmax(x, dim); }
template <detail::Untyped A>
AnyTensor log_softmax(const A& x, std::int64_t dim = -1) { return ops::log_softmax(x, dim); }

// ---- views and copies (one template serves both handles) ---------------------------------------

/// x with a new shape (one dim may be -1); copies only when x is not contiguous.
template <detail::TensorHandle X>
handle_t<X> reshape(const X& x, const ops::IntList& shape) { return ops::reshape(x, shape); }
/// x with a new shape, never copying (x must be contiguous).
template <detail::TensorHandle X>
handle_t<X> view(const X& x, const ops::IntList& shape) { return ops::view(x, shape); }
/// The dims of x reordered (torch.permute(x, dims)).
template <detail::TensorHandle X>
handle_t<X> permute(const X& x, const ops::IntList& dims) { return ops::permute(x, dims); }
template <detail::TensorHandle X>
handle_t<X> transpose(const X& x, std::int64_t dim0, std::int64_t dim1) { return ops::transpose(x, dim0, dim1); }
/// x[start:end:step] along dim (a view); std::nullopt or ms::end for an omitted bound.
template <detail::TensorHandle X>
handle_t<X> slice(const X& x, std::int64_t dim, std::optional<std::int64_t> start,
                  std::optional<std::int64_t> end = std::nullopt, std::int64_t step = 1) {
  return ops::slice(x, dim, start, end, step);
}
/// torch.narrow: length elements of dim from start (negative start counts from the end).
template <detail::TensorHandle X>
handle_t<X> narrow(const X& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  const std::int64_t n = x.shape(static_cast<int>(dim));
  const std::int64_t b = start < 0 ? start + n : start;
  MS_CHECK(b >= 0 && length >= 0 && b + length <= n, IndexError,
           "narrow: start {} and length {} do not fit in dim {} of size {}", start, length, dim, n);
  return ops::slice(x, dim, b, b + length);
}
template <detail::TensorHandle X>
handle_t<X> unsqueeze(const X& x, std::int64_t dim) { return ops::unsqueeze(x, dim); }
template <detail::TensorHandle X>
handle_t<X> squeeze(const X& x, std::int64_t dim) { return ops::squeeze(x, dim); }
template <detail::TensorHandle X>
handle_t<X> squeeze(const X& x) { return ops::squeeze(x); }
template <detail::TensorHandle X>
handle_t<X> flatten(const X& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1) {
  return ops::flatten(x, start_dim, end_dim);
}
template <detail::TensorHandle X>
handle_t<X> contiguous(const X& x) { return ops::contiguous(x); }
template <detail::TensorHandle X>
handle_t<X> clone(const X& x) { return ops::clone(x); }
/// x broadcast to `shape` without copying (torch.broadcast_to; -1 keeps a dim).
template <detail::Untyped A>
AnyTensor broadcast_to(const A& x, const ops::IntList& shape) { return ops::expand(x, shape); }
template <detail::TensorHandle X>
handle_t<X> expand(const X& x, const ops::IntList& shape) { return ops::expand(x, shape); }
/// x converted to `dtype` (a runtime dtype: the result is an AnyTensor). Like torch's
/// Tensor.to(dtype), a tensor that already has the dtype is returned itself, not copied.
template <detail::TensorHandle X>
AnyTensor cast(const X& x, DType dtype) { return ops::cast(x, dtype); }

// ---- joining and indexing ---------------------------------------------------------------------

/// torch.cat: joins tensors along an existing dim (the same op as concat).
template <Element T>
Tensor<T> cat(const std::vector<Tensor<T>>& xs, std::int64_t dim = 0) { return concat(xs, dim); }
template <Element T>
Tensor<T> cat(std::initializer_list<Tensor<T>> xs, std::int64_t dim = 0) { return concat(xs, dim); }
template <detail::Untyped A>
AnyTensor cat(const std::vector<A>& xs, std::int64_t dim = 0) { return ops::concat(std::span<const AnyTensor>(xs), dim); }
template <detail::Untyped A>
AnyTensor cat(std::initializer_list<A> xs, std::int64_t dim = 0) { return ops::concat(xs, dim); }
template <detail::Untyped A>
AnyTensor concat(const std::vector<A>& xs, std::int64_t dim = 0) { return ops::concat(std::span<const AnyTensor>(xs), dim); }
template <detail::Untyped A>
AnyTensor concat(std::initializer_list<A> xs, std::int64_t dim = 0) { return ops::concat(xs, dim); }
template <detail::Untyped A>
AnyTensor stack(const std::vector<A>& xs, std::int64_t dim = 0) { return ops::stack(std::span<const AnyTensor>(xs), dim); }
template <detail::Untyped A>
AnyTensor stack(std::initializer_list<A> xs, std::int64_t dim = 0) { return ops::stack(xs, dim); }
template <detail::Untyped A>
std::vector<AnyTensor> split(const A& x, const ops::IntList& sizes, std::int64_t dim = 0) {
  return ops::split(x, sizes, dim);
}
template <detail::Untyped A>
std::vector<AnyTensor> split_equal(const A& x, std::int64_t parts, std::int64_t dim = 0) {
  return ops::split_equal(x, parts, dim);
}
template <class A, class I>
  requires detail::MixedHandles<A, I>
AnyTensor gather(const A& x, std::int64_t dim, const I& index) { return ops::gather(x, dim, index); }
template <class A, class I>
  requires detail::MixedHandles<A, I>
AnyTensor index_select(const A& x, std::int64_t dim, const I& index) { return ops::index_select(x, dim, index); }
template <detail::Untyped A>
AnyTensor one_hot(const A& index, std::int64_t num_classes, DType dtype = DType::i64) {
  return ops::one_hot(index, num_classes, dtype);
}
template <detail::Untyped A>
AnyTensor tile(const A& x, const ops::IntList& reps) { return ops::tile(x, reps); }
template <detail::Untyped A>
AnyTensor cumsum(const A& x, std::int64_t dim, bool exclusive = false, bool reverse = false) {
  return ops::cumsum(x, dim, exclusive, reverse);
}
/// (values, int64 indices) of the k largest (or smallest) elements along dim.
template <detail::Untyped A>
std::pair<AnyTensor, AnyTensor> topk(const A& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                     bool sorted = true) {
  auto r = ops::topk(x, k, dim, largest, sorted);
  return {r[0], r[1]};
}
template <detail::Untyped A>
AnyTensor triu(const A& x, std::int64_t k = 0) { return ops::triu(x, k); }
template <detail::Untyped A>
AnyTensor tril(const A& x, std::int64_t k = 0) { return ops::tril(x, k); }
/// torch.nn.functional.pad order: (before, after) pairs from the last dim backwards.
template <detail::Untyped A>
AnyTensor pad(const A& x, const ops::IntList& pads_last_dim_first, std::string_view mode = "constant",
              double value = 0.0) {
  return ops::pad(x, pads_last_dim_first, mode, value);
}
template <detail::Untyped A>
AnyTensor pad_dims(const A& x, const ops::IntList& begin, const ops::IntList& end, std::string_view mode = "constant",
                   double value = 0.0) {
  return ops::pad_dims(x, begin, end, mode, value);
}

// ---- linear algebra and nn --------------------------------------------------------------------

template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor matmul(const A& a, const B& b) { return ops::matmul(a, b); }
template <detail::Untyped A>
AnyTensor linear(const A& x, const AnyTensor& weight, const AnyTensor& bias = AnyTensor()) {
  return ops::linear(x, weight, bias);
}
template <detail::Untyped A>
AnyTensor conv2d(const A& x, const AnyTensor& weight, const AnyTensor& bias = AnyTensor(), Int2 stride = 1,
                 Int2 padding = 0, Int2 dilation = 1, std::int64_t groups = 1) {
  return ops::conv2d(x, weight, bias, stride, padding, dilation, groups);
}
template <detail::Untyped A>
AnyTensor max_pool2d(const A& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt, Int2 padding = 0,
                     Int2 dilation = 1, bool ceil_mode = false) {
  return ops::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}
template <detail::Untyped A>
AnyTensor avg_pool2d(const A& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt, Int2 padding = 0,
                     bool count_include_pad = true, bool ceil_mode = false,
                     std::optional<std::int64_t> divisor_override = std::nullopt) {
  return ops::avg_pool2d(x, kernel_size, stride, padding, count_include_pad, ceil_mode, divisor_override);
}
template <detail::Untyped A>
AnyTensor adaptive_avg_pool2d(const A& x, Int2 output_size) { return ops::adaptive_avg_pool2d(x, output_size); }
template <detail::Untyped A>
AnyTensor batch_norm(const A& x, const AnyTensor& weight, const AnyTensor& bias, const AnyTensor& running_mean,
                     const AnyTensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5) {
  return ops::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
}
template <detail::Untyped A>
AnyTensor layer_norm(const A& x, const ops::IntList& normalized_shape, const AnyTensor& weight = AnyTensor(),
                     const AnyTensor& bias = AnyTensor(), double eps = 1e-5) {
  return ops::layer_norm(x, normalized_shape, weight, bias, eps);
}
template <detail::Untyped A>
AnyTensor dropout(const A& x, double p = 0.5, bool training = true, std::optional<std::uint64_t> seed = std::nullopt) {
  return ops::dropout(x, p, training, seed);
}
/// Rows of weight (V, D) at `index`. The order is (weight, index): the reverse of
/// torch.nn.functional.embedding(input, weight).
template <class A, class I>
  requires detail::MixedHandles<A, I>
AnyTensor embedding(const A& weight, const I& index) { return ops::embedding(weight, index); }
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor cross_entropy(const A& logits, const B& target, std::string_view reduction = "mean",
                        double label_smoothing = 0.0, std::int64_t ignore_index = -100) {
  return ops::cross_entropy(logits, target, reduction, label_smoothing, ignore_index);
}
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor nll_loss(const A& log_probs, const B& target, std::string_view reduction = "mean",
                   std::int64_t ignore_index = -100) {
  return ops::nll_loss(log_probs, target, reduction, ignore_index);
}
template <class A, class B>
  requires detail::MixedHandles<A, B>
AnyTensor mse_loss(const A& a, const B& b, std::string_view reduction = "mean") { return ops::mse_loss(a, b, reduction); }

}  // namespace ms
