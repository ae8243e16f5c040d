#pragma once
// Matrix products: matmul (NumPy semantics: 1-D operands promoted and the added dim
// removed, batched with broadcast batch dims) and linear (x @ w^T + b, the dense
// layer). Belongs here: their op definitions, inference and CPU kernels. The GEMM reads
// the operands on their own strides, so transposed or sliced matrices (e.g. a transposed
// weight) are not copied. Which library runs it is ms::cpu_gemm() (ops/dnnl.hpp): oneDNN's
// sgemm for float by default, OpenBLAS's sgemm/dgemm (float64 on the dnnl path too), or
// the backend's own GEMM (backend/cpu/kernels/gemm.hpp, compiled per CPU level), which is
// always there.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "../core/linkage.hpp"
#include "../core/parallel.hpp"
#if MS_KERNEL_BODIES
#include <memory>

#include "../backend/cpu/kernels/gemm.hpp"
#include "isa_dispatch.hpp"
#endif
#include "dnnl.hpp"
#include "views.hpp"

namespace ms::ops {

/// Matrix product with NumPy's rules: 1-D @ 1-D is a dot product (0-d result); a 1-D operand
/// is promoted to a row (left) or column (right) and that dim removed from the result; batch
/// dims broadcast, e.g. (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6). Both operands share a dtype.
inline AnyTensor matmul(const AnyTensor& a, const AnyTensor& b);
/// x @ w^T + b for x (..., in), weight w (out, in) and an optional bias b (out,).
inline AnyTensor linear(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b = AnyTensor());

}  // namespace ms::ops

