#pragma once
// ONNX op rows, indexing and the rest: scatter ops on scatter_add / index_add, TopK, Einsum,
// Compress, NonZero and Unique of constants, BitShift, window functions, uint8 quantization and
// ReverseSequence.
#include "convert_tensor.hpp"

namespace ms::onnx::detail::conv {

namespace o = ms::ops;

// ---- scatter, selection, einsum ----------------------------------------------------------------

/// ScatterElements (and Scatter before opset 11) on ms's scatter_add: "add" is scatter_add itself;
/// "none" takes the scattered values where an index lands and the data elsewhere.
inline std::vector<AnyTensor> ScatterElements(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  const std::string red = c.as("reduction", "none");
  AnyTensor idx = wrap_index(c, 1, x.shape()[axis]);
  const AnyTensor& upd = c.in(2);
  if (red == "add") return one(o::scatter_add(x, axis, idx, upd));
  if (red != "none") c.fail(MS_FORMAT("reduction \"{}\"", red));
  AnyTensor hits = o::scatter_add(o::zeros(x.shape(), DType::f32), axis, idx, o::ones(upd.shape(), DType::f32));
  AnyTensor vals = o::scatter_add(o::zeros(x.shape(), x.dtype()), axis, idx, upd);
  return one(o::where(o::gt(hits, 0.0), vals, x));
}
/// ScatterND: the indexed axes flattened to one, then index_add along it.
inline std::vector<AnyTensor> ScatterND(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  AnyTensor idx = c.in(1);
  const AnyTensor& upd = c.in(2);
  const std::string red = c.as("reduction", "none");
  if (red != "none" && red != "add") c.fail(MS_FORMAT("reduction \"{}\"", red));
  if (idx.dtype() != DType::i64) c.fail(MS_FORMAT("indices of dtype {}", idx.dtype()));
  const int q = idx.dim();
  if (q < 1) c.fail("indices of rank 0");
  const std::int64_t k = idx.shape()[q - 1];
  if (k > x.dim()) c.fail("the index depth exceeds the data's rank");
  IntList strides(static_cast<std::size_t>(k)), dims;
  std::int64_t block = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    strides[static_cast<std::size_t>(j)] = block;
    block *= x.shape()[static_cast<int>(j)];
  }
  for (std::int64_t j = 0; j < k; ++j) dims.push_back(x.shape()[static_cast<int>(j)]);
  idx = o::where(o::lt(idx, 0.0), o::add(idx, i64_tensor(dims)), idx);
  AnyTensor lin = o::sum(o::mul(idx, i64_tensor(strides)), {q - 1}, false);
  lin = o::reshape(lin, {lin.numel()});
  IntList flat{block}, uflat{lin.numel()};
  for (int i = static_cast<int>(k); i < x.dim(); ++i) { flat.push_back(x.shape()[i]); uflat.push_back(x.shape()[i]); }
  AnyTensor xf = o::reshape(x, flat), uf = o::reshape(upd, uflat);
  if (red == "add") return one(o::reshape(o::index_add(xf, 0, lin, uf), x.shape().vec()));
  IntList ms(flat.size(), 1);
  ms[0] = block;
  AnyTensor hits = o::index_add(o::zeros(Shape{block}, DType::f32), 0, lin, o::ones(Shape{lin.numel()}, DType::f32));
  AnyTensor vals = o::index_add(o::zeros(Shape(flat), x.dtype()), 0, lin, uf);
  return one(o::reshape(o::where(o::gt(o::reshape(hits, ms), 0.0), vals, xf), x.shape().vec()));
}
/// TopK on ms's topk: ties go to the lower index, as ONNX specifies.
inline std::vector<AnyTensor> TopK(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const std::int64_t k = c.opset() < 10 ? c.ai("k", 0) : static_cast<std::int64_t>(c.scalar(1));
  if (x.dim() == 0) c.fail("input of rank 0");
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const std::int64_t n = x.shape()[axis];
  if (k < 0 || k > n) c.fail(MS_FORMAT("k={} for an axis of size {}", k, n));
  return o::topk(x, k, axis, c.ai("largest", 1) != 0, c.ai("sorted", 1) != 0);
}
/// Einsum without repeated letters in one operand: every operand permuted and broadcast to the
/// letters of the whole equation, multiplied, and summed over the letters the output lacks.
inline std::vector<AnyTensor> Einsum(const NodeCtx& c) {
  std::string eq;
  for (char ch : c.as("equation", "")) if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs;
  std::vector<std::string> terms;
  for (std::size_t b = 0;;) {
    const auto e = lhs.find(',', b);
    terms.push_back(lhs.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != c.num_inputs()) c.fail(MS_FORMAT("equation \"{}\" names {} operands, the node has {}", eq, terms.size(), c.num_inputs()));
  // Ellipsis dims become letters '0', '1', ... counted from the right (they broadcast).
  int ell = 0;
  std::vector<std::string> sub(terms.size());
  for (std::size_t t = 0; t < terms.size(); ++t) {
    const std::string& s = terms[t];
    const auto dots = s.find("...");
    const int named = static_cast<int>(s.size()) - (dots == std::string::npos ? 0 : 3);
    const int rank = c.in(t).dim();
    if (dots == std::string::npos) {
      if (named != rank) c.fail(MS_FORMAT("operand {} has rank {}, \"{}\" names {}", t, rank, s, named));
      sub[t] = s;
    } else {
      const int ne = rank - named;
      if (ne < 0) c.fail(MS_FORMAT("operand {} has rank {}, fewer than \"{}\" names", t, rank, s));
      ell = std::max(ell, ne);
      std::string e;
      for (int j = ne - 1; j >= 0; --j) e += static_cast<char>('0' + j);
      sub[t] = s.substr(0, dots) + e + s.substr(dots + 3);
    }
  }
  std::string ell_letters;
  for (int j = ell - 1; j >= 0; --j) ell_letters += static_cast<char>('0' + j);
  if (arrow != std::string::npos) {
    rhs = eq.substr(arrow + 2);
    const auto dots = rhs.find("...");
    if (dots != std::string::npos) rhs = rhs.substr(0, dots) + ell_letters + rhs.substr(dots + 3);
  } else {
    std::map<char, int> count;
    for (auto& s : sub) for (char ch : s) count[ch]++;
    rhs = ell_letters;
    for (auto& [ch, n] : count) if (n == 1 && !std::isdigit(static_cast<unsigned char>(ch))) rhs += ch;
  }
  std::string all = rhs;
  for (auto& s : sub) for (char ch : s) if (all.find(ch) == std::string::npos) all += ch;
  AnyTensor prod;
  for (std::size_t t = 0; t < sub.size(); ++t) {
    const std::string& s = sub[t];
    for (std::size_t a = 0; a < s.size(); ++a)
      if (s.find(s[a], a + 1) != std::string::npos) c.fail(MS_FORMAT("a repeated index '{}' in one operand (a diagonal)", s[a]));
    IntList perm, shape;
    std::string order;
    for (char ch : all) if (s.find(ch) != std::string::npos) { perm.push_back(static_cast<std::int64_t>(s.find(ch))); order += ch; }
    AnyTensor x = o::permute(c.in(t), perm);
    for (char ch : all) shape.push_back(order.find(ch) != std::string::npos ? c.in(t).shape()[static_cast<int>(s.find(ch))] : 1);
    x = o::reshape(x, shape);
    prod = prod.defined() ? o::mul(prod, x) : x;
  }
  IntList axes;
  for (std::size_t a = rhs.size(); a < all.size(); ++a) axes.push_back(static_cast<std::int64_t>(a));
  if (!axes.empty()) prod = o::sum(prod, axes, false);
  return one(o::contiguous(prod));
}
inline std::vector<AnyTensor> Compress(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  const std::vector<double> cond = c.doubles(1);
  int axis;
  if (c.has_attr("axis")) axis = axis_of(c, c.ai("axis", 0), x.dim());
  else { x = o::reshape(x, {x.numel()}); axis = 0; }
  IntList idx;
  for (std::size_t i = 0; i < cond.size() && static_cast<std::int64_t>(i) < x.shape()[axis]; ++i)
    if (cond[i] != 0) idx.push_back(static_cast<std::int64_t>(i));
  return one(o::index_select(x, axis, i64_tensor(idx)));
}
inline std::vector<AnyTensor> NonZero(const NodeCtx& c) {
  const AnyTensor& x = c.need_const(0);  // the output's shape depends on the values
  std::vector<double> v = c.doubles(0);
  const int r = std::max(x.dim(), 1);
  std::vector<IntList> rows(static_cast<std::size_t>(r));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    std::int64_t rem = static_cast<std::int64_t>(i);
    for (int a = x.dim() - 1; a >= 0; --a) {
      rows[static_cast<std::size_t>(a)].push_back(rem % x.shape()[a]);
      rem /= x.shape()[a];
    }
    if (x.dim() == 0) rows[0].push_back(0);
  }
  IntList flat;
  for (auto& rw : rows) flat.insert(flat.end(), rw.begin(), rw.end());
  return one(o::reshape(i64_tensor(flat), {r, static_cast<std::int64_t>(rows[0].size())}));
}
inline std::vector<AnyTensor> BitShift(const NodeCtx& c) {
  const AnyTensor &x = c.in(0), &y = c.in(1);
  if (x.dtype() != DType::u8 || y.dtype() != DType::u8) c.fail(MS_FORMAT("dtype {} (uint8 is supported)", x.dtype()));
  const std::string dir = c.as("direction", "");
  AnyTensor p = o::pow(2.0, o::cast(y, DType::f64));
  AnyTensor xf = o::cast(x, DType::f64);
  AnyTensor r;
  if (dir == "LEFT") {
    r = o::mul(xf, p);
    r = o::sub(r, o::mul(o::floor(o::div(r, 256.0)), 256.0));  // uint8 wraps
  } else if (dir == "RIGHT") {
    r = o::floor(o::div(xf, p));
  } else {
    c.fail(MS_FORMAT("direction \"{}\"", dir));
  }
  return one(o::cast(r, DType::u8));
}

