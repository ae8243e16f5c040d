#pragma once
// Which library runs the CPU's heavy float products, and the oneDNN binding behind it.
// Belongs here: the GEMM and convolution path switches (ms::cpu_gemm, MS_CPU_GEMM;
// ms::cpu_conv, MS_CPU_CONV), oneDNN's
// engine, per-thread streams and thread count, its errors as ms errors, and the bounded
// cache of convolution primitives. Not here: the kernels that call it (ops/linalg.hpp,
// ops/nn/conv.hpp), which keep the backend's own GEMM as the fallback and for float64.
//
// oneDNN (Debian libdnnl-dev; CMake MS_USE_DNNL, on by default, defines MS_HAVE_DNNL)
// generates its kernels for the CPU it runs on, so a program built without -march still
// runs AVX-512 (or AMX) code where the machine has it. Primitives are made once per
// shape, kept in a cache keyed by everything that shapes them, and executed many times:
// in a captured graph the trace creates them and every replay only executes.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/allocator.hpp"
#include "../core/error.hpp"
#include "../core/linkage.hpp"
#include "../core/parallel.hpp"

// oneDNN itself and the binding below are seen where the kernels are compiled (core/linkage.hpp).
#if defined(MS_HAVE_DNNL) && MS_KERNEL_BODIES
#include <dnnl.h>
#include <dnnl_debug.h>
#endif

