#pragma once
// Three operators defined outside the library the way a user would (docs/guide.md walks
// through this file): softsign, an elementwise op given as one formula; running_sum, an op
// with its own CPU kernel (the inclusive form of the built-in ms::cumsum, written again as a
// user's op); and scaled_tanh, which also brings a
// device kernel for Ascend. All register into the same op registry as the built-in ops,
// so they run eagerly, in captured graphs (softsign fuses), under autodiff, in the
// profiler and in the data dump. Included by examples/custom_op.cpp and by the tests
// (tests/ops/custom_op_test.cpp, tests/backend/device_custom_inference_test.cpp).

// softsign's SIMD kernels are compiled where it is defined: a unit that defines elementwise
// ops asks for ms's kernel machinery, which other units of a program linked with ms::ms do
// not parse (see <ms/core/linkage.hpp>), before it includes ms.
#if !defined(MS_KERNEL_BODIES)
#define MS_KERNEL_BODIES 1
#endif
#include <ms/ms.hpp>

namespace guide {

// [softsign]
// softsign(x) = x / (1 + |x|). One generic formula: V is float or double for the scalar
// path and an xsimd batch for the vectorized path; the library builds both kernels.
inline const ms::CustomOp softsign = ms::define_elementwise(
    "softsign",
    []<class V>(V x) { return x / (ms::simd::c<V>(1) + ms::simd::abs(x)); },
    {.doc = "x / (1 + |x|) (defined in examples/custom_op.hpp)",
     .flops = 3,
     // d/dx softsign(x) = 1 / (1 + |x|)^2, written with registered ops so it can be captured.
     .grad = [](const ms::ops::GradArgs& a) -> std::vector<ms::AnyTensor> {
       using namespace ms::ops;
       return {div(a.grad_out[0], square(add(abs(a.in[0]), 1.0)))};
     }});
// [softsign]

// [running_sum]
// running_sum(x, axis, reverse): running sums along one axis. Not elementwise, so it brings its
// own inference, CPU kernel, gradient rule and cost.
inline const ms::CustomOp running_sum =
    ms::OpBuilder("running_sum")
        .doc("running sum along an axis (defined in examples/custom_op.hpp)")
        .inputs(1)
        .attr("axis", std::int64_t{-1})
        .attr("reverse", false)
        .dtypes(ms::kFloatTypes)
        .infer([](std::span<const ms::ops::TensorMeta> in, const ms::ops::Attrs& a) {
          // Checks the axis (IndexError naming the op and the shape); the output is like the input.
          ms::normalize_axis(a.i("axis"), in[0].shape.rank(), "running_sum");
          return in[0];
        })
        .kernel([](const ms::ops::KernelArgs& a) {
          const ms::AnyTensor x = ms::ops::contiguous(a.in[0]);  // helper ops are not traced
          const ms::Shape& s = x.shape();
          if (s.rank() == 0) {  // a scalar is its own running sum
            std::memcpy(a.out[0].raw_data(), x.raw_data(), x.nbytes());
            return;
          }
          const int axis = ms::normalize_axis(a.attrs.i("axis"), s.rank(), "running_sum");
          const bool reverse = a.attrs.b("reverse");
          std::int64_t outer = 1, n = s[axis], inner = 1;
          for (int d = 0; d < axis; ++d) outer *= s[d];
          for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
          ms::visit_dtype(x.dtype(), [&]<class T>() {
            if constexpr (std::is_floating_point_v<T>) {
              const T* src = static_cast<const T*>(x.raw_data());
              T* dst = static_cast<T*>(a.out[0].raw_data());
              for (std::int64_t o = 0; o < outer; ++o)
                for (std::int64_t i = 0; i < inner; ++i) {
                  T acc = 0;
                  for (std::int64_t k = 0; k < n; ++k) {
                    const std::int64_t j = reverse ? n - 1 - k : k;
                    const std::int64_t off = (o * n + j) * inner + i;
                    acc += src[off];
                    dst[off] = acc;
                  }
                }
            }
          });
        })
        // The gradient of a running sum is the running sum of the gradient, the other way round.
        .grad([](const ms::ops::GradArgs& a) -> std::vector<ms::AnyTensor> {
          ms::ops::Attrs back = a.attrs;
          back.set("reverse", !a.attrs.b("reverse"));
          return {ms::ops::call1(a.op, {a.grad_out[0]}, back)};
        })
        .cost([](std::span<const ms::ops::TensorMeta> in, std::span<const ms::ops::TensorMeta> out,
                 const ms::ops::Attrs&) {
          const double n = static_cast<double>(ms::numel(in[0].shape));
          const double esize = static_cast<double>(ms::dtype_size(out[0].dtype));
          return ms::ops::Cost{n, 2 * n * esize};
        })
        .add();
// [running_sum]

// [scaled_tanh]
// scaled_tanh(x, scale) = scale * tanh(x), scale broadcast against x (a learned gain, as in
// DyT). On the CPU it computes with built-in ops. On an Ascend device it has a device kernel:
// tanh, then mul, enqueued on the stream the op runs on, with tanh(x) in device scratch
// memory. Without that kernel it would still run there, on the host, with copies.
inline const ms::CustomOp scaled_tanh =
    ms::OpBuilder("scaled_tanh")
        .doc("scale * tanh(x), scale broadcast (defined in examples/custom_op.hpp)")
        .inputs(2)
        .infer([](std::span<const ms::ops::TensorMeta> in, const ms::ops::Attrs&) {
          if (in[0].dtype != in[1].dtype)
            throw ms::DTypeError(fmt::format("scaled_tanh: x is {} but scale is {}", in[0].dtype, in[1].dtype));
          return ms::ops::TensorMeta{in[0].dtype, ms::broadcast_shapes(in[0].shape, in[1].shape, "scaled_tanh")};
        })
        .compute([](std::span<const ms::AnyTensor> in, const ms::ops::Attrs&) {
          return ms::ops::mul(ms::ops::tanh(in[0]), in[1]);
        })
        // d/dx = g * scale * (1 - tanh(x)^2); d/dscale = g * tanh(x), summed back to scale's shape by autodiff.
        .grad([](const ms::ops::GradArgs& a) -> std::vector<ms::AnyTensor> {
          using namespace ms::ops;
          const ms::AnyTensor t = tanh(a.in[0]);
          return {mul(mul(a.grad_out[0], a.in[1]), add(neg(square(t)), 1.0)), mul(a.grad_out[0], t)};
        })
        .device_kernel(ms::DeviceType::ascend, [](const ms::backend::DeviceKernelArgs& k) {
          ms::AnyTensor t = k.temp(k.in[0]);
          k.launch("tanh", {k.in[0]}, t);
          k.launch("mul", {t, k.in[1]}, k.out[0]);
        })
        .add();
// [scaled_tanh]

}  // namespace guide
