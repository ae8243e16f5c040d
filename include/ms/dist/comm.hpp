#pragma once
// Processes and process groups: ms::dist::Context (MPI init/finalize as RAII), rank(),
// world_size(), local_rank(), Group (the world, or a sub-group made with MPI_Comm_split),
// and the collectives on raw buffers that the registered ops (dist/ops.hpp) call.
// Must not know about tensors' ops, graphs or modules.
//
// Built with MPI (the ms::dist CMake target defines MS_HAVE_MPI=1 and links MPI::MPI_CXX)
// the transport is MPI; every error is returned (MPI_ERRORS_RETURN) and thrown as
// ms::dist::DistError naming the collective and the rank. Without MPI, or when the
// program was not started by mpirun, the world is one process and every collective is
// the identity; a program started by mpirun with more than one process but built without
// MPI gets a DistError naming the Debian package to install (libopenmpi-dev).
//
// Failures never hang a job: a collective that does not complete within the timeout
// (Options::timeout_s, or MS_DIST_TIMEOUT seconds; default 300) makes the waiting rank
// print which collective and rank timed out and abort the whole job (MPI_Abort), and an
// exception that escapes a rank (std::terminate, or a Context destroyed while unwinding)
// prints the rank and the error and aborts the job too, so the launcher stops the others.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/error.hpp"

#if defined(MS_HAVE_MPI) && MS_HAVE_MPI
#include <mpi.h>
#define MS_DIST_MPI 1
#else
#define MS_DIST_MPI 0
#endif

namespace ms {
/// A collective or process-group call failed (MPI error, timeout, mismatch, no MPI).
class DistError : public Error {
 public:
  explicit DistError(const std::string& message) : Error("dist_error", message) {}
};
}  // namespace ms

namespace ms::dist {

using ms::DistError;

/// How a collective combines the ranks' values.
enum class ReduceOp : std::uint8_t { sum, mean, max, min, prod };

inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
  }
  return "?";
}
inline ReduceOp parse_reduce_op(const std::string& s) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min, ReduceOp::prod})
    if (s == reduce_op_name(op)) return op;
  MS_THROW(ValueError, "unknown reduction '{}' (expected sum, mean, max, min or prod)", s);
}

/// Options of init().
struct Options {
  /// Seconds a collective may wait for the other ranks before the job is aborted
  /// (<= 0: wait forever). Default: $MS_DIST_TIMEOUT, else 300.
  double timeout_s = -1;
  /// Print the rank and the error and abort the job when an exception escapes a rank.
  bool abort_on_uncaught = true;
  /// The first this many collective ops of each group (the ops of dist/ops.hpp: the first
  /// steps of a training loop, eager or replayed) first exchange what each rank calls
  /// (op, reduction, dtype, shape), so that a collective called on one rank only, or with
  /// different shapes, fails at once with a DistError naming both sides (< 0: every call,
  /// 0: none). Default: $MS_DIST_CHECK_CALLS, else 256.
  std::int64_t check_calls = -2;
};

/// True when ms was built with MPI (the ms::dist CMake target).
constexpr bool has_mpi() { return MS_DIST_MPI != 0; }

namespace detail {

inline int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}
/// The world size the launcher asked for (Open MPI, MPICH/Hydra, Slurm), or 1.
inline int launcher_world_size() {
  for (const char* n : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    int v = env_int(n, 0);
    if (v > 0) return v;
  }
  return 1;
}

/// A group as the process sees it: its ranks (world ranks, in group order) and communicator.
struct GroupRec {
  std::vector<int> ranks;
  int rank = -1;  ///< this process's rank in the group (-1: not a member)
  mutable std::int64_t calls = 0;  ///< collective ops called on it so far (their signatures: dist/ops.hpp)
#if MS_DIST_MPI
  MPI_Comm comm = MPI_COMM_NULL;
#endif
};

