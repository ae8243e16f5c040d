// Tests of HCCL on Ascend (ms/backend/ascend/hccl_*.hpp, ms/dist/hccl.hpp) against the
// Ascend emulator and its libhccl.so, run by ctest as one process and under mpirun with 2
// and 3 processes (tests/dist/CMakeLists.txt). Every rank holds its own emulated device;
// the emulator's HCCL moves device data between the processes through shared memory, and
// its counters show that no collective copies anything to or from the host.
//
// As in dist_test.cpp, every rank runs every test case and calls the collectives in the
// same order; a CHECK (not a REQUIRE) keeps a failing rank in step with the others.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <ms/dist.hpp>
#include <ms/dist/hccl.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include "reduce_reference.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/emu_fixture.hpp"

using ms::AnyTensor;
using ms::Device;
using ms::DType;
using ms::Shape;
using ms::Tensor;
namespace dist = ms::dist;
namespace ascend = ms::backend::ascend;
using dist::ReduceOp;
using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::thrown;
using Catch::Matchers::Contains;

namespace {

int R() { return dist::rank(); }
int W() { return dist::world_size(); }
const Device kNpu = Device::ascend(0);

/// The value rank r holds at element i (small integers: exact in every dtype and reduction).
double value(int r, std::int64_t i) { return static_cast<double>((r + 1) * (i % 5 + 1) - 2 * (i % 5)); }

double reference(ReduceOp op, std::int64_t i) { return ms_dist_test::reduce_reference(op, W(), i, value); }

/// Rank r's values as a host tensor of dtype d.
AnyTensor host_values(int r, std::int64_t n, DType d, std::int64_t first = 0) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(value(r, first + i));
  return ms::ops::cast(AnyTensor(ms::from_vector<double>(v, Shape{n})), d);
}
std::vector<double> to_doubles(const AnyTensor& t) {
  AnyTensor h = ms::backend::to(t, Device::cpu());
  return Tensor<double>(ms::ops::cast(h, DType::f64)).to_vector();
}

/// The world's HCCL communicator on the emulator's device, made once (collectively).
dist::HcclGroup& world_hccl() {
  static dist::HcclGroup g(dist::world(), emu());
  return g;
}

/// Zero latency and no faults, as in the adapter's tests.
struct Fx : ms_emu_test::EmuFixture {};

}  // namespace

TEST_CASE("HCCL: the root info is 4108 bytes and the communicator spans the world", "[hccl]") {
  Fx fx;
  STATIC_REQUIRE(sizeof(HcclRootInfo) == 4108);
  dist::HcclGroup& g = world_hccl();
  CHECK(g.comm().size() == W());
  CHECK(g.comm().rank() == R());
  std::uint32_t n = 0, r = 0;
  REQUIRE(g.comm().api().HcclGetRankSize != nullptr);
  CHECK(g.comm().api().HcclGetRankSize(g.comm().raw(), &n) == HCCL_SUCCESS);
  CHECK(g.comm().api().HcclGetRankId(g.comm().raw(), &r) == HCCL_SUCCESS);
  CHECK(n == static_cast<std::uint32_t>(W()));
  CHECK(r == static_cast<std::uint32_t>(R()));
  CHECK(counters().live_hccl_comms >= 1);
}

TEST_CASE("HCCL all_reduce: every reduction and dtype against the hand-computed values", "[hccl]") {
  Fx fx;
  dist::HcclGroup& g = world_hccl();
  const std::int64_t n = 7;
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::mean}) {
      if (op == ReduceOp::mean && d == DType::i32) continue;
      INFO(ms::dtype_name(d) << " " << dist::reduce_op_name(op));
      AnyTensor x = ms::backend::to(host_values(R(), n, d), kNpu);
      g.all_reduce_(x, op);
      const auto got = to_doubles(x);
      REQUIRE(got.size() == static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) CHECK(got[static_cast<std::size_t>(i)] == Approx(reference(op, i)).epsilon(1e-3));
    }
  }
  if (W() == 2) {
    // Written out: rank 0 holds 1, 0, -1, -2, -3 and rank 1 holds 2, 2, 2, 2, 2.
    AnyTensor x = ms::backend::to(host_values(R(), 5, DType::f32), kNpu);
    g.all_reduce_(x, ReduceOp::sum);
    CHECK(to_doubles(x) == std::vector<double>{3, 2, 1, 0, -1});
    AnyTensor y = ms::backend::to(host_values(R(), 5, DType::f32), kNpu);
    g.all_reduce_(y, ReduceOp::mean);
    CHECK(to_doubles(y) == std::vector<double>{1.5, 1, 0.5, 0, -0.5});
  }
}

