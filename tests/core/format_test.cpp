// Tests of tensor printing (core/format.hpp): exact strings in PyTorch's layout for
// floats (fixed, integer-valued, scientific, nan/inf), integers, bools, 0-d, empty,
// summarized, wrapped, non-contiguous and 16-bit tensors; fmt and ostream agree.

#include <cmath>
#include <sstream>

#include "test_util.hpp"

TEST_CASE("format: 2-D float tensor, fixed mode with 4 decimals", "[format]") {
  ms::Tensor<float> t{{1, 2.5}, {3, 4}};
  CHECK(fmt::format("{}", t) ==
        "tensor([[1.0000, 2.5000],\n"
        "        [3.0000, 4.0000]], shape=(2, 2), dtype=float32, device=cpu)");
  // The untyped handle, operator<< and to_string print the same.
  ms::AnyTensor any = t;
  std::ostringstream os;
  os << t;
  CHECK(os.str() == fmt::format("{}", any));
  CHECK(ms::to_string(t) == fmt::format("{}", any));
  // "{:.2}" sets the decimals.
  CHECK(fmt::format("{:.2}", t) ==
        "tensor([[1.00, 2.50],\n"
        "        [3.00, 4.00]], shape=(2, 2), dtype=float32, device=cpu)");
  CHECK(fmt::format("{:.1}", ms::Tensor<double>{-0.25, 10.5}) ==
        "tensor([-0.2, 10.5], shape=(2,), dtype=float64, device=cpu)");
}

TEST_CASE("format: columns are right-aligned to the widest value", "[format]") {
  ms::Tensor<double> t{{-1.5, 2}, {300.25, 4}};
  CHECK(fmt::format("{}", t) ==
        "tensor([[ -1.5000,   2.0000],\n"
        "        [300.2500,   4.0000]], shape=(2, 2), dtype=float64, device=cpu)");
}

