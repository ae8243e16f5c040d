#pragma once
// HcclCommunicator: one HCCL communicator (RAII: HcclCommInitRootInfo ... HcclCommDestroy)
// for the ranks that share a root info, and its collectives on device memory of an
// AscendBackend, enqueued on a stream of that backend: the data never leaves the device.
// A mean is the sum followed by aclnnMuls(1 / ranks) on the same stream.
// Belongs here: the device side of the collectives. Must not know how the root info
// reaches the other ranks (dist/hccl.hpp broadcasts it over MPI) or about graphs.

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "aclnn_ops.hpp"
#include "ascend_backend.hpp"
#include "hccl_api.hpp"

namespace ms::backend::ascend {

/// How a device collective combines the ranks' values (mean: sum, then a scale on the device).
enum class HcclReduce : std::uint8_t { sum, prod, max, min, mean };

inline const char* hccl_reduce_name(HcclReduce op) {
  switch (op) {
    case HcclReduce::sum: return "sum";
    case HcclReduce::prod: return "prod";
    case HcclReduce::max: return "max";
    case HcclReduce::min: return "min";
    case HcclReduce::mean: return "mean";
  }
  return "?";
}

/// The HcclReduceOp that `op` runs as (mean runs as a sum).
inline HcclReduceOp hccl_reduce_op(HcclReduce op) {
  switch (op) {
    case HcclReduce::sum:
    case HcclReduce::mean: return HCCL_REDUCE_SUM;
    case HcclReduce::prod: return HCCL_REDUCE_PROD;
    case HcclReduce::max: return HCCL_REDUCE_MAX;
    case HcclReduce::min: return HCCL_REDUCE_MIN;
  }
  return HCCL_REDUCE_SUM;
}

/// An HCCL communicator of `size` ranks bound to one AscendBackend (its device). Every rank
/// constructs it with the same root info (from make_root_info() on one rank) and its own
/// rank; construction returns when all have joined. Collectives are enqueued on a stream of
/// the backend (the eager stream when none is given) and complete in stream order: the
/// buffers hold the result once the stream is synchronized, and work queued after them on
/// the same stream sees it. Every rank must call the same collectives in the same order.
class HcclCommunicator {
 public:
  /// A fresh root info (HcclGetRootInfo), made on one rank and handed to every rank.
  static HcclRootInfo make_root_info(AscendBackend& be, const HcclApi& api = hccl_api()) {
    be.enter();
    HcclRootInfo info{};
    hccl_check(be.api(), api.HcclGetRootInfo(&info), "HcclGetRootInfo");
    return info;
  }

  HcclCommunicator(AscendBackend& be, const HcclRootInfo& info, int size, int rank, const HcclApi& api = hccl_api())
      : be_(&be), api_(&api), size_(size), rank_(rank) {
    MS_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError,
             "HcclCommunicator: rank {} is out of range for a communicator of {} ranks", rank, size);
    be.enter();
    hccl_check(be.api(), api.HcclCommInitRootInfo(static_cast<std::uint32_t>(size), &info,
                                                  static_cast<std::uint32_t>(rank), &comm_),
               "HcclCommInitRootInfo");
  }
  HcclCommunicator(const HcclCommunicator&) = delete;
  HcclCommunicator& operator=(const HcclCommunicator&) = delete;
  /// Destroys the communicator after the work queued on the backend's eager stream has run
  /// (collectives on other streams must have been synchronized by their owners).
  ~HcclCommunicator() {
    if (comm_ == nullptr) return;
    (void)be_->api().aclrtSynchronizeStream(be_->eager_stream().raw());
    (void)api_->HcclCommDestroy(comm_);
  }

  int size() const { return size_; }
  int rank() const { return rank_; }
  HcclComm raw() const { return comm_; }
  AscendBackend& backend() const { return *be_; }
  const HcclApi& api() const { return *api_; }

  // ---- device buffers (n elements of dtype d; device memory of the backend) ------------

