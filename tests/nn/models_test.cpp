// ms::nn::mlp and ms::nn::lenet5: layer structure, parameter names and shapes, output shape.

#include <string>
#include <vector>

#include "test_util.hpp"

TEST_CASE("models: mlp(784, {256, 256}, 10) has the layers and parameters of the examples", "[nn]") {
  ms::manual_seed(0);
  auto net = ms::nn::mlp(784, {256, 256}, 10);
  std::vector<std::string> names;
  std::vector<ms::Shape> shapes;
  for (const auto& [name, p] : net->named_parameters()) {
    names.push_back(name);
    shapes.push_back(p.shape());
  }
  CHECK(names == std::vector<std::string>{"1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias"});
  CHECK(shapes == std::vector<ms::Shape>{{256, 784}, {256}, {256, 256}, {256}, {10, 256}, {10}});
  ms::Tensor<float> x = ms::rand<float>({3, 1, 28, 28});
  ms_test::require_shape((*net)(x), {3, 10});
  // No hidden layer: Flatten and one Linear.
  auto linear = ms::nn::mlp(6, {}, 2);
  CHECK(linear->named_parameters().size() == 2);
  ms_test::require_shape((*linear)(ms::rand<float>({4, 6})), {4, 2});
}

TEST_CASE("models: lenet5 maps 1x28x28 images to logits through 400 features", "[nn]") {
  ms::manual_seed(0);
  auto net = ms::nn::lenet5(10);
  std::vector<ms::Shape> shapes;
  for (const auto& [name, p] : net->named_parameters()) shapes.push_back(p.shape());
  CHECK(shapes == std::vector<ms::Shape>{{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 400}, {120}, {84, 120}, {84},
                                         {10, 84}, {10}});
  ms_test::require_shape((*net)(ms::rand<float>({2, 1, 28, 28})), {2, 10});
  CHECK_THROWS_AS((*net)(ms::rand<float>({2, 1, 32, 32})), ms::ShapeError);  // 16x6x6 features do not fit Linear(400)
}
