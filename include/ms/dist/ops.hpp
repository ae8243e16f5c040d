#pragma once
// Collectives as registered ops: all_reduce, broadcast, all_gather, reduce_scatter and
// barrier, category `collective`. Each is defined once here (inference, CPU kernel over
// dist/comm.hpp, gradient rule, cost), so it runs eagerly, is captured into graphs
// (never merged or folded: is_random), is profiled and dumped like any op, and is
// differentiable. Also the in-place and non-blocking forms. Must not know about modules.
//
// The registrations are ordinary inline variables, not MS_REGISTRATION: these ops belong
// to programs that include <ms/dist.hpp>, and the shared kernel unit (<ms/ms.hpp>) does not.
//
// Gradients (the loss is the sum of every rank's loss, as in PyTorch's functional
// collectives): all_reduce(sum) -> all_reduce(sum) of the gradient; mean -> mean;
// max/min -> the summed gradient where the input equals the result (ties all receive it);
// prod -> the summed gradient times result / input; broadcast -> the sum of the gradients
// on the root, zero elsewhere; all_gather <-> reduce_scatter(sum); barrier -> the gradient.

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../ops/binary.hpp"
#include "../ops/dispatch.hpp"
#include "../ops/inplace.hpp"
#include "../ops/registry.hpp"
#include "../ops/views.hpp"
#include "comm.hpp"

