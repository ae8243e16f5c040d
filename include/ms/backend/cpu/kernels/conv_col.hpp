#pragma once
// The column kernels of the im2col convolutions (float32 and float64): im2col gathers the
// receptive fields of a block of images into the columns of a matrix that one GEMM
// multiplies; col2im_add is its adjoint, which adds such a matrix back into the image planes
// (the input gradient, the transposed convolution). Stride-1, dilation-1 layers copy and add
// whole output rows in SIMD batches; other layers take the general loops. Compiled once per
// CPU level (MS_ISA_NS) and bound by name (cpu::isa_function): col2im of LeNet's second layer
// ran at SSE2 width from the program's unit (rows of 10 floats: two batches and a masked
// third, where AVX-512 takes one). Includes nothing above core/.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of conv_im2col and conv_col2im_add: `images` images of a convolution's
/// channel group (Cg planes of H x W, the first at `x`, the next ones `image_stride`
/// elements apart) and the matrix `col` of Cg kh kw rows, `ld` elements apart, image i's
/// Ho Wo columns starting at column i Ho Wo. im2col writes col from x; col2im_add adds col
/// into x. Element type: that of the kernel (float or double).
struct ConvColArgs {
  const void* x = nullptr;  ///< im2col: read
  void* x_out = nullptr;    ///< col2im_add: added to
  const void* col = nullptr;  ///< col2im_add: read
  void* col_out = nullptr;    ///< im2col: written
  void* scratch = nullptr;    ///< conv_col_scratch() elements
  std::int64_t images = 1, image_stride = 0, ld = 0;
  std::int64_t Cg = 0, H = 0, W = 0, kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, Ho = 0, Wo = 0;
};

/// The scratch (elements) one call needs: a zero-bordered copy of an image's planes for a
/// padded im2col, or col2im_add's bordered plane (rows rounded up to the widest SIMD batch
/// of any level, 16 floats).
constexpr std::int64_t conv_col_scratch(std::int64_t Cg, std::int64_t H, std::int64_t W, std::int64_t ph,
                                        std::int64_t pw, std::int64_t kh, std::int64_t kw, std::int64_t Ho,
                                        std::int64_t Wo) {
  const std::int64_t padded = Cg * (H + 2 * ph) * (W + 2 * pw);
  const std::int64_t plane = (Ho + kh - 1) * ((Wo + 15) / 16 * 16 + kw - 1);
  return std::max(padded, plane) + 16;
}

namespace detail {
inline namespace MS_ISA_NS {

/// Range of output positions o in [0, n_out) whose input position o * s + off lies in [0, n_in).
inline void valid_range(std::int64_t off, std::int64_t s, std::int64_t n_in, std::int64_t n_out, std::int64_t& lo,
                        std::int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = n_in - off <= 0 ? 0 : (n_in - off - 1) / s + 1;
  lo = std::min(lo, n_out);
  hi = std::clamp(hi, lo, n_out);
}

/// dst[0, n) = src[0, n) in SIMD batches. With `spill` the last batch is whole: it also
/// reads and writes up to one batch past n (the caller's next run overwrites what it
/// wrote there). Inline, where a call to memmove per run of a few dozen elements
/// cost more than the copy (im2col of a 5 x 5 kernel is 25 such runs per output row).
template <class T>
inline void copy_run(const T* src, T* dst, std::int64_t n, bool spill) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  if (spill) {
    for (; i < n; i += L) B::load_unaligned(src + i).store_unaligned(dst + i);
    return;
  }
  for (; i + L <= n; i += L) B::load_unaligned(src + i).store_unaligned(dst + i);
  for (; i < n; ++i) dst[i] = src[i];
}

/// dst[0, n) += src[0, n) in SIMD batches.
template <class T>
inline void add_run(const T* src, T* dst, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) (B::load_unaligned(dst + i) + B::load_unaligned(src + i)).store_unaligned(dst + i);
  for (; i < n; ++i) dst[i] += src[i];
}

