#pragma once
// The AI CPU mapping: one row per ms op that the Ascend adapter can run on the
// device's AI CPU cores through the single-operator API (aclopCompileAndExecute), naming
// the AI CPU op type, when it applies (dtypes, attributes), and how ms
// attributes become the op type's attributes. Ops without an aclnn row but with
// a row here run on the device instead of the host (ascend_backend.hpp decides).
// Must not allocate tensors or pick streams: the caller passes both in.

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../ops/reduce.hpp"
#include "../../ops/registry.hpp"
#include "../../ops/unary.hpp"
#include "acl_handles.hpp"

namespace ms::backend::ascend {

/// What a row fills in before the launch: the op type's attributes, and the dimensions the
/// input descriptions declare (the tensors' shapes unless the row reinterprets them).
class AicpuCall {
 public:
  AicpuCall(const AclApi& api, std::string_view op_type);
  void set_int(const char* name, std::int64_t v);
  void set_float(const char* name, double v);
  void set_bool(const char* name, bool v);
  void set_ints(const char* name, const std::vector<std::int64_t>& v);
  std::vector<std::vector<std::int64_t>> in_dims;  ///< per input, set by the launcher first
  aclopAttr* attr() const { return attr_.get(); }

 private:
  void check(aclError rc, const char* setter, const char* name) const;
  const AclApi& api_;
  std::string_view op_type_;
  OpAttrHandle attr_;
};

/// One row of the mapping.
struct AicpuRule {
  const ops::OpDef* op;      ///< the ms op (its registered handle)
  std::string_view op_type;  ///< the AI CPU op type passed to aclopCompileAndExecute
  bool (*supports)(std::span<const ops::TensorMeta> in, const ops::Attrs& attrs);
  /// Sets the op type's attributes (and reinterpreted input dimensions) from the ms attributes.
  void (*prepare)(AicpuCall& call, std::span<const AnyTensor> in, const ops::Attrs& attrs);
  /// The op type writes int32 indices where ms has int64: it writes into device scratch,
  /// and aclnnCast widens the result into the output.
  bool int32_indices = false;
};

/// The mapping table (see the end of this file).
const std::vector<AicpuRule>& aicpu_rules();

/// The row for `op`, or nullptr.
inline const AicpuRule* find_aicpu_rule(const ops::OpDef& op) {
  for (const AicpuRule& r : aicpu_rules())
    if (r.op == &op) return &r;
  return nullptr;
}

/// Enqueues row `r` on `stream`: one tensor description and data buffer per operand (dense
/// ND, so every operand must be contiguous), the attributes, then aclopCompileAndExecute
/// (which compiles the op type once and runs the cached model afterwards; aclopExecuteV2
/// would only find models loaded before). Every status is checked; every handle is
/// released on return, also when a call fails (the runtime keeps what the queued work
/// needs). `scratch` gives device memory valid until the queued work has run.
void launch_aicpu(const AclApi& api, const AicpuRule& r, aclrtStream stream, std::span<const AnyTensor> in,
                  std::span<AnyTensor> out, const ops::Attrs& attrs,
                  const std::function<void*(std::size_t)>& scratch);

// ====================================================================== implementation

inline AicpuCall::AicpuCall(const AclApi& api, std::string_view op_type) : api_(api), op_type_(op_type) {
  aclopAttr* a = api.aclopCreateAttr();
  if (a == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclopCreateAttr failed for AI CPU op {}: {}", op_type,
             msg && *msg ? msg : "(no error message)");
  }
  attr_ = OpAttrHandle(api, a);
}

inline void AicpuCall::check(aclError rc, const char* setter, const char* name) const {
  if (rc == ACL_SUCCESS) [[likely]] return;
  const std::string call = MS_FORMAT("{}({}.{})", setter, op_type_, name);
  acl_check(api_, rc, call.c_str());
}

inline void AicpuCall::set_int(const char* name, std::int64_t v) {
  check(api_.aclopSetAttrInt(attr_.get(), name, v), "aclopSetAttrInt", name);
}
inline void AicpuCall::set_float(const char* name, double v) {
  check(api_.aclopSetAttrFloat(attr_.get(), name, static_cast<float>(v)), "aclopSetAttrFloat", name);
}
inline void AicpuCall::set_bool(const char* name, bool v) {
  check(api_.aclopSetAttrBool(attr_.get(), name, v ? 1 : 0), "aclopSetAttrBool", name);
}
inline void AicpuCall::set_ints(const char* name, const std::vector<std::int64_t>& v) {
  check(api_.aclopSetAttrListInt(attr_.get(), name, static_cast<int>(v.size()), v.data()), "aclopSetAttrListInt",
        name);
}

