// CPU code generation (backend/cpu/codegen.hpp): fused elementwise programs compiled into
// one loop each by the system compiler. Every generated kernel must give the bits of the
// block interpreter and of eager execution: every arithmetic elementwise op, in f32 and
// f64, with full, row-broadcast and scalar operands, special values (signed zeros,
// infinities, NaN, subnormals) and a tail shorter than a SIMD batch; GEMM epilogues and
// fused reductions; 1 and 2 threads. Programs it does not cover keep the interpreter;
// a failing compiler is a BackendError that shows the command and its messages.
//
// The kernels are cached in <temp>/ms-codegen-tests, so a second run of the suite (and the
// sanitizer build, which generates the same sources) loads them without compiling.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace codegen_test {

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
namespace ops = ms::ops;
namespace graph = ms::graph;
namespace backend = ms::backend;
using Program = std::function<std::vector<AnyTensor>(const std::vector<AnyTensor>&)>;

/// Sets an environment variable for the scope, then restores it.
struct EnvGuard {
  std::string name;
  std::optional<std::string> old;
  EnvGuard(std::string n, const std::string& v) : name(std::move(n)) {
    if (const char* o = std::getenv(name.c_str())) old = o;
    ::setenv(name.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

/// The cache the tests share unless a test needs its own.
EnvGuard shared_cache() {
  return EnvGuard("MS_CODEGEN_CACHE", (std::filesystem::temp_directory_path() / "ms-codegen-tests").string());
}

/// Random values in [-4, 4], one element in six replaced by a special value.
AnyTensor special_values(const Shape& s, DType d, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double special[] = {0.0, -0.0, inf, -inf, nan, -nan, 1e-40, -3e-310, 90.0, -110.0, 1e30, 0.5};
  AnyTensor t = AnyTensor::empty(s, d);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double v = rng() % 6 == 0 ? special[rng() % std::size(special)] : u(rng);
    if (d == DType::f32) static_cast<float*>(t.raw_data())[i] = static_cast<float>(v);
    else static_cast<double*>(t.raw_data())[i] = v;
  }
  return t;
}

/// Bit-identical, except that a NaN may have another sign or payload: when an operation
/// has two NaN operands, which one comes out depends on the operand order the compiler
/// picks for a commutative operation (a + b or b + a), which C++ leaves to it.
bool same_values(const AnyTensor& a, const AnyTensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  const std::size_t n = static_cast<std::size_t>(a.numel());
  auto cmp = [&](auto* p, auto* q) {
    for (std::size_t e = 0; e < n; ++e)
      if (std::memcmp(p + e, q + e, sizeof(*p)) != 0 && !(std::isnan(p[e]) && std::isnan(q[e]))) return false;
    return true;
  };
  if (a.dtype() == DType::f32) return cmp(static_cast<const float*>(a.raw_data()), static_cast<const float*>(b.raw_data()));
  if (a.dtype() == DType::f64) return cmp(static_cast<const double*>(a.raw_data()), static_cast<const double*>(b.raw_data()));
  return ms_test::same_bits(a, b);
}

double value_at(const AnyTensor& t, std::size_t e) {
  return t.dtype() == DType::f32 ? static_cast<double>(static_cast<const float*>(t.raw_data())[e])
                                 : static_cast<const double*>(t.raw_data())[e];
}

graph::Graph trace(const Program& fn, const std::vector<AnyTensor>& in) {
  graph::Capture cap;
  for (const AnyTensor& t : in) cap.input(t);
  for (const AnyTensor& o : fn(in)) cap.output(o);
  return cap.finish();
}

/// Runs fn's graph with generated code, on the interpreter and eagerly on `in2`, at 1 and 2
/// threads; returns the number of outputs that differ anywhere (same_values).
/// Outputs listed in `not_eager` are compared with the interpreter only (see the caller).
int mismatches(const Program& fn, const std::vector<AnyTensor>& in, const std::vector<AnyTensor>& in2,
               int expected_kernels, const std::set<std::size_t>& not_eager = {},
               const std::vector<std::string>& labels = {}) {
  backend::CompileOptions opt;
  opt.codegen = true;
  backend::Executable gen = backend::compile(trace(fn, in), opt);
  CHECK(gen.codegen_kernels() == expected_kernels);
  opt.codegen = false;
  backend::Executable interp = backend::compile(trace(fn, in), opt);
  CHECK(interp.codegen_kernels() == 0);
  const std::vector<AnyTensor> eager = fn(in2);
  int bad = 0;
  ms_test::ThreadGuard guard;
  for (int threads : {1, 2}) {
    ms::set_num_threads(threads);
    const std::vector<AnyTensor> g = gen.run(in2), i = interp.run(in2);
    REQUIRE(g.size() == eager.size());
    for (std::size_t k = 0; k < g.size(); ++k) {
      const bool as_interp = same_values(g[k], i[k]);
      const bool as_eager = not_eager.count(k) || same_values(g[k], eager[k]);
      const bool same = as_interp && as_eager;
      if (!same) {
        const AnyTensor& other = as_interp ? eager[k] : i[k];
        const std::vector<unsigned char> bg = ms_test::bytes_of(g[k]), bo = ms_test::bytes_of(other);
        std::size_t at = 0;
        while (at < bg.size() && at < bo.size() && bg[at] == bo[at]) ++at;
        const std::size_t e = at / ms::dtype_size(g[k].dtype());
        UNSCOPED_INFO("output " << k << (k < labels.size() ? " (" + labels[k] + ")" : std::string()) << " differs from "
                                << (as_interp ? "eager" : "the interpreter") << " at " << threads
                                << " threads, first at element " << e << ": "
                                << fmt::format("{} against {}", value_at(g[k], e), value_at(other, e)));
      }
      bad += same ? 0 : 1;
    }
  }
  return bad;
}

AnyTensor chain(const AnyTensor& x) {
  return ops::sub(ops::mul(ops::tanh(ops::add(ops::mul(x, 0.5), 0.1)), 1.5), ops::div(x, ops::add(1.0, ops::exp(x))));
}

/// Attributes for the elementwise ops that take some (ops without attributes get none).
std::optional<ops::Attrs> attrs_of(const ops::OpDef& op) {
  if (op.attr_names.empty()) return ops::Attrs{};
  if (op.name == "leaky_relu") return ops::Attrs{{"slope", 0.2}};
  if (op.name == "elu") return ops::Attrs{{"alpha", 1.5}};
  if (op.name == "clamp") return ops::Attrs{{"lo", -1.25}, {"hi", std::numeric_limits<double>::infinity()}};
  if (op.name == "pow_scalar") return ops::Attrs{{"exponent", 2.5}};
  return std::nullopt;
}

}  // namespace codegen_test

using namespace codegen_test;

TEST_CASE("cpu codegen: the 8-op chain is one generated loop, bit-identical in f32 and f64", "[backend][codegen]") {
  auto cache = shared_cache();
  const Program fn = [](const std::vector<AnyTensor>& in) { return std::vector<AnyTensor>{chain(in[0]), chain(in[1])}; };
  // 70,003 elements: two threads' shares, and a tail of 3 (f32) or 3 (f64) elements.
  const Shape s{70003};
  const std::vector<AnyTensor> in{special_values(s, DType::f32, 1), special_values(s, DType::f64, 2)};
  const std::vector<AnyTensor> in2{special_values(s, DType::f32, 3), special_values(s, DType::f64, 4)};
  CHECK(mismatches(fn, in, in2, 2) == 0);
  backend::CompileOptions opt;
  opt.codegen = true;
  backend::Executable exe = backend::compile(trace(fn, in), opt);
  CHECK(exe.graph().count("fused") == 2);
  CHECK(exe.num_steps() == 2);
  // Short inputs: fewer elements than one SIMD batch, and exactly one.
  for (std::int64_t n : {1, 5, 8}) {
    const std::vector<AnyTensor> a{special_values({n}, DType::f32, 5), special_values({n}, DType::f64, 6)};
    const std::vector<AnyTensor> b{special_values({n}, DType::f32, 7), special_values({n}, DType::f64, 8)};
    INFO("n = " << n);
    CHECK(mismatches(fn, a, b, 2) == 0);
  }
}

TEST_CASE("cpu codegen: every arithmetic elementwise op, with full, broadcast and scalar operands", "[backend][codegen]") {
  auto cache = shared_cache();
  // One graph holds every case as an output, so that all kernels compile in one unit.
  const Shape full{4, 37}, row{37}, scalar{};
  int expected = 0;
  std::vector<std::string> skipped;
  // pow with a broadcast operand: eager evaluates some of those elements with the scalar
  // pow of the C library, fused programs (interpreted or generated) with the SIMD one; they
  // may differ by a few ulps (graph_test.cpp). Generated code is still held to the
  // interpreter's bits there.
  std::set<std::size_t> not_eager;
  std::vector<std::string> labels;
  const Program fn = [&](const std::vector<AnyTensor>& in) {
    std::vector<AnyTensor> out;
    for (int di = 0; di < 2; ++di) {
      const AnyTensor &a = in[4 * di], &b = in[4 * di + 1], &r = in[4 * di + 2], &z = in[4 * di + 3];
      const DType d = a.dtype();
      for (const ops::OpDef* op : ops::registry().all()) {
        if (op->elementwise.formula.empty() || !op->cpu_dtypes.contains(d)) continue;
        const auto attrs = attrs_of(*op);
        if (!attrs) {
          skipped.push_back(op->name);
          continue;
        }
        const AnyTensor& x = a;
        // Then neg, so that the op is a member of a two-op fused program (exact, and not
        // merged with another output's by common-subexpression elimination).
        auto call = [&](std::vector<AnyTensor> args) {
          std::string shapes;
          for (const AnyTensor& t : args) shapes += " " + ms::shape_str(t.shape());
          labels.push_back(fmt::format("{} {}{}", op->name, d, shapes));
          out.push_back(ops::neg(ops::call1(*op, args, *attrs)));
        };
        if (op->num_inputs == 1) {
          call({x});
        } else {
          call({x, b});  // full
          for (const auto& args : {std::vector<AnyTensor>{x, r},  // row broadcast: gathered into blocks
                                   std::vector<AnyTensor>{x, z},  // broadcast scalar on the right
                                   std::vector<AnyTensor>{z, x}}) {  // and on the left
            if (op->name == "pow") not_eager.insert(out.size());
            call(args);
          }
        }
      }
    }
    return out;
  };
  const std::vector<AnyTensor> in{special_values(full, DType::f32, 11), special_values(full, DType::f32, 12),
                                  special_values(row, DType::f32, 13),  special_values(scalar, DType::f32, 14),
                                  special_values(full, DType::f64, 15), special_values(full, DType::f64, 16),
                                  special_values(row, DType::f64, 17),  special_values(scalar, DType::f64, 18)};
  std::vector<AnyTensor> in2;
  for (std::size_t k = 0; k < in.size(); ++k)
    in2.push_back(special_values(in[k].shape(), in[k].dtype(), 100 + static_cast<std::uint32_t>(k)));
  // The scalar operand is also a plain value on the second run, so that ops like pow see finite exponents.
  static_cast<float*>(in2[3].raw_data())[0] = 1.75f;
  static_cast<double*>(in2[7].raw_data())[0] = -2.5;
  expected = static_cast<int>(fn(in).size());
  skipped.clear();
  labels.resize(static_cast<std::size_t>(expected));
  CHECK(expected >= 2 * (25 + 4 * 7));
  CHECK(mismatches(fn, in, in2, expected, not_eager, labels) == 0);
  CHECK(not_eager.size() == 6);
  CHECK(skipped.empty());
}

TEST_CASE("cpu codegen: GEMM epilogues and fused reductions run generated code", "[backend][codegen]") {
  auto cache = shared_cache();
  const Program fn = [](const std::vector<AnyTensor>& in) {
    const AnyTensor &x = in[0], &w = in[1], &bias = in[2], &y = in[3];
    AnyTensor h = ops::mul(ops::relu(ops::add(ops::matmul(x, w), bias)), 2.0);  // matmul + bias + relu + scale
    AnyTensor s = ops::sum(ops::add(ops::mul(y, y), bias), {-1});               // sum over the last axis
    AnyTensor m = ops::mean(ops::tanh(ops::sub(y, 0.5)), {-1});
    return std::vector<AnyTensor>{h, s, m};
  };
  const std::vector<AnyTensor> in{ms_test::random_floats({33, 20}, 1), ms_test::random_floats({20, 37}, 2),
                                  ms_test::random_floats({37}, 3), ms_test::random_floats({33, 37}, 4)};
  const std::vector<AnyTensor> in2{ms_test::random_floats({33, 20}, 5), ms_test::random_floats({20, 37}, 6),
                                   ms_test::random_floats({37}, 7), ms_test::random_floats({33, 37}, 8)};
  backend::CompileOptions opt;
  opt.codegen = true;
  backend::Executable exe = backend::compile(trace(fn, in), opt);
  std::vector<std::string> labels;
  for (const auto& n : exe.graph().nodes())
    if (!n.dead && n.fused) labels.push_back(graph::node_label(n));
  CHECK(labels == std::vector<std::string>{"fused[matmul+add+relu+mul]", "fused[mul+add+sum]", "fused[sub+tanh+mean]"});
  CHECK(exe.codegen_kernels() == 3);
  // The reductions accumulate in the same order on both paths, so even they agree bit for
  // bit with the interpreter; eager sums in another order, so they are compared to it
  // within a tolerance.
  backend::CompileOptions plain;
  plain.codegen = false;
  backend::Executable interp = backend::compile(trace(fn, in), plain);
  const auto g = exe.run(in2), i = interp.run(in2), e = fn(in2);
  for (std::size_t k = 0; k < 3; ++k) CHECK(ms_test::same_bits(g[k], i[k]));
  CHECK(ms_test::same_bits(g[0], e[0]));
  for (std::size_t k = 1; k < 3; ++k) {
    auto a = ms_test::values(ms::Tensor<float>(g[k])), b = ms_test::values(ms::Tensor<float>(e[k]));
    REQUIRE(a.size() == 33);
    for (std::size_t j = 0; j < a.size(); ++j) CHECK(std::abs(a[j] - b[j]) <= 1e-5 * (1 + std::abs(b[j])));
  }
}

TEST_CASE("cpu codegen: programs it does not cover keep the block interpreter", "[backend][codegen]") {
  auto cache = shared_cache();
  // Comparisons and where (a bool intermediate), integer arithmetic.
  const Program fn = [](const std::vector<AnyTensor>& in) {
    AnyTensor sel = ops::where(ops::gt(in[0], 0.0), ops::exp(in[0]), ops::neg(in[0]));
    AnyTensor ints = ops::mul(ops::add(in[1], in[1]), in[1]);
    return std::vector<AnyTensor>{sel, ints};
  };
  AnyTensor n = AnyTensor::empty({50}, DType::i32);
  for (int k = 0; k < 50; ++k) static_cast<std::int32_t*>(n.raw_data())[k] = k - 25;
  const std::vector<AnyTensor> in{ms_test::random_floats({50}, 9), n};
  CHECK(mismatches(fn, in, in, 0) == 0);
}

TEST_CASE("cpu codegen: kernels are cached by content, and a failing compiler is a BackendError with its messages",
          "[backend][codegen]") {
  ms_test::TempDir dir;
  EnvGuard cache("MS_CODEGEN_CACHE", (dir / "kernels").string());
  // A slope no other test uses gives a source of its own, compiled here for the first time.
  const Program fn = [](const std::vector<AnyTensor>& in) {
    return std::vector<AnyTensor>{ops::leaky_relu(ops::sub(in[0], 0.25), 0.3171)};
  };
  const std::vector<AnyTensor> in{ms_test::random_floats({100}, 10)};
  backend::CompileOptions opt;
  opt.codegen = true;
  const backend::CodegenStats before = backend::codegen_stats();
  backend::Executable a = backend::compile(trace(fn, in), opt);
  CHECK(backend::codegen_stats().compiles == before.compiles + 1);
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(dir / "kernels")) files.push_back(f.path().extension().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{".cpp", ".so"});  // no temporary or log left behind
  // The same program again: the loaded object is reused, nothing is compiled.
  backend::Executable b = backend::compile(trace(fn, in), opt);
  CHECK(backend::codegen_stats().compiles == before.compiles + 1);
  CHECK(ms_test::same_bits(a.run(in)[0], b.run(in)[0]));
  CHECK(ms_test::same_bits(a.run(in)[0], fn(in)[0]));

