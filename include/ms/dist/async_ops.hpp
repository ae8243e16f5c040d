#pragma once
// A non-blocking all-reduce as two registered ops, so that a graph can launch it early and
// wait for it late: all_reduce_start(t0, t1, ...) packs its tensors (flattened, in order)
// into a new 1-d buffer and starts an MPI_Iallreduce on that buffer in place;
// all_reduce_wait(buffer) completes it and returns the reduced values. Between the two the
// buffer belongs to MPI: the start's output is read by nothing but its wait, so the memory
// planner keeps it alive and unaliased until the wait (its lifetime ends at its last
// reader, and only elementwise and index-aligned ops write over a buffer they read). The
// wait is index-aligned: a replay plans its result into the buffer itself (no copy; the
// buffer then lives as long as the result is read). Both are marked
// is_random: never merged (CSE), never run at compile time (folding); dead-code
// elimination removes a start only once its wait is gone. Not differentiable (the grad-
// ready hooks of DataParallel call them inside backward).
//
// Progress. Open MPI over shared memory (and MPICH alike) moves a non-blocking collective
// only while the process is inside an MPI call. The thread that started it polls it
// (MPI_Test) between two ops of the backward pass (autograd's engine) and between two
// steps of a graph replay (the CPU executor), through ops::detail::progress, installed
// while a request is in flight. That thread is the one that makes every other MPI call, so
// MPI_THREAD_SERIALIZED (what init() asks for) is enough, and no core is taken from the
// computation: on a machine with one core per rank a progress thread would spin on the
// core that the rank computes on. A poll is one MPI_Test (well under a microsecond); ops
// of a training step take microseconds or more.
//
// Starts and waits pair up by buffer address, on the thread that started: each start's
// buffer is live until its wait, so two in flight never share one. Every rank must start
// the same all-reduces in the same order (MPI's rule for collectives); the first calls of a
// group check it as the blocking collectives do.

#include <cstring>
#include <vector>

#include "../backend/backend.hpp"
#include "ops.hpp"

namespace ms::dist {

/// What the non-blocking all-reduces of this thread did (for tests and benchmarks).
struct AsyncStats {
  std::int64_t started = 0;           ///< all_reduce_start calls
  std::int64_t polls = 0;             ///< MPI_Test calls made between ops while one was in flight
  std::int64_t done_before_wait = 0;  ///< waits that found their all-reduce already complete
  std::int64_t waited = 0;            ///< waits that had to block
};

namespace detail {

struct InFlight {
  const void* key = nullptr;
  std::int64_t n = 0;
  Work work;
};
struct AsyncState {
  std::vector<InFlight> pending;
  AsyncStats stats;
};
inline AsyncState& async_state() {
  static thread_local auto* s = new AsyncState();  // never destroyed: MPI may be finalized by then
  return *s;
}

/// The progress call between ops: advances every all-reduce in flight (MPI_Test); removes
/// itself once all are complete.
inline void progress_pending() {
  AsyncState& s = async_state();
  bool running = false;
  for (InFlight& f : s.pending) {
    if (f.work.done()) continue;
    ++s.stats.polls;
    if (!f.work.test()) running = true;
  }
  if (!running) ops::detail::progress = nullptr;
}

inline void start_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  MS_CHECK(!in.empty(), ValueError, "{}: takes at least one tensor", op.name);
  const ReduceOp r = reduce_of(a);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    MS_CHECK(in[i].dtype == in[0].dtype, DTypeError,
             "{}: every tensor must have one dtype; input 0 is {} {}, input {} is {} {}", op.name,
             shape_str(in[0].shape), in[0].dtype, i, shape_str(in[i].shape), in[i].dtype);
    n += numel(in[i].shape);
  }
  const DType d = in[0].dtype;
  MS_CHECK(d == DType::f32 || d == DType::f64 || d == DType::i32 || d == DType::i64, DTypeError,
           "{}: dtype {} is not supported (float32, float64, int32, int64; cast 16-bit floats first); inputs {}",
           op.name, d, ops::metas_str(in));
  if (r == ReduceOp::mean)
    MS_CHECK(is_floating(d), DTypeError, "{}: reduction mean needs a floating dtype, got {}", op.name,
             ops::metas_str(in));
  out.push_back(TensorMeta{d, Shape{n}});
}

inline void start_kernel(const KernelArgs& k) {
  const AnyTensor& buf = k.out[0];
  const ReduceOp r = reduce_of(k.attrs);
  const Group g = group_of(k.attrs);
  auto* dst = static_cast<char*>(buf.raw_data());
  for (const AnyTensor& t : k.in) {  // pack: the bucket's gradients, flattened, in order
    const AnyTensor c = ops::detail::contiguous_raw(t);
    if (c.nbytes() > 0) std::memcpy(dst, c.raw_data(), c.nbytes());
    dst += c.nbytes();
  }
  check_same_call("all_reduce_start", static_cast<std::int64_t>(r), g, TensorMeta{buf.dtype(), buf.shape()});
  AsyncState& s = async_state();
  ++s.stats.started;
  if (buf.numel() == 0) return;  // nothing to reduce; its wait has nothing to wait for
  for (const InFlight& f : s.pending)
    MS_CHECK(f.key != buf.raw_data(), DistError,
             "all_reduce_start: rank {}: the buffer of an all-reduce still in flight is started again (each start "
             "needs its wait first)",
             rank());
  InFlight f;
  f.key = buf.raw_data();
  f.n = buf.numel();
  f.work = all_reduce_async_buffer(g, buf.raw_data(), buf.numel(), buf.dtype(), r, std::make_shared<AnyTensor>(buf),
                                   "all_reduce_start");
  s.pending.push_back(std::move(f));
  ops::detail::progress = &progress_pending;
}

