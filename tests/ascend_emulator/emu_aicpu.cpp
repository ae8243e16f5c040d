// Ascend emulator: the single-operator API (aclTensorDesc, aclDataBuffer,
// aclopAttr, aclopCompileAndExecute; aclopExecuteV2 finds no loaded op model and
// answers ACL_ERROR_OP_NOT_FOUND, as the runtime does without aclopLoad/aclopCompile)
// and the AI CPU operator types it runs: Erf,
// LeakyRelu, ArgMaxD, ArgMinD, ReduceProdD. Each launch is checked when it is
// issued (op type, operand count, descriptions, buffers inside live device
// allocations, attributes) and computed with host code on the stream's worker,
// after the AI CPU latency (msEmuSetAiCpuLatency).

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <cmath>
#include <map>
#include <mutex>
#include <unordered_set>
#include <variant>

#include "emu_ops.hpp"

struct aclTensorDesc {
  aclDataType dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> dims;
  aclFormat format = ACL_FORMAT_ND;
};

struct aclDataBuffer {
  void* data = nullptr;
  size_t size = 0;
};

struct aclopAttr {
  using Value = std::variant<bool, int64_t, float, std::vector<int64_t>>;
  std::map<std::string, Value> values;
};

namespace msemu {
namespace {

struct SingleOpHandles {
  std::mutex mu;
  std::unordered_set<const aclTensorDesc*> descs;
  std::unordered_set<const aclDataBuffer*> buffers;
  std::unordered_set<const aclopAttr*> attrs;
};
SingleOpHandles& single_op_handles() {
  static auto* h = new SingleOpHandles();
  return *h;
}

template <class T>
bool live(const std::unordered_set<const T*>& set, const T* p) {
  std::lock_guard lk(single_op_handles().mu);
  return set.count(p) != 0;
}

template <class T>
void insert(std::unordered_set<const T*>& set, const T* p) {
  std::lock_guard lk(single_op_handles().mu);
  set.insert(p);
}

template <class T>
bool erase(std::unordered_set<const T*>& set, const T* p) {
  std::lock_guard lk(single_op_handles().mu);
  return set.erase(p) != 0;
}

// ---------------------------------------------------------------- operator types

/// The operands and attributes of one launch, checked and copied when it is issued.
struct OpCall {
  const char* fn;  // "aclopCompileAndExecute(<type>)", for messages
  std::vector<aclTensorDesc> in, out;
  std::map<std::string, aclopAttr::Value> attrs;

  int attr_int(const char* name, int64_t& v) const { return get(name, v, "int"); }
  int attr_bool(const char* name, bool& v) const { return get(name, v, "bool"); }
  int attr_float(const char* name, float& v, float dflt) const {
    if (!attrs.count(name)) {
      v = dflt;
      return ACL_SUCCESS;
    }
    return get(name, v, "float");
  }
  int attr_ints(const char* name, std::vector<int64_t>& v) const { return get(name, v, "list of int"); }

