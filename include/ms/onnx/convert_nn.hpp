#pragma once
// ONNX op rows, neural-network layers: MatMul, Gemm, Conv (1-d to 3-d), ConvTranspose, the pools,
// the normalizations, Dropout, the softmax family, the losses and RNN/GRU/LSTM unrolled.
#include "convert_base.hpp"

namespace ms::onnx::detail::conv {

namespace o = ms::ops;

// ---- linear algebra, convolution, pooling, normalization --------------------------------------

inline std::vector<AnyTensor> MatMul(const NodeCtx& c) { return one(o::matmul(c.in(0), c.in(1))); }
inline std::vector<AnyTensor> Gemm(const NodeCtx& c) {
  need_rank(c, 0, 2);
  need_rank(c, 1, 2);
  AnyTensor a = c.in(0), b = c.in(1);
  const double alpha = c.af("alpha", 1.0), beta = c.af("beta", 1.0);
  const bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
  if (!ta && tb && alpha == 1.0 && (!c.has(2) || (beta == 1.0 && c.in(2).dim() == 1 && c.in(2).shape()[0] == b.shape()[0])))
    return one(o::linear(a, b, c.has(2) ? c.in(2) : AnyTensor()));
  if (ta) a = o::transpose(a, 0, 1);
  if (tb) b = o::transpose(b, 0, 1);
  AnyTensor y = o::matmul(a, b);
  if (alpha != 1.0) y = o::mul(y, alpha);
  if (c.has(2)) {
    AnyTensor cc = c.in(2);
    if (beta != 1.0) cc = o::mul(cc, beta);
    y = o::add(y, cc);
  }
  return one(y);
}

/// A 3-d convolution as kD 2-d ones: depth slice kd of every output window, batched with N,
/// convolved with the kernel's plane kd, summed over kd.
inline AnyTensor conv3d(const NodeCtx& c, const AnyTensor& x0, const AnyTensor& w, const Window& g) {
  AnyTensor x = pad_constant(x0, {0, 0, g.pb[0], g.pb[1], g.pb[2]}, {0, 0, g.pe[0], g.pe[1], g.pe[2]}, 0.0);
  const std::int64_t N = x.shape()[0], C = x.shape()[1], D = x.shape()[2], H = x.shape()[3], W = x.shape()[4];
  const std::int64_t M = w.shape()[0], kD = w.shape()[2];
  const std::int64_t oD = (D - ((kD - 1) * g.d[0] + 1)) / g.s[0] + 1;
  if (oD <= 0) c.fail("the kernel is larger than the padded input");
  AnyTensor acc;
  for (std::int64_t kd = 0; kd < kD; ++kd) {
    const std::int64_t b = kd * g.d[0];
    AnyTensor xs = o::slice(x, 2, b, b + (oD - 1) * g.s[0] + 1, g.s[0]);
    xs = o::reshape(o::permute(xs, {0, 2, 1, 3, 4}), {N * oD, C, H, W});
    AnyTensor wk;
    {
      std::optional<Untraced> u;
      if (c.is_const(1)) u.emplace();
      wk = o::reshape(o::slice(w, 2, kd, kd + 1), {M, w.shape()[1], w.shape()[3], w.shape()[4]});
    }
    AnyTensor y = o::conv2d(xs, wk, AnyTensor(), o::Int2(g.s[1], g.s[2]), 0, o::Int2(g.d[1], g.d[2]), c.ai("group", 1));
    acc = acc.defined() ? o::add(acc, y) : y;
  }
  acc = o::permute(o::reshape(acc, {N, oD, M, acc.shape()[2], acc.shape()[3]}), {0, 2, 1, 3, 4});
  if (c.has(2)) acc = o::add(acc, o::reshape(c.in(2), {M, 1, 1, 1}));
  return o::contiguous(acc);
}

inline std::vector<AnyTensor> Conv(const NodeCtx& c) {
  AnyTensor x = c.in(0), w = c.in(1);
  const int nd = x.dim() - 2;
  if (nd < 1 || nd > 3) c.fail(MS_FORMAT("{}-d convolution (1-d to 3-d are supported)", nd));
  IntList ks = c.aints("kernel_shape");
  if (ks.empty()) for (int i = 2; i < w.dim(); ++i) ks.push_back(w.shape()[i]);
  if (w.dim() != x.dim()) c.fail(MS_FORMAT("weight of rank {} for an input of rank {}", w.dim(), x.dim()));
  Window g = window(c, x.shape(), ks, nd);
  if (nd == 3) return one(conv3d(c, x, w, g));
  if (nd == 1) {  // as a 2-d convolution of height 1
    x = o::unsqueeze(x, 2);
    w = o::unsqueeze(w, 2);
    g.k.insert(g.k.begin(), 1); g.s.insert(g.s.begin(), 1); g.d.insert(g.d.begin(), 1);
    g.pb.insert(g.pb.begin(), 0); g.pe.insert(g.pe.begin(), 0);
  }
  o::Int2 pad(0);
  if (g.pb == g.pe) {
    pad = o::Int2(g.pb[0], g.pb[1]);
  } else {
    x = pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]}, 0.0);
  }
  AnyTensor y = o::conv2d(x, w, c.has(2) ? c.in(2) : AnyTensor(), o::Int2(g.s[0], g.s[1]), pad,
                          o::Int2(g.d[0], g.d[1]), c.ai("group", 1));
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}

