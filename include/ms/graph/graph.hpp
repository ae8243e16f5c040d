#pragma once
// Graph IR: values (dtype + shape + where they come from) and nodes (an op from
// the registry, its attributes and input values), kept in topological order with
// use counts so passes are linear scans. Also verify(), the text dump and DOT.
// Must not know about any backend.

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../core/linkage.hpp"
#include "../ops/dispatch.hpp"
#include "fused_program.hpp"

namespace ms::graph {

using ValueId = std::int32_t;

enum class ValueKind : std::uint8_t {
  input,     ///< a placeholder fed on every run
  param,     ///< mutable state owned by the caller, read (and possibly updated) on every run
  constant,  ///< a fixed tensor captured at trace time
  node,      ///< produced by a node
};

constexpr std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::input: return "input";
    case ValueKind::param: return "param";
    case ValueKind::constant: return "const";
    case ValueKind::node: return "node";
  }
  return "?";
}

struct Value {
  ops::TensorMeta meta;
  ValueKind kind = ValueKind::node;
  std::int32_t producer = -1;  ///< node index for ValueKind::node
  std::int32_t output_index = 0;
  std::int32_t uses = 0;       ///< node inputs + graph outputs referring to it
  AnyTensor data;              ///< the tensor of a param or constant
  std::string name;
};

struct Node {
  const ops::OpDef* op = nullptr;
  ops::Attrs attrs;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::string name;                       ///< unique within the graph, e.g. "mul_3"
  std::shared_ptr<const FusedProgram> fused;  ///< set for fused nodes
  bool dead = false;                      ///< removed by a pass; dropped by compact()
};

/// A captured program: values and nodes in topological order.
class Graph {
 public:
  ValueId add_input(const ops::TensorMeta& meta, std::string name = {}) {
    ValueId v = new_value(meta, ValueKind::input, name.empty() ? MS_FORMAT("input{}", inputs_.size()) : name);
    inputs_.push_back(v);
    return v;
  }
  ValueId add_param(const AnyTensor& t, std::string name = {});
  /// Turns a constant into a parameter bound to `t` (a tensor the program writes into).
  void promote_to_param(ValueId v, const AnyTensor& t);
  ValueId add_constant(const AnyTensor& t, std::string name = {});
  /// The output metas of `op` on these input values (the op's own inference).
  ops::MetaList infer_outputs(const ops::OpDef& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs) const;
  /// Appends a node; infers its outputs' metas with the op's inference. Returns the output ids.
  std::vector<ValueId> add_node(const ops::OpDef& op, std::vector<ValueId> inputs, ops::Attrs attrs = {}) {
    const ops::MetaList out = infer_outputs(op, inputs, attrs);
    return add_node_with_metas(op, std::move(inputs), std::move(attrs), out);
  }
  /// Appends a node whose output metas are already known (capture, fusion).
  std::vector<ValueId> add_node_with_metas(const ops::OpDef& op, std::vector<ValueId> inputs, ops::Attrs attrs,
                                           std::span<const ops::TensorMeta> out_metas);
  void mark_output(ValueId v) {
    check_id(v);
    outputs_.push_back(v);
    values_[v].uses++;
  }

  const std::vector<Value>& values() const { return values_; }
  std::vector<Value>& values() { return values_; }
  const Value& value(ValueId v) const { return values_[v]; }
  Value& value(ValueId v) { return values_[v]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& params() const { return params_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& outputs() { return outputs_; }
  /// Live (not dead) nodes.
  std::size_t num_nodes() const {
    return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
  }
  /// Number of live nodes running op `name` (tests count kernels with this).
  std::size_t count(std::string_view op_name) const {
    return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [&](const Node& n) {
      return !n.dead && n.op->name == op_name;
    }));
  }

  /// Replaces every use of `from` (node inputs and graph outputs) by `to`.
  void replace_uses(ValueId from, ValueId to);
  /// Marks a node dead and releases its input uses.
  void kill(std::size_t node);
  /// Drops dead nodes and renumbers producers (value ids stay stable).
  void compact();
  /// Recomputes use counts from scratch.
  void recount_uses();
  /// Inserts a node before position `pos` (used by passes that rewrite in place).
  std::vector<ValueId> insert_node_before(std::size_t pos, const ops::OpDef& op, std::vector<ValueId> inputs,
                                          ops::Attrs attrs, std::span<const ops::TensorMeta> metas);

  /// Readable text form: one line per value source and node.
  std::string str() const;
  /// Graphviz DOT form.
  std::string dot() const;

 private:
  ValueId new_value(const ops::TensorMeta& meta, ValueKind kind, std::string name);
  void check_id(ValueId v) const {
    MS_CHECK(v >= 0 && static_cast<std::size_t>(v) < values_.size(), GraphError, "graph: value id %{} does not exist", v);
  }

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_, params_, outputs_;
  std::unordered_map<std::string, int> name_counter_;
  int num_constants_ = 0;
};

inline std::string meta_str(const ops::TensorMeta& m) { return MS_FORMAT("{}{}", m.dtype, shape_str(m.shape)); }

