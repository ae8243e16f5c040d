// 16-bit floats in the GEMM-bound ops, and float32 GEMMs at bfloat16 precision.
//
// bfloat16 matmul, linear and convolutions run on oneDNN's bfloat16 primitives where the CPU
// has bfloat16 units (AVX512-BF16 / AMX) and the GEMM path is dnnl; float16, and bfloat16
// elsewhere, compute in float32 and round once. Either way the result is the exact product
// of the (already 16-bit) inputs, summed with float32 accuracy and rounded once to the
// output dtype; that is what these tests check, against a double reference on the same
// rounded inputs: |got - ref| <= 2^-p |ref| + a small float32-summation term, where p is
// 8 for bfloat16 (8 significant bits) and 11 for float16. They run on every GEMM path
// (ctest runs the op tests again with MS_CPU_GEMM set), so both routes are covered.
// Gradients of 16-bit ops are compared with the float32 gradients of the same rounded
// inputs (float32 gradients are checked against finite differences elsewhere).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../test_util.hpp"

MS_TEST_COVERS("matmul", "linear", "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "sum", "mean", "max");

namespace half_precision_test {

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
using ms::Tensor;
namespace ops = ms::ops;

/// The significant bits of a 16-bit float dtype.
int mantissa_bits(DType d) { return d == DType::bf16 ? 8 : 11; }

/// A tensor of dtype d with values uniform in [-1, 1) rounded to d.
AnyTensor random_of(DType d, const Shape& s, unsigned seed) {
  return ops::cast(ms_test::random<float>(s, seed), d);
}

std::vector<double> as_doubles(const AnyTensor& t) { return ms_test::values(Tensor<double>(ops::cast(t, DType::f64))); }

/// Checks a 16-bit result against a double reference: one rounding of the result (relative
/// 2^-p) plus float32 summation of `terms` products of magnitude <= 1.
void require_close(const AnyTensor& got, const std::vector<double>& ref, double terms) {
  REQUIRE(static_cast<std::size_t>(got.numel()) == ref.size());
  const double rel = std::ldexp(1.0, -mantissa_bits(got.dtype())), abs = 1e-6 * terms + 1e-7;
  const std::vector<double> g = as_doubles(got);
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::abs(g[i] - ref[i]) <= rel * std::abs(ref[i]) + abs) continue;
    if (++bad <= 5) UNSCOPED_INFO("element " << i << ": got " << g[i] << ", expected " << ref[i]);
  }
  CHECK(bad == 0);
}

/// The same op on the float64 values of the 16-bit inputs: the reference.
std::vector<double> in_double(const std::function<AnyTensor(const std::vector<AnyTensor>&)>& f,
                              const std::vector<AnyTensor>& in) {
  std::vector<AnyTensor> d;
  for (const AnyTensor& t : in) d.push_back(t.defined() ? ops::cast(t, DType::f64) : t);
  return as_doubles(f(d));
}

using PathGuard = ms_test::CpuPathGuard;

TEST_CASE("16-bit matmul and linear: the product of the rounded inputs, rounded once", "[op][linalg][half]") {
  for (DType d : {DType::bf16, DType::f16}) {
    INFO("dtype " << ms::dtype_name(d));
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 4}, {4, 5}}, {{4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 6}}, {{64, 200}, {200, 48}}, {{1, 300}, {300, 70}}};
    unsigned seed = 7;
    for (const auto& [sa, sb] : cases) {
      INFO(ms::shape_str(sa) << " @ " << ms::shape_str(sb));
      const AnyTensor a = random_of(d, sa, seed++), b = random_of(d, sb, seed++);
      const AnyTensor y = ops::matmul(a, b);
      REQUIRE(y.dtype() == d);
      require_close(y, in_double([](auto& v) { return ops::matmul(v[0], v[1]); }, {a, b}), static_cast<double>(sa.back()));
    }
    // A transposed right operand (read through its strides) and a sliced left one.
    const AnyTensor w = random_of(d, {40, 33}, 99), x = random_of(d, {17, 50}, 98);
    const AnyTensor xs = ops::slice(x, 1, 5, 38), wt = ops::permute(w, {1, 0});
    require_close(ops::matmul(xs, wt), in_double([](auto& v) { return ops::matmul(v[0], v[1]); }, {xs, wt}), 33);
    // linear with and without bias (the bias is added before the single rounding).
    const AnyTensor bias = random_of(d, {40}, 97);
    require_close(ops::linear(xs, w, bias),
                  in_double([](auto& v) { return ops::linear(v[0], v[1], v[2]); }, {xs, w, bias}), 34);
    require_close(ops::linear(xs, w), in_double([](auto& v) { return ops::linear(v[0], v[1]); }, {xs, w}), 33);
    // Empty inner dimension: zeros.
    ms_test::require_values(Tensor<double>(ops::cast(ops::matmul(random_of(d, {3, 0}, 1), random_of(d, {0, 2}, 2)),
                                                     DType::f64)),
                            std::vector<double>(6, 0.0), 0, 0);
  }
}

