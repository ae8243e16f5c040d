// Tests of zero-copy Eigen interop (core/eigen.hpp): as_eigen follows a tensor's strides,
// from_eigen shares an Eigen object's memory; writes through either side are seen by the other.

#include <Eigen/Core>

#include <ms/core/eigen.hpp>

#include "test_util.hpp"

using ms_test::require_shape;
using ms_test::require_values;

TEST_CASE("as_eigen: a 2-D tensor maps without a copy", "[eigen]") {
  auto t = ms::arange<float>(6).reshape({2, 3});
  auto m = ms::as_eigen(t);
  REQUIRE(m.rows() == 2);
  REQUIRE(m.cols() == 3);
  CHECK(m.data() == t.raw_data());
  CHECK(m(1, 2) == 5.0f);
  CHECK(m(0, 1) == 1.0f);
  m(1, 0) = 30;  // write through the map
  CHECK(t(1, 0) == 30.0f);
  t(0, 2) = -2;  // write through the tensor
  CHECK(m(0, 2) == -2.0f);
  // Eigen arithmetic on the map works like on a matrix.
  Eigen::MatrixXf prod = m * m.transpose();
  CHECK(prod(0, 0) == Approx(0 * 0 + 1 * 1 + 4));
}

TEST_CASE("as_eigen: strided views keep their strides", "[eigen]") {
  auto t = ms::arange<double>(12).reshape({3, 4});
  auto tt = t.t();  // (4, 3), strides (1, 4)
  auto m = ms::as_eigen(tt);
  REQUIRE(m.rows() == 4);
  REQUIRE(m.cols() == 3);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(m(i, j) == t(j, i));
  CHECK(m.data() == t.raw_data());
  m(3, 2) = 100;
  CHECK(t(2, 3) == 100.0);

  auto s = t.slice(1, 1, 4, 2);  // columns 1 and 3: offset and stride 2
  auto ms_ = ms::as_eigen(s);
  REQUIRE(ms_.cols() == 2);
  CHECK(ms_(0, 0) == 1.0);
  CHECK(ms_(2, 1) == 100.0);  // written through the transposed map above
  ms_(1, 1) = -7;
  CHECK(t(1, 3) == -7.0);

  auto base = ms::arange<double>(12);
  auto col = base.slice(0, 2, 12, 4);  // a 1-D view with stride 4: 2, 6, 10
  auto v = ms::as_eigen_vector(col);
  REQUIRE(v.size() == 3);
  CHECK(v(0) == 2.0);
  CHECK(v(2) == 10.0);
  v(1) = 60;
  CHECK(base(6) == 60.0);
  auto cm = ms::as_eigen(col);  // 1-D as an n x 1 matrix
  REQUIRE(cm.rows() == 3);
  REQUIRE(cm.cols() == 1);
  CHECK(cm(1, 0) == 60.0);
}

TEST_CASE("as_eigen: errors", "[eigen]") {
  auto t3 = ms::zeros<float>({2, 2, 2});
  MS_REQUIRE_THROWS_MSG(ms::as_eigen(t3), ms::ShapeError,
                        "[ms.shape_error] as_eigen: expects a 1-D or 2-D tensor, got shape (2, 2, 2)");
  MS_REQUIRE_THROWS_MSG(ms::as_eigen(ms::scalar<float>(1)), ms::ShapeError,
                        "[ms.shape_error] as_eigen: expects a 1-D or 2-D tensor, got shape ()");
  MS_REQUIRE_THROWS_MSG(ms::as_eigen_vector(ms::zeros<float>({2, 2})), ms::ShapeError,
                        "[ms.shape_error] as_eigen_vector: expects a 1-D tensor, got shape (2, 2)");
}

TEST_CASE("from_eigen: a column-major matrix shares its memory", "[eigen]") {
  Eigen::MatrixXf m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  auto t = ms::from_eigen(m);
  static_assert(std::is_same_v<decltype(t), ms::Tensor<float>>);
  require_shape(t, {2, 3});
  CHECK(t.strides() == ms::Shape{1, 2});  // column-major
  CHECK(t.raw_data() == m.data());
  require_values(t, {1, 2, 3, 4, 5, 6});  // logical (row-major) order
  t(0, 2) = 30;
  CHECK(m(0, 2) == 30.0f);
  m(1, 0) = 40;
  CHECK(t(1, 0) == 40.0f);
  // Ops see the values through the strides.
  require_values(t.contiguous(), {1, 2, 30, 40, 5, 6});
  CHECK(t.storage()->nbytes == 6 * sizeof(float));
}

TEST_CASE("from_eigen: row-major matrices, vectors, maps and blocks", "[eigen]") {
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r(2, 2);
  r << 1, 2, 3, 4;
  auto tr = ms::from_eigen(r);
  CHECK(tr.strides() == ms::Shape{2, 1});
  CHECK(tr.is_contiguous());
  require_values(tr, {1, 2, 3, 4});

  Eigen::VectorXi v(3);
  v << 7, 8, 9;
  auto tv = ms::from_eigen(v);
  static_assert(std::is_same_v<decltype(tv), ms::Tensor<int>>);
  require_shape(tv, {3});
  tv(1) = 80;
  CHECK(v(1) == 80);

  float buf[6] = {1, 2, 3, 4, 5, 6};
  auto tm = ms::from_eigen(Eigen::Map<Eigen::MatrixXf>(buf, 3, 2));  // a temporary Map is fine
  require_shape(tm, {3, 2});
  require_values(tm, {1, 4, 2, 5, 3, 6});
  CHECK(tm.raw_data() == buf);

  Eigen::MatrixXd big = Eigen::MatrixXd::Zero(4, 5);
  auto blk = big.block(1, 2, 2, 3);  // outer stride 4
  auto tb = ms::from_eigen(blk);
  require_shape(tb, {2, 3});
  CHECK(tb.strides() == ms::Shape{1, 4});
  tb(1, 2) = 9;
  CHECK(big(2, 4) == 9.0);

  // Round trip: tensor -> map -> tensor shares one buffer.
  auto t = ms::arange<float>(4).reshape({2, 2});
  auto map = ms::as_eigen(t);
  auto back = ms::from_eigen(map);
  CHECK(back.raw_data() == t.raw_data());
  CHECK(back.strides() == t.strides());
  back(1, 1) = 33;
  CHECK(t(1, 1) == 33.0f);

  Eigen::MatrixXf empty(0, 3);
  require_shape(ms::from_eigen(empty), {0, 3});
}
