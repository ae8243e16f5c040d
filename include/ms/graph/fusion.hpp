#pragma once
// Elementwise fusion: trees and chains of elementwise ops whose intermediates are
// used only inside the group become one "fused" node. Its program evaluates the
// members' block kernels (the same generic formulas as eager) over blocks of 1024
// elements kept in L1-sized buffers, so intermediates never touch memory.
// Inputs may broadcast (scalars, row/column biases) against the output.

#include <cstring>
#include <numeric>
#include <vector>

#include "../ops/elementwise.hpp"
#include "graph.hpp"

namespace ms::graph {

/// One step of a fused program: dst = fn(src...), over one block.
struct FusedInstr {
  ops::BlockFn fn = nullptr;
  int nin = 0;
  int src[ops::kMaxArity] = {};  ///< >= 0: temp buffer index; < 0: external input -(k + 1)
  int dst = -1;                  ///< temp index, or -1 for the fused node's output
  double params[ops::kMaxElementwiseParams] = {};
};

/// The compiled body of a fused node.
struct FusedProgram {
  static constexpr std::int64_t kBlock = 1024;
  std::vector<FusedInstr> instrs;
  std::vector<std::string> members;  ///< op names of the members, in program order
  int num_temps = 0;
  ops::TensorMeta out_meta;

  /// Evaluates the program: `in` are the external inputs (broadcastable to out's shape).
  void run(std::span<const AnyTensor> in, const AnyTensor& out) const {
    const std::int64_t n = out.numel();
    if (n == 0) return;
    const Shape& os = out.shape();
    const int r = os.rank();
    const std::size_t k = in.size();
    // Per input: direct pointer (stride 1), broadcast scalar (stride 0), or gathered per block.
    struct Src {
      const char* base;
      std::size_t esize;
      int mode;  // 0 scalar, 1 contiguous full, 2 gather
      std::int64_t st[kMaxDims];
    };
    SmallVec<Src, 8> srcs;
    for (std::size_t j = 0; j < k; ++j) {
      Src s{};
      s.base = static_cast<const char*>(in[j].raw_data());
      s.esize = dtype_size(in[j].dtype());
      if (in[j].numel() == 1) s.mode = 0;
      else if (in[j].shape() == os && in[j].is_contiguous()) s.mode = 1;
      else {
        s.mode = 2;
        const Shape& is = in[j].shape();
        int lead = r - is.rank();
        for (int d = 0; d < r; ++d) {
          int sd = d - lead;
          s.st[d] = (sd < 0 || is[sd] == 1) ? 0 : in[j].strides()[sd];
        }
      }
      srcs.push_back(s);
    }
    char* obase = static_cast<char*>(out.raw_data());
    const std::size_t oesize = dtype_size(out.dtype());
    const int nt = num_temps;
    const int ngather = static_cast<int>(std::count_if(srcs.begin(), srcs.end(), [](const Src& s) { return s.mode == 2; }));

    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      // Temps and gather buffers for this thread: kBlock elements of up to 8 bytes each.
      char* temps = thread_scratch(static_cast<std::size_t>((nt + ngather) * kBlock));
      char* gbuf = temps + static_cast<std::size_t>(nt) * kBlock * 8;
      SmallVec<const void*, 8> ext(k, nullptr);
      SmallVec<std::int64_t, 8> ext_st(k, 1);
      for (std::int64_t i = b; i < e; i += kBlock) {
        std::int64_t len = std::min(kBlock, e - i);
        int g = 0;
        for (std::size_t j = 0; j < k; ++j) {
          const Src& s = srcs[j];
          if (s.mode == 0) { ext[j] = s.base; ext_st[j] = 0; }
          else if (s.mode == 1) { ext[j] = s.base + i * static_cast<std::int64_t>(s.esize); ext_st[j] = 1; }
          else {
            char* dst = gbuf + static_cast<std::size_t>(g++) * kBlock * 8;
            gather_block(s.base, s.esize, os, s.st, i, len, dst);
            ext[j] = dst;
            ext_st[j] = 1;
          }
        }
        for (const FusedInstr& ins : instrs) {
          const void* p[ops::kMaxArity];
          std::int64_t st[ops::kMaxArity];
          for (int a = 0; a < ins.nin; ++a) {
            int sidx = ins.src[a];
            if (sidx >= 0) { p[a] = temps + static_cast<std::size_t>(sidx) * kBlock * 8; st[a] = 1; }
            else { p[a] = ext[-sidx - 1]; st[a] = ext_st[-sidx - 1]; }
          }
          void* d = ins.dst >= 0 ? static_cast<void*>(temps + static_cast<std::size_t>(ins.dst) * kBlock * 8)
                                 : static_cast<void*>(obase + i * static_cast<std::int64_t>(oesize));
          ins.fn(p, st, d, len, ins.params);
        }
      }
    }, kBlock);
  }

  /// A per-thread buffer of at least `doubles` 8-byte slots, kept between calls: a heap
  /// allocation per call costs more than a small fused kernel, and a fresh block of a
  /// large size is page-faulted in again on every call.
  static char* thread_scratch(std::size_t doubles) {
    thread_local std::vector<double> buf;
    if (buf.size() < doubles) buf.resize(doubles);
    return reinterpret_cast<char*>(buf.data());
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
        ops::detail::gather(base + off * static_cast<std::int64_t>(esize), ist, esize, run,
                            dst + done * static_cast<std::int64_t>(esize));
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
};

