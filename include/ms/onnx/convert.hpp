#pragma once
// ONNX op -> ms ops: the conversion table, one row per ONNX op type (the rows are in
// convert_math/nn/tensor/index.hpp). The importer (onnx/import.hpp) runs the rows inside a graph
// capture, so what a row computes is what the graph records; a row whose inputs are all constants
// runs untraced, and its results become constants (shape arithmetic of exported models folds
// away at load). A row that meets an attribute, mode or dtype ms cannot honour throws
// UnsupportedError with the reason: never a silent approximation.

#include <map>
#include <string>
#include <vector>

#include "convert_base.hpp"
#include "convert_math.hpp"
#include "convert_nn.hpp"
#include "convert_tensor.hpp"
#include "convert_index.hpp"

namespace ms::onnx {

namespace detail::conv {

#define MS_ONNX_ROW(Name) {#Name, &Name}
/// The conversion table: ONNX op type -> row.
inline const std::map<std::string, ConvertFn, std::less<>>& table() {
  static const std::map<std::string, ConvertFn, std::less<>> t = {
      MS_ONNX_ROW(Abs), MS_ONNX_ROW(Neg), MS_ONNX_ROW(Sign), MS_ONNX_ROW(Exp), MS_ONNX_ROW(Log),
      MS_ONNX_ROW(Sqrt), MS_ONNX_ROW(Reciprocal), MS_ONNX_ROW(Erf), MS_ONNX_ROW(Sin), MS_ONNX_ROW(Cos),
      MS_ONNX_ROW(Tan), MS_ONNX_ROW(Atan), MS_ONNX_ROW(Asin), MS_ONNX_ROW(Acos), MS_ONNX_ROW(Sinh), MS_ONNX_ROW(Cosh), MS_ONNX_ROW(Asinh), MS_ONNX_ROW(Acosh),
      MS_ONNX_ROW(Atanh), MS_ONNX_ROW(Tanh), MS_ONNX_ROW(Sigmoid), MS_ONNX_ROW(Relu), MS_ONNX_ROW(Floor),
      MS_ONNX_ROW(Ceil), MS_ONNX_ROW(Round), MS_ONNX_ROW(Not), MS_ONNX_ROW(Softplus), MS_ONNX_ROW(Softsign),
      MS_ONNX_ROW(IsNaN), MS_ONNX_ROW(IsInf), MS_ONNX_ROW(Mish), MS_ONNX_ROW(Identity), MS_ONNX_ROW(LeakyRelu),
      MS_ONNX_ROW(Elu), MS_ONNX_ROW(Selu), MS_ONNX_ROW(Celu), MS_ONNX_ROW(ThresholdedRelu),
      MS_ONNX_ROW(HardSigmoid), MS_ONNX_ROW(HardSwish), MS_ONNX_ROW(Shrink), MS_ONNX_ROW(PRelu),
      MS_ONNX_ROW(Add), MS_ONNX_ROW(Sub), MS_ONNX_ROW(Mul), MS_ONNX_ROW(Div), MS_ONNX_ROW(Mod), MS_ONNX_ROW(Pow),
      MS_ONNX_ROW(Equal), MS_ONNX_ROW(Greater), MS_ONNX_ROW(Less), MS_ONNX_ROW(GreaterOrEqual),
      MS_ONNX_ROW(LessOrEqual), MS_ONNX_ROW(And), MS_ONNX_ROW(Or), MS_ONNX_ROW(Xor), MS_ONNX_ROW(Where),
      {"Sum", &variadic<o::add>}, {"Max", &variadic<o::maximum>}, {"Min", &variadic<o::minimum>},
      MS_ONNX_ROW(Mean), MS_ONNX_ROW(Clip), MS_ONNX_ROW(Cast), MS_ONNX_ROW(CastLike),
      {"ReduceSum", &reduce<0>}, {"ReduceMean", &reduce<1>}, {"ReduceMax", &reduce<2>}, {"ReduceMin", &reduce<3>},
      {"ReduceProd", &reduce<4>}, {"ReduceL1", &reduce<5>}, {"ReduceL2", &reduce<6>},
      {"ReduceSumSquare", &reduce<7>}, {"ReduceLogSum", &reduce<8>}, {"ReduceLogSumExp", &reduce<9>},
      {"ArgMax", &arg_reduce<true>}, {"ArgMin", &arg_reduce<false>},
      MS_ONNX_ROW(MatMul), MS_ONNX_ROW(Gemm), MS_ONNX_ROW(Conv),
      {"MaxPool", &Pool<true>}, {"AveragePool", &Pool<false>},
      {"GlobalMaxPool", &GlobalPool<true>}, {"GlobalAveragePool", &GlobalPool<false>},
      MS_ONNX_ROW(BatchNormalization), MS_ONNX_ROW(InstanceNormalization), MS_ONNX_ROW(LayerNormalization),
      MS_ONNX_ROW(MeanVarianceNormalization), MS_ONNX_ROW(LpNormalization), MS_ONNX_ROW(LRN), MS_ONNX_ROW(Dropout),
      {"Softmax", &softmax_like<0>}, {"LogSoftmax", &softmax_like<1>}, {"Hardmax", &softmax_like<2>},
      MS_ONNX_ROW(Reshape), MS_ONNX_ROW(Flatten), MS_ONNX_ROW(Transpose), MS_ONNX_ROW(Squeeze),
      MS_ONNX_ROW(Unsqueeze), MS_ONNX_ROW(Concat), MS_ONNX_ROW(Split), MS_ONNX_ROW(Slice), MS_ONNX_ROW(Expand),
      MS_ONNX_ROW(Tile), MS_ONNX_ROW(Gather), MS_ONNX_ROW(GatherElements), {"Shape", &Shape_}, MS_ONNX_ROW(Size),
      MS_ONNX_ROW(Constant), MS_ONNX_ROW(ConstantOfShape), MS_ONNX_ROW(Range), MS_ONNX_ROW(OneHot),
      MS_ONNX_ROW(Trilu), MS_ONNX_ROW(CumSum), MS_ONNX_ROW(Pad), MS_ONNX_ROW(DepthToSpace),
      MS_ONNX_ROW(SpaceToDepth), MS_ONNX_ROW(EyeLike), MS_ONNX_ROW(NegativeLogLikelihoodLoss),
      MS_ONNX_ROW(SoftmaxCrossEntropyLoss), MS_ONNX_ROW(Resize), MS_ONNX_ROW(Upsample),
      MS_ONNX_ROW(ConvTranspose), MS_ONNX_ROW(GatherND), MS_ONNX_ROW(ScatterElements),
      {"Scatter", &ScatterElements}, MS_ONNX_ROW(ScatterND), MS_ONNX_ROW(TopK), MS_ONNX_ROW(Einsum),
      MS_ONNX_ROW(Compress), MS_ONNX_ROW(NonZero), MS_ONNX_ROW(BitShift),
      {"HannWindow", &window_fn<0>}, {"HammingWindow", &window_fn<1>}, {"BlackmanWindow", &window_fn<2>},
      MS_ONNX_ROW(QuantizeLinear), MS_ONNX_ROW(DequantizeLinear), MS_ONNX_ROW(DynamicQuantizeLinear),
      MS_ONNX_ROW(ReverseSequence), {"RNN", &recurrent<0>}, MS_ONNX_ROW(Unique), {"GRU", &recurrent<1>}, {"LSTM", &recurrent<2>},
  };
  return t;
}
#undef MS_ONNX_ROW

}  // namespace detail::conv

/// The ONNX op types the importer converts.
inline std::vector<std::string> supported_op_types() {
  std::vector<std::string> v;
  for (const auto& [k, f] : detail::conv::table()) v.push_back(k);
  return v;
}

}  // namespace ms::onnx
