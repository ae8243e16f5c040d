#include <ms/ms.hpp>

int main() {
  auto a = ms::ones<float>({2, 3});
  auto b = a + a;
  return b.sum().item() == 12.0f ? 0 : 1;
}