/// The process's distributed state. MPI itself is process-wide state; this mirrors it.
struct State {
  std::mutex mu;
  bool initialized = false;
  bool mpi_owned = false;  ///< we called MPI_Init (and so call MPI_Finalize)
  int rank = 0, size = 1, local_rank = 0;
  double timeout_s = 300;
  bool abort_on_uncaught = true;
  std::int64_t check_calls = 256;  ///< Options::check_calls
  std::vector<GroupRec> groups;  ///< id -> group; 0 is the world
  /// Set by use_hccl(): collectives run as device kernels in traced graphs, which the
  /// non-blocking start/wait pair (dist/async_ops.hpp) has none of yet.
  std::atomic<bool> device_collectives{false};
  // The watchdog: a blocking collective in progress and when it must be done.
  std::atomic<std::int64_t> deadline_ns{0};  ///< 0: none in flight
  // What is in flight: the op's name and group, formatted only when the watchdog fires
  // (a collective pays two atomic stores, not a string).
  std::atomic<const char*> in_flight_what{""};
  std::atomic<std::int64_t> in_flight_group{0};
  std::thread watchdog;
  std::condition_variable cv;
  bool stop = false;
  std::terminate_handler previous_terminate = nullptr;
};
inline State& state() {
  static auto* s = new State();
  return *s;
}

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] inline void abort_job(int code) {
#if MS_DIST_MPI
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

/// The std::terminate handler of a distributed program: names the rank and the error.
inline void on_terminate() {
  State& s = state();
  std::string what = "unknown exception";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
  } else {
    what = "std::terminate called without an exception";
  }
  std::fprintf(stderr, "[ms.dist_error] rank %d of %d failed: %s; aborting the job\n", s.rank, s.size, what.c_str());
  std::fflush(stderr);
  abort_job(2);
}

inline void watchdog_loop() {
  State& s = state();
  std::unique_lock lock(s.mu);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(50));
    const std::int64_t d = s.deadline_ns.load();
    if (d != 0 && now_ns() > d) {
      const std::int64_t id = s.in_flight_group.load();
      const std::size_t size =
          id >= 0 && static_cast<std::size_t>(id) < s.groups.size() ? s.groups[static_cast<std::size_t>(id)].ranks.size() : 0;
      std::fprintf(stderr,
                   "[ms.dist_error] rank %d of %d: %s on group %lld (%zu ranks) did not complete within %g s (another "
                   "rank failed, exited or did not call it); aborting the job\n",
                   s.rank, s.size, s.in_flight_what.load(), static_cast<long long>(id), size, s.timeout_s);
      std::fflush(stderr);
      abort_job(3);
    }
  }
}

#if MS_DIST_MPI
/// As check_mpi, with the detail made only on failure (a collective's hot path formats nothing).
template <class F>
  requires std::is_invocable_r_v<std::string, F>
void check_mpi(int rc, const char* what, F&& detail);

inline void check_mpi(int rc, const char* what, const std::string& detail = {}) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  const State& s = state();
  MS_THROW(DistError, "{}: MPI error on rank {} of {}{}: {}", what, s.rank, s.size, detail.empty() ? "" : " (" + detail + ")",
           std::string(msg, static_cast<std::size_t>(len)));
}
template <class F>
  requires std::is_invocable_r_v<std::string, F>
void check_mpi(int rc, const char* what, F&& detail) {
  if (rc != MPI_SUCCESS) check_mpi(rc, what, std::string(detail()));
}
inline MPI_Datatype mpi_type(DType d, const char* what) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: MS_THROW(DTypeError, "{}: dtype {} is not supported (float32, float64, int32, int64)", what, d);
  }
}
inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::prod: return MPI_PROD;
  }
  return MPI_SUM;
}
#endif

}  // namespace detail

