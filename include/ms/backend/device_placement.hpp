#pragma once
// Where each node of a graph compiled for a device runs (GraphEngine-style): engine
// assignment by cost among the backend's engines and the host CPU, counting the copies a
// placement implies; the dependencies between nodes (data edges, and the ordering that
// in-place writes need); stream assignment (independent branches on separate streams
// joined by events). compile_for_device (device_executor.hpp) builds on these.

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../graph/passes.hpp"
#include "backend.hpp"
#include "compile_options.hpp"

namespace ms::backend {


/// Where and how one node runs.
struct Placement {
  Engine engine = Engine::ai_core;
  int stream = -1;              ///< device nodes only
  /// Why this engine: "aclnn", "aicpu", "device kernel", "view", "no device mapping",
  /// "fused host program", "pinned", "cost".
  std::string reason;
  double cost_us = 0;           ///< estimated cost of the chosen placement, copies included
  int copies_in = 0;            ///< operands copied between host and device for this node
  std::vector<int> waits;       ///< nodes on other streams this one waits for (events)
};

#if MS_IMPL_BODIES  // used by DeviceExecutable's build, compiled once: core/linkage.hpp
namespace detail {

/// View ops that never need a contiguous input (reshape-like ones may copy).
inline bool layout_only_view(const ops::OpDef& op) {
  static const std::set<std::string, std::less<>> ok = {"permute", "transpose", "expand", "slice",
                                                        "squeeze", "unsqueeze", "t"};
  return ok.count(op.name) > 0;
}


/// Places a view node (no kernel): where its input is, or the host for a reshape-like view
/// of a device view (which may have to copy). Returns false for a node that is no pure view.
inline bool place_view(const graph::Graph& G, std::size_t i, Backend& be, std::vector<bool>& on_dev, Placement& p) {
  const auto& nodes = G.nodes();
  const graph::Node& n = nodes[i];
  if (!n.op->is_pure_view()) return false;
  {
    const bool dev_in = on_dev[static_cast<std::size_t>(n.inputs[0])];
    if (dev_in && !layout_only_view(*n.op)) {
      // reshape-like views copy when the input is not contiguous; device values are contiguous
      // unless they are themselves views, which is when the host must do it.
      const auto& src = G.value(n.inputs[0]);
      const bool viewed = src.kind == graph::ValueKind::node && nodes[static_cast<std::size_t>(src.producer)].op->is_view();
      if (viewed) {
        p = {Engine::host_cpu, -1, "view of a view (may copy)", 0, 1, {}};
        on_dev[static_cast<std::size_t>(n.outputs[0])] = false;
        return true;
      }
    }
    p = {dev_in ? be.engine() : Engine::host_cpu, -1, "view", 0, 0, {}};
    on_dev[static_cast<std::size_t>(n.outputs[0])] = dev_in;
    return true;
  }
  return true;
}

/// Places a node that runs a kernel: on the cheapest device engine that runs it, or on the
/// host when that is cheaper (copies counted), pinned, fused, or unmapped.
inline void place_kernel(const graph::Graph& G, std::size_t i, Backend& be, const CompileOptions& opt,
                         std::vector<bool>& on_dev, Placement& p) {
  const auto& nodes = G.nodes();
  const graph::Node& n = nodes[i];
  SmallVec<ops::TensorMeta, 4> in, out;
  for (auto v : n.inputs) in.push_back(G.value(v).meta);
  for (auto v : n.outputs) out.push_back(G.value(v).meta);
  std::span<const ops::TensorMeta> ins(in.data(), in.size()), outs(out.data(), out.size());
  const bool writer = n.op->is_writing_view();
  const HostCostModel host_cost;
  // Copy and sync figures for placing nodes; from the backend when it has them.
  const double copy_fixed_us = 10.0, copy_bytes_per_us = 1e4, sync_us = 20.0;
  auto copy_cost = [&](const ops::TensorMeta& m) {
    return copy_fixed_us + static_cast<double>(m.nbytes()) / copy_bytes_per_us;
  };
  const bool pinned = opt.pin_ops.count(n.op->name) || opt.pin_nodes.count(n.name) || (opt.pin_to_cpu && opt.pin_to_cpu(n));
  // Copies: a device engine pays for operands on the host, the host for operands on the device.
  double to_dev_us = 0, host_cost_us = 0;
  int dev_copies = 0, host_copies = 0;
  bool viewed_in = false;  // an operand is a device view (maybe strided)
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const auto vi = static_cast<std::size_t>(n.inputs[k]);
    if (on_dev[vi]) { host_cost_us += copy_cost(in[k]); ++host_copies; }
    else { to_dev_us += copy_cost(in[k]); ++dev_copies; }
    const auto& src = G.value(n.inputs[k]);
    viewed_in |= on_dev[vi] && src.kind == graph::ValueKind::node &&
                 nodes[static_cast<std::size_t>(src.producer)].op->is_view();
  }
  if (host_copies > 0) host_cost_us += sync_us;
  if (writer && on_dev[static_cast<std::size_t>(n.inputs[0])]) host_cost_us += copy_cost(in[0]);  // write back
  host_cost_us += host_cost(ops::op_cost(*n.op, ins, outs, n.attrs));
  // The cheapest device engine that runs the node (the first on a tie). AI CPU takes dense
  // tensors only, so a node reading a device view stays off it.
  std::optional<Engine> dev;
  double dev_cost = 0;
  if (!n.fused)
    for (Engine e : be.engines()) {
      if (e == Engine::ai_cpu && viewed_in) continue;
      if (!be.supports(e, *n.op, ins, n.attrs)) continue;
      const double c = to_dev_us + be.cost_us(e, *n.op, ins, outs, n.attrs);
      if (!dev || c < dev_cost) { dev = e; dev_cost = c; }
    }
  bool use_dev;
  if (pinned) { use_dev = false; p.reason = "pinned"; }
  else if (!dev) { use_dev = false; p.reason = n.fused ? "fused host program" : "no device mapping"; }
  else if (host_cost_us < dev_cost) { use_dev = false; p.reason = "cost"; }
  else {
    use_dev = true;
    p.reason = *dev == Engine::ai_cpu ? "aicpu" : find_device_kernel(*n.op, be.device().type) ? "device kernel" : "aclnn";
  }
  p.engine = use_dev ? *dev : Engine::host_cpu;
  p.cost_us = use_dev ? dev_cost : host_cost_us;
  p.copies_in = use_dev ? dev_copies : host_copies;
  for (auto v : n.outputs) on_dev[static_cast<std::size_t>(v)] = writer ? on_dev[static_cast<std::size_t>(n.inputs[0])] : use_dev;
}
}  // namespace detail

