#pragma once
// Graph passes and the PassManager: dead-code elimination, common-subexpression
// elimination, constant folding, algebraic simplification and fusion, run in order
// at an optimization level, each switchable, with the IR dumped as text after each
// pass into a directory (PassOptions::dump_dir or the MS_DUMP_IR environment variable).

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "../core/linkage.hpp"
#include "../core/atomic_file.hpp"
#include "../ops/binary.hpp"
#include "../ops/views.hpp"
#include "fusion.hpp"

namespace ms::graph {

namespace detail {
/// Nodes that write into one of their inputs (copy_, batch_norm's running statistics) are
/// never removed, merged or folded: the op says so (OpDef::writes_inputs).
inline bool has_side_effect(const Node& n) { return n.op->has_side_effect(n.attrs, n.inputs.size()); }
}  // namespace detail

/// Removes nodes whose outputs are unused. Returns the number removed.
MS_IMPL int dce(Graph& g);

/// Merges nodes with the same op, attributes and inputs. Returns the number merged.
MS_IMPL int cse(Graph& g);

/// Evaluates nodes whose inputs are all constants (up to `max_elements` output elements)
/// and replaces them by constants. Returns the number folded.
MS_IMPL int fold_constants(Graph& g, std::int64_t max_elements = 1 << 20);

namespace detail {
/// True when constant value v holds `x` in every element (for floating dtypes a zero must
/// also have x's sign: x + 0.0 turns -0.0 into +0.0, so only x + -0.0 and x - 0.0 are x).
MS_IMPL bool const_all_equal(const Graph& g, ValueId v, double x);
}  // namespace detail

namespace detail {
/// What a simplify rule works on: node i of g; forward(to) replaces the node's output by
/// value `to` (same dtype and shape) and removes the node; reroute(k, to) makes input k read
/// `to` instead (the node stays, rewritten).
struct Rewrite {
  Graph& g;
  std::size_t i;
  int& rewrites;
  Node& node() { return g.nodes()[i]; }
  const ops::TensorMeta& out_meta() { return g.value(node().outputs[0]).meta; }
  bool forward(ValueId to) {
    const ValueId out = node().outputs[0];
    if (!(g.value(to).meta == g.value(out).meta)) return false;
    g.replace_uses(out, to);
    g.kill(i);
    ++rewrites;
    return true;
  }
  void reroute(std::size_t k, ValueId to) {
    Node& n = node();
    g.value(n.inputs[k]).uses--;
    n.inputs[k] = to;
    g.value(to).uses++;
    ++rewrites;
  }
  /// The node producing input k when it is a live node running `op`, else null.
  const Node* input_from(std::size_t k, const ops::OpDef& op) {
    const Value& src = g.value(node().inputs[k]);
    if (src.kind != ValueKind::node) return nullptr;
    const Node& p = g.nodes()[static_cast<std::size_t>(src.producer)];
    return p.op == &op ? &p : nullptr;
  }
};

/// One row of simplify's table: the op it applies to, the rewrite as a pattern (for
/// docs and reports), and the rule; true when it rewrote the node.
struct SimplifyRow {
  const ops::OpDef* op;
  const char* pattern;
  bool (*rule)(Rewrite&);
};

/// x op e -> x (and e op x -> x for the commutative ones) where constant e is op's identity
/// in every element and no broadcast changes the shape.
template <int Ident, bool Commutes>  // an int: clang 14 takes no floating-point template arguments
bool drop_identity_operand(Rewrite& r) {
  const double ident = Ident == 0 && r.node().op == &ops::add_op && is_floating(r.out_meta().dtype) ? -0.0 : static_cast<double>(Ident);
  if (const_all_equal(r.g, r.node().inputs[1], ident) && r.forward(r.node().inputs[0])) return true;
  return Commutes && const_all_equal(r.g, r.node().inputs[0], ident) && r.forward(r.node().inputs[1]);
}
}  // namespace detail

/// simplify's rewrites, one row each, keyed by op handle (several rows may share an op:
/// they are tried in order until one rewrites the node).
MS_IMPL const std::vector<detail::SimplifyRow>& simplify_rules();

/// Algebraic simplification by the rows of simplify_rules(). Returns the number of rewrites.
MS_IMPL int simplify(Graph& g);

/// Replaces each live node that has an expansion (OpDef::expand) and satisfies `want` by the
/// nodes of its expansion, in place in the schedule. Backends call it for ops they have no
/// kernel for. Returns the number of nodes expanded.
MS_IMPL int expand_nodes(Graph& g, const std::function<bool(const Node&)>& want);

/// Options of the pass pipeline.
struct PassOptions {
  int opt_level = 2;  ///< 0: nothing; 1: dce, cse, fold, simplify; 2: also fusion
  bool dce = true, cse = true, fold = true, simplify = true, fuse = true;
  bool fuse_epilogue = true;  ///< GEMM epilogues and reductions of elementwise results (level 2)
  std::string dump_dir;  ///< when set (or MS_DUMP_IR is set), writes NN_<pass>.ir and .dot files there
};

/// What each pass did.
struct PassReport {
  std::vector<std::pair<std::string, int>> changes;
  int get(std::string_view pass) const {
    int total = 0;
    for (auto& [p, c] : changes)
      if (p == pass) total += c;
    return total;
  }
};

/// Runs the passes in order (dce, cse, fold, simplify, dce, fuse, fuse_epilogue), verifying after each.
MS_IMPL PassReport optimize(Graph& g, const PassOptions& opt = {});

}  // namespace ms::graph

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::graph {
MS_IMPL int dce(Graph& g) {
  int removed = 0;
  auto& nodes = g.nodes();
  for (std::size_t i = nodes.size(); i-- > 0;) {
    Node& n = nodes[i];
    if (n.dead || detail::has_side_effect(n)) continue;
    bool used = std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) { return g.value(v).uses > 0; });
    if (!used) { g.kill(i); ++removed; }
  }
  g.compact();
  return removed;
}
MS_IMPL int cse(Graph& g) {
  int merged = 0;
  struct Key {
    const ops::OpDef* op;
    std::vector<ValueId> inputs;
    const ops::Attrs* attrs;
  };
  std::unordered_multimap<std::size_t, std::size_t> seen;  // hash -> node index
  auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.dead || n.fused || n.op->is_random || detail::has_side_effect(n)) continue;
    std::size_t h = std::hash<const void*>{}(n.op) ^ (n.attrs.hash() * 31);
    for (ValueId v : n.inputs) h = h * 1000003u ^ static_cast<std::size_t>(v);
    bool found = false;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second; ++it) {
      Node& m = nodes[it->second];
      if (m.dead || m.op != n.op || m.inputs != n.inputs || !(m.attrs == n.attrs)) continue;
      for (std::size_t k = 0; k < n.outputs.size(); ++k) g.replace_uses(n.outputs[k], m.outputs[k]);
      g.kill(i);
      ++merged;
      found = true;
      break;
    }
    if (!found) seen.emplace(h, i);
  }
  g.compact();
  return merged;
}
MS_IMPL int fold_constants(Graph& g, std::int64_t max_elements) {
  int folded = 0;
  auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.dead || n.fused || n.op->is_random || detail::has_side_effect(n) || n.inputs.empty()) continue;
    bool all_const = std::all_of(n.inputs.begin(), n.inputs.end(),
                                 [&](ValueId v) { return g.value(v).kind == ValueKind::constant; });
    if (!all_const) continue;
    std::int64_t size = 0;
    for (ValueId v : n.outputs) size += numel(g.value(v).meta.shape);
    if (size > max_elements) continue;
    std::vector<AnyTensor> in;
    for (ValueId v : n.inputs) in.push_back(g.value(v).data);
    std::vector<AnyTensor> out(n.outputs.size());
    if (n.op->view) {
      out[0] = ops::detail::contiguous_raw(n.op->view(in[0], n.attrs));
      if (out[0].is_same(in[0]) || out[0].shares_storage(in[0])) {
        AnyTensor c = AnyTensor::empty(out[0].shape(), out[0].dtype());
        std::memcpy(c.raw_data(), out[0].raw_data(), out[0].nbytes());
        out[0] = c;
      }
    } else {
      for (std::size_t k = 0; k < n.outputs.size(); ++k)
        out[k] = AnyTensor::empty(g.value(n.outputs[k]).meta.shape, g.value(n.outputs[k]).meta.dtype);
      n.op->kernel(ops::KernelArgs{*n.op, in, out, n.attrs});
    }
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId c = g.add_constant(out[k]);
      g.replace_uses(n.outputs[k], c);
    }
    g.kill(i);
    ++folded;
  }
  g.compact();
  return folded;
}
namespace detail {
MS_IMPL bool const_all_equal(const Graph& g, ValueId v, double x) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::constant) return false;
  bool eq = true;
  visit_dtype(val.data.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T>) {
      const T* p = static_cast<const T*>(val.data.raw_data());
      ms::detail::for_each_offset(val.data.shape(), val.data.strides(), [&](std::int64_t o) {
        const double e = static_cast<double>(p[o]);
        if (e != x || (std::is_floating_point_v<T> && std::signbit(e) != std::signbit(x))) eq = false;
      });
    } else {
      eq = false;
    }
  });
  return eq;
}
inline bool drop_same_dtype_cast(Rewrite& r) {
  return r.g.value(r.node().inputs[0]).meta.dtype == r.out_meta().dtype && r.forward(r.node().inputs[0]);
}
inline bool simplify_reshape(Rewrite& r) {
  if (r.g.value(r.node().inputs[0]).meta.shape == r.out_meta().shape && r.forward(r.node().inputs[0])) return true;
  const Node* inner = r.input_from(0, ops::reshape_op);
  if (!inner) return false;
  const ValueId base = inner->inputs[0];
  r.reroute(0, base);
  if (r.g.value(base).meta.shape == r.out_meta().shape) r.forward(base);  // back to the original shape
  return true;
}
inline bool simplify_permute(Rewrite& r) {
  auto is_identity = [](const ops::IntList& p) {
    const int rank = static_cast<int>(p.size());
    for (int k = 0; k < rank; ++k)
      if (normalize_axis(p[static_cast<std::size_t>(k)], rank, "permute") != k) return false;
    return true;
  };
  const ops::IntList p = r.node().attrs.ints("perm");
  if (is_identity(p) && r.forward(r.node().inputs[0])) return true;
  const Node* inner = r.input_from(0, ops::permute_op);
  if (!inner) return false;
  const ops::IntList& q = inner->attrs.ints("perm");
  const int rank = static_cast<int>(p.size());
  ops::IntList composed(p.size());
  for (int k = 0; k < rank; ++k) composed[static_cast<std::size_t>(k)] = q[static_cast<std::size_t>(normalize_axis(p[static_cast<std::size_t>(k)], rank, "permute"))];
  r.reroute(0, inner->inputs[0]);
  r.node().attrs.set("perm", composed);
  if (is_identity(composed)) r.forward(r.node().inputs[0]);
  return true;
}
}  // namespace detail
MS_IMPL const std::vector<detail::SimplifyRow>& simplify_rules() {
  static const std::vector<detail::SimplifyRow> rows{
      {&ops::mul_op, "x * 1 -> x, 1 * x -> x", &detail::drop_identity_operand<1, true>},
      {&ops::div_op, "x / 1 -> x", &detail::drop_identity_operand<1, false>},
      // x + 0.0 is not x for x = -0.0: for floats only -0.0 is the identity of add.
      {&ops::add_op, "x + (-0.0) -> x, (-0.0) + x -> x (integers: 0)", &detail::drop_identity_operand<0, true>},
      {&ops::sub_op, "x - 0 -> x", &detail::drop_identity_operand<0, false>},
      {&ops::cast_op, "cast(x, dtype of x) -> x", &detail::drop_same_dtype_cast},
      {&ops::reshape_op, "reshape(x, shape of x) -> x, reshape(reshape(x)) -> reshape(x)", &detail::simplify_reshape},
      {&ops::permute_op, "permute(x, identity) -> x, permute(permute(x, q), p) -> permute(x, q o p)",
       &detail::simplify_permute},
  };
  return rows;
}
MS_IMPL int simplify(Graph& g) {
  int rewrites = 0;
  const auto& rows = simplify_rules();
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.dead || n.fused) continue;
    detail::Rewrite r{g, i, rewrites};
    for (const detail::SimplifyRow& row : rows)
      if (row.op == n.op && row.rule(r)) break;
  }
  g.compact();
  return rewrites;
}
namespace detail {
/// Builds an expansion's nodes into a graph, each inserted before position `pos`.
class GraphExpansionBuilder final : public ops::ExpansionBuilder {
 public:
  GraphExpansionBuilder(Graph& g, std::size_t pos) : g_(g), pos_(pos) {}
  ops::TensorMeta meta(std::int32_t v) const override { return g_.value(v).meta; }
  std::vector<std::int32_t> node(const ops::OpDef& op, std::vector<std::int32_t> in, ops::Attrs attrs) override {
    const ops::MetaList out = g_.infer_outputs(op, in, attrs);
    auto outs = g_.insert_node_before(pos_++, op, std::move(in), std::move(attrs),
                                      std::span<const ops::TensorMeta>(out.data(), out.size()));
    return {outs.begin(), outs.end()};
  }
  std::int32_t scalar(double x, DType d) override { return g_.add_constant(ops::scalar_tensor(x, d, "expand")); }
  std::size_t pos() const { return pos_; }

