#pragma once
// The op registry: OpDef (one definition per operator: name, category, attributes,
// shape/dtype inference, CPU kernel, elementwise formula, gradient rule, cost,
// supported dtypes) and the process-wide Registry that lists them.
// Every layer (eager dispatch, graph capture, fusion, autodiff, backends, profiler)
// reads ops from here; there is no second list. Must not know about graphs.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "../backend/cpu/kernels/abi.hpp"
#include "../core/linkage.hpp"
#include "../core/tensor.hpp"

namespace ms::ops {

/// What kind of op this is; passes ask about categories instead of naming ops.
enum class Category : std::uint8_t {
  unary,        ///< elementwise, one input
  binary,       ///< elementwise with broadcasting, two inputs
  ternary,      ///< elementwise with broadcasting, three inputs (where)
  compare,      ///< elementwise comparison producing bool
  reduction,    ///< reduces axes (sum, mean, max, argmax, var, ...)
  softmax,      ///< softmax and log_softmax over an axis (layer-level norms are nn)
  linalg,       ///< matmul, linear
  movement,     ///< copies data into a new layout (concat, gather, cast, contiguous...)
  view,         ///< aliases its input's storage (reshape, transpose, slice, expand...)
  creation,     ///< makes a tensor from attributes only (fill, arange...)
  nn,           ///< neural-network ops (conv, pooling, losses, ...)
  custom,       ///< user-defined ops
  fused,        ///< a fused group of ops made by graph fusion
  collective,   ///< communicates with other processes (all_reduce, broadcast, ...; dist/ops.hpp)
};

constexpr std::string_view category_name(Category c) {
  switch (c) {
    case Category::unary: return "unary";
    case Category::binary: return "binary";
    case Category::ternary: return "ternary";
    case Category::compare: return "compare";
    case Category::reduction: return "reduction";
    case Category::softmax: return "softmax";
    case Category::linalg: return "linalg";
    case Category::movement: return "movement";
    case Category::view: return "view";
    case Category::creation: return "creation";
    case Category::nn: return "nn";
    case Category::custom: return "custom";
    case Category::fused: return "fused";
    case Category::collective: return "collective";
  }
  return "?";
}

/// True for categories whose ops compute each output element from the same-index input elements.
constexpr bool is_elementwise(Category c) {
  return c == Category::unary || c == Category::binary || c == Category::ternary || c == Category::compare;
}

using IntList = std::vector<std::int64_t>;
namespace detail {
/// "[2, 3, -1]": how messages and attribute dumps print an IntList.
inline std::string ints_str(const IntList& v) { return MS_FORMAT("[{}]", ::ms::detail::join_text(v, ", ")); }
}  // namespace detail
/// One attribute value.
using AttrValue = std::variant<std::int64_t, double, bool, DType, IntList, std::string>;

/// An op's attributes: a small ordered list of (name, value); compared for CSE, printed in dumps.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(std::string key, AttrValue v) {
    for (auto& [k, old] : items_)
      if (k == key) { old = std::move(v); return *this; }
    items_.emplace_back(std::move(key), std::move(v));
    return *this;
  }
  const AttrValue* find(std::string_view key) const {
    for (auto& [k, v] : items_)
      if (k == key) return &v;
    return nullptr;
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }

  template <class V>
  const V& get(std::string_view key) const {
    const AttrValue* v = find(key);
    MS_CHECK(v != nullptr, ValueError, "attribute '{}' is missing", key);
    const V* p = std::get_if<V>(v);
    MS_CHECK(p != nullptr, ValueError, "attribute '{}' has the wrong type: expected {}, got {} {}", key,
             kind_name(AttrValue(V{})), kind_name(*v), value_str(*v));
    return *p;
  }
  /// What an attribute value is, for messages: "an int", "a dtype (one of float32, ...)".
  static MS_IMPL std::string kind_name(const AttrValue& v);
  std::int64_t i(std::string_view key) const { return get<std::int64_t>(key); }
  std::int64_t i(std::string_view key, std::int64_t dflt) const { return has(key) ? i(key) : dflt; }
  /// The integer attribute `key`, or nothing when the node has none (an optional seed).
  std::optional<std::int64_t> maybe_i(std::string_view key) const {
    return has(key) ? std::optional<std::int64_t>(i(key)) : std::nullopt;
  }
  /// A floating attribute; an integer value is accepted and converted.
  double f(std::string_view key) const {
    const AttrValue* v = find(key);
    if (v && std::holds_alternative<std::int64_t>(*v)) return static_cast<double>(std::get<std::int64_t>(*v));
    return get<double>(key);
  }
  double f(std::string_view key, double dflt) const { return has(key) ? f(key) : dflt; }
  bool b(std::string_view key, bool dflt = false) const { return has(key) ? get<bool>(key) : dflt; }
  DType dtype(std::string_view key) const { return get<DType>(key); }
  const IntList& ints(std::string_view key) const { return get<IntList>(key); }
  const std::string& str(std::string_view key) const { return get<std::string>(key); }

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  friend MS_IMPL bool operator==(const Attrs& a, const Attrs& b);

  MS_IMPL std::size_t hash() const;
  /// "axis=1, keepdim=true" (used in IR dumps and errors).
  MS_IMPL std::string str() const;
  static MS_IMPL std::string value_str(const AttrValue& v);

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL std::string Attrs::kind_name(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "an int";
    case 1: return "a float";
    case 2: return "a bool";
    case 3: {
      std::string names;
      for (int i = 0; i < kNumDTypes; ++i)
        names += (i ? ", " : "") + std::string(dtype_name(static_cast<DType>(i)));
      return "a dtype (one of " + names + ")";
    }
    case 4: return "a list of ints";
    default: return "a string";
  }
}
MS_IMPL bool operator==(const Attrs& a, const Attrs& b) { return a.items_ == b.items_; }
MS_IMPL std::size_t Attrs::hash() const {
  std::size_t h = 1469598103934665603ull;
  auto mix = [&](std::size_t x) { h = (h ^ x) * 1099511628211ull; };
  for (auto& [k, v] : items_) {
    mix(std::hash<std::string>{}(k));
    mix(v.index());
    std::visit([&](auto& x) {
      using X = std::decay_t<decltype(x)>;
      if constexpr (std::is_same_v<X, IntList>) for (auto e : x) mix(std::hash<std::int64_t>{}(e));
      else if constexpr (std::is_same_v<X, DType>) mix(static_cast<std::size_t>(x));
      else mix(std::hash<X>{}(x));
    }, v);
  }
  return h;
}
MS_IMPL std::string Attrs::str() const {
  std::string out;
  for (auto& [k, v] : items_) {
    if (!out.empty()) out += ", ";
    out += k + "=" + value_str(v);
  }
  return out;
}
MS_IMPL std::string Attrs::value_str(const AttrValue& v) {
  return std::visit([](auto& x) -> std::string {
    using X = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<X, IntList>) return detail::ints_str(x);
    else if constexpr (std::is_same_v<X, std::string>) return "\"" + x + "\"";
    else if constexpr (std::is_same_v<X, double>) return MS_FORMAT("{}", x);
    else return MS_FORMAT("{}", x);
  }, v);
}
#endif

