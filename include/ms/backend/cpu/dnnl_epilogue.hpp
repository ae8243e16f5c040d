#pragma once
// GEMM epilogues as oneDNN post-ops: a fused node whose producer is a matmul or linear
// (graph/fusion.hpp, fuse_epilogues) and whose program is a straight chain, each step
// taking the running value and at most one other operand (relu(linear(x, w, b)) * s,
// gelu(a @ b) * 0.5 + row, tanh(linear(x, w, b)) + residual), runs as one oneDNN matmul
// primitive: linear's bias as the matmul's bias, unary steps as eltwise post-ops, scalar
// constants as eltwise linear (alpha * v + beta), tensor operands (full, per row, per
// column or one element) as binary post-ops. The result is written once, already
// activated, instead of the GEMM writing it and the program reading and writing it again.
//
// plan_dnnl_epilogues (at compile time) translates each such program into
// FusedProgram::post_ops; run_dnnl_epilogue (every replay) builds the primitive once per
// shape and layout (the oneDNN primitive cache, key with the whole chain; the executable's
// first replay takes ownership of it) and executes it. Anything else, or anything that is
// not float32 on the dnnl GEMM path at float32 precision, returns false and the node runs
// as before (producer kernel, then the program in place). MS_DNNL_POSTOPS=0 (or
// ms::set_dnnl_postops(false)) turns the post-op path off.

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "../../graph/fused_program.hpp"
#include "../../graph/graph.hpp"
#include "../../ops/binary.hpp"
#include "../../ops/dnnl.hpp"
#include "../../ops/linalg.hpp"
#include "../../ops/unary.hpp"

namespace ms {

namespace backend::cpu::detail {
inline std::atomic<bool>& dnnl_postops_setting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("MS_DNNL_POSTOPS");
    if (!e || !*e) return true;
    const std::string_view v = e;
    MS_CHECK(v == "0" || v == "1", ValueError, "MS_DNNL_POSTOPS: expected 0 or 1, got '{}'", v);
    return v == "1";
  }()};
  return on;
}
inline std::atomic<std::uint64_t>& dnnl_postop_run_count() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}
}  // namespace backend::cpu::detail

/// Whether captured GEMM epilogues run as oneDNN post-ops (MS_DNNL_POSTOPS=0|1, default 1).
inline bool dnnl_postops() { return backend::cpu::detail::dnnl_postops_setting().load(std::memory_order_relaxed); }
/// Turns the post-op path on or off for the whole process; returns the previous setting.
inline bool set_dnnl_postops(bool on) {
  return backend::cpu::detail::dnnl_postops_setting().exchange(on, std::memory_order_relaxed);
}
/// How many fused GEMM nodes ran as one oneDNN primitive with post-ops (since start).
inline std::uint64_t dnnl_postop_runs() {
  return backend::cpu::detail::dnnl_postop_run_count().load(std::memory_order_relaxed);
}

}  // namespace ms

