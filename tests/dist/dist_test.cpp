// Tests of ms::dist, run by ctest as one process and under mpirun with 2 and 3 processes
// (tests/dist/CMakeLists.txt). Every rank runs every test case; each collective's result
// is checked on every rank against a reference that the rank computes by itself from the
// known inputs of all ranks. `--fault throw|timeout|kill` runs a fault scenario instead.
//
// Test cases call collectives in the same order on every rank: a CHECK (not a REQUIRE)
// keeps a failing rank in step with the others.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <ms/dist.hpp>
#include "reduce_reference.hpp"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
using ms::Tensor;
namespace dist = ms::dist;
using dist::ReduceOp;

namespace {

int R() { return dist::rank(); }
int W() { return dist::world_size(); }

/// The value that rank r holds at element i in the collective tests.
double value(int r, std::int64_t i) { return static_cast<double>((r + 1) * (i + 1) - 2 * i); }

template <class T>
Tensor<T> rank_tensor(int r, std::int64_t n) {
  std::vector<T> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<T>(value(r, i)));
  return ms::from_vector<T>(v, Shape{n});
}

double reference(ReduceOp op, std::int64_t i) { return ms_dist_test::reduce_reference(op, W(), i, value); }

template <class T>
void check_all_reduce(ReduceOp op) {
  const std::int64_t n = 5;
  Tensor<T> y = dist::all_reduce(rank_tensor<T>(R(), n), op);
  auto got = y.to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    INFO("dtype " << fmt::format("{}", ms::dtype_of<T>::value) << ", op " << dist::reduce_op_name(op) << ", element " << i << ", rank "
                  << R());
    CHECK(static_cast<double>(got[static_cast<std::size_t>(i)]) == Approx(reference(op, i)).epsilon(1e-6));
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ms::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("world: rank, size and local rank match the launcher", "[dist]") {
  REQUIRE(dist::is_initialized());
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  CHECK(W() == (env ? std::atoi(env) : 1));
  CHECK(R() >= 0);
  CHECK(R() < W());
  CHECK(dist::local_rank() >= 0);
  CHECK(dist::local_rank() < W());
  CHECK(dist::world().size() == W());
  CHECK(dist::world().rank() == R());
  CHECK(dist::has_mpi());
}

TEST_CASE("collectives are registered ops of category collective", "[dist][op]") {
  for (const char* name : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"}) {
    const ms::ops::OpDef* op = ms::ops::registry().find(name);
    REQUIRE(op != nullptr);
    CHECK(op->category == ms::ops::Category::collective);
    CHECK(ms::ops::category_name(op->category) == "collective");
    CHECK(op->differentiable());
    CHECK(op->is_random);  // never merged or folded by graph passes
  }
}

TEST_CASE("all_reduce: every reduction and dtype against the reference on every rank", "[dist]") {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
    check_all_reduce<float>(op);
    check_all_reduce<double>(op);
    check_all_reduce<std::int32_t>(op);
    check_all_reduce<std::int64_t>(op);
  }
  check_all_reduce<float>(ReduceOp::mean);
  check_all_reduce<double>(ReduceOp::mean);
  // 16-bit floats reduce in float32 and round once.
  Tensor<float> h = ms::cast<float>(dist::all_reduce(ms::cast<ms::half>(rank_tensor<float>(R(), 4)), ReduceOp::sum));
  Tensor<float> b = ms::cast<float>(dist::all_reduce(ms::cast<ms::bfloat16>(rank_tensor<float>(R(), 4)), ReduceOp::max));
  for (std::int64_t i = 0; i < 4; ++i) {
    CHECK(h.to_vector()[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::sum, i)));
    CHECK(b.to_vector()[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::max, i)));
  }
  // A strided view is reduced by value; the in-place form keeps the storage.
  Tensor<double> m = ms::from_vector<double>({1.0 * R(), 10.0 + R(), 2.0, 3.0}, Shape{2, 2});
  Tensor<double> t = dist::all_reduce(Tensor<double>(m.transpose(0, 1)), ReduceOp::sum);
  const double rs = W() * (W() - 1) / 2.0;
  CHECK(t.to_vector() == std::vector<double>{rs, 2.0 * W(), 10.0 * W() + rs, 3.0 * W()});
  const double* before = m.data();
  dist::all_reduce_(m, ReduceOp::max);
  CHECK(m.data() == before);
  CHECK(m.to_vector() == std::vector<double>{1.0 * (W() - 1), 10.0 + W() - 1, 2.0, 3.0});
}

TEST_CASE("broadcast, all_gather, reduce_scatter and barrier", "[dist]") {
  const int root = W() - 1;
  Tensor<std::int64_t> b = dist::broadcast(rank_tensor<std::int64_t>(R(), 3), root);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(b.to_vector()[static_cast<std::size_t>(i)] == value(root, i));

  Tensor<float> x = ms::from_vector<float>({100.f * R(), 100.f * R() + 1, 100.f * R() + 2, 100.f * R() + 3}, Shape{2, 2});
  Tensor<float> g = dist::all_gather(x);
  REQUIRE(g.shape() == Shape{2 * W(), 2});
  std::vector<float> want;
  for (int r = 0; r < W(); ++r)
    for (int k = 0; k < 4; ++k) want.push_back(100.f * r + k);
  CHECK(g.to_vector() == want);

  // reduce_scatter: rows (2 per rank); rank r's row i holds r + i, column 1 holds 1.
  std::vector<double> rows;
  for (int i = 0; i < 2 * W(); ++i) {
    rows.push_back(R() + i);
    rows.push_back(1.0);
  }
  Tensor<double> s = dist::reduce_scatter(ms::from_vector<double>(rows, Shape{2 * W(), 2}), ReduceOp::sum);
  REQUIRE(s.shape() == Shape{2, 2});
  const double rs = W() * (W() - 1) / 2.0;
  CHECK(s.to_vector() == std::vector<double>{rs + W() * (2.0 * R()), 1.0 * W(), rs + W() * (2.0 * R() + 1), 1.0 * W()});
  Tensor<double> sm = dist::reduce_scatter(ms::from_vector<double>(rows, Shape{2 * W(), 2}), ReduceOp::mean);
  CHECK(sm.to_vector()[1] == 1.0);

  Tensor<float> through = dist::barrier(x);
  CHECK(through.to_vector() == x.to_vector());
  dist::barrier();
}

