#pragma once
// Data-parallel training over a process group: ms::dist::DataParallel wraps an nn::Module
// (PyTorch's DistributedDataParallel, Horovod's DistributedOptimizer): it broadcasts the
// initial parameters and buffers from rank 0, checks that every rank holds the same
// parameter shapes, and averages gradients across ranks in buckets, with registered
// collective ops, so that a training step captured by ms::jit (forward, backward, bucketed
// all-reduce, optimizer update) is one replayed graph. With DataParallelOptions::overlap
// (the default) each bucket's all-reduce starts during backward, as soon as backward has
// produced the bucket's last gradient (grad-ready hooks on the parameters, armed by the
// forward through operator(); all_reduce_start, dist/async_ops.hpp), and reduce_gradients()
// only waits for it. Also: metrics reduced across ranks, BatchNorm running statistics
// averaged, and rank-0-only checkpoints.
// Must not know about MPI (dist/comm.hpp does) or about a particular model.
//
//   ms::dist::Context ctx(&argc, &argv);
//   auto model = nn::mlp(784, {256, 256}, 10);
//   ms::dist::DataParallel dp(model);                  // same parameters on every rank
//   loader.set_shard(ms::dist::rank(), ms::dist::world_size());
//   auto step = ms::jit([&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
//     Tensor<float> loss = ms::cross_entropy(dp(x), y);
//     opt.step(dp.reduce_gradients(ms::autograd::grad(loss, dp.parameters())));
//     return ms::dist::all_reduce(loss, ms::dist::ReduceOp::mean);
//   });

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../autograd/tape.hpp"
#include "../nn/module.hpp"
#include "../nn/safetensors.hpp"
#include "../ops/factory.hpp"
#include "../ops/movement.hpp"
#include "../ops/views.hpp"
#include "async_ops.hpp"
#include "ops.hpp"

namespace ms::dist {

/// Options of DataParallel.
struct DataParallelOptions {
  /// Gradients are all-reduced in buckets of about this many bytes (PyTorch's default, 25 MiB).
  std::int64_t bucket_bytes = 25 * 1024 * 1024;
  /// The rank (of the group) whose initial parameters and buffers every rank starts from.
  int root = 0;
  /// The processes that train together (default: the world).
  Group group = world();
  /// Overlap communication with backward: each bucket's all-reduce starts (non-blocking,
  /// MPI_Iallreduce) as soon as backward has produced the last gradient of the bucket, and
  /// reduce_gradients() / sync_gradients() only wait for it. Applies to the backward that
  /// follows a forward through DataParallel::operator(), eager or captured, with parameters
  /// on the cpu or (after use_hccl()) on the Ascend device, where the all-reduces run on a
  /// communication stream beside backward's kernels, also in a step compiled for the device.
  /// false: every bucket is all-reduced after backward.
  bool overlap = true;
};

/// A model replicated on every rank of a group; see the header comment.
class DataParallel {
 public:
  explicit DataParallel(std::shared_ptr<nn::Module> module, DataParallelOptions opt = {})
      : module_(std::move(module)), opt_(opt) {
    MS_CHECK(module_ != nullptr, ValueError, "DataParallel: the module is null");
    MS_CHECK(opt_.bucket_bytes > 0, ValueError, "DataParallel: bucket_bytes must be positive, got {}",
             opt_.bucket_bytes);
    for (auto& [name, p] : module_->named_parameters()) {
      names_.push_back(name);
      params_.push_back(p);
    }
    check_same_parameters();
    broadcast_state();
    make_buckets();
    if (opt_.overlap) install_hooks();
  }
  ~DataParallel() {
    for (std::size_t i = 0; i < hook_ids_.size(); ++i) autograd::remove_grad_ready_hook(params_[i], hook_ids_[i]);
    try {
      drain();
    } catch (...) {  // a destructor cannot throw; a failed wait already aborted or will abort the job
    }
  }
  DataParallel(const DataParallel&) = delete;  // the parameters' hooks point here
  DataParallel& operator=(const DataParallel&) = delete;

