#pragma once
// The eager caching allocator for host memory: 64-byte aligned blocks, reuse by
// size class, transparent-huge-page advice for big blocks, and statistics.
// Why: a first-touch 4 KiB page fault costs ~12 us on the target machines, so an
// eager op that mallocs fresh memory each call is dominated by page faults.
// Must not know about tensors.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <mutex>
#include <thread>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "error.hpp"

namespace ms {

/// Allocation statistics of an allocator, in bytes.
struct AllocatorStats {
  std::size_t allocated = 0;       ///< bytes in blocks handed out and not yet returned
  std::size_t reserved = 0;        ///< allocated + bytes cached for reuse
  std::size_t peak_allocated = 0;  ///< high-water mark of `allocated`
  std::size_t peak_reserved = 0;   ///< high-water mark of `reserved`
  std::uint64_t num_allocs = 0;    ///< calls to allocate()
  std::uint64_t num_cache_hits = 0;  ///< allocate() calls served from the cache
};

/// Interface of a memory allocator (host or device). Blocks are returned with their size.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* p, std::size_t nbytes) noexcept = 0;
  /// The usable size of a block requested with `nbytes` (after size-class rounding).
  virtual std::size_t round_size(std::size_t nbytes) const { return nbytes; }
};

/// Host allocator that keeps freed blocks in per-size-class free lists.
class CachingHostAllocator final : public Allocator {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kHugeThreshold = std::size_t{2} << 20;  // 2 MiB

  /// The process-wide instance (never destroyed, so tensors in static storage stay valid at exit).
  static CachingHostAllocator& instance() {
    static auto* inst = new CachingHostAllocator();
    return *inst;
  }

  /// Size classes: multiples of 64 up to 1 KiB, then four classes per power of two.
  std::size_t round_size(std::size_t n) const override {
    if (n == 0) return kAlignment;
    if (n <= 1024) return (n + kAlignment - 1) / kAlignment * kAlignment;
    std::size_t p = std::size_t{1} << (63 - __builtin_clzll(n - 1));  // largest power of two < n
    std::size_t step = p / 4;
    return (n + step - 1) / step * step;
  }

  void* allocate(std::size_t nbytes) override {
    std::size_t size = round_size(nbytes);
    {
      std::lock_guard<SpinLock> lock(mu_);
      ++stats_.num_allocs;
      auto& list = free_[class_index(size)];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        ++stats_.num_cache_hits;
        stats_.allocated += size;
        stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
        return p;
      }
    }
    void* p = system_alloc(size);
    if (!p) {
      empty_cache();
      p = system_alloc(size);
      MS_CHECK(p != nullptr, MemoryError, "allocator: out of memory allocating {} bytes", size);
    }
    std::lock_guard<SpinLock> lock(mu_);
    stats_.allocated += size;
    stats_.reserved += size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    return p;
  }

  void deallocate(void* p, std::size_t nbytes) noexcept override {
    if (!p) return;
    std::size_t size = round_size(nbytes);
    std::lock_guard<SpinLock> lock(mu_);
    stats_.allocated -= size;
    if (stats_.reserved > cache_limit_) {  // do not let the cache grow without bound
      stats_.reserved -= size;
      std::free(p);
      return;
    }
    free_[class_index(size)].push_back(p);
  }

  /// Returns every cached block to the system.
  void empty_cache() noexcept {
    std::lock_guard<SpinLock> lock(mu_);
    for (std::size_t c = 0; c < free_.size(); ++c) {
      auto& blocks = free_[c];
      for (void* p : blocks) std::free(p);
      stats_.reserved -= class_size(c) * blocks.size();
      blocks.clear();
    }
  }

  AllocatorStats stats() const {
    std::lock_guard<SpinLock> lock(mu_);
    return stats_;
  }
  /// Resets the peak counters to the current values.
  void reset_peak_stats() {
    std::lock_guard<SpinLock> lock(mu_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }
  /// Cached bytes beyond this limit are freed instead of kept (default 8 GiB or MS_ALLOC_CACHE_LIMIT_MB).
  void set_cache_limit(std::size_t bytes) {
    std::lock_guard<SpinLock> lock(mu_);
    cache_limit_ = bytes;
  }
  std::size_t cache_limit() const {
    std::lock_guard<SpinLock> lock(mu_);
    return cache_limit_;
  }

 private:
  CachingHostAllocator() {
    if (const char* env = std::getenv("MS_ALLOC_CACHE_LIMIT_MB")) cache_limit_ = std::strtoull(env, nullptr, 10) << 20;
  }
  static void* system_alloc(std::size_t size) {
    std::size_t align = size >= kHugeThreshold ? kHugeThreshold : kAlignment;
    std::size_t rounded = (size + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && size >= kHugeThreshold) madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
  }

  // Size classes are indexed directly (no hashing on the eager hot path): 16 classes of
  // 64..1024 bytes, then 4 per power of two (1024 * {5,6,7,8}/4, 2048 * {5,6,7,8}/4, ...).
  static constexpr std::size_t kNumClasses = 16 + 4 * 54;
  static std::size_t class_index(std::size_t size) {  // size is a class size (round_size)
    if (size <= 1024) return size / kAlignment - 1;
    int e = 63 - __builtin_clzll(size - 1);  // size in (2^e, 2^(e+1)]
    std::size_t step = (std::size_t{1} << e) / 4;
    return 16 + static_cast<std::size_t>(e - 10) * 4 + (size / step - 5);
  }
  static std::size_t class_size(std::size_t c) {
    if (c < 16) return (c + 1) * kAlignment;
    std::size_t e = 10 + (c - 16) / 4, q = 5 + (c - 16) % 4;
    return (std::size_t{1} << e) / 4 * q;
  }

  /// A test-and-set lock: the critical sections are a few instructions, and a std::mutex
  /// lock/unlock pair cost as much as the rest of the allocator on the eager hot path.
  class SpinLock {
   public:
    void lock() noexcept {
      while (flag_.test_and_set(std::memory_order_acquire)) {
        while (flag_.test(std::memory_order_relaxed)) std::this_thread::yield();
      }
    }
    void unlock() noexcept { flag_.clear(std::memory_order_release); }

   private:
    std::atomic_flag flag_;
  };

  mutable SpinLock mu_;
  std::array<std::vector<void*>, kNumClasses> free_;
  AllocatorStats stats_;
  std::size_t cache_limit_ = std::size_t{8} << 30;
};

