#pragma once
// nn::Module: the base of every layer. A module owns named parameters (float32 leaf
// tensors that require grad), named buffers (state that is saved but not trained, such
// as BatchNorm's running statistics) and named child modules, like torch.nn.Module.
//
// Registration stores the address of a member handle, so `weight` in a layer and
// "weight" in named_parameters() are always the same tensor, even after the member is
// reassigned. For that reason modules are neither copyable nor movable: create them
// with std::make_shared (children are held by shared_ptr).
//
// State dicts map dotted names ("0.weight", "features.3.running_mean") to tensors.
// load_state_dict() checks every key, shape and dtype before it writes anything, then
// copies the values into the existing tensors in place (so optimizers and captured
// graphs that hold the parameters keep seeing them).

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "../core/linkage.hpp"
#include "../ops/unary.hpp"
#include "../autograd/tape.hpp"
#include "../core/tensor.hpp"
#include "../ops/inplace.hpp"
#include "../ops/views.hpp"

namespace ms::nn {

/// A state dict: dotted name -> tensor (sorted by name).
using StateDict = std::map<std::string, AnyTensor>;

/// Base class of every layer.
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The computation. Most layers take and return float32 tensors; Embedding takes integer
  /// indices, which is why the input is untyped. The default throws NotImplementedError.
  virtual Tensor<float> forward(const AnyTensor& /*x*/) {
    MS_THROW(NotImplementedError, "{}: forward is not implemented", type_name());
  }
  /// Calls forward(x).
  Tensor<float> operator()(const AnyTensor& x) { return forward(x); }

  /// The layer's class name as printed ("Linear", "Sequential", ...).
  virtual std::string type_name() const { return "Module"; }
  /// The constructor arguments as printed inside the parentheses of to_string().
  virtual std::string extra_repr() const { return {}; }

  // ---- parameters, buffers, children -----------------------------------------------------

  /// Parameters with dotted names, in registration order, parents before children; a
  /// tensor shared by several modules is listed once (under its first name).
  std::vector<std::pair<std::string, Tensor<float>>> named_parameters(bool recurse = true) const;
  /// The parameters (the handles, not copies), in the order of named_parameters().
  std::vector<Tensor<float>> parameters(bool recurse = true) const;
  /// The parameters as untyped handles (for ms::value_and_grad and autograd::grad).
  std::vector<AnyTensor> parameters_any(bool recurse = true) const;
  /// Buffers with dotted names, in registration order.
  std::vector<std::pair<std::string, AnyTensor>> named_buffers(bool recurse = true) const;
  std::vector<AnyTensor> buffers(bool recurse = true) const;
  /// Direct children with their names.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module ("") and every descendant, with dotted names, depth first.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  /// Number of parameter elements.
  std::int64_t num_parameters() const;

  // ---- modes and gradients ---------------------------------------------------------------

  /// Sets training mode on this module and every descendant (Dropout and BatchNorm care).
  Module& train(bool on = true);
  /// Evaluation mode: train(false).
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  /// Drops the accumulated .grad of every parameter (like zero_grad(set_to_none=True)).
  void zero_grad() {
    for (auto& p : parameters()) p.zero_grad();
  }
  /// Sets requires_grad on every parameter (false freezes the module).
  Module& requires_grad_(bool on = true);

  // ---- state dict ------------------------------------------------------------------------

  /// Parameters and buffers by dotted name. The tensors share storage with the module's
  /// (no copy) and carry no autograd state.
  StateDict state_dict() const;

  /// Copies values from `sd` into this module's parameters and buffers, in place. Every
  /// entry is checked first (nothing is written when one fails): a missing or unexpected
  /// key (when strict) throws ValueError, a shape mismatch ShapeError, a dtype mismatch
  /// DTypeError; each message names the key.
  void load_state_dict(const StateDict& sd, bool strict = true);

  // ---- printing --------------------------------------------------------------------------

  /// A PyTorch-style tree: "Sequential(\n  (0): Linear(in_features=4, ...)\n ...)".
  std::string to_string() const;

 protected:
  /// Registers a parameter stored in `slot` (a member of the derived class). The tensor
  /// must be float32; it is made a leaf that requires grad. An undefined slot (an absent
  /// bias) is skipped by named_parameters().
  Tensor<float>& register_parameter(std::string name, Tensor<float>& slot, bool requires_grad = true);
  /// Registers a buffer stored in `slot` (saved in the state dict, not trained).
  AnyTensor& register_buffer(std::string name, AnyTensor& slot);
  /// Registers a child module under `name`; returns it.
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    check_name(name);
    MS_CHECK(m != nullptr, ValueError, "{}: register_module('{}'): the module is null", type_name(), name);
    children_.emplace_back(std::move(name), m);
    m->train(training_);
    return m;
  }

 private:
  template <class F>
  void visit_modules(const std::string& prefix, bool recurse, F&& f) const {
    f(prefix, *this);
    if (!recurse) return;
    for (auto& [n, c] : children_) c->visit_modules(prefix + n + ".", true, f);
  }
  void check_name(const std::string& name) const;
  static std::string quoted(const std::vector<std::string>& names);

  std::vector<std::pair<std::string, Tensor<float>*>> params_;
  std::vector<std::pair<std::string, AnyTensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// Creates a module: nn::make<Linear>(4, 8) == std::make_shared<Linear>(4, 8).
