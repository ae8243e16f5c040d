// Optimizers and LR schedules (optim/optimizer.hpp). Each optimizer runs 3 steps on a
// 2-element parameter of the quadratic loss L(p) = sum(c * p^2 / 2 + d * p), whose gradient
// is c * p + d, and is checked against a plain-double reference of the PyTorch algorithm
// written out in this file (plus a few literal values worked out by hand). The same 3
// steps inside an ms::jit-captured step function (one trace, two replays) must give the
// same parameter and state values as eager: that proves the optimizer state, the step
// count and the lr are graph state that replays update. Schedules are checked by value,
// and a schedule's lr change must reach an already captured step.

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "test_util.hpp"
#include <ms/optim/optimizer.hpp>

namespace {

using ms::Tensor;
using ms::optim::AdamOptions;
using ms::optim::SGDOptions;
using ms_test::require_values;

const std::vector<double> kP0 = {1.0, -2.0};
const std::vector<double> kC = {2.0, 0.5};
const std::vector<double> kD = {0.3, -0.2};

/// L = sum(c * p^2 / 2 + d * p) * x, x a graph input (all ones) so that jit has an argument.
Tensor<float> quad_loss(const Tensor<float>& p, const Tensor<float>& x) {
  static const Tensor<float> c = {2.0f, 0.5f};
  static const Tensor<float> d = {0.3f, -0.2f};
  return ((p * p * c * 0.5f + p * d) * x).sum();
}

std::vector<double> ref_grad(const std::vector<double>& p) {
  return {kC[0] * p[0] + kD[0], kC[1] * p[1] + kD[1]};
}

/// torch.optim.SGD, in doubles.
struct RefSGD {
  double lr, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  std::vector<double> buf = {0, 0};
  int t = 0;
  void step(std::vector<double>& p) {
    std::vector<double> g = ref_grad(p);
    for (int i = 0; i < 2; ++i) {
      double gi = g[i] + weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = t == 0 ? gi : momentum * buf[i] + (1 - dampening) * gi;
        gi = nesterov ? gi + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * gi;
    }
    ++t;
  }
};

/// torch.optim.Adam / AdamW, in doubles.
struct RefAdam {
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false, amsgrad = false;
  std::vector<double> m = {0, 0}, v = {0, 0}, vmax = {0, 0};
  int t = 0;
  void step(std::vector<double>& p) {
    ++t;
    std::vector<double> g = ref_grad(p);
    for (int i = 0; i < 2; ++i) {
      double gi = g[i];
      if (decoupled) p[i] *= 1 - lr * weight_decay;
      else gi += weight_decay * p[i];
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      double vv = v[i];
      if (amsgrad) vv = vmax[i] = std::max(vmax[i], v[i]);
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(vv) / std::sqrt(bc2) + eps);
    }
  }
};

template <class Ref>
std::vector<std::vector<double>> ref_run(Ref ref, int steps) {
  std::vector<std::vector<double>> out;
  std::vector<double> p = kP0;
  for (int s = 0; s < steps; ++s) {
    ref.step(p);
    out.push_back(p);
  }
  return out;
}

using MakeOpt = std::function<std::unique_ptr<ms::optim::Optimizer>(std::vector<Tensor<float>>)>;

Tensor<float> fresh_param() {
  Tensor<float> p = {1.0f, -2.0f};
  p.requires_grad_();
  return p;
}

/// Eager with backward() and step(): the parameter after each step.
std::vector<std::vector<float>> run_backward(const MakeOpt& make, int steps,
                                             std::unique_ptr<ms::optim::Optimizer>* keep = nullptr) {
  Tensor<float> p = fresh_param();
  auto opt = make({p});
  Tensor<float> x = ms::ones<float>({2});
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad();
    quad_loss(p, x).backward();
    opt->step();
    out.push_back(p.to_vector());
  }
  if (keep) *keep = std::move(opt);
  return out;
}

/// Eager with value_and_grad and step(grads).
std::vector<std::vector<float>> run_value_and_grad(const MakeOpt& make, int steps) {
  Tensor<float> p = fresh_param();
  auto opt = make({p});
  auto vg = ms::value_and_grad([&](const Tensor<float>& x) { return quad_loss(p, x); }, {p});
  Tensor<float> x = ms::ones<float>({2});
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    auto [loss, grads] = vg(x);
    opt->step(grads);
    out.push_back(p.to_vector());
  }
  return out;
}

