// Captured GEMM epilogues as oneDNN post-ops (backend/cpu/dnnl_epilogue.hpp): a fused
// matmul/linear node whose program is a straight chain of steps runs as one matmul
// primitive with bias, eltwise and binary post-ops. Checked against eager (which runs the
// GEMM and the elementwise ops separately) and against references computed in double,
// within float tolerance (oneDNN's activations are not bit-identical to ms's); programs
// that are no such chain, MS_DNNL_POSTOPS=0 and the other GEMM paths run as before.

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "test_util.hpp"

namespace dnnl_postops_test {

using ms::Tensor;
namespace backend = ms::backend;
namespace graph = ms::graph;

/// The compiled graph of fn traced on args (default passes: fusion and epilogues on).
template <class F, class... Args>
backend::Executable compile_fn(F&& fn, const Args&... args) {
  graph::Capture cap;
  (cap.input(args), ...);
  auto out = fn(args...);
  cap.output(out);
  return backend::compile(cap.finish());
}

/// The post-op chain lengths of the executable's fused GEMM nodes (0: runs as before).
std::vector<std::size_t> chains(const backend::Executable& exe) {
  std::vector<std::size_t> r;
  for (const auto& n : exe.graph().nodes())
    if (!n.dead && n.fused && n.fused->producer) r.push_back(n.fused->post_ops.size());
  return r;
}

/// Largest |a - b| / (1 + |b|) over two float tensors of one shape.
double max_diff(const ms::AnyTensor& a, const ms::AnyTensor& b) {
  auto va = ms_test::values(Tensor<float>(a)), vb = ms_test::values(Tensor<float>(b));
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double d = std::abs(va[i] - vb[i]) / (1.0 + std::abs(vb[i]));
    worst = std::max(worst, d != d ? 1e30 : d);
  }
  return worst;
}

/// x @ w^T (+ b) in double, then f elementwise with the result's (row, col).
std::vector<double> linear_ref(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>* b,
                               const std::function<double(double, std::int64_t, std::int64_t)>& f) {
  const auto vx = ms_test::values(x), vw = ms_test::values(w);
  const std::int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[0];
  std::vector<double> vb = b ? ms_test::values(*b) : std::vector<double>(static_cast<std::size_t>(N), 0.0);
  std::vector<double> out;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = vb[static_cast<std::size_t>(j)];
      for (std::int64_t k = 0; k < K; ++k) s += vx[static_cast<std::size_t>(i * K + k)] * vw[static_cast<std::size_t>(j * K + k)];
      out.push_back(f(s, i, j));
    }
  return out;
}

double max_diff_ref(const ms::AnyTensor& a, const std::vector<double>& ref) {
  auto va = ms_test::values(Tensor<float>(a));
  REQUIRE(va.size() == ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - ref[i]) / (1.0 + std::abs(ref[i])));
  return worst;
}

bool on_dnnl() {
  return ms::cpu_gemm_available(ms::CpuGemm::dnnl) && ms::cpu_gemm() == ms::CpuGemm::dnnl && ms::dnnl_postops();
}

constexpr double kTol = 2e-5;

TEST_CASE("dnnl post-ops: relu(linear(x, w, b)) is one primitive and matches a double reference", "[graph][dnnl]") {
  Tensor<float> w = ms_test::random_floats({24, 40}, 1, -0.5f, 0.5f), b = ms_test::random_floats({24}, 2);
  auto fn = [&](const Tensor<float>& x) { return ms::relu(ms::linear(x, w, b)); };
  Tensor<float> x1 = ms_test::random_floats({33, 40}, 3), x2 = ms_test::random_floats({33, 40}, 4);
  backend::Executable exe = compile_fn(fn, x1);
  const auto planned = chains(exe);
  REQUIRE(planned.size() == 1);
  if (!ms::cpu_gemm_available(ms::CpuGemm::dnnl)) {
    CHECK(planned[0] == 0);
    return;
  }
  CHECK(planned[0] == 1);  // the bias is the matmul's own; relu the one post-op
  for (const Tensor<float>& x : {x1, x2}) {
    const std::uint64_t before = ms::dnnl_postop_runs();
    ms::AnyTensor y = exe.run({x})[0];
    CHECK(ms::dnnl_postop_runs() == before + (on_dnnl() ? 1 : 0));
    CHECK(max_diff_ref(y, linear_ref(x, w, &b, [](double v, auto, auto) { return std::max(v, 0.0); })) < kTol);
    CHECK(max_diff(y, fn(x)) < kTol);
  }
  if (on_dnnl()) CHECK(exe.owned_primitives() >= 1);
}

