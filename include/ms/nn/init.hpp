#pragma once
// Parameter initialization (torch.nn.init): uniform_, normal_, constant_, zeros_, ones_,
// kaiming_uniform_/kaiming_normal_ (He), xavier_uniform_/xavier_normal_ (Glorot),
// calculate_gain and fan computation. Random draws come from ms::default_generator()
// (reseed with ms::manual_seed), through the random creation ops, so a seed gives the
// same initial weights on every platform. Each function writes into the tensor in place
// (under NoGradGuard, so parameters that require grad can be initialized) and returns it.
//
// The defaults of Linear and Conv2d follow PyTorch: weight kaiming_uniform_(a = sqrt(5)),
// which is uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), and bias uniform(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) (see default_weight_init_ / default_bias_init_).

#include <cmath>
#include <string_view>
#include <utility>

#include "../ops/unary.hpp"
#include "../ops/binary.hpp"
#include "../ops/factory.hpp"
#include "../ops/inplace.hpp"

namespace ms::nn::init {

/// Which fan kaiming_* scales by.
enum class FanMode { fan_in, fan_out };

/// The recommended gain for a nonlinearity: "linear", "conv1d/2d/3d", "sigmoid" -> 1,
/// "tanh" -> 5/3, "relu" -> sqrt(2), "leaky_relu" -> sqrt(2 / (1 + param^2)), "selu" -> 3/4.
/// For leaky_relu, param is the negative slope (0.01 when negative, as PyTorch's None).
inline double calculate_gain(std::string_view nonlinearity, double param = -1) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" || nonlinearity == "conv3d" ||
      nonlinearity == "conv_transpose1d" || nonlinearity == "conv_transpose2d" || nonlinearity == "conv_transpose3d" ||
      nonlinearity == "sigmoid" || nonlinearity == "identity")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param < 0 ? 0.01 : param;
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 0.75;
  MS_THROW(ValueError, "calculate_gain: unsupported nonlinearity '{}'", nonlinearity);
}

/// (fan_in, fan_out) of a weight: dims (out, in, k...) give fan_in = in * prod(k) and
/// fan_out = out * prod(k). Throws ValueError for tensors of fewer than 2 dims.
inline std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const AnyTensor& t) {
  MS_CHECK(t.dim() >= 2, ValueError,
           "init: fan in and fan out cannot be computed for a tensor with fewer than 2 dimensions (shape {})",
           shape_str(t.shape()));
  std::int64_t receptive = 1;
  for (int d = 2; d < t.dim(); ++d) receptive *= t.shape()[d];
  return {t.shape()[1] * receptive, t.shape()[0] * receptive};
}

namespace detail {
inline void check_float(std::string_view fn, const AnyTensor& t) {
  MS_CHECK(t.defined(), ValueError, "{}: the tensor is undefined", fn);
  MS_CHECK(is_floating(t.dtype()), DTypeError, "{}: only floating tensors can be initialized, got {}", fn,
           t.dtype());
}
/// Writes `value` (same shape) into t without recording autodiff.
inline void assign(const AnyTensor& t, const AnyTensor& value) {
  NoGradGuard no_grad;
  ops::copy_(t.detach(), value);
}
}  // namespace detail

/// Fills t with uniform values in [low, high).
template <class T>
T& uniform_(T& t, double low = 0.0, double high = 1.0) {
  detail::check_float("uniform_", t);
  MS_CHECK(low <= high, ValueError, "uniform_: low ({}) must not exceed high ({})", low, high);
  NoGradGuard no_grad;
  AnyTensor u = ops::rand(t.shape(), t.dtype());
  detail::assign(t, ops::add(ops::mul(u, high - low), low));
  return t;
}
/// Fills t with normal values of the given mean and standard deviation.
template <class T>
T& normal_(T& t, double mean = 0.0, double std = 1.0) {
  detail::check_float("normal_", t);
  MS_CHECK(std >= 0, ValueError, "normal_: std must be non-negative, got {}", std);
  NoGradGuard no_grad;
  AnyTensor n = ops::randn(t.shape(), t.dtype());
  detail::assign(t, ops::add(ops::mul(n, std), mean));
  return t;
}
/// Fills t with one value.
template <class T>
T& constant_(T& t, double value) {
  detail::check_float("constant_", t);
  detail::assign(t, ops::scalar_tensor(value, t.dtype(), "constant_"));
  return t;
}
template <class T>
T& zeros_(T& t) { return constant_(t, 0.0); }
template <class T>
T& ones_(T& t) { return constant_(t, 1.0); }

/// He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
template <class T>
T& kaiming_uniform_(T& t, double a = 0.0, FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu") {
  detail::check_float("kaiming_uniform_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  std::int64_t fan = mode == FanMode::fan_in ? fan_in : fan_out;
  MS_CHECK(fan > 0, ValueError, "kaiming_uniform_: the fan of a tensor of shape {} is zero", shape_str(t.shape()));
  double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / static_cast<double>(fan));
  return uniform_(t, -bound, bound);
}
/// He normal: N(0, std^2) with std = gain / sqrt(fan).
template <class T>
T& kaiming_normal_(T& t, double a = 0.0, FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu") {
  detail::check_float("kaiming_normal_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  std::int64_t fan = mode == FanMode::fan_in ? fan_in : fan_out;
  MS_CHECK(fan > 0, ValueError, "kaiming_normal_: the fan of a tensor of shape {} is zero", shape_str(t.shape()));
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan)));
}
/// Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
template <class T>
T& xavier_uniform_(T& t, double gain = 1.0) {
  detail::check_float("xavier_uniform_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  MS_CHECK(fan_in + fan_out > 0, ValueError, "xavier_uniform_: tensor of shape {} has no elements", shape_str(t.shape()));
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}
/// Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
template <class T>
T& xavier_normal_(T& t, double gain = 1.0) {
  detail::check_float("xavier_normal_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  MS_CHECK(fan_in + fan_out > 0, ValueError, "xavier_normal_: tensor of shape {} has no elements", shape_str(t.shape()));
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

/// PyTorch's default weight init for Linear and Conv*: kaiming_uniform_(a = sqrt(5)).
template <class T>
T& default_weight_init_(T& w) { return kaiming_uniform_(w, std::sqrt(5.0)); }
/// PyTorch's default bias init for Linear and Conv*: U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
/// with fan_in taken from the weight.
template <class T>
T& default_bias_init_(T& b, const AnyTensor& weight) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(weight);
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return uniform_(b, -bound, bound);
}

}  // namespace ms::nn::init