namespace ms::dist {

namespace detail {

using ops::Attrs;
using ops::KernelArgs;
using ops::MetaList;
using ops::OpDef;
using ops::TensorMeta;

inline constexpr DTypeSet kCollectiveTypes{DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16};

inline Group group_of(const Attrs& a) { return Group(a.i("group", 0)); }
inline ReduceOp reduce_of(const Attrs& a) { return parse_reduce_op(a.has("op") ? a.str("op") : std::string("sum")); }

inline void check_dtype(const OpDef& op, const TensorMeta& m, ReduceOp r) {
  MS_CHECK(kCollectiveTypes.contains(m.dtype), DTypeError,
           "{}: dtype {} is not supported (float32, float64, int32, int64, float16, bfloat16); input {} {}", op.name,
           m.dtype, shape_str(m.shape), m.dtype);
  if (r == ReduceOp::mean)
    MS_CHECK(is_floating(m.dtype), DTypeError, "{}: reduction mean needs a floating dtype, got {} {}", op.name,
             shape_str(m.shape), m.dtype);
}

/// A contiguous buffer of the value in a dtype that MPI reduces: the tensor's own data,
/// or float32 for float16/bfloat16 (converted back by store()).
struct WireBuffer {
  DType dtype;
  std::vector<float> wide;
  void* data;
  std::int64_t n;
};

template <class H>
void widen(const H* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
template <class H>
void narrow(const float* src, H* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<H>(src[i]);
}

/// Copies `in` (any strides) into `out` (contiguous, same dtype and number of elements)
/// and returns the buffer that MPI works on.
inline WireBuffer wire(const AnyTensor& in, const AnyTensor& out) {
  const AnyTensor c = ops::detail::contiguous_raw(in);
  if (c.raw_data() != out.raw_data()) std::memcpy(out.raw_data(), c.raw_data(), c.nbytes());
  WireBuffer w{out.dtype(), {}, out.raw_data(), out.numel()};
  if (out.dtype() == DType::f16 || out.dtype() == DType::bf16) {
    w.wide.resize(static_cast<std::size_t>(w.n));
    if (out.dtype() == DType::f16) widen(static_cast<const half*>(out.raw_data()), w.wide.data(), w.n);
    else widen(static_cast<const bfloat16*>(out.raw_data()), w.wide.data(), w.n);
    w.dtype = DType::f32;
    w.data = w.wide.data();
  }
  return w;
}
inline void store(const WireBuffer& w, const AnyTensor& out) {
  if (w.wide.empty()) return;
  if (out.dtype() == DType::f16) narrow(w.wide.data(), static_cast<half*>(out.raw_data()), w.n);
  else narrow(w.wide.data(), static_cast<bfloat16*>(out.raw_data()), w.n);
}

inline ops::Cost comm_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                           const Attrs&) {
  ops::Cost c;
  for (auto& m : in) c.bytes += static_cast<double>(numel(m.shape) * static_cast<std::int64_t>(dtype_size(m.dtype)));
  for (auto& m : out) {
    c.bytes += static_cast<double>(numel(m.shape) * static_cast<std::int64_t>(dtype_size(m.dtype)));
    c.flops += static_cast<double>(numel(m.shape));
  }
  return c;
}

// ---- the cross-rank check of the first calls ------------------------------------------------
// Ranks that call different collectives (or the same one on different shapes) would
// otherwise deadlock, or reduce unrelated buffers. Each of the first Options::check_calls
// collective ops of a group first all-gathers a small signature of the call from every
// member (a few int64, MPI_Allgather), and every rank throws the same DistError when they
// differ. The count is per group, so every member checks the same calls.

inline constexpr std::size_t kSigLen = 10;  // op, reduction/root, dtype, rank, dims[6]
inline constexpr const char* kSigOps[] = {"?",       "all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                           "barrier", "all_reduce_start"};

/// param: the reduction (all_reduce, reduce_scatter) or the root (broadcast), else 0.
inline std::array<std::int64_t, kSigLen> signature(std::string_view op, std::int64_t param, const TensorMeta& m) {
  std::array<std::int64_t, kSigLen> sig{};
  sig.fill(-1);
  sig[0] = 0;
  for (std::size_t i = 1; i < std::size(kSigOps); ++i)
    if (op == kSigOps[i]) sig[0] = static_cast<std::int64_t>(i);
  sig[1] = param;
  sig[2] = static_cast<std::int64_t>(m.dtype);
  sig[3] = std::min<std::int64_t>(m.shape.rank(), 6);
  for (int d = 0; d < static_cast<int>(sig[3]); ++d) sig[4 + static_cast<std::size_t>(d)] = m.shape[d];
  return sig;
}
inline std::string describe(const std::int64_t* sig) {
  const auto op = static_cast<std::size_t>(sig[0]);
  std::string s = op < std::size(kSigOps) ? kSigOps[op] : "?";
  if (op == 1 || op == 4 || op == 6) s += MS_FORMAT("({})", reduce_op_name(static_cast<ReduceOp>(sig[1])));
  if (op == 2) s += MS_FORMAT("(root {})", sig[1]);
  std::vector<std::int64_t> dims(sig + 4, sig + 4 + sig[3]);
  return MS_FORMAT("{} on ({}{}) {}", s, ::ms::detail::join_text(dims, ", "), dims.size() == 1 ? "," : "",
                     dtype_name(static_cast<DType>(sig[2])));
}
/// Checks that every member of the group makes the same call (while the group is within
/// its first check_calls calls); throws DistError naming both sides otherwise.
inline void check_same_call(std::string_view op, std::int64_t param, const Group& g, const TensorMeta& m) {
  State& s = state();
  const std::string name(op);  // the watchdog and MPI errors name the op the user called
  const GroupRec& r = member(g, name.c_str());
  const std::int64_t index = r.calls++;
  if (r.ranks.size() <= 1 || s.check_calls == 0 || (s.check_calls > 0 && index >= s.check_calls)) return;
  const auto mine = signature(op, param, m);
  std::vector<std::int64_t> all(kSigLen * r.ranks.size());
  all_gather_buffer(g, mine.data(), all.data(), kSigLen, DType::i64, name.c_str());
  // Every rank sees the same table, so every rank reports the same pair: group rank 0 and
  // the first rank that differs from it.
  const std::int64_t* first = all.data();
  for (std::size_t k = 1; k < r.ranks.size(); ++k) {
    const std::int64_t* theirs = all.data() + k * kSigLen;
    MS_CHECK(std::equal(theirs, theirs + kSigLen, first), DistError,
             "{}: collective call {} on group {} differs between ranks: rank {} calls {}, rank {} calls {} (a "
             "collective called on some ranks only, or with different shapes)",
             op, index, g.id(), r.ranks[0], describe(first), r.ranks[k], describe(theirs));
  }
}
inline void check_same_call(const ops::KernelArgs& k) {
  const std::int64_t param = k.op.name == "broadcast" ? k.attrs.i("root", 0)
                             : k.attrs.has("op")      ? static_cast<std::int64_t>(reduce_of(k.attrs))
                                                      : 0;
  check_same_call(k.op.name, param, group_of(k.attrs), TensorMeta{k.in[0].dtype(), k.in[0].shape()});
}

// ---- all_reduce -------------------------------------------------------------------------

inline void all_reduce_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor, got {}", op.name, in.size());
  check_dtype(op, in[0], reduce_of(a));
  out.push_back(in[0]);
}
inline void all_reduce_kernel(const KernelArgs& k) {
  check_same_call(k);
  const DType d = k.in[0].dtype();
  if (k.in[0].is_contiguous() && d != DType::f16 && d != DType::bf16) {  // straight from input to output
    all_reduce_buffer(group_of(k.attrs), k.in[0].raw_data(), k.out[0].raw_data(), k.out[0].numel(), d,
                      reduce_of(k.attrs), "all_reduce");
    return;
  }
  WireBuffer w = wire(k.in[0], k.out[0]);
  all_reduce_buffer(group_of(k.attrs), w.data, w.n, w.dtype, reduce_of(k.attrs), "all_reduce");
  store(w, k.out[0]);
}
inline std::vector<AnyTensor> all_reduce_grad(const ops::GradArgs& a);

// ---- broadcast --------------------------------------------------------------------------

inline void broadcast_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor, got {}", op.name, in.size());
  check_dtype(op, in[0], ReduceOp::sum);
  MS_CHECK(a.i("root", 0) >= 0, ValueError, "{}: root must be >= 0, got {}", op.name, a.i("root", 0));
  out.push_back(in[0]);
}
inline void broadcast_kernel(const KernelArgs& k) {
  check_same_call(k);
  WireBuffer w = wire(k.in[0], k.out[0]);
  broadcast_buffer(group_of(k.attrs), w.data, w.n, w.dtype, static_cast<int>(k.attrs.i("root", 0)), "broadcast");
  store(w, k.out[0]);
}
inline std::vector<AnyTensor> broadcast_grad(const ops::GradArgs& a);

// ---- all_gather (along axis 0) ---------------------------------------------------------

inline void all_gather_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor, got {}", op.name, in.size());
  check_dtype(op, in[0], ReduceOp::sum);
  MS_CHECK(in[0].shape.rank() >= 1, ShapeError, "{}: needs at least one dimension (gathers along axis 0), got {} {}",
           op.name, shape_str(in[0].shape), in[0].dtype);
  TensorMeta m = in[0];
  m.shape[0] *= group_of(a).size();
  out.push_back(m);
}
inline void all_gather_kernel(const KernelArgs& k) {
  check_same_call(k);
  const AnyTensor c = ops::detail::contiguous_raw(k.in[0]);
  const std::int64_t n = c.numel();
  // 16-bit floats travel as float32 (exact both ways), like the reductions.
  if (c.dtype() == DType::f16 || c.dtype() == DType::bf16) {
    const int size = group_of(k.attrs).size();
    std::vector<float> send(static_cast<std::size_t>(n)), recv(static_cast<std::size_t>(n * size));
    if (c.dtype() == DType::f16) widen(static_cast<const half*>(c.raw_data()), send.data(), n);
    else widen(static_cast<const bfloat16*>(c.raw_data()), send.data(), n);
    all_gather_buffer(group_of(k.attrs), send.data(), recv.data(), n, DType::f32, "all_gather");
    if (c.dtype() == DType::f16) narrow(recv.data(), static_cast<half*>(k.out[0].raw_data()), n * size);
    else narrow(recv.data(), static_cast<bfloat16*>(k.out[0].raw_data()), n * size);
    return;
  }
  all_gather_buffer(group_of(k.attrs), c.raw_data(), k.out[0].raw_data(), n, c.dtype(), "all_gather");
}
inline std::vector<AnyTensor> all_gather_grad(const ops::GradArgs& a);