/// The training step (forward, backward, update) captured by ms::jit: traced on the first
/// call, replayed on the others.
std::vector<std::vector<float>> run_jit(const MakeOpt& make, int steps,
                                        std::unique_ptr<ms::optim::Optimizer>* keep = nullptr) {
  Tensor<float> p = fresh_param();
  auto opt = make({p});
  auto vg = ms::value_and_grad([&](const Tensor<float>& x) { return quad_loss(p, x); }, {p});
  auto train_step = ms::jit([&](const Tensor<float>& x) {
    auto [loss, grads] = vg(x);
    opt->step(grads);
    return loss;
  });
  Tensor<float> x = ms::ones<float>({2});
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    train_step(x);
    out.push_back(p.to_vector());
  }
  CHECK(train_step.num_traces() == 1);
  CHECK(train_step.num_replays() == static_cast<std::size_t>(steps - 1));
  if (keep) *keep = std::move(opt);
  return out;
}

/// The captured step written with backward() and step() (reads .grad inside the capture).
std::vector<std::vector<float>> run_jit_backward(const MakeOpt& make, int steps) {
  Tensor<float> p = fresh_param();
  auto opt = make({p});
  auto train_step = ms::jit([&](const Tensor<float>& x) {
    opt->zero_grad();
    Tensor<float> loss = quad_loss(p, x);
    loss.backward();
    opt->step();
    return loss;
  });
  Tensor<float> x = ms::ones<float>({2});
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    train_step(x);
    out.push_back(p.to_vector());
  }
  CHECK(train_step.num_replays() == static_cast<std::size_t>(steps - 1));
  return out;
}

void check_close(const std::vector<std::vector<float>>& got, const std::vector<std::vector<double>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t s = 0; s < got.size(); ++s)
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("step " << s + 1 << ", element " << i << ": got " << got[s][i] << ", expected " << want[s][i]);
      CHECK(std::abs(got[s][i] - want[s][i]) <= 1e-6 + 1e-5 * std::abs(want[s][i]));
    }
}

/// All four paths agree with the reference; the captured ones agree with eager exactly.
template <class Ref>
void check_optimizer(const MakeOpt& make, Ref ref) {
  auto want = ref_run(ref, 3);
  auto eager = run_backward(make, 3);
  check_close(eager, want);
  check_close(run_value_and_grad(make, 3), want);
  auto jitted = run_jit(make, 3);
  check_close(jitted, want);
  CHECK(jitted == eager);
  auto jitted_bw = run_jit_backward(make, 3);
  CHECK(jitted_bw == eager);
}

}  // namespace

// ---- SGD -----------------------------------------------------------------------------------

TEST_CASE("SGD: plain steps match values worked out by hand", "[optim]") {
  // g = c * p + d: p0 = (1, -2) -> g = (2.3, -1.2) -> p1 = (0.77, -1.88) with lr 0.1, then
  // g = (1.84, -1.14) -> p2 = (0.586, -1.766), g = (1.472, -1.083) -> p3 = (0.4388, -1.6577).
  MakeOpt make = [](std::vector<Tensor<float>> ps) { return std::make_unique<ms::optim::SGD>(ps, 0.1); };
  auto got = run_backward(make, 3);
  check_close(got, {{0.77, -1.88}, {0.586, -1.766}, {0.4388, -1.6577}});
  check_optimizer(make, RefSGD{0.1});
}

TEST_CASE("SGD: momentum", "[optim]") {
  // Step 1 takes buf = g = (2.3, -1.2): p1 = (0.77, -1.88); step 2: g = (1.84, -1.14),
  // buf = 0.9 * (2.3, -1.2) + g = (3.91, -2.22) -> p2 = (0.379, -1.658).
  MakeOpt make = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::SGD>(ps, 0.1, SGDOptions{.momentum = 0.9});
  };
  auto got = run_backward(make, 2);
  check_close(got, {{0.77, -1.88}, {0.379, -1.658}});
  check_optimizer(make, RefSGD{0.1, 0.9});
}

TEST_CASE("SGD: Nesterov momentum", "[optim]") {
  MakeOpt make = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::SGD>(ps, 0.05, SGDOptions{.momentum = 0.8, .nesterov = true});
  };
  check_optimizer(make, RefSGD{0.05, 0.8, 0, 0, true});
}

TEST_CASE("SGD: weight decay, alone and with momentum", "[optim]") {
  // Weight decay 0.1 adds 0.1 * p: step 1 g = (2.3 + 0.1, -1.2 - 0.2) -> p1 = (0.76, -1.86).
  MakeOpt wd = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::SGD>(ps, 0.1, SGDOptions{.weight_decay = 0.1});
  };
  check_close(run_backward(wd, 1), {{0.76, -1.86}});
  check_optimizer(wd, RefSGD{0.1, 0, 0, 0.1});
  MakeOpt wd_mom = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::SGD>(ps, 0.1, 0.9, 0.01, true);
  };
  check_optimizer(wd_mom, RefSGD{0.1, 0.9, 0, 0.01, true});
}