/// The display name of a node's op: fused nodes list their members, "fused[mul+add+tanh]".
inline std::string node_label(const Node& n) {
  if (n.fused) return MS_FORMAT("fused[{}]", ::ms::detail::join_text(n.fused->members, "+"));
  return n.op->name;
}

inline std::string Graph::str() const {
  std::string s;
  auto vname = [&](ValueId v) { return MS_FORMAT("%{}", v); };
  for (ValueId v : inputs_) s += MS_FORMAT("{} = input \"{}\" : {}\n", vname(v), values_[v].name, meta_str(values_[v].meta));
  for (ValueId v : params_) s += MS_FORMAT("{} = param \"{}\" : {}\n", vname(v), values_[v].name, meta_str(values_[v].meta));
  for (std::size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == ValueKind::constant && values_[i].uses > 0)
      s += MS_FORMAT("%{} = const : {}\n", i, meta_str(values_[i].meta));
  for (const Node& n : nodes_) {
    if (n.dead) continue;
    std::vector<std::string> outs, ins;
    for (ValueId v : n.outputs) outs.push_back(vname(v));
    for (ValueId v : n.inputs) ins.push_back(vname(v));
    std::vector<std::string> metas;
    for (ValueId v : n.outputs) metas.push_back(meta_str(values_[v].meta));
    s += MS_FORMAT("{} = {}({}){} : {}   # {}\n", ::ms::detail::join_text(outs, ", "), node_label(n), ::ms::detail::join_text(ins, ", "),
                     n.attrs.empty() ? "" : " {" + n.attrs.str() + "}", ::ms::detail::join_text(metas, ", "), n.name);
  }
  std::vector<std::string> outs;
  for (ValueId v : outputs_) outs.push_back(vname(v));
  s += MS_FORMAT("return {}\n", ::ms::detail::join_text(outs, ", "));
  return s;
}

inline std::string Graph::dot() const {
  std::string s = "digraph ms {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (std::size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    if (v.kind == ValueKind::node || v.uses == 0) continue;
    const char* shape = v.kind == ValueKind::input ? "invhouse" : v.kind == ValueKind::param ? "box3d" : "note";
    s += MS_FORMAT("  v{} [shape={}, label=\"{}\\n{}\"];\n", i, shape, v.name, meta_str(v.meta));
  }
  for (std::size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = nodes_[k];
    if (n.dead) continue;
    s += MS_FORMAT("  n{} [shape=box, style=\"rounded,filled\", fillcolor=\"{}\", label=\"{}\\n{}\"];\n", k,
                     n.fused ? "#ffd9a0" : "#d0e4ff", node_label(n), meta_str(values_[n.outputs[0]].meta));
    for (ValueId in : n.inputs) {
      const Value& v = values_[in];
      if (v.kind == ValueKind::node) s += MS_FORMAT("  n{} -> n{};\n", v.producer, k);
      else s += MS_FORMAT("  v{} -> n{};\n", in, k);
    }
  }
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    const Value& v = values_[outputs_[i]];
    s += MS_FORMAT("  out{} [shape=house, label=\"output {}\"];\n", i, i);
    if (v.kind == ValueKind::node) s += MS_FORMAT("  n{} -> out{};\n", v.producer, i);
    else s += MS_FORMAT("  v{} -> out{};\n", outputs_[i], i);
  }
  return s + "}\n";
}

