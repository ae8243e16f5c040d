// Ascend emulator: HCCL (the collective communication library, libhccl.so) across the
// processes of one machine. Built as a library of its own named libhccl.so that links the
// emulator (libms_ascend_emulator.so), so its collectives read and write the same emulated
// device memory and run as tasks on the same streams as the AscendCL side.
//
// A communicator is a POSIX shared-memory segment named in the root info: a header with a
// process-shared barrier (atomics), one descriptor per rank, and one data slot per rank.
// Group rank 0 creates it, the others open it; once all have joined it is unlinked (no name
// outlives the job). A collective is a task on the stream it is enqueued on: when the stream
// reaches it, each rank writes its descriptor (collective, count, dtype, reduction, root);
// after a barrier every rank compares them (a mismatch fails every rank, naming both sides)
// and then moves the data through the slots, chunk by chunk, two barriers per chunk: copy
// in, barrier, reduce or copy out (every rank in rank order, so every rank gets the same
// bits), barrier. Device data crosses between processes without any aclrtMemcpy.
// Collectives of one communicator run in the order the host issued them, whatever their
// streams (HCCL requires the same order on every rank); those recorded into a stream capture
// run in replay order. A barrier that is not reached within $MS_EMU_HCCL_TIMEOUT seconds
// (default 60) fails with HCCL_E_TIMEOUT, and every rank still waiting fails with it.

// Built only by the ms_hccl_emulator target (CMakeLists.txt defines MS_ASCEND_EMULATOR_BUILD).
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

#include <ms/backend/ascend/hccl_types.hpp>

#include "emu_internal.hpp"
#include "emu_ops.hpp"

#define MS_EMU_HCCL_DECLARE(ret, name, params) MS_EMU_API ret name params;
MS_HCCL_REQUIRED_FUNCS(MS_EMU_HCCL_DECLARE)
MS_HCCL_OPTIONAL_FUNCS(MS_EMU_HCCL_DECLARE)
#undef MS_EMU_HCCL_DECLARE

namespace msemu {
namespace {

constexpr char kMagic[] = "ms-emu-hccl-root-info-v1";
constexpr size_t kSlotBytes = 1 << 20;  // per rank and chunk
constexpr uint32_t kMaxRanks = 256;

/// What a root info holds (the rest of its 4108 bytes are zero).
struct RootInfoData {
  char magic[sizeof(kMagic)];
  char shm_name[64];
};
static_assert(sizeof(RootInfoData) <= HCCL_ROOT_INFO_BYTES);

enum class Kind : int32_t { none = 0, all_reduce = 1, broadcast = 2, all_gather = 3, reduce_scatter = 4 };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "HcclAllReduce";
    case Kind::broadcast: return "HcclBroadcast";
    case Kind::all_gather: return "HcclAllGather";
    case Kind::reduce_scatter: return "HcclReduceScatter";
    default: return "?";
  }
}

struct Desc {
  Kind kind;
  int32_t dtype;
  int32_t op;
  int32_t root;
  uint64_t count;
  uint64_t seq;  ///< collectives of this communicator run so far on the rank
  bool operator==(const Desc&) const = default;
};

/// The header of the shared segment; descriptors and slots follow it.
struct Shared {
  uint32_t nranks;
  std::atomic<uint32_t> ready;     ///< 1 once rank 0 has initialized the segment
  std::atomic<uint32_t> bar_count;
  std::atomic<uint32_t> bar_gen;
  std::atomic<uint32_t> aborted;   ///< a rank timed out: every wait fails at once
  std::atomic<uint32_t> abort_rank;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "process-shared atomics must be lock-free");

constexpr size_t kHeaderBytes = 256;
size_t segment_bytes(uint32_t n) { return kHeaderBytes + n * sizeof(Desc) + 64 + size_t{n} * kSlotBytes; }

struct Comm {
  std::string name;
  uint32_t n = 0, rank = 0;
  Shared* sh = nullptr;
  size_t bytes = 0;
  Desc* desc = nullptr;
  std::byte* slots = nullptr;
  std::byte* slot(uint32_t r) const { return slots + size_t{r} * kSlotBytes; }
  // Host issue order -> execution order (see the file comment).
  std::mutex issue_mu;
  uint64_t issued = 0;
  std::mutex exec_mu;
  std::condition_variable exec_cv;
  uint64_t executed = 0;  ///< also the seq of the next collective in every descriptor
  /// Unmapped when the last reference goes: queued collectives hold one past HcclCommDestroy.
  ~Comm() {
    if (sh != nullptr) ::munmap(sh, bytes);
  }
};