TEST_CASE("SGD: dampening takes the first step undamped, also in replays", "[optim]") {
  MakeOpt make = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::SGD>(ps, 0.1, SGDOptions{.momentum = 0.9, .dampening = 0.5});
  };
  check_optimizer(make, RefSGD{0.1, 0.9, 0.5});
}

// ---- Adam / AdamW ------------------------------------------------------------------------------

TEST_CASE("Adam: the first step moves each element by lr against the gradient's sign", "[optim]") {
  // With bias correction, step 1 is lr * m1 / sqrt(v1) = lr * g / |g| (up to eps).
  MakeOpt make = [](std::vector<Tensor<float>> ps) { return std::make_unique<ms::optim::Adam>(ps, 0.1); };
  check_close(run_backward(make, 1), {{0.9, -1.9}});
  check_optimizer(make, RefAdam{0.1});
}

TEST_CASE("Adam: betas, eps, L2 weight decay and amsgrad", "[optim]") {
  MakeOpt l2 = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::Adam>(ps, 0.05, 0.8, 0.99, 1e-3, 0.1);
  };
  check_optimizer(l2, RefAdam{0.05, 0.8, 0.99, 1e-3, 0.1});
  MakeOpt ams = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::Adam>(ps, 0.1, AdamOptions{.beta1 = 0.5, .beta2 = 0.9, .amsgrad = true});
  };
  check_optimizer(ams, RefAdam{0.1, 0.5, 0.9, 1e-8, 0, false, true});
}

TEST_CASE("AdamW: decoupled weight decay", "[optim]") {
  // Step 1: p * (1 - 0.1 * 0.5) = (0.95, -1.9), then -lr * sign(g): (0.85, -1.8).
  MakeOpt make = [](std::vector<Tensor<float>> ps) {
    return std::make_unique<ms::optim::AdamW>(ps, 0.1, 0.9, 0.999, 1e-8, 0.5);
  };
  check_close(run_backward(make, 1), {{0.85, -1.8}});
  check_optimizer(make, RefAdam{0.1, 0.9, 0.999, 1e-8, 0.5, true});
  // The default weight decay of AdamW is 0.01.
  Tensor<float> p = fresh_param();
  ms::optim::AdamW def({p});
  CHECK(def.options().weight_decay == 0.01);
  CHECK(def.lr() == 1e-3);
}

TEST_CASE("Adam: moments and step count after captured replays equal eager", "[optim]") {
  MakeOpt make = [](std::vector<Tensor<float>> ps) { return std::make_unique<ms::optim::Adam>(ps, 0.1); };
  std::unique_ptr<ms::optim::Optimizer> eager, jitted;
  run_backward(make, 3, &eager);
  run_jit(make, 3, &jitted);
  CHECK(eager->step_count().item() == 3.0f);
  CHECK(jitted->step_count().item() == 3.0f);
  for (const char* s : {"exp_avg", "exp_avg_sq"}) {
    INFO(s);
    CHECK(jitted->state(0, s).to_vector() == eager->state(0, s).to_vector());
  }
  RefAdam ref{0.1};
  std::vector<double> p = kP0;
  for (int i = 0; i < 3; ++i) ref.step(p);
  require_values(eager->state(0, "exp_avg"), ref.m, 1e-5);
  require_values(eager->state(0, "exp_avg_sq"), ref.v, 1e-5);
}

TEST_CASE("Optimizers: parameters without a gradient are skipped", "[optim]") {
  Tensor<float> a = fresh_param(), b = fresh_param();
  ms::optim::SGD opt({a, b}, 0.1);
  Tensor<float> x = ms::ones<float>({2});
  quad_loss(a, x).backward();  // b gets no gradient
  opt.step();
  require_values(a, {0.77, -1.88});
  require_values(b, {1.0, -2.0});
  CHECK(b.grad_any().defined() == false);
  opt.zero_grad();
  CHECK(a.grad_any().defined() == false);
  // step(grads) with an undefined entry skips that parameter too.
  opt.step({ms::AnyTensor(), Tensor<float>{1.0f, 1.0f}});
  require_values(a, {0.77, -1.88});
  require_values(b, {0.9, -2.1});
}