namespace ms {

/// The library that runs float GEMMs (matmul, linear and their gradients) and float
/// convolutions on the CPU. float64 always runs on OpenBLAS or the built-in GEMM (oneDNN
/// has no f64).
enum class CpuGemm : int {
  dnnl = 0,     ///< oneDNN: sgemm and convolution primitives (the default when built with it)
  blas = 1,     ///< OpenBLAS's sgemm/dgemm; convolutions as im2col + that GEMM
  builtin = 2,  ///< ms's own GEMM for everything, compiled per CPU level (always available)
  eigen [[deprecated("the fallback GEMM is ms's own now: use CpuGemm::builtin")]] = builtin,
};

/// The path's name as MS_CPU_GEMM spells it: "dnnl", "blas" or "builtin" (MS_CPU_GEMM also
/// takes "eigen", the fallback's former name).
constexpr std::string_view cpu_gemm_name(CpuGemm g) {
  return g == CpuGemm::dnnl ? "dnnl" : g == CpuGemm::blas ? "blas" : "builtin";
}

/// Whether this build can run `g` (dnnl needs MS_HAVE_DNNL, blas MS_HAVE_BLAS).
constexpr bool cpu_gemm_available([[maybe_unused]] CpuGemm g) {
#if !defined(MS_HAVE_DNNL)
  if (g == CpuGemm::dnnl) return false;
#endif
#if !defined(MS_HAVE_BLAS)
  if (g == CpuGemm::blas) return false;
#endif
  return true;
}

namespace ops::detail {
inline CpuGemm parse_cpu_gemm(std::string_view v, std::string_view where) {
  if (v == "eigen") v = "builtin";  // the fallback's former name
  for (CpuGemm g : {CpuGemm::dnnl, CpuGemm::blas, CpuGemm::builtin}) {
    if (v != cpu_gemm_name(g)) continue;
    if (!cpu_gemm_available(g)) {
      std::string available;
      for (CpuGemm a : {CpuGemm::dnnl, CpuGemm::blas, CpuGemm::builtin})
        if (cpu_gemm_available(a)) available += MS_FORMAT("{}{}", available.empty() ? "" : ", ", cpu_gemm_name(a));
      MS_THROW(ValueError, "{}: the '{}' GEMM path is not in this build ({}); available: {}", where, v,
               g == CpuGemm::dnnl ? "built without oneDNN: install libdnnl-dev and keep MS_USE_DNNL on"
                                  : "built without OpenBLAS: install libopenblas-openmp-dev and keep MS_USE_BLAS on",
               available);
    }
    return g;
  }
  MS_THROW(ValueError, "{}: unknown GEMM path '{}' (valid: dnnl, blas, builtin)", where, v);
}

inline std::atomic<int>& cpu_gemm_setting() {
  static std::atomic<int> g{[] {
    if (const char* e = std::getenv("MS_CPU_GEMM"); e && *e) return static_cast<int>(parse_cpu_gemm(e, "MS_CPU_GEMM"));
    if (cpu_gemm_available(CpuGemm::dnnl)) return static_cast<int>(CpuGemm::dnnl);
    if (cpu_gemm_available(CpuGemm::blas)) return static_cast<int>(CpuGemm::blas);
    return static_cast<int>(CpuGemm::builtin);
  }()};
  return g;
}
}  // namespace ops::detail

/// The GEMM/convolution path in use: MS_CPU_GEMM (dnnl|blas|builtin) when set, else the
/// fastest this build has (dnnl, then blas, then builtin).
inline CpuGemm cpu_gemm() { return static_cast<CpuGemm>(ops::detail::cpu_gemm_setting().load(std::memory_order_relaxed)); }
/// Selects the path for the whole process; a path this build lacks is a ValueError.
inline void set_cpu_gemm(CpuGemm g) {
  (void)ops::detail::parse_cpu_gemm(cpu_gemm_name(g), "set_cpu_gemm");
  ops::detail::cpu_gemm_setting().store(static_cast<int>(g), std::memory_order_relaxed);
}

/// How float convolutions run. The im2col kernels lay the receptive fields of a block of
/// images side by side and run one GEMM per block on the cpu_gemm() path. oneDNN's
/// convolution primitives run in layouts of its choice (nChw16c and its direct kernels on
/// AVX-512), the operands reordered from and to ms's NCHW tensors at each call. Its kernels
/// vectorize over blocks of 16 channels, so they win where channels fill those blocks and
/// lose where they do not: benchmarks/conv (AMD Zen 4, batch 64, 1 thread) measured oneDNN
/// faster on every pass of a 16 -> 32 layer and on the forward pass and weight gradient of
/// LeNet's second layer (6 -> 16 channels), slower on its input gradient (6 input channels
/// fill 3/8 of a block) and 1.4-10x slower on LeNet's first (1 -> 6); on a 1 -> 32 layer
/// faster forward and for the weight gradient, 9x slower for the input gradient.
/// CpuConv::automatic, the default, decides per convolution pass on that rule and the next.
/// ms's direct kernels (backend/cpu/kernels/conv_direct.hpp) compute float32 convolutions of
/// stride and dilation 1 row by row with no im2col matrix: the forward pass and the weight
/// gradient (kernel widths 3 and 5). They win where few input channels make the im2col
/// matrix short and its GEMM memory-bound, and few output channels leave oneDNN's 16-channel
/// blocks empty (LeNet's first layer, see conv_prefers_direct).
enum class CpuConv : int {
  im2col = 0,     ///< ms's im2col/col2im kernels; their GEMMs on the cpu_gemm() path
  dnnl = 1,       ///< oneDNN convolution primitives (float32; needs a build with oneDNN)
  automatic = 2,  ///< per pass: direct where conv_prefers_direct, oneDNN where conv_prefers_dnnl, im2col otherwise ("auto")
  direct = 3,     ///< ms's direct kernels wherever they apply (stride 1, dilation 1; not the input gradient), im2col otherwise
};

/// "im2col", "dnnl", "auto" or "direct".
inline std::string_view cpu_conv_name(CpuConv c) {
  switch (c) {
    case CpuConv::dnnl: return "dnnl";
    case CpuConv::automatic: return "auto";
    case CpuConv::direct: return "direct";
    default: return "im2col";
  }
}

/// Whether CpuConv::automatic runs a pass that the direct kernels can compute on them: when
/// a receptive field (in_channels_per_group x kH x kW) holds at most 32 values and a group
/// has at most 16 output channels. Measured (benchmarks/conv, AMD Zen 4, batch 64, 1 thread,
/// forward / weight gradient): 1 -> 6 5x5 on 28x28 220 / 260 us against im2col's 320 / 329
/// and oneDNN's 558 / 420; 3 -> 16 3x3 on 32x32 735 / 586 against 846 / 3890 and 917 / 694;
/// but 1 -> 32 5x5 1178 / 1055 against oneDNN's 1014 / 970 (its kernels vectorize over
/// the output channels, which fill two blocks there).
inline bool conv_prefers_direct(std::int64_t in_channels_per_group, std::int64_t out_channels_per_group,
                                std::int64_t kernel_h, std::int64_t kernel_w) {
  return in_channels_per_group * kernel_h * kernel_w <= 32 && out_channels_per_group <= 16;
}

/// Whether CpuConv::automatic runs a convolution pass on oneDNN: when a group has at least
/// 16 output channels (one AVX-512 block; the forward pass and the weight gradient vectorize
/// over them), and for the input gradient, which vectorizes over input channels, also at
/// least 16 input channels per group. Measured (benchmarks/conv, AMD Zen 4, batch 64, input
/// gradient at 1 thread): 6 -> 16 5x5 on 14x14 im2col 624 us, oneDNN 785; 16 -> 32 3x3
/// im2col 1721, oneDNN 1125; 1 or 3 input channels oneDNN 3-10x slower.
inline bool conv_prefers_dnnl(std::int64_t in_channels_per_group, std::int64_t out_channels_per_group,
                              bool input_gradient) {
  return out_channels_per_group >= 16 && (!input_gradient || in_channels_per_group >= 16);
}

namespace ops::detail {
inline std::atomic<int>& cpu_conv_setting() {
  static std::atomic<int> c{[] {
    const int fallback = static_cast<int>(CpuConv::automatic);
    const char* e = std::getenv("MS_CPU_CONV");
    if (!e || !*e) return fallback;
    const std::string_view v = e;
    if (v == "im2col") return static_cast<int>(CpuConv::im2col);
    if (v == "direct") return static_cast<int>(CpuConv::direct);
    if (v == "auto") return fallback;
    MS_CHECK(v == "dnnl", ValueError, "MS_CPU_CONV: unknown convolution path '{}' (valid: auto, im2col, direct, dnnl)", v);
    MS_CHECK(cpu_gemm_available(CpuGemm::dnnl), ValueError,
             "MS_CPU_CONV: the 'dnnl' convolution path is not in this build (built without oneDNN: install libdnnl-dev "
             "and keep MS_USE_DNNL on); available: auto, im2col, direct");
    return static_cast<int>(CpuConv::dnnl);
  }()};
  return c;
}
}  // namespace ops::detail

/// The convolution path in use: MS_CPU_CONV (auto|im2col|direct|dnnl) when set, else automatic
/// (without oneDNN: direct or im2col per pass).
inline CpuConv cpu_conv() { return static_cast<CpuConv>(ops::detail::cpu_conv_setting().load(std::memory_order_relaxed)); }
/// Selects the convolution path for the whole process; dnnl without oneDNN is a ValueError
/// (automatic without oneDNN chooses between direct and im2col).
inline void set_cpu_conv(CpuConv c) {
  MS_CHECK(c != CpuConv::dnnl || cpu_gemm_available(CpuGemm::dnnl), ValueError,
           "set_cpu_conv: the 'dnnl' convolution path is not in this build (built without oneDNN); available: auto, im2col, direct");
  ops::detail::cpu_conv_setting().store(static_cast<int>(c), std::memory_order_relaxed);
}

/// Whether oneDNN runs bfloat16 products natively on this CPU (AVX512-BF16 or AMX): then
/// bfloat16 matmul, linear and convolutions, and float32 ones under GemmPrecision::bf16, run
/// as bfloat16 primitives with float32 accumulation. False without oneDNN.
MS_IMPL bool dnnl_bf16_native();

/// The arithmetic of float32 GEMMs (matmul, linear, their gradients, the convolutions'
/// GEMMs) and float32 convolutions on the CPU; like PyTorch's float32 matmul precision.
enum class GemmPrecision : int {
  f32 = 0,   ///< float32 products (the default)
  bf16 = 1,  ///< operands rounded to bfloat16 (8 significant bits), products summed in float32,
             ///< float32 results: 3-5x faster on AMX. Used where dnnl_bf16_native() and the
             ///< GEMM path is dnnl; elsewhere float32 runs as before.
};
constexpr std::string_view gemm_precision_name(GemmPrecision p) { return p == GemmPrecision::bf16 ? "bf16" : "f32"; }

namespace ops::detail {
inline std::atomic<int>& gemm_precision_setting() {
  static std::atomic<int> p{[] {
    const char* e = std::getenv("MS_CPU_GEMM_PRECISION");
    if (!e || !*e || std::string_view(e) == "f32") return static_cast<int>(GemmPrecision::f32);
    MS_CHECK(std::string_view(e) == "bf16", ValueError,
             "MS_CPU_GEMM_PRECISION: unknown precision '{}' (valid: f32, bf16)", e);
    return static_cast<int>(GemmPrecision::bf16);
  }()};
  return p;
}
}  // namespace ops::detail

/// The float32 GEMM precision: MS_CPU_GEMM_PRECISION (f32|bf16) when set, else f32.
inline GemmPrecision cpu_gemm_precision() {
  return static_cast<GemmPrecision>(ops::detail::gemm_precision_setting().load(std::memory_order_relaxed));
}
/// Selects the float32 GEMM precision for the whole process; returns the previous one.
inline GemmPrecision set_cpu_gemm_precision(GemmPrecision p) {
  return static_cast<GemmPrecision>(
      ops::detail::gemm_precision_setting().exchange(static_cast<int>(p), std::memory_order_relaxed));
}

/// Size and use of the oneDNN primitive cache (all zero without oneDNN).
struct DnnlCacheStats {
  std::size_t size = 0;      ///< primitives held
  std::size_t capacity = 0;  ///< most primitives held (MS_DNNL_CACHE_CAPACITY, default 256),
                             ///< beyond those that executables own

