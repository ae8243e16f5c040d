#pragma once
// Stream-ordered caching of device memory (aclrtMalloc) and pinned host memory
// (aclrtMallocHost) for the Ascend adapter. The runtime's aclrtFree releases a block at
// once, without waiting for kernels queued on any stream, so a block handed back while
// queued work may still read or write it is not freed: an event is recorded on each
// stream that used it, and the block becomes reusable only when all those events have
// completed (the model of PyTorch's recordStream and caching allocator, and torch_npu's).
// Belongs here: blocks, events and statistics. Must not know about tensors or ops: the
// backend tells the pool which streams used a block (note_use).

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "acl_api.hpp"

namespace ms::backend::ascend {

/// Binds the calling thread to device `index` once: aclrtSetDevice runs the device set-up,
/// so it is called only when aclrtGetDevice says the thread is not on `index` (someone
/// reset it, or the thread is new); without aclrtGetDevice, once per thread.
inline void bind_device(const AclApi& api, int index) {
  thread_local int bound = -1;
  if (api.aclrtGetDevice != nullptr) {
    std::int32_t cur = -1;
    if (api.aclrtGetDevice(&cur) == ACL_SUCCESS && cur == index) return;
    (void)api.aclGetRecentErrMsg();  // "no device set" is the answer, not an error to report later
  } else if (bound == index) {
    return;
  }
  acl_check(api, api.aclrtSetDevice(index), "aclrtSetDevice");
  bound = index;
}

/// What a pool has done; visible through AscendBackend::memory_stats().
struct PoolStats {
  std::uint64_t mallocs = 0;        ///< blocks obtained from the runtime
  std::uint64_t frees = 0;          ///< blocks handed back to the runtime
  std::uint64_t reuses = 0;         ///< requests served from the cache
  std::uint64_t deferred = 0;       ///< blocks given back while streams still used them
  std::uint64_t in_use_bytes = 0;   ///< handed out now
  std::uint64_t cached_bytes = 0;   ///< reusable now
  std::uint64_t pending_bytes = 0;  ///< waiting for their streams' events
};

class BlockPool {
 public:
  enum class Kind { device, pinned_host };
  BlockPool(AclApi api, int device, Kind kind) : api_(std::move(api)), device_(device), kind_(kind) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() {
    try {
      empty_cache();
    } catch (const Error&) {  // a device fault now has nobody to report to
    }
  }

  /// A block of at least `n` bytes, reused when a cached one fits. Throws BackendError.
  void* get(std::size_t n) {
    const std::size_t want = round(n);
    std::lock_guard lk(mu_);
    collect_locked(false);
    auto it = cache_.lower_bound(want);
    if (it != cache_.end() && it->first <= 2 * want) {
      void* p = it->second;
      const std::size_t size = it->first;
      cache_.erase(it);
      st_.cached_bytes -= size;
      st_.in_use_bytes += size;
      ++st_.reuses;
      used_.emplace(reinterpret_cast<std::uintptr_t>(p), Block{size, {}});
      return p;
    }
    void* p = nullptr;
    aclError rc = raw_alloc(&p, want);
    if (rc != ACL_SUCCESS && (!cache_.empty() || !pending_.empty())) {
      // Out of memory with blocks held here: wait for the pending ones, give every cached one
      // back, and retry once.
      (void)api_.aclGetRecentErrMsg();
      collect_locked(true);
      release_cache_locked();
      rc = raw_alloc(&p, want);
    }
    acl_check(api_, rc, kind_ == Kind::device ? "aclrtMalloc" : "aclrtMallocHost");
    ++st_.mallocs;
    st_.in_use_bytes += want;
    used_.emplace(reinterpret_cast<std::uintptr_t>(p), Block{want, {}});
    return p;
  }

  /// Notes that work queued on `s` uses the block that holds `p` (no-op for other pointers).
  void note_use(const void* p, aclrtStream s) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard lk(mu_);
    auto it = used_.upper_bound(a);
    if (it == used_.begin()) return;
    --it;
    if (a >= it->first + it->second.size) return;
    auto& ss = it->second.streams;
    if (std::find(ss.begin(), ss.end(), s) == ss.end()) ss.push_back(s);
  }