TEST_CASE("Optimizers: errors", "[optim]") {
  Tensor<float> p = fresh_param();
  MS_REQUIRE_THROWS_MSG(ms::optim::SGD({}, 0.1), ms::ValueError, "[ms.value_error] SGD: the parameter list is empty");
  MS_REQUIRE_THROWS_MSG(ms::optim::SGD({p}, -1.0), ms::ValueError, "[ms.value_error] SGD: invalid learning rate -1");
  MS_REQUIRE_THROWS_MSG(ms::optim::SGD({p, p}, 0.1), ms::ValueError,
                        "[ms.value_error] SGD: parameter 1 appears more than once");
  MS_REQUIRE_THROWS_MSG(ms::optim::SGD({p}, 0.1, SGDOptions{.nesterov = true}), ms::ValueError,
                        "[ms.value_error] SGD: Nesterov momentum requires a momentum and zero dampening");
  MS_REQUIRE_THROWS_MSG(ms::optim::Adam({p}, 0.1, AdamOptions{.beta1 = 1.0}), ms::ValueError,
                        "[ms.value_error] Adam: invalid beta1 1");
  ms::optim::Adam opt({p}, 0.1);
  MS_REQUIRE_THROWS_MSG(opt.step({}), ms::ValueError, "[ms.value_error] Adam: step got 0 gradients for 1 parameters");
  MS_REQUIRE_THROWS_MSG(opt.step({Tensor<float>{1.0f, 2.0f, 3.0f}}), ms::ShapeError,
                        "[ms.shape_error] Adam: the gradient of parameter 0 has shape (3,), the parameter has (2,)");
  MS_REQUIRE_THROWS_MSG(opt.step({Tensor<double>{1.0, 2.0}}), ms::DTypeError,
                        "[ms.dtype_error] Adam: the gradient of parameter 0 is float64, the parameter is float32");
  MS_REQUIRE_THROWS_MSG(opt.state(0, "momentum_buffer"), ms::ValueError,
                        "[ms.value_error] Adam: no state 'momentum_buffer' for parameter 0");
  require_values(p, {1.0, -2.0});  // nothing was written
  CHECK(opt.step_count().item() == 0.0f);
}

TEST_CASE("Optimizers: state_dict round trip", "[optim]") {
  MakeOpt make = [](std::vector<Tensor<float>> ps) { return std::make_unique<ms::optim::Adam>(ps, 0.1); };
  std::unique_ptr<ms::optim::Optimizer> a;
  auto pa = run_backward(make, 2, &a);
  auto sd = a->state_dict();
  CHECK(sd.size() == 4);  // lr, step, 0.exp_avg, 0.exp_avg_sq
  Tensor<float> p = ms::from_vector<float>(pa.back(), {2});
  p.requires_grad_();
  ms::optim::Adam b({p}, 0.5);
  b.load_state_dict(sd);
  CHECK(b.lr() == Approx(0.1));
  CHECK(b.step_count().item() == 2.0f);
  // One more step from the restored state equals the third step of an uninterrupted run.
  quad_loss(p, ms::ones<float>({2})).backward();
  b.step();
  CHECK(p.to_vector() == run_backward(make, 3).back());
  ms::optim::StateDict bad = sd;
  bad.erase("0.exp_avg");
  MS_REQUIRE_THROWS_MSG(b.load_state_dict(bad), ms::ValueError, "[ms.value_error] Adam: load_state_dict: missing key '0.exp_avg'");
}

// ---- learning-rate schedules -----------------------------------------------------------------

TEST_CASE("LR schedules: StepLR, CosineAnnealingLR, WarmupLinearLR, LambdaLR by value", "[optim]") {
  Tensor<float> p = fresh_param();
  auto lrs = [&](auto& sched, ms::optim::Optimizer& opt, int n) {
    std::vector<double> out{opt.lr()};
    CHECK(static_cast<double>(opt.lr_tensor().item()) == Approx(opt.lr()));
    for (int i = 1; i < n; ++i) {
      sched.step();
      out.push_back(opt.lr());
      CHECK(static_cast<double>(opt.lr_tensor().item()) == Approx(opt.lr()));
    }
    return out;
  };
  auto check = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("epoch " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-12));
    }
  };
  {
    ms::optim::SGD opt({p}, 1.0);
    ms::optim::StepLR s(opt, 2, 0.5);
    check(lrs(s, opt, 6), {1, 1, 0.5, 0.5, 0.25, 0.25});
    CHECK(s.last_epoch() == 5);
  }
  {
    ms::optim::SGD opt({p}, 1.0);
    ms::optim::CosineAnnealingLR s(opt, 4, 0.1);
    const double a = 0.1 + 0.9 * (1 + std::cos(M_PI / 4)) / 2, b = 0.1 + 0.9 * (1 + std::cos(3 * M_PI / 4)) / 2;
    check(lrs(s, opt, 5), {1.0, a, 0.55, b, 0.1});
  }
  {
    ms::optim::SGD opt({p}, 1.0);
    ms::optim::WarmupLinearLR s(opt, 2, 6);
    check(lrs(s, opt, 8), {0, 0.5, 1, 0.75, 0.5, 0.25, 0, 0});
  }
  {
    ms::optim::SGD opt({p}, 2.0);
    ms::optim::LambdaLR s(opt, [](std::int64_t e) { return 1.0 / static_cast<double>(e + 1); });
    check(lrs(s, opt, 3), {2.0, 1.0, 2.0 / 3});
    s.set_epoch(9);
    CHECK(opt.lr() == Approx(0.2));
  }
  ms::optim::SGD opt({p}, 1.0);
  MS_REQUIRE_THROWS_MSG(ms::optim::StepLR(opt, 0), ms::ValueError, "[ms.value_error] StepLR: step_size must be positive, got 0");
  MS_REQUIRE_THROWS_MSG(opt.set_lr(std::nan("")), ms::ValueError, "[ms.value_error] SGD: invalid learning rate nan");
}