/// The op that fused nodes refer to (visible in the op list, dumps and profiles).
inline const ops::OpDef& fused_op = ops::registry().add([] {
  ops::OpDef d;
  d.name = "fused";
  d.category = ops::Category::fused;
  d.num_inputs = -1;
  d.doc = "a group of elementwise ops evaluated block by block in one kernel (made by graph fusion)";
  d.cpu_dtypes = kAllTypes;
  d.infer = [](const ops::OpDef&, std::span<const ops::TensorMeta>, const ops::Attrs&, ops::MetaList&) {
    MS_THROW(GraphError, "fused: a fused node's metas come from its program, not from inference");
  };
  d.kernel = [](const ops::KernelArgs&) {
    MS_THROW(GraphError, "fused: fused nodes run through their program in a compiled graph");
  };
  return d;
}());

inline std::string node_label(const Node& n) {
  if (n.fused) return fmt::format("fused[{}]", fmt::join(n.fused->members, "+"));
  return n.op->name;
}

namespace detail {
inline bool fusible(const Graph& g, const Node& n) {
  if (n.dead || n.fused || n.outputs.size() != 1) return false;
  if (!ops::is_elementwise(n.op->category)) return false;
  if (n.op->is_random) return false;
  const auto& ew = n.op->elementwise;
  DType d = g.value(n.inputs[static_cast<std::size_t>(ew.dispatch_input)]).meta.dtype;
  return ew.block[static_cast<int>(d)] != nullptr && n.inputs.size() <= static_cast<std::size_t>(ops::kMaxArity);
}
}  // namespace detail