#if MS_KERNEL_BODIES  // the epilogues run in the kernels' unit: core/linkage.hpp
namespace ms::backend::cpu {

#if defined(MS_HAVE_DNNL)
namespace detail {
using graph::EpiloguePostOp;

/// The eltwise post-op of a unary float op with its parameters, or false.
inline bool unary_post_op(const ops::OpDef* op, const double* params, EpiloguePostOp& po) {
  struct Map {
    const ops::OpDef* op;
    dnnl_alg_kind_t alg;
  };
  static const Map table[] = {
      {&ops::relu_op, dnnl_eltwise_relu},       {&ops::gelu_op, dnnl_eltwise_gelu_erf},
      {&ops::gelu_tanh_op, dnnl_eltwise_gelu_tanh}, {&ops::tanh_op, dnnl_eltwise_tanh},
      {&ops::sigmoid_op, dnnl_eltwise_logistic}, {&ops::exp_op, dnnl_eltwise_exp},
      {&ops::log_op, dnnl_eltwise_log},         {&ops::abs_op, dnnl_eltwise_abs},
      {&ops::sqrt_op, dnnl_eltwise_sqrt},       {&ops::square_op, dnnl_eltwise_square},
      {&ops::silu_op, dnnl_eltwise_swish},      {&ops::elu_op, dnnl_eltwise_elu},
      {&ops::leaky_relu_op, dnnl_eltwise_relu}, {&ops::clamp_op, dnnl_eltwise_clip_v2},
      {&ops::neg_op, dnnl_eltwise_linear},
  };
  for (const Map& m : table) {
    if (m.op != op) continue;
    po = {EpiloguePostOp::Kind::eltwise, static_cast<int>(m.alg), 0.0f, 0.0f, -1};
    if (op == &ops::silu_op) po.alpha = 1.0f;  // swish: x * sigmoid(alpha * x)
    else if (op == &ops::elu_op || op == &ops::leaky_relu_op) po.alpha = static_cast<float>(params[0]);
    else if (op == &ops::clamp_op) po.alpha = static_cast<float>(params[0]), po.beta = static_cast<float>(params[1]);
    else if (op == &ops::neg_op) po.alpha = -1.0f;
    return true;
  }
  return false;
}

/// The post-ops of binary op `op` combining the running value v with operand t (node
/// input `input`; `t_first`: t op v). A one-element float32 constant t becomes
/// eltwise linear; a tensor, a binary post-op. Appends to `out`; false if not expressible.
inline bool binary_post_ops(const ops::OpDef* op, bool t_first, const graph::Value& t, int input,
                            std::vector<EpiloguePostOp>& out) {
  using K = EpiloguePostOp::Kind;
  const bool add = op == &ops::add_op, sub = op == &ops::sub_op, mul = op == &ops::mul_op, div = op == &ops::div_op;
  const bool mx = op == &ops::maximum_op, mn = op == &ops::minimum_op;
  if (!(add || sub || mul || div || mx || mn) || (div && t_first)) return false;
  const bool scalar_const = t.kind == graph::ValueKind::constant && t.data.defined() && numel(t.meta.shape) == 1;
  if (scalar_const && !mx && !mn) {
    const float c = *static_cast<const float*>(t.data.raw_data());
    const int lin = static_cast<int>(dnnl_eltwise_linear);
    if (add) out.push_back({K::eltwise, lin, 1.0f, c, -1});
    else if (sub) out.push_back({K::eltwise, lin, t_first ? -1.0f : 1.0f, t_first ? c : -c, -1});
    else if (mul) out.push_back({K::eltwise, lin, c, 0.0f, -1});
    else out.push_back({K::eltwise, lin, 1.0f / c, 0.0f, -1});
    return true;
  }
  if (sub && t_first) {  // t - v = (-v) + t
    out.push_back({K::eltwise, static_cast<int>(dnnl_eltwise_linear), -1.0f, 0.0f, -1});
    out.push_back({K::binary, static_cast<int>(dnnl_binary_add), 0.0f, 0.0f, input});
    return true;
  }
  const dnnl_alg_kind_t alg = add ? dnnl_binary_add
                              : sub ? dnnl_binary_sub
                              : mul ? dnnl_binary_mul
                              : div ? dnnl_binary_div
                              : mx  ? dnnl_binary_max
                                    : dnnl_binary_min;
  out.push_back({K::binary, static_cast<int>(alg), 0.0f, 0.0f, input});
  return true;
}

/// Merges consecutive eltwise linear steps: a2 * (a1 * v + b1) + b2 is one step
/// (a2 a1) v + (a2 b1 + b2). One pass instead of several, and oneDNN 2.6 computes a chain
/// of two linear post-ops wrongly (measured: (v * 3) + 1 came out as neither order).
inline void merge_linear_steps(std::vector<EpiloguePostOp>& chain) {
  const int lin = static_cast<int>(dnnl_eltwise_linear);
  auto is_linear = [&](const EpiloguePostOp& e) { return e.kind == EpiloguePostOp::Kind::eltwise && e.alg == lin; };
  std::vector<EpiloguePostOp> out;
  for (const EpiloguePostOp& e : chain) {
    if (!out.empty() && is_linear(out.back()) && is_linear(e)) {
      EpiloguePostOp& prev = out.back();
      prev.beta = e.alpha * prev.beta + e.beta;
      prev.alpha = e.alpha * prev.alpha;
    } else {
      out.push_back(e);
    }
  }
  chain = std::move(out);
}

/// The post-op chain of fused node `n` (a float32 GEMM epilogue), or false where some step
/// is not a straight-line step on the running value that oneDNN can express.
inline bool plan_post_ops(const graph::Graph& G, const graph::Node& n, std::vector<EpiloguePostOp>& chain) {
  const graph::FusedProgram& p = *n.fused;
  if (p.out_meta.dtype != DType::f32 || p.source.empty()) return false;
  for (graph::ValueId v : n.inputs)
    if (G.value(v).meta.dtype != DType::f32) return false;
  int running = -1;  // the GEMM result is external input 0
  for (std::size_t i = 0; i < p.source.size(); ++i) {
    const graph::FusedInstr& ins = p.source[i];
    if (i + 1 < p.source.size() ? ins.dst < 0 : ins.dst != -1) return false;
    if (ins.nin == 1) {
      EpiloguePostOp po;
      if (ins.src[0] != running || !unary_post_op(ins.op, ins.params, po)) return false;
      chain.push_back(po);
    } else if (ins.nin == 2) {
      const bool r0 = ins.src[0] == running, r1 = ins.src[1] == running;
      if (r0 && r1) {  // v * v
        if (ins.op != &ops::mul_op) return false;
        chain.push_back({EpiloguePostOp::Kind::eltwise, static_cast<int>(dnnl_eltwise_square), 0.0f, 0.0f, -1});
      } else {
        const int other = r0 ? ins.src[1] : ins.src[0];
        if ((!r0 && !r1) || other >= -1) return false;  // not a node input besides the GEMM result
        const int input = p.producer_inputs + (-other - 1) - 1;
        const graph::Value& t = G.value(n.inputs[static_cast<std::size_t>(input)]);
        if (!binary_post_ops(ins.op, r1, t, input, chain)) return false;
      }
    } else {
      return false;
    }
    running = ins.dst;
  }
  merge_linear_steps(chain);
  return true;
}

/// A matrix operand: a strided 2-D view with a unit stride, merging leading dims into rows.
inline bool as_matrix(const AnyTensor& t, std::int64_t& rows, std::int64_t& cols, ops::detail::DnnlMatrix& m) {
  ops::detail::MatRef mr;
  if (t.dim() < 2 || !ops::detail::leading_dims_matrix(t, mr)) return false;
  rows = mr.rows, cols = mr.cols;
  m = {t.raw_data(), dnnl_f32, mr.col_major, mr.ld};
  return true;
}

/// Binary operand t against an M x N result: its 2-D dims and strides (full, one row per
/// column vector, one column, one element), or false.
inline bool binary_operand(const AnyTensor& t, const Shape& os, std::int64_t M, std::int64_t N, std::int64_t d[2],
                           std::int64_t s[2]) {
  if (t.numel() == 1) return d[0] = d[1] = 1, s[0] = s[1] = 1, true;
  const int r = t.dim(), R = os.rank();
  if (r > R) return false;
  bool row = t.shape()[r - 1] == N, lead_ones = true, lead_full = r == R;
  for (int i = 0; i + 1 < r; ++i) {
    lead_ones = lead_ones && t.shape()[i] == 1;
    lead_full = lead_full && t.shape()[i] == os[R - r + i];
  }
  if (row && lead_ones) {  // an expanded row (stride 0) is left to the program
    const std::int64_t st = t.strides()[r - 1];
    return st >= 1 && (d[0] = 1, d[1] = N, s[0] = N * st, s[1] = st, true);
  }
  if (!lead_full) return false;
  std::int64_t rows = 0, cols = 0;
  ops::detail::DnnlMatrix m{};
  if (!as_matrix(t, rows, cols, m) || rows != M) return false;
  if (cols == N) {
    d[0] = M, d[1] = N;
    s[0] = m.col_major ? 1 : m.ld, s[1] = m.col_major ? m.ld : 1;
    return true;
  }
  if (cols != 1) return false;
  d[0] = M, d[1] = 1, s[0] = m.col_major ? 1 : m.ld, s[1] = 1;  // a column: rows apart by its row stride
  return true;
}

/// Creates the matmul primitive with bias and post-ops; a primitive with no `prim` where
/// oneDNN has no implementation for this chain (the node then runs as before).
inline std::shared_ptr<const ops::detail::DnnlPrimitive> make_postop_matmul(
    const dnnl_memory_desc_t& amd, const dnnl_memory_desc_t& bmd, const dnnl_memory_desc_t* biasmd,
    const dnnl_memory_desc_t& cmd, std::span<const EpiloguePostOp> chain, std::span<const dnnl_memory_desc_t> src1,
    const std::string& shapes) {
  using ops::detail::dnnl_check;
  auto p = std::make_shared<ops::detail::DnnlPrimitive>();
  dnnl_matmul_desc_t d;
  dnnl_check(dnnl_matmul_desc_init(&d, &amd, &bmd, biasmd, &cmd), "matmul", "matmul descriptor", shapes);
  dnnl_primitive_attr_t attr = ops::detail::make_dnnl_attr(false, "matmul", shapes);
  dnnl_post_ops_t po = nullptr;
  dnnl_status_t st = dnnl_post_ops_create(&po);
  for (std::size_t i = 0; i < chain.size() && st == dnnl_success; ++i) {
    const EpiloguePostOp& e = chain[i];
    const auto alg = static_cast<dnnl_alg_kind_t>(e.alg);
    st = e.kind == EpiloguePostOp::Kind::eltwise ? dnnl_post_ops_append_eltwise(po, 1.0f, alg, e.alpha, e.beta)
                                                 : dnnl_post_ops_append_binary(po, alg, &src1[i]);
  }
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
  if (po) dnnl_post_ops_destroy(po);
  if (st == dnnl_success) st = dnnl_primitive_desc_create(&p->pd, &d, attr, ops::detail::dnnl_engine(), nullptr);
  if (st == dnnl_unimplemented) {
    dnnl_primitive_attr_destroy(attr);
    return p;
  }
  return ops::detail::finish_dnnl_primitive(std::move(p), st, attr, "matmul", shapes);
}

/// The GEMM operands of the fused node's producer as oneDNN matrices: false where the
/// shapes or layouts are not a plain 2-D product (then the node runs as before).
struct GemmOperands {
  ops::detail::DnnlMatrix a{}, b{};
  std::int64_t M = 0, N = 0, K = 0;
  const AnyTensor* bias = nullptr;
};
inline bool gemm_operands(const graph::FusedProgram& p, std::span<const AnyTensor> in, GemmOperands& g) {
  const AnyTensor& x = in[0];
  const AnyTensor& w = in[1];
  if (x.dtype() != DType::f32 || w.dtype() != DType::f32 || w.dim() != 2) return false;
  std::int64_t kx = 0;
  if (!as_matrix(x, g.M, kx, g.a)) return false;
  ops::detail::MatRef mw;
  if (p.producer == &ops::linear_op) {  // x @ w^T: w^T is (K, N) on w's strides swapped
    g.K = w.shape()[1], g.N = w.shape()[0];
    if (!ops::detail::mat_ref(g.K, g.N, w.strides()[1], w.strides()[0], mw)) return false;
    if (p.producer_inputs == 3) g.bias = &in[2];
  } else {
    if (x.dim() != 2) return false;
    g.K = w.shape()[0], g.N = w.shape()[1];
    if (!ops::detail::mat_ref(g.K, g.N, w.strides()[0], w.strides()[1], mw)) return false;
  }
  g.b = {w.raw_data(), dnnl_f32, mw.col_major, mw.ld};
  return kx == g.K && g.M > 0 && g.N > 0 && g.K > 0 && (!g.bias || g.bias->strides()[0] >= 1);
}

inline std::int64_t float_bits(float f) { return static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(f)); }
}  // namespace detail
#endif

