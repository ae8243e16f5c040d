// A user's program of two units (main.cpp, second.cpp), each including <ms/ms.hpp>, built
// the way the README shows: target_link_libraries(app PRIVATE ms::ms), no -march. The
// kernels come compiled once from ms::ms's kernel library (run.cmake counts its objects),
// and at run time the elementwise ops run at the best x86-64 level this CPU has.
#include <cstdio>

#include <ms/ms.hpp>

float second_unit_sum();  // second.cpp

int main() {
  auto a = ms::ones<float>({2, 3});
  auto b = a + a;
  const std::string s = fmt::format("{}", b);
  const ms::cpu::Isa best = ms::cpu::best_compiled_isa(ms::cpu::requested_isa());
  std::printf("ms_consumer: CPU kernels %s\n", ms::cpu::isa_summary().c_str());
  const bool ok = b.sum().item() == 12.0f && s.find("shape=(2, 3)") != std::string::npos &&
                  second_unit_sum() == 4.0f && ms::cpu::isa() == best &&
#if defined(__x86_64__)
                  ms::cpu::compiled_isas().size() == 4;
#else
                  true;
#endif
  return ok ? 0 : 1;
}