TEST_CASE("sub-groups made from a list of ranks", "[dist]") {
  // The first and the last rank (one rank when the world has one).
  std::vector<int> members = W() > 1 ? std::vector<int>{W() - 1, 0} : std::vector<int>{0};
  dist::Group g = dist::new_group(members);
  CHECK(g.size() == static_cast<int>(members.size()));
  const bool member = R() == 0 || R() == W() - 1;
  CHECK(g.contains_self() == member);
  if (member) {
    CHECK(g.rank() == (R() == W() - 1 ? 0 : static_cast<int>(members.size()) - 1));
    Tensor<std::int32_t> y = dist::all_reduce(ms::from_vector<std::int32_t>({R() + 1}, Shape{1}), ReduceOp::sum, g);
    CHECK(y.item() == (W() > 1 ? W() + 1 : 1));
    // Root 0 of the group is world rank W() - 1.
    Tensor<double> b = dist::broadcast(ms::from_vector<double>({1.0 * R()}, Shape{1}), 0, g);
    CHECK(b.item() == W() - 1);
  } else {
    std::string e = error_of([&] { dist::all_reduce(ms::from_vector<float>({1.f}, Shape{1}), ReduceOp::sum, g); });
    CHECK(e == fmt::format("[ms.dist_error] all_reduce: rank {} is not a member of process group {} (ranks {}, 0)",
                           R(), g.id(), W() - 1));
  }
  CHECK(error_of([] { dist::new_group({0, 0}); }) == "[ms.value_error] new_group: rank 0 is listed twice");
  CHECK(error_of([] { dist::new_group({W()}); }) ==
        fmt::format("[ms.value_error] new_group: rank {} is out of range for a world of {}", W(), W()));
}

TEST_CASE("collectives reject bad input with typed errors naming the op, shape and dtype", "[dist]") {
  CHECK(error_of([] { dist::all_reduce(ms::from_vector<std::int32_t>({1, 2}, Shape{2}), ReduceOp::mean); }) ==
        "[ms.dtype_error] all_reduce: reduction mean needs a floating dtype, got (2,) int32");
  CHECK(error_of([] { dist::all_reduce(ms::from_vector<std::uint8_t>({1}, Shape{1})); }) ==
        "[ms.dtype_error] all_reduce: unsupported dtype uint8 (supported: float32, float64, int32, int64, float16, "
        "bfloat16)");
  CHECK(error_of([] { dist::all_gather(ms::full<float>(Shape{}, 1.f)); }) ==
        "[ms.shape_error] all_gather: needs at least one dimension (gathers along axis 0), got () float32");
  if (W() > 1)
    CHECK(error_of([] { dist::reduce_scatter(ms::zeros<float>(Shape{W() + 1, 2})); }) ==
          fmt::format("[ms.shape_error] reduce_scatter: axis 0 of ({}, 2) float32 must be divisible by the group "
                      "size {}",
                      W() + 1, W()));
  CHECK(error_of([] { dist::broadcast(ms::zeros<float>(Shape{2}), W()); }) ==
        fmt::format("[ms.value_error] broadcast: root {} is out of range for a group of {} ranks", W(), W()));
}

TEST_CASE("non-blocking all_reduce: a handle to test and wait on", "[dist]") {
  Tensor<double> a = rank_tensor<double>(R(), 1000);
  Tensor<std::int64_t> b = rank_tensor<std::int64_t>(R(), 7);
  dist::Work wa = dist::all_reduce_async(a, ReduceOp::mean);
  dist::Work wb = dist::all_reduce_async(b, ReduceOp::max);
  int polls = 0;
  while (!wa.test()) ++polls;  // the progress call: work can run between polls
  wb.wait();
  CHECK(wa.done());
  CHECK(wb.done());
  for (std::int64_t i = 0; i < 1000; i += 97) CHECK(a.to_vector()[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::mean, i)));
  for (std::int64_t i = 0; i < 7; ++i) CHECK(b.to_vector()[static_cast<std::size_t>(i)] == reference(ReduceOp::max, i));
  CHECK(error_of([] { dist::all_reduce_async(ms::zeros<float>(Shape{2, 2}).transpose(0, 1)); }) ==
        "[ms.value_error] all_reduce_async: the tensor must be contiguous, got (2, 2) float32");
}

namespace {
/// Weights of rank r's loss sum(y * w_r): w_r[i] = r + 1 + 0.5 i.
Tensor<double> loss_weights(int r, std::int64_t n) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(r + 1 + 0.5 * static_cast<double>(i));
  return ms::from_vector<double>(v, Shape{n});
}
double weight(int r, std::int64_t i) { return r + 1 + 0.5 * static_cast<double>(i); }

