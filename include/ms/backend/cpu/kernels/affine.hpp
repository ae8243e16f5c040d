#pragma once
// The affine kernels of the CPU backend: a unary elementwise formula with scalar steps
// folded around it and binary steps with further inputs after it (the encoding is in
// abi.hpp), so that a fused chain such as `t - x / (exp(x) + 1)` is one pass of exp's
// kernel. make_elementwise_op (ops/elementwise.hpp) fills an op's affine table from these;
// like the block kernels they are compiled once per CPU level (MS_ISA_NS).

#include <algorithm>
#include <cstdint>

#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

namespace detail {
inline namespace MS_ISA_NS {

/// Unary functor F with scalar steps folded around it, for one type T: Pre (m, a) steps
/// applied before f and Post after, read from params[kMaxElementwiseParams ...] (see
/// kAffineSteps) and broadcast once.
template <class F, class T, int Pre, int Post>
struct Affine {
  static_assert(Pre <= kAffineSteps && Post <= kAffineSteps);
  using B = xsimd::batch<T>;
  F f;
  B m[Pre + Post + 1], a[Pre + Post + 1];
  explicit Affine(const double* params) : f(params) {
    const double* p = params + kMaxElementwiseParams;
    for (int k = 0; k < Pre; ++k) { m[k] = B(static_cast<T>(p[2 * k])); a[k] = B(static_cast<T>(p[2 * k + 1])); }
    for (int k = 0; k < Post; ++k) {
      m[Pre + k] = B(static_cast<T>(p[2 * (kAffineSteps + k)]));
      a[Pre + k] = B(static_cast<T>(p[2 * (kAffineSteps + k) + 1]));
    }
  }
  static B step(B v, const B& m, const B& a) {
    B p = v * m;
    simd::no_contract(p);
    return p + a;
  }
  B operator()(B v) const {
    for (int k = 0; k < Pre; ++k) v = step(v, m[k], a[k]);
    v = f(v);
    simd::no_contract(v);  // f's last product must not fuse with a following step's addition
    for (int k = Pre; k < Pre + Post; ++k) v = step(v, m[k], a[k]);
    return v;
  }
};

/// v op z (or z op v) for a binary step code (see kAffineBinary), as the eager op computes it.
/// Always inlined: GCC kept it out of line at -O3, and the call per batch (operands and
/// result passed through memory) cost 15-20% of the fused chain in benchmarks/fused_chain.
template <class V>
[[gnu::always_inline]] inline V affine_binary(int code, V v, V z) {
  switch (code) {
    case 1: return simd::add(v, z);
    case 2: return simd::add(z, v);
    case 3: return simd::sub(v, z);
    case 4: return simd::sub(z, v);
    case 5: v = simd::mul(v, z); break;
    case 6: v = simd::mul(z, v); break;
    case 7: return v / z;
    case 8: return z / v;
    default: return v;
  }
  simd::no_contract(v);  // a product stays rounded before a following step's addition
  return v;
}

/// out[i] = binary steps (f(a[i]), z[0][i], z[1][i]...) over [0, n), n a multiple of the
/// batch size, all operands contiguous. A function of its own per NB, so that the loop has
/// no branch but the steps' (predictable) switch.
/// The functor, codes and operands are locals of the loop's own frame: read through
/// pointers they were loaded again on every batch (the stores to out might alias them as
/// far as the compiler knows), and the loop measured up to 1.9x slower in some runs.
template <int NB, class A, class T>
[[gnu::noinline]] void affine_loop(const double* params, const T* a, const T* const* z, const int* code, T* out,
                                   std::int64_t n) {
  using B = xsimd::batch<T>;
  const A f(params);
  const int c0 = NB >= 1 ? code[0] : 0, c1 = NB >= 2 ? code[1] : 0;
  const T* z0 = NB >= 1 ? z[0] : nullptr;
  const T* z1 = NB >= 2 ? z[1] : nullptr;
  for (std::int64_t i = 0; i < n; i += static_cast<std::int64_t>(B::size)) {
    B v = f(B::load_unaligned(a + i));
    if constexpr (NB >= 1) v = affine_binary(c0, v, B::load_unaligned(z0 + i));
    if constexpr (NB >= 2) v = affine_binary(c1, v, B::load_unaligned(z1 + i));
    v.store_unaligned(out + i);
  }
}

/// The affine kernel of unary functor F: Pre scalar steps, f, Post scalar steps, then the
/// binary steps with inputs 1.. (see kAffineBinary). Broadcast operands are expanded into
/// local buffers, and the tail is evaluated on padded copies by the same loop, so every
/// element goes through the same batch formula (as in block_kernel).
template <class F, class T, int Pre, int Post>
void affine_kernel(const void* const* in, const std::int64_t* st, void* outp, std::int64_t n, const double* params) {
  static_assert(kAffineBinary == 2);
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size, kChunk = 256;
  using A = Affine<F, T, Pre, Post>;
  int code[kAffineBinary] = {};
  const T* z[kAffineBinary] = {};
  bool zs[kAffineBinary] = {};
  int nb = 0;
  for (; nb < kAffineBinary; ++nb) {
    code[nb] = static_cast<int>(params[kMaxElementwiseParams + 4 * kAffineSteps + nb]);
    if (code[nb] == 0) break;
    z[nb] = static_cast<const T*>(in[1 + nb]);
    zs[nb] = st[1 + nb] == 0;
  }
  const T* a = static_cast<const T*>(in[0]);
  const bool sa = st[0] == 0;
  T* out = static_cast<T*>(outp);
  auto run = [&](const T* ap, const T* const* zp, T* op, std::int64_t len) {
    if (nb == 0) affine_loop<0, A>(params, ap, zp, code, op, len);
    else if (nb == 1) affine_loop<1, A>(params, ap, zp, code, op, len);
    else affine_loop<2, A>(params, ap, zp, code, op, len);
  };
  const std::int64_t whole = n / W * W;
  if (!sa && !zs[0] && !zs[1]) {
    run(a, z, out, whole);
  } else if (whole > 0) {
    alignas(64) T ba[kChunk], bz[kAffineBinary][kChunk];
    if (sa) std::fill_n(ba, kChunk, a[0]);
    for (int k = 0; k < nb; ++k)
      if (zs[k]) std::fill_n(bz[k], kChunk, z[k][0]);
    for (std::int64_t c = 0; c < whole; c += kChunk) {
      const T* zp[kAffineBinary] = {};
      for (int k = 0; k < nb; ++k) zp[k] = zs[k] ? bz[k] : z[k] + c;
      run(sa ? ba : a + c, zp, out + c, std::min(kChunk, whole - c));
    }
  }
  if (whole < n) {
    alignas(64) T ta[W], tz[kAffineBinary][W], to[W];
    const T* tzp[kAffineBinary] = {tz[0], tz[1]};
    const std::int64_t r = n - whole;
    for (std::int64_t j = 0; j < W; ++j) {
      const std::int64_t k = whole + (j < r ? j : r - 1);  // pad with the last valid element
      ta[j] = a[sa ? 0 : k];
      for (int s = 0; s < nb; ++s) tz[s][j] = z[s][zs[s] ? 0 : k];
    }
    run(ta, tzp, to, W);
    for (std::int64_t j = 0; j < r; ++j) out[whole + j] = to[j];
  }
}

/// Fills table[v] with F's affine kernel of shape kAffineShape[v] for type T.
template <class F, class T, int V = 0>
constexpr void fill_affine_table(BlockFn* table) {
  if constexpr (V < kAffineVariants) {
    table[V] = &affine_kernel<F, T, kAffineShape[V][0], kAffineShape[V][1]>;
    fill_affine_table<F, T, V + 1>(table);
  }
}

}  // namespace MS_ISA_NS
}  // namespace detail

}  // namespace ms::ops
