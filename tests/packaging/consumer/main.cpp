// A user's program. It includes a few headers rather than the umbrella <ms/ms.hpp>,
// which compiles every kernel (minutes at -O0); run.cmake checks that every header is
// installed. Uses fmt (printing), Eigen (reductions) and OpenMP through ms::ms.
#include <ms/core/format.hpp>
#include <ms/ops/factory.hpp>
#include <ms/ops/binary.hpp>
#include <ms/ops/reduce.hpp>
#include <ms/ops/methods.hpp>

int main() {
  auto a = ms::ones<float>({2, 3});
  auto b = a + a;
  const std::string s = fmt::format("{}", b);
  return b.sum().item() == 12.0f && s.find("shape=(2, 3)") != std::string::npos ? 0 : 1;
}
