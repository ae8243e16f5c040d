#pragma once
// Direct float32 convolution kernels for layers with few input channels (a network's first
// layer: LeNet's 1 -> 6 5x5, an RGB 3x3), stride 1 and dilation 1: the output is computed
// row by row from a zero-bordered copy of each image's planes, SIMD lanes along the output
// row and each weight broadcast, with no im2col matrix. There the im2col matrix is K = Cg kh kw
// rows of a few dozen and the GEMM over it runs at memory speed; these kernels are bound by
// the multiply-adds instead (benchmarks/conv, LeNet's first layer: forward 220 us against
// im2col's 320, weight gradient 260 against 329; see ms::conv_prefers_direct).
// Compiled once per CPU level (MS_ISA_NS) and bound by name (ops/isa_dispatch.hpp,
// cpu::isa_function); the caller splits the batch over threads. Includes nothing above core/.

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of conv_direct_forward and conv_direct_grad_weight: images [n0, n1) of a
/// convolution of x (N, C, H, W) with weights (O, C / G, kh, kw), padding (ph, pw), stride
/// and dilation 1, output (N, O, Ho, Wo).
struct ConvDirectArgs {
  const float* x = nullptr;
  const float* w = nullptr;     ///< forward: the weights
  const float* bias = nullptr;  ///< forward: (O,) elements bias_stride apart, or null
  std::int64_t bias_stride = 1;
  const float* g = nullptr;     ///< grad_weight: the output gradient (N, O, Ho, Wo)
  float* out = nullptr;         ///< forward: y (N, O, Ho, Wo); grad_weight: (O, Cg, kh, kw), added to
  float* scratch = nullptr;     ///< conv_direct_scratch() floats
  std::int64_t C = 0, H = 0, W = 0, O = 0, G = 1, kh = 0, kw = 0, ph = 0, pw = 0, Ho = 0, Wo = 0;
  std::int64_t n0 = 0, n1 = 0;
};

/// The widest SIMD batch of any level (AVX-512: 16 floats); rows of the padded planes are
/// this much wider than an output row needs, so that every level reads whole batches.
inline constexpr std::int64_t kConvDirectMaxLanes = 16;

/// The padded planes' row length and the scratch (floats) one call needs.
constexpr std::int64_t conv_direct_row(std::int64_t Wo, std::int64_t kw) {
  return (Wo + kConvDirectMaxLanes - 1) / kConvDirectMaxLanes * kConvDirectMaxLanes + kw - 1;
}
constexpr std::int64_t conv_direct_scratch(std::int64_t C, std::int64_t G, std::int64_t Ho, std::int64_t kh,
                                           std::int64_t Wo, std::int64_t kw) {
  return (C / G) * (Ho + kh - 1) * conv_direct_row(Wo, kw) + kConvDirectMaxLanes;
}

/// Whether the direct kernels compute this convolution's weight gradient (its kernel width
/// is one they are compiled for); the forward kernel takes any width.
constexpr bool conv_direct_grad_weight_width(std::int64_t kw) { return kw == 3 || kw == 5; }

