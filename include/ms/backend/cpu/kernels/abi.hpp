#pragma once
// What the CPU backend's elementwise kernels and the registry agree on: the signature of a
// block kernel (BlockFn), the layout of its params, and the affine kernels' encoding (scalar
// steps folded around a unary kernel, binary steps with further inputs) and variants. The
// registry's ElementwiseInfo holds tables of these kernels; fusion (graph/fused_program.hpp)
// writes the encoding, the kernels (affine.hpp) read it. Includes nothing.

#include <cstdint>

namespace ms::ops {

/// A contiguous block kernel of an elementwise op: out[i] = f(in0[i*s0], in1[i*s1], ...)
/// where each stride s is 0 (broadcast scalar) or 1. `params` holds the op's numeric
/// attributes (e.g. leaky_relu's slope). One function per input dtype. Fusion evaluates
/// chains of these over L1-sized blocks; the eager kernel calls them on rows.
using BlockFn = void (*)(const void* const* in, const std::int64_t* in_strides, void* out, std::int64_t n,
                         const double* params);
inline constexpr int kMaxElementwiseParams = 4;
/// Scalar steps that fusion folds around a unary block kernel, so that `tanh(x*0.5+0.1)*1.5`
/// is one pass instead of four. Each step is `v = (v * m) + a` with two roundings, like the
/// separate ops (the product is kept from FMA contraction, see simd::no_contract): multiplying
/// by c is (c, -0.0), adding c is (1, c), subtracting c is (1, -c), and a multiplication
/// followed by an addition is one step (c1, c2); v*1 and v + -0.0 are exact. The params of
/// an affine kernel hold kAffineSteps (m, a) pairs applied to its input, then kAffineSteps
/// applied to its result, from params[kMaxElementwiseParams ...]; unused steps are (1, -0.0).
inline constexpr int kAffineSteps = 2;
/// After its scalar steps an affine kernel applies up to kAffineBinary binary steps with
/// tensors: v = v op z or z op v (op: + - * /), z being its input k + 1 (stride 0 or 1).
/// Step k's code is params[kMaxElementwiseParams + 4 * kAffineSteps + k] (see
/// affine_binary_code); 0 ends the list. So `t - x / (exp(x) + 1)` is one pass of exp's kernel.
inline constexpr int kAffineBinary = 2;
inline constexpr int kAffineParams = 4 * kAffineSteps + kAffineBinary;
/// The most inputs an elementwise op (and one instruction of a fused program) has.
inline constexpr int kMaxArity = 3;
static_assert(1 + kAffineBinary <= kMaxArity, "an affine kernel's binary steps are its inputs 1..");
enum class AffineBinary : int { none = 0, add = 1, sub = 2, mul = 3, div = 4 };
/// The code of a binary step: op, with `reversed` for z op v (the tensor operand first).
constexpr double affine_binary_code(AffineBinary op, bool reversed) {
  return static_cast<double>(2 * static_cast<int>(op) - (reversed ? 0 : 1));
}
/// Affine kernels are compiled for these (steps before, steps after) counts; a program with
/// other counts uses the smallest variant that covers them, padded with (1, -0.0) steps. The
/// one-sided variants spare a padded step's multiply and add: `x / (exp(x) + 1)` is exp with
/// one step after; in the (1, 1) variant the fused 8-op chain ran 6% slower (1M floats, AVX-512).
inline constexpr int kAffineVariants = 5;
inline constexpr int kAffineShape[kAffineVariants][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {kAffineSteps, kAffineSteps}};
/// The index of the smallest variant with at least `pre` steps before and `post` after, or -1.
constexpr int affine_variant(int pre, int post) {
  for (int v = 0; v < kAffineVariants; ++v)
    if (kAffineShape[v][0] >= pre && kAffineShape[v][1] >= post) return v;
  return -1;
}

/// A kernel other than an elementwise block (a direct convolution, a pooling pass) compiled
/// once per CPU level: it takes a pointer to its own argument struct. The program calls it
/// through cpu::isa_function (ops/isa_dispatch.hpp), which finds the copy of the level in force.
using IsaFn = void (*)(const void* args);
/// One level's copy of such a kernel, by name, in the ELF section `ms_isa_fns` (written by
/// MS_ISA_FUNCTION in a level's unit); 32 bytes, so that the rows of every unit lie end to end.
struct alignas(32) IsaFnRow {
  int level = 0;               ///< cpu::Isa
  const char* name = nullptr;  ///< the kernel's name
  IsaFn fn = nullptr;
};
static_assert(sizeof(IsaFnRow) == 32);
}  // namespace ms::ops

