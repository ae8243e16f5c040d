#pragma once
// conv2d on NCHW tensors (float32 and float64): im2col over blocks of images, parallel over
// the blocks, with its GEMMs on the ms::cpu_gemm() path and its column kernels compiled per
// CPU level (backend/cpu/kernels/conv_col.hpp), ms's direct kernels
// (backend/cpu/kernels/conv_direct.hpp), or oneDNN's convolution primitives in oneDNN's
// blocked layouts, per convolution pass as ms::cpu_conv() decides (see ops/dnnl.hpp).
// Belongs here: its definition, inference, kernels and cost, the im2col drivers, and the
// backward ops its gradient rule needs (conv2d_grad_input, conv2d_grad_weight). The gradient table rows live in autograd/nn_rules.hpp.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/parallel.hpp"
#include "../../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../../backend/cpu/kernels/conv_col.hpp"
#include "../../backend/cpu/kernels/conv_direct.hpp"
#include "../../core/simd.hpp"
#include "../isa_dispatch.hpp"
#endif
#include "../dispatch.hpp"
#include "../dnnl.hpp"
#include "../linalg.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// 2-D convolution (cross-correlation, like PyTorch) of x (N, C, H, W) with weight
/// (O, C / groups, kH, kW) and an optional bias (O,); result (N, O, Ho, Wo) with
/// Ho = (H + 2 * padding.h - dilation.h * (kH - 1) - 1) / stride.h + 1.
MS_IMPL AnyTensor conv2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b = AnyTensor(), Int2 stride = 1,
                         Int2 padding = 0, Int2 dilation = 1, std::int64_t groups = 1);

}  // namespace ms::ops

