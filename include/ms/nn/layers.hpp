#pragma once
// Layers (torch.nn style modules) over the library's ops: Linear, Conv2d, BatchNorm2d,
// LayerNorm, Dropout, Embedding, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, the activations
// ReLU, GELU, Tanh, Sigmoid, SiLU, LeakyReLU, Identity, Flatten, Sequential, and the loss
// functors CrossEntropyLoss, NLLLoss, MSELoss. Parameters are float32.
//
// BatchNorm2d marks its running statistics as graph state inside a capture (they are
// written in training mode and read in eval mode), so replays of a captured step update
// them and read their current values, never a snapshot from capture time. Parameters that
// require grad are graph state anyway; a frozen (requires_grad false) parameter read in a
// capture is a constant, by the capture rules. Create layers with std::make_shared / nn::make, e.g.
//   auto net = nn::make<nn::Sequential>(nn::make<nn::Linear>(784, 128), nn::make<nn::ReLU>(),
//                                       nn::make<nn::Linear>(128, 10));
//   Tensor<float> logits = (*net)(x);

#include <cmath>
#include <initializer_list>
#include <string>

#include "../core/linkage.hpp"
#include "../ops/unary.hpp"
#include "../ops/linalg.hpp"
#include "../ops/nn.hpp"
#include "../ops/views.hpp"
#include "../autograd/nn_rules.hpp"
#include "init.hpp"
#include "module.hpp"

namespace ms::nn {

namespace detail {
/// The float32 view of a module input; DTypeError naming the layer otherwise.
inline Tensor<float> float_input(std::string_view layer, const AnyTensor& x) {
  MS_CHECK(x.defined(), ValueError, "{}: the input tensor is undefined", layer);
  MS_CHECK(x.dtype() == DType::f32, DTypeError, "{}: expected a float32 input, got {} {} (convert it with ms::cast)",
           layer, x.dtype(), shape_str(x.shape()));
  return Tensor<float>(x);
}
inline std::string bool_str(bool b) { return b ? "True" : "False"; }
inline std::string int2_str(Int2 v) { return MS_FORMAT("({}, {})", v.h, v.w); }
/// Inside a graph capture, makes `t` (state an op writes in place) a graph parameter rather
/// than a constant snapshot, by writing it onto itself; nothing outside a capture.
inline void mark_graph_state(const AnyTensor& t) {
  if (ops::detail::tracer != nullptr && t.defined()) {
    NoGradGuard no_grad;
    ops::copy_(t, t);
  }
}
}  // namespace detail

/// y = x @ weight^T + bias; weight (out_features, in_features), bias (out_features,).
/// Initialized as in PyTorch (see init::default_weight_init_).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true)
      : in_features(in_features), out_features(out_features) {
    MS_CHECK(in_features > 0 && out_features > 0, ValueError,
             "Linear: in_features ({}) and out_features ({}) must be positive", in_features, out_features);
    weight = ms::empty<float>(Shape{out_features, in_features});
    init::default_weight_init_(weight);
    if (bias) {
      this->bias = ms::empty<float>(Shape{out_features});
      init::default_bias_init_(this->bias, weight);
    }
    register_parameter("weight", weight);
    register_parameter("bias", this->bias);
  }
  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  std::int64_t in_features, out_features;
  Tensor<float> weight;
  Tensor<float> bias;  ///< undefined when constructed with bias = false
};

/// Returns its input.
class Identity : public Module {
 public:
  Tensor<float> forward(const AnyTensor& x) override { return detail::float_input("Identity", x); }
  std::string type_name() const override { return "Identity"; }
};

/// max(x, 0).
class ReLU : public Module {
 public:
  Tensor<float> forward(const AnyTensor& x) override { return ms::relu(detail::float_input("ReLU", x)); }
  std::string type_name() const override { return "ReLU"; }
};

/// x if x > 0 else negative_slope * x.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::leaky_relu(detail::float_input("LeakyReLU", x), negative_slope);
  }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override { return MS_FORMAT("negative_slope={}", negative_slope); }
  double negative_slope;
};

