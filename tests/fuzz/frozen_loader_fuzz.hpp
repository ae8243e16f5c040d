#pragma once
// The frozen-model loader's fuzz logic (ms::load_frozen_from_memory), shared by the
// libFuzzer target and the replay program (frozen_loader_fuzz.cpp) and by the test that
// replays the seed corpus inside ms_tests (frozen_loader_corpus_test.cpp). The contract:
// any bytes either load, or throw ms::IOError; anything else (a crash, a sanitizer
// report, another exception) is a bug. Each input is tried twice: as given, and with its
// checksums repaired (when its header parses), so that mutations reach the graph checks
// behind the checksums. A graph that loads is also compiled when it is small, which runs
// the passes on it.

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <ms/ms.hpp>
#include <nlohmann/json.hpp>

#include "../../examples/custom_op.hpp"  // models in the corpus use the guide's user-defined ops

namespace ms_fuzz {

using json = nlohmann::json;

/// The same bytes with ms.graph_crc32 and ms.data_crc32 recomputed; empty when the header
/// does not parse far enough to do so.
inline std::string repair_checksums(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return {};
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(data[i]) << (8 * i);
  if (n > size - 8 || n > (1u << 24)) return {};
  json header = json::parse(data + 8, data + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return {};
  auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object()) return {};
  auto graph = meta->find("ms.graph");
  if (graph == meta->end() || !graph->is_string()) return {};
  const std::string& gt = graph->get_ref<const std::string&>();
  (*meta)["ms.graph_crc32"] = std::to_string(ms::detail::frozen::crc32_of(gt.data(), gt.size()));
  const char* d = reinterpret_cast<const char*>(data) + 8 + n;
  const std::size_t dsize = size - 8 - n;
  (*meta)["ms.data_crc32"] = std::to_string(ms::detail::frozen::crc32_of(d, dsize));
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  out += text;
  out.append(d, dsize);
  return out;
}

inline void try_load(const std::uint8_t* data, std::size_t size) {
  try {
    ms::graph::Graph g = ms::load_frozen_from_memory(data, size, "fuzz");
    // Compile small graphs too (passes, memory planning); bounded so a mutated shape cannot
    // ask for gigabytes.
    std::uint64_t bytes = 0;
    for (const auto& v : g.values())
      bytes += static_cast<std::uint64_t>(ms::numel(v.meta.shape)) * ms::dtype_size(v.meta.dtype);
    if (bytes <= (16u << 20)) {
      try {
        ms::backend::compile(std::move(g));
      } catch (const ms::Error&) {
        // A graph can load and still be refused by compile (e.g. a constant-folded op
        // rejecting its values): a typed error is fine.
      }
    }
  } catch (const ms::IOError&) {
  }
}

/// One fuzz input: as given, then with repaired checksums.
inline void one_input(const std::uint8_t* data, std::size_t size) {
  try_load(data, size);
  const std::string fixed = repair_checksums(data, size);
  if (!fixed.empty()) try_load(reinterpret_cast<const std::uint8_t*>(fixed.data()), fixed.size());
}

/// Small models covering the node kinds, attribute types and dtypes the loader handles.
inline std::vector<std::pair<std::string, std::string>> seed_models() {
  using ms::Tensor;
  std::vector<std::pair<std::string, std::string>> out;
  ms::manual_seed(1);
  {  // a tiny MLP
    ms::nn::Sequential m({std::make_shared<ms::nn::Linear>(4, 3), std::make_shared<ms::nn::ReLU>(),
                          std::make_shared<ms::nn::Linear>(3, 2)});
    Tensor<float> x = ms::randn<float>({2, 4});
    ms::NoGradGuard ng;
    ms::graph::Capture cap;
    cap.input(x, "x");
    for (auto& [name, p] : m.named_parameters()) cap.param(p, name);
    cap.output(m(x));
    out.emplace_back("mlp.msf", ms::freeze_to_bytes(cap.finish()));
  }
  {  // a tiny convolution, pooling and reshape
    ms::nn::Sequential m({std::make_shared<ms::nn::Conv2d>(1, 2, 3, 1, 1), std::make_shared<ms::nn::ReLU>(),
                          std::make_shared<ms::nn::MaxPool2d>(2), std::make_shared<ms::nn::Flatten>()});
    Tensor<float> x = ms::randn<float>({1, 1, 4, 4});
    ms::NoGradGuard ng;
    ms::graph::Capture cap;
    cap.input(x, "image");
    for (auto& [name, p] : m.named_parameters()) cap.param(p, name);
    cap.output(m(x));
    out.emplace_back("conv.msf", ms::freeze_to_bytes(cap.finish()));
  }
  {  // user-defined ops, a constant, two outputs
    Tensor<float> x = ms::randn<float>({3, 4}), c = ms::randn<float>({4});
    ms::graph::Capture cap;
    cap.input(x, "x");
    cap.output(guide::running_sum(guide::softsign(x) + c, {{"axis", std::int64_t{0}}, {"reverse", true}}));
    cap.output(ms::relu(x) * 0.5f);
    out.emplace_back("custom_ops.msf", ms::freeze_to_bytes(cap.finish()));
  }
  {  // every attribute type: doubles (also infinite), ints, int lists, dtypes; int64 and bool values
    ms::graph::Graph g;
    auto x = g.add_input({ms::DType::f64, ms::Shape{2, 3}}, "x");
    auto& reg = ms::ops::registry();
    auto a = g.add_node(reg.get("clamp"), {x}, {{"lo", -0.5}, {"hi", std::numeric_limits<double>::infinity()}})[0];
    auto b = g.add_node(reg.get("reshape"), {a}, {{"shape", ms::ops::IntList{3, 2}}})[0];
    auto c = g.add_node(reg.get("cast"), {b}, {{"dtype", ms::DType::i64}})[0];
    auto d = g.add_node(reg.get("gt"), {b, g.add_constant(ms::ops::scalar_tensor(0.25, ms::DType::f64))})[0];
    g.mark_output(c);
    g.mark_output(d);
    out.emplace_back("attrs.msf", ms::freeze_to_bytes(g));
  }
  return out;
}

}  // namespace ms_fuzz
