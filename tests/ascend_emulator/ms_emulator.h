/*
 * Control API of the Ascend emulator (libms_ascend_emulator.so), a test fixture
 * that implements the AscendCL C functions on the host. Emulator-only: real
 * CANN has none of these symbols. Plain C, so any test can use it.
 *
 * Counting rules (msEmuCounters):
 *   - Work is counted when the host issues it: launches when aclnnXxx(...)
 *     enqueues a kernel, copies when aclrtMemcpy/aclrtMemcpyAsync is called.
 *     Work issued on a stream that is being captured is not counted there but in
 *     captured_tasks; each aclmdlRIExecuteAsync counts one capture_replay and
 *     nothing else (the replayed kernels and copies are not counted again).
 *   - aicpu_launches counts aclopExecuteV2 calls that enqueued an AI CPU operator
 *     (not counted in launches, which are aclnn kernels only).
 *   - syncs counts aclrtSynchronizeStream, aclrtSynchronizeEvent and
 *     aclrtSynchronizeDevice calls.
 *   - live_* and peak_device_bytes are gauges of current state; msEmuResetCounters
 *     resets the event counters and sets peak_device_bytes to live_device_bytes.
 *
 * Latency model (msEmuSetLatency), applied by sleeping, so every figure is a
 * lower bound on the time that passes:
 *   - each kernel waits launch_ns on its stream's worker before it computes
 *     (a model replay waits launch_ns once, however many kernels it holds);
 *   - each host<->device copy takes copy_fixed_ns + bytes * copy_ps_per_byte / 1000,
 *     a device-to-device copy bytes * copy_ps_per_byte / 1000 (on the worker
 *     for async copies, in the calling thread for aclrtMemcpy);
 *   - each synchronize call waits sync_ns in the calling thread after the wait.
 *   - each AI CPU operator (aclopExecuteV2) waits aicpu_launch_ns plus
 *     aicpu_ps_per_element / 1000 ns per element of its operands on its stream's
 *     worker (msEmuSetAiCpuLatency): slower than AI Core, but no host copies.
 *   Defaults: launch 5 us, sync 20 us, 100 ps/byte (10 GB/s), 10 us per copy;
 *   AI CPU 20 us per launch and 1 ns per element. msEmuResetLatency restores both.
 *
 * Faults (msEmuInjectFault): one-shot. The first after_n matching events pass,
 * the next one fails, then the fault is disarmed.
 *   MS_EMU_FAULT_ALLOC        aclrtMalloc returns ACL_ERROR_RT_MEMORY_ALLOCATION (207001)
 *   MS_EMU_FAULT_OP_WORKSPACE aclnnXxxGetWorkspaceSize returns ACLNN_ERR_INNER (561000)
 *   MS_EMU_FAULT_OP_LAUNCH    aclnnXxx(...) returns ACLNN_ERR_RUNTIME_ERROR (361001);
 *                             the executor is released
 *   MS_EMU_FAULT_STREAM       a kernel fails while executing on its stream; later
 *                             kernels and copies on that stream are skipped and the
 *                             next aclrtSynchronizeStream returns
 *                             ACL_ERROR_RT_AICORE_EXCEPTION (507015), which clears it;
 *                             an event recorded on the failed stream carries the error
 *                             to every stream that waits for it (which fails the same way)
 *   MS_EMU_FAULT_MEMCPY       a host<->device aclrtMemcpy/aclrtMemcpyAsync returns
 *                             ACL_ERROR_RT_COPY_DATA (507052)
 *   MS_EMU_FAULT_AICPU_LAUNCH aclopExecuteV2 returns ACL_ERROR_RT_AICPU_EXCEPTION (507018)
 *                             after its checks, enqueueing nothing
 * An AI CPU operator failing on its stream (MS_EMU_FAULT_STREAM) reports
 * ACL_ERROR_RT_AICPU_EXCEPTION (507018) instead of the AI Core code.
 * For ALLOC, OP_WORKSPACE, OP_LAUNCH, MEMCPY and AICPU_LAUNCH the counted events are calls of
 * those functions; for STREAM, kernels executed by any stream.
 *
 * Also emulated: device memory lives in an address range that the host cannot
 * read (dereferencing a device pointer faults), is filled with 0xFF bytes (NaN
 * as float) when allocated, and every copy and kernel checks that its device
 * ranges lie inside live allocations. aclrtMemcpy and aclrtMemset run at once
 * in the calling thread and are not ordered after work queued on any stream
 * (the default stream included): synchronize first. aclrtFree does not wait
 * for queued work either, as on a device: the block is released and poisoned at
 * once, and a task queued before the free that touches it fails when it runs
 * with "use-after-free" in its message (counted in use_after_free); the stream
 * reports it at the next synchronize (ACL_ERROR_RT_AICORE_EXCEPTION for kernels,
 * ACL_ERROR_RT_AICPU_EXCEPTION for AI CPU operators, ACL_ERROR_RT_COPY_DATA for copies).
 * aclrtMemcpyAsync between the device and host memory that aclrtMallocHost did not
 * return (pageable memory) synchronizes the stream and copies at once, and fails with
 * ACL_ERROR_RT_STREAM_CAPTURED on a capturing stream. aclCreateTensor refuses a
 * tensorData address that is not 32-byte aligned (the view offset, in elements, is
 * how a tensor starts inside a block). aclopExecuteV2 only runs loaded op models, and
 * the emulator loads none: it answers ACL_ERROR_OP_NOT_FOUND; aclopCompileAndExecute
 * runs the AI CPU operators.
 * Each thread must call aclrtSetDevice
 * before using the runtime, as with CANN (msEmuSetStrictContext(0) relaxes that).
 *
 * SoC profiles ($MS_EMU_SOC, default Ascend910B; msEmuSetSoc), reported by aclrtGetSocName:
 *   Ascend910  (Ascend910A)     no fp32 KEEP_DTYPE matmul, no capture, no bf16, aclop* API
 *   Ascend910B (Ascend910B3)    fp32 KEEP_DTYPE matmul, capture, bf16, aclop* API
 *   Ascend310P (Ascend310P3)    no fp32 KEEP_DTYPE matmul, capture, no bf16, aclop* API
 *   Ascend910_93 (Ascend910_9391) like 910B without the aclop* API (ACL_ERROR_API_NOT_SUPPORT)
 * On every profile Matmul/BatchMatMul, Gelu, Tanh and Sigmoid take float/float16 (+bf16),
 * Relu no double and no uint8, Neg no uint8 (ACLNN_ERR_PARAM_INVALID naming the SoC);
 * without capture aclmdlRICaptureBegin answers ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 * All functions here are thread-safe.
 *
 * HCCL (libhccl.so beside this library, emu_hccl.cpp): communicators across the processes
 * of one machine through POSIX shared memory named by the root info. A collective counts
 * in hccl_collectives and hccl_bytes (the bytes it takes from this rank's device memory)
 * when it is issued, not when captured, and touches no copy counter: device data moves
 * between the processes directly. Collectives of one communicator run in issue order on
 * their streams' workers; ranks that make different calls fail every stream's next
 * synchronize (ACL_ERROR_RT_INTERNAL_ERROR, the message naming both calls); a rank that
 * waits $MS_EMU_HCCL_TIMEOUT seconds (default 60) for the others fails with HCCL_E_TIMEOUT
 * and the communicator is unusable afterwards. A collective skipped because its stream
 * had already failed also leaves the communicator unusable (the later ones time out).
 */
