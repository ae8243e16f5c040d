#pragma once
// ONNX import: ms::onnx::load(path) reads a model (opsets 7-17 of the default domain, initializers,
// external data, graph inputs with symbolic dimensions) into an ms graph of registered ops, which
// compiles and replays like any captured graph (InferenceModel::from_graph, freeze, dump,
// profiler, the Ascend adapter). How: the nodes are converted in topological order by the rows of
// onnx/convert.hpp inside a graph::Capture, on placeholder tensors of the inputs' shapes, so the
// import runs the model once on zeros. Shapes are static: a symbolic dimension takes its value from
// LoadOptions (or 1).

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "convert.hpp"
#include "proto.hpp"

namespace ms::onnx {

/// The opsets of the default ONNX domain that the importer accepts.
inline constexpr int kMinOpset = 7;
inline constexpr int kMaxOpset = 17;

struct LoadOptions {
  /// Shapes for graph inputs by name; override the declared ones (which must agree where fixed).
  std::map<std::string, Shape> input_shapes;
  /// Values of symbolic dimensions by name ("batch" -> 32).
  std::map<std::string, std::int64_t> dims;
  /// A symbolic dimension neither given above nor fixed by input_shapes takes this value.
  std::int64_t default_dim = 1;
  /// Graph inputs given a value here become constants of the graph (no longer inputs): for
  /// inputs that a node needs at load time (a Reshape's shape fed as an input).
  std::map<std::string, AnyTensor> input_values;
  /// An input with more elements than this is an error (a corrupted or mistaken shape).
  std::int64_t max_input_elements = std::int64_t{1} << 32;
  /// A node whose result would have more than this many elements is an error, raised before
  /// anything is allocated (the import runs the model once, on zeros: a corrupted attribute,
  /// such as a Conv's pads of millions, must not exhaust memory). 2^30 elements is 4 GiB of
  /// float32 for one value at the load-time shapes; raise it for a model that needs more.
  std::int64_t max_value_elements = std::int64_t{1} << 30;
};

/// An imported model: the graph and the ONNX names of its inputs and outputs.
struct Model {
  graph::Graph graph;
  std::vector<std::string> input_names;   ///< the graph's inputs, in order
  std::vector<std::string> output_names;  ///< the graph's outputs, in order
  std::vector<std::string> folded_inputs; ///< ONNX inputs turned into constants (LoadOptions::input_values)
  int opset = 0;
  std::int64_t ir_version = 0;
  std::string producer;
};

/// Reads an ONNX model file. Throws IOError for a malformed file (naming it), UnsupportedError
/// for a node ms cannot run (naming the node, op type, opset and the reason).
inline Model load(const std::filesystem::path& path, const LoadOptions& opt = {});
/// Same, from a parsed model; `file` names it in errors, `base_dir` holds its external data.
inline Model load_model(const pb::ModelProto& m, const std::string& file, const std::filesystem::path& base_dir,
                        const LoadOptions& opt = {});

// ---- implementation ---------------------------------------------------------------------------

namespace detail {

/// The nodes of `g` in an order where each runs after the producers of its inputs; throws
/// IOError naming the nodes of a cycle or an input that nothing defines.
inline std::vector<int> topo_order(const pb::GraphProto& g, const std::set<std::string>& defined0,
                                   const std::string& file) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) {
        if (defined0.count(o) || !producer.emplace(o, i).second)
          bad_model(file, MS_FORMAT("value '{}' is defined twice (node '{}')", o, g.node(i).name()));
      }
  std::vector<int> pending(static_cast<std::size_t>(n), 0);
  std::vector<std::vector<int>> users(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    for (const auto& in : g.node(i).input()) {
      if (in.empty() || defined0.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        bad_model(file, MS_FORMAT("node '{}' ({}) reads '{}', which no node, input or initializer defines",
                                    g.node(i).name(), g.node(i).op_type(), in));
      users[static_cast<std::size_t>(it->second)].push_back(i);
      pending[static_cast<std::size_t>(i)]++;
    }
  std::vector<int> order, ready;
  for (int i = n - 1; i >= 0; --i)
    if (pending[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
  // Keep the file's order where it is already topological (a stack of the lowest index first).
  std::set<int> q(ready.begin(), ready.end());
  while (!q.empty()) {
    int i = *q.begin();
    q.erase(q.begin());
    order.push_back(i);
    for (int u : users[static_cast<std::size_t>(i)])
      if (--pending[static_cast<std::size_t>(u)] == 0) q.insert(u);
  }
  if (static_cast<int>(order.size()) != n) {
    std::vector<std::string> stuck;
    for (int i = 0; i < n && stuck.size() < 8; ++i)
      if (pending[static_cast<std::size_t>(i)] > 0)
        stuck.push_back(MS_FORMAT("'{}' ({})", g.node(i).name(), g.node(i).op_type()));
    bad_model(file, MS_FORMAT("the graph has a cycle through nodes {}", ::ms::detail::join_text(stuck, ", ")));
  }
  return order;
}

inline std::string node_name(const pb::NodeProto& n, int index) {
  if (!n.name().empty()) return n.name();
  return MS_FORMAT("{}_{}", n.op_type(), index);
}

/// The shape of graph input `vi`: given (LoadOptions::input_shapes, checked against the
/// declared one) or declared, with symbolic dimensions from LoadOptions::dims.
inline std::vector<std::int64_t> input_dims(const pb::ValueInfoProto& vi, const LoadOptions& opt, const std::string& file) {
  const std::string& name = vi.name();
  const auto& tt = vi.type().tensor_type();
  std::vector<std::int64_t> dims;
  auto given = opt.input_shapes.find(name);
  if (given != opt.input_shapes.end()) {
    dims = given->second.vec();
    if (tt.has_shape()) {
      if (tt.shape().dim_size() != static_cast<int>(dims.size()))
        MS_THROW(ShapeError, "onnx: '{}': input '{}' has rank {}, the shape given is {}", file, name,
                 tt.shape().dim_size(), shape_str(given->second));
      for (int k = 0; k < tt.shape().dim_size(); ++k)
        if (tt.shape().dim(k).has_dim_value() && tt.shape().dim(k).dim_value() != dims[static_cast<std::size_t>(k)])
          MS_THROW(ShapeError, "onnx: '{}': input '{}' has dimension {} = {}, the shape given is {}", file, name, k,
                   tt.shape().dim(k).dim_value(), shape_str(given->second));
    }
  } else if (tt.has_shape()) {
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) bad_model(file, MS_FORMAT("input '{}' has a negative dimension", name));
        dims.push_back(d.dim_value());
      } else {
        auto it = opt.dims.find(d.dim_param());
        dims.push_back(it != opt.dims.end() ? it->second : opt.default_dim);
      }
    }
  } else {
    MS_THROW(ShapeError, "onnx: '{}': input '{}' declares no shape; give one with LoadOptions::input_shapes", file,
             name);
  }
  std::int64_t count = 1;
  for (auto d : dims) {
    if (d < 0) MS_THROW(ShapeError, "onnx: '{}': input '{}' has a negative dimension {}", file, name, d);
    if (d > 0 && count > opt.max_input_elements / d)
      MS_THROW(ShapeError, "onnx: '{}': input '{}' of shape {} has more than {} elements (LoadOptions::max_input_elements)",
               file, name, shape_str(Shape(dims)), opt.max_input_elements);
    count *= d;
  }
  return dims;
}

/// Converts node `node` (index idx in the file) with its row of the table, traced or, when
/// every input is a constant, evaluated at once; its results join `values`.
inline void convert_node(const pb::NodeProto& node, int idx, const pb::ModelProto& m, bool has_default, int opset,
                         const std::string& file, const std::map<std::string, ConvertFn, std::less<>>& table,
                         std::map<std::string, Val>& values) {
  const std::string name = node_name(node, idx);
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    throw UnsupportedError(name, node.op_type(), opset, MS_FORMAT("domain '{}' is not supported", node.domain()));
  if (!has_default && m.opset_import_size() > 0)
    bad_model(file, MS_FORMAT("node '{}' ({}) is in the default domain, which the model does not import", name,
                                node.op_type()));
  auto row = table.find(node.op_type());
  if (row == table.end())
    throw UnsupportedError(name, node.op_type(), opset, MS_FORMAT("no ms conversion for op {}", node.op_type()));
  std::vector<const Val*> ins;
  bool all_const = true;
  for (const auto& in : node.input()) {
    if (in.empty()) { ins.push_back(nullptr); continue; }
    const Val& v = values.at(in);
    ins.push_back(&v);
    all_const = all_const && v.is_const;
  }
  // Ops whose results depend on their inputs' shapes only: constants even on traced inputs.
  const bool data_independent = node.op_type() == "Shape" || node.op_type() == "Size" || node.op_type() == "EyeLike";
  NodeCtx ctx(node, opset, std::move(ins), name);
  std::vector<AnyTensor> results;
  try {
    if (all_const) {
      Untraced u;
      results = row->second(ctx);
    } else {
      results = row->second(ctx);
    }
  } catch (const UnsupportedError&) {
    throw;
  } catch (const UnsupportedDType& e) {
    ctx.fail(e.message());
  } catch (const DTypeError& e) {  // ms has no silent promotion: a dtype an op lacks
    ctx.fail(e.message());
  } catch (const Error& e) {
    MS_THROW(GraphError, "onnx: '{}': node '{}' ({}, opset {}): {}", file, name, node.op_type(), opset,
             e.message());
  } catch (const std::exception& e) {  // a malformed node that a row did not check for
    MS_THROW(GraphError, "onnx: '{}': node '{}' ({}, opset {}): malformed node ({})", file, name, node.op_type(),
             opset, e.what());
  }
  int k = 0;
  for (const auto& o : node.output()) {
    if (!o.empty()) {
      if (k >= static_cast<int>(results.size()))
        ctx.fail(MS_FORMAT("output {} is not produced by the conversion", k));
      values[o] = Val{results[static_cast<std::size_t>(k)], all_const || data_independent};
    }
    ++k;
  }
}

}  // namespace detail

