#pragma once
// DataLoader: batches of (images, labels) over in-memory tensors, optionally shuffled.
//
//   data::DataLoader loader(train.images, train.labels, 64, /*shuffle=*/true, /*seed=*/0);
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (const data::Batch& b : loader)  // each loop over the loader is one epoch
//       train_step(b.images, b.labels);
//
// Each batch holds new contiguous tensors (copies, never views of the dataset), so they
// can be fed to a captured step or kept. With shuffle, every epoch (every begin()) draws a
// new permutation from a generator seeded with (seed, epoch number): the order depends
// only on the seed and the epoch, not on ms::default_generator or on other loaders.
// The last partial batch is kept unless drop_last.
//
// Data-parallel training: set_shard(rank, world) makes each epoch's order the rank's
// shard of the epoch's permutation, as PyTorch's DistributedSampler: the permutation is
// padded by repeating its first indices to a multiple of world, and rank r takes every
// world-th index from r; every rank gets the same number of samples (and batches).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <utility>
#include <vector>

#include "../core/linkage.hpp"
#include "../core/random.hpp"
#include "../core/tensor.hpp"

namespace ms::data {

/// One batch: images (B, ...) and labels (B,), contiguous copies.
struct Batch {
  Tensor<float> images;
  Tensor<std::int64_t> labels;
  std::int64_t size() const { return labels.shape(0); }
};

class DataLoader {
 public:
  /// images: (N, ...) float32; labels: (N,) int64.
  DataLoader(Tensor<float> images, Tensor<std::int64_t> labels, std::int64_t batch_size, bool shuffle = false,
             std::uint64_t seed = 0, bool drop_last = false)
      : images_(std::move(images)), labels_(std::move(labels)), batch_size_(batch_size), shuffle_(shuffle),
        seed_(seed), drop_last_(drop_last) {
    MS_CHECK(images_.defined() && labels_.defined(), ValueError, "DataLoader: images and labels must be defined");
    MS_CHECK(batch_size > 0, ValueError, "DataLoader: batch_size must be positive, got {}", batch_size);
    MS_CHECK(images_.dim() >= 1 && labels_.dim() == 1, ShapeError,
             "DataLoader: expected images (N, ...) and labels (N,), got {} and {}", shape_str(images_.shape()),
             shape_str(labels_.shape()));
    MS_CHECK(images_.shape(0) == labels_.shape(0), ShapeError,
             "DataLoader: {} images but {} labels", images_.shape(0), labels_.shape(0));
    MS_CHECK(images_.device().is_cpu() && labels_.device().is_cpu(), DeviceError, "DataLoader: tensors must be on the cpu");
    // Contiguous sources make a batch row a single memcpy.
    if (!images_.is_contiguous()) images_ = contiguous_copy(images_);
    if (!labels_.is_contiguous()) labels_ = contiguous_copy(labels_);
    order_.resize(static_cast<std::size_t>(num_samples()));
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
  }

  /// Number of samples.
  std::int64_t num_samples() const { return labels_.shape(0); }
  /// Number of samples per epoch of this loader (of its shard when sharded).
  std::int64_t epoch_samples() const { return static_cast<std::int64_t>(order_.size()); }
  /// Batches per epoch.
  std::size_t size() const;
  std::int64_t batch_size() const { return batch_size_; }
  /// Epochs started so far (begin() calls).
  std::int64_t epoch() const { return epoch_; }

  /// Starts epoch `e` now: with shuffle, the sample order of that epoch.
  void set_epoch(std::int64_t e);
  /// Makes every epoch's order rank `rank`'s shard of `world` (see the header comment).
  void set_shard(std::int64_t rank, std::int64_t world);
  /// Rank `rank`'s share of `order`: padded by repetition to a multiple of world, then
  /// every world-th element from rank.
  static std::vector<std::int64_t> shard_of(const std::vector<std::int64_t>& order, std::int64_t rank,
                                            std::int64_t world);
  /// The sample indices of the current epoch, in order.
  const std::vector<std::int64_t>& order() const { return order_; }

  /// Batch i of the current epoch.
  Batch batch(std::size_t i) const;

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;
    iterator() = default;
    iterator(const DataLoader* l, std::size_t i) : l_(l), i_(i) { load(); }
    const Batch& operator*() const { return cur_; }
    const Batch* operator->() const { return &cur_; }
    iterator& operator++() {
      ++i_;
      load();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& a, const iterator& b) { return a.i_ == b.i_; }

   private:
    void load() {
      if (l_ && i_ < l_->size()) cur_ = l_->batch(i_);
    }
    const DataLoader* l_ = nullptr;
    std::size_t i_ = 0;
    Batch cur_;
  };