TEST_CASE("dnnl post-ops: gelu(a @ b) * 0.5 + row vector", "[graph][dnnl]") {
  Tensor<float> c = ms_test::random_floats({20}, 5);
  auto fn = [&](const Tensor<float>& a, const Tensor<float>& b) { return ms::gelu(ms::matmul(a, b)) * 0.5f + c; };
  Tensor<float> a = ms_test::random_floats({17, 12}, 6, -1, 1), b = ms_test::random_floats({12, 20}, 7, -1, 1);
  backend::Executable exe = compile_fn(fn, a, b);
  if (ms::cpu_gemm_available(ms::CpuGemm::dnnl)) CHECK(chains(exe) == std::vector<std::size_t>{3});
  const std::uint64_t before = ms::dnnl_postop_runs();
  ms::AnyTensor y = exe.run({a, b})[0];
  CHECK(ms::dnnl_postop_runs() == before + (on_dnnl() ? 1 : 0));
  // Reference: a @ b is linear with w = b^T and no bias.
  Tensor<float> bt = ms::ops::detail::contiguous_raw(b.transpose(0, 1));
  const auto vc = ms_test::values(c);
  auto ref = linear_ref(a, bt, nullptr, [&](double v, auto, std::int64_t j) {
    return 0.5 * (0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))) + vc[static_cast<std::size_t>(j)];
  });
  CHECK(max_diff_ref(y, ref) < kTol);
  CHECK(max_diff(y, fn(a, b)) < kTol);
}

TEST_CASE("dnnl post-ops: tanh(linear) + residual, per-row column and a scalar input", "[graph][dnnl]") {
  Tensor<float> w = ms_test::random_floats({16, 8}, 8, -0.5f, 0.5f), b = ms_test::random_floats({16}, 9);
  Tensor<float> x = ms_test::random_floats({10, 8}, 10), r = ms_test::random_floats({10, 16}, 11);
  Tensor<float> col = ms_test::random_floats({10, 1}, 12), s = ms_test::random_floats({1}, 13);
  auto fn = [&](const Tensor<float>& xx, const Tensor<float>& rr, const Tensor<float>& cc, const Tensor<float>& ss) {
    return (ms::tanh(ms::linear(xx, w, b)) + rr - cc) * ss;
  };
  backend::Executable exe = compile_fn(fn, x, r, col, s);
  if (ms::cpu_gemm_available(ms::CpuGemm::dnnl)) CHECK(chains(exe) == std::vector<std::size_t>{4});
  const std::uint64_t before = ms::dnnl_postop_runs();
  ms::AnyTensor y = exe.run({x, r, col, s})[0];
  CHECK(ms::dnnl_postop_runs() == before + (on_dnnl() ? 1 : 0));
  const auto vr = ms_test::values(r), vcol = ms_test::values(col);
  const double vs = ms_test::values(s)[0];
  auto ref = linear_ref(x, w, &b, [&](double v, std::int64_t i, std::int64_t j) {
    return (std::tanh(v) + vr[static_cast<std::size_t>(i * 16 + j)] - vcol[static_cast<std::size_t>(i)]) * vs;
  });
  CHECK(max_diff_ref(y, ref) < kTol);
  CHECK(max_diff(y, fn(x, r, col, s)) < kTol);
  // Other inputs on the same executable (the primitive is reused, the operands rebound).
  Tensor<float> x2 = ms_test::random_floats({10, 8}, 14), r2 = ms_test::random_floats({10, 16}, 15);
  CHECK(max_diff(exe.run({x2, r2, col, s})[0], fn(x2, r2, col, s)) < kTol);
}

