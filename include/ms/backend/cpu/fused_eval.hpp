#pragma once
// The CPU interpreter of fused programs (graph/fused_program.hpp): evaluates a fused node's
// instructions block by block (elements kept in L1-sized buffers: kEvalBlock, or
// FusedProgram::kBlock for reductions), with
// broadcast inputs gathered per block; runs a GEMM producer first (epilogue form) or folds
// the results of each row (reduction form). Where the code generator (codegen.hpp) compiled
// the program into one loop, runs that loop instead of the instruction list.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "../../core/linkage.hpp"
#include "../../graph/fused_program.hpp"
#include "dnnl_epilogue.hpp"
#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
#include "../../core/parallel.hpp"
#include "../../ops/elementwise.hpp"
#endif

namespace ms::backend::cpu {

/// Evaluates fused program `p` on a node's inputs into its output buffer: a GEMM epilogue
/// planned as oneDNN post-ops runs as one primitive (dnnl_epilogue.hpp), anything else here.
MS_IMPL void run_fused(const graph::FusedProgram& p, std::span<const AnyTensor> in, const AnyTensor& out);

#if MS_IMPL_BODIES

/// Runs fused program `p` once: `in` are the fused node's inputs, `out` its contiguous output.
class FusedEval {
 public:
  using R = graph::FusedProgram::Reduce;
  static constexpr std::int64_t kBlock = graph::FusedProgram::kBlock;
  /// Elements per call of generated code when no input is gathered (see eval).
  static constexpr std::int64_t kCompiledChunk = 16384;
  /// Elements per block of the elementwise form's instruction list (see eval).
  static constexpr std::int64_t kEvalBlock = 1024;

  explicit FusedEval(const graph::FusedProgram& p) : p_(p) {}

  /// Evaluates the node: `in` are its inputs, `out` its (contiguous) output buffer.
  void run(std::span<const AnyTensor> in, const AnyTensor& out) const {
    if (p_.producer) {
      AnyTensor o = out;
      p_.producer->kernel(ops::KernelArgs{*p_.producer, in.first(static_cast<std::size_t>(p_.producer_inputs)),
                                       std::span<AnyTensor>(&o, 1), p_.producer_attrs});
      std::vector<AnyTensor> ext;
      ext.reserve(in.size() + 1);
      ext.push_back(out);
      for (std::size_t j = static_cast<std::size_t>(p_.producer_inputs); j < in.size(); ++j) ext.push_back(in[j]);
      eval(std::span<const AnyTensor>(ext.data(), ext.size()), out);
    } else if (p_.reduce != R::none) {
      eval_reduce(in, out);
    } else {
      eval(in, out);
    }
  }

 private:
  /// Where each external input's block comes from: a broadcast scalar, a contiguous
  /// tensor of the evaluation shape, or a gather through (broadcast) strides.
  struct Src {
    const char* base;
    std::size_t esize;
    int mode;  // 0 scalar, 1 contiguous full, 2 gather
    std::int64_t st[kMaxDims];
  };
  struct Sources {
    SmallVec<Src, 8> srcs;
    int ngather = 0;
    bool use_compiled = false;  ///< the inputs match the compiled kernel's scalar pattern
  };

  Sources sources(std::span<const AnyTensor> in, const Shape& os) const {
    Sources r;
    const int rank = os.rank();
    for (const AnyTensor& t : in) {
      Src s{};
      s.base = static_cast<const char*>(t.raw_data());
      s.esize = dtype_size(t.dtype());
      if (t.numel() == 1) s.mode = 0;
      else if (t.shape() == os && t.is_contiguous()) s.mode = 1;
      else {
        s.mode = 2;
        ++r.ngather;
        const Shape& is = t.shape();
        int lead = rank - is.rank();
        for (int d = 0; d < rank; ++d) {
          int sd = d - lead;
          s.st[d] = (sd < 0 || is[sd] == 1) ? 0 : t.strides()[sd];
        }
      }
      r.srcs.push_back(s);
    }
    if (p_.compiled && r.srcs.size() <= 64) {
      std::uint64_t scalars = 0;
      for (std::size_t j = 0; j < r.srcs.size(); ++j)
        if (r.srcs[j].mode == 0) scalars |= std::uint64_t{1} << j;
      r.use_compiled = scalars == p_.compiled_scalars;
    }
    return r;
  }

  /// Per-thread state of a block evaluation.
  struct Scratch {
    char* temps;
    char* gbuf;
    char* result;  ///< one extra block for a reduction's program result
    std::int64_t blk;  ///< elements per block (the stride of temps, gbuf and result)
    SmallVec<const void*, 8> ext;
    SmallVec<std::int64_t, 8> ext_st;
  };

