// Ascend emulator: element-wise aclnn ops (Add, Sub, Mul, Div, PowTensorTensor,
// GtTensor and SWhere with broadcasting; Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh,
// Gelu; Muls; Cast).
// Values are computed in double and stored in the output dtype.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <cmath>

#include "emu_ops.hpp"

namespace msemu {
namespace {

enum class BinOp { Add, Sub, Mul, Div, Pow, Gt };
enum class UnOp { Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh, Gelu, Identity };

double apply(BinOp op, double a, double b, double alpha) {
  switch (op) {
    case BinOp::Add: return a + alpha * b;
    case BinOp::Sub: return a - alpha * b;
    case BinOp::Mul: return a * b;
    case BinOp::Div: return a / b;
    case BinOp::Pow: return std::pow(a, b);
    case BinOp::Gt: return a > b ? 1.0 : 0.0;
  }
  return 0;
}

double apply(UnOp op, double x) {
  switch (op) {
    case UnOp::Neg: return -x;
    case UnOp::Exp: return std::exp(x);
    case UnOp::Log: return std::log(x);
    case UnOp::Sqrt: return std::sqrt(x);
    case UnOp::Relu: return x > 0 ? x : 0.0;
    case UnOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnOp::Tanh: return std::tanh(x);
    case UnOp::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));  // erf form
    case UnOp::Identity: return x;
  }
  return 0;
}

int binary(const char* fn, const char* op, const aclTensor* self, const aclTensor* other,
           const aclScalar* alpha, bool takes_alpha, aclTensor* out, uint64_t* workspaceSize,
           aclOpExecutor** executor, BinOp kind) {
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, b, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, other, "other", b); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  double alpha_value = 1.0;
  if (takes_alpha) {
    if (alpha == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: alpha is null", fn));
    if (!scalar_live(alpha)) return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: alpha is not a live aclScalar", fn));
    alpha_value = alpha->value;
  }
  std::vector<int64_t> shape;
  if (!broadcast_shape(a.dims, b.dims, shape)) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: cannot broadcast self %s with other %s", fn,
                                              shape_str(a.dims).c_str(), shape_str(b.dims).c_str()));
  }
  if (shape != o.dims) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected the broadcast shape %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(shape).c_str()));
  }
  Kernel k = [kind, alpha_value](const std::vector<View>& v) {
    const View &x = v[0], &y = v[1], &z = v[2];
    const std::array<std::vector<int64_t>, 3> st{broadcast_strides(x, z.dims),
                                                 broadcast_strides(y, z.dims), z.strides};
    for_each_nd<3>(z.dims, st, {x.rel0, y.rel0, z.rel0}, [&](const std::array<int64_t, 3>& off) {
      store(z.dtype, z.at(off[2]),
            apply(kind, load(x.dtype, x.at(off[0])), load(y.dtype, y.at(off[1])), alpha_value));
    });
    return ACL_SUCCESS;
  };
  return make_executor(op, {a, b, o}, std::move(k), workspaceSize, executor);
}

int unary(const char* fn, const char* op, const aclTensor* self, aclTensor* out,
          uint64_t* workspaceSize, aclOpExecutor** executor, UnOp kind, bool float_out,
          aclDataType cast_to = ACL_DT_UNDEFINED) {
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (a.dims != o.dims) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected self's shape %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(a.dims).c_str()));
  }
  if (cast_to != ACL_DT_UNDEFINED && cast_to != o.dtype) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: dtype is %s but out has dtype %s", fn,
                                              dtype_name(cast_to), dtype_name(o.dtype)));
  }
  if (float_out && !is_floating(o.dtype)) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: out has dtype %s, expected a floating dtype", fn, dtype_name(o.dtype)));
  }
  Kernel k = [kind](const std::vector<View>& v) {
    const View &x = v[0], &z = v[1];
    const std::array<std::vector<int64_t>, 2> st{x.strides, z.strides};
    for_each_nd<2>(z.dims, st, {x.rel0, z.rel0}, [&](const std::array<int64_t, 2>& off) {
      store(z.dtype, z.at(off[1]), apply(kind, load(x.dtype, x.at(off[0]))));
    });
    return ACL_SUCCESS;
  };
  return make_executor(op, {a, o}, std::move(k), workspaceSize, executor);
}

// out = condition ? self : other, all three broadcast to out's shape.
int select(const char* fn, const char* op, const aclTensor* condition, const aclTensor* self,
           const aclTensor* other, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc c, a, b, o;
  if (int rc = get_tensor(fn, condition, "condition", c); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, other, "other", b); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  std::vector<int64_t> ab, shape;
  if (!broadcast_shape(a.dims, b.dims, ab) || !broadcast_shape(c.dims, ab, shape)) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: cannot broadcast condition %s, self %s and other %s", fn,
                                              shape_str(c.dims).c_str(), shape_str(a.dims).c_str(),
                                              shape_str(b.dims).c_str()));
  }
  if (shape != o.dims) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected the broadcast shape %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(shape).c_str()));
  }
  Kernel k = [](const std::vector<View>& v) {
    const View &w = v[0], &x = v[1], &y = v[2], &z = v[3];
    const std::array<std::vector<int64_t>, 4> st{broadcast_strides(w, z.dims), broadcast_strides(x, z.dims),
                                                 broadcast_strides(y, z.dims), z.strides};
    for_each_nd<4>(z.dims, st, {w.rel0, x.rel0, y.rel0, z.rel0}, [&](const std::array<int64_t, 4>& off) {
      const bool take = load(w.dtype, w.at(off[0])) != 0;
      store(z.dtype, z.at(off[3]), take ? load(x.dtype, x.at(off[1])) : load(y.dtype, y.at(off[2])));
    });
    return ACL_SUCCESS;
  };
  return make_executor(op, {c, a, b, o}, std::move(k), workspaceSize, executor);
}

}  // namespace
}  // namespace msemu

