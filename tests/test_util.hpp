#pragma once
// Helpers shared by the test files: value comparison against references, the
// op-coverage list that the registry-walking test checks (every registered op must
// be named by some test file through MS_TEST_COVERS), and the small tensor, thread
// and file helpers that several files need.
//
// The test files are compiled together in a few units (see CMakeLists.txt), so a
// helper that more than one file needs lives here, once; a file's own helpers must
// not take a name that another test file uses at namespace scope.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <ms/ms.hpp>

namespace ms_test {

/// True in a build under AddressSanitizer (the sanitizer run of scripts/test.sh): tests whose
/// point is their size (several parallel chunks, every op and dtype) take smaller sizes that
/// still split across threads, since there the reference loops run unoptimized and
/// instrumented; the normal run keeps the full sizes.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// Ops that have a reference-value test (filled at static-initialization time).
inline std::set<std::string>& covered_ops() {
  static std::set<std::string> s;
  return s;
}
inline bool cover(std::initializer_list<const char*> names) {
  for (auto n : names) covered_ops().insert(n);
  return true;
}

/// Checks every element of `t` against `expected` (row-major) within atol + rtol * |expected|;
/// NaN must match NaN and infinities must match exactly.
template <class T>
void require_values(const ms::Tensor<T>& t, const std::vector<double>& expected, double rtol = 1e-6,
                    double atol = 1e-6) {
  auto got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]), e = expected[i];
    INFO("element " << i << ": got " << g << ", expected " << e);
    if (std::isnan(e)) {
      CHECK(std::isnan(g));
    } else if (std::isinf(e)) {
      CHECK(g == e);
    } else {
      CHECK(std::abs(g - e) <= atol + rtol * std::abs(e));
    }
  }
}

/// Checks the shape of a tensor.
inline void require_shape(const ms::AnyTensor& t, std::initializer_list<std::int64_t> shape) {
  REQUIRE(t.shape() == ms::Shape(shape));
}

/// Expects `expr` to throw exception type E whose what() equals `message` exactly.
#define MS_REQUIRE_THROWS_MSG(expr, E, message) REQUIRE_THROWS_MATCHES(expr, E, Catch::Matchers::Message(message))

/// One row of an error-message table: what is called, and the check that it throws the
/// exact message (MS_ERROR_ROW(description, expression, ErrorType, "message")).
struct ErrorRow {
  const char* what;
  std::function<void()> check;
};
#define MS_ERROR_ROW(desc, expr, E, msg) \
  ::ms_test::ErrorRow { desc, [] { MS_REQUIRE_THROWS_MSG(expr, E, msg); } }

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- tensors ------------------------------------------------------------------------------------

/// start, start + 1, start + 2, ... laid out in `shape` (built without factory ops).
template <class T>
ms::Tensor<T> iota(const ms::Shape& shape, double start = 0) {
  ms::Tensor<T> t = ms::AnyTensor::empty(shape, ms::dtype_v<T>);
  T* p = static_cast<T*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(start + static_cast<double>(i));
  return t;
}

/// A tensor of `shape` with pseudo-random values from `seed`: uniform in [lo, hi) for
/// floating dtypes, small integers in [-4, 4] for integer dtypes (exact in every dtype and
/// every product the tests form).
template <class T = double>
ms::Tensor<T> random(const ms::Shape& shape, unsigned seed, double lo = -1, double hi = 1) {
  ms::Tensor<T> t = ms::AnyTensor::empty(shape, ms::dtype_v<T>);
  T* p = static_cast<T*>(t.raw_data());
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::uniform_int_distribution<int> di(-4, 4);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = std::is_floating_point_v<T> ? static_cast<T>(d(g)) : static_cast<T>(di(g));
  return t;
}

/// Restores the CPU GEMM and convolution paths, the GEMM precision and the thread count that
/// a test changes (also when a REQUIRE throws).
struct CpuPathGuard {
  ms::CpuGemm gemm = ms::cpu_gemm();
  ms::CpuConv conv = ms::cpu_conv();
  ms::GemmPrecision precision = ms::cpu_gemm_precision();
  int threads = ms::get_num_threads();
  ~CpuPathGuard() {
    ms::set_cpu_gemm(gemm);
    ms::set_cpu_conv(conv);
    ms::set_cpu_gemm_precision(precision);
    ms::set_num_threads(threads);
  }
};

