#pragma once
// The Backend interface: what a device offers the rest of ms (memory, copies to
// and from the host, streams, events, "can you run this op, at what cost",
// launch, synchronize), the CPU backend as one implementation, the per-device
// backend registry, the device kernels registered for ops per device type, and
// tensor movement between devices (ms::to, Tensor::to).
// Must not know about any particular accelerator API: those live in their own
// folders (backend/ascend/) and register themselves here.

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>

#include "../core/linkage.hpp"
#include "../ops/dispatch.hpp"
#include "../ops/views.hpp"

namespace ms::backend {

/// Where a node of a device graph runs (GraphEngine's engines).
enum class Engine : std::uint8_t {
  host_cpu,  ///< the host's CPU kernels (op.kernel); needs the data on the host
  ai_core,   ///< the accelerator's compute cores (aclnn kernels on Ascend)
  ai_cpu,    ///< the accelerator's own CPU cores: slower than ai_core, but on device memory (no host round trip)
};

constexpr std::string_view engine_name(Engine e) {
  switch (e) {
    case Engine::host_cpu: return "host_cpu";
    case Engine::ai_core: return "ai_core";
    case Engine::ai_cpu: return "ai_cpu";
  }
  return "?";
}

/// A backend-owned handle (stream or event) released by its backend when the last copy goes.
class Handle {
 public:
  Handle() = default;
  Handle(void* raw, std::function<void(void*)> release) : h_(raw, std::move(release)) {}
  void* raw() const { return h_.get(); }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  std::shared_ptr<void> h_;
};
/// An in-order queue of device work. A default-constructed Stream is the backend's default stream.
struct Stream : Handle {
  using Handle::Handle;
};
/// A marker recorded on a stream; other streams (or the host) wait for it.
struct Event : Handle {
  using Handle::Handle;
};

/// A device runtime. All copies take byte counts; device pointers are those of Storage::data.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string_view name() const = 0;

  // ---- memory
  /// A new block of `nbytes` on this device, freed when the Storage goes.
  virtual std::shared_ptr<Storage> allocate(std::size_t nbytes) = 0;
  /// Synchronous copies; they wait for nothing queued on streams (synchronize first).
  virtual void copy_to_device(void* dst, const void* host_src, std::size_t nbytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t nbytes) = 0;
  /// Copies ordered on `s` after the work queued there before them.
  virtual void copy_to_device_async(void* dst, const void* host_src, std::size_t nbytes, const Stream& s) = 0;
  virtual void copy_to_host_async(void* host_dst, const void* src, std::size_t nbytes, const Stream& s) = 0;
  virtual void copy_on_device_async(void* dst, const void* src, std::size_t nbytes, const Stream& s) = 0;

  // ---- streams and events
  virtual Stream create_stream() = 0;
  virtual Event create_event() = 0;
  /// Marks the point of `s` that `e` stands for.
  virtual void record(const Event& e, const Stream& s) = 0;
  /// Work queued on `s` after this call starts once `e` has completed.
  virtual void wait(const Stream& s, const Event& e) = 0;
  /// Blocks the host until everything queued on `s` has run; throws BackendError on a device fault.
  virtual void synchronize(const Stream& s) = 0;
  virtual void synchronize(const Event& e) = 0;
  /// Milliseconds between two completed events.
  virtual float elapsed_ms(const Event& start, const Event& end) = 0;
  /// Waits for everything on every stream of this backend.
  virtual void synchronize_all() = 0;

  // ---- stream capture (optional): record the work queued on a stream once, replay it later
  virtual bool can_capture() const { return false; }
  virtual void capture_begin(const Stream&) { MS_THROW(BackendError, "{}: stream capture is not supported", name()); }
  /// Ends the capture and returns the captured model (released with destroy_model).
  virtual void* capture_end(const Stream&) { MS_THROW(BackendError, "{}: stream capture is not supported", name()); }
  /// Enqueues one replay of `model` on `s`.
  virtual void replay(void*, const Stream&) { MS_THROW(BackendError, "{}: stream capture is not supported", name()); }
  virtual void destroy_model(void*) noexcept {}
  /// True between capture_begin(s) and capture_end(s): work queued on `s` is recorded, not
  /// run (a kernel that would otherwise order itself with events on other streams keeps to `s`).
  virtual bool capturing(const Stream&) const { return false; }

  // ---- ops, per engine
  // A backend offers one or more engines (on Ascend: AI Core, and AI CPU when the runtime has
  // it). Each says whether it runs an op natively, at what cost, and launches it. Graph
  // compilation picks among them by cost (device_executor.hpp); eager calls take the first
  // engine in engines() order that runs the op (engine_for).

