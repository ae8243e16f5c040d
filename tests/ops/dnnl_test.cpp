// The GEMM and convolution path switches (ms::cpu_gemm, MS_CPU_GEMM; ms::cpu_conv,
// MS_CPU_CONV) and the oneDNN path:
// every path gives the reference's values on the same products and convolutions, the
// primitive cache is hit on repeated geometries and stays bounded, oneDNN runs on ms's
// thread count, and a failed oneDNN call is a BackendError naming the op.
// The op tests themselves run on every path: ctest runs them again with MS_CPU_GEMM set
// (tests/CMakeLists.txt, entries ops.gemm_*).
#include <catch2/catch.hpp>
#include <ms/ms.hpp>

#include "test_util.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dnnl_test {

using ms::CpuGemm;
using ms::Shape;
using ms::Tensor;

using GemmPathGuard = ms_test::CpuPathGuard;

/// Every (GEMM path, convolution path) pair this build has.
std::vector<std::pair<CpuGemm, ms::CpuConv>> conv_paths() {
  std::vector<std::pair<CpuGemm, ms::CpuConv>> v;
  for (CpuGemm g : {CpuGemm::dnnl, CpuGemm::blas, CpuGemm::builtin})
    if (ms::cpu_gemm_available(g)) v.push_back({g, ms::CpuConv::im2col});
  v.push_back({CpuGemm::builtin, ms::CpuConv::direct});
  if (ms::cpu_gemm_available(CpuGemm::dnnl)) {
    v.push_back({CpuGemm::dnnl, ms::CpuConv::dnnl});
    v.push_back({CpuGemm::dnnl, ms::CpuConv::automatic});
  } else {
    v.push_back({CpuGemm::builtin, ms::CpuConv::automatic});
  }
  return v;
}

std::vector<CpuGemm> available_paths() {
  std::vector<CpuGemm> v;
  for (CpuGemm g : {CpuGemm::dnnl, CpuGemm::blas, CpuGemm::builtin})
    if (ms::cpu_gemm_available(g)) v.push_back(g);
  return v;
}

/// The row-major product of a (M x K) and b (K x N), in double.
std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, std::int64_t M,
                               std::int64_t N, std::int64_t K) {
  std::vector<double> c(static_cast<std::size_t>(M * N), 0.0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < N; ++j)
        c[static_cast<std::size_t>(i * N + j)] +=
            a[static_cast<std::size_t>(i * K + k)] * b[static_cast<std::size_t>(k * N + j)];
  return c;
}

std::vector<double> as_doubles(const Tensor<float>& t) {
  std::vector<double> v;
  for (float f : t.to_vector()) v.push_back(f);
  return v;
}

}  // namespace dnnl_test

using namespace dnnl_test;