 private:
  Graph& g_;
  std::size_t pos_;
};
}  // namespace detail
MS_IMPL int expand_nodes(Graph& g, const std::function<bool(const Node&)>& want) {
  int expanded = 0;
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.dead || n.op->expand == nullptr || n.fused || !want(n)) continue;
    const ops::OpDef& op = *n.op;
    const std::vector<ValueId> in = n.inputs, outs = n.outputs;
    const ops::Attrs attrs = n.attrs;
    detail::GraphExpansionBuilder b(g, i);
    std::vector<std::int32_t> repl = op.expand(b, std::span<const std::int32_t>(in.data(), in.size()), attrs);
    MS_CHECK(repl.size() == outs.size(), GraphError, "expand: the expansion of {} gives {} values for {} outputs",
             op.name, repl.size(), outs.size());
    for (std::size_t k = 0; k < outs.size(); ++k) {
      MS_CHECK(g.value(repl[k]).meta == g.value(outs[k]).meta, GraphError,
               "expand: output {} of {}'s expansion is {}, the op's is {}", k, op.name, meta_str(g.value(repl[k]).meta),
               meta_str(g.value(outs[k]).meta));
      g.replace_uses(outs[k], repl[k]);
    }
    i = b.pos();  // the expanded node now sits after its expansion
    g.kill(i);
    ++expanded;
  }
  g.compact();
  return expanded;
}
MS_IMPL PassReport optimize(Graph& g, const PassOptions& opt) {
  PassReport rep;
  std::string dir = opt.dump_dir;
  if (dir.empty())
    if (const char* env = std::getenv("MS_DUMP_IR")) dir = env;
  int step = 0;
  auto dump = [&](const std::string& name) {
    if (dir.empty()) return;
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string& file, const std::string& text) { write_file_atomically(file, text, "dump_ir"); };
    std::string base = MS_FORMAT("{}/{:02d}_{}", dir, step++, name);
    write(base + ".ir", g.str());
    write(base + ".dot", g.dot());
  };
  dump("captured");
  auto run = [&](bool on, int min_level, const char* name, const std::function<int(Graph&)>& pass) {
    if (!on || opt.opt_level < min_level) return;
    int c = pass(g);
    rep.changes.emplace_back(name, c);
    verify(g);
    dump(name);
  };
  run(opt.dce, 1, "dce", dce);
  run(opt.cse, 1, "cse", cse);
  run(opt.fold, 1, "fold", [](Graph& x) { return fold_constants(x); });
  run(opt.simplify, 1, "simplify", simplify);
  run(opt.dce, 1, "dce", dce);
  run(opt.fuse, 2, "fuse", fuse_elementwise);
  run(opt.fuse && opt.fuse_epilogue, 2, "fuse_epilogue", fuse_epilogues);
  return rep;
}
}  // namespace ms::graph
#endif