  /// recv = the reduction over the ranks of send (send == recv: in place).
  void all_reduce(const void* send, void* recv, std::int64_t n, DType d, HcclReduce op, const Stream& s) {
    const HcclDataType t = reduce_dtype(d, op, "HcclAllReduce");
    if (n == 0) return;
    note(send, s);
    note(recv, s);
    hccl_check(be_->api(),
               api_->HcclAllReduce(const_cast<void*>(send), recv, static_cast<std::uint64_t>(n), t,
                                   hccl_reduce_op(op), comm_, s.raw()),
               "HcclAllReduce");
    if (op == HcclReduce::mean) scale(recv, n, d, 1.0 / size_, s);
  }
  /// Every rank's buf = the root's.
  void broadcast(void* buf, std::int64_t n, DType d, int root, const Stream& s) {
    const HcclDataType t = move_dtype(d, "HcclBroadcast");
    MS_CHECK(root >= 0 && root < size_, ValueError, "HcclBroadcast: root {} is out of range for {} ranks", root, size_);
    if (n == 0) return;
    note(buf, s);
    hccl_check(be_->api(),
               api_->HcclBroadcast(buf, static_cast<std::uint64_t>(n), t, static_cast<std::uint32_t>(root), comm_,
                                   s.raw()),
               "HcclBroadcast");
  }
  /// recv (size * n elements) = every rank's send (n elements), in rank order.
  void all_gather(const void* send, void* recv, std::int64_t n, DType d, const Stream& s) {
    const HcclDataType t = move_dtype(d, "HcclAllGather");
    if (n == 0) return;
    note(send, s);
    note(recv, s);
    hccl_check(be_->api(),
               api_->HcclAllGather(const_cast<void*>(send), recv, static_cast<std::uint64_t>(n), t, comm_, s.raw()),
               "HcclAllGather");
  }
  /// recv (n elements) = block `rank` of the reduction over the ranks of send (size * n elements).
  void reduce_scatter(const void* send, void* recv, std::int64_t n, DType d, HcclReduce op, const Stream& s) {
    const HcclDataType t = reduce_dtype(d, op, "HcclReduceScatter");
    if (n == 0) return;
    note(send, s);
    note(recv, s);
    hccl_check(be_->api(),
               api_->HcclReduceScatter(const_cast<void*>(send), recv, static_cast<std::uint64_t>(n), t,
                                       hccl_reduce_op(op), comm_, s.raw()),
               "HcclReduceScatter");
    if (op == HcclReduce::mean) scale(recv, n, d, 1.0 / size_, s);
  }

  // ---- tensors on the backend's device (contiguous) -------------------------------------

  /// In place: t = the reduction of t over the ranks.
  void all_reduce_(const AnyTensor& t, HcclReduce op, const Stream* s = nullptr) {
    check_tensor(t, "all_reduce_");
    all_reduce(t.raw_data(), t.raw_data(), t.numel(), t.dtype(), op, stream(s));
  }
  /// In place, each tensor of `ts` (gradients): one collective per tensor, all on one stream.
  void all_reduce_(std::span<const AnyTensor> ts, HcclReduce op, const Stream* s = nullptr) {
    for (const AnyTensor& t : ts) check_tensor(t, "all_reduce_");
    for (const AnyTensor& t : ts) all_reduce(t.raw_data(), t.raw_data(), t.numel(), t.dtype(), op, stream(s));
  }
  /// In place: t = the root's t.
  void broadcast_(const AnyTensor& t, int root, const Stream* s = nullptr) {
    check_tensor(t, "broadcast_");
    broadcast(t.raw_data(), t.numel(), t.dtype(), root, stream(s));
  }
  /// A new device tensor: every rank's t concatenated along axis 0, in rank order.
  AnyTensor all_gather(const AnyTensor& t, const Stream* s = nullptr) {
    check_tensor(t, "all_gather");
    MS_CHECK(t.shape().rank() >= 1, ShapeError, "all_gather: needs at least one dimension, got {} {}",
             shape_str(t.shape()), t.dtype());
    std::vector<std::int64_t> dims(t.shape().begin(), t.shape().end());
    dims[0] *= size_;
    AnyTensor out = empty_like_on_device(Shape(dims), t.dtype());
    all_gather(t.raw_data(), out.raw_data(), t.numel(), t.dtype(), stream(s));
    return out;
  }
  /// A new device tensor: block `rank` (of `size` along axis 0) of the reduction of t.
  AnyTensor reduce_scatter(const AnyTensor& t, HcclReduce op, const Stream* s = nullptr) {
    check_tensor(t, "reduce_scatter");
    MS_CHECK(t.shape().rank() >= 1 && t.shape()[0] % size_ == 0, ShapeError,
             "reduce_scatter: axis 0 of {} {} does not split into {} ranks", shape_str(t.shape()), t.dtype(), size_);
    std::vector<std::int64_t> dims(t.shape().begin(), t.shape().end());
    dims[0] /= size_;
    AnyTensor out = empty_like_on_device(Shape(dims), t.dtype());
    reduce_scatter(t.raw_data(), out.raw_data(), out.numel(), t.dtype(), op, stream(s));
    return out;
  }

