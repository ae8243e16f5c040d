#pragma once
// ONNX export: ms::onnx::save(graph, path) writes a captured (or frozen, or imported) graph as an
// ONNX model (opset 17), with parameters and constants as initializers, checked with ONNX's own
// checker before the file is written (atomically). One row per ms op says which ONNX nodes stand
// for it; an op without a row is an UnsupportedError naming it. Compiled graphs (fused nodes)
// cannot be exported: export before compile, or the frozen model (load_frozen).

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

// <sys/mman.h> (the allocator) defines MAP_TYPE, a name that ONNX's parser.h uses in an enum.
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/checker.h>
#pragma pop_macro("MAP_TYPE")

#include "../core/atomic_file.hpp"
#include "../graph/freeze.hpp"
#include "../ops/binary.hpp"
#include "../ops/factory.hpp"
#include "proto.hpp"

namespace ms::onnx {

struct SaveOptions {
  std::string graph_name = "ms";
  std::string producer = "ms";
  /// Runs onnx::checker::check_model on the model before writing it.
  bool check = true;
};

/// The opset the exporter writes.
inline constexpr int kExportOpset = 17;

/// The ONNX model of a graph (before compile). Throws UnsupportedError for an op without an
/// ONNX equivalent, ValueError when the checker rejects the result.
inline pb::ModelProto to_onnx(const graph::Graph& g, const SaveOptions& opt = {});
/// Writes `g` as an ONNX file at `path`, atomically (a temporary file, then a rename).
inline void save(const graph::Graph& g, const std::filesystem::path& path, const SaveOptions& opt = {});
/// Converts a frozen model file (ms::freeze) to an ONNX file.
inline void save_frozen_as_onnx(const std::filesystem::path& frozen, const std::filesystem::path& path,
                                const SaveOptions& opt = {});

// ---- implementation ---------------------------------------------------------------------------

namespace detail::exp {

/// Emits ONNX nodes for one ms node.
class Emitter {
 public:
  Emitter(pb::GraphProto& g, const graph::Graph& mg, const graph::Node& n, int& counter)
      : g_(g), mg_(mg), n_(n), counter_(counter) {}
  const graph::Node& node() const { return n_; }
  const ops::Attrs& attrs() const { return n_.attrs; }
  std::size_t num_inputs() const { return n_.inputs.size(); }
  std::string in(std::size_t i) const { return vname(n_.inputs.at(i)); }
  const ops::TensorMeta& in_meta(std::size_t i) const { return mg_.value(n_.inputs.at(i)).meta; }
  std::string out(std::size_t i = 0) const { return vname(n_.outputs.at(i)); }
  const ops::TensorMeta& out_meta(std::size_t i = 0) const { return mg_.value(n_.outputs.at(i)).meta; }
  /// True when output i is read by a node or is a graph output.
  bool output_used(std::size_t i) const { return mg_.value(n_.outputs.at(i)).uses > 0; }
  std::string tmp() { return MS_FORMAT("{}__t{}", n_.name, counter_++); }
  pb::NodeProto& emit(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    pb::NodeProto* p = g_.add_node();
    p->set_op_type(op);
    p->set_name(MS_FORMAT("{}__{}", n_.name, counter_++));
    for (auto& s : ins) p->add_input(s);
    for (auto& s : outs) p->add_output(s);
    return *p;
  }
  /// emit() with one fresh output; returns its name.
  std::string value(const std::string& op, std::vector<std::string> ins) {
    std::string o = tmp();
    emit(op, std::move(ins), {o});
    return o;
  }
  std::string const_tensor(const AnyTensor& t) {
    std::string nm = tmp();
    *g_.add_initializer() = from_tensor(t, nm);
    return nm;
  }
  std::string const_ints(const ops::IntList& v) {
    AnyTensor t = AnyTensor::empty(Shape{static_cast<std::int64_t>(v.size())}, DType::i64);
    std::copy(v.begin(), v.end(), static_cast<std::int64_t*>(t.raw_data()));
    return const_tensor(t);
  }
  std::string const_scalar(double x, DType d) { return const_tensor(ops::scalar_tensor(x, d, "export")); }
  [[noreturn]] void fail(const std::string& why) const {
    throw UnsupportedError(n_.name, n_.op->name, kExportOpset, "export: " + why);
  }
  static std::string vname(graph::ValueId v) { return MS_FORMAT("v{}", v); }

