// User-defined operators (ms/ops/custom.hpp): the guide's softsign (a formula) and running_sum
// (an explicit kernel) from examples/custom_op.hpp, plus test-only ops for the error paths.
// Each is checked against hand-computed values or the same math written with built-in ops,
// eagerly, in a captured graph (with fusion), under autodiff, in the profiler and the dump.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

#include "test_util.hpp"
#include "../../examples/custom_op.hpp"

namespace {

using ms::AnyTensor;
using ms::Tensor;
namespace ops = ms::ops;
namespace fs = std::filesystem;

// A binary formula with a numeric attribute: alpha * (a - b).
struct ScaledSub {
  static constexpr ms::FormulaParam params[] = {{"alpha", 2.0}};
  double alpha;
  explicit ScaledSub(const double* p) : alpha(p[0]) {}
  template <class V>
  V operator()(V a, V b) const {
    return ms::simd::c<V>(alpha) * (a - b);
  }
};
const ms::CustomOp scaled_sub = ms::define_elementwise<ScaledSub>(
    "test_scaled_sub",
    {.doc = "alpha * (a - b) (test op)",
     .grad = [](const ops::GradArgs& a) -> std::vector<AnyTensor> {
       const double alpha = a.attrs.f("alpha", 2.0);
       return {ops::mul(a.grad_out[0], alpha), ops::mul(a.grad_out[0], -alpha)};
     }});

// An op without a gradient rule.
const ms::CustomOp no_grad_op = ms::OpBuilder("test_no_grad")
                                    .doc("x + 1 without a gradient rule (test op)")
                                    .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
                                    .compute([](std::span<const AnyTensor> in, const ops::Attrs&) {
                                      return ops::add(in[0], 1.0);
                                    })
                                    .add();

// An op registered without a gradient rule that gets one later, through its handle.
const ms::CustomOp late_grad_op = ms::OpBuilder("test_late_grad")
                                      .doc("3 * x, its gradient attached after registration (test op)")
                                      .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
                                      .compute([](std::span<const AnyTensor> in, const ops::Attrs&) {
                                        return ops::mul(in[0], 3.0);
                                      })
                                      .add();

// An op whose kernel disagrees with its inference: inference says (n,), compute returns (n, 1).
const ms::CustomOp bad_shape_op = ms::OpBuilder("test_bad_shape")
                                      .doc("kernel and inference disagree (test op)")
                                      .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
                                      .compute([](std::span<const AnyTensor> in, const ops::Attrs&) {
                                        return ops::reshape(in[0], {in[0].numel(), 1});
                                      })
                                      .add();

// An op whose raw kernel replaces its output instead of writing into it.
const ms::CustomOp replacing_op = ms::OpBuilder("test_replacing")
                                      .doc("kernel replaces its output (test op)")
                                      .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
                                      .kernel([](const ops::KernelArgs& a) { a.out[0] = ops::clone(a.in[0]); })
                                      .add();

// softsign and the scaled subtraction are elementwise (categories unary/binary): the
// registry's coverage test counts them with the built-in ops.
MS_TEST_COVERS("softsign", "test_scaled_sub");

using ms_test::same_bits;

/// Uniform in [-4, 4) from `seed`.
Tensor<float> uniform4(const ms::Shape& shape, std::uint32_t seed) {
  return ms_test::random_floats(shape, seed, -4.0f, 4.0f);
}

}  // namespace

TEST_CASE("custom op: user ops are in the registry's op list like built-in ones", "[op][custom]") {
  const ops::OpDef* s = ops::registry().find("softsign");
  REQUIRE(s != nullptr);
  CHECK(s == &guide::softsign.def());
  CHECK(s->category == ops::Category::unary);
  CHECK(s->doc == "x / (1 + |x|) (defined in examples/custom_op.hpp)");
  CHECK(s->kernel == &ops::elementwise_kernel);
  CHECK(s->differentiable());
  // Registered for float32 and float64; 16-bit floats come with them (computed in float32).
  CHECK(s->cpu_dtypes.bits == (ms::kFloatTypes | ms::DTypeSet{ms::DType::f16, ms::DType::bf16}).bits);

  const ops::OpDef& c = ops::registry().get("running_sum");
  CHECK(c.category == ops::Category::custom);
  CHECK(c.num_inputs == 1);
  CHECK(c.attr_names == std::vector<std::string>{"axis", "reverse"});
  CHECK(c.differentiable());

  CHECK(ops::registry().get("test_scaled_sub").category == ops::Category::binary);
  CHECK(ops::registry().get("test_scaled_sub").attr_names == std::vector<std::string>{"alpha"});
  CHECK_FALSE(no_grad_op.def().differentiable());
}