TEST_CASE("cpu_gemm: names, availability and bad values", "[op][dnnl]") {
  GemmPathGuard guard;
  CHECK(ms::cpu_gemm_name(CpuGemm::dnnl) == "dnnl");
  CHECK(ms::cpu_gemm_name(CpuGemm::blas) == "blas");
  CHECK(ms::cpu_gemm_name(CpuGemm::builtin) == "builtin");
  // The fallback's former name still parses.
  CHECK(ms::ops::detail::parse_cpu_gemm("eigen", "MS_CPU_GEMM") == CpuGemm::builtin);
  CHECK(ms::cpu_gemm_available(CpuGemm::builtin));
  for (CpuGemm g : available_paths()) {
    ms::set_cpu_gemm(g);
    CHECK(ms::cpu_gemm() == g);
  }
  try {
    (void)ms::ops::detail::parse_cpu_gemm("mkl", "MS_CPU_GEMM");
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(std::string(e.what()) == "[ms.value_error] MS_CPU_GEMM: unknown GEMM path 'mkl' (valid: dnnl, blas, builtin)");
  }
#if !defined(MS_HAVE_DNNL)
  CHECK_THROWS_AS(ms::set_cpu_gemm(CpuGemm::dnnl), ms::ValueError);
  CHECK_THROWS_AS(ms::set_cpu_conv(ms::CpuConv::dnnl), ms::ValueError);
#endif
  // automatic (direct, oneDNN or im2col per convolution pass) is the default convolution
  // path, with or without oneDNN, unless MS_CPU_CONV says otherwise.
  if (std::getenv("MS_CPU_CONV") == nullptr) CHECK(guard.conv == ms::CpuConv::automatic);
  ms::set_cpu_conv(ms::CpuConv::direct);
  CHECK(ms::cpu_conv() == ms::CpuConv::direct);
  ms::set_cpu_conv(ms::CpuConv::automatic);
  CHECK(ms::cpu_conv() == ms::CpuConv::automatic);
  CHECK(ms::cpu_conv_name(ms::CpuConv::automatic) == "auto");
  CHECK(ms::cpu_conv_name(ms::CpuConv::im2col) == "im2col");
  CHECK(ms::cpu_conv_name(ms::CpuConv::dnnl) == "dnnl");
  CHECK(ms::cpu_conv_name(ms::CpuConv::direct) == "direct");
#if defined(MS_HAVE_DNNL)
  // The default of a build with oneDNN, unless the environment chose another path.
  if (std::getenv("MS_CPU_GEMM") == nullptr) CHECK(guard.gemm == CpuGemm::dnnl);
  CHECK(ms::dnnl_cpu_isa() != "none");
#endif
}

TEST_CASE("matmul and linear give the reference on every GEMM path, with transposed operands", "[op][dnnl]") {
  GemmPathGuard guard;
  struct Case {
    std::int64_t M, N, K;
  };
  for (CpuGemm path : available_paths()) {
    ms::set_cpu_gemm(path);
    for (const Case& c : {Case{64, 256, 784}, Case{7, 5, 3}, Case{1, 9, 17}, Case{33, 1, 65}}) {
      INFO("path " << ms::cpu_gemm_name(path) << ", M " << c.M << " N " << c.N << " K " << c.K);
      Tensor<float> a = ms_test::random_floats(Shape{c.M, c.K}, 1, -1, 1);
      Tensor<float> b = ms_test::random_floats(Shape{c.K, c.N}, 2, -1, 1);
      const auto ref = ref_matmul(as_doubles(a), as_doubles(b), c.M, c.N, c.K);
      ms_test::require_values(ms::matmul(a, b), ref, 1e-4, 1e-4);
      // Column-major operands: transposed views of contiguous buffers, not copied.
      Tensor<float> at = a.t().contiguous(), bt = b.t().contiguous();
      ms_test::require_values(ms::matmul(at.t(), bt.t()), ref, 1e-4, 1e-4);
      // linear: x @ w^T + bias, the bias accumulated into the product.
      Tensor<float> bias = ms_test::random_floats(Shape{c.N}, 3, -1, 1);
      auto ref_lin = ref;
      const auto bv = as_doubles(bias);
      for (std::int64_t i = 0; i < c.M; ++i)
        for (std::int64_t j = 0; j < c.N; ++j) ref_lin[static_cast<std::size_t>(i * c.N + j)] += bv[static_cast<std::size_t>(j)];
      ms_test::require_values(ms::linear(a, bt, bias), ref_lin, 1e-4, 1e-4);
    }
  }
}