/// GELU; approximate = "none" (exact erf form) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {
    MS_CHECK(this->approximate == "none" || this->approximate == "tanh", ValueError,
             "GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", this->approximate);
  }
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::gelu(detail::float_input("GELU", x), approximate);
  }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override {
    return approximate == "none" ? std::string() : MS_FORMAT("approximate='{}'", approximate);
  }
  std::string approximate;
};

/// tanh(x).
class Tanh : public Module {
 public:
  Tensor<float> forward(const AnyTensor& x) override { return ms::tanh(detail::float_input("Tanh", x)); }
  std::string type_name() const override { return "Tanh"; }
};

/// 1 / (1 + e^-x).
class Sigmoid : public Module {
 public:
  Tensor<float> forward(const AnyTensor& x) override { return ms::sigmoid(detail::float_input("Sigmoid", x)); }
  std::string type_name() const override { return "Sigmoid"; }
};

/// x * sigmoid(x).
class SiLU : public Module {
 public:
  Tensor<float> forward(const AnyTensor& x) override { return ms::silu(detail::float_input("SiLU", x)); }
  std::string type_name() const override { return "SiLU"; }
};

/// Flattens dims start_dim..end_dim into one (by default all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor<float> forward(const AnyTensor& x) override {
    return detail::float_input("Flatten", x).flatten(start_dim, end_dim);
  }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override { return MS_FORMAT("start_dim={}, end_dim={}", start_dim, end_dim); }
  std::int64_t start_dim, end_dim;
};

/// Applies its children in order; they are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
    for (auto& m : modules) push_back(m);
  }
  template <class... M>
    requires(sizeof...(M) > 0 && (std::is_base_of_v<Module, M> && ...))
  explicit Sequential(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }
  /// Appends a module (named by its position).
  Sequential& push_back(std::shared_ptr<Module> m);
  std::size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  /// The i-th module (IndexError when out of range).
  const std::shared_ptr<Module>& operator[](std::size_t i) const;
  auto begin() const { return layers_.begin(); }
  auto end() const { return layers_.end(); }

  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

/// 2-D convolution over (N, C, H, W): weight (out_channels, in_channels / groups, kH, kW),
/// bias (out_channels,). Initialized as in PyTorch (see init::default_weight_init_).
class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel_size, Int2 stride = 1, Int2 padding = 0,
         Int2 dilation = 1, std::int64_t groups = 1, bool bias = true)
      : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size), stride(stride),
        padding(padding), dilation(dilation), groups(groups) {
    MS_CHECK(in_channels > 0 && out_channels > 0, ValueError,
             "Conv2d: in_channels ({}) and out_channels ({}) must be positive", in_channels, out_channels);
    MS_CHECK(groups > 0 && in_channels % groups == 0 && out_channels % groups == 0, ValueError,
             "Conv2d: groups ({}) must divide in_channels ({}) and out_channels ({})", groups, in_channels,
             out_channels);
    MS_CHECK(kernel_size.h > 0 && kernel_size.w > 0, ValueError, "Conv2d: kernel_size {} must be positive",
             detail::int2_str(kernel_size));
    MS_CHECK(stride.h > 0 && stride.w > 0, ValueError, "Conv2d: stride {} must be positive", detail::int2_str(stride));
    MS_CHECK(padding.h >= 0 && padding.w >= 0, ValueError, "Conv2d: padding {} must be non-negative",
             detail::int2_str(padding));
    MS_CHECK(dilation.h > 0 && dilation.w > 0, ValueError, "Conv2d: dilation {} must be positive",
             detail::int2_str(dilation));
    weight = ms::empty<float>(Shape{out_channels, in_channels / groups, kernel_size.h, kernel_size.w});
    init::default_weight_init_(weight);
    if (bias) {
      this->bias = ms::empty<float>(Shape{out_channels});
      init::default_bias_init_(this->bias, weight);
    }
    register_parameter("weight", weight);
    register_parameter("bias", this->bias);
  }
  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;

  std::int64_t in_channels, out_channels;
  Int2 kernel_size, stride, padding, dilation;
  std::int64_t groups;
  Tensor<float> weight;
  Tensor<float> bias;  ///< undefined when constructed with bias = false
};