namespace detail {

inline TensorDescHandle make_tensor_desc(const AclApi& api, DType dtype, const std::vector<std::int64_t>& dims,
                                         std::string_view op_type, const char* what) {
  auto adt = acl_dtype(dtype);
  MS_CHECK(adt.has_value(), DTypeError, "Ascend: dtype {} has no AscendCL equivalent ({} of AI CPU op {})", dtype,
           what, op_type);
  aclTensorDesc* d = api.aclCreateTensorDesc(*adt, static_cast<int>(dims.size()), dims.data(), ACL_FORMAT_ND);
  if (d == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclCreateTensorDesc failed for {} {}{} of AI CPU op {}: {}", what, dtype,
             shape_str(Shape(dims)), op_type, msg && *msg ? msg : "(no error message)");
  }
  return TensorDescHandle(api, d);
}

inline DataBufferHandle make_data_buffer(const AclApi& api, const AnyTensor& t, std::string_view op_type,
                                         const char* what) {
  MS_CHECK(t.is_contiguous(), DeviceError,
           "AI CPU op {}: {} {} {} is a strided view; AI CPU operators take dense tensors", op_type, what,
           shape_str(t.shape()), t.dtype());
  aclDataBuffer* b = api.aclCreateDataBuffer(t.raw_data(), t.nbytes());
  if (b == nullptr) {
    const char* msg = api.aclGetRecentErrMsg();
    MS_THROW(BackendError, "aclCreateDataBuffer failed for {} of AI CPU op {}: {}", what, op_type,
             msg && *msg ? msg : "(no error message)");
  }
  return DataBufferHandle(api, b);
}

inline bool float_in(std::span<const ops::TensorMeta> in) {
  return in[0].dtype == DType::f32 || in[0].dtype == DType::f64;
}
/// ArgMaxD/ArgMinD's dtype row: float16/float in (int32 indices out).
inline bool arg_in(std::span<const ops::TensorMeta> in) {
  return in[0].dtype == DType::f32 || in[0].dtype == DType::f16;
}
/// ReduceProdD's dtype row: no double, no int64.
inline bool prod_in(std::span<const ops::TensorMeta> in) {
  return in[0].dtype == DType::f32 || in[0].dtype == DType::f16 || in[0].dtype == DType::i32 ||
         in[0].dtype == DType::u8;
}

/// argmax/argmin: the op types reduce one "dimension"; without an axis ms reduces the
/// flattened tensor, declared here as a 1-d input.
inline void prepare_arg(AicpuCall& c, std::span<const AnyTensor> in, const ops::Attrs& a) {
  if (!a.has("axis") || in[0].dim() == 0) {
    c.in_dims[0] = {in[0].numel()};
    c.set_int("dimension", 0);
    return;
  }
  std::int64_t axis = a.i("axis");
  if (axis < 0) axis += in[0].dim();
  c.set_int("dimension", axis);
}

}  // namespace detail