namespace ms {
/// 2-D convolution (see ops::conv2d); pass an empty tensor for no bias.
template <Element T>
Tensor<T> conv2d(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b = Tensor<T>(), Int2 stride = 1,
                 Int2 padding = 0, Int2 dilation = 1, std::int64_t groups = 1) {
  return ops::conv2d(x, w, b, stride, padding, dilation, groups);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of conv2d (see ops/attr_struct.hpp).
struct Conv2dAttrs {
  Int2 stride = 1, padding = 0, dilation = 1;
  std::int64_t groups = 1;
  static auto fields() {
    return std::tuple{field("stride", &Conv2dAttrs::stride, 1), field("padding", &Conv2dAttrs::padding, 0),
                      field("dilation", &Conv2dAttrs::dilation, 1), field("groups", &Conv2dAttrs::groups, 1)};
  }
  void validate(const OpDef& op) const {
    const Int2 &s = stride, &p = padding, &d = dilation;
    MS_CHECK(s.h >= 1 && s.w >= 1, ValueError, "{}: stride must be positive, got ({}, {})", op.name, s.h, s.w);
    MS_CHECK(d.h >= 1 && d.w >= 1, ValueError, "{}: dilation must be positive, got ({}, {})", op.name, d.h, d.w);
    MS_CHECK(p.h >= 0 && p.w >= 0, ValueError, "{}: padding must be non-negative, got ({}, {})", op.name, p.h, p.w);
    MS_CHECK(groups >= 1, ValueError, "{}: groups must be positive, got {}", op.name, groups);
  }
};
/// conv2d_grad_input: conv2d's attributes and the forward input's shape.
struct Conv2dGradInputAttrs : Conv2dAttrs {
  IntList input_shape;
  static auto fields() {
    return std::tuple_cat(Conv2dAttrs::fields(),
                          std::tuple{required_field("input_shape", &Conv2dGradInputAttrs::input_shape)});
  }
  void validate(const OpDef& op) const {
    Conv2dAttrs::validate(op);
    detail::shape_n(op, "input_shape", input_shape, 4);
  }
};
/// conv2d_grad_weight: conv2d's attributes and the weight's shape.
struct Conv2dGradWeightAttrs : Conv2dAttrs {
  IntList weight_shape;
  static auto fields() {
    return std::tuple_cat(Conv2dAttrs::fields(),
                          std::tuple{required_field("weight_shape", &Conv2dGradWeightAttrs::weight_shape)});
  }
  void validate(const OpDef& op) const {
    Conv2dAttrs::validate(op);
    detail::shape_n(op, "weight_shape", weight_shape, 4);
  }
};

namespace detail {
#if MS_IMPL_BODIES
inline Attrs conv_attrs(Int2 stride, Int2 padding, Int2 dilation, std::int64_t groups) {
  return to_attrs(Conv2dAttrs{stride, padding, dilation, groups});
}
#endif

#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// Splits [0, n) into `chunks` nearly equal ranges; range c is [chunk_begin(c), chunk_begin(c + 1)).
inline std::int64_t chunk_begin(std::int64_t n, std::int64_t chunks, std::int64_t c) { return n * c / chunks; }

// ---- conv2d -------------------------------------------------------------------------------------

/// The geometry of one convolution (shared by the forward and both backward ops).
struct ConvGeom {
  std::int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, G, Ho, Wo;
  std::int64_t Cg() const { return C / G; }
  std::int64_t Og() const { return O / G; }
  std::int64_t K() const { return Cg() * kh * kw; }  ///< rows of the im2col matrix
  std::int64_t P() const { return Ho * Wo; }         ///< columns of the im2col matrix
};

/// Validates the shapes of a convolution of an input of shape xs with a weight of shape ws
/// under the (validated) attributes a.
inline ConvGeom conv_geom(const OpDef& op, const Shape& xs, const Shape& ws, const Conv2dAttrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(ws.rank() == 4, ShapeError, "{}: weight must be 4-D (out_channels, in_channels / groups, kH, kW), got shape {}",
           op.name, shape_str(ws));
  const Int2 s = a.stride, p = a.padding, d = a.dilation;
  const std::int64_t G = a.groups;
  ConvGeom q{xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], s.h, s.w, p.h, p.w, d.h, d.w, G, 0, 0};
  MS_CHECK(q.C % G == 0 && q.O % G == 0, ValueError,
           "{}: groups {} must divide both in_channels {} of input {} and out_channels {} of weight {}", op.name, G, q.C,
           shape_str(xs), q.O, shape_str(ws));
  MS_CHECK(ws[1] == q.C / G, ShapeError,
           "{}: weight {} expects {} input channels per group, but input {} has {} channels in {} group(s)", op.name,
           shape_str(ws), ws[1], shape_str(xs), q.C, G);
  const std::int64_t ekh = q.dh * (q.kh - 1) + 1, ekw = q.dw * (q.kw - 1) + 1;
  MS_CHECK(q.kh >= 1 && q.kw >= 1 && ekh <= q.H + 2 * q.ph && ekw <= q.W + 2 * q.pw, ShapeError,
           "{}: kernel ({}, {}) with dilation ({}, {}) does not fit the padded input ({}, {}) of input {}", op.name,
           q.kh, q.kw, q.dh, q.dw, q.H + 2 * q.ph, q.W + 2 * q.pw, shape_str(xs));
  q.Ho = (q.H + 2 * q.ph - ekh) / q.sh + 1;
  q.Wo = (q.W + 2 * q.pw - ekw) / q.sw + 1;
  return q;
}
/// The same, reading the attributes of a node of `op` as conv2d's.
inline ConvGeom conv_geom(const OpDef& op, const Shape& xs, const Shape& ws, const Attrs& a) {
  return conv_geom(op, xs, ws, attrs_as<Conv2dAttrs>(op, a));
}

/// Images per GEMM in the convolution kernels. One image of a small layer is a thin GEMM
/// (LeNet's first layer: 6 x 25 times 25 x 784) that a GEMM runs far below its peak; the
/// receptive fields of a block of images side by side give about 4096 columns instead,
/// as long as the block's im2col matrix (K x columns) stays within half of a 1 MiB L2
/// in float (131072 elements): LeNet's second layer (K = 150) at 4096 columns wrote and
/// reread 2.4 MB through the last-level cache. Fixed by the geometry alone, so the
/// results do not depend on the thread count.
inline std::int64_t conv_block_images(const ConvGeom& q) {
  const std::int64_t P = std::max<std::int64_t>(1, q.P()), K = std::max<std::int64_t>(1, q.K());
  const std::int64_t by_width = 4096 / P, by_cache = 131072 / (K * P);
  return std::clamp<std::int64_t>(std::min(by_width, by_cache), 1, std::max<std::int64_t>(1, q.N));
}

/// The column kernels (backend/cpu/kernels/conv_col.hpp) of the CPU level in force for
/// convolution q and element type T, looked up once per op run; each call takes a block of
/// images and the calling thread's scratch().
template <class T>
struct ConvColumns {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  ConvColArgs geom;
  IsaFn to_col, add_from_col;

  explicit ConvColumns(const ConvGeom& q)
      : to_col(cpu::isa_function_for<T>("conv_im2col_f32", "conv_im2col_f64", &conv_im2col<T>)),
        add_from_col(cpu::isa_function_for<T>("conv_col2im_add_f32", "conv_col2im_add_f64", &conv_col2im_add<T>)) {
    geom.image_stride = q.C * q.H * q.W;
    geom.Cg = q.Cg(), geom.H = q.H, geom.W = q.W, geom.kh = q.kh, geom.kw = q.kw, geom.sh = q.sh, geom.sw = q.sw;
    geom.ph = q.ph, geom.pw = q.pw, geom.dh = q.dh, geom.dw = q.dw, geom.Ho = q.Ho, geom.Wo = q.Wo;
  }
  /// The calling thread's scratch for these kernels: kept from call to call (small, and a
  /// fresh allocation per call showed up as page faults next to the large col matrix).
  T* scratch() const {
    thread_local std::vector<T> buf;
    const auto n = static_cast<std::size_t>(
        conv_col_scratch(geom.Cg, geom.H, geom.W, geom.ph, geom.pw, geom.kh, geom.kw, geom.Ho, geom.Wo));
    if (buf.size() < n) buf.resize(n);
    return buf.data();
  }
  /// col (K, nb P; rows ld apart) = the receptive fields of channel group g of images
  /// [n0, n0 + nb) of x.
  void im2col(const T* x, std::int64_t n0, std::int64_t nb, std::int64_t g, T* col, std::int64_t ld) const {
    ConvColArgs a = geom;
    a.x = x + n0 * geom.image_stride + g * geom.Cg * geom.H * geom.W;
    a.col_out = col, a.scratch = scratch(), a.images = nb, a.ld = ld;
    to_col(&a);
  }
  /// Channel group g of images [n0, n0 + nb) of x += col2im(col) (the adjoint of im2col).
  void col2im_add(const T* col, std::int64_t ld, T* x, std::int64_t n0, std::int64_t nb, std::int64_t g) const {
    ConvColArgs a = geom;
    a.x_out = x + n0 * geom.image_stride + g * geom.Cg * geom.H * geom.W;
    a.col = col, a.scratch = scratch(), a.images = nb, a.ld = ld;
    add_from_col(&a);
  }
};

/// Runs body(n0, nb, col, buf) for the image blocks [n0, n0 + nb) of the batch, in parallel
/// over blocks; col holds K x (nb P) and buf Og x (nb P) elements of per-thread scratch.
template <class T, class Body>
void for_each_conv_block(const ConvGeom& q, Body&& body) {
  const std::int64_t B = conv_block_images(q), blocks = (q.N + B - 1) / B;
  const std::int64_t cols = B * q.P();
  parallel_for(blocks, 1, [&](std::int64_t bb, std::int64_t be) {
    // Scratch that every use writes in full before reading: not zeroed (for a 16 x 150
    // kernel that memset was 2.4 MB per call).
    auto col = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(q.K() * cols));
    auto buf = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(q.Og() * cols));
    for (std::int64_t b = bb; b < be; ++b) {
      const std::int64_t n0 = b * B;
      body(n0, std::min(B, q.N - n0), col.get(), buf.get());
    }
  }, 1);
}