// ---- windows, quantization, sequences --------------------------------------------------------

/// Hann, Hamming and Blackman windows: computed at load from the (constant) size.
template <int Kind>
std::vector<AnyTensor> window_fn(const NodeCtx& c) {
  const auto n = static_cast<std::int64_t>(c.scalar(0));
  if (n < 0) c.fail("a negative size");
  const bool periodic = c.ai("periodic", 1) != 0;
  auto dt = dtype_from_onnx(static_cast<int>(c.ai("output_datatype", pb::TensorProto::FLOAT)));
  if (!dt || !is_float(*dt)) c.fail("output_datatype other than float or double");
  AnyTensor out = AnyTensor::empty(Shape{n}, DType::f64);
  const double den = static_cast<double>(periodic ? n : n - 1), pi = 3.14159265358979323846;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = den > 0 ? 2 * pi * static_cast<double>(i) / den : 0;
    double v;
    if (Kind == 0) v = 0.5 - 0.5 * std::cos(a);
    else if (Kind == 1) v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(a);
    else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    static_cast<double*>(out.raw_data())[i] = v;
  }
  return one(o::cast(out, *dt));
}
/// y = saturate(round_half_even(x / scale) + zero_point), to uint8 (int8 has no ms dtype).
inline std::vector<AnyTensor> QuantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  AnyTensor scale = c.in(1), zp = c.has(2) ? c.in(2) : o::zeros(Shape{}, DType::u8);
  if (zp.dtype() != DType::u8) c.fail(MS_FORMAT("zero point of dtype {} (uint8 is supported)", zp.dtype()));
  if (scale.dim() == 1 && x.dim() > 1) {  // per axis
    const int axis = axis_of(c, c.ai("axis", 1), x.dim());
    IntList s(static_cast<std::size_t>(x.dim()), 1);
    s[static_cast<std::size_t>(axis)] = scale.numel();
    scale = o::reshape(scale, s);
    zp = o::reshape(zp, s);
  }
  AnyTensor y = o::add(o::round(o::div(x, o::cast(scale, x.dtype()))), o::cast(zp, x.dtype()));
  return one(o::cast(o::clamp(y, 0, 255), DType::u8));
}
inline std::vector<AnyTensor> DequantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dtype() != DType::u8 && x.dtype() != DType::i32) c.fail(MS_FORMAT("input of dtype {}", x.dtype()));
  AnyTensor scale = c.in(1), zp = c.has(2) ? c.in(2) : o::zeros(Shape{}, x.dtype());
  if (scale.dim() == 1 && x.dim() > 1) {
    const int axis = axis_of(c, c.ai("axis", 1), x.dim());
    IntList s(static_cast<std::size_t>(x.dim()), 1);
    s[static_cast<std::size_t>(axis)] = scale.numel();
    scale = o::reshape(scale, s);
    zp = o::reshape(zp, s);
  }
  return one(o::mul(o::sub(o::cast(x, scale.dtype()), o::cast(zp, scale.dtype())), scale));
}
/// DynamicQuantizeLinear: uint8 with the scale and zero point of x's range (which includes 0).
inline std::vector<AnyTensor> DynamicQuantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dtype() != DType::f32) c.fail(MS_FORMAT("input of dtype {}", x.dtype()));
  AnyTensor lo = o::minimum(o::min(x), 0.0), hi = o::maximum(o::max(x), 0.0);
  AnyTensor scale = o::div(o::sub(hi, lo), 255.0);
  AnyTensor zpf = o::clamp(o::round(o::sub(0.0, o::div(lo, scale))), 0, 255);
  AnyTensor y = o::clamp(o::add(o::round(o::div(x, scale)), zpf), 0, 255);
  return {o::cast(y, DType::u8), scale, o::cast(zpf, DType::u8)};
}
/// ReverseSequence: the first lengths[b] steps of each batch entry reversed (constant lengths).
inline std::vector<AnyTensor> ReverseSequence(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList len = c.ints(1);
  const int ta = axis_of(c, c.ai("time_axis", 0), x.dim()), ba = axis_of(c, c.ai("batch_axis", 1), x.dim());
  const std::int64_t T = x.shape()[ta], B = x.shape()[ba];
  if (static_cast<std::int64_t>(len.size()) != B) c.fail("sequence_lens must have one entry per batch entry");
  AnyTensor idx = AnyTensor::empty(Shape{T, B}, DType::i64);
  auto* p = static_cast<std::int64_t*>(idx.raw_data());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t l = std::clamp<std::int64_t>(len[static_cast<std::size_t>(b)], 0, T);
      p[t * B + b] = t < l ? l - 1 - t : t;
    }
  IntList s(static_cast<std::size_t>(x.dim()), 1);
  s[static_cast<std::size_t>(ta)] = T;
  s[static_cast<std::size_t>(ba)] = B;
  AnyTensor i2 = ta < ba ? idx : o::contiguous(o::transpose(idx, 0, 1));
  AnyTensor full = o::contiguous(o::expand(o::reshape(i2, s), x.shape().vec()));
  return one(o::gather(x, ta, full));
}