std::mutex g_comms_mu;
std::unordered_map<void*, std::shared_ptr<Comm>> g_comms;

double timeout_s() {
  const char* v = std::getenv("MS_EMU_HCCL_TIMEOUT");
  const double t = v != nullptr && *v != '\0' ? std::atof(v) : 60.0;
  return t > 0 ? t : 60.0;
}

/// Waits, spinning then sleeping, until `done()` or the deadline.
template <class F>
bool wait_until(F&& done, Clock::time_point deadline) {
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (Clock::now() > deadline) return false;
    if (i < 200) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int hccl_fail(HcclResult code, std::string msg) { return fail(static_cast<int>(code), std::move(msg)); }

/// The process-shared barrier of the communicator's ranks.
int barrier(Comm& c, const char* fn) {
  Shared& s = *c.sh;
  const uint32_t gen = s.bar_gen.load(std::memory_order_acquire);
  if (s.bar_count.fetch_add(1, std::memory_order_acq_rel) + 1 == c.n) {
    s.bar_count.store(0, std::memory_order_relaxed);
    s.bar_gen.fetch_add(1, std::memory_order_acq_rel);
    return HCCL_SUCCESS;
  }
  const double t = timeout_s();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
  const bool ok = wait_until(
      [&] { return s.bar_gen.load(std::memory_order_acquire) != gen || s.aborted.load(std::memory_order_acquire); },
      deadline);
  if (ok && s.bar_gen.load(std::memory_order_acquire) != gen) return HCCL_SUCCESS;
  if (!ok) {
    uint32_t expected = 0;
    if (s.aborted.compare_exchange_strong(expected, 1)) s.abort_rank.store(c.rank);
    return hccl_fail(HCCL_E_TIMEOUT, strf("%s: rank %u of %u waited %g s for the other ranks (a rank failed, "
                                          "exited or did not make the same call; MS_EMU_HCCL_TIMEOUT)",
                                          fn, c.rank, c.n, t));
  }
  return hccl_fail(HCCL_E_REMOTE, strf("%s: rank %u of %u: rank %u gave up waiting for the others; the "
                                       "communicator is unusable",
                                       fn, c.rank, c.n, s.abort_rank.load()));
}

size_t hccl_size(int32_t dt) {
  switch (dt) {
    case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16: case HCCL_DATA_TYPE_FP16: case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32: case HCCL_DATA_TYPE_FP32: return 4;
    case HCCL_DATA_TYPE_INT64: case HCCL_DATA_TYPE_UINT64: case HCCL_DATA_TYPE_FP64: return 8;
    default: return 0;
  }
}
/// The aclDataType whose load/store the reductions use (the reducible dtypes only).
aclDataType acl_of(int32_t dt) {
  switch (dt) {
    case HCCL_DATA_TYPE_INT8: return ACL_INT8;
    case HCCL_DATA_TYPE_INT16: return ACL_INT16;
    case HCCL_DATA_TYPE_INT32: return ACL_INT32;
    case HCCL_DATA_TYPE_FP16: return ACL_FLOAT16;
    case HCCL_DATA_TYPE_FP32: return ACL_FLOAT;
    case HCCL_DATA_TYPE_BFP16: return ACL_BF16;
    default: return ACL_DT_UNDEFINED;
  }
}
/// hccl_ops.h: AllReduce reduces int8, int16, int32, float16, float32, bfloat16;
/// ReduceScatter int8, int32, float16, float32, bfloat16.
bool reducible(Kind k, int32_t dt) {
  if (k == Kind::reduce_scatter && dt == HCCL_DATA_TYPE_INT16) return false;
  return acl_of(dt) != ACL_DT_UNDEFINED;
}

std::string describe(const Desc& d) {
  std::string s = strf("%s(count %llu, dtype %d", kind_name(d.kind), static_cast<unsigned long long>(d.count), d.dtype);
  if (d.kind == Kind::all_reduce || d.kind == Kind::reduce_scatter) s += strf(", op %d", d.op);
  if (d.kind == Kind::broadcast) s += strf(", root %d", d.root);
  return s + ")";
}

struct Job {
  Desc d{};
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
};

void reduce_into(std::byte* out, const Comm& c, size_t slot_off, size_t elems, const Desc& d) {
  const aclDataType t = acl_of(d.dtype);
  const size_t es = hccl_size(d.dtype);
  for (size_t i = 0; i < elems; ++i) {
    double acc = load(t, c.slot(0) + slot_off + i * es);
    for (uint32_t r = 1; r < c.n; ++r) {
      const double v = load(t, c.slot(r) + slot_off + i * es);
      switch (d.op) {
        case HCCL_REDUCE_SUM: acc += v; break;
        case HCCL_REDUCE_PROD: acc *= v; break;
        case HCCL_REDUCE_MAX: acc = std::max(acc, v); break;
        case HCCL_REDUCE_MIN: acc = std::min(acc, v); break;
        default: break;
      }
    }
    store(t, out + i * es, acc);
  }
}

/// Runs one collective on this rank (on its stream's worker).
int execute(Comm& c, const Job& job, const char* fn) {
  Desc mine = job.d;
  mine.seq = c.executed;
  c.desc[c.rank] = mine;
  if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
  int mismatch = -1;
  for (uint32_t r = 0; r < c.n && mismatch < 0; ++r) {
    if (!(c.desc[r] == mine)) mismatch = static_cast<int>(r);
  }
  const Desc other = mismatch >= 0 ? c.desc[mismatch] : Desc{};
  // Nobody rewrites a descriptor before every rank has compared them.
  if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
  if (mismatch >= 0) {
    return hccl_fail(HCCL_E_PARA, strf("%s: collective %llu of the communicator differs between ranks: rank %u "
                                       "calls %s, rank %d calls %s",
                                       fn, static_cast<unsigned long long>(mine.seq), c.rank, describe(mine).c_str(),
                                       mismatch, describe(other).c_str()));
  }
  const Desc& d = mine;
  const size_t es = hccl_size(d.dtype);
  const size_t n = d.count;
  switch (d.kind) {
    case Kind::all_reduce: {
      const size_t per = kSlotBytes / es;
      for (size_t off = 0; off < n; off += per) {
        const size_t len = std::min(per, n - off);
        std::memcpy(c.slot(c.rank), job.send + off * es, len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
        reduce_into(job.recv + off * es, c, 0, len, d);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
      }
      break;
    }
    case Kind::broadcast: {
      const size_t per = kSlotBytes / es;
      for (size_t off = 0; off < n; off += per) {
        const size_t len = std::min(per, n - off);
        if (c.rank == static_cast<uint32_t>(d.root)) std::memcpy(c.slot(c.rank), job.recv + off * es, len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
        if (c.rank != static_cast<uint32_t>(d.root)) std::memcpy(job.recv + off * es, c.slot(d.root), len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
      }
      break;
    }
    case Kind::all_gather: {  // count: elements each rank sends
      const size_t per = kSlotBytes / es;
      for (size_t off = 0; off < n; off += per) {
        const size_t len = std::min(per, n - off);
        std::memcpy(c.slot(c.rank), job.send + off * es, len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
        for (uint32_t r = 0; r < c.n; ++r) std::memcpy(job.recv + (r * n + off) * es, c.slot(r), len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
      }
      break;
    }
    case Kind::reduce_scatter: {  // count: elements each rank receives; send holds n * count
      const size_t per = kSlotBytes / es / c.n;
      for (size_t off = 0; off < n; off += per) {
        const size_t len = std::min(per, n - off);
        // Slot layout: the piece for destination q at q * len.
        for (uint32_t q = 0; q < c.n; ++q)
          std::memcpy(c.slot(c.rank) + q * len * es, job.send + (q * n + off) * es, len * es);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
        reduce_into(job.recv + off * es, c, c.rank * len * es, len, d);
        if (int rc = barrier(c, fn); rc != HCCL_SUCCESS) return rc;
      }
      break;
    }
    default: break;
  }
  return HCCL_SUCCESS;
}

std::shared_ptr<Comm> find_comm(HcclComm h) {
  std::lock_guard lk(g_comms_mu);
  auto it = g_comms.find(h);
  return it == g_comms.end() ? nullptr : it->second;
}

/// Checks the arguments, resolves the device ranges and enqueues the collective on `stream`.
HcclResult issue(Kind kind, const void* send, size_t send_bytes, void* recv, size_t recv_bytes, uint64_t count,
                 HcclDataType dtype, int32_t op, int32_t root, HcclComm comm, aclrtStream stream) {
  const char* fn = kind_name(kind);
  if (int rc = check_context(fn); rc != ACL_SUCCESS) {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_RUNTIME, take_error()));
  }
  std::shared_ptr<Comm> c = find_comm(comm);
  if (!c) return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, strf("%s: %p is not a live communicator", fn, comm)));
  if (hccl_size(dtype) == 0) {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_NOT_SUPPORT, strf("%s: dtype %d is not supported", fn, dtype)));
  }
  if ((kind == Kind::all_reduce || kind == Kind::reduce_scatter) && !reducible(kind, dtype)) {
    return static_cast<HcclResult>(
        hccl_fail(HCCL_E_NOT_SUPPORT, strf("%s: dtype %d cannot be reduced (int8, int16, int32, float16, float32, "
                                           "bfloat16; ReduceScatter: no int16)",
                                           fn, dtype)));
  }
  if ((kind == Kind::all_reduce || kind == Kind::reduce_scatter) && (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN)) {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, strf("%s: invalid reduction %d", fn, op)));
  }
  if (kind == Kind::broadcast && (root < 0 || static_cast<uint32_t>(root) >= c->n)) {
    return static_cast<HcclResult>(
        hccl_fail(HCCL_E_PARA, strf("%s: root %d is out of range for %u ranks", fn, root, c->n)));
  }
  if (count == 0) return HCCL_SUCCESS;
  Task task;
  task.kind = TaskKind::Collective;
  task.name = fn;
  task.delay_ns = launch_ns();
  Job job;
  job.d = Desc{kind, static_cast<int32_t>(dtype), op, root, count, 0};
  if (send != nullptr || kind != Kind::broadcast) {
    AllocRef ref;
    std::byte* host = nullptr;
    if (send == nullptr) return static_cast<HcclResult>(hccl_fail(HCCL_E_PTR, strf("%s: sendBuf is null", fn)));
    if (resolve(send, send_bytes, fn, "sendBuf", ref, host) != ACL_SUCCESS) {
      return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, take_error()));
    }
    job.send = host;
    task.refs.push_back(std::move(ref));
  }
  {
    AllocRef ref;
    std::byte* host = nullptr;
    if (recv == nullptr) return static_cast<HcclResult>(hccl_fail(HCCL_E_PTR, strf("%s: recvBuf is null", fn)));
    if (resolve(recv, recv_bytes, fn, "recvBuf", ref, host) != ACL_SUCCESS) {
      return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, take_error()));
    }
    job.recv = host;
    task.refs.push_back(std::move(ref));
  }
  // The ticket: this collective's place in the host's issue order (-1 when captured: a
  // replay runs it in replay order).
  auto ticket = std::make_shared<int64_t>(-1);
  task.body = [c, job, ticket, fn]() -> int {
    Comm& cm = *c;
    std::unique_lock lk(cm.exec_mu);
    if (*ticket >= 0) {
      const double t = timeout_s();
      const bool ok = cm.exec_cv.wait_for(lk, std::chrono::duration<double>(t),
                                          [&] { return cm.executed == static_cast<uint64_t>(*ticket); });
      if (!ok) {
        return fail(ACL_ERROR_RT_INTERNAL_ERROR,
                    strf("%s: the collectives issued before it on this communicator did not run within %g s", fn, t));
      }
    }
    const int rc = execute(cm, job, fn);
    // Only issued collectives take a place in the issue order: a replayed one (captured,
    // ticket -1) must not advance it, or every collective issued after it would wait forever.
    if (*ticket >= 0) ++cm.executed;
    lk.unlock();
    cm.exec_cv.notify_all();
    // A failed collective fails its stream: the next synchronize reports the HCCL message.
    if (rc != HCCL_SUCCESS) return fail(ACL_ERROR_RT_INTERNAL_ERROR, take_error());
    return ACL_SUCCESS;
  };
  std::lock_guard ilk(c->issue_mu);
  bool captured = false;
  *ticket = static_cast<int64_t>(c->issued);
  if (enqueue(stream, std::move(task), fn, &captured) != ACL_SUCCESS) {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_RUNTIME, take_error()));
  }
  if (captured) {
    *ticket = -1;  // not run until a replay; replays run in their own order
  } else {
    ++c->issued;
    ++counters().hccl_collectives;
    counters().hccl_bytes += send_bytes != 0 ? send_bytes : recv_bytes;
  }
  return HCCL_SUCCESS;
}

}  // namespace
}  // namespace msemu

