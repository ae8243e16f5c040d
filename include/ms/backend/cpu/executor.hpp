#pragma once
// Compiling a graph for the CPU and replaying it: compile() optimizes the graph,
// plans one arena for every intermediate (reusing an input's buffer in place when
// an elementwise op is its last reader), resolves each node's kernel once, and
// binds buffers, so Executable::run() only checks the inputs and calls kernels.
// Replays are deterministic: the same inputs give bit-identical outputs.

#include <atomic>
#include <chrono>
#include <cstring>

#include "../../graph/passes.hpp"
#include "../../ops/dnnl.hpp"
#include "../../ops/inplace.hpp"
#include "../../ops/views.hpp"
#include "../compile_options.hpp"
#include "../compiled_graph.hpp"
#include "../memory_plan.hpp"
#include "codegen.hpp"
#include "fused_eval.hpp"

namespace ms::backend {

using graph::ValueId;
using graph::ValueKind;


class Executable;
namespace detail {
/// Builds the steps of `ex` (one per node) and the tables that bind values into them.
MS_IMPL void build_steps(Executable& ex, const ValuePlan& vp);
/// Binds what is known at compile time: parameters, constants, static views, arena values
/// and values written straight into a parameter.
MS_IMPL void bind_planned_values(Executable& ex, const ValuePlan& vp, const std::vector<ValueId>& writes_param);
/// Elementwise kernels on flat operands: resolves the block kernel now (the replay hot path).
MS_IMPL void resolve_flat_elementwise(Executable& ex, const ValuePlan& vp);
}  // namespace detail

/// A graph compiled for the CPU (see the top of this file).
class Executable final : public CompiledGraph {
 public:
  Executable() = default;
  Executable(Executable&&) = default;
  Executable& operator=(Executable&&) = default;
  Executable(const Executable&) = delete;  // steps point into the owned graph
  Executable& operator=(const Executable&) = delete;

  /// Runs the graph on `inputs` (dtype, shape and device must match the captured ones).
  MS_IMPL std::vector<AnyTensor> run(std::span<const AnyTensor> inputs) override;
  /// oneDNN primitives this executable owns (taken on its first replay; 0 without oneDNN).
  std::size_t owned_primitives() const { return primitives_.size(); }

  using CompiledGraph::run;  // run({x, y})