  std::uint64_t hits = 0;    ///< lookups that found a primitive
  std::uint64_t misses = 0;  ///< lookups that created one
  double hit_rate() const { return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0; }
};
MS_IMPL DnnlCacheStats dnnl_cache_stats();
/// Empties the primitive cache (statistics restart at zero).
MS_IMPL void dnnl_cache_clear();
/// The instruction set oneDNN generates code for on this CPU ("avx512_core_bf16", ...), or
/// "none" without oneDNN.
MS_IMPL std::string dnnl_cpu_isa();

namespace ops::detail {
/// While set (PrimitiveOwner), every oneDNN primitive this thread takes from the cache is
/// also appended here: a captured graph's executable keeps the primitives of its nodes
/// alive this way, and the cache never evicts a primitive someone else holds.
inline thread_local std::vector<std::shared_ptr<const void>>* primitive_owner = nullptr;

/// Scope in which the primitives used on this thread become owned by `held`.
class PrimitiveOwner {
 public:
  /// A null `held` leaves the current owner (if any) in place.
  explicit PrimitiveOwner(std::vector<std::shared_ptr<const void>>* held) : saved_(primitive_owner) {
    if (held) primitive_owner = held;
  }
  ~PrimitiveOwner() { primitive_owner = saved_; }
  PrimitiveOwner(const PrimitiveOwner&) = delete;
  PrimitiveOwner& operator=(const PrimitiveOwner&) = delete;

