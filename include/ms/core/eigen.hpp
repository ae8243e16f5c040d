#pragma once
// Zero-copy interop with Eigen, both ways: ms::as_eigen(tensor) maps a 1-D/2-D
// tensor's memory as an Eigen::Map that follows its strides, and ms::from_eigen(m)
// makes a tensor over an Eigen object's memory (borrowed storage). Nothing is
// copied either way: a write through one is seen by the other.
// Must not know about ops; include it where Eigen code meets tensors.

#include <type_traits>

#include <Eigen/Core>

#include "tensor.hpp"

namespace ms {

/// Row-major map with runtime strides: what as_eigen() returns.
template <class T>
using EigenMatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                                  Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
/// Column-vector map with a runtime stride: what as_eigen_vector() returns.
template <class T>
using EigenVectorMap =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>, Eigen::Unaligned, Eigen::InnerStride<Eigen::Dynamic>>;

/// Maps a 2-D tensor as a rows x cols Eigen matrix, or a 1-D tensor as an n x 1 column,
/// over the tensor's own memory and strides (transposed and sliced views work; a
/// broadcast view maps its repeated elements to one address). Writes through the map
/// change the tensor. The map is valid while the tensor's storage lives.
/// Throws ShapeError for other ranks, DeviceError for a tensor not on the cpu.
template <Element T>
EigenMatrixMap<T> as_eigen(const Tensor<T>& t) {
  detail::on_host_read("as_eigen");
  MS_CHECK(t.defined(), ValueError, "as_eigen: the tensor is undefined");
  MS_CHECK(t.device().is_cpu(), DeviceError, "as_eigen: tensor is on {}, copy it to the cpu first", t.device());
  MS_CHECK(t.dim() == 1 || t.dim() == 2, ShapeError, "as_eigen: expects a 1-D or 2-D tensor, got shape {}",
           shape_str(t.shape()));
  T* p = static_cast<T*>(t.raw_data());
  if (t.dim() == 1)
    return EigenMatrixMap<T>(p, t.shape()[0], 1, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(t.strides()[0], 1));
  return EigenMatrixMap<T>(p, t.shape()[0], t.shape()[1],
                           Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(t.strides()[0], t.strides()[1]));
}

/// Maps a 1-D tensor as an Eigen column vector (with its stride). Throws ShapeError for other ranks.
template <Element T>
EigenVectorMap<T> as_eigen_vector(const Tensor<T>& t) {
  detail::on_host_read("as_eigen_vector");
  MS_CHECK(t.defined(), ValueError, "as_eigen_vector: the tensor is undefined");
  MS_CHECK(t.device().is_cpu(), DeviceError, "as_eigen_vector: tensor is on {}, copy it to the cpu first", t.device());
  MS_CHECK(t.dim() == 1, ShapeError, "as_eigen_vector: expects a 1-D tensor, got shape {}", shape_str(t.shape()));
  return EigenVectorMap<T>(static_cast<T*>(t.raw_data()), t.shape()[0], Eigen::InnerStride<Eigen::Dynamic>(t.strides()[0]));
}

/// A tensor over the memory of an Eigen matrix, array, Map, Ref or block, without a copy:
/// a vector type (compile-time one row or one column) becomes a 1-D tensor, anything else a
/// rows x cols tensor whose strides follow the object's layout (column-major objects give
/// a transposed-looking stride pair, e.g. (1, rows)). The Eigen object's memory must outlive
/// the tensor and every view of it, and must not be reallocated (no resize) meanwhile.
/// Plain temporaries (an rvalue Eigen::Matrix) are rejected at compile time.
template <class D>
auto from_eigen(D&& m) {
  using Obj = std::remove_cvref_t<D>;
  using T = std::remove_const_t<typename Obj::Scalar>;
  static_assert(!(std::is_rvalue_reference_v<D&&> && std::is_base_of_v<Eigen::PlainObjectBase<Obj>, Obj>),
                "ms::from_eigen: the tensor would outlive a temporary Eigen matrix; pass a named object");
  static_assert((Obj::Flags & Eigen::DirectAccessBit) != 0,
                "ms::from_eigen: the Eigen expression has no direct memory access (evaluate it into a matrix first)");
  static_assert(Element<T>, "ms::from_eigen: the Eigen scalar type is not an ms element type");
  T* data = const_cast<T*>(m.data());
  Shape shape, strides;
  if constexpr (Obj::IsVectorAtCompileTime) {
    shape = Shape{static_cast<std::int64_t>(m.size())};
    strides = Shape{static_cast<std::int64_t>(m.innerStride())};
  } else if constexpr (Obj::IsRowMajor) {
    shape = Shape{static_cast<std::int64_t>(m.rows()), static_cast<std::int64_t>(m.cols())};
    strides = Shape{static_cast<std::int64_t>(m.outerStride()), static_cast<std::int64_t>(m.innerStride())};
  } else {
    shape = Shape{static_cast<std::int64_t>(m.rows()), static_cast<std::int64_t>(m.cols())};
    strides = Shape{static_cast<std::int64_t>(m.innerStride()), static_cast<std::int64_t>(m.outerStride())};
  }
  std::int64_t n = numel(shape), extent = 0;
  for (int i = 0; i < shape.rank(); ++i) {
    MS_CHECK(strides[i] >= 0 || shape[i] <= 1, ValueError, "from_eigen: negative stride {} (shape {})", shape_str(strides),
             shape_str(shape));
    if (shape[i] > 1) extent += (shape[i] - 1) * strides[i];
  }
  std::size_t nbytes = n == 0 ? 0 : static_cast<std::size_t>(extent + 1) * sizeof(T);
  auto storage = Storage::borrowed(static_cast<void*>(data), nbytes, Device::cpu());
  return Tensor<T>(AnyTensor::view_of(std::move(storage), shape, strides, 0, dtype_v<T>));
}

}  // namespace ms