/// im2col of a stride-1, dilation-1 convolution over planes of hs x ws with no padding
/// left (the caller pads): each output row of a kernel offset is one run of Wo elements,
/// copied in whole batches that spill past the run where the spill stays within the image's
/// columns (later runs overwrite it) and the reads within the Cg planes at xg. A run of
/// fewer elements than a batch (LeNet's second layer: 10 floats at AVX-512) is then one
/// batch, not a scalar loop.
template <class T>
void im2col_unit(const T* xg, const ConvColArgs& a, std::int64_t hs, std::int64_t ws, T* col) {
  constexpr std::int64_t L = static_cast<std::int64_t>(xsimd::batch<T>::size);
  const std::int64_t Ho = a.Ho, Wo = a.Wo, P = Ho * Wo, whole = (Wo + L - 1) / L * L, readable = a.Cg * hs * ws;
  for (std::int64_t c = 0; c < a.Cg; ++c)
    for (std::int64_t ki = 0; ki < a.kh; ++ki)
      for (std::int64_t kj = 0; kj < a.kw; ++kj) {
        T* row = col + ((c * a.kh + ki) * a.kw + kj) * a.ld;
        const std::int64_t from = (c * hs + ki) * ws + kj;
        for (std::int64_t oh = 0; oh < Ho; ++oh)
          copy_run(xg + from + oh * ws, row + oh * Wo, Wo,
                   oh * Wo + whole <= P && from + oh * ws + whole <= readable);
      }
}

/// col (K, P; rows a.ld apart) = the receptive fields of one image's channel group xg.
template <class T>
void im2col_image(const T* xg, const ConvColArgs& a, T* col, T* scratch) {
  const std::int64_t P = a.Ho * a.Wo;
  if (P == 0) return;
  if (a.sh == 1 && a.sw == 1 && a.dh == 1 && a.dw == 1) {  // the common case: runs of whole rows
    if (a.ph == 0 && a.pw == 0) return im2col_unit(xg, a, a.H, a.W, col);
    // Padded: copy the planes into a zero-bordered scratch once, then read it as unpadded.
    const std::int64_t hs = a.H + 2 * a.ph, ws = a.W + 2 * a.pw;
    std::memset(scratch, 0, static_cast<std::size_t>(a.Cg * hs * ws) * sizeof(T));
    for (std::int64_t c = 0; c < a.Cg; ++c)
      for (std::int64_t h = 0; h < a.H; ++h)
        copy_run(xg + (c * a.H + h) * a.W, scratch + (c * hs + h + a.ph) * ws + a.pw, a.W, false);
    return im2col_unit(static_cast<const T*>(scratch), a, hs, ws, col);
  }
  for (std::int64_t c = 0; c < a.Cg; ++c) {
    const T* xc = xg + c * a.H * a.W;
    for (std::int64_t ki = 0; ki < a.kh; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki * a.dh - a.ph, a.sh, a.H, a.Ho, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < a.kw; ++kj) {
        T* row = col + ((c * a.kh + ki) * a.kw + kj) * a.ld;
        std::int64_t ow_lo, ow_hi;
        const std::int64_t woff = kj * a.dw - a.pw;
        valid_range(woff, a.sw, a.W, a.Wo, ow_lo, ow_hi);
        std::memset(row, 0, static_cast<std::size_t>(oh_lo * a.Wo) * sizeof(T));
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* r = row + oh * a.Wo;
          const T* xr = xc + (oh * a.sh + ki * a.dh - a.ph) * a.W;  // input row; column ow reads xr[ow * sw + woff]
          for (std::int64_t ow = 0; ow < ow_lo; ++ow) r[ow] = T(0);
          if (a.sw == 1) copy_run(xr + (ow_lo + woff), r + ow_lo, ow_hi - ow_lo, false);
          else
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) r[ow] = xr[ow * a.sw + woff];
          for (std::int64_t ow = ow_hi; ow < a.Wo; ++ow) r[ow] = T(0);
        }
        std::memset(row + oh_hi * a.Wo, 0, static_cast<std::size_t>(P - oh_hi * a.Wo) * sizeof(T));
      }
    }
  }
}

