#pragma once
// User-defined operators, registered from the user's own source file into the same
// registry as the built-in ops: ms::OpBuilder (name, attributes with defaults, shape/dtype
// inference, a CPU kernel, an optional gradient rule, a cost) and ms::define_elementwise
// (one generic formula over scalars and xsimd batches; the library makes the vectorized
// kernel, and the op takes part in elementwise fusion). Must not know about graphs or
// backends (OpBuilder::device_kernel hands its kernel to backend/backend.hpp).
//
//   inline const ms::CustomOp softsign = ms::define_elementwise("softsign",
//       []<class V>(V x) { return x / (ms::simd::c<V>(1) + ms::simd::abs(x)); }, {.doc = "x / (1 + |x|)"});
//   auto y = softsign(x);   // eager, captured, fused, differentiable (with .grad), profiled

#include <functional>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "elementwise.hpp"
#include "views.hpp"

namespace ms {

/// A gradient rule: the forward call and its output gradients -> one gradient per input.
using GradRule = std::function<std::vector<AnyTensor>(const ops::GradArgs&)>;

/// A registered user-defined op: call it like a function.
class CustomOp {
 public:
  explicit CustomOp(const ops::OpDef& def) : def_(&def) {}
  const ops::OpDef& def() const { return *def_; }
  const std::string& name() const { return def_->name; }
  operator const ops::OpDef&() const { return *def_; }  // NOLINT: usable wherever an OpDef is

  /// Runs the op and returns every output.
  std::vector<AnyTensor> call(std::span<const AnyTensor> in, const ops::Attrs& attrs = {}) const {
    return ops::call(*def_, in, attrs);
  }
  /// Runs the op and returns its only output.
  AnyTensor operator()(std::initializer_list<AnyTensor> in, const ops::Attrs& attrs = {}) const {
    return ops::call1(*def_, std::span<const AnyTensor>(in.begin(), in.size()), attrs);
  }
  AnyTensor operator()(const AnyTensor& x, const ops::Attrs& attrs = {}) const { return (*this)({x}, attrs); }
  AnyTensor operator()(const AnyTensor& a, const AnyTensor& b, const ops::Attrs& attrs = {}) const {
    return (*this)({a, b}, attrs);
  }
  template <Element T>
  Tensor<T> operator()(const Tensor<T>& x, const ops::Attrs& attrs = {}) const {
    return Tensor<T>((*this)({x}, attrs));
  }
  template <Element T>
  Tensor<T> operator()(const Tensor<T>& a, const Tensor<T>& b, const ops::Attrs& attrs = {}) const {
    return Tensor<T>((*this)({a, b}, attrs));
  }