// ---- reduce_scatter (along axis 0) -----------------------------------------------------

inline void reduce_scatter_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor, got {}", op.name, in.size());
  check_dtype(op, in[0], reduce_of(a));
  const int size = group_of(a).size();
  MS_CHECK(in[0].shape.rank() >= 1 && in[0].shape[0] % size == 0, ShapeError,
           "{}: axis 0 of {} {} must be divisible by the group size {}", op.name, shape_str(in[0].shape), in[0].dtype,
           size);
  TensorMeta m = in[0];
  m.shape[0] /= size;
  out.push_back(m);
}
inline void reduce_scatter_kernel(const KernelArgs& k) {
  check_same_call(k);
  const AnyTensor c = ops::detail::contiguous_raw(k.in[0]);
  const std::int64_t n = k.out[0].numel();
  const Group g = group_of(k.attrs);
  const ReduceOp r = reduce_of(k.attrs);
  if (c.dtype() == DType::f16 || c.dtype() == DType::bf16) {
    std::vector<float> send(static_cast<std::size_t>(c.numel())), recv(static_cast<std::size_t>(n));
    if (c.dtype() == DType::f16) widen(static_cast<const half*>(c.raw_data()), send.data(), c.numel());
    else widen(static_cast<const bfloat16*>(c.raw_data()), send.data(), c.numel());
    reduce_scatter_buffer(g, send.data(), recv.data(), n, DType::f32, r, "reduce_scatter");
    if (c.dtype() == DType::f16) narrow(recv.data(), static_cast<half*>(k.out[0].raw_data()), n);
    else narrow(recv.data(), static_cast<bfloat16*>(k.out[0].raw_data()), n);
    return;
  }
  reduce_scatter_buffer(g, c.raw_data(), k.out[0].raw_data(), n, c.dtype(), r, "reduce_scatter");
}
inline std::vector<AnyTensor> reduce_scatter_grad(const ops::GradArgs& a);

