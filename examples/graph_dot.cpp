// Capture a small MLP-like elementwise program, optimize it, and look at the graph:
// writes the IR text before and after optimization and a Graphviz .dot file of the
// optimized graph, and renders it to PNG when `dot` (Graphviz) is on the PATH.
//
//   ./graph_dot [output_dir]      (default: ./graph_dot_out)
//
// The fused node shows up as one box labelled with its members, e.g.
// fused[mul+add+gelu+mul+add+tanh+...].

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <ms/ms.hpp>

namespace {

ms::Tensor<float> ramp(ms::Shape shape, float scale) {
  ms::Tensor<float> t = ms::AnyTensor::empty(shape, ms::DType::f32);
  auto* p = static_cast<float*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = scale * static_cast<float>((i * 37) % 17 - 8);
  return t;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) {
    std::fprintf(stderr, "graph_dot: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::path("graph_dot_out");
  fs::create_directories(dir);

  // Inputs and parameters of a two-"layer" elementwise block with a residual connection.
  const std::int64_t batch = 4, width = 8;
  ms::Tensor<float> x = ramp({batch, width}, 0.25f);
  ms::Tensor<float> scale1 = ramp({width}, 0.1f), bias1 = ramp({width}, 0.05f);
  ms::Tensor<float> scale2 = ramp({width}, -0.1f), bias2 = ramp({width}, 0.02f);
  auto block = [&](const ms::Tensor<float>& in) {
    ms::Tensor<float> h = ms::gelu(in * scale1 + bias1);
    ms::Tensor<float> g = ms::tanh(h * scale2 + bias2);
    ms::Tensor<float> gate = ms::sigmoid(in * 2.0f);
    ms::Tensor<float> unused = ms::exp(h);  // dead code: removed by the optimizer
    (void)unused;
    return g * gate + in * 1.0f;            // "* 1" is simplified away
  };

  ms::graph::Capture cap;
  cap.input(x, "x");
  cap.param(scale1, "scale1");
  cap.param(bias1, "bias1");
  cap.param(scale2, "scale2");
  cap.param(bias2, "bias2");
  ms::Tensor<float> y = block(x);
  cap.output(y);
  ms::graph::Graph captured = cap.finish();
  write(dir / "captured.ir", captured.str());
  write(dir / "captured.dot", captured.dot());

  ms::backend::Executable exe = ms::backend::compile(captured);
  const ms::graph::Graph& optimized = exe.graph();
  write(dir / "optimized.ir", optimized.str());
  write(dir / "optimized.dot", optimized.dot());

  std::printf("captured graph: %zu nodes; optimized graph: %zu nodes\n", captured.num_nodes(), optimized.num_nodes());
  for (auto& [pass, changes] : exe.pass_report().changes) std::printf("  pass %-8s %d change(s)\n", pass.c_str(), changes);
  std::printf("\noptimized IR:\n%s\n", optimized.str().c_str());

  // Replay with a new input and compare with running the same code eagerly.
  ms::Tensor<float> x2 = ramp({batch, width}, -0.3f);
  ms::Tensor<float> replayed = exe.run({x2})[0];
  ms::Tensor<float> eager = block(x2);
  double worst = 0;
  auto r = replayed.to_vector(), e = eager.to_vector();
  for (std::size_t i = 0; i < r.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(r[i] - e[i])));
  std::printf("replay vs eager on a new input: max |difference| = %g\n\n", worst);

  std::printf("wrote %s\n", (dir / "captured.ir").c_str());
  std::printf("wrote %s\n", (dir / "captured.dot").c_str());
  std::printf("wrote %s\n", (dir / "optimized.ir").c_str());
  std::printf("wrote %s\n", (dir / "optimized.dot").c_str());
  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    for (const char* name : {"captured", "optimized"}) {
      fs::path dot = dir / (std::string(name) + ".dot"), png = dir / (std::string(name) + ".png");
      std::string cmd = "dot -Tpng '" + dot.string() + "' -o '" + png.string() + "'";
      if (std::system(cmd.c_str()) == 0) std::printf("wrote %s\n", png.c_str());
      else std::printf("dot failed on %s\n", dot.c_str());
    }
  } else {
    std::printf("Graphviz `dot` is not on the PATH: render with  dot -Tpng %s -o optimized.png\n",
                (dir / "optimized.dot").c_str());
  }
  return worst <= 1e-6 ? 0 : 1;
}