/// col2im_add of a stride-1, dilation-1 convolution: each channel's receptive-field rows are
/// added, in SIMD batches, into a zero-bordered plane (rows of whole batches plus kW - 1), the
/// last batch of a row through a lane mask, then the plane's interior is added to xg. Adding
/// straight into xg took runs of Wo elements one at a time below a batch (LeNet's second
/// layer: rows of 10), which made col2im 56% of the im2col input gradient.
template <class T>
void col2im_add_unit(const T* col, const ConvColArgs& a, T* xg, T* plane) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  const std::int64_t Ho = a.Ho, Wo = a.Wo, Hp = Ho + a.kh - 1, Wp = (Wo + L - 1) / L * L + a.kw - 1;
  const auto in_row = simd::first_lanes<B>(Wo % L);  // the lanes of a row's partial batch
  const std::int64_t tail = Wo % L == 0 ? Wo : Wo - Wo % L;  // where a row's partial batch starts
  for (std::int64_t c = 0; c < a.Cg; ++c) {
    std::memset(plane, 0, static_cast<std::size_t>(Hp * Wp) * sizeof(T));
    for (std::int64_t ki = 0; ki < a.kh; ++ki)
      for (std::int64_t kj = 0; kj < a.kw; ++kj) {
        const T* row = col + ((c * a.kh + ki) * a.kw + kj) * a.ld;
        // Rows oh one after another: each batch's read-modify-write has retired before the
        // next kernel offset adds to the same place (shifted by one column).
        for (std::int64_t oh = 0; oh < Ho; ++oh) {
          const T* src = row + oh * Wo;
          T* dst = plane + (oh + ki) * Wp + kj;
          std::int64_t ow = 0;
          for (; ow < tail; ow += L) (B::load_unaligned(dst + ow) + B::load_unaligned(src + ow)).store_unaligned(dst + ow);
          if (ow == Wo) continue;
          // The partial batch reads on into the image's next rows while it stays in its columns.
          const B v = simd::load_first<B>(src + ow, Wo - ow, in_row, ow + L <= (Ho - oh) * Wo);
          (B::load_unaligned(dst + ow) + v).store_unaligned(dst + ow);
        }
      }
    T* xc = xg + c * a.H * a.W;
    for (std::int64_t h = 0; h < a.H; ++h) add_run(plane + (h + a.ph) * Wp + a.pw, xc + h * a.W, a.W);
  }
}

#if defined(__AVX512F__)
/// col2im_add_unit for float at AVX-512, with its bits: each bordered-plane row that lands
/// in the image is summed in registers, 16 columns at a time, from masked loads of the
/// receptive-field rows shifted into place (in the same (ki, kj) order, from +0), and added
/// to xg through a lane mask; four rows at once, so that four chains of additions overlap.
/// No plane is cleared, read back or stored. benchmarks/conv, 1 thread: the im2col input
/// gradient of LeNet's second layer 572-593 -> 507-517 us, of a 16 -> 32 3x3 layer on
/// 14 x 14 1,514-1,529 -> 1,405-1,414 us.
inline void col2im_add_unit_avx512(const float* col, const ConvColArgs& a, float* xg) {
  constexpr int R = 4;
  const std::int64_t Ho = a.Ho, Wo = a.Wo, Wp = Wo + a.kw - 1;
  for (std::int64_t c = 0; c < a.Cg; ++c) {
    float* xc = xg + c * a.H * a.W;
    const float* cc = col + c * a.kh * a.kw * a.ld;
    for (std::int64_t w0 = 0; w0 < Wp; w0 += 16) {
      const __mmask16 m_x = simd::lanes_between(a.pw - w0, a.pw + a.W - w0);  // plane column w is x's w - pw
      if (m_x == 0) continue;
      for (std::int64_t h0 = 0; h0 < a.H; h0 += R) {  // x row h is the plane's h + ph
        const std::int64_t nr = std::min<std::int64_t>(R, a.H - h0);
        // Four named accumulators: as an array GCC kept them on the stack.
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
        for (std::int64_t ki = 0; ki < a.kh; ++ki)
          for (std::int64_t kj = 0; kj < a.kw; ++kj) {
            const __mmask16 m = simd::lanes_between(kj - w0, kj + Wo - w0);
            if (m == 0) continue;
            const float* src = cc + (ki * a.kw + kj) * a.ld + w0 - kj;
            const std::int64_t oh0 = h0 + a.ph - ki;  // the receptive-field row of x row h0 + i is oh0 + i
            auto add = [&](__m512& acc, std::int64_t i) {
              const std::int64_t oh = oh0 + i;
              if (i < nr && oh >= 0 && oh < Ho) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, src + oh * Wo));
            };
            add(acc0, 0), add(acc1, 1), add(acc2, 2), add(acc3, 3);
          }
        const __m512 acc[R] = {acc0, acc1, acc2, acc3};
        for (std::int64_t i = 0; i < nr; ++i) {
          float* xr = xc + (h0 + i) * a.W + w0 - a.pw;
          _mm512_mask_storeu_ps(xr, m_x, _mm512_add_ps(_mm512_maskz_loadu_ps(m_x, xr), acc[i]));
        }
      }
    }
  }
}
#endif

