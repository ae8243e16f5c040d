// Ascend emulator: Matmul / BatchMatMul, Softmax, ReduceSum / Mean.
// Accumulation is in double; results are stored in the output dtype.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <algorithm>
#include <cmath>
#include <limits>

#include "emu_ops.hpp"

namespace msemu {
namespace {

std::vector<int64_t> head(const std::vector<int64_t>& v, size_t drop) {
  return std::vector<int64_t>(v.begin(), v.end() - static_cast<std::ptrdiff_t>(drop));
}

// out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]; batch dimensions broadcast.
int matmul_kernel(const std::vector<View>& v) {
  const View &a = v[0], &b = v[1], &o = v[2];
  const size_t ra = a.dims.size(), rb = b.dims.size(), ro = o.dims.size();
  const int64_t M = o.dims[ro - 2], N = o.dims[ro - 1], K = a.dims[ra - 1];
  const int64_t am = a.strides[ra - 2], ak = a.strides[ra - 1];
  const int64_t bk = b.strides[rb - 2], bn = b.strides[rb - 1];
  const int64_t om = o.strides[ro - 2], on = o.strides[ro - 1];
  const std::vector<int64_t> batch = head(o.dims, 2);
  const std::array<std::vector<int64_t>, 3> st{
      broadcast_strides(head(a.dims, 2), head(a.strides, 2), batch),
      broadcast_strides(head(b.dims, 2), head(b.strides, 2), batch), head(o.strides, 2)};
  std::vector<double> tmp(static_cast<size_t>(M * N));  // out may alias an input
  for_each_nd<3>(batch, st, {a.rel0, b.rel0, o.rel0}, [&](const std::array<int64_t, 3>& off) {
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += load(a.dtype, a.at(off[0] + m * am + k * ak)) * load(b.dtype, b.at(off[1] + k * bk + n * bn));
        }
        tmp[static_cast<size_t>(m * N + n)] = acc;
      }
    }
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) store(o.dtype, o.at(off[2] + m * om + n * on), tmp[static_cast<size_t>(m * N + n)]);
    }
  });
  return ACL_SUCCESS;
}

int matmul(const char* fn, const char* op, const aclTensor* self, const aclTensor* mat2, aclTensor* out,
           int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor, bool batch3d) {
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, b, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, mat2, "mat2", b); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (cubeMathType < ACLNN_CUBE_KEEP_DTYPE || cubeMathType > ACLNN_CUBE_USE_HF32) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: invalid cubeMathType %d", fn, cubeMathType));
  }
  if (cubeMathType == ACLNN_CUBE_KEEP_DTYPE && a.dtype == ACL_FLOAT && !soc().fp32_keep_dtype) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: cubeMathType KEEP_DTYPE (0) is not supported for ACL_FLOAT on %s (pass "
                     "ALLOW_FP32_DOWN_PRECISION (1))", fn, soc().name));
  }
  const std::string shapes = strf("self %s, mat2 %s, out %s", shape_str(a.dims).c_str(),
                                  shape_str(b.dims).c_str(), shape_str(o.dims).c_str());
  if (batch3d) {
    if (a.dims.size() != 3 || b.dims.size() != 3 || o.dims.size() != 3) {
      return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: needs 3-d tensors, got %s", fn, shapes.c_str()));
    }
  } else if (a.dims.size() < 2 || b.dims.size() < 2) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: the emulator supports operands of rank >= 2 only, got %s", fn, shapes.c_str()));
  }
  const size_t ra = a.dims.size(), rb = b.dims.size();
  std::vector<int64_t> expect;
  if (a.dims[ra - 1] != b.dims[rb - 2] || !broadcast_shape(head(a.dims, 2), head(b.dims, 2), expect) ||
      (batch3d && a.dims[0] != b.dims[0])) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: incompatible shapes %s", fn, shapes.c_str()));
  }
  expect.push_back(a.dims[ra - 2]);
  expect.push_back(b.dims[rb - 1]);
  if (o.dims != expect) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: out should have shape %s (%s)", fn, shape_str(expect).c_str(), shapes.c_str()));
  }
  return make_executor(op, {a, b, o}, matmul_kernel, workspaceSize, executor);
}

int normalize_dim(int64_t dim, size_t rank, int64_t& out) {
  const auto r = static_cast<int64_t>(std::max<size_t>(rank, 1));
  if (dim < -r || dim >= r) return -1;
  out = dim < 0 ? dim + r : dim;
  return 0;
}

