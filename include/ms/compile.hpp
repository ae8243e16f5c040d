#pragma once
// backend::compile(graph, backend, options): one entry that compiles a captured graph for
// any backend and returns a CompiledGraph. It sits above the backends (it knows the CPU's
// executable and the device pipeline), like jit.hpp and inference.hpp. The CPU gets its executable (one planned arena,
// kernels resolved once, fused programs; backend/cpu/executor.hpp); any other device gets
// the device pipeline (engine and stream placement, planned device arena, loop sinking,
// stream capture; backend/device_executor.hpp), which talks to the device only through
// the Backend interface. Both read the same CompileOptions.
//
//   ms::graph::Graph g = cap.finish();
//   auto exe = ms::backend::compile(std::move(g), ms::backend::backend_for(device));
//   std::vector<ms::AnyTensor> out = exe->run({x});

#include <memory>

#include "backend/compile_options.hpp"
#include "backend/compiled_graph.hpp"
#include "backend/cpu/executor.hpp"
#include "backend/device_executor.hpp"

namespace ms::backend {

/// Optimizes `g`, places and plans it for backend `be`, and returns what replays it.
inline std::unique_ptr<CompiledGraph> compile(graph::Graph g, Backend& be, const CompileOptions& opt = {}) {
  if (be.device().is_cpu()) return std::make_unique<Executable>(compile(std::move(g), opt));
  return std::make_unique<DeviceExecutable>(compile_for_device(std::move(g), be, opt));
}

}  // namespace ms::backend