  /// Gives the block at `p` back: reusable at once when no stream used it, else when the
  /// events recorded now on those streams have completed. Never throws.
  void put(void* p) noexcept {
    std::lock_guard lk(mu_);
    auto it = used_.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == used_.end()) return;
    Block b = std::move(it->second);
    used_.erase(it);
    st_.in_use_bytes -= b.size;
    Pending pend{p, b.size, {}};
    for (aclrtStream s : b.streams) {
      aclrtEvent e = nullptr;
      try {
        bind_device(api_, device_);
        e = event_locked();
      } catch (const Error&) {
        e = nullptr;
      }
      if (e != nullptr && api_.aclrtRecordEvent(e, s) == ACL_SUCCESS) {
        pend.events.push_back(e);
        continue;
      }
      // The stream is gone (its work ran when it was destroyed) or the runtime refused the
      // record: wait for the stream the slow way, ignoring its status.
      if (e != nullptr) free_events_.push_back(e);
      (void)api_.aclGetRecentErrMsg();
      (void)api_.aclrtSynchronizeStream(s);
      (void)api_.aclGetRecentErrMsg();
    }
    if (pend.events.empty()) {
      cache_.emplace(b.size, p);
      st_.cached_bytes += b.size;
    } else {
      ++st_.deferred;
      st_.pending_bytes += b.size;
      pending_.push_back(std::move(pend));
    }
  }

  /// Waits for every pending block, hands every cached block back to the runtime, and
  /// destroys the events kept for reuse.
  void empty_cache() {
    std::lock_guard lk(mu_);
    collect_locked(true);
    release_cache_locked();
    for (aclrtEvent e : free_events_) (void)api_.aclrtDestroyEvent(e);
    free_events_.clear();
  }

  PoolStats stats() const {
    std::lock_guard lk(mu_);
    return st_;
  }

 private:
  struct Block {
    std::size_t size;
    std::vector<aclrtStream> streams;
  };
  struct Pending {
    void* p;
    std::size_t size;
    std::vector<aclrtEvent> events;
  };

  std::size_t round(std::size_t n) const {
    const std::size_t a = kind_ == Kind::device ? 512 : 64;
    return (std::max<std::size_t>(n, 1) + a - 1) / a * a;
  }
  aclError raw_alloc(void** p, std::size_t n) {
    return kind_ == Kind::device ? api_.aclrtMalloc(p, n, ACL_MEM_MALLOC_HUGE_FIRST) : api_.aclrtMallocHost(p, n);
  }
  aclrtEvent event_locked() {
    if (!free_events_.empty()) {
      aclrtEvent e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    aclrtEvent e = nullptr;
    acl_check(api_, api_.aclrtCreateEvent(&e), "aclrtCreateEvent");
    return e;
  }
  bool complete(aclrtEvent e, bool wait) {
    if (wait) {
      (void)api_.aclrtSynchronizeEvent(e);
      return true;
    }
    if (api_.aclrtQueryEventStatus == nullptr) return false;
    aclrtEventRecordedStatus s = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    if (api_.aclrtQueryEventStatus(e, &s) != ACL_SUCCESS) {
      (void)api_.aclGetRecentErrMsg();
      return false;
    }
    return s == ACL_EVENT_RECORDED_STATUS_COMPLETE;
  }
  /// Moves pending blocks whose events have all completed (all of them when `wait`) to the cache.
  void collect_locked(bool wait) {
    if (pending_.empty()) return;
    if (wait) bind_device(api_, device_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (aclrtEvent e : it->events) done = complete(e, wait) && done;
      if (!done) {
        ++it;
        continue;
      }
      for (aclrtEvent e : it->events) free_events_.push_back(e);
      cache_.emplace(it->size, it->p);
      st_.pending_bytes -= it->size;
      st_.cached_bytes += it->size;
      it = pending_.erase(it);
    }
  }
  void release_cache_locked() {
    for (auto& [size, p] : cache_) {
      (void)(kind_ == Kind::device ? api_.aclrtFree(p) : api_.aclrtFreeHost(p));
      ++st_.frees;
    }
    cache_.clear();
    st_.cached_bytes = 0;
  }

  AclApi api_;
  int device_;
  Kind kind_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, Block> used_;     ///< handed out, by start address
  std::multimap<std::size_t, void*> cache_;  ///< reusable, by size
  std::deque<Pending> pending_;              ///< given back, waiting for events
  std::vector<aclrtEvent> free_events_;
  PoolStats st_;
};

}  // namespace ms::backend::ascend