/// Batch normalization over the channels of (N, C, H, W). Training mode normalizes with the
/// batch statistics and updates running_mean / running_var in place (momentum, unbiased
/// variance) and num_batches_tracked; eval mode uses the running statistics. weight (gamma)
/// starts at 1, bias (beta) at 0; both absent without `affine`.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : num_features(num_features), eps(eps), momentum(momentum), affine(affine),
        track_running_stats(track_running_stats) {
    MS_CHECK(num_features > 0, ValueError, "BatchNorm2d: num_features must be positive, got {}", num_features);
    if (affine) {
      weight = ms::ones<float>(Shape{num_features});
      bias = ms::zeros<float>(Shape{num_features});
    }
    register_parameter("weight", weight);
    register_parameter("bias", bias);
    if (track_running_stats) {
      running_mean = ms::zeros<float>(Shape{num_features});
      running_var = ms::ones<float>(Shape{num_features});
      num_batches_tracked = ms::zeros<std::int64_t>(Shape{});
    }
    register_buffer("running_mean", running_mean);
    register_buffer("running_var", running_var);
    register_buffer("num_batches_tracked", num_batches_tracked);
  }
  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;

  std::int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Tensor<float> weight, bias;
  Tensor<float> running_mean, running_var;
  Tensor<std::int64_t> num_batches_tracked;
};

/// Layer normalization over the trailing dims `normalized_shape`; weight starts at 1 and
/// bias at 0 (absent without elementwise_affine; bias absent with bias = false).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<std::int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true)
      : normalized_shape(std::move(normalized_shape)), eps(eps) {
    MS_CHECK(!this->normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape is empty");
    for (auto d : this->normalized_shape)
      MS_CHECK(d > 0, ValueError, "LayerNorm: normalized_shape {} must be positive",
               shape_str(Shape(this->normalized_shape)));
    if (elementwise_affine) {
      weight = ms::ones<float>(Shape(this->normalized_shape));
      if (bias) this->bias = ms::zeros<float>(Shape(this->normalized_shape));
    }
    register_parameter("weight", weight);
    register_parameter("bias", this->bias);
  }
  explicit LayerNorm(std::int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(std::vector<std::int64_t>{normalized_size}, eps, elementwise_affine, bias) {}
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::layer_norm(detail::float_input("LayerNorm", x), normalized_shape, weight, bias, eps);
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  std::vector<std::int64_t> normalized_shape;
  double eps;
  Tensor<float> weight, bias;
};

/// In training mode zeroes each element with probability p and scales the rest by
/// 1 / (1 - p); the identity in eval mode. Draws from ms::default_generator().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p(p) {
    MS_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: p must be in [0, 1], got {}", p);
  }
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::dropout(detail::float_input("Dropout", x), p, is_training());
  }
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override { return MS_FORMAT("p={}", p); }
  double p;
};

/// A lookup table: integer indices of any shape -> rows of weight (num_embeddings,
/// embedding_dim); weight starts N(0, 1) as in PyTorch.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
    MS_CHECK(num_embeddings > 0 && embedding_dim > 0, ValueError,
             "Embedding: num_embeddings ({}) and embedding_dim ({}) must be positive", num_embeddings, embedding_dim);
    weight = ms::empty<float>(Shape{num_embeddings, embedding_dim});
    init::normal_(weight);
    register_parameter("weight", weight);
  }
  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override { return MS_FORMAT("{}, {}", num_embeddings, embedding_dim); }

  std::int64_t num_embeddings, embedding_dim;
  Tensor<float> weight;
};