/// d(sum over ranks of sum(f(x_r) * w_r)) / dx_R by autodiff on each rank, and by central
/// differences of the global loss (each perturbation of one rank's element is a step that
/// every rank takes).
void check_dist_grad(const std::function<AnyTensor(const AnyTensor&)>& f, Tensor<double> x) {
  Tensor<double> xg = Tensor<double>(x.detach()).clone();
  xg.requires_grad_();
  AnyTensor y = f(xg);
  Tensor<double> w = loss_weights(R(), y.numel()).reshape(y.shape().vec());
  Tensor<double> g = ms::autograd::grad(ms::ops::sum(ms::ops::mul(y, w), {}, false), {xg})[0];
  const double eps = 1e-6;
  Tensor<double> xd = Tensor<double>(x.detach()).clone();
  auto global_loss = [&] {
    ms::NoGradGuard no;
    double l = Tensor<double>(ms::ops::sum(ms::ops::mul(f(xd), w), {}, false)).item();
    return dist::reduce_value(l, ReduceOp::sum);
  };
  for (int p = 0; p < W(); ++p)
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      double* d = xd.data();
      const double keep = d[i];
      if (p == R()) d[i] = keep + eps;
      const double fp = global_loss();
      if (p == R()) d[i] = keep - eps;
      const double fm = global_loss();
      d[i] = keep;
      if (p == R()) {
        const double fd = (fp - fm) / (2 * eps);
        const double ad = g.to_vector()[static_cast<std::size_t>(i)];
        INFO("rank " << R() << " element " << i << ": autodiff " << ad << ", finite difference " << fd);
        CHECK(std::abs(ad - fd) <= 1e-5 * (1 + std::abs(fd)));
      }
    }
}
}  // namespace

TEST_CASE("gradient rules: values against the reference and finite differences", "[dist][grad]") {
  const std::int64_t n = 3;
  // all_reduce(sum): every rank's input gradient is the sum of every rank's weights.
  Tensor<double> x = rank_tensor<double>(R(), n);
  x.requires_grad_();
  Tensor<double> gs = ms::autograd::grad(ms::ops::sum(ms::ops::mul(dist::all_reduce(AnyTensor(x)), loss_weights(R(), n)), {}, false), {x})[0];
  for (std::int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < W(); ++r) want += weight(r, i);
    CHECK(gs.to_vector()[static_cast<std::size_t>(i)] == Approx(want));
  }
  // broadcast from the last rank: the root gets the summed gradient, the others zero.
  const int root = W() - 1;
  Tensor<double> gb = ms::autograd::grad(ms::ops::sum(ms::ops::mul(dist::broadcast(AnyTensor(x), root), loss_weights(R(), n)), {}, false), {x})[0];
  for (std::int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < W(); ++r) want += weight(r, i);
    CHECK(gb.to_vector()[static_cast<std::size_t>(i)] == Approx(R() == root ? want : 0.0));
  }
  // all_gather: rank r's gradient is block r of the summed weights (a reduce_scatter).
  Tensor<double> gg = ms::autograd::grad(ms::ops::sum(ms::ops::mul(dist::all_gather(AnyTensor(x)), loss_weights(R(), n * W())), {}, false), {x})[0];
  for (std::int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < W(); ++r) want += weight(r, R() * n + i);
    CHECK(gg.to_vector()[static_cast<std::size_t>(i)] == Approx(want));
  }
  // Finite differences of the global loss, for every reduction and the gathers.
  Tensor<double> distinct = ms::from_vector<double>({1.5 + R(), 2.0 - 0.25 * R(), 0.5 + 0.75 * R()}, Shape{3});
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
    INFO("all_reduce " << dist::reduce_op_name(op));
    check_dist_grad([op](const AnyTensor& v) { return dist::all_reduce(ms::ops::mul(v, v), op); }, distinct);
  }
  check_dist_grad([](const AnyTensor& v) { return dist::broadcast(ms::ops::mul(v, v), 0); }, distinct);
  check_dist_grad([](const AnyTensor& v) { return dist::all_gather(ms::ops::mul(v, v)); }, distinct);
  std::vector<double> rows;
  for (int i = 0; i < 2 * W(); ++i) rows.push_back(0.5 * i + 0.1 * R());
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    check_dist_grad([op](const AnyTensor& v) { return dist::reduce_scatter(ms::ops::mul(v, v), op); },
                    ms::from_vector<double>(rows, Shape{2 * W()}));
  }
}

TEST_CASE("collectives in a captured graph: replayed with new inputs, listed in the graph", "[dist][graph]") {
  auto f = ms::jit([](const Tensor<float>& x) {
    Tensor<float> s = dist::all_reduce(x * 2.0f, ReduceOp::sum);
    Tensor<float> g = dist::all_gather(s + 1.0f);
    return ms::sum(g);
  });
  for (int rep = 0; rep < 3; ++rep) {
    Tensor<float> x = ms::full<float>(Shape{4}, static_cast<float>(R() + rep));
    const float sum_x = static_cast<float>(W() * rep + W() * (W() - 1) / 2);
    CHECK(f(x).item() == Approx(W() * 4 * (2 * sum_x + 1)));
  }
  CHECK(f.num_traces() == 1);
  REQUIRE(f.executable() != nullptr);
  int collectives = 0;
  for (const auto& node : f.executable()->graph().nodes())
    if (node.op->category == ms::ops::Category::collective) ++collectives;
  CHECK(collectives == 2);
}

TEST_CASE("all_reduce_ reduces into the tensor's own storage, eagerly and in a capture", "[dist]") {
  Tensor<float> x = rank_tensor<float>(R(), 1000);
  const void* storage = x.raw_data();
  dist::all_reduce_(x, ReduceOp::sum);  // the MPI_IN_PLACE path
  CHECK(x.raw_data() == storage);
  for (std::int64_t i : {0, 1, 999}) CHECK(x.to_vector()[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::sum, i)));
  Tensor<double> v = rank_tensor<double>(R(), 8);  // a strided view: the op, then a copy
  Tensor<double> t = v.reshape({2, 4}).transpose(0, 1);
  dist::all_reduce_(t, ReduceOp::max);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(v.to_vector()[static_cast<std::size_t>(i)] == reference(ReduceOp::max, i));
}