 private:
  std::vector<std::shared_ptr<const void>>* saved_;
};
}  // namespace ops::detail

// =============================================================================================
// Implementation
// =============================================================================================

#if defined(MS_HAVE_DNNL) && MS_KERNEL_BODIES
namespace ops::detail {

/// A oneDNN status as an ms::BackendError naming the op, what was being done and the shapes.
inline void dnnl_check(dnnl_status_t st, std::string_view op, std::string_view what, std::string_view shapes) {
  MS_CHECK(st == dnnl_success, BackendError, "{}: oneDNN {} failed with status {} ({}) for {}", op, what,
           dnnl_status2str(st), static_cast<int>(st), shapes);
}

inline dnnl_engine_t dnnl_engine() {
  static dnnl_engine_t eng = [] {
    dnnl_engine_t e = nullptr;
    dnnl_check(dnnl_engine_create(&e, dnnl_cpu, 0), "dnnl", "engine creation", "the CPU");
    return e;
  }();
  return eng;
}

/// One stream per thread: a CPU stream is cheap, and threads never share one.
inline dnnl_stream_t dnnl_stream() {
  struct Holder {
    dnnl_stream_t s = nullptr;
    ~Holder() {
      if (s) dnnl_stream_destroy(s);
    }
  };
  thread_local Holder h;
  if (!h.s) dnnl_check(dnnl_stream_create(&h.s, dnnl_engine(), dnnl_stream_default_flags), "dnnl", "stream creation", "the CPU");
  return h.s;
}

/// How many DnnlSerialScopes are alive on this thread.
inline thread_local int dnnl_serial_depth = 0;

/// oneDNN (OpenMP build) runs on omp_get_max_threads() threads: keep it at ms's count (1
/// inside a DnnlSerialScope), so that ms::set_num_threads(2) never has oneDNN wake every
/// core. Inside one of ms's own parallel regions OpenMP's nesting is off, and oneDNN runs on
/// the calling thread. OpenMP's own setting is read each time, not remembered: other code in
/// the process changes it too (LibTorch's set_num_threads does), and a remembered value once
/// left oneDNN on 1 thread at ms::set_num_threads(2) (benchmarks/conv, LibTorch's runs first).
inline void sync_dnnl_threads() {
#if defined(_OPENMP)
  const int n = dnnl_serial_depth > 0 ? 1 : get_num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#endif
}

/// While alive (and `on`), oneDNN primitives are made and run on the calling thread alone
/// (DnnlCache keys them apart). For work too small to split: oneDNN's reorder of a 784 x 256
/// float matrix to bfloat16 took 64 us on 2 threads against 21 us on 1 (AMD Zen 4).
class DnnlSerialScope {
 public:
  explicit DnnlSerialScope(bool on = true) : on_(on) {
    if (!on_) return;
    ++dnnl_serial_depth;
    sync_dnnl_threads();
  }
  ~DnnlSerialScope() {
    if (!on_) return;
    --dnnl_serial_depth;
    sync_dnnl_threads();
  }
  DnnlSerialScope(const DnnlSerialScope&) = delete;
  DnnlSerialScope& operator=(const DnnlSerialScope&) = delete;