 private:
  template <class T>
  int get(const char* name, T& v, const char* kind) const {
    auto it = attrs.find(name);
    if (it == attrs.end()) return fail(ACL_ERROR_OP_ATTR_NOT_MATCH, strf("%s: attribute %s is missing", fn, name));
    const T* p = std::get_if<T>(&it->second);
    if (p == nullptr) {
      return fail(ACL_ERROR_OP_ATTR_NOT_MATCH, strf("%s: attribute %s must be set as %s", fn, name, kind));
    }
    v = *p;
    return ACL_SUCCESS;
  }
};

/// What an operator type's check returns: the computation over the resolved operands.
using Compute = std::function<void(const std::vector<View>& in, const std::vector<View>& out)>;

struct OpType {
  const char* name;
  int num_in, num_out;
  /// Validates the call (dtypes, shapes, attributes); on success sets `run`.
  int (*check)(const OpCall& c, Compute& run);
};

bool floating_desc(const aclTensorDesc& d) { return d.dtype == ACL_FLOAT || d.dtype == ACL_DOUBLE || d.dtype == ACL_FLOAT16; }
bool numeric_desc(const aclTensorDesc& d) {
  return floating_desc(d) || d.dtype == ACL_INT32 || d.dtype == ACL_INT64;
}

int dtype_error(const OpCall& c, const char* what, const aclTensorDesc& d, const char* allowed) {
  return fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE,
              strf("%s: %s has dtype %s; the AI CPU kernel takes %s", c.fn, what, dtype_name(d.dtype), allowed));
}

/// Elementwise: out[i] = f(in[i]), same dtype and element count.
int check_unary(const OpCall& c, const char* allowed) {
  if (!floating_desc(c.in[0])) return dtype_error(c, "x", c.in[0], allowed);
  if (c.out[0].dtype != c.in[0].dtype || numel(c.out[0].dims) != numel(c.in[0].dims)) {
    return fail(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                strf("%s: y %s %s does not match x %s %s", c.fn, dtype_name(c.out[0].dtype),
                     shape_str(c.out[0].dims).c_str(), dtype_name(c.in[0].dtype), shape_str(c.in[0].dims).c_str()));
  }
  return ACL_SUCCESS;
}

template <class F>
Compute elementwise(F f) {
  return [f](const std::vector<View>& in, const std::vector<View>& out) {
    const int64_t n = numel(in[0].dims);
    for (int64_t i = 0; i < n; ++i) store(out[0].dtype, out[0].at(i), f(load(in[0].dtype, in[0].at(i))));
  };
}

int check_erf(const OpCall& c, Compute& run) {
  if (int rc = check_unary(c, "float16, float or double"); rc != ACL_SUCCESS) return rc;
  run = elementwise([](double x) { return std::erf(x); });
  return ACL_SUCCESS;
}

int check_leaky_relu(const OpCall& c, Compute& run) {
  if (int rc = check_unary(c, "float16, float or double"); rc != ACL_SUCCESS) return rc;
  float slope = 0;
  if (int rc = c.attr_float("negative_slope", slope, 0.0f); rc != ACL_SUCCESS) return rc;
  const double s = slope;
  run = elementwise([s](double x) { return x > 0 ? x : s * x; });
  return ACL_SUCCESS;
}

/// ArgMaxD/ArgMinD: the index of the extreme along attr "dimension"; ties keep the first,
/// NaN counts as the extreme (the first NaN wins).
template <bool Max>
int check_arg(const OpCall& c, Compute& run) {
  const aclTensorDesc& x = c.in[0];
  // The AI CPU kernels' dtype rows: float16/float in, int32 indices out.
  if (x.dtype != ACL_FLOAT && x.dtype != ACL_FLOAT16) return dtype_error(c, "x", x, "float16 or float");
  if (c.out[0].dtype != ACL_INT32) return dtype_error(c, "y", c.out[0], "int32 indices");
  int64_t dim = 0;
  if (int rc = c.attr_int("dimension", dim); rc != ACL_SUCCESS) return rc;
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= std::max<int64_t>(rank, 1) || (rank == 0 && dim != 0)) {
    return fail(ACL_ERROR_OP_ATTR_NOT_MATCH,
                strf("%s: dimension %lld is out of range for x %s", c.fn, static_cast<long long>(dim),
                     shape_str(x.dims).c_str()));
  }
  int64_t outer = 1, len = rank == 0 ? 1 : x.dims[static_cast<size_t>(dim)], inner = 1;
  for (int64_t k = 0; k < dim; ++k) outer *= x.dims[static_cast<size_t>(k)];
  for (int64_t k = dim + 1; k < rank; ++k) inner *= x.dims[static_cast<size_t>(k)];
  if (len == 0 || numel(c.out[0].dims) != outer * inner) {
    return fail(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                strf("%s: y %s does not hold one index per slice of x %s along dimension %lld", c.fn,
                     shape_str(c.out[0].dims).c_str(), shape_str(x.dims).c_str(), static_cast<long long>(dim)));
  }
  run = [outer, len, inner](const std::vector<View>& in, const std::vector<View>& out) {
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t b = 0; b < inner; ++b) {
        int64_t best_i = 0;
        double best = load(in[0].dtype, in[0].at(a * len * inner + b));
        for (int64_t i = 1; i < len && !std::isnan(best); ++i) {
          const double v = load(in[0].dtype, in[0].at((a * len + i) * inner + b));
          if (std::isnan(v) || (Max ? v > best : v < best)) {
            best = v;
            best_i = i;
          }
        }
        store(out[0].dtype, out[0].at(a * inner + b), static_cast<double>(best_i));
      }
  };
  return ACL_SUCCESS;
}

