#pragma once
// Capture: while a Capture is alive on a thread, every op still runs eagerly AND is
// appended to a Graph. What tracing records, and what it cannot:
//  - it records the ops that ran, with their attributes; C++ control flow (if/for)
//    is unrolled: the graph holds the branch that was taken;
//  - reading a tensor's values on the host (item(), data(), element access) inside
//    a capture throws GraphError, because a branch chosen from data could not be
//    replayed faithfully;
//  - tensors created outside and read inside: those marked with param(), any tensor
//    that requires grad, and any tensor the program writes into (copy_, in-place ops:
//    optimizer state) become parameters, read from their storage on every run; every
//    other one becomes a constant, snapshotted (cloned) at capture time.

#include <cstring>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "../core/linkage.hpp"
#include "../ops/views.hpp"
#include "graph.hpp"

namespace ms::graph {

class Capture final : public ops::Tracer {
 public:
  Capture() {
    MS_CHECK(ops::detail::tracer == nullptr, GraphError, "capture: a capture is already active on this thread");
    ops::detail::tracer = this;
    prev_hook_ = ms::detail::host_read_hook;
    ms::detail::host_read_hook = &reject_host_read;
  }
  ~Capture() override { stop(); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  /// Declares a graph input (a placeholder fed on every run); returns its value id.
  ValueId input(const AnyTensor& t, std::string name = {});
  /// Declares a parameter: mutable state read from `t`'s storage on every run.
  ValueId param(const AnyTensor& t, std::string name = {});
  /// Declares a graph output.
  void output(const AnyTensor& t) { graph_.mark_output(value_of(t)); }

  /// Uninstalls the capture (idempotent).
  void stop();
  /// Ends the capture and returns the graph (verified).
  Graph finish();
  const Graph& graph() const { return graph_; }

  void record(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
              std::span<const AnyTensor> out) override;

  /// The value a tensor stands for; unknown tensors become params (requires_grad) or constants.
  ValueId value_of(const AnyTensor& t);

 private:
  static AnyTensor clone_raw(const AnyTensor& t);
  static void reject_host_read(const char* what);
  void bind(const AnyTensor& t, ValueId v) { seen_[t.impl()] = {t, v}; }

  Graph graph_;
  // Keeps every seen tensor alive during capture so addresses are never reused.
  std::unordered_map<const TensorImpl*, std::pair<AnyTensor, ValueId>> seen_;
  ms::detail::HostReadHook prev_hook_ = nullptr;
  bool active_ = true;
};

namespace detail {
/// Flattens a traced function's result into graph outputs and rebuilds it from a replay's
/// outputs. A result is a tensor, a std::vector of results or a std::tuple of results
/// (nested freely, e.g. tuple<loss, logits, vector<grad>>). Vector lengths are recorded
/// at trace time in `layout`, so a replay rebuilds the same structure.
template <class R>
struct OutputPacker {  // a single tensor
  static void mark(graph::Capture& c, const R& r, std::vector<std::size_t>&) { c.output(r); }
  static R pack(std::vector<AnyTensor>& outs, std::size_t& pos, const std::vector<std::size_t>&, std::size_t&) {
    return R(outs.at(pos++));
  }
};
template <class... Ts>
struct OutputPacker<std::tuple<Ts...>> {
  static void mark(graph::Capture& c, const std::tuple<Ts...>& r, std::vector<std::size_t>& layout) {
    std::apply([&](const auto&... t) { (OutputPacker<std::decay_t<decltype(t)>>::mark(c, t, layout), ...); }, r);
  }
  static std::tuple<Ts...> pack(std::vector<AnyTensor>& outs, std::size_t& pos, const std::vector<std::size_t>& layout,
                                std::size_t& li) {
    // Braced initialization evaluates the elements in order, so `pos` advances left to right.
    return std::tuple<Ts...>{OutputPacker<Ts>::pack(outs, pos, layout, li)...};
  }
};
template <class T>
struct OutputPacker<std::vector<T>> {
  static void mark(graph::Capture& c, const std::vector<T>& r, std::vector<std::size_t>& layout) {
    layout.push_back(r.size());
    for (auto& t : r) OutputPacker<T>::mark(c, t, layout);
  }
  static std::vector<T> pack(std::vector<AnyTensor>& outs, std::size_t& pos, const std::vector<std::size_t>& layout,
                             std::size_t& li) {
    const std::size_t n = layout.at(li++);
    std::vector<T> r;
    r.reserve(n);
    for (std::size_t i = 0; i < n; ++i) r.push_back(OutputPacker<T>::pack(outs, pos, layout, li));
    return r;
  }
};
template <class R>
R pack_outputs(std::vector<AnyTensor>& outs, const std::vector<std::size_t>& layout) {
  std::size_t pos = 0, li = 0;
  return OutputPacker<R>::pack(outs, pos, layout, li);
}
}  // namespace detail

/// Traces `fn(args...)` once (it runs eagerly, as ms::jit's first call does) and returns the
/// graph with the arguments as inputs and the result as outputs. The result is a tensor, a
/// std::vector or a std::tuple of results, nested freely (see detail::OutputPacker).
template <class F, class... Args>
Graph trace(F&& fn, const Args&... args) {
  Capture cap;
  (cap.input(args), ...);
  auto result = fn(args...);
  std::vector<std::size_t> layout;
  detail::OutputPacker<std::decay_t<decltype(result)>>::mark(cap, result, layout);
  return cap.finish();
}

}  // namespace ms::graph

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::graph {
MS_IMPL ValueId Capture::input(const AnyTensor& t, std::string name) {
  ValueId v = graph_.add_input({t.dtype(), t.shape()}, std::move(name));
  bind(t, v);
  return v;
}

MS_IMPL ValueId Capture::param(const AnyTensor& t, std::string name) {
  ValueId v = graph_.add_param(t, std::move(name));
  bind(t, v);
  return v;
}

MS_IMPL void Capture::stop() {
  if (active_) {
    ops::detail::tracer = nullptr;
    ms::detail::host_read_hook = prev_hook_;
    active_ = false;
  }
}

MS_IMPL Graph Capture::finish() {
  stop();
  verify(graph_);
  seen_.clear();
  return std::move(graph_);
}

MS_IMPL void Capture::record(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
              std::span<const AnyTensor> out) {
  std::vector<ValueId> ins;
  ins.reserve(in.size());
  for (auto& t : in) ins.push_back(value_of(t));
  // A tensor from outside that the program writes into (optimizer state) is mutable
  // state, not a constant: bind it as a parameter so replays read and update it.
  for (std::size_t k = 0; k < in.size(); ++k)
    if (op.writes_input(attrs, in.size(), k) && graph_.value(ins[k]).kind == ValueKind::constant)
      graph_.promote_to_param(ins[k], seen_.at(in[k].impl()).first);
  SmallVec<ops::TensorMeta, 2> metas;
  for (auto& t : out) metas.push_back({t.dtype(), t.shape()});
  auto outs = graph_.add_node_with_metas(op, std::move(ins), attrs, std::span<const ops::TensorMeta>(metas.data(), metas.size()));
  for (std::size_t i = 0; i < out.size(); ++i) bind(out[i], outs[i]);
  // A view op that writes into its first input (copy_) returns it: later reads of the
  // destination see the new value.
  if (op.is_view() && op.writes_input(attrs, in.size(), 0)) bind(in[0], outs[0]);
}

MS_IMPL ValueId Capture::value_of(const AnyTensor& t) {
  auto it = seen_.find(t.impl());
  if (it != seen_.end()) return it->second.second;
  // A new handle on a traced value's data (detach(), a typed copy of the handle) is that value.
  for (auto& [impl, entry] : seen_) {
    const AnyTensor& k = entry.first;
    if (k.storage() == t.storage() && k.shape() == t.shape() && k.strides() == t.strides() &&
        k.offset() == t.offset() && k.dtype() == t.dtype()) {
      ValueId v = entry.second;
      bind(t, v);
      return v;
    }
  }
  ValueId v;
  if (t.impl()->autograd && t.impl()->autograd->requires_grad) {
    v = graph_.add_param(t);
  } else {
    // Snapshot without dispatch (nothing recorded, no host-read check).
    v = graph_.add_constant(t.is_contiguous() ? clone_raw(t) : ops::detail::contiguous_raw(t));
  }
  bind(t, v);
  return v;
}

MS_IMPL AnyTensor Capture::clone_raw(const AnyTensor& t) {
  AnyTensor c = AnyTensor::empty(t.shape(), t.dtype());
  std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
  return c;
}

MS_IMPL void Capture::reject_host_read(const char* what) {
  MS_THROW(GraphError,
           "{}: reading a tensor's values on the host during graph capture is not allowed; a traced graph "
           "cannot replay control flow that depends on data (compute it with tensor ops such as where(), "
           "or end the capture first)",
           what);
}
}  // namespace ms::graph
#endif