 private:
  const ops::OpDef* def_;
};

namespace detail::custom {

/// What a user op keeps beside its OpDef (the OpDef holds plain function pointers only).
struct Impl {
  std::vector<std::pair<std::string, ops::AttrValue>> attrs;  ///< declared attributes and defaults
  std::function<void(std::span<const ops::TensorMeta>, const ops::Attrs&, ops::MetaList&)> infer;
  std::function<void(const ops::KernelArgs&)> kernel;
  std::function<std::vector<AnyTensor>(std::span<const AnyTensor>, const ops::Attrs&)> compute;
  GradRule grad;
  std::function<ops::Cost(std::span<const ops::TensorMeta>, std::span<const ops::TensorMeta>, const ops::Attrs&)> cost;
  std::vector<std::function<void(const ops::OpDef&)>> device_kernels;  ///< registrations run by add()
};

/// Registers a device kernel given to OpBuilder::device_kernel. Declared here and defined by
/// backend/backend.hpp, so that ops/ does not depend on backend/: a program that gives an op
/// a device kernel includes that header (ms/ms.hpp does).
template <class F>
struct DeviceKernelInstaller;

class Table {
 public:
  void put(const ops::OpDef* op, std::unique_ptr<Impl> impl) {
    std::unique_lock lock(mu_);
    map_[op] = std::move(impl);
  }
  const Impl& get(const ops::OpDef& op) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(&op);
    MS_CHECK(it != map_.end(), ValueError, "{}: not a user-defined op", op.name);
    return *it->second;  // never erased: the reference stays valid
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<const ops::OpDef*, std::unique_ptr<Impl>> map_;
};
inline Table& table() {
  static auto* t = new Table();
  return *t;
}

inline std::string_view attr_type_name(std::size_t index) {
  constexpr std::string_view names[] = {"int", "float", "bool", "dtype", "int list", "string"};
  return index < std::size(names) ? names[index] : "?";
}

/// The call's attributes with the declared defaults filled in. Throws ValueError for an
/// undeclared name or a value of the wrong type (an int is accepted where a float is declared).
inline ops::Attrs with_defaults(const ops::OpDef& op, const Impl& impl, const ops::Attrs& given) {
  for (auto& item : given.items()) {
    const std::string& k = item.first;  // not a structured binding: clang 14 cannot capture one
    const ops::AttrValue& v = item.second;
    auto it = std::find_if(impl.attrs.begin(), impl.attrs.end(), [&](auto& d) { return d.first == k; });
    if (it == impl.attrs.end()) {
      std::string known;
      for (auto& d : impl.attrs) known += (known.empty() ? "" : ", ") + d.first;
      MS_THROW(ValueError, "{}: unknown attribute '{}' (attributes: {})", op.name, k, known.empty() ? "none" : known);
    }
    bool ok = v.index() == it->second.index() ||
              (std::holds_alternative<double>(it->second) && std::holds_alternative<std::int64_t>(v));
    MS_CHECK(ok, ValueError, "{}: attribute '{}' must be {}, got {} {}", op.name, k,
             attr_type_name(it->second.index()), attr_type_name(v.index()), ops::Attrs::value_str(v));
  }
  ops::Attrs full = given;
  for (auto& [k, v] : impl.attrs)
    if (!given.has(k)) full.set(k, v);
  return full;
}

/// While a user kernel runs, it works on plain data: ops it calls as helpers are not
/// traced, recorded for autodiff or observed, and it may read tensors on the host.
class KernelScope {
 public:
  KernelScope()
      : tracer_(ops::detail::tracer), observer_(ops::detail::observer), grad_(ops::detail::grad_mode),
        hook_(ms::detail::host_read_hook) {
    ops::detail::tracer = nullptr;
    ops::detail::observer = nullptr;
    ops::detail::grad_mode = false;
    ms::detail::host_read_hook = nullptr;
  }
  ~KernelScope() {
    ops::detail::tracer = tracer_;
    ops::detail::observer = observer_;
    ops::detail::grad_mode = grad_;
    ms::detail::host_read_hook = hook_;
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  ops::Tracer* tracer_;
  ops::OpObserver* observer_;
  bool grad_;
  ms::detail::HostReadHook hook_;
};

inline void infer_thunk(const ops::OpDef& op, std::span<const ops::TensorMeta> in, const ops::Attrs& attrs,
                        ops::MetaList& out) {
  const Impl& impl = table().get(op);
  impl.infer(in, with_defaults(op, impl, attrs), out);
  MS_CHECK(!out.empty(), ValueError, "{}: inference gave no outputs for inputs {}", op.name, ops::metas_str(in));
}

inline std::string meta_str(const AnyTensor& t) { return MS_FORMAT("{} {}", shape_str(t.shape()), t.dtype()); }

inline void kernel_thunk(const ops::KernelArgs& a) {
  const Impl& impl = table().get(a.op);
  const ops::Attrs attrs = with_defaults(a.op, impl, a.attrs);
  SmallVec<ops::TensorMeta, 2> inferred;
  for (auto& t : a.out) inferred.push_back({t.dtype(), t.shape()});
  std::vector<AnyTensor> results;
  {
    KernelScope scope;
    if (impl.kernel) {
      SmallVec<const TensorImpl*, 2> impls;
      for (auto& t : a.out) impls.push_back(t.impl());
      impl.kernel(ops::KernelArgs{a.op, a.in, a.out, attrs});
      for (std::size_t i = 0; i < a.out.size(); ++i)
        MS_CHECK(a.out[i].impl() == impls[i], ValueError,
                 "{}: the kernel replaced output {} ({}) instead of writing into it; inference said {} {}", a.op.name,
                 i, meta_str(a.out[i]), shape_str(inferred[i].shape), inferred[i].dtype);
      return;
    }
    results = impl.compute(a.in, attrs);
  }
  MS_CHECK(results.size() == a.out.size(), ValueError, "{}: the kernel returned {} outputs but inference said {}",
           a.op.name, results.size(), a.out.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const AnyTensor& r = results[i];
    MS_CHECK(r.defined(), ValueError, "{}: the kernel returned an undefined tensor for output {}", a.op.name, i);
    MS_CHECK(r.shape() == inferred[i].shape, ShapeError,
             "{}: the kernel returned {} for output {} but inference said {} {} (inputs {})", a.op.name, meta_str(r), i,
             shape_str(inferred[i].shape), inferred[i].dtype, ops::metas_str(ops::input_metas(a.in)));
    MS_CHECK(r.dtype() == inferred[i].dtype, DTypeError,
             "{}: the kernel returned {} for output {} but inference said {} {} (inputs {})", a.op.name, meta_str(r), i,
             shape_str(inferred[i].shape), inferred[i].dtype, ops::metas_str(ops::input_metas(a.in)));
    MS_CHECK(r.device().is_cpu(), DeviceError, "{}: the kernel returned output {} on {}", a.op.name, i, r.device());
    // Outputs are preallocated (in a graph replay they live in the planned arena): copy in.
    const AnyTensor c = ops::detail::contiguous_raw(r);
    if (c.raw_data() != a.out[i].raw_data()) std::memcpy(a.out[i].raw_data(), c.raw_data(), c.nbytes());
  }
}

inline std::vector<AnyTensor> grad_thunk(const ops::GradArgs& a) {
  const Impl& impl = table().get(a.op);
  const ops::Attrs attrs = with_defaults(a.op, impl, a.attrs);
  return impl.grad(ops::GradArgs{a.op, a.in, a.out, a.grad_out, attrs, a.needs});
}

inline ops::Cost cost_thunk(const ops::OpDef& op, std::span<const ops::TensorMeta> in,
                            std::span<const ops::TensorMeta> out, const ops::Attrs& attrs) {
  const Impl& impl = table().get(op);
  return impl.cost(in, out, with_defaults(op, impl, attrs));
}

/// An elementwise grad rule stored beside an OpDef whose kernel is the shared elementwise kernel.
inline std::vector<AnyTensor> elementwise_grad_thunk(const ops::GradArgs& a) { return table().get(a.op).grad(a); }

/// Adapts a formula (a functor or generic lambda, with or without numeric parameters) to the
/// `F(const double* params)` shape that the block kernels construct.
template <class F>
struct Formula {
  F f;
  explicit Formula(const double* p) : f(make(p)) {}
  static F make(const double* p) {
    if constexpr (std::is_constructible_v<F, const double*>) return F(p);
    else return F{};
  }
  template <class... V>
  auto operator()(V... v) const {
    return f(v...);
  }
};

template <class F>
constexpr int formula_arity() {
  if constexpr (std::is_invocable_v<const F&, float>) return 1;
  else if constexpr (std::is_invocable_v<const F&, float, float>) return 2;
  else return 0;
}

/// The numeric parameters a formula declares: `static constexpr ms::FormulaParam params[] = {...}`.
template <class F>
constexpr bool has_params() {
  return requires { F::params; };
}

}  // namespace detail::custom

/// A numeric attribute of an elementwise formula, read into its constructor's params[] in order.
struct FormulaParam {
  const char* name;
  double default_value;
};

namespace detail::custom {
template <class F>
void params_thunk(const ops::Attrs& attrs, double* p) {
  if constexpr (has_params<F>()) {
    int i = 0;
    for (const FormulaParam& fp : F::params) p[i++] = attrs.f(fp.name, fp.default_value);
  }
}
}  // namespace detail::custom

/// Builds and registers a user-defined op. Required: inference and a kernel (kernel() writing
/// into preallocated outputs, or compute() returning tensors). Optional: attributes with
/// defaults, a gradient rule (without one, a backward pass through the op throws
/// NotImplementedError), a cost (default: one flop per output element plus bytes moved).
class OpBuilder {
 public:
  explicit OpBuilder(std::string name) : impl_(std::make_unique<detail::custom::Impl>()) {
    def_.name = std::move(name);
    def_.category = ops::Category::custom;
    def_.cpu_dtypes = kFloatTypes;
  }
  /// One line shown in the op list.
  OpBuilder& doc(std::string d) { def_.doc = std::move(d); return *this; }
  /// Number of inputs (-1: any number).
  OpBuilder& inputs(int n) { def_.num_inputs = n; return *this; }
  /// Declares an attribute and its default (its type is the default's type).
  OpBuilder& attr(std::string name, ops::AttrValue default_value) {
    def_.attr_names.push_back(name);
    impl_->attrs.emplace_back(std::move(name), std::move(default_value));
    return *this;
  }
  /// Input dtypes the CPU kernel accepts (of input 0). Default: float32 and float64.
  OpBuilder& dtypes(DTypeSet s) { def_.cpu_dtypes = s; return *this; }
  /// Shape/dtype inference: fn(std::span<const TensorMeta> in, const Attrs&) returning a
  /// TensorMeta (one output) or a MetaList. Throw ms::ShapeError / ms::DTypeError on bad inputs.
  template <class F>
  OpBuilder& infer(F fn) {
    impl_->infer = [fn = std::move(fn)](std::span<const ops::TensorMeta> in, const ops::Attrs& a, ops::MetaList& out) {
      using R = std::decay_t<std::invoke_result_t<const F&, std::span<const ops::TensorMeta>, const ops::Attrs&>>;
      if constexpr (std::is_same_v<R, ops::TensorMeta>) out.push_back(fn(in, a));
      else out = fn(in, a);
    };
    return *this;
  }
  /// CPU kernel: fn(const KernelArgs&) fills args.out, allocated (contiguous) from inference.
  template <class F>
  OpBuilder& kernel(F fn) {
    impl_->kernel = std::move(fn);
    return *this;
  }
  /// CPU kernel that returns its outputs: fn(std::span<const AnyTensor> in, const Attrs&) ->
  /// AnyTensor (or a Tensor<T>, or std::vector<AnyTensor>). Each result must match inference.
  template <class F>
  OpBuilder& compute(F fn) {
    impl_->compute = [fn = std::move(fn)](std::span<const AnyTensor> in, const ops::Attrs& a) {
      using R = std::decay_t<std::invoke_result_t<const F&, std::span<const AnyTensor>, const ops::Attrs&>>;
      if constexpr (std::is_same_v<R, std::vector<AnyTensor>>) return fn(in, a);
      else return std::vector<AnyTensor>{AnyTensor(fn(in, a))};
    };
    return *this;
  }
  /// Gradient rule written with registered ops (so it can be captured and fused).
  OpBuilder& grad(GradRule rule) { impl_->grad = std::move(rule); return *this; }
  /// States why the op has no gradient (shown in the error a backward pass through it throws).
  OpBuilder& nondiff(std::string reason) { def_.nondiff_reason = std::move(reason); return *this; }
  /// Cost estimate: fn(in metas, out metas, attrs) -> ops::Cost (flops and bytes).
  template <class F>
  OpBuilder& cost(F fn) {
    impl_->cost = std::move(fn);
    return *this;
  }
  /// A kernel for devices of `type`: fn(const ms::backend::DeviceKernelArgs&) enqueues the op's
  /// work on the given stream (see backend::register_device_kernel; needs ms/backend/backend.hpp).
  /// Without one, the op runs on such a device through its CPU kernel, with copies.
  template <class F>
  OpBuilder& device_kernel(DeviceType type, F fn) {
    impl_->device_kernels.push_back([type, fn = std::move(fn)](const ops::OpDef& op) {
      detail::custom::DeviceKernelInstaller<F>::install(op, type, fn);
    });
    return *this;
  }
  /// Not deterministic: never merged or folded by graph passes.
  OpBuilder& random(bool on = true) { def_.is_random = on; return *this; }