TEST_CASE("a collective that differs between ranks fails at the first step, naming both sides", "[dist][graph]") {
  if (W() == 1) return;
  std::vector<int> everyone;
  for (int r = 0; r < W(); ++r) everyone.push_back(r);
  const dist::Group g = dist::new_group(everyone);  // its own count of checked calls
  const std::string tail = " (a collective called on some ranks only, or with different shapes)";
  // Different shapes on rank 1, in a captured step: reported at the first step.
  auto step = ms::jit([&](const Tensor<float>& x) { return dist::all_reduce(x, ReduceOp::sum, g); });
  const std::int64_t n = R() == 1 ? 5 : 4;
  std::string e = error_of([&] { step(ms::full<float>(Shape{n}, 1.0f)); });
  CHECK(e == fmt::format("[ms.dist_error] all_reduce: collective call 0 on group {} differs between ranks: rank 0 "
                         "calls all_reduce(sum) on (4,) float32, rank 1 calls all_reduce(sum) on (5,) float32{}",
                         g.id(), tail));
  // A collective called on rank 1 only (a barrier before the all_reduce that all ranks make).
  auto step2 = ms::jit([&](const Tensor<float>& x) {
    Tensor<float> y = R() == 1 ? Tensor<float>(dist::barrier(x, g)) : x;
    return dist::all_reduce(y, ReduceOp::max, g);
  });
  e = error_of([&] { step2(ms::full<float>(Shape{2, 3}, 1.0f)); });
  CHECK(e == fmt::format("[ms.dist_error] {}: collective call 1 on group {} differs between ranks: rank 0 calls "
                         "all_reduce(max) on (2, 3) float32, rank 1 calls barrier on (2, 3) float32{}",
                         R() == 1 ? "barrier" : "all_reduce", g.id(), tail));
  // The ranks stay in step: the group still works, and the checked calls pass.
  Tensor<float> ok = dist::all_reduce(ms::full<float>(Shape{3}, 1.0f), ReduceOp::sum, g);
  CHECK(ok.to_vector() == std::vector<float>(3, static_cast<float>(W())));
}

TEST_CASE("DataLoader shards: equal sizes, padded by repetition, disjoint cover, per epoch", "[dist][data]") {
  for (std::int64_t n : {10, 9, 12}) {
    Tensor<float> images = ms::zeros<float>(Shape{n, 2});
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
    Tensor<std::int64_t> labels = ms::from_vector<std::int64_t>(ids, Shape{n});
    ms::data::DataLoader full(images, labels, 4, true, 7);
    ms::data::DataLoader shard(images, labels, 4, true, 7);
    shard.set_shard(R(), W());
    const std::int64_t per = (n + W() - 1) / W();
    for (std::int64_t epoch : {0, 1}) {
      full.set_epoch(epoch);
      shard.set_epoch(epoch);
      REQUIRE(shard.epoch_samples() == per);
      // Every rank's shard, gathered: position k*W + r holds the permutation's (k*W + r) % n.
      std::vector<std::int64_t> labels_seen;
      for (std::size_t bi = 0; bi < shard.size(); ++bi) {
        auto v = shard.batch(bi).labels.to_vector();
        labels_seen.insert(labels_seen.end(), v.begin(), v.end());
      }
      Tensor<std::int64_t> all = dist::all_gather(ms::from_vector<std::int64_t>(labels_seen, Shape{per}));
      auto av = all.to_vector();
      std::vector<int> count(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < W(); ++r)
        for (std::int64_t k = 0; k < per; ++k) {
          const std::int64_t got = av[static_cast<std::size_t>(r * per + k)];
          CHECK(got == full.order()[static_cast<std::size_t>((k * W() + r) % n)]);
          ++count[static_cast<std::size_t>(got)];
        }
      for (std::int64_t i = 0; i < n; ++i) {
        // Each sample once; the padding repeats the first (per * W - n) samples of the permutation.
        const bool padded = std::find(full.order().begin(), full.order().begin() + (per * W() - n), i) !=
                            full.order().begin() + (per * W() - n);
        CHECK(count[static_cast<std::size_t>(i)] == (padded ? 2 : 1));
      }
    }
    full.set_epoch(0);
    auto e0 = full.order();
    full.set_epoch(1);
    CHECK(e0 != full.order());  // a new permutation each epoch
  }
  ms::data::DataLoader l(ms::zeros<float>(Shape{4, 1}), ms::zeros<std::int64_t>(Shape{4}), 2);
  CHECK(error_of([&] { l.set_shard(3, 3); }) == "[ms.value_error] DataLoader.set_shard: rank 3 is out of range for a world of 3");
}

namespace {

struct Data {
  Tensor<float> x;
  Tensor<std::int64_t> y;
};
/// The global batch of step s: 32 rows per rank, the same on every rank.
Data global_batch(int step, std::int64_t in, std::int64_t classes) {
  const std::int64_t rows = 32 * W();
  ms::manual_seed(1000 + static_cast<std::uint64_t>(step));
  Tensor<float> x = ms::randn<float>(Shape{rows, in});
  Tensor<std::int64_t> y = ms::randint<std::int64_t>(0, classes, Shape{rows});
  return {x, y};
}
Data local_part(const Data& d) {
  return {Tensor<float>(d.x.slice(0, 32 * R(), 32 * R() + 32).contiguous()),
          Tensor<std::int64_t>(d.y.slice(0, 32 * R(), 32 * R() + 32).contiguous())};
}

double max_rel_diff(const std::vector<Tensor<float>>& a, const std::vector<Tensor<float>>& b) {
  double worst = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    auto va = a[k].to_vector(), vb = b[k].to_vector();
    for (std::size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(va[i]) - vb[i]) / (1e-3 + std::abs(static_cast<double>(vb[i]))));
  }
  return worst;
}