/// Max pooling over (N, C, H, W); stride defaults to the kernel size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Int2 kernel_size, std::optional<Int2> stride = std::nullopt, Int2 padding = 0, Int2 dilation = 1,
                     bool ceil_mode = false)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding), dilation(dilation),
        ceil_mode(ceil_mode) {}
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::max_pool2d(detail::float_input("MaxPool2d", x), kernel_size, stride, padding, dilation, ceil_mode);
  }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Int2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

/// Average pooling over (N, C, H, W); stride defaults to the kernel size.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Int2 kernel_size, std::optional<Int2> stride = std::nullopt, Int2 padding = 0,
                     bool count_include_pad = true, bool ceil_mode = false,
                     std::optional<std::int64_t> divisor_override = std::nullopt)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding),
        count_include_pad(count_include_pad), ceil_mode(ceil_mode), divisor_override(divisor_override) {}
  Tensor<float> forward(const AnyTensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Int2 kernel_size, stride, padding;
  bool count_include_pad;
  bool ceil_mode;
  std::optional<std::int64_t> divisor_override;
};

/// Average pooling to a fixed (H, W) output size.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Int2 output_size) : output_size(output_size) {}
  Tensor<float> forward(const AnyTensor& x) override {
    return ms::adaptive_avg_pool2d(detail::float_input("AdaptiveAvgPool2d", x), output_size);
  }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return MS_FORMAT("output_size={}", detail::int2_str(output_size)); }
  Int2 output_size;
};

// ---- losses (functors of two tensors, not Modules) ---------------------------------------------

/// Cross entropy of logits (N, C) and int64 class targets (N,).
struct CrossEntropyLoss {
  std::string reduction = "mean";
  double label_smoothing = 0.0;
  std::int64_t ignore_index = -100;
  Tensor<float> operator()(const Tensor<float>& logits, const Tensor<std::int64_t>& target) const {
    return ms::cross_entropy(logits, target, reduction, label_smoothing, ignore_index);
  }
};
/// Negative log likelihood of log-probabilities (N, C) at int64 targets (N,).
struct NLLLoss {
  std::string reduction = "mean";
  std::int64_t ignore_index = -100;
  Tensor<float> operator()(const Tensor<float>& log_probs, const Tensor<std::int64_t>& target) const {
    return ms::nll_loss(log_probs, target, reduction, ignore_index);
  }
};
/// Mean squared error.
struct MSELoss {
  std::string reduction = "mean";
  Tensor<float> operator()(const Tensor<float>& a, const Tensor<float>& b) const { return ms::mse_loss(a, b, reduction); }
};

}  // namespace ms::nn

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::nn {
MS_IMPL Tensor<float> Linear::forward(const AnyTensor& x) {
  Tensor<float> xf = detail::float_input("Linear", x);
  MS_CHECK(xf.dim() >= 1 && xf.shape(-1) == in_features, ShapeError,
           "Linear: expected an input of shape (..., {}), got {}", in_features, shape_str(xf.shape()));
  return ms::linear(xf, weight, bias);
}

MS_IMPL std::string Linear::extra_repr() const {
  return MS_FORMAT("in_features={}, out_features={}, bias={}", in_features, out_features,
                     detail::bool_str(bias.defined()));
}

MS_IMPL Sequential& Sequential::push_back(std::shared_ptr<Module> m) {
  MS_CHECK(m != nullptr, ValueError, "Sequential: cannot add a null module");
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(m)));
  return *this;
}

MS_IMPL const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  MS_CHECK(i < layers_.size(), IndexError, "Sequential: index {} is out of range for {} modules", i, layers_.size());
  return layers_[i];
}

MS_IMPL Tensor<float> Sequential::forward(const AnyTensor& x) {
  MS_CHECK(!layers_.empty(), ValueError, "Sequential: forward on an empty Sequential");
  AnyTensor h = x;
  for (auto& m : layers_) h = m->forward(h);
  return Tensor<float>(h);
}