  /// The engines this backend offers, the primary one (engine()) first.
  virtual std::vector<Engine> engines() const { return {engine()}; }
  /// The primary engine: views and copies run there.
  virtual Engine engine() const = 0;
  /// True when `engine` runs `op` on inputs with these metas natively (no host fallback).
  virtual bool supports(Engine engine, const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                        const ops::Attrs& attrs) const = 0;
  /// Estimated microseconds for one call of `op` on `engine` (launch overhead included).
  virtual double cost_us(Engine engine, const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                         std::span<const ops::TensorMeta> out, const ops::Attrs& attrs) const = 0;
  /// Device scratch memory for one launch, valid until the launched work has run; empty:
  /// the backend manages it (freed when the stream is synchronized).
  using ScratchFn = std::function<void*(std::size_t)>;
  /// Enqueues `op` on `s`, run by `engine` (which supports it); `out` holds tensors already
  /// allocated on this device (views: undefined).
  virtual void launch(Engine engine, const ops::OpDef& op, std::span<const AnyTensor> in, std::span<AnyTensor> out,
                      const ops::Attrs& attrs, const Stream& s, const ScratchFn& scratch = {}) = 0;

  // ---- ops, on whichever engine runs them
  /// The first engine of engines() that runs `op` natively, or nullopt (the host fallback).
  std::optional<Engine> engine_for(const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                                   const ops::Attrs& attrs) const {
    for (Engine e : engines())
      if (supports(e, op, in, attrs)) return e;
    return std::nullopt;
  }
  /// True when some engine of this backend runs `op` natively.
  bool supports(const ops::OpDef& op, std::span<const ops::TensorMeta> in, const ops::Attrs& attrs) const {
    return engine_for(op, in, attrs).has_value();
  }
  /// Enqueues `op` on the engine engine_for picks; BackendError when none runs it.
  void launch(const ops::OpDef& op, std::span<const AnyTensor> in, std::span<AnyTensor> out, const ops::Attrs& attrs,
              const Stream& s, const ScratchFn& scratch = {}) {
    SmallVec<ops::TensorMeta, 4> m = ops::input_metas(in);
    const std::span<const ops::TensorMeta> metas(m.data(), m.size());
    const std::optional<Engine> e = engine_for(op, metas, attrs);
    MS_CHECK(e.has_value(), BackendError, "{}: no engine of {} runs it for {}", op.name, device(),
             ops::metas_str(metas));
    launch(*e, op, in, out, attrs, s, scratch);
  }
};

/// The host cost model shared by engine assignment: a few GFLOP/s per core and memory bandwidth.
struct HostCostModel {
  double launch_us = 0.5;
  double flops_per_us = 2e4;  ///< 20 GFLOP/s
  double bytes_per_us = 1e4;  ///< 10 GB/s
  double operator()(const ops::Cost& c) const { return launch_us + c.flops / flops_per_us + c.bytes / bytes_per_us; }
};

/// The CPU: memory from the caching host allocator, streams that run everything at once.
class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  std::string_view name() const override { return "cpu"; }
  std::shared_ptr<Storage> allocate(std::size_t nbytes) override { return Storage::host(nbytes); }
  void copy_to_device(void* dst, const void* src, std::size_t n) override { copy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, std::size_t n) override { copy(dst, src, n); }
  void copy_to_device_async(void* dst, const void* src, std::size_t n, const Stream&) override { copy(dst, src, n); }
  void copy_to_host_async(void* dst, const void* src, std::size_t n, const Stream&) override { copy(dst, src, n); }
  void copy_on_device_async(void* dst, const void* src, std::size_t n, const Stream&) override { copy(dst, src, n); }
  // Work runs when it is launched, so streams and events carry no state.
  Stream create_stream() override { return Stream(nullptr, [](void*) {}); }
  Event create_event() override { return Event(nullptr, [](void*) {}); }
  void record(const Event&, const Stream&) override {}
  void wait(const Stream&, const Event&) override {}
  void synchronize(const Stream&) override {}
  void synchronize(const Event&) override {}
  float elapsed_ms(const Event&, const Event&) override { return 0.0f; }
  void synchronize_all() override {}
  using Backend::launch;
  using Backend::supports;
  Engine engine() const override { return Engine::host_cpu; }
  bool supports(Engine e, const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                const ops::Attrs&) const override {
    if (e != Engine::host_cpu) return false;
    if (op.is_view()) return true;
    return op.kernel != nullptr && (in.empty() || op.cpu_dtypes.contains(in[static_cast<std::size_t>(std::min<int>(
                                                      op.elementwise.dispatch_input, static_cast<int>(in.size()) - 1))].dtype));
  }
  double cost_us(Engine, const ops::OpDef& op, std::span<const ops::TensorMeta> in, std::span<const ops::TensorMeta> out,
                 const ops::Attrs& attrs) const override {
    if (op.is_pure_view()) return 0.0;
    return HostCostModel{}(ops::op_cost(op, in, out, attrs));
  }
  void launch(Engine, const ops::OpDef& op, std::span<const AnyTensor> in, std::span<AnyTensor> out,
              const ops::Attrs& attrs, const Stream&, const ScratchFn& = {}) override {
    if (op.is_view()) out[0] = op.view(in[0], attrs);
    else op.kernel(ops::KernelArgs{op, in, out, attrs});
  }

 private:
  static void copy(void* dst, const void* src, std::size_t n) {
    if (n) std::memcpy(dst, src, n);
  }
};