/// Starts the distributed runtime (idempotent). Under mpirun this initializes MPI; alone it
/// makes a world of one process. Prefer the RAII Context.
inline void init(int* argc = nullptr, char*** argv = nullptr, Options opt = {}) {
  detail::State& s = detail::state();
  std::lock_guard lock(s.mu);
  if (s.initialized) return;
  s.timeout_s = opt.timeout_s > 0 ? opt.timeout_s : (opt.timeout_s == 0 ? 0 : 300);
  if (opt.timeout_s < 0)
    if (const char* v = std::getenv("MS_DIST_TIMEOUT"); v && *v) s.timeout_s = std::atof(v);
  s.abort_on_uncaught = opt.abort_on_uncaught;
  s.check_calls = opt.check_calls;
  if (s.check_calls == -2) {
    const char* v = std::getenv("MS_DIST_CHECK_CALLS");
    s.check_calls = v && *v ? std::atoll(v) : 256;
  }
#if MS_DIST_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    // The watchdog thread only ever calls MPI_Abort; every other call comes from one thread.
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    s.mpi_owned = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &s.local_rank);
  MPI_Comm_free(&local);
  detail::GroupRec world;
  for (int r = 0; r < s.size; ++r) world.ranks.push_back(r);
  world.rank = s.rank;
  MPI_Comm_dup(MPI_COMM_WORLD, &world.comm);
  MPI_Comm_set_errhandler(world.comm, MPI_ERRORS_RETURN);
  s.groups = {world};
#else
  (void)argc;
  (void)argv;
  const int launched = detail::launcher_world_size();
  MS_CHECK(launched <= 1, DistError,
           "init: this program was started as {} processes, but ms was built without MPI; install Debian's "
           "libopenmpi-dev and openmpi-bin, and link the ms::dist CMake target",
           launched);
  s.rank = 0;
  s.size = 1;
  s.local_rank = 0;
  s.groups = {detail::GroupRec{{0}, 0}};
#endif
  if (s.abort_on_uncaught) s.previous_terminate = std::set_terminate(&detail::on_terminate);
  s.stop = false;
  if (s.size > 1 && s.timeout_s > 0) s.watchdog = std::thread(&detail::watchdog_loop);
  s.initialized = true;
}

/// Stops the runtime (idempotent): frees the groups and finalizes MPI if init() started it.
inline void finalize() {
  detail::State& s = detail::state();
  {
    std::lock_guard lock(s.mu);
    if (!s.initialized) return;
    s.stop = true;
  }
  s.cv.notify_all();
  if (s.watchdog.joinable()) s.watchdog.join();
  std::lock_guard lock(s.mu);
#if MS_DIST_MPI
  for (auto& g : s.groups)
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
  if (s.mpi_owned) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
  if (s.previous_terminate) std::set_terminate(s.previous_terminate);
  s.previous_terminate = nullptr;
  s.groups.clear();
  s.initialized = false;
  s.mpi_owned = false;
}

/// RAII: init() in the constructor, finalize() in the destructor. Destroyed while an
/// exception unwinds the stack, it names the rank and the error and aborts the job (with
/// Options::abort_on_uncaught), so that the other ranks do not wait for this one forever.
class Context {
 public:
  explicit Context(Options opt = {}) : Context(nullptr, nullptr, opt) {}
  Context(int* argc, char*** argv, Options opt = {}) : uncaught_(std::uncaught_exceptions()) { init(argc, argv, opt); }
  ~Context() {
    detail::State& s = detail::state();
    if (std::uncaught_exceptions() > uncaught_ && s.abort_on_uncaught && s.size > 1) {
      std::fprintf(stderr, "[ms.dist_error] rank %d of %d failed with an exception; aborting the job\n", s.rank,
                   s.size);
      std::fflush(stderr);
      detail::abort_job(2);
    }
    finalize();
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  int uncaught_;
};

inline bool is_initialized() { return detail::state().initialized; }

namespace detail {
inline State& checked(const char* what) {
  State& s = state();
  MS_CHECK(s.initialized, DistError, "{}: call ms::dist::init() (or create an ms::dist::Context) first", what);
  return s;
}
}  // namespace detail

/// This process's rank in the world (0 before init()).
inline int rank() { return detail::state().rank; }
/// The number of processes in the world (1 before init() and without mpirun).
inline int world_size() { return detail::state().size; }
/// This process's rank among the processes on its machine.
inline int local_rank() { return detail::state().local_rank; }
/// The collective timeout in seconds (<= 0: none).
inline double timeout() { return detail::state().timeout_s; }

/// A process group: the world (id 0) or a sub-group made by new_group(). Cheap to copy.
class Group {
 public:
  Group() = default;
  explicit Group(std::int64_t id) : id_(id) {}
  std::int64_t id() const { return id_; }
  /// This process's rank in the group (-1 when it is not a member).
  int rank() const { return rec("group.rank").rank; }
  /// Number of processes in the group.
  int size() const { return static_cast<int>(rec("group.size").ranks.size()); }
  /// The members' world ranks, in group rank order.
  const std::vector<int>& ranks() const { return rec("group.ranks").ranks; }
  bool contains_self() const { return rank() >= 0; }
  const detail::GroupRec& rec(const char* what) const {
    detail::State& s = detail::checked(what);
    MS_CHECK(id_ >= 0 && static_cast<std::size_t>(id_) < s.groups.size(), DistError,
             "{}: process group {} does not exist on rank {} (groups: {})", what, id_, s.rank, s.groups.size());
    return s.groups[static_cast<std::size_t>(id_)];
  }

