// slice_scatter, scatter_add and index_add against hand-computed references, their
// errors, and their gradients (through the autodiff tape) against hand values.

#include "../test_util.hpp"

using ms::Tensor;
using ms_test::require_values;

MS_TEST_COVERS("slice_scatter", "scatter_add", "index_add");

TEST_CASE("slice_scatter writes src into a strided slice of a copy of base", "[op]") {
  Tensor<float> base{{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}};
  Tensor<float> src{{1, 2, 3}, {4, 5, 6}};
  auto out = Tensor<float>(ms::ops::slice_scatter(base, src, 1, 0, 5, 2));
  require_values(out, {1, 0, 2, 0, 3, 4, 0, 5, 0, 6});
  require_values(base, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0});  // base unchanged
  // negative step: positions 4, 2, 0 along axis 1
  auto rev = Tensor<float>(ms::ops::slice_scatter(base, src, 1, -1, -6, -2));
  require_values(rev, {3, 0, 2, 0, 1, 6, 0, 5, 0, 4});
  MS_REQUIRE_THROWS_MSG(ms::ops::slice_scatter(base, Tensor<float>{1, 2}, 1, 0, 5, 2), ms::ShapeError,
                        "[ms.shape_error] slice_scatter: src (2,) does not match the slice shape (2, 3)");
}

TEST_CASE("scatter_add is the adjoint of gather", "[op]") {
  Tensor<float> base{{1, 1, 1}, {1, 1, 1}};
  Tensor<std::int64_t> idx{{0, 2}, {1, 1}};
  Tensor<float> src{{10, 20}, {30, 40}};
  auto out = Tensor<float>(ms::ops::scatter_add(base, 1, idx, src));
  require_values(out, {11, 1, 21, 1, 71, 1});
  Tensor<std::int64_t> bad{{0, 3}, {1, 1}};
  MS_REQUIRE_THROWS_MSG(ms::ops::scatter_add(base, 1, bad, src), ms::IndexError,
                        "[ms.index_error] scatter_add: index 3 is out of range for axis 1 with size 3");
  Tensor<float> wrong{1, 2};
  MS_REQUIRE_THROWS_MSG(ms::ops::scatter_add(base, 1, idx, Tensor<float>{{1, 2, 3}, {4, 5, 6}}), ms::ShapeError,
                        "[ms.shape_error] scatter_add: index (2, 2) and src (2, 3) must have the same shape and the "
                        "rank of base (2, 3)");
  (void)wrong;
}

TEST_CASE("index_add adds rows of src at the indexed rows of base", "[op]") {
  Tensor<double> base{{0, 0}, {0, 0}, {0, 0}};
  Tensor<std::int64_t> idx{2, 0, 2};
  Tensor<double> src{{1, 2}, {3, 4}, {5, 6}};
  auto out = Tensor<double>(ms::ops::index_add(base, 0, idx, src));
  require_values(out, {3, 4, 0, 0, 6, 8});
  Tensor<std::int32_t> idx32{-1, 0, 1};
  auto out32 = Tensor<double>(ms::ops::index_add(base, 0, idx32, src));
  require_values(out32, {3, 4, 5, 6, 1, 2});
  MS_REQUIRE_THROWS_MSG(ms::ops::index_add(base, 0, Tensor<float>{0, 1, 2}, src), ms::DTypeError,
                        "[ms.dtype_error] index_add: index must be int64 or int32, got float32");
}

TEST_CASE("gradients of gather, index_select and slice flow through the scatter ops", "[op][grad]") {
  Tensor<double> x{{1, 2, 3}, {4, 5, 6}};
  x.requires_grad_();
  Tensor<std::int64_t> idx{{0, 0}, {2, 1}};
  auto g = ms::ops::gather(x, 1, idx);  // [[1, 1], [6, 5]]
  auto s = ms::ops::index_select(x, 0, Tensor<std::int64_t>{1, 1});
  auto sl = ms::ops::slice(x, 1, 1, 3);
  auto loss = ms::ops::add(ms::ops::add(ms::ops::sum(g, {}, false), ms::ops::sum(s, {}, false)),
                           ms::ops::sum(ms::ops::mul(sl, 3.0), {}, false));
  loss.backward();
  // d/dx: gather picks x00 twice, x12, x11; index_select picks row 1 twice; slice adds 3 on columns 1..2.
  require_values(x.grad(), {2, 3, 3, 2, 6, 6});
}