/// ReduceProdD: the product over attr "axes" (each once, in range), attr "keep_dims".
int check_reduce_prod(const OpCall& c, Compute& run) {
  const aclTensorDesc& x = c.in[0];
  // No double and no int64 in the kernel's dtype row.
  if (x.dtype != ACL_FLOAT && x.dtype != ACL_FLOAT16 && x.dtype != ACL_INT32 && x.dtype != ACL_INT8 &&
      x.dtype != ACL_UINT8)
    return dtype_error(c, "x", x, "float16, float, int8, uint8 or int32");
  if (c.out[0].dtype != x.dtype) return dtype_error(c, "y", c.out[0], "the dtype of x");
  std::vector<int64_t> axes;
  bool keep = false;
  if (int rc = c.attr_ints("axes", axes); rc != ACL_SUCCESS) return rc;
  if (int rc = c.attr_bool("keep_dims", keep); rc != ACL_SUCCESS) return rc;
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    const int64_t k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank || reduced[static_cast<size_t>(k)]) {
      return fail(ACL_ERROR_OP_ATTR_NOT_MATCH, strf("%s: axes entry %lld is out of range or repeated for x %s",
                                                     c.fn, static_cast<long long>(a), shape_str(x.dims).c_str()));
    }
    reduced[static_cast<size_t>(k)] = true;
  }
  std::vector<int64_t> want;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[static_cast<size_t>(k)]) want.push_back(x.dims[static_cast<size_t>(k)]);
    else if (keep) want.push_back(1);
  }
  if (c.out[0].dims != want) {
    return fail(ACL_ERROR_OP_OUTPUT_NOT_MATCH, strf("%s: y is %s, the reduction of x %s gives %s", c.fn,
                                                    shape_str(c.out[0].dims).c_str(), shape_str(x.dims).c_str(),
                                                    shape_str(want).c_str()));
  }
  const std::vector<int64_t> dims = x.dims;
  run = [dims, reduced](const std::vector<View>& in, const std::vector<View>& out) {
    // Output strides over the input's index space: 0 along reduced axes.
    std::vector<int64_t> ostr(dims.size(), 0);
    int64_t s = 1;
    for (size_t k = dims.size(); k-- > 0;)
      if (!reduced[k]) {
        ostr[k] = s;
        s *= dims[k];
      }
    const int64_t n_out = s;
    std::vector<double> acc(static_cast<size_t>(n_out), 1.0);
    for_each_nd<2>(dims, {contiguous_strides(dims), ostr}, {0, 0}, [&](const std::array<int64_t, 2>& o) {
      acc[static_cast<size_t>(o[1])] *= load(in[0].dtype, in[0].at(o[0]));
    });
    for (int64_t i = 0; i < n_out; ++i) store(out[0].dtype, out[0].at(i), acc[static_cast<size_t>(i)]);
  };
  return ACL_SUCCESS;
}

const OpType kOpTypes[] = {
    {"Erf", 1, 1, &check_erf},
    {"LeakyRelu", 1, 1, &check_leaky_relu},
    {"ArgMaxD", 1, 1, &check_arg<true>},
    {"ArgMinD", 1, 1, &check_arg<false>},
    {"ReduceProdD", 1, 1, &check_reduce_prod},
};

