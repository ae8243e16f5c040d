#pragma once
// CompiledGraph: what backend::compile returns for any backend, the interface shared by the
// CPU executable (backend/cpu/executor.hpp) and the device executable
// (backend/device_executor.hpp). Code that only runs a compiled graph (ms::InferenceModel,
// a serving loop) holds one of these and never asks which backend it is on.

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "../graph/graph.hpp"
#include "memory_plan.hpp"

namespace ms::backend {

class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;

  /// One step: host tensors in (dtype and shape as captured), host tensors out. The CPU
  /// also takes inputs that are views; a device stages them onto the device.
  virtual std::vector<AnyTensor> run(std::span<const AnyTensor> inputs) = 0;
  std::vector<AnyTensor> run(std::initializer_list<AnyTensor> inputs) {
    return run(std::span<const AnyTensor>(inputs.begin(), inputs.size()));
  }

  /// The device whose backend runs the graph (cpu for the CPU executable).
  virtual Device device() const = 0;
  /// The optimized graph that runs.
  virtual const graph::Graph& graph() const = 0;
  /// The plan of the arena that holds the intermediates (planned peak, lower bound); null
  /// when the backend gave each value a buffer of its own.
  virtual const MemoryPlan* planned_memory() const = 0;
  /// The compiled graph as text: the IR, with each node's engine and stream on a device.
  virtual std::string dump() const = 0;
  /// Identifies this compiled graph in profiles and dumps (graph_id).
  virtual int id() const = 0;

 protected:
  /// The checks every run() makes: one input per graph input, each defined, on the host,
  /// with the dtype and shape it was captured with (a typed error naming the input otherwise).
  static void check_inputs(const graph::Graph& g, std::span<const AnyTensor> inputs) {
    const auto& gin = g.inputs();
    MS_CHECK(inputs.size() == gin.size(), ValueError, "run: the graph takes {} inputs, got {}", gin.size(),
             inputs.size());
    for (std::size_t i = 0; i < gin.size(); ++i) {
      const auto& m = g.value(gin[i]).meta;
      MS_CHECK(inputs[i].defined(), ValueError, "run: input {} is an undefined tensor", i);
      MS_CHECK(inputs[i].dtype() == m.dtype, DTypeError, "run: input {} must be {} {}, got {} {}", i, m.dtype,
               shape_str(m.shape), inputs[i].dtype(), shape_str(inputs[i].shape()));
      MS_CHECK(inputs[i].shape() == m.shape, ShapeError, "run: input {} must be {} {}, got {} {}", i, m.dtype,
               shape_str(m.shape), inputs[i].dtype(), shape_str(inputs[i].shape()));
      MS_CHECK(inputs[i].device().is_cpu(), DeviceError, "run: input {} is on {}; run() takes host tensors", i,
               inputs[i].device());
    }
  }

  CompiledGraph() = default;
  CompiledGraph(CompiledGraph&&) = default;
  CompiledGraph& operator=(CompiledGraph&&) = default;
};

}  // namespace ms::backend
