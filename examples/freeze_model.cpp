// Freezes a model for inference (docs/guide.md, part 4): captures the inference forward
// pass of LeNet-5 or the MLP of examples/fashion_mnist.cpp, writes graph and weights to one
// file, loads it back as an inference-only executable and checks that it computes the
// same bits as the captured graph. Also writes an input batch as .npy for ms-run.
//
//   freeze_model [--model lenet|mlp] [--weights FILE.safetensors] [--batch B] [OUT_DIR]
//
// Writes OUT_DIR/<model>.msf and OUT_DIR/<model>_input.npy (OUT_DIR defaults to "."). With
// --weights, the parameters come from a file written by ms::nn::save (e.g. after training);
// otherwise they are freshly initialized. Exit status 1 when the check fails.

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <ms/ms.hpp>

namespace nn = ms::nn;
using ms::Tensor;

namespace {

std::shared_ptr<nn::Sequential> make_model(const std::string& name) {
  return name == "mlp" ? nn::mlp(784, {256, 256}, 10) : nn::lenet5(10);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "lenet", weights, out_dir = ".";
  std::int64_t batch = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--model") model_name = next();
    else if (a == "--weights") weights = next();
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--model lenet|mlp] [--weights FILE.safetensors] [--batch B] [OUT_DIR]\n", argv[0]);
      return 0;
    } else out_dir = a;
  }
  try {
    ms::manual_seed(0);
    auto model = make_model(model_name);
    if (!weights.empty()) nn::load(*model, weights);
    Tensor<float> x = ms::randn<float>({batch, 1, 28, 28});
    const std::filesystem::path path = std::filesystem::path(out_dir) / (model_name + ".msf");

    // [freeze]
    model->eval();
    ms::NoGradGuard no_grad;
    ms::graph::Capture cap;
    cap.input(x, "x");
    for (auto& [name, p] : model->named_parameters()) cap.param(p, name);  // weights by state_dict name
    cap.output((*model)(x));
    ms::graph::Graph g = cap.finish();
    ms::freeze(g, path, {.metadata = {{"model", model_name}}});  // atomic: temp file + rename

    ms::InferenceModel loaded = ms::InferenceModel::load(path);  // {.backend = "cpu"}
    std::vector<ms::AnyTensor> out = loaded.run({x});
    // [freeze]

    std::vector<ms::AnyTensor> want = ms::backend::compile(g).run({x});
    const bool same = std::memcmp(out[0].raw_data(), want[0].raw_data(), want[0].nbytes()) == 0;
    const auto input_path = std::filesystem::path(out_dir) / (model_name + "_input.npy");
    ms::save_npy(input_path, x);
    std::printf("wrote %s (%ju bytes, loaded and compiled in %.2f ms) and %s\n", path.string().c_str(),
                static_cast<std::uintmax_t>(std::filesystem::file_size(path)), loaded.load_seconds() * 1e3,
                input_path.string().c_str());
    std::printf("loaded model's output %s the captured graph's, bit for bit\n", same ? "equals" : "DIFFERS from");
    return same ? 0 : 1;
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