const OpType* find_op_type(const char* name) {
  for (const OpType& t : kOpTypes)
    if (std::string_view(t.name) == name) return &t;
  return nullptr;
}

/// Checks one operand (description and buffer) and resolves its device memory.
int resolve_operand(const char* fn, const char* what, int i, const aclTensorDesc* d, const aclDataBuffer* b,
                    aclTensorDesc& desc, View& v, AllocRef& ref) {
  if (d == nullptr || !live(single_op_handles().descs, d)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: %s description %d is not a live aclTensorDesc", fn, what, i));
  }
  if (b == nullptr || !live(single_op_handles().buffers, b)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: %s buffer %d is not a live aclDataBuffer", fn, what, i));
  }
  desc = *d;
  if (dtype_size(desc.dtype) == 0) {
    return fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE,
                strf("%s: %s %d has dtype %d, which the emulator does not support", fn, what, i,
                     static_cast<int>(desc.dtype)));
  }
  const auto need = static_cast<size_t>(numel(desc.dims)) * dtype_size(desc.dtype);
  if (b->size < need) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: %s buffer %d holds %zu bytes, its description %s %s needs %zu",
                                              fn, what, i, b->size, dtype_name(desc.dtype),
                                              shape_str(desc.dims).c_str(), need));
  }
  v.dims = desc.dims;
  v.strides = contiguous_strides(desc.dims);
  v.dtype = desc.dtype;
  v.esize = dtype_size(desc.dtype);
  if (need == 0) return ACL_SUCCESS;
  const std::string name = strf("%s %d data", what, i);
  std::byte* host = nullptr;
  if (int rc = resolve(b->data, need, fn, name.c_str(), ref, host); rc != ACL_SUCCESS) return rc;
  v.start = host;
  return ACL_SUCCESS;
}

}  // namespace

void fill_single_op_gauges(msEmuCounters& out) {
  SingleOpHandles& h = single_op_handles();
  std::lock_guard lk(h.mu);
  out.live_tensor_descs = h.descs.size();
  out.live_data_buffers = h.buffers.size();
  out.live_op_attrs = h.attrs.size();
}

}  // namespace msemu

using namespace msemu;

// ================================================================ C API

MS_EMU_API aclTensorDesc* aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t* dims,
                                              aclFormat format) {
  if (numDims < 0 || (numDims > 0 && dims == nullptr)) {
    fail(ACL_ERROR_INVALID_PARAM, strf("aclCreateTensorDesc: %d dimensions at %p", numDims,
                                       static_cast<const void*>(dims)));
    return nullptr;
  }
  auto* d = new aclTensorDesc{dataType, std::vector<int64_t>(dims, dims + numDims), format};
  for (int64_t x : d->dims) {
    if (x < 0) {
      fail(ACL_ERROR_INVALID_PARAM, strf("aclCreateTensorDesc: negative dimension in %s", shape_str(d->dims).c_str()));
      delete d;
      return nullptr;
    }
  }
  insert(single_op_handles().descs, d);
  return d;
}

MS_EMU_API void aclDestroyTensorDesc(const aclTensorDesc* desc) {
  if (desc != nullptr && erase(single_op_handles().descs, desc)) delete desc;
}

MS_EMU_API aclDataBuffer* aclCreateDataBuffer(void* data, size_t size) {
  auto* b = new aclDataBuffer{data, size};
  insert(single_op_handles().buffers, b);
  return b;
}

MS_EMU_API aclError aclDestroyDataBuffer(const aclDataBuffer* dataBuffer) {
  if (dataBuffer == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclDestroyDataBuffer: dataBuffer is null");
  if (!erase(single_op_handles().buffers, dataBuffer)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("aclDestroyDataBuffer: %p is not a live aclDataBuffer",
                                              static_cast<const void*>(dataBuffer)));
  }
  delete dataBuffer;
  return ACL_SUCCESS;
}