namespace detail {
/// A per-thread stack of freed blocks of one small size. Eager ops create and drop a
/// TensorImpl and a Storage per output; recycling their blocks here skips malloc/free.
/// Trivially destructible on purpose: blocks freed after the thread's drainer ran (e.g. by
/// static tensors at exit) go straight to operator delete.
template <std::size_t Size>
struct BlockCache {
  static constexpr int kCapacity = 64;
  void* blocks[kCapacity];
  int count = 0;
  bool registered = false;  ///< the drainer that empties this cache at thread exit exists
  bool closed = false;      ///< the drainer ran: do not cache any more
};
template <std::size_t Size>
inline thread_local BlockCache<Size> block_cache;

template <std::size_t Size>
struct BlockCacheDrainer {
  ~BlockCacheDrainer() {
    auto& c = block_cache<Size>;
    while (c.count > 0) ::operator delete(c.blocks[--c.count]);
    c.closed = true;
  }
};

/// std::allocator-compatible allocator for single objects (shared_ptr control blocks) that
/// recycles blocks through the calling thread's BlockCache.
template <class T>
struct CachedBlockAllocator {
  using value_type = T;
  CachedBlockAllocator() = default;
  template <class U>
  CachedBlockAllocator(const CachedBlockAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n == 1) {
      auto& c = block_cache<sizeof(T)>;
      if (c.count > 0) return static_cast<T*>(c.blocks[--c.count]);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) {
      auto& c = block_cache<sizeof(T)>;
      if (!c.registered) [[unlikely]] {
        c.registered = true;
        static thread_local BlockCacheDrainer<sizeof(T)> drainer;  // runs at thread exit
        (void)drainer;
      }
      if (!c.closed && c.count < BlockCache<sizeof(T)>::kCapacity) {
        c.blocks[c.count++] = p;
        return;
      }
    }
    ::operator delete(p);
  }
  template <class U>
  friend bool operator==(const CachedBlockAllocator&, const CachedBlockAllocator<U>&) noexcept { return true; }
};
}  // namespace detail

/// Statistics of the host caching allocator.
inline AllocatorStats host_allocator_stats() { return CachingHostAllocator::instance().stats(); }
/// Frees every cached host block.
inline void empty_host_cache() { CachingHostAllocator::instance().empty_cache(); }

}  // namespace ms