TEST_CASE("16-bit conv2d and its gradients equal the float32 kernels on the rounded inputs", "[op][conv2d][half]") {
  for (DType d : {DType::bf16, DType::f16}) {
    INFO("dtype " << ms::dtype_name(d));
    const AnyTensor x = random_of(d, {3, 4, 9, 8}, 11), w = random_of(d, {6, 2, 3, 3}, 12), b = random_of(d, {6}, 13);
    const ms::Int2 stride{2, 1}, pad{1, 1}, dil{1, 2};
    const auto conv = [&](const std::vector<AnyTensor>& v) { return ops::conv2d(v[0], v[1], v[2], stride, pad, dil, 2); };
    const AnyTensor y = conv({x, w, b});
    REQUIRE(y.dtype() == d);
    const double terms = 2 * 3 * 3 + 1;
    require_close(y, in_double(conv, {x, w, b}), terms);
    // Gradients through autograd: the 16-bit backward against the float64 backward.
    const AnyTensor g = random_of(d, y.shape().vec(), 14);
    const auto grads = [&](const std::vector<AnyTensor>& v) {
      std::vector<AnyTensor> in = {v[0].detach(), v[1].detach(), v[2].detach()};
      for (auto& t : in) t.set_requires_grad(true);
      const AnyTensor out = conv(in);
      out.backward(ops::cast(g, out.dtype()));
      return std::vector<AnyTensor>{in[0].grad_any(), in[1].grad_any(), in[2].grad_any()};
    };
    const std::vector<AnyTensor> got = grads({x, w, b});
    std::vector<AnyTensor> x64 = {ops::cast(x, DType::f64), ops::cast(w, DType::f64), ops::cast(b, DType::f64)};
    const std::vector<AnyTensor> want = grads(x64);
    const double batch_terms = 3.0 * 5 * 8;  // products summed for a weight gradient
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("gradient of input " << i);
      REQUIRE(got[i].dtype() == d);
      require_close(got[i], as_doubles(want[i]), i == 0 ? terms : batch_terms);
    }
  }
}

TEST_CASE("16-bit linear trains: gradients of x, w and b against float64", "[op][linalg][half]") {
  for (DType d : {DType::bf16, DType::f16}) {
    INFO("dtype " << ms::dtype_name(d));
    const AnyTensor x = random_of(d, {32, 24}, 21), w = random_of(d, {10, 24}, 22), b = random_of(d, {10}, 23);
    const AnyTensor r = random_of(d, {32, 10}, 24);
    // loss = sum(linear(x, w, b) * r): the output's gradient is r exactly, so each input's
    // gradient is one product (r @ w, r^T @ x, the column sums of r) rounded once.
    const auto grads = [&](std::vector<AnyTensor> in) {
      for (auto& t : in) t = t.detach(), t.set_requires_grad(true);
      ops::sum(ops::mul(ops::linear(in[0], in[1], in[2]), ops::cast(r, in[0].dtype())), {}, false).backward();
      return std::vector<AnyTensor>{in[0].grad_any(), in[1].grad_any(), in[2].grad_any()};
    };
    const auto got = grads({x, w, b});
    const auto want = grads({ops::cast(x, DType::f64), ops::cast(w, DType::f64), ops::cast(b, DType::f64)});
    const double terms[3] = {10, 32, 32};
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("gradient of input " << i);
      REQUIRE(got[i].dtype() == d);
      require_close(got[i], as_doubles(want[i]), terms[i]);
    }
  }
}

