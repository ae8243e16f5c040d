#pragma once
// HCCL on Ascend for ms::dist: HcclGroup, an HCCL communicator over a process group whose
// root info is broadcast over MPI, with collectives on device tensors (gradients) that run
// on a device stream and never copy to the host; and use_hccl(), which makes the registered
// collective ops (dist/ops.hpp) run through HCCL on Ascend tensors, eagerly and in graphs
// compiled for the device (DeviceExecutable, run_sunk), by registering their device kernels.
// The non-blocking pair all_reduce_start / all_reduce_wait (async_ops.hpp) runs on a
// communication stream of its own: the start packs the bucket on the compute stream, the
// all-reduce waits for that (an event) and runs on the communication stream while the
// compute stream goes on with backward; the wait makes the compute stream wait for it.
// Must not know about modules or MPI calls beyond comm.hpp's buffer collectives.
//
//   ms::dist::Context ctx(&argc, &argv);
//   auto& npu = ms::backend::ascend::ascend_backend(0);
//   ms::dist::HcclGroup hccl(ms::dist::world(), npu);   // collective: every rank
//   hccl.all_reduce_(grads, ms::dist::ReduceOp::mean);     // device tensors, on npu's stream
//   ms::dist::use_hccl(npu);   // all_reduce & co. on ascend tensors now run through HCCL

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "../backend/ascend/hccl_comm.hpp"
#include "async_ops.hpp"
#include "ops.hpp"

namespace ms::dist {

namespace detail {

inline backend::ascend::HcclReduce hccl_reduce(ReduceOp op) {
  using backend::ascend::HcclReduce;
  switch (op) {
    case ReduceOp::sum: return HcclReduce::sum;
    case ReduceOp::mean: return HcclReduce::mean;
    case ReduceOp::max: return HcclReduce::max;
    case ReduceOp::min: return HcclReduce::min;
    case ReduceOp::prod: return HcclReduce::prod;
  }
  return HcclReduce::sum;
}

/// The root info made by group rank 0 (HcclGetRootInfo) and broadcast to every member over
/// MPI (4108 bytes, as 1027 int32). Collective over the group.
inline HcclRootInfo share_root_info(const Group& g, backend::ascend::AscendBackend& be,
                                    const backend::ascend::HcclApi& api) {
  static_assert(sizeof(HcclRootInfo) % sizeof(std::int32_t) == 0);
  HcclRootInfo info{};
  // Whether the root could make one travels with it, so that a failure there is an error on
  // every rank instead of the others waiting in HcclCommInitRootInfo.
  std::int32_t ok = 1;
  std::string error;
  if (g.rank() == 0) {
    try {
      info = backend::ascend::HcclCommunicator::make_root_info(be, api);
    } catch (const Error& e) {
      ok = 0;
      error = e.what();
    }
  }
  broadcast_buffer(g, &ok, 1, DType::i32, 0, "HcclGroup");
  if (!ok) {
    MS_CHECK(g.rank() != 0, BackendError, "HcclGroup: {}", error);
    MS_THROW(BackendError, "HcclGroup: HcclGetRootInfo failed on rank {} of group {}", g.ranks()[0], g.id());
  }
  broadcast_buffer(g, &info, sizeof(HcclRootInfo) / sizeof(std::int32_t), DType::i32, 0, "HcclGroup");
  return info;
}

}  // namespace detail

/// An HCCL communicator over the members of a process group, bound to one Ascend backend
/// (its device). Construction is collective over the group: group rank 0 makes the root
/// info, MPI broadcasts it, every member joins (HcclCommInitRootInfo). Collectives take
/// contiguous tensors on that device and run on the backend's eager stream (or `s`): they
/// are ordered with the ops queued there, and the data stays on the device.
class HcclGroup {
 public:
  explicit HcclGroup(const Group& g = world(),
                     backend::ascend::AscendBackend& be = backend::ascend::ascend_backend(0),
                     const backend::ascend::HcclApi& api = backend::ascend::hccl_api())
      : group_(g) {
    detail::member(g, "HcclGroup");
    const HcclRootInfo info = detail::share_root_info(g, be, api);
    comm_ = std::make_unique<backend::ascend::HcclCommunicator>(be, info, g.size(), g.rank(), api);
  }

  const Group& group() const { return group_; }
  backend::ascend::HcclCommunicator& comm() { return *comm_; }
  backend::ascend::AscendBackend& backend() { return comm_->backend(); }

