// ONNX import and export (<ms/onnx.hpp>): models built here with the protobuf API, loaded and
// run against hand-computed values; the typed errors for bad files and unsupported nodes; a
// ResNet-style network exported (checked by ONNX's checker), imported again and run on the CPU
// and the Ascend emulator with the eager outputs as reference. The conformance suite itself runs
// in ctest as onnx.conformance (tools/ms_onnx_test.cpp).

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <ms/onnx.hpp>

namespace onnx_test {
namespace {

using namespace ms;
namespace pb = ms::onnx::pb;
namespace mo = ms::onnx;  // not `onnx`: that is also ONNX's own namespace
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

/// A fresh folder under the temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "ms_onnx_test_XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

pb::ValueInfoProto tensor_info(const std::string& name, int elem, std::vector<std::int64_t> dims,
                               std::vector<std::string> params = {}) {
  pb::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto* d = sh->add_dim();
    if (i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
    else d->set_dim_value(dims[i]);
  }
  return vi;
}

pb::NodeProto& add_node(pb::GraphProto& g, const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = {}) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + std::to_string(g.node_size()) : name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return *n;
}

/// Adds an INTS attribute to node n.
void add_ints(pb::NodeProto& n, const std::string& name, std::initializer_list<std::int64_t> values) {
  auto* at = n.add_attribute();
  at->set_name(name);
  at->set_type(pb::AttributeProto::INTS);
  for (std::int64_t v : values) at->add_ints(v);
}

pb::ModelProto model_with(int opset = 13) {
  pb::ModelProto m;
  m.set_ir_version(7);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

pb::TensorProto float_init(const std::string& name, std::vector<std::int64_t> dims, std::vector<float> v) {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(pb::TensorProto::FLOAT);
  for (auto d : dims) t.add_dims(d);
  for (float x : v) t.add_float_data(x);
  return t;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<float> values(const AnyTensor& t) { return Tensor<float>(ops::contiguous(t)).to_vector(); }

/// y = relu(x + b) with b an initializer; x (N, 3) with a symbolic N.
pb::ModelProto add_relu_model() {
  pb::ModelProto m = model_with();
  auto& g = *m.mutable_graph();
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {0, 3}, {"N", ""});
  *g.add_initializer() = float_init("b", {3}, {1, -2, 0.5f});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {0, 3}, {"N", ""});
  add_node(g, "Add", {"x", "b"}, {"s"});
  add_node(g, "Relu", {"s"}, {"y"});
  return m;
}

TEST_CASE("onnx: a model with an initializer and a symbolic batch loads and runs", "[onnx]") {
  mo::LoadOptions opt;
  opt.dims["N"] = 2;
  mo::Model model = mo::load_model(add_relu_model(), "add_relu.onnx", {}, opt);
  REQUIRE(model.input_names == std::vector<std::string>{"x"});
  REQUIRE(model.output_names == std::vector<std::string>{"y"});
  REQUIRE(model.graph.value(model.graph.inputs()[0]).meta.shape == Shape{2, 3});
  CHECK(model.graph.count("add") == 1);
  CHECK(model.graph.count("relu") == 1);
  auto exe = InferenceModel::from_graph(std::move(model.graph));
  Tensor<float> x{{1, 1, 1}, {-3, 4, -1}};
  auto y = exe.run({x});
  CHECK(values(y[0]) == std::vector<float>{2, 0, 1.5f, 0, 2, 0});
  // Without a value the symbolic dimension is LoadOptions::default_dim (1).
  CHECK(mo::load_model(add_relu_model(), "m", {}).graph.value(0).meta.shape == Shape{1, 3});
}

TEST_CASE("onnx: shape arithmetic on constants folds away at load", "[onnx]") {
  // y = reshape(x, concat(shape(x)[0:1], [-1])): the exported PyTorch flatten idiom
  pb::ModelProto m = model_with();
  auto& g = *m.mutable_graph();
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2, 3, 2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2, 6});
  pb::TensorProto zero;
  zero.set_name("zero");
  zero.set_data_type(pb::TensorProto::INT64);
  zero.add_int64_data(0);
  pb::TensorProto minus1 = zero;
  minus1.set_name("minus1");
  minus1.set_int64_data(0, -1);
  minus1.add_dims(1);
  *g.add_initializer() = zero;
  *g.add_initializer() = minus1;
  add_node(g, "Shape", {"x"}, {"s"});
  add_node(g, "Gather", {"s", "zero"}, {"n"});
  auto& u = add_node(g, "Unsqueeze", {"n"}, {"n1"});
  (void)u;
  pb::TensorProto ax = zero;
  ax.set_name("ax");
  ax.add_dims(1);
  *g.add_initializer() = ax;
  g.mutable_node(2)->add_input("ax");
  auto& c = add_node(g, "Concat", {"n1", "minus1"}, {"shape"});
  auto* a = c.add_attribute();
  a->set_name("axis");
  a->set_type(pb::AttributeProto::INT);
  a->set_i(0);
  add_node(g, "Reshape", {"x", "shape"}, {"y"});
  mo::Model model = mo::load_model(m, "flatten.onnx", {});
  INFO(model.graph.str());
  CHECK(model.graph.num_nodes() == 1);
  CHECK(model.graph.count("reshape") == 1);
  CHECK(model.graph.value(model.graph.outputs()[0]).meta.shape == Shape{2, 6});
}