/// Fuses elementwise groups; returns the number of fused nodes created.
inline int fuse_elementwise(Graph& g) {
  auto& nodes = g.nodes();
  const std::size_t nn = nodes.size();
  // consumers[v] = node indices reading v
  std::vector<std::vector<std::int32_t>> consumers(g.values().size());
  for (std::size_t i = 0; i < nn; ++i)
    if (!nodes[i].dead)
      for (ValueId v : nodes[i].inputs) consumers[v].push_back(static_cast<std::int32_t>(i));
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId v : g.outputs()) is_output[v] = true;

  std::vector<bool> taken(nn, false);
  int made = 0;
  struct Pending {
    std::size_t root;
    std::vector<std::size_t> members;  // ascending
  };
  std::vector<Pending> groups;
  for (std::size_t ri = nn; ri-- > 0;) {
    if (taken[ri] || !detail::fusible(g, nodes[ri])) continue;
    const Shape& oshape = g.value(nodes[ri].outputs[0]).meta.shape;
    std::vector<std::size_t> group{ri};
    std::vector<bool> in_group(nn, false);
    in_group[ri] = true;
    for (bool grew = true; grew;) {
      grew = false;
      for (std::size_t gi = 0; gi < group.size(); ++gi) {
        for (ValueId v : nodes[group[gi]].inputs) {
          const Value& val = g.value(v);
          if (val.kind != ValueKind::node || is_output[v]) continue;
          auto p = static_cast<std::size_t>(val.producer);
          if (in_group[p] || taken[p] || !detail::fusible(g, nodes[p])) continue;
          if (!(val.meta.shape == oshape)) continue;  // intermediates must be full blocks
          bool all_inside = std::all_of(consumers[v].begin(), consumers[v].end(),
                                        [&](std::int32_t c) { return in_group[static_cast<std::size_t>(c)]; });
          if (!all_inside) continue;
          group.push_back(p);
          in_group[p] = true;
          grew = true;
        }
      }
    }
    if (group.size() < 2) continue;
    std::sort(group.begin(), group.end());
    for (auto m : group) taken[m] = true;
    groups.push_back({ri, group});
  }

  for (auto& grp : groups) {
    auto prog = std::make_shared<FusedProgram>();
    std::vector<ValueId> ext;  // external inputs of the fused node
    std::unordered_map<ValueId, int> temp_of;  // member output -> temp index
    std::unordered_map<ValueId, int> last_use;  // member output -> last instr reading it
    for (std::size_t ii = 0; ii < grp.members.size(); ++ii)
      for (ValueId v : nodes[grp.members[ii]].inputs) last_use[v] = static_cast<int>(ii);
    std::vector<int> free_temps;
    const ValueId root_out = nodes[grp.root].outputs[0];
    for (std::size_t ii = 0; ii < grp.members.size(); ++ii) {
      const Node& m = nodes[grp.members[ii]];
      FusedInstr ins;
      const auto& ew = m.op->elementwise;
      ins.fn = ew.block[static_cast<int>(g.value(m.inputs[static_cast<std::size_t>(ew.dispatch_input)]).meta.dtype)];
      if (ew.params) ew.params(m.attrs, ins.params);
      ins.nin = static_cast<int>(m.inputs.size());
      for (int a = 0; a < ins.nin; ++a) {
        ValueId v = m.inputs[static_cast<std::size_t>(a)];
        auto t = temp_of.find(v);
        if (t != temp_of.end()) {
          ins.src[a] = t->second;
        } else {
          auto it = std::find(ext.begin(), ext.end(), v);
          int e = static_cast<int>(it - ext.begin());
          if (it == ext.end()) ext.push_back(v);
          ins.src[a] = -(e + 1);
        }
      }
      // Temps whose last reader is this instruction can be reused for its result.
      for (int a = 0; a < ins.nin; ++a) {
        ValueId v = m.inputs[static_cast<std::size_t>(a)];
        auto t = temp_of.find(v);
        if (t != temp_of.end() && last_use[v] == static_cast<int>(ii) &&
            std::find(free_temps.begin(), free_temps.end(), t->second) == free_temps.end())
          free_temps.push_back(t->second);
      }
      ValueId outv = m.outputs[0];
      if (outv == root_out) {
        ins.dst = -1;
      } else {
        int t;
        if (!free_temps.empty()) { t = free_temps.back(); free_temps.pop_back(); }
        else t = prog->num_temps++;
        ins.dst = t;
        temp_of[outv] = t;
      }
      prog->instrs.push_back(ins);
      prog->members.push_back(m.op->name);
    }
    prog->out_meta = g.value(root_out).meta;
    // The fused node replaces the root in place: same output value id, members die.
    Node& root = nodes[grp.root];
    for (auto mi : grp.members)
      if (mi != grp.root) g.kill(mi);
    for (ValueId v : root.inputs) g.value(v).uses--;
    root.op = &fused_op;
    root.attrs = ops::Attrs{};
    root.inputs = ext;
    for (ValueId v : ext) g.value(v).uses++;
    root.fused = prog;
    root.name = fmt::format("fused_{}", made);
    ++made;
  }
  g.compact();
  return made;
}

}  // namespace ms::graph