  /// Runs the wrapped module; with overlap, the backward that follows starts each bucket's
  /// all-reduce as soon as its gradients are ready.
  Tensor<float> operator()(const AnyTensor& x) {
    prepare_for_backward();
    return (*module_)(x);
  }
  /// True when the next backward will start bucket all-reduces as it goes (overlap on, the
  /// parameters on the cpu, or on a device whose collectives run there: use_hccl).
  bool overlapping() const {
    if (!opt_.overlap) return false;
    return std::all_of(params_.begin(), params_.end(), [](const AnyTensor& p) {
      return p.requires_grad() && (p.dtype() == DType::f32 || p.dtype() == DType::f64) &&
             (p.device().is_cpu() || backend::find_device_kernel(all_reduce_start_op, p.device().type));
    });
  }
  /// Makes the next backward start the buckets' all-reduces (done by operator()): waits
  /// for any bucket still in flight from a step whose gradients were never reduced.
  void prepare_for_backward() {
    drain();
    armed_ = overlapping();
    if (!armed_) return;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      flight_[b] = Flight{};
      flight_[b].left = buckets_[b].size();
      flight_[b].grads.resize(buckets_[b].size());
      flight_[b].seen.assign(buckets_[b].size(), false);
    }
  }
  nn::Module& module() { return *module_; }
  const nn::Module& module() const { return *module_; }
  /// The parameters (handles), in the module's order.
  const std::vector<AnyTensor>& parameters() const { return params_; }
  const Group& group() const { return opt_.group; }
  /// The buckets: indices into parameters(), each bucket in reverse parameter order (the
  /// order in which backward produces their gradients), the first bucket first.
  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }

  /// Copies the root's parameters and buffers to every rank (done by the constructor).
  void broadcast_state() {
    NoGradGuard no_grad;
    for (auto& p : params_) broadcast_(p.detach(), opt_.root, opt_.group);
    for (auto& b : module_->buffers()) broadcast_(b, opt_.root, opt_.group);
  }

  /// The mean over the group's ranks of each gradient (one per parameter, in order), all-
  /// reduced bucket by bucket: each bucket's gradients are flattened into one buffer, all-
  /// reduced with one collective, and split again. Registered ops only, so this is captured
  /// into a traced training step. An undefined gradient (an unused parameter) counts as zero.
  /// With overlap, the buckets whose all-reduce backward started are only waited for (the
  /// gradients must then be the ones backward returned); the others are reduced here.
  std::vector<AnyTensor> reduce_gradients(const std::vector<AnyTensor>& grads) {
    MS_CHECK(grads.size() == params_.size(), ValueError,
             "DataParallel.reduce_gradients: got {} gradients for {} parameters (rank {})", grads.size(),
             params_.size(), rank());
    std::vector<AnyTensor> reduced(buckets_.size());
    std::string changed;  // a gradient other than the one whose all-reduce backward started
    for (std::size_t b = 0; b < flight_.size(); ++b) {  // first every wait: no rank leaves one in flight
      Flight& f = flight_[b];
      if (!f.started) continue;
      reduced[b] = all_reduce_wait(f.buffer);
      for (std::size_t k = 0; k < buckets_[b].size(); ++k) {
        const std::size_t i = buckets_[b][k];
        if (f.grads[k].defined() && !grads[i].is_same(f.grads[k]) && changed.empty()) changed = names_[i];
      }
      f = Flight{};
    }
    armed_ = false;
    MS_CHECK(changed.empty(), ValueError,
             "DataParallel.reduce_gradients: the gradient of '{}' is not the one backward produced, whose all-reduce "
             "started during backward (rank {}); pass the gradients as backward returned them, or set "
             "DataParallelOptions::overlap = false to change them first",
             changed, rank());
    std::vector<AnyTensor> out(grads.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const auto& bucket = buckets_[b];
      if (!reduced[b].defined()) {
        std::vector<AnyTensor> flat;
        flat.reserve(bucket.size());
        for (std::size_t i : bucket) flat.push_back(ops::reshape(checked_grad(i, grads[i], "reduce_gradients"), {-1}));
        AnyTensor buf = flat.size() == 1 ? flat[0] : ops::concat(std::span<const AnyTensor>(flat), 0);
        reduced[b] = all_reduce(buf, ReduceOp::mean, opt_.group);
      }
      std::int64_t off = 0;
      for (std::size_t i : bucket) {
        const std::int64_t n = params_[i].numel();
        AnyTensor piece = bucket.size() == 1 ? reduced[b] : ops::slice(reduced[b], 0, off, off + n);
        out[i] = ops::reshape(piece, params_[i].shape().vec());
        off += n;
      }
    }
    return out;
  }

  /// Replaces each parameter's accumulated .grad by its mean over the ranks (after an eager
  /// backward(), before optimizer.step()).
  void sync_gradients() {
    std::vector<AnyTensor> grads;
    for (auto& p : params_) grads.push_back(p.grad_any());
    NoGradGuard no_grad;
    std::vector<AnyTensor> avg = reduce_gradients(grads);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (grads[i].defined()) ops::copy_(grads[i], avg[i]);
    }
  }

  /// Averages every floating buffer (BatchNorm's running mean and variance) over the ranks;
  /// call at the end of an epoch so that every rank evaluates and saves the same model.
  void sync_buffers() {
    NoGradGuard no_grad;
    for (auto& b : module_->buffers())
      if (is_floating(b.dtype())) all_reduce_(b, ReduceOp::mean, opt_.group);
  }

 private:
  /// Every rank must hold the same parameters (count, shapes): compares them with the root's
  /// and reports both sides.
  void check_same_parameters() const {
    constexpr std::int64_t kRec = 8;  // rank, dims (up to 6), padding -1
    const Group& g = opt_.group;
    std::int64_t count = static_cast<std::int64_t>(params_.size());
    std::vector<std::int64_t> counts(static_cast<std::size_t>(g.size()));
    all_gather_buffer(g, &count, counts.data(), 1, DType::i64, "DataParallel");
    for (int r = 0; r < g.size(); ++r)
      MS_CHECK(counts[static_cast<std::size_t>(r)] == count, DistError,
               "DataParallel: rank {} has {} parameter tensors, rank {} has {}", g.ranks()[static_cast<std::size_t>(r)],
               counts[static_cast<std::size_t>(r)], rank(), count);
    std::vector<std::int64_t> mine(static_cast<std::size_t>(count * kRec), -1);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Shape& s = params_[i].shape();
      MS_CHECK(s.rank() <= kRec - 2, ShapeError, "DataParallel: parameter '{}' has {} dimensions (at most {})",
               names_[i], s.rank(), kRec - 2);
      mine[i * kRec] = s.rank();
      for (int d = 0; d < s.rank(); ++d) mine[i * kRec + 1 + static_cast<std::size_t>(d)] = s[d];
    }
    std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(g.size()));
    if (!mine.empty()) all_gather_buffer(g, mine.data(), all.data(), static_cast<std::int64_t>(mine.size()), DType::i64,
                                         "DataParallel");
    auto shape_of = [&](const std::int64_t* rec) {
      std::vector<std::int64_t> dims(rec + 1, rec + 1 + rec[0]);
      return MS_FORMAT("({})", ::ms::detail::join_text(dims, ", "));
    };
    for (int r = 0; r < g.size(); ++r)
      for (std::size_t i = 0; i < params_.size(); ++i) {
        const std::int64_t* theirs = all.data() + static_cast<std::size_t>(r) * mine.size() + i * kRec;
        MS_CHECK(std::equal(theirs, theirs + kRec, mine.data() + i * kRec), DistError,
                 "DataParallel: parameter {} ('{}') has shape {} on rank {} but {} on rank {}", i, names_[i],
                 shape_of(theirs), g.ranks()[static_cast<std::size_t>(r)], shape_of(mine.data() + i * kRec), rank());
      }
  }

  /// A gradient as a bucket takes it: zeros for none, else checked against the parameter.
  AnyTensor checked_grad(std::size_t i, const AnyTensor& grad, const char* what) const {
    AnyTensor g = grad.defined() ? grad : ops::zeros_like(params_[i]);
    MS_CHECK(g.shape() == params_[i].shape() && g.dtype() == params_[i].dtype(), ShapeError,
             "DataParallel.{}: the gradient of '{}' is {} {}, the parameter is {} {} (rank {})", what, names_[i],
             shape_str(g.shape()), g.dtype(), shape_str(params_[i].shape()), params_[i].dtype(), rank());
    return g;
  }

  // ---- overlap: bucket all-reduces started during backward ----
  /// A bucket's state during one backward: the gradients seen so far and, once all are in,
  /// the buffer of its all-reduce in flight.
  struct Flight {
    std::size_t left = 0;
    std::vector<AnyTensor> grads;
    std::vector<bool> seen;
    AnyTensor buffer;
    bool started = false;
  };

  void install_hooks() {
    flight_.resize(buckets_.size());
    where_.resize(params_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (std::size_t k = 0; k < buckets_[b].size(); ++k) where_[buckets_[b][k]] = {b, k};
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].requires_grad()) {  // no hooks at all: overlapping() is false for such a model
        for (std::size_t j = 0; j < hook_ids_.size(); ++j) autograd::remove_grad_ready_hook(params_[j], hook_ids_[j]);
        hook_ids_.clear();
        return;
      }
      hook_ids_.push_back(
          autograd::add_grad_ready_hook(params_[i], [this, i](const AnyTensor& g) { grad_ready(i, g); }));
    }
  }

  /// Backward has the final gradient of parameter i: when it completes its bucket, the
  /// bucket's all-reduce starts (in the graph being captured, right after that gradient).
  void grad_ready(std::size_t i, const AnyTensor& g) {
    if (!armed_) return;
    const auto [b, k] = where_[i];
    Flight& f = flight_[b];
    if (f.started || f.seen[k]) return;  // a second backward without a forward: reduced after it
    f.seen[k] = true;
    f.grads[k] = g;
    if (--f.left > 0) return;
    std::vector<AnyTensor> parts;
    parts.reserve(buckets_[b].size());
    for (std::size_t kk = 0; kk < buckets_[b].size(); ++kk)
      parts.push_back(checked_grad(buckets_[b][kk], f.grads[kk], "backward"));
    f.buffer = all_reduce_start(std::span<const AnyTensor>(parts), ReduceOp::mean, opt_.group);
    f.started = true;
  }

  /// Waits for (and drops) the all-reduces of a backward whose gradients were not reduced.
  void drain() {
    for (Flight& f : flight_) {
      if (f.started) {
        NoGradGuard no_grad;
        all_reduce_wait(f.buffer);
      }
      f = Flight{};
    }
    armed_ = false;
  }

  void make_buckets() {
    std::vector<std::size_t> cur;
    std::int64_t bytes = 0;
    for (std::size_t k = params_.size(); k-- > 0;) {
      const std::int64_t b = static_cast<std::int64_t>(params_[k].nbytes());
      if (!cur.empty() && bytes + b > opt_.bucket_bytes) {
        buckets_.push_back(std::move(cur));
        cur.clear();
        bytes = 0;
      }
      cur.push_back(k);
      bytes += b;
    }
    if (!cur.empty()) buckets_.push_back(std::move(cur));
  }

  std::shared_ptr<nn::Module> module_;
  DataParallelOptions opt_;
  std::vector<std::string> names_;
  std::vector<AnyTensor> params_;
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::uint64_t> hook_ids_;  ///< per parameter (empty without overlap)
  std::vector<std::pair<std::size_t, std::size_t>> where_;  ///< per parameter: its bucket and place in it
  std::vector<Flight> flight_;  ///< per bucket
  bool armed_ = false;          ///< the next backward starts the buckets' all-reduces
};