// ------------------------------------------------------------------ registry

namespace detail {
using BackendFactory = Backend& (*)(int index);
inline std::array<BackendFactory, 4>& backend_factories() {
  static std::array<BackendFactory, 4> f{};
  return f;
}
inline Backend& cpu_backend_instance(int) {
  static CpuBackend cpu;
  return cpu;
}
}  // namespace detail

/// Makes `factory` the provider of backends for devices of `type` (called by a backend's header).
inline bool register_backend(DeviceType type, detail::BackendFactory factory) {
  detail::backend_factories()[static_cast<std::size_t>(type)] = factory;
  return true;
}

/// The backend that owns device `d`; throws DeviceError when none is registered.
inline Backend& backend_for(Device d) {
  if (d.is_cpu()) return detail::cpu_backend_instance(0);
  auto f = detail::backend_factories()[static_cast<std::size_t>(d.type)];
  MS_CHECK(f != nullptr, DeviceError, "no backend is registered for device {} (include its backend header)", d);
  return f(d.index);
}

/// The device types that have a registered backend (the CPU not included), in enum order.
MS_IMPL std::vector<DeviceType> registered_device_types();

/// The name of a device type as a device string starts: "cpu", "ascend".
MS_IMPL std::string device_type_name(DeviceType type);

// ------------------------------------------------------------------ device kernels

/// What a device kernel receives. It enqueues its work on `stream` and returns at once.
struct DeviceKernelArgs {
  Backend& backend;
  const ops::OpDef& op;
  std::span<const AnyTensor> in;      ///< on the backend's device
  std::span<AnyTensor> out;           ///< allocated on the device, contiguous, shaped by the op's inference
  const ops::Attrs& attrs;
  const Stream& stream;
  const Backend::ScratchFn& scratch;  ///< device memory valid until the work enqueued now has run

  /// Enqueues the registered op `other` on the same stream, on the first engine of the backend
  /// that runs it natively (BackendError when none does).
  void launch(const ops::OpDef& other, std::span<const AnyTensor> i, std::span<AnyTensor> o,
              const ops::Attrs& a = {}) const;
  /// The same for a one-output op given by name: `k.launch("tanh", {k.in[0]}, t)`.
  void launch(std::string_view other, std::initializer_list<AnyTensor> i, AnyTensor o, const ops::Attrs& a = {}) const {
    launch(ops::registry().get(other), std::span<const AnyTensor>(i.begin(), i.size()), std::span<AnyTensor>(&o, 1), a);
  }
  /// A contiguous device tensor for an intermediate result, in scratch memory.
  AnyTensor temp(const ops::TensorMeta& m) const;
  /// A temporary with the shape and dtype of `like`.
  AnyTensor temp(const AnyTensor& like) const { return temp(ops::TensorMeta{like.dtype(), like.shape()}); }
};

/// A device kernel: enqueues an op's work on a device stream (see DeviceKernelArgs).
using DeviceKernelFn = std::function<void(const DeviceKernelArgs&)>;
/// Whether a device kernel handles these inputs; otherwise the backend's own mapping (or the
/// host fallback) runs the op.
using DeviceKernelSupportsFn =
    std::function<bool(const Backend&, std::span<const ops::TensorMeta>, const ops::Attrs&)>;