inline Model load_model(const pb::ModelProto& m, const std::string& file, const std::filesystem::path& base_dir,
                        const LoadOptions& opt) {
  Model out;
  out.ir_version = m.ir_version();
  out.producer = m.producer_name();
  bool has_default = false;
  for (const auto& os : m.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      out.opset = static_cast<int>(os.version());
      has_default = true;
    }
  if (m.opset_import_size() == 0) out.opset = 1;  // IR version 1-2 models carry no opset
  // Opsets 1-6 are read too where their semantics are those of 7 (the rows check what differs).
  if ((has_default || m.opset_import_size() == 0) && (out.opset > kMaxOpset || out.opset <= 0))
    bad_model(file, MS_FORMAT("opset {} of the default domain is not supported (ms reads opsets {} to {})",
                                out.opset, kMinOpset, kMaxOpset));
  const pb::GraphProto& g = m.graph();

  // Initializers: constants. Inputs listed as initializers too (IR < 4) take the initializer.
  std::map<std::string, Val> values;
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) bad_model(file, "an initializer has no name");
    try {
      values[t.name()] = Val{to_tensor(t, file, base_dir), true};
    } catch (const UnsupportedDType& e) {
      throw UnsupportedError(t.name(), "initializer", out.opset, e.message());
    }
  }
  for (const auto& t : g.sparse_initializer())
    throw UnsupportedError(t.values().name(), "sparse initializer", out.opset, "sparse tensors are not supported");

  graph::Capture cap;
  NoGradGuard no_grad;
  for (const auto& vi : g.input()) {
    const std::string& name = vi.name();
    if (values.count(name)) continue;
    if (!vi.type().has_tensor_type())
      throw UnsupportedError(name, "graph input", out.opset, "inputs other than tensors (sequences, maps, optionals)");
    const auto& tt = vi.type().tensor_type();
    auto dt = dtype_from_onnx(tt.elem_type());
    if (!dt) throw UnsupportedError(name, "graph input", out.opset, MS_FORMAT("element type {}", onnx_type_name(tt.elem_type())));
    if (auto it = opt.input_values.find(name); it != opt.input_values.end()) {
      if (it->second.dtype() != *dt)
        MS_THROW(DTypeError, "onnx: '{}': the value given for input '{}' is {}, the model declares {}", file, name,
                 it->second.dtype(), *dt);
      values[name] = Val{it->second, true};
      out.folded_inputs.push_back(name);
      continue;
    }
    const std::vector<std::int64_t> dims = detail::input_dims(vi, opt, file);
    AnyTensor placeholder;
    {
      Untraced u;  // the placeholder's own fill is not part of the model
      placeholder = ops::zeros(Shape(dims), *dt);
    }
    cap.input(placeholder, name);
    values[name] = Val{placeholder, false};
    out.input_names.push_back(name);
  }

  std::set<std::string> defined0;
  for (const auto& [k, v] : values) defined0.insert(k);
  const std::vector<int> order = detail::topo_order(g, defined0, file);
  const auto& table = detail::conv::table();
  const ops::OutputElementLimit value_limit(opt.max_value_elements, "LoadOptions::max_value_elements");
  for (int idx : order) detail::convert_node(g.node(idx), idx, m, has_default, out.opset, file, table, values);

  for (const auto& vi : g.output()) {
    auto it = values.find(vi.name());
    if (it == values.end()) bad_model(file, MS_FORMAT("graph output '{}' is never defined", vi.name()));
    AnyTensor t = it->second.t;
    // A graph output must be a node's own result: copy an input, a constant or a repeated value.
    bool own = !it->second.is_const && std::find(out.input_names.begin(), out.input_names.end(), vi.name()) ==
                                           out.input_names.end();
    if (own) {
      const graph::ValueId v = cap.value_of(t);
      const auto& outs = cap.graph().outputs();
      own = cap.graph().value(v).kind == graph::ValueKind::node && std::find(outs.begin(), outs.end(), v) == outs.end();
    }
    if (!own) t = ops::clone(t);
    cap.output(t);
    out.output_names.push_back(vi.name());
  }
  out.graph = cap.finish();
  return out;
}

inline Model load(const std::filesystem::path& path, const LoadOptions& opt) {
  pb::ModelProto m = read_model(path);
  return load_model(m, path.string(), path.parent_path(), opt);
}

}  // namespace ms::onnx