/// buf (Og, nb P) <- g[n0 .. n0 + nb) of group g0 (each image's (Og, P) block side by side).
template <class T>
void gather_conv_grad(const T* gp, const ConvGeom& q, std::int64_t n0, std::int64_t nb, std::int64_t g0, T* buf) {
  const std::int64_t P = q.P(), Og = q.Og(), ld = nb * P;
  for (std::int64_t i = 0; i < nb; ++i)
    for (std::int64_t o = 0; o < Og; ++o) {
      const T* src = gp + ((n0 + i) * q.O + g0 * Og + o) * P;
      std::copy(src, src + P, buf + o * ld + i * P);
    }
}

/// Whether no dimension of the convolution is empty (oneDNN's primitives need that; an empty
/// one is left to ms's kernels, which write the zeros or nothing the result needs).
inline bool conv_nonempty(const ConvGeom& q) { return q.N > 0 && q.C > 0 && q.O > 0 && q.Ho > 0 && q.Wo > 0; }

/// The three passes of a convolution (as oneDNN names them).
enum class ConvPass : std::int64_t { forward, grad_input, grad_weight };

/// Whether a float32 convolution pass runs on ms's direct kernels: ms::cpu_conv() is
/// CpuConv::direct, or CpuConv::automatic and conv_prefers_direct says so; and the kernels
/// compute the pass (stride 1, dilation 1, not the input gradient; for the weight gradient
/// a kernel width they are compiled for) and no dimension is empty.
inline bool conv_on_direct(const ConvGeom& q, ConvPass pass) {
  if (!conv_nonempty(q) || pass == ConvPass::grad_input || q.sh != 1 || q.sw != 1 || q.dh != 1 || q.dw != 1)
    return false;
  if (pass == ConvPass::grad_weight && !conv_direct_grad_weight_width(q.kw)) return false;
  const CpuConv c = cpu_conv();
  return c == CpuConv::direct || (c == CpuConv::automatic && conv_prefers_direct(q.Cg(), q.Og(), q.kh, q.kw));
}

/// A float32 forward pass (y = conv(x, w) + bias, bias elements bs apart) or weight gradient
/// (out = the gradient from g and x) on the direct kernels of the CPU level in force. The
/// forward pass splits the batch over threads; the weight gradient sums fixed chunks of
/// the batch (kConvWeightChunks, below) in a fixed order, so its bits do not depend on the
/// thread count.
inline void conv_direct_run(ConvPass pass, const ConvGeom& q, const float* x, const float* w, const float* bias,
                            std::int64_t bs, const float* g, float* out);

#if defined(MS_HAVE_DNNL)
/// Whether a float convolution pass goes to oneDNN's convolution primitives: ms::cpu_conv()
/// is CpuConv::dnnl, or CpuConv::automatic, the direct kernels do not take it, and
/// conv_prefers_dnnl says so; and no dimension is empty. Otherwise ms's im2col kernels run it.
inline bool conv_on_dnnl(const ConvGeom& q, ConvPass pass) {
  const CpuConv c = cpu_conv();
  return conv_nonempty(q) &&
         (c == CpuConv::dnnl || (c == CpuConv::automatic && !conv_on_direct(q, pass) &&
                                 conv_prefers_dnnl(q.Cg(), q.Og(), pass == ConvPass::grad_input)));
}