/// One registered device kernel.
struct DeviceKernel {
  const ops::OpDef* op = nullptr;
  DeviceType device = DeviceType::cpu;
  DeviceKernelFn run;
  DeviceKernelSupportsFn supports;  ///< empty: the dtypes of the op's CPU kernel
  bool accepts(const Backend& be, std::span<const ops::TensorMeta> in, const ops::Attrs& attrs) const {
    if (supports) return supports(be, in, attrs);
    if (in.empty()) return true;
    const int k = std::min<int>(std::max(op->elementwise.dispatch_input, 0), static_cast<int>(in.size()) - 1);
    return op->cpu_dtypes.contains(in[static_cast<std::size_t>(k)].dtype);
  }
};

namespace detail {
struct DeviceKernelTable {
  std::shared_mutex mu;
  std::map<std::pair<const ops::OpDef*, DeviceType>, DeviceKernel> kernels;  ///< never erased
  std::atomic<bool> any{false};
};
inline DeviceKernelTable& device_kernel_table() {
  static auto* t = new DeviceKernelTable();  // outlives static destruction, like the op registry's users
  return *t;
}
}  // namespace detail

/// Registers `fn` as the kernel of `op` on devices of `type`: a backend of that type runs the op
/// with it (eagerly and in device graphs) instead of its own mapping or the host fallback.
/// Works for user-defined and built-in ops. Returns true, so that a namespace-scope
/// `inline const bool` can register at start-up. ValueError for the CPU (it runs the op's
/// own kernel) and for a second kernel of the same op and device type.
MS_IMPL bool register_device_kernel(const ops::OpDef& op, DeviceType type, DeviceKernelFn fn,
                                   DeviceKernelSupportsFn supports = {});
/// The same for the registered op named `op_name` (ValueError when there is none: register the op first).
MS_IMPL bool register_device_kernel(std::string_view op_name, DeviceType type, DeviceKernelFn fn,
                                   DeviceKernelSupportsFn supports = {});

/// The device kernel registered for `op` on devices of `type`, or nullptr.
MS_IMPL const DeviceKernel* find_device_kernel(const ops::OpDef& op, DeviceType type);

/// The names of the ops with a device kernel for `type`, sorted.
MS_IMPL std::vector<std::string> device_kernel_ops(DeviceType type);

}  // namespace ms::backend

namespace ms::detail::custom {
/// OpBuilder::device_kernel's registration (declared in ops/custom.hpp, which must not include this header).
template <class F>
struct DeviceKernelInstaller {
  static void install(const ops::OpDef& op, DeviceType type, const F& fn) {
    backend::register_device_kernel(op, type, backend::DeviceKernelFn(fn));
  }
};
}  // namespace ms::detail::custom

namespace ms::backend {

// ------------------------------------------------------------------ moving tensors

namespace detail {
/// Elements from the first to one past the last element a view can touch (non-negative strides).
MS_IMPL std::int64_t view_span(const AnyTensor& t);
}  // namespace detail

/// A copy of `t` on device `d` (the same tensor when it is already there). Host to device
/// copies the elements contiguously; device to host waits for the device's queued work,
/// copies the span the view covers and keeps the view's strides.
MS_IMPL AnyTensor to(const AnyTensor& t, Device d);

}  // namespace ms::backend

