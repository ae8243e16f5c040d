// CPU levels of the elementwise kernels (<ms/core/cpu_isa.hpp>, ops/isa_dispatch.hpp):
// naming and selection, refusal of levels the CPU lacks, binding of every elementwise op
// to the selected level's kernels, and agreement of every level with the baseline.

#include "test_util.hpp"

namespace isa_test {

using ms::AnyTensor;
using ms::DType;
using ms::cpu::Isa;

/// Restores the level in force when the test started.
struct IsaGuard {
  Isa saved = ms::cpu::isa();
  ~IsaGuard() { ms::cpu::set_isa(saved); }
};

/// The levels of this program that this CPU runs, lowest first.
std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa l : ms::cpu::compiled_isas())
    if (static_cast<int>(l) <= static_cast<int>(ms::cpu::detected_isa())) out.push_back(l);
  return out;
}

/// Deterministic inputs of `dtype`: 1037 elements (a tail at every batch width), values
/// where every elementwise op is defined (positive floats, small positive integers).
AnyTensor input(DType dtype, int salt) {
  std::vector<double> v(1037);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = static_cast<double>((i * 7919 + static_cast<std::size_t>(salt) * 104729) % 1000) / 1000.0;
    v[i] = dtype == DType::b8 ? static_cast<double>((i + static_cast<std::size_t>(salt)) % 3 == 0)
           : ms::is_integral(dtype) ? 1.0 + std::floor(u * 9.0)
                                    : 0.05 + 1.9 * u;
  }
  return ms::ops::cast(ms::from_vector(v, {1037}), dtype);
}

/// The attributes an op needs to run (the rest take their defaults).
ms::ops::Attrs attrs_for(const std::string& name) {
  if (name == "pow_scalar") return ms::ops::Attrs{{"exponent", 2.5}};
  if (name == "clamp") return ms::ops::Attrs{{"lo", 0.5}, {"hi", 1.5}};
  return {};
}

/// Runs every elementwise op bound by the ISA dispatch on every dtype it supports.
std::vector<std::pair<std::string, AnyTensor>> run_all() {
  std::vector<std::pair<std::string, AnyTensor>> out;
  for (const auto& [name, base] : ms::ops::detail::isa_base_tables()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(name);
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::b8}) {
      if (!op.cpu_dtypes.contains(d)) continue;
      std::vector<AnyTensor> in;
      for (int k = 0; k < op.num_inputs; ++k) {
        const DType dk = name == "where" && k == 0 ? DType::b8 : d;
        in.push_back(input(dk, k));
      }
      out.emplace_back(fmt::format("{} {}", name, d), ms::ops::call1(op, in, attrs_for(name)));
    }
  }
  return out;
}

std::vector<double> values_of(const AnyTensor& t) { return ms::ops::cast(t, DType::f64).as<double>().to_vector(); }

TEST_CASE("isa: level names parse, unknown names list the valid ones", "[isa]") {
  CHECK(ms::cpu::parse_isa("baseline") == Isa::baseline);
  CHECK(ms::cpu::parse_isa("sse4") == Isa::sse4);
  CHECK(ms::cpu::parse_isa("avx2") == Isa::avx2);
  CHECK(ms::cpu::parse_isa("avx512") == Isa::avx512);
  CHECK_THROWS_MATCHES(ms::cpu::parse_isa("avx3"), ms::ValueError,
                       Catch::Matchers::Message("[ms.value_error] MS_CPU_ISA: unknown CPU level 'avx3' "
                                                "(valid: baseline, sse4, avx2, avx512)"));
  for (int i = 0; i < ms::cpu::kNumIsas; ++i) {
    const Isa l = static_cast<Isa>(i);
    CHECK(ms::cpu::parse_isa(ms::cpu::isa_name(l)) == l);
  }
}