/// One pass of a float convolution on oneDNN: forward y = conv(a = x, b = w) + bias;
/// grad_input out = the input gradient of a = g with b = w; grad_weight out = the weight
/// gradient of a = g with b = x. At the API the operands are ms's contiguous NCHW / OIHW
/// buffers; oneDNN chooses the layouts its kernels run in (format "any": for LeNet's second
/// layer, nChw16c and its direct AVX-512 kernels; the weight gradient's activations NHWC, see
/// below), and the operands it wants in another layout
/// are reordered into staging buffers and back. On plain layouts oneDNN falls back to one
/// im2col GEMM per image, 1.5-6x slower (benchmarks/conv). The primitive and its reorders
/// come from the cache (made on first use of the geometry).
inline void conv_dnnl(ConvPass pass, const OpDef& op, const ConvGeom& q, const void* a, const void* b,
                      const void* bias, void* out, dnnl_data_type_t dt = dnnl_f32) {
  const auto shapes = [&] {
    return MS_FORMAT("input ({}, {}, {}, {}), weight ({}, {}, {}, {}), output ({}, {}, {}, {})", q.N, q.C, q.H, q.W,
                       q.O, q.Cg(), q.kh, q.kw, q.N, q.O, q.Ho, q.Wo);
  };
  const bool has_bias = pass == ConvPass::forward && bias != nullptr;
  const DnnlKey key{static_cast<std::int64_t>(pass), q.N, q.C, q.H, q.W, q.O, q.kh, q.kw, q.sh, q.sw,
                    q.ph, q.pw, q.dh, q.dw, q.G, has_bias ? 1 : 0, dt};
  const dnnl_memory_desc_t src = dnnl_plain_md({q.N, q.C, q.H, q.W}, dnnl_nchw, op.name, "", dt);
  const dnnl_memory_desc_t dst = dnnl_plain_md({q.N, q.O, q.Ho, q.Wo}, dnnl_nchw, op.name, "", dt);
  const dnnl_memory_desc_t wei = q.G > 1 ? dnnl_plain_md({q.G, q.Og(), q.Cg(), q.kh, q.kw}, dnnl_goihw, op.name, "", dt)
                                         : dnnl_plain_md({q.O, q.C, q.kh, q.kw}, dnnl_oihw, op.name, "", dt);
  const dnnl_memory_desc_t bmd = dnnl_plain_md({q.O}, dnnl_a, op.name, "", dt);
  // The operands in the order of the arguments: a, b, out.
  const dnnl_memory_desc_t* plain[3] = {pass == ConvPass::forward ? &src : &dst,
                                        pass == ConvPass::grad_weight ? &src : &wei,
                                        pass == ConvPass::forward ? &dst : pass == ConvPass::grad_input ? &src : &wei};
  const dnnl_dims_t strides{q.sh, q.sw}, dilates{q.dh - 1, q.dw - 1}, pad{q.ph, q.pw};
  auto prim = DnnlCache::instance().get(key, [&] {
    const std::string sh = shapes();
    auto with_tag = [&](const dnnl_memory_desc_t& md, dnnl_format_tag_t tag) {
      dnnl_memory_desc_t r;
      dnnl_check(dnnl_memory_desc_init_by_tag(&r, md.ndims, md.dims, dt, tag), op.name, "memory descriptor", sh);
      return r;
    };
    // The weight gradient takes its activations channels-last (NHWC): with format "any"
    // oneDNN 2.6 blocks the channels by 8 or 16 and, for a channel count that is not a
    // multiple of 16, runs its AVX2 kernels even on an AVX-512 CPU. Measured (AMD Zen 4,
    // batch 64, 1 thread, primitive alone, any -> NHWC): LeNet's 6 -> 16 5x5 on 14x14 490 ->
    // 274 us; 8 -> 16 3x3 303 -> 259; 12 -> 32 1159 -> 902; 24 -> 32 2051 -> 1414; 16 -> 32
    // 1029 -> 941. Below 4 input channels oneDNN has first-layer kernels for the plain
    // layout and the primitive times tie (1 -> 32 5x5 on 28x28: 667 us either way), but
    // the transpose of the output gradient into NHWC costs more than its blocking: the
    // whole pass 1,000 us against 900. Measured for one group, in float32.
    const bool channels_last = pass == ConvPass::grad_weight && q.G == 1 && q.C >= 4 && dt == dnnl_f32;
    const dnnl_format_tag_t act = channels_last ? dnnl_nhwc : dnnl_format_tag_any;
    const dnnl_memory_desc_t xs = with_tag(src, act), ys = with_tag(dst, act), ws = with_tag(wei, dnnl_format_tag_any);
    dnnl_convolution_desc_t fwd;
    dnnl_check(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &xs, &ws,
                                                          has_bias ? &bmd : nullptr, &ys, strides, dilates, pad, pad),
               op.name, "convolution descriptor", sh);
    std::shared_ptr<DnnlPrimitive> p;
    if (pass == ConvPass::forward) {
      p = make_dnnl_primitive(&fwd, nullptr, op.name, sh);
    } else {
      // The backward passes need the forward primitive descriptor as a hint.
      dnnl_primitive_desc_t hint = nullptr;
      dnnl_check(dnnl_primitive_desc_create(&hint, &fwd, nullptr, dnnl_engine(), nullptr), op.name,
                 "forward hint descriptor", sh);
      dnnl_convolution_desc_t bwd;
      dnnl_status_t st =
          pass == ConvPass::grad_input
              ? dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &xs, &ws, &ys, strides,
                                                                 dilates, pad, pad)
              : dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &xs, &ws, nullptr,
                                                                    &ys, strides, dilates, pad, pad);
      if (st != dnnl_success) dnnl_primitive_desc_destroy(hint);
      dnnl_check(st, op.name, "backward convolution descriptor", sh);
      try {
        p = make_dnnl_primitive(&bwd, hint, op.name, sh);
      } catch (...) {
        dnnl_primitive_desc_destroy(hint);
        throw;
      }
      dnnl_primitive_desc_destroy(hint);
    }
    // The layouts oneDNN chose, and the reorders to and from ms's.
    static constexpr dnnl_query_t kQuery[3][3] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
        {dnnl_query_diff_dst_md, dnnl_query_src_md, dnnl_query_diff_weights_md}};
    for (int i = 0; i < 3; ++i) {
      const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(p->pd, kQuery[static_cast<int>(pass)][i], 0);
      MS_CHECK(md != nullptr, BackendError, "{}: oneDNN did not report the layout of operand {} of its convolution ({})",
               op.name, i, sh);
      if (dnnl_memory_desc_equal(md, plain[i])) continue;
      p->edges[static_cast<std::size_t>(i)].md = *md;
      p->edges[static_cast<std::size_t>(i)].reorder =
          i < 2 ? make_dnnl_reorder(*plain[i], *md, op.name, sh) : make_dnnl_reorder(*md, *plain[i], op.name, sh);
    }
    return p;
  });
  DnnlStaging<3> staging;
  // An input oneDNN wants in its own layout is reordered into a staging buffer first.
  auto stage_in = [&](int i, const void* data) -> std::pair<const dnnl_memory_desc_t*, const void*> {
    const DnnlPrimitive::Edge& e = prim->edges[static_cast<std::size_t>(i)];
    if (!e.reorder) return {plain[i], data};
    void* buf = staging.take(dnnl_memory_desc_get_size(&e.md));
    dnnl_execute<2>(*e.reorder, {{{DNNL_ARG_FROM, plain[i], data}, {DNNL_ARG_TO, &e.md, buf}}}, op.name, shapes);
    return {&e.md, buf};
  };
  const auto [amd, ad] = stage_in(0, a);
  const auto [bmd2, bd] = stage_in(1, b);
  const DnnlPrimitive::Edge& oe = prim->edges[2];
  const dnnl_memory_desc_t* omd = oe.reorder ? &oe.md : plain[2];
  void* od = oe.reorder ? staging.take(dnnl_memory_desc_get_size(&oe.md)) : out;
  switch (pass) {
    case ConvPass::forward:
      if (has_bias)
        dnnl_execute<4>(*prim, {{{DNNL_ARG_SRC, amd, ad}, {DNNL_ARG_WEIGHTS, bmd2, bd}, {DNNL_ARG_BIAS, &bmd, bias},
                                 {DNNL_ARG_DST, omd, od}}}, op.name, shapes);
      else
        dnnl_execute<3>(*prim, {{{DNNL_ARG_SRC, amd, ad}, {DNNL_ARG_WEIGHTS, bmd2, bd}, {DNNL_ARG_DST, omd, od}}},
                        op.name, shapes);
      break;
    case ConvPass::grad_input:
      dnnl_execute<3>(*prim, {{{DNNL_ARG_DIFF_DST, amd, ad}, {DNNL_ARG_WEIGHTS, bmd2, bd}, {DNNL_ARG_DIFF_SRC, omd, od}}},
                      op.name, shapes);
      break;
    case ConvPass::grad_weight:
      dnnl_execute<3>(*prim, {{{DNNL_ARG_DIFF_DST, amd, ad}, {DNNL_ARG_SRC, bmd2, bd}, {DNNL_ARG_DIFF_WEIGHTS, omd, od}}},
                      op.name, shapes);
      break;
  }
  if (oe.reorder) dnnl_execute<2>(*oe.reorder, {{{DNNL_ARG_FROM, omd, od}, {DNNL_ARG_TO, plain[2], out}}}, op.name, shapes);
}
#endif

