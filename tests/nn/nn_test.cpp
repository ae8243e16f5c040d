// Modules and layers (nn/module.hpp, nn/layers.hpp) and initialization (nn/init.hpp):
// forwards checked against values computed by hand in this file and against the ops they
// wrap; parameter names, counts and registration rules; train/eval; state dicts and their
// errors; PyTorch's default initializations; BatchNorm's running statistics (eager and in
// captured replays); and a small MLP that must overfit 8 samples (loss < 1e-2 in at most
// 300 Adam steps).

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "test_util.hpp"
#include <ms/nn/nn.hpp>
#include <ms/optim/optimizer.hpp>

namespace nn = ms::nn;
using ms::AnyTensor;
using ms::Tensor;
using ms_test::require_values;
using ms_test::values;

namespace {

/// Writes values into a parameter (under NoGradGuard, as parameters require grad).
void set(Tensor<float> t, const std::vector<float>& v) {
  ms::NoGradGuard no_grad;
  t.copy_(ms::from_vector<float>(v, t.shape()));
}
/// A float32 tensor of `shape` holding start, start + step, start + 2 step, ... (row-major).
Tensor<float> ramp(const ms::Shape& shape, float start = 0, float step = 1) {
  Tensor<float> t = AnyTensor::empty(shape, ms::DType::f32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = start + step * static_cast<float>(i);
  return t;
}
std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

}  // namespace

// ---- Linear ------------------------------------------------------------------------------------

TEST_CASE("Linear: forward equals x @ W^T + b computed by hand", "[nn]") {
  nn::Linear lin(3, 2);
  set(lin.weight, {1, 2, 3, -1, 0, 1});
  set(lin.bias, {0.5f, -0.5f});
  Tensor<float> x = Tensor<float>{{1, 0, -1}, {2, 1, 0}};
  // Row 0: (1 - 3 + 0.5, -1 - 1 - 0.5); row 1: (2 + 2 + 0.5, -2 + 0 - 0.5).
  Tensor<float> y = lin(x);
  require_values(y, {-1.5, -2.5, 4.5, -2.5});
  CHECK(y.to_vector() == ms::linear(x, lin.weight, lin.bias).to_vector());
  // Any leading dims.
  Tensor<float> x3 = ramp({2, 2, 3});
  CHECK(lin(x3).shape() == ms::Shape{2, 2, 2});
  // Without bias.
  nn::Linear nob(3, 2, false);
  CHECK(!nob.bias.defined());
  CHECK(names_of(nob) == std::vector<std::string>{"weight"});
  set(nob.weight, {1, 2, 3, -1, 0, 1});
  require_values(nob(x), {-2, -2, 4, -2});
  MS_REQUIRE_THROWS_MSG(lin(ramp({2, 4})), ms::ShapeError,
                        "[ms.shape_error] Linear: expected an input of shape (..., 3), got (2, 4)");
  MS_REQUIRE_THROWS_MSG(lin(Tensor<double>{1, 2, 3}), ms::DTypeError,
                        "[ms.dtype_error] Linear: expected a float32 input, got float64 (3,) (convert it with ms::cast)");
  MS_REQUIRE_THROWS_MSG(nn::Linear(0, 2), ms::ValueError,
                        "[ms.value_error] Linear: in_features (0) and out_features (2) must be positive");
}

TEST_CASE("Linear: PyTorch's default init, reproducible from the seed", "[nn][init]") {
  ms::manual_seed(123);
  nn::Linear a(16, 64);
  ms::manual_seed(123);
  nn::Linear b(16, 64);
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  CHECK(a.bias.to_vector() == b.bias.to_vector());
  nn::Linear c(16, 64);
  CHECK(c.weight.to_vector() != a.weight.to_vector());
  // kaiming_uniform(a = sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)); so is the bias.
  const double bound = 1.0 / std::sqrt(16.0);
  for (const Tensor<float>& t : {a.weight, a.bias}) {
    auto v = t.to_vector();
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    CHECK(lo >= -bound);
    CHECK(hi < bound);
    if (t.numel() > 100) {  // 1024 draws fill the interval
      CHECK(lo < -0.9 * bound);
      CHECK(hi > 0.9 * bound);
      double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
      CHECK(std::abs(mean) < 0.1 * bound);
    }
  }
  CHECK(a.weight.requires_grad());
  CHECK(a.bias.requires_grad());
}

// ---- init ----------------------------------------------------------------------------------------

TEST_CASE("init: gains, fans and the bounds of each initializer", "[init]") {
  namespace init = nn::init;
  CHECK(init::calculate_gain("linear") == 1.0);
  CHECK(init::calculate_gain("sigmoid") == 1.0);
  CHECK(init::calculate_gain("tanh") == Approx(5.0 / 3));
  CHECK(init::calculate_gain("relu") == Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain("leaky_relu") == Approx(std::sqrt(2.0 / (1 + 1e-4))));
  CHECK(init::calculate_gain("leaky_relu", std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3)));
  CHECK(init::calculate_gain("selu") == 0.75);
  MS_REQUIRE_THROWS_MSG(init::calculate_gain("swish"), ms::ValueError,
                        "[ms.value_error] calculate_gain: unsupported nonlinearity 'swish'");
  Tensor<float> conv = ms::zeros<float>({8, 4, 3, 3});
  CHECK(init::calculate_fan_in_and_fan_out(conv) == std::pair<std::int64_t, std::int64_t>{36, 72});
  MS_REQUIRE_THROWS_MSG(init::calculate_fan_in_and_fan_out(ms::zeros<float>({5})), ms::ValueError,
                        "[ms.value_error] init: fan in and fan out cannot be computed for a tensor with fewer than 2 "
                        "dimensions (shape (5,))");