TEST_CASE("onnx: bad files are IOErrors naming the file and the defect", "[onnx][errors]") {
  TempDir dir;
  const std::string bytes = add_relu_model().SerializeAsString();

  SECTION("truncated") {
    const fs::path p = dir.path / "cut.onnx";
    write_file(p, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_MATCHES(mo::load(p), IOError, Catch::Matchers::Predicate<IOError>([&](const IOError& e) {
                           return std::string(e.what()).find(p.string()) != std::string::npos &&
                                  std::string(e.what()).find("truncated or corrupted") != std::string::npos;
                         }));
  }
  SECTION("corrupted") {
    const fs::path p = dir.path / "bad.onnx";
    std::string b = bytes;
    for (std::size_t i = 0; i < b.size(); i += 3) b[i] = static_cast<char>(0xff);
    write_file(p, b);
    CHECK_THROWS_AS(mo::load(p), IOError);
  }
  SECTION("missing file and empty file") {
    CHECK_THROWS_WITH(mo::load(dir.path / "none.onnx"), Contains("none.onnx") && Contains("cannot be opened"));
    write_file(dir.path / "empty.onnx", "");
    CHECK_THROWS_WITH(mo::load(dir.path / "empty.onnx"), Contains("is empty"));
  }
  SECTION("unknown opset") {
    pb::ModelProto m = add_relu_model();
    m.mutable_opset_import(0)->set_version(99);
    CHECK_THROWS_WITH(mo::load_model(m, "future.onnx", {}),
                      "[ms.io_error] onnx: 'future.onnx': opset 99 of the default domain is not supported (ms reads "
                      "opsets 7 to 17)");
  }
  SECTION("a cycle") {
    pb::ModelProto m = model_with();
    auto& g = *m.mutable_graph();
    *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2});
    *g.add_output() = tensor_info("b", pb::TensorProto::FLOAT, {2});
    add_node(g, "Add", {"x", "b"}, {"a"}, "first");
    add_node(g, "Relu", {"a"}, {"b"}, "second");
    CHECK_THROWS_WITH(mo::load_model(m, "loop.onnx", {}),
                      "[ms.io_error] onnx: 'loop.onnx': the graph has a cycle through nodes 'first' (Add), "
                      "'second' (Relu)");
  }
  SECTION("an undefined value") {
    pb::ModelProto m = add_relu_model();
    m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
    CHECK_THROWS_WITH(mo::load_model(m, "m.onnx", {}), Contains("reads 'nowhere', which no node"));
  }
  SECTION("a tensor whose data disagrees with its shape") {
    pb::ModelProto m = add_relu_model();
    m.mutable_graph()->mutable_initializer(0)->add_float_data(7);
    CHECK_THROWS_WITH(mo::load_model(m, "m.onnx", {}),
                      "[ms.io_error] onnx: 'm.onnx': tensor 'b' declares shape (3,) of float (3 elements) but holds "
                      "4 values");
    m.mutable_graph()->mutable_initializer(0)->clear_float_data();
    m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(8, '\0'));
    CHECK_THROWS_WITH(mo::load_model(m, "m.onnx", {}), Contains("holds 8 bytes"));
  }
  SECTION("external data") {
    pb::ModelProto m = add_relu_model();
    auto* t = m.mutable_graph()->mutable_initializer(0);
    t->clear_float_data();
    t->set_data_location(pb::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value("weights.bin");
    write_file(dir.path / "m.onnx", m.SerializeAsString());
    CHECK_THROWS_WITH(mo::load(dir.path / "m.onnx"), Contains("m.onnx") && Contains("weights.bin") &&
                                                            Contains("cannot be opened"));
    const float w[3] = {1, -2, 0.5f};
    write_file(dir.path / "weights.bin", std::string(reinterpret_cast<const char*>(w), sizeof w));
    mo::Model model = mo::load(dir.path / "m.onnx");
    auto exe = InferenceModel::from_graph(std::move(model.graph));
    CHECK(values(exe.run({Tensor<float>{{0, 3, 0}}})[0]) == std::vector<float>{1, 1, 0.5f});
    kv->set_value("../escape.bin");
    write_file(dir.path / "m.onnx", m.SerializeAsString());
    CHECK_THROWS_WITH(mo::load(dir.path / "m.onnx"), Contains("outside the model's folder"));
  }
}

