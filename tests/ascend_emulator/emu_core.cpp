// Ascend emulator: errors, init/device, counters, latency, faults, device and
// host memory, synchronous and asynchronous copies, memset.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_set>

#include "emu_internal.hpp"

namespace msemu {

// ---------------------------------------------------------------- errors

namespace {
thread_local std::string t_pending;   // message of the most recent failure
thread_local std::string t_returned;  // storage behind aclGetRecentErrMsg()'s pointer
thread_local bool t_has_pending = false;
}  // namespace

std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  va_end(ap2);
  return out;
}

int fail(int code, std::string msg) {
  t_pending = std::move(msg);
  t_has_pending = true;
  return code;
}

std::string take_error() {
  std::string out = t_has_pending ? std::move(t_pending) : std::string();
  t_pending.clear();
  t_has_pending = false;
  return out;
}

// ---------------------------------------------------------------- runtime state

namespace {
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_strict_context{true};
thread_local int32_t t_device = -1;
constexpr uint32_t kDeviceCount = 1;
}  // namespace

int check_context(const char* fn) {
  if (!g_strict_context.load()) return ACL_SUCCESS;
  if (!g_initialized.load()) {
    return fail(ACL_ERROR_UNINITIALIZE, strf("%s: aclInit has not been called", fn));
  }
  if (t_device < 0) {
    return fail(ACL_ERROR_RT_CONTEXT_NULL,
                strf("%s: no device is set on this thread; call aclrtSetDevice first", fn));
  }
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- counters

Counters& counters() {
  static Counters* c = new Counters();  // never destroyed: workers may outlive statics
  return *c;
}

// ---------------------------------------------------------------- latency

namespace {
struct LatencyModel {
  std::atomic<uint64_t> launch_ns{5'000};
  std::atomic<uint64_t> sync_ns{20'000};
  std::atomic<uint64_t> copy_ps_per_byte{100};
  std::atomic<uint64_t> copy_fixed_ns{10'000};
  std::atomic<uint64_t> aicpu_launch_ns{20'000};
  std::atomic<uint64_t> aicpu_ps_per_element{1'000};
};
LatencyModel& latency() {
  static LatencyModel* l = new LatencyModel();
  return *l;
}
}  // namespace

uint64_t launch_ns() { return latency().launch_ns.load(); }
uint64_t sync_ns() { return latency().sync_ns.load(); }
uint64_t aicpu_ns(uint64_t elements) {
  return latency().aicpu_launch_ns.load() + elements * latency().aicpu_ps_per_element.load() / 1000;
}
uint64_t copy_ns(uint64_t bytes, bool host_device) {
  const uint64_t per_byte = bytes * latency().copy_ps_per_byte.load() / 1000;
  return per_byte + (host_device ? latency().copy_fixed_ns.load() : 0);
}
void sleep_ns(uint64_t ns) {
  if (ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}

// ---------------------------------------------------------------- faults

namespace {
constexpr int kFaultKinds = 7;
struct Fault {
  bool armed = false;
  uint64_t after_n = 0;
  uint64_t seen = 0;
};
std::mutex g_fault_mu;
Fault g_faults[kFaultKinds];
}  // namespace

bool fault_fires(int kind) {
  if (kind <= 0 || kind >= kFaultKinds) return false;
  std::lock_guard lk(g_fault_mu);
  Fault& f = g_faults[kind];
  if (!f.armed) return false;
  if (f.seen < f.after_n) {
    ++f.seen;
    return false;
  }
  f = Fault{};
  return true;
}

// ---------------------------------------------------------------- device memory

namespace {

constexpr uintptr_t kDevAlign = 512;
constexpr uintptr_t round_up(uintptr_t v, uintptr_t a) { return (v + a - 1) / a * a; }

struct DeviceMemory {
  std::mutex mu;
  uintptr_t base = 0, end = 0, next = 0;  // reserved, inaccessible address range
  std::map<uintptr_t, AllocRef> live;
  uint64_t live_bytes = 0, peak_bytes = 0, limit = 0;
  std::map<uintptr_t, size_t> host_blocks;  // aclrtMallocHost: start -> size
  std::string reserve_error;

  DeviceMemory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    const uint64_t half_host =
        (pages > 0 && page > 0) ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2 : 0;
    limit = std::min<uint64_t>(16ULL << 30, half_host > 0 ? half_host : (16ULL << 30));
    // Device addresses come from a PROT_NONE reservation: they never collide
    // with host memory, and the host faults if it dereferences one.
    for (const uint64_t size : {64ULL << 30, 16ULL << 30, 4ULL << 30, 1ULL << 30}) {
      void* p = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base = next = reinterpret_cast<uintptr_t>(p);
        end = base + size;
        return;
      }
    }
    reserve_error = strf("could not reserve a device address range (%s)", std::strerror(errno));
  }

  // Picks an address for `padded` bytes: bump pointer first, then first fit.
  uintptr_t place(uintptr_t padded) {
    if (end - next >= padded) {
      const uintptr_t a = next;
      next += padded;
      return a;
    }
    uintptr_t cur = base;
    for (const auto& [b, a] : live) {
      if (b - cur >= padded) return cur;
      cur = round_up(b + a->size, kDevAlign);
    }
    return (end - cur >= padded) ? cur : 0;
  }
};

DeviceMemory& mem() {
  static DeviceMemory* m = new DeviceMemory();
  return *m;
}

}  // namespace

bool is_pinned_host(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  auto it = m.host_blocks.upper_bound(a);
  if (it == m.host_blocks.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

bool is_device_address(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  DeviceMemory& m = mem();
  return a >= m.base && a < m.end;
}

int resolve(const void* p, size_t bytes, const char* fn, const char* what, AllocRef& ref,
            std::byte*& host) {
  if (p == nullptr) return fail(ACL_ERROR_RT_PARAM_INVALID, strf("%s: %s is null", fn, what));
  if (!is_device_address(p)) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                strf("%s: %s %p is not device memory (not returned by aclrtMalloc)", fn, what, p));
  }
  const auto addr = reinterpret_cast<uintptr_t>(p);
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  auto it = m.live.upper_bound(addr);
  if (it == m.live.begin() || addr > std::prev(it)->first + std::prev(it)->second->size ||
      (bytes > 0 && addr == std::prev(it)->first + std::prev(it)->second->size)) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                strf("%s: %s %p is not inside a live device allocation (freed or never allocated)",
                     fn, what, p));
  }
  const AllocRef& a = std::prev(it)->second;
  const uintptr_t off = addr - a->base;
  if (bytes > a->size - off) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                strf("%s: %s range [%p, +%zu bytes) overruns the device allocation at 0x%zx of %zu "
                     "bytes by %zu bytes",
                     fn, what, p, bytes, static_cast<size_t>(a->base), a->size,
                     bytes - (a->size - off)));
  }
  ref = a;
  host = a->data.get() + off;
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- copies

namespace {

enum class Side { Host, Device };

// Validates one copy and builds the task that performs it.
int build_copy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
               const char* fn, Task& task, Side& dst_side, Side& src_side) {
  if (dst == nullptr || src == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: %s is null", fn, dst == nullptr ? "dst" : "src"));
  }
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM,
                strf("%s: count %zu exceeds destMax %zu", fn, count, destMax));
  }
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: dst_side = Side::Host, src_side = Side::Host; break;
    case ACL_MEMCPY_HOST_TO_DEVICE: dst_side = Side::Device, src_side = Side::Host; break;
    case ACL_MEMCPY_DEVICE_TO_HOST: dst_side = Side::Host, src_side = Side::Device; break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: dst_side = Side::Device, src_side = Side::Device; break;
    case ACL_MEMCPY_DEFAULT:
      dst_side = is_device_address(dst) ? Side::Device : Side::Host;
      src_side = is_device_address(src) ? Side::Device : Side::Host;
      break;
    default:
      return fail(ACL_ERROR_INVALID_PARAM,
                  strf("%s: memcpy kind %d is not supported by the emulator", fn, static_cast<int>(kind)));
  }
  static const char* const kKindNames[] = {"ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
                                           "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_DEVICE_TO_DEVICE",
                                           "ACL_MEMCPY_DEFAULT", "", "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE"};
  const char* kind_name = kKindNames[static_cast<int>(kind)];
  std::byte* d = static_cast<std::byte*>(dst);
  const std::byte* s = static_cast<const std::byte*>(src);
  if (dst_side == Side::Device) {
    std::byte* h = nullptr;
    AllocRef r;
    if (int rc = resolve(dst, count, fn, "dst", r, h); rc != ACL_SUCCESS) return rc;
    d = h;
    task.refs.push_back(std::move(r));
  } else if (is_device_address(dst)) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                strf("%s: dst %p is device memory but the kind %s says host", fn, dst, kind_name));
  }
  if (src_side == Side::Device) {
    std::byte* h = nullptr;
    AllocRef r;
    if (int rc = resolve(src, count, fn, "src", r, h); rc != ACL_SUCCESS) return rc;
    s = h;
    task.refs.push_back(std::move(r));
  } else if (is_device_address(src)) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                strf("%s: src %p is device memory but the kind %s says host", fn, src, kind_name));
  }
  const bool host_device = dst_side != src_side;
  if (host_device && fault_fires(MS_EMU_FAULT_MEMCPY)) {
    return fail(ACL_ERROR_RT_COPY_DATA, strf("%s: emulated copy failure (injected fault)", fn));
  }
  task.kind = TaskKind::Copy;
  task.name = fn;
  task.delay_ns = (dst_side == Side::Host && src_side == Side::Host) ? 0 : copy_ns(count, host_device);
  task.body = [d, s, count] {
    if (count > 0) std::memmove(d, s, count);
    return ACL_SUCCESS;
  };
  return ACL_SUCCESS;
}