TEST_CASE("16-bit sum, mean and max accumulate in float32 and round once", "[op][reduce][half]") {
  for (DType d : {DType::bf16, DType::f16}) {
    INFO("dtype " << ms::dtype_name(d));
    // 4096 ones: a 16-bit running sum would stop at 256 (bfloat16) or 2048 (float16).
    const AnyTensor ones = ops::ones({4096}, d);
    CHECK(as_doubles(ops::sum(ones, {}, false)) == std::vector<double>{4096.0});
    const AnyTensor x = random_of(d, {5, 300}, 31);
    require_close(ops::sum(x, {1}, false), in_double([](auto& v) { return ops::sum(v[0], {1}, false); }, {x}), 300);
    require_close(ops::mean(x, {0}, true), in_double([](auto& v) { return ops::mean(v[0], {0}, true); }, {x}), 5);
    CHECK(as_doubles(ops::max(x, {1}, false)) == in_double([](auto& v) { return ops::max(v[0], {1}, false); }, {x}));
  }
}

TEST_CASE("a captured 16-bit linear replays bit for bit", "[op][linalg][half][graph]") {
  const AnyTensor w = random_of(DType::bf16, {12, 20}, 41), b = random_of(DType::bf16, {12}, 42);
  auto f = ms::jit([&](const AnyTensor& x) { return ops::linear(x, w, b); });
  const AnyTensor x1 = random_of(DType::bf16, {8, 20}, 43), x2 = random_of(DType::bf16, {8, 20}, 44);
  const AnyTensor e1 = ops::linear(x1, w, b), e2 = ops::linear(x2, w, b);
  CHECK(ms_test::same_bits(f(x1), e1));
  CHECK(ms_test::same_bits(f(x2), e2));  // a replay
}

TEST_CASE("GemmPrecision: names, the setting, and float32 GEMMs in bfloat16", "[op][linalg][dnnl][half]") {
  PathGuard guard;
  CHECK(ms::gemm_precision_name(ms::GemmPrecision::f32) == "f32");
  CHECK(ms::gemm_precision_name(ms::GemmPrecision::bf16) == "bf16");
  CHECK(ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16) == guard.precision);
  CHECK(ms::cpu_gemm_precision() == ms::GemmPrecision::bf16);

  const Tensor<float> a = ms_test::random<float>({48, 96}, 51), b = ms_test::random<float>({96, 40}, 52);
  const Tensor<float> strict = [&] {
    ms::set_cpu_gemm_precision(ms::GemmPrecision::f32);
    return ms::matmul(a, b);
  }();
  ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16);
  const Tensor<float> fast = ms::matmul(a, b);
  // The reference of the bfloat16 route: the exact product of the inputs rounded to bfloat16.
  const std::vector<double> rounded_ref = in_double(
      [](auto& v) { return ops::matmul(v[0], v[1]); }, {ops::cast(a, DType::bf16), ops::cast(b, DType::bf16)});
  const bool on_bf16 = ms::cpu_gemm() == ms::CpuGemm::dnnl && ms::dnnl_bf16_native();
  INFO("bfloat16 units used: " << on_bf16 << " (oneDNN ISA " << ms::dnnl_cpu_isa() << ")");
  if (on_bf16) {
    // float32 accumulation of exact bfloat16 products, no rounding of the float32 result.
    ms_test::require_values(fast, rounded_ref, 1e-5, 1e-5);
    CHECK_FALSE(ms_test::same_bits(fast, strict));
  } else {
    CHECK(ms_test::same_bits(fast, strict));  // elsewhere the setting changes nothing
  }
  // The linear layers and convolutions of a model follow the same setting (their GEMMs).
  const Tensor<float> w = ms_test::random<float>({30, 96}, 53);
  const std::vector<double> lin_ref = in_double(
      [](auto& v) { return ops::linear(v[0], v[1]); }, {ops::cast(a, DType::bf16), ops::cast(w, DType::bf16)});
  if (on_bf16) ms_test::require_values(ms::linear(a, w), lin_ref, 1e-5, 1e-5);
  ms::set_cpu_gemm_precision(ms::GemmPrecision::f32);
  CHECK(ms_test::same_bits(ms::matmul(a, b), strict));
}

}  // namespace half_precision_test