  /// Registers the op (ValueError on a duplicate name or a missing part).
  CustomOp add() {
    MS_CHECK(impl_, ValueError, "register op '{}': this builder was already used", def_.name);
    MS_CHECK(static_cast<bool>(impl_->infer), ValueError, "register op '{}': missing shape/dtype inference",
             def_.name);
    MS_CHECK(impl_->kernel || impl_->compute, ValueError, "register op '{}': missing CPU kernel", def_.name);
    if (def_.doc.empty()) def_.doc = "user-defined op";
    def_.infer = &detail::custom::infer_thunk;
    def_.kernel = &detail::custom::kernel_thunk;
    def_.grad = impl_->grad ? &detail::custom::grad_thunk : &ops::missing_grad;
    if (impl_->cost) def_.cost = &detail::custom::cost_thunk;
    const ops::OpDef& d = ops::registry().add(def_);
    auto device_kernels = std::move(impl_->device_kernels);
    detail::custom::table().put(&d, std::move(impl_));
    for (auto& install : device_kernels) install(d);
    return CustomOp(d);
  }

 private:
  ops::OpDef def_;
  std::unique_ptr<detail::custom::Impl> impl_;
};

/// Options of an elementwise op defined by a formula.
struct ElementwiseOptions {
  std::string doc;
  double flops = 1;            ///< flops per element (for the cost model and the profiler)
  GradRule grad;               ///< optional gradient rule
  std::string nondiff_reason;  ///< why there is no gradient rule
};

#if MS_KERNEL_BODIES  // the kernels are built here: core/linkage.hpp
namespace detail::custom {
template <class F, DTypeSet Types>
CustomOp define_elementwise_op(std::string name, ElementwiseOptions opt) {
  constexpr int arity = formula_arity<F>();
  static_assert(arity == 1 || arity == 2,
                "define_elementwise: the formula must be callable with one or two values (template <class V> V f(V))");
  static_assert(std::is_default_constructible_v<F> || std::is_constructible_v<F, const double*>,
                "define_elementwise: the formula must be stateless (a lambda without captures, or a functor "
                "constructible from its parameters)");
  ops::ElementwiseSpec spec;
  spec.name = std::move(name);
  spec.doc = opt.doc.empty() ? "user-defined elementwise op" : std::move(opt.doc);
  spec.flops = opt.flops;
  spec.nondiff_reason = opt.nondiff_reason;
  if constexpr (has_params<F>()) {
    static_assert(std::size(F::params) <= ops::kMaxElementwiseParams, "define_elementwise: too many parameters");
    for (const FormulaParam& p : F::params) spec.attr_names.emplace_back(p.name);
    spec.params = &params_thunk<F>;
  }
  ops::OpDef d = ops::make_elementwise_op<Formula<F>, arity, Types>(std::move(spec));
  d.grad = opt.grad ? &elementwise_grad_thunk : &ops::missing_grad;
  const ops::OpDef& ref = ops::registry().add(std::move(d));
  auto impl = std::make_unique<Impl>();
  impl->grad = std::move(opt.grad);
  table().put(&ref, std::move(impl));
  return CustomOp(ref);
}
}  // namespace detail::custom

/// Defines an elementwise op from one generic formula `template <class V> V f(V x[, V y])`,
/// called with scalars and with xsimd batches. The library builds the vectorized kernels for
/// the dtypes in Types, broadcasting (binary ops), and the block functions that elementwise
/// fusion chains together. The formula is a lambda without captures or a functor.
template <DTypeSet Types = kFloatTypes, class F>
CustomOp define_elementwise(std::string name, F /*formula*/, ElementwiseOptions opt = {}) {
  return detail::custom::define_elementwise_op<F, Types>(std::move(name), std::move(opt));
}

/// The same with the formula given as a type: a functor with numeric attributes declares
/// `static constexpr ms::FormulaParam params[] = {{"alpha", 1.0}}` and a constructor from
/// `const double*` that receives their values in that order.
template <class F, DTypeSet Types = kFloatTypes>
CustomOp define_elementwise(std::string name, ElementwiseOptions opt = {}) {
  return detail::custom::define_elementwise_op<F, Types>(std::move(name), std::move(opt));
}

#else
// With separate kernels a unit does not see the kernel machinery (core/linkage.hpp): the
// unit that defines elementwise ops asks for it.
template <class F>
inline constexpr bool kKernelBodiesNeeded = false;
template <DTypeSet Types = kFloatTypes, class F>
CustomOp define_elementwise(std::string, F, ElementwiseOptions = {}) {
  static_assert(kKernelBodiesNeeded<F>,
                "define_elementwise compiles SIMD kernels in this unit: #define MS_KERNEL_BODIES 1 before "
                "including <ms/ms.hpp> in it (see <ms/core/linkage.hpp>)");
  return CustomOp(ops::registry().get("add"));
}
template <class F, DTypeSet Types = kFloatTypes>
CustomOp define_elementwise(std::string, ElementwiseOptions = {}) {
  static_assert(kKernelBodiesNeeded<F>,
                "define_elementwise compiles SIMD kernels in this unit: #define MS_KERNEL_BODIES 1 before "
                "including <ms/ms.hpp> in it (see <ms/core/linkage.hpp>)");
  return CustomOp(ops::registry().get("add"));
}
#endif  // MS_KERNEL_BODIES

}  // namespace ms