int reduce(const char* fn, const char* op, const aclTensor* self, const aclIntArray* dims, bool keep,
           aclDataType dtype, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor,
           bool mean) {
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (dims == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, strf("%s: dims is null", fn));
  if (!int_array_live(dims)) return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: dims is not a live aclIntArray", fn));
  if (dtype != o.dtype) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: dtype is %s but out has dtype %s", fn, dtype_name(dtype), dtype_name(o.dtype)));
  }
  const size_t rank = a.dims.size();
  std::vector<bool> reduced(rank, dims->values.empty());  // no dims: reduce all
  for (int64_t d : dims->values) {
    int64_t n = 0;
    if (normalize_dim(d, rank, n) != 0 || (rank > 0 && reduced[static_cast<size_t>(n)])) {
      return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: dim %lld is out of range or repeated for self %s", fn,
                                                static_cast<long long>(d), shape_str(a.dims).c_str()));
    }
    if (rank > 0) reduced[static_cast<size_t>(n)] = true;
  }
  std::vector<int64_t> kept = a.dims, expect;
  for (size_t i = 0; i < rank; ++i) {
    if (reduced[i]) kept[i] = 1;
    if (!reduced[i] || keep) expect.push_back(kept[i]);
  }
  if (o.dims != expect) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(expect).c_str()));
  }
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= reduced[i] ? a.dims[i] : 1;
  std::vector<int64_t> acc_strides = contiguous_strides(kept);
  for (size_t i = 0; i < rank; ++i) {
    if (reduced[i]) acc_strides[i] = 0;
  }
  Kernel k = [acc_strides, count, mean](const std::vector<View>& v) {
    const View &x = v[0], &z = v[1];
    std::vector<double> acc(static_cast<size_t>(numel(z.dims)), 0.0);
    const std::array<std::vector<int64_t>, 2> in_st{x.strides, acc_strides};
    for_each_nd<2>(x.dims, in_st, {x.rel0, 0}, [&](const std::array<int64_t, 2>& off) {
      acc[static_cast<size_t>(off[1])] += load(x.dtype, x.at(off[0]));
    });
    const std::array<std::vector<int64_t>, 2> out_st{z.strides, contiguous_strides(z.dims)};
    for_each_nd<2>(z.dims, out_st, {z.rel0, 0}, [&](const std::array<int64_t, 2>& off) {
      const double s = acc[static_cast<size_t>(off[1])];
      store(z.dtype, z.at(off[0]),
            !mean ? s : (count > 0 ? s / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN()));
    });
    return ACL_SUCCESS;
  };
  return make_executor(op, {a, o}, std::move(k), workspaceSize, executor);
}

}  // namespace
}  // namespace msemu

using namespace msemu;

#define MS_EMU_LAUNCH(Name)                                                         \
  MS_EMU_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,       \
                                     aclOpExecutor* executor, aclrtStream stream) { \
    return launch("aclnn" #Name, workspace, workspaceSize, executor, stream);       \
  }

MS_EMU_API aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2,
                                                   aclTensor* out, int8_t cubeMathType,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return matmul("aclnnMatmulGetWorkspaceSize", "aclnnMatmul", self, mat2, out, cubeMathType, workspaceSize,
                executor, false);
}
MS_EMU_LAUNCH(Matmul)

MS_EMU_API aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2,
                                                        aclTensor* out, int8_t cubeMathType,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return matmul("aclnnBatchMatMulGetWorkspaceSize", "aclnnBatchMatMul", self, mat2, out, cubeMathType,
                workspaceSize, executor, true);
}
MS_EMU_LAUNCH(BatchMatMul)

MS_EMU_API aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  static constexpr const char* fn = "aclnnSoftmaxGetWorkspaceSize";
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (a.dims != o.dims) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: out has shape %s, expected self's shape %s", fn,
                                              shape_str(o.dims).c_str(), shape_str(a.dims).c_str()));
  }
  if (!is_floating(a.dtype) || !is_floating(o.dtype)) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: self and out must be floating (got %s, %s)", fn,
                                              dtype_name(a.dtype), dtype_name(o.dtype)));
  }
  int64_t d = 0;
  if (normalize_dim(dim, a.dims.size(), d) != 0) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: dim %lld is out of range for self %s", fn,
                                              static_cast<long long>(dim), shape_str(a.dims).c_str()));
  }
  Kernel k = [d](const std::vector<View>& v) {
    const View &x = v[0], &z = v[1];
    if (x.dims.empty()) {  // a 0-d tensor: softmax of one value
      store(z.dtype, z.at(z.rel0), 1.0);
      return ACL_SUCCESS;
    }
    const auto dd = static_cast<size_t>(d);
    const int64_t len = x.dims[dd], xs = x.strides[dd], zs = z.strides[dd];
    std::vector<int64_t> rows = x.dims;
    rows[dd] = 1;
    std::vector<double> e(static_cast<size_t>(len));
    const std::array<std::vector<int64_t>, 2> st{x.strides, z.strides};
    for_each_nd<2>(rows, st, {x.rel0, z.rel0}, [&](const std::array<int64_t, 2>& off) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < len; ++i) mx = std::max(mx, load(x.dtype, x.at(off[0] + i * xs)));
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) {
        e[static_cast<size_t>(i)] = std::exp(load(x.dtype, x.at(off[0] + i * xs)) - mx);
        sum += e[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < len; ++i) store(z.dtype, z.at(off[1] + i * zs), e[static_cast<size_t>(i)] / sum);
    });
    return ACL_SUCCESS;
  };
  return make_executor("aclnnSoftmax", {a, o}, std::move(k), workspaceSize, executor);
}
MS_EMU_LAUNCH(Softmax)

MS_EMU_API aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims,
                                                      bool keepDims, aclDataType dtype, aclTensor* out,
                                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return reduce("aclnnReduceSumGetWorkspaceSize", "aclnnReduceSum", self, dims, keepDims, dtype, out,
                workspaceSize, executor, false);
}
MS_EMU_LAUNCH(ReduceSum)

MS_EMU_API aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                                 aclDataType dtype, aclTensor* out, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  return reduce("aclnnMeanGetWorkspaceSize", "aclnnMean", self, dim, keepDim, dtype, out, workspaceSize,
                executor, true);
}
MS_EMU_LAUNCH(Mean)

#endif  // MS_ASCEND_EMULATOR_BUILD