namespace ms {
/// Matrix product with NumPy's rules (see ops::matmul).
template <Element T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) { return ops::matmul(a, b); }
/// x @ w^T + b; w is (out_features, in_features), b (out_features,) or undefined for no bias.
template <Element T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b = Tensor<T>()) {
  return ops::linear(x, w, b);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {
namespace detail {

/// How one operand's matrices sit in memory (the same for all its batches): row-major
/// (unit column stride) or column-major (unit row stride), with an outer stride `ld`.
struct MatRef {
  std::int64_t rows = 0, cols = 0;
  bool col_major = false;
  std::int64_t ld = 1;
};

/// Describes a rows x cols matrix with strides (rs, cs) for the GEMMs; false when neither
/// stride is 1 (or the layout overlaps or runs backwards), so the caller copies it.
inline bool mat_ref(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs, MatRef& m) {
  m.rows = rows;
  m.cols = cols;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<std::int64_t>(cols, 1))) {
    m.col_major = false;
    m.ld = rows <= 1 ? std::max<std::int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<std::int64_t>(rows, 1))) {
    m.col_major = true;
    m.ld = cols <= 1 ? std::max<std::int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

/// t (rank >= 2) as a (product of its leading dims, last dim) matrix; false when its
/// leading dims do not merge into one strided dim or mat_ref refuses the layout.
inline bool leading_dims_matrix(const AnyTensor& t, MatRef& m) {
  const int r = t.dim();
  std::int64_t rows = 1, rs = 0, prev_n = 0, prev_s = 0;
  for (int i = 0; i + 1 < r; ++i) {
    const std::int64_t n = t.shape()[i], s = t.strides()[i];
    rows *= n;
    if (n == 1) continue;
    if (prev_n != 0 && prev_s != s * n) return false;
    prev_n = n, prev_s = s, rs = s;
  }
  return mat_ref(rows, t.shape()[r - 1], rs, t.strides()[r - 1], m);
}

#if MS_KERNEL_BODIES  // core/linkage.hpp
#if defined(MS_HAVE_BLAS)
// The Fortran BLAS interface (OpenBLAS exports it; no header needed). C linkage: these
// name the library's global symbols although declared in this namespace.
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
void openblas_set_num_threads(int num_threads);
}

/// Lets ms::set_num_threads govern OpenBLAS's threads (its OpenMP build would otherwise use
/// every core; inside an OpenMP region it runs serially by itself).
inline void sync_blas_threads() {
  static std::atomic<int> current{-1};
  const int n = get_num_threads();
  if (current.load(std::memory_order_relaxed) != n) {
    openblas_set_num_threads(n);
    current.store(n, std::memory_order_relaxed);
  }
}

/// c (M x N, row-major) = a @ b (+= when accumulate) through BLAS: the row-major product is
/// the column-major product c^T = b^T a^T, so b goes first. Returns false when a leading
/// dimension or a size does not fit BLAS's rules (the caller then uses gemm_builtin).
template <class T>
bool gemm_blas(const T* a, const MatRef& ma, const T* b, const MatRef& mb, T* c, std::int64_t M, std::int64_t N,
               std::int64_t K, bool accumulate) {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  if (M > kMax || N > kMax || K > kMax || ma.ld > kMax || mb.ld > kMax) return false;
  // b as BLAS's first operand: row-major K x N is column-major N x K ('N', ld >= N);
  // column-major K x N is transposed ('T', ld >= K). Likewise a, second.
  const char tb = mb.col_major ? 'T' : 'N', ta = ma.col_major ? 'T' : 'N';
  if (mb.ld < std::max<std::int64_t>(1, mb.col_major ? K : N)) return false;
  if (ma.ld < std::max<std::int64_t>(1, ma.col_major ? M : K)) return false;
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int ldb = static_cast<int>(mb.ld), lda = static_cast<int>(ma.ld), ldc = static_cast<int>(N);
  const T one = 1, beta = accumulate ? T(1) : T(0);
  sync_blas_threads();
  if constexpr (std::is_same_v<T, float>) sgemm_(&tb, &ta, &m, &n, &k, &one, b, &ldb, a, &lda, &beta, c, &ldc);
  else dgemm_(&tb, &ta, &m, &n, &k, &one, b, &ldb, a, &lda, &beta, c, &ldc);
  return true;
}
#endif

/// c (M x N, row-major, contiguous) = a @ b (+= when accumulate) on the backend's own GEMM
/// at the CPU level in force, split between threads by columns (or by rows when c is narrow)
/// in whole register tiles. Serial inside a parallel region (a batch loop), like the rest.
template <class T>
void gemm_builtin(const T* a, const MatRef& ma, const T* b, const MatRef& mb, T* c, std::int64_t M, std::int64_t N,
                  std::int64_t K, bool accumulate) {
  const IsaFn fn = cpu::isa_function_for<T>("gemm_f32", "gemm_f64", &gemm_kernel<T>);
  const bool by_cols = N >= 2 * kGemmColumnGrain || N >= M;
  const std::int64_t n = by_cols ? N : M, align = by_cols ? kGemmColumnGrain : kGemmMaxMr;
  // About 2^18 multiply-adds per thread at least: below that waking a thread costs more.
  const std::int64_t per_unit = std::max<std::int64_t>(1, (by_cols ? M : N) * K);
  const std::int64_t grain = std::max(align, (std::int64_t{1} << 18) / per_unit);
  parallel_for(n, grain, [&](std::int64_t lo, std::int64_t hi) {
    GemmArgs<T> g{a, ma.ld, ma.col_major, b, mb.ld, mb.col_major, c, N, K, 0, M, 0, N, accumulate, nullptr};
    if (by_cols) g.j0 = lo, g.j1 = hi;
    else g.i0 = lo, g.i1 = hi;
    // Every element the kernel reads it has written first: no zeroing.
    auto scratch = std::make_unique_for_overwrite<T[]>(
        static_cast<std::size_t>(GemmScratch(g.i1 - g.i0, g.j1 - g.j0, K).total()));
    g.scratch = scratch.get();
    fn(&g);
  }, align);
}

/// c (M x N, row-major, contiguous) = a @ b, or += when `accumulate` (linear's bias).
template <class T>
void gemm(const T* a, const MatRef& ma, const T* b, const MatRef& mb, T* c, bool accumulate) {
  const std::int64_t M = ma.rows, K = ma.cols, N = mb.cols;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) std::fill(c, c + M * N, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, bfloat16>) {  // only on the native path (see half_on_dnnl)
#if defined(MS_HAVE_DNNL)
    matmul_dnnl({a, dnnl_bf16, ma.col_major, ma.ld}, {b, dnnl_bf16, mb.col_major, mb.ld}, c, dnnl_bf16, M, N, K,
                accumulate, "matmul");
#else
    MS_THROW(BackendError, "matmul: bfloat16 GEMM without oneDNN");
#endif
  } else if constexpr (std::is_floating_point_v<T>) {
    [[maybe_unused]] const CpuGemm path = cpu_gemm();
#if defined(MS_HAVE_DNNL)
    if constexpr (std::is_same_v<T, float>) {
      if (path == CpuGemm::dnnl) {
        if (cpu_gemm_precision() == GemmPrecision::bf16 && dnnl_bf16_native())
          gemm_dnnl_bf16_from_f32(a, ma.col_major, ma.ld, b, mb.col_major, mb.ld, c, M, N, K, accumulate);
        else gemm_dnnl(a, ma.col_major, ma.ld, b, mb.col_major, mb.ld, c, M, N, K, accumulate);
        return;
      }
    }
#endif
#if defined(MS_HAVE_BLAS)
    // float64 on the dnnl path goes to OpenBLAS too: oneDNN has no f64 GEMM.
    if (path != CpuGemm::builtin && gemm_blas(a, ma, b, mb, c, M, N, K, accumulate)) return;
#endif
    gemm_builtin(a, ma, b, mb, c, M, N, K, accumulate);
  } else {  // integers: an i-k-j loop that wraps on overflow like the elementwise ops
    auto at = [](const T* p, const MatRef& m, std::int64_t i, std::int64_t j) {
      return m.col_major ? p[j * m.ld + i] : p[i * m.ld + j];
    };
    for (std::int64_t i = 0; i < M; ++i) {
      T* crow = c + i * N;
      if (!accumulate) std::fill(crow, crow + N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T av = at(a, ma, i, k);
        for (std::int64_t j = 0; j < N; ++j) crow[j] = simd::add(crow[j], simd::mul(av, at(b, mb, k, j)));
      }
    }
  }
}