namespace ms {
using backend::to;

template <Element T>
Tensor<T> Tensor<T>::to(Device d) const {
  return Tensor<T>(backend::to(*this, d));
}
}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::backend {
MS_IMPL std::vector<DeviceType> registered_device_types() {
  std::vector<DeviceType> types;
  for (std::size_t i = 0; i < detail::backend_factories().size(); ++i)
    if (detail::backend_factories()[i] != nullptr) types.push_back(static_cast<DeviceType>(i));
  return types;
}

MS_IMPL std::string device_type_name(DeviceType type) {
  const std::string s = Device{type, 0}.str();
  return s.substr(0, s.find(':'));
}

MS_IMPL bool register_device_kernel(const ops::OpDef& op, DeviceType type, DeviceKernelFn fn,
                                   DeviceKernelSupportsFn supports) {
  MS_CHECK(type != DeviceType::cpu, ValueError,
           "register_device_kernel: {}: the CPU runs the op's own kernel; device kernels are for other devices", op.name);
  MS_CHECK(static_cast<bool>(fn), ValueError, "register_device_kernel: {}: empty kernel for {}", op.name,
           device_type_name(type));
  MS_CHECK(!op.is_view(), ValueError, "register_device_kernel: {} is a view (it moves no data) and needs no kernel",
           op.name);
  auto& t = detail::device_kernel_table();
  std::unique_lock lk(t.mu);
  auto [it, fresh] = t.kernels.try_emplace({&op, type});
  MS_CHECK(fresh, ValueError, "register_device_kernel: {} already has a device kernel for {}", op.name,
           device_type_name(type));
  it->second = DeviceKernel{&op, type, std::move(fn), std::move(supports)};
  t.any.store(true, std::memory_order_release);
  return true;
}

MS_IMPL bool register_device_kernel(std::string_view op_name, DeviceType type, DeviceKernelFn fn,
                                   DeviceKernelSupportsFn supports) {
  const ops::OpDef* op = ops::registry().find(op_name);
  MS_CHECK(op != nullptr, ValueError, "register_device_kernel: no op named '{}' is registered (register the op first)",
           op_name);
  return register_device_kernel(*op, type, std::move(fn), std::move(supports));
}

MS_IMPL const DeviceKernel* find_device_kernel(const ops::OpDef& op, DeviceType type) {
  auto& t = detail::device_kernel_table();
  if (!t.any.load(std::memory_order_acquire)) return nullptr;  // the common case: no lock
  std::shared_lock lk(t.mu);
  auto it = t.kernels.find({&op, type});
  return it == t.kernels.end() ? nullptr : &it->second;
}

MS_IMPL std::vector<std::string> device_kernel_ops(DeviceType type) {
  auto& t = detail::device_kernel_table();
  std::shared_lock lk(t.mu);
  std::vector<std::string> names;
  for (auto& [key, k] : t.kernels)
    if (key.second == type) names.push_back(k.op->name);
  std::sort(names.begin(), names.end());
  return names;
}

MS_IMPL void DeviceKernelArgs::launch(const ops::OpDef& other, std::span<const AnyTensor> i, std::span<AnyTensor> o,
                                     const ops::Attrs& a) const {
  SmallVec<ops::TensorMeta, 4> metas = ops::input_metas(i);
  const std::span<const ops::TensorMeta> mt(metas.data(), metas.size());
  const std::optional<Engine> e = backend.engine_for(other, mt, a);
  MS_CHECK(e.has_value(), BackendError,
           "{}: its device kernel launches {} on {} ({}), which that backend does not run natively", op.name,
           other.name, backend.device(), ops::metas_str(mt));
  backend.launch(*e, other, i, o, a, stream, scratch);
}

MS_IMPL AnyTensor DeviceKernelArgs::temp(const ops::TensorMeta& m) const {
  const std::size_t bytes = std::max<std::size_t>(m.nbytes(), 1);
  MS_CHECK(static_cast<bool>(scratch), BackendError, "{}: no scratch memory for a device kernel's temporary on {}",
           op.name, backend.device());
  auto st = Storage::borrowed(scratch(bytes), bytes, backend.device());
  return AnyTensor::view_of(std::move(st), m.shape, contiguous_strides(m.shape), 0, m.dtype);
}

namespace detail {
MS_IMPL std::int64_t view_span(const AnyTensor& t) {
  if (t.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int i = 0; i < t.dim(); ++i) {
    MS_CHECK(t.strides()[i] >= 0, ValueError, "to: a view with negative stride {} (shape {}) cannot be moved",
             t.strides()[i], shape_str(t.shape()));
    last += (t.shape()[i] - 1) * t.strides()[i];
  }
  return last + 1;
}

}  // namespace detail
MS_IMPL AnyTensor to(const AnyTensor& t, Device d) {
  MS_CHECK(t.defined(), ValueError, "to: undefined tensor");
  const Device from = t.device();
  if (from == d) return t;
  if (from.is_cpu()) {
    AnyTensor src = t.is_contiguous() ? t : ops::detail::contiguous_raw(t);
    Backend& be = backend_for(d);
    auto st = be.allocate(std::max<std::size_t>(src.nbytes(), 1));
    be.copy_to_device(st->data, src.raw_data(), src.nbytes());
    return AnyTensor::view_of(std::move(st), t.shape(), contiguous_strides(t.shape()), 0, t.dtype());
  }
  Backend& src_be = backend_for(from);
  src_be.synchronize_all();
  const std::int64_t span = detail::view_span(t);
  const std::size_t bytes = static_cast<std::size_t>(span) * dtype_size(t.dtype());
  auto host = Storage::host(std::max<std::size_t>(bytes, 1));
  src_be.copy_to_host(host->data, t.raw_data(), bytes);
  AnyTensor h = AnyTensor::view_of(std::move(host), t.shape(), t.strides(), 0, t.dtype());
  if (!d.is_cpu()) return to(h, d);
  return h.is_contiguous() ? h : ops::detail::contiguous_raw(h);
}

}  // namespace ms::backend
#endif