void count_copy(Side dst, Side src, size_t bytes) {
  Counters& c = counters();
  if (dst == Side::Device && src == Side::Host) {
    ++c.h2d_copies;
    c.h2d_bytes += bytes;
  } else if (dst == Side::Host && src == Side::Device) {
    ++c.d2h_copies;
    c.d2h_bytes += bytes;
  } else if (dst == Side::Device) {
    ++c.d2d_copies;
    c.d2d_bytes += bytes;
  } else {
    ++c.h2h_copies;
  }
}

int build_memset(void* devPtr, size_t maxCount, int32_t value, size_t count, const char* fn,
                 Task& task) {
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, strf("%s: devPtr is null", fn));
  if (count > maxCount) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: count %zu exceeds maxCount %zu", fn, count, maxCount));
  }
  std::byte* h = nullptr;
  AllocRef r;
  if (int rc = resolve(devPtr, count, fn, "devPtr", r, h); rc != ACL_SUCCESS) return rc;
  task.refs.push_back(std::move(r));
  task.kind = TaskKind::Memset;
  task.name = fn;
  task.delay_ns = copy_ns(count, false);
  task.body = [h, value, count] {
    std::memset(h, value & 0xFF, count);
    return ACL_SUCCESS;
  };
  return ACL_SUCCESS;
}

}  // namespace
}  // namespace msemu