#ifndef MS_ASCEND_EMULATOR_H_
#define MS_ASCEND_EMULATOR_H_

#include <dlfcn.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct msEmuCounters {
  uint64_t launches;         /* aclnn kernels enqueued (not captured) */
  uint64_t captured_tasks;   /* kernels/copies/memsets recorded into a capture */
  uint64_t h2d_copies;
  uint64_t d2h_copies;
  uint64_t d2d_copies;
  uint64_t h2h_copies;
  uint64_t h2d_bytes;
  uint64_t d2h_bytes;
  uint64_t d2d_bytes;
  uint64_t memsets;          /* aclrtMemset + aclrtMemsetAsync */
  uint64_t syncs;            /* stream, event and device synchronizations */
  uint64_t capture_replays;  /* aclmdlRIExecuteAsync calls */
  /* gauges */
  uint64_t live_device_bytes;
  uint64_t peak_device_bytes;
  uint64_t live_allocations;
  uint64_t live_host_allocations; /* aclrtMallocHost blocks */
  uint64_t live_streams;          /* created with aclrtCreateStream */
  uint64_t live_events;
  uint64_t live_tensors;
  uint64_t live_scalars;
  uint64_t live_int_arrays;
  uint64_t live_executors;        /* created and neither launched nor destroyed */
  uint64_t live_models;           /* captured, not yet aclmdlRIDestroy'ed */
  /* appended later: fields are only ever added at the end */
  uint64_t aicpu_launches;        /* AI CPU operators enqueued by aclopExecuteV2 (not captured) */
  uint64_t live_tensor_descs;     /* aclCreateTensorDesc'ed, not destroyed */
  uint64_t live_data_buffers;     /* aclCreateDataBuffer'ed, not destroyed */
  uint64_t live_op_attrs;         /* aclopCreateAttr'ed, not destroyed */
  uint64_t pageable_async_copies; /* aclrtMemcpyAsync calls whose host side was not aclrtMallocHost
                                     memory: each synchronized the stream and copied at once */
  uint64_t use_after_free;        /* queued tasks that found a block freed before they ran */
  uint64_t set_device_calls;      /* successful aclrtSetDevice calls */
  uint64_t peak_concurrent_kernels; /* most kernels executing at once, over all streams, since the last reset */
  /* HCCL (libhccl.so of the emulator, emu_hccl.cpp) */
  uint64_t hccl_collectives;      /* HcclAllReduce/Broadcast/AllGather/ReduceScatter enqueued (not captured) */
  uint64_t hccl_bytes;            /* bytes those collectives took from this rank's device memory */
  uint64_t live_hccl_comms;       /* HcclCommInitRootInfo'ed, not HcclCommDestroy'ed */
};

