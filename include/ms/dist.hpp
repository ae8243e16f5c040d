#pragma once
// The distributed umbrella header: processes and groups (dist/comm.hpp), collectives as
// registered ops (dist/ops.hpp; the non-blocking start/wait pair: dist/async_ops.hpp),
// data-parallel training (dist/data_parallel.hpp) and HCCL on Ascend (dist/hccl.hpp:
// libhccl.so is opened only when first used).
// Opt-in: <ms/ms.hpp> does not include it. Link the ms::dist CMake target to run on MPI
// (it defines MS_HAVE_MPI); without it every program is a world of one process.

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

#include "ms.hpp"
#include "dist/comm.hpp"
#include "dist/ops.hpp"
#include "dist/async_ops.hpp"
#include "dist/data_parallel.hpp"
#include "dist/hccl.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