using namespace msemu;

// ================================================================ C API

MS_EMU_API const char* aclGetRecentErrMsg() {
  if (!t_has_pending) return nullptr;
  t_returned = take_error();
  return t_returned.c_str();
}

MS_EMU_API aclError aclInit(const char* /*configPath*/) {
  bool expected = false;
  if (!g_initialized.compare_exchange_strong(expected, true)) {
    return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized");
  }
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclFinalize() {
  if (!g_initialized.load()) return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialized");
  const int rc = synchronize_all("aclFinalize");
  g_initialized.store(false);
  t_device = -1;
  return rc;
}

MS_EMU_API aclError aclrtSetDevice(int32_t deviceId) {
  if (g_strict_context.load() && !g_initialized.load()) {
    return fail(ACL_ERROR_UNINITIALIZE, "aclrtSetDevice: aclInit has not been called");
  }
  if (deviceId < 0 || static_cast<uint32_t>(deviceId) >= kDeviceCount) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                strf("aclrtSetDevice: invalid device id %d (the emulator has %u device)", deviceId,
                     kDeviceCount));
  }
  t_device = deviceId;
  ++counters().set_device_calls;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");
  if (t_device < 0) return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice: no device is set on this thread");
  *deviceId = t_device;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtResetDevice(int32_t deviceId) {
  if (deviceId < 0 || static_cast<uint32_t>(deviceId) >= kDeviceCount) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID, strf("aclrtResetDevice: invalid device id %d", deviceId));
  }
  if (t_device == deviceId) t_device = -1;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
  *count = kDeviceCount;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy /*policy*/) {
  if (int rc = check_context("aclrtMalloc"); rc != ACL_SUCCESS) return rc;
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is null");
  *devPtr = nullptr;
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size must not be 0");
  if (fault_fires(MS_EMU_FAULT_ALLOC)) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                strf("aclrtMalloc: out of device memory allocating %zu bytes (injected fault)", size));
  }
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  if (m.base == 0) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: " + m.reserve_error);
  if (size > m.limit - m.live_bytes) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                strf("aclrtMalloc: out of device memory allocating %zu bytes (%llu of %llu in use)", size,
                     static_cast<unsigned long long>(m.live_bytes),
                     static_cast<unsigned long long>(m.limit)));
  }
  const uintptr_t padded = round_up(size, kDevAlign);
  const uintptr_t addr = m.place(padded);
  auto a = std::make_shared<Allocation>();
  a->data.reset(new (std::nothrow) std::byte[size]);
  if (addr == 0 || a->data == nullptr) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                strf("aclrtMalloc: cannot allocate %zu bytes (%s)", size,
                     addr == 0 ? "device address range exhausted" : "host backing store"));
  }
  std::memset(a->data.get(), 0xFF, size);  // uninitialized device memory reads as NaN
  a->base = addr;
  a->size = size;
  m.live.emplace(addr, std::move(a));
  m.live_bytes += size;
  m.peak_bytes = std::max(m.peak_bytes, m.live_bytes);
  *devPtr = reinterpret_cast<void*>(addr);
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtFree(void* devPtr) {
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is null");
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  auto it = m.live.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == m.live.end()) {
    return fail(ACL_ERROR_RT_MEMORY_FREE,
                strf("aclrtFree: %p is not the start of a live device allocation", devPtr));
  }
  // Released at once, as on a device. Work already enqueued keeps the backing store
  // alive through its AllocRef (so the host never touches freed memory), but the block is
  // poisoned: such a task fails with a use-after-free when it runs (run_task_body).
  it->second->freed.store(true);
  m.live_bytes -= it->second->size;
  m.live.erase(it);
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (int rc = check_context("aclrtMallocHost"); rc != ACL_SUCCESS) return rc;
  if (hostPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is null");
  *hostPtr = nullptr;
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size must not be 0");
  void* p = std::aligned_alloc(64, round_up(size, 64));
  if (p == nullptr) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, strf("aclrtMallocHost: cannot allocate %zu bytes", size));
  }
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  m.host_blocks.emplace(reinterpret_cast<uintptr_t>(p), size);
  *hostPtr = p;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtFreeHost(void* hostPtr) {
  if (hostPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is null");
  DeviceMemory& m = mem();
  {
    std::lock_guard lk(m.mu);
    if (m.host_blocks.erase(reinterpret_cast<uintptr_t>(hostPtr)) == 0) {
      return fail(ACL_ERROR_RT_MEMORY_FREE,
                  strf("aclrtFreeHost: %p was not returned by aclrtMallocHost", hostPtr));
    }
  }
  std::free(hostPtr);
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                aclrtMemcpyKind kind) {
  if (int rc = check_context("aclrtMemcpy"); rc != ACL_SUCCESS) return rc;
  Task task;
  Side ds{}, ss{};
  if (int rc = build_copy(dst, destMax, src, count, kind, "aclrtMemcpy", task, ds, ss); rc != ACL_SUCCESS) {
    return rc;
  }
  count_copy(ds, ss, count);
  sleep_ns(task.delay_ns);
  return task.body();
}

MS_EMU_API aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                                     aclrtMemcpyKind kind, aclrtStream stream) {
  if (int rc = check_context("aclrtMemcpyAsync"); rc != ACL_SUCCESS) return rc;
  Task task;
  Side ds{}, ss{};
  if (int rc = build_copy(dst, destMax, src, count, kind, "aclrtMemcpyAsync", task, ds, ss);
      rc != ACL_SUCCESS) {
    return rc;
  }
  // From or to pageable host memory the runtime cannot copy asynchronously: it waits for
  // the stream and copies at once (and refuses during capture).
  const void* host_side = ds == Side::Host ? dst : (ss == Side::Host ? src : nullptr);
  if (ds != ss && count > 0 && !is_pinned_host(host_side, count)) {
    if (int rc = drain_stream(stream, "aclrtMemcpyAsync"); rc != ACL_SUCCESS) return rc;
    ++counters().pageable_async_copies;
    count_copy(ds, ss, count);
    sleep_ns(task.delay_ns);
    return task.body();
  }
  bool captured = false;
  if (int rc = enqueue(stream, std::move(task), "aclrtMemcpyAsync", &captured); rc != ACL_SUCCESS) return rc;
  if (!captured) count_copy(ds, ss, count);
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (int rc = check_context("aclrtMemset"); rc != ACL_SUCCESS) return rc;
  Task task;
  if (int rc = build_memset(devPtr, maxCount, value, count, "aclrtMemset", task); rc != ACL_SUCCESS) return rc;
  ++counters().memsets;
  sleep_ns(task.delay_ns);
  return task.body();
}

