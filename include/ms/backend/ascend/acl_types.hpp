#pragma once
// AscendCL C API types, constants and function signatures, declared by hand so
// that nothing about the Ascend backend needs CANN at build time.
// Belongs here: the C ABI only (typedefs, enum values, status codes, function
// types). Must not depend on the rest of ms: the Ascend emulator
// (tests/ascend_emulator) includes this header to implement the same ABI.
//
// Sources the values were checked against (public CANN repositories):
//   hicann/runtime  include/external/acl/acl_base_rt.h        (aclDataType, aclFormat,
//                                                              ACL_SUCCESS, ACL_ERROR_*)
//   hicann/runtime  include/external/acl/acl_rt.h             (aclrtMemcpyKind,
//                                                              aclrtMemMallocPolicy,
//                                                              aclmdlRI, aclmdlRICaptureMode)
//   hicann/runtime  include/external/acl/error_codes/rt_error_codes.h (ACL_ERROR_RT_*)
//   hicann/runtime  src/acl/aclrt_impl/acl_rt_wrapper.h       (aclrt*/aclmdlRI* signatures)
//   nnopbase        aclnn/acl_meta.h                          (aclCreateTensor & co.)
//   hicann/ops-math, hicann/ops-nn  aclnn_*.h + docs          (aclnn op signatures)
//   hicann/ge       inc/external/acl/acl_op.h                 (aclop* single-operator API)
//   hicann/ge       inc/external/acl/acl_base.h               (aclCreateTensorDesc,
//                                                              aclCreateDataBuffer, ACL_ERROR_OP_*)
//   hicann/ops-math docs/zh/context/aclnn返回码.md             (ACLNN_* status codes)
//   hicann/ops-math math/one_hot/docs/aclnnOneHot.md, hicann/ops-nn
//   activation/softmax_cross_entropy_with_logits               (the training-step ops)
// Conventions: strides and the view offset passed to aclCreateTensor are in
// elements, not bytes; aclnn status codes share the int space of aclError.

#include <cstddef>
#include <cstdint>

// ---------------------------------------------------------------- handles
typedef void* aclrtStream;   // nullptr is the default stream
typedef void* aclrtEvent;
typedef void* aclrtContext;
typedef void* aclmdlRI;      // a captured model runtime instance
typedef int aclError;
typedef int32_t aclnnStatus;
typedef uint16_t aclFloat16;

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
// Single-operator API (acl_base.h, acl_op.h): AI CPU operators run through aclopCompileAndExecute.
typedef struct aclTensorDesc aclTensorDesc;
typedef struct aclDataBuffer aclDataBuffer;
typedef struct aclopAttr aclopAttr;

// ---------------------------------------------------------------- enums
typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27,
  ACL_INT4 = 29,
  ACL_UINT1 = 30,
  ACL_COMPLEX32 = 33,
} aclDataType;

typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
  ACL_FORMAT_NC = 35,
  ACL_FORMAT_NCL = 47,
} aclFormat;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4,  // direction inferred from the pointers
  ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
  ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
  ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7,
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
  ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
  ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
  ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
  ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,
} aclrtMemMallocPolicy;

typedef enum {
  ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
  ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1,
  ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2,
} aclmdlRICaptureMode;

// aclopCompileAndExecute's engine and compile choices (acl_op.h, acl_op_compiler.h).
typedef enum {
  ACL_ENGINE_SYS = 0,
  ACL_ENGINE_AICORE = 1,
  ACL_ENGINE_VECTOR = 2,
} aclopEngineType;

typedef enum {
  ACL_COMPILE_SYS = 0,
  ACL_COMPILE_UNREGISTERED = 1,
} aclopCompileType;

// aclrtQueryEventStatus's answer (acl_rt.h).
typedef enum {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
} aclrtEventRecordedStatus;

// cubeMathType argument of aclnnMatmul / aclnnBatchMatMul (op_api_def.h).
inline constexpr int8_t ACLNN_CUBE_KEEP_DTYPE = 0;
inline constexpr int8_t ACLNN_CUBE_ALLOW_FP32_DOWN_PRECISION = 1;
inline constexpr int8_t ACLNN_CUBE_USE_FP16 = 2;
inline constexpr int8_t ACLNN_CUBE_USE_HF32 = 3;

