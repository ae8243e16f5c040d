// Ascend emulator: dtypes, aclTensor/aclScalar/aclIntArray handles, executors
// and the second (launch) phase shared by every aclnn op.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_set>

#include "emu_ops.hpp"

namespace msemu {

// ---------------------------------------------------------------- dtypes

namespace {

uint16_t f32_to_f16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow: inf
  if (e <= 0) {                                                   // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t m = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds into the exponent
  return static_cast<uint16_t>(h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  uint32_t x = 0;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  x = exp == 0x1F ? (sign | 0x7F800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f = 0;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &x, 4);
  return f;
}

template <class T>
T rd(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void wr(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <class I>
I to_int(double v) {  // truncation toward zero, saturating, NaN -> 0
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace

size_t dtype_size(aclDataType dt) {
  switch (dt) {
    case ACL_FLOAT: case ACL_INT32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: return 2;
    case ACL_DOUBLE: case ACL_INT64: return 8;
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
    default: return 0;
  }
}

bool is_floating(aclDataType dt) {
  return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16 || dt == ACL_DOUBLE;
}

const char* dtype_name(aclDataType dt) {
  switch (dt) {
    case ACL_FLOAT: return "ACL_FLOAT";
    case ACL_FLOAT16: return "ACL_FLOAT16";
    case ACL_BF16: return "ACL_BF16";
    case ACL_DOUBLE: return "ACL_DOUBLE";
    case ACL_INT8: return "ACL_INT8";
    case ACL_UINT8: return "ACL_UINT8";
    case ACL_INT16: return "ACL_INT16";
    case ACL_INT32: return "ACL_INT32";
    case ACL_INT64: return "ACL_INT64";
    case ACL_BOOL: return "ACL_BOOL";
    default: return "unsupported dtype";
  }
}

double load(aclDataType dt, const std::byte* p) {
  switch (dt) {
    case ACL_FLOAT: return rd<float>(p);
    case ACL_FLOAT16: return f16_to_f32(rd<uint16_t>(p));
    case ACL_BF16: return bf16_to_f32(rd<uint16_t>(p));
    case ACL_DOUBLE: return rd<double>(p);
    case ACL_INT8: return rd<int8_t>(p);
    case ACL_UINT8: return rd<uint8_t>(p);
    case ACL_INT16: return rd<int16_t>(p);
    case ACL_INT32: return rd<int32_t>(p);
    case ACL_INT64: return static_cast<double>(rd<int64_t>(p));
    case ACL_BOOL: return rd<uint8_t>(p) != 0 ? 1.0 : 0.0;
    default: return 0;
  }
}

void store(aclDataType dt, std::byte* p, double v) {
  switch (dt) {
    case ACL_FLOAT: wr<float>(p, static_cast<float>(v)); break;
    case ACL_FLOAT16: wr<uint16_t>(p, f32_to_f16(static_cast<float>(v))); break;
    case ACL_BF16: wr<uint16_t>(p, f32_to_bf16(static_cast<float>(v))); break;
    case ACL_DOUBLE: wr<double>(p, v); break;
    case ACL_INT8: wr<int8_t>(p, to_int<int8_t>(v)); break;
    case ACL_UINT8: wr<uint8_t>(p, to_int<uint8_t>(v)); break;
    case ACL_INT16: wr<int16_t>(p, to_int<int16_t>(v)); break;
    case ACL_INT32: wr<int32_t>(p, to_int<int32_t>(v)); break;
    case ACL_INT64: wr<int64_t>(p, to_int<int64_t>(v)); break;
    case ACL_BOOL: wr<uint8_t>(p, v != 0 ? 1 : 0); break;
    default: break;
  }
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(dims[i], 1);
  return st;
}

bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>& out) {
  const size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& strides,
                                       const std::vector<int64_t>& out_dims) {
  const size_t r = out_dims.size(), k = dims.size();
  std::vector<int64_t> st(r, 0);
  for (size_t i = r - k; i < r; ++i) {
    const size_t j = i - (r - k);
    st[i] = (dims[j] == 1 && out_dims[i] != 1) ? 0 : strides[j];
  }
  return st;
}

// ---------------------------------------------------------------- handles

namespace {
struct Handles {
  std::mutex mu;
  std::unordered_set<const aclTensor*> tensors;
  std::unordered_set<const aclScalar*> scalars;
  std::unordered_set<const aclIntArray*> arrays;
  std::unordered_set<const aclOpExecutor*> executors;
};
Handles& handles() {
  static Handles* h = new Handles();
  return *h;
}
}  // namespace

const TensorDesc* tensor_desc(const aclTensor* t) {
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  return h.tensors.count(t) ? &t->desc : nullptr;
}

bool scalar_live(const aclScalar* s) {
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  return h.scalars.count(s) != 0;
}

bool int_array_live(const aclIntArray* a) {
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  return h.arrays.count(a) != 0;
}

int get_tensor(const char* fn, const aclTensor* t, const char* name, TensorDesc& out) {
  if (t == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: %s is null", fn, name));
  const TensorDesc* d = tensor_desc(t);
  if (d == nullptr) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: %s %p is not a live aclTensor", fn, name, static_cast<const void*>(t)));
  }
  if (dtype_size(d->dtype) == 0) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: %s has dtype %d, which the emulator does not support (float32, float16, "
                     "bf16, double, int8/16/32/64, uint8, bool)",
                     fn, name, static_cast<int>(d->dtype)));
  }
  out = *d;
  out.name = name;
  return ACLNN_SUCCESS;
}

int check_outputs(const char* fn, const uint64_t* workspaceSize, aclOpExecutor* const* executor) {
  if (workspaceSize == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: workspaceSize is null", fn));
  if (executor == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: executor is null", fn));
  return ACLNN_SUCCESS;
}

void fill_handle_gauges(msEmuCounters& out) {
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  out.live_tensors = h.tensors.size();
  out.live_scalars = h.scalars.size();
  out.live_int_arrays = h.arrays.size();
  out.live_executors = h.executors.size();
}

// ---------------------------------------------------------------- two-phase launch

int op_prologue(const char* fn) {
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  if (fault_fires(MS_EMU_FAULT_OP_WORKSPACE)) {
    return fail(ACLNN_ERR_INNER, strf("%s: emulated operator failure (injected fault)", fn));
  }
  return ACL_SUCCESS;
}

int make_executor(const char* fn, std::vector<TensorDesc> tensors, Kernel kernel,
                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (!tensors.empty()) {
    if (int rc = check_soc_dtype(fn, tensors[0].name, tensors[0].dtype); rc != ACL_SUCCESS) return rc;
  }
  auto* ex = new aclOpExecutor{fn, std::move(tensors), std::make_shared<const Kernel>(std::move(kernel))};
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    h.executors.insert(ex);
  }
  *workspaceSize = 0;
  *executor = ex;
  return ACL_SUCCESS;
}

namespace {

int resolve_view(const TensorDesc& d, const char* fn, View& v, AllocRef& ref) {
  v.dims = d.dims;
  v.strides = d.strides;
  v.dtype = d.dtype;
  v.esize = dtype_size(d.dtype);
  if (numel(d.dims) == 0) return ACL_SUCCESS;  // nothing is read or written
  int64_t lo = d.offset, hi = d.offset;
  for (size_t k = 0; k < d.dims.size(); ++k) {
    const int64_t ext = (d.dims[k] - 1) * d.strides[k];
    (ext < 0 ? lo : hi) += ext;
  }
  const auto es = static_cast<int64_t>(v.esize);
  const auto first = static_cast<uintptr_t>(reinterpret_cast<intptr_t>(d.data) + lo * es);
  const std::string what = strf("%s data", d.name);
  std::byte* host = nullptr;
  if (resolve(reinterpret_cast<const void*>(first), static_cast<size_t>((hi - lo + 1) * es), fn,
              what.c_str(), ref, host) != ACL_SUCCESS) {
    return ACLNN_ERR_PARAM_INVALID;
  }
  v.start = host;
  v.rel0 = d.offset - lo;
  return ACL_SUCCESS;
}

}  // namespace

int launch(const char* fn, void* /*workspace*/, uint64_t /*workspaceSize*/, aclOpExecutor* executor,
           aclrtStream stream) {
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  if (executor == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: executor is null", fn));
  std::unique_ptr<aclOpExecutor> ex;  // the launch consumes the executor, also on failure
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    if (h.executors.erase(executor) == 0) {
      return fail(ACLNN_ERR_PARAM_INVALID,
                  strf("%s: executor %p is not live (already launched or destroyed)", fn,
                       static_cast<void*>(executor)));
    }
    ex.reset(executor);
  }
  if (ex->op != fn) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: the executor was made by %sGetWorkspaceSize", fn, ex->op.c_str()));
  }
  if (fault_fires(MS_EMU_FAULT_OP_LAUNCH)) {
    return fail(ACLNN_ERR_RUNTIME_ERROR, strf("%s: emulated launch failure (injected fault)", fn));
  }
  Task task;
  task.kind = TaskKind::Kernel;
  task.name = fn;
  task.delay_ns = launch_ns();
  std::vector<View> views(ex->tensors.size());
  for (size_t i = 0; i < views.size(); ++i) {
    AllocRef ref;
    if (int rc = resolve_view(ex->tensors[i], fn, views[i], ref); rc != ACL_SUCCESS) return rc;
    if (ref) task.refs.push_back(std::move(ref));
  }
  task.body = [kernel = ex->kernel, views = std::move(views)] { return (*kernel)(views); };
  bool captured = false;
  if (int rc = enqueue(stream, std::move(task), fn, &captured); rc != ACL_SUCCESS) return rc;
  if (!captured) ++counters().launches;
  return ACLNN_SUCCESS;
}

}  // namespace msemu

using namespace msemu;

// ================================================================ C API

MS_EMU_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                      const int64_t* stride, int64_t offset, aclFormat format,
                                      const int64_t* storageDims, uint64_t storageDimsNum,
                                      void* tensorData) {
  if (viewDimsNum > 0 && viewDims == nullptr) {
    fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: viewDims is null");
    return nullptr;
  }
  if (viewDimsNum > 8) {
    fail(ACLNN_ERR_PARAM_INVALID, strf("aclCreateTensor: %llu dimensions (at most 8)",
                                       static_cast<unsigned long long>(viewDimsNum)));
    return nullptr;
  }
  if (reinterpret_cast<uintptr_t>(tensorData) % 32 != 0) {
    // The runtime's rule: the data address is 32-byte aligned; a tensor that starts
    // inside a block says so with its offset (in elements) from an aligned address.
    fail(ACLNN_ERR_PARAM_INVALID,
         strf("aclCreateTensor: tensorData %p is not 32-byte aligned (pass the aligned base and an element "
              "offset)", tensorData));
    return nullptr;
  }
  auto t = std::make_unique<aclTensor>();
  t->desc.dims.assign(viewDims, viewDims + viewDimsNum);
  for (int64_t d : t->desc.dims) {
    if (d < 0) {
      fail(ACLNN_ERR_PARAM_INVALID,
           strf("aclCreateTensor: negative dimension in %s", shape_str(t->desc.dims).c_str()));
      return nullptr;
    }
  }
  t->desc.strides = stride != nullptr ? std::vector<int64_t>(stride, stride + viewDimsNum)
                                      : contiguous_strides(t->desc.dims);
  t->desc.offset = offset;
  t->desc.dtype = dataType;
  t->desc.data = tensorData;
  t->format = format;
  if (storageDims != nullptr) t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  h.tensors.insert(t.get());
  return t.release();
}

MS_EMU_API aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  if (tensor == nullptr) return ACLNN_SUCCESS;
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    if (h.tensors.erase(tensor) == 0) {
      return fail(ACLNN_ERR_PARAM_INVALID, strf("aclDestroyTensor: %p is not a live aclTensor",
                                                static_cast<const void*>(tensor)));
    }
  }
  delete tensor;
  return ACLNN_SUCCESS;
}

