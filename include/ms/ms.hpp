#pragma once
// The umbrella header: include this one file to use ms.
// Internal headers live in the subfolders; their layout may change.

// The op tables use designated initializers that leave optional fields at their
// defaults; GCC 12 warns about that under -Wextra, so the warning is off for ms's
// own headers (and only for them).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

#include "core/error.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/allocator.hpp"
#include "core/storage.hpp"
#include "core/tensor.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/format.hpp"
#include "core/npy.hpp"
#include "ops/registry.hpp"
#include "ops/dispatch.hpp"
#include "ops/elementwise.hpp"
#include "ops/unary.hpp"
#include "ops/binary.hpp"
#include "ops/views.hpp"
#include "ops/factory.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "ops/linalg.hpp"
#include "ops/movement.hpp"
#include "ops/inplace.hpp"
#include "ops/scatter.hpp"
#include "ops/indexing.hpp"
#include "ops/pad.hpp"
#include "ops/methods.hpp"
#include "graph/graph.hpp"
#include "graph/capture.hpp"
#include "graph/fusion.hpp"
#include "graph/passes.hpp"
#include "backend/memory_plan.hpp"
#include "backend/cpu/executor.hpp"
#include "jit.hpp"
#include "autograd/tape.hpp"
#include "autograd/rules.hpp"
#include "ops/nn.hpp"
#include "ops/optim_ops.hpp"
#include "ops/handles.hpp"
#include "autograd/nn_rules.hpp"
#include "nn/nn.hpp"
#include "optim/optimizer.hpp"
#include "data/idx.hpp"
#include "data/loader.hpp"
#include "tools/profiler.hpp"
#include "tools/dump.hpp"
#include "ops/custom.hpp"
#include "graph/freeze.hpp"
#include "inference.hpp"
#include "backend/backend.hpp"
#include "backend/device_executor.hpp"
#include "compile.hpp"
// The Ascend adapter registers the "ascend" device in the unit that defines the ops; a
// program reaches it through ms::Device::ascend(). Its own API (ascend_backend(), the
// self-test) comes with <ms/backend/ascend/ascend_backend.hpp>, which the other units of a
// program with separate kernels include when they use it (core/linkage.hpp).
#if MS_KERNEL_BODIES
#include "backend/ascend/ascend_backend.hpp"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
