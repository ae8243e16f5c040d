#pragma once
// Static memory planning for a compiled graph: buffers with known sizes and
// lifetimes (first and last step) get offsets in one arena. Greedy by size with
// best fit among the buffers whose lifetimes overlap; reports the planned peak
// and the lower bound (the largest sum of simultaneously live sizes), and a
// checker proves that no two simultaneously live buffers overlap.
// Knows nothing about graphs: callers turn values into BufferReqs.

#include <algorithm>
#include <cstddef>
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

/// Places buffers: largest first, each at the best-fitting gap among already placed
/// buffers whose lifetimes overlap its own.
inline MemoryPlan plan_memory(const std::vector<BufferReq>& bufs, std::size_t align = 64) {
  MemoryPlan plan;
  plan.offsets.assign(bufs.size(), 0);
  std::vector<std::size_t> order(bufs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    return bufs[a].start < bufs[b].start;
  });
  std::vector<std::size_t> placed;
  for (std::size_t i : order) {
    std::size_t size = align_up(std::max<std::size_t>(bufs[i].size, 1), align);
    std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of overlapping placed buffers
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