/// ConvTranspose: the conv_transpose2d op (1-d as 2-d of height 1); where that op does not
/// apply (negative pads from an output_shape, a larger output_padding), a convolution with
/// zeros inserted between the input's elements (stride), the borders padded by
/// dilation * (kernel - 1) - pads, and the kernel flipped with its channel axes swapped per group.
inline std::vector<AnyTensor> ConvTranspose(const NodeCtx& c) {
  AnyTensor x = c.in(0), w = c.in(1);
  const int nd = x.dim() - 2;
  if (nd != 1 && nd != 2) c.fail(MS_FORMAT("{}-d transposed convolution (1-d and 2-d are supported)", nd));
  if (w.dim() != x.dim()) c.fail(MS_FORMAT("weight of rank {} for an input of rank {}", w.dim(), x.dim()));
  const std::int64_t g = c.ai("group", 1);
  if (g < 1) c.fail(MS_FORMAT("group {}", g));
  IntList ks = c.aints("kernel_shape");
  if (ks.empty()) for (int i = 2; i < w.dim(); ++i) ks.push_back(w.shape()[i]);
  IntList s = c.aints("strides", IntList(nd, 1)), d = c.aints("dilations", IntList(nd, 1));
  IntList pads = c.aints("pads", IntList(2 * nd, 0)), op = c.aints("output_padding", IntList(nd, 0));
  IntList oshape = c.aints("output_shape");
  const std::string ap = c.as("auto_pad", "NOTSET");
  if (static_cast<int>(ks.size()) != nd || static_cast<int>(s.size()) != nd || static_cast<int>(d.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd || static_cast<int>(op.size()) != nd)
    c.fail("kernel_shape, strides, dilations, pads or output_padding do not match the spatial rank");
  if (!oshape.empty() && static_cast<int>(oshape.size()) != nd) {
    if (static_cast<int>(oshape.size()) == nd + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    else c.fail("output_shape does not match the spatial rank");
  }
  IntList pb(pads.begin(), pads.begin() + nd), pe(pads.begin() + nd, pads.end());
  for (int i = 0; i < nd; ++i) {
    const std::int64_t in = x.shape()[2 + i];
    const std::int64_t full = s[i] * (in - 1) + op[i] + (ks[i] - 1) * d[i] + 1;
    std::int64_t want = -1;
    if (!oshape.empty()) want = oshape[i];
    else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") want = in * s[i];
    else if (ap == "VALID") pb[i] = pe[i] = 0;
    else if (ap != "NOTSET") c.fail(MS_FORMAT("auto_pad \"{}\"", ap));
    if (want >= 0) {
      const std::int64_t total = full - want;
      // Floor division: a negative total (a larger output_shape) extends the end.
      const std::int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (ap == "SAME_UPPER") { pb[i] = half; pe[i] = total - half; }
      else { pb[i] = total - half; pe[i] = half; }
    }
  }
  if (nd == 1) {
    x = o::unsqueeze(x, 2);
    w = o::unsqueeze(w, 2);
    for (IntList* v : {&ks, &s, &d, &pb, &pe, &op}) v->insert(v->begin(), v == &ks || v == &s || v == &d ? 1 : 0);
  }
  // The transposed convolution op, when the pads are not negative and output_padding is below
  // the stride or the dilation (what conv_transpose2d accepts): the smaller pad of each axis
  // is its padding, the rest of the larger one is cut off.
  bool direct = x.dim() == 4 && is_float(x.dtype()) && x.shape()[1] % g == 0;
  for (int i = 0; i < 2; ++i)
    direct = direct && pb[i] >= 0 && pe[i] >= 0 && op[i] >= 0 && (op[i] < s[i] || op[i] < d[i]) && s[i] >= 1 &&
             d[i] >= 1;
  if (direct) {
    const o::Int2 p(std::min(pb[0], pe[0]), std::min(pb[1], pe[1]));
    AnyTensor y = o::conv_transpose2d(x, w, c.has(2) ? c.in(2) : AnyTensor(), o::Int2(s[0], s[1]), p,
                                      o::Int2(op[0], op[1]), g, o::Int2(d[0], d[1]));
    for (int i = 0; i < 2; ++i) {
      const std::int64_t lo = pb[i] - std::min(pb[i], pe[i]), hi = pe[i] - std::min(pb[i], pe[i]);
      if (lo > 0 || hi > 0) y = o::slice(y, 2 + i, lo, y.shape()[2 + i] - hi);
    }
    y = o::contiguous(y);
    if (nd == 1) y = o::squeeze(y, 2);
    return one(y);
  }
  const std::int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (s[0] > 1 || s[1] > 1) {  // zeros between the elements
    AnyTensor t = o::reshape(x, {N, C, H, 1, W, 1});
    t = pad_constant(t, {0, 0, 0, 0, 0, 0}, {0, 0, 0, s[0] - 1, 0, s[1] - 1}, 0.0);
    t = o::reshape(t, {N, C, H * s[0], W * s[1]});
    x = o::slice(o::slice(t, 2, 0, (H - 1) * s[0] + 1), 3, 0, (W - 1) * s[1] + 1);
  }
  x = pad_constant(x, {0, 0, d[0] * (ks[0] - 1) - pb[0], d[1] * (ks[1] - 1) - pb[1]},
                   {0, 0, d[0] * (ks[0] - 1) - pe[0] + op[0], d[1] * (ks[1] - 1) - pe[1] + op[1]}, 0.0);
  auto flip = [&] {
    const std::int64_t Ci = w.shape()[0], Co = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
    if (Ci % g) c.fail(MS_FORMAT("group {} does not divide the {} input channels", g, Ci));
    AnyTensor f = o::slice(o::slice(w, 2, kh - 1, -(kh + 1), -1), 3, kw - 1, -(kw + 1), -1);
    f = o::permute(o::reshape(f, {g, Ci / g, Co, kh, kw}), {0, 2, 1, 3, 4});
    return o::reshape(f, {g * Co, Ci / g, kh, kw});
  };
  AnyTensor wf;
  if (c.is_const(1)) {
    Untraced u;
    wf = flip();
  } else {
    wf = flip();
  }
  AnyTensor y = o::conv2d(x, wf, c.has(2) ? c.in(2) : AnyTensor(), 1, 0, o::Int2(d[0], d[1]), g);
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}
inline std::vector<AnyTensor> GatherND(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  AnyTensor idx = c.in(1);
  if (idx.dtype() != DType::i64) c.fail(MS_FORMAT("indices of dtype {}", idx.dtype()));
  const int b = static_cast<int>(c.ai("batch_dims", 0));
  const int q = idx.dim();
  if (q < 1) c.fail("indices of rank 0");
  const std::int64_t k = idx.shape()[q - 1];
  if (b < 0 || b >= q || b + k > x.dim()) c.fail("batch_dims or the index depth do not fit the data's rank");
  // Row-major strides of the indexed axes, and wrapped negatives.
  IntList strides(static_cast<std::size_t>(k));
  std::int64_t block = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    strides[static_cast<std::size_t>(j)] = block;
    block *= x.shape()[static_cast<int>(b + j)];
  }
  IntList dims;
  for (std::int64_t j = 0; j < k; ++j) dims.push_back(x.shape()[static_cast<int>(b + j)]);
  AnyTensor dimt = i64_tensor(dims), st = i64_tensor(strides);
  idx = o::where(o::lt(idx, 0.0), o::add(idx, dimt), idx);
  AnyTensor lin = o::sum(o::mul(idx, st), {q - 1}, false);  // batch dims + the rest
  std::int64_t nb = 1;
  IntList bshape;
  for (int i = 0; i < b; ++i) { nb *= x.shape()[i]; bshape.push_back(x.shape()[i]); }
  if (b > 0) {
    IntList offs(static_cast<std::size_t>(nb));
    for (std::int64_t i = 0; i < nb; ++i) offs[static_cast<std::size_t>(i)] = i * block;
    IntList os = bshape;
    for (int i = b; i < q - 1; ++i) os.push_back(1);
    lin = o::add(lin, o::reshape(i64_tensor(offs), os));
  }
  IntList flat{nb * block}, out;
  for (int i = static_cast<int>(b + k); i < x.dim(); ++i) flat.push_back(x.shape()[i]);
  for (int i = 0; i < q - 1; ++i) out.push_back(idx.shape()[i]);
  for (int i = static_cast<int>(b + k); i < x.dim(); ++i) out.push_back(x.shape()[i]);
  AnyTensor picked = o::index_select(o::reshape(x, flat), 0, o::reshape(lin, {lin.numel()}));
  return one(o::reshape(picked, out));
}

/// Pooling of any spatial rank and dilation as the maximum (sum) of strided slices of the padded
/// input, one per kernel offset; averages divide by the count of cells the divisor includes.
inline AnyTensor pool_slices(const AnyTensor& x, const Window& g, const Window& user, bool max, bool include_pad) {
  const int nd = x.dim() - 2;
  IntList b(static_cast<std::size_t>(x.dim()), 0), e(static_cast<std::size_t>(x.dim()), 0), out(static_cast<std::size_t>(nd));
  for (int i = 0; i < nd; ++i) {
    b[static_cast<std::size_t>(2 + i)] = g.pb[i];
    e[static_cast<std::size_t>(2 + i)] = g.pe[i];
    out[static_cast<std::size_t>(i)] =
        (x.shape()[2 + i] + g.pb[i] + g.pe[i] - ((g.k[i] - 1) * g.d[i] + 1)) / g.s[i] + 1;
  }
  auto reduce = [&](const AnyTensor& xp, bool take_max) {
    AnyTensor acc;
    IntList off(static_cast<std::size_t>(nd), 0);
    for (;;) {
      AnyTensor t = xp;
      for (int i = 0; i < nd; ++i) {
        const std::int64_t st = off[static_cast<std::size_t>(i)] * g.d[i];
        t = o::slice(t, 2 + i, st, st + (out[static_cast<std::size_t>(i)] - 1) * g.s[i] + 1, g.s[i]);
      }
      acc = !acc.defined() ? t : take_max ? o::maximum(acc, t) : o::add(acc, t);
      int i = nd - 1;
      while (i >= 0 && ++off[static_cast<std::size_t>(i)] == g.k[i]) off[static_cast<std::size_t>(i--)] = 0;
      if (i < 0) break;
    }
    return acc;
  };
  if (max) return o::contiguous(reduce(pad_constant(x, b, e, -std::numeric_limits<double>::infinity()), true));
  AnyTensor count;
  {
    Untraced u;
    IntList ms(static_cast<std::size_t>(x.dim()), 1);
    for (int i = 0; i < nd; ++i) ms[static_cast<std::size_t>(2 + i)] = x.shape()[2 + i];
    AnyTensor m = o::ones(Shape(ms), x.dtype());
    IntList ub(b.size(), 0), ue(e.size(), 0), rb = b, re = e;
    if (include_pad)
      for (int i = 0; i < nd; ++i) {
        ub[static_cast<std::size_t>(2 + i)] = user.pb[i];
        ue[static_cast<std::size_t>(2 + i)] = user.pe[i];
        rb[static_cast<std::size_t>(2 + i)] -= user.pb[i];
        re[static_cast<std::size_t>(2 + i)] -= user.pe[i];
      }
    m = pad_constant(pad_constant(m, ub, ue, 1.0), rb, re, 0.0);
    count = o::contiguous(reduce(m, false));
  }
  return o::div(reduce(pad_constant(x, b, e, 0.0), false), count);
}

template <bool Max>
std::vector<AnyTensor> Pool(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  const int nd = x.dim() - 2;
  if (nd < 1 || nd > 3) c.fail(MS_FORMAT("{}-d pooling (1-d to 3-d are supported)", nd));
  need_float(c, x);
  IntList ks = c.aints("kernel_shape");
  if (static_cast<int>(ks.size()) != nd) c.fail("kernel_shape is missing or does not match the spatial rank");
  Window g = window(c, x.shape(), ks, nd, c.ai("ceil_mode", 0) != 0);
  Window user = window(c, x.shape(), ks, nd, false);  // without the extra cells of ceil_mode
  const bool want_indices = Max && c.wants_output(1);
  if (want_indices && c.ai("storage_order", 0) != 0) c.fail("the Indices output with storage_order=1");
  const bool include_pad0 = c.ai("count_include_pad", 0) != 0;
  if (nd == 3 || std::any_of(g.d.begin(), g.d.end(), [](std::int64_t d) { return d != 1; })) {
    if (want_indices) c.fail("the Indices output of a dilated or 3-d pooling");
    return one(pool_slices(x, g, user, Max, include_pad0));
  }
  if (nd == 1) {
    x = o::unsqueeze(x, 2);
    for (Window* w : {&g, &user}) {
      w->k.insert(w->k.begin(), 1); w->s.insert(w->s.begin(), 1);
      w->pb.insert(w->pb.begin(), 0); w->pe.insert(w->pe.begin(), 0);
    }
  }
  const o::Int2 k(g.k[0], g.k[1]), s(g.s[0], g.s[1]);
  const bool symmetric = g.pb == g.pe && 2 * g.pb[0] <= g.k[0] && 2 * g.pb[1] <= g.k[1];
  const bool include_pad = include_pad0;
  AnyTensor y;
  if (symmetric) {
    const o::Int2 p(g.pb[0], g.pb[1]);
    if (want_indices) {
      // ms gives the index within the (H, W) plane; ONNX counts over the whole (N, C, H, W) tensor.
      auto [v, i] = o::max_pool2d_with_indices(x, k, s, p);
      const std::int64_t N = x.shape()[0], C = x.shape()[1], plane = x.shape()[2] * x.shape()[3];
      IntList offs(static_cast<std::size_t>(N * C));
      for (std::int64_t j = 0; j < N * C; ++j) offs[static_cast<std::size_t>(j)] = j * plane;
      AnyTensor idx = o::add(i, o::reshape(i64_tensor(offs), {N, C, 1, 1}));
      if (nd == 1) return {o::squeeze(v, 2), o::squeeze(idx, 2)};
      return {v, idx};
    }
    y = Max ? o::max_pool2d(x, k, s, p) : o::avg_pool2d(x, k, s, p, include_pad);
  } else if (want_indices) {
    c.fail("the Indices output with asymmetric or ceil-mode padding");
  } else if (Max) {
    y = o::max_pool2d(pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]},
                                   -std::numeric_limits<double>::infinity()), k, s, 0);
  } else {
    // Sum of the real elements over the count of what the divisor includes: the user's pads
    // with count_include_pad, never the extra cells of ceil_mode.
    AnyTensor mask;
    {
      Untraced u;
      AnyTensor ones = o::ones(Shape{1, 1, x.shape()[2], x.shape()[3]}, x.dtype());
      AnyTensor m = include_pad ? pad_constant(ones, {0, 0, user.pb[0], user.pb[1]}, {0, 0, user.pe[0], user.pe[1]}, 1.0)
                                : ones;
      const IntList b0 = include_pad ? IntList{0, 0, g.pb[0] - user.pb[0], g.pb[1] - user.pb[1]}
                                     : IntList{0, 0, g.pb[0], g.pb[1]};
      const IntList e0 = include_pad ? IntList{0, 0, g.pe[0] - user.pe[0], g.pe[1] - user.pe[1]}
                                     : IntList{0, 0, g.pe[0], g.pe[1]};
      m = pad_constant(m, b0, e0, 0.0);
      mask = o::avg_pool2d(m, k, s, 0, true);
    }
    AnyTensor xp = pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]}, 0.0);
    y = o::div(o::avg_pool2d(xp, k, s, 0, true), mask);
  }
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}
template <bool Max>
std::vector<AnyTensor> GlobalPool(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes;
  for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
  return one(Max ? o::max(x, axes, true) : o::mean(x, axes, true));
}
inline std::vector<AnyTensor> BatchNormalization(const NodeCtx& c) {
  if (c.ai("training_mode", 0)) {
    // Batch statistics (biased variance); the running ones blend in with `momentum`.
    const AnyTensor& x = c.in(0);
    need_float(c, x);
    IntList axes{0}, cs(static_cast<std::size_t>(x.dim()), 1);
    for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
    cs[1] = x.shape()[1];
    const double mom = c.af("momentum", 0.9), eps = c.af("epsilon", 1e-5);
    AnyTensor m = o::mean(x, axes, false), v = o::var(x, axes, false, 0);
    AnyTensor y = o::mul(o::sub(x, o::reshape(m, cs)), o::rsqrt(o::add(o::reshape(v, cs), eps)));
    y = o::add(o::mul(y, o::reshape(c.in(1), cs)), o::reshape(c.in(2), cs));
    return {y, o::add(o::mul(c.in(3), mom), o::mul(m, 1 - mom)), o::add(o::mul(c.in(4), mom), o::mul(v, 1 - mom))};
  }
  for (int i = 1; i < static_cast<int>(c.num_outputs()); ++i)
    if (c.wants_output(i)) c.fail("the running statistics outputs (training)");
  if (c.opset() < 9 && c.ai("spatial", 1) == 0) c.fail("spatial=0");
  const AnyTensor& x = c.in(0);
  if (x.dim() < 2) c.fail("input of rank < 2");
  return one(o::batch_norm(x, c.in(1), c.in(2), c.in(3), c.in(4), false, 0.1, c.af("epsilon", 1e-5)));
}
inline std::vector<AnyTensor> InstanceNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  IntList axes;
  for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor v = o::var(x, axes, true, 0);
  AnyTensor y = o::mul(o::sub(x, m), o::rsqrt(o::add(v, c.af("epsilon", 1e-5))));
  return one(o::add(o::mul(y, channel(c.in(1), x.dim())), channel(c.in(2), x.dim())));
}
inline std::vector<AnyTensor> LayerNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const double eps = c.af("epsilon", 1e-5);
  IntList norm_shape, axes;
  for (int i = axis; i < x.dim(); ++i) { norm_shape.push_back(x.shape()[i]); axes.push_back(i); }
  const bool stats = c.wants_output(1) || c.wants_output(2);
  if (!stats && c.in(1).shape().vec() == norm_shape && (!c.has(2) || c.in(2).shape().vec() == norm_shape))
    return one(o::layer_norm(x, norm_shape, c.in(1), c.has(2) ? c.in(2) : AnyTensor(), eps));
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor inv = o::rsqrt(o::add(o::var(x, axes, true, 0), eps));
  AnyTensor y = o::mul(o::mul(o::sub(x, m), inv), c.in(1));
  if (c.has(2)) y = o::add(y, c.in(2));
  return {y, m, inv};
}
inline std::vector<AnyTensor> MeanVarianceNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes = c.aints("axes", {0, 2, 3});
  for (auto& a : axes) a = axis_of(c, a, x.dim());
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor d = o::sub(x, m);
  return one(o::div(d, o::add(o::sqrt(o::mean(o::mul(d, d), axes, true)), 1e-9)));
}
inline std::vector<AnyTensor> LpNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const std::int64_t p = c.ai("p", 2);
  AnyTensor n;
  if (p == 1) n = o::sum(o::abs(x), {axis}, true);
  else if (p == 2) n = o::sqrt(o::sum(o::mul(x, x), {axis}, true));
  else c.fail(MS_FORMAT("p={}", p));
  return one(o::div(x, n));
}
inline std::vector<AnyTensor> LRN(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const std::int64_t size = c.ai("size", 0);
  if (size <= 0) c.fail("size must be positive");
  const double alpha = c.af("alpha", 1e-4), beta = c.af("beta", 0.75), bias = c.af("bias", 1.0);
  IntList b(x.dim(), 0), e(x.dim(), 0);
  b[1] = (size - 1) / 2;
  e[1] = size - 1 - b[1];
  AnyTensor sq = pad_constant(o::mul(x, x), b, e, 0.0);
  const std::int64_t C = x.shape()[1];
  AnyTensor s = o::slice(sq, 1, 0, C);
  for (std::int64_t k = 1; k < size; ++k) s = o::add(s, o::slice(sq, 1, k, k + C));
  return one(o::div(x, o::pow(o::add(o::mul(s, alpha / static_cast<double>(size)), bias), beta)));
}
inline std::vector<AnyTensor> Dropout(const NodeCtx& c) {
  if (c.opset() >= 12 && c.has(2) && c.scalar(2) != 0 && (!c.has(1) || c.scalar(1) != 0))
    c.fail("training_mode=true (random)");
  if (c.opset() < 7 && c.ai("is_test", 0) == 0) c.fail("is_test=0 (random)");
  const AnyTensor& x = c.in(0);
  std::vector<AnyTensor> r{o::clone(x)};
  if (c.wants_output(1)) r.push_back(o::full(x.shape(), 1, DType::b8));
  return r;
}