TEST_CASE("onnx: unsupported nodes are errors naming node, op type, opset and reason", "[onnx][errors]") {
  pb::ModelProto m = model_with(11);
  auto& g = *m.mutable_graph();
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {4});
  *g.add_output() = tensor_info("v", pb::TensorProto::FLOAT, {2});
  add_node(g, "GridSample", {"x", "x"}, {"v"}, "nz");
  try {
    mo::load_model(m, "m.onnx", {});
    FAIL("no error");
  } catch (const mo::UnsupportedError& e) {
    CHECK(e.node() == "nz");
    CHECK(e.op_type() == "GridSample");
    CHECK(e.opset() == 11);
    CHECK(std::string(e.what()) ==
          "[ms.not_implemented] onnx: node 'nz' (GridSample, opset 11): no ms conversion for op GridSample");
  }
  // An attribute ms cannot honour
  g.mutable_node(0)->set_op_type("Conv");
  *g.mutable_input(0) = tensor_info("x", pb::TensorProto::FLOAT, {1, 1, 2, 2, 2, 2});
  CHECK_THROWS_WITH(mo::load_model(m, "m.onnx", {}),
                    "[ms.not_implemented] onnx: node 'nz' (Conv, opset 11): 4-d convolution (1-d to 3-d are "
                    "supported)");
}

TEST_CASE("onnx: an input that a node needs at load time can be given as a value", "[onnx]") {
  pb::ModelProto m = model_with();
  auto& g = *m.mutable_graph();
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2, 3});
  *g.add_input() = tensor_info("shape", pb::TensorProto::INT64, {2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {3, 2});
  add_node(g, "Reshape", {"x", "shape"}, {"y"}, "r");
  CHECK_THROWS_AS(mo::load_model(m, "m.onnx", {}), mo::ConstantRequired);
  mo::LoadOptions opt;
  opt.input_values["shape"] = Tensor<std::int64_t>{3, 2};
  mo::Model model = mo::load_model(m, "m.onnx", {}, opt);
  CHECK(model.input_names == std::vector<std::string>{"x"});
  CHECK(model.folded_inputs == std::vector<std::string>{"shape"});
  CHECK(model.graph.value(model.graph.outputs()[0]).meta.shape == Shape{3, 2});
}

/// A ResNet-style network: a stem (conv, batch norm, ReLU, max pool), one residual block, global
/// average pooling and a Gemm head. Captured from eager ms code.
struct Net {
  AnyTensor w0 = ops::randn(Shape{8, 3, 3, 3}, DType::f32, 1), b0 = ops::randn(Shape{8}, DType::f32, 2);
  AnyTensor g1 = ops::rand(Shape{8}, DType::f32, 3), be1 = ops::randn(Shape{8}, DType::f32, 4);
  AnyTensor m1 = ops::randn(Shape{8}, DType::f32, 5), v1 = ops::add(ops::rand(Shape{8}, DType::f32, 6), 0.5);
  AnyTensor w1 = ops::mul(ops::randn(Shape{8, 8, 3, 3}, DType::f32, 7), 0.2);
  AnyTensor w2 = ops::mul(ops::randn(Shape{8, 8, 3, 3}, DType::f32, 8), 0.2);
  AnyTensor fc = ops::randn(Shape{10, 8}, DType::f32, 9), fcb = ops::randn(Shape{10}, DType::f32, 10);
  AnyTensor operator()(const AnyTensor& x) const {
    AnyTensor h = ops::conv2d(x, w0, b0, 1, 1);
    h = ops::relu(ops::batch_norm(h, g1, be1, m1, v1, false));
    h = ops::max_pool2d(h, 2);
    AnyTensor r = ops::relu(ops::conv2d(h, w1, AnyTensor(), 1, 1));
    r = ops::conv2d(r, w2, AnyTensor(), 1, 1);
    h = ops::relu(ops::add(h, r));
    h = ops::avg_pool2d(h, 2);
    h = ops::flatten(ops::adaptive_avg_pool2d(h, 1), 1);
    return ops::softmax(ops::linear(h, fc, fcb), -1);
  }
};