TEST_CASE("HCCL all_reduce: a buffer larger than the emulator's slot moves in chunks", "[hccl]") {
  Fx fx;
  const std::int64_t n = 700'000;  // 2.8 MB of float32: three chunks of the 1 MiB slot
  AnyTensor x = ms::backend::to(host_values(R(), n, DType::f32), kNpu);
  world_hccl().all_reduce_(x, ReduceOp::sum);
  const auto got = to_doubles(x);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad += got[static_cast<std::size_t>(i)] != reference(ReduceOp::sum, i);
  CHECK(bad == 0);
}

TEST_CASE("HCCL broadcast, all_gather and reduce_scatter against the hand-computed values", "[hccl]") {
  Fx fx;
  dist::HcclGroup& g = world_hccl();
  for (int root = 0; root < W(); ++root) {
    for (DType d : {DType::f32, DType::i64, DType::f64, DType::bf16}) {
      INFO("broadcast from " << root << ", " << ms::dtype_name(d));
      AnyTensor x = ms::backend::to(host_values(R(), 6, d), kNpu);
      g.broadcast_(x, root);
      const auto got = to_doubles(x);
      for (std::int64_t i = 0; i < 6; ++i) CHECK(got[static_cast<std::size_t>(i)] == value(root, i));
    }
  }
  {
    AnyTensor x = ms::backend::to(ms::ops::reshape(host_values(R(), 3, DType::i32), {3, 1}), kNpu);
    AnyTensor all = g.all_gather(x);
    CHECK(all.device() == kNpu);
    CHECK(all.shape() == Shape{3 * W(), 1});
    const auto got = to_doubles(all);
    for (int r = 0; r < W(); ++r)
      for (std::int64_t i = 0; i < 3; ++i) CHECK(got[static_cast<std::size_t>(r * 3 + i)] == value(r, i));
  }
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::mean}) {
    INFO("reduce_scatter " << dist::reduce_op_name(op));
    const std::int64_t per = 4, n = per * W();
    AnyTensor x = ms::backend::to(host_values(R(), n, DType::f32), kNpu);
    AnyTensor mine = g.reduce_scatter(x, op);
    CHECK(mine.shape() == Shape{per});
    const auto got = to_doubles(mine);
    for (std::int64_t i = 0; i < per; ++i)
      CHECK(got[static_cast<std::size_t>(i)] == Approx(reference(op, R() * per + i)));
  }
}

TEST_CASE("HCCL over a sub-group: its members reduce among themselves", "[hccl]") {
  Fx fx;
  if (W() < 2) return;
  // World ranks {W-1, 0}, in that order: group rank 0 (who makes the root info) is the last rank.
  const dist::Group sub = dist::new_group({W() - 1, 0});
  if (!sub.contains_self()) return;
  dist::HcclGroup g(sub, emu());
  CHECK(g.comm().size() == 2);
  CHECK(g.comm().rank() == (R() == 0 ? 1 : 0));
  AnyTensor x = ms::backend::to(host_values(R(), 4, DType::f32), kNpu);
  g.all_reduce_(x, ReduceOp::sum);
  const auto got = to_doubles(x);
  for (std::int64_t i = 0; i < 4; ++i) CHECK(got[static_cast<std::size_t>(i)] == value(0, i) + value(W() - 1, i));
  AnyTensor y = ms::backend::to(host_values(R(), 3, DType::f32), kNpu);
  g.broadcast_(y, 0);  // group rank 0: world rank W-1
  const auto gy = to_doubles(y);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(gy[static_cast<std::size_t>(i)] == value(W() - 1, i));
}