 private:
  bool on_;
};

/// c (M x N, row-major, ldc = N) = a @ b (+ c when accumulate) through dnnl_sgemm, which
/// takes row-major operands: a row-major operand is 'N', a column-major one 'T'.
inline void gemm_dnnl(const float* a, bool a_col, std::int64_t lda, const float* b, bool b_col, std::int64_t ldb,
                      float* c, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  sync_dnnl_threads();
  const dnnl_status_t st = dnnl_sgemm(a_col ? 'T' : 'N', b_col ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb,
                                      accumulate ? 1.0f : 0.0f, c, N);
  if (st != dnnl_success)
    dnnl_check(st, "matmul", "sgemm", MS_FORMAT("({}, {}) @ ({}, {})", M, K, K, N));
}

/// A created primitive with what its execution needs besides the data.
struct DnnlPrimitive {
  /// One operand that the primitive takes in a layout of oneDNN's choice (a blocked one,
  /// such as nChw16c): that layout, and the reorder from ms's plain layout (an input) or
  /// to it (an output). Without a reorder the operand is passed as it is.
  struct Edge {
    dnnl_memory_desc_t md{};
    std::shared_ptr<const DnnlPrimitive> reorder;
  };
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t prim = nullptr;
  std::size_t scratch_bytes = 0;
  std::array<Edge, 3> edges{};  ///< per operand, as the op that made the primitive numbers them
  DnnlPrimitive() = default;
  DnnlPrimitive(const DnnlPrimitive&) = delete;
  DnnlPrimitive& operator=(const DnnlPrimitive&) = delete;
  ~DnnlPrimitive() {
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
  }
};

/// Everything that shapes a primitive: its kind, then its dimensions and attributes (a
/// matmul with a post-op chain, backend/cpu/dnnl_epilogue.hpp, needs the most slots). The
/// last slot is DnnlCache's own: the thread count the primitive is made for.
using DnnlKey = std::array<std::int64_t, 64>;
inline constexpr std::size_t kDnnlKeyThreadsSlot = std::tuple_size_v<DnnlKey> - 1;

/// The thread count oneDNN gives a primitive made now on this thread (after sync_dnnl_threads).
inline std::int64_t dnnl_creation_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// The bounded, least-recently-used cache of primitives, shared by all threads. Entries are
/// shared_ptrs, so a primitive evicted while another thread executes it stays alive.
class DnnlCache {
 public:
  static DnnlCache& instance() {
    static DnnlCache c;
    return c;
  }
  /// The primitive for `key` made at ms's current thread count: oneDNN fixes a primitive's
  /// work split when it is made (its own primitive cache keys on the thread count too), so
  /// one made at 1 thread would run on 1 thread after ms::set_num_threads(2), and one made
  /// at 2 would start 2 threads after set_num_threads(1).
  template <class Make>
  std::shared_ptr<const DnnlPrimitive> get(DnnlKey key, Make&& make) {
    MS_CHECK(key[kDnnlKeyThreadsSlot] == 0, BackendError, "oneDNN primitive key of kind {} uses the thread-count slot",
             key[0]);
    sync_dnnl_threads();
    key[kDnnlKeyThreadsSlot] = dnnl_creation_threads();
    std::shared_ptr<const DnnlPrimitive> p = find(key);
    if (!p) p = insert(key, make());  // created outside the lock
    if (primitive_owner) primitive_owner->push_back(p);
    return p;
  }
  DnnlCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {map_.size(), capacity_, hits_, misses_};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
    hits_ = misses_ = 0;
  }

 private:
  DnnlCache() {
    if (const char* e = std::getenv("MS_DNNL_CACHE_CAPACITY"); e && *e) {
      char* end = nullptr;
      const long v = std::strtol(e, &end, 10);
      MS_CHECK(end && *end == '\0' && v >= 1, ValueError,
               "MS_DNNL_CACHE_CAPACITY must be a positive integer, got '{}'", e);
      capacity_ = static_cast<std::size_t>(v);
    }
  }
  std::shared_ptr<const DnnlPrimitive> find(const DnnlKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
  }
  std::shared_ptr<const DnnlPrimitive> insert(const DnnlKey& key, std::shared_ptr<const DnnlPrimitive> p) {
    std::lock_guard<std::mutex> lock(mu_);
    ++misses_;
    if (auto it = map_.find(key); it != map_.end()) return it->second.first;  // another thread won
    lru_.push_front(key);
    map_.emplace(key, std::make_pair(p, lru_.begin()));
    // Evict the least recently used primitives that nobody else holds (an executable that
    // owns its primitives keeps them here too, so its replays always hit).
    for (auto it = std::prev(lru_.end()); map_.size() > capacity_ && it != lru_.begin();) {
      auto victim = map_.find(*it);
      auto prev = std::prev(it);
      if (victim->second.first.use_count() == 1) {
        map_.erase(victim);
        lru_.erase(it);
      }
      it = prev;
    }
    return p;
  }