/// Trains `steps` steps of an MLP with DataParallel (32 rows per rank) and, on each rank
/// alone, the same MLP on the whole global batch; returns the largest relative difference
/// of the parameters.
double equivalence(bool captured, std::int64_t bucket_bytes, int steps, std::size_t* buckets, bool overlap,
                   std::vector<Tensor<float>>* params) {
  const std::int64_t in = 12, classes = 5;
  ms::manual_seed(static_cast<std::uint64_t>(11 + R()));  // different inits: broadcast must fix them
  auto model = ms::nn::mlp(in, {16, 16}, classes);
  dist::DataParallel dp(model, {.bucket_bytes = bucket_bytes, .overlap = overlap});
  *buckets = dp.buckets().size();
  auto ref = ms::nn::mlp(in, {16, 16}, classes);
  ref->load_state_dict(model->state_dict());
  ms::optim::Adam opt(model->parameters(), 1e-2);
  ms::optim::Adam ref_opt(ref->parameters(), 1e-2);
  auto step = [&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
    Tensor<float> loss = ms::cross_entropy(dp(x), y);
    opt.step(dp.reduce_gradients(ms::autograd::grad(loss, dp.parameters())));
    return dist::all_reduce(loss, ReduceOp::mean);
  };
  auto jitted = ms::jit(step);
  for (int s = 0; s < steps; ++s) {
    Data g = global_batch(s, in, classes);
    Data l = local_part(g);
    Tensor<float> loss = captured ? jitted(l.x, l.y) : step(l.x, l.y);
    Tensor<float> ref_loss = ms::cross_entropy((*ref)(g.x), g.y);
    ref_opt.step(ms::autograd::grad(ref_loss, ref->parameters_any()));
    CHECK(loss.item() == Approx(ref_loss.item()).epsilon(1e-5));
  }
  if (captured) {
    CHECK(jitted.num_traces() == 1);
    std::size_t reduces = 0, starts = 0, waits = 0;
    for (const auto& node : jitted.executable()->graph().nodes()) {
      if (node.op == &dist::all_reduce_op) ++reduces;
      if (node.op == &dist::all_reduce_start_op) ++starts;
      if (node.op == &dist::all_reduce_wait_op) ++waits;
    }
    if (overlap) {  // one start and one wait per bucket; the loss's all_reduce
      CHECK(reduces == 1);
      CHECK(starts == dp.buckets().size());
      CHECK(waits == dp.buckets().size());
    } else {
      CHECK(reduces == dp.buckets().size() + 1);  // one per bucket, plus the loss
      CHECK(starts == 0);
    }
  }
  CHECK(dist::async_in_flight() == 0);
  *params = model->parameters();
  return max_rel_diff(model->parameters(), ref->parameters());
}

}  // namespace

TEST_CASE("DataParallel: 32 rows per rank train like one process on the global batch (float32)", "[dist][train]") {
  std::size_t buckets = 0;
  for (bool captured : {false, true}) {
    for (std::int64_t bucket_bytes : {std::int64_t{25} << 20, std::int64_t{300}}) {
      std::vector<Tensor<float>> plain, overlapped;
      for (bool overlap : {false, true}) {
        INFO((captured ? "captured" : "eager") << ", bucket_bytes " << bucket_bytes << ", overlap " << overlap);
        const double d = equivalence(captured, bucket_bytes, 6, &buckets, overlap, overlap ? &overlapped : &plain);
        if (R() == 0)
          std::printf("equivalence %s bucket_bytes=%lld buckets=%zu overlap=%d world=%d: max relative parameter "
                      "difference %.3g\n",
                      captured ? "captured" : "eager", static_cast<long long>(bucket_bytes), buckets, overlap ? 1 : 0,
                      W(), d);
        CHECK(d < 1e-5);
        CHECK(buckets == (bucket_bytes > 1000 ? 1u : 6u));  // six parameter tensors, each over 300 bytes
      }
      // Overlapped and blocking: the same sums (MPI_Iallreduce and MPI_Allreduce may order a
      // sum of three ranks differently, so not bit-identical beyond two).
      const double d = max_rel_diff(overlapped, plain);
      if (R() == 0) std::printf("overlapped vs blocking world=%d: max relative parameter difference %.3g\n", W(), d);
      CHECK(d < 1e-6);
    }
  }
}

TEST_CASE("all_reduce_start / all_reduce_wait: packed buffer, values, typed errors", "[dist][async]") {
  Tensor<double> a = rank_tensor<double>(R(), 5);
  Tensor<double> b = rank_tensor<double>(R(), 6);
  dist::reset_async_stats();
  AnyTensor buf = dist::all_reduce_start({a, b.reshape({2, 3})}, ReduceOp::sum);
  CHECK(buf.shape() == Shape{11});
  CHECK(dist::async_in_flight() == 1);
  Tensor<double> r = Tensor<double>(dist::all_reduce_wait(buf));
  CHECK(dist::async_in_flight() == 0);
  auto v = r.to_vector();
  for (std::int64_t i = 0; i < 5; ++i) CHECK(v[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::sum, i)));
  for (std::int64_t i = 0; i < 6; ++i) CHECK(v[static_cast<std::size_t>(5 + i)] == Approx(reference(ReduceOp::sum, i)));
  AnyTensor mb = dist::all_reduce_start({rank_tensor<float>(R(), 4)}, ReduceOp::mean);
  auto m = Tensor<float>(dist::all_reduce_wait(mb)).to_vector();
  for (std::int64_t i = 0; i < 4; ++i) CHECK(m[static_cast<std::size_t>(i)] == Approx(reference(ReduceOp::mean, i)));
  CHECK(dist::async_stats().started == 2);
  CHECK(dist::async_stats().done_before_wait + dist::async_stats().waited == 2);
  // Typed errors, the same on every rank (no collective is started).
  CHECK(error_of([&] { dist::all_reduce_wait(a); }) ==
        fmt::format("[ms.dist_error] all_reduce_wait: rank {}: no all-reduce is in flight on this (5,) float64 buffer "
                    "(wait on the output of all_reduce_start, once, on the thread that started it)",
                    R()));
  CHECK(error_of([&] { dist::all_reduce_start({a, rank_tensor<float>(R(), 2)}); }) ==
        "[ms.dtype_error] all_reduce_start: every tensor must have one dtype; input 0 is (5,) float64, input 1 is (2,) "
        "float32");
  CHECK(error_of([&] { dist::all_reduce_start({rank_tensor<std::int32_t>(R(), 2)}, ReduceOp::mean); }) ==
        "[ms.dtype_error] all_reduce_start: reduction mean needs a floating dtype, got (2,) int32");
  CHECK(error_of([&] { dist::all_reduce_wait(ms::zeros<float>(Shape{2, 2})); }) ==
        "[ms.shape_error] all_reduce_wait: takes the 1-d buffer made by all_reduce_start, got (2, 2) float32");
  CHECK(!ms::ops::registry().get("all_reduce_start").differentiable());
}