TEST_CASE("conv2d and its gradients agree across GEMM paths (stride, padding, dilation, groups)", "[op][dnnl][conv2d]") {
  GemmPathGuard guard;
  struct Case {
    Shape x, w;
    ms::ops::Int2 stride, padding, dilation;
    std::int64_t groups;
  };
  const std::vector<Case> cases = {
      {{4, 1, 28, 28}, {6, 1, 5, 5}, 1, 2, 1, 1},      // LeNet's first layer
      {{4, 6, 14, 14}, {16, 6, 5, 5}, 1, 0, 1, 1},     // and its second
      {{2, 4, 9, 7}, {6, 2, 3, 3}, {2, 1}, 1, 1, 2},   // groups 2, uneven stride
      {{2, 3, 11, 10}, {4, 3, 3, 2}, 1, {2, 1}, 2, 1}, // dilation 2
      {{3, 4, 6, 6}, {4, 1, 3, 3}, 2, 1, 1, 4},        // depthwise, stride 2
      {{2, 1, 12, 12}, {32, 1, 5, 5}, 1, 2, 1, 1},     // 1 -> 32: automatic takes oneDNN but for the input gradient
      {{2, 8, 9, 9}, {32, 4, 3, 3}, 2, 1, 1, 2},       // groups 2 of 4 -> 16, stride 2: oneDNN's blocked layouts
      {{2, 3, 10, 37}, {9, 3, 3, 3}, 1, 1, 1, 1},      // RGB 3x3: direct under automatic; rows of 37 (partial batches)
      {{2, 4, 7, 9}, {6, 2, 4, 5}, 1, {0, 2}, 1, 2},   // groups 2, 4x5: direct forward (forced), no padded rows
      {{1, 2, 5, 6}, {3, 2, 2, 3}, 1, {3, 1}, 1, 1},   // padding taller than the kernel: rows of zeros only
      {{3, 1, 9, 40}, {11, 1, 5, 3}, 1, {2, 1}, 1, 1}, // 11 output channels: uneven channel blocks, 3 weight chunks
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO("case " << i << ": input " << ms::shape_str(c.x) << ", weight " << ms::shape_str(c.w));
    Tensor<float> x = ms_test::random_floats(c.x, 10 + static_cast<unsigned>(i), -1, 1);
    Tensor<float> w = ms_test::random_floats(c.w, 20 + static_cast<unsigned>(i), -1, 1);
    Tensor<float> b = ms_test::random_floats(Shape{c.w[0]}, 30 + static_cast<unsigned>(i), -1, 1);
    // The float64 result on the im2col path is the reference.
    ms::set_cpu_gemm(CpuGemm::builtin);
    Tensor<double> xd = ms::cast<double>(x), wd = ms::cast<double>(w), bd = ms::cast<double>(b);
    Tensor<double> yd = ms::conv2d(xd, wd, bd, c.stride, c.padding, c.dilation, c.groups);
    Tensor<double> g = ms::cast<double>(ms_test::random_floats(yd.shape(), 40 + static_cast<unsigned>(i), -1, 1));
    ms::ops::Attrs a{{"stride", c.stride.list()}, {"padding", c.padding.list()}, {"dilation", c.dilation.list()},
                     {"groups", c.groups}};
    ms::ops::Attrs ai = a, aw = a;
    ai.set("input_shape", c.x.vec());
    aw.set("weight_shape", c.w.vec());
    Tensor<double> gxd = ms::ops::call1(ms::ops::conv2d_grad_input_op, {g, wd}, ai);
    Tensor<double> gwd = ms::ops::call1(ms::ops::conv2d_grad_weight_op, {g, xd}, aw);
    auto dv = [](const Tensor<double>& t) { return t.to_vector(); };
    for (auto [path, conv] : conv_paths()) {
      INFO("GEMM path " << ms::cpu_gemm_name(path) << ", convolution path " << ms::cpu_conv_name(conv));
      ms::set_cpu_gemm(path);
      ms::set_cpu_conv(conv);
      const auto hits = ms::dnnl_cache_stats().hits;
      Tensor<float> gf = ms::cast<float>(g);
      for (int rep = 0; rep < 2; ++rep) {
        ms_test::require_values(ms::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups), dv(yd), 1e-4, 1e-4);
        ms_test::require_values(Tensor<float>(ms::ops::call1(ms::ops::conv2d_grad_input_op, {gf, w}, ai)), dv(gxd),
                                1e-4, 1e-4);
        ms_test::require_values(Tensor<float>(ms::ops::call1(ms::ops::conv2d_grad_weight_op, {gf, x}, aw)), dv(gwd),
                                1e-4, 1e-3);
      }
#if defined(MS_HAVE_DNNL)
      // The second round found all three primitives made by the first.
      if (conv == ms::CpuConv::dnnl) CHECK(ms::dnnl_cache_stats().hits >= hits + 3);
#endif
      (void)hits;
    }
  }
}

