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
// included). Then the data-parallel step with four gradient buckets of at most 256 KiB,
// all-reduced after backward (DataParallelOptions::overlap = false) and started during
// backward as each bucket's gradients are ready (overlap). Prints `name value unit` lines,
// `ratio train_step_mlp/128 ours/peer X.XX` (2 x 1 time over 1 x 2 time), the scaling
// efficiency (1 x 2 time / 2 x 1 time) and `ratio train_step_mlp/128/overlap ours/peer X.XX`
// (overlapped over after-backward).

#include <ms/dist.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;

/// How a step averages its gradients: not at all (one rank alone), or with DataParallel.
struct Mode {
  bool data_parallel = false;
  std::int64_t bucket_bytes = 25 << 20;
  bool overlap = true;
};

/// Seconds per captured step (best of 5 rounds of `iters`), for one rank's batch; the share
/// of bucket all-reduces already complete when the step waited for them in `done_share`.
double time_step(std::int64_t batch, Mode mode, int iters, double* done_share = nullptr) {
  const bool data_parallel = mode.data_parallel;
  ms::manual_seed(0);
  auto model = ms::nn::mlp(784, {256, 256}, 10);
  std::optional<ms::dist::DataParallel> dp;
  if (data_parallel)
    dp.emplace(model, ms::dist::DataParallelOptions{.bucket_bytes = mode.bucket_bytes, .overlap = mode.overlap});
  ms::optim::Adam opt(model->parameters(), 1e-3);
  std::vector<ms::AnyTensor> params = model->parameters_any();
  ms::Tensor<float> x = ms::rand<float>({batch, 1, 28, 28});
  ms::Tensor<std::int64_t> y = ms::randint<std::int64_t>(0, 10, {batch});
  auto step = ms::jit([&](const ms::Tensor<float>& xb, const ms::Tensor<std::int64_t>& yb) {
    ms::Tensor<float> loss = ms::cross_entropy(dp ? (*dp)(xb) : (*model)(xb), yb);
    std::vector<ms::AnyTensor> grads = ms::autograd::grad(loss, params);
    if (dp) grads = dp->reduce_gradients(grads);
    opt.step(grads);
    return loss;
  });
  for (int i = 0; i < 3; ++i) step(x, y);  // the trace and warm-up
  ms::dist::reset_async_stats();
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    if (data_parallel) ms::dist::barrier(ms::dist::world());
    auto t0 = clock_type::now();
    for (int i = 0; i < iters; ++i) step(x, y);
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count() / iters);
  }
  const ms::dist::AsyncStats st = ms::dist::async_stats();
  if (done_share)
    *done_share = st.started ? static_cast<double>(st.done_before_wait) / static_cast<double>(st.started) : 0;
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
    single = time_step(kGlobalBatch, Mode{}, kIters);
  }
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // 2 ranks x 1 thread: the data-parallel step, and the same step without communication.
  ms::set_num_threads(1);
  auto timed = [&](Mode m, double* done = nullptr) {
    return ms::dist::reduce_value(time_step(kGlobalBatch / 2, m, kIters, done), ms::dist::ReduceOp::max);
  };
  const double dp = timed(Mode{.data_parallel = true});
  const double local = timed(Mode{});
  // Four buckets of at most 256 KiB (output layer and second bias; second weight; first
  // bias; first weight): the first three can travel while the first layer's gradients are
  // computed. The same buckets all-reduced after backward, then started during it.
  double done_share = 0;
  const double blocking = timed(Mode{.data_parallel = true, .bucket_bytes = 256 << 10, .overlap = false});
  const double overlapped = timed(Mode{.data_parallel = true, .bucket_bytes = 256 << 10, .overlap = true}, &done_share);
  if (rank == 0) {
    std::printf("# name value unit\n");
    std::printf("ms_captured_mlp/128/1rank_x_2threads %.4g us\n", single * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread %.4g us\n", dp * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:steps_per_s %.4g steps/s\n", 1.0 / dp);
    std::printf("ms_captured_mlp/128/1rank_x_2threads:steps_per_s %.4g steps/s\n", 1.0 / single);
    std::printf("ms_captured_mlp/64/1rank_x_1thread_no_allreduce %.4g us\n", local * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:scaling_efficiency %.3g\n", single / dp);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread:comm_share %.3g\n", std::max(0.0, (dp - local) / dp));
    std::printf("ms_captured_mlp/128/2ranks_x_1thread/buckets_256k/after_backward %.4g us\n", blocking * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread/buckets_256k/overlapped %.4g us\n", overlapped * 1e6);
    std::printf("ms_captured_mlp/128/2ranks_x_1thread/buckets_256k/overlapped:comm_share %.3g\n",
                std::max(0.0, (overlapped - local) / overlapped));
    std::printf("ms_captured_mlp/128/2ranks_x_1thread/buckets_256k/overlapped:done_at_wait %.3g (rank 0's buckets)\n",
                done_share);
    std::printf("# ratio name ours/peer time-ratio (ours: 2 ranks x 1 thread; peer: 1 rank x 2 threads)\n");
    std::printf("ratio train_step_mlp/128 ours/peer %.2f\n", dp / single);
    std::printf("# ratio name ours/peer time-ratio (ours: buckets overlapped with backward; peer: the same buckets "
                "all-reduced after backward)\n");
    std::printf("ratio train_step_mlp/128/overlap ours/peer %.2f\n", overlapped / blocking);
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("# train_step_dist: built without MPI (install libopenmpi-dev and link ms::dist)\n");
  return 0;
#endif
}
