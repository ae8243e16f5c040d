// Ascend emulator: the loss-side aclnn ops a classifier's training step needs:
// OneHot (class indices to rows of on/off values) and
// SoftmaxCrossEntropyWithLogits (per-row loss and the gradient softmax - labels).

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <algorithm>
#include <cmath>

#include "emu_ops.hpp"

using namespace msemu;

// out[..., j] = onValue if self[...] == j else offValue (axis -1 only, as ms uses it).
MS_EMU_API aclnnStatus aclnnOneHotGetWorkspaceSize(const aclTensor* self, int numClasses, const aclTensor* onValue,
                                                   const aclTensor* offValue, int64_t axis, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  static constexpr const char* fn = "aclnnOneHotGetWorkspaceSize";
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc a, on, off, o;
  if (int rc = get_tensor(fn, self, "self", a); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, onValue, "onValue", on); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, offValue, "offValue", off); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, out, "out", o); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (a.dtype != ACL_INT32 && a.dtype != ACL_INT64) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: self must be ACL_INT32 or ACL_INT64, got %s", fn,
                                              dtype_name(a.dtype)));
  }
  if (axis != -1 && axis != static_cast<int64_t>(a.dims.size())) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: the emulator supports axis -1 only, got %lld", fn,
                                              static_cast<long long>(axis)));
  }
  std::vector<int64_t> expect = a.dims;
  expect.push_back(numClasses);
  if (numClasses <= 0 || o.dims != expect || numel(on.dims) != 1 || numel(off.dims) != 1) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: out has shape %s, expected %s (numClasses %d); onValue and offValue need one element",
                     fn, shape_str(o.dims).c_str(), shape_str(expect).c_str(), numClasses));
  }
  Kernel k = [](const std::vector<View>& v) {
    const View &x = v[0], &hi = v[1], &lo = v[2], &z = v[3];
    const double onv = load(hi.dtype, hi.at(hi.rel0)), offv = load(lo.dtype, lo.at(lo.rel0));
    const size_t r = z.dims.size();
    const int64_t C = z.dims[r - 1], zc = z.strides[r - 1];
    std::vector<int64_t> zst(z.strides.begin(), z.strides.end() - 1);
    const std::array<std::vector<int64_t>, 2> st{x.strides, zst};
    for_each_nd<2>(x.dims, st, {x.rel0, z.rel0}, [&](const std::array<int64_t, 2>& p) {
      const auto cls = static_cast<int64_t>(load(x.dtype, x.at(p[0])));
      for (int64_t c = 0; c < C; ++c) store(z.dtype, z.at(p[1] + c * zc), c == cls ? onv : offv);
    });
    return ACL_SUCCESS;
  };
  return make_executor("aclnnOneHot", {a, on, off, o}, std::move(k), workspaceSize, executor);
}
MS_EMU_API aclnnStatus aclnnOneHot(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream) {
  return launch("aclnnOneHot", workspace, workspaceSize, executor, stream);
}

// features, labels, backprop: (N, C); loss: (N,).
// loss[n] = -sum_c labels[n,c] * log_softmax(features)[n,c]; backprop = softmax - labels.
MS_EMU_API aclnnStatus aclnnSoftmaxCrossEntropyWithLogitsGetWorkspaceSize(const aclTensor* features,
                                                                          const aclTensor* labels, aclTensor* loss,
                                                                          aclTensor* backprop,
                                                                          uint64_t* workspaceSize,
                                                                          aclOpExecutor** executor) {
  static constexpr const char* fn = "aclnnSoftmaxCrossEntropyWithLogitsGetWorkspaceSize";
  if (int rc = op_prologue(fn); rc != ACL_SUCCESS) return rc;
  TensorDesc f, l, lo, bp;
  if (int rc = get_tensor(fn, features, "features", f); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, labels, "labels", l); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, loss, "loss", lo); rc != ACLNN_SUCCESS) return rc;
  if (int rc = get_tensor(fn, backprop, "backprop", bp); rc != ACLNN_SUCCESS) return rc;
  if (int rc = check_outputs(fn, workspaceSize, executor); rc != ACLNN_SUCCESS) return rc;
  if (f.dims.size() != 2 || l.dims != f.dims || bp.dims != f.dims || lo.dims != std::vector<int64_t>{f.dims[0]}) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                strf("%s: expected features, labels and backprop (N, C) and loss (N,); got features %s, labels %s, "
                     "loss %s, backprop %s", fn, shape_str(f.dims).c_str(), shape_str(l.dims).c_str(),
                     shape_str(lo.dims).c_str(), shape_str(bp.dims).c_str()));
  }
  if (!is_floating(f.dtype) || !is_floating(l.dtype)) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: features and labels must be floating", fn));
  }
  Kernel k = [](const std::vector<View>& v) {
    const View &x = v[0], &y = v[1], &lz = v[2], &g = v[3];
    const int64_t N = x.dims[0], C = x.dims[1];
    std::vector<double> row(static_cast<size_t>(C));
    for (int64_t n = 0; n < N; ++n) {
      double mx = -INFINITY;
      for (int64_t c = 0; c < C; ++c) {
        row[static_cast<size_t>(c)] = load(x.dtype, x.at(x.rel0 + n * x.strides[0] + c * x.strides[1]));
        mx = std::max(mx, row[static_cast<size_t>(c)]);
      }
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(row[static_cast<size_t>(c)] - mx);
      const double lse = mx + std::log(s);
      double acc = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double lab = load(y.dtype, y.at(y.rel0 + n * y.strides[0] + c * y.strides[1]));
        const double logp = row[static_cast<size_t>(c)] - lse;
        acc -= lab * logp;
        store(g.dtype, g.at(g.rel0 + n * g.strides[0] + c * g.strides[1]), std::exp(logp) - lab);
      }
      store(lz.dtype, lz.at(lz.rel0 + n * lz.strides[0]), acc);
    }
    return ACL_SUCCESS;
  };
  return make_executor("aclnnSoftmaxCrossEntropyWithLogits", {f, l, lo, bp}, std::move(k), workspaceSize,
                       executor);
}
MS_EMU_API aclnnStatus aclnnSoftmaxCrossEntropyWithLogits(void* workspace, uint64_t workspaceSize,
                                                          aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnSoftmaxCrossEntropyWithLogits", workspace, workspaceSize, executor, stream);
}

#endif  // MS_ASCEND_EMULATOR_BUILD