  Scratch scratch(const Sources& src, bool with_result, std::int64_t blk = kBlock) const {
    const std::size_t blocks = static_cast<std::size_t>(p_.num_temps + src.ngather + (with_result ? 1 : 0));
    const std::size_t bytes = static_cast<std::size_t>(blk) * 8;
    char* base = thread_scratch(blocks * static_cast<std::size_t>(blk));
    Scratch sc{base, base + static_cast<std::size_t>(p_.num_temps) * bytes,
               base + static_cast<std::size_t>(p_.num_temps + src.ngather) * bytes, blk, {}, {}};
    sc.ext.resize(src.srcs.size(), nullptr);
    sc.ext_st.resize(src.srcs.size(), 1);
    return sc;
  }

  /// Evaluates elements [i, i + len) of the program (shape os) into dst.
  void eval_block(const Sources& src, const Shape& os, std::int64_t i, std::int64_t len, Scratch& sc, char* dst) const {
    int g = 0;
    for (std::size_t j = 0; j < src.srcs.size(); ++j) {
      const Src& s = src.srcs[j];
      if (s.mode == 0) { sc.ext[j] = s.base; sc.ext_st[j] = 0; }
      else if (s.mode == 1) { sc.ext[j] = s.base + i * static_cast<std::int64_t>(s.esize); sc.ext_st[j] = 1; }
      else {
        char* d = sc.gbuf + static_cast<std::size_t>(g++ * sc.blk) * 8;
        gather_block(s.base, s.esize, os, s.st, i, len, d);
        sc.ext[j] = d;
        sc.ext_st[j] = 1;
      }
    }
    if (src.use_compiled) {
      p_.compiled(sc.ext.data(), sc.ext_st.data(), dst, len, nullptr);
      return;
    }
    for (const graph::FusedInstr& ins : p_.instrs) {
      const void* p[ops::kMaxArity];
      std::int64_t st[ops::kMaxArity];
      for (int a = 0; a < ins.nin; ++a) {
        int sidx = ins.src[a];
        if (sidx >= 0) { p[a] = sc.temps + static_cast<std::size_t>(sidx * sc.blk) * 8; st[a] = 1; }
        else { p[a] = sc.ext[static_cast<std::size_t>(-sidx - 1)]; st[a] = sc.ext_st[static_cast<std::size_t>(-sidx - 1)]; }
      }
      void* d = ins.dst >= 0 ? static_cast<void*>(sc.temps + static_cast<std::size_t>(ins.dst * sc.blk) * 8)
                             : static_cast<void*>(dst);
      ins.fn(p, st, d, len, ins.params);
    }
  }