/// One field of an op's typed attribute struct (ops/attr_struct.hpp), as `ms-op info OP` prints it.
struct AttrFieldInfo {
  std::string name;
  std::string kind;  ///< "an int", "a list of 2 ints (height, width)", ...
  std::string dflt;  ///< the default in dump syntax ("[1, 1]", "false"); "unset" when absent means none
  bool required = false;
};

/// The attributes an op's typed struct declares, in the order its string form lists them.
struct AttrSchema {
  std::string type;  ///< the struct ("Conv2dAttrs")
  std::vector<AttrFieldInfo> fields;
  const AttrFieldInfo* find(std::string_view name) const {
    for (auto& f : fields)
      if (f.name == name) return &f;
    return nullptr;
  }
  /// "stride, padding, dilation, groups" for messages.
  std::string names() const {
    std::string out;
    for (auto& f : fields) out += (out.empty() ? "" : ", ") + f.name;
    return out;
  }
};

/// Dtype and shape of a value, all that inference needs.
struct TensorMeta {
  DType dtype = DType::f32;
  Shape shape;
  /// Bytes of a contiguous tensor of this dtype and shape.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel(shape)) * dtype_size(dtype); }
  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};
using MetaList = SmallVec<TensorMeta, 2>;

/// Estimated work of one op call.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

struct OpDef;
struct GradArgs;