MS_EMU_API aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  if (value == nullptr) {
    fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is null");
    return nullptr;
  }
  if (dtype_size(dataType) == 0) {
    fail(ACLNN_ERR_PARAM_INVALID, strf("aclCreateScalar: dtype %d is not supported by the emulator",
                                       static_cast<int>(dataType)));
    return nullptr;
  }
  auto* s = new aclScalar{dataType, load(dataType, static_cast<const std::byte*>(value))};
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  h.scalars.insert(s);
  return s;
}

MS_EMU_API aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  if (scalar == nullptr) return ACLNN_SUCCESS;
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    if (h.scalars.erase(scalar) == 0) {
      return fail(ACLNN_ERR_PARAM_INVALID, strf("aclDestroyScalar: %p is not a live aclScalar",
                                                static_cast<const void*>(scalar)));
    }
  }
  delete scalar;
  return ACLNN_SUCCESS;
}

MS_EMU_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (size > 0 && value == nullptr) {
    fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateIntArray: value is null");
    return nullptr;
  }
  auto* a = new aclIntArray{std::vector<int64_t>(value, value + size)};
  Handles& h = handles();
  std::lock_guard lk(h.mu);
  h.arrays.insert(a);
  return a;
}

MS_EMU_API aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  if (array == nullptr) return ACLNN_SUCCESS;
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    if (h.arrays.erase(array) == 0) {
      return fail(ACLNN_ERR_PARAM_INVALID, strf("aclDestroyIntArray: %p is not a live aclIntArray",
                                                static_cast<const void*>(array)));
    }
  }
  delete array;
  return ACLNN_SUCCESS;
}

MS_EMU_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (executor == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, "aclDestroyAclOpExecutor: executor is null");
  {
    Handles& h = handles();
    std::lock_guard lk(h.mu);
    if (h.executors.erase(executor) == 0) {
      return fail(ACLNN_ERR_PARAM_INVALID,
                  strf("aclDestroyAclOpExecutor: %p is not live (already launched or destroyed)",
                       static_cast<void*>(executor)));
    }
  }
  delete executor;
  return ACLNN_SUCCESS;
}

#endif  // MS_ASCEND_EMULATOR_BUILD
