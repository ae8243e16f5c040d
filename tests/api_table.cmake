# Generates the test program of docs/api.md: one block per table row, running the row's
# ms cell (the last `code` cell) with the variables the page declares. Called at configure
# time by tests/CMakeLists.txt; editing docs/api.md reconfigures and regenerates.
function(ms_generate_api_table_test md out)
  # Split into lines by hand: a CMake list would also split at the ';' of the code cells
  # (and treat brackets specially), so those travel as placeholders until a line is taken.
  file(READ ${md} text)
  string(REPLACE ";" "@SEMI@" text "${text}")
  string(REPLACE "[" "@LB@" text "${text}")
  string(REPLACE "]" "@RB@" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(body "")
  set(n 0)
  foreach(line IN LISTS lines)
    # a table row whose last cell is code: | torch ... | `ms code` |
    if(NOT line MATCHES "^\\| (.*) \\| `([^`]*)` \\|$")
      continue()
    endif()
    set(torch "${CMAKE_MATCH_1}")
    set(code "${CMAKE_MATCH_2}")
    foreach(var torch code)
      string(REPLACE "@SEMI@" ";" ${var} "${${var}}")
      string(REPLACE "@LB@" "[" ${var} "${${var}}")
      string(REPLACE "@RB@" "]" ${var} "${${var}}")
    endforeach()
    math(EXPR n "${n} + 1")
    string(REPLACE "\\" "\\\\" torch "${torch}")
    string(REPLACE "\"" "\\\"" torch "${torch}")
    string(APPEND body "  {\n    INFO(\"docs/api.md row ${n}: ${torch}\");\n    ApiTableVars vars;\n"
                       "    MS_API_TABLE_BIND(vars)\n    ${code};\n  }\n")
  endforeach()
  if(n LESS 100)
    message(FATAL_ERROR "docs/api.md: expected at least 100 table rows with an ms cell, found ${n}")
  endif()
  file(CONFIGURE OUTPUT ${out} CONTENT [=[
// Generated from docs/api.md by tests/api_table.cmake: do not edit; edit the page.
#include "test_util.hpp"

namespace api_table_test {
using ms::AnyTensor;
using ms::DType;
using ms::Tensor;
namespace nn = ms::nn;
namespace optim = ms::optim;
// The variables that docs/api.md declares for its rows.
struct ApiTableVars {
  Tensor<float> x = ms::randn<float>({2, 3}), y = ms::randn<float>({2, 3});
  Tensor<float> m = ms::randn<float>({3, 4}), v = ms::randn<float>({3});
  Tensor<float> img = ms::randn<float>({1, 3, 8, 8});
  Tensor<std::int64_t> idx = ms::from_vector<std::int64_t>({0, 2}), labels = ms::from_vector<std::int64_t>({0, 2});
  Tensor<float> w = ms::randn<float>({3}).requires_grad_();
  AnyTensor a = x;
  std::shared_ptr<nn::Linear> net = nn::make<nn::Linear>(3, 3);
  ms_test::TempDir tmp;
  std::filesystem::path dir = tmp.path;
};
#define MS_API_TABLE_BIND(vars)                                                                  \
  [[maybe_unused]] auto& x = vars.x; [[maybe_unused]] auto& y = vars.y;                          \
  [[maybe_unused]] auto& m = vars.m; [[maybe_unused]] auto& v = vars.v;                          \
  [[maybe_unused]] auto& img = vars.img; [[maybe_unused]] auto& idx = vars.idx;                  \
  [[maybe_unused]] auto& labels = vars.labels; [[maybe_unused]] auto& w = vars.w;                \
  [[maybe_unused]] auto& a = vars.a; [[maybe_unused]] auto& net = vars.net;                      \
  [[maybe_unused]] auto& dir = vars.dir;
}  // namespace api_table_test

TEST_CASE("api_table: every row of docs/api.md compiles and runs", "[api][docs]") {
  using namespace api_table_test;
  ms::manual_seed(1);
@body@}
#undef MS_API_TABLE_BIND
]=] @ONLY)
endfunction()