void require_close(const AnyTensor& got, const AnyTensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  auto g = values(got), w = values(want);
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

TEST_CASE("onnx: a ResNet-style graph exports, passes ONNX's checker and imports with the same outputs",
          "[onnx][export]") {
  Net net;
  AnyTensor x = ops::randn(Shape{2, 3, 8, 8}, DType::f32, 11);
  const AnyTensor want = net(x);
  graph::Graph g;
  {
    graph::Capture cap;
    cap.input(x, "image");
    cap.output(net(x));
    g = cap.finish();
  }
  TempDir dir;
  const fs::path p = dir.path / "net.onnx";
  mo::save(g, p);  // runs mo::checker::check_model
  REQUIRE(fs::exists(p));
  pb::ModelProto proto = mo::read_model(p);
  std::set<std::string> types;
  for (const auto& n : proto.graph().node()) types.insert(n.op_type());
  for (const char* t : {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "AveragePool", "GlobalAveragePool", "Softmax"})
    CHECK(types.count(t) == 1);

  mo::Model model = mo::load(p);
  CHECK(model.graph.count("conv2d") == 3);
  CHECK(model.graph.count("batch_norm") == 1);
  auto cpu = InferenceModel::from_graph(model.graph);
  require_close(cpu.run({x})[0], want);

  // Round trip again: import -> export -> import gives the same outputs.
  const fs::path p2 = dir.path / "net2.onnx";
  mo::save(model.graph, p2);
  auto again = InferenceModel::from_graph(mo::load(p2).graph);
  require_close(again.run({x})[0], want);

  // A frozen model converts too.
  freeze(g, dir.path / "net.msf");
  mo::save_frozen_as_onnx(dir.path / "net.msf", dir.path / "net3.onnx");
  require_close(InferenceModel::from_graph(mo::load(dir.path / "net3.onnx").graph).run({x})[0], want);

#ifdef MS_ASCEND_EMULATOR_PATH
  setenv("MS_ASCEND_LIBS", MS_ASCEND_EMULATOR_PATH, 1);
  InferenceOptions o;
  o.backend = "ascend:0";
  auto npu = InferenceModel::from_graph(mo::load(p).graph, o);
  CHECK(npu.on_device());
  require_close(npu.run({x})[0], want, 1e-4);
#endif
}

TEST_CASE("onnx: tile, cumsum, topk, triu, tril, remainder, fmod and pad export and import as themselves",
          "[onnx][export]") {
  AnyTensor x = ops::randn(Shape{2, 3}, DType::f32, 5);
  auto fn = [](const AnyTensor& v) {
    std::vector<AnyTensor> out{ops::tile(v, {2, 1, 2}), ops::cumsum(v, 1, true, true), ops::triu(v, 1),
                               ops::tril(v, -1), ops::remainder(v, 0.7), ops::fmod(v, -0.7),
                               ops::pad(v, {1, 2}, "reflect"), ops::pad(v, {1, 0, 0, 1}, "replicate"),
                               ops::pad(v, {-1, 1}, "constant", 2.5)};
    // remainder of integers is ONNX's Mod with fmod=0; of floats, Mod with fmod=1 and a sign fix-up
    out.push_back(ops::remainder(ops::cast(ops::mul(v, 4.0), DType::i64), Tensor<std::int64_t>{3, -3, 2}));
    auto tk = ops::topk(v, 2, 1, false);
    out.insert(out.end(), tk.begin(), tk.end());
    return out;
  };
  const std::vector<AnyTensor> want = fn(x);
  graph::Graph g;
  {
    graph::Capture cap;
    cap.input(x, "x");
    for (auto& y : fn(x)) cap.output(y);
    g = cap.finish();
  }
  TempDir dir;
  const fs::path p = dir.path / "indexing.onnx";
  mo::save(g, p);
  std::set<std::string> types;
  const pb::ModelProto proto = mo::read_model(p);
  for (const auto& n : proto.graph().node()) types.insert(n.op_type());
  for (const char* t : {"Tile", "CumSum", "TopK", "Trilu", "Mod", "Pad"}) CHECK(types.count(t) == 1);
  mo::Model model = mo::load(p);
  for (const char* op : {"tile", "cumsum", "topk", "triu", "tril", "remainder", "fmod", "pad"}) {
    INFO(op);
    CHECK(model.graph.count(op) >= 1);
  }
  auto got = InferenceModel::from_graph(model.graph).run({x});
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    require_close(ops::cast(got[i], DType::f32), ops::cast(want[i], DType::f32));
  }
}