  auto range = [](const Tensor<float>& t) {
    auto v = t.to_vector();
    return std::pair<double, double>{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
  };
  auto stddev = [](const Tensor<float>& t) {
    auto v = t.to_vector();
    double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()), s = 0;
    for (float x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  ms::manual_seed(7);
  Tensor<float> w = ms::empty<float>({256, 128});
  init::kaiming_uniform_(w, 0, init::FanMode::fan_in, "relu");
  double b = std::sqrt(2.0) * std::sqrt(3.0 / 128);
  auto [lo, hi] = range(w);
  CHECK(lo >= -b);
  CHECK(hi < b);
  CHECK(hi > 0.99 * b);
  init::kaiming_uniform_(w, 0, init::FanMode::fan_out, "relu");
  CHECK(range(w).second <= std::sqrt(2.0) * std::sqrt(3.0 / 256));
  init::kaiming_normal_(w, 0, init::FanMode::fan_in, "relu");
  CHECK(stddev(w) == Approx(std::sqrt(2.0 / 128)).epsilon(0.02));
  init::xavier_uniform_(w, 2.0);
  b = 2.0 * std::sqrt(6.0 / (128 + 256));
  CHECK(range(w).first >= -b);
  CHECK(range(w).second < b);
  CHECK(range(w).second > 0.99 * b);
  init::xavier_normal_(w);
  CHECK(stddev(w) == Approx(std::sqrt(2.0 / (128 + 256))).epsilon(0.02));
  init::uniform_(w, -3, -2);
  CHECK(range(w).first >= -3);
  CHECK(range(w).second < -2);
  init::normal_(w, 5, 0.5);
  CHECK(stddev(w) == Approx(0.5).epsilon(0.02));
  init::zeros_(w);
  CHECK(range(w) == std::pair<double, double>{0, 0});
  init::ones_(w);
  CHECK(range(w) == std::pair<double, double>{1, 1});
  init::constant_(w, -2.5);
  CHECK(range(w) == std::pair<double, double>{-2.5, -2.5});
  // Initializing a parameter (requires grad) works and keeps it a leaf.
  nn::Linear lin(4, 4);
  init::zeros_(lin.weight);
  CHECK(lin.weight.requires_grad());
  CHECK(range(lin.weight) == std::pair<double, double>{0, 0});
  Tensor<std::int64_t> ints = ms::zeros<std::int64_t>({2, 2});
  MS_REQUIRE_THROWS_MSG(init::ones_(ints), ms::DTypeError,
                        "[ms.dtype_error] constant_: only floating tensors can be initialized, got int64");
}

// ---- Module: names, registration, modes, state dicts ---------------------------------------------

TEST_CASE("Module: named_parameters of nested Sequentials", "[nn]") {
  auto net = nn::make<nn::Sequential>(nn::make<nn::Linear>(4, 8), nn::make<nn::ReLU>(),
                                      nn::make<nn::Linear>(8, 3, false));
  CHECK(names_of(*net) == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
  CHECK(net->parameters().size() == 3);
  CHECK(net->num_parameters() == 4 * 8 + 8 + 8 * 3);
  CHECK(net->size() == 3);
  CHECK(net->named_children().size() == 3);
  CHECK(net->named_parameters(/*recurse=*/false).empty());
  // The handles are the layers' members.
  auto* first = dynamic_cast<nn::Linear*>((*net)[0].get());
  REQUIRE(first != nullptr);
  CHECK(net->parameters()[0].is_same(first->weight));

  nn::Sequential outer{nn::make<nn::Sequential>(nn::make<nn::Linear>(2, 2), nn::make<nn::Tanh>()),
                       nn::make<nn::Linear>(2, 1)};
  CHECK(names_of(outer) == std::vector<std::string>{"0.0.weight", "0.0.bias", "1.weight", "1.bias"});
  std::vector<std::string> mods;
  for (auto& [n, m] : outer.named_modules()) mods.push_back(n + ":" + m->type_name());
  CHECK(mods == std::vector<std::string>{":Sequential", "0:Sequential", "0.0:Linear", "0.1:Tanh", "1:Linear"});
  CHECK(outer.to_string() ==
        "Sequential(\n"
        "  (0): Sequential(\n"
        "    (0): Linear(in_features=2, out_features=2, bias=True)\n"
        "    (1): Tanh()\n"
        "  )\n"
        "  (1): Linear(in_features=2, out_features=1, bias=True)\n"
        ")");
  // A module used twice is listed once.
  auto shared = nn::make<nn::Linear>(3, 3);
  nn::Sequential twice{shared, nn::make<nn::ReLU>(), shared};
  CHECK(names_of(twice) == std::vector<std::string>{"0.weight", "0.bias"});
  MS_REQUIRE_THROWS_MSG(twice[3], ms::IndexError, "[ms.index_error] Sequential: index 3 is out of range for 3 modules");
  MS_REQUIRE_THROWS_MSG(nn::Sequential().forward(Tensor<float>{1}), ms::ValueError,
                        "[ms.value_error] Sequential: forward on an empty Sequential");
}

namespace {
/// A user-defined module with a parameter, a buffer and a child.
struct Affine : nn::Module {
  Tensor<float> scale = ms::ones<float>({2});
  Tensor<float> steps = ms::zeros<float>({});
  std::shared_ptr<nn::Linear> proj = nn::make<nn::Linear>(2, 2);
  Affine() {
    register_parameter("scale", scale);
    register_buffer("steps", steps);
    register_module("proj", proj);
  }
  Tensor<float> forward(const AnyTensor& x) override { return proj->forward(Tensor<float>(x) * scale); }
  std::string type_name() const override { return "Affine"; }
  void add_twice() { register_parameter("scale", scale); }
  void add_dotted() { register_buffer("a.b", steps); }
};
}  // namespace

TEST_CASE("Module: user modules, buffers, train/eval, zero_grad, registration errors", "[nn]") {
  Affine m;
  CHECK(names_of(m) == std::vector<std::string>{"scale", "proj.weight", "proj.bias"});
  REQUIRE(m.named_buffers().size() == 1);
  CHECK(m.named_buffers()[0].first == "steps");
  CHECK(!m.steps.requires_grad());
  CHECK(m.is_training());
  m.eval();
  CHECK(!m.is_training());
  CHECK(!m.proj->is_training());
  m.train();
  CHECK(m.proj->is_training());
  // zero_grad drops every parameter's gradient.
  m(Tensor<float>{{1, 2}}).sum().backward();
  CHECK(m.scale.grad_any().defined());
  CHECK(m.proj->weight.grad_any().defined());
  m.zero_grad();
  CHECK(!m.scale.grad_any().defined());
  CHECK(!m.proj->weight.grad_any().defined());
  // Reassigning a member is seen by the registry (it stores the member's address).
  m.scale = ms::full<float>({2}, 3.0);
  CHECK(m.named_parameters()[0].second.is_same(m.scale));
  MS_REQUIRE_THROWS_MSG(m.add_twice(), ms::ValueError, "[ms.value_error] Affine: the name 'scale' is already registered");
  MS_REQUIRE_THROWS_MSG(m.add_dotted(), ms::ValueError,
                        "[ms.value_error] Affine: invalid name 'a.b' (names must be non-empty and contain no '.')");
  nn::Module base;
  MS_REQUIRE_THROWS_MSG(base.forward(Tensor<float>{1}), ms::NotImplementedError,
                        "[ms.not_implemented] Module: forward is not implemented");
  m.requires_grad_(false);
  CHECK(!m.proj->weight.requires_grad());
}

TEST_CASE("Module: state_dict / load_state_dict round trip, in place", "[nn]") {
  ms::manual_seed(1);
  auto a = nn::make<nn::Sequential>(nn::make<nn::Linear>(3, 4), nn::make<nn::BatchNorm2d>(2));
  ms::manual_seed(2);
  auto b = nn::make<nn::Sequential>(nn::make<nn::Linear>(3, 4), nn::make<nn::BatchNorm2d>(2));
  auto sd = a->state_dict();
  std::vector<std::string> keys;
  for (auto& [k, t] : sd) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.bias", "0.weight", "1.bias", "1.num_batches_tracked", "1.running_mean",
                                         "1.running_var", "1.weight"});
  CHECK(sd.at("1.num_batches_tracked").dtype() == ms::DType::i64);
  CHECK(!sd.at("0.weight").requires_grad());  // detached, sharing storage
  CHECK(sd.at("0.weight").shares_storage(a->parameters()[0]));
  Tensor<float> handle = b->parameters()[0];
  CHECK(handle.to_vector() != a->parameters()[0].to_vector());
  b->load_state_dict(sd);
  CHECK(handle.to_vector() == a->parameters()[0].to_vector());  // written in place
  CHECK(handle.is_same(b->parameters()[0]));
  CHECK(handle.requires_grad());
  for (auto& [k, t] : b->state_dict()) {
    INFO(k);
    CHECK(Tensor<bool>(ms::ops::eq(t, sd.at(k))).to_vector() == std::vector<bool>(static_cast<std::size_t>(t.numel()), true));
  }
}

TEST_CASE("Module: load_state_dict errors name the key and write nothing", "[nn]") {
  auto net = nn::make<nn::Sequential>(nn::make<nn::Linear>(2, 3));
  const auto before = net->parameters()[1].to_vector();
  nn::StateDict sd = net->state_dict();
  nn::StateDict changed = {{"0.weight", ms::zeros<float>({3, 2})}, {"0.bias", ms::zeros<float>({3})}};

  nn::StateDict missing = changed;
  missing.erase("0.bias");
  MS_REQUIRE_THROWS_MSG(net->load_state_dict(missing), ms::ValueError,
                        "[ms.value_error] load_state_dict: error(s) loading the state dict of Sequential; missing "
                        "key(s): '0.bias'");
  nn::StateDict extra = changed;
  extra["0.scale"] = ms::zeros<float>({1});
  extra["9.weight"] = ms::zeros<float>({1});
  MS_REQUIRE_THROWS_MSG(net->load_state_dict(extra), ms::ValueError,
                        "[ms.value_error] load_state_dict: error(s) loading the state dict of Sequential; unexpected "
                        "key(s): '0.scale', '9.weight'");
  nn::StateDict shape = changed;
  shape["0.weight"] = ms::zeros<float>({2, 3});
  MS_REQUIRE_THROWS_MSG(net->load_state_dict(shape), ms::ShapeError,
                        "[ms.shape_error] load_state_dict: size mismatch for key '0.weight': the checkpoint has shape "
                        "(2, 3), the module has (3, 2)");
  nn::StateDict dtype = changed;
  dtype["0.bias"] = ms::zeros<double>({3});
  MS_REQUIRE_THROWS_MSG(net->load_state_dict(dtype), ms::DTypeError,
                        "[ms.dtype_error] load_state_dict: dtype mismatch for key '0.bias': the checkpoint has "
                        "float64, the module has float32");
  CHECK(net->parameters()[1].to_vector() == before);  // nothing was written
  // Non-strict loading ignores missing and unexpected keys but still checks shapes.
  net->load_state_dict(extra, /*strict=*/false);
  CHECK(net->parameters()[1].to_vector() == std::vector<float>{0, 0, 0});
  CHECK_THROWS_AS(net->load_state_dict(shape, false), ms::ShapeError);
}

// ---- activations, Flatten, Sequential ----------------------------------------------------------

TEST_CASE("Activations and Flatten: values computed by hand", "[nn]") {
  Tensor<float> x = Tensor<float>{-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
  std::vector<double> relu, gelu, gelu_tanh, tanh, sigm, silu, leaky;
  for (double v : {-2.0, -0.5, 0.0, 1.0, 3.0}) {
    relu.push_back(std::max(v, 0.0));
    gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    gelu_tanh.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    tanh.push_back(std::tanh(v));
    sigm.push_back(1 / (1 + std::exp(-v)));
    silu.push_back(v / (1 + std::exp(-v)));
    leaky.push_back(v > 0 ? v : 0.2 * v);
  }
  require_values(nn::ReLU()(x), relu);
  require_values(nn::GELU()(x), gelu, 1e-5);
  require_values(nn::GELU("tanh")(x), gelu_tanh, 1e-5);
  require_values(nn::Tanh()(x), tanh, 1e-6);
  require_values(nn::Sigmoid()(x), sigm, 1e-6);
  require_values(nn::SiLU()(x), silu, 1e-6);
  require_values(nn::LeakyReLU(0.2)(x), leaky);
  require_values(nn::Identity()(x), {-2, -0.5, 0, 1, 3});
  MS_REQUIRE_THROWS_MSG(nn::GELU("fast"), ms::ValueError,
                        "[ms.value_error] GELU: approximate must be \"none\" or \"tanh\", got \"fast\"");
  Tensor<float> img = ramp({2, 3, 4, 5});
  CHECK(nn::Flatten()(img).shape() == ms::Shape{2, 60});
  CHECK(nn::Flatten(0, 1)(img).shape() == ms::Shape{6, 4, 5});
  CHECK(nn::Flatten()(img).to_vector() == img.to_vector());
}

TEST_CASE("Sequential: forward composes its modules", "[nn]") {
  auto l1 = nn::make<nn::Linear>(3, 4);
  auto l2 = nn::make<nn::Linear>(4, 2);
  nn::Sequential seq;
  seq.push_back(l1).push_back(nn::make<nn::ReLU>()).push_back(l2);
  Tensor<float> x = ramp({5, 3}, -1, 0.25f);
  Tensor<float> want = ms::linear(ms::relu(ms::linear(x, l1->weight, l1->bias)), l2->weight, l2->bias);
  CHECK(seq(x).to_vector() == want.to_vector());
}

// ---- convolution, pooling, normalization, dropout, embedding --------------------------------------

namespace {
/// Direct 2-D cross-correlation, in doubles.
std::vector<double> conv_ref(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b, ms::Int2 s,
                             ms::Int2 p, ms::Int2 d, std::int64_t groups) {
  const std::int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const std::int64_t O = w.shape(0), Cg = w.shape(1), KH = w.shape(2), KW = w.shape(3);
  const std::int64_t Ho = (H + 2 * p.h - d.h * (KH - 1) - 1) / s.h + 1, Wo = (W + 2 * p.w - d.w * (KW - 1) - 1) / s.w + 1;
  const std::int64_t Og = O / groups;
  (void)C;
  std::vector<double> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t i = 0; i < Ho; ++i)
        for (std::int64_t j = 0; j < Wo; ++j) {
          double acc = b.defined() ? b(o) : 0.0;
          const std::int64_t g = o / Og;
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t ki = 0; ki < KH; ++ki)
              for (std::int64_t kj = 0; kj < KW; ++kj) {
                const std::int64_t hi = i * s.h - p.h + ki * d.h, wj = j * s.w - p.w + kj * d.w;
                if (hi < 0 || hi >= H || wj < 0 || wj >= W) continue;
                acc += static_cast<double>(x(n, g * Cg + c, hi, wj)) * w(o, c, ki, kj);
              }
          out.push_back(acc);
        }
  return out;
}
}  // namespace