TEST_CASE("LR schedules change an already captured step without re-tracing", "[optim]") {
  Tensor<float> p = fresh_param();
  ms::optim::SGD opt({p}, 0.1);
  ms::optim::StepLR sched(opt, 1, 0.1);  // 0.1, 0.01, 0.001
  auto vg = ms::value_and_grad([&](const Tensor<float>& x) { return quad_loss(p, x); }, {p});
  auto train_step = ms::jit([&](const Tensor<float>& x) {
    auto [loss, grads] = vg(x);
    opt.step(grads);
    return loss;
  });
  Tensor<float> x = ms::ones<float>({2});
  std::vector<double> ref = kP0;
  for (double lr : {0.1, 0.01, 0.001}) {
    CHECK(opt.lr() == Approx(lr));
    train_step(x);
    RefSGD{lr}.step(ref);
    require_values(p, ref, 1e-5);
    sched.step();
  }
  CHECK(train_step.num_traces() == 1);
  CHECK(train_step.num_replays() == 2);
}

// ---- adam_update: the one-pass update op ----------------------------------------------------

MS_TEST_COVERS("adam_update");

namespace adam_op {

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
namespace ops = ms::ops;

/// Uniform values in [lo, hi) of dtype d.
AnyTensor uniform(const Shape& s, DType d, double lo, double hi, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  AnyTensor t = ops::zeros(s, d);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (d == DType::f32) static_cast<float*>(t.raw_data())[i] = static_cast<float>(u(rng));
    else static_cast<double*>(t.raw_data())[i] = u(rng);
  }
  return t;
}

/// The update written with separate ops, as optim::Adam's amsgrad path does.
std::vector<AnyTensor> composite(AnyTensor p, AnyTensor g, const AnyTensor& m, const AnyTensor& v, const AnyTensor& ss,
                                 const AnyTensor& bc, double b1, double b2, double eps, double wd, const AnyTensor& decay) {
  if (decay.defined()) p = ops::mul(p, decay);
  if (wd != 0) g = ops::add(g, ops::mul(p, wd));
  AnyTensor m2 = ops::add(ops::mul(m, b1), ops::mul(g, 1.0 - b1));
  AnyTensor v2 = ops::add(ops::mul(v, b2), ops::mul(ops::mul(g, g), 1.0 - b2));
  AnyTensor denom = ops::add(ops::div(ops::sqrt(v2), bc), eps);
  return {ops::sub(p, ops::mul(ops::div(m2, denom), ss)), m2, v2};
}

struct Case {
  const char* name;
  double wd;
  bool decoupled;
};

}  // namespace adam_op