TEST_CASE("oneDNN: the primitive cache is bounded and reports its use", "[op][dnnl]") {
#if defined(MS_HAVE_DNNL)
  GemmPathGuard guard;
  ms::set_cpu_conv(ms::CpuConv::dnnl);
  ms::dnnl_cache_clear();
  CHECK(ms::dnnl_cache_stats().size == 0);
  CHECK(ms::dnnl_cache_stats().hits == 0);
  Tensor<float> w = ms_test::random_floats(Shape{2, 1, 3, 3}, 1, -1, 1);
  for (std::int64_t h = 3; h < 8; ++h) {
    Tensor<float> x = ms_test::random_floats(Shape{1, 1, h, h}, 2, -1, 1);
    (void)ms::conv2d(x, w);
    (void)ms::conv2d(x, w);
  }
  const ms::DnnlCacheStats s = ms::dnnl_cache_stats();
  CHECK(s.misses == 5);
  CHECK(s.hits == 5);
  CHECK(s.size == 5);
  CHECK(s.hit_rate() == Approx(0.5));
  CHECK(s.size <= s.capacity);
#else
  CHECK(ms::dnnl_cache_stats().size == 0);
  CHECK(ms::dnnl_cpu_isa() == "none");
#endif
}

TEST_CASE("conv: the automatic path takes the direct kernels for small receptive fields, oneDNN where output channels fill a 16-channel block", "[op][dnnl][conv2d]") {
  // The rule (benchmarks/conv): forward and weight gradient on oneDNN from 16 output channels
  // per group; the input gradient also needs 16 input channels per group.
  CHECK(ms::conv_prefers_dnnl(6, 16, false));
  CHECK_FALSE(ms::conv_prefers_dnnl(6, 16, true));
  CHECK(ms::conv_prefers_dnnl(16, 32, true));
  CHECK(ms::conv_prefers_dnnl(1, 32, false));
  CHECK_FALSE(ms::conv_prefers_dnnl(1, 32, true));
  CHECK_FALSE(ms::conv_prefers_dnnl(1, 6, false));
  CHECK_FALSE(ms::conv_prefers_dnnl(64, 15, false));
  // The direct kernels where a receptive field holds at most 32 values and a group at most
  // 16 output channels (taken before oneDNN).
  CHECK(ms::conv_prefers_direct(1, 6, 5, 5));
  CHECK(ms::conv_prefers_direct(3, 16, 3, 3));
  CHECK_FALSE(ms::conv_prefers_direct(1, 32, 5, 5));
  CHECK_FALSE(ms::conv_prefers_direct(6, 16, 5, 5));
  CHECK_FALSE(ms::conv_prefers_direct(4, 8, 3, 3));
#if defined(MS_HAVE_DNNL)
  GemmPathGuard guard;
  ms::set_cpu_gemm(CpuGemm::dnnl);
  ms::set_cpu_conv(ms::CpuConv::automatic);
  ms::ops::Attrs a{{"stride", ms::ops::IntList{1, 1}}, {"padding", ms::ops::IntList{0, 0}},
                   {"dilation", ms::ops::IntList{1, 1}}, {"groups", std::int64_t{1}}};
  // Primitives made for (input channels, output channels): forward, input gradient, weight gradient.
  auto made = [&](std::int64_t c, std::int64_t o) {
    ms::dnnl_cache_clear();
    Tensor<float> x = ms_test::random_floats(Shape{2, c, 8, 8}, 1, -1, 1), w = ms_test::random_floats(Shape{o, c, 3, 3}, 2, -1, 1);
    Tensor<float> y = ms::conv2d(x, w);
    std::vector<std::uint64_t> m{ms::dnnl_cache_stats().misses};
    ms::ops::Attrs ai = a, aw = a;
    ai.set("input_shape", x.shape().vec());
    aw.set("weight_shape", w.shape().vec());
    (void)ms::ops::call1(ms::ops::conv2d_grad_input_op, {y, w}, ai);
    m.push_back(ms::dnnl_cache_stats().misses - m[0]);
    (void)ms::ops::call1(ms::ops::conv2d_grad_weight_op, {y, x}, aw);
    m.push_back(ms::dnnl_cache_stats().misses - m[0] - m[1]);
    return m;
  };
  CHECK(made(6, 16) == std::vector<std::uint64_t>{1, 0, 1});
  CHECK(made(16, 16) == std::vector<std::uint64_t>{1, 1, 1});
  CHECK(made(1, 32) == std::vector<std::uint64_t>{1, 0, 1});
  // 1 -> 16 (3x3): the direct kernels take the forward pass and the weight gradient, and the
  // input gradient of one input channel stays on im2col.
  CHECK(made(1, 16) == std::vector<std::uint64_t>{0, 0, 0});
  CHECK(made(1, 6) == std::vector<std::uint64_t>{0, 0, 0});
#endif
}