TEST_CASE("dnnl post-ops: each activation and scalar step matches eager", "[graph][dnnl]") {
  using F = std::function<Tensor<float>(const Tensor<float>&)>;
  const std::vector<std::pair<const char*, F>> cases = {
      {"sigmoid", [](const Tensor<float>& v) { return ms::sigmoid(v); }},
      {"clamp", [](const Tensor<float>& v) { return ms::clamp(v, -0.5, 0.75); }},
      {"gelu_tanh", [](const Tensor<float>& v) { return ms::gelu_tanh(v); }},
      {"silu", [](const Tensor<float>& v) { return ms::silu(v); }},
      {"elu", [](const Tensor<float>& v) { return ms::elu(v, 0.7); }},
      {"leaky_relu", [](const Tensor<float>& v) { return ms::leaky_relu(v, 0.1); }},
      {"abs exp", [](const Tensor<float>& v) { return ms::exp(ms::abs(v) * -1.0f); }},
      {"square sqrt", [](const Tensor<float>& v) { return ms::sqrt(ms::square(v) + 1.0f); }},
      {"neg, scalar minus", [](const Tensor<float>& v) { return 2.0f - (-v) / 4.0f; }},
      {"v * v", [](const Tensor<float>& v) { Tensor<float> t = v - 0.25f; return t * t; }},
  };
  Tensor<float> w = ms_test::random_floats({12, 9}, 20, -0.5f, 0.5f), b = ms_test::random_floats({12}, 21);
  Tensor<float> x = ms_test::random_floats({7, 9}, 22);
  for (const auto& [name, f] : cases) {
    INFO(name);
    auto fn = [&](const Tensor<float>& xx) { return f(ms::linear(xx, w, b)); };
    backend::Executable exe = compile_fn(fn, x);
    const auto planned = chains(exe);
    REQUIRE(planned.size() == 1);
    if (ms::cpu_gemm_available(ms::CpuGemm::dnnl)) CHECK(planned[0] > 0);
    const std::uint64_t before = ms::dnnl_postop_runs();
    ms::AnyTensor y = exe.run({x})[0];
    CHECK(ms::dnnl_postop_runs() == before + (on_dnnl() ? 1 : 0));
    CHECK(max_diff(y, fn(x)) < kTol);
  }
}