TEST_CASE("adam_update: one pass equals the composite ops bit for bit", "[optim][op]") {
  using namespace adam_op;
  ms_test::ThreadGuard tg;
  for (int threads : {1, 2}) {
    ms::set_num_threads(threads);
    for (DType d : {DType::f32, DType::f64}) {
      // 20011 elements: whole SIMD batches, a scalar tail, and more than one thread's share.
      for (const Case& c : {Case{"plain", 0.0, false}, Case{"L2", 0.1, false}, Case{"decoupled", 0.0, true}}) {
        INFO(c.name << ", " << ms::dtype_name(d) << ", " << threads << " thread(s)");
        const Shape s{20011};
        AnyTensor p = uniform(s, d, -2, 2, 1), g = uniform(s, d, -1, 1, 2), m = uniform(s, d, -0.5, 0.5, 3);
        AnyTensor v = uniform(s, d, 0, 0.3, 4);
        // Special values: a zero second moment with a zero gradient (0/eps), signed zeros, inf.
        for (AnyTensor* t : {&g, &v, &m}) ms::visit_dtype(d, [&]<class T>() {
          if constexpr (std::is_floating_point_v<T>) static_cast<T*>(t->raw_data())[7] = T(0);
        });
        ms::visit_dtype(d, [&]<class T>() {
          if constexpr (std::is_floating_point_v<T>) {
            static_cast<T*>(p.raw_data())[9] = -T(0);
            static_cast<T*>(g.raw_data())[11] = std::numeric_limits<T>::infinity();
          }
        });
        // Second moments over the whole range (every third element log-uniform from the
        // subnormals up), and a NaN: the division by sqrt(1 - beta2^t) must round as the
        // composite form's div does for every sqrt(v) (it runs without a divider where FMA
        // is at hand, backend/cpu/kernels/adam.hpp).
        ms::visit_dtype(d, [&]<class T>() {
          if constexpr (std::is_floating_point_v<T>) {
            std::mt19937 rng(5);
            const double lo = std::is_same_v<T, float> ? -44.0 : -320.0, hi = std::is_same_v<T, float> ? 38.0 : 308.0;
            std::uniform_real_distribution<double> e10(lo, hi);
            T* vp = static_cast<T*>(v.raw_data());
            for (std::int64_t i = 0; i < s[0]; i += 3)
              if (i != 7) vp[i] = static_cast<T>(std::pow(10.0, e10(rng)));
            vp[13] = std::numeric_limits<T>::quiet_NaN();
          }
        });
        AnyTensor decay = c.decoupled ? ops::scalar_tensor(1 - 0.01 * 0.5, d) : AnyTensor();
        const auto p_bytes = ms_test::bytes_of(p), m_bytes = ms_test::bytes_of(m);
        // sqrt(1 - beta2^t) at t = 1 and t = 2, one with every mantissa bit set, 1 (large t),
        // and values outside [2^-60, 2^60] (the plain division).
        for (double bcv : {std::sqrt(1 - 0.999), std::sqrt(1 - 0.999 * 0.999), 1.0, 0.99999994039535522, 1e-20, 1e20}) {
          INFO("bc2_sqrt " << bcv);
          AnyTensor ss = ops::scalar_tensor(0.01 / (1 - 0.9 * 0.9), d), bc = ops::scalar_tensor(bcv, d);
          auto want = composite(p, g, m, v, ss, bc, 0.9, 0.999, 1e-8, c.wd, decay);
          auto got = ops::adam_update(p, g, m, v, ss, bc, 0.9, 0.999, 1e-8, c.wd, decay);
          REQUIRE(got.size() == 3);
          for (int k = 0; k < 3; ++k) {
            INFO("output " << k);
            CHECK(ms_test::same_bits(got[static_cast<std::size_t>(k)], want[static_cast<std::size_t>(k)]));
          }
          // Element 7: without an L2 term g, m and v are zero: m' = v' = 0 and p moves by 0 / eps = 0.
          ms::visit_dtype(d, [&]<class T>() {
            if constexpr (std::is_floating_point_v<T>) {
              if (c.wd == 0) CHECK(static_cast<const T*>(got[1].raw_data())[7] == T(0));
              CHECK(std::isnan(static_cast<const T*>(got[0].raw_data())[11]));  // inf gradient: inf/inf
            }
          });
        }
        // The inputs are read, never written.
        CHECK(ms_test::bytes_of(p) == p_bytes);
        CHECK(ms_test::bytes_of(m) == m_bytes);
      }
    }
  }
}

