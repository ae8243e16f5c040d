#pragma once
// The Ascend adapter: a Backend over the AscendCL C API (acl_api.hpp) with two
// engines, AI Core (aclnn kernels) and AI CPU (single-operator AI CPU op types,
// when the runtime has them), the eager device runner that makes ops on Ascend
// tensors run where they live, and the host fallback for ops with neither
// mapping (warned once per op). A device kernel registered for an op
// (backend::register_device_kernel) runs on AI Core and comes before all of them.
// The same code drives CANN on an NPU or the Ascend emulator used by the tests;
// which one is decided by the library list ($MS_ASCEND_LIBS).
// Must not know about graphs: device_executor.hpp compiles graphs onto it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_set>

#include "../backend.hpp"
#include "aclnn_ops.hpp"
#include "aicpu_ops.hpp"
#include "block_pool.hpp"

namespace ms::backend::ascend {

/// The latency figures engine assignment assumes for an Ascend device (microseconds and
/// bytes per microsecond). They match the emulator's default latency model.
struct AscendCostModel {
  double launch_us = 5.0;
  double flops_per_us = 1e7;   ///< 10 TFLOP/s of cube throughput
  double bytes_per_us = 1e6;   ///< 1 TB/s of device memory bandwidth
  double copy_fixed_us = 10.0; ///< per host<->device copy
  double copy_bytes_per_us = 1e4;  ///< 10 GB/s over the host link
  double sync_us = 20.0;       ///< one host<->device synchronization
  // AI CPU: a few ARM cores beside the AI Cores. A launch costs more (the task goes through
  // the AI CPU scheduler) and the throughput is far below AI Core's, but the data stays in
  // device memory, so for ops AI Core has no kernel for it still beats a host round trip.
  double aicpu_launch_us = 20.0;
  double aicpu_flops_per_us = 1e4;  ///< 10 GFLOP/s
  double aicpu_bytes_per_us = 1e5;  ///< 100 GB/s
  double kernel(const ops::Cost& c) const { return launch_us + c.flops / flops_per_us + c.bytes / bytes_per_us; }
  double aicpu_kernel(const ops::Cost& c) const {
    return aicpu_launch_us + c.flops / aicpu_flops_per_us + c.bytes / aicpu_bytes_per_us;
  }
  double copy(double bytes) const { return copy_fixed_us + bytes / copy_bytes_per_us; }
};

/// cubeMathType for fp32 Matmul/BatchMatMul. KEEP_DTYPE computes in fp32 and is what the CPU
/// gives; ALLOW_FP32_DOWN_PRECISION lets the cube unit compute fp32 in a narrower format (fp16
/// on Ascend 910/310P, hf32 on A2/A3), which changes results in the last bits and more (about
/// 1e-3 relative with fp16); USE_HF32 asks for hf32 explicitly. `automatic` takes KEEP_DTYPE where
/// the chip supports it for fp32 (A2/A3) and ALLOW_FP32_DOWN_PRECISION elsewhere (910, 310P),
/// the only fp32 mode those chips run.
enum class CubeMath { automatic, keep_dtype, allow_fp32_down_precision, use_hf32 };

class AscendBackend final : public Backend {
 public:
  /// Loads the AscendCL libraries in `libs` (':'-separated), initializes ACL and device `index`.
  explicit AscendBackend(const std::string& libs = default_acl_libs(), int index = 0)
      : AscendBackend(load_acl_api(libs), index) {}
  /// The same over an already loaded function table (a table without the optional
  /// single-operator functions gives a backend without the AI CPU engine).
  AscendBackend(AclApi api, int index) : api_(std::move(api)), index_(index) {
    const aclError rc = api_.aclInit(nullptr);
    if (rc != ACL_ERROR_REPEAT_INITIALIZE) acl_check(api_, rc, "aclInit");
    else (void)api_.aclGetRecentErrMsg();
    // The count first: aclrtSetDevice with a bad index would be a runtime error (107001)
    // where the user made a device error.
    uint32_t count = 0;
    acl_check(api_, api_.aclrtGetDeviceCount(&count), "aclrtGetDeviceCount");
    MS_CHECK(index >= 0 && static_cast<uint32_t>(index) < count, DeviceError,
             "ascend:{} does not exist ({} device(s) found)", index, count);
    const char* soc = api_.aclrtGetSocName != nullptr ? api_.aclrtGetSocName() : nullptr;
    api_.soc = soc_caps(soc != nullptr ? soc : "");
    enter();
    dev_pool_ = std::make_shared<BlockPool>(api_, index_, BlockPool::Kind::device);
    pinned_pool_ = std::make_shared<BlockPool>(api_, index_, BlockPool::Kind::pinned_host);
    // Two device floats the loss kernels use as one-hot values; uploaded once, now, so that
    // no later launch needs a host round trip for them.
    consts_ = DeviceBuffer(api_, 2 * sizeof(float));
    const float v[2] = {1.0f, 0.0f};
    acl_check(api_, api_.aclrtMemcpy(consts_.get(), sizeof v, v, sizeof v, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
    stream_ = create_stream();
  }
  AscendBackend(const AscendBackend&) = delete;
  AscendBackend& operator=(const AscendBackend&) = delete;
  ~AscendBackend() override {
    // Queued work may still use blocks: wait (ignoring a device fault now). The pools free
    // their blocks when the last tensor that holds one is gone.
    if (stream_) (void)api_.aclrtSynchronizeStream(stream_.raw());
  }

  const AclApi& api() const { return api_; }
  Device device() const override { return Device::ascend(index_); }
  std::string_view name() const override { return "ascend"; }
  /// The stream eager ops run on.
  const Stream& eager_stream() const { return stream_; }

  /// Binds the calling thread to the device, once per thread (see bind_device).
  void enter() const { bind_device(api_, index_); }

  /// The SoC the runtime reports and what it supports.
  const SocCaps& soc() const { return api_.soc; }
  /// cubeMathType passed to Matmul/BatchMatMul (see CubeMath).
  CubeMath cube_math = CubeMath::automatic;
  std::int8_t cube_math_type() const {
    switch (cube_math) {
      case CubeMath::keep_dtype: return ACLNN_CUBE_KEEP_DTYPE;
      case CubeMath::allow_fp32_down_precision: return ACLNN_CUBE_ALLOW_FP32_DOWN_PRECISION;
      case CubeMath::use_hf32: return ACLNN_CUBE_USE_HF32;
      case CubeMath::automatic: break;
    }
    return api_.soc.fp32_keep_dtype ? ACLNN_CUBE_KEEP_DTYPE : ACLNN_CUBE_ALLOW_FP32_DOWN_PRECISION;
  }

  // ---- memory: stream-ordered caching pools (block_pool.hpp)
  std::shared_ptr<Storage> allocate(std::size_t nbytes) override {
    enter();
    void* p = dev_pool_->get(nbytes);
    return Storage::borrowed(p, nbytes, device(), [pool = dev_pool_](void* q) { pool->put(q); });
  }
  /// Records that work queued now on `s` uses the device block that holds `p`: given back
  /// before that work has run, the block waits for it. For work that a caller enqueues
  /// itself (HCCL collectives: hccl_comm.hpp).
  void note_use(const void* p, const Stream& s) { dev_pool_->note_use(p, s.raw()); }
  /// Reuse statistics of device memory (a freed block waits for the streams that used it).
  PoolStats memory_stats() const { return dev_pool_->stats(); }
  /// The same for the pinned host staging buffers of asynchronous copies.
  PoolStats staging_stats() const { return pinned_pool_->stats(); }
  /// Waits for blocks still in use by queued work and gives every cached block back to the runtime.
  void empty_cache() {
    enter();
    dev_pool_->empty_cache();
    pinned_pool_->empty_cache();
  }
  void copy_to_device(void* dst, const void* src, std::size_t n) override {
    enter();
    if (n) acl_check(api_, api_.aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  }
  void copy_to_host(void* dst, const void* src, std::size_t n) override {
    enter();
    if (n) acl_check(api_, api_.aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  }
  /// Through a pinned staging block: from pageable memory the runtime would synchronize the
  /// stream and copy synchronously (and refuse during capture). The source is read now.
  void copy_to_device_async(void* dst, const void* src, std::size_t n, const Stream& s) override {
    if (n == 0) return;
    enter();
    void* pin = pinned_pool_->get(n);
    std::memcpy(pin, src, n);
    pinned_pool_->note_use(pin, s.raw());
    dev_pool_->note_use(dst, s.raw());
    const aclError rc = api_.aclrtMemcpyAsync(dst, n, pin, n, ACL_MEMCPY_HOST_TO_DEVICE, s.raw());
    pinned_pool_->put(pin);
    acl_check(api_, rc, "aclrtMemcpyAsync");
  }
  /// Through a pinned staging block; `dst` holds the data once this backend has synchronized `s`.
  void copy_to_host_async(void* dst, const void* src, std::size_t n, const Stream& s) override {
    if (n == 0) return;
    enter();
    void* pin = pinned_pool_->get(n);
    pinned_pool_->note_use(pin, s.raw());
    dev_pool_->note_use(src, s.raw());
    const aclError rc = api_.aclrtMemcpyAsync(pin, n, src, n, ACL_MEMCPY_DEVICE_TO_HOST, s.raw());
    if (rc != ACL_SUCCESS) {
      pinned_pool_->put(pin);
      acl_check(api_, rc, "aclrtMemcpyAsync");
    }
    std::lock_guard lk(mu_);
    to_host_[s.raw()].push_back(PendingToHost{dst, pin, n});
  }
  void copy_on_device_async(void* dst, const void* src, std::size_t n, const Stream& s) override {
    dev_pool_->note_use(dst, s.raw());
    dev_pool_->note_use(src, s.raw());
    async_copy(dst, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, s);
  }

  // ---- streams and events
  Stream create_stream() override {
    enter();
    aclrtStream s = nullptr;
    acl_check(api_, api_.aclrtCreateStream(&s), "aclrtCreateStream");
    const AclApi* api = &api_;
    return Stream(s, [api](void* p) { (void)api->aclrtDestroyStream(p); });
  }
  Event create_event() override {
    enter();
    aclrtEvent e = nullptr;
    acl_check(api_, api_.aclrtCreateEvent(&e), "aclrtCreateEvent");
    const AclApi* api = &api_;
    return Event(e, [api](void* p) { (void)api->aclrtDestroyEvent(p); });
  }
  void record(const Event& e, const Stream& s) override {
    enter();
    acl_check(api_, api_.aclrtRecordEvent(e.raw(), s.raw()), "aclrtRecordEvent");
  }
  void wait(const Stream& s, const Event& e) override {
    enter();
    acl_check(api_, api_.aclrtStreamWaitEvent(s.raw(), e.raw()), "aclrtStreamWaitEvent");
  }
  void synchronize(const Stream& s) override {
    enter();
    const aclError rc = api_.aclrtSynchronizeStream(s.raw());
    finish_to_host(s.raw(), rc == ACL_SUCCESS);
    acl_check(api_, rc, "aclrtSynchronizeStream");
  }
  void synchronize(const Event& e) override {
    enter();
    acl_check(api_, api_.aclrtSynchronizeEvent(e.raw()), "aclrtSynchronizeEvent");
  }
  float elapsed_ms(const Event& a, const Event& b) override {
    enter();
    float ms = 0;
    acl_check(api_, api_.aclrtEventElapsedTime(&ms, a.raw(), b.raw()), "aclrtEventElapsedTime");
    return ms;
  }
  /// Waits for the eager stream (executables synchronize their own streams).
  void synchronize_all() override { synchronize(stream_); }

  // ---- capture (aclmdlRI*), when the libraries have it
  /// Capture where the libraries have it and the chip supports it (not the Atlas training
  /// series); elsewhere executables replay uncaptured, noted once on stderr.
  bool can_capture() const override {
    if (api_.has_capture()) return true;
    if (api_.aclmdlRICaptureBegin != nullptr && warn_on_fallback)
      std::call_once(capture_note_, [&] {
        std::fprintf(stderr, "[ms] note: %s (%s) does not support stream capture; captured executables replay "
                             "uncaptured\n", device().str().c_str(), api_.soc.name.c_str());
      });
    return false;
  }
  void capture_begin(const Stream& s) override {
    enter();
    MS_CHECK(api_.has_capture(), BackendError, "aclmdlRICaptureBegin: not found in the AscendCL libraries ({}) or "
             "not supported on {}", api_.libraries, api_.soc.name);
    acl_check(api_, api_.aclmdlRICaptureBegin(s.raw(), ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "aclmdlRICaptureBegin");
    std::lock_guard lk(capture_mu_);
    capturing_.insert(s.raw());
  }
  void* capture_end(const Stream& s) override {
    enter();
    {
      std::lock_guard lk(capture_mu_);
      capturing_.erase(s.raw());
    }
    aclmdlRI model = nullptr;
    acl_check(api_, api_.aclmdlRICaptureEnd(s.raw(), &model), "aclmdlRICaptureEnd");
    return model;
  }
  bool capturing(const Stream& s) const override {
    std::lock_guard lk(capture_mu_);
    return capturing_.count(s.raw()) > 0;
  }
  void replay(void* model, const Stream& s) override {
    enter();
    acl_check(api_, api_.aclmdlRIExecuteAsync(model, s.raw()), "aclmdlRIExecuteAsync");
  }
  void destroy_model(void* model) noexcept override {
    if (model != nullptr && api_.aclmdlRIDestroy != nullptr) (void)api_.aclmdlRIDestroy(model);
  }

  // ---- ops: AI Core (aclnn kernels, registered device kernels, device copies) and, when the
  // runtime has the single-operator API, AI CPU (aclopCompileAndExecute with an AI CPU op type).
  using Backend::launch;
  using Backend::supports;
  Engine engine() const override { return Engine::ai_core; }
  std::vector<Engine> engines() const override {
    if (api_.has_aicpu()) return {Engine::ai_core, Engine::ai_cpu};
    return {Engine::ai_core};
  }
  bool supports(Engine e, const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                const ops::Attrs& attrs) const override {
    if (e == Engine::ai_cpu) {
      if (op.is_view() || !api_.has_aicpu()) return false;
      const AicpuRule* r = find_aicpu_rule(op);
      return r != nullptr && r->supports(in, attrs);
    }
    if (e != Engine::ai_core) return false;
    if (op.is_pure_view()) return true;  // a layout change: no kernel
    if (device_kernel_for(op, in, attrs) != nullptr) return true;           // registered for this device type
    if (&op == &ops::copy__op) return in[0].shape == in[1].shape;           // a device-to-device copy
    const AclnnRule* r = find_aclnn_rule(op);
    // bfloat16 only where the chip's kernels take it (A2/A3).
    if (!api_.soc.bf16 && std::any_of(in.begin(), in.end(), [](const ops::TensorMeta& m) { return m.dtype == DType::bf16; }))
      return false;
    return r != nullptr && r->supports(api_, in, attrs);
  }
  /// The device kernel registered for `op` on Ascend when it takes these inputs, or nullptr.
  const DeviceKernel* device_kernel_for(const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                                        const ops::Attrs& attrs) const {
    const DeviceKernel* k = find_device_kernel(op, DeviceType::ascend);
    return k != nullptr && k->accepts(*this, in, attrs) ? k : nullptr;
  }
  /// The aclnn kernels `op` launches on AI Core ("aclrtMemcpyAsync" for copy_), or "" for none.
  std::string_view kernels(const ops::OpDef& op) const {
    if (find_device_kernel(op, DeviceType::ascend) != nullptr) return "registered device kernel";
    if (&op == &ops::copy__op) return "aclrtMemcpyAsync";
    const AclnnRule* r = find_aclnn_rule(op);
    return r ? r->kernels : std::string_view{};
  }
  /// The AI CPU op type `op` runs as ("Erf"), or "" for none.
  std::string_view aicpu_op_type(const ops::OpDef& op) const {
    const AicpuRule* r = find_aicpu_rule(op);
    return r ? r->op_type : std::string_view{};
  }
  double cost_us(Engine e, const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                 std::span<const ops::TensorMeta> out, const ops::Attrs& attrs) const override {
    if (op.is_pure_view()) return 0.0;
    const ops::Cost c = ops::op_cost(op, in, out, attrs);
    return e == Engine::ai_cpu ? cost_model.aicpu_kernel(c) : cost_model.kernel(c);
  }
  /// Launches a supported op on `s`. `out` must be allocated on this device (for views: undefined).
  void launch(Engine e, const ops::OpDef& op, std::span<const AnyTensor> in, std::span<AnyTensor> out,
              const ops::Attrs& attrs, const Stream& s, const ScratchFn& scratch = {}) override {
    enter();
    if (op.is_pure_view()) {
      out[0] = op.view(in[0], attrs);
      return;
    }
    // Every block this launch touches is in use on `s` until the work queued now has run: a
    // block given back before then waits for it (block_pool.hpp).
    for (const AnyTensor& t : in)
      if (t.defined() && t.storage()) dev_pool_->note_use(t.storage()->data, s.raw());
    for (const AnyTensor& t : out)
      if (t.defined() && t.storage()) dev_pool_->note_use(t.storage()->data, s.raw());
    // Eager scratch: pool blocks held until the launch is queued, then given back stream-ordered.
    std::vector<std::shared_ptr<Storage>> held;
    ScratchFn sf = [&, this](std::size_t n) {
      void* p = nullptr;
      if (scratch) {
        p = scratch(n);
      } else {
        held.push_back(allocate(n));
        p = held.back()->data;
      }
      dev_pool_->note_use(p, s.raw());
      return p;
    };
    try {
      if (e == Engine::ai_cpu) {
        const AicpuRule* r = find_aicpu_rule(op);
        MS_CHECK(r != nullptr, DeviceError, "{}: no AI CPU mapping", op.name);
        launch_aicpu(api_, *r, s.raw(), in, out, attrs, sf);
        return;
      }
      MS_CHECK(e == Engine::ai_core, DeviceError, "{}: {} is not an engine of {}", op.name, engine_name(e), device());
      if (const DeviceKernel* k = find_device_kernel(op, DeviceType::ascend)) {
        SmallVec<ops::TensorMeta, 4> im = ops::input_metas(in);
        if (k->accepts(*this, std::span<const ops::TensorMeta>(im.data(), im.size()), attrs)) {
          k->run(DeviceKernelArgs{*this, op, in, out, attrs, s, sf});
          return;
        }
      }
      if (&op == &ops::copy__op) {
        MS_CHECK(in[0].is_contiguous() && in[1].is_contiguous(), DeviceError,
                 "copy_: the device copy needs contiguous tensors");
        copy_on_device_async(in[0].raw_data(), in[1].raw_data(), in[0].nbytes(), s);
        out[0] = in[0];
        return;
      }
      const AclnnRule* r = find_aclnn_rule(op);
      MS_CHECK(r != nullptr, DeviceError, "{}: no aclnn mapping", op.name);
      LaunchCtx ctx{api_, s.raw(), sf, consts_.get(), cube_math_type()};
      r->launch(ctx, in, out, attrs);
    } catch (const Error& err) {
      rethrow_for(op, in, err);
    }
  }
  /// Rethrows `e` with the op and its operands in front; keeps the type and the ACL call, code and message.
  [[noreturn]] void rethrow_for(const ops::OpDef& op, std::span<const AnyTensor> in, const Error& e) const {
    const std::string what = MS_FORMAT("{} on {} ({}): {}", op.name, device(), operands(in), e.message());
    if (e.category() == "backend_error") throw BackendError(what);
    if (e.category() == "device_error") throw DeviceError(what);
    throw;
  }

  // ---- host fallback bookkeeping
  /// Ops that ran on the host because neither an aclnn nor an AI CPU mapping applied (each warned once).
  std::vector<std::string> fallback_ops() const {
    std::lock_guard lk(mu_);
    return {warned_.begin(), warned_.end()};
  }
  /// Records a host fallback of `op`; prints the warning the first time for each op.
  void note_fallback(const ops::OpDef& op, std::span<const ops::TensorMeta> in) {
    std::lock_guard lk(mu_);
    if (warned_.insert(op.name).second && warn_on_fallback)
      std::fprintf(stderr, "[ms] warning: %s has no device mapping (aclnn or AI CPU) for %s on %s; it runs on the host CPU\n",
                   op.name.c_str(), ops::metas_str(in).c_str(), device().str().c_str());
  }

  AscendCostModel cost_model;
  bool warn_on_fallback = true;

  /// Two events for timing eager kernels (created on first use).
  std::pair<Event, Event> eager_timing_events() {
    std::lock_guard lk(timing_mu_);
    if (!timing_.first) timing_ = {create_event(), create_event()};
    return timing_;
  }

 private:
  void async_copy(void* dst, const void* src, std::size_t n, aclrtMemcpyKind kind, const Stream& s) {
    enter();
    if (n) acl_check(api_, api_.aclrtMemcpyAsync(dst, n, src, n, kind, s.raw()), "aclrtMemcpyAsync");
  }
  /// A device-to-host copy staged in pinned memory, finished when its stream is synchronized.
  struct PendingToHost {
    void* dst;
    void* pinned;
    std::size_t n;
  };
  void finish_to_host(aclrtStream s, bool ok) {
    std::vector<PendingToHost> done;
    {
      std::lock_guard lk(mu_);
      auto it = to_host_.find(s);
      if (it == to_host_.end()) return;
      done = std::move(it->second);
      to_host_.erase(it);
    }
    for (const PendingToHost& p : done) {
      if (ok) std::memcpy(p.dst, p.pinned, p.n);
      pinned_pool_->put(p.pinned);
    }
  }
  static std::string operands(std::span<const AnyTensor> in) {
    std::string s;
    for (auto& t : in) s += (s.empty() ? "" : ", ") + MS_FORMAT("{} {}", shape_str(t.shape()), t.dtype());
    return s;
  }

  AclApi api_;
  int index_;
  std::shared_ptr<BlockPool> dev_pool_;     ///< device memory, also held by every Storage from allocate()
  std::shared_ptr<BlockPool> pinned_pool_;  ///< pinned host staging of asynchronous copies
  DeviceBuffer consts_;
  Stream stream_;
  mutable std::mutex mu_;
  std::map<aclrtStream, std::vector<PendingToHost>> to_host_;
  mutable std::once_flag capture_note_;
  mutable std::mutex capture_mu_;
  std::set<void*> capturing_;  ///< streams between capture_begin and capture_end
  std::set<std::string> warned_;
  std::mutex timing_mu_;
  std::pair<Event, Event> timing_;
};

// ------------------------------------------------------------------ process-wide instance

namespace detail {
/// The backend of ascend:index, created on first use from $MS_ASCEND_LIBS. Never destroyed:
/// the runtime's worker threads outlive static destruction order.
inline std::mutex& ascend_instances_mu() {
  static std::mutex mu;
  return mu;
}
inline std::map<int, AscendBackend*>& ascend_instances() {
  static auto* all = new std::map<int, AscendBackend*>;  // reachable until exit, never destroyed
  return *all;
}

/// The profiler's summary line of each device's memory pool: how often a freed block was
/// reused, and how many frees waited for the streams that still used the block.
inline std::string ascend_memory_summary() {
  std::lock_guard lk(ascend_instances_mu());
  std::string s;
  for (const auto& [index, be] : ascend_instances()) {
    if (!be) continue;
    const PoolStats p = be->memory_stats();
    const std::uint64_t requests = p.mallocs + p.reuses;
    s += MS_FORMAT("{}ascend:{} memory pool: {} requests, {} reused ({:.1f}%), {} runtime mallocs, {} deferred frees, "
                     "{} B in use, {} B cached",
                     s.empty() ? "" : "\n", index, requests, p.reuses,
                     requests ? 100.0 * static_cast<double>(p.reuses) / static_cast<double>(requests) : 0.0, p.mallocs,
                     p.deferred, p.in_use_bytes, p.cached_bytes);
  }
  return s;
}

inline Backend& ascend_instance(int index) {
  std::lock_guard lk(ascend_instances_mu());
  auto& b = ascend_instances()[index];
  if (b == nullptr) {
    b = new AscendBackend(default_acl_libs(), index);
    ops::add_summary_line(&ascend_memory_summary);
  }
  return *b;
}
}  // namespace detail

/// The Ascend backend of device `index` (loads and initializes AscendCL on first use).
inline AscendBackend& ascend_backend(int index = 0) {
  return static_cast<AscendBackend&>(detail::ascend_instance(index));
}

// ------------------------------------------------------------------ eager dispatch

namespace detail {

/// Runs `op` on the host: copies the inputs down, runs the CPU kernel, copies results up.
inline void run_on_host(AscendBackend& be, const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                        std::span<AnyTensor> out, const ops::MetaList& metas) {
  SmallVec<ops::TensorMeta, 4> im = ops::input_metas(in);
  be.note_fallback(op, std::span<const ops::TensorMeta>(im.data(), im.size()));
  std::vector<AnyTensor> hin;
  for (auto& t : in) hin.push_back(backend::to(t, Device::cpu()));
  std::vector<AnyTensor> hout(metas.size());
  if (op.is_view()) {  // a writer (copy_): write the host copy of input 0, then upload it over the original
    hout[0] = op.view(hin[0], attrs);
    be.copy_to_device(in[0].raw_data(), ops::detail::contiguous_raw(hin[0]).raw_data(), in[0].nbytes());
    out[0] = in[0];
    return;
  }
  for (std::size_t i = 0; i < metas.size(); ++i) hout[i] = AnyTensor::empty(metas[i].shape, metas[i].dtype);
  op.kernel(ops::KernelArgs{op, hin, hout, attrs});
  for (std::size_t i = 0; i < metas.size(); ++i) out[i] = backend::to(hout[i], be.device());
}

/// The device runner for DeviceType::ascend (installed into ops::detail::device_runners).
inline void ascend_runner(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                          std::span<AnyTensor> out, const ops::MetaList& metas, ops::DeviceCall* call) {
  AscendBackend& be = ascend_backend(in[0].device().index);
  SmallVec<ops::TensorMeta, 4> im = ops::input_metas(in);
  std::optional<Engine> engine = be.engine_for(op, std::span<const ops::TensorMeta>(im.data(), im.size()), attrs);
  // AI CPU operators take dense tensors: a strided view goes the host way (its copy down
  // gathers it) rather than through a device copy that no engine here has a kernel for.
  if (engine == Engine::ai_cpu && !std::all_of(in.begin(), in.end(), [](const AnyTensor& t) { return t.is_contiguous(); }))
    engine.reset();
  if (!engine) {
    run_on_host(be, op, in, attrs, out, metas);
    return;
  }
  if (!op.is_view()) try {
      for (std::size_t i = 0; i < metas.size(); ++i) {
        const auto& m = metas[i];
        auto st = be.allocate(m.nbytes());
        out[i] = AnyTensor::view_of(std::move(st), m.shape, contiguous_strides(m.shape), 0, m.dtype);
      }
    } catch (const Error& e) {
      be.rethrow_for(op, in, e);
    }
  if (call) [[unlikely]] {
    // Observed (profiler, dump): time the kernel with device events. The stream is drained
    // first, so the start event's device time is the host time taken just before it.
    const Stream& st = be.eager_stream();
    be.synchronize(st);
    auto [ev0, ev1] = be.eager_timing_events();
    const auto host0 = std::chrono::steady_clock::now();
    be.record(ev0, st);
    be.launch(*engine, op, in, out, attrs, st);
    be.record(ev1, st);
    be.synchronize(st);
    const auto d = std::chrono::duration<double, std::milli>(be.elapsed_ms(ev0, ev1));
    call->timing.start = host0;
    call->timing.end = host0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
    call->engine = engine_name(*engine);
    call->stream = 0;
    call->timed = true;
    return;
  }
  be.launch(*engine, op, in, out, attrs, be.eager_stream());
}

MS_REGISTRATION(const bool ascend_registered, [] {
  register_backend(DeviceType::ascend, &ascend_instance);
  ops::detail::device_runners[static_cast<std::size_t>(DeviceType::ascend)] = &ascend_runner;
  return true;
}());

}  // namespace detail

}  // namespace ms::backend::ascend