  /// Elementwise form: `in` broadcast to out's shape.
  void eval(std::span<const AnyTensor> in, const AnyTensor& out) const {
    const std::int64_t n = out.numel();
    if (n == 0) return;
    const Shape& os = out.shape();
    const Sources src = sources(in, os);
    char* obase = static_cast<char*>(out.raw_data());
    const std::int64_t oesize = static_cast<std::int64_t>(dtype_size(out.dtype()));
    // Generated code with nothing to gather reads its inputs in place, so it takes
    // kCompiledChunk elements a call: per 256-element block, setting up the call and the
    // loop's constants cost 7% of the fused chain's time (benchmarks/fused_chain, 16M floats).
    // The instruction list runs on kEvalBlock elements, whose temporaries stay in L1.
    const std::int64_t step = src.use_compiled && src.ngather == 0 ? kCompiledChunk : kEvalBlock;
    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      Scratch sc = scratch(src, false, kEvalBlock);
      for (std::int64_t i = b; i < e; i += step) eval_block(src, os, i, std::min(step, e - i), sc, obase + i * oesize);
    }, kBlock);
  }

  /// Reduction form: rows of reduce_inner results are summed (blocks in SIMD lanes, the
  /// row in double; see fold_block), averaged, or
  /// reduced to their maximum/minimum (a NaN propagates, as in the eager reductions).
  void eval_reduce(std::span<const AnyTensor> in, const AnyTensor& out) const {
    const std::int64_t n = numel(p_.eval_shape), inner = std::max<std::int64_t>(p_.reduce_inner, 1);
    const std::int64_t rows = out.numel();
    if (rows == 0) return;
    const Sources src = sources(in, p_.eval_shape);
    const bool is_f32 = out.dtype() == DType::f32;
    char* obase = static_cast<char*>(out.raw_data());
    parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / inner), [&](std::int64_t rb, std::int64_t re) {
      Scratch sc = scratch(src, true);
      for (std::int64_t row = rb; row < re; ++row) {
        double acc = 0;
        bool first = true;
        const std::int64_t end = std::min(n, (row + 1) * inner);
        for (std::int64_t i = row * inner; i < end; i += kBlock) {
          const std::int64_t len = std::min(kBlock, end - i);
          eval_block(src, p_.eval_shape, i, len, sc, sc.result);
          if (is_f32) fold_block(reinterpret_cast<const float*>(sc.result), len, acc, first);
          else fold_block(reinterpret_cast<const double*>(sc.result), len, acc, first);
        }
        if (p_.reduce == R::mean) acc /= static_cast<double>(inner);
        if (is_f32) reinterpret_cast<float*>(obase)[row] = static_cast<float>(acc);
        else reinterpret_cast<double*>(obase)[row] = acc;
      }
    }, 1);
  }

  /// Folds one block of results into a row's accumulator, which is a double. For f32 the
  /// block is first summed in float over 4 SIMD accumulators (a full 256-element block
  /// puts 8 terms in each lane, so at most 8 roundings of float), and the lanes are
  /// added in double; f64 blocks are summed in double the same way. (One scalar chain of
  /// dependent double adds ran at about ten cycles per element.) max and min propagate
  /// NaN like the reduce ops.
  template <class T>
  void fold_block(const T* x, std::int64_t len, double& acc, bool& first) const {
    if (len <= 0) return;
    if (p_.reduce == R::sum || p_.reduce == R::mean) {
      using V = xsimd::batch<T>;
      using D = xsimd::batch<double>;
      constexpr std::int64_t W = static_cast<std::int64_t>(V::size), WD = static_cast<std::int64_t>(D::size);
      V s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
      std::int64_t j = 0;
      for (; j + 4 * W <= len; j += 4 * W) {
        s0 += V::load_unaligned(x + j);
        s1 += V::load_unaligned(x + j + W);
        s2 += V::load_unaligned(x + j + 2 * W);
        s3 += V::load_unaligned(x + j + 3 * W);
      }
      alignas(64) T lanes[4 * W];
      s0.store_aligned(lanes);
      s1.store_aligned(lanes + W);
      s2.store_aligned(lanes + 2 * W);
      s3.store_aligned(lanes + 3 * W);
      D d(0.0);
      for (std::int64_t l = 0; l < 4 * W; l += WD) d += xsimd::load_as<double>(lanes + l, xsimd::unaligned_mode());
      double tail = 0;
      for (; j < len; ++j) tail += static_cast<double>(x[j]);
      acc += xsimd::hadd(d) + tail;
    } else if (p_.reduce == R::max || p_.reduce == R::min) {
      const bool is_max = p_.reduce == R::max;
      double a = first ? static_cast<double>(x[0]) : acc;
      for (std::int64_t j = first ? 1 : 0; j < len && a == a; ++j) {
        const double v = static_cast<double>(x[j]);
        if (v != v || (is_max ? v > a : v < a)) a = v;
      }
      acc = a;
    }
    first = false;
  }

 public:
  /// A per-thread buffer of at least `doubles` 8-byte slots, kept between calls: a heap
  /// allocation per call costs more than a small fused kernel, and a fresh block of a
  /// large size is page-faulted in again on every call.
  /// Aligned to 64 bytes: a block that straddles cache lines makes every other 32-byte
  /// load and store a split access (measured 10-15% of a fused program's time).
  static char* thread_scratch(std::size_t doubles) {
    thread_local std::vector<double> buf;
    if (buf.size() < doubles + 8) buf.resize(doubles + 8);
    const auto addr = reinterpret_cast<std::uintptr_t>(buf.data());
    return reinterpret_cast<char*>(buf.data()) + ((64 - addr % 64) % 64);
  }

  /// Copies elements [start, start + len) of the broadcast view (shape os, strides st) to dst.
  static void gather_block(const char* base, std::size_t esize, const Shape& os, const std::int64_t* st,
                           std::int64_t start, std::int64_t len, char* dst) {
    const int r = os.rank();
    std::int64_t idx[kMaxDims];
    std::int64_t rem = start, off = 0;
    for (int d = r - 1; d >= 0; --d) {
      idx[d] = rem % os[d];
      rem /= os[d];
      off += idx[d] * st[d];
    }
    const std::int64_t inner = os[r - 1], ist = st[r - 1];
    std::int64_t done = 0;
    while (done < len) {
      std::int64_t run = std::min(inner - idx[r - 1], len - done);
      if (ist == 1) {
        std::memcpy(dst + done * static_cast<std::int64_t>(esize), base + off * static_cast<std::int64_t>(esize),
                    static_cast<std::size_t>(run) * esize);
      } else {
        ops::detail::strided_copy(base + off * static_cast<std::int64_t>(esize), ist,
                                  dst + done * static_cast<std::int64_t>(esize), 1, esize, run);
      }
      done += run;
      off += run * ist;
      idx[r - 1] += run;
      for (int d = r - 1; d > 0 && idx[d] == os[d]; --d) {  // carry into outer dims
        off -= idx[d] * st[d];
        idx[d] = 0;
        idx[d - 1]++;
        off += st[d - 1];
      }
    }
  }

 private:
  const graph::FusedProgram& p_;
};

MS_IMPL void run_fused(const graph::FusedProgram& p, std::span<const AnyTensor> in, const AnyTensor& out) {
  if (!p.post_ops.empty() && run_dnnl_epilogue(p, in, out)) return;
  FusedEval(p).run(in, out);
}

#endif  // MS_IMPL_BODIES

}  // namespace ms::backend::cpu