TEST_CASE("HCCL: device-resident gradients are all-reduced without a host round trip", "[hccl]") {
  Fx fx;
  dist::HcclGroup& g = world_hccl();
  // Gradients made on the device (as a training step leaves them): x + x.
  std::vector<AnyTensor> grads;
  std::uint64_t bytes = 0;
  for (std::int64_t n : {std::int64_t{16}, std::int64_t{300}, std::int64_t{5}}) {
    AnyTensor x = ms::backend::to(host_values(R(), n, DType::f32), kNpu);
    AnyTensor gr = ms::ops::add(x, x);
    REQUIRE(gr.device() == kNpu);
    grads.push_back(gr);
    bytes += static_cast<std::uint64_t>(gr.nbytes());
  }
  emu().synchronize_all();
  ctl().ResetCounters();
  g.all_reduce_(grads, ReduceOp::mean);
  emu().synchronize(emu().eager_stream());
  const msEmuCounters c = counters();
  CHECK(c.hccl_collectives == grads.size());
  CHECK(c.hccl_bytes == bytes);
  CHECK(c.d2h_copies == 0);   // nothing went to the host ...
  CHECK(c.h2d_copies == 0);   // ... or came back
  CHECK(c.launches == grads.size());  // the mean's scale (aclnnMuls), on the device
  CHECK(c.syncs == 1);                // the one synchronize above
  for (const AnyTensor& gr : grads) {
    const auto got = to_doubles(gr);
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i] == Approx(2 * reference(ReduceOp::mean, static_cast<std::int64_t>(i))));
    }
  }
}

TEST_CASE("HCCL: bad input gives typed errors naming the call, shape and dtype", "[hccl]") {
  Fx fx;
  dist::HcclGroup& g = world_hccl();
  AnyTensor f64 = ms::backend::to(host_values(R(), 4, DType::f64), kNpu);
  CHECK_THAT(thrown<ms::DTypeError>([&] { g.all_reduce_(f64, ReduceOp::sum); }),
             Contains("HcclAllReduce: HCCL does not reduce float64"));
  AnyTensor i32 = ms::backend::to(host_values(R(), 4, DType::i32), kNpu);
  CHECK_THAT(thrown<ms::DTypeError>([&] { g.all_reduce_(i32, ReduceOp::mean); }),
             Contains("reduction mean needs a floating dtype, got int32"));
  AnyTensor host = host_values(R(), 4, DType::f32);
  CHECK_THAT(thrown<ms::DeviceError>([&] { g.all_reduce_(host, ReduceOp::sum); }),
             Contains("all_reduce_: the tensor (4,) float32 is on cpu, the communicator's device is ascend:0"));
  AnyTensor m = ms::backend::to(ms::ops::reshape(host_values(R(), 6, DType::f32), {2, 3}), kNpu);
  CHECK_THAT(thrown<ms::ValueError>([&] { g.all_reduce_(ms::ops::transpose(m, 0, 1), ReduceOp::sum); }),
             Contains("all_reduce_: the tensor (3, 2) float32 must be contiguous"));
  if (W() > 1)
    CHECK_THAT(thrown<ms::ShapeError>([&] { g.reduce_scatter(ms::backend::to(host_values(R(), W() + 1, DType::f32), kNpu)); }),
               Contains(fmt::format("reduce_scatter: axis 0 of ({},) float32 does not split into {} ranks", W() + 1, W())));
  // Without libhccl.so: a BackendError naming the library and the variable that sets it.
  const std::string missing = thrown<ms::BackendError>([] { ascend::load_hccl_api("/nonexistent/libhccl.so"); });
  CHECK_THAT(missing, Contains("could not load libhccl.so"));
  CHECK_THAT(missing, Contains("MS_HCCL_LIBS"));
  CHECK_THAT(missing, Contains("/nonexistent/libhccl.so"));
}

TEST_CASE("HCCL: ranks that pass different sizes fail on every rank, naming both calls", "[hccl]") {
  Fx fx;
  if (W() < 2) return;
  dist::HcclGroup& g = world_hccl();
  const std::int64_t n = R() == 0 ? 4 : 5;
  AnyTensor x = ms::backend::to(host_values(R(), n, DType::f32), kNpu);
  g.all_reduce_(x, ReduceOp::sum);
  const std::string err = thrown<ms::BackendError>([] { emu().synchronize(emu().eager_stream()); });
  CHECK_THAT(err, Contains("HcclAllReduce"));
  CHECK_THAT(err, Contains("differs between ranks"));
  CHECK_THAT(err, Contains("count 4"));
  CHECK_THAT(err, Contains("count 5"));
  // The communicator stays usable: the next collective agrees again.
  AnyTensor y = ms::backend::to(host_values(R(), 3, DType::f32), kNpu);
  g.all_reduce_(y, ReduceOp::max);
  const auto got = to_doubles(y);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(got[static_cast<std::size_t>(i)] == reference(ReduceOp::max, i));
}