using namespace msemu;

MS_EMU_API HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
  if (rootInfo == nullptr) return static_cast<HcclResult>(hccl_fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is null"));
  static std::atomic<uint64_t> seq{0};
  std::memset(rootInfo, 0, sizeof(HcclRootInfo));
  RootInfoData d{};
  std::memcpy(d.magic, kMagic, sizeof(kMagic));
  const auto now = static_cast<unsigned long long>(Clock::now().time_since_epoch().count());
  std::snprintf(d.shm_name, sizeof d.shm_name, "/ms-emu-hccl-%d-%llu-%llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(seq++), now);
  std::memcpy(rootInfo->internal, &d, sizeof d);
  return HCCL_SUCCESS;
}

MS_EMU_API HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                           HcclComm* comm) {
  static constexpr const char* fn = "HcclCommInitRootInfo";
  if (rootInfo == nullptr || comm == nullptr) {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_PTR, strf("%s: rootInfo or comm is null", fn)));
  }
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return static_cast<HcclResult>(hccl_fail(HCCL_E_RUNTIME, take_error()));
  RootInfoData d{};
  std::memcpy(&d, rootInfo->internal, sizeof d);
  if (std::memcmp(d.magic, kMagic, sizeof(kMagic)) != 0 || d.shm_name[sizeof d.shm_name - 1] != '\0') {
    return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, strf("%s: the root info was not made by HcclGetRootInfo", fn)));
  }
  if (nRanks == 0 || nRanks > kMaxRanks || rank >= nRanks) {
    return static_cast<HcclResult>(
        hccl_fail(HCCL_E_PARA, strf("%s: rank %u of %u ranks is out of range (1 to %u ranks)", fn, rank, nRanks, kMaxRanks)));
  }
  auto c = std::make_shared<Comm>();
  c->name = d.shm_name;
  c->n = nRanks;
  c->rank = rank;
  c->bytes = segment_bytes(nRanks);
  const double t = timeout_s();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
  int fd = -1;
  if (rank == 0) {
    fd = ::shm_open(c->name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(c->bytes)) != 0) {
      const int err = errno;
      if (fd >= 0) {
        ::close(fd);
        ::shm_unlink(c->name.c_str());
      }
      return static_cast<HcclResult>(
          hccl_fail(HCCL_E_SYSCALL, strf("%s: cannot create shared memory %s: %s", fn, c->name.c_str(), std::strerror(err))));
    }
  } else {
    // Wait for rank 0 to create the segment and give it its full size.
    const bool ok = wait_until(
        [&] {
          if (fd < 0) fd = ::shm_open(c->name.c_str(), O_RDWR, 0600);
          struct stat st{};
          return fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= c->bytes;
        },
        deadline);
    if (!ok) {
      if (fd >= 0) ::close(fd);
      return static_cast<HcclResult>(hccl_fail(
          HCCL_E_TIMEOUT, strf("%s: rank %u of %u: rank 0 did not create the communicator %s within %g s", fn, rank,
                               nRanks, c->name.c_str(), t)));
    }
  }
  void* p = ::mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    if (rank == 0) ::shm_unlink(c->name.c_str());
    return static_cast<HcclResult>(hccl_fail(HCCL_E_SYSCALL, strf("%s: mmap of %s failed", fn, c->name.c_str())));
  }
  // From here on the Comm's destructor unmaps the segment.
  auto* base = static_cast<std::byte*>(p);
  c->sh = reinterpret_cast<Shared*>(base);
  c->desc = reinterpret_cast<Desc*>(base + kHeaderBytes);
  c->slots = base + ((kHeaderBytes + nRanks * sizeof(Desc) + 63) / 64) * 64;
  if (rank == 0) {
    new (c->sh) Shared{};  // the fresh segment is zero: the atomics start at 0
    c->sh->nranks = nRanks;
    c->sh->ready.store(1, std::memory_order_release);
  } else {
    if (!wait_until([&] { return c->sh->ready.load(std::memory_order_acquire) == 1; }, deadline)) {
      return static_cast<HcclResult>(hccl_fail(HCCL_E_TIMEOUT, strf("%s: %s was never initialized", fn, c->name.c_str())));
    }
    if (c->sh->nranks != nRanks) {
      const uint32_t theirs = c->sh->nranks;
      return static_cast<HcclResult>(hccl_fail(
          HCCL_E_PARA, strf("%s: rank %u says the communicator has %u ranks, rank 0 says %u", fn, rank, nRanks, theirs)));
    }
  }
  const int rc = barrier(*c, fn);  // every rank has joined
  if (rank == 0) ::shm_unlink(c->name.c_str());
  if (rc != HCCL_SUCCESS) return static_cast<HcclResult>(rc);
  {
    std::lock_guard lk(g_comms_mu);
    *comm = c.get();
    g_comms.emplace(c.get(), std::move(c));
  }
  ++counters().live_hccl_comms;
  return HCCL_SUCCESS;
}

