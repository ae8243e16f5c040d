#pragma once
// ms::jit(fn): traces fn on the first call for each input signature (dtype, shape,
// device of every tensor argument), compiles the graph, and replays it on later
// calls with the same signature (like MindSpore's @jit / ms_function). A new
// signature traces again; compiled signatures are kept in a bounded LRU cache.
// Tracing rules are those of graph::Capture (see capture.hpp).

#include <array>
#include <list>
#include <tuple>
#include <type_traits>

#include "../backend/cpu_executor.hpp"
#include "capture.hpp"

namespace ms {

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
      return detail::pack_outputs<R>(outs, cache_.front().layout);
    }
    // Trace: run eagerly under a capture, then compile.
    graph::Capture cap;
    (cap.input(args), ...);
    R result = fn_(args...);
    std::vector<std::size_t> layout;
    detail::OutputPacker<R>::mark(cap, result, layout);
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