TEST_CASE("adam_update: its expansion into other ops gives the same bits in a graph", "[optim][graph]") {
  using namespace adam_op;
  for (bool decoupled : {false, true}) {
    INFO("decoupled " << decoupled);
    const Shape s{37, 11};
    const DType d = DType::f32;
    std::vector<AnyTensor> in{uniform(s, d, -2, 2, 5), uniform(s, d, -1, 1, 6), uniform(s, d, -0.5, 0.5, 7),
                              uniform(s, d, 0, 0.3, 8), ops::scalar_tensor(0.02, d), ops::scalar_tensor(0.3, d)};
    if (decoupled) in.push_back(ops::scalar_tensor(0.99, d));
    auto build = [&] {
      ms::graph::Graph g;
      std::vector<ms::graph::ValueId> ids;
      for (auto& t : in) ids.push_back(g.add_input({t.dtype(), t.shape()}));
      auto outs = g.add_node(ops::adam_update_op, ids,
                             ops::Attrs{{"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-3}, {"weight_decay", decoupled ? 0.0 : 0.1}});
      for (auto o : outs) g.mark_output(o);
      return g;
    };
    ms::graph::Graph fused = build(), expanded = build();
    CHECK(ms::graph::expand_nodes(expanded, [](const ms::graph::Node&) { return true; }) == 1);
    ms::graph::verify(expanded);
    CHECK(expanded.count("adam_update") == 0);
    CHECK(expanded.count("sqrt") == 1);
    CHECK(expanded.count("div") == 2);
    auto a = ms::backend::compile(std::move(fused)).run(std::span<const AnyTensor>(in));
    ms::backend::CompileOptions no_opt;
    no_opt.optimize = false;
    auto b = ms::backend::compile(std::move(expanded), no_opt).run(std::span<const AnyTensor>(in));
    auto want = ops::adam_update(in[0], in[1], in[2], in[3], in[4], in[5], 0.8, 0.99, 1e-3, decoupled ? 0.0 : 0.1,
                                 decoupled ? in[6] : AnyTensor());
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
      INFO("output " << k);
      CHECK(ms_test::same_bits(a[k], want[k]));
      CHECK(ms_test::same_bits(b[k], want[k]));
    }
  }
}

TEST_CASE("adam_update: errors name the op, the shapes and the dtypes", "[optim][op]") {
  using namespace adam_op;
  AnyTensor p = ops::zeros(Shape{2}, DType::f32), s = ops::scalar_tensor(1.0, DType::f32);
  MS_REQUIRE_THROWS_MSG(ops::adam_update(p, ops::zeros(Shape{3}, DType::f32), p, p, s, s, 0.9, 0.999, 1e-8),
                        ms::ShapeError, "[ms.shape_error] adam_update: g has shape (3,), p has (2,)");
  MS_REQUIRE_THROWS_MSG(ops::adam_update(p, p, p, ops::zeros(Shape{2}, DType::f64), s, s, 0.9, 0.999, 1e-8),
                        ms::DTypeError, "[ms.dtype_error] adam_update: v is float64, p is float32");
  MS_REQUIRE_THROWS_MSG(ops::adam_update(p, p, p, p, p, s, 0.9, 0.999, 1e-8), ms::ShapeError,
                        "[ms.shape_error] adam_update: step_size must be 0-d, got shape (2,)");
  MS_REQUIRE_THROWS_MSG(ops::adam_update(p, p, p, p, s, s, 0.9, 0.999, 1e-8, 0.1, s), ms::ValueError,
                        "[ms.value_error] adam_update: give either decay (AdamW) or weight_decay (Adam's L2 term), not both");
  AnyTensor i = ops::zeros(Shape{2}, DType::i32);
  CHECK_THROWS_AS(ops::adam_update(i, i, i, i, ops::scalar_tensor(1, DType::i32), ops::scalar_tensor(1, DType::i32),
                                   0.9, 0.999, 1e-8),
                  ms::DTypeError);
}

TEST_CASE("Adam: a captured step writes p, m and v in place, with no arena buffer for them", "[optim][graph]") {
  // 4099 elements: SIMD batches and a tail. Eager and captured steps agree bit for bit.
  auto run = [](bool captured, std::size_t* arena) {
    ms::manual_seed(3);
    Tensor<float> p = ms::randn<float>({4099});
    p.requires_grad_(true);
    ms::optim::Adam opt({p}, 0.01);
    Tensor<float> c = ms::rand<float>({4099});
    auto step = [&](const Tensor<float>& x) {
      Tensor<float> loss = (p * p * c * x).sum();
      opt.step(ms::autograd::grad(loss, {ms::AnyTensor(p)}));
      return loss;
    };
    auto jitted = ms::jit(step);
    Tensor<float> x = ms::ones<float>({4099});
    const float* storage = p.data();
    for (int k = 0; k < 3; ++k) captured ? jitted(x) : step(x);
    CHECK(p.data() == storage);
    if (captured) {
      *arena = jitted.executable()->arena_bytes();
      CHECK(jitted.executable()->graph().count("adam_update") == 1);
    }
    return std::vector<std::vector<float>>{p.to_vector(), opt.state(0, "exp_avg").to_vector(),
                                           opt.state(0, "exp_avg_sq").to_vector()};
  };
  std::size_t arena = 0;
  auto eager = run(false, nullptr);
  auto jitted = run(true, &arena);
  CHECK(jitted == eager);
  // The arena holds the gradient and its intermediates only: less than the 3 outputs would need.
  CHECK(arena < 3 * 4099 * sizeof(float));
}

namespace {
/// An observer that reads values (as a dump does), so eager Adam must not overwrite its inputs.
class ValueWatcher final : public ms::ops::OpObserver {
 public:
  std::uint64_t begin(const ms::ops::OpDef&, std::span<const ms::AnyTensor>, const ms::ops::Attrs&,
                      const ms::ops::OpCallInfo&) override {
    return 0;
  }
  void end(std::uint64_t, const ms::ops::OpDef& op, std::span<const ms::AnyTensor> in, const ms::ops::Attrs&,
           std::span<const ms::AnyTensor> out, const ms::ops::OpCallInfo&) override {
    if (op.name != "adam_update") return;
    p_in_after = *static_cast<const float*>(in[0].raw_data());
    p_out = *static_cast<const float*>(out[0].raw_data());
  }
  bool needs_values() const override { return reads_values; }
  bool reads_values = true;
  float p_in_after = 0, p_out = 0;
};
}  // namespace

TEST_CASE("Adam: an eager step writes p, m and v in place, allocating nothing per parameter", "[optim]") {
  // Three parameters of 4099, 1000 and 7 elements, their gradients computed beforehand.
  auto run = [](ms::ops::OpObserver* watcher, std::uint64_t* allocs_per_step) {
    ms::manual_seed(5);
    std::vector<Tensor<float>> ps = {ms::randn<float>({4099}), ms::randn<float>({10, 100}), ms::randn<float>({7})};
    std::vector<Tensor<float>> gs = {ms::randn<float>({4099}), ms::randn<float>({10, 100}), ms::randn<float>({7})};
    ms::optim::AdamW opt(ps, 0.01);
    const float* storage = ps[0].data();
    const float* m_storage = opt.state(0, "exp_avg").data();
    std::unique_ptr<ms::ops::ObserverScope> scope;
    if (watcher) scope = std::make_unique<ms::ops::ObserverScope>(watcher);
    for (int k = 0; k < 3; ++k) {
      const std::uint64_t before = ms::host_allocator_stats().num_allocs;
      opt.step(std::vector<ms::AnyTensor>(gs.begin(), gs.end()));
      if (allocs_per_step) *allocs_per_step = ms::host_allocator_stats().num_allocs - before;
    }
    CHECK(ps[0].data() == storage);
    CHECK(opt.state(0, "exp_avg").data() == m_storage);
    std::vector<std::vector<float>> r;
    for (std::size_t i = 0; i < ps.size(); ++i)
      for (const char* s : {"exp_avg", "exp_avg_sq"}) r.push_back(opt.state(i, s).to_vector());
    for (auto& p : ps) r.push_back(p.to_vector());
    return r;
  };
  std::uint64_t in_place_allocs = 0, watched_allocs = 0;
  const auto in_place = run(nullptr, &in_place_allocs);
  // A dump-like observer sees adam_update's inputs unchanged after the op: the out-of-place path.
  ValueWatcher dump;
  const auto watched = run(&dump, &watched_allocs);
  CHECK(dump.p_in_after != dump.p_out);
  CHECK(watched == in_place);  // the same bits either way
  // The out-of-place path allocates p', m' and v' for each of the 3 parameters; in place,
  // only the step's scalars (bias corrections) remain.
  INFO("allocations per step: in place " << in_place_allocs << ", watched " << watched_allocs);
  CHECK(watched_allocs >= in_place_allocs + 9);
  // A profiler-like observer (it reads no values) keeps the in-place path.
  ValueWatcher profiler;
  profiler.reads_values = false;
  std::uint64_t profiled_allocs = 0;
  CHECK(run(&profiler, &profiled_allocs) == in_place);
  CHECK(profiled_allocs == in_place_allocs);
  CHECK(profiler.p_in_after == profiler.p_out);  // the kernel wrote into its input
}

TEST_CASE("adam_update_: in place, equal to adam_update, with clear errors", "[optim][op]") {
  using namespace adam_op;
  ms::manual_seed(9);
  const Tensor<float> p = ms::randn<float>({37}), g = ms::randn<float>({37});
  const Tensor<float> m = ms::rand<float>({37}), v = ms::rand<float>({37});
  const ms::AnyTensor ss = ops::scalar_tensor(0.01, DType::f32), bc = ops::scalar_tensor(0.3, DType::f32);
  auto want = ops::adam_update(p, g, m, v, ss, bc, 0.9, 0.99, 1e-6, 0.05);
  Tensor<float> p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  ops::adam_update_(p2, g, m2, v2, ss, bc, 0.9, 0.99, 1e-6, 0.05);
  CHECK(ms_test::same_bits(p2, want[0]));
  CHECK(ms_test::same_bits(m2, want[1]));
  CHECK(ms_test::same_bits(v2, want[2]));
  MS_REQUIRE_THROWS_MSG(ops::adam_update_(p2, p2, m2, v2, ss, bc, 0.9, 0.99, 1e-6), ms::ValueError,
                        "[ms.value_error] adam_update_: g shares storage with the tensor float32 (37,) it would overwrite");
  const Tensor<float> strided = ms::randn<float>({74}).slice(0, 0, 74, 2);
  MS_REQUIRE_THROWS_MSG(ops::adam_update_(strided, g, m2, v2, ss, bc, 0.9, 0.99, 1e-6), ms::ShapeError,
                        "[ms.shape_error] adam_update: output 0 must be a contiguous CPU tensor float32 (37,), got "
                        "float32 (37,) on cpu (not contiguous)");
  auto jitted = ms::jit([&](const Tensor<float>& x) {
    ops::adam_update_(p2, x, m2, v2, ss, bc, 0.9, 0.99, 1e-6);
    return x;
  });
  CHECK_THROWS_AS(jitted(ms::zeros<float>({37})), ms::ValueError);
}