/// Runs a convolution pass called with 16-bit floats and returns true (false for other
/// dtypes): bfloat16 on oneDNN's bfloat16 primitives where half_on_dnnl (the dnnl GEMM path
/// on a CPU with bfloat16 units; float32 accumulation), otherwise in float32 (upcast).
inline bool conv_half(ConvPass pass, const KernelArgs& k, [[maybe_unused]] const ConvGeom& q) {
  if (!is_half_float(k.in[0].dtype())) return false;
#if defined(MS_HAVE_DNNL)
  if (half_on_dnnl(k.in[0].dtype()) && conv_nonempty(q)) {
    const AnyTensor a = contiguous_raw(k.in[0]), b = contiguous_raw(k.in[1]);
    const AnyTensor bias = pass == ConvPass::forward && k.in.size() > 2 ? contiguous_raw(k.in[2]) : AnyTensor();
    conv_dnnl(pass, k.op, q, a.raw_data(), b.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
              k.out[0].raw_data(), dnnl_bf16);
    return true;
  }
#endif
  run_upcast_f32(k, k.op.kernel);
  return true;
}

template <class T>
void conv2d_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor x = contiguous_raw(k.in[0]), w = contiguous_raw(k.in[1]);
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  const T* bp = k.in.size() > 2 ? static_cast<const T*>(k.in[2].raw_data()) : nullptr;
  const std::int64_t bs = bp ? k.in[2].strides()[0] : 0;
  const std::int64_t Og = q.Og(), K = q.K(), P = q.P();
  if (k.out[0].numel() == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_direct(q, ConvPass::forward)) return conv_direct_run(ConvPass::forward, q, xp, wp, bp, bs, nullptr, yp);
  }
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q, ConvPass::forward)) {
      const AnyTensor b = bp ? contiguous_raw(k.in[2]) : AnyTensor();
      conv_dnnl(ConvPass::forward, k.op, q, xp, wp, bp ? static_cast<const float*>(b.raw_data()) : nullptr, yp);
      return;
    }
  }