TEST_CASE("HCCL: a rank whose peers never make the call fails after the timeout, naming itself", "[hccl]") {
  Fx fx;
  if (W() < 2) return;
  // A communicator of its own: after a timeout a communicator is unusable.
  const dist::Group pair = dist::new_group({0, 1});
  if (!pair.contains_self()) return;
  dist::HcclGroup g(pair, emu());
  if (R() != 1) return;  // rank 0 never calls
  setenv("MS_EMU_HCCL_TIMEOUT", "1", 1);
  AnyTensor x = ms::backend::to(host_values(R(), 4, DType::f32), kNpu);
  g.all_reduce_(x, ReduceOp::sum);
  const std::string err = thrown<ms::BackendError>([] { emu().synchronize(emu().eager_stream()); });
  setenv("MS_EMU_HCCL_TIMEOUT", "60", 1);
  CHECK_THAT(err, Contains("HcclAllReduce: rank 1 of 2 waited 1 s for the other ranks"));
}

// ---- the collective ops through HCCL (use_hccl): eager, and in a sunk training step ------

namespace {

struct Data {
  Tensor<float> x;
  Tensor<std::int64_t> y;
};
/// The global batch of step s: 8 rows per rank, the same on every rank.
Data global_batch(int step, std::int64_t in, std::int64_t classes) {
  const std::int64_t rows = 8 * W();
  ms::manual_seed(2000 + static_cast<std::uint64_t>(step));
  return {ms::randn<float>(Shape{rows, in}), ms::randint<std::int64_t>(0, classes, Shape{rows})};
}
Data local_part(const Data& d) {
  return {Tensor<float>(d.x.slice(0, 8 * R(), 8 * R() + 8).contiguous()),
          Tensor<std::int64_t>(d.y.slice(0, 8 * R(), 8 * R() + 8).contiguous())};
}

}  // namespace

TEST_CASE("use_hccl: collective ops on Ascend tensors run through HCCL on the device", "[hccl]") {
  Fx fx;
  dist::use_hccl(emu());
  CHECK(dist::hccl_enabled());
  AnyTensor x = ms::backend::to(host_values(R(), 5, DType::f32), kNpu);
  emu().synchronize_all();
  ctl().ResetCounters();
  AnyTensor y = dist::all_reduce(x, ReduceOp::sum);
  emu().synchronize_all();
  const msEmuCounters c = counters();
  CHECK(y.device() == kNpu);
  CHECK(c.hccl_collectives == 1);
  CHECK(c.d2h_copies == 0);
  CHECK(c.h2d_copies == 0);
  const auto got = to_doubles(y);
  for (std::int64_t i = 0; i < 5; ++i) CHECK(got[static_cast<std::size_t>(i)] == reference(ReduceOp::sum, i));
  // float64 is not an HCCL reduction: the host path (MPI) still gives the right values.
  AnyTensor z = dist::all_reduce(ms::backend::to(host_values(R(), 5, DType::f64), kNpu), ReduceOp::max);
  const auto gz = to_doubles(z);
  for (std::int64_t i = 0; i < 5; ++i) CHECK(gz[static_cast<std::size_t>(i)] == reference(ReduceOp::max, i));
  ascend::AscendBackend other(MS_ASCEND_EMULATOR_PATH, 0);
  CHECK_THAT(thrown<ms::ValueError>([&] { dist::use_hccl(other); }),
             Contains("use_hccl: HCCL is already enabled for ascend:0, not ascend:0"));
}

