// Frozen models (ms/graph/freeze.hpp, ms/inference.hpp): freeze -> load -> run gives
// the original graph's outputs bit for bit (MLP and LeNet from ms::nn, and a graph with the
// guide's user-defined ops); the file is a safetensors file with 64-byte aligned weights,
// written atomically; and every damaged, truncated, foreign or incompatible file is an
// ms::IOError with a message that says what is wrong.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "../../examples/custom_op.hpp"

namespace {

using ms::AnyTensor;
using ms::Tensor;
using json = nlohmann::json;
namespace fs = std::filesystem;
namespace nn = ms::nn;
using ms_test::read_bytes;
using ms_test::same_bits;

/// Captures the inference forward pass of a module, its parameters named as in its state_dict.
ms::graph::Graph capture_forward(nn::Module& m, const Tensor<float>& x) {
  m.eval();
  ms::NoGradGuard no_grad;
  ms::graph::Capture cap;
  cap.input(x, "x");
  for (auto& [name, p] : m.named_parameters()) cap.param(p, name);
  Tensor<float> y = m(x);
  cap.output(y);
  return cap.finish();
}

/// Standard normal values from `seed`.
Tensor<float> normal_input(std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Tensor<float> t = Tensor<float>(AnyTensor::empty(ms::Shape(shape), ms::DType::f32));
  float* p = static_cast<float*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = nd(rng);
  return t;
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / fmt::format("ms_freeze_test_{}_{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::uint64_t header_len(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return n;
}

/// Edits the header and the graph of a frozen file and writes them back with valid checksums,
/// so that the loader's checks behind the checksums can be reached.
std::string rewrite(const std::string& bytes, const std::function<void(json& header, json& graph)>& edit) {
  const std::uint64_t n = header_len(bytes);
  json header = json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  json graph = json::parse(header["__metadata__"]["ms.graph"].get<std::string>());
  edit(header, graph);
  const std::string gt = graph.dump();
  header["__metadata__"]["ms.graph"] = gt;
  header["__metadata__"]["ms.graph_crc32"] = std::to_string(ms::detail::frozen::crc32_of(gt.data(), gt.size()));
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  return out + text + data;
}

ms::graph::Graph load_bytes(const std::string& bytes) {
  return ms::load_frozen_from_memory(bytes.data(), bytes.size(), "model.msf");
}

/// A small graph with the guide's custom ops, a constant, and two outputs.
ms::graph::Graph small_graph(Tensor<float>& x) {
  x = normal_input({4, 8}, 7);
  Tensor<float> w = normal_input({8}, 8), c = normal_input({8}, 9);
  ms::graph::Capture cap;
  cap.input(x, "x");
  cap.param(w, "w");
  Tensor<float> y = guide::running_sum(guide::softsign(x * w) + c, {{"axis", std::int64_t{0}}});
  cap.output(y);
  cap.output(ms::relu(x) * 0.5f);
  return cap.finish();
}

}  // namespace

TEST_CASE("freeze: an MLP and a LeNet load back and give the original graph's outputs bit for bit", "[graph][freeze]") {
  ms::manual_seed(3);
  auto dir = temp_dir("models");
  struct Case {
    const char* name;
    std::shared_ptr<nn::Sequential> model;
    std::vector<std::int64_t> shape;
  };
  for (Case c : {Case{"mlp", nn::mlp(784, {256, 256}, 10), {16, 1, 28, 28}}, Case{"lenet", nn::lenet5(10), {8, 1, 28, 28}}}) {
    INFO(c.name);
    Tensor<float> x = normal_input(c.shape, 1), x2 = normal_input(c.shape, 2);
    ms::graph::Graph g = capture_forward(*c.model, x);
    const fs::path path = dir / fmt::format("{}.msf", c.name);
    ms::freeze(g, path, {.metadata = {{"model", c.name}}});

    ms::backend::Executable original = ms::backend::compile(g);
    ms::InferenceModel loaded = ms::InferenceModel::load(path);
    CHECK(loaded.metadata().at("model") == c.name);
    CHECK(loaded.metadata().at("ms.format_version") == "1");
    REQUIRE(loaded.input_metas().size() == 1);
    CHECK(loaded.input_metas()[0].shape == ms::Shape(c.shape));
    CHECK(loaded.input_names()[0] == "x");
    REQUIRE(loaded.output_metas().size() == 1);
    CHECK(loaded.output_metas()[0].shape == ms::Shape({c.shape[0], 10}));
    CHECK(loaded.executable().graph().num_nodes() == original.graph().num_nodes());
    CHECK(loaded.load_seconds() > 0);
    for (const Tensor<float>& in : {x, x2}) {
      AnyTensor want = original.run({in})[0];
      AnyTensor got = loaded.run({in})[0];
      CHECK(same_bits(got, want));
      // And the eager forward pass, to within rounding (fusion may reorder).
      ms::NoGradGuard ng;
      Tensor<float> eager = (*c.model)(in);
      auto e = eager.to_vector();
      auto gv = Tensor<float>(got).to_vector();
      for (std::size_t i = 0; i < e.size(); ++i) CHECK(std::abs(gv[i] - e[i]) <= 1e-5f + 1e-5f * std::abs(e[i]));
    }

    // The weights sit at 64-byte aligned offsets and any safetensors reader sees them by name.
    const std::string bytes = read_bytes(path);
    CHECK((8 + header_len(bytes)) % 64 == 0);
    json header = json::parse(bytes.substr(8, header_len(bytes)));
    std::map<std::string, AnyTensor> weights = ms::load_safetensors(path);
    for (auto& [name, p] : c.model->named_parameters()) {
      INFO(name);
      REQUIRE(header.contains(name));
      CHECK(header[name]["data_offsets"][0].get<std::uint64_t>() % 64 == 0);
      REQUIRE(weights.count(name) == 1);
      CHECK(same_bits(weights[name], p));
    }
  }
  // Nothing but the two models is left in the directory (the temporary files were renamed).
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 2);
  fs::remove_all(dir);
}