// ---- barrier -----------------------------------------------------------------------------

inline void barrier_infer(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in.size() == 1, ValueError, "{}: takes one tensor (passed through), got {}", op.name, in.size());
  out.push_back(in[0]);
}
inline void barrier_kernel(const KernelArgs& k) {
  check_same_call(k);
  const AnyTensor c = ops::detail::contiguous_raw(k.in[0]);
  if (c.raw_data() != k.out[0].raw_data()) std::memcpy(k.out[0].raw_data(), c.raw_data(), c.nbytes());
  barrier(group_of(k.attrs));
}

inline OpDef collective(std::string name, std::string doc, std::vector<std::string> attrs, ops::InferFn infer,
                        ops::KernelFn kernel, ops::GradFn grad) {
  OpDef d;
  d.name = std::move(name);
  d.category = ops::Category::collective;
  d.num_inputs = 1;
  d.doc = std::move(doc);
  d.attr_names = std::move(attrs);
  d.infer = infer;
  d.kernel = kernel;
  d.grad = grad;
  d.cost = &comm_cost;
  d.cpu_dtypes = kCollectiveTypes;
  // Every call communicates: never merge two calls (CSE) or run one at compile time (folding).
  d.is_random = true;
  return d;
}

}  // namespace detail

inline const ops::OpDef& all_reduce_op = ops::registry().add(detail::collective(
    "all_reduce", "reduces a tensor over the ranks of a process group; every rank gets the result", {"op", "group"},
    &detail::all_reduce_infer, &detail::all_reduce_kernel, &detail::all_reduce_grad));
inline const ops::OpDef& broadcast_op = ops::registry().add(detail::collective(
    "broadcast", "every rank of a process group gets the root rank's tensor", {"root", "group"},
    &detail::broadcast_infer, &detail::broadcast_kernel, &detail::broadcast_grad));