/// xg (Cg, H, W) += the receptive fields in col (K, P; rows a.ld apart): the adjoint of im2col.
template <class T>
void col2im_add_image(const T* col, const ConvColArgs& a, T* xg, T* scratch) {
  if (a.Ho * a.Wo == 0) return;
  if (a.sh == 1 && a.sw == 1 && a.dh == 1 && a.dw == 1) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) return col2im_add_unit_avx512(col, a, xg);
#endif
    return col2im_add_unit(col, a, xg, scratch);
  }
  for (std::int64_t c = 0; c < a.Cg; ++c) {
    T* xc = xg + c * a.H * a.W;
    for (std::int64_t ki = 0; ki < a.kh; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki * a.dh - a.ph, a.sh, a.H, a.Ho, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < a.kw; ++kj) {
        const T* row = col + ((c * a.kh + ki) * a.kw + kj) * a.ld;
        std::int64_t ow_lo, ow_hi;
        const std::int64_t woff = kj * a.dw - a.pw;
        valid_range(woff, a.sw, a.W, a.Wo, ow_lo, ow_hi);
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* r = row + oh * a.Wo;
          T* xr = xc + (oh * a.sh + ki * a.dh - a.ph) * a.W;
          if (a.sw == 1) add_run(r + ow_lo, xr + ow_lo + woff, ow_hi - ow_lo);
          else
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) xr[ow * a.sw + woff] += r[ow];
        }
      }
    }
  }
}

/// im2col of a.images images (see ConvColArgs).
template <class T>
void conv_im2col(const void* args) {
  const ConvColArgs& a = *static_cast<const ConvColArgs*>(args);
  const std::int64_t P = a.Ho * a.Wo;
  for (std::int64_t i = 0; i < a.images; ++i)
    im2col_image(static_cast<const T*>(a.x) + i * a.image_stride, a, static_cast<T*>(a.col_out) + i * P,
                 static_cast<T*>(a.scratch));
}

/// col2im_add of a.images images (see ConvColArgs).
template <class T>
void conv_col2im_add(const void* args) {
  const ConvColArgs& a = *static_cast<const ConvColArgs*>(args);
  const std::int64_t P = a.Ho * a.Wo;
  for (std::int64_t i = 0; i < a.images; ++i)
    col2im_add_image(static_cast<const T*>(a.col) + i * P, a, static_cast<T*>(a.x_out) + i * a.image_stride,
                     static_cast<T*>(a.scratch));
}

MS_ISA_FUNCTION("conv_im2col_f32", &conv_im2col<float>);
MS_ISA_FUNCTION("conv_im2col_f64", &conv_im2col<double>);
MS_ISA_FUNCTION("conv_col2im_add_f32", &conv_col2im_add<float>);
MS_ISA_FUNCTION("conv_col2im_add_f64", &conv_col2im_add<double>);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
