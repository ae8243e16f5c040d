#pragma once
// A self-test of the Ascend adapter on whatever device AscendCL drives: every op of the
// aclnn and AI CPU mappings runs once eagerly on the device, and its result is compared
// with the CPU backend's. For the first run on a real NPU (`ms-run --backend ascend
// --selftest` prints the table), and for the tests against the emulator.
// Must not change the backend's settings; it only launches ops.

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "../../ops/factory.hpp"
#include "../../ops/registry.hpp"
#include "ascend_backend.hpp"

namespace ms::backend::ascend {

/// One row of the self-test.
struct SelftestRow {
  std::string op;       ///< ms op name
  std::string inputs;   ///< "(3, 5) f32, (5,) f32"
  std::string engine;   ///< ai_core, ai_cpu or host (no mapping for these dtypes on this SoC)
  std::string kernels;  ///< aclnn kernels or the AI CPU op type
  std::string status;   ///< "ok", "mismatch" or the error message
  double max_err = 0;   ///< max |device - cpu| / (1 + |cpu|)
  double ms = 0;        ///< wall time of the device call (copies included)
};

namespace detail {

inline AnyTensor selftest_rand(const Shape& s, double lo, double hi) {
  return AnyTensor(ms::rand<float>(s) * static_cast<float>(hi - lo) + static_cast<float>(lo));
}

struct SelftestCase {
  const ops::OpDef* op;
  std::vector<AnyTensor> in;
  ops::Attrs attrs;
};

inline std::vector<SelftestCase> selftest_cases() {
  using A = ops::Attrs;
  const Shape s{3, 5};
  auto r = [](const Shape& sh, double lo = -2, double hi = 2) { return selftest_rand(sh, lo, hi); };
  Tensor<std::int64_t> target{3, 0, 4, 1};
  const A ce{{"reduction", std::string("mean")}, {"label_smoothing", 0.0}, {"ignore_index", std::int64_t{-100}}};
  const A sum_axes{{"axes", ops::IntList{1}}, {"keepdim", false}};
  std::vector<SelftestCase> c = {
      {&ops::add_op, {r(s), r(Shape{5})}, {}},
      {&ops::sub_op, {r(s), r(s)}, {}},
      {&ops::mul_op, {r(s), r(Shape{3, 1})}, {}},
      {&ops::div_op, {r(s), r(s, 0.5, 2)}, {}},
      {&ops::pow_op, {r(s, 0.1, 3), r(s)}, {}},
      {&ops::gt_op, {r(s), r(s)}, {}},
      {&ops::neg_op, {r(s)}, {}},
      {&ops::exp_op, {r(s)}, {}},
      {&ops::log_op, {r(s, 0.1, 4)}, {}},
      {&ops::sqrt_op, {r(s, 0, 4)}, {}},
      {&ops::relu_op, {r(s)}, {}},
      {&ops::sigmoid_op, {r(s)}, {}},
      {&ops::tanh_op, {r(s)}, {}},
      {&ops::gelu_op, {r(s)}, {}},
      {&ops::matmul_op, {r(Shape{4, 6}), r(Shape{6, 3})}, {}},
      {&ops::matmul_op, {r(Shape{2, 4, 6}), r(Shape{2, 6, 3})}, {}},
      {&ops::linear_op, {r(Shape{4, 6}), r(Shape{3, 6}), r(Shape{3})}, {}},
      {&ops::softmax_op, {r(s)}, A{{"axis", std::int64_t{1}}}},
      {&ops::sum_op, {r(s)}, sum_axes},
      {&ops::mean_op, {r(s)}, sum_axes},
      {&ops::cast_op, {r(s)}, A{{"dtype", DType::i32}}},
      {&ops::cross_entropy_op, {r(Shape{4, 5}), AnyTensor(target)}, ce},
      {&ops::cross_entropy_grad_op, {r(Shape{4, 5}), AnyTensor(target), AnyTensor(ms::full<float>({}, 0.5f))}, ce},
      {&ops::erf_op, {r(s)}, {}},
      {&ops::leaky_relu_op, {r(s)}, A{{"slope", 0.1}}},
      {&ops::argmax_op, {r(s)}, A{{"axis", std::int64_t{1}}, {"keepdim", false}}},
      {&ops::argmin_op, {r(s)}, A{{"axis", std::int64_t{1}}, {"keepdim", false}}},
      {&ops::prod_op, {r(s, 0.5, 1.5)}, A{{"axes", ops::IntList{1}}, {"keepdim", false}}},
  };
  AnyTensor cond = ops::call1(ops::gt_op, {r(s), r(s)});
  c.push_back({&ops::where_op, {cond, r(s), r(s)}, {}});
  return c;
}

inline double selftest_err(const AnyTensor& got, const AnyTensor& want) {
  const ops::OpDef& cast = ops::cast_op;
  auto g = ops::call1(cast, {got}, ops::Attrs{{"dtype", DType::f64}}).as<double>().to_vector();
  auto w = ops::call1(cast, {want}, ops::Attrs{{"dtype", DType::f64}}).as<double>().to_vector();
  double e = 0;
  for (std::size_t i = 0; i < g.size() && i < w.size(); ++i) e = std::max(e, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
  return g.size() == w.size() ? e : INFINITY;
}

}  // namespace detail

/// Runs every mapped op once on `be`'s device (eager dispatch on ascend:index) and compares
/// with the CPU. Errors are caught into the row's status.
inline std::vector<SelftestRow> selftest(AscendBackend& be, double tol = 1e-3) {
  std::vector<SelftestRow> rows;
  for (detail::SelftestCase& c : detail::selftest_cases()) {
    const ops::OpDef& op = *c.op;
    SelftestRow row;
    row.op = op.name;
    SmallVec<ops::TensorMeta, 4> metas = ops::input_metas(c.in);
    const std::span<const ops::TensorMeta> m(metas.data(), metas.size());
    row.inputs = ops::metas_str(m);
    const std::optional<Engine> e = be.engine_for(op, m, c.attrs);
    row.engine = e ? std::string(engine_name(*e)) : std::string("host");
    row.kernels = e == Engine::ai_cpu ? std::string(be.aicpu_op_type(op)) : e ? std::string(be.kernels(op)) : "";
    try {
      AnyTensor want = ops::call1(op, std::span<const AnyTensor>(c.in), c.attrs);
      std::vector<AnyTensor> din;
      for (auto& t : c.in) din.push_back(to(t, be.device()));
      const auto t0 = std::chrono::steady_clock::now();
      AnyTensor got = to(ops::call1(op, std::span<const AnyTensor>(din), c.attrs), Device::cpu());
      row.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      row.max_err = detail::selftest_err(got, want);
      row.status = row.max_err <= tol ? "ok" : "mismatch";
    } catch (const Error& err) {
      row.status = err.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

/// The rows as an aligned text table, headed by the device and its SoC.
inline std::string selftest_table(const AscendBackend& be, const std::vector<SelftestRow>& rows) {
  std::string out = MS_FORMAT("{} ({}, libraries {})\n", be.device(), be.soc().name.empty() ? "unknown SoC" : be.soc().name,
                                be.api().libraries);
  out += MS_FORMAT("{:<20} {:<30} {:<8} {:<50} {:>9} {:>8}  {}\n", "op", "inputs", "engine", "kernels", "max err", "ms",
                     "status");
  for (const auto& r : rows)
    out += MS_FORMAT("{:<20} {:<30} {:<8} {:<50} {:>9.2e} {:>8.3f}  {}\n", r.op, r.inputs, r.engine, r.kernels,
                       r.max_err, r.ms, r.status);
  return out;
}

}  // namespace ms::backend::ascend