/// Softmax-like ops: from opset 13 over one axis; before, over the trailing dims from `axis`
/// (default 1), flattened to 2-d.
template <int Kind>
std::vector<AnyTensor> softmax_like(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  auto apply = [&](const AnyTensor& t, int axis) -> AnyTensor {
    if (Kind == 0) return o::softmax(t, axis);
    if (Kind == 1) return o::log_softmax(t, axis);
    // Hardmax: one-hot of the (first) maximum
    const int r = t.dim();
    AnyTensor tt = axis == r - 1 ? t : o::transpose(t, axis, r - 1);
    AnyTensor oh = o::one_hot(o::argmax(tt, r - 1, false), tt.shape()[r - 1], t.dtype());
    return axis == r - 1 ? oh : o::contiguous(o::transpose(oh, axis, r - 1));
  };
  if (c.opset() >= 13) return one(apply(x, axis_of(c, c.ai("axis", -1), x.dim())));
  const int axis = axis_of(c, c.ai("axis", 1), std::max(x.dim(), 1));
  std::int64_t a = 1, b = 1;
  for (int i = 0; i < x.dim(); ++i) (i < axis ? a : b) *= x.shape()[i];
  return one(o::reshape(apply(o::reshape(x, {a, b}), 1), x.shape().vec()));
}

