#pragma once
// Optimizers (SGD with momentum/Nesterov/weight decay, Adam, AdamW) and learning-rate
// schedules (StepLR, CosineAnnealingLR, WarmupLinearLR, LambdaLR), like torch.optim.
//
// Every update is computed with tensor ops under NoGradGuard and written into the
// parameters and the optimizer state with in-place ops (copy_), never through data().
// That makes an optimizer step part of a captured training-step graph: inside
// ms::jit, tensors written in place (parameters, momentum buffers, Adam moments, the
// step count) become graph parameters, so each replay reads and updates them.
//
//   auto net = nn::make<nn::Linear>(4, 2);
//   optim::Adam opt(net->parameters(), 1e-3);
//   auto train_step = ms::jit([&](const Tensor<float>& x, const Tensor<float>& y) {
//     auto [loss, grads] = ms::value_and_grad(loss_fn, net->parameters_any())(x, y);
//     opt.step(grads);
//     return loss;
//   });
//
// The learning rate and the step count are 0-d float32 tensors. The lr is read with
// tensor ops and marked as graph state, so set_lr() (and the schedules, which call it)
// change what an already captured step does, without re-tracing; call them outside the
// captured function. Adam's bias corrections 1 - beta^t are computed from the step count
// tensor, so they advance in replays (exact for up to 2^24 steps). All state tensors
// are created in the constructor, outside any capture.
//
// Parameters are float32 tensors; gradients must match their shapes and dtype.

#include <cmath>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <unordered_set>
#include <vector>

#include "../core/linkage.hpp"
#include "../autograd/tape.hpp"
#include "../ops/binary.hpp"
#include "../ops/factory.hpp"
#include "../ops/inplace.hpp"
#include "../ops/optim_ops.hpp"
#include "../ops/unary.hpp"

namespace ms::optim {

/// Optimizer state by name: "lr", "step", "<param index>.<state name>".
using StateDict = std::map<std::string, AnyTensor>;

namespace detail {
/// Inside a graph capture, makes `t` mutable graph state (a parameter read from its storage
/// on every replay) rather than a constant snapshot: a tensor the program writes into
/// becomes a parameter, so write it onto itself. Outside a capture this does nothing.
inline void mark_graph_state(const AnyTensor& t) {
  if (ops::detail::tracer != nullptr) ops::copy_(t, t);
}
}  // namespace detail

/// Base class: holds the parameters, the lr and step-count tensors and named state.
class Optimizer {
 public:
  Optimizer(std::vector<Tensor<float>> params, double lr, std::string name)
      : params_(std::move(params)), name_(std::move(name)) {
    MS_CHECK(!params_.empty(), ValueError, "{}: the parameter list is empty", name_);
    MS_CHECK(lr >= 0 && std::isfinite(lr), ValueError, "{}: invalid learning rate {}", name_, lr);
    std::unordered_set<const TensorImpl*> seen;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& p = params_[i];
      MS_CHECK(p.defined(), ValueError, "{}: parameter {} is undefined", name_, i);
      MS_CHECK(p.device().is_cpu(), DeviceError, "{}: parameter {} is on {}", name_, i, p.device());
      MS_CHECK(seen.insert(p.impl()).second, ValueError, "{}: parameter {} appears more than once", name_, i);
    }
    lr_value_ = lr;
    lr_ = ms::full<float>(Shape{}, lr);
    step_ = ms::zeros<float>(Shape{});
  }
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update from each parameter's accumulated .grad (parameters without one are skipped).
  void step();
  /// One update from explicit gradients, one per parameter in order (an undefined entry
  /// skips that parameter), e.g. the second result of ms::value_and_grad.
  void step(const std::vector<AnyTensor>& grads);