TEST_CASE("format: integer-valued floats print as '1.'", "[format]") {
  CHECK(fmt::format("{}", ms::Tensor<float>{1, 2, 3}) == "tensor([1., 2., 3.], shape=(3,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<float>{-10, 0, 5}) ==
        "tensor([-10.,   0.,   5.], shape=(3,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::zeros<float>({2})) == "tensor([0., 0.], shape=(2,), dtype=float32, device=cpu)");
}

TEST_CASE("format: scientific mode for wide or tiny magnitudes", "[format]") {
  CHECK(fmt::format("{}", ms::Tensor<float>{1e-5f, 1.0f}) ==
        "tensor([1.0000e-05, 1.0000e+00], shape=(2,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<double>{1.5, 2e9}) ==
        "tensor([1.5000e+00, 2.0000e+09], shape=(2,), dtype=float64, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<double>{1, 5000}) ==
        "tensor([1.0000e+00, 5.0000e+03], shape=(2,), dtype=float64, device=cpu)");
}

TEST_CASE("format: nan and inf", "[format]") {
  CHECK(fmt::format("{}", ms::Tensor<float>{1.5f, NAN, INFINITY, -INFINITY}) ==
        "tensor([1.5000,    nan,    inf,   -inf], shape=(4,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<float>{1, -NAN, -INFINITY}) ==
        "tensor([1., nan, -inf], shape=(3,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<double>{NAN}) == "tensor([nan], shape=(1,), dtype=float64, device=cpu)");
}

TEST_CASE("format: integers and bools", "[format]") {
  CHECK(fmt::format("{}", ms::arange<std::int32_t>(5)) == "tensor([0, 1, 2, 3, 4], shape=(5,), dtype=int32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<std::int64_t>{{-7, 10}, {3, 200}}) ==
        "tensor([[ -7,  10],\n"
        "        [  3, 200]], shape=(2, 2), dtype=int64, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<std::uint8_t>{0, 255}) ==
        "tensor([  0, 255], shape=(2,), dtype=uint8, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<bool>{true, false}) ==
        "tensor([ True, False], shape=(2,), dtype=bool, device=cpu)");
}

TEST_CASE("format: 0-d and empty tensors", "[format]") {
  CHECK(fmt::format("{}", ms::scalar<float>(3.5)) == "tensor(3.5000, shape=(), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::scalar<std::int64_t>(-4)) == "tensor(-4, shape=(), dtype=int64, device=cpu)");
  CHECK(fmt::format("{}", ms::scalar<double>(2)) == "tensor(2., shape=(), dtype=float64, device=cpu)");
  CHECK(fmt::format("{}", ms::zeros<float>({0})) == "tensor([], shape=(0,), dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ms::zeros<std::int32_t>({2, 0, 3})) ==
        "tensor([], shape=(2, 0, 3), dtype=int32, device=cpu)");
  CHECK(fmt::format("{}", ms::AnyTensor()) == "tensor(undefined)");
}

TEST_CASE("format: 3-D tensors separate blocks with a blank line", "[format]") {
  CHECK(fmt::format("{}", ms::arange<std::int32_t>(8).reshape({2, 2, 2})) ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], shape=(2, 2, 2), dtype=int32, device=cpu)");
}

TEST_CASE("format: long rows wrap at 80 columns", "[format]") {
  CHECK(fmt::format("{}", ms::arange<std::int64_t>(30)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29], shape=(30,), dtype=int64, device=cpu)");
}

TEST_CASE("format: more than 1000 elements are summarized with '...'", "[format]") {
  CHECK(fmt::format("{}", ms::arange<std::int32_t>(1001)) ==
        "tensor([   0,    1,    2,  ...,  998,  999, 1000], shape=(1001,), dtype=int32, device=cpu)");
  CHECK(fmt::format("{}", ms::arange<std::int64_t>(10000).reshape({100, 100})) ==
        "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
        "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
        "        ...,\n"
        "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
        "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
        "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]], shape=(100, 100), dtype=int64, device=cpu)");
  // Exactly 1000 elements are all printed; the widths come from the printed values only.
  auto s = fmt::format("{}", ms::arange<std::int32_t>(1000));
  CHECK(s.find("...") == std::string::npos);
  CHECK(fmt::format("{}", ms::full<float>({2000}, 1.5)) ==
        "tensor([1.5000, 1.5000, 1.5000,  ..., 1.5000, 1.5000, 1.5000], shape=(2000,), dtype=float32, device=cpu)");
  // Dims of at most 6 are never elided, even when the tensor is summarized.
  CHECK(fmt::format("{}", ms::zeros<std::int32_t>({2, 1000}).slice(1, 0, 1000, 1)) ==
        "tensor([[0, 0, 0,  ..., 0, 0, 0],\n"
        "        [0, 0, 0,  ..., 0, 0, 0]], shape=(2, 1000), dtype=int32, device=cpu)");
}

TEST_CASE("format: non-contiguous views print in logical order", "[format]") {
  auto t = ms::arange<std::int32_t>(6).reshape({2, 3});
  CHECK(fmt::format("{}", t.t()) ==
        "tensor([[0, 3],\n"
        "        [1, 4],\n"
        "        [2, 5]], shape=(3, 2), dtype=int32, device=cpu)");
  CHECK(fmt::format("{}", t.slice(1, 0, 3, 2)) ==
        "tensor([[0, 2],\n"
        "        [3, 5]], shape=(2, 2), dtype=int32, device=cpu)");
  CHECK(fmt::format("{}", ms::Tensor<float>{1, 2}.expand({2, 2})) ==
        "tensor([[1., 2.],\n"
        "        [1., 2.]], shape=(2, 2), dtype=float32, device=cpu)");
}

TEST_CASE("format: float16 and bfloat16 print through float", "[format]") {
  CHECK(fmt::format("{}", ms::full<ms::half>({2}, 0.5)) ==
        "tensor([0.5000, 0.5000], shape=(2,), dtype=float16, device=cpu)");
  CHECK(fmt::format("{}", ms::arange<ms::bfloat16>(3)) == "tensor([0., 1., 2.], shape=(3,), dtype=bfloat16, device=cpu)");
}

TEST_CASE("format: printing never triggers the host-read check", "[format]") {
  // Graph capture installs a hook that rejects host reads; printing must not go through it.
  auto prev = ms::detail::host_read_hook;
  ms::detail::host_read_hook = [](const char* what) { throw ms::GraphError(std::string("host read: ") + what); };
  std::string s;
  auto t = ms::Tensor<float>{1, 2};
  CHECK_NOTHROW(s = fmt::format("{}", t));
  ms::detail::host_read_hook = prev;
  CHECK(s == "tensor([1., 2.], shape=(2,), dtype=float32, device=cpu)");
}

TEST_CASE("format: bools stored as bytes other than 0/1 print as True", "[format]") {
  std::uint8_t raw[2] = {0, 7};
  auto b = ms::Tensor<bool>(ms::AnyTensor::view_of(ms::Storage::borrowed(raw, 2), ms::Shape{2}, ms::Shape{1}, 0,
                                                   ms::DType::b8));
  CHECK(fmt::format("{}", b) == "tensor([False,  True], shape=(2,), dtype=bool, device=cpu)");
}