using namespace msemu;

#define MS_EMU_LAUNCH(Name)                                                                 \
  MS_EMU_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,               \
                                     aclOpExecutor* executor, aclrtStream stream) {         \
    return launch("aclnn" #Name, workspace, workspaceSize, executor, stream);               \
  }

MS_EMU_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                                const aclScalar* alpha, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return binary("aclnnAddGetWorkspaceSize", "aclnnAdd", self, other, alpha, true, out, workspaceSize,
                executor, BinOp::Add);
}
MS_EMU_LAUNCH(Add)

MS_EMU_API aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                                const aclScalar* alpha, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return binary("aclnnSubGetWorkspaceSize", "aclnnSub", self, other, alpha, true, out, workspaceSize,
                executor, BinOp::Sub);
}
MS_EMU_LAUNCH(Sub)

MS_EMU_API aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                                aclTensor* out, uint64_t* workspaceSize,
                                                aclOpExecutor** executor) {
  return binary("aclnnMulGetWorkspaceSize", "aclnnMul", self, other, nullptr, false, out, workspaceSize,
                executor, BinOp::Mul);
}
MS_EMU_LAUNCH(Mul)

MS_EMU_API aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                                aclTensor* out, uint64_t* workspaceSize,
                                                aclOpExecutor** executor) {
  return binary("aclnnDivGetWorkspaceSize", "aclnnDiv", self, other, nullptr, false, out, workspaceSize,
                executor, BinOp::Div);
}
MS_EMU_LAUNCH(Div)

MS_EMU_API aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor* self, const aclTensor* exponent,
                                                            aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return binary("aclnnPowTensorTensorGetWorkspaceSize", "aclnnPowTensorTensor", self, exponent, nullptr, false,
                out, workspaceSize, executor, BinOp::Pow);
}
MS_EMU_LAUNCH(PowTensorTensor)

MS_EMU_API aclnnStatus aclnnGtTensorGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
  return binary("aclnnGtTensorGetWorkspaceSize", "aclnnGtTensor", self, other, nullptr, false, out,
                workspaceSize, executor, BinOp::Gt);
}
MS_EMU_LAUNCH(GtTensor)

MS_EMU_API aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor* condition, const aclTensor* self,
                                                   const aclTensor* other, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return select("aclnnSWhereGetWorkspaceSize", "aclnnSWhere", condition, self, other, out, workspaceSize,
                executor);
}
MS_EMU_LAUNCH(SWhere)

// out = self * other for a scalar other: a unary kernel scaled on the way out.
MS_EMU_API aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  static constexpr const char* fn = "aclnnMulsGetWorkspaceSize";
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (other == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: other is null", fn));
  if (!scalar_live(other)) return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: other is not a live aclScalar", fn));
  if (a.dims != o.dims) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected self's shape %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(a.dims).c_str()));
  }
  const double scale = other->value;
  Kernel k = [scale](const std::vector<View>& v) {
    const View &x = v[0], &z = v[1];
    const std::array<std::vector<int64_t>, 2> st{x.strides, z.strides};
    for_each_nd<2>(z.dims, st, {x.rel0, z.rel0}, [&](const std::array<int64_t, 2>& off) {
      store(z.dtype, z.at(off[1]), load(x.dtype, x.at(off[0])) * scale);
    });
    return ACL_SUCCESS;
  };
  return make_executor("aclnnMuls", {a, o}, std::move(k), workspaceSize, executor);
}
MS_EMU_LAUNCH(Muls)

#define MS_EMU_UNARY(Name, kind, float_out)                                                     \
  MS_EMU_API aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, aclTensor* out,   \
                                                       uint64_t* workspaceSize,                 \
                                                       aclOpExecutor** executor) {              \
    return unary("aclnn" #Name "GetWorkspaceSize", "aclnn" #Name, self, out, workspaceSize,     \
                 executor, kind, float_out);                                                    \
  }                                                                                             \
  MS_EMU_LAUNCH(Name)

MS_EMU_UNARY(Neg, UnOp::Neg, false)
MS_EMU_UNARY(Exp, UnOp::Exp, true)
MS_EMU_UNARY(Log, UnOp::Log, true)
MS_EMU_UNARY(Sqrt, UnOp::Sqrt, true)
MS_EMU_UNARY(Relu, UnOp::Relu, false)
MS_EMU_UNARY(Sigmoid, UnOp::Sigmoid, true)
MS_EMU_UNARY(Tanh, UnOp::Tanh, true)
MS_EMU_UNARY(Gelu, UnOp::Gelu, true)

MS_EMU_API aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, aclDataType dtype, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (dtype_size(dtype) == 0) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("aclnnCastGetWorkspaceSize: dtype %d is not supported "
                                              "by the emulator", static_cast<int>(dtype)));
  }
  return unary("aclnnCastGetWorkspaceSize", "aclnnCast", self, out, workspaceSize, executor,
               UnOp::Identity, false, dtype);
}
MS_EMU_LAUNCH(Cast)

#endif  // MS_ASCEND_EMULATOR_BUILD