#endif
  const ConvColumns<T> cols(q);
  for_each_conv_block<T>(q, [&](std::int64_t n0, std::int64_t nb, T* col, T* buf) {
    const std::int64_t ld = nb * P;
    for (std::int64_t g = 0; g < q.G; ++g) {
      cols.im2col(xp, n0, nb, g, col, ld);
      // buf (Og, ld) = w_g (Og, K) @ col (K, ld), on the selected GEMM path.
      gemm(wp + g * Og * K, MatRef{Og, K, false, std::max<std::int64_t>(K, 1)}, col, MatRef{K, ld, false, ld}, buf, false);
      for (std::int64_t i = 0; i < nb; ++i)
        for (std::int64_t o = 0; o < Og; ++o) {
          const T* src = buf + o * ld + i * P;
          T* dst = yp + ((n0 + i) * q.O + g * Og + o) * P;
          if (bp) {
            const T bv = bp[(g * Og + o) * bs];
            for (std::int64_t j = 0; j < P; ++j) dst[j] = src[j] + bv;
          } else {
            std::copy(src, src + P, dst);
          }
        }
    }
  });
}

/// gx (N, C, H, W) = col2im(w^T g) on ms's kernels: the input gradient of the convolution q
/// (N, O, Ho, Wo) and the transposed convolution's output.
template <class T>
void conv_grad_input_columns(const ConvGeom& q, const T* gp, const T* wp, T* xp) {
  const std::int64_t Og = q.Og(), K = q.K(), P = q.P();
  const ConvColumns<T> cols(q);
  for_each_conv_block<T>(q, [&](std::int64_t n0, std::int64_t nb, T* col, T* buf) {
    const std::int64_t ld = nb * P;
    std::fill(xp + n0 * q.C * q.H * q.W, xp + (n0 + nb) * q.C * q.H * q.W, T(0));
    for (std::int64_t g0 = 0; g0 < q.G; ++g0) {
      gather_conv_grad(gp, q, n0, nb, g0, buf);
      // col (K, ld) = w_g^T (K, Og; w_g read column-major) @ buf (Og, ld).
      gemm(wp + g0 * Og * K, MatRef{K, Og, true, std::max<std::int64_t>(K, 1)}, buf, MatRef{Og, ld, false, ld}, col, false);
      cols.col2im_add(col, ld, xp, n0, nb, g0);
    }
  });
}

/// gx (N, C, H, W) = the adjoint of the convolution applied to g (N, O, Ho, Wo): col2im(w^T g).
template <class T>
void conv2d_grad_input_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor g = contiguous_raw(k.in[0]), w = contiguous_raw(k.in[1]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* xp = static_cast<T*>(k.out[0].raw_data());
  if (k.out[0].numel() == 0) return;
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q, ConvPass::grad_input)) return conv_dnnl(ConvPass::grad_input, k.op, q, gp, wp, nullptr, xp);
  }
#endif
  conv_grad_input_columns(q, gp, wp, xp);
}

/// Batches per partial sum of conv2d_grad_weight: fixed, so the summation order (and the
/// rounding) does not depend on the thread count.
inline constexpr std::int64_t kConvWeightChunks = 8;

/// out[0, n) = the sum of the `chunks` partial results in part (n elements each), in chunk order.
template <class T>
void sum_chunks(const std::vector<T>& part, std::int64_t chunks, std::int64_t n, T* out) {
  std::copy(part.begin(), part.begin() + n, out);
  for (std::int64_t c = 1; c < chunks; ++c)
    for (std::int64_t i = 0; i < n; ++i) out[i] += part[static_cast<std::size_t>(c * n + i)];
}