TEST_CASE("dnnl post-ops: programs that are no straight chain run as before", "[graph][dnnl]") {
  Tensor<float> w = ms_test::random_floats({12, 9}, 30, -0.5f, 0.5f), b = ms_test::random_floats({12}, 31);
  Tensor<float> x = ms_test::random_floats({7, 9}, 32), z = ms_test::random_floats({7, 12}, 33);
  using F = std::function<Tensor<float>(const Tensor<float>&, const Tensor<float>&)>;
  const std::vector<std::pair<const char*, F>> cases = {
      {"sin (no post-op)", [](const Tensor<float>& v, const Tensor<float>&) { return ms::sin(v); }},
      {"z / v", [](const Tensor<float>& v, const Tensor<float>& zz) { return ms::relu(zz / v); }},
      {"a second branch", [](const Tensor<float>& v, const Tensor<float>& zz) { return ms::relu(v) * ms::exp(zz); }},
      {"comparison", [](const Tensor<float>& v, const Tensor<float>& zz) { return ms::where(v > 0.0f, v, zz); }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    auto fn = [&](const Tensor<float>& xx, const Tensor<float>& zz) { return f(ms::linear(xx, w, b), zz); };
    backend::Executable exe = compile_fn(fn, x, z);
    for (std::size_t c : chains(exe)) CHECK(c == 0);
    const std::uint64_t before = ms::dnnl_postop_runs();
    ms::AnyTensor y = exe.run({x, z})[0];
    CHECK(ms::dnnl_postop_runs() == before);
    CHECK(ms_test::same_bits(y, fn(x, z)));
  }
  // A batched matmul is planned but runs as before (the primitive path takes 2-D products).
  auto bmm = [](const Tensor<float>& a, const Tensor<float>& bb) { return ms::relu(ms::matmul(a, bb)); };
  Tensor<float> a3 = ms_test::random_floats({3, 5, 9}, 34), b2 = ms_test::random_floats({9, 7}, 35);
  backend::Executable exe = compile_fn(bmm, a3, b2);
  const std::uint64_t before = ms::dnnl_postop_runs();
  CHECK(ms_test::same_bits(exe.run({a3, b2})[0], bmm(a3, b2)));
  CHECK(ms::dnnl_postop_runs() == before);
}

TEST_CASE("dnnl post-ops: switched off, or on another GEMM path, the same results", "[graph][dnnl]") {
  Tensor<float> w = ms_test::random_floats({24, 40}, 40, -0.5f, 0.5f), b = ms_test::random_floats({24}, 41);
  Tensor<float> c = ms_test::random_floats({24}, 42);
  auto fn = [&](const Tensor<float>& x) { return ms::sigmoid(ms::linear(x, w, b)) * 1.5f + c; };
  Tensor<float> x = ms_test::random_floats({33, 40}, 43);
  backend::Executable exe = compile_fn(fn, x);
  const ms::AnyTensor on = exe.run({x})[0];
  const bool saved = ms::set_dnnl_postops(false);
  const std::uint64_t before = ms::dnnl_postop_runs();
  const ms::AnyTensor off = exe.run({x})[0];
  CHECK(ms::dnnl_postop_runs() == before);
  ms::set_dnnl_postops(saved);
  CHECK(max_diff(on, off) < kTol);
  CHECK(ms_test::same_bits(off, fn(x)));  // the old path replays eager bit for bit
  for (ms::CpuGemm g : {ms::CpuGemm::builtin, ms::CpuGemm::blas}) {
    if (!ms::cpu_gemm_available(g)) continue;
    const ms::CpuGemm prev = ms::cpu_gemm();
    ms::set_cpu_gemm(g);
    const std::uint64_t n0 = ms::dnnl_postop_runs();
    const ms::AnyTensor y = exe.run({x})[0];
    const ms::AnyTensor e = fn(x);
    ms::set_cpu_gemm(prev);
    CHECK(ms::dnnl_postop_runs() == n0);
    CHECK(max_diff(y, on) < kTol);
    CHECK(ms_test::same_bits(y, e));
  }
}

TEST_CASE("dnnl post-ops: gradients of a captured training step match eager", "[graph][dnnl][grad]") {
  Tensor<float> w1 = ms_test::random_floats({32, 20}, 50, -0.3f, 0.3f), b1 = ms_test::random_floats({32}, 51, -0.1f, 0.1f);
  Tensor<float> w2 = ms_test::random_floats({8, 32}, 52, -0.3f, 0.3f), b2 = ms_test::random_floats({8}, 53, -0.1f, 0.1f);
  for (Tensor<float>* p : {&w1, &b1, &w2, &b2}) p->requires_grad_(true);
  const std::vector<ms::AnyTensor> params{w1, b1, w2, b2};
  auto step = [&](const Tensor<float>& x, const Tensor<float>& t) {
    Tensor<float> h = ms::relu(ms::linear(x, w1, b1));
    Tensor<float> o = ms::tanh(ms::linear(h, w2, b2)) * 2.0f;
    Tensor<float> loss = ms::sum(ms::square(o - t));
    std::vector<ms::AnyTensor> g = ms::autograd::grad(loss, params);
    return std::make_tuple(loss, g);
  };
  auto jitted = ms::jit(step);
  Tensor<float> x = ms_test::random_floats({16, 20}, 54), t = ms_test::random_floats({16, 8}, 55, -1, 1);
  jitted(x, t);  // the trace
  const std::uint64_t before = ms::dnnl_postop_runs();
  auto [loss, grads] = jitted(x, t);
  REQUIRE(jitted.num_replays() == 1);
  if (on_dnnl()) CHECK(ms::dnnl_postop_runs() >= before + 2);  // both forward layers
  auto [eloss, egrads] = step(x, t);
  CHECK(max_diff(loss, eloss) < kTol);
  REQUIRE(grads.size() == egrads.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(max_diff(grads[i], egrads[i]) < 1e-4);
  }
}

TEST_CASE("dnnl post-ops: chains on one GEMM shape get primitives of their own", "[graph][dnnl]") {
  Tensor<float> w = ms_test::random_floats({16, 12}, 60, -0.5f, 0.5f), b = ms_test::random_floats({16}, 61);
  Tensor<float> x = ms_test::random_floats({9, 12}, 62);
  using F = std::function<Tensor<float>(const Tensor<float>&)>;
  const std::vector<F> fs = {
      [](const Tensor<float>& v) { return ms::relu(v); },
      [](const Tensor<float>& v) { return ms::sigmoid(v); },
      [](const Tensor<float>& v) { return ms::relu(v) * 2.0f; },
      [](const Tensor<float>& v) { return ms::relu(v) * 3.0f; },
  };
  std::vector<backend::Executable> exes;
  for (const F& f : fs) exes.push_back(compile_fn([&](const Tensor<float>& xx) { return f(ms::linear(xx, w, b)); }, x));
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < fs.size(); ++i) {
      INFO("chain " << i << ", round " << round);
      CHECK(max_diff(exes[i].run({x})[0], fs[i](ms::linear(x, w, b))) < kTol);
    }
}