/// The gradient rule of an op that has none but must not be silently skipped by autodiff
/// (user-defined ops): autodiff records the op, and a backward pass that reaches it throws
/// NotImplementedError naming the op. differentiable() is false for such ops.
inline std::vector<AnyTensor> missing_grad(const GradArgs& args);

/// Arguments of a CPU kernel: inputs, preallocated outputs (shaped by inference), attributes.
struct KernelArgs {
  const OpDef& op;
  std::span<const AnyTensor> in;
  std::span<AnyTensor> out;
  const Attrs& attrs;
};

/// Arguments of a gradient rule: the forward call and the gradients of its outputs
/// (undefined entries mean zero). Returns one gradient per input (undefined = none).
struct GradArgs {
  const OpDef& op;
  std::span<const AnyTensor> in;
  std::span<const AnyTensor> out;
  std::span<const AnyTensor> grad_out;
  const Attrs& attrs;
  /// Per input: whether its gradient is used (empty: all are). A rule may return an
  /// undefined gradient for an input that needs none and skip computing it (a first
  /// layer's input gradient).
  std::span<const bool> needs = {};
  bool needs_grad(std::size_t i) const { return needs.empty() || (i < needs.size() && needs[i]); }
};

using InferFn = void (*)(const OpDef& op, std::span<const TensorMeta> in, const Attrs& attrs, MetaList& out);
using KernelFn = void (*)(const KernelArgs& args);
using ViewFn = AnyTensor (*)(const AnyTensor& in, const Attrs& attrs);
using GradFn = std::vector<AnyTensor> (*)(const GradArgs& args);
using CostFn = Cost (*)(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& attrs);

/// Extracts the numeric parameters of an elementwise op from its attributes.
using ParamsFn = void (*)(const Attrs& attrs, double* params);

struct ElementwiseInfo {
  BlockFn block[kNumDTypes] = {};
  /// Unary float/double ops: the block kernel with folded scalar steps, one per kAffineShape.
  BlockFn affine[kNumDTypes][kAffineVariants] = {};
  ParamsFn params = nullptr;
  int dispatch_input = 0;     ///< which input's dtype selects the block function
  double flops_per_element = 1;
  /// The qualified name of the op's functor ("ms::ops::fx::Exp"), constructed from the
  /// params array, for the CPU code generator (backend/cpu/codegen.hpp); empty when the
  /// functor cannot be named from generated code (custom ops).
  std::string formula;
};

/// The kernel tables of one elementwise op compiled for one CPU level (see
/// <ms/core/cpu_isa.hpp>). A level's unit holds one constant row per op, in the ELF section
/// `ms_isa_rows` (no code runs to make them); the registry binds an op's ElementwiseInfo to
/// the row of the selected level. 64-byte aligned and sized, so that the linker lays the
/// rows of every unit end to end whatever alignment the compiler gives each one.
struct alignas(64) IsaKernelRow {
  int level = 0;              ///< cpu::Isa
  const char* name = nullptr;  ///< the op's name
  BlockFn block[kNumDTypes] = {};
  BlockFn affine[kNumDTypes][kAffineVariants] = {};
};

/// What an op's expansion (OpDef::expand) builds with: nodes of other registered ops and
/// constants, in a graph whose values are named by ids. (Not ms::OpBuilder, which defines
/// and registers a user's op.)
class ExpansionBuilder {
 public:
  virtual ~ExpansionBuilder() = default;
  /// Dtype and shape of value v.
  virtual TensorMeta meta(std::int32_t v) const = 0;
  /// Appends a node of `op` reading `in`; returns its output values.
  virtual std::vector<std::int32_t> node(const OpDef& op, std::vector<std::int32_t> in, Attrs attrs = {}) = 0;
  /// A 0-d constant holding x in dtype d (as a scalar operand of an eager op would be).
  virtual std::int32_t scalar(double x, DType d) = 0;
};
/// Builds an op from other registered ops: given its input values and attributes, returns
/// values equal to its outputs.
using ExpandFn = std::vector<std::int32_t> (*)(ExpansionBuilder& b, std::span<const std::int32_t> in, const Attrs& attrs);