inline void wait_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor (the output of all_reduce_start), got {}", op.name,
           in.size());
  MS_CHECK(in[0].shape.rank() == 1, ShapeError, "{}: takes the 1-d buffer made by all_reduce_start, got {} {}",
           op.name, shape_str(in[0].shape), in[0].dtype);
  out.push_back(in[0]);
}

inline void wait_kernel(const KernelArgs& k) {
  const AnyTensor& buf = k.in[0];
  if (buf.numel() > 0) {
    AsyncState& s = async_state();
    auto it = std::find_if(s.pending.begin(), s.pending.end(),
                           [&](const InFlight& f) { return f.key == buf.raw_data() && f.n == buf.numel(); });
    MS_CHECK(it != s.pending.end(), DistError,
             "all_reduce_wait: rank {}: no all-reduce is in flight on this {} {} buffer (wait on the output of "
             "all_reduce_start, once, on the thread that started it)",
             rank(), shape_str(buf.shape()), buf.dtype());
    ++(it->work.done() ? s.stats.done_before_wait : s.stats.waited);
    Work w = std::move(it->work);
    s.pending.erase(it);
    w.wait();  // DistError after the timeout
    if (s.pending.empty()) ops::detail::progress = nullptr;
  }
  // A replay plans the result into the buffer itself (index-aligned, its last reader): no copy.
  if (buf.nbytes() > 0 && k.out[0].raw_data() != buf.raw_data())
    std::memcpy(k.out[0].raw_data(), buf.raw_data(), buf.nbytes());
}

inline OpDef async_op(std::string name, std::string doc, int num_inputs, std::vector<std::string> attrs,
                      ops::InferFn infer, ops::KernelFn kernel) {
  OpDef d;
  d.name = std::move(name);
  d.category = ops::Category::collective;
  d.num_inputs = num_inputs;
  d.doc = std::move(doc);
  d.attr_names = std::move(attrs);
  d.infer = infer;
  d.kernel = kernel;
  d.cost = &comm_cost;
  d.cpu_dtypes = DTypeSet{DType::f32, DType::f64, DType::i32, DType::i64};
  d.is_random = true;  // each call communicates: never merged, never folded
  d.nondiff_reason = "a non-blocking collective (use all_reduce for a differentiable reduction)";
  return d;
}

}  // namespace detail

inline const ops::OpDef& all_reduce_start_op = ops::registry().add(detail::async_op(
    "all_reduce_start",
    "packs its tensors into one 1-d buffer and starts a non-blocking all-reduce of it (MPI_Iallreduce)", -1,
    {"op", "group"}, &detail::start_infer, &detail::start_kernel));
inline const ops::OpDef& all_reduce_wait_op = ops::registry().add([] {
  ops::OpDef d =
      detail::async_op("all_reduce_wait", "waits for the all-reduce that all_reduce_start began on its buffer; returns "
                       "the result", 1, {}, &detail::wait_infer, &detail::wait_kernel);
  d.index_aligned = true;  // element i of the result is element i of the buffer: planned in place
  return d;
}());

/// Packs `xs` (flattened, in order; one dtype, on the cpu or, after use_hccl, on that
/// Ascend device, where it runs on a communication stream) into one 1-d buffer and starts
/// an all-reduce of it over the group without waiting; returns the buffer, to be passed to
/// all_reduce_wait() once the result is needed. Between the two, ops that run on this
/// thread (a backward pass, a graph replay) let it progress.
inline AnyTensor all_reduce_start(std::span<const AnyTensor> xs, ReduceOp op = ReduceOp::sum,
                                  const Group& g = world()) {
  for (const AnyTensor& x : xs)
    MS_CHECK(!x.defined() || x.device().is_cpu() || backend::find_device_kernel(all_reduce_start_op, x.device().type),
             DeviceError, "all_reduce_start: the tensors must be on the cpu, or on a device whose collectives run "
             "there (ms::dist::use_hccl for ascend), got {}", x.device());
  return ops::call1(all_reduce_start_op, xs, ops::Attrs{{"op", std::string(reduce_op_name(op))}, {"group", g.id()}});
}
inline AnyTensor all_reduce_start(std::initializer_list<AnyTensor> xs, ReduceOp op = ReduceOp::sum,
                                  const Group& g = world()) {
  return all_reduce_start(std::span<const AnyTensor>(xs.begin(), xs.size()), op, g);
}
/// The result of the all-reduce that all_reduce_start() began on `buffer`.
inline AnyTensor all_reduce_wait(const AnyTensor& buffer) { return ops::call1(all_reduce_wait_op, {buffer}); }

/// This thread's counts of non-blocking all-reduces (started, polled, complete at their wait).
inline AsyncStats async_stats() { return detail::async_state().stats; }
inline void reset_async_stats() { detail::async_state().stats = {}; }
/// Non-blocking all-reduces started on this thread and not yet waited for.
inline std::size_t async_in_flight() { return detail::async_state().pending.size(); }

}  // namespace ms::dist