MS_EMU_API aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                                     aclrtStream stream) {
  if (int rc = check_context("aclrtMemsetAsync"); rc != ACL_SUCCESS) return rc;
  Task task;
  if (int rc = build_memset(devPtr, maxCount, value, count, "aclrtMemsetAsync", task); rc != ACL_SUCCESS) {
    return rc;
  }
  bool captured = false;
  if (int rc = enqueue(stream, std::move(task), "aclrtMemsetAsync", &captured); rc != ACL_SUCCESS) return rc;
  if (!captured) ++counters().memsets;
  return ACL_SUCCESS;
}

// ================================================================ control API

MS_EMU_API void msEmuResetCounters(void) {
  Counters& c = counters();
  for (auto* a : {&c.launches, &c.captured_tasks, &c.h2d_copies, &c.d2h_copies, &c.d2d_copies,
                  &c.h2h_copies, &c.h2d_bytes, &c.d2h_bytes, &c.d2d_bytes, &c.memsets, &c.syncs,
                  &c.capture_replays, &c.aicpu_launches, &c.pageable_async_copies, &c.use_after_free,
                  &c.set_device_calls, &c.hccl_collectives, &c.hccl_bytes}) {
    a->store(0);
  }
  c.peak_running_kernels.store(c.running_kernels.load());
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  m.peak_bytes = m.live_bytes;
}

