// The error contract across the op set: one table row per bad input, each checked for
// its exact exception type and its exact what() text ("[ms.<category>] <op>: ...").
// A row documents the message a user sees; changing a message means changing its row.

#include <functional>

#include "test_util.hpp"

namespace {

using ms::Tensor;
using ms_test::iota;
Tensor<float> m23() { return iota<float>({2, 3}); }  // a (2, 3) float32 matrix

using Row = ms_test::ErrorRow;
#define ROW MS_ERROR_ROW

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // ---- elementwise ----
      ROW("broadcast mismatch", ms::add(iota<float>({3, 4}), iota<float>({5})), ms::ShapeError,
          "[ms.shape_error] add: cannot broadcast (3, 4) with (5,)"),
      ROW("dtype mismatch add(float, int)", ms::ops::add(Tensor<float>{1, 2}, Tensor<int>{1, 2}), ms::DTypeError,
          "[ms.dtype_error] add: dtype mismatch float32 vs int32 (shapes (2,) and (2,)); convert one side with "
          "ms::cast"),
      ROW("exp on int", ms::exp(Tensor<int>{1, 2}), ms::DTypeError,
          "[ms.dtype_error] exp: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)"),
      ROW("div on int", ms::div(Tensor<std::int64_t>{4}, Tensor<std::int64_t>{2}), ms::DTypeError,
          "[ms.dtype_error] div: unsupported dtype int64 (supported: float32, float64, float16, bfloat16)"),
      ROW("logical_and on float", ms::ops::logical_and(Tensor<float>{1}, Tensor<float>{1}), ms::DTypeError,
          "[ms.dtype_error] logical_and: unsupported dtype float32 (supported: bool)"),
      ROW("integer scalar not representable", ms::add(Tensor<int>{1, 2}, 0.5), ms::ValueError,
          "[ms.value_error] add: scalar 0.5 is not representable as int32 (convert the tensor with ms::cast)"),
      ROW("integer scalar out of range", ms::mul(Tensor<std::uint8_t>{1}, 300), ms::ValueError,
          "[ms.value_error] mul: scalar 300 is not representable as uint8 (convert the tensor with ms::cast)"),
      ROW("clamp lo > hi", ms::clamp(Tensor<float>{1}, 2.0, 1.0), ms::ValueError,
          "[ms.value_error] clamp: min (2) is greater than max (1)"),
      ROW("integer pow with a negative exponent", ms::pow(Tensor<int>{2}, -1.0), ms::ValueError,
          "[ms.value_error] pow: integer tensors (int32) need a non-negative integer exponent, got -1"),
      ROW("where with a non-bool condition", ms::ops::where(Tensor<float>{1, 0}, Tensor<float>{1, 2}, Tensor<float>{3, 4}),
          ms::DTypeError, "[ms.dtype_error] where: condition must be bool, got float32 (shape (2,))"),
      ROW("gelu with an unknown approximation", ms::gelu(Tensor<float>{1}, "fast"), ms::ValueError,
          "[ms.value_error] gelu: approximate must be \"none\" or \"tanh\", got \"fast\""),
      // ---- views ----
      ROW("bad axis", m23().transpose(0, 2), ms::IndexError,
          "[ms.index_error] transpose: axis 2 is out of range for a tensor of rank 2"),
      ROW("reshape to the wrong size", m23().reshape({4, 2}), ms::ShapeError,
          "[ms.shape_error] reshape: cannot reshape (2, 3) (6 elements) into [4, 2]"),
      ROW("two -1s in reshape", m23().reshape({-1, -1}), ms::ShapeError,
          "[ms.shape_error] reshape: only one dimension can be -1, got [-1, -1]"),
      ROW("-1 in reshape that does not divide", m23().reshape({4, -1}), ms::ShapeError,
          "[ms.shape_error] reshape: cannot reshape (2, 3) (6 elements) into [4, -1]"),
      ROW("view of a non-contiguous tensor", m23().t().view({6}), ms::ShapeError,
          "[ms.shape_error] view: input (3, 2) with strides (1, 3) is not contiguous; use reshape() (which copies)"),
      ROW("permute with a repeated axis", m23().permute({0, 0}), ms::ValueError,
          "[ms.value_error] permute: axis 0 repeats in permutation [0, 0]"),
      ROW("permute of the wrong length", m23().permute({1}), ms::ShapeError,
          "[ms.shape_error] permute: permutation [1] does not match rank 2 of shape (2, 3)"),
      ROW("slice step 0", m23().slice(1, 0, 3, 0), ms::ValueError, "[ms.value_error] slice: slice step cannot be zero"),
      ROW("expand to an incompatible shape", (Tensor<float>{1, 2, 3}.expand({2, 4})), ms::ShapeError,
          "[ms.shape_error] expand: cannot expand (3,) to [2, 4]"),
      ROW("expand to fewer dims", m23().expand({3}), ms::ShapeError,
          "[ms.shape_error] expand: cannot expand (2, 3) to [3] (fewer dims)"),
      ROW("squeeze of a non-1 axis", m23().squeeze(1), ms::ShapeError,
          "[ms.shape_error] squeeze: axis 1 of shape (2, 3) has size 3, not 1"),
      ROW("unsqueeze past the end", m23().unsqueeze(3), ms::IndexError,
          "[ms.index_error] unsqueeze: axis 3 is out of range for a tensor of rank 3"),
      ROW("flatten with start after end", iota<float>({2, 3, 4}).flatten(2, 1), ms::IndexError,
          "[ms.index_error] flatten: start axis 2 is after end axis 1"),
      ROW("t() of a 3-D tensor", iota<float>({2, 2, 2}).t(), ms::ShapeError,
          "[ms.shape_error] t: expects a tensor of at most 2 dims, got shape (2, 2, 2)"),
      // ---- tensor access ----
      ROW("item() on many elements", m23().item(), ms::ValueError,
          "[ms.value_error] item: a tensor with 6 elements (shape (2, 3)) cannot be converted to a scalar"),
      ROW("element index out of range", m23()(0, 3), ms::IndexError,
          "[ms.index_error] index: index 3 is out of range for axis 1 with size 3"),
      ROW("negative element index out of range", m23().at({-3, 0}), ms::IndexError,
          "[ms.index_error] index: index -3 is out of range for axis 0 with size 2"),
      ROW("wrong number of indices", m23()(1), ms::IndexError,
          "[ms.index_error] index: 1 indices given for a tensor of rank 2 (shape (2, 3))"),
      ROW("Tensor<float> from an int tensor", Tensor<float>(ms::AnyTensor(Tensor<int>{1})), ms::DTypeError,
          "[ms.dtype_error] cannot view a int32 tensor as Tensor<float32>"),
      ROW("ragged nested list", (Tensor<float>{{1, 2}, {3}}), ms::ShapeError,
          "[ms.shape_error] tensor: ragged nested list (row of length 1 where 2 was expected)"),
      ROW("more than 8 dims", ms::Shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), ms::ShapeError,
          "[ms.shape_error] tensors have at most 8 dimensions, got 9"),
      ROW("unknown dtype name", ms::dtype_from_name("float8"), ms::DTypeError,
          "[ms.dtype_error] unknown dtype name 'float8' (expected float32, float64, int32, int64, uint8, bool, "
          "float16, bfloat16)"),
      ROW("bad device string", ms::Device::parse("gpu"), ms::ValueError,
          "[ms.value_error] bad device string 'gpu' (expected cpu or ascend:N)"),
      // ---- movement ----
      ROW("concat mismatch", ms::concat({m23(), iota<float>({4, 5})}, 1), ms::ShapeError,
          "[ms.shape_error] concat: tensors must match except along axis 1: (2, 3) vs (4, 5)"),
      ROW("stack of different shapes", ms::stack({m23(), iota<float>({3, 2})}), ms::ShapeError,
          "[ms.shape_error] stack: all tensors must have the same shape: (2, 3) vs (3, 2) (input 1)"),
      ROW("split sizes that do not add up", ms::split(m23(), {1, 1}, 1), ms::ShapeError,
          "[ms.shape_error] split: sizes [1, 1] add up to 2 but axis 1 of shape (2, 3) has size 3"),
      ROW("gather index out of range", ms::gather(m23(), 1, Tensor<std::int64_t>{0, 3}.reshape({1, 2})),
          ms::IndexError, "[ms.index_error] gather: index 3 is out of range for axis 1 with size 3"),
      ROW("index_select with a float index", ms::ops::index_select(m23(), 0, Tensor<float>{0}), ms::DTypeError,
          "[ms.dtype_error] index_select: index must be int64 or int32, got float32 (shape (1,))"),
      ROW("one_hot class out of range", ms::one_hot(Tensor<std::int64_t>{4}, 3), ms::IndexError,
          "[ms.index_error] one_hot: class index 4 is out of range for num_classes 3"),
      // ---- in-place ----
      ROW("add_ whose result has another shape", (Tensor<float>{1, 2, 3}.add_(m23())), ms::ShapeError,
          "[ms.shape_error] add_: result shape (2, 3) differs from the destination shape (3,)"),
      ROW("copy_ of a non-broadcastable source", m23().copy_(Tensor<float>{1, 2}), ms::ShapeError,
          "[ms.shape_error] copy_: cannot broadcast the source (2,) to the destination (2, 3)"),
      // ---- registry and generic calls ----
      ROW("unknown op name", ms::ops::registry().get("no_such_op"), ms::ValueError,
          "[ms.value_error] no op named 'no_such_op' is registered"),
      ROW("wrong number of inputs", ms::ops::call1(ms::ops::registry().get("add"), {m23()}), ms::ValueError,
          "[ms.value_error] add: expected 2 inputs, got 1"),
      ROW("missing attribute", ms::ops::call1(ms::ops::registry().get("permute"), {m23()}), ms::ValueError,
          "[ms.value_error] attribute 'perm' is missing"),
      ROW("attribute of the wrong type",
          ms::ops::call1(ms::ops::registry().get("permute"), {m23()}, ms::ops::Attrs{{"perm", 1.5}}), ms::ValueError,
          "[ms.value_error] attribute 'perm' has the wrong type: expected a list of ints, got a float 1.5"),
      ROW("duplicate op registration", ms::ops::registry().add(ms::ops::OpDef{.name = "add"}), ms::ValueError,
          "[ms.value_error] register op: an op named 'add' is already registered"),
  };
  return table;
}
#undef ROW

}  // namespace

TEST_CASE("error table: exact type and message for each bad input", "[errors]") {
  REQUIRE(rows().size() >= 20);
  for (const Row& r : rows()) {
    DYNAMIC_SECTION(r.what) { r.check(); }
  }
}

TEST_CASE("every ms error is an ms::Error with its category and bare message", "[errors]") {
  try {
    (void)ms::add(iota<float>({3, 4}), iota<float>({5}));
    FAIL("no exception");
  } catch (const ms::Error& e) {
    CHECK(e.category() == "shape_error");
    CHECK(e.message() == "add: cannot broadcast (3, 4) with (5,)");
    CHECK(std::string(e.what()) == "[ms.shape_error] add: cannot broadcast (3, 4) with (5,)");
  }
  // Catchable as std::runtime_error too.
  CHECK_THROWS_AS(ms::exp(Tensor<int>{1}), std::runtime_error);
}
