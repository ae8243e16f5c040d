// The 2-process line of benchmarks/train_step: the captured MLP step of
// examples/fashion_mnist.cpp (784-256-256-10, cross-entropy, backward, Adam) at global
// batch 128, on 2 ranks x 1 thread (64 rows each, gradients averaged by
// ms::dist::DataParallel inside the captured step) against 1 rank x 2 threads (128 rows),
// measured in the same run. Run under mpirun with 2 processes:
//
//   mpirun -np 2 build/bin/train_step_dist     # as root: add --allow-run-as-root --oversubscribe
//
// First rank 0 times the 1 x 2-thread step while rank 1 sleeps (it polls a non-blocking
// barrier every millisecond, so it leaves both cores to rank 0); then both ranks time the
// data-parallel step, and the same step without the gradient all-reduce (each rank alone):
// the difference is the share of the step spent communicating (waiting for the other rank
// included). Prints `name value unit` lines, `ratio train_step_mlp/128 ours/peer X.XX`
// (2 x 1 time over 1 x 2 time) and the scaling efficiency (1 x 2 time / 2 x 1 time).

#include <ms/dist.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;

/// Seconds per captured step (best of 5 rounds of `iters`), for one rank's batch.
double time_step(std::int64_t batch, bool data_parallel, int iters) {
  ms::manual_seed(0);
  auto model = ms::nn::mlp(784, {256, 256}, 10);
  std::optional<ms::dist::DataParallel> dp;
  if (data_parallel) dp.emplace(model);
  ms::optim::Adam opt(model->parameters(), 1e-3);
  std::vector<ms::AnyTensor> params = model->parameters_any();
  ms::Tensor<float> x = ms::rand<float>({batch, 1, 28, 28});
  ms::Tensor<std::int64_t> y = ms::randint<std::int64_t>(0, 10, {batch});
  auto step = ms::jit([&](const ms::Tensor<float>& xb, const ms::Tensor<std::int64_t>& yb) {
    ms::Tensor<float> loss = ms::cross_entropy((*model)(xb), yb);
    std::vector<ms::AnyTensor> grads = ms::autograd::grad(loss, params);
    if (dp) grads = dp->reduce_gradients(grads);
    opt.step(grads);
    return loss;
  });
  for (int i = 0; i < 3; ++i) step(x, y);  // the trace and warm-up
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    if (data_parallel) ms::dist::barrier(ms::dist::world());
    auto t0 = clock_type::now();
    for (int i = 0; i < iters; ++i) step(x, y);
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count() / iters);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
#if MS_DIST_MPI
  ms::dist::Context ctx(&argc, &argv);
  const int world = ms::dist::world_size();
  const int rank = ms::dist::rank();
  if (world != 2) {
    if (rank == 0) std::printf("# train_step_dist: run it under mpirun -np 2 (got %d processes)\n", world);
    return 0;
  }
  constexpr std::int64_t kGlobalBatch = 128;
  constexpr int kIters = 40;
  // 1 rank x 2 threads; rank 1 sleeps meanwhile.
  double single = 0;
  if (rank == 0) {
    ms::set_num_threads(2);
    single = time_step(kGlobalBatch, false, kIters);
  }
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // 2 ranks x 1 thread: the data-parallel step, and the same step without communication.
  ms::set_num_threads(1);
  const double dp = ms::dist::reduce_value(time_step(kGlobalBatch / 2, true, kIters), ms::dist::ReduceOp::max);
  const double local = ms::dist::reduce_value(time_step(kGlobalBatch / 2, false, kIters), ms::dist::ReduceOp::max);
  if (rank == 0) {
    std::printf("# name value unit\n");
    std::printf("ms_captured_mlp/128/1rank_x_2threads %.4g us\n", single * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread %.4g us\n", dp * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:steps_per_s %.4g steps/s\n", 1.0 / dp);
    std::printf("ms_captured_mlp/128/1rank_x_2threads:steps_per_s %.4g steps/s\n", 1.0 / single);
    std::printf("ms_captured_mlp/64/1rank_x_1thread_no_allreduce %.4g us\n", local * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:scaling_efficiency %.3g\n", single / dp);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:comm_share %.3g\n", std::max(0.0, (dp - local) / dp));
    std::printf("# ratio name ours/peer time-ratio (ours: 2 ranks x 1 thread; peer: 1 rank x 2 threads)\n");
    std::printf("ratio train_step_mlp/128 ours/peer %.2f\n", dp / single);
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("# train_step_dist: built without MPI (install libopenmpi-dev and link ms::dist)\n");
  return 0;
#endif
}
