#pragma once
// Static memory planning for a compiled graph: buffers with known sizes and
// lifetimes (first and last step) get offsets in one arena. Greedy best fit among the
// buffers whose lifetimes overlap, in the best of a few orders; reports the planned peak
// and the lower bound (the largest sum of simultaneously live sizes), and a
// checker proves that no two simultaneously live buffers overlap.
// plan_values() turns a scheduled graph into those buffers: where each value lives (an
// input, a parameter, the arena, a fresh output, a view of another value) and each arena
// buffer's lifetime, with in-place reuse where an elementwise op is the last reader of
// its input. Every backend's compile() places its values with it.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "../core/linkage.hpp"
#include "../core/error.hpp"
#include "../graph/graph.hpp"

namespace ms::backend {

/// One buffer to place: `size` bytes, live from step `start` through step `end` (inclusive).
struct BufferReq {
  std::size_t size = 0;
  int start = 0;
  int end = 0;
};

struct MemoryPlan {
  std::vector<std::size_t> offsets;  ///< byte offset of each buffer in the arena
  std::size_t peak = 0;              ///< arena size
  std::size_t lower_bound = 0;       ///< largest total size live at one step
  double ratio() const { return lower_bound ? static_cast<double>(peak) / static_cast<double>(lower_bound) : 1.0; }
};

inline std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

/// The largest sum of (aligned) sizes live at one step.
MS_IMPL std::size_t live_lower_bound(const std::vector<BufferReq>& bufs, std::size_t align = 64);

namespace detail {
/// Greedy placement in `order`: each buffer at the best-fitting gap among the already placed
/// buffers whose lifetimes overlap its own (the lowest offset past them when none fits).
MS_IMPL MemoryPlan place_in_order(const std::vector<BufferReq>& bufs, const std::vector<std::size_t>& order,
                                 std::size_t align);
}  // namespace detail

/// Places buffers greedily (best fit among the placed buffers live at the same time) in
/// four orders and keeps the smallest arena: largest first; longest-lived first; largest
/// size x lifetime first; earliest first. No single order wins on every graph (largest
/// first left a training step's arena 18% over its lower bound, where another fits it).
MS_IMPL MemoryPlan plan_memory(const std::vector<BufferReq>& bufs, std::size_t align = 64);

/// Throws GraphError if two buffers that are live at the same step overlap in the arena.
MS_IMPL void check_memory_plan(const std::vector<BufferReq>& bufs, const MemoryPlan& plan);

/// Where a value of a compiled graph lives.
enum class ValueHome : std::uint8_t {
  none,
  input,         ///< a graph input: bound on every run
  fixed,         ///< a parameter, a constant, or a view of one computed once
  fresh,         ///< a graph output made by a kernel: a new tensor on every run
  arena,         ///< an intermediate (or a view of one) in the planned arena
  runtime_view,  ///< a view recomputed on every run (of an input, or a graph output)
  param_alias,   ///< written straight into a parameter's storage (see ValuePlanOptions)
};

struct ValuePlanOptions {
  /// Let an elementwise op (or a plain fused node) write over an input buffer it reads last.
  bool inplace = true;
  /// Per value: the parameter whose storage the value is written into instead of the arena
  /// (-1: none); empty for none at all.
  std::vector<graph::ValueId> writes_param;
  /// Per value: true to keep it out of the arena (it is allocated on its own, as a fresh
  /// value); empty for none. A device graph keeps its host-side values out.
  std::vector<bool> exclude;
};

/// The homes, arena buffers and memory plan of a scheduled graph's values.
struct ValuePlan {
  std::vector<ValueHome> home;     ///< per value
  std::vector<int> buffer;         ///< per value: its arena buffer, or -1
  std::vector<BufferReq> buffers;  ///< per arena buffer: bytes and lifetime in steps (node indices)
  MemoryPlan memory;               ///< the buffers' offsets in one arena
  std::vector<bool> is_output;     ///< per value: a graph output
};

/// Value v's tensor in `arena`, the storage of the plan's arena: contiguous, of v's metadata,
/// at its buffer's offset. v must live in the arena (ValueHome::arena, not a view).
inline AnyTensor arena_view(const std::shared_ptr<Storage>& arena, const ValuePlan& vp, graph::ValueId v,
                            const ops::TensorMeta& meta) {
  const std::size_t off = vp.memory.offsets[static_cast<std::size_t>(vp.buffer[static_cast<std::size_t>(v)])];
  return AnyTensor::view_of(arena, meta.shape, contiguous_strides(meta.shape),
                            static_cast<std::int64_t>(off / dtype_size(meta.dtype)), meta.dtype);
}

/// Plans where every value of `G` (in its node order) lives and places the arena buffers.
MS_IMPL ValuePlan plan_values(const graph::Graph& G, const ValuePlanOptions& opt = {});

}  // namespace ms::backend

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::backend {
MS_IMPL std::size_t live_lower_bound(const std::vector<BufferReq>& bufs, std::size_t align) {
  std::vector<std::pair<int, long long>> ev;
  for (auto& b : bufs) {
    ev.emplace_back(b.start, static_cast<long long>(align_up(b.size, align)));
    ev.emplace_back(b.end + 1, -static_cast<long long>(align_up(b.size, align)));
  }
  std::sort(ev.begin(), ev.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
  long long cur = 0, best = 0;
  for (auto& [t, d] : ev) {
    cur += d;
    best = std::max(best, cur);
  }
  return static_cast<std::size_t>(best);
}

namespace detail {
MS_IMPL MemoryPlan place_in_order(const std::vector<BufferReq>& bufs, const std::vector<std::size_t>& order,
                                 std::size_t align) {
  MemoryPlan plan;
  plan.offsets.assign(bufs.size(), 0);
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of overlapping placed buffers
  for (std::size_t i : order) {
    const std::size_t size = align_up(std::max<std::size_t>(bufs[i].size, 1), align);
    busy.clear();
    for (std::size_t j : placed)
      if (bufs[j].start <= bufs[i].end && bufs[i].start <= bufs[j].end)
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + align_up(std::max<std::size_t>(bufs[j].size, 1), align));
    std::sort(busy.begin(), busy.end());
    std::size_t best = static_cast<std::size_t>(-1), best_gap = static_cast<std::size_t>(-1), cursor = 0;
    for (auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= size && b - cursor < best_gap) {
        best = cursor;
        best_gap = b - cursor;
      }
      cursor = std::max(cursor, e);
    }
    plan.offsets[i] = best != static_cast<std::size_t>(-1) ? best : cursor;
    plan.peak = std::max(plan.peak, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace detail
MS_IMPL MemoryPlan plan_memory(const std::vector<BufferReq>& bufs, std::size_t align) {
  std::vector<std::size_t> order(bufs.size());
  auto life = [&](std::size_t i) { return static_cast<std::size_t>(bufs[i].end - bufs[i].start + 1); };
  auto by = [&](auto key) {
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const auto ka = key(a), kb = key(b);
      if (ka != kb) return ka > kb;
      return bufs[a].start < bufs[b].start;
    });
    return detail::place_in_order(bufs, order, align);
  };
  MemoryPlan plan = by([&](std::size_t i) { return bufs[i].size; });
  auto keep = [&](MemoryPlan p) {
    if (p.peak < plan.peak) plan = std::move(p);
  };
  keep(by([&](std::size_t i) { return std::pair(life(i), bufs[i].size); }));
  keep(by([&](std::size_t i) { return static_cast<double>(bufs[i].size) * static_cast<double>(life(i)); }));
  keep(by([&](std::size_t i) { return std::pair(-static_cast<long long>(bufs[i].start), bufs[i].size); }));
  plan.lower_bound = live_lower_bound(bufs, align);
  return plan;
}

MS_IMPL void check_memory_plan(const std::vector<BufferReq>& bufs, const MemoryPlan& plan) {
  MS_CHECK(plan.offsets.size() == bufs.size(), GraphError, "memory plan: {} offsets for {} buffers",
           plan.offsets.size(), bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    MS_CHECK(plan.offsets[i] + bufs[i].size <= plan.peak, GraphError,
             "memory plan: buffer {} [{}, {}) exceeds the arena of {} bytes", i, plan.offsets[i],
             plan.offsets[i] + bufs[i].size, plan.peak);
    for (std::size_t j = i + 1; j < bufs.size(); ++j) {
      bool live_together = bufs[i].start <= bufs[j].end && bufs[j].start <= bufs[i].end;
      bool overlap = plan.offsets[i] < plan.offsets[j] + bufs[j].size && plan.offsets[j] < plan.offsets[i] + bufs[i].size;
      MS_CHECK(!(live_together && overlap && bufs[i].size && bufs[j].size), GraphError,
               "memory plan: buffers {} (steps {}-{}, bytes {}+{}) and {} (steps {}-{}, bytes {}+{}) overlap", i,
               bufs[i].start, bufs[i].end, plan.offsets[i], bufs[i].size, j, bufs[j].start, bufs[j].end,
               plan.offsets[j], bufs[j].size);
    }
  }
}

namespace detail {
/// The arena buffer that node i (an elementwise op writing `out`) may write over in place:
/// one of its inputs' buffers, of out's size, that nothing reads after it, that is no
/// graph output and that the node reads through no other value. -1 when none.
inline int inplace_buffer(const graph::Graph& G, std::size_t i, graph::ValueId out, const ValuePlan& vp) {
  const auto& nodes = G.nodes();
  const graph::Node& n = nodes[i];
  const auto& meta = G.value(out).meta;
  for (graph::ValueId in : n.inputs) {
    const int b = vp.buffer[static_cast<std::size_t>(in)];
    if (b < 0 || G.value(in).kind != graph::ValueKind::node ||
        nodes[static_cast<std::size_t>(G.value(in).producer)].op->is_view())
      continue;
    const auto& im = G.value(in).meta;
    if (!(im.shape == meta.shape) || dtype_size(im.dtype) != dtype_size(meta.dtype)) continue;
    // The node must not also read b through another value (a transposed, sliced or
    // broadcast view): it would see elements it has already overwritten.
    bool aliased = false;
    for (graph::ValueId o : n.inputs)
      if (o != in && vp.buffer[static_cast<std::size_t>(o)] == b) aliased = true;
    if (aliased) continue;
    // Last reader: no later node reads this buffer (directly or through views).
    bool later = false;
    for (std::size_t j = i + 1; j < nodes.size() && !later; ++j)
      for (graph::ValueId x : nodes[j].inputs)
        if (vp.buffer[static_cast<std::size_t>(x)] == b) later = true;
    bool is_graph_out = false;
    for (std::size_t w = 0; w < vp.buffer.size(); ++w)
      if (vp.buffer[w] == b && vp.is_output[w]) is_graph_out = true;
    if (!later && !is_graph_out) return b;
  }
  return -1;
}

/// Classifies output k of node i and, for an arena value, gives it a buffer.
inline void place_output(const graph::Graph& G, std::size_t i, std::size_t k, const ValuePlanOptions& opt,
                         ValuePlan& vp) {
  const graph::Node& n = G.nodes()[i];
  const int step = static_cast<int>(i);
  const auto v = static_cast<std::size_t>(n.outputs[k]);
  auto& home = vp.home;
  if (!opt.exclude.empty() && opt.exclude[v]) { home[v] = ValueHome::fresh; return; }
  if (n.op->is_view()) {  // a view lives where its source lives
    const auto src = static_cast<std::size_t>(n.inputs[0]);
    vp.buffer[v] = vp.buffer[src];
    home[v] = (home[src] == ValueHome::fixed || home[src] == ValueHome::arena) && !vp.is_output[v]
                  ? ValueHome::arena
                  : ValueHome::runtime_view;
    if (home[src] == ValueHome::fixed && !vp.is_output[v]) home[v] = ValueHome::fixed;
    return;
  }
  if (vp.is_output[v]) { home[v] = ValueHome::fresh; return; }
  if (!opt.writes_param.empty() && opt.writes_param[v] >= 0) { home[v] = ValueHome::param_alias; return; }
  home[v] = ValueHome::arena;
  const auto& meta = G.value(n.outputs[k]).meta;
  const std::size_t bytes = meta.nbytes();
  // In place: an elementwise op may write over an input buffer whose last reader it is,
  // and so may a single-output index-aligned op (all_reduce_wait: its result is its input).
  // (Not a GEMM epilogue: the GEMM reads its inputs while it writes the output.)
  const bool plain_fused = n.fused && n.fused->plain();
  const bool aligned = ops::is_elementwise(n.op->category) || plain_fused || (n.op->index_aligned && !n.fused);
  const int reuse = opt.inplace && n.outputs.size() == 1 && aligned ? inplace_buffer(G, i, n.outputs[k], vp) : -1;
  if (reuse >= 0) {
    vp.buffer[v] = reuse;
    vp.buffers[static_cast<std::size_t>(reuse)].end = std::max(vp.buffers[static_cast<std::size_t>(reuse)].end, step);
  } else {
    vp.buffer[v] = static_cast<int>(vp.buffers.size());
    vp.buffers.push_back(BufferReq{bytes, step, step});
  }
}

}  // namespace detail
MS_IMPL ValuePlan plan_values(const graph::Graph& G, const ValuePlanOptions& opt) {
  const auto& nodes = G.nodes();
  const std::size_t nv = G.values().size();
  ValuePlan vp;
  vp.home.assign(nv, ValueHome::none);
  vp.buffer.assign(nv, -1);
  vp.is_output.assign(nv, false);
  for (graph::ValueId v : G.outputs()) vp.is_output[static_cast<std::size_t>(v)] = true;
  for (std::size_t v = 0; v < nv; ++v) {
    const auto k = G.values()[v].kind;
    if (k == graph::ValueKind::input) vp.home[v] = ValueHome::input;
    else if (k == graph::ValueKind::param || k == graph::ValueKind::constant) vp.home[v] = ValueHome::fixed;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // Extend the lifetime of every arena buffer this node reads (directly or through a view).
    for (graph::ValueId in : nodes[i].inputs)
      if (const int b = vp.buffer[static_cast<std::size_t>(in)]; b >= 0)
        vp.buffers[static_cast<std::size_t>(b)].end = std::max(vp.buffers[static_cast<std::size_t>(b)].end, static_cast<int>(i));
    for (std::size_t k = 0; k < nodes[i].outputs.size(); ++k) detail::place_output(G, i, k, opt, vp);
  }
  // A graph output that views an arena buffer is copied out after the last step.
  for (graph::ValueId w : G.outputs())
    if (const int b = vp.buffer[static_cast<std::size_t>(w)]; b >= 0)
      vp.buffers[static_cast<std::size_t>(b)].end = static_cast<int>(nodes.size());
  vp.memory = plan_memory(vp.buffers);
  check_memory_plan(vp.buffers, vp.memory);
  return vp;
}

}  // namespace ms::backend
#endif