TEST_CASE("use_hccl: all_reduce_start and all_reduce_wait on Ascend tensors run through HCCL on the device",
          "[hccl]") {
  Fx fx;
  dist::use_hccl(emu());
  AnyTensor a = ms::backend::to(host_values(R(), 5, DType::f32), kNpu);
  AnyTensor b = ms::backend::to(host_values(R(), 3, DType::f32, 5), kNpu);  // elements 5, 6, 7
  emu().synchronize_all();
  ctl().ResetCounters();
  const std::int64_t started = dist::hccl_async_started();
  AnyTensor buf = dist::all_reduce_start({a, b}, ReduceOp::sum);
  CHECK(buf.device() == kNpu);
  CHECK(buf.shape() == Shape{8});
  // Work queued on the compute stream meanwhile does not wait for the all-reduce.
  AnyTensor c = ms::ops::mul(a, a);
  AnyTensor y = dist::all_reduce_wait(buf);
  emu().synchronize_all();
  const msEmuCounters k = counters();
  CHECK(dist::hccl_async_started() - started == 1);
  CHECK(k.hccl_collectives == 1);
  CHECK(k.d2h_copies == 0);
  CHECK(k.h2d_copies == 0);
  // The packed result: a's 5 values then b's 3 (elements 0..7), each summed over the ranks.
  const auto got = to_doubles(y);
  REQUIRE(got.size() == 8);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(got[static_cast<std::size_t>(i)] == reference(ReduceOp::sum, i));
  const auto cc = to_doubles(c), av = to_doubles(a);
  for (std::size_t i = 0; i < av.size(); ++i) CHECK(cc[i] == av[i] * av[i]);
  // A second wait on the same buffer has nothing in flight: a typed error.
  CHECK_THAT(thrown<dist::DistError>([&] { (void)dist::all_reduce_wait(buf); }), Contains("no all-reduce is in flight"));
  if (W() < 2) return;
  // The all-reduce runs beside the compute stream, not on it: rank 0 starts one, queues a
  // kernel on its compute stream and synchronizes that stream while the other ranks have
  // not started yet (they start only after the MPI barrier that rank 0 reaches afterwards).
  // Were the all-reduce on the compute stream, that synchronize would wait for peers that
  // wait for rank 0: the HCCL timeout would fail the test instead.
  auto& checks = dist::detail::state().check_calls;
  const std::int64_t saved = checks;
  checks = 0;  // the call-signature check is itself a collective at the start
  AnyTensor later;
  if (R() == 0) {
    AnyTensor buf2 = dist::all_reduce_start({a}, ReduceOp::max);
    AnyTensor d = ms::ops::mul(a, a);
    emu().synchronize(emu().eager_stream());
    const auto dv = to_doubles(d), av2 = to_doubles(a);
    for (std::size_t i = 0; i < av2.size(); ++i) CHECK(dv[i] == av2[i] * av2[i]);
    dist::barrier();
    later = dist::all_reduce_wait(buf2);
  } else {
    dist::barrier();
    later = dist::all_reduce_wait(dist::all_reduce_start({a}, ReduceOp::max));
  }
  checks = saved;
  const auto lv = to_doubles(later);
  for (std::int64_t i = 0; i < 5; ++i) CHECK(lv[static_cast<std::size_t>(i)] == reference(ReduceOp::max, i));
}

