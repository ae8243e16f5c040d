#pragma once
// Elementwise fusion: trees and chains of elementwise ops whose intermediates are
// used only inside the group become one "fused" node. Its program evaluates the
// members' block kernels (the same generic formulas as eager) over blocks of 256
// elements kept in L1-sized buffers, so intermediates never touch memory. Scalar and
// binary steps around a unary op run inside that op's pass (fold_scalar_steps).
// Inputs may broadcast (scalars, row/column biases) against the output.

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "../core/linkage.hpp"
#include "../ops/binary.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/linalg.hpp"
#include "../ops/reduce.hpp"
#include "graph.hpp"

namespace ms::graph {

/// The op that fused nodes refer to (visible in the op list, dumps and profiles).
MS_REGISTRATION(const ops::OpDef& fused_op, ops::registry().add([] {
  ops::OpDef d;
  d.name = "fused";
  d.category = ops::Category::fused;
  d.num_inputs = -1;
  d.doc = "a group of elementwise ops evaluated block by block in one kernel (made by graph fusion)";
  d.nondiff_reason = "exists only in compiled graphs, made after differentiation";
  d.cpu_dtypes = kAllTypes;
  d.infer = [](const ops::OpDef&, std::span<const ops::TensorMeta>, const ops::Attrs&, ops::MetaList&) {
    MS_THROW(GraphError, "fused: a fused node's metas come from its program, not from inference");
  };
  d.kernel = [](const ops::KernelArgs&) {
    MS_THROW(GraphError, "fused: fused nodes run through their program in a compiled graph");
  };
  return d;
}()));

/// Fuses elementwise groups; returns the number of fused nodes created.
MS_IMPL int fuse_elementwise(Graph& g);

/// Fuses across the elementwise boundary, after fuse_elementwise:
/// * GEMM epilogues: an elementwise node or group whose input is the single-use result of
///   a matmul or linear of the same shape and dtype absorbs it (the GEMM writes the node's
///   output buffer, the program then runs in place: bias, activation, scaling);
/// * reductions: a sum, mean, max or min over trailing axes (or all axes) of a float
///   elementwise result used only by it evaluates the program block by block and reduces
///   on the fly, so the full-size intermediate is never written.
/// Returns the number of nodes absorbed.
MS_IMPL int fuse_epilogues(Graph& g);

}  // namespace ms::graph

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::graph {
namespace detail {
inline bool fusible(const Graph& g, const Node& n) {
  if (n.dead || n.fused || n.outputs.size() != 1) return false;
  if (!ops::is_elementwise(n.op->category)) return false;
  if (n.op->is_random) return false;
  const auto& ew = n.op->elementwise;
  DType d = g.value(n.inputs[static_cast<std::size_t>(ew.dispatch_input)]).meta.dtype;
  return ew.block[static_cast<int>(d)] != nullptr && n.inputs.size() <= static_cast<std::size_t>(ops::kMaxArity);
}

/// What instruction k (made by node m) is to fold_scalar_steps: a scalar step x * c, c * x,
/// x + c, c + x or x - c (c a float constant; `other` is x's source), and which binary op
/// (+ - * /) of two operands of its dtype.
struct ScalarStep {
  bool ok = false;
  int other = 0;  ///< the non-constant operand's source
  double m = 1, a = -0.0;
  ops::AffineBinary binary = ops::AffineBinary::none;
};

inline ScalarStep scalar_step(const Graph& g, const Node& m, const FusedInstr& in, DType d) {
  ScalarStep st;
  const ops::OpDef* op = m.op;
  if (in.nin != 2 || g.value(m.inputs[0]).meta.dtype != d || g.value(m.inputs[1]).meta.dtype != d) return st;
  const bool add = op == &ops::add_op, sub = op == &ops::sub_op, mul = op == &ops::mul_op;
  st.binary = add                   ? ops::AffineBinary::add
              : sub                 ? ops::AffineBinary::sub
              : mul                 ? ops::AffineBinary::mul
              : op == &ops::div_op  ? ops::AffineBinary::div
                                    : ops::AffineBinary::none;
  if (!mul && !add && !sub) return st;
  auto scalar_const = [&](int j, double& c) {
    const Value& v = g.value(m.inputs[static_cast<std::size_t>(j)]);
    if (v.kind != ValueKind::constant || v.meta.dtype != d || numel(v.meta.shape) != 1 || !v.data.defined()) return false;
    c = d == DType::f32 ? static_cast<double>(*static_cast<const float*>(v.data.raw_data()))
                        : *static_cast<const double*>(v.data.raw_data());
    return c == c;  // a NaN constant is left alone
  };
  double c = 0;
  const int cj = scalar_const(1, c) ? 1 : (!sub && scalar_const(0, c)) ? 0 : -1;
  if (cj < 0 || in.src[1 - cj] == in.src[cj]) return st;
  st.ok = true;
  st.other = in.src[1 - cj];
  if (mul) { st.m = c; st.a = -0.0; }
  else { st.m = 1; st.a = sub ? -c : c; }
  return st;
}

/// Folds scalar steps (x * c, c * x, x + c, c + x, x - c with c a float constant) into the
/// unary instruction that reads or produces their other operand, when the intermediate has
/// no other reader: `tanh(x*0.5 + 0.1) * 1.5` becomes one pass of tanh's affine kernel.
/// Then up to ops::kAffineBinary binary ops (+ - * /) that combine the result with a value
/// already computed join the same pass: `t - x / (exp(x) + 1)` is one pass of exp's. The
/// results are bit-identical (see ops::kAffineSteps). `members[k]` made instruction k.
inline void fold_scalar_steps(const Graph& g, const std::vector<std::size_t>& members, FusedProgram& prog) {
  auto& ins = prog.instrs;
  const std::size_t n = ins.size();
  if (n < 2) return;
  const auto& nodes = g.nodes();
  std::vector<ScalarStep> step(n);
  std::vector<bool> single_use(n, false), removed(n, false);
  std::vector<const ops::BlockFn*> affine_fn(n, nullptr);  // set for unary ops that can take steps
  for (std::size_t k = 0; k < n; ++k) {
    const Node& m = nodes[members[k]];
    single_use[k] = g.value(m.outputs[0]).uses == 1;
    const DType d = g.value(m.outputs[0]).meta.dtype;
    if (d != DType::f32 && d != DType::f64) continue;
    if (ins[k].nin == 1 && ins[k].fn == m.op->elementwise.block[static_cast<int>(d)]) {
      if (m.op->elementwise.affine[static_cast<int>(d)][0]) affine_fn[k] = m.op->elementwise.affine[static_cast<int>(d)];
      continue;
    }
    step[k] = scalar_step(g, m, ins[k], d);
  }
  auto writes = [&](std::size_t k, int t) { return !removed[k] && ins[k].dst == t; };
  auto reads = [&](std::size_t k, int t) {
    if (removed[k]) return false;
    for (int a = 0; a < ins[k].nin; ++a)
      if (ins[k].src[a] == t) return true;
    return false;
  };
  // The instruction after j that reads temp t (n if none).
  auto next_reader = [&](std::size_t j, int t) {
    std::size_t k = j + 1;
    while (k < n && !reads(k, t)) ++k;
    return k;
  };
  // Whether J (at j) may take over K (at k), which writes d and reads o (-1: nothing else):
  // no live instruction in between reads or writes d or overwrites o, and d is not the
  // node's output while one runs in between.
  auto free_between = [&](std::size_t j, std::size_t k, int d, int o) {
    for (std::size_t q = j + 1; q < k; ++q)
      if (!removed[q] && (d < 0 || reads(q, d) || writes(q, d) || (o >= 0 && writes(q, o)))) return false;
    return true;
  };
  // J takes over K's destination; K is gone.
  auto absorb = [&](FusedInstr& J, std::size_t j, std::size_t k) {
    J.dst = ins[k].dst;
    single_use[j] = single_use[k];
    removed[k] = true;
  };
  for (std::size_t j = 0; j < n; ++j) {
    if (!affine_fn[j]) continue;
    FusedInstr& J = ins[j];
    // Steps before: J reads a temp made by a step instruction I that nothing else reads.
    // A multiplication followed by an addition is one step (see ops::kAffineSteps).
    using Pair = std::pair<double, double>;
    auto is_neg_zero = [](double a) { return a == 0 && std::signbit(a); };
    auto merges = [&](const Pair& first, const Pair& then) { return is_neg_zero(first.second) && then.first == 1; };
    std::vector<Pair> pre, post;
    for (;;) {
      const int t = J.src[0];
      if (t < 0) break;
      std::size_t i = j;
      while (i-- > 0 && !writes(i, t)) {}
      if (i >= j || !step[i].ok || !single_use[i]) break;
      const Pair s{step[i].m, step[i].a};
      const bool merge = !pre.empty() && merges(s, pre.front());
      if (!merge && static_cast<int>(pre.size()) == ops::kAffineSteps) break;
      const int x = step[i].other;
      bool clobbered = false;  // x must still hold I's operand when J runs
      for (std::size_t k = i + 1; k < j && !clobbered; ++k) clobbered = x >= 0 && writes(k, x);
      if (clobbered) break;
      if (merge) pre.front().first = s.first;
      else pre.insert(pre.begin(), s);
      J.src[0] = x;
      removed[i] = true;
    }
    // Steps after: the only reader of J's result is the next instruction K, a step.
    while (J.dst >= 0 && single_use[j]) {
      const std::size_t k = next_reader(j, J.dst);
      if (k >= n || !step[k].ok || step[k].other != J.dst) break;
      const Pair s{step[k].m, step[k].a};
      const bool merge = !post.empty() && merges(post.back(), s);
      if (!merge && static_cast<int>(post.size()) == ops::kAffineSteps) break;
      if (!free_between(j, k, ins[k].dst, -1)) break;
      if (merge) post.back().second = s.second;
      else post.push_back(s);
      absorb(J, j, k);
    }
    // Binary steps after: the only reader K of J's result combines it with an operand that
    // is ready when J runs (made before J, not overwritten until K).
    int nbin = 0;
    double codes[ops::kAffineBinary] = {};
    while (nbin < ops::kAffineBinary && J.dst >= 0 && single_use[j]) {
      const std::size_t k = next_reader(j, J.dst);
      if (k >= n || step[k].binary == ops::AffineBinary::none || ins[k].src[0] == ins[k].src[1]) break;
      const bool reversed = ins[k].src[1] == J.dst;  // z op v
      const int o = ins[k].src[reversed ? 0 : 1];
      if (!free_between(j, k, ins[k].dst, o)) break;
      codes[nbin] = ops::affine_binary_code(step[k].binary, reversed);
      J.src[1 + nbin] = o;
      ++nbin;
      J.nin = 1 + nbin;
      absorb(J, j, k);
    }
    if (pre.empty() && post.empty() && nbin == 0) continue;
    for (int b = 0; b < nbin; ++b) J.params[ops::kMaxElementwiseParams + 4 * ops::kAffineSteps + b] = codes[b];
    const int variant = ops::affine_variant(static_cast<int>(pre.size()), static_cast<int>(post.size()));
    J.fn = affine_fn[j][variant];
    double* p = J.params + ops::kMaxElementwiseParams;
    for (int s = 0; s < 2 * ops::kAffineSteps; ++s) { p[2 * s] = 1; p[2 * s + 1] = -0.0; }
    // A variant with more steps than needed runs the unused ones as exact (1, -0.0) steps.
    for (std::size_t s = 0; s < pre.size(); ++s) { p[2 * s] = pre[s].first; p[2 * s + 1] = pre[s].second; }
    for (std::size_t s = 0; s < post.size(); ++s) {
      p[2 * (ops::kAffineSteps + s)] = post[s].first;
      p[2 * (ops::kAffineSteps + s) + 1] = post[s].second;
    }
  }
  std::vector<FusedInstr> kept;
  for (std::size_t k = 0; k < n; ++k)
    if (!removed[k]) kept.push_back(ins[k]);
  ins = std::move(kept);
}

/// The program of an elementwise group (members ascending, root last); `ext` receives
/// the group's external inputs in the order the program numbers them.
inline std::shared_ptr<FusedProgram> build_program(const Graph& g, const std::vector<std::size_t>& members,
                                                   std::size_t root, std::vector<ValueId>& ext) {
  const auto& nodes = g.nodes();
  auto prog = std::make_shared<FusedProgram>();
  std::unordered_map<ValueId, int> temp_of;   // member output -> temp index
  std::unordered_map<ValueId, int> last_use;  // member output -> last instr reading it
  for (std::size_t ii = 0; ii < members.size(); ++ii)
    for (ValueId v : nodes[members[ii]].inputs) last_use[v] = static_cast<int>(ii);
  std::vector<int> free_temps;
  const ValueId root_out = nodes[root].outputs[0];
  for (std::size_t ii = 0; ii < members.size(); ++ii) {
    const Node& m = nodes[members[ii]];
    FusedInstr ins;
    ins.op = m.op;
    const auto& ew = m.op->elementwise;
    ins.fn = ew.block[static_cast<int>(g.value(m.inputs[static_cast<std::size_t>(ew.dispatch_input)]).meta.dtype)];
    if (ew.params) ew.params(m.attrs, ins.params);
    ins.nin = static_cast<int>(m.inputs.size());
    for (int a = 0; a < ins.nin; ++a) {
      ValueId v = m.inputs[static_cast<std::size_t>(a)];
      auto t = temp_of.find(v);
      if (t != temp_of.end()) {
        ins.src[a] = t->second;
      } else {
        auto it = std::find(ext.begin(), ext.end(), v);
        int e = static_cast<int>(it - ext.begin());
        if (it == ext.end()) ext.push_back(v);
        ins.src[a] = -(e + 1);
      }
    }
    // Temps whose last reader is this instruction can be reused. Its own result may go
    // into one of them (in place) only when the element sizes match: where(cond, a, b)
    // writing 4-byte floats over its 1-byte bool condition would overwrite conditions it
    // has not read yet.
    ValueId outv = m.outputs[0];
    const std::size_t out_size = dtype_size(g.value(outv).meta.dtype);
    std::vector<int> released;  // freed by this instruction, element size permitting reuse
    std::vector<int> released_other;
    for (int a = 0; a < ins.nin; ++a) {
      ValueId v = m.inputs[static_cast<std::size_t>(a)];
      auto t = temp_of.find(v);
      if (t == temp_of.end() || last_use[v] != static_cast<int>(ii)) continue;
      if (std::find(free_temps.begin(), free_temps.end(), t->second) != free_temps.end() ||
          std::find(released.begin(), released.end(), t->second) != released.end() ||
          std::find(released_other.begin(), released_other.end(), t->second) != released_other.end())
        continue;
      (dtype_size(g.value(v).meta.dtype) == out_size ? released : released_other).push_back(t->second);
    }
    free_temps.insert(free_temps.end(), released.begin(), released.end());
    if (outv == root_out) {
      ins.dst = -1;
    } else {
      int t;
      if (!free_temps.empty()) { t = free_temps.back(); free_temps.pop_back(); }
      else t = prog->num_temps++;
      ins.dst = t;
      temp_of[outv] = t;
    }
    free_temps.insert(free_temps.end(), released_other.begin(), released_other.end());
    prog->instrs.push_back(ins);
    prog->members.push_back(std::string(m.op->name));
  }
  prog->out_meta = g.value(root_out).meta;
  prog->source = prog->instrs;
  fold_scalar_steps(g, members, *prog);
  return prog;
}

/// Turns node i into a fused node reading `inputs` (its output value id stays).
inline void become_fused(Graph& g, std::size_t i, std::vector<ValueId> inputs, std::shared_ptr<FusedProgram> prog,
                         std::string name) {
  Node& n = g.nodes()[i];
  for (ValueId x : n.inputs) g.value(x).uses--;
  for (ValueId x : inputs) g.value(x).uses++;
  n.op = &fused_op;
  n.attrs = ops::Attrs{};
  n.inputs = std::move(inputs);
  n.fused = std::move(prog);
  n.name = std::move(name);
}

}  // namespace detail
MS_IMPL int fuse_elementwise(Graph& g) {
  auto& nodes = g.nodes();
  const std::size_t nn = nodes.size();
  // consumers[v] = node indices reading v
  std::vector<std::vector<std::int32_t>> consumers(g.values().size());
  for (std::size_t i = 0; i < nn; ++i)
    if (!nodes[i].dead)
      for (ValueId v : nodes[i].inputs) consumers[v].push_back(static_cast<std::int32_t>(i));
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId v : g.outputs()) is_output[v] = true;

  std::vector<bool> taken(nn, false);
  int made = 0;
  struct Pending {
    std::size_t root;
    std::vector<std::size_t> members;  // ascending
  };
  std::vector<Pending> groups;
  for (std::size_t ri = nn; ri-- > 0;) {
    if (taken[ri] || !detail::fusible(g, nodes[ri])) continue;
    const Shape& oshape = g.value(nodes[ri].outputs[0]).meta.shape;
    std::vector<std::size_t> group{ri};
    std::vector<bool> in_group(nn, false);
    in_group[ri] = true;
    for (bool grew = true; grew;) {
      grew = false;
      for (std::size_t gi = 0; gi < group.size(); ++gi) {
        for (ValueId v : nodes[group[gi]].inputs) {
          const Value& val = g.value(v);
          if (val.kind != ValueKind::node || is_output[v]) continue;
          auto p = static_cast<std::size_t>(val.producer);
          if (in_group[p] || taken[p] || !detail::fusible(g, nodes[p])) continue;
          if (!(val.meta.shape == oshape)) continue;  // intermediates must be full blocks
          bool all_inside = std::all_of(consumers[v].begin(), consumers[v].end(),
                                        [&](std::int32_t c) { return in_group[static_cast<std::size_t>(c)]; });
          if (!all_inside) continue;
          group.push_back(p);
          in_group[p] = true;
          grew = true;
        }
      }
    }
    if (group.size() < 2) continue;
    std::sort(group.begin(), group.end());
    for (auto m : group) taken[m] = true;
    groups.push_back({ri, group});
  }

  for (auto& grp : groups) {
    std::vector<ValueId> ext;  // external inputs of the fused node
    auto prog = detail::build_program(g, grp.members, grp.root, ext);
    // The fused node replaces the root in place: same output value id, members die.
    for (auto mi : grp.members)
      if (mi != grp.root) g.kill(mi);
    detail::become_fused(g, grp.root, std::move(ext), std::move(prog), MS_FORMAT("fused_{}", made++));
  }
  g.compact();
  return made;
}