TEST_CASE("freeze: user-defined ops, constants and several outputs survive the round trip", "[graph][freeze][custom]") {
  Tensor<float> x;
  ms::graph::Graph g = small_graph(x);
  const std::string bytes = ms::freeze_to_bytes(g);
  ms::graph::Graph back = load_bytes(bytes);
  CHECK(back.count("running_sum") == 1);
  CHECK(back.count("softsign") == 1);
  CHECK(back.nodes()[3].attrs.str() == "axis=0");
  CHECK(back.inputs().size() == 1);
  CHECK(back.params().size() == 1);
  CHECK(back.value(back.params()[0]).name == "w");
  CHECK(back.outputs().size() == 2);
  REQUIRE(back.nodes().size() == g.nodes().size());
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {  // same ops, attributes, names and output metas
    CHECK(back.nodes()[i].op == g.nodes()[i].op);
    CHECK(back.nodes()[i].attrs == g.nodes()[i].attrs);
    CHECK(back.nodes()[i].name == g.nodes()[i].name);
    CHECK(back.value(back.nodes()[i].outputs[0]).meta == g.value(g.nodes()[i].outputs[0]).meta);
  }

  ms::backend::Executable a = ms::backend::compile(g), b = ms::backend::compile(std::move(back));
  Tensor<float> x2 = normal_input({4, 8}, 11);
  for (const Tensor<float>& in : {x, x2}) {
    auto ra = a.run({in}), rb = b.run({in});
    REQUIRE(ra.size() == 2);
    CHECK(same_bits(ra[0], rb[0]));
    CHECK(same_bits(ra[1], rb[1]));
  }
  // Freezing the same graph twice gives the same bytes.
  CHECK(ms::freeze_to_bytes(g) == bytes);
  // Attribute values of every type round-trip exactly (doubles too, and non-finite ones).
  ms::graph::Graph h;
  auto xv = h.add_input({ms::DType::f32, ms::Shape{3}}, "x");
  auto y = h.add_node(ms::ops::registry().get("clamp"), {xv},
                      {{"lo", 0.1}, {"hi", std::numeric_limits<double>::infinity()}})[0];
  auto z = h.add_node(ms::ops::registry().get("leaky_relu"), {y}, {{"slope", 1.0 / 3.0}})[0];
  h.mark_output(z);
  ms::graph::Graph h2 = load_bytes(ms::freeze_to_bytes(h));
  CHECK(h2.nodes()[0].attrs == h.nodes()[0].attrs);
  CHECK(h2.nodes()[1].attrs == h.nodes()[1].attrs);
}

TEST_CASE("freeze: what cannot be frozen or run says why", "[graph][freeze]") {
  Tensor<float> x;
  ms::graph::Graph g = small_graph(x);
  ms::backend::Executable exe = ms::backend::compile(g);
  REQUIRE(exe.graph().count("fused") == 2);  // mul+softsign+add, and relu+mul
  MS_REQUIRE_THROWS_MSG(ms::freeze_to_bytes(exe.graph()), ms::GraphError,
                        "[ms.graph_error] freeze: node fused_1 is a fused node; freeze the captured graph, before "
                        "compile() optimizes it");
  MS_REQUIRE_THROWS_MSG(ms::InferenceModel::from_graph(g, {.backend = "tpu"}), ms::BackendError,
                        "[ms.backend_error] inference: backend 'tpu' is not available in this build (available: cpu, ascend)");
  auto m = ms::InferenceModel::from_graph(g);
  MS_REQUIRE_THROWS_MSG(m.run({normal_input({4, 9}, 1)}), ms::ShapeError,
                        "[ms.shape_error] run: input 0 must be float32 (4, 8), got float32 (4, 9)");
  const fs::path missing = fs::temp_directory_path() / "ms_freeze_test_no_such_file.msf";
  MS_REQUIRE_THROWS_MSG(ms::load_frozen(missing), ms::IOError,
                        fmt::format("[ms.io_error] load_frozen: cannot open '{}' (No such file or directory)",
                                    missing.string()));
}