MS_EMU_API HcclResult HcclCommDestroy(HcclComm comm) {
  std::shared_ptr<Comm> c;
  {
    std::lock_guard lk(g_comms_mu);
    auto it = g_comms.find(comm);
    if (comm == nullptr || it == g_comms.end()) {
      return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, strf("HcclCommDestroy: %p is not a live communicator", comm)));
    }
    c = std::move(it->second);
    g_comms.erase(it);
  }
  --counters().live_hccl_comms;
  return HCCL_SUCCESS;  // collectives still queued hold their own reference to the segment
}

MS_EMU_API HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                    HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  const size_t b = count * hccl_size(dataType);
  return issue(Kind::all_reduce, sendBuf, b, recvBuf, b, count, dataType, op, 0, comm, stream);
}

MS_EMU_API HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                    aclrtStream stream) {
  const size_t b = count * hccl_size(dataType);
  return issue(Kind::broadcast, nullptr, 0, buf, b, count, dataType, 0, static_cast<int32_t>(root), comm, stream);
}

MS_EMU_API HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                                    HcclComm comm, aclrtStream stream) {
  std::shared_ptr<Comm> c = find_comm(comm);
  const size_t b = sendCount * hccl_size(dataType);
  return issue(Kind::all_gather, sendBuf, b, recvBuf, b * (c ? c->n : 1), sendCount, dataType, 0, 0, comm, stream);
}