TEST_CASE("custom op: softsign eagerly, against hand values and the same formula in built-in ops", "[op][custom]") {
  Tensor<float> x{-3.f, -1.f, 0.f, 0.5f, 4.f};
  ms_test::require_values(guide::softsign(x), {-0.75, -0.5, 0.0, 1.0 / 3.0, 0.8});
  Tensor<double> xd{-3.0, 1e300, -0.0};
  ms_test::require_values(guide::softsign(xd), {-0.75, 1.0, 0.0}, 1e-15, 0);

  // Every length around the SIMD width and the 1K block, and a strided view.
  for (std::int64_t n : {1, 3, 7, 8, 9, 17, 1023, 1025, 5000}) {
    INFO("n = " << n);
    Tensor<float> v = uniform4({n}, static_cast<std::uint32_t>(n));
    AnyTensor ref = ops::div(v, ops::add(ops::abs(v), 1.0));
    CHECK(same_bits(guide::softsign(v), ref));
  }
  Tensor<float> m = uniform4({33, 17}, 5);
  AnyTensor mt = ops::transpose(m, 0, 1);
  CHECK(same_bits(guide::softsign({mt}), ops::div(mt, ops::add(ops::abs(mt), 1.0))));

  MS_REQUIRE_THROWS_MSG(guide::softsign(Tensor<std::int32_t>{1, 2}), ms::DTypeError,
                        "[ms.dtype_error] softsign: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
}

TEST_CASE("custom op: a binary formula broadcasts and reads its attribute", "[op][custom]") {
  Tensor<float> a{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  Tensor<float> b{0.5f, 1.f, -1.f};
  ms_test::require_values(scaled_sub(a, b), {1, 2, 8, 7, 8, 14});  // default alpha = 2
  ms_test::require_values(scaled_sub(a, b, {{"alpha", 0.5}}), {0.25, 0.5, 2, 1.75, 2, 3.5});
  ms_test::require_values(scaled_sub(a, b, {{"alpha", std::int64_t{-1}}}), {-0.5, -1, -4, -3.5, -4, -7});
  MS_REQUIRE_THROWS_MSG(scaled_sub(a, Tensor<float>{1.f, 2.f}), ms::ShapeError,
                        "[ms.shape_error] test_scaled_sub: cannot broadcast (2, 3) with (2,)");
}

TEST_CASE("custom op: running_sum eagerly, with its attributes, on views, and its errors", "[op][custom]") {
  Tensor<float> x{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  ms_test::require_values(guide::running_sum(x), {1, 3, 6, 4, 9, 15});
  ms_test::require_values(guide::running_sum(x, {{"axis", std::int64_t{0}}}), {1, 2, 3, 5, 7, 9});
  ms_test::require_values(guide::running_sum(x, {{"reverse", true}}), {6, 5, 3, 15, 11, 6});
  ms_test::require_values(guide::running_sum(x, {{"axis", std::int64_t{-2}}, {"reverse", true}}), {5, 7, 9, 4, 5, 6});
  // A transposed (non-contiguous) input.
  ms_test::require_values(Tensor<float>(guide::running_sum({ops::transpose(x, 0, 1)})), {1, 5, 2, 7, 3, 9});
  Tensor<double> d{0.5, 0.25, 0.125};
  ms_test::require_values(guide::running_sum(d), {0.5, 0.75, 0.875}, 0, 0);
  ms_test::require_values(guide::running_sum(Tensor<float>(ops::scalar_tensor(2.5, ms::DType::f32))), {2.5});

  MS_REQUIRE_THROWS_MSG(guide::running_sum(x, {{"axis", std::int64_t{2}}}), ms::IndexError,
                        "[ms.index_error] running_sum: axis 2 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(guide::running_sum(x, {{"axes", std::int64_t{0}}}), ms::ValueError,
                        "[ms.value_error] running_sum: unknown attribute 'axes' (attributes: axis, reverse)");
  MS_REQUIRE_THROWS_MSG(guide::running_sum(x, {{"axis", 0.5}}), ms::ValueError,
                        "[ms.value_error] running_sum: attribute 'axis' must be int, got float 0.5");
  MS_REQUIRE_THROWS_MSG(guide::running_sum(Tensor<std::int64_t>{1, 2}), ms::DTypeError,
                        "[ms.dtype_error] running_sum: unsupported dtype int64 (supported: float32, float64)");
  MS_REQUIRE_THROWS_MSG(guide::running_sum.call(std::vector<AnyTensor>{x, x}), ms::ValueError,
                        "[ms.value_error] running_sum: expected 1 inputs, got 2");
}

TEST_CASE("custom op: registration and kernel errors are typed and name the op", "[op][custom]") {
  MS_REQUIRE_THROWS_MSG(ms::define_elementwise("softsign", []<class V>(V x) { return x; }), ms::ValueError,
                        "[ms.value_error] register op: an op named 'softsign' is already registered");
  MS_REQUIRE_THROWS_MSG(
      ms::OpBuilder("running_sum")
          .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
          .kernel([](const ops::KernelArgs&) {})
          .add(),
      ms::ValueError, "[ms.value_error] register op: an op named 'running_sum' is already registered");
  MS_REQUIRE_THROWS_MSG(ms::OpBuilder("test_no_infer").kernel([](const ops::KernelArgs&) {}).add(), ms::ValueError,
                        "[ms.value_error] register op 'test_no_infer': missing shape/dtype inference");
  MS_REQUIRE_THROWS_MSG(
      ms::OpBuilder("test_no_kernel").infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; }).add(),
      ms::ValueError, "[ms.value_error] register op 'test_no_kernel': missing CPU kernel");
  CHECK(ops::registry().find("test_no_infer") == nullptr);
  CHECK(ops::registry().find("test_no_kernel") == nullptr);

  Tensor<float> x{1.f, 2.f, 3.f};
  MS_REQUIRE_THROWS_MSG(bad_shape_op(x), ms::ShapeError,
                        "[ms.shape_error] test_bad_shape: the kernel returned (3, 1) float32 for output 0 but "
                        "inference said (3,) float32 (inputs (3,) float32)");
  MS_REQUIRE_THROWS_MSG(replacing_op(x), ms::ValueError,
                        "[ms.value_error] test_replacing: the kernel replaced output 0 ((3,) float32) instead of "
                        "writing into it; inference said (3,) float32");
  ms_test::require_values(no_grad_op(x), {2, 3, 4});  // compute() results are copied into the outputs
}

TEST_CASE("custom op: autodiff through user gradient rules, and a clear error without one", "[op][custom][grad]") {
  Tensor<float> x{-3.f, -1.f, 0.f, 0.5f, 4.f};
  x.set_requires_grad(true);
  ms::sum(guide::softsign(x)).backward();
  ms_test::require_values(x.grad(), {1.0 / 16, 0.25, 1.0, 1.0 / 2.25, 1.0 / 25});

  Tensor<float> c{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  c.set_requires_grad(true);
  Tensor<float> w{{1.f, 0.f, 0.f}, {0.f, 0.f, 1.f}};
  ms::sum(guide::running_sum(c) * w).backward();
  ms_test::require_values(c.grad(), {1, 0, 0, 1, 1, 1});  // reverse running sum of w
  c.zero_grad();
  ms::sum(guide::running_sum(c, {{"axis", std::int64_t{0}}, {"reverse", true}}) * w).backward();
  ms_test::require_values(c.grad(), {1, 0, 0, 1, 0, 1});

  Tensor<float> a{1.f, 2.f}, b{3.f, 5.f};
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  ms::sum(scaled_sub(a, b, {{"alpha", 3.0}})).backward();
  ms_test::require_values(a.grad(), {3, 3});
  ms_test::require_values(b.grad(), {-3, -3});

  // Finite differences in float64 through a composite of both ops.
  Tensor<double> p{{0.3, -1.2, 2.0}, {0.7, -0.1, 1.5}};
  auto f = [&](const Tensor<double>& t) { return ms::sum(guide::softsign(guide::running_sum(t * t)) * t); };
  Tensor<double> pg = p.clone();
  pg.set_requires_grad(true);
  auto g = ms::autograd::grad(f(pg), {pg});
  std::vector<double> fd;
  const double h = 1e-6;
  auto pv = p.to_vector();
  for (std::size_t i = 0; i < pv.size(); ++i) {
    auto up = pv, dn = pv;
    up[i] += h;
    dn[i] -= h;
    Tensor<double> tu = Tensor<double>(p.clone()), td = Tensor<double>(p.clone());
    std::copy(up.begin(), up.end(), tu.data());
    std::copy(dn.begin(), dn.end(), td.data());
    fd.push_back((f(tu).item() - f(td).item()) / (2 * h));
  }
  ms_test::require_values(Tensor<double>(g[0]), fd, 1e-7, 1e-8);

  // No rule: the forward works, the backward names the op.
  Tensor<float> y{1.f, 2.f};
  y.set_requires_grad(true);
  Tensor<float> z = ms::sum(no_grad_op(y) * y);
  MS_REQUIRE_THROWS_MSG(z.backward(), ms::NotImplementedError,
                        "[ms.not_implemented] backward: op 'test_no_grad' has no gradient rule; define one when "
                        "registering the op, or detach() its inputs");
  y.zero_grad();  // the failed pass delivered y's direct gradient before it stopped
  Tensor<float> ok = ms::sum(Tensor<float>(no_grad_op(y.detach())) * y);
  ok.backward();
  ms_test::require_values(y.grad(), {2, 3});
}

TEST_CASE("custom op: a gradient rule attached after registration through the op's handle", "[op][custom][grad]") {
  CHECK_FALSE(late_grad_op.def().differentiable());
  ops::registry().set_grad(late_grad_op, [](const ops::GradArgs& a) -> std::vector<AnyTensor> {
    return {ops::mul(a.grad_out[0], 3.0)};
  });
  CHECK(late_grad_op.def().differentiable());
  Tensor<float> x{1.f, -2.f, 0.5f};
  x.set_requires_grad(true);
  ms::sum(late_grad_op(x) * x).backward();  // d/dx sum(3x * x) = 6x
  ms_test::require_values(x.grad(), {6, -12, 3});

  // A copy of a registered op is not the registry's op: nothing is changed, the op is named.
  ops::OpDef copy = late_grad_op.def();
  MS_REQUIRE_THROWS_MSG(ops::registry().set_grad(copy, nullptr, "none"), ms::ValueError,
                        "[ms.value_error] set_grad: op 'test_late_grad' is not a registered op (pass the handle "
                        "that registering it returned)");
  CHECK(late_grad_op.def().differentiable());
}

TEST_CASE("custom op: captured graphs fuse the formula op and replay bit-identically", "[op][custom][graph]") {
  Tensor<float> x = uniform4({64, 33}, 1), b = uniform4({33}, 2);
  auto program = [&](const Tensor<float>& in) { return guide::running_sum(guide::softsign(in * 2.0f) + b, {{"axis", std::int64_t{0}}}); };
  Tensor<float> eager = program(x);

  ms::graph::Capture cap;
  cap.input(x, "x");
  Tensor<float> traced = program(x);
  cap.output(traced);
  ms::graph::Graph g = cap.finish();
  CHECK(g.count("softsign") == 1);
  CHECK(g.count("running_sum") == 1);
  CHECK(g.nodes().back().attrs.str() == "axis=0");

  ms::backend::Executable exe = ms::backend::compile(std::move(g));
  const auto& cg = exe.graph();
  CHECK(cg.count("softsign") == 0);  // fused with the mul and the add
  CHECK(cg.count("fused") == 1);
  CHECK(cg.count("running_sum") == 1);
  bool found = false;
  for (auto& n : cg.nodes())
    if (n.fused) found = ms::graph::node_label(n) == "fused[mul+softsign+add]";
  CHECK(found);
  CHECK(same_bits(exe.run({x})[0], eager));
  Tensor<float> x2 = uniform4({64, 33}, 3);
  CHECK(same_bits(exe.run({x2})[0], program(x2)));

  // Forward and backward captured as one graph by jit.
  Tensor<float> w = uniform4({33}, 4);
  w.set_requires_grad(true);
  auto step = [&](const Tensor<float>& in) {
    Tensor<float> loss = ms::sum(guide::running_sum(guide::softsign(in * w)) * in);
    return Tensor<float>(ms::autograd::grad(loss, {w})[0]);
  };
  Tensor<float> ge = step(x);
  auto jstep = ms::jit(step);
  CHECK(same_bits(jstep(x), ge));   // trace
  CHECK(same_bits(jstep(x), ge));   // replay
  CHECK(jstep.num_replays() == 1);
  // The loss itself is not an output, so dce drops the forward running_sum; its gradient, a
  // reverse running_sum of the input, stays (as a node running the user's kernel).
  const auto& jg = jstep.executable()->graph();
  CHECK(jg.count("running_sum") == 1);
  for (auto& n : jg.nodes())
    if (n.op->name == "running_sum") CHECK(n.attrs.b("reverse"));
}

TEST_CASE("custom op: the profiler times user ops and reports their cost", "[op][custom][tools]") {
  Tensor<float> x{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  ms::Profiler prof;
  {
    ms::ProfilerScope on(prof);
    Tensor<float> y = guide::running_sum(guide::softsign(x));
    (void)y;
  }
  auto ev = prof.events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].type == "softsign");
  CHECK(ev[0].flops == 6 * 3);           // 3 flops per element, as declared
  CHECK(ev[0].bytes == 2 * 6 * 4);
  CHECK(ev[1].type == "running_sum");
  CHECK(ev[1].flops == 6);               // the op's own cost function
  CHECK(ev[1].bytes == 2 * 6 * 4);
  CHECK(ev[1].end_ns >= ev[1].start_ns);
  CHECK(prof.table().find("running_sum") != std::string::npos);
}

TEST_CASE("custom op: the data dump writes user ops' inputs and outputs", "[op][custom][tools]") {
  auto dir = fs::temp_directory_path() / fmt::format("ms_custom_dump_{}", ::getpid());
  fs::remove_all(dir);
  auto dump = ms::DataDump::from_json(fmt::format(
      R"({{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net", "iteration": "all", "input_output": 0, "kernels": []}}}})",
      dir.string()));
  Tensor<float> x{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  Tensor<float> y;
  {
    ms::DumpScope on(*dump);
    y = guide::running_sum(x);
  }
  auto it = dir / "rank_0" / "Net" / "0" / "0";
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(it))
    if (e.path().extension() == ".npy") names.push_back(e.path().filename().string());
  REQUIRE(names.size() == 2);
  std::sort(names.begin(), names.end());
  CHECK(names[0].rfind("running_sum.running_sum_0.0.0.", 0) == 0);
  CHECK(names[0].find(".input.0.npy") != std::string::npos);
  CHECK(names[1].find(".output.0.npy") != std::string::npos);
  CHECK(same_bits(ms::load_npy(it / names[0]), x));
  CHECK(same_bits(ms::load_npy(it / names[1]), y));
  fs::remove_all(dir);
}