TEST_CASE("Conv2d: forward equals a direct convolution by hand", "[nn]") {
  ms::manual_seed(3);
  Tensor<float> x = ms::randn<float>({2, 4, 7, 6});
  struct Cfg {
    ms::Int2 k, s, p, d;
    std::int64_t groups;
    bool bias;
  };
  for (const Cfg& c : {Cfg{3, 1, 0, 1, 1, true}, Cfg{3, 2, 1, 1, 1, true}, Cfg{{3, 2}, {1, 2}, {2, 0}, {2, 1}, 2, false},
                       Cfg{1, 1, 0, 1, 4, true}}) {
    INFO("kernel " << c.k.h << "x" << c.k.w << " stride " << c.s.h << "," << c.s.w << " groups " << c.groups);
    nn::Conv2d conv(4, 8, c.k, c.s, c.p, c.d, c.groups, c.bias);
    CHECK(conv.weight.shape() == ms::Shape{8, 4 / c.groups, c.k.h, c.k.w});
    CHECK(conv.bias.defined() == c.bias);
    Tensor<float> y = conv(x);
    require_values(y, conv_ref(x, conv.weight, conv.bias, c.s, c.p, c.d, c.groups), 1e-4, 1e-5);
    CHECK(y.to_vector() == ms::conv2d(x, conv.weight, conv.bias, c.s, c.p, c.d, c.groups).to_vector());
    // Default init bound 1/sqrt(fan_in), fan_in = in/groups * kH * kW.
    const double bound = 1.0 / std::sqrt(static_cast<double>(4 / c.groups * c.k.h * c.k.w));
    for (float v : conv.weight.to_vector()) CHECK(std::abs(v) <= bound);
  }
  nn::Conv2d conv(4, 8, 3, 2, 1);
  CHECK(conv.to_string() == "Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
  CHECK(names_of(conv) == std::vector<std::string>{"weight", "bias"});
  MS_REQUIRE_THROWS_MSG(conv(ms::zeros<float>({1, 3, 5, 5})), ms::ShapeError,
                        "[ms.shape_error] Conv2d: expected an input of shape (N, 4, H, W), got (1, 3, 5, 5)");
  MS_REQUIRE_THROWS_MSG(nn::Conv2d(4, 6, 3, 1, 0, 1, 4), ms::ValueError,
                        "[ms.value_error] Conv2d: groups (4) must divide in_channels (4) and out_channels (6)");
}

TEST_CASE("MaxPool2d, AvgPool2d, AdaptiveAvgPool2d: values by hand", "[nn]") {
  Tensor<float> x = ramp({1, 1, 4, 4});  // 0..15 row-major
  require_values(nn::MaxPool2d(2)(x), {5, 7, 13, 15});
  require_values(nn::AvgPool2d(2)(x), {2.5, 4.5, 10.5, 12.5});
  require_values(nn::MaxPool2d(3, 1)(x), {10, 11, 14, 15});
  require_values(nn::AvgPool2d(2, 2, 1)(x), {0 / 4.0, (1 + 2) / 4.0, 3 / 4.0, (4 + 8) / 4.0, (5 + 6 + 9 + 10) / 4.0,
                                              (7 + 11) / 4.0, 12 / 4.0, (13 + 14) / 4.0, 15 / 4.0});
  require_values(nn::AdaptiveAvgPool2d(1)(x), {7.5});
  require_values(nn::AdaptiveAvgPool2d({2, 1})(x), {3.5, 11.5});
  CHECK(nn::MaxPool2d(2).to_string() == "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
}

TEST_CASE("BatchNorm2d: batch statistics, running statistics, eval mode", "[nn]") {
  nn::BatchNorm2d bn(2);
  CHECK(names_of(bn) == std::vector<std::string>{"weight", "bias"});
  CHECK(bn.named_buffers().size() == 3);
  // Channel 0 holds 0..7, channel 1 holds 10 * (0..7), over N = 2 and 2x2 planes.
  Tensor<float> x = AnyTensor::empty({2, 2, 2, 2}, ms::DType::f32);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) x(n, c, k / 2, k % 2) = static_cast<float>((c ? 10 : 1) * (n * 4 + k));
  Tensor<float> y = bn(x);
  // Mean 3.5 and biased variance 5.25 for channel 0 (x 10 and x 100 for channel 1).
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) {
        const double s = c ? 10 : 1, v = s * (n * 4 + k);
        want.push_back((v - 3.5 * s) / std::sqrt(5.25 * s * s + 1e-5));
      }
  require_values(y, want, 1e-5, 1e-5);
  // running = 0.9 * running + 0.1 * batch (unbiased variance 6 = 5.25 * 8 / 7).
  require_values(bn.running_mean, {0.35, 3.5}, 1e-6);
  require_values(bn.running_var, {0.9 + 0.6, 0.9 + 60}, 1e-5);
  CHECK(bn.num_batches_tracked.item() == 1);
  bn.eval();
  Tensor<float> ye = bn(x);
  std::vector<double> want_eval;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) {
        const double v = (c ? 10 : 1) * (n * 4 + k), m = c ? 3.5 : 0.35, var = c ? 60.9 : 1.5;
        want_eval.push_back((v - m) / std::sqrt(var + 1e-5));
      }
  require_values(ye, want_eval, 1e-5, 1e-5);
  CHECK(bn.num_batches_tracked.item() == 1);  // eval does not count
  require_values(bn.running_mean, {0.35, 3.5}, 1e-6);
}

