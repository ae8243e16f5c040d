#pragma once
// ms::jit(fn): traces fn on the first call for each input signature (dtype, shape,
// device of every tensor argument), compiles the graph, and replays it on later
// calls with the same signature (like MindSpore's @jit / ms_function). A new
// signature traces again; compiled signatures are kept in a bounded LRU cache.
// Tracing rules are those of graph::Capture (see capture.hpp).

#include <array>
#include <list>
#include <memory>
#include <type_traits>

#include "backend/cpu/executor.hpp"
#include "graph/capture.hpp"

namespace ms {

/// A function compiled by tracing; call it like the original function.
template <class F>
class Jit {
 public:
  explicit Jit(F fn, backend::CompileOptions opt = {}, std::size_t cache_size = 16)
      : fn_(std::move(fn)), opt_(std::move(opt)), cache_size_(std::max<std::size_t>(cache_size, 1)) {}

  template <class... Args>
  auto operator()(const Args&... args) {
    static_assert((std::is_base_of_v<AnyTensor, Args> && ...), "jit: every argument must be a tensor");
    using R = std::decay_t<std::invoke_result_t<F&, const Args&...>>;
    std::vector<std::int64_t> key;
    (append_signature(key, args), ...);
    // Which arguments are the same tensor: a trace of f(x, x) binds both parameters to one
    // graph input, so it may only serve calls that pass one tensor twice in the same places.
    const std::array<const AnyTensor*, sizeof...(Args)> argv{static_cast<const AnyTensor*>(&args)...};
    for (std::size_t i = 0; i < argv.size(); ++i) {
      std::int64_t first = -1;
      for (std::size_t j = 0; j < i && first < 0; ++j)
        if (argv[j]->impl() == argv[i]->impl()) first = static_cast<std::int64_t>(j);
      key.push_back(first);
    }
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->key != key) continue;
      cache_.splice(cache_.begin(), cache_, it);  // most recently used first
      ++replays_;
      std::vector<AnyTensor> outs = cache_.front().exe->run({static_cast<const AnyTensor&>(args)...});
      return graph::detail::pack_outputs<R>(outs, cache_.front().layout);
    }
    // Trace: run eagerly under a capture, then compile.
    graph::Capture cap;
    (cap.input(args), ...);
    R result = fn_(args...);
    std::vector<std::size_t> layout;
    graph::detail::OutputPacker<R>::mark(cap, result, layout);
    graph::Graph g = cap.finish();
    auto exe = std::make_shared<backend::Executable>(backend::compile(std::move(g), opt_));
    cache_.push_front(Entry{std::move(key), std::move(exe), std::move(layout)});
    if (cache_.size() > cache_size_) cache_.pop_back();
    ++traces_;
    return result;
  }

  /// Number of times fn was traced (one per new signature, plus re-traces after eviction).
  std::size_t num_traces() const { return traces_; }
  /// Number of calls served by replaying a compiled graph.
  std::size_t num_replays() const { return replays_; }
  /// The most recently used executable (null before the first call).
  const backend::Executable* executable() const { return cache_.empty() ? nullptr : cache_.front().exe.get(); }

 private:
  struct Entry {
    std::vector<std::int64_t> key;
    std::shared_ptr<backend::Executable> exe;
    std::vector<std::size_t> layout;  ///< vector lengths in the result, in trace order
  };
  static void append_signature(std::vector<std::int64_t>& key, const AnyTensor& t) {
    key.push_back(static_cast<std::int64_t>(t.dtype()));
    key.push_back(static_cast<std::int64_t>(t.device().type) * 1000 + t.device().index);
    key.push_back(t.dim());
    for (auto d : t.shape()) key.push_back(d);
  }

  F fn_;
  backend::CompileOptions opt_;
  std::size_t cache_size_;
  std::list<Entry> cache_;
  std::size_t traces_ = 0, replays_ = 0;
};

/// Wraps fn so that calls trace once per input signature and replay afterwards.
template <class F>
Jit<F> jit(F fn, backend::CompileOptions opt = {}, std::size_t cache_size = 16) {
  return Jit<F>(std::move(fn), std::move(opt), cache_size);
}

}  // namespace ms