TEST_CASE("use_hccl: a data-parallel training step sunk on the device all-reduces its gradients there",
          "[hccl][train]") {
  Fx fx;
  dist::use_hccl(emu());
  const std::int64_t in = 6, classes = 3, steps = 5;
  // The reference: one process, the whole global batch, every step, from rank 0's init.
  ms::manual_seed(31);
  auto ref = ms::nn::mlp(in, {8}, classes);
  ms::optim::Adam ref_opt(ref->parameters(), 1e-2);
  std::vector<float> ref_loss;
  for (int s = 0; s < steps; ++s) {
    Data gb = global_batch(s, in, classes);
    Tensor<float> l = ms::cross_entropy((*ref)(gb.x), gb.y);
    ref_opt.step(ms::autograd::grad(l, ref->parameters_any()));
    ref_loss.push_back(l.item());
  }
  for (bool overlap : {false, true})
  for (bool capture : {false, true}) {
    INFO((capture ? "captured" : "uncaptured") << " iteration, " << (overlap ? "overlapped" : "after backward"));
    ms::manual_seed(static_cast<std::uint64_t>(31 + R()));  // different inits: DataParallel broadcasts rank 0's
    auto model = ms::nn::mlp(in, {8}, classes);
    // One bucket per parameter (each over 16 bytes): no concat or slice, every bucket one HCCL call.
    dist::DataParallel dp(model, {.bucket_bytes = 16, .overlap = overlap});
    ms::optim::Adam opt(model->parameters(), 1e-2);
    auto step = [&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
      Tensor<float> loss = ms::cross_entropy(dp(x), y);
      opt.step(dp.reduce_gradients(ms::autograd::grad(loss, dp.parameters())));
      return dist::all_reduce(loss, ReduceOp::mean);
    };
    // Step 0 runs on the host while tracing (MPI); steps 1..4 are sunk on the device (HCCL).
    Data first = local_part(global_batch(0, in, classes));
    ms::backend::CompileOptions opt_c;
    opt_c.capture = capture;
    opt_c.max_streams = capture ? 1 : 4;
    auto ex = ms::backend::compile_for_device(ms::backend::trace(step, first.x, first.y), emu(), opt_c);
    const std::string dump = ex.dump();
    INFO(dump);
    CHECK(ex.num_host_nodes() == 0);
    std::size_t reduces = 0, starts = 0, waits = 0;
    for (std::size_t k = 0; k < ex.graph().nodes().size(); ++k) {
      const ms::ops::OpDef* op = ex.graph().nodes()[k].op;
      if (op != &dist::all_reduce_op && op != &dist::all_reduce_start_op && op != &dist::all_reduce_wait_op) continue;
      ++(op == &dist::all_reduce_op ? reduces : op == &dist::all_reduce_start_op ? starts : waits);
      CHECK(ex.placements()[k].engine == ms::backend::Engine::ai_core);
      CHECK(ex.placements()[k].reason == "device kernel");
    }
    // Overlapped: each bucket's all-reduce starts in backward and is waited for before the
    // update (the loss's mean stays a blocking all_reduce); otherwise all are blocking.
    CHECK(starts == (overlap ? dp.buckets().size() : 0));
    CHECK(waits == starts);
    CHECK(reduces + starts == dp.buckets().size() + 1);
    const std::int64_t started_before = dist::hccl_async_started();
    std::vector<AnyTensor> xs, ys;
    for (int s = 1; s < steps; ++s) {
      Data l = local_part(global_batch(s, in, classes));
      xs.push_back(l.x);
      ys.push_back(l.y);
    }
    const AnyTensor X = ms::ops::concat(std::span<const AnyTensor>(xs), 0);
    const AnyTensor Y = ms::ops::concat(std::span<const AnyTensor>(ys), 0);
    emu().synchronize_all();
    ctl().ResetCounters();
    auto r = ex.run_sunk(std::vector<AnyTensor>{X, Y});
    const msEmuCounters c = counters();
    const bool captured = capture && emu().can_capture();
    CHECK(ex.captured() == captured);
    CHECK(r.sinks == 1);
    if (captured) {
      // One iteration recorded (its collectives included), replayed once per step.
      CHECK(c.capture_replays == static_cast<std::uint64_t>(steps - 1));
      CHECK(c.hccl_collectives == 0);
    } else {
      CHECK(c.hccl_collectives == static_cast<std::uint64_t>((steps - 1) * (reduces + starts)));
    }
    // The start kernels ran on the device (recorded once when captured, else once per step).
    CHECK(dist::hccl_async_started() - started_before ==
          static_cast<std::int64_t>(captured ? starts : (steps - 1) * starts));
    CHECK(c.h2d_copies == 2);  // the sink's inputs, once
    CHECK(c.d2h_copies == 1);  // its losses, once: no gradient went through the host
    REQUIRE(r.outputs[0].shape() == Shape{steps - 1});
    const auto got = Tensor<float>(r.outputs[0]).to_vector();
    for (int s = 1; s < steps; ++s)
      CHECK(got[static_cast<std::size_t>(s - 1)] == Approx(ref_loss[static_cast<std::size_t>(s)]).epsilon(1e-4));
    ex.sync_params_to_host();
    const auto mp = model->parameters(), rp = ref->parameters();
    for (std::size_t k = 0; k < mp.size(); ++k) {
      const auto a = mp[k].to_vector(), b = rp[k].to_vector();
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-4).margin(1e-5));
    }
  }
}

int main(int argc, char** argv) {
  // The emulator's AscendCL and HCCL libraries, unless the environment names others.
  setenv("MS_ASCEND_LIBS", MS_ASCEND_EMULATOR_PATH, 0);
  setenv("MS_HCCL_LIBS", MS_HCCL_EMULATOR_PATH, 0);
  dist::Context ctx(&argc, &argv);
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const int failed = session.run();
  const std::int64_t worst = dist::reduce_value(std::int64_t{failed}, ReduceOp::max);
  if (R() == 0)
    std::printf("ms_dist_hccl_tests: %d rank(s), failures on the worst rank: %lld\n", W(), static_cast<long long>(worst));
  return worst == 0 ? 0 : 1;
}
