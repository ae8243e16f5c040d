#pragma once
// Tensors: TensorImpl (storage + shape + strides + offset + dtype), the untyped
// handle AnyTensor that ops work on, and the typed handle Tensor<T> users hold.
// Views share storage. Op methods (a.sum(), a.reshape()) are declared here and
// defined in ops/methods.hpp. Must not know about graphs or backends.

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "shape.hpp"
#include "storage.hpp"

namespace ms {

struct TensorImpl;
namespace detail {
struct GradNode;  // a backward-graph node, defined in autograd/

/// Autodiff state of a tensor; a tensor holds one only when it takes part in autodiff.
struct AutogradMeta {
  bool requires_grad = false;          ///< a leaf whose gradient is accumulated into `grad`
  std::shared_ptr<TensorImpl> grad;    ///< accumulated gradient of a leaf
  std::shared_ptr<GradNode> grad_fn;   ///< the node that produced this (non-leaf) tensor
  int output_index = 0;                ///< which output of grad_fn this tensor is
  /// Leaves: called by a backward pass once this leaf's gradient is complete (every
  /// contribution of that pass summed), with the gradient (autograd::add_grad_ready_hook).
  std::vector<std::pair<std::uint64_t, std::function<void(const std::shared_ptr<TensorImpl>&)>>> grad_ready_hooks;
};

/// Called before the host reads a tensor's values (item(), data(), element access).
/// Graph capture installs a hook that rejects such reads, since a traced graph
/// could not reproduce control flow that depends on them.
using HostReadHook = void (*)(const char* what);
inline thread_local HostReadHook host_read_hook = nullptr;
inline void on_host_read(const char* what) {
  if (host_read_hook) [[unlikely]] host_read_hook(what);
}
}  // namespace detail

/// The data behind every tensor handle.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  ///< in elements
  std::int64_t offset = 0;  ///< in elements
  DType dtype = DType::f32;
  std::shared_ptr<detail::AutogradMeta> autograd;

