#pragma once
// Helpers shared by the test files: value comparison against references, and the
// op-coverage list that the registry-walking test checks (every registered op must
// be named by some test file through MS_TEST_COVERS).

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <ms/ms.hpp>

namespace ms_test {

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

}  // namespace ms_test

#define MS_TEST_CONCAT2(a, b) a##b
#define MS_TEST_CONCAT(a, b) MS_TEST_CONCAT2(a, b)
/// Declares that this test file checks the named ops against reference values.
#define MS_TEST_COVERS(...) \
  static const bool MS_TEST_CONCAT(ms_test_covers_, __COUNTER__) = ::ms_test::cover({__VA_ARGS__})