/// A host value reduced over the group (loss and accuracy sums for the progress line).
inline double reduce_value(double v, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  all_reduce_buffer(g, &v, 1, DType::f64, op, "reduce_value");
  return v;
}
inline std::int64_t reduce_value(std::int64_t v, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  MS_CHECK(op != ReduceOp::mean, DTypeError, "reduce_value: reduction mean of an integer; use sum");
  all_reduce_buffer(g, &v, 1, DType::i64, op, "reduce_value");
  return v;
}

/// True on the rank that prints and writes files (rank 0 of the world).
inline bool is_main_rank() { return rank() == 0; }

/// Rank 0 writes the module's state (parameters and buffers) to `path` as safetensors,
/// atomically (a temporary file renamed into place, so a crash leaves no partial file);
/// the other ranks wait until it is written, so every rank can load it afterwards.
inline void save_checkpoint(const nn::Module& module, const std::filesystem::path& path, const Group& g = world()) {
  std::int64_t ok = 1;
  std::string error;
  if (g.rank() == 0) {
    try {
      nn::save(module, path);
    } catch (const Error& e) {
      ok = 0;
      error = e.what();
    }
  }
  ok = reduce_value(ok, ReduceOp::min, g);
  if (!ok) {
    MS_CHECK(g.rank() != 0, IOError, "save_checkpoint: rank 0 could not write {}: {}", path.string(), error);
    MS_THROW(IOError, "save_checkpoint: rank 0 could not write {}", path.string());
  }
}

}  // namespace ms::dist