TEST_CASE("all_reduce_start / wait in a captured graph: kept apart, not merged, buffer not reused",
          "[dist][async][graph]") {
  // Two starts on equal inputs (CSE must not merge them), elementwise work of the buffer's
  // size between start and wait (the planner must not put it in the buffer in flight).
  auto f = ms::jit([](const Tensor<float>& x) {
    AnyTensor b1 = dist::all_reduce_start({x * 2.0f}, ReduceOp::sum);
    AnyTensor b2 = dist::all_reduce_start({x * 2.0f}, ReduceOp::sum);
    Tensor<float> t = ms::exp(x) * 3.0f + x;
    Tensor<float> u = t * t - 1.0f;
    Tensor<float> r1 = Tensor<float>(dist::all_reduce_wait(b1));
    Tensor<float> r2 = Tensor<float>(dist::all_reduce_wait(b2));
    return r1 + r2 + u * 0.0f;
  });
  for (int rep = 0; rep < 3; ++rep) {
    Tensor<float> x = ms::full<float>(Shape{64}, 0.25f * static_cast<float>(R() + rep));
    float sum_x = 0;
    for (int r = 0; r < W(); ++r) sum_x += 0.25f * static_cast<float>(r + rep);
    auto got = f(x).to_vector();
    CHECK(got[0] == Approx(4 * sum_x));
    CHECK(got[63] == Approx(4 * sum_x));
  }
  CHECK(f.num_traces() == 1);
  CHECK(dist::async_in_flight() == 0);
  const auto& nodes = f.executable()->graph().nodes();
  std::vector<std::size_t> starts, waits;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].op == &dist::all_reduce_start_op) starts.push_back(k);
    if (nodes[k].op == &dist::all_reduce_wait_op) waits.push_back(k);
  }
  REQUIRE(starts.size() == 2);
  REQUIRE(waits.size() == 2);
  CHECK(starts[1] < waits[0]);  // both launched before either is waited for
  // In a replay each wait writes its result over its own buffer (planned in place: no copy).
  struct InPlace : ms::ops::OpObserver {
    int waits = 0, in_place = 0;
    std::uint64_t begin(const ms::ops::OpDef&, std::span<const AnyTensor>, const ms::ops::Attrs&,
                        const ms::ops::OpCallInfo&) override {
      return 0;
    }
    void end(std::uint64_t, const ms::ops::OpDef& op, std::span<const AnyTensor> in, const ms::ops::Attrs&,
             std::span<const AnyTensor> out, const ms::ops::OpCallInfo&) override {
      if (&op != &dist::all_reduce_wait_op) return;
      ++waits;
      if (out[0].raw_data() == in[0].raw_data()) ++in_place;
    }
    bool needs_values() const override { return false; }
  } seen;
  {
    ms::ops::ObserverScope scope(&seen);
    f(ms::full<float>(Shape{64}, 1.0f));
  }
  CHECK(seen.waits == 2);
  CHECK(seen.in_place == 2);
}

namespace {
/// The ops one rank runs, in order (an observer, as the profiler is).
struct OpOrder : ms::ops::OpObserver {
  std::vector<const ms::ops::OpDef*> ops;
  std::uint64_t begin(const ms::ops::OpDef& op, std::span<const AnyTensor>, const ms::ops::Attrs&,
                      const ms::ops::OpCallInfo&) override {
    ops.push_back(&op);
    return 0;
  }
  void end(std::uint64_t, const ms::ops::OpDef&, std::span<const AnyTensor>, const ms::ops::Attrs&,
           std::span<const AnyTensor>, const ms::ops::OpCallInfo&) override {}
  bool needs_values() const override { return false; }
};
/// Positions of the first all_reduce_start, of the last matmul (backward's last gradient
/// op: the first layer's weight) and of the first all_reduce_wait in a list of ops.
struct Positions {
  std::ptrdiff_t first_start = -1, last_matmul = -1, first_wait = -1, starts = 0;
};
template <class Range, class OpOf>
Positions positions(const Range& r, OpOf op_of) {
  Positions p;
  std::ptrdiff_t k = 0;
  for (const auto& e : r) {
    const ms::ops::OpDef* op = op_of(e);
    if (op == &dist::all_reduce_start_op) {
      if (p.first_start < 0) p.first_start = k;
      ++p.starts;
    }
    if (op == &dist::all_reduce_wait_op && p.first_wait < 0) p.first_wait = k;
    if (op->category == ms::ops::Category::linalg) p.last_matmul = k;
    ++k;
  }
  return p;
}
}  // namespace