/// One operator, defined once.
struct OpDef {
  std::string name;
  Category category = Category::custom;
  int num_inputs = 1;               ///< -1: variadic
  std::string doc;                  ///< one line, shown in the op list
  std::vector<std::string> attr_names;  ///< documented attributes, e.g. {"axis", "keepdim"}
  /// The typed attribute struct the op's inference, kernel and gradient read (attr_schema<T>()
  /// of ops/attr_struct.hpp), or null for ops that read their Attrs by name. Registration
  /// fills attr_names from it when they are empty and checks that they name the same fields.
  const AttrSchema* attr_schema = nullptr;
  /// Parameter names of the inputs (optional), named by errors: "for 'index' (input 1)".
  std::vector<std::string> input_names;
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;        ///< CPU kernel (null for view ops)
  ViewFn view = nullptr;            ///< view ops: makes the aliasing output
  GradFn grad = nullptr;            ///< null: not differentiable
  std::string nondiff_reason;       ///< why grad is null (integer output, piecewise constant, ...)
  CostFn cost = nullptr;
  DTypeSet cpu_dtypes = kNumericTypes;  ///< input dtypes the CPU kernel accepts
  ElementwiseInfo elementwise;      ///< for unary/binary/ternary/compare ops
  bool is_random = false;           ///< results differ between calls (never CSE'd or folded)
  /// Element i of each output is computed from element i of the inputs of the output's shape
  /// (other inputs are 0-d), all read before it is written: an output may be written over
  /// such an input (an optimizer update writes its results into the parameter and state).
  bool index_aligned = false;
  /// The op built from other registered ops, for backends without a kernel for it (null: none).
  ExpandFn expand = nullptr;
  /// Side effects: the inputs the op writes into, in place (bit k: input k). copy_ writes its
  /// destination; batch_norm its running statistics, when `writes_when` says so for the
  /// node (training mode, statistics given). Graph passes read this one field: DCE keeps such
  /// a node though its outputs are unused, CSE never merges two of them, folding never runs
  /// one, and capture binds a written tensor from outside as a parameter (mutable state).
  std::uint32_t writes_inputs = 0;
  bool (*writes_when)(const Attrs& attrs, std::size_t num_inputs) = nullptr;

  bool differentiable() const { return grad != nullptr && grad != &missing_grad; }
  bool is_view() const { return view != nullptr; }
  /// A view op that writes into its first input and returns it (copy_), and one that only
  /// re-describes its input's memory (reshape, transpose, slice...).
  bool is_writing_view() const { return view != nullptr && (writes_inputs & 1u) != 0 && writes_when == nullptr; }
  bool is_pure_view() const { return view != nullptr && (writes_inputs & 1u) == 0; }
  /// True when a node of this op with these attributes and inputs writes into input k.
  bool writes_input(const Attrs& attrs, std::size_t num_inputs, std::size_t k) const {
    return k < num_inputs && k < 32 && ((writes_inputs >> k) & 1u) != 0 &&
           (writes_when == nullptr || writes_when(attrs, num_inputs));
  }
  /// True when such a node writes into any of its inputs.
  bool has_side_effect(const Attrs& attrs, std::size_t num_inputs) const {
    for (std::size_t k = 0; k < num_inputs && k < 32; ++k)
      if (writes_input(attrs, num_inputs, k)) return true;
    return false;
  }
};

