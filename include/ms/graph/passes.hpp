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
inline int dce(Graph& g) {
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

/// Merges nodes with the same op, attributes and inputs. Returns the number merged.
inline int cse(Graph& g) {
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

/// Evaluates nodes whose inputs are all constants (up to `max_elements` output elements)
/// and replaces them by constants. Returns the number folded.
inline int fold_constants(Graph& g, std::int64_t max_elements = 1 << 20) {
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
/// True when constant value v holds `x` in every element (for floating dtypes a zero must
/// also have x's sign: x + 0.0 turns -0.0 into +0.0, so only x + -0.0 and x - 0.0 are x).
inline bool const_all_equal(const Graph& g, ValueId v, double x) {
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
}  // namespace detail

/// Algebraic simplification: x*1, 1*x, x/1, x+(-0.0), (-0.0)+x, x-0 (for integers any zero;
/// x + 0.0 is not x for x = -0.0) (when no broadcast changes the
/// shape), permute of permute (composed; identity removed), reshape of reshape, reshape to
/// the same shape, cast to the same dtype. Returns the number of rewrites.
inline int simplify(Graph& g) {
  int rewrites = 0;
  auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.dead || n.fused) continue;
    const ops::OpDef* op = n.op;
    ValueId out = n.outputs[0];
    const ops::TensorMeta& om = g.value(out).meta;
    auto forward = [&](ValueId to) {
      if (!(g.value(to).meta == om)) return false;
      g.replace_uses(out, to);
      g.kill(i);
      ++rewrites;
      return true;
    };
    const bool mul = op == &ops::mul_op, add = op == &ops::add_op, div = op == &ops::div_op;
    if (mul || add || div || op == &ops::sub_op) {
      double ident = (mul || div) ? 1.0 : (add && is_floating(om.dtype)) ? -0.0 : 0.0;
      if (detail::const_all_equal(g, n.inputs[1], ident) && forward(n.inputs[0])) continue;
      if ((mul || add) && detail::const_all_equal(g, n.inputs[0], ident) && forward(n.inputs[1])) continue;
    } else if (op == &ops::cast_op) {
      if (g.value(n.inputs[0]).meta.dtype == om.dtype && forward(n.inputs[0])) continue;
    } else if (op == &ops::reshape_op) {
      if (g.value(n.inputs[0]).meta.shape == om.shape && forward(n.inputs[0])) continue;
      const Value& src = g.value(n.inputs[0]);
      if (src.kind == ValueKind::node && nodes[static_cast<std::size_t>(src.producer)].op == &ops::reshape_op) {
        ValueId base = nodes[static_cast<std::size_t>(src.producer)].inputs[0];
        g.value(n.inputs[0]).uses--;
        n.inputs[0] = base;
        g.value(base).uses++;
        ++rewrites;
        if (g.value(base).meta.shape == om.shape) forward(base);  // the chain returns to the original shape
      }
    } else if (op == &ops::permute_op) {
      const ops::IntList& p = n.attrs.ints("perm");
      bool identity = true;
      for (std::size_t k = 0; k < p.size(); ++k) identity &= (p[k] == static_cast<std::int64_t>(k) || p[k] == static_cast<std::int64_t>(k) - static_cast<std::int64_t>(p.size()));
      if (identity && forward(n.inputs[0])) continue;
      const Value& src = g.value(n.inputs[0]);
      if (src.kind == ValueKind::node && nodes[static_cast<std::size_t>(src.producer)].op == &ops::permute_op) {
        const Node& inner = nodes[static_cast<std::size_t>(src.producer)];
        const ops::IntList& q = inner.attrs.ints("perm");
        int r = static_cast<int>(p.size());
        ops::IntList composed(p.size());
        for (int k = 0; k < r; ++k) composed[k] = q[normalize_axis(p[k], r, "permute")];
        ValueId base = inner.inputs[0];
        g.value(n.inputs[0]).uses--;
        n.inputs[0] = base;
        g.value(base).uses++;
        n.attrs.set("perm", composed);
        ++rewrites;
        bool id2 = true;
        for (int k = 0; k < r; ++k) id2 &= normalize_axis(composed[k], r, "permute") == k;
        if (id2) forward(base);
      }
    }
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

/// Replaces each live node that has an expansion (OpDef::expand) and satisfies `want` by the
/// nodes of its expansion, in place in the schedule. Backends call it for ops they have no
/// kernel for. Returns the number of nodes expanded.
inline int expand_nodes(Graph& g, const std::function<bool(const Node&)>& want) {
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
inline PassReport optimize(Graph& g, const PassOptions& opt = {}) {
  PassReport rep;
  std::string dir = opt.dump_dir;
  if (dir.empty())
    if (const char* env = std::getenv("MS_DUMP_IR")) dir = env;
  int step = 0;
  auto dump = [&](const std::string& name) {
    if (dir.empty()) return;
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string& file, const std::string& text) { write_file_atomically(file, text, "dump_ir"); };
    std::string base = fmt::format("{}/{:02d}_{}", dir, step++, name);
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