/// gw (O, Cg, kH, kW) = sum over the batch of g_n (Og, P) @ im2col(x_n)^T, per group; the
/// images of a chunk are taken in blocks (one GEMM per block, as in the forward kernel).
template <class T>
void conv2d_grad_weight_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  T* wp = static_cast<T*>(k.out[0].raw_data());
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_direct(q, ConvPass::grad_weight) && k.out[0].numel() > 0)
      return conv_direct_run(ConvPass::grad_weight, q, xp, nullptr, nullptr, 0, gp, wp);
  }
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q, ConvPass::grad_weight) && k.out[0].numel() > 0) return conv_dnnl(ConvPass::grad_weight, k.op, q, gp, xp, nullptr, wp);
  }
#endif
  const std::int64_t Og = q.Og(), K = q.K(), P = q.P(), wsize = q.O * K;
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min(q.N, kConvWeightChunks));
  const std::int64_t B = conv_block_images(q);
  const ConvColumns<T> columns(q);
  std::vector<T> part(static_cast<std::size_t>(chunks * wsize), T(0));
  parallel_for(chunks, 1, [&](std::int64_t cb, std::int64_t ce) {
    const std::int64_t cols = std::min(B, (q.N + chunks - 1) / chunks) * P;
    auto col = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(K * cols));
    auto buf = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(Og * cols));
    for (std::int64_t c = cb; c < ce; ++c) {
      T* acc = part.data() + c * wsize;
      const std::int64_t end = chunk_begin(q.N, chunks, c + 1);
      for (std::int64_t n0 = chunk_begin(q.N, chunks, c); n0 < end; n0 += B) {
        const std::int64_t nb = std::min(B, end - n0), ld = nb * P;
        for (std::int64_t g0 = 0; g0 < q.G; ++g0) {
          columns.im2col(xp, n0, nb, g0, col.get(), ld);
          gather_conv_grad(gp, q, n0, nb, g0, buf.get());
          // acc_g (Og, K) += buf (Og, ld) @ col^T (ld, K; col read column-major).
          gemm(buf.get(), MatRef{Og, ld, false, ld}, col.get(), MatRef{ld, K, true, ld}, acc + g0 * Og * K, true);
        }
      }
    }
  }, 1);
  sum_chunks(part, chunks, wsize, wp);
}

inline void conv_direct_run(ConvPass pass, const ConvGeom& q, const float* x, const float* w, const float* bias,
                            std::int64_t bs, const float* g, float* out) {
  ConvDirectArgs a;
  a.x = x, a.w = w, a.bias = bias, a.bias_stride = bs, a.g = g, a.out = out;
  a.C = q.C, a.H = q.H, a.W = q.W, a.O = q.O, a.G = q.G, a.kh = q.kh, a.kw = q.kw, a.ph = q.ph, a.pw = q.pw;
  a.Ho = q.Ho, a.Wo = q.Wo;
  const bool fwd = pass == ConvPass::forward;
  const IsaFn fn = fwd ? cpu::isa_function("conv_direct_forward", &conv_direct_forward)
                       : cpu::isa_function("conv_direct_grad_weight", &conv_direct_grad_weight);
  const auto scratch = static_cast<std::size_t>(conv_direct_scratch(q.C, q.G, q.Ho, q.kh, q.Wo, q.kw));
  if (fwd) {
    // An image is Og Ho Wo K multiply-adds: a few images per task at least.
    const std::int64_t per_image = std::max<std::int64_t>(1, q.O * q.P() * q.K());
    parallel_for(q.N, std::max<std::int64_t>(1, (std::int64_t{1} << 20) / per_image), [&](std::int64_t b, std::int64_t e) {
      auto buf = std::make_unique_for_overwrite<float[]>(scratch);
      ConvDirectArgs t = a;
      t.n0 = b, t.n1 = e, t.scratch = buf.get();
      fn(&t);
    }, 1);
    return;
  }
  const std::int64_t wsize = q.O * q.K(), chunks = std::max<std::int64_t>(1, std::min(q.N, kConvWeightChunks));
  std::vector<float> part(static_cast<std::size_t>(chunks * wsize), 0.0f);
  parallel_for(chunks, 1, [&](std::int64_t cb, std::int64_t ce) {
    auto buf = std::make_unique_for_overwrite<float[]>(scratch);
    for (std::int64_t c = cb; c < ce; ++c) {
      ConvDirectArgs t = a;
      t.n0 = chunk_begin(q.N, chunks, c), t.n1 = chunk_begin(q.N, chunks, c + 1);
      t.out = part.data() + c * wsize, t.scratch = buf.get();
      fn(&t);
    }
  }, 1);
  sum_chunks(part, chunks, wsize, out);
}