// ---------------------------------------------------------------- status codes
// acl_base_rt.h
inline constexpr aclError ACL_SUCCESS = 0;
inline constexpr aclError ACL_ERROR_INVALID_PARAM = 100000;
inline constexpr aclError ACL_ERROR_UNINITIALIZE = 100001;
inline constexpr aclError ACL_ERROR_REPEAT_INITIALIZE = 100002;
inline constexpr aclError ACL_ERROR_OP_TYPE_NOT_MATCH = 100020;
inline constexpr aclError ACL_ERROR_OP_INPUT_NOT_MATCH = 100021;
inline constexpr aclError ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022;
inline constexpr aclError ACL_ERROR_OP_ATTR_NOT_MATCH = 100023;
inline constexpr aclError ACL_ERROR_OP_NOT_FOUND = 100024;
inline constexpr aclError ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026;
inline constexpr aclError ACL_ERROR_REPEAT_FINALIZE = 100037;
inline constexpr aclError ACL_ERROR_BAD_ALLOC = 200000;
inline constexpr aclError ACL_ERROR_API_NOT_SUPPORT = 200001;
inline constexpr aclError ACL_ERROR_INVALID_DEVICE = 200002;
inline constexpr aclError ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
inline constexpr aclError ACL_ERROR_FEATURE_UNSUPPORTED = 200006;
inline constexpr aclError ACL_ERROR_INTERNAL_ERROR = 500000;
inline constexpr aclError ACL_ERROR_FAILURE = 500001;
inline constexpr aclError ACL_ERROR_RT_FAILURE = 500003;
// rt_error_codes.h (defined as macros there; constants here)
inline constexpr aclError ACL_ERROR_RT_PARAM_INVALID = 107000;
inline constexpr aclError ACL_ERROR_RT_INVALID_DEVICEID = 107001;
inline constexpr aclError ACL_ERROR_RT_CONTEXT_NULL = 107002;
inline constexpr aclError ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006;
inline constexpr aclError ACL_ERROR_RT_INVALID_HANDLE = 107017;
inline constexpr aclError ACL_ERROR_RT_STREAM_CAPTURED = 107027;
inline constexpr aclError ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029;
inline constexpr aclError ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030;
inline constexpr aclError ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
inline constexpr aclError ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
inline constexpr aclError ACL_ERROR_RT_MEMORY_FREE = 207002;
inline constexpr aclError ACL_ERROR_RT_INTERNAL_ERROR = 507000;
inline constexpr aclError ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006;
inline constexpr aclError ACL_ERROR_RT_MODEL_EXECUTE = 507011;
inline constexpr aclError ACL_ERROR_RT_AICORE_EXCEPTION = 507015;
inline constexpr aclError ACL_ERROR_RT_AICPU_EXCEPTION = 507018;
inline constexpr aclError ACL_ERROR_RT_COPY_DATA = 507052;
// aclnn status codes (aclnn返回码.md)
inline constexpr aclnnStatus ACLNN_SUCCESS = 0;
inline constexpr aclnnStatus ACLNN_ERR_PARAM_NULLPTR = 161001;
inline constexpr aclnnStatus ACLNN_ERR_PARAM_INVALID = 161002;
inline constexpr aclnnStatus ACLNN_ERR_RUNTIME_ERROR = 361001;
inline constexpr aclnnStatus ACLNN_ERR_INNER = 561000;
inline constexpr aclnnStatus ACLNN_ERR_INNER_CREATE_EXECUTOR = 561101;
inline constexpr aclnnStatus ACLNN_ERR_INNER_NULLPTR = 561103;

// ---------------------------------------------------------------- functions
// X-macro lists: X(return type, name, (parameters)). Used to build the
// function-pointer table (acl_api.hpp) and, in the emulator, to check that each
// exported definition has exactly this type.