TEST_CASE("onnx: a node whose result would exceed LoadOptions::max_value_elements fails before allocating",
          "[onnx][errors]") {
  // A Conv with pads of four million columns (what a fuzzer made of a backend test model) asks
  // for a padded input of 9 x 4,194,309 floats: refused (the importer's error names the node,
  // the op, the shape and the setting) before anything runs. With pads of 1 the model loads.
  auto conv_model = [](std::int64_t pad) {
    pb::ModelProto m = model_with(13);
    auto& g = *m.mutable_graph();
    *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {1, 1, 7, 5});
    *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {1, 2, 4, 0}, {"", "", "", "W"});
    *g.add_initializer() = float_init("w", {2, 1, 3, 3}, std::vector<float>(18, 0.5f));
    auto& n = add_node(g, "Conv", {"x", "w"}, {"y"});
    add_ints(n, "strides", {2, 2});
    add_ints(n, "pads", {1, 1, 1, pad});
    return m;
  };
  mo::LoadOptions opt;
  opt.max_value_elements = std::int64_t{1} << 22;
  try {
    (void)mo::load_model(conv_model(4194303), "big_pads.onnx", {}, opt);
    FAIL("the model loaded");
  } catch (const GraphError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("node 'Conv_1' (Conv, opset 13)") != std::string::npos);
    CHECK(msg.find("pad: output 0 of shape (1, 1, 9, 4194309) (float32) has more than 4194304 elements") !=
          std::string::npos);
    CHECK(msg.find("LoadOptions::max_value_elements") != std::string::npos);
  }
  mo::Model ok = mo::load_model(conv_model(1), "small_pads.onnx", {}, opt);
  CHECK(ok.graph.value(ok.graph.outputs()[0]).meta.shape == Shape{1, 2, 4, 3});
  // The limit lasts only as long as the load: the same op afterwards is not refused.
  CHECK(ops::zeros(Shape{std::int64_t{1} << 23}, DType::f32).numel() == std::int64_t{1} << 23);
}