/// The engine of every node, in topological order (inputs, parameters and constants live
/// on the device).
inline std::vector<Placement> assign_engines(const graph::Graph& G, Backend& be, const CompileOptions& opt) {
  const auto& nodes = G.nodes();
  std::vector<bool> on_dev(G.values().size(), true);  // where each value is produced
  std::vector<Placement> place(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!detail::place_view(G, i, be, on_dev, place[i])) detail::place_kernel(G, i, be, opt, on_dev, place[i]);
  return place;
}

/// The nodes each node must wait for: its producers, and for a node that writes into an
/// input, the earlier readers of that memory (and later readers wait for it). `root`: the
/// value whose storage each value shows (a view aliases its input's root).
struct NodeDeps {
  std::vector<std::vector<int>> deps;
  std::vector<graph::ValueId> root;
};

inline NodeDeps node_dependencies(const graph::Graph& G) {
  const auto& nodes = G.nodes();
  const std::size_t nv = G.values().size();
  NodeDeps d;
  auto& deps = d.deps;
  auto& root = d.root;
  deps.resize(nodes.size());
  std::vector<int> producer(nv, -1);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (auto v : nodes[i].outputs) producer[static_cast<std::size_t>(v)] = static_cast<int>(i);
  // Root storage of each value (a view aliases its input's root).
  root.resize(nv);
  for (std::size_t v = 0; v < nv; ++v) root[v] = static_cast<graph::ValueId>(v);
  for (const auto& n : nodes)
    if (n.op->is_view()) root[static_cast<std::size_t>(n.outputs[0])] = root[static_cast<std::size_t>(n.inputs[0])];
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    for (auto v : n.inputs)
      if (producer[static_cast<std::size_t>(v)] >= 0) deps[i].push_back(producer[static_cast<std::size_t>(v)]);
    // A node that writes into an input (copy_, batch_norm's running statistics) runs after
    // every earlier reader of that memory, and every later reader runs after it.
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.op->writes_input(n.attrs, n.inputs.size(), k)) continue;
      const graph::ValueId r = root[static_cast<std::size_t>(n.inputs[k])];
      for (std::size_t j = 0; j < i; ++j)
        for (auto v : nodes[j].inputs)
          if (root[static_cast<std::size_t>(v)] == r) deps[i].push_back(static_cast<int>(j));
    }
    for (std::size_t j = 0; j < i; ++j)
      for (std::size_t k = 0; k < nodes[j].inputs.size(); ++k)
        if (nodes[j].op->writes_input(nodes[j].attrs, nodes[j].inputs.size(), k))
          for (auto v : n.inputs)
            if (root[static_cast<std::size_t>(v)] == root[static_cast<std::size_t>(nodes[j].inputs[k])])
              deps[i].push_back(static_cast<int>(j));
    std::sort(deps[i].begin(), deps[i].end());
    deps[i].erase(std::unique(deps[i].begin(), deps[i].end()), deps[i].end());
  }
  return d;
}

