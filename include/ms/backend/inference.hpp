#pragma once
// ms::InferenceModel: a frozen model (graph/freeze.hpp) loaded and compiled for a backend,
// run for inference only (no autodiff recording). The same compile pipeline as a captured
// graph, so a loaded model gives the original graph's outputs bit for bit.
//
//   auto model = ms::InferenceModel::load("lenet.msf");
//   std::vector<ms::AnyTensor> out = model.run({x});

#include <chrono>

#include "../graph/freeze.hpp"
#include "cpu_executor.hpp"

namespace ms {

struct InferenceOptions {
  std::string backend = "cpu";        ///< the backend to compile for (this build: "cpu")
  backend::CompileOptions compile;    ///< pass pipeline and planning options
};

/// The backends an InferenceModel can be compiled for in this build.
inline std::vector<std::string> inference_backends() { return {"cpu"}; }

class InferenceModel {
 public:
  /// Loads and compiles a frozen model file. Throws IOError for a bad file and
  /// BackendError for a backend that this build does not have.
  static InferenceModel load(const std::filesystem::path& path, const InferenceOptions& opt = {}) {
    auto t0 = std::chrono::steady_clock::now();
    InferenceModel m;
    graph::Graph g = load_frozen(path, &m.metadata_);
    m.finish(std::move(g), opt);
    m.load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }
  /// Compiles an already loaded (or freshly captured) graph.
  static InferenceModel from_graph(graph::Graph g, const InferenceOptions& opt = {}) {
    InferenceModel m;
    m.finish(std::move(g), opt);
    return m;
  }

  /// Runs the model; inputs in the order of input_metas().
  std::vector<AnyTensor> run(std::span<const AnyTensor> inputs) {
    NoGradGuard no_grad;
    return exe_->run(inputs);
  }
  std::vector<AnyTensor> run(std::initializer_list<AnyTensor> inputs) {
    return run(std::span<const AnyTensor>(inputs.begin(), inputs.size()));
  }

  const std::vector<ops::TensorMeta>& input_metas() const { return inputs_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<ops::TensorMeta>& output_metas() const { return outputs_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const backend::Executable& executable() const { return *exe_; }
  const std::string& backend_name() const { return backend_; }
  /// Seconds spent reading, checking and compiling the file (load() only).
  double load_seconds() const { return load_seconds_; }

 private:
  void finish(graph::Graph g, const InferenceOptions& opt) {
    auto names = inference_backends();
    if (std::find(names.begin(), names.end(), opt.backend) == names.end())
      MS_THROW(BackendError, "inference: backend '{}' is not available in this build (available: {})", opt.backend,
               fmt::join(names, ", "));
    backend_ = opt.backend;
    for (graph::ValueId v : g.inputs()) {
      inputs_.push_back(g.value(v).meta);
      input_names_.push_back(g.value(v).name);
    }
    for (graph::ValueId v : g.outputs()) outputs_.push_back(g.value(v).meta);
    exe_ = std::make_unique<backend::Executable>(backend::compile(std::move(g), opt.compile));
  }

  std::unique_ptr<backend::Executable> exe_;
  std::vector<ops::TensorMeta> inputs_, outputs_;
  std::vector<std::string> input_names_;
  std::map<std::string, std::string> metadata_;
  std::string backend_;
  double load_seconds_ = 0;
};

}  // namespace ms
