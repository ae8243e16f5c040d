#pragma once
// CompileOptions: how backend::compile turns a graph into a CompiledGraph, one struct for
// every backend. The pass pipeline and `optimize` apply everywhere; the host fields shape
// the CPU executable; the device fields shape engine/stream placement, loop sinking and
// stream capture on an accelerator. Fields that do not apply to a backend are ignored by it.

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "../graph/passes.hpp"

namespace ms::backend {

/// Whether the CPU compiler generates code for fused programs by default: the environment's
/// MS_CPU_CODEGEN=1 (or on/true).
inline bool codegen_default() {
  const char* e = std::getenv("MS_CPU_CODEGEN");
  const std::string_view v = e ? e : "0";
  return v == "1" || v == "on" || v == "true" || v == "ON" || v == "TRUE";
}

struct CompileOptions {
  // ---- every backend
  /// The pass pipeline. On a device, elementwise fusion (passes.fuse) is not run: a fused
  /// program is a host kernel, and a device graph keeps the ops its engines map.
  graph::PassOptions passes;
  bool optimize = true;  ///< run the pass pipeline before planning

  // ---- the CPU
  bool inplace = true;  ///< let elementwise ops write over their last-used input
  /// Write an elementwise result that is copy_'d into a parameter straight into the
  /// parameter's storage (an optimizer's m, v and weight updates), when nothing reads the
  /// parameter's old value afterwards; the copy_ then has nothing to do.
  bool elide_writeback = true;
  /// Compile the fused elementwise programs into one loop each with the system compiler
  /// (backend/cpu/codegen.hpp) instead of running them on the block interpreter. Off
  /// unless the environment sets MS_CPU_CODEGEN=1.
  bool codegen = codegen_default();

  // ---- devices (backend/device_executor.hpp)
  int max_streams = 4;              ///< 1: everything on one stream
  std::set<std::string> pin_ops;    ///< op names that run on the host CPU
  std::set<std::string> pin_nodes;  ///< node names ("add_3") that run on the host CPU
  /// Any other node this returns true for runs on the host (a region: e.g. by name prefix).
  std::function<bool(const graph::Node&)> pin_to_cpu;
  /// Replay one captured iteration per step when the backend can (one stream, no host nodes).
  bool capture = false;
  /// Place the intermediates of device nodes in one device arena (backend/memory_plan.hpp),
  /// when the graph runs on one stream; otherwise each value has a buffer of its own.
  bool plan_memory = true;
};

/// The name the device options had before one CompileOptions served every backend.
using DeviceCompileOptions = CompileOptions;

}  // namespace ms::backend