/// Stream assignment: a device node continues the stream of a producer it follows directly
/// (the first such), else it opens a new stream (up to max_streams, then the least used);
/// a node waits (an event) for each predecessor on another stream. Returns the number of
/// streams (at least 1).
inline int assign_streams(const graph::Graph& G, const NodeDeps& nd, int max_streams_opt, std::vector<Placement>& place) {
  const auto& nodes = G.nodes();
  const auto& deps = nd.deps;
  // Views run nowhere: a node depending on a view depends on what the view depends on.
  auto resolve = [&](int j, auto& self) -> std::vector<int> {
    if (!nodes[static_cast<std::size_t>(j)].op->is_pure_view())
      return {j};
    std::vector<int> r;
    for (int d : deps[static_cast<std::size_t>(j)]) {
      auto x = self(d, self);
      r.insert(r.end(), x.begin(), x.end());
    }
    return r;
  };

  const int max_streams = std::max(1, max_streams_opt);
  std::vector<int> tail;  // last node on each stream
  std::vector<int> load;
  std::vector<bool> dev_node(nodes.size(), false);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Placement& p = place[i];
    const bool is_kernel = p.engine != Engine::host_cpu && !nodes[i].op->is_pure_view();
    if (!is_kernel) continue;
    dev_node[i] = true;
    std::vector<int> pred;
    for (int d : deps[i]) for (int r : resolve(d, resolve)) if (dev_node[static_cast<std::size_t>(r)]) pred.push_back(r);
    int s = -1;
    for (int r : pred)
      if (tail[static_cast<std::size_t>(place[static_cast<std::size_t>(r)].stream)] == r) {
        s = place[static_cast<std::size_t>(r)].stream;
        break;
      }
    if (s < 0) {
      if (static_cast<int>(tail.size()) < max_streams) {
        tail.push_back(-1);
        load.push_back(0);
        s = static_cast<int>(tail.size()) - 1;
      } else {
        s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      }
    }
    p.stream = s;
    tail[static_cast<std::size_t>(s)] = static_cast<int>(i);
    ++load[static_cast<std::size_t>(s)];
    for (int r : pred)
      if (place[static_cast<std::size_t>(r)].stream != s) p.waits.push_back(r);
    std::sort(p.waits.begin(), p.waits.end());
    p.waits.erase(std::unique(p.waits.begin(), p.waits.end()), p.waits.end());
  }
  return std::max<int>(1, static_cast<int>(tail.size()));
}

#endif  // MS_IMPL_BODIES

}  // namespace ms::backend