TEST_CASE("isa: a level above the CPU's is refused with a message, never run", "[isa]") {
  CHECK_NOTHROW(ms::cpu::check_isa_supported(Isa::avx2, Isa::avx2));
  CHECK_NOTHROW(ms::cpu::check_isa_supported(Isa::sse4, Isa::avx512));
  CHECK_THROWS_MATCHES(ms::cpu::check_isa_supported(Isa::avx512, Isa::avx2), ms::ValueError,
                       Catch::Matchers::Message("[ms.value_error] MS_CPU_ISA: this CPU cannot run the avx512 kernels "
                                                "(x86-64-v4 (AVX-512 F/BW/DQ/VL)); its best level is avx2"));
  // On this machine: every level above the detected one is refused by set_isa, and the
  // binding stays as it was.
  IsaGuard guard;
  const Isa cpu = ms::cpu::detected_isa();
  for (int i = static_cast<int>(cpu) + 1; i < ms::cpu::kNumIsas; ++i) {
    CHECK_THROWS_AS(ms::cpu::set_isa(static_cast<Isa>(i)), ms::ValueError);
    CHECK(ms::cpu::isa() == guard.saved);
  }
}

TEST_CASE("isa: the program holds every level and binds the best one the CPU runs", "[isa]") {
  const auto compiled = ms::cpu::compiled_isas();
  REQUIRE(!compiled.empty());
  CHECK(compiled.front() == Isa::baseline);
#if defined(__x86_64__) && defined(__GNUC__)
  // This suite links a kernel library made by ms_add_kernel_library: all three levels.
  CHECK(compiled == std::vector<Isa>{Isa::baseline, Isa::sse4, Isa::avx2, Isa::avx512});
#endif
  // Without MS_CPU_ISA, the best compiled level the CPU runs; with it, that level.
  const char* env = std::getenv("MS_CPU_ISA");
  const Isa want = env && *env ? ms::cpu::parse_isa(env) : ms::cpu::detected_isa();
  CHECK(ms::cpu::isa() == ms::cpu::best_compiled_isa(want));
  CHECK_THAT(ms::cpu::isa_summary(), Catch::Matchers::StartsWith(std::string(ms::cpu::isa_name(ms::cpu::isa()))));
}

TEST_CASE("isa: set_isa binds every elementwise op to that level's kernels", "[isa]") {
  IsaGuard guard;
  const auto base_tables = ms::ops::detail::isa_base_tables();
  // The elementwise ops of ops/unary.hpp and ops/binary.hpp (46 in all), where among them.
  CHECK(base_tables.size() >= 46);
  CHECK(base_tables.count("where") == 1);
  for (Isa l : runnable_isas()) {
    ms::cpu::set_isa(l);
    CHECK(ms::cpu::isa() == l);
    for (const auto& [name, base] : base_tables) {
      INFO(name << " at " << ms::cpu::isa_name(l));
      const ms::ops::OpDef& op = ms::ops::registry().get(name);
      const ms::ops::IsaKernelRow* row = l == Isa::baseline ? &base : ms::ops::detail::find_isa_row(l, name);
      REQUIRE(row != nullptr);
      for (int d = 0; d < ms::kNumDTypes; ++d) {
        CHECK(op.elementwise.block[d] == row->block[d]);
        for (int v = 0; v < ms::ops::kAffineVariants; ++v) CHECK(op.elementwise.affine[d][v] == row->affine[d][v]);
      }
      // Each level's kernels are its own functions, for every dtype the op has.
      if (l != Isa::baseline)
        for (int d = 0; d < ms::kNumDTypes; ++d)
          if (base.block[d] != nullptr) CHECK(row->block[d] != base.block[d]);
    }
  }
}