  std::mutex mu_;
  std::list<DnnlKey> lru_;
  std::map<DnnlKey, std::pair<std::shared_ptr<const DnnlPrimitive>, std::list<DnnlKey>::iterator>> map_;
  std::size_t capacity_ = 256;
  std::uint64_t hits_ = 0, misses_ = 0;
};

/// Attributes of every primitive ms creates: a user-managed scratchpad (so the memory it
/// needs comes from ms's allocator and shows in its statistics), and optionally a sum
/// post-op (the result is added to what the destination holds: accumulate).
inline dnnl_primitive_attr_t make_dnnl_attr(bool sum_post_op, std::string_view op, std::string_view shapes) {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_check(dnnl_primitive_attr_create(&attr), op, "attribute creation", shapes);
  dnnl_status_t st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success && sum_post_op) {
    dnnl_post_ops_t po = nullptr;
    st = dnnl_post_ops_create(&po);
    if (st == dnnl_success) st = dnnl_post_ops_append_sum(po, 1.0f);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    if (po) dnnl_post_ops_destroy(po);
  }
  if (st != dnnl_success) dnnl_primitive_attr_destroy(attr);
  dnnl_check(st, op, "attributes", shapes);
  return attr;
}

/// Finishes a primitive whose descriptor `p->pd` was just created (status `st`, attributes
/// `attr`, which are released here).
inline std::shared_ptr<DnnlPrimitive> finish_dnnl_primitive(std::shared_ptr<DnnlPrimitive> p, dnnl_status_t st,
                                                                 dnnl_primitive_attr_t attr, std::string_view op,
                                                                 std::string_view shapes) {
  dnnl_primitive_attr_destroy(attr);
  dnnl_check(st, op, "primitive descriptor creation", shapes);
  dnnl_check(dnnl_primitive_create(&p->prim, p->pd), op, "primitive creation", shapes);
  if (const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(p->pd, dnnl_query_scratchpad_md, 0))
    p->scratch_bytes = dnnl_memory_desc_get_size(md);
  return p;
}

/// Creates a primitive from an op descriptor (see make_dnnl_attr).
inline std::shared_ptr<DnnlPrimitive> make_dnnl_primitive(const_dnnl_op_desc_t desc, const_dnnl_primitive_desc_t hint,
                                                               std::string_view op, std::string_view shapes,
                                                               bool sum_post_op = false) {
  auto p = std::make_shared<DnnlPrimitive>();
  dnnl_primitive_attr_t attr = make_dnnl_attr(sum_post_op, op, shapes);
  const dnnl_status_t st = dnnl_primitive_desc_create(&p->pd, desc, attr, dnnl_engine(), hint);
  return finish_dnnl_primitive(std::move(p), st, attr, op, shapes);
}

/// Creates a reorder (a copy that converts the data type or the layout) from src to dst.
inline std::shared_ptr<DnnlPrimitive> make_dnnl_reorder(const dnnl_memory_desc_t& src, const dnnl_memory_desc_t& dst,
                                                             std::string_view op, std::string_view shapes) {
  auto p = std::make_shared<DnnlPrimitive>();
  dnnl_primitive_attr_t attr = make_dnnl_attr(false, op, shapes);
  const dnnl_status_t st = dnnl_reorder_primitive_desc_create(&p->pd, &src, dnnl_engine(), &dst, dnnl_engine(), attr);
  return finish_dnnl_primitive(std::move(p), st, attr, op, shapes);
}

/// Up to N buffers from ms's host allocator for the operands of one oneDNN call (converted
/// or reordered copies), returned to it when the scope ends, also on an exception.
template <std::size_t N>
class DnnlStaging {
 public:
  DnnlStaging() = default;
  DnnlStaging(const DnnlStaging&) = delete;
  DnnlStaging& operator=(const DnnlStaging&) = delete;
  ~DnnlStaging() {
    for (std::size_t i = 0; i < n_; ++i) alloc_.deallocate(buf_[i].first, buf_[i].second);
  }
  void* take(std::size_t bytes) {
    MS_CHECK(n_ < N, BackendError, "DnnlStaging: more than {} buffers", N);
    void* p = alloc_.allocate(bytes);
    buf_[n_++] = {p, bytes};
    return p;
  }

 private:
  Allocator& alloc_ = CachingHostAllocator::instance();
  std::array<std::pair<void*, std::size_t>, N> buf_{};
  std::size_t n_ = 0;
};

/// One argument of an execution: its oneDNN name, layout and data.
struct DnnlArg {
  int name;
  const dnnl_memory_desc_t* md;
  const void* data;
};