/// Native kernels: float32, float64, int32, int64, and bfloat16 where half_on_dnnl();
/// float16 (and bfloat16 elsewhere) are computed in float32 and rounded once (upcast).
inline constexpr DTypeSet kLinalgTypes{DType::f32, DType::f64, DType::i32, DType::i64};
inline constexpr DTypeSet kLinalgOpTypes = kLinalgTypes | DTypeSet{DType::f16, DType::bf16};

/// Whether a 16-bit float product runs natively: bfloat16 on the dnnl path of a CPU with
/// bfloat16 units (AVX512-BF16 / AMX). Otherwise 16-bit floats take the float32 kernel.
inline bool half_on_dnnl(DType d) {
  return d == DType::bf16 && cpu_gemm() == CpuGemm::dnnl && dnnl_bf16_native();
}

/// The batch dims of a matmul operand (all but the matrix dims).
inline Shape matmul_batch(const Shape& s) {
  Shape b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

inline void infer_matmul(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  MS_CHECK(a.rank() >= 1 && b.rank() >= 1, ShapeError, "{}: both operands need at least 1 dimension: {} @ {}", op.name,
           shape_str(a), shape_str(b));
  check_same_dtype(op, in[0], in[1]);
  const std::int64_t kb = b.rank() == 1 ? b[0] : b[b.rank() - 2];
  MS_CHECK(a.back() == kb, ShapeError, "{}: inner dimensions differ: {} @ {}", op.name, shape_str(a), shape_str(b));
  Shape o;
  MS_CHECK(try_broadcast(matmul_batch(a), matmul_batch(b), o), ShapeError,
           "{}: cannot broadcast batch dimensions {} and {}: {} @ {}", op.name, shape_str(matmul_batch(a)),
           shape_str(matmul_batch(b)), shape_str(a), shape_str(b));
  if (a.rank() >= 2) o.push_back(a[a.rank() - 2]);
  if (b.rank() >= 2) o.push_back(b.back());
  out.push_back({in[0].dtype, o});
}

/// Describes the matrix dims of operand t (M x K for the left, K x N for the right); copies
/// t when its matrices have no unit stride.
inline MatRef matmul_operand(AnyTensor& t, bool left) {
  auto describe = [&](MatRef& m) {
    const int r = t.dim();
    const Shape& s = t.shape();
    const Shape& st = t.strides();
    if (r == 1) return left ? mat_ref(1, s[0], 0, st[0], m) : mat_ref(s[0], 1, st[0], 0, m);
    return mat_ref(s[r - 2], s[r - 1], st[r - 2], st[r - 1], m);
  };
  MatRef m;
  if (!describe(m)) {
    t = contiguous_raw(t);
    describe(m);
  }
  return m;
}

template <class T>
void matmul_run(AnyTensor a, AnyTensor b, const AnyTensor& y) {
  const MatRef ma = matmul_operand(a, true), mb = matmul_operand(b, false);
  // Batch dims of the output and each operand's (broadcast) strides over them.
  const int nb_rank = y.dim() - (a.dim() >= 2) - (b.dim() >= 2);
  std::int64_t bshape[kMaxDims], sa[kMaxDims], sb[kMaxDims];
  std::int64_t nb = 1;
  for (int d = 0; d < nb_rank; ++d) {
    bshape[d] = y.shape()[d];
    nb *= bshape[d];
    auto stride = [&](const AnyTensor& t) -> std::int64_t {
      const int tb = std::max(t.dim() - 2, 0), k = d - (nb_rank - tb);
      return k < 0 || t.shape()[k] == 1 ? 0 : t.strides()[k];
    };
    sa[d] = stride(a);
    sb[d] = stride(b);
  }
  if (nb == 0 || y.numel() == 0) return;
  const T* ap = static_cast<const T*>(a.raw_data());
  const T* bp = static_cast<const T*>(b.raw_data());
  T* yp = static_cast<T*>(y.raw_data());
  const std::int64_t mn = ma.rows * mb.cols;
  auto one = [&](std::int64_t i) {
    std::int64_t oa = 0, ob = 0;
    for (int d = nb_rank - 1; d >= 0; --d) {
      const std::int64_t idx = i % bshape[d];
      i /= bshape[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    return std::pair{oa, ob};
  };
  const int nt = get_num_threads();
  if (nb >= 2 && nb >= nt) {  // many products: one thread each, the GEMM serial inside
    parallel_for(nb, 1, [&](std::int64_t b0, std::int64_t e0) {
      for (std::int64_t i = b0; i < e0; ++i) {
        auto [oa, ob] = one(i);
        gemm(ap + oa, ma, bp + ob, mb, yp + i * mn, false);
      }
    }, 1);
  } else {  // few large products: the GEMM threads each one
    for (std::int64_t i = 0; i < nb; ++i) {
      auto [oa, ob] = one(i);
      gemm(ap + oa, ma, bp + ob, mb, yp + i * mn, false);
    }
  }
}

inline void matmul_kernel(const KernelArgs& k) {
  if (is_half_float(k.in[0].dtype()) && !half_on_dnnl(k.in[0].dtype())) return run_upcast_f32(k, &matmul_kernel);
  visit_dtype(k.in[0].dtype(), [&]<class T>() {
    if constexpr (kLinalgTypes.contains(dtype_v<T>) || std::is_same_v<T, bfloat16>) matmul_run<T>(k.in[0], k.in[1], k.out[0]);
    else MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, k.in[0].dtype());
  });
}

inline Cost matmul_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  const Shape& a = in[0].shape;
  const double K = static_cast<double>(a.back());
  Cost c;
  c.flops = 2.0 * static_cast<double>(numel(out[0].shape)) * K;  // 2 * M * N * K per batch
  for (auto& m : in) c.bytes += static_cast<double>(m.nbytes());
  c.bytes += static_cast<double>(out[0].nbytes());
  return c;
}

inline void infer_linear(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in.size() == 2 || in.size() == 3, ValueError, "{}: expected 2 or 3 inputs (x, weight[, bias]), got {}",
           op.name, in.size());
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  MS_CHECK(x.rank() >= 1, ShapeError, "{}: input must have at least 1 dimension, got shape {}", op.name, shape_str(x));
  MS_CHECK(w.rank() == 2, ShapeError, "{}: weight must be 2-D (out_features, in_features), got shape {}", op.name,
           shape_str(w));
  check_same_dtype(op, in[0], in[1]);
  MS_CHECK(x.back() == w[1], ShapeError, "{}: last dimension {} of input {} does not match in_features {} of weight {}",
           op.name, x.back(), shape_str(x), w[1], shape_str(w));
  if (in.size() == 3) {
    check_same_dtype(op, in[0], in[2]);
    MS_CHECK(in[2].shape == Shape{w[0]}, ShapeError, "{}: bias shape {} does not match out_features {} of weight {}",
             op.name, shape_str(in[2].shape), w[0], shape_str(w));
  }
  Shape o = x;
  o[o.rank() - 1] = w[0];
  out.push_back({in[0].dtype, o});
}