  /// Drops the .grad of every parameter.
  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }

  /// The learning rate last set (host value).
  double lr() const { return lr_value_; }
  /// Sets the learning rate; captured steps see it on their next replay.
  void set_lr(double lr);
  /// The 0-d float32 tensor the updates read the learning rate from.
  const Tensor<float>& lr_tensor() const { return lr_; }
  /// The number of steps taken (eager and replayed), a 0-d float32 tensor.
  const Tensor<float>& step_count() const { return step_; }
  const std::vector<Tensor<float>>& params() const { return params_; }
  const std::string& name() const { return name_; }

  /// The state tensor `name` of parameter i ("momentum_buffer", "exp_avg", ...).
  const Tensor<float>& state(std::size_t i, const std::string& name) const;

  /// lr, step and every state tensor (sharing storage with the optimizer).
  StateDict state_dict() const;
  /// Copies a state_dict() into this optimizer in place; every key must be present with
  /// the same shape and dtype (checked before anything is written).
  void load_state_dict(const StateDict& sd);

 protected:
  /// Called once per step, after the step count was incremented, before the updates.
  virtual void begin_step() {}
  /// Updates parameter i from its gradient g (under NoGradGuard).
  virtual void update(std::size_t i, Tensor<float> p, const Tensor<float>& g) = 0;

  /// Creates the zero-initialized state tensor `name` of parameter i (call in constructors).
  Tensor<float> add_state(std::size_t i, const std::string& name);

  std::vector<Tensor<float>> params_;
  Tensor<float> lr_;    ///< 0-d learning rate
  Tensor<float> step_;  ///< 0-d step count (1 during the first update)

 private:
  static std::string key(std::size_t i, const std::string& name) { return std::to_string(i) + "." + name; }

  std::string name_;
  double lr_value_ = 0;
  std::map<std::string, Tensor<float>> state_;
};

/// Options of SGD (the defaults of torch.optim.SGD).
struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

/// Stochastic gradient descent, as torch.optim.SGD:
///   g = grad + weight_decay * p
///   buf = momentum * buf + (1 - dampening) * g   (buf = g on the first step)
///   g = nesterov ? g + momentum * buf : buf       (when momentum != 0)
///   p = p - lr * g
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor<float>> params, double lr, SGDOptions opt = {})
      : Optimizer(std::move(params), lr, "SGD"), opt_(opt) {
    MS_CHECK(opt.momentum >= 0, ValueError, "SGD: invalid momentum {}", opt.momentum);
    MS_CHECK(opt.weight_decay >= 0, ValueError, "SGD: invalid weight_decay {}", opt.weight_decay);
    MS_CHECK(!opt.nesterov || (opt.momentum > 0 && opt.dampening == 0), ValueError,
             "SGD: Nesterov momentum requires a momentum and zero dampening");
    if (opt.momentum != 0)
      for (std::size_t i = 0; i < params_.size(); ++i) buf_.push_back(add_state(i, "momentum_buffer"));
  }
  SGD(std::vector<Tensor<float>> params, double lr, double momentum, double weight_decay = 0, bool nesterov = false)
      : SGD(std::move(params), lr, SGDOptions{momentum, 0.0, weight_decay, nesterov}) {}

  const SGDOptions& options() const { return opt_; }

 protected:
  void update(std::size_t i, Tensor<float> p, const Tensor<float>& grad) override;

 private:
  SGDOptions opt_;
  std::vector<Tensor<float>> buf_;
};

/// Options of Adam and AdamW.
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  ///< Adam: L2 added to the gradient; AdamW: decoupled decay
  bool amsgrad = false;
};