/// Executes `p` on this thread's stream with the given arguments (plain layouts wrapping
/// ms's buffers, no copies; at most kDnnlMaxArgs) and a scratchpad from ms's host allocator;
/// waits for it. `shapes()` describes the operands for an error message: called only on failure.
inline constexpr std::size_t kDnnlMaxArgs = 24;
template <class Shapes>
void dnnl_execute(const DnnlPrimitive& p, std::span<const DnnlArg> args, std::string_view op, const Shapes& shapes) {
  MS_CHECK(args.size() < kDnnlMaxArgs, BackendError, "{}: {} oneDNN arguments, at most {}", op, args.size(),
           kDnnlMaxArgs - 1);
  sync_dnnl_threads();
  const dnnl_engine_t eng = dnnl_engine();
  std::array<dnnl_memory_t, kDnnlMaxArgs> mem{};
  std::array<dnnl_exec_arg_t, kDnnlMaxArgs> exec{};
  Allocator& alloc = CachingHostAllocator::instance();
  void* scratch = p.scratch_bytes ? alloc.allocate(p.scratch_bytes) : nullptr;
  int n = 0;
  dnnl_status_t st = dnnl_success;
  auto add = [&](int name, const dnnl_memory_desc_t* md, void* data) {
    if (st != dnnl_success) return;
    st = dnnl_memory_create(&mem[static_cast<std::size_t>(n)], md, eng, data);
    if (st == dnnl_success) exec[static_cast<std::size_t>(n)] = {name, mem[static_cast<std::size_t>(n)]}, ++n;
  };
  for (const DnnlArg& a : args) add(a.name, a.md, const_cast<void*>(a.data));
  if (scratch) add(DNNL_ARG_SCRATCHPAD, dnnl_primitive_desc_query_md(p.pd, dnnl_query_scratchpad_md, 0), scratch);
  const dnnl_stream_t stream = dnnl_stream();
  if (st == dnnl_success) st = dnnl_primitive_execute(p.prim, stream, n, exec.data());
  if (st == dnnl_success) st = dnnl_stream_wait(stream);
  for (int i = 0; i < n; ++i) dnnl_memory_destroy(mem[static_cast<std::size_t>(i)]);
  if (scratch) alloc.deallocate(scratch, p.scratch_bytes);
  if (st != dnnl_success) dnnl_check(st, op, "execution", shapes());
}
template <std::size_t N, class Shapes>
void dnnl_execute(const DnnlPrimitive& p, const std::array<DnnlArg, N>& args, std::string_view op, const Shapes& shapes) {
  dnnl_execute(p, std::span<const DnnlArg>(args.data(), N), op, shapes);
}

/// A plain (dense, row-major) memory descriptor of the given dims, format tag and data type.
inline dnnl_memory_desc_t dnnl_plain_md(std::initializer_list<std::int64_t> dims, dnnl_format_tag_t tag,
                                        std::string_view op, std::string_view shapes,
                                        dnnl_data_type_t dt = dnnl_f32) {
  dnnl_memory_desc_t md;
  dnnl_dims_t d{};
  int nd = 0;
  for (std::int64_t v : dims) d[nd++] = v;
  dnnl_check(dnnl_memory_desc_init_by_tag(&md, nd, d, dt, tag), op, "memory descriptor", shapes);
  return md;
}

/// One matrix operand as ms's GEMMs see it: data of type dt, row-major with leading
/// dimension ld, or column-major (ld between columns).
struct DnnlMatrix {
  const void* data;
  dnnl_data_type_t dt;
  bool col_major;
  std::int64_t ld;
};

inline dnnl_memory_desc_t dnnl_matrix_md(std::int64_t rows, std::int64_t cols, const DnnlMatrix& m, std::string_view op,
                                         std::string_view shapes) {
  dnnl_memory_desc_t md;
  const dnnl_dims_t d{rows, cols};
  const dnnl_dims_t s{m.col_major ? 1 : m.ld, m.col_major ? m.ld : 1};
  dnnl_check(dnnl_memory_desc_init_by_strides(&md, 2, d, m.dt, s), op, "matrix descriptor", shapes);
  return md;
}

/// Cache keys of the primitives below (after the convolution passes 0..2).
inline constexpr std::int64_t kDnnlMatmulKey = 16, kDnnlReorderKey = 17, kDnnlMatmulPostOpsKey = 18;

/// c (M x N, row-major, ldc = N, type c_dt) = a @ b, or += when accumulate (a sum post-op),
/// with a cached oneDNN matmul primitive. oneDNN sums bfloat16 products in float32.
inline void matmul_dnnl(const DnnlMatrix& a, const DnnlMatrix& b, void* c, dnnl_data_type_t c_dt, std::int64_t M,
                        std::int64_t N, std::int64_t K, bool accumulate, std::string_view op) {
  const auto shapes = [&] { return MS_FORMAT("({}, {}) @ ({}, {}) as {}", M, K, K, N, dnnl_dt2str(a.dt)); };
  const DnnlMatrix cm{c, c_dt, false, N};
  const dnnl_memory_desc_t amd = dnnl_matrix_md(M, K, a, op, ""), bmd = dnnl_matrix_md(K, N, b, op, ""),
                           cmd = dnnl_matrix_md(M, N, cm, op, "");
  const DnnlKey key{kDnnlMatmulKey, M, N, K, a.col_major, a.ld, b.col_major, b.ld, a.dt, b.dt, c_dt, accumulate};
  auto prim = DnnlCache::instance().get(key, [&] {
    const std::string sh = shapes();
    dnnl_matmul_desc_t d;
    dnnl_check(dnnl_matmul_desc_init(&d, &amd, &bmd, nullptr, &cmd), op, "matmul descriptor", sh);
    return make_dnnl_primitive(&d, nullptr, op, sh, accumulate);
  });
  dnnl_execute<3>(*prim, {{{DNNL_ARG_SRC, &amd, a.data}, {DNNL_ARG_WEIGHTS, &bmd, b.data}, {DNNL_ARG_DST, &cmd, c}}}, op,
                  shapes);
}