/// Checks the graph's invariants: ids in range, topological order (inputs defined before use),
/// metas equal to what each op infers, and use counts. Throws GraphError naming the node.
inline void verify(const Graph& g) {
  std::vector<bool> defined(g.values().size(), false);
  std::vector<std::int32_t> uses(g.values().size(), 0);
  for (std::size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].kind != ValueKind::node) defined[i] = true;
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    SmallVec<ops::TensorMeta, 4> in;
    for (ValueId v : n.inputs) {
      MS_CHECK(v >= 0 && static_cast<std::size_t>(v) < g.values().size(), GraphError,
               "verify: node {} reads value %{} which does not exist", n.name, v);
      MS_CHECK(defined[v], GraphError, "verify: node {} reads %{} before it is defined (not topologically ordered)",
               n.name, v);
      in.push_back(g.value(v).meta);
      uses[v]++;
    }
    if (!n.fused) {
      ops::MetaList out;
      try {
        n.op->infer(*n.op, std::span<const ops::TensorMeta>(in.data(), in.size()), n.attrs, out);
      } catch (const Error& e) {
        MS_THROW(GraphError, "verify: node {} fails inference: {}", n.name, e.what());
      }
      MS_CHECK(out.size() == n.outputs.size(), GraphError, "verify: node {} has {} outputs, its op infers {}", n.name,
               n.outputs.size(), out.size());
      for (std::size_t k = 0; k < out.size(); ++k)
        MS_CHECK(out[k] == g.value(n.outputs[k]).meta, GraphError, "verify: node {} output {} is {} but infers {}",
                 n.name, k, meta_str(g.value(n.outputs[k]).meta), meta_str(out[k]));
    }
    for (ValueId v : n.outputs) {
      MS_CHECK(!defined[v], GraphError, "verify: value %{} is defined twice (by node {})", v, n.name);
      defined[v] = true;
    }
  }
  for (ValueId v : g.outputs()) {
    MS_CHECK(defined[v], GraphError, "verify: graph output %{} is never defined", v);
    uses[v]++;
  }
  for (std::size_t i = 0; i < g.values().size(); ++i)
    MS_CHECK(uses[i] == g.values()[i].uses, GraphError, "verify: value %{} has use count {} but {} uses", i,
             g.values()[i].uses, uses[i]);
}

}  // namespace ms::graph

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::graph {
MS_IMPL ValueId Graph::add_param(const AnyTensor& t, std::string name) {
  ValueId v = new_value({t.dtype(), t.shape()}, ValueKind::param,
                        name.empty() ? MS_FORMAT("param{}", params_.size()) : name);
  values_[v].data = t;
  params_.push_back(v);
  return v;
}

MS_IMPL void Graph::promote_to_param(ValueId v, const AnyTensor& t) {
  check_id(v);
  Value& val = values_[v];
  MS_CHECK(val.kind == ValueKind::constant, GraphError, "graph: value %{} is not a constant", v);
  val.kind = ValueKind::param;
  val.data = t;
  val.name = MS_FORMAT("param{}", params_.size());
  params_.push_back(v);
}

MS_IMPL ValueId Graph::add_constant(const AnyTensor& t, std::string name) {
  ValueId v = new_value({t.dtype(), t.shape()}, ValueKind::constant,
                        name.empty() ? MS_FORMAT("const{}", num_constants_++) : name);
  values_[v].data = t;
  return v;
}

MS_IMPL ops::MetaList Graph::infer_outputs(const ops::OpDef& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs) const {
  SmallVec<ops::TensorMeta, 4> in;
  for (ValueId v : inputs) {
    check_id(v);
    in.push_back(values_[v].meta);
  }
  ops::MetaList out;
  op.infer(op, std::span<const ops::TensorMeta>(in.data(), in.size()), attrs, out);
  return out;
}

MS_IMPL std::vector<ValueId> Graph::add_node_with_metas(const ops::OpDef& op, std::vector<ValueId> inputs, ops::Attrs attrs,
                                           std::span<const ops::TensorMeta> out_metas) {
  Node n;
  n.op = &op;
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  n.name = MS_FORMAT("{}_{}", op.name, name_counter_[op.name]++);
  auto idx = static_cast<std::int32_t>(nodes_.size());
  for (std::size_t i = 0; i < out_metas.size(); ++i) {
    ValueId v = new_value(out_metas[i], ValueKind::node, {});
    values_[v].producer = idx;
    values_[v].output_index = static_cast<std::int32_t>(i);
    values_[v].name = out_metas.size() == 1 ? n.name : MS_FORMAT("{}:{}", n.name, i);
    n.outputs.push_back(v);
  }
  for (ValueId v : n.inputs) values_[v].uses++;
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

MS_IMPL void Graph::replace_uses(ValueId from, ValueId to) {
  for (auto& n : nodes_) {
    if (n.dead) continue;
    for (auto& v : n.inputs)
      if (v == from) { v = to; values_[from].uses--; values_[to].uses++; }
  }
  for (auto& v : outputs_)
    if (v == from) { v = to; values_[from].uses--; values_[to].uses++; }
}

MS_IMPL void Graph::kill(std::size_t node) {
  Node& n = nodes_[node];
  if (n.dead) return;
  n.dead = true;
  for (ValueId v : n.inputs) values_[v].uses--;
}

MS_IMPL void Graph::compact() {
  std::vector<Node> kept;
  for (auto& n : nodes_)
    if (!n.dead) kept.push_back(std::move(n));
  nodes_ = std::move(kept);
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    for (std::size_t k = 0; k < nodes_[i].outputs.size(); ++k) values_[nodes_[i].outputs[k]].producer = static_cast<std::int32_t>(i);
}

MS_IMPL void Graph::recount_uses() {
  for (auto& v : values_) v.uses = 0;
  for (auto& n : nodes_)
    if (!n.dead)
      for (ValueId v : n.inputs) values_[v].uses++;
  for (ValueId v : outputs_) values_[v].uses++;
}

MS_IMPL std::vector<ValueId> Graph::insert_node_before(std::size_t pos, const ops::OpDef& op, std::vector<ValueId> inputs,
                                          ops::Attrs attrs, std::span<const ops::TensorMeta> metas) {
  auto outs = add_node_with_metas(op, std::move(inputs), std::move(attrs), metas);
  Node n = std::move(nodes_.back());
  nodes_.pop_back();
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(n));
  for (std::size_t i = pos; i < nodes_.size(); ++i)
    for (ValueId v : nodes_[i].outputs) values_[v].producer = static_cast<std::int32_t>(i);
  return outs;
}

MS_IMPL ValueId Graph::new_value(const ops::TensorMeta& meta, ValueKind kind, std::string name) {
  Value v;
  v.meta = meta;
  v.kind = kind;
  v.name = std::move(name);
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}
}  // namespace ms::graph
#endif
