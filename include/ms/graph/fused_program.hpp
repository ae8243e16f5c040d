#pragma once
// The data of a fused node: the program that graph fusion (fusion.hpp) builds from the
// member ops and that a backend runs (the CPU interpreter in backend/cpu/fused_eval.hpp,
// the code generator in backend/cpu/codegen.hpp). Data only: nothing here runs.

#include <cstdint>
#include <string>
#include <vector>

#include "../ops/registry.hpp"

namespace ms::graph {

/// One step of a fused program: dst = fn(src...), over one block.
struct FusedInstr {
  const ops::OpDef* op = nullptr;  ///< the member op (for a folded instruction, its unary op)
  ops::BlockFn fn = nullptr;
  int nin = 0;
  int src[ops::kMaxArity] = {};  ///< >= 0: temp buffer index; < 0: external input -(k + 1)
  int dst = -1;                  ///< temp index, or -1 for the fused node's output
  /// The op's parameters, then (for a unary op with folded scalar steps, where fn is its
  /// affine kernel) the (m, a) pairs of the steps; see ops::kAffineSteps.
  double params[ops::kMaxElementwiseParams + ops::kAffineParams] = {};
};

/// One step of a GEMM epilogue as a post-op of the GEMM itself (planned by a backend, see
/// backend/cpu/dnnl_epilogue.hpp): the running value v becomes f(v) (eltwise: the backend's
/// algorithm `alg` with alpha, beta) or v op t (binary: t is the fused node's input `input`).
struct EpiloguePostOp {
  enum class Kind : std::uint8_t { eltwise, binary };
  Kind kind = Kind::eltwise;
  int alg = 0;
  float alpha = 0, beta = 0;
  int input = -1;
};

/// The compiled body of a fused node: an elementwise program, optionally preceded by a
/// producer op whose result the program consumes in place (a GEMM epilogue: matmul or
/// linear, then bias/activation), or followed by a reduction of the program's result over
/// its trailing axes (sum(x * x), mean((a - b)^2), max(exp(x)) in one pass, no temporary).
struct FusedProgram {
  /// Elements per block. Measured on the 8-op chain of benchmarks/fused_chain.cpp (1M floats,
  /// 1 thread): 256 is 5-20% faster than 1024, as the temporaries stay in L1 next to the
  /// streamed input and output.
  static constexpr std::int64_t kBlock = 256;
  enum class Reduce : std::uint8_t { none, sum, mean, max, min };

  std::vector<FusedInstr> instrs;
  std::vector<std::string> members;  ///< op names of the members, in program order (producer first, reduction last)
  int num_temps = 0;
  ops::TensorMeta out_meta;

  /// Epilogue form: the node's first `producer_inputs` inputs go to `producer`, whose output
  /// (written into the node's output buffer) is external input 0 of the program; the
  /// program's other external inputs follow. The program then runs in place on that buffer.
  const ops::OpDef* producer = nullptr;
  ops::Attrs producer_attrs;
  int producer_inputs = 0;

  /// Reduction form: the program is evaluated over `eval_shape` and every run of
  /// `reduce_inner` consecutive results (the trailing, reduced axes) becomes one output.
  Reduce reduce = Reduce::none;
  Shape eval_shape;
  std::int64_t reduce_inner = 1;

  /// The instructions as built, one per member op, before fold_scalar_steps merged some:
  /// what the CPU code generator (backend/cpu/codegen.hpp) compiles.
  std::vector<FusedInstr> source;
  /// Set by the code generator: the whole program compiled into one loop, with the block
  /// kernel's signature and the instruction list's results. Used where external input k
  /// is a broadcast scalar exactly when bit k of compiled_scalars is set (always, in the
  /// graph it was compiled for; anything else runs the instruction list).
  ops::BlockFn compiled = nullptr;
  std::uint64_t compiled_scalars = 0;

  /// Set by the CPU backend where the whole epilogue is a straight chain of post-ops that
  /// the GEMM library applies to each result as it is written (a fused node stays one oneDNN
  /// primitive); empty where the program runs after the producer as above.
  std::vector<EpiloguePostOp> post_ops;

  /// An elementwise program alone (no GEMM producer, no reduction): it reads each input
  /// element at the output element's index, so it may write over an input it reads.
  bool plain() const { return !producer && reduce == Reduce::none; }
};

}  // namespace ms::graph