TEST_CASE("BatchNorm2d: a captured training step keeps updating the running statistics", "[nn][jit]") {
  ms::manual_seed(5);
  Tensor<float> x = ms::randn<float>({4, 3, 2, 2});
  nn::BatchNorm2d eager(3), captured(3);
  auto step = ms::jit([&](const Tensor<float>& in) { return captured(in).sum(); });
  for (int i = 0; i < 3; ++i) {
    Tensor<float> xi = x * static_cast<float>(i + 1);
    eager(xi);
    step(xi);
  }
  CHECK(step.num_replays() == 2);
  require_values(captured.running_mean, values(eager.running_mean), 1e-6);
  require_values(captured.running_var, values(eager.running_var), 1e-6);
  CHECK(captured.num_batches_tracked.item() == 3);

  // A captured eval forward reads the running statistics current at each replay.
  captured.eval();
  auto infer = ms::jit([&](const Tensor<float>& in) { return captured(in); });
  infer(x);
  captured.train();
  captured(x * 5.0f);  // moves the running statistics (eager)
  captured.eval();
  Tensor<float> replayed = infer(x);
  CHECK(infer.num_replays() == 1);
  require_values(replayed, values(captured(x)), 1e-6, 1e-6);
}

TEST_CASE("LayerNorm: normalizes the trailing dims", "[nn]") {
  nn::LayerNorm ln(std::vector<std::int64_t>{2, 2});
  set(ln.weight, {1, 2, 1, 2});
  set(ln.bias, {0, 0, 1, 1});
  Tensor<float> x = Tensor<float>{{1, 2, 3, 4}, {0, 0, 0, 8}}.reshape({2, 2, 2});
  std::vector<double> want;
  const std::vector<std::vector<double>> rows = {{1, 2, 3, 4}, {0, 0, 0, 8}};
  const double g[4] = {1, 2, 1, 2}, bb[4] = {0, 0, 1, 1};
  for (auto& r : rows) {
    double m = (r[0] + r[1] + r[2] + r[3]) / 4, v = 0;
    for (double e : r) v += (e - m) * (e - m) / 4;
    for (int i = 0; i < 4; ++i) want.push_back((r[i] - m) / std::sqrt(v + 1e-5) * g[i] + bb[i]);
  }
  require_values(ln(x), want, 1e-5, 1e-5);
  nn::LayerNorm plain(4, 1e-5, false);
  CHECK(plain.parameters().empty());
  CHECK(plain(x.reshape({2, 4})).shape() == ms::Shape{2, 4});
}