MS_EMU_API aclopAttr* aclopCreateAttr() {
  auto* a = new aclopAttr();
  insert(single_op_handles().attrs, a);
  return a;
}

MS_EMU_API void aclopDestroyAttr(const aclopAttr* attr) {
  if (attr != nullptr && erase(single_op_handles().attrs, attr)) delete attr;
}

namespace {
aclError set_attr(const char* fn, aclopAttr* attr, const char* name, aclopAttr::Value v) {
  if (attr == nullptr || !live(single_op_handles().attrs, attr)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: attr %p is not a live aclopAttr", fn, static_cast<void*>(attr)));
  }
  if (name == nullptr || *name == '\0') return fail(ACL_ERROR_INVALID_PARAM, strf("%s: attrName is empty", fn));
  attr->values[name] = std::move(v);
  return ACL_SUCCESS;
}
}  // namespace

MS_EMU_API aclError aclopSetAttrBool(aclopAttr* attr, const char* attrName, uint8_t attrValue) {
  return set_attr("aclopSetAttrBool", attr, attrName, attrValue != 0);
}
MS_EMU_API aclError aclopSetAttrInt(aclopAttr* attr, const char* attrName, int64_t attrValue) {
  return set_attr("aclopSetAttrInt", attr, attrName, attrValue);
}
MS_EMU_API aclError aclopSetAttrFloat(aclopAttr* attr, const char* attrName, float attrValue) {
  return set_attr("aclopSetAttrFloat", attr, attrName, attrValue);
}
MS_EMU_API aclError aclopSetAttrListInt(aclopAttr* attr, const char* attrName, int numValues,
                                        const int64_t* values) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("aclopSetAttrListInt: %d values at %p", numValues,
                                              static_cast<const void*>(values)));
  }
  return set_attr("aclopSetAttrListInt", attr, attrName, std::vector<int64_t>(values, values + numValues));
}