  Device device() const override { return Device::cpu(); }
  const graph::Graph& graph() const override { return graph_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  const MemoryPlan* planned_memory() const override { return &plan_; }
  std::string dump() const override { return graph_.str(); }
  const graph::PassReport& pass_report() const { return report_; }
  /// Fused nodes that run generated code (CompileOptions::codegen).
  int codegen_kernels() const { return codegen_kernels_; }
  std::size_t num_steps() const { return steps_.size(); }
  /// Bytes of the arena holding every intermediate.
  std::size_t arena_bytes() const { return plan_.peak; }
  /// Identifies this executable in profiles and dumps (graph_id).
  int id() const override { return id_; }

 private:
  enum class StepKind { kernel, fused, view, static_view, elementwise };
  /// An elementwise op whose operands are, by their metas, each full-size or one element:
  /// the block kernel is resolved at compile time and called on the flat buffers, as
  /// ops::run_elementwise's fast path would after checking the same things per call.
  struct FlatElementwise {
    ops::BlockFn fn = nullptr;
    int nin = 0;
    std::int64_t n = 0;
    std::int64_t st[ops::kMaxArity] = {};  ///< 0: one element, 1: full size
    std::int64_t esize[ops::kMaxArity] = {};
    std::int64_t osize = 0;
    bool check[ops::kMaxArity] = {};  ///< full-size operand whose layout can change per run (inputs, params, runtime views)
    bool inline_scalar[ops::kMaxArity] = {};  ///< a one-element constant, copied into `scalar`
    const char* ptr[ops::kMaxArity] = {};  ///< data of operands whose memory is fixed at compile time (else null)
    char* optr = nullptr;                  ///< the output's data when it lives in the arena (else null)
    double params[ops::kMaxElementwiseParams] = {};
    alignas(16) unsigned char scalar[ops::kMaxArity][16] = {};
  };
  struct Step {
    const graph::Node* node;
    StepKind kind;
    std::vector<AnyTensor> in, out;
    std::string label;  ///< op name, or fused[...] with the members
    FlatElementwise ew;  ///< for StepKind::elementwise
  };
  /// Drops this run's references to the caller's inputs, to the fresh outputs and to views
  /// of them (all rebound by the next run), so that the executable keeps no caller memory
  /// alive between runs, and an output the caller has released goes back to the allocator
  /// before the next run asks for one (which then gets the same, cache-warm block).
  void release_run_bindings() {
    const AnyTensor none;
    for (ValueId v : graph_.inputs()) bind(v, none);
    for (ValueId v : fresh_) bind(v, none);
    for (ValueId v : runtime_views_) bind(v, none);
  }
  inline void run_elementwise_step(Step& s);  // defined with run(), into which it inlines
  friend Executable compile(graph::Graph g, const CompileOptions& opt);
  friend void detail::build_steps(Executable& ex, const ValuePlan& vp);
  friend void detail::bind_planned_values(Executable& ex, const ValuePlan& vp, const std::vector<ValueId>& writes_param);
  friend void detail::resolve_flat_elementwise(Executable& ex, const ValuePlan& vp);

  /// Sets the tensor of value v and writes it into every step that reads or produces it.
  void bind(ValueId v, const AnyTensor& t) {
    current_[static_cast<std::size_t>(v)] = t;
    for (auto [step, slot] : readers_[static_cast<std::size_t>(v)]) steps_[step].in[slot] = t;
    auto p = producer_slot_[static_cast<std::size_t>(v)];
    if (p.first >= 0) steps_[static_cast<std::size_t>(p.first)].out[static_cast<std::size_t>(p.second)] = t;
  }

  graph::Graph graph_;
  graph::PassReport report_;
  int codegen_kernels_ = 0;
  ops::OpCallInfo info(const Step& s) const {
    return ops::OpCallInfo{s.label, s.node->name, id_, 0, "cpu"};
  }

  std::vector<Step> steps_;
  int id_ = ops::detail::next_graph_id();
  std::vector<AnyTensor> current_;
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> readers_;
  std::vector<std::pair<int, int>> producer_slot_;
  std::vector<ValueId> fresh_;  ///< graph outputs produced by kernels: allocated per run
  std::vector<bool> input_viewed_;  ///< per graph input: read directly by a view op
  std::vector<ValueId> runtime_views_;  ///< outputs of views computed on every run
  std::shared_ptr<Storage> arena_;
  std::vector<std::shared_ptr<const void>> primitives_;  ///< oneDNN primitives of the nodes (ops/dnnl.hpp)
  bool primitives_owned_ = false;
  MemoryPlan plan_;
};

/// Optimizes `g` (unless disabled), plans its memory and returns a replayable executable.
MS_IMPL Executable compile(graph::Graph g, const CompileOptions& opt = {});

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
MS_IMPL std::vector<AnyTensor> Executable::run(std::span<const AnyTensor> inputs) {
  check_inputs(graph_, inputs);
  const auto& gin = graph_.inputs();
  for (std::size_t i = 0; i < gin.size(); ++i) {
    // View ops on an input were traced on a contiguous tensor (reshape needs one): give them one.
    if (input_viewed_[i] && !inputs[i].is_contiguous()) [[unlikely]]
      bind(gin[i], ops::detail::contiguous_raw(inputs[i]));
    else
      bind(gin[i], inputs[i]);
  }
  for (ValueId v : fresh_) bind(v, AnyTensor::empty(graph_.value(v).meta.shape, graph_.value(v).meta.dtype));
  ops::OpObserver* obs = ops::detail::observer;
  // The first replay takes ownership of the oneDNN primitives its nodes use (made when
  // the graph was traced): later replays only execute them, whatever else fills the cache.
  ops::detail::PrimitiveOwner owner(primitives_owned_ ? nullptr : &primitives_);
  for (Step& s : steps_) {
    std::uint64_t token = 0;
    if (obs) [[unlikely]] token = obs->begin(*s.node->op, s.in, s.node->attrs, info(s));
    switch (s.kind) {
      case StepKind::kernel: s.node->op->kernel(ops::KernelArgs{*s.node->op, s.in, s.out, s.node->attrs}); break;
      case StepKind::elementwise: run_elementwise_step(s); break;
      case StepKind::fused: cpu::run_fused(*s.node->fused, s.in, s.out[0]); break;
      case StepKind::view:
        s.out[0] = s.node->op->view(s.in[0], s.node->attrs);
        bind(s.node->outputs[0], s.out[0]);
        break;
      case StepKind::static_view: break;
    }
    if (obs) [[unlikely]] obs->end(token, *s.node->op, s.in, s.node->attrs, s.out, info(s));
    ops::detail::make_progress();  // a collective started by an earlier step advances
  }
  primitives_owned_ = true;
  std::vector<AnyTensor> outs;
  outs.reserve(graph_.outputs().size());
  for (ValueId v : graph_.outputs()) {
    const graph::Value& val = graph_.value(v);
    AnyTensor t = current_[static_cast<std::size_t>(v)];
    bool owned = std::find(fresh_.begin(), fresh_.end(), v) != fresh_.end() || val.kind == ValueKind::input;
    if (!owned) {  // arena views, params and constants: hand out a copy the next run cannot change
      AnyTensor c = AnyTensor::empty(t.shape(), t.dtype());
      const AnyTensor src[1] = {t};
      ops::run_elementwise(ops::copy_op.elementwise.block[static_cast<int>(t.dtype())], src, c, nullptr);
      t = c;
    }
    outs.push_back(t);
  }
  release_run_bindings();
  return outs;
}

inline void Executable::run_elementwise_step(Step& s) {
  const FlatElementwise& ew = s.ew;
  const char* base[ops::kMaxArity];
  for (int j = 0; j < ew.nin; ++j) {
    if (ew.ptr[j]) {
      base[j] = ew.ptr[j];
    } else if (ew.inline_scalar[j]) {
      base[j] = reinterpret_cast<const char*>(ew.scalar[j]);
    } else {
      const AnyTensor& t = s.in[static_cast<std::size_t>(j)];
      if (ew.check[j] && !t.is_contiguous()) [[unlikely]] {
        s.node->op->kernel(ops::KernelArgs{*s.node->op, s.in, s.out, s.node->attrs});
        return;
      }
      base[j] = static_cast<const char*>(t.raw_data());
    }
  }
  char* obase = ew.optr ? ew.optr : static_cast<char*>(s.out[0].raw_data());
  if (ew.n < kParallelGrain) {  // what parallel_for does below its grain, without the call
    if (ew.n > 0) ew.fn(reinterpret_cast<const void* const*>(base), ew.st, obase, ew.n, ew.params);
    return;
  }
  parallel_for(ew.n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    const void* p[ops::kMaxArity];
    for (int j = 0; j < ew.nin; ++j) p[j] = base[j] + b * ew.st[j] * ew.esize[j];
    ew.fn(p, ew.st, obase + b * ew.osize, e - b, ew.params);
  });
}

namespace detail {
/// For each value, the parameter whose storage it may be written into (or -1): the single
/// output V of an elementwise or plain fused node N, or any output V of an index-aligned
/// node N (OpDef::index_aligned: adam_update), such that
///  * a copy_ node writes V, unbroadcast, into parameter P, and it is the only write into P;
///  * V is not a graph output, and P is contiguous with V's shape and dtype;
///  * N reads P, if at all, directly (index-aligned: each element is read before it is
///    written), never through a view;
///  * no node after N other than that copy_ reads P's old value (P or a view of it).
inline std::vector<ValueId> writeback_targets(const graph::Graph& G, const std::vector<bool>& is_output) {
  const auto& nodes = G.nodes();
  const std::size_t nv = G.values().size();
  std::vector<ValueId> target(nv, -1);
  if (G.params().empty()) return target;
  // old_of[v]: the parameter whose pre-write contents v shows; writes[p]: copy_s into p.
  std::vector<ValueId> old_of(nv, -1), any_of(nv, -1);
  std::vector<int> writes(nv, 0);
  for (ValueId p : G.params()) old_of[static_cast<std::size_t>(p)] = any_of[static_cast<std::size_t>(p)] = p;
  for (const graph::Node& n : nodes) {
    for (std::size_t k = 0; k < n.inputs.size(); ++k)  // every write into a parameter counts
      if (n.op->writes_input(n.attrs, n.inputs.size(), k) && any_of[static_cast<std::size_t>(n.inputs[k])] >= 0)
        writes[static_cast<std::size_t>(any_of[static_cast<std::size_t>(n.inputs[k])])]++;
    if (!n.op->is_view() || n.inputs.empty()) continue;
    const auto src = static_cast<std::size_t>(n.inputs[0]);
    const bool write = n.op->is_writing_view();
    for (ValueId o : n.outputs) {
      any_of[static_cast<std::size_t>(o)] = any_of[src];
      old_of[static_cast<std::size_t>(o)] = write ? -1 : old_of[src];
    }
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    const bool plain_fused = n.fused && n.fused->plain();
    const bool single = n.outputs.size() == 1 && (plain_fused || ops::is_elementwise(n.op->category));
    if (n.op->is_view() || !(single || (n.op->index_aligned && !n.fused))) continue;
    for (const ValueId v : n.outputs) {
      if (is_output[static_cast<std::size_t>(v)]) continue;
      std::size_t copy_at = 0;
      int copies = 0;
      for (std::size_t j = i + 1; j < nodes.size(); ++j)
        if (nodes[j].op == &ops::copy__op && nodes[j].inputs.size() == 2 && nodes[j].inputs[1] == v) {
          ++copies;
          copy_at = j;
        }
      if (copies != 1) continue;
      const ValueId p = nodes[copy_at].inputs[0];
      const graph::Value& pv = G.value(p);
      const auto& vm = G.value(v).meta;
      if (pv.kind != ValueKind::param || writes[static_cast<std::size_t>(p)] != 1 || !(pv.meta == vm) ||
          !pv.data.defined() || !pv.data.is_contiguous())
        continue;
      bool ok = true;
      for (ValueId x : n.inputs) ok = ok && (old_of[static_cast<std::size_t>(x)] != p || x == p);
      for (std::size_t j = i + 1; j < nodes.size() && ok; ++j) {
        if (j == copy_at) continue;
        for (ValueId x : nodes[j].inputs) ok = ok && old_of[static_cast<std::size_t>(x)] != p;
      }
      // Two outputs of one node never go into the same parameter (writes[p] == 1 already).
      if (ok) target[static_cast<std::size_t>(v)] = p;
    }
  }
  return target;
}
}  // namespace detail

MS_IMPL Executable compile(graph::Graph g, const CompileOptions& opt) {
  Executable ex;
  if (opt.optimize) ex.report_ = graph::optimize(g, opt.passes);
  graph::verify(g);
  ex.graph_ = std::move(g);
  graph::Graph& G = ex.graph_;
  if (opt.codegen) ex.codegen_kernels_ = generate_fused_kernels(G);
  cpu::plan_dnnl_epilogues(G);  // GEMM epilogues as oneDNN post-ops where they can be
  const std::size_t nv = G.values().size();
  ex.current_.assign(nv, AnyTensor());
  ex.readers_.assign(nv, {});
  ex.producer_slot_.assign(nv, {-1, -1});
  std::vector<bool> is_output(nv, false);
  for (ValueId v : G.outputs()) is_output[static_cast<std::size_t>(v)] = true;
  ValuePlanOptions popt;
  popt.inplace = opt.inplace;
  if (opt.elide_writeback) popt.writes_param = detail::writeback_targets(G, is_output);
  ValuePlan vp = plan_values(G, popt);
  ex.plan_ = vp.memory;
  ex.arena_ = Storage::host(std::max<std::size_t>(ex.plan_.peak, 1));
  detail::build_steps(ex, vp);
  detail::bind_planned_values(ex, vp, popt.writes_param);
  detail::resolve_flat_elementwise(ex, vp);
  return ex;
}

namespace detail {
MS_IMPL void build_steps(Executable& ex, const ValuePlan& vp) {
  const graph::Graph& G = ex.graph_;
  const auto& nodes = G.nodes();
  // Steps with pre-bound tensors.
  ex.steps_.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    Executable::Step s{&n, Executable::StepKind::kernel, std::vector<AnyTensor>(n.inputs.size()),
                       std::vector<AnyTensor>(n.outputs.size()), graph::node_label(n), {}};
    if (n.fused) s.kind = Executable::StepKind::fused;
    else if (n.op->is_view())
      s.kind = vp.home[static_cast<std::size_t>(n.outputs[0])] == ValueHome::runtime_view || n.op->is_writing_view()
                   ? Executable::StepKind::view
                   : Executable::StepKind::static_view;
    ex.steps_.push_back(std::move(s));
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      ex.readers_[static_cast<std::size_t>(n.inputs[k])].emplace_back(i, k);
    for (std::size_t k = 0; k < n.outputs.size(); ++k)
      ex.producer_slot_[static_cast<std::size_t>(n.outputs[k])] = {static_cast<int>(i), static_cast<int>(k)};
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (ex.steps_[i].kind == Executable::StepKind::view)
      for (ValueId v : nodes[i].outputs) ex.runtime_views_.push_back(v);
  ex.input_viewed_.assign(G.inputs().size(), false);
  for (std::size_t k = 0; k < G.inputs().size(); ++k)
    for (auto [step, slot] : ex.readers_[static_cast<std::size_t>(G.inputs()[k])])
      if (nodes[step].op->is_view()) ex.input_viewed_[k] = true;
}

MS_IMPL void bind_planned_values(Executable& ex, const ValuePlan& vp, const std::vector<ValueId>& writes_param) {
  const graph::Graph& G = ex.graph_;
  const auto& nodes = G.nodes();
  const std::size_t nv = G.values().size();
  // Bind fixed values now, in schedule order so static views see their sources.
  for (std::size_t v = 0; v < nv; ++v)
    if (vp.home[v] == ValueHome::fixed && G.values()[v].kind != ValueKind::node) ex.bind(static_cast<ValueId>(v), G.values()[v].data);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      auto v = static_cast<std::size_t>(n.outputs[k]);
      if (n.op->is_view()) {
        if (ex.steps_[i].kind == Executable::StepKind::static_view)
          ex.bind(n.outputs[k], n.op->view(ex.current_[static_cast<std::size_t>(n.inputs[0])], n.attrs));
        continue;
      }
      if (vp.home[v] == ValueHome::arena) {
        ex.bind(n.outputs[k], arena_view(ex.arena_, vp, n.outputs[k], G.value(n.outputs[k]).meta));
      } else if (vp.home[v] == ValueHome::fresh) {
        ex.fresh_.push_back(n.outputs[k]);
      } else if (vp.home[v] == ValueHome::param_alias) {
        // The parameter's own handle: a storage swapped in between runs is followed too.
        ex.bind(n.outputs[k], ex.current_[static_cast<std::size_t>(writes_param[v])]);
      }
    }
  }
}

