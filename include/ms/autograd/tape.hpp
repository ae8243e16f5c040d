#pragma once
// Reverse-mode autodiff, eager tape: every op that runs on a tensor that requires
// grad records a GradNode (the op, its attributes, detached copies of its inputs
// and outputs, and edges to the producers of its inputs). backward() walks the
// nodes in reverse topological order and calls each op's gradient rule, which is
// written with ordinary registered ops — so inside a graph capture the backward
// pass is recorded too, and a whole training step becomes one graph.

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "../core/linkage.hpp"
#include "../ops/binary.hpp"
#include "../ops/views.hpp"
#include "../ops/reduce.hpp"

namespace ms {

namespace detail {

/// Where the gradient of one input of a node goes: another node's output, or a leaf.
struct GradEdge {
  std::shared_ptr<GradNode> node;
  int output_index = 0;
  std::shared_ptr<AutogradMeta> leaf;
  bool empty() const { return !node && !leaf; }
};

struct GradNode {
  const ops::OpDef* op = nullptr;
  ops::Attrs attrs;
  std::vector<AnyTensor> inputs;   ///< detached (no autograd state): no reference cycles
  std::vector<AnyTensor> outputs;  ///< detached
  std::vector<GradEdge> edges;     ///< one per input
};

/// A handle to the same data without autograd state.
MS_IMPL AnyTensor detached(const AnyTensor& t);

MS_IMPL void record_grad(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                        std::span<const AnyTensor> out);

/// Installs the recorder when this header is included.
MS_REGISTRATION(const bool grad_recorder_installed, (ops::detail::grad_recorder = &record_grad, true));

/// Sums a broadcast gradient back to `shape` (NumPy broadcasting in reverse).
MS_IMPL AnyTensor sum_to(const AnyTensor& g, const Shape& shape);

inline AnyTensor accumulate(const AnyTensor& a, const AnyTensor& b) { return a.defined() ? ops::add(a, b) : b; }

/// Runs backward from `root` with upstream gradient `grad`. With `wrt`, the gradients of
/// those leaves are returned (and .grad is untouched); otherwise leaves accumulate into .grad.
MS_IMPL std::vector<AnyTensor> run_backward(const AnyTensor& root, AnyTensor grad,
                                           const std::vector<AnyTensor>* wrt = nullptr);

}  // namespace detail

// ---- AnyTensor autodiff members (declared in core/tensor.hpp) --------------------------------

inline bool AnyTensor::requires_grad() const {
  auto& m = impl_->autograd;
  return m && (m->requires_grad || m->grad_fn);
}
inline AnyTensor AnyTensor::grad_any() const {
  auto& m = impl_->autograd;
  return m && m->grad ? AnyTensor(m->grad) : AnyTensor();
}
inline void AnyTensor::zero_grad() {
  if (impl_->autograd) impl_->autograd->grad.reset();
}
inline void AnyTensor::backward(const AnyTensor& grad_output) const { detail::run_backward(*this, grad_output); }
inline AnyTensor AnyTensor::detach() const { return detail::detached(*this); }

template <Element T>
Tensor<T> Tensor<T>::grad() const {
  return Tensor<T>(grad_any());
}

namespace autograd {
/// Called with a leaf's gradient once a backward pass has summed every contribution to it
/// (undefined when the pass gave it none): in backward() the accumulated .grad, in grad()
/// the gradient it returns. Runs inside the pass (no grad mode), so the ops it calls follow
/// the last op of that gradient, in eager order and in a captured graph.
using GradReadyHook = std::function<void(const AnyTensor& grad)>;

/// Registers `fn` on a leaf that requires grad (PyTorch's post-accumulate-grad hook); returns
/// an id for remove_grad_ready_hook. Hooks stay until removed and run in registration order.
MS_IMPL std::uint64_t add_grad_ready_hook(const AnyTensor& leaf, GradReadyHook fn);
/// Removes a hook added by add_grad_ready_hook (nothing when it is gone already).
MS_IMPL void remove_grad_ready_hook(const AnyTensor& leaf, std::uint64_t id);

/// Gradients of `output` with respect to each tensor in `inputs` (leaves that require grad),
/// like torch.autograd.grad; .grad fields are not touched. `grad_output` defaults to 1 for scalars.
MS_IMPL std::vector<AnyTensor> grad(const AnyTensor& output, const std::vector<AnyTensor>& inputs,
                                   const AnyTensor& grad_output = AnyTensor());
}  // namespace autograd

/// Makes a function that returns (fn(args...), gradients of it w.r.t. `params`), MindSpore's
/// value_and_grad. fn must return a scalar tensor. Wrap the result in ms::jit to capture
/// forward and backward as one graph.
template <class F>
auto value_and_grad(F fn, std::vector<AnyTensor> params) {
  return [fn = std::move(fn), params = std::move(params)](const auto&... args) {
    auto value = fn(args...);
    std::vector<AnyTensor> grads = autograd::grad(value, params);
    return std::make_pair(value, grads);
  };
}

}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms {
namespace detail {
MS_IMPL AnyTensor detached(const AnyTensor& t) {
  return AnyTensor::view_of(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
}

MS_IMPL void record_grad(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                        std::span<const AnyTensor> out) {
  auto node = std::make_shared<GradNode>();
  node->op = &op;
  node->attrs = attrs;
  node->inputs.reserve(in.size());
  for (auto& t : in) {
    node->inputs.push_back(detached(t));
    GradEdge e;
    auto& m = t.impl()->autograd;
    if (m && m->grad_fn) { e.node = m->grad_fn; e.output_index = m->output_index; }
    else if (m && m->requires_grad) e.leaf = m;
    node->edges.push_back(std::move(e));
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    node->outputs.push_back(detached(out[i]));
    if (!is_floating(out[i].dtype())) continue;  // integer and bool outputs carry no gradient
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_index = static_cast<int>(i);
    out[i].impl()->autograd = std::move(meta);
  }
}

MS_IMPL AnyTensor sum_to(const AnyTensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  int lead = g.dim() - shape.rank();
  ops::IntList axes;
  for (int i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) axes.push_back(i);
  AnyTensor r = axes.empty() ? g : ops::sum(g, axes, true);
  return ops::reshape(r, shape.vec());
}

MS_IMPL std::vector<AnyTensor> run_backward(const AnyTensor& root, AnyTensor grad,
                                           const std::vector<AnyTensor>* wrt) {
  auto& rm = root.impl()->autograd;
  MS_CHECK(is_floating(root.dtype()), ValueError,
           "backward: the output is a {} tensor {}; integer and bool outputs (argmax, comparisons, casts to "
           "integers) carry no gradient; call backward() on a floating output",
           root.dtype(), shape_str(root.shape()));
  MS_CHECK(rm && (rm->grad_fn || rm->requires_grad), ValueError,
           "backward: the tensor {} {} does not require grad (no input of the ops that made it requires grad)",
           root.dtype(), shape_str(root.shape()));
  if (!grad.defined()) {
    MS_CHECK(root.numel() == 1, ValueError,
             "backward: a gradient must be given for a non-scalar output (shape {})", shape_str(root.shape()));
    grad = ops::expand(ops::scalar_tensor(1.0, root.dtype(), "backward"), root.shape().vec());
  }
  MS_CHECK(grad.shape() == root.shape() && grad.dtype() == root.dtype(), ShapeError,
           "backward: gradient {} {} does not match the output {} {}", grad.dtype(), shape_str(grad.shape()),
           root.dtype(), shape_str(root.shape()));
  NoGradGuard no_grad;

  std::vector<AnyTensor> results(wrt ? wrt->size() : 0);
  std::unordered_map<const AutogradMeta*, std::size_t> wrt_index;
  if (wrt)
    for (std::size_t i = 0; i < wrt->size(); ++i) {
      auto& m = (*wrt)[i].impl()->autograd;
      MS_CHECK(m && m->requires_grad, ValueError, "grad: input {} ({} {}) does not require grad", i, (*wrt)[i].dtype(),
               shape_str((*wrt)[i].shape()));
      wrt_index[m.get()] = i;
    }
  auto deliver_leaf = [&](const std::shared_ptr<AutogradMeta>& leaf, const AnyTensor& g) {
    if (wrt) {
      auto it = wrt_index.find(leaf.get());
      if (it != wrt_index.end()) results[it->second] = accumulate(results[it->second], g);
      return;
    }
    AnyTensor old = leaf->grad ? AnyTensor(leaf->grad) : AnyTensor();
    leaf->grad = accumulate(old, g).impl_ptr();
  };

  // Leaves with grad-ready hooks (whose gradient this pass computes): how many edges still
  // bring them a contribution; at zero their gradient is complete and the hooks run.
  auto hooked = [&](const AutogradMeta* leaf) {
    return !leaf->grad_ready_hooks.empty() && (!wrt || wrt_index.count(leaf) != 0);
  };
  auto fire_hooks = [&](const AutogradMeta* leaf) {
    AnyTensor g;
    if (wrt) g = results[wrt_index.at(leaf)];
    else if (leaf->grad) g = AnyTensor(leaf->grad);
    auto hooks = leaf->grad_ready_hooks;  // a hook may remove itself
    for (auto& [id, fn] : hooks) fn(g.defined() ? g.impl_ptr() : nullptr);
  };
  if (!rm->grad_fn) {  // the root is a leaf itself
    deliver_leaf(rm, grad);
    if (hooked(rm.get())) fire_hooks(rm.get());
    return results;
  }
  // Dependencies: how many consumer edges point at each node (and at each hooked leaf).
  std::unordered_map<GradNode*, int> deps;
  std::unordered_map<const AutogradMeta*, int> leaf_left;
  std::vector<GradNode*> stack{rm->grad_fn.get()};
  std::unordered_set<GradNode*> seen{rm->grad_fn.get()};
  while (!stack.empty()) {
    GradNode* n = stack.back();
    stack.pop_back();
    for (auto& e : n->edges) {
      if (e.leaf && hooked(e.leaf.get())) leaf_left[e.leaf.get()]++;
      if (!e.node) continue;
      deps[e.node.get()]++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  std::unordered_map<GradNode*, std::vector<AnyTensor>> pending;
  pending[rm->grad_fn.get()].resize(rm->grad_fn->outputs.size());
  pending[rm->grad_fn.get()][static_cast<std::size_t>(rm->output_index)] = grad;
  std::vector<GradNode*> ready{rm->grad_fn.get()};
  while (!ready.empty()) {
    GradNode* n = ready.back();
    ready.pop_back();
    std::vector<AnyTensor> gout = std::move(pending[n]);
    pending.erase(n);
    gout.resize(n->outputs.size());
    MS_CHECK(n->op->grad != nullptr, NotImplementedError, "backward: op '{}' is not differentiable{}{}", n->op->name,
             n->op->nondiff_reason.empty() ? "" : ": ", n->op->nondiff_reason);
    // Inputs without an edge (no grad required) need no gradient: rules may skip them.
    SmallVec<bool, 8> needs;
    for (const GradEdge& e : n->edges) needs.push_back(!e.empty());
    std::vector<AnyTensor> gin = n->op->grad(ops::GradArgs{*n->op, n->inputs, n->outputs, gout, n->attrs,
                                                           std::span<const bool>(needs.data(), needs.size())});
    MS_CHECK(gin.size() == n->inputs.size(), GraphError, "backward: the gradient rule of '{}' returned {} gradients for {} inputs",
             n->op->name, gin.size(), n->inputs.size());
    for (std::size_t i = 0; i < gin.size(); ++i) {
      GradEdge& e = n->edges[i];
      if (e.empty()) continue;
      AnyTensor g = gin[i];
      if (g.defined()) g = sum_to(g, n->inputs[i].shape());
      if (e.leaf) {
        if (g.defined()) deliver_leaf(e.leaf, g);
        if (!leaf_left.empty())
          if (auto it = leaf_left.find(e.leaf.get()); it != leaf_left.end() && --it->second == 0)
            fire_hooks(e.leaf.get());
        continue;
      }
      auto& slot = pending[e.node.get()];
      slot.resize(e.node->outputs.size());
      if (g.defined()) slot[static_cast<std::size_t>(e.output_index)] = accumulate(slot[static_cast<std::size_t>(e.output_index)], g);
      if (--deps[e.node.get()] == 0) ready.push_back(e.node.get());
    }
    ops::detail::make_progress();  // e.g. a bucket all-reduce started by a grad-ready hook
  }
  return results;
}

}  // namespace detail
MS_IMPL AnyTensor& AnyTensor::set_requires_grad(bool on) {
  if (on) {
    MS_CHECK(is_floating(dtype()), DTypeError, "requires_grad: only floating tensors can require grad, got {}", dtype());
    MS_CHECK(!(impl_->autograd && impl_->autograd->grad_fn), ValueError,
             "requires_grad: only leaf tensors can be set to require grad (this one was computed by '{}')",
             impl_->autograd->grad_fn->op->name);
    if (!impl_->autograd) impl_->autograd = std::make_shared<detail::AutogradMeta>();
    impl_->autograd->requires_grad = true;
  } else if (impl_->autograd) {
    impl_->autograd->requires_grad = false;
  }
  return *this;
}

namespace autograd {
MS_IMPL std::uint64_t add_grad_ready_hook(const AnyTensor& leaf, GradReadyHook fn) {
  auto& m = leaf.impl()->autograd;
  MS_CHECK(m && m->requires_grad && !m->grad_fn, ValueError,
           "add_grad_ready_hook: the tensor {} {} is not a leaf that requires grad", leaf.dtype(),
           shape_str(leaf.shape()));
  static std::atomic<std::uint64_t> next{1};
  const std::uint64_t id = next++;
  m->grad_ready_hooks.emplace_back(id, [fn = std::move(fn)](const std::shared_ptr<TensorImpl>& g) {
    fn(g ? AnyTensor(g) : AnyTensor());
  });
  return id;
}

MS_IMPL void remove_grad_ready_hook(const AnyTensor& leaf, std::uint64_t id) {
  auto& m = leaf.impl()->autograd;
  if (!m) return;
  std::erase_if(m->grad_ready_hooks, [id](const auto& h) { return h.first == id; });
}

MS_IMPL std::vector<AnyTensor> grad(const AnyTensor& output, const std::vector<AnyTensor>& inputs,
                                   const AnyTensor& grad_output) {
  std::vector<AnyTensor> r = detail::run_backward(output, grad_output, &inputs);
  for (std::size_t i = 0; i < r.size(); ++i)  // inputs the output does not depend on get zeros
    if (!r[i].defined()) r[i] = ops::expand(ops::scalar_tensor(0.0, inputs[i].dtype(), "grad"), inputs[i].shape().vec());
  return r;
}

}  // namespace autograd
}  // namespace ms
#endif