TEST_CASE("freeze: damaged, truncated, foreign and incompatible files are IOErrors", "[graph][freeze]") {
  Tensor<float> x;
  ms::graph::Graph g = small_graph(x);
  const std::string good = ms::freeze_to_bytes(g);
  auto err = [&](const std::string& bytes) -> std::string {
    try {
      load_bytes(bytes);
    } catch (const ms::IOError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string pre = "[ms.io_error] load_frozen: 'model.msf': ";
  CHECK(err("") == pre + "the file is 0 bytes long: too short for a frozen model (truncated?)");
  CHECK(err(good.substr(0, 100)) ==
        pre + fmt::format("the header needs {} bytes but the file has 92 after the length (truncated?)", header_len(good)));
  CHECK(err(good.substr(0, good.size() - 1)) ==
        pre + "the weights checksum does not match (the file is corrupted or truncated)");
  CHECK(err(std::string(8, '\xff') + "{}") == pre + "the header length 18446744073709551615 is implausible (not a frozen model?)");

  // Every prefix is rejected.
  int rejected = 0;
  for (std::size_t n = 0; n < good.size(); n += 7) rejected += err(good.substr(0, n)) != "no error";
  CHECK(rejected == static_cast<int>((good.size() + 6) / 7));

  // Single flipped bytes: an IOError, or (flips in padding) a model that computes the same.
  ms::backend::Executable ref = ms::backend::compile(g);
  auto want = ref.run({x});
  std::mt19937 rng(5);
  int loaded_same = 0, errors = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = good;
    std::size_t pos = rng() % bad.size();
    bad[pos] = static_cast<char>(bad[pos] ^ (1 + rng() % 255));
    try {
      ms::graph::Graph b = load_bytes(bad);
      auto got = ms::backend::compile(std::move(b)).run({x});
      CHECK(same_bits(got[0], want[0]));
      ++loaded_same;
    } catch (const ms::IOError&) {
      ++errors;
    }
  }
  CHECK(errors > 300);

  // A plain safetensors file is not a frozen model.
  const fs::path st = fs::temp_directory_path() / fmt::format("ms_freeze_test_{}.safetensors", ::getpid());
  ms::save_safetensors({{"w", x}}, st);
  MS_REQUIRE_THROWS_MSG(ms::load_frozen(st), ms::IOError,
                        fmt::format("[ms.io_error] load_frozen: '{}': this is not a frozen ms model (no \"format\": "
                                    "\"ms.frozen\" metadata; a plain safetensors file?)",
                                    st.string()));
  fs::remove(st);

  // Behind valid checksums: version, registry and structure checks.
  CHECK(err(rewrite(good, [](json& h, json&) { h["__metadata__"]["ms.format_version"] = "2"; })) ==
        pre + "format version 2 is not supported (this build reads version 1)");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][3]["op"] = "running_sum_v2"; })) ==
        pre + "node 3 uses op 'running_sum_v2', which is not registered in this program (a user-defined op must be "
              "registered before the model is loaded)");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][0]["op"] = "fused"; })) ==
        pre + "node 0: fused nodes cannot be loaded");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][3]["inputs"] = json::array({0, 1}); })) ==
        pre + "node 3 (running_sum) has 2 inputs");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][1]["inputs"] = json::array({99}); })) ==
        pre + "node 1 inputs refers to value 99, which does not exist");
  CHECK(err(rewrite(good, [](json&, json& g) {
          auto out = g["nodes"][3]["outputs"][0].get<int>();
          g["values"][out]["shape"] = json::array({8, 4});
        })) == pre + "node 3 (running_sum): output 0 is float32 (8, 4) in the file but this build infers float32 (4, 8) "
                     "(incompatible op)");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][3]["attrs"][0] = json::array({"axis", "i", 5}); })) ==
        pre + "node 3 (running_sum) does not accept its inputs: [ms.index_error] running_sum: axis 5 is out of range for a "
              "tensor of rank 2");
  CHECK(err(rewrite(good, [](json&, json& g) { g["nodes"][3]["attrs"][0] = json::array({"axis", "q", 5}); })) ==
        pre + "node 3 attribute 0: unknown attribute type \"q\"");
  CHECK(err(rewrite(good, [](json& h, json&) { h["w"]["shape"] = json::array({4}); })) ==
        pre + "tensor \"w\": data_offsets [0, 32] do not hold float32 (4,) (16 bytes) in 132 bytes of data");
  CHECK(err(rewrite(good, [](json&, json& g) { g["values"][0]["dtype"] = "float128"; })) ==
        pre + "value 0 dtype: unknown dtype \"float128\"");
  CHECK(err(rewrite(good, [](json&, json& g) { g.erase("outputs"); })) == pre + "graph has no \"outputs\"");
  CHECK(err(rewrite(good, [](json&, json& g) { g["outputs"] = json::array(); })) == pre + "the graph has no outputs");
}