 private:
  std::int64_t id_ = 0;
};

/// The group of every process.
inline Group world() { return Group(0); }

/// Makes a sub-group of the given world ranks (in that order). Collective over the world:
/// every rank calls it with the same list, members and non-members alike (MPI_Comm_split).
inline Group new_group(std::vector<int> ranks) {
  detail::State& s = detail::checked("new_group");
  MS_CHECK(!ranks.empty(), ValueError, "new_group: the list of ranks is empty");
  std::vector<bool> seen(static_cast<std::size_t>(s.size), false);
  int my = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    MS_CHECK(r >= 0 && r < s.size, ValueError, "new_group: rank {} is out of range for a world of {}", r, s.size);
    MS_CHECK(!seen[static_cast<std::size_t>(r)], ValueError, "new_group: rank {} is listed twice", r);
    seen[static_cast<std::size_t>(r)] = true;
    if (r == s.rank) my = static_cast<int>(i);
  }
  detail::GroupRec g;
  g.ranks = std::move(ranks);
  g.rank = my;
#if MS_DIST_MPI
  detail::check_mpi(MPI_Comm_split(s.groups[0].comm, my >= 0 ? 0 : MPI_UNDEFINED, my >= 0 ? my : 0, &g.comm),
                    "new_group");
  if (g.comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
#endif
  std::lock_guard lock(s.mu);
  s.groups.push_back(std::move(g));
  return Group(static_cast<std::int64_t>(s.groups.size() - 1));
}

namespace detail {

/// Arms the watchdog for one blocking collective.
class Watch {
 public:
  Watch(const char* what, const Group& g) {
    State& s = state();
    if (s.timeout_s <= 0 || s.size <= 1) return;
    s.in_flight_what.store(what);
    s.in_flight_group.store(g.id());
    s.deadline_ns.store(now_ns() + static_cast<std::int64_t>(s.timeout_s * 1e9));
    armed_ = true;
  }
  ~Watch() {
    if (armed_) state().deadline_ns.store(0);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  bool armed_ = false;
};

inline const GroupRec& member(const Group& g, const char* what) {
  const GroupRec& r = g.rec(what);
  MS_CHECK(r.rank >= 0, DistError, "{}: rank {} is not a member of process group {} (ranks {})", what, state().rank,
           g.id(), ::ms::detail::join_text(r.ranks, ", "));
  return r;
}

inline int checked_count(std::int64_t n, const char* what) {
  MS_CHECK(n >= 0 && n <= 0x7fffffff, ValueError, "{}: {} elements exceed the 2^31 - 1 that one MPI call can move",
           what, n);
  return static_cast<int>(n);
}

/// The element-wise division of a mean (floating dtypes).
inline void divide(void* buf, std::int64_t n, DType d, int by) {
  if (d == DType::f32) {
    auto* p = static_cast<float*>(buf);
    for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(by);
  } else if (d == DType::f64) {
    auto* p = static_cast<double*>(buf);
    for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(by);
  } else {
    MS_THROW(DTypeError, "mean: dtype {} is not floating; use sum", d);
  }
}

}  // namespace detail

// ---- collectives on contiguous host buffers ------------------------------------------------
// `what` names the calling op in errors. Buffers of float32, float64, int32 or int64.

/// buf = reduce over the group's ranks of send (mean: the sum divided by the size); send
/// null or equal to buf: in place.
inline void all_reduce_buffer(const Group& g, const void* send, void* buf, std::int64_t n, DType d, ReduceOp op,
                              const char* what = "all_reduce") {
  const detail::GroupRec& r = detail::member(g, what);
  const int count = detail::checked_count(n, what);
  const bool in_place = send == nullptr || send == buf;
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::Watch w(what, g);
    // Reading send directly saves the copy into buf that an in-place call would need.
    detail::check_mpi(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, buf, count, detail::mpi_type(d, what),
                                    detail::mpi_op(op), r.comm),
                      what, [&] { return MS_FORMAT("{} elements of {}, reduce {}", count, d, reduce_op_name(op)); });
  } else if (!in_place) {
    std::memcpy(buf, send, static_cast<std::size_t>(n) * dtype_size(d));
  }
#else
  (void)count;
  if (!in_place) std::memcpy(buf, send, static_cast<std::size_t>(n) * dtype_size(d));
#endif
  if (op == ReduceOp::mean) detail::divide(buf, n, d, static_cast<int>(r.ranks.size()));
}
/// In place: buf = reduce over the group's ranks of buf.
inline void all_reduce_buffer(const Group& g, void* buf, std::int64_t n, DType d, ReduceOp op,
                              const char* what = "all_reduce") {
  all_reduce_buffer(g, nullptr, buf, n, d, op, what);
}

