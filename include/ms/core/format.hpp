#pragma once
// Printing tensors: ms::to_string(t, PrintOptions), operator<< for std::ostream and
// fmt::formatter for ms::AnyTensor and ms::Tensor<T>. Values are read straight from
// storage with the tensor's strides (never through Tensor::data(), whose host-read
// check would reject printing inside a graph capture). Must not know about ops.
//
// The layout is PyTorch's (torch/_tensor_str.py), so it reads the same to its users:
//
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], shape=(2, 2), dtype=float32, device=cpu)
//
// - rows of a 2-D tensor on their own lines, aligned under the first; blocks of
//   higher-rank tensors separated by blank lines; long rows wrapped at 80 columns;
// - every element right-aligned to the widest one;
// - floats with `precision` (4) decimals; "1." style when every finite value is an
//   integer; scientific ("1.0000e+08") when the magnitudes span more than 1000x, or
//   exceed 1e8, or go below 1e-4; nan, inf, -inf as such; float16/bfloat16 via float;
// - integers plainly; bools as True / False;
// - more than `threshold` (1000) elements: only the first and last `edgeitems` (3)
//   of each dim, with "..." between;
// - a 0-d tensor prints its value alone ("tensor(3.5000, shape=(), ...)"), an empty
//   one "[]"; the suffix always names shape, dtype and device, then requires_grad=True
//   for a leaf that requires grad. A tensor not on the cpu prints "<on DEVICE>" for
//   its values (copy it to the cpu to see them).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "linkage.hpp"
#include "tensor.hpp"

namespace ms {

/// How to_string (and fmt / operator<<) lay out a tensor; the defaults are PyTorch's.
struct PrintOptions {
  int precision = 4;              ///< decimals of floats (fixed and scientific)
  std::int64_t threshold = 1000;  ///< more elements than this are summarized
  std::int64_t edgeitems = 3;     ///< elements kept at each end of a summarized dim
  int linewidth = 80;             ///< rows wrap to stay within this many columns
};

/// The text of a tensor, e.g. "tensor([1, 2, 3], shape=(3,), dtype=int64, device=cpu)".
MS_IMPL std::string to_string(const AnyTensor& t, const PrintOptions& opts = {});

/// Writes to_string(t) to `os`.
inline std::ostream& operator<<(std::ostream& os, const AnyTensor& t) { return os << to_string(t); }

// ---- implementation -------------------------------------------------------------------------

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
namespace detail {

/// One element read from storage: doubles for floating dtypes, int64 for integers, bool.
struct PrintValue {
  double f = 0;
  std::int64_t i = 0;
};

class TensorPrinter {
 public:
  TensorPrinter(const AnyTensor& t, const PrintOptions& o) : t_(t), o_(o) {
    base_ = static_cast<const char*>(t.raw_data());
    floating_ = is_floating(t.dtype());
    summarize_ = t.numel() > o.threshold;
  }

  std::string body() {
    if (t_.numel() == 0) return "[]";
    std::vector<PrintValue> shown;
    collect(0, 0, shown);
    measure(shown);
    if (t_.dim() == 0) return format(read(0));
    std::string out;
    tensor_str(0, 0, 7, out);  // 7 = strlen("tensor(")
    return out;
  }

 private:
  PrintValue read(std::int64_t off) const {
    PrintValue v;
    if (t_.dtype() == DType::b8) {  // any nonzero byte is true; never load a non-0/1 byte as bool
      v.i = base_[off] != 0;
      return v;
    }
    visit_dtype(t_.dtype(), [&]<class T>() {
      T x;
      std::memcpy(&x, base_ + off * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
      if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) v.f = static_cast<double>(static_cast<float>(x));
      else if constexpr (std::is_floating_point_v<T>) v.f = static_cast<double>(x);
      else v.i = static_cast<std::int64_t>(x);
    });
    return v;
  }

  /// Indices of dim `d` that are printed (all, or the edges when summarizing).
  bool elided(int d) const { return summarize_ && t_.shape()[d] > 2 * o_.edgeitems; }
  template <class F>
  void for_shown(int d, F&& f) const {
    std::int64_t n = t_.shape()[d];
    if (!elided(d)) {
      for (std::int64_t i = 0; i < n; ++i) f(i);
      return;
    }
    for (std::int64_t i = 0; i < o_.edgeitems; ++i) f(i);
    for (std::int64_t i = n - o_.edgeitems; i < n; ++i) f(i);
  }

  void collect(int d, std::int64_t off, std::vector<PrintValue>& out) const {
    if (d == t_.dim()) {
      out.push_back(read(off));
      return;
    }
    for_shown(d, [&](std::int64_t i) { collect(d + 1, off + i * t_.strides()[d], out); });
  }

