// Bus bandwidth of ms::dist::all_reduce (the registered op, eager: tensor in, new tensor
// out) against raw MPI_Allreduce on the same buffers in the same run, float32 sum, sizes
// 4 KB to 64 MB. Run under mpirun:
//
//   mpirun -np 2 build/bin/allreduce
//
// Google Benchmark picks iteration counts per process, which a collective cannot do: both
// sides here run a fixed count per size, chosen on rank 0 and broadcast. Bus bandwidth is
// NCCL's definition, bytes * 2 (n - 1) / n / time. Rank 0 prints `name value unit` lines
// and, per size, `ratio allreduce/<bytes> ours/peer X.XX` (time ratio: below 1, ours is
// faster). Built without MPI (no ms::dist target) it says so and exits.

#include <ms/dist.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
#if MS_DIST_MPI
  ms::dist::Context ctx(&argc, &argv);
  const int n = ms::dist::world_size();
  const bool main_rank = ms::dist::rank() == 0;
  if (n < 2 && main_rank) std::printf("# allreduce: one process; run it under mpirun -np 2\n");
  using clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, double>> ratios;
  if (main_rank) std::printf("# name value unit\n");
  for (std::int64_t bytes = 4 << 10; bytes <= (std::int64_t{64} << 20); bytes *= 4) {
    const std::int64_t count = bytes / 4;
    ms::Tensor<float> x = ms::full<float>(ms::Shape{count}, 1.0f);
    std::vector<float> raw(static_cast<std::size_t>(count), 1.0f);
    // About 0.3 s per side per size, at least 5 iterations.
    int iters = static_cast<int>(std::clamp<std::int64_t>((std::int64_t{1} << 28) / (bytes * 4), 5, 2000));
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    auto time_it = [&](auto&& f) {
      f();  // warm-up
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = clock::now();
        for (int i = 0; i < iters; ++i) f();
        double s = std::chrono::duration<double>(clock::now() - t0).count() / iters;
        MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = std::min(best, s);
      }
      return best;
    };
    const double ours = time_it([&] { x = ms::dist::all_reduce(x, ms::dist::ReduceOp::sum); });
    const double peer = time_it([&] {
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    if (main_rank) {
      std::printf("ms_all_reduce/%lld:busbw %.4g GB/s\n", static_cast<long long>(bytes), bytes * factor / ours / 1e9);
      std::printf("mpi_allreduce/%lld:busbw %.4g GB/s\n", static_cast<long long>(bytes), bytes * factor / peer / 1e9);
      std::printf("ms_all_reduce/%lld %.4g us\n", static_cast<long long>(bytes), ours * 1e6);
      std::printf("mpi_allreduce/%lld %.4g us\n", static_cast<long long>(bytes), peer * 1e6);
      ratios.emplace_back(std::to_string(bytes), ours / peer);
    }
  }
  if (main_rank) {
    std::printf("# ratio name ours/peer time-ratio (below 1: ours is faster)\n");
    for (auto& [name, r] : ratios) std::printf("ratio allreduce/%s ours/peer %.2f\n", name.c_str(), r);
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("# allreduce: built without MPI (install libopenmpi-dev and link ms::dist)\n");
  return 0;
#endif
}