 private:
  const Stream& stream(const Stream* s) const { return s != nullptr ? *s : be_->eager_stream(); }
  void note(const void* p, const Stream& s) { be_->note_use(p, s); }

  static HcclDataType move_dtype(DType d, const char* what) {
    auto t = hccl_dtype(d);
    MS_CHECK(t.has_value(), DTypeError, "{}: dtype {} has no HCCL equivalent", what, d);
    return *t;
  }
  static HcclDataType reduce_dtype(DType d, HcclReduce op, const char* what) {
    MS_CHECK(kHcclReduceTypes.contains(d), DTypeError,
             "{}: HCCL does not reduce {} (it reduces float32, float16, bfloat16 and int32)", what, d);
    MS_CHECK(op != HcclReduce::mean || d != DType::i32, DTypeError, "{}: reduction mean needs a floating dtype, got {}",
             what, d);
    return *hccl_dtype(d);
  }

  void check_tensor(const AnyTensor& t, const char* what) const {
    MS_CHECK(t.defined(), ValueError, "{}: the tensor is undefined", what);
    MS_CHECK(t.device() == be_->device(), DeviceError, "{}: the tensor {} {} is on {}, the communicator's device is {}",
             what, shape_str(t.shape()), t.dtype(), t.device(), be_->device());
    MS_CHECK(t.is_contiguous(), ValueError, "{}: the tensor {} {} must be contiguous", what, shape_str(t.shape()),
             t.dtype());
  }
  AnyTensor empty_like_on_device(const Shape& shape, DType d) {
    auto st = be_->allocate(std::max<std::size_t>(static_cast<std::size_t>(numel(shape)) * dtype_size(d), 1));
    return AnyTensor::view_of(std::move(st), shape, contiguous_strides(shape), 0, d);
  }

  /// buf *= factor on the device (aclnnMuls in place), after the collective on `s`.
  void scale(void* buf, std::int64_t n, DType d, double factor, const Stream& s) {
    const AclApi& acl = be_->api();
    // aclCreateTensor wants a 32-byte aligned address: describe buf as an element offset
    // into the aligned address below it.
    const auto p = reinterpret_cast<std::uintptr_t>(buf);
    const std::uintptr_t base = p & ~static_cast<std::uintptr_t>(31);
    const std::size_t esize = dtype_size(d);
    MS_CHECK((p - base) % esize == 0, ValueError, "mean: the buffer at {} is not aligned to its {} elements", buf, d);
    const auto off = static_cast<std::int64_t>((p - base) / esize);
    auto x = make_acl_tensor(acl, reinterpret_cast<void*>(base), static_cast<std::size_t>(off + n) * esize, d, {n}, {1},
                             off, "mean");
    auto f = make_acl_scalar(acl, factor, d);
    std::vector<std::shared_ptr<Storage>> held;
    LaunchCtx ctx{acl, s.raw(), [&](std::size_t bytes) {
                    held.push_back(be_->allocate(bytes));
                    be_->note_use(held.back()->data, s);
                    return held.back()->data;
                  }};
    MS_ACLNN(ctx, Muls, x.get(), f.get(), x.get());
  }

  AscendBackend* be_;
  const HcclApi* api_;
  int size_, rank_;
  HcclComm comm_ = nullptr;
};

}  // namespace ms::backend::ascend