// ---- losses -----------------------------------------------------------------------------------

/// NegativeLogLikelihoodLoss on log-probabilities x (N, C, d...) and targets (N, d...): picks
/// -x[n, t, d...], weighted by weight[t] and 0 at ignore_index; mean divides by the weights' sum.
inline AnyTensor nll(const NodeCtx& c, const AnyTensor& x, const AnyTensor& target, const AnyTensor& weight) {
  if (x.dim() < 2) c.fail("input of rank < 2");
  const std::string red = c.as("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") c.fail(MS_FORMAT("reduction \"{}\"", red));
  AnyTensor t = o::cast(target, DType::i64);
  AnyTensor keep;
  if (c.has_attr("ignore_index")) {
    keep = o::ne(t, static_cast<double>(c.ai("ignore_index", 0)));
    t = o::where(keep, t, o::zeros(Shape{}, DType::i64));
  }
  AnyTensor picked = o::squeeze(o::gather(x, 1, o::unsqueeze(t, 1)), 1);
  AnyTensor w;
  if (weight.defined()) w = o::reshape(o::index_select(weight, 0, o::reshape(t, {t.numel()})), t.shape().vec());
  if (keep.defined()) {
    AnyTensor k = o::cast(keep, x.dtype());
    w = w.defined() ? o::mul(w, k) : k;
  }
  AnyTensor loss = o::neg(picked);
  if (w.defined()) loss = o::mul(loss, w);
  if (red == "none") return loss;
  if (red == "sum") return o::sum(loss);
  return w.defined() ? o::div(o::sum(loss), o::sum(w)) : o::mean(loss);
}
inline std::vector<AnyTensor> NegativeLogLikelihoodLoss(const NodeCtx& c) {
  return one(nll(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : AnyTensor()));
}
inline std::vector<AnyTensor> SoftmaxCrossEntropyLoss(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  AnyTensor lp = o::log_softmax(x, 1);
  std::vector<AnyTensor> r{nll(c, lp, c.in(1), c.has(2) ? c.in(2) : AnyTensor())};
  if (c.wants_output(1)) r.push_back(lp);
  return r;
}

