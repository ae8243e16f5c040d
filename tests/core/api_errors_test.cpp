// Errors that say what to change: one row per mistake a PyTorch user makes on the first
// day (operands in torch's order, backward on an integer output, a wrong dtype at some
// operand, a slice or a pooling option out of range, bytes of the wrong length), with the
// exact exception type and what() text. Both handles are covered: the AnyTensor forms must
// say the same as the Tensor<T> forms.

#include <functional>

#include "test_util.hpp"

namespace api_errors_test {

using ms::AnyTensor;
using ms::Tensor;
using ms_test::iota;
using i64 = std::int64_t;

AnyTensor leaf() {  // a float64 leaf that requires grad
  AnyTensor x = Tensor<double>{0.5, -1.0, 2.0};
  x.requires_grad_();
  return x;
}

using Row = ms_test::ErrorRow;
#define ROW MS_ERROR_ROW

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // ---- operands in torch's order, wrong dtypes named by parameter ----
      ROW("embedding(index, weight) typed", ms::embedding(Tensor<i64>{1, 0}, iota<float>({4, 3})), ms::DTypeError,
          "[ms.dtype_error] embedding: index must be an integer tensor (got float32 as 'index' and int64 as "
          "'weight'); ms::embedding takes (weight, index), the reverse of torch's embedding(input, weight)"),
      ROW("embedding(index, weight) runtime-typed", ms::embedding(AnyTensor(Tensor<std::int32_t>{1}), AnyTensor(iota<double>({2, 2}))),
          ms::DTypeError,
          "[ms.dtype_error] embedding: index must be an integer tensor (got float64 as 'index' and int32 as "
          "'weight'); ms::embedding takes (weight, index), the reverse of torch's embedding(input, weight)"),
      ROW("embedding with a float index", ms::ops::embedding(iota<float>({4, 3}), Tensor<float>{1}), ms::DTypeError,
          "[ms.dtype_error] embedding: 'index' (input 1) must be an int64 or int32 tensor, got float32 (shape (1,))"),
      ROW("embedding with integer weights", ms::ops::embedding(iota<i64>({4, 3}), Tensor<i64>{1}), ms::DTypeError,
          "[ms.dtype_error] embedding: unsupported dtype int64 for 'weight' (input 0; supported: float32, float64)"),
      ROW("cross_entropy with integer logits", ms::cross_entropy(AnyTensor(iota<i64>({2, 3})), Tensor<i64>{0, 1}),
          ms::DTypeError,
          "[ms.dtype_error] cross_entropy: unsupported dtype int64 for 'logits' (input 0; supported: float32, float64)"),
      ROW("nll_loss with integer log-probabilities", ms::ops::nll_loss(iota<i64>({2, 3}), Tensor<i64>{0, 1}),
          ms::DTypeError,
          "[ms.dtype_error] nll_loss: unsupported dtype int64 for 'log_probs' (input 0; supported: float32, float64)"),
      ROW("conv2d on integers", ms::conv2d(AnyTensor(iota<std::int32_t>({1, 1, 3, 3})), iota<std::int32_t>({1, 1, 2, 2})),
          ms::DTypeError,
          "[ms.dtype_error] conv2d: unsupported dtype int32 for 'input' (input 0; supported: float32, float64, float16, bfloat16)"),
      ROW("add of float32 and int32 handles", ms::add(AnyTensor(Tensor<float>{1, 2}), Tensor<int>{1, 2}), ms::DTypeError,
          "[ms.dtype_error] add: dtype mismatch float32 vs int32 (shapes (2,) and (2,)); convert one side with "
          "ms::cast"),
      ROW("exp of an int32 AnyTensor", ms::exp(AnyTensor(Tensor<int>{1, 2})), ms::DTypeError,
          "[ms.dtype_error] exp: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)"),
      ROW("sum of a bool AnyTensor", ms::sum(AnyTensor(Tensor<bool>{true})), ms::DTypeError,
          "[ms.dtype_error] sum: unsupported dtype bool (supported: float32, float64, int32, int64, uint8, float16, bfloat16)"),
      ROW("index_select with a float index", ms::index_select(AnyTensor(iota<float>({2, 3})), 0, Tensor<float>{0}),
          ms::DTypeError, "[ms.dtype_error] index_select: index must be int64 or int32, got float32 (shape (1,))"),
      ROW("Tensor<float> of an int AnyTensor", Tensor<float>(ms::sum(AnyTensor(Tensor<int>{1}))), ms::DTypeError,
          "[ms.dtype_error] cannot view a int32 tensor as Tensor<float32>"),
      // ---- autograd ----
      ROW("backward on argmax", ms::argmax(leaf()).backward(), ms::ValueError,
          "[ms.value_error] backward: the output is a int64 tensor (); integer and bool outputs (argmax, comparisons, "
          "casts to integers) carry no gradient; call backward() on a floating output"),
      ROW("backward on a comparison", (leaf() > 0.0).backward(AnyTensor(Tensor<bool>{true, true, true})),
          ms::ValueError,
          "[ms.value_error] backward: the output is a bool tensor (3,); integer and bool outputs (argmax, "
          "comparisons, casts to integers) carry no gradient; call backward() on a floating output"),
      ROW("backward on a constant", ms::sum(Tensor<float>{1, 2}).backward(), ms::ValueError,
          "[ms.value_error] backward: the tensor float32 () does not require grad (no input of the ops that made it "
          "requires grad)"),
      ROW("backward of a vector without a gradient", ms::exp(leaf()).backward(), ms::ValueError,
          "[ms.value_error] backward: a gradient must be given for a non-scalar output (shape (3,))"),
      ROW("backward with a gradient of another shape", ms::exp(leaf()).backward(Tensor<double>{1, 1}), ms::ShapeError,
          "[ms.shape_error] backward: gradient float64 (2,) does not match the output float64 (3,)"),
      ROW("requires_grad_ on an integer AnyTensor", AnyTensor(Tensor<i64>{1}).requires_grad_(), ms::DTypeError,
          "[ms.dtype_error] requires_grad: only floating tensors can require grad, got int64"),
      ROW("requires_grad_ on a computed tensor", ms::exp(leaf()).requires_grad_(), ms::ValueError,
          "[ms.value_error] requires_grad: only leaf tensors can be set to require grad (this one was computed by "
          "'exp')"),
      // ---- arguments ----
      ROW("clamp without bounds", ms::clamp(Tensor<float>{1}, std::nullopt, std::nullopt), ms::ValueError,
          "[ms.value_error] clamp: at least one of min and max must be given"),
      ROW("clamp with min > max", ms::clamp(AnyTensor(Tensor<float>{1}), 2.0, 1.0), ms::ValueError,
          "[ms.value_error] clamp: min (2) is greater than max (1)"),
      ROW("softplus with beta 0", ms::softplus(Tensor<float>{1}, 0.0), ms::ValueError,
          "[ms.value_error] softplus: beta must be positive, got 0"),
      ROW("gelu with an unknown approximation", ms::gelu(AnyTensor(Tensor<float>{1}), "fast"), ms::ValueError,
          "[ms.value_error] gelu: approximate must be \"none\" or \"tanh\", got \"fast\""),
      ROW("slice step 0", ms::slice(AnyTensor(iota<float>({5})), 0, 0, ms::end, 0), ms::ValueError,
          "[ms.value_error] slice: slice step cannot be zero"),
      ROW("slice of a dim past the rank", ms::slice(iota<float>({5}), 1, 0, ms::end), ms::IndexError,
          "[ms.index_error] slice: axis 1 is out of range for a tensor of rank 1"),
      ROW("narrow past the end", ms::narrow(iota<float>({5}), 0, 4, 2), ms::IndexError,
          "[ms.index_error] narrow: start 4 and length 2 do not fit in dim 0 of size 5"),
      ROW("reshape to the wrong size", ms::reshape(AnyTensor(iota<float>({2, 3})), {4, 2}), ms::ShapeError,
          "[ms.shape_error] reshape: cannot reshape (2, 3) (6 elements) into [4, 2]"),
      ROW("broadcast_to an incompatible shape", ms::broadcast_to(AnyTensor(Tensor<float>{1, 2, 3}), {2, 4}),
          ms::ShapeError, "[ms.shape_error] expand: cannot expand (3,) to [2, 4]"),
      ROW("cat of mismatched runtime-typed tensors", ms::cat({AnyTensor(iota<float>({2, 3})), AnyTensor(iota<float>({4, 5}))}, 1),
          ms::ShapeError, "[ms.shape_error] concat: tensors must match except along axis 1: (2, 3) vs (4, 5)"),
      ROW("matmul with different inner dims", ms::matmul(AnyTensor(iota<float>({2, 3})), iota<float>({2, 3})),
          ms::ShapeError, "[ms.shape_error] matmul: inner dimensions differ: (2, 3) @ (2, 3)"),
      // ---- pooling options ----
      ROW("max_pool2d with dilation 0", ms::max_pool2d(iota<float>({1, 1, 4, 4}), 2, 1, 0, 0), ms::ValueError,
          "[ms.value_error] max_pool2d: dilation must be positive, got (0, 0)"),
      ROW("max_pool2d with a dilated kernel larger than the input", ms::max_pool2d(iota<float>({1, 1, 3, 3}), 2, 1, 0, 3),
          ms::ShapeError,
          "[ms.shape_error] max_pool2d: the dilated kernel (4, 4) is larger than the padded input (3, 3) of input "
          "(1, 1, 3, 3)"),
      ROW("avg_pool2d with divisor_override 0", ms::avg_pool2d(iota<float>({1, 1, 4, 4}), 2, 2, 0, true, false, 0),
          ms::ValueError, "[ms.value_error] avg_pool2d: divisor_override must be positive, got 0"),
      ROW("avg_pool2d with padding over half the kernel", ms::avg_pool2d(AnyTensor(iota<float>({1, 1, 4, 4})), 2, 1, 2),
          ms::ValueError,
          "[ms.value_error] avg_pool2d: padding (2, 2) must be non-negative and at most half of kernel_size (2, 2)"),
      // ---- attributes given by name (ms-op run cast --attr dtype=foo) ----
      ROW("an attribute of the wrong kind",
          ms::ops::call1(ms::ops::registry().get("cast"), {Tensor<float>{1}}, ms::ops::Attrs{{"dtype", std::string("foo")}}),
          ms::ValueError,
          "[ms.value_error] attribute 'dtype' has the wrong type: expected a dtype (one of float32, float64, int32, "
          "int64, uint8, bool, float16, bfloat16), got a string \"foo\""),
      // ---- raw bytes ----
      ROW("from_bytes with too few bytes", AnyTensor::from_bytes(ms::DType::f32, ms::Shape{2, 3}, nullptr, 20),
          ms::ShapeError,
          "[ms.shape_error] from_bytes: 20 bytes given for a float32 tensor of shape (2, 3), which needs 24 (6 "
          "elements of 4 bytes)"),
      ROW("from_bytes with a negative dim", AnyTensor::from_bytes(ms::DType::f64, ms::Shape{-1}, nullptr, 0),
          ms::ShapeError, "[ms.shape_error] empty: negative dimension in shape (-1,)"),
  };
  return table;
}
#undef ROW

}  // namespace api_errors_test

TEST_CASE("api error table: each mistake gets a message that says what to change", "[errors][api]") {
  REQUIRE(api_errors_test::rows().size() >= 30);
  for (const api_errors_test::Row& r : api_errors_test::rows()) {
    DYNAMIC_SECTION(r.what) { r.check(); }
  }
}