/// Unique of a constant tensor (its output shape depends on the values): the distinct values or
/// slices along `axis`, sorted or in order of first occurrence, with their first indices, the
/// inverse indices and the counts.
inline std::vector<AnyTensor> Unique(const NodeCtx& c) {
  AnyTensor x = c.need_const(0);
  const std::vector<double> v = c.doubles(0);
  const bool sorted = c.ai("sorted", 1) != 0;
  int axis = -1;
  if (c.has_attr("axis")) axis = axis_of(c, c.ai("axis", 0), x.dim());
  else x = o::reshape(x, {x.numel()});
  const int ax = axis < 0 ? 0 : axis;
  const std::int64_t n = x.shape()[ax];
  // Slice k of the axis as a vector of values, for comparing.
  std::int64_t inner = 1, outer = 1;
  for (int i = ax + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  for (int i = 0; i < ax; ++i) outer *= x.shape()[i];
  std::vector<std::vector<double>> sl(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t o_ = 0; o_ < outer; ++o_)
      for (std::int64_t i = 0; i < inner; ++i)
        sl[static_cast<std::size_t>(k)].push_back(v[static_cast<std::size_t>((o_ * n + k) * inner + i)]);
  IntList first, inverse(static_cast<std::size_t>(n)), counts;
  for (std::int64_t k = 0; k < n; ++k) {
    auto it = std::find_if(first.begin(), first.end(), [&](std::int64_t f) { return sl[static_cast<std::size_t>(f)] == sl[static_cast<std::size_t>(k)]; });
    if (it == first.end()) { first.push_back(k); counts.push_back(1); }
    else counts[static_cast<std::size_t>(it - first.begin())]++;
  }
  IntList order(first.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted)
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return sl[static_cast<std::size_t>(first[static_cast<std::size_t>(a)])] < sl[static_cast<std::size_t>(first[static_cast<std::size_t>(b)])];
    });
  IntList idx, cnt;
  for (auto o_ : order) { idx.push_back(first[static_cast<std::size_t>(o_)]); cnt.push_back(counts[static_cast<std::size_t>(o_)]); }
  for (std::int64_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (sl[static_cast<std::size_t>(idx[j])] == sl[static_cast<std::size_t>(k)]) inverse[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(j);
  return {o::index_select(x, ax, i64_tensor(idx)), i64_tensor(idx), i64_tensor(inverse), i64_tensor(cnt)};
}

}  // namespace ms::onnx::detail::conv