TEST_CASE("Dropout: training zeroes and rescales, eval is the identity", "[nn]") {
  nn::Dropout drop(0.25);
  Tensor<float> x = ms::ones<float>({10000});
  ms::manual_seed(9);
  auto v = drop(x).to_vector();
  std::int64_t zeros = 0;
  for (float e : v) {
    if (e == 0) ++zeros;
    else CHECK(e == Approx(1 / 0.75));
  }
  CHECK(std::abs(static_cast<double>(zeros) / 10000 - 0.25) < 0.02);
  drop.eval();
  CHECK(drop(x).to_vector() == x.to_vector());
  MS_REQUIRE_THROWS_MSG(nn::Dropout(1.5), ms::ValueError, "[ms.value_error] Dropout: p must be in [0, 1], got 1.5");
}

TEST_CASE("Embedding: rows by index, gradient into the table", "[nn]") {
  nn::Embedding emb(5, 3);
  set(emb.weight, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
  Tensor<std::int64_t> idx = Tensor<std::int64_t>{{4, 0}, {1, 4}};
  Tensor<float> y = emb(idx);
  CHECK(y.shape() == ms::Shape{2, 2, 3});
  require_values(y, {12, 13, 14, 0, 1, 2, 3, 4, 5, 12, 13, 14});
  y.sum().backward();
  require_values(emb.weight.grad(), {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2});
  MS_REQUIRE_THROWS_MSG(emb(Tensor<float>{1}), ms::DTypeError,
                        "[ms.dtype_error] Embedding: expected int64 or int32 indices, got float32");
}

// ---- training ------------------------------------------------------------------------------------

TEST_CASE("MLP overfits 8 random samples (eager, Adam, cross entropy)", "[nn][train]") {
  ms::manual_seed(2024);
  Tensor<float> x = ms::randn<float>({8, 6});
  Tensor<std::int64_t> y = Tensor<std::int64_t>{0, 1, 2, 0, 1, 2, 1, 0};
  auto net = nn::make<nn::Sequential>(nn::make<nn::Linear>(6, 32), nn::make<nn::Tanh>(), nn::make<nn::Linear>(32, 3));
  ms::optim::Adam opt(net->parameters(), 0.05);
  nn::CrossEntropyLoss loss_fn;
  double first = 0, loss = 1e9;
  int steps = 0;
  while (steps < 300 && loss >= 1e-2) {
    opt.zero_grad();
    Tensor<float> l = loss_fn((*net)(x), y);
    l.backward();
    opt.step();
    loss = l.item();
    if (steps == 0) first = loss;
    ++steps;
  }
  INFO("first loss " << first << ", last " << loss << " after " << steps << " steps");
  CHECK(first > 0.5);
  CHECK(loss < 1e-2);
  CHECK(steps <= 300);
  auto pred = ms::argmax((*net)(x), 1);
  CHECK(pred.to_vector() == y.to_vector());
}

TEST_CASE("MLP training step captured by jit matches eager step for step", "[nn][train][jit]") {
  auto run = [](bool captured) {
    ms::manual_seed(77);
    Tensor<float> x = ms::randn<float>({8, 4});
    Tensor<std::int64_t> y = Tensor<std::int64_t>{0, 1, 2, 0, 1, 2, 1, 0};
    auto net = nn::make<nn::Sequential>(nn::make<nn::Linear>(4, 16), nn::make<nn::ReLU>(), nn::make<nn::Linear>(16, 3));
    ms::optim::SGD opt(net->parameters(), 0.1, 0.9);
    auto vg = ms::value_and_grad(
        [&](const Tensor<float>& in, const Tensor<std::int64_t>& target) { return ms::cross_entropy((*net)(in), target); },
        net->parameters_any());
    auto eager_step = [&](const Tensor<float>& in, const Tensor<std::int64_t>& target) {
      auto [l, g] = vg(in, target);
      opt.step(g);
      return l;
    };
    auto jitted = ms::jit(eager_step);
    std::vector<float> losses;
    for (int i = 0; i < 10; ++i) losses.push_back((captured ? jitted(x, y) : eager_step(x, y)).item());
    if (captured) CHECK(jitted.num_replays() == 9);
    return std::make_pair(losses, net->parameters()[0].to_vector());
  };
  auto [le, pe] = run(false);
  auto [lj, pj] = run(true);
  REQUIRE(le.size() == lj.size());
  for (std::size_t i = 0; i < le.size(); ++i) {
    INFO("step " << i);
    CHECK(lj[i] == Approx(le[i]).epsilon(1e-5));
  }
  CHECK(le.back() < le.front());
  for (std::size_t i = 0; i < pe.size(); ++i) CHECK(pj[i] == Approx(pe[i]).epsilon(1e-4).margin(1e-6));
}
