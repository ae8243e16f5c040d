#pragma once
// Static memory planning for a compiled graph: buffers with known sizes and
// lifetimes (first and last step) get offsets in one arena. Greedy best fit among the
// buffers whose lifetimes overlap, in the best of a few orders; reports the planned peak
// and the lower bound (the largest sum of simultaneously live sizes), and a
// checker proves that no two simultaneously live buffers overlap.
// Knows nothing about graphs: callers turn values into BufferReqs.

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "../core/error.hpp"

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
inline std::size_t live_lower_bound(const std::vector<BufferReq>& bufs, std::size_t align = 64) {
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
/// Greedy placement in `order`: each buffer at the best-fitting gap among the already placed
/// buffers whose lifetimes overlap its own (the lowest offset past them when none fits).
inline MemoryPlan place_in_order(const std::vector<BufferReq>& bufs, const std::vector<std::size_t>& order,
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

/// Places buffers greedily (best fit among the placed buffers live at the same time) in
/// four orders and keeps the smallest arena: largest first; longest-lived first; largest
/// size x lifetime first; earliest first. No single order wins on every graph (largest
/// first left a training step's arena 18% over its lower bound, where another fits it).
inline MemoryPlan plan_memory(const std::vector<BufferReq>& bufs, std::size_t align = 64) {
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

/// Throws GraphError if two buffers that are live at the same step overlap in the arena.
inline void check_memory_plan(const std::vector<BufferReq>& bufs, const MemoryPlan& plan) {
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

}  // namespace ms::backend
