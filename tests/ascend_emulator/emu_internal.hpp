#pragma once
// Shared internals of the Ascend emulator: error recording, counters, latency,
// faults, device memory and stream enqueueing. See ms_emulator.h for the
// behaviour that tests can rely on.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ms/backend/ascend/acl_types.hpp>

#include "ms_emulator.h"

#define MS_EMU_API extern "C" __attribute__((visibility("default")))
/// The internals that the emulator's HCCL library (libhccl.so, emu_hccl.cpp) uses: exported
/// from libms_ascend_emulator.so so that both work on the same device memory and streams.
#define MS_EMU_INTERNAL __attribute__((visibility("default")))

// Every exported AscendCL function is declared here from the same lists as the
// loader's table, so a definition with a different signature fails to compile.
#define MS_EMU_DECLARE(ret, name, params) MS_EMU_API ret name params;
MS_ACL_REQUIRED_FUNCS(MS_EMU_DECLARE)
MS_ACL_OPTIONAL_FUNCS(MS_EMU_DECLARE)
#undef MS_EMU_DECLARE
#define MS_EMU_DECLARE_OP(Name, ...)                                                         \
  MS_EMU_API aclnnStatus aclnn##Name##GetWorkspaceSize(__VA_ARGS__, uint64_t* workspaceSize, \
                                                       aclOpExecutor** executor);            \
  MS_EMU_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,                \
                                     aclOpExecutor* executor, aclrtStream stream);
MS_ACLNN_OPS(MS_EMU_DECLARE_OP)
#undef MS_EMU_DECLARE_OP

namespace msemu {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- errors
/// printf-style formatting into a std::string.
MS_EMU_INTERNAL std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/// Records `msg` as the calling thread's recent error message and returns `code`.
MS_EMU_INTERNAL int fail(int code, std::string msg);
/// Takes the calling thread's pending message (empty if none).
MS_EMU_INTERNAL std::string take_error();

// ---------------------------------------------------------------- runtime state
/// ACL_SUCCESS, or the error (recorded) when aclInit/aclrtSetDevice are missing.
MS_EMU_INTERNAL int check_context(const char* fn);

// ---------------------------------------------------------------- SoC profile
/// What one chip generation's runtime and kernels accept (emu_soc.cpp).
struct SocProfile {
  const char* family;     ///< MS_EMU_SOC value: Ascend910, Ascend910B, Ascend310P, Ascend910_93
  const char* name;       ///< what aclrtGetSocName reports
  bool fp32_keep_dtype;   ///< Matmul/BatchMatMul take FLOAT32 with cubeMathType KEEP_DTYPE (0)
  bool capture;           ///< aclmdlRICaptureBegin is supported
  bool single_op;         ///< the aclop* single-operator API is supported
  bool bf16;              ///< the vector and cube kernels take ACL_BF16
};
const SocProfile& soc();
/// ACL_SUCCESS, or ACLNN_ERR_PARAM_INVALID (message recorded) when aclnn kernel `op`
/// ("aclnnRelu") does not take dtype `dt` for its argument `what` on the current SoC.
int check_soc_dtype(const char* op, const char* what, aclDataType dt);

// ---------------------------------------------------------------- counters
struct Counters {
  std::atomic<uint64_t> launches{0}, captured_tasks{0};
  std::atomic<uint64_t> h2d_copies{0}, d2h_copies{0}, d2d_copies{0}, h2h_copies{0};
  std::atomic<uint64_t> h2d_bytes{0}, d2h_bytes{0}, d2d_bytes{0};
  std::atomic<uint64_t> memsets{0}, syncs{0}, capture_replays{0};
  std::atomic<uint64_t> aicpu_launches{0};
  std::atomic<uint64_t> pageable_async_copies{0}, use_after_free{0}, set_device_calls{0};
  std::atomic<uint64_t> running_kernels{0}, peak_running_kernels{0};  ///< kernels executing now / at most
  // HCCL (emu_hccl.cpp): collectives enqueued, the bytes each contributed, live communicators.
  std::atomic<uint64_t> hccl_collectives{0}, hccl_bytes{0}, live_hccl_comms{0};
};
MS_EMU_INTERNAL Counters& counters();
/// Gauges owned by other translation units.
void fill_stream_gauges(msEmuCounters& out);
void fill_handle_gauges(msEmuCounters& out);
void fill_single_op_gauges(msEmuCounters& out);

// ---------------------------------------------------------------- latency
MS_EMU_INTERNAL uint64_t launch_ns();
/// Modelled duration of an AI CPU task over `elements` operand elements (launch included).
uint64_t aicpu_ns(uint64_t elements);
uint64_t sync_ns();
/// Modelled duration of a copy of `bytes`; `host_device` adds the fixed cost.
uint64_t copy_ns(uint64_t bytes, bool host_device);
MS_EMU_INTERNAL void sleep_ns(uint64_t ns);

// ---------------------------------------------------------------- faults
/// Counts one event of `kind`; true when the armed fault fires (then disarms it).
bool fault_fires(int kind);

// ---------------------------------------------------------------- device memory
struct Allocation {
  uintptr_t base = 0;  // device address
  size_t size = 0;
  std::unique_ptr<std::byte[]> data;  // host backing store
  std::atomic<bool> freed{false};
};
using AllocRef = std::shared_ptr<Allocation>;

/// True when `p` lies in the emulator's device address range (live or not).
bool is_device_address(const void* p);
/// Translates the device range [p, p + bytes) to host memory. On failure records
/// "<fn>: <what> ..." and returns ACL_ERROR_RT_PARAM_INVALID.
MS_EMU_INTERNAL int resolve(const void* p, size_t bytes, const char* fn, const char* what, AllocRef& ref,
            std::byte*& host);

// ---------------------------------------------------------------- streams
enum class TaskKind { Kernel, Copy, Memset, EventRecord, EventWait, Replay, Collective };

struct Task {
  TaskKind kind = TaskKind::Kernel;
  std::string name;            // API function, for messages
  uint64_t delay_ns = 0;       // modelled duration, slept before the body runs
  std::function<int()> body;   // returns an aclError; may be run again by a replay
  std::vector<AllocRef> refs;  // device memory the body touches (kept alive)
};

/// True when [p, p + bytes) lies inside one aclrtMallocHost block.
bool is_pinned_host(const void* p, size_t bytes);
/// Waits for `stream`'s queued work (as aclrtSynchronizeStream, without counting a sync);
/// ACL_ERROR_RT_STREAM_CAPTURED when it is capturing.
int drain_stream(aclrtStream stream, const char* fn);
/// Runs a task body as a stream worker does (fault injection for kernels included).
int run_task_body(const Task& task);
/// Enqueues `task` on `stream` (nullptr = default stream), or records it when the
/// stream is capturing (*captured = true). Errors are recorded under `fn`.
MS_EMU_INTERNAL int enqueue(aclrtStream stream, Task task, const char* fn, bool* captured);
/// Waits for every stream; returns the first stream error (and clears them).
int synchronize_all(const char* fn);

}  // namespace msemu