/// Runtime functions every Ascend library set must provide (libascendcl,
/// libnnopbase). A missing one makes load_acl_api() throw.
#define MS_ACL_REQUIRED_FUNCS(X)                                                               \
  X(aclError, aclInit, (const char* configPath))                                               \
  X(aclError, aclFinalize, ())                                                                 \
  X(const char*, aclGetRecentErrMsg, ())                                                       \
  X(aclError, aclrtSetDevice, (int32_t deviceId))                                              \
  X(aclError, aclrtResetDevice, (int32_t deviceId))                                            \
  X(aclError, aclrtGetDeviceCount, (uint32_t * count))                                         \
  X(aclError, aclrtMalloc, (void** devPtr, size_t size, aclrtMemMallocPolicy policy))          \
  X(aclError, aclrtFree, (void* devPtr))                                                       \
  X(aclError, aclrtMallocHost, (void** hostPtr, size_t size))                                  \
  X(aclError, aclrtFreeHost, (void* hostPtr))                                                  \
  X(aclError, aclrtMemcpy,                                                                     \
    (void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind))          \
  X(aclError, aclrtMemcpyAsync,                                                                \
    (void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,           \
     aclrtStream stream))                                                                      \
  X(aclError, aclrtMemset, (void* devPtr, size_t maxCount, int32_t value, size_t count))       \
  X(aclError, aclrtCreateStream, (aclrtStream * stream))                                       \
  X(aclError, aclrtDestroyStream, (aclrtStream stream))                                        \
  X(aclError, aclrtSynchronizeStream, (aclrtStream stream))                                    \
  X(aclError, aclrtCreateEvent, (aclrtEvent * event))                                          \
  X(aclError, aclrtDestroyEvent, (aclrtEvent event))                                           \
  X(aclError, aclrtRecordEvent, (aclrtEvent event, aclrtStream stream))                        \
  X(aclError, aclrtStreamWaitEvent, (aclrtStream stream, aclrtEvent event))                    \
  X(aclError, aclrtSynchronizeEvent, (aclrtEvent event))                                       \
  X(aclError, aclrtEventElapsedTime, (float* ms, aclrtEvent startEvent, aclrtEvent endEvent))  \
  X(aclTensor*, aclCreateTensor,                                                               \
    (const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,                      \
     const int64_t* stride, int64_t offset, aclFormat format, const int64_t* storageDims,      \
     uint64_t storageDimsNum, void* tensorData))                                               \
  X(aclnnStatus, aclDestroyTensor, (const aclTensor* tensor))                                  \
  X(aclScalar*, aclCreateScalar, (void* value, aclDataType dataType))                          \
  X(aclnnStatus, aclDestroyScalar, (const aclScalar* scalar))                                  \
  X(aclIntArray*, aclCreateIntArray, (const int64_t* value, uint64_t size))                    \
  X(aclnnStatus, aclDestroyIntArray, (const aclIntArray* array))

/// Functions that may be absent (older CANN, or a build without them): the
/// table holds nullptr and callers check (AclApi::has_capture(), ...).
#define MS_ACL_OPTIONAL_FUNCS(X)                                                               \
  X(aclError, aclrtSynchronizeDevice, ())                                                      \
  X(const char*, aclrtGetSocName, ())                                                          \
  X(aclError, aclrtGetDevice, (int32_t * deviceId))                                            \
  X(aclError, aclrtQueryEventStatus, (aclrtEvent event, aclrtEventRecordedStatus * status))    \
  X(aclError, aclrtMemsetAsync,                                                                \
    (void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream))          \
  X(aclnnStatus, aclDestroyAclOpExecutor, (aclOpExecutor * executor))                          \
  X(aclError, aclmdlRICaptureBegin, (aclrtStream stream, aclmdlRICaptureMode mode))            \
  X(aclError, aclmdlRICaptureEnd, (aclrtStream stream, aclmdlRI * modelRI))                    \
  X(aclError, aclmdlRIExecuteAsync, (aclmdlRI modelRI, aclrtStream stream))                    \
  X(aclError, aclmdlRIDestroy, (aclmdlRI modelRI))                                             \
  X(aclError, aclopExecuteV2,                                                                  \
    (const char* opType, int numInputs, aclTensorDesc* inputDesc[], aclDataBuffer* inputs[],   \
     int numOutputs, aclTensorDesc* outputDesc[], aclDataBuffer* outputs[], aclopAttr* attr,   \
     aclrtStream stream))                                                                      \
  MS_ACL_SINGLE_OP_FUNCS(X)

/// The single-operator API that runs AI CPU operators (acl_base.h, acl_op.h, and
/// aclopCompileAndExecute from acl_op_compiler.h, in libacl_op_compiler.so). Optional as a
/// group: without all of them the Ascend backend offers no AI CPU engine (AclApi::has_aicpu()).
/// Tensor descriptions are dense ND tensors (no strides); attributes are copied when set.
/// aclopExecuteV2 (above, alone) only runs op models that were loaded or compiled before
/// (aclopSetModelDir / aclopLoad / aclopCompile) and answers ACL_ERROR_OP_NOT_FOUND otherwise,
/// so the adapter does not use it; aclopCompileAndExecute compiles on first use and caches.
#define MS_ACL_SINGLE_OP_FUNCS(X)                                                              \
  X(aclTensorDesc*, aclCreateTensorDesc,                                                       \
    (aclDataType dataType, int numDims, const int64_t* dims, aclFormat format))                \
  X(void, aclDestroyTensorDesc, (const aclTensorDesc* desc))                                   \
  X(aclDataBuffer*, aclCreateDataBuffer, (void* data, size_t size))                            \
  X(aclError, aclDestroyDataBuffer, (const aclDataBuffer* dataBuffer))                         \
  X(aclopAttr*, aclopCreateAttr, ())                                                           \
  X(void, aclopDestroyAttr, (const aclopAttr* attr))                                           \
  X(aclError, aclopSetAttrBool, (aclopAttr * attr, const char* attrName, uint8_t attrValue))   \
  X(aclError, aclopSetAttrInt, (aclopAttr * attr, const char* attrName, int64_t attrValue))    \
  X(aclError, aclopSetAttrFloat, (aclopAttr * attr, const char* attrName, float attrValue))    \
  X(aclError, aclopSetAttrListInt,                                                             \
    (aclopAttr * attr, const char* attrName, int numValues, const int64_t* values))            \
  X(aclError, aclopCompileAndExecute,                                                          \
    (const char* opType, int numInputs, const aclTensorDesc* const inputDesc[],                \
     const aclDataBuffer* const inputs[], int numOutputs,                                      \
     const aclTensorDesc* const outputDesc[], aclDataBuffer* const outputs[],                  \
     const aclopAttr* attr, aclopEngineType engineType, aclopCompileType compileFlag,          \
     const char* opPath, aclrtStream stream))