 private:
  pb::GraphProto& g_;
  const graph::Graph& mg_;
  const graph::Node& n_;
  int& counter_;
};

inline void set_i(pb::NodeProto& n, const char* k, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(v);
}
inline void set_f(pb::NodeProto& n, const char* k, double v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(pb::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
inline void set_ints(pb::NodeProto& n, const char* k, const ops::IntList& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(pb::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

using Row = void (*)(Emitter& e);

inline void simple(Emitter& e, const char* op) {
  std::vector<std::string> ins;
  for (std::size_t i = 0; i < e.num_inputs(); ++i) ins.push_back(e.in(i));
  e.emit(op, ins, {e.out()});
}
#define MS_ONNX_SIMPLE(name, op) {name, [](Emitter& e) { simple(e, op); }}

inline void reduce_row(Emitter& e, const char* op) {
  const auto& a = e.attrs();
  ops::IntList axes = a.has("axes") ? a.ints("axes") : ops::IntList{};
  const bool kd = a.b("keepdim", false);
  if (axes.empty())
    for (int i = 0; i < e.in_meta(0).shape.rank(); ++i) axes.push_back(i);
  if (std::string_view(op) == "ReduceSum") {
    auto& n = e.emit(op, {e.in(0), e.const_ints(axes)}, {e.out()});
    set_i(n, "keepdims", kd);
  } else {
    auto& n = e.emit(op, {e.in(0)}, {e.out()});
    set_ints(n, "axes", axes);
    set_i(n, "keepdims", kd);
  }
}
inline void arg_row(Emitter& e, const char* op) {
  const auto& a = e.attrs();
  const bool kd = a.b("keepdim", false);
  std::string x = e.in(0);
  std::int64_t axis = 0;
  if (a.has("axis")) axis = a.i("axis");
  else x = e.value("Reshape", {x, e.const_ints({-1})});  // over all elements, as ms does
  auto& n = e.emit(op, {x}, {e.out()});
  set_i(n, "axis", axis);
  set_i(n, "keepdims", kd && a.has("axis"));
  if (kd && !a.has("axis")) e.fail("argmax/argmin over all axes with keepdim");
}

using RowTable = std::map<std::string, Row, std::less<>>;

/// The elementwise ops: arithmetic, comparisons, logic, math functions, activations.
inline RowTable math_rows() {
  return {
      MS_ONNX_SIMPLE("add", "Add"), MS_ONNX_SIMPLE("sub", "Sub"), MS_ONNX_SIMPLE("mul", "Mul"),
      MS_ONNX_SIMPLE("div", "Div"), MS_ONNX_SIMPLE("maximum", "Max"), MS_ONNX_SIMPLE("minimum", "Min"),
      MS_ONNX_SIMPLE("eq", "Equal"), MS_ONNX_SIMPLE("lt", "Less"), MS_ONNX_SIMPLE("gt", "Greater"),
      MS_ONNX_SIMPLE("le", "LessOrEqual"), MS_ONNX_SIMPLE("ge", "GreaterOrEqual"),
      MS_ONNX_SIMPLE("logical_and", "And"), MS_ONNX_SIMPLE("logical_or", "Or"), MS_ONNX_SIMPLE("logical_not", "Not"),
      MS_ONNX_SIMPLE("pow", "Pow"), MS_ONNX_SIMPLE("where", "Where"), MS_ONNX_SIMPLE("neg", "Neg"),
      MS_ONNX_SIMPLE("abs", "Abs"), MS_ONNX_SIMPLE("sign", "Sign"), MS_ONNX_SIMPLE("exp", "Exp"),
      MS_ONNX_SIMPLE("log", "Log"), MS_ONNX_SIMPLE("sqrt", "Sqrt"), MS_ONNX_SIMPLE("reciprocal", "Reciprocal"),
      MS_ONNX_SIMPLE("erf", "Erf"), MS_ONNX_SIMPLE("sin", "Sin"), MS_ONNX_SIMPLE("cos", "Cos"),
      MS_ONNX_SIMPLE("tanh", "Tanh"), MS_ONNX_SIMPLE("sigmoid", "Sigmoid"), MS_ONNX_SIMPLE("relu", "Relu"),
      MS_ONNX_SIMPLE("floor", "Floor"), MS_ONNX_SIMPLE("ceil", "Ceil"), MS_ONNX_SIMPLE("round", "Round"),
      MS_ONNX_SIMPLE("softplus", "Softplus"), MS_ONNX_SIMPLE("copy", "Identity"), MS_ONNX_SIMPLE("matmul", "MatMul"),
      {"ne", [](Emitter& e) { e.emit("Not", {e.value("Equal", {e.in(0), e.in(1)})}, {e.out()}); }},
      {"square", [](Emitter& e) { e.emit("Mul", {e.in(0), e.in(0)}, {e.out()}); }},
      {"rsqrt", [](Emitter& e) { e.emit("Reciprocal", {e.value("Sqrt", {e.in(0)})}, {e.out()}); }},
      {"log1p", [](Emitter& e) {
         e.emit("Log", {e.value("Add", {e.in(0), e.const_scalar(1, e.in_meta(0).dtype)})}, {e.out()});
       }},
      {"expm1", [](Emitter& e) {
         e.emit("Sub", {e.value("Exp", {e.in(0)}), e.const_scalar(1, e.in_meta(0).dtype)}, {e.out()});
       }},
      {"silu", [](Emitter& e) { e.emit("Mul", {e.in(0), e.value("Sigmoid", {e.in(0)})}, {e.out()}); }},
      {"gelu", [](Emitter& e) {
         const DType d = e.in_meta(0).dtype;
         std::string t = e.value("Erf", {e.value("Mul", {e.in(0), e.const_scalar(0.70710678118654752440, d)})});
         t = e.value("Add", {t, e.const_scalar(1, d)});
         e.emit("Mul", {e.value("Mul", {e.in(0), t}), e.const_scalar(0.5, d)}, {e.out()});
       }},
      {"hardsigmoid", [](Emitter& e) {
         auto& n = e.emit("HardSigmoid", {e.in(0)}, {e.out()});
         set_f(n, "alpha", 1.0 / 6.0);
         set_f(n, "beta", 0.5);
       }},
      {"leaky_relu", [](Emitter& e) { set_f(e.emit("LeakyRelu", {e.in(0)}, {e.out()}), "alpha", e.attrs().f("slope", 0.01)); }},
      {"elu", [](Emitter& e) { set_f(e.emit("Elu", {e.in(0)}, {e.out()}), "alpha", e.attrs().f("alpha", 1.0)); }},
      {"clamp", [](Emitter& e) {
         const DType d = e.in_meta(0).dtype;
         const double lo = e.attrs().f("lo", -std::numeric_limits<double>::infinity());
         const double hi = e.attrs().f("hi", std::numeric_limits<double>::infinity());
         auto bound = [&](double v) { return std::isinf(v) ? std::string() : e.const_scalar(v, d); };
         e.emit("Clip", {e.in(0), bound(lo), bound(hi)}, {e.out()});
       }},
      {"pow_scalar", [](Emitter& e) {
         e.emit("Pow", {e.in(0), e.const_scalar(e.attrs().f("exponent"), e.in_meta(0).dtype)}, {e.out()});
       }}
  };
}

/// Casts, views, movement and indexing.
inline RowTable tensor_rows() {
  return {
      {"cast", [](Emitter& e) { set_i(e.emit("Cast", {e.in(0)}, {e.out()}), "to", dtype_to_onnx(e.attrs().dtype("dtype"))); }},
      {"reshape", [](Emitter& e) { e.emit("Reshape", {e.in(0), e.const_ints(e.out_meta().shape.vec())}, {e.out()}); }},
      {"permute", [](Emitter& e) { set_ints(e.emit("Transpose", {e.in(0)}, {e.out()}), "perm", e.attrs().ints("perm")); }},
      {"expand", [](Emitter& e) { e.emit("Expand", {e.in(0), e.const_ints(e.out_meta().shape.vec())}, {e.out()}); }},
      {"slice", [](Emitter& e) {
         const auto& a = e.attrs();
         constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
         const std::int64_t step = a.i("step", 1);
         const std::int64_t start = a.i("start", step > 0 ? 0 : kMax);
         const std::int64_t stop = a.i("stop", step > 0 ? kMax : std::numeric_limits<std::int64_t>::min());
         e.emit("Slice", {e.in(0), e.const_ints({start}), e.const_ints({stop}), e.const_ints({a.i("axis")}),
                          e.const_ints({step})}, {e.out()});
       }},
      {"concat", [](Emitter& e) {
         std::vector<std::string> ins;
         for (std::size_t i = 0; i < e.num_inputs(); ++i) ins.push_back(e.in(i));
         set_i(e.emit("Concat", ins, {e.out()}), "axis", e.attrs().i("axis", 0));
       }},
      {"split", [](Emitter& e) {
         std::vector<std::string> outs;
         for (std::size_t i = 0; i < e.node().outputs.size(); ++i) outs.push_back(e.out(i));
         set_i(e.emit("Split", {e.in(0), e.const_ints(e.attrs().ints("sizes"))}, outs), "axis", e.attrs().i("axis", 0));
       }},
      {"index_select", [](Emitter& e) { set_i(e.emit("Gather", {e.in(0), e.in(1)}, {e.out()}), "axis", e.attrs().i("axis", 0)); }},
      {"embedding", [](Emitter& e) { set_i(e.emit("Gather", {e.in(0), e.in(1)}, {e.out()}), "axis", 0); }},
      {"gather", [](Emitter& e) { set_i(e.emit("GatherElements", {e.in(0), e.in(1)}, {e.out()}), "axis", e.attrs().i("axis", 0)); }},
      {"tile", [](Emitter& e) {  // ONNX wants one count per dim: x reshaped to the output's rank, reps padded with 1s
         ops::IntList reps = e.attrs().ints("reps");
         const auto r = static_cast<std::size_t>(e.out_meta().shape.rank());
         std::string x = e.in(0);
         const ops::IntList xs = e.in_meta(0).shape.vec();
         if (xs.size() < r) {
           ops::IntList s(r - xs.size(), 1);
           s.insert(s.end(), xs.begin(), xs.end());
           x = e.value("Reshape", {x, e.const_ints(s)});
         }
         reps.insert(reps.begin(), r - reps.size(), 1);
         e.emit("Tile", {x, e.const_ints(reps)}, {e.out()});
       }},
      {"cumsum", [](Emitter& e) {
         auto& n = e.emit("CumSum", {e.in(0), e.const_scalar(static_cast<double>(e.attrs().i("axis")), DType::i64)}, {e.out()});
         set_i(n, "exclusive", e.attrs().b("exclusive"));
         set_i(n, "reverse", e.attrs().b("reverse"));
       }},
      {"topk", [](Emitter& e) {
         auto& n = e.emit("TopK", {e.in(0), e.const_ints({e.attrs().i("k")})}, {e.out(0), e.out(1)});
         set_i(n, "axis", e.attrs().i("axis", -1));
         set_i(n, "largest", e.attrs().b("largest", true));
         set_i(n, "sorted", e.attrs().b("sorted", true));
       }},
      {"triu", [](Emitter& e) {
         set_i(e.emit("Trilu", {e.in(0), e.const_scalar(static_cast<double>(e.attrs().i("k", 0)), DType::i64)}, {e.out()}), "upper", 1);
       }},
      {"tril", [](Emitter& e) {
         set_i(e.emit("Trilu", {e.in(0), e.const_scalar(static_cast<double>(e.attrs().i("k", 0)), DType::i64)}, {e.out()}), "upper", 0);
       }},
      {"fmod", [](Emitter& e) { set_i(e.emit("Mod", {e.in(0), e.in(1)}, {e.out()}), "fmod", 1); }},
      {"remainder", [](Emitter& e) {
         const DType d = e.in_meta(0).dtype;
         if (!is_floating(d)) {
           set_i(e.emit("Mod", {e.in(0), e.in(1)}, {e.out()}), "fmod", 0);
           return;
         }
         // ONNX's Mod takes fmod=1 only for floats: r = fmod(a, b), plus b where r and b differ in sign.
         std::string r = e.tmp();
         set_i(e.emit("Mod", {e.in(0), e.in(1)}, {r}), "fmod", 1);
         const std::string zero = e.const_scalar(0.0, d);
         const std::string differ = e.value("Xor", {e.value("Less", {r, zero}), e.value("Less", {e.in(1), zero})});
         const std::string fix = e.value("And", {differ, e.value("Not", {e.value("Equal", {r, zero})})});
         e.emit("Where", {fix, e.value("Add", {r, e.in(1)}), r}, {e.out()});
       }},
      {"pad", [](Emitter& e) {
         const auto& a = e.attrs();
         ops::IntList pads = a.ints("begin");
         const ops::IntList& end = a.ints("end");
         pads.insert(pads.end(), end.begin(), end.end());
         const std::string mode = a.has("mode") ? a.str("mode") : "constant";
         std::vector<std::string> ins{e.in(0), e.const_ints(pads)};
         if (mode == "constant") ins.push_back(e.const_scalar(a.f("value", 0.0), e.in_meta(0).dtype));
         auto& n = e.emit("Pad", ins, {e.out()});
         auto* m = n.add_attribute();
         m->set_name("mode");
         m->set_type(pb::AttributeProto::STRING);
         m->set_s(mode == "replicate" ? "edge" : mode);
       }}
  };
}

/// Reductions, linear algebra and the neural-network ops.
inline RowTable nn_rows() {
  return {
      {"sum", [](Emitter& e) { reduce_row(e, "ReduceSum"); }},
      {"mean", [](Emitter& e) { reduce_row(e, "ReduceMean"); }},
      {"max", [](Emitter& e) { reduce_row(e, "ReduceMax"); }},
      {"min", [](Emitter& e) { reduce_row(e, "ReduceMin"); }},
      {"prod", [](Emitter& e) { reduce_row(e, "ReduceProd"); }},
      {"argmax", [](Emitter& e) { arg_row(e, "ArgMax"); }},
      {"argmin", [](Emitter& e) { arg_row(e, "ArgMin"); }},
      {"softmax", [](Emitter& e) { set_i(e.emit("Softmax", {e.in(0)}, {e.out()}), "axis", e.attrs().i("axis", -1)); }},
      {"log_softmax", [](Emitter& e) { set_i(e.emit("LogSoftmax", {e.in(0)}, {e.out()}), "axis", e.attrs().i("axis", -1)); }},
      {"linear", [](Emitter& e) {
         // x @ w^T + b
         std::string y = e.value("MatMul", {e.in(0), e.value("Transpose", {e.in(1)})});
         if (e.num_inputs() > 2) e.emit("Add", {y, e.in(2)}, {e.out()});
         else e.emit("Identity", {y}, {e.out()});
       }},
      {"conv2d", [](Emitter& e) {
         const auto& a = e.attrs();
         std::vector<std::string> ins{e.in(0), e.in(1)};
         if (e.num_inputs() > 2) ins.push_back(e.in(2));
         auto& n = e.emit("Conv", ins, {e.out()});
         const auto& p = a.ints("padding");
         set_ints(n, "strides", a.ints("stride"));
         set_ints(n, "pads", {p[0], p[1], p[0], p[1]});
         set_ints(n, "dilations", a.ints("dilation"));
         set_i(n, "group", a.i("groups", 1));
         set_ints(n, "kernel_shape", {e.in_meta(1).shape[2], e.in_meta(1).shape[3]});
       }},
      {"conv_transpose2d", [](Emitter& e) {
         const auto& a = e.attrs();
         std::vector<std::string> ins{e.in(0), e.in(1)};
         if (e.num_inputs() > 2) ins.push_back(e.in(2));
         auto& n = e.emit("ConvTranspose", ins, {e.out()});
         const auto& p = a.ints("padding");
         set_ints(n, "strides", a.ints("stride"));
         set_ints(n, "pads", {p[0], p[1], p[0], p[1]});
         set_ints(n, "dilations", a.ints("dilation"));
         set_ints(n, "output_padding", a.has("output_padding") ? a.ints("output_padding") : ops::IntList{0, 0});
         set_i(n, "group", a.i("groups", 1));
         set_ints(n, "kernel_shape", {e.in_meta(1).shape[2], e.in_meta(1).shape[3]});
       }},
      {"interpolate", [](Emitter& e) {
         // Resize of the last two axes. A scale factor travels as scales (the coordinates map with
         // it, as in ms); sizes otherwise, and always for align_corners (whose mapping ignores it).
         const auto& a = e.attrs();
         const bool bilinear = a.has("mode") && a.str("mode") == "bilinear", align = a.b("align_corners", false);
         const Shape& os = e.out_meta().shape;
         std::string scales, sizes;
         if (a.has("scale_h") && !align) {
           AnyTensor t = AnyTensor::empty(Shape{4}, DType::f32);
           float* q = static_cast<float*>(t.raw_data());
           q[0] = q[1] = 1.0f;
           q[2] = static_cast<float>(a.f("scale_h"));
           q[3] = static_cast<float>(a.f("scale_w"));
           scales = e.const_tensor(t);
         } else {
           sizes = e.const_ints(os.vec());
         }
         auto& n = e.emit("Resize", {e.in(0), "", scales, sizes}, {e.out()});
         auto set_s = [](pb::NodeProto& nd, const char* k, const std::string& v) {
           auto* at = nd.add_attribute();
           at->set_name(k);
           at->set_type(pb::AttributeProto::STRING);
           at->set_s(v);
         };
         set_s(n, "mode", bilinear ? "linear" : "nearest");
         set_s(n, "coordinate_transformation_mode", !bilinear ? "asymmetric" : align ? "align_corners" : "half_pixel");
         if (!bilinear) set_s(n, "nearest_mode", "floor");
       }},
      {"max_pool2d", [](Emitter& e) {
         const auto& a = e.attrs();
         if (e.node().outputs.size() > 1 && e.output_used(1)) e.fail("max_pool2d's indices (a plane index; ONNX counts over N, C, H, W)");
         const auto& p = a.ints("padding");
         auto& n = e.emit("MaxPool", {e.in(0)}, {e.out()});
         set_ints(n, "kernel_shape", a.ints("kernel_size"));
         set_ints(n, "strides", a.ints("stride"));
         set_ints(n, "pads", {p[0], p[1], p[0], p[1]});
       }},
      {"avg_pool2d", [](Emitter& e) {
         const auto& a = e.attrs();
         const auto& p = a.ints("padding");
         auto& n = e.emit("AveragePool", {e.in(0)}, {e.out()});
         set_ints(n, "kernel_shape", a.ints("kernel_size"));
         set_ints(n, "strides", a.ints("stride"));
         set_ints(n, "pads", {p[0], p[1], p[0], p[1]});
         set_i(n, "count_include_pad", a.b("count_include_pad", true));
       }},
      {"adaptive_avg_pool2d", [](Emitter& e) {
         const auto& os = e.attrs().ints("output_size");
         if (os != ops::IntList{1, 1}) e.fail("adaptive_avg_pool2d to a size other than 1 x 1");
         e.emit("GlobalAveragePool", {e.in(0)}, {e.out()});
       }},
      {"batch_norm", [](Emitter& e) {
         if (e.attrs().b("training", false)) e.fail("batch_norm in training mode");
         if (e.num_inputs() < 5) e.fail("batch_norm without running statistics");
         auto& n = e.emit("BatchNormalization", {e.in(0), e.in(1), e.in(2), e.in(3), e.in(4)}, {e.out()});
         set_f(n, "epsilon", e.attrs().f("eps", 1e-5));
       }},
      {"layer_norm", [](Emitter& e) {
         const auto& ns = e.attrs().ints("normalized_shape");
         std::vector<std::string> ins{e.in(0)};
         if (e.num_inputs() > 1) ins.push_back(e.in(1));
         else ins.push_back(e.const_tensor(ops::ones(Shape(ns), e.in_meta(0).dtype)));
         if (e.num_inputs() > 2) ins.push_back(e.in(2));
         auto& n = e.emit("LayerNormalization", ins, {e.out()});
         set_i(n, "axis", -static_cast<std::int64_t>(ns.size()));
         set_f(n, "epsilon", e.attrs().f("eps", 1e-5));
       }},
      {"dropout", [](Emitter& e) {
         if (e.attrs().b("training", true) && e.attrs().f("p", 0.5) > 0) e.fail("dropout in training mode");
         e.emit("Identity", {e.in(0)}, {e.out()});
       }}
  };
}

/// Every exported op's row, by ms op name.
inline const RowTable& rows() {
  static const RowTable t = [] {
    RowTable all = math_rows();
    all.merge(tensor_rows());
    all.merge(nn_rows());
    return all;
  }();
  return t;
}
#undef MS_ONNX_SIMPLE

inline pb::ValueInfoProto value_info(const std::string& name, const ops::TensorMeta& m) {
  pb::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(m.dtype));
  auto* sh = tt->mutable_shape();
  for (auto d : m.shape) sh->add_dim()->set_dim_value(d);
  return vi;
}

}  // namespace detail::exp

inline pb::ModelProto to_onnx(const graph::Graph& g, const SaveOptions& opt) {
  using detail::exp::Emitter;
  pb::ModelProto m;
  m.set_ir_version(8);  // ONNX 1.10+; what opset 17 models carry
  m.set_producer_name(opt.producer);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(kExportOpset);
  pb::GraphProto& pg = *m.mutable_graph();
  pg.set_name(opt.graph_name);
  std::vector<bool> used(g.values().size(), false);
  for (const auto& n : g.nodes())
    if (!n.dead)
      for (auto v : n.inputs) used[static_cast<std::size_t>(v)] = true;
  for (auto v : g.outputs()) used[static_cast<std::size_t>(v)] = true;
  for (std::size_t i = 0; i < g.values().size(); ++i) {
    const graph::Value& v = g.values()[i];
    const std::string nm = Emitter::vname(static_cast<graph::ValueId>(i));
    if (v.kind == graph::ValueKind::input) {
      *pg.add_input() = detail::exp::value_info(nm, v.meta);
    } else if ((v.kind == graph::ValueKind::param || v.kind == graph::ValueKind::constant) && used[i]) {
      MS_CHECK(v.data.defined() && v.data.device().is_cpu(), ValueError, "onnx export: {} '{}' has no data on the cpu",
               graph::value_kind_name(v.kind), v.name);
      *pg.add_initializer() = from_tensor(v.data, nm);
    }
  }
  int counter = 0;
  const auto& rows = detail::exp::rows();
  for (const auto& n : g.nodes()) {
    if (n.dead) continue;
    if (n.fused)
      throw UnsupportedError(n.name, std::string(graph::node_label(n)), kExportOpset,
                             "export: fused nodes (export the graph before compile)");
    Emitter e(pg, g, n, counter);
    if (n.op->category == ops::Category::creation && n.inputs.empty() && !n.op->is_random) {
      // Made from attributes only: computed now and stored as an initializer.
      std::vector<AnyTensor> r = ops::call(*n.op, {}, n.attrs);
      e.emit("Identity", {e.const_tensor(r.at(0))}, {e.out()});
      continue;
    }
    auto row = rows.find(n.op->name);
    if (row == rows.end())
      throw UnsupportedError(n.name, n.op->name, kExportOpset, "export: the op has no ONNX equivalent in ms's table");
    row->second(e);
  }
  for (auto v : g.outputs()) *pg.add_output() = detail::exp::value_info(Emitter::vname(v), g.value(v).meta);
  if (opt.check) {
    try {
      ::ONNX_NAMESPACE::checker::check_model(m);
    } catch (const std::exception& ex) {
      MS_THROW(ValueError, "onnx export: the ONNX checker rejects the model: {}", ex.what());
    }
  }
  return m;
}

inline void save(const graph::Graph& g, const std::filesystem::path& path, const SaveOptions& opt) {
  const std::string bytes = to_onnx(g, opt).SerializeAsString();
  write_file_atomically(path, bytes, "onnx save");
}

inline void save_frozen_as_onnx(const std::filesystem::path& frozen, const std::filesystem::path& path,
                                const SaveOptions& opt) {
  save(load_frozen(frozen), path, opt);
}

}  // namespace ms::onnx