/// In place: every rank's buf = the root's (root is a rank of the group).
inline void broadcast_buffer(const Group& g, void* buf, std::int64_t n, DType d, int root,
                             const char* what = "broadcast") {
  const detail::GroupRec& r = detail::member(g, what);
  MS_CHECK(root >= 0 && root < static_cast<int>(r.ranks.size()), ValueError,
           "{}: root {} is out of range for a group of {} ranks", what, root, r.ranks.size());
  const int count = detail::checked_count(n, what);
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::Watch w(what, g);
    detail::check_mpi(MPI_Bcast(buf, count, detail::mpi_type(d, what), root, r.comm), what,
                      [&] { return MS_FORMAT("{} elements of {}, root {}", count, d, root); });
  }
#else
  (void)buf;
  (void)d;
  (void)count;
#endif
}

/// recv (size * n elements) = the concatenation of every rank's send (n elements), in rank order.
inline void all_gather_buffer(const Group& g, const void* send, void* recv, std::int64_t n, DType d,
                              const char* what = "all_gather") {
  const detail::GroupRec& r = detail::member(g, what);
  const int count = detail::checked_count(n, what);
  detail::checked_count(n * static_cast<std::int64_t>(r.ranks.size()), what);
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::Watch w(what, g);
    const MPI_Datatype t = detail::mpi_type(d, what);
    detail::check_mpi(MPI_Allgather(send, count, t, recv, count, t, r.comm), what,
                      [&] { return MS_FORMAT("{} elements of {} per rank", count, d); });
    return;
  }
#endif
  (void)count;
  std::memcpy(recv, send, static_cast<std::size_t>(n) * dtype_size(d));
}

/// recv (n elements) = block `group rank` of the reduction of every rank's send (size * n elements).
inline void reduce_scatter_buffer(const Group& g, const void* send, void* recv, std::int64_t n, DType d, ReduceOp op,
                                  const char* what = "reduce_scatter") {
  const detail::GroupRec& r = detail::member(g, what);
  const int count = detail::checked_count(n, what);
  detail::checked_count(n * static_cast<std::int64_t>(r.ranks.size()), what);
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::Watch w(what, g);
    detail::check_mpi(MPI_Reduce_scatter_block(send, recv, count, detail::mpi_type(d, what), detail::mpi_op(op), r.comm),
                      what, [&] { return MS_FORMAT("{} elements of {} per rank, reduce {}", count, d, reduce_op_name(op)); });
    if (op == ReduceOp::mean) detail::divide(recv, n, d, static_cast<int>(r.ranks.size()));
    return;
  }
#endif
  (void)count;
  std::memcpy(recv, send, static_cast<std::size_t>(n) * dtype_size(d));
  if (op == ReduceOp::mean) detail::divide(recv, n, d, 1);
}

/// Waits until every rank of the group has called it.
inline void barrier(const Group& g = world()) {
  const detail::GroupRec& r = detail::member(g, "barrier");
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::Watch w("barrier", g);
    detail::check_mpi(MPI_Barrier(r.comm), "barrier");
  }