template <class T>
void linear_run(AnyTensor x, AnyTensor w, const AnyTensor* bias, const AnyTensor& y) {
  const int r = x.dim();
  const std::int64_t K = x.shape()[r - 1], N = w.shape()[0];
  std::int64_t M = 1;
  for (int i = 0; i + 1 < r; ++i) M *= x.shape()[i];
  // x as an (M, K) matrix: its leading dims must merge into one strided dim.
  MatRef mx, mw;
  if (!leading_dims_matrix(x, mx)) {
    x = contiguous_raw(x);
    leading_dims_matrix(x, mx);
  }
  // w^T is (K, N) with strides (w.stride(1), w.stride(0)): a contiguous weight is column-major.
  if (!mat_ref(K, N, w.strides()[1], w.strides()[0], mw)) {
    w = contiguous_raw(w);
    mat_ref(K, N, w.strides()[1], w.strides()[0], mw);
  }
  if (M == 0 || N == 0) return;
  T* yp = static_cast<T*>(y.raw_data());
  if (bias) {  // the bias seeds the output and the GEMM accumulates onto it (no second pass)
    const T* bp = static_cast<const T*>(bias->raw_data());
    const std::int64_t bs = bias->strides()[0];
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) yp[i * N + j] = bp[j * bs];
  }
  gemm(static_cast<const T*>(x.raw_data()), mx, static_cast<const T*>(w.raw_data()), mw, yp, bias != nullptr);
}