TEST_CASE("oneDNN: a primitive is made for the thread count it runs at", "[op][dnnl]") {
#if defined(MS_HAVE_DNNL)
  // oneDNN fixes a primitive's work split when it is made: one made at 1 thread and reused
  // after set_num_threads(2) would keep running on 1 thread.
  GemmPathGuard guard;
  ms::set_cpu_conv(ms::CpuConv::dnnl);
  ms::dnnl_cache_clear();
  Tensor<float> x = ms_test::random_floats(Shape{4, 3, 12, 12}, 1, -1, 1);
  Tensor<float> w = ms_test::random_floats(Shape{8, 3, 3, 3}, 2, -1, 1);
  ms::set_num_threads(1);
  Tensor<float> y1 = ms::conv2d(x, w);
  ms::set_num_threads(2);
  Tensor<float> y2 = ms::conv2d(x, w);
  CHECK(ms::dnnl_cache_stats().misses == 2);
  CHECK(ms::dnnl_cache_stats().size == 2);
  ms::set_num_threads(1);
  Tensor<float> y3 = ms::conv2d(x, w);
  ms::set_num_threads(2);
  Tensor<float> y4 = ms::conv2d(x, w);
  CHECK(ms::dnnl_cache_stats().misses == 2);
  CHECK(ms::dnnl_cache_stats().hits == 2);
  CHECK(ms_test::same_bits(y1, y3));
  CHECK(ms_test::same_bits(y2, y4));
  ms_test::require_values(y2, as_doubles(y1), 1e-5, 1e-5);
  if (ms::dnnl_bf16_native()) {
    // float32 GEMMs at bfloat16 precision convert small operands on one thread: at 2 threads
    // the two conversions are made for 1 thread (the 1-thread run below finds them) and
    // the product for 2.
    ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16);
    ms::set_cpu_gemm(CpuGemm::dnnl);
    Tensor<float> a = ms_test::random_floats(Shape{16, 24}, 3, -1, 1), b = ms_test::random_floats(Shape{24, 8}, 4, -1, 1);
    ms::dnnl_cache_clear();
    Tensor<float> p2 = ms::matmul(a, b);
#if defined(_OPENMP)
    CHECK(omp_get_max_threads() == 2);  // restored after the 1-thread conversions
#endif
    CHECK(ms::dnnl_cache_stats().misses == 3);
    ms::set_num_threads(1);
    Tensor<float> p1 = ms::matmul(a, b);
    CHECK(ms::dnnl_cache_stats().misses == 4);
    CHECK(ms::dnnl_cache_stats().hits == 2);
    ms_test::require_values(p1, as_doubles(p2), 1e-6, 1e-6);
  }