TEST_CASE("custom op: the guide quotes the example's code verbatim", "[custom][docs]") {
  // docs/guide.md shows the code between the "// [name]" marker lines of the example files
  // (without their common indentation): a change to the example must be made in the guide too.
  const fs::path root = fs::path(__FILE__).parent_path().parent_path().parent_path();
  auto read = [](const fs::path& p) {
    std::ifstream f(p);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  auto snippet = [](const std::string& src, const std::string& name) {
    const std::string marker = "// [" + name + "]\n";
    auto b = src.find(marker);
    REQUIRE(b != std::string::npos);
    auto e = src.find(marker, b + marker.size());
    REQUIRE(e != std::string::npos);
    std::vector<std::string> lines;
    std::stringstream body(src.substr(b + marker.size(), e - b - marker.size()));
    for (std::string l; std::getline(body, l);) lines.push_back(l);
    if (!lines.empty() && lines.back().find_first_not_of(' ') == std::string::npos) lines.pop_back();
    std::size_t indent = std::string::npos;
    for (auto& l : lines)
      if (l.find_first_not_of(' ') != std::string::npos) indent = std::min(indent, l.find_first_not_of(' '));
    std::string out;
    for (auto& l : lines) out += (l.size() >= indent ? l.substr(indent) : std::string()) + "\n";
    return out;
  };
  const std::string guide = read(root / "docs" / "guide.md");
  const std::string hpp = read(root / "examples" / "custom_op.hpp"), cpp = read(root / "examples" / "custom_op.cpp"),
                    frz = read(root / "examples" / "freeze_model.cpp");
  int checked = 0;
  for (auto [src, name] : {std::pair{&hpp, "softsign"}, {&hpp, "running_sum"}, {&hpp, "scaled_tanh"}, {&cpp, "eager"},
                           {&cpp, "graph"}, {&cpp, "grad"}, {&cpp, "profile"}, {&frz, "freeze"}}) {
    INFO("snippet [" << name << "]");
    const std::string code = snippet(*src, name);
    CHECK(code.size() > 100);
    CHECK(guide.find("```cpp\n" + code + "```") != std::string::npos);
    ++checked;
  }
  CHECK(checked == 8);
}