TEST_CASE("dnnl post-ops: transposed and sliced operands", "[graph][dnnl]") {
  // w^T stored as (in, out): linear reads it column-major; x a column slice of a wider matrix.
  Tensor<float> wt = ms_test::random_floats({12, 16}, 70, -0.5f, 0.5f), b = ms_test::random_floats({16}, 71);
  Tensor<float> wide = ms_test::random_floats({9, 20}, 72);
  Tensor<float> c = ms_test::random_floats({16}, 73);
  auto fn = [&](const Tensor<float>& xw) {
    Tensor<float> x = ms::ops::slice(xw, 1, 4, 16);
    return ms::tanh(ms::linear(x, wt.t(), b)) - c;
  };
  backend::Executable exe = compile_fn(fn, wide);
  const std::uint64_t before = ms::dnnl_postop_runs();
  ms::AnyTensor y = exe.run({wide})[0];
  CHECK(max_diff(y, fn(wide)) < kTol);
  Tensor<float> x = ms::ops::detail::contiguous_raw(ms::ops::slice(wide, 1, 4, 16));
  Tensor<float> w = ms::ops::detail::contiguous_raw(wt.t());
  const auto vc = ms_test::values(c);
  auto ref = linear_ref(x, w, &b, [&](double v, auto, std::int64_t j) { return std::tanh(v) - vc[static_cast<std::size_t>(j)]; });
  CHECK(max_diff_ref(y, ref) < kTol);
  if (on_dnnl()) CHECK(ms::dnnl_postop_runs() == before + 1);
  // A row given as an expanded view (stride 0) runs as before, with the same values.
  Tensor<float> one = ms_test::random_floats({1}, 74);
  auto fe = [&](const Tensor<float>& xx, const Tensor<float>& o) {
    return ms::relu(ms::linear(xx, wt.t(), b)) * Tensor<float>(ms::ops::expand(o, {16}));
  };
  backend::Executable exe2 = compile_fn(fe, x, one);
  CHECK(max_diff(exe2.run({x, one})[0], fe(x, one)) < kTol);
}

}  // namespace dnnl_postops_test