#else
  SUCCEED("built without oneDNN");
#endif
}

TEST_CASE("oneDNN runs on ms's thread count, and its failures are BackendErrors", "[op][dnnl]") {
#if defined(MS_HAVE_DNNL)
  GemmPathGuard guard;
  ms::set_cpu_gemm(CpuGemm::dnnl);
  Tensor<float> a = ms_test::random_floats(Shape{32, 32}, 1), b = ms_test::random_floats(Shape{32, 32}, 2);
  for (int n : {1, 2}) {
    ms::set_num_threads(n);
    (void)ms::matmul(a, b);
#if defined(_OPENMP)
    // oneDNN's OpenMP build uses omp_get_max_threads() threads.
    CHECK(omp_get_max_threads() == n);
    // Other code in the process changes OpenMP's setting too (LibTorch's set_num_threads
    // does): the next oneDNN call still runs on ms's count.
    omp_set_num_threads(3 - n);
    (void)ms::matmul(a, b);
    CHECK(omp_get_max_threads() == n);
#endif
  }
  try {
    ms::ops::detail::dnnl_check(dnnl_invalid_arguments, "conv2d", "execution", "input (1, 1, 3, 3)");
    FAIL("no error");
  } catch (const ms::BackendError& e) {
    CHECK(std::string(e.what()) ==
          "[ms.backend_error] conv2d: oneDNN execution failed with status invalid_arguments (2) for input (1, 1, 3, 3)");
  }
#else
  SUCCEED("built without oneDNN");
#endif
}

TEST_CASE("oneDNN: a captured graph owns its primitives, so replays hit however full the cache is", "[op][dnnl][graph]") {
#if defined(MS_HAVE_DNNL)
  GemmPathGuard guard;
  ms::set_cpu_conv(ms::CpuConv::dnnl);
  ms::dnnl_cache_clear();
  Tensor<float> x = ms_test::random_floats(Shape{2, 1, 9, 9}, 1, -1, 1);
  Tensor<float> w = ms_test::random_floats(Shape{3, 1, 3, 3}, 2, -1, 1);
  auto f = ms::jit([](const Tensor<float>& a, const Tensor<float>& k) { return ms::relu(ms::conv2d(a, k, {}, 1, 1)); });
  Tensor<float> y0 = f(x, w);  // traced: the eager run makes the primitive
  Tensor<float> y1 = f(x, w);  // first replay: the executable takes it
  REQUIRE(f.executable() != nullptr);
  CHECK(f.executable()->owned_primitives() == 1);
  CHECK(ms_test::same_bits(y0, y1));
  // Fill the cache far beyond its capacity with other geometries: the owned one stays.
  const std::size_t cap = ms::dnnl_cache_stats().capacity;
  Tensor<float> k1 = ms_test::random_floats(Shape{1, 1, 1, 1}, 3, -1, 1);
  for (std::size_t i = 0; i < cap + 8; ++i) (void)ms::conv2d(ms::ones<float>({1, 1, 1, static_cast<std::int64_t>(i + 1)}), k1);
  CHECK(ms::dnnl_cache_stats().size <= cap + 1);
  const auto before = ms::dnnl_cache_stats();
  Tensor<float> y2 = f(x, w);
  const auto after = ms::dnnl_cache_stats();
  CHECK(after.misses == before.misses);
  CHECK(after.hits == before.hits + 1);
  CHECK(ms_test::same_bits(y0, y2));
#else
  SUCCEED("built without oneDNN");
#endif
}