inline const ops::OpDef& all_gather_op = ops::registry().add(detail::collective(
    "all_gather", "concatenates every rank's tensor along axis 0, in rank order", {"group"},
    &detail::all_gather_infer, &detail::all_gather_kernel, &detail::all_gather_grad));
inline const ops::OpDef& reduce_scatter_op = ops::registry().add(detail::collective(
    "reduce_scatter", "reduces over the ranks, then rank r keeps block r of axis 0", {"op", "group"},
    &detail::reduce_scatter_infer, &detail::reduce_scatter_kernel, &detail::reduce_scatter_grad));
inline const ops::OpDef& barrier_op = ops::registry().add(detail::collective(
    "barrier", "waits for every rank of a process group; passes its tensor through", {"group"},
    &detail::barrier_infer, &detail::barrier_kernel, [](const ops::GradArgs& a) {
      return std::vector<AnyTensor>{a.grad_out[0]};
    }));

// ---- the tensor API ------------------------------------------------------------------------

/// The reduction of x over the group's ranks (a new tensor; every rank gets the same values).
inline AnyTensor all_reduce(const AnyTensor& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  return ops::call1(all_reduce_op, {x}, ops::Attrs{{"op", std::string(reduce_op_name(op))}, {"group", g.id()}});
}
template <Element T>
Tensor<T> all_reduce(const Tensor<T>& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  return Tensor<T>(all_reduce(AnyTensor(x), op, g));
}
/// The root's x on every rank (root: a rank of the group).
inline AnyTensor broadcast(const AnyTensor& x, int root = 0, const Group& g = world()) {
  return ops::call1(broadcast_op, {x}, ops::Attrs{{"root", std::int64_t{root}}, {"group", g.id()}});
}
template <Element T>
Tensor<T> broadcast(const Tensor<T>& x, int root = 0, const Group& g = world()) {
  return Tensor<T>(broadcast(AnyTensor(x), root, g));
}
/// Every rank's x concatenated along axis 0, in group rank order.
inline AnyTensor all_gather(const AnyTensor& x, const Group& g = world()) {
  return ops::call1(all_gather_op, {x}, ops::Attrs{{"group", g.id()}});
}
template <Element T>
Tensor<T> all_gather(const Tensor<T>& x, const Group& g = world()) {
  return Tensor<T>(all_gather(AnyTensor(x), g));
}
/// Block `group rank` (along axis 0) of the reduction of x over the ranks.
inline AnyTensor reduce_scatter(const AnyTensor& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  return ops::call1(reduce_scatter_op, {x}, ops::Attrs{{"op", std::string(reduce_op_name(op))}, {"group", g.id()}});
}
template <Element T>
Tensor<T> reduce_scatter(const Tensor<T>& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  return Tensor<T>(reduce_scatter(AnyTensor(x), op, g));
}
/// x, once every rank of the group has reached this point (orders a captured graph too).
inline AnyTensor barrier(const AnyTensor& x, const Group& g = world()) {
  return ops::call1(barrier_op, {x}, ops::Attrs{{"group", g.id()}});
}

/// In place: x = all_reduce(x) (x keeps its storage, so views and parameters see it).
/// Eagerly, on a contiguous cpu tensor of a dtype that MPI reduces, outside autodiff and
/// with no tracer or observer listening, MPI reduces straight into x (MPI_IN_PLACE): no
/// output tensor, no copy back, the cost of a raw MPI_Allreduce. Otherwise it is the op
/// followed by copy_, so that captures, profiles and gradients see it.
inline void all_reduce_(const AnyTensor& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  const AnyTensor in[1] = {x};
  if (x.defined() && x.is_contiguous() && x.device().is_cpu() && x.dtype() != DType::f16 &&
      x.dtype() != DType::bf16 && ops::detail::tracer == nullptr && ops::detail::observer == nullptr &&
      !(ops::detail::grad_mode && ops::detail::any_requires_grad(in))) {
    detail::check_dtype(all_reduce_op, ops::TensorMeta{x.dtype(), x.shape()}, op);
    detail::check_same_call("all_reduce", static_cast<std::int64_t>(op), g, ops::TensorMeta{x.dtype(), x.shape()});
    all_reduce_buffer(g, x.raw_data(), x.numel(), x.dtype(), op, "all_reduce_");
    return;
  }
  ops::copy_(x, all_reduce(x, op, g));
}
/// In place: x = the root's x.
inline void broadcast_(const AnyTensor& x, int root = 0, const Group& g = world()) {
  ops::copy_(x, broadcast(x, root, g));
}