MS_IMPL int fuse_epilogues(Graph& g) {
  auto& nodes = g.nodes();
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId v : g.outputs()) is_output[v] = true;
  auto plain_program = [&](std::size_t i, std::vector<ValueId>& ext) -> std::shared_ptr<FusedProgram> {
    const Node& n = nodes[i];
    if (n.fused) {
      if (!n.fused->plain()) return nullptr;
      ext = n.inputs;
      return std::make_shared<FusedProgram>(*n.fused);
    }
    if (!detail::fusible(g, n)) return nullptr;
    return detail::build_program(g, {i}, i, ext);
  };
  auto single_use_node_value = [&](ValueId v) {
    const Value& val = g.value(v);
    return val.kind == ValueKind::node && val.uses == 1 && !is_output[v];
  };
  int made = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].dead) continue;
    // Reduction of an elementwise result.
    const Node& r = nodes[i];
    const ops::OpDef* rop = r.op;
    if (!r.fused && r.inputs.size() == 1 && r.outputs.size() == 1 &&
        (rop == &ops::sum_op || rop == &ops::mean_op || rop == &ops::max_op || rop == &ops::min_op)) {
      const ValueId v = r.inputs[0];
      const auto& vm = g.value(v).meta;
      if (single_use_node_value(v) && (vm.dtype == DType::f32 || vm.dtype == DType::f64) && numel(vm.shape) > 0 &&
          g.value(r.outputs[0]).meta.dtype == vm.dtype) {
        const int rank = vm.shape.rank();
        const ops::ReduceAttrs ra = ops::attrs_as<ops::ReduceAttrs>(*rop, r.attrs);
        std::vector<bool> reduced(static_cast<std::size_t>(rank), ra.axes.empty());
        for (std::int64_t a : ra.axes) reduced[static_cast<std::size_t>(normalize_axis(a, rank, "fuse"))] = true;
        // The reduced axes must be a suffix: then each output is a run of consecutive elements.
        int first = rank;
        while (first > 0 && reduced[static_cast<std::size_t>(first - 1)]) --first;
        bool suffix = true;
        for (int d = 0; d < first; ++d) suffix = suffix && !reduced[static_cast<std::size_t>(d)];
        const auto p = static_cast<std::size_t>(g.value(v).producer);
        std::vector<ValueId> ext;
        std::shared_ptr<FusedProgram> prog = suffix ? plain_program(p, ext) : nullptr;
        if (prog) {
          std::int64_t inner = 1;
          for (int d = first; d < rank; ++d) inner *= vm.shape[d];
          prog->reduce = rop == &ops::sum_op    ? FusedProgram::Reduce::sum
                         : rop == &ops::mean_op ? FusedProgram::Reduce::mean
                         : rop == &ops::max_op  ? FusedProgram::Reduce::max
                                                : FusedProgram::Reduce::min;
          prog->eval_shape = vm.shape;
          prog->reduce_inner = inner;
          prog->members.push_back(rop->name);
          prog->out_meta = g.value(r.outputs[0]).meta;
          g.kill(p);
          detail::become_fused(g, i, std::move(ext), std::move(prog), MS_FORMAT("fused_reduce_{}", made++));
          continue;
        }
      }
    }
    // GEMM epilogue.
    std::vector<ValueId> ext;
    std::shared_ptr<FusedProgram> prog = plain_program(i, ext);
    if (!prog) continue;
    const auto& om = g.value(nodes[i].outputs[0]).meta;
    for (std::size_t e = 0; e < ext.size(); ++e) {
      const ValueId v = ext[e];
      if (!single_use_node_value(v)) continue;
      const auto p = static_cast<std::size_t>(g.value(v).producer);
      const Node& pn = nodes[p];
      if (pn.dead || pn.fused || pn.outputs.size() != 1 || (pn.op != &ops::matmul_op && pn.op != &ops::linear_op)) continue;
      const auto& vm = g.value(v).meta;
      if (!(vm.shape == om.shape) || vm.dtype != om.dtype) continue;
      // Renumber the program's external inputs: the GEMM result first, the others after it.
      std::vector<int> pos(ext.size());
      for (std::size_t k = 0, next = 1; k < ext.size(); ++k) pos[k] = k == e ? 0 : static_cast<int>(next++);
      auto renumber = [&](auto& list) {
        for (auto& ins : list)
          for (int a = 0; a < ins.nin; ++a)
            if (ins.src[a] < 0) ins.src[a] = -(pos[static_cast<std::size_t>(-ins.src[a] - 1)] + 1);
      };
      renumber(prog->instrs);
      renumber(prog->source);
      std::vector<ValueId> inputs = pn.inputs;
      for (std::size_t k = 0; k < ext.size(); ++k)
        if (k != e) inputs.push_back(ext[k]);
      prog->producer = pn.op;
      prog->producer_attrs = pn.attrs;
      prog->producer_inputs = static_cast<int>(pn.inputs.size());
      prog->members.insert(prog->members.begin(), std::string(pn.op->name));
      prog->out_meta = om;
      g.kill(p);
      detail::become_fused(g, i, std::move(inputs), std::move(prog), MS_FORMAT("fused_gemm_{}", made++));
      break;
    }
  }
  g.compact();
  return made;
}

}  // namespace ms::graph
#endif