TEST_CASE("onnx: mutated model files load or fail with an ms error, never crash", "[onnx][errors]") {
  // A small fuzz run over byte flips, cuts and insertions of two valid models (the libFuzzer
  // target for the frozen loader does the same for ms's own format).
  Net net;
  AnyTensor x = ops::randn(Shape{1, 3, 8, 8}, DType::f32, 11);
  graph::Graph g;
  {
    graph::Capture cap;
    cap.input(x, "image");
    cap.output(net(x));
    g = cap.finish();
  }
  const std::vector<std::string> seeds{add_relu_model().SerializeAsString(), mo::to_onnx(g).SerializeAsString()};
  std::mt19937 rng(23);
  mo::LoadOptions opt;
  opt.max_input_elements = 1 << 20;
  int loaded = 0, rejected = 0;
  for (int k = 0; k < 400; ++k) {
    std::string b = seeds[static_cast<std::size_t>(k) % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      const std::size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b.resize(at); break;
        default: b.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    try {
      mo::Model m = mo::load_model(mo::parse_model(b, "mutant.onnx"), "mutant.onnx", {}, opt);
      ++loaded;
    } catch (const ms::Error&) {
      ++rejected;
    }
  }
  CHECK(loaded + rejected == 400);
  CHECK(rejected > 0);
}

TEST_CASE("onnx: exporting an op without an ONNX equivalent names it", "[onnx][export]") {
  AnyTensor x = ops::randn(Shape{4, 3}, DType::f32, 1);
  AnyTensor t = Tensor<std::int64_t>{0, 2, 1, 1};
  graph::Graph g;
  {
    graph::Capture cap;
    cap.input(x);
    cap.output(ops::cross_entropy(x, t));
    g = cap.finish();
  }
  CHECK_THROWS_WITH(mo::to_onnx(g), Contains("cross_entropy") && Contains("export: the op has no ONNX equivalent"));
}

TEST_CASE("onnx: ConvTranspose and Resize import as conv_transpose2d and interpolate, and export back",
          "[onnx][export]") {
  // Hand-computed import: a 2 x 2 kernel of ones at stride 2 spreads each pixel over a 2 x 2
  // block; pads [0, 0, 1, 1] cut the last row and column; Resize nearest (asymmetric, floor)
  // by scales 2 repeats every pixel.
  pb::ModelProto m = model_with(13);
  auto& g = *m.mutable_graph();
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {1, 1, 2, 2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {1, 1, 3, 3});
  *g.add_output() = tensor_info("z", pb::TensorProto::FLOAT, {1, 1, 4, 4});
  *g.add_initializer() = float_init("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  *g.add_initializer() = float_init("scales", {4}, {1, 1, 2, 2});
  auto& ct = add_node(g, "ConvTranspose", {"x", "w"}, {"y"});
  add_ints(ct, "strides", {2, 2});
  add_ints(ct, "pads", {0, 0, 1, 1});
  auto& rs = add_node(g, "Resize", {"x", "", "scales"}, {"z"});
  for (auto [k, v] : {std::pair{"coordinate_transformation_mode", "asymmetric"}, std::pair{"nearest_mode", "floor"}}) {
    auto* at = rs.add_attribute();
    at->set_name(k);
    at->set_type(pb::AttributeProto::STRING);
    at->set_s(v);
  }
  mo::Model model = mo::load_model(m, "m.onnx", {});
  CHECK(model.graph.count("conv_transpose2d") == 1);
  CHECK(model.graph.count("interpolate") == 1);
  CHECK(model.graph.count("conv2d") == 0);
  auto exe = InferenceModel::from_graph(std::move(model.graph));
  auto out = exe.run({ops::reshape(Tensor<float>{1.0f, 2.0f, 3.0f, 4.0f}, {1, 1, 2, 2})});
  CHECK(Tensor<float>(out[0]).to_vector() == std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4});
  CHECK(Tensor<float>(out[1]).to_vector() == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});

  // ms -> ONNX (checked by ONNX's checker) -> ms keeps the ops and the values.
  AnyTensor x = ops::randn(Shape{2, 4, 5, 6}, DType::f32, 1);
  AnyTensor w = ops::randn(Shape{4, 3, 3, 3}, DType::f32, 2), b = ops::randn(Shape{6}, DType::f32, 3);
  auto f = [&](const AnyTensor& v) {
    AnyTensor h = ops::conv_transpose2d(v, w, b, 2, 1, 1, 2);                        // (2, 6, 10, 12)
    h = ops::interpolate(h, ops::Int2{7, 9}, std::nullopt, "bilinear");            // half-pixel
    h = ops::interpolate(h, ops::Int2{5, 5}, std::nullopt, "bilinear", true);      // align_corners
    return ops::interpolate(h, std::nullopt, ops::Scale2{2.0, 3.0});                // nearest by scales
  };
  const AnyTensor want = f(x);
  graph::Graph cg;
  {
    graph::Capture cap;
    cap.input(x, "image");
    cap.output(f(x));
    cg = cap.finish();
  }
  TempDir dir;
  mo::save(cg, dir.path / "up.onnx");
  pb::ModelProto proto = mo::read_model(dir.path / "up.onnx");
  std::multiset<std::string> types;
  for (const auto& n : proto.graph().node()) types.insert(n.op_type());
  CHECK(types.count("ConvTranspose") == 1);
  CHECK(types.count("Resize") == 3);
  mo::Model back = mo::load(dir.path / "up.onnx");
  CHECK(back.graph.count("conv_transpose2d") == 1);
  CHECK(back.graph.count("interpolate") == 3);
  require_close(InferenceModel::from_graph(back.graph).run({x})[0], want);
}

}  // namespace
}  // namespace onnx_test