/// A float32 tensor of `shape`, uniform in [lo, hi) drawn in float from `seed`.
inline ms::Tensor<float> random_floats(const ms::Shape& s, std::uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  ms::Tensor<float> t = ms::AnyTensor::empty(s, ms::DType::f32);
  auto* p = static_cast<float*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

/// The elements of t as doubles, row-major (16-bit floats go through float).
template <class T>
std::vector<double> values(const ms::Tensor<T>& t) {
  std::vector<double> out;
  for (T v : t.to_vector()) {
    if constexpr (std::is_same_v<T, ms::half> || std::is_same_v<T, ms::bfloat16>)
      out.push_back(static_cast<double>(static_cast<float>(v)));
    else
      out.push_back(static_cast<double>(v));
  }
  return out;
}

/// The elements' bytes in row-major order (any layout).
inline std::vector<unsigned char> bytes_of(const ms::AnyTensor& t) {
  ms::AnyTensor c = ms::ops::detail::contiguous_raw(t);
  auto p = static_cast<const unsigned char*>(c.raw_data());
  return {p, p + c.nbytes()};
}

/// Same dtype, shape and bits (any layout; NaN payloads included).
inline bool same_bits(const ms::AnyTensor& a, const ms::AnyTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && bytes_of(a) == bytes_of(b);
}

// ---- process state ------------------------------------------------------------------------------

/// Restores the thread count at scope exit.
struct ThreadGuard {
  int saved = ms::get_num_threads();
  ~ThreadGuard() { ms::set_num_threads(saved); }
};

/// Counts the ops recorded while installed, to check that kernels never dispatch other ops.
struct CountingTracer : ms::ops::Tracer {
  std::vector<std::string> names;
  ms::ops::Tracer* prev;
  CountingTracer() : prev(ms::ops::detail::tracer) { ms::ops::detail::tracer = this; }
  ~CountingTracer() override { ms::ops::detail::tracer = prev; }
  void record(const ms::ops::OpDef& op, std::span<const ms::AnyTensor>, const ms::ops::Attrs&,
              std::span<const ms::AnyTensor>) override {
    names.push_back(op.name);
  }
};

// ---- files --------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed with its contents at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() / fmt::format("ms_test_{}_{}", ::getpid(), counter++);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

/// tests/fixtures/<sub>: from $MS_TEST_DATA_DIR (set by ctest), else next to this header.
inline std::filesystem::path data_dir(const std::string& sub) {
  if (const char* d = std::getenv("MS_TEST_DATA_DIR")) return std::filesystem::path(d) / sub;
  return std::filesystem::path(__FILE__).parent_path() / "fixtures" / sub;
}

/// The whole file as bytes.
inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
/// Writes `bytes` as the whole file.
inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The what() of the IOError that f throws ("(no IOError)" when it throws none).
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const ms::IOError& e) {
    return e.what();
  }
  return "(no IOError)";
}

/// How check_gradients compares: central differences with step `eps`; an element fails when
/// |analytic - numeric| > atol + rtol * |numeric|. The loss is sum(fn(inputs) * R) with R
/// uniform in [lo, hi) drawn from `seed` (ms_test::random), so every output element counts.
struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-8;
  unsigned seed = 12345;
  double lo = 0.5, hi = 1.5;
};

using GradFnOfInputs = std::function<ms::AnyTensor(const std::vector<ms::AnyTensor>&)>;

/// Compares the gradient of sum(fn(inputs) * R) w.r.t. every float64 input not listed in
/// `constant` with central differences (see GradCheckOptions). Inputs must be contiguous;
/// they are perturbed in place and restored. Returns the number of failing elements and
/// describes the first few in `report`.
inline int grad_mismatches(const GradFnOfInputs& fn, std::vector<ms::AnyTensor> inputs,
                           const std::vector<int>& constant, std::string& report, const GradCheckOptions& o = {}) {
  std::vector<ms::AnyTensor> wrt;
  std::vector<std::size_t> wrt_pos;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != ms::DType::f64) continue;
    if (std::find(constant.begin(), constant.end(), static_cast<int>(i)) != constant.end()) continue;
    REQUIRE(inputs[i].is_contiguous());
    inputs[i].set_requires_grad(true);
    wrt.push_back(inputs[i]);
    wrt_pos.push_back(i);
  }
  REQUIRE_FALSE(wrt.empty());
  const ms::AnyTensor y = fn(inputs);
  const ms::AnyTensor r = random(y.shape(), o.seed, o.lo, o.hi);
  const std::vector<ms::AnyTensor> grads = ms::autograd::grad(ms::ops::sum(ms::ops::mul(y, r)), wrt);
  auto loss = [&] {
    ms::NoGradGuard ng;
    return ms::Tensor<double>(ms::ops::sum(ms::ops::mul(fn(inputs), r))).item();
  };
  int bad = 0;
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    REQUIRE(grads[k].shape() == wrt[k].shape());
    const std::vector<double> ana = ms::Tensor<double>(grads[k]).to_vector();
    double* p = static_cast<double*>(wrt[k].raw_data());
    for (std::int64_t j = 0; j < wrt[k].numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + o.eps;
      const double lp = loss();
      p[j] = saved - o.eps;
      const double lm = loss();
      p[j] = saved;
      const double num = (lp - lm) / (2 * o.eps), a = ana[static_cast<std::size_t>(j)];
      if (!(std::abs(a - num) <= o.atol + o.rtol * std::abs(num))) {
        if (++bad <= 5)
          report += fmt::format("input {} {} element {}: analytic {}, numeric {}\n", wrt_pos[k],
                                ms::shape_str(wrt[k].shape()), j, a, num);
      }
    }
  }
  return bad;
}

/// Requires the gradients of fn to match finite differences (see grad_mismatches).
inline void check_gradients(const GradFnOfInputs& fn, std::vector<ms::AnyTensor> inputs,
                            const GradCheckOptions& o = {}, const std::vector<int>& constant = {}) {
  std::string report;
  const int bad = grad_mismatches(fn, std::move(inputs), constant, report, o);
  INFO(report);
  CHECK(bad == 0);
}

/// The same for a function of one input.
inline void check_gradients(const std::function<ms::AnyTensor(const ms::AnyTensor&)>& fn, const ms::AnyTensor& x,
                            const GradCheckOptions& o = {}) {
  check_gradients([&](const std::vector<ms::AnyTensor>& in) { return fn(in[0]); }, {x}, o);
}

}  // namespace ms_test

#define MS_TEST_CONCAT2(a, b) a##b
#define MS_TEST_CONCAT(a, b) MS_TEST_CONCAT2(a, b)
/// Declares that this test file checks the named ops against reference values.
#define MS_TEST_COVERS(...) \
  static const bool MS_TEST_CONCAT(ms_test_covers_, __COUNTER__) = ::ms_test::cover({__VA_ARGS__})