MS_EMU_API aclError aclopExecuteV2(const char* opType, int /*numInputs*/, aclTensorDesc* /*inputDesc*/[],
                                   aclDataBuffer* /*inputs*/[], int /*numOutputs*/, aclTensorDesc* /*outputDesc*/[],
                                   aclDataBuffer* /*outputs*/[], aclopAttr* /*attr*/, aclrtStream /*stream*/) {
  if (int rc = check_context("aclopExecuteV2"); rc != ACL_SUCCESS) return rc;
  if (opType == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclopExecuteV2: opType is null");
  // aclopExecuteV2 matches the op models loaded with aclopSetModelDir/aclopLoad or built by
  // aclopCompile; the emulator has none, so every call is a miss.
  return fail(ACL_ERROR_OP_NOT_FOUND,
              strf("aclopExecuteV2(%s): no loaded op model matches (load one with aclopSetModelDir/aclopLoad, "
                   "compile it with aclopCompile, or use aclopCompileAndExecute)", opType));
}

MS_EMU_API aclError aclopCompileAndExecute(const char* opType, int numInputs, const aclTensorDesc* const inputDesc[],
                                           const aclDataBuffer* const inputs[], int numOutputs,
                                           const aclTensorDesc* const outputDesc[], aclDataBuffer* const outputs[],
                                           const aclopAttr* attr, aclopEngineType engineType,
                                           aclopCompileType compileFlag, const char* opPath, aclrtStream stream) {
  if (int rc = check_context("aclopCompileAndExecute"); rc != ACL_SUCCESS) return rc;
  if (opType == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclopCompileAndExecute: opType is null");
  const std::string fn = strf("aclopCompileAndExecute(%s)", opType);
  if (!soc().single_op) {
    return fail(ACL_ERROR_API_NOT_SUPPORT,
                strf("%s: the single-operator API is not supported on %s (use the aclnn kernels)", fn.c_str(),
                     soc().name));
  }
  if (engineType < ACL_ENGINE_SYS || engineType > ACL_ENGINE_VECTOR) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: invalid engineType %d", fn.c_str(), static_cast<int>(engineType)));
  }
  if (compileFlag != ACL_COMPILE_SYS && compileFlag != ACL_COMPILE_UNREGISTERED) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: invalid compileFlag %d", fn.c_str(), static_cast<int>(compileFlag)));
  }
  if (compileFlag == ACL_COMPILE_UNREGISTERED && opPath == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: ACL_COMPILE_UNREGISTERED needs opPath", fn.c_str()));
  }
  const OpType* type = find_op_type(opType);
  if (type == nullptr) {
    return fail(ACL_ERROR_OP_NOT_FOUND,
                strf("%s: no AI CPU operator of this type in the emulator (Erf, LeakyRelu, ArgMaxD, ArgMinD, "
                     "ReduceProdD)", fn.c_str()));
  }
  if (numInputs != type->num_in || (numInputs > 0 && (inputDesc == nullptr || inputs == nullptr))) {
    return fail(ACL_ERROR_OP_INPUT_NOT_MATCH,
                strf("%s: %d inputs given, the operator takes %d", fn.c_str(), numInputs, type->num_in));
  }
  if (numOutputs != type->num_out || (numOutputs > 0 && (outputDesc == nullptr || outputs == nullptr))) {
    return fail(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                strf("%s: %d outputs given, the operator has %d", fn.c_str(), numOutputs, type->num_out));
  }
  if (attr != nullptr && !live(single_op_handles().attrs, attr)) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: attr %p is not a live aclopAttr", fn.c_str(),
                                              static_cast<const void*>(attr)));
  }
  OpCall call{fn.c_str(), std::vector<aclTensorDesc>(static_cast<size_t>(numInputs)),
              std::vector<aclTensorDesc>(static_cast<size_t>(numOutputs)), {}};
  if (attr != nullptr) call.attrs = attr->values;
  Task task;
  task.kind = TaskKind::Kernel;
  task.name = fn;
  std::vector<View> in(static_cast<size_t>(numInputs)), out(static_cast<size_t>(numOutputs));
  int64_t elements = 0;
  for (int i = 0; i < numInputs; ++i) {
    AllocRef ref;
    const auto k = static_cast<size_t>(i);
    if (int rc = resolve_operand(fn.c_str(), "input", i, inputDesc[i], inputs[i], call.in[k], in[k], ref);
        rc != ACL_SUCCESS)
      return rc;
    if (ref) task.refs.push_back(std::move(ref));
    elements += numel(call.in[k].dims);
  }
  for (int i = 0; i < numOutputs; ++i) {
    AllocRef ref;
    const auto k = static_cast<size_t>(i);
    if (int rc = resolve_operand(fn.c_str(), "output", i, outputDesc[i], outputs[i], call.out[k], out[k], ref);
        rc != ACL_SUCCESS)
      return rc;
    if (ref) task.refs.push_back(std::move(ref));
    elements += numel(call.out[k].dims);
  }
  Compute run;
  if (int rc = type->check(call, run); rc != ACL_SUCCESS) return rc;
  if (fault_fires(MS_EMU_FAULT_AICPU_LAUNCH)) {
    return fail(ACL_ERROR_RT_AICPU_EXCEPTION, strf("%s: emulated AI CPU launch failure (injected fault)", fn.c_str()));
  }
  task.delay_ns = aicpu_ns(static_cast<uint64_t>(elements));
  task.body = [run = std::move(run), in = std::move(in), out = std::move(out)] {
    run(in, out);
    return ACL_SUCCESS;
  };
  bool captured = false;
  if (int rc = enqueue(stream, std::move(task), "aclopCompileAndExecute", &captured); rc != ACL_SUCCESS) return rc;
  if (!captured) ++counters().aicpu_launches;
  return ACL_SUCCESS;
}

#endif  // MS_ASCEND_EMULATOR_BUILD