/// Adam (torch.optim.Adam; weight_decay is an L2 term added to the gradient):
///   g = grad + weight_decay * p
///   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
///   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// AdamW differs only in the decay: p = p * (1 - lr * weight_decay) before the update,
/// and the gradient is used as is.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor<float>> params, double lr = 1e-3, AdamOptions opt = {})
      : Adam(std::move(params), lr, opt, false, "Adam") {}
  Adam(std::vector<Tensor<float>> params, double lr, double beta1, double beta2, double eps = 1e-8,
       double weight_decay = 0)
      : Adam(std::move(params), lr, AdamOptions{beta1, beta2, eps, weight_decay, false}) {}

  const AdamOptions& options() const { return opt_; }

 protected:
  Adam(std::vector<Tensor<float>> params, double lr, AdamOptions opt, bool decoupled, std::string name)
      : Optimizer(std::move(params), lr, std::move(name)), opt_(opt), decoupled_(decoupled) {
    MS_CHECK(opt.beta1 >= 0 && opt.beta1 < 1, ValueError, "{}: invalid beta1 {}", this->name(), opt.beta1);
    MS_CHECK(opt.beta2 >= 0 && opt.beta2 < 1, ValueError, "{}: invalid beta2 {}", this->name(), opt.beta2);
    MS_CHECK(opt.eps >= 0, ValueError, "{}: invalid eps {}", this->name(), opt.eps);
    MS_CHECK(opt.weight_decay >= 0, ValueError, "{}: invalid weight_decay {}", this->name(), opt.weight_decay);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      m_.push_back(add_state(i, "exp_avg"));
      v_.push_back(add_state(i, "exp_avg_sq"));
      if (opt.amsgrad) vmax_.push_back(add_state(i, "max_exp_avg_sq"));
    }
  }

  void begin_step() override;

  void update(std::size_t i, Tensor<float> p, const Tensor<float>& grad) override;

 private:
  /// True when update(i) may let the kernel write p, m and v in place: an eager step on
  /// the CPU with no graph capture, no observer that reads values (a dump) watching, contiguous
  /// tensors and a gradient that shares no storage with them.
  bool eager_in_place(const Tensor<float>& p, const Tensor<float>& grad, std::size_t i) const;

  AdamOptions opt_;
  bool decoupled_;
  std::vector<Tensor<float>> m_, v_, vmax_;
  Tensor<float> step_size_, bc2_sqrt_, decay_;  // per-step values (set by begin_step)
};

/// Adam with decoupled weight decay (torch.optim.AdamW; weight_decay defaults to 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor<float>> params, double lr = 1e-3, AdamOptions opt = {0.9, 0.999, 1e-8, 0.01, false})
      : Adam(std::move(params), lr, opt, true, "AdamW") {}
  AdamW(std::vector<Tensor<float>> params, double lr, double beta1, double beta2, double eps, double weight_decay)
      : AdamW(std::move(params), lr, AdamOptions{beta1, beta2, eps, weight_decay, false}) {}
};

// ==== learning-rate schedules ================================================================

/// A schedule: lr as a function of the epoch (or step) counter. step() advances the counter
/// and sets the optimizer's lr; the constructor applies epoch 0. Call them outside captured
/// functions: the captured step reads the new lr from the lr tensor on its next replay.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& opt) : opt_(opt), base_lr_(opt.lr()) {}
  virtual ~LRScheduler() = default;
  /// The lr for `epoch`.
  virtual double lr_at(std::int64_t epoch) const = 0;
  /// Advances one epoch and applies its lr.
  void step() {
    ++epoch_;
    apply();
  }
  /// Jumps to `epoch` and applies its lr.
  void set_epoch(std::int64_t epoch) {
    epoch_ = epoch;
    apply();
  }
  std::int64_t last_epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }
  /// The lr of the current epoch.
  double get_lr() const { return lr_at(epoch_); }

 protected:
  void apply() { opt_.set_lr(lr_at(epoch_)); }

  Optimizer& opt_;
  double base_lr_;
  std::int64_t epoch_ = 0;
};

