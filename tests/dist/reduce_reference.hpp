#pragma once
// The expected result of a reduction across the ranks of a collective test: element i of
// `op` over value(r, i) for every rank r of a world of `world` ranks.

#include <algorithm>
#include <cstdint>

#include <ms/dist/comm.hpp>

namespace ms_dist_test {

template <class ValueFn>
double reduce_reference(ms::dist::ReduceOp op, int world, std::int64_t i, ValueFn value) {
  using ms::dist::ReduceOp;
  double acc = value(0, i);
  for (int r = 1; r < world; ++r) {
    const double v = value(r, i);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::mean: acc += v; break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::prod: acc *= v; break;
    }
  }
  return op == ReduceOp::mean ? acc / world : acc;
}

}  // namespace ms_dist_test
