#pragma once
// Zero-copy interop with Eigen, both ways: ms::as_eigen(tensor) maps a 1-D/2-D
// tensor's memory as an Eigen::Map that follows its strides, and ms::from_eigen(m)
// makes a tensor over an Eigen object's memory (borrowed storage). Nothing is
// copied either way: a write through one is seen by the other.
// Not part of <ms/ms.hpp> (a unit that includes only that parses no Eigen): include
// <ms/core/eigen.hpp> where Eigen code meets tensors. float16 and bfloat16 tensors map as
// Eigen::half / Eigen::bfloat16 matrices (the same 16 bits). Must not know about ops.

#include <type_traits>

#include "intrin.hpp"  // before Eigen: see there
#include <Eigen/Core>

#include "tensor.hpp"

namespace ms {

namespace detail {
/// The Eigen scalar type of an ms element type, and back: ms::half is Eigen::half's layout.
template <class T> struct EigenScalar { using type = T; };
template <> struct EigenScalar<half> { using type = Eigen::half; };
template <> struct EigenScalar<bfloat16> { using type = Eigen::bfloat16; };
template <class S> struct ElementOfEigen { using type = S; };
template <> struct ElementOfEigen<Eigen::half> { using type = half; };
template <> struct ElementOfEigen<Eigen::bfloat16> { using type = bfloat16; };
static_assert(sizeof(Eigen::half) == sizeof(half) && sizeof(Eigen::bfloat16) == sizeof(bfloat16));
}  // namespace detail
/// The Eigen scalar type that maps an ms element type (T itself but for half and bfloat16).
template <class T>
using eigen_scalar_t = typename detail::EigenScalar<T>::type;

/// Row-major map with runtime strides: what as_eigen() returns.
template <class T>
using EigenMatrixMap = Eigen::Map<Eigen::Matrix<eigen_scalar_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                                  Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
/// Column-vector map with a runtime stride: what as_eigen_vector() returns.
template <class T>
using EigenVectorMap =
    Eigen::Map<Eigen::Matrix<eigen_scalar_t<T>, Eigen::Dynamic, 1>, Eigen::Unaligned,
               Eigen::InnerStride<Eigen::Dynamic>>;

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
  auto* p = static_cast<eigen_scalar_t<T>*>(t.raw_data());
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
  return EigenVectorMap<T>(static_cast<eigen_scalar_t<T>*>(t.raw_data()), t.shape()[0],
                           Eigen::InnerStride<Eigen::Dynamic>(t.strides()[0]));
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
  using S = std::remove_const_t<typename Obj::Scalar>;
  using T = typename detail::ElementOfEigen<S>::type;
  static_assert(!(std::is_rvalue_reference_v<D&&> && std::is_base_of_v<Eigen::PlainObjectBase<Obj>, Obj>),
                "ms::from_eigen: the tensor would outlive a temporary Eigen matrix; pass a named object");
  static_assert((Obj::Flags & Eigen::DirectAccessBit) != 0,
                "ms::from_eigen: the Eigen expression has no direct memory access (evaluate it into a matrix first)");
  static_assert(Element<T>, "ms::from_eigen: the Eigen scalar type is not an ms element type");
  void* data = const_cast<S*>(m.data());
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
  auto storage = Storage::borrowed(data, nbytes, Device::cpu());
  return Tensor<T>(AnyTensor::view_of(std::move(storage), shape, strides, 0, dtype_v<T>));
}

}  // namespace ms