/// base_lr * gamma^(epoch / step_size) (integer division), as torch's StepLR.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, std::int64_t step_size, double gamma = 0.1)
      : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
    MS_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got {}", step_size);
    apply();
  }
  double lr_at(std::int64_t epoch) const override {
    return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
  }

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (the closed form of
/// torch's CosineAnnealingLR).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, std::int64_t T_max, double eta_min = 0)
      : LRScheduler(opt), t_max_(T_max), eta_min_(eta_min) {
    MS_CHECK(T_max > 0, ValueError, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
    apply();
  }
  double lr_at(std::int64_t epoch) const override {
    return eta_min_ + (base_lr_ - eta_min_) *
                          (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
  }

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// Linear warmup then linear decay to zero (Hugging Face's get_linear_schedule_with_warmup):
/// base_lr * epoch / warmup while epoch < warmup, then base_lr * (total - epoch) / (total - warmup),
/// never below zero.
class WarmupLinearLR : public LRScheduler {
 public:
  WarmupLinearLR(Optimizer& opt, std::int64_t warmup_steps, std::int64_t total_steps)
      : LRScheduler(opt), warmup_(warmup_steps), total_(total_steps) {
    MS_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps, ValueError,
             "WarmupLinearLR: need 0 <= warmup_steps ({}) <= total_steps ({})", warmup_steps, total_steps);
    apply();
  }
  double lr_at(std::int64_t epoch) const override {
    if (epoch < warmup_) return base_lr_ * static_cast<double>(epoch) / static_cast<double>(std::max<std::int64_t>(1, warmup_));
    double f = static_cast<double>(total_ - epoch) / static_cast<double>(std::max<std::int64_t>(1, total_ - warmup_));
    return base_lr_ * std::max(0.0, f);
  }

 private:
  std::int64_t warmup_, total_;
};

/// base_lr * f(epoch) for a user function f (torch's LambdaLR).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(std::int64_t)> f) : LRScheduler(opt), f_(std::move(f)) {
    MS_CHECK(static_cast<bool>(f_), ValueError, "LambdaLR: the function is empty");
    apply();
  }
  double lr_at(std::int64_t epoch) const override { return base_lr_ * f_(epoch); }

 private:
  std::function<double(std::int64_t)> f_;
};

}  // namespace ms::optim

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::optim {
MS_IMPL void Optimizer::step() {
  std::vector<AnyTensor> grads;
  grads.reserve(params_.size());
  for (auto& p : params_) grads.push_back(p.grad_any());
  step(grads);
}

MS_IMPL void Optimizer::step(const std::vector<AnyTensor>& grads) {
  MS_CHECK(grads.size() == params_.size(), ValueError, "{}: step got {} gradients for {} parameters", name_,
           grads.size(), params_.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    MS_CHECK(grads[i].dtype() == params_[i].dtype(), DTypeError,
             "{}: the gradient of parameter {} is {}, the parameter is {}", name_, i, grads[i].dtype(),
             params_[i].dtype());
    MS_CHECK(grads[i].shape() == params_[i].shape(), ShapeError,
             "{}: the gradient of parameter {} has shape {}, the parameter has {}", name_, i,
             shape_str(grads[i].shape()), shape_str(params_[i].shape()));
  }
  NoGradGuard no_grad;
  detail::mark_graph_state(lr_);
  step_.add_(1.0);
  begin_step();
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (grads[i].defined()) update(i, params_[i], Tensor<float>(grads[i].detach()));
}

MS_IMPL void Optimizer::set_lr(double lr) {
  MS_CHECK(lr >= 0 && std::isfinite(lr), ValueError, "{}: invalid learning rate {}", name_, lr);
  lr_value_ = lr;
  NoGradGuard no_grad;
  lr_.fill_(lr);
}

MS_IMPL const Tensor<float>& Optimizer::state(std::size_t i, const std::string& name) const {
  auto it = state_.find(key(i, name));
  MS_CHECK(it != state_.end(), ValueError, "{}: no state '{}' for parameter {}", name_, name, i);
  return it->second;
}

MS_IMPL StateDict Optimizer::state_dict() const {
  StateDict sd{{"lr", lr_.detach()}, {"step", step_.detach()}};
  for (auto& [k, t] : state_) sd.emplace(k, t.detach());
  return sd;
}

MS_IMPL void Optimizer::load_state_dict(const StateDict& sd) {
  std::vector<std::pair<AnyTensor, AnyTensor>> writes;
  auto check = [&](const std::string& k, const AnyTensor& dst) {
    auto it = sd.find(k);
    MS_CHECK(it != sd.end(), ValueError, "{}: load_state_dict: missing key '{}'", name_, k);
    MS_CHECK(it->second.defined() && it->second.shape() == dst.shape() && it->second.dtype() == dst.dtype(),
             ShapeError, "{}: load_state_dict: key '{}' must be {} {}", name_, k, dst.dtype(), shape_str(dst.shape()));
    writes.emplace_back(dst, it->second);
  };
  check("lr", lr_);
  check("step", step_);
  for (auto& [k, t] : state_) check(k, t);
  for (auto& [k, t] : sd)
    MS_CHECK(k == "lr" || k == "step" || state_.contains(k), ValueError, "{}: load_state_dict: unexpected key '{}'",
             name_, k);
  NoGradGuard no_grad;
  for (auto& [dst, src] : writes) ops::copy_(dst, src.detach());
  lr_value_ = static_cast<double>(lr_.item());
}

MS_IMPL Tensor<float> Optimizer::add_state(std::size_t i, const std::string& name) {
  Tensor<float> t = ms::zeros<float>(params_[i].shape());
  state_.emplace(key(i, name), t);
  return t;
}

MS_IMPL void Adam::begin_step() {
  // Bias corrections from the step count tensor: 1 - beta^t.
  Tensor<float> bc1 = 1.0f - ms::pow(static_cast<float>(opt_.beta1), step_);
  Tensor<float> bc2 = 1.0f - ms::pow(static_cast<float>(opt_.beta2), step_);
  step_size_ = lr_ / bc1;
  bc2_sqrt_ = ms::sqrt(bc2);
  if (decoupled_ && opt_.weight_decay != 0) decay_ = 1.0f - lr_ * opt_.weight_decay;
}

MS_IMPL bool Adam::eager_in_place(const Tensor<float>& p, const Tensor<float>& grad, std::size_t i) const {
  if (ops::detail::tracer != nullptr) return false;
  if (ops::detail::observer != nullptr && ops::detail::observer->needs_values()) return false;
  if (!p.device().is_cpu() || !grad.device().is_cpu() || !p.is_contiguous()) return false;
  const AnyTensor g(grad);
  return !g.shares_storage(p) && !g.shares_storage(m_[i]) && !g.shares_storage(v_[i]);
}

MS_IMPL void Adam::update(std::size_t i, Tensor<float> p, const Tensor<float>& grad) {
  if (!opt_.amsgrad) {
    // One pass over p, g, m and v (ops::adam_update), bit-identical to the form below.
    const double l2 = decoupled_ ? 0.0 : opt_.weight_decay;
    const AnyTensor decay = decoupled_ && opt_.weight_decay != 0 ? AnyTensor(decay_) : AnyTensor();
    if (eager_in_place(p, grad, i)) {
      // Eager on the CPU, no dump watching: the kernel writes p, m and v where they are
      // instead of into new tensors copied back (three more passes over the state, and
      // three allocations, per parameter and step).
      ops::adam_update_(p, grad, m_[i], v_[i], step_size_, bc2_sqrt_, opt_.beta1, opt_.beta2, opt_.eps, l2, decay);
      return;
    }
    auto r =
        ops::adam_update(p, grad, m_[i], v_[i], step_size_, bc2_sqrt_, opt_.beta1, opt_.beta2, opt_.eps, l2, decay);
    ops::copy_(m_[i], r[1]);
    ops::copy_(v_[i], r[2]);
    ops::copy_(p, r[0]);
    return;
  }
  Tensor<float> g = grad;
  if (opt_.weight_decay != 0) {
    if (decoupled_) p.copy_(p * decay_);
    else g = g + p * opt_.weight_decay;
  }
  Tensor<float> m = m_[i] * opt_.beta1 + g * (1.0 - opt_.beta1);
  Tensor<float> v = v_[i] * opt_.beta2 + g * g * (1.0 - opt_.beta2);
  m_[i].copy_(m);
  v_[i].copy_(v);
  if (opt_.amsgrad) {
    v = ms::maximum(vmax_[i], v);
    vmax_[i].copy_(v);
  }
  Tensor<float> denom = ms::sqrt(v) / bc2_sqrt_ + opt_.eps;
  p.sub_(m / denom * step_size_);
}

MS_IMPL void SGD::update(std::size_t i, Tensor<float> p, const Tensor<float>& grad) {
  Tensor<float> g = grad;
  if (opt_.weight_decay != 0) g = g + p * opt_.weight_decay;
  if (opt_.momentum != 0) {
    Tensor<float>& buf = buf_[i];
    Tensor<float> nb;
    if (opt_.dampening == 0) {
      nb = buf * opt_.momentum + g;  // buf starts at zero: the first step gives g exactly
    } else {
      // (1 - dampening), except 1 on the first step (step_ == 1), from the step tensor.
      Tensor<float> first_done = ms::minimum(step_ - 1.0f, 1.0f);
      nb = buf * opt_.momentum + g * (1.0f - first_done * opt_.dampening);
    }
    buf.copy_(nb);
    g = opt_.nesterov ? g + nb * opt_.momentum : nb;
  }
  p.sub_(g * lr_);
}
}  // namespace ms::optim
#endif