/// aclnn ops: X(Name, GetWorkspaceSize parameters before workspaceSize/executor).
/// Each op is a pair, both optional:
///   aclnnStatus aclnn<Name>GetWorkspaceSize(<params>, uint64_t* workspaceSize,
///                                           aclOpExecutor** executor);
///   aclnnStatus aclnn<Name>(void* workspace, uint64_t workspaceSize,
///                           aclOpExecutor* executor, aclrtStream stream);
#define MS_ACLNN_OPS(X)                                                                        \
  X(Add, const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out) \
  X(Sub, const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out) \
  X(Mul, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(Div, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(Neg, const aclTensor* self, aclTensor* out)                                                \
  X(Exp, const aclTensor* self, aclTensor* out)                                                \
  X(Log, const aclTensor* self, aclTensor* out)                                                \
  X(Sqrt, const aclTensor* self, aclTensor* out)                                               \
  X(Relu, const aclTensor* self, aclTensor* out)                                               \
  X(Sigmoid, const aclTensor* self, aclTensor* out)                                            \
  X(Tanh, const aclTensor* self, aclTensor* out)                                               \
  X(Gelu, const aclTensor* self, aclTensor* out)                                               \
  X(Matmul, const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType) \
  X(BatchMatMul, const aclTensor* self, const aclTensor* mat2, aclTensor* out,                 \
    int8_t cubeMathType)                                                                       \
  X(Softmax, const aclTensor* self, int64_t dim, aclTensor* out)                               \
  X(ReduceSum, const aclTensor* self, const aclIntArray* dims, bool keepDims,                  \
    aclDataType dtype, aclTensor* out)                                                         \
  X(Mean, const aclTensor* self, const aclIntArray* dim, bool keepDim, aclDataType dtype,      \
    aclTensor* out)                                                                            \
  X(Cast, const aclTensor* self, aclDataType dtype, aclTensor* out)                            \
  X(Muls, const aclTensor* self, const aclScalar* other, aclTensor* out)                       \
  X(PowTensorTensor, const aclTensor* self, const aclTensor* exponent, aclTensor* out)         \
  X(GtTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                   \
  X(SWhere, const aclTensor* condition, const aclTensor* self, const aclTensor* other,         \
    aclTensor* out)                                                                            \
  X(OneHot, const aclTensor* self, int numClasses, const aclTensor* onValue,                   \
    const aclTensor* offValue, int64_t axis, aclTensor* out)                                   \
  X(SoftmaxCrossEntropyWithLogits, const aclTensor* features, const aclTensor* labels,         \
    aclTensor* loss, aclTensor* backprop)

namespace ms::backend::ascend::acl_fn {

// Function types, one per C function: acl_fn::aclrtMalloc is
// `aclError(void**, size_t, aclrtMemMallocPolicy)`.
#define MS_ACL_DECLARE_FN_TYPE(ret, name, params) using name = ret params;
MS_ACL_REQUIRED_FUNCS(MS_ACL_DECLARE_FN_TYPE)
MS_ACL_OPTIONAL_FUNCS(MS_ACL_DECLARE_FN_TYPE)
#undef MS_ACL_DECLARE_FN_TYPE

/// The second phase shared by every aclnn op.
using aclnnLaunch = aclnnStatus(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                aclrtStream stream);

#define MS_ACLNN_DECLARE_FN_TYPE(Name, ...)                                                \
  using aclnn##Name##GetWorkspaceSize = aclnnStatus(__VA_ARGS__, uint64_t* workspaceSize, \
                                                    aclOpExecutor** executor);
MS_ACLNN_OPS(MS_ACLNN_DECLARE_FN_TYPE)
#undef MS_ACLNN_DECLARE_FN_TYPE

}  // namespace ms::backend::ascend::acl_fn