struct msEmuLatency {
  uint64_t launch_ns;
  uint64_t sync_ns;
  uint64_t copy_ps_per_byte;
  uint64_t copy_fixed_ns;
};

typedef enum {
  MS_EMU_FAULT_ALLOC = 1,
  MS_EMU_FAULT_OP_WORKSPACE = 2,
  MS_EMU_FAULT_OP_LAUNCH = 3,
  MS_EMU_FAULT_STREAM = 4,
  MS_EMU_FAULT_MEMCPY = 5,
  MS_EMU_FAULT_AICPU_LAUNCH = 6
} msEmuFaultKind;

void msEmuResetCounters(void);
void msEmuGetCounters(struct msEmuCounters* out);
void msEmuSetLatency(uint64_t launch_ns, uint64_t sync_ns, uint64_t copy_ps_per_byte,
                     uint64_t copy_fixed_ns);
void msEmuGetLatency(struct msEmuLatency* out);
/* The AI CPU part of the latency model: per operator launch, and per operand element. */
void msEmuSetAiCpuLatency(uint64_t launch_ns, uint64_t ps_per_element);
void msEmuGetAiCpuLatency(uint64_t* launch_ns, uint64_t* ps_per_element);
/* Restores the default latency model (AI CPU included). */
void msEmuResetLatency(void);
/* Returns 0, or -1 for an unknown kind. */
int msEmuInjectFault(int kind, uint64_t after_n);
void msEmuClearFaults(void);
/* Device memory capacity (default: min(16 GiB, half the host memory)). */
void msEmuSetDeviceMemoryLimit(uint64_t bytes);
/* 1 (default): runtime calls need aclInit and aclrtSetDevice on the calling thread. */
void msEmuSetStrictContext(int enabled);
/* Switches the SoC profile ("Ascend910", "Ascend910B", "Ascend310P", "Ascend910_93", or the
 * name aclrtGetSocName reports). Returns 0, or -1 for an unknown name. */
int msEmuSetSoc(const char* name);

/* The control functions as a table, for tests that load the emulator with dlopen. */
struct msEmuApi {
  void (*ResetCounters)(void);
  void (*GetCounters)(struct msEmuCounters*);
  void (*SetLatency)(uint64_t, uint64_t, uint64_t, uint64_t);
  void (*GetLatency)(struct msEmuLatency*);
  void (*ResetLatency)(void);
  int (*InjectFault)(int, uint64_t);
  void (*ClearFaults)(void);
  void (*SetDeviceMemoryLimit)(uint64_t);
  void (*SetStrictContext)(int);
  void (*SetAiCpuLatency)(uint64_t, uint64_t);
  void (*GetAiCpuLatency)(uint64_t*, uint64_t*);
  int (*SetSoc)(const char*);
};

/* Opens the emulator at `path` (again: dlopen reference-counts) and fills `api`.
 * Returns 0 on success, -1 if the library or a symbol is missing. */
static inline int msEmuLoadApi(const char* path, struct msEmuApi* api) {
  void* h = dlopen(path, RTLD_LAZY | RTLD_GLOBAL);
  if (h == NULL) return -1;
#define MS_EMU_LOAD_(field, sym)                            \
  *(void**)(&api->field) = dlsym(h, sym);                   \
  if (api->field == NULL) return -1;
  MS_EMU_LOAD_(ResetCounters, "msEmuResetCounters")
  MS_EMU_LOAD_(GetCounters, "msEmuGetCounters")
  MS_EMU_LOAD_(SetLatency, "msEmuSetLatency")
  MS_EMU_LOAD_(GetLatency, "msEmuGetLatency")
  MS_EMU_LOAD_(ResetLatency, "msEmuResetLatency")
  MS_EMU_LOAD_(InjectFault, "msEmuInjectFault")
  MS_EMU_LOAD_(ClearFaults, "msEmuClearFaults")
  MS_EMU_LOAD_(SetDeviceMemoryLimit, "msEmuSetDeviceMemoryLimit")
  MS_EMU_LOAD_(SetStrictContext, "msEmuSetStrictContext")
  MS_EMU_LOAD_(SetAiCpuLatency, "msEmuSetAiCpuLatency")
  MS_EMU_LOAD_(GetAiCpuLatency, "msEmuGetAiCpuLatency")
  MS_EMU_LOAD_(SetSoc, "msEmuSetSoc")
#undef MS_EMU_LOAD_
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* MS_ASCEND_EMULATOR_H_ */