  /// Starts a new epoch (reshuffling when shuffle is on) and iterates its batches.
  iterator begin();
  iterator end() const { return iterator(nullptr, size()); }

 private:
  static std::uint64_t mix(std::uint64_t seed, std::uint64_t epoch);
  static AnyTensor contiguous_copy(const AnyTensor& t);

  Tensor<float> images_;
  Tensor<std::int64_t> labels_;
  std::int64_t batch_size_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::int64_t epoch_ = 0;
  bool started_ = false;
  std::int64_t shard_rank_ = 0, shard_world_ = 1;
  std::vector<std::int64_t> order_;
};

}  // namespace ms::data

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::data {
MS_IMPL std::size_t DataLoader::size() const {
  const std::int64_t n = epoch_samples();
  return static_cast<std::size_t>(drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_);
}

MS_IMPL void DataLoader::set_epoch(std::int64_t e) {
  epoch_ = e;
  order_.resize(static_cast<std::size_t>(num_samples()));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  if (shuffle_) {
    Generator g(mix(seed_, static_cast<std::uint64_t>(e)));
    for (std::size_t i = order_.size(); i > 1; --i) {  // Fisher-Yates
      std::size_t j = static_cast<std::size_t>(g.below(i));
      std::swap(order_[i - 1], order_[j]);
    }
  }
  if (shard_world_ > 1) order_ = shard_of(order_, shard_rank_, shard_world_);
}

MS_IMPL void DataLoader::set_shard(std::int64_t rank, std::int64_t world) {
  MS_CHECK(world >= 1 && rank >= 0 && rank < world, ValueError,
           "DataLoader.set_shard: rank {} is out of range for a world of {}", rank, world);
  MS_CHECK(num_samples() > 0 || world == 1, ValueError, "DataLoader.set_shard: no samples to shard");
  shard_rank_ = rank;
  shard_world_ = world;
  set_epoch(epoch_);
}

MS_IMPL std::vector<std::int64_t> DataLoader::shard_of(const std::vector<std::int64_t>& order, std::int64_t rank,
                                            std::int64_t world) {
  const std::size_t n = order.size();
  const std::size_t per = (n + static_cast<std::size_t>(world) - 1) / static_cast<std::size_t>(world);
  std::vector<std::int64_t> out;
  out.reserve(per);
  for (std::size_t k = 0; k < per; ++k) out.push_back(order[(k * static_cast<std::size_t>(world) + static_cast<std::size_t>(rank)) % n]);
  return out;
}

MS_IMPL Batch DataLoader::batch(std::size_t i) const {
  MS_CHECK(i < size(), IndexError, "DataLoader: batch {} is out of range for {} batches", i, size());
  const std::int64_t start = static_cast<std::int64_t>(i) * batch_size_;
  const std::int64_t b = std::min(batch_size_, epoch_samples() - start);
  Shape is = images_.shape();
  is[0] = b;
  Batch out;
  out.images = AnyTensor::empty(is, DType::f32);
  out.labels = AnyTensor::empty(Shape{b}, DType::i64);
  const std::size_t row = static_cast<std::size_t>(images_.numel() / std::max<std::int64_t>(num_samples(), 1));
  const auto* isrc = static_cast<const float*>(images_.raw_data());
  const auto* lsrc = static_cast<const std::int64_t*>(labels_.raw_data());
  auto* idst = static_cast<float*>(out.images.raw_data());
  auto* ldst = static_cast<std::int64_t*>(out.labels.raw_data());
  for (std::int64_t k = 0; k < b; ++k) {
    const std::int64_t s = order_[static_cast<std::size_t>(start + k)];
    if (row) std::memcpy(idst + static_cast<std::size_t>(k) * row, isrc + static_cast<std::size_t>(s) * row, row * sizeof(float));
    ldst[k] = lsrc[s];
  }
  return out;
}

MS_IMPL DataLoader::iterator DataLoader::begin() {
  set_epoch(started_ ? epoch_ + 1 : epoch_);
  started_ = true;
  return iterator(this, 0);
}

MS_IMPL std::uint64_t DataLoader::mix(std::uint64_t seed, std::uint64_t epoch) {
  std::uint64_t z = seed ^ (epoch * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

MS_IMPL AnyTensor DataLoader::contiguous_copy(const AnyTensor& t) {
  AnyTensor c = AnyTensor::empty(t.shape(), t.dtype());
  const std::size_t esize = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(c.raw_data());
  ms::detail::for_each_offset(t.shape(), t.strides(), [&](std::int64_t off) {
    std::memcpy(dst, src + off * static_cast<std::int64_t>(esize), esize);
    dst += esize;
  });
  return c;
}
}  // namespace ms::data
#endif