TEST_CASE("DataParallel overlap: bucket all-reduces start during backward, eager and captured",
          "[dist][train][async]") {
  const std::int64_t in = 12, classes = 5;
  ms::manual_seed(7);
  auto model = ms::nn::mlp(in, {16, 16}, classes);
  dist::DataParallel dp(model, {.bucket_bytes = 300});  // six buckets, one per parameter
  REQUIRE(dp.buckets().size() == 6);
  CHECK(dp.overlapping());
  Data l = local_part(global_batch(0, in, classes));
  // Eager: the ops in the order they ran.
  OpOrder order;
  dist::reset_async_stats();
  std::vector<AnyTensor> avg;
  {
    ms::ops::ObserverScope scope(&order);
    Tensor<float> loss = ms::cross_entropy(dp(l.x), l.y);
    avg = dp.reduce_gradients(ms::autograd::grad(loss, dp.parameters()));
  }
  Positions e = positions(order.ops, [](const ms::ops::OpDef* op) { return op; });
  INFO("eager: first start " << e.first_start << ", last matmul " << e.last_matmul << ", first wait " << e.first_wait);
  CHECK(e.starts == 6);
  CHECK(e.first_start >= 0);
  CHECK(e.first_start < e.last_matmul);  // the first bucket is in flight while backward computes
  CHECK(e.last_matmul < e.first_wait);   // the waits come after backward, where the gradients are used
  const dist::AsyncStats st = dist::async_stats();
  CHECK(st.started == 6);
  if (W() > 1) CHECK(st.polls > 0);  // MPI_Test between backward's ops
  CHECK(dist::async_in_flight() == 0);
  // The averaged gradients equal the blocking path's (overlap off).
  dist::DataParallel plain(model, {.bucket_bytes = 300, .overlap = false});
  Tensor<float> loss2 = ms::cross_entropy(plain(l.x), l.y);
  std::vector<AnyTensor> ref = plain.reduce_gradients(ms::autograd::grad(loss2, plain.parameters()));
  for (std::size_t k = 0; k < ref.size(); ++k) {
    auto a = Tensor<float>(avg[k]).to_vector(), b = Tensor<float>(ref[k]).to_vector();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-6).margin(1e-9));
  }
  // Captured: the replayed graph launches each bucket right after its last gradient and
  // waits where the optimizer reads the averages; the replay polls in between.
  ms::optim::Adam opt(model->parameters(), 1e-3);
  auto step = ms::jit([&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
    Tensor<float> loss = ms::cross_entropy(dp(x), y);
    opt.step(dp.reduce_gradients(ms::autograd::grad(loss, dp.parameters())));
    return loss;
  });
  step(l.x, l.y);
  dist::reset_async_stats();
  step(l.x, l.y);
  REQUIRE(step.num_replays() == 1);
  Positions c = positions(step.executable()->graph().nodes(), [](const ms::graph::Node& n) { return n.op; });
  INFO("captured: first start " << c.first_start << ", last matmul " << c.last_matmul << ", first wait "
                                 << c.first_wait);
  CHECK(c.starts == 6);
  CHECK(c.first_start < c.last_matmul);
  CHECK(c.last_matmul < c.first_wait);
  CHECK(dist::async_stats().started == 6);
  if (W() > 1) CHECK(dist::async_stats().polls > 0);
  CHECK(dist::async_in_flight() == 0);
}

TEST_CASE("DataParallel overlap: a gradient changed after backward is a typed error", "[dist][train][async]") {
  ms::manual_seed(8);
  auto model = ms::nn::mlp(4, {3}, 2);
  dist::DataParallel dp(model, {.bucket_bytes = 16});
  Tensor<float> x = ms::full<float>(Shape{2, 4}, 0.5f);
  Tensor<std::int64_t> y = ms::zeros<std::int64_t>(Shape{2});
  std::vector<AnyTensor> g = ms::autograd::grad(ms::cross_entropy(dp(x), y), dp.parameters());
  g[0] = ms::ops::mul(g[0], 2.0);  // clipped after backward: its bucket was already on its way
  CHECK(error_of([&] { dp.reduce_gradients(g); }) ==
        fmt::format("[ms.value_error] DataParallel.reduce_gradients: the gradient of '1.weight' is not the one "
                    "backward produced, whose all-reduce started during backward (rank {}); pass the gradients as "
                    "backward returned them, or set DataParallelOptions::overlap = false to change them first",
                    R()));
  CHECK(dist::async_in_flight() == 0);  // every bucket was waited for before the error
  // The next step works.
  std::vector<AnyTensor> g2 = ms::autograd::grad(ms::cross_entropy(dp(x), y), dp.parameters());
  CHECK(dp.reduce_gradients(g2).size() == 4);
  // sync_gradients after an eager backward(): .grad holds the mean over the ranks.
  ms::cross_entropy(dp(x), y).backward();
  dp.sync_gradients();
  CHECK(dist::async_in_flight() == 0);
}