// ---- recurrent layers --------------------------------------------------------------------------

/// (T, B, 1) bool: step t is inside entry b's sequence of length lens[b].
inline AnyTensor sequence_mask(const IntList& lens, std::int64_t T) {
  const auto Bn = static_cast<std::int64_t>(lens.size());
  AnyTensor m = AnyTensor::empty(Shape{T, Bn, 1}, DType::b8);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < Bn; ++b) static_cast<bool*>(m.raw_data())[t * Bn + b] = t < lens[static_cast<std::size_t>(b)];
  return m;
}

/// One step of an RNN (Kind 0), GRU (1) or LSTM (2) cell: the new state (and cell) from the
/// input projection gx = x W^T (+ Wb), the state h and cell of the previous step, the
/// recurrence weights R (and bias Rb, LSTM peepholes P) and activations a[] applied by act.
template <int Kind, class Act>
std::pair<AnyTensor, AnyTensor> recurrent_step(const AnyTensor& gx, const AnyTensor& h, const AnyTensor& cell,
                                               const AnyTensor& R, const AnyTensor& Rb, const AnyTensor& P,
                                               std::int64_t H, const std::string* a, bool linear_before_reset,
                                               Act&& act) {
  auto gate = [&](const AnyTensor& m, std::int64_t k) { return o::slice(m, 1, k * H, (k + 1) * H); };
  auto wrow = [&](const AnyTensor& w, std::int64_t k) { return o::slice(w, 0, k * H, (k + 1) * H); };
  AnyTensor hn, cn;
  if (Kind == 0) {
    hn = act(a[0], o::add(gx, o::linear(h, R, Rb.defined() ? Rb : AnyTensor())));
  } else if (Kind == 1) {
    // z, r from x and h; the candidate h applies r before or after R (linear_before_reset).
    AnyTensor hz = o::linear(h, wrow(R, 0), Rb.defined() ? wrow(Rb, 0) : AnyTensor());
    AnyTensor hr = o::linear(h, wrow(R, 1), Rb.defined() ? wrow(Rb, 1) : AnyTensor());
    AnyTensor z = act(a[0], o::add(gate(gx, 0), hz)), r = act(a[0], o::add(gate(gx, 1), hr));
    AnyTensor hh;
    if (linear_before_reset)
      hh = o::mul(r, o::linear(h, wrow(R, 2), Rb.defined() ? wrow(Rb, 2) : AnyTensor()));
    else
      hh = o::linear(o::mul(r, h), wrow(R, 2), Rb.defined() ? wrow(Rb, 2) : AnyTensor());
    AnyTensor cand = act(a[1], o::add(gate(gx, 2), hh));
    hn = o::add(o::mul(o::sub(1.0, z), cand), o::mul(z, h));
  } else {
    AnyTensor gh = o::add(gx, o::linear(h, R, Rb.defined() ? Rb : AnyTensor()));
    AnyTensor gi = gate(gh, 0), go = gate(gh, 1), gf = gate(gh, 2), gc = gate(gh, 3);
    if (P.defined()) {
      gi = o::add(gi, o::mul(o::slice(P, 0, 0, H), cell));
      gf = o::add(gf, o::mul(o::slice(P, 0, 2 * H, 3 * H), cell));
    }
    AnyTensor i = act(a[0], gi), f = act(a[0], gf), cc = act(a[1], gc);
    cn = o::add(o::mul(f, cell), o::mul(i, cc));
    if (P.defined()) go = o::add(go, o::mul(o::slice(P, 0, H, 2 * H), cn));
    hn = o::mul(act(a[0], go), act(a[2], cn));
  }
  return {hn, cn};
}