MS_EMU_API HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                        HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  std::shared_ptr<Comm> c = find_comm(comm);
  const size_t b = recvCount * hccl_size(dataType);
  return issue(Kind::reduce_scatter, sendBuf, b * (c ? c->n : 1), recvBuf, b, recvCount, dataType, op, 0, comm, stream);
}

MS_EMU_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
  std::shared_ptr<Comm> c = find_comm(comm);
  if (!c || rankSize == nullptr) return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, "HcclGetRankSize: bad arguments"));
  *rankSize = c->n;
  return HCCL_SUCCESS;
}

MS_EMU_API HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  std::shared_ptr<Comm> c = find_comm(comm);
  if (!c || rank == nullptr) return static_cast<HcclResult>(hccl_fail(HCCL_E_PARA, "HcclGetRankId: bad arguments"));
  *rank = c->rank;
  return HCCL_SUCCESS;
}

MS_EMU_API const char* HcclGetErrorString(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS: return "success";
    case HCCL_E_PARA: return "parameter error";
    case HCCL_E_PTR: return "empty pointer";
    case HCCL_E_NOT_SUPPORT: return "not supported";
    case HCCL_E_TIMEOUT: return "timeout";
    case HCCL_E_SYSCALL: return "system call error";
    case HCCL_E_RUNTIME: return "runtime error";
    case HCCL_E_REMOTE: return "remote error";
    default: return "HCCL error";
  }
}

#endif  // MS_ASCEND_EMULATOR_BUILD