/// Converts the rows x cols matrix `m` into `out` (type dt, same orientation, compact
/// leading dimension) with a cached reorder; returns the converted operand.
inline DnnlMatrix reorder_matrix_dnnl(std::int64_t rows, std::int64_t cols, const DnnlMatrix& m, dnnl_data_type_t dt,
                                      void* out, std::string_view op) {
  const DnnlMatrix o{out, dt, m.col_major, std::max<std::int64_t>(1, m.col_major ? rows : cols)};
  const auto shapes = [&] { return MS_FORMAT("({}, {}) {} -> {}", rows, cols, dnnl_dt2str(m.dt), dnnl_dt2str(dt)); };
  const dnnl_memory_desc_t smd = dnnl_matrix_md(rows, cols, m, op, ""), dmd = dnnl_matrix_md(rows, cols, o, op, "");
  const DnnlKey key{kDnnlReorderKey, rows, cols, m.col_major, m.ld, m.dt, dt};
  auto prim = DnnlCache::instance().get(key, [&] { return make_dnnl_reorder(smd, dmd, op, shapes()); });
  dnnl_execute<2>(*prim, {{{DNNL_ARG_FROM, &smd, m.data}, {DNNL_ARG_TO, &dmd, out}}}, op, shapes);
  return o;
}

/// Operands of fewer elements are converted to bfloat16 on one thread.
inline constexpr std::int64_t kDnnlSerialReorder = std::int64_t{1} << 19;

/// c (M x N float32, row-major) = a @ b (+= when accumulate) for float32 operands under
/// GemmPrecision::bf16: both are rounded to bfloat16 (reorders into ms-allocated buffers),
/// multiplied on the bfloat16 units and summed in float32.
inline void gemm_dnnl_bf16_from_f32(const float* a, bool a_col, std::int64_t lda, const float* b, bool b_col,
                                    std::int64_t ldb, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                                    bool accumulate) {
  DnnlStaging<2> staging;
  void* abuf = staging.take(static_cast<std::size_t>(M * K) * 2);
  void* bbuf = staging.take(static_cast<std::size_t>(K * N) * 2);
  // The conversions are memory-bound and short: on one thread below kDnnlSerialReorder
  // elements (see DnnlSerialScope).
  const auto to_bf16 = [&](std::int64_t rows, std::int64_t cols, const DnnlMatrix& m, void* out) {
    const DnnlSerialScope serial(rows * cols < kDnnlSerialReorder);
    return reorder_matrix_dnnl(rows, cols, m, dnnl_bf16, out, "matmul");
  };
  const DnnlMatrix a16 = to_bf16(M, K, {a, dnnl_f32, a_col, lda}, abuf);
  const DnnlMatrix b16 = to_bf16(K, N, {b, dnnl_f32, b_col, ldb}, bbuf);
  matmul_dnnl(a16, b16, c, dnnl_f32, M, N, K, accumulate, "matmul");
}

}  // namespace ops::detail
#endif

#if MS_IMPL_BODIES
#if defined(MS_HAVE_DNNL)
MS_IMPL DnnlCacheStats dnnl_cache_stats() { return ops::detail::DnnlCache::instance().stats(); }
MS_IMPL bool dnnl_bf16_native() {
  static const bool native = [] {
    constexpr unsigned bf16 = dnnl_cpu_isa_avx512_core_bf16;
    return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return native;
}
MS_IMPL void dnnl_cache_clear() { ops::detail::DnnlCache::instance().clear(); }
MS_IMPL std::string dnnl_cpu_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return MS_FORMAT("isa 0x{:x}", static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  }
}
#else
MS_IMPL DnnlCacheStats dnnl_cache_stats() { return {}; }
MS_IMPL bool dnnl_bf16_native() { return false; }
MS_IMPL void dnnl_cache_clear() {}
MS_IMPL std::string dnnl_cpu_isa() { return "none"; }
#endif
#endif

}  // namespace ms