/// The process-wide list of ops, in registration order.
class Registry {
 public:
  /// Registers an op; throws ValueError on a duplicate or incomplete definition.
  const OpDef& add(OpDef def) {
    std::lock_guard<std::mutex> lock(mu_);
    MS_CHECK(!def.name.empty(), ValueError, "register op: an op needs a name");
    MS_CHECK(by_name_.find(def.name) == by_name_.end(), ValueError,
             "register op: an op named '{}' is already registered", def.name);
    MS_CHECK(def.infer != nullptr, ValueError, "register op '{}': missing shape/dtype inference", def.name);
    MS_CHECK(def.kernel != nullptr || def.view != nullptr, ValueError, "register op '{}': missing CPU kernel", def.name);
    if (def.attr_schema) check_schema(def);
    ops_.push_back(std::make_unique<OpDef>(std::move(def)));
    OpDef& own = *ops_.back();
    by_name_[own.name] = &own;
    owned_[&own] = &own;
    return own;
  }
  /// Attaches a gradient rule (or the reason there is none) to the registered op `op`, the
  /// handle add() returned (for user-defined ops, which usually pass theirs to add() in
  /// OpDef::grad, and for the gradient tables of autograd/, one row per op). ValueError when
  /// `op` is not an op of this registry (a copy of one, say).
  void set_grad(const OpDef& op, GradFn grad, std::string nondiff_reason = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    OpDef& own = owned(op, "set_grad");
    own.grad = grad;
    own.nondiff_reason = std::move(nondiff_reason);
  }
  /// Replaces the block and affine kernel tables of the registered elementwise op `op` (the
  /// kernels of another CPU level; see ops/isa_dispatch.hpp). Entries that are null in `t` stay.
  void set_elementwise_tables(const OpDef& op, const IsaKernelRow& t) {
    std::lock_guard<std::mutex> lock(mu_);
    OpDef& own = owned(op, "set_elementwise_tables");
    for (int d = 0; d < kNumDTypes; ++d) {
      if (t.block[d]) own.elementwise.block[d] = t.block[d];
      for (int v = 0; v < kAffineVariants; ++v)
        if (t.affine[d][v]) own.elementwise.affine[d][v] = t.affine[d][v];
    }
  }
  /// The op named `name`, or nullptr.
  const OpDef* find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
  }
  /// The op named `name`; throws ValueError listing close names when missing.
  const OpDef& get(std::string_view name) const {
    const OpDef* op = find(name);
    MS_CHECK(op != nullptr, ValueError, "no op named '{}' is registered", name);
    return *op;
  }
  /// Every registered op, in registration order.
  std::vector<const OpDef*> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const OpDef*> out;
    for (auto& p : ops_) out.push_back(p.get());
    return out;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_.size();
  }

 private:
  /// attr_names and the typed schema of `def` name the same attributes (attr_names may list them
  /// in another order, the one its documentation uses); empty attr_names are filled from it.
  static void check_schema(OpDef& def) {
    const AttrSchema& s = *def.attr_schema;
    if (def.attr_names.empty())
      for (auto& f : s.fields) def.attr_names.push_back(f.name);
    for (auto& n : def.attr_names)
      MS_CHECK(s.find(n) != nullptr, ValueError, "register op '{}': attribute '{}' is not a field of {} ({})", def.name,
               n, s.type, s.names());
    MS_CHECK(def.attr_names.size() == s.fields.size(), ValueError,
             "register op '{}': attr_names list {} of the {} fields of {} ({})", def.name, def.attr_names.size(),
             s.fields.size(), s.type, s.names());
  }
  /// The registry's own, mutable definition behind a handle it gave out; the caller holds mu_.
  OpDef& owned(const OpDef& op, std::string_view what) {
    auto it = owned_.find(&op);
    MS_CHECK(it != owned_.end(), ValueError, "{}: op '{}' is not a registered op (pass the handle that registering it returned)",
             what, op.name);
    return *it->second;
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<OpDef>> ops_;
  std::map<std::string, const OpDef*, std::less<>> by_name_;
  std::unordered_map<const OpDef*, OpDef*> owned_;  ///< handle -> the definition in ops_
};

inline std::vector<AnyTensor> missing_grad(const GradArgs& a) {
  MS_THROW(NotImplementedError,
           "backward: op '{}' has no gradient rule{}{}; define one when registering the op, or detach() its inputs",
           a.op.name, a.op.nondiff_reason.empty() ? "" : ": ", a.op.nondiff_reason);
}

/// The registry of all ops (built-in and user-defined).
inline Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

/// Default cost: one flop per output element (times flops_per_element), bytes read + written.
inline Cost default_cost(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                         const Attrs&) {
  Cost c;
  for (auto& m : in) c.bytes += static_cast<double>(m.nbytes());
  for (auto& m : out) {
    c.bytes += static_cast<double>(m.nbytes());
    c.flops += static_cast<double>(numel(m.shape)) * op.elementwise.flops_per_element;
  }
  if (op.category == Category::view) c = {};
  return c;
}

/// Cost of one call of `op`.
inline Cost op_cost(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                    const Attrs& attrs) {
  return op.cost ? op.cost(op, in, out, attrs) : default_cost(op, in, out, attrs);
}

/// "(3, 4) float32, (4,) float32" for error messages.
inline std::string metas_str(std::span<const TensorMeta> ms) {
  std::string s;
  for (auto& m : ms) {
    if (!s.empty()) s += ", ";
    s += MS_FORMAT("{} {}", shape_str(m.shape), m.dtype);
  }
  return s;
}

}  // namespace ms::ops