MS_IMPL Tensor<float> Conv2d::forward(const AnyTensor& x) {
  Tensor<float> xf = detail::float_input("Conv2d", x);
  MS_CHECK(xf.dim() == 4 && xf.shape(1) == in_channels, ShapeError,
           "Conv2d: expected an input of shape (N, {}, H, W), got {}", in_channels, shape_str(xf.shape()));
  return ms::conv2d(xf, weight, bias, stride, padding, dilation, groups);
}

MS_IMPL std::string Conv2d::extra_repr() const {
  std::string s = MS_FORMAT("{}, {}, kernel_size={}, stride={}", in_channels, out_channels,
                              detail::int2_str(kernel_size), detail::int2_str(stride));
  if (padding.h || padding.w) s += MS_FORMAT(", padding={}", detail::int2_str(padding));
  if (dilation.h != 1 || dilation.w != 1) s += MS_FORMAT(", dilation={}", detail::int2_str(dilation));
  if (groups != 1) s += MS_FORMAT(", groups={}", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

MS_IMPL Tensor<float> BatchNorm2d::forward(const AnyTensor& x) {
  Tensor<float> xf = detail::float_input("BatchNorm2d", x);
  MS_CHECK(xf.dim() == 4 && xf.shape(1) == num_features, ShapeError,
           "BatchNorm2d: expected an input of shape (N, {}, H, W), got {}", num_features, shape_str(xf.shape()));
  const bool use_batch_stats = is_training() || !track_running_stats;
  if (track_running_stats) {
    // Graph state in both modes: training writes them, and a captured eval step must read
    // the current values on each replay, not a snapshot from capture time.
    detail::mark_graph_state(running_mean);
    detail::mark_graph_state(running_var);
  }
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1.0);
  }
  return ms::batch_norm(xf, weight, bias, running_mean, running_var, use_batch_stats, momentum, eps);
}

MS_IMPL std::string BatchNorm2d::extra_repr() const {
  return MS_FORMAT("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, eps, momentum,
                     detail::bool_str(affine), detail::bool_str(track_running_stats));
}

MS_IMPL std::string LayerNorm::extra_repr() const {
  return MS_FORMAT("{}, eps={}, elementwise_affine={}", shape_str(Shape(normalized_shape)), eps,
                     detail::bool_str(weight.defined()));
}



MS_IMPL Tensor<float> Embedding::forward(const AnyTensor& x) {
  MS_CHECK(x.defined() && (x.dtype() == DType::i64 || x.dtype() == DType::i32), DTypeError,
           "Embedding: expected int64 or int32 indices, got {}", x.defined() ? x.dtype() : DType::f32);
  return Tensor<float>(ops::embedding(weight, x));
}

MS_IMPL std::string MaxPool2d::extra_repr() const {  // the options only when they differ from their defaults
  std::string r = MS_FORMAT("kernel_size={}, stride={}, padding={}", detail::int2_str(kernel_size),
                              detail::int2_str(stride), detail::int2_str(padding));
  if (dilation.h != 1 || dilation.w != 1) r += ", dilation=" + detail::int2_str(dilation);
  if (ceil_mode) r += ", ceil_mode=True";
  return r;
}

MS_IMPL Tensor<float> AvgPool2d::forward(const AnyTensor& x) {
  return ms::avg_pool2d(detail::float_input("AvgPool2d", x), kernel_size, stride, padding, count_include_pad,
                        ceil_mode, divisor_override);
}

MS_IMPL std::string AvgPool2d::extra_repr() const {  // the options only when they differ from their defaults
  std::string r = MS_FORMAT("kernel_size={}, stride={}, padding={}", detail::int2_str(kernel_size),
                              detail::int2_str(stride), detail::int2_str(padding));
  if (ceil_mode) r += ", ceil_mode=True";
  if (divisor_override) r += MS_FORMAT(", divisor_override={}", *divisor_override);
  return r;
}


}  // namespace ms::nn
#endif