/// Plans the post-op chains of the fused GEMM nodes of `G` (FusedProgram::post_ops); returns
/// how many nodes got one. Nothing without oneDNN.
inline int plan_dnnl_epilogues([[maybe_unused]] graph::Graph& G) {
  int planned = 0;
#if defined(MS_HAVE_DNNL)
  for (graph::Node& n : G.nodes()) {
    if (n.dead || !n.fused || (n.fused->producer != &ops::matmul_op && n.fused->producer != &ops::linear_op)) continue;
    std::vector<graph::EpiloguePostOp> chain;
    if (!detail::plan_post_ops(G, n, chain)) continue;
    auto p = std::make_shared<graph::FusedProgram>(*n.fused);  // programs may be shared: copy, as codegen does
    p->post_ops = std::move(chain);
    n.fused = std::move(p);
    ++planned;
  }
#endif
  return planned;
}

/// Runs fused node program `p` (inputs `in`, contiguous output `out`) as one oneDNN matmul
/// with its post-op chain; false (nothing written) where that path does not apply.
inline bool run_dnnl_epilogue([[maybe_unused]] const graph::FusedProgram& p,
                              [[maybe_unused]] std::span<const AnyTensor> in, [[maybe_unused]] const AnyTensor& out) {
#if defined(MS_HAVE_DNNL)
  using namespace ops::detail;
  if (p.post_ops.empty() || !dnnl_postops() || cpu_gemm() != CpuGemm::dnnl ||
      cpu_gemm_precision() != GemmPrecision::f32 || out.dtype() != DType::f32 || !out.is_contiguous())
    return false;
  detail::GemmOperands g;
  if (!detail::gemm_operands(p, in, g) || g.M * g.N != out.numel()) return false;
  constexpr std::size_t kMaxChain = 8;
  const std::size_t nchain = p.post_ops.size();
  if (nchain > kMaxChain) return false;
  DnnlKey key{kDnnlMatmulPostOpsKey, g.M, g.N, g.K, g.a.col_major, g.a.ld, g.b.col_major, g.b.ld,
              g.bias ? g.bias->strides()[0] : 0, static_cast<std::int64_t>(nchain)};
  std::size_t k = 10;
  std::array<dnnl_memory_desc_t, kMaxChain> src1{};
  std::array<DnnlArg, kMaxChain + 4> args{};
  std::size_t nargs = 0;
  for (std::size_t i = 0; i < nchain; ++i) {
    const graph::EpiloguePostOp& e = p.post_ops[i];
    key[k++] = e.alg;
    if (e.kind == graph::EpiloguePostOp::Kind::eltwise) {
      key[k++] = detail::float_bits(e.alpha);
      key[k++] = detail::float_bits(e.beta);
      continue;
    }
    const AnyTensor& t = in[static_cast<std::size_t>(e.input)];
    std::int64_t d[2], s[2];
    if (!detail::binary_operand(t, out.shape(), g.M, g.N, d, s)) return false;
    for (std::int64_t v : {d[0], d[1], s[0], s[1]}) key[k++] = v;
    const dnnl_dims_t dd{d[0], d[1]}, ss{s[0], s[1]};
    if (dnnl_memory_desc_init_by_strides(&src1[i], 2, dd, dnnl_f32, ss) != dnnl_success) return false;
    args[nargs++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, &src1[i], t.raw_data()};
  }
  const auto shapes = [&] {
    return MS_FORMAT("({}, {}) @ ({}, {}) with {} post-ops", g.M, g.K, g.K, g.N, nchain);
  };
  const DnnlMatrix c{out.raw_data(), dnnl_f32, false, g.N};
  const dnnl_memory_desc_t amd = dnnl_matrix_md(g.M, g.K, g.a, "matmul", ""),
                           bmd = dnnl_matrix_md(g.K, g.N, g.b, "matmul", ""),
                           cmd = dnnl_matrix_md(g.M, g.N, c, "matmul", "");
  dnnl_memory_desc_t biasmd{};
  if (g.bias) {
    const dnnl_dims_t bd{1, g.N}, bs{g.N * g.bias->strides()[0], g.bias->strides()[0]};
    if (dnnl_memory_desc_init_by_strides(&biasmd, 2, bd, dnnl_f32, bs) != dnnl_success) return false;
  }
  auto prim = DnnlCache::instance().get(key, [&] {
    return detail::make_postop_matmul(amd, bmd, g.bias ? &biasmd : nullptr, cmd,
                                      std::span<const graph::EpiloguePostOp>(p.post_ops.data(), nchain),
                                      std::span<const dnnl_memory_desc_t>(src1.data(), nchain), shapes());
  });
  if (!prim->prim) return false;
  args[nargs++] = {DNNL_ARG_SRC, &amd, g.a.data};
  args[nargs++] = {DNNL_ARG_WEIGHTS, &bmd, g.b.data};
  args[nargs++] = {DNNL_ARG_DST, &cmd, c.data};
  if (g.bias) args[nargs++] = {DNNL_ARG_BIAS, &biasmd, g.bias->raw_data()};
  dnnl_execute(*prim, std::span<const DnnlArg>(args.data(), nargs), "matmul", shapes);
  detail::dnnl_postop_run_count().fetch_add(1, std::memory_order_relaxed);
  return true;
#else
  return false;
#endif
}

}  // namespace ms::backend::cpu
#endif  // MS_KERNEL_BODIES