inline void linear_kernel(const KernelArgs& k) {
  if (is_half_float(k.in[0].dtype()) && !half_on_dnnl(k.in[0].dtype())) return run_upcast_f32(k, &linear_kernel);
  visit_dtype(k.in[0].dtype(), [&]<class T>() {
    if constexpr (kLinalgTypes.contains(dtype_v<T>) || std::is_same_v<T, bfloat16>)
      linear_run<T>(k.in[0], k.in[1], k.in.size() == 3 ? &k.in[2] : nullptr, k.out[0]);
    else MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, k.in[0].dtype());
  });
}

inline Cost linear_cost(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                        const Attrs& a) {
  Cost c = matmul_cost(op, in, out, a);
  if (in.size() == 3) c.flops += static_cast<double>(numel(out[0].shape));
  return c;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

MS_REGISTRATION(const OpDef& matmul_op, registry().add([] {
  OpDef d;
  d.name = "matmul";
  d.category = Category::linalg;
  d.num_inputs = 2;
  d.doc = "matrix product with NumPy rules (1-D promotion, broadcast batch dims); oneDNN, OpenBLAS or the built-in GEMM";
  d.infer = &detail::infer_matmul;
  d.kernel = &detail::matmul_kernel;
  d.cost = &detail::matmul_cost;
  d.cpu_dtypes = detail::kLinalgOpTypes;
  return d;
}()));

MS_REGISTRATION(const OpDef& linear_op, registry().add([] {
  OpDef d;
  d.name = "linear";
  d.category = Category::linalg;
  d.num_inputs = -1;  // x, weight and an optional bias
  d.doc = "x @ weight^T + bias for weight (out, in) and optional bias (out,)";
  d.infer = &detail::infer_linear;
  d.kernel = &detail::linear_kernel;
  d.cost = &detail::linear_cost;
  d.cpu_dtypes = detail::kLinalgOpTypes;
  return d;
}()));

inline AnyTensor matmul(const AnyTensor& a, const AnyTensor& b) { return call1(matmul_op, {a, b}); }
inline AnyTensor linear(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b) {
  return b.defined() ? call1(linear_op, {x, w, b}) : call1(linear_op, {x, w});
}

}  // namespace ms::ops