MS_IMPL void resolve_flat_elementwise(Executable& ex, const ValuePlan& vp) {
  const graph::Graph& G = ex.graph_;
  const auto& nodes = G.nodes();
  // Elementwise kernels on flat operands: resolve the block kernel now (the replay hot path).
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    Executable::Step& s = ex.steps_[i];
    if (s.kind != Executable::StepKind::kernel || n.op->kernel != &ops::elementwise_kernel ||
        !ops::is_elementwise(n.op->category) || n.outputs.size() != 1 || n.inputs.empty() ||
        n.inputs.size() > static_cast<std::size_t>(ops::kMaxArity))
      continue;
    const auto& ewi = n.op->elementwise;
    const auto& om = G.value(n.outputs[0]).meta;
    Executable::FlatElementwise ew;
    ew.fn = ewi.block[static_cast<int>(G.value(n.inputs[static_cast<std::size_t>(ewi.dispatch_input)]).meta.dtype)];
    ew.nin = static_cast<int>(n.inputs.size());
    ew.n = numel(om.shape);
    ew.osize = static_cast<std::int64_t>(dtype_size(om.dtype));
    bool flat = ew.fn != nullptr;
    for (int j = 0; j < ew.nin && flat; ++j) {
      auto v = static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(j)]);
      const graph::Value& val = G.values()[v];
      ew.esize[j] = static_cast<std::int64_t>(dtype_size(val.meta.dtype));
      if (numel(val.meta.shape) == 1) { ew.st[j] = 0; continue; }
      if (!(val.meta.shape == om.shape)) { flat = false; break; }
      ew.st[j] = 1;
    }
    for (int j = 0; j < ew.nin && flat; ++j) {
      auto v = static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(j)]);
      const graph::Value& val = G.values()[v];
      // Arena buffers, constants and static views are bound now and keep their memory and layout.
      bool fixed = val.kind == ValueKind::constant ||
                   (val.kind == ValueKind::node && (vp.home[v] == ValueHome::arena || vp.home[v] == ValueHome::fixed));
      if (!fixed) {
        ew.check[j] = ew.st[j] == 1;
        continue;
      }
      const AnyTensor& t = ex.current_[v];
      if (!t.defined() || (ew.st[j] == 1 && !t.is_contiguous())) { flat = false; break; }
      if (val.kind == ValueKind::constant && ew.st[j] == 0 && ew.esize[j] <= 16) {
        ew.inline_scalar[j] = true;  // immutable: its value travels with the step
        std::memcpy(ew.scalar[j], t.raw_data(), static_cast<std::size_t>(ew.esize[j]));
      } else {
        ew.ptr[j] = static_cast<const char*>(t.raw_data());
      }
    }
    if (!flat) continue;
    if (vp.home[static_cast<std::size_t>(n.outputs[0])] == ValueHome::arena)
      ew.optr = static_cast<char*>(ex.current_[static_cast<std::size_t>(n.outputs[0])].raw_data());
    if (ewi.params) ewi.params(n.attrs, ew.params);
    s.ew = ew;
    s.kind = Executable::StepKind::elementwise;
  }
}
}  // namespace detail

#endif  // MS_IMPL_BODIES

}  // namespace ms::backend