  // A compiler that fails: the error names the command, the exit status and the output.
  {
    EnvGuard cxx("MS_CODEGEN_CXX", "sh -c 'echo no compiler here >&2; exit 3' sh");
    try {
      (void)backend::compile(trace(fn, in), opt);
      FAIL("no BackendError");
    } catch (const ms::BackendError& e) {
      const std::string m = e.what();
      CHECK(m.find("compiling the fused kernels failed (exit status 3)") != std::string::npos);
      CHECK(m.find("no compiler here") != std::string::npos);
      CHECK(m.find("MS_CPU_CODEGEN=0") != std::string::npos);
    }
  }
  // A flag the compiler rejects: its own message comes through.
  {
    EnvGuard flags("MS_CODEGEN_FLAGS", "-fno-such-option-anywhere");
    try {
      (void)backend::compile(trace(fn, in), opt);
      FAIL("no BackendError");
    } catch (const ms::BackendError& e) {
      CHECK(std::string(e.what()).find("-fno-such-option-anywhere") != std::string::npos);
    }
  }
  // Headers that are not where MS_CODEGEN_INCLUDE says: an IOError that names the variable.
  {
    EnvGuard inc("MS_CODEGEN_INCLUDE", (dir / "nowhere").string());
    try {
      (void)backend::compile(trace(fn, in), opt);
      FAIL("no IOError");
    } catch (const ms::IOError& e) {
      CHECK(std::string(e.what()).find("set MS_CODEGEN_INCLUDE") != std::string::npos);
    }
  }
  // Without code generation nothing is compiled at all.
  const int compiles = backend::codegen_stats().compiles;
  backend::CompileOptions off;
  off.codegen = false;
  backend::Executable c = backend::compile(trace(fn, in), off);
  CHECK(c.codegen_kernels() == 0);
  CHECK(backend::codegen_stats().compiles == compiles);
}
