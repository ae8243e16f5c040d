#pragma once
// Shapes and strides: Shape (a small inline vector of extents), element counts,
// contiguous strides, NumPy broadcasting and axis normalization, and NumPy-style
// printing "(3, 4)" / "(5,)" / "()". Must not know about storage or dtypes.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "error.hpp"

namespace ms {

/// Tensors have at most this many dimensions.
inline constexpr int kMaxDims = 8;

/// A vector of trivially copyable T stored inline up to N elements and on the heap beyond.
/// Used where a std::vector's allocation would dominate a small eager op.
template <class T, int N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVec() = default;
  SmallVec(std::initializer_list<T> xs) { assign(xs.begin(), xs.end()); }
  explicit SmallVec(std::size_t n, T v = T{}) { resize(n, v); }
  template <class It>
  SmallVec(It b, It e) { assign(b, e); }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) { size_ = 0; assign(o.begin(), o.end()); }
    return *this;
  }
  ~SmallVec() { release(); }

  T* data() { return heap_ ? heap_ : inline_.v; }
  const T* data() const { return heap_ ? heap_ : inline_.v; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  void clear() { size_ = 0; }
  void reserve(std::size_t n) {
    if (n <= capacity()) return;
    T* p = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    std::uninitialized_copy(begin(), end(), p);
    release();
    heap_ = p;
    cap_ = n;
  }
  void push_back(const T& v) {
    if (size_ == capacity()) {
      T copy = v;  // v may live in this vector
      reserve(capacity() * 2);
      std::construct_at(data() + size_++, copy);
      return;
    }
    std::construct_at(data() + size_++, v);
  }
  void resize(std::size_t n, T v = T{}) {
    reserve(n);
    for (std::size_t i = size_; i < n; ++i) std::construct_at(data() + i, v);
    size_ = n;
  }
  std::size_t capacity() const { return heap_ ? cap_ : N; }

 private:
  template <class It>
  void assign(It b, It e) {
    reserve(static_cast<std::size_t>(std::distance(b, e)));
    for (; b != e; ++b) std::construct_at(data() + size_++, *b);
  }
  void release() {
    if (heap_) ::operator delete(heap_, std::align_val_t{alignof(T)});
  }
  // Uninitialized inline slots: a small op's metadata vectors are built on every call, and
  // zero-filling unused slots (a TensorMeta is 80 bytes) showed up in eager dispatch profiles.
  union Inline {
    Inline() {}
    T v[N];
  } inline_;
  T* heap_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

/// Extents of a tensor (or strides in elements): up to kMaxDims int64 values, trivially copyable.
class Shape {
 public:
  constexpr Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(std::span<const std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const std::vector<std::int64_t>& dims) { assign(dims.begin(), dims.end()); }
  /// A shape of `rank` dims, all equal to `fill`.
  static Shape filled(int rank, std::int64_t fill) {
    Shape s;
    check_rank(rank);
    s.rank_ = rank;
    for (int i = 0; i < rank; ++i) s.d_[i] = fill;
    return s;
  }

  int rank() const { return rank_; }
  std::size_t size() const { return static_cast<std::size_t>(rank_); }
  bool empty() const { return rank_ == 0; }
  std::int64_t& operator[](std::size_t i) { return d_[i]; }
  std::int64_t operator[](std::size_t i) const { return d_[i]; }
  const std::int64_t* begin() const { return d_.data(); }
  const std::int64_t* end() const { return d_.data() + rank_; }
  std::int64_t* begin() { return d_.data(); }
  std::int64_t* end() { return d_.data() + rank_; }
  const std::int64_t* data() const { return d_.data(); }
  std::int64_t back() const { return d_[rank_ - 1]; }
  void push_back(std::int64_t v) {
    check_rank(rank_ + 1);
    d_[rank_++] = v;
  }
  void insert(int pos, std::int64_t v) {
    check_rank(rank_ + 1);
    for (int i = rank_; i > pos; --i) d_[i] = d_[i - 1];
    d_[pos] = v;
    ++rank_;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < rank_; ++i) d_[i] = d_[i + 1];
    --rank_;
  }
  std::vector<std::int64_t> vec() const { return {begin(), end()}; }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)  // a plain loop: std::equal becomes a memcmp call
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }

 private:
  static void check_rank(int r) {
    MS_CHECK(r <= kMaxDims, ShapeError, "tensors have at most {} dimensions, got {}", kMaxDims, r);
  }
  template <class It>
  void assign(It b, It e) {
    check_rank(static_cast<int>(std::distance(b, e)));
    rank_ = 0;
    for (; b != e; ++b) d_[rank_++] = static_cast<std::int64_t>(*b);
  }
  std::array<std::int64_t, kMaxDims> d_{};
  int rank_ = 0;
};

/// Number of elements of a shape (1 for a 0-d shape).
inline std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

/// Row-major (C order) strides, in elements.
inline Shape contiguous_strides(const Shape& s) {
  Shape st = Shape::filled(s.rank(), 1);
  std::int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<std::int64_t>(s[i], 1);
  }
  return st;
}

/// NumPy-style text: "(3, 4)", "(5,)", "()".
inline std::string shape_str(const Shape& s) {
  if (s.rank() == 1) return MS_FORMAT("({},)", s[0]);
  return MS_FORMAT("({})", ::ms::detail::join_text(s.begin(), s.end(), ", "));
}

/// Broadcasts two shapes by NumPy's rules; std::nullopt-like flag via `ok`.
inline bool try_broadcast(const Shape& a, const Shape& b, Shape& out) {
  int r = std::max(a.rank(), b.rank());
  out = Shape::filled(r, 1);
  for (int i = 0; i < r; ++i) {
    std::int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    std::int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return false;
  }
  return true;
}

/// Broadcasts two shapes; throws "[ms.shape_error] <op>: cannot broadcast (3, 4) with (5,)".
inline Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  Shape out;
  MS_CHECK(try_broadcast(a, b, out), ShapeError, "{}: cannot broadcast {} with {}", op, shape_str(a), shape_str(b));
  return out;
}

/// Maps a possibly negative axis into [0, rank); throws IndexError naming the op.
inline int normalize_axis(std::int64_t axis, int rank, std::string_view op) {
  int r = std::max(rank, 0);
  MS_CHECK((axis >= -r && axis < r) || (r == 0 && (axis == 0 || axis == -1)), IndexError,
           "{}: axis {} is out of range for a tensor of rank {}", op, axis, rank);
  if (r == 0) return 0;  // a 0-d tensor's axis 0 or -1
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

}  // namespace ms

template <>
struct fmt::formatter<ms::Shape> : ms::detail::TextFormatter {
  template <class Ctx>
  auto format(const ms::Shape& s, Ctx& ctx) const {
    return format_text(ms::shape_str(s), ctx);
  }
};