TEST_CASE("isa: every elementwise op gives the baseline's values at every level, the same bits on every run",
          "[isa][op]") {
  IsaGuard guard;
  ms::cpu::set_isa(Isa::baseline);
  const auto ref = run_all();
  REQUIRE(ref.size() > 100);
  for (Isa l : runnable_isas()) {
    ms::cpu::set_isa(l);
    const auto got = run_all(), again = run_all();
    REQUIRE(got.size() == ref.size());
    for (std::size_t k = 0; k < ref.size(); ++k) {
      INFO(ref[k].first << " at " << ms::cpu::isa_name(l));
      const AnyTensor& g = got[k].second;
      REQUIRE(g.dtype() == ref[k].second.dtype());
      REQUIRE(g.shape() == ref[k].second.shape());
      // The same level: the same bits.
      CHECK(std::memcmp(g.raw_data(), again[k].second.raw_data(), static_cast<std::size_t>(g.nbytes())) == 0);
      const auto a = values_of(g), b = values_of(ref[k].second);
      const bool exact = !ms::is_floating(g.dtype());
      // Levels differ in FMA use inside the math functions (Eigen's tanh, xsimd's exp):
      // a few ulp of float32, far below the op tests' tolerance.
      const double rtol = g.dtype() == DType::f32 ? 2e-6 : 1e-14;
      std::size_t bad = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        const bool ok = exact ? a[i] == b[i]
                              : (std::isnan(a[i]) && std::isnan(b[i])) || std::abs(a[i] - b[i]) <= rtol * std::abs(b[i]) + 1e-30;
        if (!ok && bad++ == 0) INFO("element " << i << ": " << a[i] << " vs " << b[i]);
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("isa: a fused chain replays at every level like the baseline's eager ops", "[isa][graph]") {
  IsaGuard guard;
  auto chain = [](const ms::Tensor<float>& x) {
    return ms::tanh(x * 0.5f + 0.1f) * 1.5f - x / (ms::exp(x) + 1.0f);
  };
  std::vector<float> v(4099);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = -4.0f + 8.0f * static_cast<float>(i) / static_cast<float>(v.size());
  const auto x = ms::from_vector(v, {static_cast<std::int64_t>(v.size())});
  ms::cpu::set_isa(Isa::baseline);
  const auto ref = chain(x).to_vector();
  for (Isa l : runnable_isas()) {
    ms::cpu::set_isa(l);
    auto f = ms::jit(chain);  // compiled after set_isa: its fused kernels are this level's
    const auto eager = chain(x).to_vector(), fused = f(x).to_vector();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      INFO("element " << i << " at " << ms::cpu::isa_name(l));
      // Within a level, fused and eager give the same bits; across levels a few ulp.
      CHECK(fused[i] == eager[i]);
      CHECK(std::abs(eager[i] - ref[i]) <= 4e-7f * std::max(1.0f, std::abs(ref[i])));
    }
  }
}

TEST_CASE("isa: the kernels bound by name (direct convolution, max pooling) are each level's own, the convolution's agree with the baseline",
          "[isa][op][conv2d]") {
  IsaGuard guard;
  ms_test::CpuPathGuard paths;
  ms::set_cpu_conv(ms::CpuConv::direct);
  // Rows of 29 outputs (a partial batch at every width), 5 output channels, padding 2.
  const auto x = ms_test::random_floats(ms::Shape{3, 2, 11, 29}, 1, -1, 1);
  const auto w = ms_test::random_floats(ms::Shape{5, 2, 5, 5}, 2, -1, 1);
  const auto b = ms_test::random_floats(ms::Shape{5}, 3, -1, 1);
  const auto g = ms_test::random_floats(ms::Shape{3, 5, 11, 29}, 4, -1, 1);
  ms::ops::Attrs aw{{"stride", ms::ops::IntList{1, 1}}, {"padding", ms::ops::IntList{2, 2}},
                    {"dilation", ms::ops::IntList{1, 1}}, {"groups", std::int64_t{1}}, {"weight_shape", w.shape().vec()}};
  auto run = [&] {
    return std::pair{ms::conv2d(x, w, b, 1, 2).to_vector(),
                     ms::Tensor<float>(ms::ops::call1(ms::ops::conv2d_grad_weight_op, {g, x}, aw)).to_vector()};
  };
  ms::cpu::set_isa(Isa::baseline);
  const auto ref = run();
  for (Isa l : runnable_isas()) {
    INFO("level " << ms::cpu::isa_name(l));
    ms::cpu::set_isa(l);
    const std::pair<const char*, ms::ops::IsaFn> kernels[] = {
        {"conv_direct_forward", &ms::ops::detail::conv_direct_forward},
        {"conv_direct_grad_weight", &ms::ops::detail::conv_direct_grad_weight},
        {"max_pool_dense", &ms::ops::detail::max_pool_dense},
        {"conv_im2col_f32", &ms::ops::detail::conv_im2col<float>},
        {"conv_im2col_f64", &ms::ops::detail::conv_im2col<double>},
        {"conv_col2im_add_f32", &ms::ops::detail::conv_col2im_add<float>},
        {"conv_col2im_add_f64", &ms::ops::detail::conv_col2im_add<double>},
        {"adam_update_f32", &ms::ops::detail::adam_update_kernel<float>},
        {"adam_update_f64", &ms::ops::detail::adam_update_kernel<double>},
        {"reduce_run_sum_f32", &ms::ops::detail::reduce_run_kernel<ms::ops::detail::SumP<float>, float>},
        {"reduce_col_sqdev_f64", &ms::ops::detail::reduce_col_kernel<ms::ops::detail::SqDevP<double>, double>},
        {"batch_norm_f32", &ms::ops::detail::batch_norm_kernel<float>},
        {"layer_norm_grad_cols_f64", &ms::ops::detail::layer_norm_grad_cols_kernel<double>},
        {"avg_pool_f32", &ms::ops::detail::avg_pool_kernel<false, false, float>},
        {"adaptive_avg_pool_grad_f64", &ms::ops::detail::avg_pool_kernel<true, true, double>},
        {"log_softmax_rows_f32", &ms::ops::detail::softmax_rows_kernel<true, float>},
        {"softmax_cols_f64", &ms::ops::detail::softmax_cols_kernel<false, double>},
        {"cross_entropy_grad_f32", &ms::ops::detail::cross_entropy_grad_kernel<float>},
        {"gemm_f64", &ms::ops::detail::gemm_kernel<double>}};
    for (auto [name, base] : kernels) {
      INFO(name);
      // Above the baseline, the level's own copy (its row in the section ms_isa_fns).
      CHECK((ms::cpu::isa_function(name, base) != base) == (l != Isa::baseline));
    }
    const auto got = run(), again = run();
    CHECK(got == again);  // the same level: the same bits
    for (std::size_t i = 0; i < ref.first.size(); ++i)
      CHECK(std::abs(got.first[i] - ref.first[i]) <= 2e-6f * std::max(1.0f, std::abs(ref.first[i])));
    for (std::size_t i = 0; i < ref.second.size(); ++i)
      CHECK(std::abs(got.second[i] - ref.second[i]) <= 1e-4f * std::max(1.0f, std::abs(ref.second[i])));
  }
}

template <class T>
void check_im2col_levels() {
  // im2col copies and col2im adds in the same order at every level: with the GEMM fixed
  // (OpenBLAS, which picks its kernels by itself), each level's results are the baseline's
  // bits; without OpenBLAS the built-in GEMM runs at each level (rounded apart where a
  // level has no FMA), and the results agree within rounding. Rows of 13 and 7 outputs (partial
  // batches at every width), padding, and the general loops (stride 2, dilation 2), 2 groups.
  struct Case {
    ms::Shape x, w;
    std::int64_t stride, padding, dilation, groups;
  };
  const Case cases[] = {{{3, 4, 13, 15}, {6, 2, 3, 3}, 1, 1, 1, 2},
                        {{2, 3, 9, 11}, {4, 3, 5, 5}, 1, 0, 1, 1},
                        {{2, 2, 12, 14}, {3, 2, 3, 3}, 2, 1, 2, 1}};
  for (const Case& c : cases) {
    INFO("x " << ms::shape_str(c.x) << ", w " << ms::shape_str(c.w) << ", stride " << c.stride << ", padding "
              << c.padding << ", dilation " << c.dilation << ", groups " << c.groups);
    const auto x = ms::cast<T>(ms_test::random_floats(c.x, 11, -1, 1));
    const auto w = ms::cast<T>(ms_test::random_floats(c.w, 12, -1, 1));
    ms::ops::Attrs a{{"stride", ms::ops::IntList{c.stride, c.stride}}, {"padding", ms::ops::IntList{c.padding, c.padding}},
                     {"dilation", ms::ops::IntList{c.dilation, c.dilation}}, {"groups", c.groups}};
    auto run = [&] {
      const auto y = ms::conv2d(x, w, ms::Tensor<T>(), c.stride, c.padding, c.dilation, c.groups);
      const auto g = ms::cast<T>(ms_test::random_floats(y.shape(), 13, -1, 1));
      ms::ops::Attrs ai = a, aw = a;
      ai.set("input_shape", x.shape().vec());
      aw.set("weight_shape", w.shape().vec());
      return std::array{y.to_vector(), ms::Tensor<T>(ms::ops::call1(ms::ops::conv2d_grad_input_op, {g, w}, ai)).to_vector(),
                        ms::Tensor<T>(ms::ops::call1(ms::ops::conv2d_grad_weight_op, {g, x}, aw)).to_vector()};
    };
    ms::cpu::set_isa(Isa::baseline);
    const auto ref = run();
    // The baseline against a direct sum (the forward pass).
    const auto xv = x.to_vector(), wv = w.to_vector();
    const std::int64_t C = c.x[1], H = c.x[2], W = c.x[3], O = c.w[0], Cg = c.w[1], kh = c.w[2], kw = c.w[3];
    const std::int64_t Ho = (H + 2 * c.padding - c.dilation * (kh - 1) - 1) / c.stride + 1;
    const std::int64_t Wo = (W + 2 * c.padding - c.dilation * (kw - 1) - 1) / c.stride + 1;
    for (std::int64_t n = 0; n < c.x[0]; ++n)
      for (std::int64_t o = 0; o < O; ++o)
        for (std::int64_t oh = 0; oh < Ho; ++oh)
          for (std::int64_t ow = 0; ow < Wo; ++ow) {
            double acc = 0;
            const std::int64_t g0 = o / (O / c.groups);
            for (std::int64_t ci = 0; ci < Cg; ++ci)
              for (std::int64_t i = 0; i < kh; ++i)
                for (std::int64_t j = 0; j < kw; ++j) {
                  const std::int64_t h = oh * c.stride - c.padding + i * c.dilation;
                  const std::int64_t v = ow * c.stride - c.padding + j * c.dilation;
                  if (h < 0 || h >= H || v < 0 || v >= W) continue;
                  acc += static_cast<double>(xv[static_cast<std::size_t>(((n * C + g0 * Cg + ci) * H + h) * W + v)]) *
                         static_cast<double>(wv[static_cast<std::size_t>(((o * Cg + ci) * kh + i) * kw + j)]);
                }
            const double got = static_cast<double>(ref[0][static_cast<std::size_t>(((n * O + o) * Ho + oh) * Wo + ow)]);
            CHECK(std::abs(got - acc) <= 1e-5 * std::max(1.0, std::abs(acc)));
          }
    for (Isa l : runnable_isas()) {
      INFO("level " << ms::cpu::isa_name(l));
      ms::cpu::set_isa(l);
      const auto got = run();
      for (std::size_t k = 0; k < got.size(); ++k) {
        INFO("result " << k << " (0: forward, 1: input gradient, 2: weight gradient)");
        if (ms::cpu_gemm() == ms::CpuGemm::blas) {
          CHECK(got[k] == ref[k]);
          continue;
        }
        const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
        for (std::size_t i = 0; i < got[k].size(); ++i)
          CHECK(std::abs(static_cast<double>(got[k][i]) - static_cast<double>(ref[k][i])) <=
                tol * std::max(1.0, std::abs(static_cast<double>(ref[k][i]))));
      }
    }
  }
}

TEST_CASE("isa: im2col and col2im run on each level's kernels with the baseline's bits (float and double)",
          "[isa][op][conv2d]") {
  IsaGuard guard;
  ms_test::CpuPathGuard paths;
  ms::set_cpu_gemm(ms::cpu_gemm_available(ms::CpuGemm::blas) ? ms::CpuGemm::blas : ms::CpuGemm::builtin);
  ms::set_cpu_conv(ms::CpuConv::im2col);
  SECTION("float") { check_im2col_levels<float>(); }
  SECTION("double") { check_im2col_levels<double>(); }
}

}  // namespace isa_test

namespace isa_test {

TEST_CASE("isa: the avx2 and avx512 levels round the math functions alike (fused multiply-adds at both)",
          "[isa][op]") {
  // Both levels evaluate xsimd's and Eigen's polynomials with one rounding per multiply-add
  // (core/simd.hpp supplies xsimd 8.1's missing AVX-512 kernels), so their results are the
  // same bits; a level that rounds the products apart differs in hundreds of these elements.
  const auto levels = runnable_isas();
  if (std::find(levels.begin(), levels.end(), Isa::avx512) == levels.end()) {
    SUCCEED("this CPU does not run the avx512 level");
    return;
  }
  IsaGuard guard;
  std::vector<double> v(4099);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01 + 7.3 * static_cast<double>(i) / static_cast<double>(v.size());
  for (const char* name : {"exp", "log", "log1p", "expm1", "sin", "cos", "tanh"}) {
    const ms::ops::OpDef& op = ms::ops::registry().get(name);
    for (DType d : {DType::f32, DType::f64}) {
      const AnyTensor x = ms::ops::cast(ms::from_vector(v, {4099}), d);
      ms::cpu::set_isa(Isa::avx2);
      const AnyTensor a = ms::ops::call1(op, std::vector<AnyTensor>{x}, {});
      ms::cpu::set_isa(Isa::avx512);
      const AnyTensor b = ms::ops::call1(op, std::vector<AnyTensor>{x}, {});
      INFO(name << " " << ms::dtype_name(d));
      std::size_t differ = 0;
      const auto av = values_of(a), bv = values_of(b);
      for (std::size_t i = 0; i < av.size(); ++i) differ += av[i] != bv[i];
      CHECK(differ == 0);
    }
  }
}

template <class T>
void check_builtin_gemm_levels() {
  // Shapes that cross every blocking edge of kernels/gemm.hpp: partial register tiles,
  // K past one panel (256), M past one block (96), N past one panel (2048), and operands
  // read through transposed strides; against a double sum, at every level and thread count.
  struct Case {
    std::int64_t M, K, N;
    bool ta, tb;
  };
  const Case cases[] = {{1, 1, 1, false, false}, {7, 300, 37, false, false}, {130, 5, 2100, false, true},
                        {13, 17, 70, true, false}, {25, 520, 33, true, true}, {97, 64, 64, false, false}};
  for (const Case& c : cases) {
    INFO("M " << c.M << ", K " << c.K << ", N " << c.N << ", a transposed " << c.ta << ", b transposed " << c.tb);
    const auto a0 = ms::cast<T>(ms_test::random_floats(c.ta ? ms::Shape{c.K, c.M} : ms::Shape{c.M, c.K}, 21, -1, 1));
    const auto b0 = ms::cast<T>(ms_test::random_floats(c.tb ? ms::Shape{c.N, c.K} : ms::Shape{c.K, c.N}, 22, -1, 1));
    const auto a = c.ta ? a0.transpose(0, 1) : a0;
    const auto b = c.tb ? b0.transpose(0, 1) : b0;
    const auto bias = ms::cast<T>(ms_test::random_floats(ms::Shape{c.N}, 23, -1, 1));
    const auto av = a.contiguous().to_vector(), bv = b.contiguous().to_vector(), biasv = bias.to_vector();
    std::vector<double> ref(static_cast<std::size_t>(c.M * c.N)), mag(ref.size());
    for (std::int64_t i = 0; i < c.M; ++i)
      for (std::int64_t j = 0; j < c.N; ++j) {
        double s = 0, m = 0;
        for (std::int64_t k = 0; k < c.K; ++k) {
          const double p = static_cast<double>(av[static_cast<std::size_t>(i * c.K + k)]) *
                           static_cast<double>(bv[static_cast<std::size_t>(k * c.N + j)]);
          s += p, m += std::abs(p);
        }
        ref[static_cast<std::size_t>(i * c.N + j)] = s;
        mag[static_cast<std::size_t>(i * c.N + j)] = m;
      }
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
    for (Isa l : runnable_isas()) {
      INFO("level " << ms::cpu::isa_name(l));
      ms::cpu::set_isa(l);
      ms::set_num_threads(1);
      const auto y = ms::matmul(a, b).to_vector();
      // linear's bias seeds c and the GEMM accumulates onto it (x @ w^T + bias, w = b^T).
      const auto z = ms::linear(a, b.transpose(0, 1), bias).to_vector();
      ms::set_num_threads(2);
      CHECK(ms::matmul(a, b).to_vector() == y);  // each element sums in one order: same bits
      for (std::size_t e = 0; e < ref.size(); ++e) {
        INFO("element " << e);
        CHECK(std::abs(static_cast<double>(y[e]) - ref[e]) <= tol * std::max(1.0, mag[e]));
        const double zr = ref[e] + static_cast<double>(biasv[e % static_cast<std::size_t>(c.N)]);
        CHECK(std::abs(static_cast<double>(z[e]) - zr) <= tol * std::max(1.0, mag[e] + 1.0));
      }
    }
  }
}

TEST_CASE("isa: the built-in GEMM at each level against a double sum (float and double)", "[isa][op][matmul]") {
  IsaGuard guard;
  ms_test::CpuPathGuard paths;
  ms::set_cpu_gemm(ms::CpuGemm::builtin);
  SECTION("float") { check_builtin_gemm_levels<float>(); }
  SECTION("double") { check_builtin_gemm_levels<double>(); }
}

}  // namespace isa_test