namespace detail {
inline namespace MS_ISA_NS {

/// dst (Cg planes of (Ho + kh - 1) rows of `row` floats) = the channel group xg (Cg, H, W)
/// with ph rows and pw columns of zeros before it and zeros after.
inline void conv_direct_pad(const float* xg, const ConvDirectArgs& a, std::int64_t row, float* dst) {
  const std::int64_t Cg = a.C / a.G, rows = a.Ho + a.kh - 1;
  std::memset(dst, 0, static_cast<std::size_t>(Cg * rows * row) * sizeof(float));
  const std::int64_t h_end = std::min(a.H, rows - a.ph);
  const std::int64_t w_n = std::min(a.W, row - a.pw);
  for (std::int64_t c = 0; c < Cg; ++c)
    for (std::int64_t h = 0; h < h_end; ++h)
      std::memcpy(dst + (c * rows + h + a.ph) * row + a.pw, xg + (c * a.H + h) * a.W,
                  static_cast<std::size_t>(w_n) * sizeof(float));
}

/// NB output channels (of weights w, K = Cg kh kw each) over one output row, a batch at a
/// time: acc[b] = bias[b] + sum over (c, i, j) of w[b][c][i][j] * the padded input at
/// (c, oh + i, ow + j). A partial batch is stored whole when it ends within `spill` elements
/// past the row (the rest of the output plane).
template <int NB>
inline void conv_direct_row_block(const float* xp, std::int64_t rows, std::int64_t row, const float* w,
                                  std::int64_t Cg, std::int64_t kh, std::int64_t kw, const float* bias,
                                  std::int64_t bs, std::int64_t Wo, std::int64_t P, std::int64_t spill, float* y) {
  using B = xsimd::batch<float>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  const std::int64_t K = Cg * kh * kw;
  for (std::int64_t ow = 0; ow < Wo; ow += L) {
    B acc[NB];
    MS_UNROLL for (int b = 0; b < NB; ++b) acc[b] = B(bias ? bias[b * bs] : 0.0f);
    for (std::int64_t c = 0; c < Cg; ++c)
      for (std::int64_t i = 0; i < kh; ++i) {
        const float* src = xp + (c * rows + i) * row + ow;
        const float* wk = w + (c * kh + i) * kw;
        for (std::int64_t j = 0; j < kw; ++j) {
          const B v = B::load_unaligned(src + j);
          MS_UNROLL for (int b = 0; b < NB; ++b) acc[b] = xsimd::fma(B(wk[b * K + j]), v, acc[b]);
        }
      }
    if (ow + L <= Wo + spill) {
      // A partial batch that ends inside the plane writes past the row into the rows after
      // it, which are computed later.
      MS_UNROLL for (int b = 0; b < NB; ++b) acc[b].store_unaligned(y + b * P + ow);
    } else {
      alignas(64) float tmp[L];
      for (int b = 0; b < NB; ++b) {
        acc[b].store_aligned(tmp);
        for (std::int64_t l = 0; l < Wo - ow; ++l) y[b * P + ow + l] = tmp[l];
      }
    }
  }
}

/// Output channels computed together per output batch: one accumulator each, plus the
/// input batch, within the level's vector registers (16, or 32 with AVX-512).
inline constexpr int kConvDirectForwardBlock = sizeof(xsimd::batch<float>) == 64 ? 8 : 6;

/// y[n0, n1) = conv(x, w) + bias (see ConvDirectArgs).
inline void conv_direct_forward(const void* args) {
  const ConvDirectArgs& a = *static_cast<const ConvDirectArgs*>(args);
  const std::int64_t Cg = a.C / a.G, Og = a.O / a.G, K = Cg * a.kh * a.kw, P = a.Ho * a.Wo;
  const std::int64_t rows = a.Ho + a.kh - 1, row = conv_direct_row(a.Wo, a.kw);
  for (std::int64_t n = a.n0; n < a.n1; ++n)
    for (std::int64_t g = 0; g < a.G; ++g) {
      conv_direct_pad(a.x + (n * a.C + g * Cg) * a.H * a.W, a, row, a.scratch);
      for (std::int64_t oh = 0; oh < a.Ho; ++oh)
        for (std::int64_t o = 0; o < Og;) {
          const std::int64_t nb = std::min<std::int64_t>(kConvDirectForwardBlock, Og - o), oc = g * Og + o;
          const float* xp = a.scratch + oh * row;
          const float* w = a.w + oc * K;
          const float* bias = a.bias ? a.bias + oc * a.bias_stride : nullptr;
          float* y = a.out + (n * a.O + oc) * P + oh * a.Wo;
          auto run = [&]<int NB>() {
            conv_direct_row_block<NB>(xp, rows, row, w, Cg, a.kh, a.kw, bias, a.bias_stride, a.Wo, P, (a.Ho - oh - 1) * a.Wo, y);
          };
          switch (nb) {
            case 1: run.template operator()<1>(); break;
            case 2: run.template operator()<2>(); break;
            case 3: run.template operator()<3>(); break;
            case 4: run.template operator()<4>(); break;
            case 5: run.template operator()<5>(); break;
            case 6: run.template operator()<6>(); break;
            case 7: if constexpr (kConvDirectForwardBlock >= 7) run.template operator()<7>(); break;
            default: if constexpr (kConvDirectForwardBlock >= 8) run.template operator()<8>(); break;
          }
          o += nb;
        }
    }
}

/// The weight gradient of NB output channels (gradients gr, planes P apart, rows Wo long) for
/// one input channel's kernel row i: acc[b][j] = sum over the output of g[b] * the padded
/// input shifted by (i, j); added to gw[b * K + j].
template <int NB, int KW>
inline void conv_direct_gw_block(const float* xc, std::int64_t row, const float* gr, std::int64_t P,
                                 std::int64_t Ho, std::int64_t Wo, std::int64_t K, float* gw) {
  using B = xsimd::batch<float>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  B acc[NB][KW];
  MS_UNROLL for (int b = 0; b < NB; ++b)
    MS_UNROLL for (int j = 0; j < KW; ++j) acc[b][j] = B(0.0f);
  const auto in_row = simd::first_lanes<B>(Wo % L);  // the lanes of a row's partial batch
  for (std::int64_t oh = 0; oh < Ho; ++oh) {
    const float* src = xc + oh * row;
    const float* gro = gr + oh * Wo;
    for (std::int64_t ow = 0; ow < Wo; ow += L) {
      B gv[NB];
      if (ow + L <= Wo) {
        MS_UNROLL for (int b = 0; b < NB; ++b) gv[b] = B::load_unaligned(gro + b * P + ow);
      } else {  // a partial batch: read on into the plane's next rows while it stays in the plane
        const bool read_on = ow + L <= (Ho - oh) * Wo;
        MS_UNROLL for (int b = 0; b < NB; ++b) gv[b] = simd::load_first<B>(gro + b * P + ow, Wo - ow, in_row, read_on);
      }
      MS_UNROLL for (int j = 0; j < KW; ++j) {
        const B v = B::load_unaligned(src + ow + j);
        MS_UNROLL for (int b = 0; b < NB; ++b) acc[b][j] = xsimd::fma(gv[b], v, acc[b][j]);
      }
    }
  }
  MS_UNROLL for (int b = 0; b < NB; ++b)
    MS_UNROLL for (int j = 0; j < KW; ++j) gw[b * K + j] += xsimd::hadd(acc[b][j]);
}

/// Output channels per weight-gradient block: NB x KW accumulators, NB gradient batches and
/// the input batch within the level's vector registers.
template <int KW>
inline constexpr int kConvDirectGwBlock =
    std::max(1, std::min(4, ((sizeof(xsimd::batch<float>) == 64 ? 32 : 16) - 2) / (KW + 1)));

template <int KW>
inline void conv_direct_grad_weight_kw(const ConvDirectArgs& a) {
  const std::int64_t Cg = a.C / a.G, Og = a.O / a.G, K = Cg * a.kh * KW, P = a.Ho * a.Wo;
  const std::int64_t rows = a.Ho + a.kh - 1, row = conv_direct_row(a.Wo, KW);
  constexpr int NBmax = kConvDirectGwBlock<KW>;
  for (std::int64_t n = a.n0; n < a.n1; ++n)
    for (std::int64_t g = 0; g < a.G; ++g) {
      conv_direct_pad(a.x + (n * a.C + g * Cg) * a.H * a.W, a, row, a.scratch);
      for (std::int64_t o = 0; o < Og;) {
        const std::int64_t nb = std::min<std::int64_t>(NBmax, Og - o), oc = g * Og + o;
        const float* gr = a.g + (n * a.O + oc) * P;
        for (std::int64_t c = 0; c < Cg; ++c)
          for (std::int64_t i = 0; i < a.kh; ++i) {
            const float* xc = a.scratch + (c * rows + i) * row;
            float* gw = a.out + oc * K + (c * a.kh + i) * KW;
            auto run = [&]<int NB>() { conv_direct_gw_block<NB, KW>(xc, row, gr, P, a.Ho, a.Wo, K, gw); };
            switch (nb) {
              case 1: run.template operator()<1>(); break;
              case 2: if constexpr (NBmax >= 2) run.template operator()<2>(); break;
              case 3: if constexpr (NBmax >= 3) run.template operator()<3>(); break;
              default: if constexpr (NBmax >= 4) run.template operator()<4>(); break;
            }
          }
        o += nb;
      }
    }
}

/// out (O, Cg, kh, kw) += the weight gradient over images [n0, n1) (see ConvDirectArgs); kw
/// is one of conv_direct_grad_weight_width's.
inline void conv_direct_grad_weight(const void* args) {
  const ConvDirectArgs& a = *static_cast<const ConvDirectArgs*>(args);
  if (a.kw == 3) conv_direct_grad_weight_kw<3>(a);
  else conv_direct_grad_weight_kw<5>(a);
}

MS_ISA_FUNCTION("conv_direct_forward", &conv_direct_forward);
MS_ISA_FUNCTION("conv_direct_grad_weight", &conv_direct_grad_weight);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