inline Cost conv_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&,
                      const ConvGeom& q) {
  return {2.0 * static_cast<double>(q.N * q.O * q.P() * q.K()), bytes_of(in) + bytes_of(out)};
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// conv2d(x, w[, b]; stride, padding, dilation, groups).
MS_REGISTRATION(const OpDef& conv2d_op, registry().add([] {
  OpDef d;
  d.name = "conv2d";
  d.input_names = {"input", "weight", "bias"};
  d.category = Category::nn;
  d.num_inputs = -1;  // x, weight and an optional bias
  d.doc = "2-D convolution of x (N, C, H, W) with weight (O, C/groups, kH, kW) and optional bias (O,); direct kernels, im2col + GEMM or oneDNN (ms::cpu_conv)";
  d.attr_schema = &attr_schema<Conv2dAttrs>("Conv2dAttrs");
  d.cpu_dtypes = kFloatTypes | DTypeSet{DType::f16, DType::bf16};
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 2 || in.size() == 3, ValueError, "{}: expected 2 or 3 inputs (x, weight[, bias]), got {}",
             op.name, in.size());
    check_same_dtype(op, in[0], in[1]);
    detail::ConvGeom q = detail::conv_geom(op, in[0].shape, in[1].shape, attrs_as<Conv2dAttrs>(op, a));
    if (in.size() == 3) {
      check_same_dtype(op, in[0], in[2]);
      MS_CHECK(in[2].shape == Shape{q.O}, ShapeError, "{}: bias shape {} does not match out_channels {} of weight {}",
               op.name, shape_str(in[2].shape), q.O, shape_str(in[1].shape));
    }
    out.push_back({in[0].dtype, Shape{q.N, q.O, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q =
        detail::conv_geom(k.op, k.in[0].shape(), k.in[1].shape(), attrs_as<Conv2dAttrs>(k.op, k.attrs));
    if (detail::conv_half(detail::ConvPass::forward, k, q)) return;
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    const auto at = attrs_as<Conv2dAttrs>(op, a);
    Cost c = detail::conv_cost(op, in, out, a, detail::conv_geom(op, in[0].shape, in[1].shape, at));
    if (in.size() == 3) c.flops += static_cast<double>(numel(out[0].shape));
    return c;
  };
  return d;
}()));

// conv2d_grad_input(g, w; stride, padding, dilation, groups, input_shape): the input gradient of conv2d.
MS_REGISTRATION(const OpDef& conv2d_grad_input_op, registry().add([] {
  OpDef d;
  d.name = "conv2d_grad_input";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of conv2d w.r.t. its input: col2im(weight^T @ g) (a transposed convolution)";
  d.attr_schema = &attr_schema<Conv2dGradInputAttrs>("Conv2dGradInputAttrs");
  d.cpu_dtypes = kFloatTypes | DTypeSet{DType::f16, DType::bf16};
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    const auto at = attrs_as<Conv2dGradInputAttrs>(op, a);
    const Shape xs(at.input_shape);
    detail::ConvGeom q = detail::conv_geom(op, xs, in[1].shape, at);
    Shape want{q.N, q.O, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the conv2d output shape {}",
             op.name, shape_str(in[0].shape), shape_str(want));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q =
        detail::conv_geom(k.op, k.out[0].shape(), k.in[1].shape(), attrs_as<Conv2dGradInputAttrs>(k.op, k.attrs));
    if (detail::conv_half(detail::ConvPass::grad_input, k, q)) return;
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_grad_input_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::conv_cost(op, in, out, a,
                             detail::conv_geom(op, out[0].shape, in[1].shape, attrs_as<Conv2dGradInputAttrs>(op, a)));
  };
  return d;
}()));

// conv2d_grad_weight(g, x; stride, padding, dilation, groups, weight_shape): the weight gradient of conv2d.
MS_REGISTRATION(const OpDef& conv2d_grad_weight_op, registry().add([] {
  OpDef d;
  d.name = "conv2d_grad_weight";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of conv2d w.r.t. its weight: sum over the batch of g @ im2col(x)^T";
  d.attr_schema = &attr_schema<Conv2dGradWeightAttrs>("Conv2dGradWeightAttrs");
  d.cpu_dtypes = kFloatTypes | DTypeSet{DType::f16, DType::bf16};
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    const auto at = attrs_as<Conv2dGradWeightAttrs>(op, a);
    const Shape ws(at.weight_shape);
    detail::ConvGeom q = detail::conv_geom(op, in[1].shape, ws, at);
    Shape want{q.N, q.O, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the conv2d output shape {}",
             op.name, shape_str(in[0].shape), shape_str(want));
    out.push_back({in[0].dtype, ws});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q =
        detail::conv_geom(k.op, k.in[1].shape(), k.out[0].shape(), attrs_as<Conv2dGradWeightAttrs>(k.op, k.attrs));
    if (detail::conv_half(detail::ConvPass::grad_weight, k, q)) return;
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_grad_weight_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::conv_cost(op, in, out, a,
                             detail::conv_geom(op, in[1].shape, out[0].shape, attrs_as<Conv2dGradWeightAttrs>(op, a)));
  };
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor conv2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b, Int2 stride, Int2 padding,
                         Int2 dilation, std::int64_t groups) {
  Attrs a = detail::conv_attrs(stride, padding, dilation, groups);
  return b.defined() ? call1(conv2d_op, {x, w, b}, a) : call1(conv2d_op, {x, w}, a);
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