TEST_CASE("float64 data parallelism: per-rank gradients averaged equal the global batch's", "[dist][train]") {
  // A two-layer network in float64 (modules are float32): y = tanh(x W1) W2, squared loss.
  const std::int64_t in = 6, hid = 8;
  ms::manual_seed(5);
  Tensor<double> w1 = ms::randn<double>(Shape{in, hid});
  Tensor<double> w2 = ms::randn<double>(Shape{hid, 1});
  Tensor<double> v1 = w1.clone(), v2 = w2.clone();
  for (auto* t : {&w1, &w2, &v1, &v2}) t->requires_grad_();
  auto loss_of = [](const Tensor<double>& x, const Tensor<double>& y, const Tensor<double>& a, const Tensor<double>& b) {
    Tensor<double> d = ms::matmul(ms::tanh(ms::matmul(x, a)), b) - y;
    return ms::mean(d * d);
  };
  double worst = 0;
  for (int s = 0; s < 5; ++s) {
    ms::manual_seed(50 + static_cast<std::uint64_t>(s));
    Tensor<double> x = ms::randn<double>(Shape{32 * W(), in});
    Tensor<double> y = ms::randn<double>(Shape{32 * W(), 1});
    Tensor<double> xl = x.slice(0, 32 * R(), 32 * R() + 32).contiguous(), yl = y.slice(0, 32 * R(), 32 * R() + 32).contiguous();
    auto gl = ms::autograd::grad(loss_of(xl, yl, w1, w2), {w1, w2});
    auto gg = ms::autograd::grad(loss_of(x, y, v1, v2), {v1, v2});
    ms::NoGradGuard no;
    for (int k = 0; k < 2; ++k) {
      Tensor<double> avg = dist::all_reduce(Tensor<double>(gl[static_cast<std::size_t>(k)]), ReduceOp::mean);
      auto a = avg.to_vector();
      auto b = Tensor<double>(gg[static_cast<std::size_t>(k)]).to_vector();
      for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1e-12 + std::abs(b[i])));
      Tensor<double>& p = k == 0 ? w1 : w2;
      Tensor<double>& q = k == 0 ? v1 : v2;
      p.sub_(avg * 0.1);
      q.sub_(Tensor<double>(gg[static_cast<std::size_t>(k)]) * 0.1);
    }
  }
  if (R() == 0) std::printf("float64 equivalence world=%d: max relative gradient difference %.3g\n", W(), worst);
  CHECK(worst < 1e-10);
  CHECK(Tensor<double>(ms::max(ms::abs(w1 - v1))).item() < 1e-12);
}

TEST_CASE("DataParallel reports parameters that differ between ranks, with both shapes", "[dist][train]") {
  if (W() == 1) return;
  auto model = ms::nn::mlp(4, {R() == 0 ? 8 : 9}, 2);
  std::string e = error_of([&] { dist::DataParallel dp(model); });
  if (R() == 0)
    CHECK(e == "[ms.dist_error] DataParallel: parameter 0 ('1.weight') has shape (9, 4) on rank 1 but (8, 4) on rank 0");
  else
    CHECK(e == fmt::format("[ms.dist_error] DataParallel: parameter 0 ('1.weight') has shape (8, 4) on rank 0 but (9, "
                           "4) on rank {}",
                           R()));
}

TEST_CASE("BatchNorm running statistics are averaged across ranks; metrics reduce", "[dist][train]") {
  auto bn = std::make_shared<ms::nn::BatchNorm2d>(3);
  dist::DataParallel dp(bn);
  bn->running_mean.copy_(ms::full<float>(Shape{3}, static_cast<float>(R())));
  bn->running_var.copy_(ms::full<float>(Shape{3}, static_cast<float>(2 * R() + 1)));
  dp.sync_buffers();
  CHECK(bn->running_mean.to_vector()[0] == Approx((W() - 1) / 2.0));
  CHECK(bn->running_var.to_vector()[2] == Approx(static_cast<double>(W())));
  CHECK(dist::reduce_value(std::int64_t{R() + 1}) == W() * (W() + 1) / 2);
  CHECK(dist::reduce_value(0.5 * R(), ReduceOp::max) == 0.5 * (W() - 1));
}

TEST_CASE("checkpoints: rank 0 writes atomically, every rank can load; a failed write leaves nothing", "[dist][io]") {
  // One path for the whole job: rank 0's process id, broadcast.
  Tensor<std::int64_t> pid = dist::broadcast(ms::full<std::int64_t>(Shape{1}, static_cast<std::int64_t>(::getpid())), 0);
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ms_dist_ckpt_{}", pid.item());
  if (R() == 0) std::filesystem::create_directories(dir);
  dist::barrier();
  ms::manual_seed(3 + static_cast<std::uint64_t>(R()));
  auto model = ms::nn::mlp(3, {4}, 2);
  dist::DataParallel dp(model);
  dist::save_checkpoint(*model, dir / "model.safetensors");
  auto other = ms::nn::mlp(3, {4}, 2);
  ms::nn::load(*other, dir / "model.safetensors");
  CHECK(max_rel_diff(other->parameters(), model->parameters()) == 0.0);
  std::string e = error_of([&] { dist::save_checkpoint(*model, dir / "missing" / "model.safetensors"); });
  CHECK(e.rfind("[ms.io_error] save_checkpoint: rank 0 could not write", 0) == 0);
  dist::barrier();
  if (R() == 0) {
    std::vector<std::string> left;
    for (auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename().string());
    CHECK(left == std::vector<std::string>{"model.safetensors"});  // no temporary, no partial file
    std::filesystem::remove_all(dir);
  }
  dist::barrier();
}

namespace {
/// The fault scenarios of ctest's dist.fault.* tests; each must end the whole job.
int run_fault(const std::string& kind) {
  dist::Context ctx;
  Tensor<float> x = ms::ones<float>(Shape{16});
  for (int step = 0; step < 1000; ++step) {
    if (step == 3 && R() == 1) {
      if (kind == "throw") MS_THROW(ValueError, "injected fault on rank 1");
      if (kind == "kill") std::raise(SIGKILL);
      if (kind == "timeout") {  // skips the collective and waits: rank 0 must time out
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return 0;
      }
    }
    x = dist::all_reduce(x, ReduceOp::mean);
  }
  std::printf("fault %s: the job did not fail\n", kind.c_str());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--fault") return run_fault(argv[2]);
  dist::Context ctx(&argc, &argv);
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const int failed = session.run();
  // Every rank reports the job's result: a failure on any rank fails them all.
  const std::int64_t worst = dist::reduce_value(std::int64_t{failed}, ReduceOp::max);
  if (R() == 0) std::printf("ms_dist_tests: %d rank(s), failures on the worst rank: %lld\n", W(), static_cast<long long>(worst));
  return worst == 0 ? 0 : 1;
}