inline void launch_aicpu(const AclApi& api, const AicpuRule& r, aclrtStream stream, std::span<const AnyTensor> in,
                         std::span<AnyTensor> out, const ops::Attrs& attrs,
                         const std::function<void*(std::size_t)>& scratch) {
  MS_CHECK(api.has_aicpu(), BackendError, "AI CPU op {}: aclopCompileAndExecute and its descriptions are not in the "
           "AscendCL libraries ({}) or not supported on {}", r.op_type, api.libraries,
           api.soc.name.empty() ? std::string("this SoC") : api.soc.name);
  // Int32 indices: the op type writes scratch that a cast widens into the int64 output.
  std::vector<AnyTensor> outs(out.begin(), out.end());
  auto widened = [&](std::size_t i) { return r.int32_indices && out[i].dtype() == DType::i64; };
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!widened(i)) continue;
    MS_CHECK(scratch && api.has_op("Cast"), BackendError, "AI CPU op {}: int32 indices need scratch and aclnnCast",
             r.op_type);
    const AnyTensor& t = out[i];
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(t.numel(), 1)) * sizeof(std::int32_t);
    auto st = Storage::borrowed(scratch(bytes), bytes, t.device());
    outs[i] = AnyTensor::view_of(std::move(st), t.shape(), contiguous_strides(t.shape()), 0, DType::i32);
  }
  AicpuCall call(api, r.op_type);
  for (const AnyTensor& t : in) call.in_dims.emplace_back(t.shape().begin(), t.shape().end());
  r.prepare(call, in, attrs);
  // Owners first, raw arrays for the C call beside them; all released when this returns.
  std::vector<TensorDescHandle> descs;
  std::vector<DataBufferHandle> bufs;
  std::vector<aclTensorDesc*> in_desc, out_desc;
  std::vector<aclDataBuffer*> in_buf, out_buf;
  for (std::size_t i = 0; i < in.size(); ++i) {
    descs.push_back(detail::make_tensor_desc(api, in[i].dtype(), call.in_dims[i], r.op_type, "input"));
    in_desc.push_back(descs.back().get());
    bufs.push_back(detail::make_data_buffer(api, in[i], r.op_type, "input"));
    in_buf.push_back(bufs.back().get());
  }
  for (const AnyTensor& t : outs) {
    const std::vector<std::int64_t> dims(t.shape().begin(), t.shape().end());
    descs.push_back(detail::make_tensor_desc(api, t.dtype(), dims, r.op_type, "output"));
    out_desc.push_back(descs.back().get());
    bufs.push_back(detail::make_data_buffer(api, t, r.op_type, "output"));
    out_buf.push_back(bufs.back().get());
  }
  const std::string type(r.op_type);
  const std::string what = MS_FORMAT("aclopCompileAndExecute({})", r.op_type);
  acl_check(api,
            api.aclopCompileAndExecute(type.c_str(), static_cast<int>(in_desc.size()), in_desc.data(), in_buf.data(),
                                       static_cast<int>(out_desc.size()), out_desc.data(), out_buf.data(),
                                       call.attr(), ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr, stream),
            what.c_str());
  // Widen int32 indices into the int64 outputs (on the same stream, so in order).
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!widened(i)) continue;
    auto src = make_acl_tensor(api, outs[i], "indices");
    auto dst = make_acl_tensor(api, out[i], "out");
    std::uint64_t ws = 0;
    ExecutorGuard ex(api);
    acl_check(api, api.aclnnCastGetWorkspaceSize(src.get(), ACL_INT64, dst.get(), &ws, ex.out()),
              "aclnnCastGetWorkspaceSize");
    void* wsp = ws > 0 ? scratch(ws) : nullptr;
    acl_check(api, api.aclnnCast(wsp, ws, ex.release(), stream), "aclnnCast");
  }
}

inline const std::vector<AicpuRule>& aicpu_rules() {
  using namespace detail;
  using M = std::span<const ops::TensorMeta>;
  using A = const ops::Attrs&;
  using I = std::span<const AnyTensor>;
  static const std::vector<AicpuRule> rules = {
      {&ops::erf_op, "Erf", [](M in, A) { return float_in(in); }, [](AicpuCall&, I, A) {}},
      {&ops::leaky_relu_op, "LeakyRelu", [](M in, A) { return float_in(in); },
       [](AicpuCall& c, I, A a) { c.set_float("negative_slope", a.f("slope", 0.01)); }},
      {&ops::argmax_op, "ArgMaxD", [](M in, A) { return arg_in(in); }, &prepare_arg, true},
      {&ops::argmin_op, "ArgMinD", [](M in, A) { return arg_in(in); }, &prepare_arg, true},
      {&ops::prod_op, "ReduceProdD", [](M in, A) { return prod_in(in); },
       [](AicpuCall& c, I in, A a) {
         std::vector<std::int64_t> axes = a.has("axes") ? a.ints("axes") : std::vector<std::int64_t>{};
         if (axes.empty())
           for (int k = 0; k < in[0].dim(); ++k) axes.push_back(k);
         for (auto& x : axes)
           if (x < 0) x += in[0].dim();
         c.set_ints("axes", axes);
         c.set_bool("keep_dims", a.b("keepdim"));
       }},
  };
  return rules;
}

}  // namespace ms::backend::ascend
