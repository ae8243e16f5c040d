#pragma once
// ms::InferenceModel: a frozen model (graph/freeze.hpp) loaded and compiled for a backend,
// run for inference only (no autodiff recording). The same compile pipeline as a captured
// graph, so a loaded model gives the original graph's outputs bit for bit: on the CPU
// and on a device (any device type whose backend is registered), through the one
// backend::compile(graph, backend, options). Must not name a particular device.
//
//   auto model = ms::InferenceModel::load("lenet.msf");                       // the CPU
//   auto npu = ms::InferenceModel::load("lenet.msf", {.backend = "ascend:0"});  // a device
//   std::vector<ms::AnyTensor> out = model.run({x});

#include <chrono>

#include "core/linkage.hpp"
#include "backend/backend.hpp"
#include "compile.hpp"
#include "graph/freeze.hpp"

namespace ms {

struct InferenceOptions {
  /// "cpu", or a device with a registered backend: its type, optionally with an index
  /// ("ascend" is "ascend:0"). inference_backends() lists them.
  std::string backend = "cpu";
  /// Pass pipeline, planning and (on a device) placement, streams and capture options.
  backend::CompileOptions compile;
};

/// The backends an InferenceModel can be compiled for in this program: "cpu" and the device
/// types whose backend is registered (by including its header).
inline std::vector<std::string> inference_backends() {
  std::vector<std::string> names{"cpu"};
  for (DeviceType t : backend::registered_device_types()) names.push_back(backend::device_type_name(t));
  return names;
}

class InferenceModel {
 public:
  /// Loads and compiles a frozen model file. Throws IOError for a bad file, BackendError for
  /// a backend that this program does not have, and the backend's error when its device
  /// cannot be opened.
  static InferenceModel load(const std::filesystem::path& path, const InferenceOptions& opt = {});
  /// Compiles an already loaded (or freshly captured) graph.
  static InferenceModel from_graph(graph::Graph g, const InferenceOptions& opt = {});

  /// Runs the model; inputs in the order of input_metas(), on the host; outputs on the host.
  std::vector<AnyTensor> run(std::span<const AnyTensor> inputs);
  std::vector<AnyTensor> run(std::initializer_list<AnyTensor> inputs) {
    return run(std::span<const AnyTensor>(inputs.begin(), inputs.size()));
  }

  const std::vector<ops::TensorMeta>& input_metas() const { return inputs_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<ops::TensorMeta>& output_metas() const { return outputs_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The device the model runs on (cpu for the CPU).
  Device device() const { return device_; }
  bool on_device() const { return !device_.is_cpu(); }
  /// The compiled graph, whatever the backend.
  const backend::CompiledGraph& compiled() const { return *exe_; }
  /// The CPU executable; BackendError when the model was compiled for a device.
  const backend::Executable& executable() const;
  /// The device executable (placements, streams, dump()); BackendError for a CPU model.
  const backend::DeviceExecutable& device_executable() const;
  /// The compiled graph as text: the CPU executable's graph, or the device dump with engines.
  std::string compiled_str() const { return exe_->dump(); }
  /// The backend option as given ("cpu", "ascend", "ascend:1").
  const std::string& backend_name() const { return backend_; }
  /// Seconds spent reading, checking and compiling the file (load() only).
  double load_seconds() const { return load_seconds_; }

 private:
  void finish(graph::Graph g, const InferenceOptions& opt);

  /// The device named by a backend option; BackendError naming the available ones otherwise.
  static Device parse_backend(const std::string& name);

  std::unique_ptr<backend::CompiledGraph> exe_;
  Device device_;
  std::vector<ops::TensorMeta> inputs_, outputs_;
  std::vector<std::string> input_names_;
  std::map<std::string, std::string> metadata_;
  std::string backend_;
  double load_seconds_ = 0;
};

}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms {
MS_IMPL InferenceModel InferenceModel::load(const std::filesystem::path& path, const InferenceOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  InferenceModel m;
  graph::Graph g = load_frozen(path, &m.metadata_);
  m.finish(std::move(g), opt);
  m.load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

MS_IMPL InferenceModel InferenceModel::from_graph(graph::Graph g, const InferenceOptions& opt) {
  InferenceModel m;
  m.finish(std::move(g), opt);
  return m;
}

MS_IMPL std::vector<AnyTensor> InferenceModel::run(std::span<const AnyTensor> inputs) {
  NoGradGuard no_grad;
  return exe_->run(inputs);
}

MS_IMPL const backend::Executable& InferenceModel::executable() const {
  const auto* e = dynamic_cast<const backend::Executable*>(exe_.get());
  MS_CHECK(e != nullptr, BackendError, "inference: the model runs on {}; use device_executable()", device_);
  return *e;
}

MS_IMPL const backend::DeviceExecutable& InferenceModel::device_executable() const {
  const auto* e = dynamic_cast<const backend::DeviceExecutable*>(exe_.get());
  MS_CHECK(e != nullptr, BackendError, "inference: the model runs on the cpu; use executable()");
  return *e;
}

MS_IMPL void InferenceModel::finish(graph::Graph g, const InferenceOptions& opt) {
  device_ = parse_backend(opt.backend);
  backend_ = opt.backend;
  for (graph::ValueId v : g.inputs()) {
    inputs_.push_back(g.value(v).meta);
    input_names_.push_back(g.value(v).name);
  }
  for (graph::ValueId v : g.outputs()) outputs_.push_back(g.value(v).meta);
  exe_ = backend::compile(std::move(g), backend::backend_for(device_), opt.compile);
}

MS_IMPL Device InferenceModel::parse_backend(const std::string& name) {
  auto names = inference_backends();
  const std::string type = name.substr(0, name.find(':'));
  const bool known = std::find(names.begin(), names.end(), type) != names.end();
  if (known && (type != "cpu" || name == "cpu")) {
    try {
      return Device::parse(name);
    } catch (const ValueError&) {  // a bad index: reported below with the list
    }
  }
  MS_THROW(BackendError, "inference: backend '{}' is not available in this build (available: {})", name,
           ::ms::detail::join_text(names, ", "));
}
}  // namespace ms
#endif