template <class M, class... A>
std::shared_ptr<M> make(A&&... args) {
  return std::make_shared<M>(std::forward<A>(args)...);
}

}  // namespace ms::nn

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::nn {
MS_IMPL std::vector<std::pair<std::string, Tensor<float>>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor<float>>> out;
  std::unordered_set<const TensorImpl*> seen;
  visit_modules("", recurse, [&](const std::string& prefix, const Module& m) {
    for (auto& [name, slot] : m.params_)
      if (slot->defined() && seen.insert(slot->impl()).second) out.emplace_back(prefix + name, *slot);
  });
  return out;
}

MS_IMPL std::vector<Tensor<float>> Module::parameters(bool recurse) const {
  std::vector<Tensor<float>> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

MS_IMPL std::vector<AnyTensor> Module::parameters_any(bool recurse) const {
  std::vector<AnyTensor> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

MS_IMPL std::vector<std::pair<std::string, AnyTensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, AnyTensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  visit_modules("", recurse, [&](const std::string& prefix, const Module& m) {
    for (auto& [name, slot] : m.buffers_)
      if (slot->defined() && seen.insert(slot->impl()).second) out.emplace_back(prefix + name, *slot);
  });
  return out;
}

MS_IMPL std::vector<AnyTensor> Module::buffers(bool recurse) const {
  std::vector<AnyTensor> out;
  for (auto& [n, b] : named_buffers(recurse)) out.push_back(b);
  return out;
}

MS_IMPL std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

MS_IMPL std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  visit_modules("", true, [&](const std::string& prefix, const Module& m) {
    out.emplace_back(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), &m);
  });
  return out;
}

MS_IMPL std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (auto& p : parameters()) n += p.numel();
  return n;
}

MS_IMPL Module& Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
  return *this;
}

MS_IMPL Module& Module::requires_grad_(bool on) {
  for (auto& p : parameters()) p.set_requires_grad(on);
  return *this;
}

MS_IMPL StateDict Module::state_dict() const {
  StateDict sd;
  for (auto& [n, p] : named_parameters()) sd.emplace(n, p.detach());
  for (auto& [n, b] : named_buffers()) sd.emplace(n, b.detach());
  return sd;
}

MS_IMPL void Module::load_state_dict(const StateDict& sd, bool strict) {
  std::vector<std::pair<std::string, AnyTensor>> own;
  for (auto& [n, p] : named_parameters()) own.emplace_back(n, p);
  for (auto& [n, b] : named_buffers()) own.emplace_back(n, b);
  std::vector<std::string> missing, unexpected;
  std::vector<std::pair<AnyTensor, AnyTensor>> writes;  // (destination, source)
  std::unordered_set<std::string> own_names;
  for (auto& [name, dst] : own) {
    own_names.insert(name);
    auto it = sd.find(name);
    if (it == sd.end()) {
      missing.push_back(name);
      continue;
    }
    const AnyTensor& src = it->second;
    MS_CHECK(src.defined(), ValueError, "load_state_dict: the tensor for key '{}' is undefined", name);
    MS_CHECK(src.shape() == dst.shape(), ShapeError,
             "load_state_dict: size mismatch for key '{}': the checkpoint has shape {}, the module has {}", name,
             shape_str(src.shape()), shape_str(dst.shape()));
    MS_CHECK(src.dtype() == dst.dtype(), DTypeError,
             "load_state_dict: dtype mismatch for key '{}': the checkpoint has {}, the module has {}", name,
             src.dtype(), dst.dtype());
    MS_CHECK(src.device().is_cpu(), DeviceError, "load_state_dict: the tensor for key '{}' is on {}", name,
             src.device());
    writes.emplace_back(dst, src);
  }
  for (auto& [name, t] : sd)
    if (!own_names.contains(name)) unexpected.push_back(name);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg = MS_FORMAT("load_state_dict: error(s) loading the state dict of {}", type_name());
    if (!missing.empty()) msg += MS_FORMAT("; missing key(s): {}", quoted(missing));
    if (!unexpected.empty()) msg += MS_FORMAT("; unexpected key(s): {}", quoted(unexpected));
    throw ValueError(msg);
  }
  NoGradGuard no_grad;
  for (auto& [dst, src] : writes)
    if (!src.is_same(dst)) ops::copy_(dst.detach(), src.detach());
}

MS_IMPL std::string Module::to_string() const {
  std::string head = type_name() + "(" + extra_repr();
  if (children_.empty()) return head + ")";
  std::string s = head + "\n";
  for (auto& [n, c] : children_) {
    std::string child = c->to_string();
    std::string indented;
    for (char ch : child) {
      indented += ch;
      if (ch == '\n') indented += "  ";
    }
    s += "  (" + n + "): " + indented + "\n";
  }
  return s + ")";
}

MS_IMPL Tensor<float>& Module::register_parameter(std::string name, Tensor<float>& slot, bool requires_grad) {
  check_name(name);
  if (slot.defined() && requires_grad) slot.requires_grad_(true);
  params_.emplace_back(std::move(name), &slot);
  return slot;
}

MS_IMPL AnyTensor& Module::register_buffer(std::string name, AnyTensor& slot) {
  check_name(name);
  buffers_.emplace_back(std::move(name), &slot);
  return slot;
}

MS_IMPL void Module::check_name(const std::string& name) const {
  MS_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError,
           "{}: invalid name '{}' (names must be non-empty and contain no '.')", type_name(), name);
  auto taken = [&](const auto& list) {
    for (auto& [n, x] : list)
      if (n == name) return true;
    return false;
  };
  MS_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), ValueError,
           "{}: the name '{}' is already registered", type_name(), name);
}

MS_IMPL std::string Module::quoted(const std::vector<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}
}  // namespace ms::nn
#endif
