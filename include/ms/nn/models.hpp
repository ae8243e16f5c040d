#pragma once
// Ready-made models: the multilayer perceptron and LeNet-5 of the Fashion-MNIST examples,
// benchmarks and tests, built from ms::nn layers (parameters named "1.weight", "1.bias", ...
// by their position in the Sequential).
//
//   auto net = ms::nn::mlp(784, {256, 256}, 10);   // Flatten, Linear+ReLU, Linear+ReLU, Linear
//   auto cnn = ms::nn::lenet5(10);                 // 1x28x28 images

#include <cstdint>
#include <memory>
#include <vector>

#include "../core/linkage.hpp"
#include "layers.hpp"

namespace ms::nn {

/// Flatten, then Linear + ReLU for each hidden size, then a Linear to `out` logits.
MS_IMPL std::shared_ptr<Sequential> mlp(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t out);

/// LeNet-5 for 1x28x28 images: conv 5x5 (6, padding 2), ReLU, max pool 2; conv 5x5 (16),
/// ReLU, max pool 2; Linear 400-120, ReLU, 120-84, ReLU, 84-num_classes.
MS_IMPL std::shared_ptr<Sequential> lenet5(std::int64_t num_classes = 10);

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL std::shared_ptr<Sequential> mlp(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t out) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Flatten>());
  std::int64_t width = in;
  for (std::int64_t h : hidden) {
    net->push_back(std::make_shared<Linear>(width, h));
    net->push_back(std::make_shared<ReLU>());
    width = h;
  }
  net->push_back(std::make_shared<Linear>(width, out));
  return net;
}

MS_IMPL std::shared_ptr<Sequential> lenet5(std::int64_t num_classes) {
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 6, 5, 1, 2), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
      std::make_shared<Conv2d>(6, 16, 5), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
      std::make_shared<Flatten>(), std::make_shared<Linear>(400, 120), std::make_shared<ReLU>(),
      std::make_shared<Linear>(120, 84), std::make_shared<ReLU>(), std::make_shared<Linear>(84, num_classes)});
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::nn
