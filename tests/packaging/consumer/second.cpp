// The second unit of the consumer: it uses ops too, and compiles none of their kernels.
#include <ms/ms.hpp>

float second_unit_sum() {
  auto x = ms::full<float>({4}, 0.5f);
  return ms::relu(x * 2.0f).sum().item();
}