  /// In place: t = the reduction of t over the ranks (mean: the sum scaled by 1 / size on the device).
  void all_reduce_(const AnyTensor& t, ReduceOp op = ReduceOp::sum, const backend::Stream* s = nullptr) {
    comm_->all_reduce_(t, detail::hccl_reduce(op), s);
  }
  /// In place, every tensor of `ts` (the gradients of a step), one collective each, in order.
  void all_reduce_(std::span<const AnyTensor> ts, ReduceOp op = ReduceOp::mean, const backend::Stream* s = nullptr) {
    comm_->all_reduce_(ts, detail::hccl_reduce(op), s);
  }
  void all_reduce_(const std::vector<AnyTensor>& ts, ReduceOp op = ReduceOp::mean, const backend::Stream* s = nullptr) {
    all_reduce_(std::span<const AnyTensor>(ts), op, s);
  }
  /// In place: t = the root's t (root: a rank of the group).
  void broadcast_(const AnyTensor& t, int root = 0, const backend::Stream* s = nullptr) { comm_->broadcast_(t, root, s); }
  /// A new device tensor: every rank's t along axis 0, in group rank order.
  AnyTensor all_gather(const AnyTensor& t, const backend::Stream* s = nullptr) { return comm_->all_gather(t, s); }
  /// A new device tensor: block `group rank` of axis 0 of the reduction of t.
  AnyTensor reduce_scatter(const AnyTensor& t, ReduceOp op = ReduceOp::sum, const backend::Stream* s = nullptr) {
    return comm_->reduce_scatter(t, detail::hccl_reduce(op), s);
  }

