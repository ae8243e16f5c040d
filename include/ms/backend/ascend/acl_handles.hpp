#pragma once
// RAII owners of AscendCL resources (device memory, aclTensor, aclScalar,
// aclIntArray, an aclnn executor that was never launched, the aclTensorDesc /
// aclDataBuffer / aclopAttr of a single-operator launch) and the mapping from
// ms dtypes and tensor layouts to aclCreateTensor's arguments.
// Belongs here: ownership and conversion only. Must not pick kernels or streams:
// that is aclnn_ops.hpp and ascend_backend.hpp. Destructors never throw; they
// ignore the release status (see acl_api.hpp, "Error handling and RAII").

#include <memory>
#include <optional>
#include <vector>

#include "../../core/tensor.hpp"
#include "acl_api.hpp"

namespace ms::backend::ascend {

/// The aclDataType of an ms dtype, or nullopt when AscendCL has none.
inline std::optional<aclDataType> acl_dtype(DType d) {
  switch (d) {
    case DType::f32: return ACL_FLOAT;
    case DType::f64: return ACL_DOUBLE;
    case DType::i32: return ACL_INT32;
    case DType::i64: return ACL_INT64;
    case DType::u8: return ACL_UINT8;
    case DType::b8: return ACL_BOOL;
    case DType::f16: return ACL_FLOAT16;
    case DType::bf16: return ACL_BF16;
  }
  return std::nullopt;
}

/// Owner of one handle released by `Release` (aclDestroyTensor, aclDestroyScalar, ...).
template <class T, auto AclApi::*Release>
class AclOwned {
 public:
  AclOwned() = default;
  AclOwned(const AclApi& api, T* p) : api_(&api), p_(p) {}
  AclOwned(AclOwned&& o) noexcept : api_(o.api_), p_(std::exchange(o.p_, nullptr)) {}
  AclOwned& operator=(AclOwned&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  AclOwned(const AclOwned&) = delete;
  AclOwned& operator=(const AclOwned&) = delete;
  ~AclOwned() { reset(); }
  void reset() {
    if (p_ != nullptr) (void)(api_->*Release)(p_);
    p_ = nullptr;
  }
  T* get() const { return p_; }
  operator T*() const { return p_; }  // NOLINT: passed straight to the C API

 private:
  const AclApi* api_ = nullptr;
  T* p_ = nullptr;
};

using TensorHandle = AclOwned<aclTensor, &AclApi::aclDestroyTensor>;
using ScalarHandle = AclOwned<aclScalar, &AclApi::aclDestroyScalar>;
using IntArrayHandle = AclOwned<aclIntArray, &AclApi::aclDestroyIntArray>;
// The single-operator API's handles (AI CPU launches).
using TensorDescHandle = AclOwned<aclTensorDesc, &AclApi::aclDestroyTensorDesc>;
using DataBufferHandle = AclOwned<aclDataBuffer, &AclApi::aclDestroyDataBuffer>;
using OpAttrHandle = AclOwned<aclopAttr, &AclApi::aclopDestroyAttr>;

/// An aclTensor describing `dims`/`strides` (elements) at element `offset` of the device block `base`.
/// `what` names the tensor in the error when creation fails.
inline TensorHandle make_acl_tensor(const AclApi& api, void* base, std::size_t storage_bytes, DType dtype,
                                    const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& strides,
                                    std::int64_t offset, const char* what) {
  auto adt = acl_dtype(dtype);
  MS_CHECK(adt.has_value(), DTypeError, "Ascend: dtype {} has no AscendCL equivalent ({})", dtype, what);
  const std::int64_t storage_elems =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(storage_bytes / dtype_size(dtype)));
  aclTensor* t = api.aclCreateTensor(dims.data(), dims.size(), *adt, strides.data(), offset, ACL_FORMAT_ND,
                                     &storage_elems, 1, base);
  if (t == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclCreateTensor failed for {} {}{}: {}", what, dtype, shape_str(Shape(dims)),
             msg && *msg ? msg : "(no error message)");
  }
  return TensorHandle(api, t);
}

/// An aclTensor over a device tensor's storage, with its shape, strides and offset.
inline TensorHandle make_acl_tensor(const AclApi& api, const AnyTensor& t, const char* what) {
  std::vector<std::int64_t> dims(t.shape().begin(), t.shape().end());
  std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
  return make_acl_tensor(api, t.storage()->data, t.storage()->nbytes, t.dtype(), dims, strides, t.offset(), what);
}

inline ScalarHandle make_acl_scalar(const AclApi& api, double value, DType dtype) {
  // aclCreateScalar copies the value, so a local of the scalar's dtype is enough.
  aclScalar* s = nullptr;
  if (dtype == DType::f64) {
    double v = value;
    s = api.aclCreateScalar(&v, ACL_DOUBLE);
  } else if (dtype == DType::i64 || dtype == DType::i32) {
    std::int64_t v = static_cast<std::int64_t>(value);
    s = api.aclCreateScalar(&v, ACL_INT64);
  } else {
    float v = static_cast<float>(value);
    s = api.aclCreateScalar(&v, ACL_FLOAT);
  }
  if (s == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclCreateScalar failed for value {}: {}", value, msg && *msg ? msg : "(no error message)");
  }
  return ScalarHandle(api, s);
}

inline IntArrayHandle make_acl_int_array(const AclApi& api, const std::vector<std::int64_t>& v) {
  aclIntArray* a = api.aclCreateIntArray(v.data(), v.size());
  if (a == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclCreateIntArray failed: {}", msg && *msg ? msg : "(no error message)");
  }
  return IntArrayHandle(api, a);
}

/// An executor from aclnnXxxGetWorkspaceSize until its launch consumes it. If the launch is
/// never reached (a throw in between), the destructor destroys it when the API can.
class ExecutorGuard {
 public:
  explicit ExecutorGuard(const AclApi& api) : api_(&api) {}
  ExecutorGuard(const ExecutorGuard&) = delete;
  ExecutorGuard& operator=(const ExecutorGuard&) = delete;
  ~ExecutorGuard() {
    if (ex_ != nullptr && api_->has_executor_destroy()) (void)api_->aclDestroyAclOpExecutor(ex_);
  }
  aclOpExecutor** out() { return &ex_; }
  /// Hands the executor to the launch (which consumes it, also when it fails).
  aclOpExecutor* release() { return std::exchange(ex_, nullptr); }

 private:
  const AclApi* api_;
  aclOpExecutor* ex_ = nullptr;
};

/// Device memory from aclrtMalloc, freed with aclrtFree.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const AclApi& api, std::size_t bytes) : api_(&api), bytes_(bytes) {
    acl_check(api, api.aclrtMalloc(&ptr_, std::max<std::size_t>(bytes, 1), ACL_MEM_MALLOC_HUGE_FIRST),
              "aclrtMalloc");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : api_(o.api_), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset() {
    if (ptr_ != nullptr) (void)api_->aclrtFree(ptr_);
    ptr_ = nullptr;
  }
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  const AclApi* api_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ms::backend::ascend
