#pragma once
// HCCL C API types, constants and function signatures (the collective communication
// library of CANN, libhccl.so), declared by hand so that nothing needs CANN at build time.
// Belongs here: the C ABI only. Must not depend on the rest of ms: the HCCL part of the
// Ascend emulator (tests/ascend_emulator/emu_hccl.cpp) includes this header to implement
// the same functions.
//
// Sources the values were checked against (public CANN repositories, hcomm):
//   inc/hccl/hccl_types.h   (HcclResult, HcclComm, HcclReduceOp, HcclDataType,
//                            HCCL_ROOT_INFO_BYTES = 4108, HcclRootInfo)
//   inc/hccl/hccl.h         (HcclGetRootInfo, HcclCommInitRootInfo, HcclCommDestroy,
//                            HcclGetRankSize, HcclGetRankId, HcclGetErrorString)
//   inc/hccl/hccl_ops.h     (HcclAllReduce, HcclBroadcast, HcclAllGather, HcclReduceScatter,
//                            and the dtypes each collective documents)
// Counts are in elements; ReduceScatter's count is the per-rank output (recvCount),
// AllGather's the per-rank input (sendCount).

#include <cstdint>

#include "acl_types.hpp"  // aclrtStream

typedef void* HcclComm;

typedef enum {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_SYSCALL = 8,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_OPEN_FILE_FAILURE = 10,
  HCCL_E_TCP_CONNECT = 11,
  HCCL_E_ROCE_CONNECT = 12,
  HCCL_E_TCP_TRANSFER = 13,
  HCCL_E_ROCE_TRANSFER = 14,
  HCCL_E_RUNTIME = 15,
  HCCL_E_DRV = 16,
  HCCL_E_PROFILING = 17,
  HCCL_E_CCE = 18,
  HCCL_E_NETWORK = 19,
  HCCL_E_AGAIN = 20,
  HCCL_E_REMOTE = 21,
  HCCL_E_SUSPENDING = 22,
  HCCL_E_OPRETRY_FAIL = 23,
  HCCL_E_OOM = 24,
  HCCL_E_IN_STATUS = 1041,
} HcclResult;

typedef enum {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
  HCCL_REDUCE_RESERVED = 255,
} HcclReduceOp;

typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
  HCCL_DATA_TYPE_INT128 = 12,
  HCCL_DATA_TYPE_RESERVED = 255,
} HcclDataType;

/// The bytes of an HcclRootInfo: opaque to the caller, made by HcclGetRootInfo on the root
/// and handed to every rank (here over MPI) for HcclCommInitRootInfo.
inline constexpr uint32_t HCCL_ROOT_INFO_BYTES = 4108;
typedef struct HcclRootInfoDef {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;
static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is 4108 bytes in the CANN ABI");

/// Functions every HCCL library must provide (X(return type, name, (parameters))). A missing
/// one makes load_hccl_api() throw.
#define MS_HCCL_REQUIRED_FUNCS(X)                                                                \
  X(HcclResult, HcclGetRootInfo, (HcclRootInfo * rootInfo))                                      \
  X(HcclResult, HcclCommInitRootInfo,                                                            \
    (uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm))              \
  X(HcclResult, HcclCommDestroy, (HcclComm comm))                                                \
  X(HcclResult, HcclAllReduce,                                                                   \
    (void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,       \
     HcclComm comm, aclrtStream stream))                                                         \
  X(HcclResult, HcclBroadcast,                                                                   \
    (void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,             \
     aclrtStream stream))                                                                        \
  X(HcclResult, HcclAllGather,                                                                   \
    (void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,     \
     aclrtStream stream))                                                                        \
  X(HcclResult, HcclReduceScatter,                                                               \
    (void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType, HcclReduceOp op,   \
     HcclComm comm, aclrtStream stream))

/// Functions that may be absent (the table holds nullptr).
#define MS_HCCL_OPTIONAL_FUNCS(X)                                        \
  X(HcclResult, HcclGetRankSize, (HcclComm comm, uint32_t * rankSize))   \
  X(HcclResult, HcclGetRankId, (HcclComm comm, uint32_t * rank))         \
  X(const char*, HcclGetErrorString, (HcclResult code))

namespace ms::backend::ascend::hccl_fn {
#define MS_HCCL_DECLARE_FN_TYPE(ret, name, params) using name = ret params;
MS_HCCL_REQUIRED_FUNCS(MS_HCCL_DECLARE_FN_TYPE)
MS_HCCL_OPTIONAL_FUNCS(MS_HCCL_DECLARE_FN_TYPE)
#undef MS_HCCL_DECLARE_FN_TYPE
}  // namespace ms::backend::ascend::hccl_fn
