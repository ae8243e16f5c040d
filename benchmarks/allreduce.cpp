// Bus bandwidth of ms::dist::all_reduce against raw MPI_Allreduce on the same buffers in the
// same run, float32 sum, sizes 4 KB to 64 MB, two pairs:
//   in place:     ms::dist::all_reduce_(x)         vs MPI_Allreduce(MPI_IN_PLACE, buf, ...)
//   out of place: y = ms::dist::all_reduce(x)      vs MPI_Allreduce(send, recv, ...)
//   non-blocking: all_reduce_wait(all_reduce_start({x})) vs MPI_Iallreduce + MPI_Wait
// (the out-of-place op returns a new tensor per call, as any op does; the raw call reuses
// one receive buffer, so that pair also shows what the allocation costs). Run under mpirun:
//
//   mpirun -np 2 build/bin/allreduce          # as root: add --allow-run-as-root --oversubscribe
//
// Google Benchmark picks iteration counts per process, which a collective cannot do: both
// sides here run a fixed count per size, chosen on rank 0 and broadcast, and the two sides
// alternate over 5 rounds (best of each), so that a busy machine slows both alike. Bus
// bandwidth is NCCL's definition, bytes * 2 (n - 1) / n / time. Rank 0 prints `name value
// unit` lines and, per size, `ratio allreduce_inplace/<bytes> ours/peer X.XX` and
// `ratio allreduce/<bytes> ours/peer X.XX` (time ratios: below 1, ours is faster), then the
// bus-bandwidth ratios `ratio allreduce_inplace/<bytes>:busbw ours/peer X.XX`. Built
// without MPI (no ms::dist target) it says so and exits.

#include <ms/dist.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
#if MS_DIST_MPI
  ms::dist::Context ctx(&argc, &argv);
  const int n = ms::dist::world_size();
  const bool main_rank = ms::dist::rank() == 0;
  if (n < 2 && main_rank) std::printf("# allreduce: one process; run it under mpirun -np 2\n");
  using clock = std::chrono::steady_clock;
  struct Line {
    std::string name;
    double ours, peer;
  };
  std::vector<Line> lines;
  for (std::int64_t bytes = 4 << 10; bytes <= (std::int64_t{64} << 20); bytes *= 4) {
    const std::int64_t count = bytes / 4;
    ms::Tensor<float> x = ms::full<float>(ms::Shape{count}, 1.0f);
    std::vector<float> raw(static_cast<std::size_t>(count), 1.0f), recv(static_cast<std::size_t>(count));
    // About 0.1 s per side per round, at least 5 iterations.
    int iters = static_cast<int>(std::clamp<std::int64_t>((std::int64_t{1} << 27) / (bytes * 4), 5, 1000));
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    auto once = [&](auto&& f) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = clock::now();
      for (int i = 0; i < iters; ++i) f();
      double s = std::chrono::duration<double>(clock::now() - t0).count() / iters;
      MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return s;
    };
    auto pair = [&](auto&& ours_f, auto&& peer_f) {
      ours_f();  // warm-up
      peer_f();
      double ours = 1e30, peer = 1e30;
      for (int round = 0; round < 5; ++round) {
        ours = std::min(ours, once(ours_f));
        peer = std::min(peer, once(peer_f));
      }
      return std::pair{ours, peer};
    };
    const int c = static_cast<int>(count);
    auto [in_ours, in_peer] = pair([&] { ms::dist::all_reduce_(x, ms::dist::ReduceOp::sum); },
                                   [&] { MPI_Allreduce(MPI_IN_PLACE, raw.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    ms::Tensor<float> y;
    auto [out_ours, out_peer] =
        pair([&] { y = ms::dist::all_reduce(x, ms::dist::ReduceOp::sum); },
             [&] { MPI_Allreduce(raw.data(), recv.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    // Non-blocking: the start/wait pair that DataParallel overlaps with backward (it packs
    // the tensor into its buffer and copies the result out) against MPI_Iallreduce + MPI_Wait.
    auto [async_ours, async_peer] = pair(
        [&] {
          ms::NoGradGuard no_grad;
          y = ms::Tensor<float>(ms::dist::all_reduce_wait(ms::dist::all_reduce_start({x}, ms::dist::ReduceOp::sum)));
        },
        [&] {
          MPI_Request req;
          MPI_Iallreduce(MPI_IN_PLACE, raw.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
        });
    const std::string b = std::to_string(bytes);
    lines.push_back({"allreduce_inplace/" + b, in_ours, in_peer});
    lines.push_back({"allreduce/" + b, out_ours, out_peer});
    lines.push_back({"allreduce_async/" + b, async_ours, async_peer});
  }
  if (main_rank) {
    const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    std::printf("# name value unit (%d processes)\n", n);
    for (const Line& l : lines) {
      const double bytes = std::stod(l.name.substr(l.name.find('/') + 1));
      std::printf("ms_%s %.4g us\n", l.name.c_str(), l.ours * 1e6);
      std::printf("mpi_%s %.4g us\n", l.name.c_str(), l.peer * 1e6);
      std::printf("ms_%s:busbw %.4g GB/s\n", l.name.c_str(), bytes * factor / l.ours / 1e9);
      std::printf("mpi_%s:busbw %.4g GB/s\n", l.name.c_str(), bytes * factor / l.peer / 1e9);
    }
    std::printf("# ratio name ours/peer time-ratio (below 1: ours is faster)\n");
    for (const Line& l : lines) std::printf("ratio %s ours/peer %.2f\n", l.name.c_str(), l.ours / l.peer);
    std::printf("# ratio name:busbw ours/peer bus-bandwidth ratio (the issue's target: >= 0.95 at >= 1 MB)\n");
    for (const Line& l : lines) std::printf("ratio %s:busbw ours/peer %.2f\n", l.name.c_str(), l.peer / l.ours);
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("# allreduce: built without MPI (install libopenmpi-dev and link ms::dist)\n");
  return 0;
#endif
}