  std::int64_t numel() const { return ms::numel(shape); }
  bool is_contiguous() const {
    if (numel() == 0) return true;  // no element to misplace
    std::int64_t expect = 1;
    for (int i = shape.rank() - 1; i >= 0; --i) {
      if (shape[i] == 1) continue;
      if (strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  void* data_ptr() const {
    return static_cast<char*>(storage->data) + offset * static_cast<std::int64_t>(dtype_size(dtype));
  }
};

template <Element T>
class Tensor;

/// An untyped tensor handle (shared ownership of a TensorImpl). Ops take and return these;
/// Tensor<T> adds typed access on top.
class AnyTensor {
 public:
  AnyTensor() = default;
  explicit AnyTensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// A new contiguous tensor with uninitialized contents on the host.
  static AnyTensor empty(const Shape& shape, DType dtype) {
    auto impl = std::allocate_shared<TensorImpl>(detail::CachedBlockAllocator<TensorImpl>{});
    bool negative = false;
    for (auto d : shape) negative |= d < 0;  // two negative dims would multiply to a positive count
    MS_CHECK(!negative, ShapeError, "empty: negative dimension in shape {}", shape_str(shape));
    std::int64_t n = ms::numel(shape);
    MS_CHECK(static_cast<std::uint64_t>(n) <= (std::uint64_t{1} << 62) / dtype_size(dtype), MemoryError,
             "empty: a {} tensor of shape {} needs more than 2^62 bytes", dtype, shape_str(shape));
    impl->storage = Storage::host(static_cast<std::size_t>(n) * dtype_size(dtype));
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->dtype = dtype;
    return AnyTensor(std::move(impl));
  }
  /// A new contiguous host tensor of a dtype known at run time, from the raw bytes of its
  /// elements in row-major order (host byte order); `nbytes` must be numel(shape) * dtype_size.
  static AnyTensor from_bytes(DType dtype, const Shape& shape, const void* bytes, std::size_t nbytes) {
    AnyTensor t = empty(shape, dtype);
    MS_CHECK(nbytes == t.nbytes(), ShapeError,
             "from_bytes: {} bytes given for a {} tensor of shape {}, which needs {} ({} elements of {} bytes)", nbytes,
             dtype, shape_str(shape), t.nbytes(), t.numel(), dtype_size(dtype));
    if (nbytes) std::memcpy(t.raw_data(), bytes, nbytes);
    return t;
  }
  static AnyTensor from_bytes(DType dtype, const Shape& shape, std::span<const std::byte> bytes) {
    return from_bytes(dtype, shape, bytes.data(), bytes.size());
  }
  /// The elements' raw bytes in row-major order (copies; any strides; host tensors only):
  /// from_bytes(t.dtype(), t.shape(), t.to_bytes()) is a copy of t.
  std::vector<std::byte> to_bytes() const;

  /// A tensor over existing storage with the given layout (no copy).
  static AnyTensor view_of(std::shared_ptr<Storage> storage, const Shape& shape, const Shape& strides,
                           std::int64_t offset, DType dtype) {
    auto impl = std::allocate_shared<TensorImpl>(detail::CachedBlockAllocator<TensorImpl>{});
    impl->storage = std::move(storage);
    impl->shape = shape;
    impl->strides = strides;
    impl->offset = offset;
    impl->dtype = dtype;
    return AnyTensor(std::move(impl));
  }

  bool defined() const { return impl_ != nullptr; }
  explicit operator bool() const { return defined(); }
  const Shape& shape() const { return impl_->shape; }
  std::int64_t shape(int axis) const { return impl_->shape[normalize_axis(axis, dim(), "shape")]; }
  const Shape& strides() const { return impl_->strides; }
  std::int64_t offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device; }
  int dim() const { return impl_->shape.rank(); }
  std::int64_t numel() const { return impl_->numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const { return impl_->is_contiguous(); }
  /// Address of the first element; no host-read check (for kernels).
  void* raw_data() const { return impl_->data_ptr(); }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles share the same TensorImpl.
  bool is_same(const AnyTensor& o) const { return impl_ == o.impl_; }
  /// True when both handles view the same storage.
  bool shares_storage(const AnyTensor& o) const { return impl_->storage == o.impl_->storage; }

  /// Typed handle; throws DTypeError when T does not match.
  template <Element T>
  Tensor<T> as() const;

  // Autodiff (defined in autograd/tape.hpp); the same names as on Tensor<T> and torch.Tensor.
  /// True for a leaf that requires grad and for a tensor computed from one.
  bool requires_grad() const;
  /// Marks a floating leaf as requiring grad (torch.Tensor.requires_grad_); returns *this.
  AnyTensor& requires_grad_(bool on = true) { return set_requires_grad(on); }
  /// The gradient accumulated into a leaf by backward() (undefined before any).
  AnyTensor grad() const { return grad_any(); }
  /// Deprecated spelling of requires_grad_() (kept for existing code).
  AnyTensor& set_requires_grad(bool on = true);
  /// Deprecated spelling of grad() (kept for existing code).
  AnyTensor grad_any() const;
  void zero_grad();
  void backward(const AnyTensor& grad_output = AnyTensor()) const;
  AnyTensor detach() const;

 protected:
  std::shared_ptr<TensorImpl> impl_;
};

/// A tensor of element type T (float, double, int32_t, int64_t, uint8_t, bool, half, bfloat16).
/// Copying a Tensor copies the handle, not the data (like torch.Tensor); use clone() to copy data.
template <Element T>
class Tensor : public AnyTensor {
 public:
  using value_type = T;
  Tensor() = default;
  /// Adopts an untyped handle; throws DTypeError when its dtype is not T.
  Tensor(const AnyTensor& t) : AnyTensor(t) {  // NOLINT: implicit by design, checked
    check_dtype();
  }
  /// Adopts an untyped handle without touching its reference count (the result of an op).
  Tensor(AnyTensor&& t) : AnyTensor(std::move(t)) {  // NOLINT: implicit by design, checked
    check_dtype();
  }
  /// A 1-D tensor from values: Tensor<float>{1, 2, 3}.
  Tensor(std::initializer_list<T> values) : AnyTensor(empty(Shape{static_cast<std::int64_t>(values.size())}, dtype_v<T>)) {
    std::copy(values.begin(), values.end(), static_cast<T*>(raw_data()));
  }
  /// A 2-D tensor from rows: Tensor<float>{{1, 2}, {3, 4}}; rows must have equal length.
  Tensor(std::initializer_list<std::initializer_list<T>> rows) {
    std::int64_t r = static_cast<std::int64_t>(rows.size());
    std::int64_t c = r ? static_cast<std::int64_t>(rows.begin()->size()) : 0;
    for (auto& row : rows)
      MS_CHECK(static_cast<std::int64_t>(row.size()) == c, ShapeError,
               "tensor: ragged nested list (row of length {} where {} was expected)", row.size(), c);
    impl_ = empty(Shape{r, c}, dtype_v<T>).impl_ptr();
    T* p = static_cast<T*>(raw_data());
    for (auto& row : rows) p = std::copy(row.begin(), row.end(), p);
  }

  /// Pointer to the first element (host tensors only). Elements are laid out by strides().
  T* data() const {
    detail::on_host_read("data()");
    MS_CHECK(device().is_cpu(), DeviceError, "data(): tensor is on {}, copy it to the cpu first", device());
    return static_cast<T*>(raw_data());
  }
  /// The single value of a one-element tensor.
  T item() const {
    detail::on_host_read("item()");
    MS_CHECK(numel() == 1, ValueError, "item: a tensor with {} elements (shape {}) cannot be converted to a scalar",
             numel(), shape_str(shape()));
    MS_CHECK(device().is_cpu(), DeviceError, "item(): tensor is on {}, copy it to the cpu first", device());
    return *static_cast<const T*>(raw_data());
  }
  /// Element at a multi-index (negative indices count from the end); bounds-checked.
  T& at(std::initializer_list<std::int64_t> index) const { return at_span(std::span(index.begin(), index.size())); }
  template <class... I>
    requires(std::is_integral_v<I> && ...)
  T& operator()(I... i) const {
    std::int64_t idx[] = {static_cast<std::int64_t>(i)..., 0};
    return at_span(std::span<const std::int64_t>(idx, sizeof...(I)));
  }
  /// The elements in row-major order as a std::vector (copies; works on any strides).
  std::vector<T> to_vector() const;

  // Op methods, defined in ops/methods.hpp.
  Tensor<T> clone() const;
  Tensor<T> contiguous() const;
  Tensor<T> reshape(const Shape& s) const;
  Tensor<T> view(const Shape& s) const;
  Tensor<T> transpose(std::int64_t a, std::int64_t b) const;
  Tensor<T> permute(const Shape& perm) const;
  Tensor<T> t() const;
  /// x[start:end:step] along `dim` (a view); std::nullopt or ms::end for an omitted bound,
  /// negative indices count from the end (Python rules).
  Tensor<T> slice(std::int64_t dim, std::optional<std::int64_t> start, std::optional<std::int64_t> end = std::nullopt,
                  std::int64_t step = 1) const;
  Tensor<T> squeeze(std::int64_t axis) const;
  Tensor<T> squeeze() const;
  Tensor<T> unsqueeze(std::int64_t axis) const;
  Tensor<T> expand(const Shape& s) const;
  Tensor<T> flatten(std::int64_t start = 0, std::int64_t end = -1) const;
  Tensor<T> sum() const;
  Tensor<T> mean() const;
  Tensor<T> max() const;
  Tensor<T> min() const;
  template <Element U>
  Tensor<U> to() const;
  /// A copy on device `d` (this tensor when it is already there); defined in backend/backend.hpp.
  Tensor<T> to(Device d) const;
  Tensor<T> grad() const;
  // In-place forms (defined in ops/inplace.hpp): compute the out-of-place result, then
  // write it into this tensor's storage, so every view of it sees the new values.
  Tensor<T>& add_(const Tensor<T>& other);
  Tensor<T>& sub_(const Tensor<T>& other);
  Tensor<T>& mul_(const Tensor<T>& other);
  Tensor<T>& div_(const Tensor<T>& other);
  Tensor<T>& add_(double other);
  Tensor<T>& sub_(double other);
  Tensor<T>& mul_(double other);
  Tensor<T>& div_(double other);
  Tensor<T>& fill_(double value);
  Tensor<T>& copy_(const Tensor<T>& src);
  Tensor<T>& requires_grad_(bool on = true) { set_requires_grad(on); return *this; }

 private:
  void check_dtype() const {
    MS_CHECK(!defined() || dtype() == dtype_v<T>, DTypeError, "cannot view a {} tensor as Tensor<{}>", dtype(),
             dtype_name(dtype_v<T>));
  }
  T& at_span(std::span<const std::int64_t> index) const {
    detail::on_host_read("element access");
    MS_CHECK(device().is_cpu(), DeviceError, "element access: tensor is on {}, copy it to the cpu first", device());
    MS_CHECK(static_cast<int>(index.size()) == dim(), IndexError,
             "index: {} indices given for a tensor of rank {} (shape {})", index.size(), dim(), shape_str(shape()));
    std::int64_t off = 0;
    for (int i = 0; i < dim(); ++i) {
      std::int64_t k = index[i], n = shape()[i];
      MS_CHECK(k >= -n && k < n, IndexError, "index: index {} is out of range for axis {} with size {}", k, i, n);
      off += (k < 0 ? k + n : k) * strides()[i];
    }
    return static_cast<T*>(raw_data())[off];
  }
};

template <Element T>
Tensor<T> AnyTensor::as() const {
  return Tensor<T>(*this);
}

namespace detail {
/// Calls f(element_offset) for every element of `shape` with `strides`, in row-major order.
template <class F>
void for_each_offset(const Shape& shape, const Shape& strides, F&& f) {
  std::int64_t n = numel(shape);
  if (n == 0) return;
  int r = shape.rank();
  if (r == 0) { f(std::int64_t{0}); return; }
  std::int64_t idx[kMaxDims] = {};
  std::int64_t off = 0;
  const std::int64_t inner = shape[r - 1], inner_stride = strides[r - 1];
  for (;;) {
    for (std::int64_t i = 0; i < inner; ++i) f(off + i * inner_stride);
    int d = r - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) { off += strides[d]; break; }
      off -= (shape[d] - 1) * strides[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
}  // namespace detail

inline std::vector<std::byte> AnyTensor::to_bytes() const {
  detail::on_host_read("to_bytes()");
  MS_CHECK(device().is_cpu(), DeviceError, "to_bytes(): tensor is on {}, copy it to the cpu first", device());
  const std::size_t es = dtype_size(dtype());
  std::vector<std::byte> out(nbytes());
  if (is_contiguous()) {
    if (!out.empty()) std::memcpy(out.data(), raw_data(), out.size());
    return out;
  }
  const std::byte* base = static_cast<const std::byte*>(raw_data());
  std::byte* p = out.data();
  detail::for_each_offset(shape(), strides(), [&](std::int64_t off) {
    std::memcpy(p, base + off * static_cast<std::int64_t>(es), es);
    p += es;
  });
  return out;
}

template <Element T>
std::vector<T> Tensor<T>::to_vector() const {
  detail::on_host_read("to_vector()");
  MS_CHECK(device().is_cpu(), DeviceError, "to_vector(): tensor is on {}, copy it to the cpu first", device());
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(numel()));
  const T* base = static_cast<const T*>(raw_data());
  detail::for_each_offset(shape(), strides(), [&](std::int64_t off) { out.push_back(base[off]); });
  return out;
}

}  // namespace ms