MS_EMU_API void msEmuGetCounters(struct msEmuCounters* out) {
  if (out == nullptr) return;
  *out = msEmuCounters{};
  const Counters& c = counters();
  out->launches = c.launches;
  out->captured_tasks = c.captured_tasks;
  out->h2d_copies = c.h2d_copies;
  out->d2h_copies = c.d2h_copies;
  out->d2d_copies = c.d2d_copies;
  out->h2h_copies = c.h2h_copies;
  out->h2d_bytes = c.h2d_bytes;
  out->d2h_bytes = c.d2h_bytes;
  out->d2d_bytes = c.d2d_bytes;
  out->memsets = c.memsets;
  out->syncs = c.syncs;
  out->capture_replays = c.capture_replays;
  out->aicpu_launches = c.aicpu_launches;
  out->pageable_async_copies = c.pageable_async_copies;
  out->use_after_free = c.use_after_free;
  out->set_device_calls = c.set_device_calls;
  out->peak_concurrent_kernels = c.peak_running_kernels;
  out->hccl_collectives = c.hccl_collectives;
  out->hccl_bytes = c.hccl_bytes;
  out->live_hccl_comms = c.live_hccl_comms;
  {
    DeviceMemory& m = mem();
    std::lock_guard lk(m.mu);
    out->live_device_bytes = m.live_bytes;
    out->peak_device_bytes = m.peak_bytes;
    out->live_allocations = m.live.size();
    out->live_host_allocations = m.host_blocks.size();
  }
  fill_stream_gauges(*out);
  fill_handle_gauges(*out);
  fill_single_op_gauges(*out);
}

MS_EMU_API void msEmuSetLatency(uint64_t launch, uint64_t sync, uint64_t copy_ps_per_byte,
                                uint64_t copy_fixed) {
  LatencyModel& l = latency();
  l.launch_ns = launch;
  l.sync_ns = sync;
  l.copy_ps_per_byte = copy_ps_per_byte;
  l.copy_fixed_ns = copy_fixed;
}

MS_EMU_API void msEmuGetLatency(struct msEmuLatency* out) {
  if (out == nullptr) return;
  const LatencyModel& l = latency();
  *out = msEmuLatency{l.launch_ns, l.sync_ns, l.copy_ps_per_byte, l.copy_fixed_ns};
}

MS_EMU_API void msEmuSetAiCpuLatency(uint64_t launch, uint64_t ps_per_element) {
  latency().aicpu_launch_ns = launch;
  latency().aicpu_ps_per_element = ps_per_element;
}

MS_EMU_API void msEmuGetAiCpuLatency(uint64_t* launch, uint64_t* ps_per_element) {
  if (launch != nullptr) *launch = latency().aicpu_launch_ns;
  if (ps_per_element != nullptr) *ps_per_element = latency().aicpu_ps_per_element;
}

MS_EMU_API void msEmuResetLatency(void) {
  msEmuSetLatency(5'000, 20'000, 100, 10'000);
  msEmuSetAiCpuLatency(20'000, 1'000);
}

MS_EMU_API int msEmuInjectFault(int kind, uint64_t after_n) {
  if (kind <= 0 || kind >= kFaultKinds) return -1;
  std::lock_guard lk(g_fault_mu);
  g_faults[kind] = Fault{true, after_n, 0};
  return 0;
}

MS_EMU_API void msEmuClearFaults(void) {
  std::lock_guard lk(g_fault_mu);
  for (Fault& f : g_faults) f = Fault{};
}

MS_EMU_API void msEmuSetDeviceMemoryLimit(uint64_t bytes) {
  DeviceMemory& m = mem();
  std::lock_guard lk(m.mu);
  m.limit = bytes;
}

MS_EMU_API void msEmuSetStrictContext(int enabled) { g_strict_context.store(enabled != 0); }

#endif  // MS_ASCEND_EMULATOR_BUILD