 private:
  Group group_;
  std::unique_ptr<backend::ascend::HcclCommunicator> comm_;
};

namespace detail {

/// use_hccl's state: the backend, the library, and one communicator per process group,
/// made the first time a collective op of that group runs on the device.
struct HcclOps {
  std::mutex mu;
  backend::ascend::AscendBackend* be = nullptr;
  const backend::ascend::HcclApi* api = nullptr;
  std::map<std::int64_t, std::unique_ptr<HcclGroup>> groups;
  /// The non-blocking all-reduces: the stream they run on, and per buffer in flight the
  /// events that order it (packed -> all-reduce on comm, all-reduce done -> the wait).
  backend::Stream comm;
  struct InFlight {
    backend::Event packed, done;
    bool pending = false;
    bool in_stream = false;  ///< run on the compute stream itself (a stream being captured)
  };
  std::map<const void*, InFlight> in_flight;
  std::int64_t async_started = 0;  ///< all_reduce_start kernels run on the device
};
inline HcclOps& hccl_ops() {
  static auto* s = new HcclOps();  // communicators live until exit, like the backend
  return *s;
}

/// The communicator of group `g` for a kernel running on `be` (made on first use: every member
/// runs the same ops in the same order, so every member makes it at the same call).
inline backend::ascend::HcclCommunicator& hccl_comm_for(const Group& g, backend::Backend& be, const char* what) {
  HcclOps& s = hccl_ops();
  std::lock_guard lk(s.mu);
  MS_CHECK(&be == static_cast<backend::Backend*>(s.be), DeviceError,
           "{}: HCCL was enabled for {} (use_hccl), the tensors are on {}", what, s.be->device(), be.device());
  auto& slot = s.groups[g.id()];
  if (!slot) slot = std::make_unique<HcclGroup>(g, *s.be, *s.api);
  return slot->comm();
}

inline bool hccl_reduces(const ops::TensorMeta& m, ReduceOp op) {
  return backend::ascend::kHcclReduceTypes.contains(m.dtype) && (op != ReduceOp::mean || is_floating(m.dtype));
}
inline bool hccl_moves(const ops::TensorMeta& m) { return backend::ascend::hccl_dtype(m.dtype).has_value(); }

inline void check_device_operand(const backend::DeviceKernelArgs& k) {
  MS_CHECK(k.in[0].is_contiguous(), ValueError, "{}: HCCL needs a contiguous tensor on {}, got a view {} {}",
           k.op.name, k.backend.device(), shape_str(k.in[0].shape()), k.in[0].dtype());
}

inline void hccl_all_reduce_kernel(const backend::DeviceKernelArgs& k) {
  check_device_operand(k);
  const Group g = group_of(k.attrs);
  const ReduceOp op = reduce_of(k.attrs);
  check_same_call("all_reduce", static_cast<std::int64_t>(op), g, TensorMeta{k.in[0].dtype(), k.in[0].shape()});
  hccl_comm_for(g, k.backend, "all_reduce")
      .all_reduce(k.in[0].raw_data(), k.out[0].raw_data(), k.out[0].numel(), k.out[0].dtype(), hccl_reduce(op), k.stream);
}
inline void hccl_broadcast_kernel(const backend::DeviceKernelArgs& k) {
  check_device_operand(k);
  const Group g = group_of(k.attrs);
  const int root = static_cast<int>(k.attrs.i("root", 0));
  check_same_call("broadcast", root, g, TensorMeta{k.in[0].dtype(), k.in[0].shape()});
  auto& comm = hccl_comm_for(g, k.backend, "broadcast");
  // HCCL broadcasts in place: the output starts as this rank's input.
  k.backend.copy_on_device_async(k.out[0].raw_data(), k.in[0].raw_data(), k.in[0].nbytes(), k.stream);
  comm.broadcast(k.out[0].raw_data(), k.out[0].numel(), k.out[0].dtype(), root, k.stream);
}
inline void hccl_all_gather_kernel(const backend::DeviceKernelArgs& k) {
  check_device_operand(k);
  const Group g = group_of(k.attrs);
  check_same_call("all_gather", 0, g, TensorMeta{k.in[0].dtype(), k.in[0].shape()});
  hccl_comm_for(g, k.backend, "all_gather")
      .all_gather(k.in[0].raw_data(), k.out[0].raw_data(), k.in[0].numel(), k.in[0].dtype(), k.stream);
}
inline void hccl_reduce_scatter_kernel(const backend::DeviceKernelArgs& k) {
  check_device_operand(k);
  const Group g = group_of(k.attrs);
  const ReduceOp op = reduce_of(k.attrs);
  check_same_call("reduce_scatter", static_cast<std::int64_t>(op), g, TensorMeta{k.in[0].dtype(), k.in[0].shape()});
  hccl_comm_for(g, k.backend, "reduce_scatter")
      .reduce_scatter(k.in[0].raw_data(), k.out[0].raw_data(), k.out[0].numel(), k.in[0].dtype(), hccl_reduce(op),
                      k.stream);
}

/// all_reduce_start on the device: packs the inputs into the buffer on the compute stream,
/// then all-reduces the buffer in place on the communication stream once the packing is done.
inline void hccl_all_reduce_start_kernel(const backend::DeviceKernelArgs& k) {
  const AnyTensor& buf = k.out[0];
  const Group g = group_of(k.attrs);
  const ReduceOp op = reduce_of(k.attrs);
  auto* dst = static_cast<char*>(buf.raw_data());
  for (const AnyTensor& t : k.in) {
    MS_CHECK(t.is_contiguous(), ValueError, "{}: HCCL needs contiguous tensors on {}, got a view {} {}", k.op.name,
             k.backend.device(), shape_str(t.shape()), t.dtype());
    if (t.nbytes() > 0) k.backend.copy_on_device_async(dst, t.raw_data(), t.nbytes(), k.stream);
    dst += t.nbytes();
  }
  check_same_call("all_reduce_start", static_cast<std::int64_t>(op), g, TensorMeta{buf.dtype(), buf.shape()});
  auto& comm = hccl_comm_for(g, k.backend, "all_reduce_start");
  HcclOps& s = hccl_ops();
  std::lock_guard lk(s.mu);
  HcclOps::InFlight& f = s.in_flight[buf.raw_data()];
  MS_CHECK(!f.pending, DistError,
           "all_reduce_start: rank {}: the buffer of an all-reduce still in flight is started again (each start "
           "needs its wait first)",
           rank());
  f.pending = true;
  ++s.async_started;
  // A captured step records the all-reduce in order on its one stream; otherwise it runs on
  // the communication stream once the packing is done, and `done` tells the wait.
  f.in_stream = k.backend.capturing(k.stream);
  if (!f.in_stream) {
    if (!s.comm) s.comm = k.backend.create_stream();
    if (!f.packed) {
      f.packed = k.backend.create_event();
      f.done = k.backend.create_event();
    }
    k.backend.record(f.packed, k.stream);
    k.backend.wait(s.comm, f.packed);
  }
  const backend::Stream& on = f.in_stream ? k.stream : s.comm;
  if (buf.numel() > 0) comm.all_reduce(buf.raw_data(), buf.raw_data(), buf.numel(), buf.dtype(), hccl_reduce(op), on);
  if (!f.in_stream) k.backend.record(f.done, s.comm);
}

/// all_reduce_wait on the device: the compute stream waits for the all-reduce of its buffer.
inline void hccl_all_reduce_wait_kernel(const backend::DeviceKernelArgs& k) {
  const AnyTensor& buf = k.in[0];
  HcclOps& s = hccl_ops();
  {
    std::lock_guard lk(s.mu);
    auto it = s.in_flight.find(buf.raw_data());
    MS_CHECK(it != s.in_flight.end() && it->second.pending, DistError,
             "all_reduce_wait: rank {}: no all-reduce is in flight on this {} {} buffer on {} (wait on the output of "
             "all_reduce_start, once)",
             rank(), shape_str(buf.shape()), buf.dtype(), k.backend.device());
    it->second.pending = false;
    if (!it->second.in_stream) k.backend.wait(k.stream, it->second.done);
  }
  if (buf.nbytes() > 0 && k.out[0].raw_data() != buf.raw_data())
    k.backend.copy_on_device_async(k.out[0].raw_data(), buf.raw_data(), buf.nbytes(), k.stream);
}

}  // namespace detail

/// all_reduce_start kernels that ran on the device through HCCL since the process started.
inline std::int64_t hccl_async_started() {
  detail::HcclOps& s = detail::hccl_ops();
  std::lock_guard lk(s.mu);
  return s.async_started;
}

/// Makes all_reduce, broadcast, all_gather, reduce_scatter and the non-blocking
/// all_reduce_start / all_reduce_wait on tensors of `be`'s device run through HCCL on the
/// device (the non-blocking pair on a communication stream of its own), eagerly and in graphs compiled for that device (a
/// captured training step replayed by run_sunk): it registers their device kernels. dtypes
/// that HCCL does not handle (all_reduce of float64 or int64, say) keep the host path (the
/// tensor copied down, MPI, copied up). Call it on every rank, once, before the first
/// collective on the device; a second call with another backend is a ValueError.
/// Communicators are made per process group on first use (collective, in op order).
inline void use_hccl(backend::ascend::AscendBackend& be = backend::ascend::ascend_backend(0),
                     const backend::ascend::HcclApi& api = backend::ascend::hccl_api()) {
  detail::HcclOps& s = detail::hccl_ops();
  {
    std::lock_guard lk(s.mu);
    if (s.be != nullptr) {
      MS_CHECK(s.be == &be, ValueError, "use_hccl: HCCL is already enabled for {}, not {}", s.be->device(), be.device());
      return;
    }
    s.be = &be;
    s.api = &api;
  }
  detail::state().device_collectives = true;  // DataParallel then reduces after backward (device kernels)
  using ms::DeviceType;
  auto meta_ok = [](auto pred) {
    return [pred](const backend::Backend&, std::span<const ops::TensorMeta> in, const ops::Attrs& a) {
      return in.size() == 1 && pred(in[0], a);
    };
  };
  backend::register_device_kernel(all_reduce_op, DeviceType::ascend, &detail::hccl_all_reduce_kernel,
                                  meta_ok([](const ops::TensorMeta& m, const ops::Attrs& a) {
                                    return detail::hccl_reduces(m, detail::reduce_of(a));
                                  }));
  backend::register_device_kernel(reduce_scatter_op, DeviceType::ascend, &detail::hccl_reduce_scatter_kernel,
                                  meta_ok([](const ops::TensorMeta& m, const ops::Attrs& a) {
                                    return detail::hccl_reduces(m, detail::reduce_of(a));
                                  }));
  backend::register_device_kernel(broadcast_op, DeviceType::ascend, &detail::hccl_broadcast_kernel,
                                  meta_ok([](const ops::TensorMeta& m, const ops::Attrs&) { return detail::hccl_moves(m); }));
  backend::register_device_kernel(all_gather_op, DeviceType::ascend, &detail::hccl_all_gather_kernel,
                                  meta_ok([](const ops::TensorMeta& m, const ops::Attrs&) { return detail::hccl_moves(m); }));
  auto all_hccl = [](const backend::Backend&, std::span<const ops::TensorMeta> in, const ops::Attrs& a) {
    if (in.empty()) return false;
    for (const ops::TensorMeta& m : in)
      if (m.dtype != in[0].dtype || !detail::hccl_reduces(m, detail::reduce_of(a))) return false;
    return true;
  };
  backend::register_device_kernel(all_reduce_start_op, DeviceType::ascend, &detail::hccl_all_reduce_start_kernel,
                                  all_hccl);
  backend::register_device_kernel(all_reduce_wait_op, DeviceType::ascend, &detail::hccl_all_reduce_wait_kernel,
                                  [](const backend::Backend&, std::span<const ops::TensorMeta> in, const ops::Attrs&) {
                                    return in.size() == 1 && backend::ascend::kHcclReduceTypes.contains(in[0].dtype);
                                  });
  // The world's communicator now, while every rank is here (other groups: on first use).
  (void)detail::hccl_comm_for(world(), be, "use_hccl");
}

/// True once use_hccl() has run in this process.
inline bool hccl_enabled() {
  detail::HcclOps& s = detail::hccl_ops();
  std::lock_guard lk(s.mu);
  return s.be != nullptr;
}

}  // namespace ms::dist