/// Starts a non-blocking all-reduce of x in place (x must be contiguous, float32/float64/
/// int32/int64) and returns its handle; x holds the result once wait() returns. Eager only.
inline Work all_reduce_async(const AnyTensor& x, ReduceOp op = ReduceOp::sum, const Group& g = world()) {
  MS_CHECK(x.is_contiguous(), ValueError, "all_reduce_async: the tensor must be contiguous, got {} {}",
           shape_str(x.shape()), x.dtype());
  MS_CHECK(x.device().is_cpu(), DeviceError, "all_reduce_async: the tensor must be on the cpu, got {}", x.device());
  MS_CHECK(x.dtype() != DType::f16 && x.dtype() != DType::bf16, DTypeError,
           "all_reduce_async: {} {} needs an upcast to float32 first (ms::cast)", shape_str(x.shape()), x.dtype());
  if (op == ReduceOp::mean)
    MS_CHECK(is_floating(x.dtype()), DTypeError, "all_reduce_async: reduction mean needs a floating dtype, got {}",
             x.dtype());
  return all_reduce_async_buffer(g, x.raw_data(), x.numel(), x.dtype(), op, std::make_shared<AnyTensor>(x));
}

// ---- gradient rules ---------------------------------------------------------------------------

namespace detail {

inline AnyTensor self_factor(const AnyTensor& g, bool one) { return ops::scalar_tensor(one ? 1.0 : 0.0, g.dtype()); }

inline std::vector<AnyTensor> all_reduce_grad(const ops::GradArgs& a) {
  const ReduceOp r = reduce_of(a.attrs);
  const Group g = group_of(a.attrs);
  const AnyTensor& go = a.grad_out[0];
  if (r == ReduceOp::mean) return {all_reduce(go, ReduceOp::mean, g)};
  AnyTensor summed = all_reduce(go, ReduceOp::sum, g);
  if (r == ReduceOp::sum) return {summed};
  if (r == ReduceOp::prod) return {ops::div(ops::mul(summed, a.out[0]), a.in[0])};
  // max / min: the ranks whose value is the result receive the summed gradient.
  return {ops::where(ops::eq(a.in[0], a.out[0]), summed, ops::scalar_tensor(0.0, go.dtype()))};
}
inline std::vector<AnyTensor> broadcast_grad(const ops::GradArgs& a) {
  const Group g = group_of(a.attrs);
  AnyTensor summed = all_reduce(a.grad_out[0], ReduceOp::sum, g);
  return {ops::mul(summed, self_factor(summed, g.rank() == static_cast<int>(a.attrs.i("root", 0))))};
}
inline std::vector<AnyTensor> all_gather_grad(const ops::GradArgs& a) {
  return {reduce_scatter(a.grad_out[0], ReduceOp::sum, group_of(a.attrs))};
}
inline std::vector<AnyTensor> reduce_scatter_grad(const ops::GradArgs& a) {
  const ReduceOp r = reduce_of(a.attrs);
  MS_CHECK(r == ReduceOp::sum || r == ReduceOp::mean, NotImplementedError,
           "reduce_scatter: no gradient for reduction {} (sum and mean have one)", reduce_op_name(r));
  AnyTensor g = all_gather(a.grad_out[0], group_of(a.attrs));
  if (r == ReduceOp::mean) g = ops::div(g, static_cast<double>(group_of(a.attrs).size()));
  return {g};
}

}  // namespace detail

}  // namespace ms::dist
