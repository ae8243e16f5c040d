#pragma once
// embedding: the rows of a weight table (float32 or float64) at an int64/int32 index of any
// shape. Belongs here: its definition, inference, kernel and cost. It has no backward op:
// its gradient row in autograd/nn_rules.hpp is an index_add of g into zeros.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "../../core/parallel.hpp"
#include "../dispatch.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// Rows of weight (V, D) picked by an int64/int32 index of any shape: result index.shape + (D,).
inline AnyTensor embedding(const AnyTensor& weight, const AnyTensor& index);

}  // namespace ms::ops

namespace ms {
/// Embedding lookup: rows of weight (V, D) at `index`.
template <Element T, Element I>
Tensor<T> embedding(const Tensor<T>& weight, const Tensor<I>& index) { return ops::embedding(weight, index); }
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

// ---- registrations --------------------------------------------------------------------------------

// embedding(weight, index) -> weight rows at index: shape index.shape + (D,).
MS_REGISTRATION(const OpDef& embedding_op, registry().add([] {
  OpDef d;
  d.name = "embedding";
  d.input_names = {"weight", "index"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "rows of weight (V, D) at an int64/int32 index of any shape: result index.shape + (D,)";
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
    MS_CHECK(in[0].shape.rank() == 2, ShapeError, "{}: weight must be 2-D (num_embeddings, embedding_dim), got shape {}",
             op.name, shape_str(in[0].shape));
    MS_CHECK(in[1].dtype == DType::i64 || in[1].dtype == DType::i32, DTypeError,
             "{}: 'index' (input 1) must be an int64 or int32 tensor, got {} (shape {})", op.name, in[1].dtype,
             shape_str(in[1].shape));
    Shape s = in[1].shape;
    s.push_back(in[0].shape[1]);
    out.push_back({in[0].dtype, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor w = detail::contiguous_raw(k.in[0]), idx = detail::contiguous_raw(k.in[1]);
    const std::int64_t V = w.shape()[0], D = w.shape()[1], n = idx.numel();
    const void* ip = idx.raw_data();
    auto at = [&](std::int64_t i) {
      return idx.dtype() == DType::i64 ? static_cast<const std::int64_t*>(ip)[i]
                                       : static_cast<std::int64_t>(static_cast<const std::int32_t*>(ip)[i]);
    };
    for (std::int64_t i = 0; i < n; ++i)  // checked before the parallel part
      MS_CHECK(at(i) >= 0 && at(i) < V, IndexError, "{}: index {} is out of range for num_embeddings {}", k.op.name,
               at(i), V);
    const std::size_t row_bytes = static_cast<std::size_t>(D) * dtype_size(w.dtype());
    const char* wb = static_cast<const char*>(w.raw_data());
    char* ob = static_cast<char*>(k.out[0].raw_data());
    parallel_for(n, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, D)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        if (row_bytes) std::memcpy(ob + static_cast<std::size_t>(i) * row_bytes, wb + static_cast<std::size_t>(at(i)) * row_bytes, row_bytes);
    }, 1);
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    return Cost{0, detail::bytes_of(in.subspan(1)) + 2 * detail::bytes_of(out)};
  };
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

inline AnyTensor embedding(const AnyTensor& weight, const AnyTensor& index) {
  // torch.nn.functional.embedding takes (input, weight): say so when the operands look swapped.
  MS_CHECK(!(weight.defined() && index.defined() && is_integral(weight.dtype()) && is_floating(index.dtype())),
           DTypeError,
           "embedding: index must be an integer tensor (got {} as 'index' and {} as 'weight'); ms::embedding takes "
           "(weight, index), the reverse of torch's embedding(input, weight)",
           index.dtype(), weight.dtype());
  return call1(embedding_op, {weight, index});
}

}  // namespace ms::ops