#else
  (void)r;
#endif
}

/// A non-blocking collective in flight (all_reduce_async). wait() completes it (throwing
/// DistError when it does not complete within the timeout); test() advances it and says
/// whether it is done: call it between pieces of work so that communication overlaps them.
class Work {
 public:
  Work() = default;
  Work(Work&& o) noexcept { *this = std::move(o); }
  Work& operator=(Work&& o) noexcept {
    std::swap(done_, o.done_);
    std::swap(what_, o.what_);
    std::swap(buf_, o.buf_);
    std::swap(n_, o.n_);
    std::swap(dtype_, o.dtype_);
    std::swap(mean_by_, o.mean_by_);
    std::swap(keep_, o.keep_);
#if MS_DIST_MPI
    std::swap(req_, o.req_);
#endif
    return *this;
  }
  ~Work() {
    if (!done_) {
      try {
        wait();
      } catch (...) {  // a destructor cannot throw; the job is being torn down anyway
      }
    }
  }
  /// True once the collective has completed (and its result is in the buffer).
  bool test() {
    if (done_) return true;
#if MS_DIST_MPI
    int flag = 0;
    detail::check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what_.c_str());
    if (!flag) return false;
#endif
    finish();
    return true;
  }
  /// Blocks until the collective completes; DistError after the timeout. Polls without
  /// pause, as MPI_Wait does (the transfer advances only inside MPI calls: a sleep between
  /// polls would stall it), yielding the core between polls once the wait is long (an
  /// oversubscribed machine, where the rank it waits for may need that core).
  void wait() {
    const double t = timeout();
    const std::int64_t deadline = t > 0 ? detail::now_ns() + static_cast<std::int64_t>(t * 1e9) : 0;
    std::int64_t spins = 0;
    while (!test()) {
      ++spins;
      if ((spins & 255) == 0 && deadline && detail::now_ns() > deadline)
        MS_THROW(DistError, "{}: did not complete within {} s on rank {} of {} (another rank failed, exited or did "
                            "not call it)",
                 what_, t, rank(), world_size());
      if (spins > 1024) std::this_thread::yield();
    }
  }
  bool done() const { return done_; }

 private:
  friend Work all_reduce_async_buffer(const Group&, void*, std::int64_t, DType, ReduceOp, std::shared_ptr<void>,
                                      const char*);
  void finish() {
    done_ = true;
    if (mean_by_ > 0) detail::divide(buf_, n_, dtype_, mean_by_);
    keep_.reset();
  }
  bool done_ = true;
  std::string what_;
  void* buf_ = nullptr;
  std::int64_t n_ = 0;
  DType dtype_ = DType::f32;
  int mean_by_ = 0;
  std::shared_ptr<void> keep_;  ///< keeps the buffer's storage alive while in flight
#if MS_DIST_MPI
  MPI_Request req_ = MPI_REQUEST_NULL;
#endif
};

/// Starts an in-place all-reduce of buf (MPI_Iallreduce) and returns its handle; `keep`
/// holds whatever owns buf until the collective completes.
inline Work all_reduce_async_buffer(const Group& g, void* buf, std::int64_t n, DType d, ReduceOp op,
                                    std::shared_ptr<void> keep = {}, const char* what = "all_reduce_async") {
  const detail::GroupRec& r = detail::member(g, what);
  const int count = detail::checked_count(n, what);
  Work w;
  w.done_ = false;
  w.what_ = what;
  w.buf_ = buf;
  w.n_ = n;
  w.dtype_ = d;
  w.mean_by_ = op == ReduceOp::mean ? static_cast<int>(r.ranks.size()) : 0;
  w.keep_ = std::move(keep);
#if MS_DIST_MPI
  if (r.ranks.size() > 1) {
    detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf, count, detail::mpi_type(d, what), detail::mpi_op(op), r.comm,
                                     &w.req_),
                      what, [&] { return MS_FORMAT("{} elements of {}, reduce {}", count, d, reduce_op_name(op)); });
  }
#else
  (void)count;
#endif
  return w;
}

}  // namespace ms::dist