  /// Chooses int/fixed/scientific mode and the column width from the printed values (torch's _Formatter).
  void measure(const std::vector<PrintValue>& vals) {
    width_ = 1;
    if (!floating_) {
      for (auto& v : vals) width_ = std::max(width_, format_plain(v).size());
      return;
    }
    double lo = 0, hi = 0;
    bool any = false;
    for (auto& v : vals) {
      if (!std::isfinite(v.f) || v.f == 0) continue;
      double a = std::abs(v.f);
      lo = any ? std::min(lo, a) : a;
      hi = any ? std::max(hi, a) : a;
      any = true;
      if (v.f != std::ceil(v.f)) int_mode_ = false;
    }
    if (!any) return;
    if (int_mode_) sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8;
    else sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    for (auto& v : vals) {
      if (!std::isfinite(v.f) || v.f == 0) continue;
      std::size_t len = sci_mode_ ? MS_FORMAT("{:.{}e}", v.f, o_.precision).size()
                        : int_mode_ ? MS_FORMAT("{:.0f}", v.f).size() + 1
                                    : MS_FORMAT("{:.{}f}", v.f, o_.precision).size();
      width_ = std::max(width_, len);
    }
  }

  std::string format_plain(const PrintValue& v) const {
    if (t_.dtype() == DType::b8) return v.i ? "True" : "False";
    return MS_FORMAT("{}", v.i);
  }

  std::string format(const PrintValue& v) const {
    std::string s;
    if (!floating_) s = format_plain(v);
    else if (std::isnan(v.f)) s = "nan";  // never "-nan"
    else if (std::isinf(v.f)) s = v.f > 0 ? "inf" : "-inf";
    else if (sci_mode_) s = MS_FORMAT("{:.{}e}", v.f, o_.precision);
    else if (int_mode_) s = MS_FORMAT("{:.0f}.", v.f);
    else s = MS_FORMAT("{:.{}f}", v.f, o_.precision);
    if (s.size() < width_) s.insert(0, width_ - s.size(), ' ');
    return s;
  }

  void vector_str(std::int64_t off, int indent, std::string& out) const {
    const int d = t_.dim() - 1;
    const std::int64_t stride = t_.strides()[d], n = t_.shape()[d];
    const std::int64_t per_line =
        std::max<std::int64_t>(1, (o_.linewidth - indent) / static_cast<std::int64_t>(width_ + 2));
    std::vector<std::string> items;
    for_shown(d, [&](std::int64_t i) {
      if (elided(d) && i == n - o_.edgeitems) items.emplace_back(" ...");
      items.push_back(format(read(off + i * stride)));
    });
    out += '[';
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k > 0) {
        if (k % static_cast<std::size_t>(per_line) == 0) out += ",\n" + std::string(static_cast<std::size_t>(indent + 1), ' ');
        else out += ", ";
      }
      out += items[k];
    }
    out += ']';
  }

  void tensor_str(int d, std::int64_t off, int indent, std::string& out) const {
    if (d == t_.dim() - 1) {
      vector_str(off, indent, out);
      return;
    }
    const int rest = t_.dim() - d;  // dims of the sub-tensor printed here
    const std::string sep = "," + std::string(static_cast<std::size_t>(rest - 1), '\n') +
                            std::string(static_cast<std::size_t>(indent + 1), ' ');
    const std::int64_t n = t_.shape()[d];
    bool first = true;
    out += '[';
    for_shown(d, [&](std::int64_t i) {
      if (!first) out += sep;
      if (elided(d) && i == n - o_.edgeitems) out += "..." + sep;
      first = false;
      tensor_str(d + 1, off + i * t_.strides()[d], indent + 1, out);
    });
    out += ']';
  }

  const AnyTensor& t_;
  const PrintOptions& o_;
  const char* base_ = nullptr;
  bool floating_ = false, summarize_ = false;
  bool int_mode_ = true, sci_mode_ = false;
  std::size_t width_ = 1;
};

}  // namespace detail

MS_IMPL std::string to_string(const AnyTensor& t, const PrintOptions& opts) {
  if (!t.defined()) return "tensor(undefined)";
  std::string body = t.device().is_cpu() ? detail::TensorPrinter(t, opts).body() : "<on " + t.device().str() + ">";
  std::string out = MS_FORMAT("tensor({}, shape={}, dtype={}, device={}", body, shape_str(t.shape()), t.dtype(),
                                t.device());
  if (auto& m = t.impl()->autograd; m && m->requires_grad) out += ", requires_grad=True";
  out += ')';
  return out;
}
#endif  // MS_IMPL_BODIES

}  // namespace ms

/// fmt::format("{}", t); "{:.2}" prints floats with 2 decimals.
template <>
struct fmt::formatter<ms::AnyTensor> {
  int precision = -1;
  constexpr auto parse(format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == '.') {
      ++it;
      precision = 0;
      while (it != ctx.end() && *it >= '0' && *it <= '9') precision = precision * 10 + (*it++ - '0');
    }
    if (it != ctx.end() && *it != '}') ctx.on_error("ms::Tensor format spec must be empty or .N (decimals)");
    return it;
  }
  template <class Ctx>
  auto format(const ms::AnyTensor& t, Ctx& ctx) const {
    ms::PrintOptions o;
    if (precision >= 0) o.precision = precision;
    std::string s = ms::to_string(t, o);
    return std::copy(s.begin(), s.end(), ctx.out());
  }
};

template <ms::Element T>
struct fmt::formatter<ms::Tensor<T>> : fmt::formatter<ms::AnyTensor> {};