/// RNN (Kind 0), GRU (1) and LSTM (2), unrolled over the (static) sequence: one linear() per gate
/// block and step. Directions forward, reverse and bidirectional; sequence_lens masks the steps
/// past each entry's length (a reverse direction runs on the per-entry reversed sequence).
template <int Kind>
std::vector<AnyTensor> recurrent(const NodeCtx& c) {
  const int G = Kind == 0 ? 1 : Kind == 1 ? 3 : 4;
  AnyTensor X = c.in(0);
  need_float(c, X);
  for (std::size_t i : {0, 1, 2}) need_rank(c, i, 3);
  if (c.has(3)) need_rank(c, 3, 2);
  for (std::size_t i : {5, 6}) if (c.has(i)) need_rank(c, i, 3);
  if (c.has(7)) need_rank(c, 7, 2);
  if (c.has(4)) need_rank(c, 4, 1);
  const bool batch_first = c.ai("layout", 0) != 0;
  if (batch_first) X = o::permute(X, {1, 0, 2});
  const std::int64_t T = X.shape()[0], Bn = X.shape()[1];
  const std::int64_t H = c.ai("hidden_size", c.in(2).shape()[2]);
  const std::string dir = c.as("direction", "forward");
  const int nd = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.fail(MS_FORMAT("direction \"{}\"", dir));
  if (Kind == 2 && c.ai("input_forget", 0)) c.fail("input_forget=1");
  const double clip = c.af("clip", 0.0);
  // Activations: f (and g, h) per direction; the defaults, or Sigmoid/Tanh/Relu by name.
  std::vector<std::string> acts;
  if (const auto* a = c.attr("activations")) for (const auto& v : a->strings()) acts.push_back(v);
  const std::vector<std::string> dflt = Kind == 0 ? std::vector<std::string>{"Tanh"}
                                      : Kind == 1 ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (acts.empty()) for (int d = 0; d < nd; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  if (acts.size() != dflt.size() * static_cast<std::size_t>(nd)) c.fail("the activations list does not fit the direction");
  if (c.has_attr("activation_alpha") || c.has_attr("activation_beta")) c.fail("activation_alpha/beta");
  auto act = [&](const std::string& name, AnyTensor v) {
    if (clip > 0) v = o::clamp(v, -clip, clip);
    if (name == "Sigmoid") return o::sigmoid(v);
    if (name == "Tanh") return o::tanh(v);
    if (name == "Relu") return o::relu(v);
    c.fail(MS_FORMAT("activation {}", name));
  };
  IntList lens(static_cast<std::size_t>(Bn), T);
  bool masked = false;
  if (c.has(4)) {
    lens = c.ints(4);
    for (auto l : lens) masked = masked || l != T;
  }
  const AnyTensor mask_all = masked ? sequence_mask(lens, T) : AnyTensor();
  auto rev = [&](const AnyTensor& v) {  // per-entry reversal of (T, B, ...) over the first lens[b] steps
    IntList idx;
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t b = 0; b < Bn; ++b) {
        const std::int64_t l = std::clamp<std::int64_t>(lens[static_cast<std::size_t>(b)], 0, T);
        idx.push_back((t < l ? l - 1 - t : t) * Bn + b);
      }
    IntList flat{T * Bn};
    for (int i = 2; i < v.dim(); ++i) flat.push_back(v.shape()[i]);
    return o::reshape(o::index_select(o::reshape(v, flat), 0, i64_tensor(idx)), v.shape().vec());
  };
  auto dir_slice = [&](std::size_t input, int d) {  // input[d] of a (num_directions, ...) input
    AnyTensor t = c.in(input);
    const IntList all = t.shape().vec();
    const IntList s(all.begin() + 1, all.end());
    return o::reshape(o::slice(t, 0, d, d + 1), s);
  };
  auto init = [&](std::size_t input, int d) {
    if (!c.has(input)) return o::zeros(Shape{Bn, H}, X.dtype());
    AnyTensor t = c.in(input);
    if (batch_first) t = o::permute(t, {1, 0, 2});
    return o::reshape(o::slice(t, 0, d, d + 1), {Bn, H});
  };
  std::vector<AnyTensor> ys, hs, cs;
  for (int d = 0; d < nd; ++d) {
    const bool backward = dir == "reverse" || d == 1;
    AnyTensor W = dir_slice(1, d), R = dir_slice(2, d);
    AnyTensor Wb, Rb, P;
    if (c.has(3)) {
      AnyTensor Bd = dir_slice(3, d);
      Wb = o::slice(Bd, 0, 0, G * H);
      Rb = o::slice(Bd, 0, G * H, 2 * G * H);
    }
    if (Kind == 2 && c.has(7)) P = dir_slice(7, d);
    AnyTensor xs = backward ? rev(X) : X;
    AnyTensor h = init(5, d), cell = Kind == 2 ? init(6, d) : AnyTensor();
    const std::string* a = &acts[static_cast<std::size_t>(d) * dflt.size()];
    std::vector<AnyTensor> steps;
    for (std::int64_t t = 0; t < T; ++t) {
      AnyTensor xt = o::reshape(o::slice(xs, 0, t, t + 1), {Bn, X.shape()[2]});
      AnyTensor gx = o::linear(xt, W, Wb.defined() ? Wb : AnyTensor());
      auto [hn, cn] = recurrent_step<Kind>(gx, h, cell, R, Rb, P, H, a, c.ai("linear_before_reset", 0) != 0, act);
      if (masked) {
        // Past an entry's length the state stays and the output is 0.
        AnyTensor m = o::reshape(o::slice(mask_all, 0, t, t + 1), {Bn, 1});
        AnyTensor zero = o::zeros(Shape{}, X.dtype());
        steps.push_back(o::where(m, hn, zero));
        h = o::where(m, hn, h);
        if (Kind == 2) cell = o::where(m, cn, cell);
      } else {
        steps.push_back(hn);
        h = hn;
        if (Kind == 2) cell = cn;
      }
    }
    AnyTensor y = o::stack(steps, 0);  // (T, B, H)
    if (backward) y = rev(y);
    ys.push_back(y);
    hs.push_back(h);
    cs.push_back(cell);
  }
  AnyTensor Y = o::stack(ys, 1);  // (T, nd, B, H)
  AnyTensor Yh = o::stack(hs, 0);  // (nd, B, H)
  if (batch_first) {
    Y = o::contiguous(o::permute(Y, {2, 0, 1, 3}));
    Yh = o::contiguous(o::permute(Yh, {1, 0, 2}));
  }
  std::vector<AnyTensor> r{Y, Yh};
  if (Kind == 2) {
    AnyTensor Yc = o::stack(cs, 0);
    if (batch_first) Yc = o::contiguous(o::permute(Yc, {1, 0, 2}));
    r.push_back(Yc);
  }
  return r;
}

}  // namespace ms::onnx::detail::conv
