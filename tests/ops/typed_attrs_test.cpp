// Typed attribute structs (ms/ops/attr_struct.hpp): each struct reads the string form a node
// carries (defaults for absent keys; typed errors naming op, attribute, kind and value for
// wrong kinds, unknown names and invalid values) and writes it back with the same keys in
// the same order the API wrote before, so IR dumps and frozen models do not change; the
// registry holds each op's schema.

#include <filesystem>

#include "test_util.hpp"

namespace typed_attrs_test {

namespace ops = ms::ops;
using ms::AnyTensor;
using ms::Tensor;
using ops::Attrs;
using ops::IntList;

/// The (key, printed value) pairs of `a`, in order.
std::string keys_of(const Attrs& a) {
  std::string out;
  for (auto& [k, v] : a.items()) out += (out.empty() ? "" : " ") + k;
  return out;
}

TEST_CASE("typed attrs: conv2d and its backward ops round-trip with the API's keys and order", "[ops][attrs]") {
  const ops::Conv2dAttrs c{{2, 1}, 1, {1, 3}, 2};
  const Attrs a = ops::to_attrs(c);
  // What the API wrote before, literally.
  const Attrs want{{"stride", IntList{2, 1}}, {"padding", IntList{1, 1}}, {"dilation", IntList{1, 3}}, {"groups", std::int64_t{2}}};
  CHECK(a == want);
  CHECK(a.str() == "stride=[2, 1], padding=[1, 1], dilation=[1, 3], groups=2");
  const auto back = ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, a);
  CHECK(back.stride == ops::Int2(2, 1));
  CHECK(back.padding == ops::Int2(1));
  CHECK(back.dilation == ops::Int2(1, 3));
  CHECK(back.groups == 2);

  const Attrs gi = ops::to_attrs(ops::Conv2dGradInputAttrs{c, {4, 6, 9, 9}});
  CHECK(keys_of(gi) == "stride padding dilation groups input_shape");
  CHECK(ops::attrs_as<ops::Conv2dGradInputAttrs>(ops::conv2d_grad_input_op, gi).input_shape == IntList{4, 6, 9, 9});
  const Attrs gw = ops::to_attrs(ops::Conv2dGradWeightAttrs{c, {8, 3, 3, 3}});
  CHECK(keys_of(gw) == "stride padding dilation groups weight_shape");
  CHECK(ops::attrs_as<ops::Conv2dGradWeightAttrs>(ops::conv2d_grad_weight_op, gw).weight_shape == IntList{8, 3, 3, 3});

  const Attrs t = ops::to_attrs(ops::ConvTranspose2dAttrs{{2, 0, 1, 1}, 1});
  CHECK(keys_of(t) == "stride padding dilation groups output_padding");
  CHECK(ops::attrs_as<ops::ConvTranspose2dAttrs>(ops::conv_transpose2d_op, t).output_padding == ops::Int2(1));
}

TEST_CASE("typed attrs: absent attributes take the defaults", "[ops][attrs]") {
  const auto c = ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, Attrs{});
  CHECK(c.stride == ops::Int2(1));
  CHECK(c.padding == ops::Int2(0));
  CHECK(c.dilation == ops::Int2(1));
  CHECK(c.groups == 1);
  const auto m = ops::attrs_as<ops::MaxPool2dAttrs>(ops::max_pool2d_op, Attrs{{"kernel_size", IntList{3, 3}}});
  CHECK(!m.stride.has_value());
  CHECK(m.window().stride == ops::Int2(3));  // stride defaults to the kernel size
  CHECK(m.padding == ops::Int2(0));
  CHECK(!m.ceil_mode);
  const auto av = ops::attrs_as<ops::AvgPool2dAttrs>(ops::avg_pool2d_op, Attrs{{"kernel_size", IntList{2, 2}}});
  CHECK(av.count_include_pad);
  CHECK(!av.divisor_override.has_value());
  const auto r = ops::attrs_as<ops::ReduceAttrs>(ops::sum_op, Attrs{});
  CHECK(r.axes.empty());
  CHECK(!r.keepdim);
  CHECK(ops::attrs_as<ops::VarAttrs>(ops::var_op, Attrs{}).correction == 1);
  CHECK(!ops::attrs_as<ops::ArgReduceAttrs>(ops::argmax_op, Attrs{}).axis.has_value());
  CHECK(ops::attrs_as<ops::SoftmaxAttrs>(ops::softmax_op, Attrs{}).axis == -1);
  const auto bn = ops::attrs_as<ops::BatchNormAttrs>(ops::batch_norm_op, Attrs{});
  CHECK(!bn.training);
  CHECK(bn.momentum == 0.1);
  CHECK(bn.eps == 1e-5);
  // A float attribute given as an int is read as that value (as Attrs::f always did).
  CHECK(ops::attrs_as<ops::BatchNormAttrs>(ops::batch_norm_op, Attrs{{"eps", std::int64_t{0}}}).eps == 0.0);
}

TEST_CASE("typed attrs: pooling, reductions, softmax and norms write what the API wrote", "[ops][attrs]") {
  // max_pool2d: dilation and ceil_mode only when not the default.
  CHECK(ops::to_attrs(ops::MaxPool2dAttrs{2, ops::Int2(2), 0, 1, false}) ==
        Attrs{{"kernel_size", IntList{2, 2}}, {"stride", IntList{2, 2}}, {"padding", IntList{0, 0}}});
  CHECK(keys_of(ops::to_attrs(ops::MaxPool2dAttrs{3, ops::Int2(1), 1, 2, true})) ==
        "kernel_size stride padding dilation ceil_mode");
  CHECK(keys_of(ops::to_attrs(ops::MaxPool2dGradAttrs{{3, ops::Int2(1), 1, 1, false}, {1, 1, 5, 5}})) ==
        "kernel_size stride padding input_shape");
  // avg_pool2d: ceil_mode before count_include_pad, divisor_override only when given.
  CHECK(ops::to_attrs(ops::AvgPool2dAttrs{2, ops::Int2(2), 1, true, false, 3}) ==
        Attrs{{"kernel_size", IntList{2, 2}}, {"stride", IntList{2, 2}}, {"padding", IntList{1, 1}}, {"ceil_mode", true},
              {"count_include_pad", false}, {"divisor_override", std::int64_t{3}}});
  CHECK(keys_of(ops::to_attrs(ops::AvgPool2dAttrs{2, ops::Int2(2), 0, false, true, std::nullopt})) ==
        "kernel_size stride padding count_include_pad");
  CHECK(ops::to_attrs(ops::AdaptiveAvgPool2dAttrs{{1, 2}}) == Attrs{{"output_size", IntList{1, 2}}});
  CHECK(ops::to_attrs(ops::ReduceAttrs{{0, 2}, true}) == Attrs{{"axes", IntList{0, 2}}, {"keepdim", true}});
  CHECK(ops::to_attrs(ops::VarAttrs{{{1}, false}, 0}) ==
        Attrs{{"axes", IntList{1}}, {"keepdim", false}, {"correction", std::int64_t{0}}});
  CHECK(ops::to_attrs(ops::ArgReduceAttrs{1, false}) == Attrs{{"keepdim", false}, {"axis", std::int64_t{1}}});
  CHECK(ops::to_attrs(ops::ArgReduceAttrs{std::nullopt, true}) == Attrs{{"keepdim", true}});
  CHECK(ops::to_attrs(ops::SoftmaxAttrs{1}) == Attrs{{"axis", std::int64_t{1}}});
  CHECK(ops::to_attrs(ops::BatchNormAttrs{true, 0.2, 1e-3}) ==
        Attrs{{"training", true}, {"momentum", 0.2}, {"eps", 1e-3}});
  CHECK(ops::to_attrs(ops::LayerNormAttrs{{4, 5}, 1e-6}) == Attrs{{"normalized_shape", IntList{4, 5}}, {"eps", 1e-6}});
  CHECK(ops::to_attrs(ops::CrossEntropyAttrs{{"sum"}, 0.1, 3}) ==
        Attrs{{"reduction", std::string("sum")}, {"label_smoothing", 0.1}, {"ignore_index", std::int64_t{3}}});
  CHECK(ops::to_attrs(ops::NllLossGradAttrs{{{"none"}, -100}, 7}) ==
        Attrs{{"reduction", std::string("none")}, {"ignore_index", std::int64_t{-100}}, {"num_classes", std::int64_t{7}}});
  CHECK(ops::to_attrs(ops::MseLossAttrs{}) == Attrs{{"reduction", std::string("mean")}});
  // Parsing what to_attrs wrote gives the struct back.
  const ops::AvgPool2dAttrs av{{3, 2}, ops::Int2(1, 2), {1, 0}, true, false, 5};
  const auto av2 = ops::attrs_as<ops::AvgPool2dAttrs>(ops::avg_pool2d_op, ops::to_attrs(av));
  CHECK(av2.kernel_size == av.kernel_size);
  CHECK(av2.stride == av.stride);
  CHECK(av2.padding == av.padding);
  CHECK(av2.ceil_mode == av.ceil_mode);
  CHECK(av2.count_include_pad == av.count_include_pad);
  CHECK(av2.divisor_override == av.divisor_override);
}

TEST_CASE("typed attrs: wrong kinds, unknown names and invalid values are ValueErrors naming op and attribute",
          "[ops][attrs][errors]") {
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, Attrs{{"groups", 1.5}}), ms::ValueError,
                        "[ms.value_error] conv2d: attribute 'groups' must be an int, got a float 1.5");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, Attrs{{"stride", IntList{1, 2, 3}}}),
                        ms::ValueError,
                        "[ms.value_error] conv2d: attribute 'stride' must be a list of 2 ints (height, width), got a "
                        "list of ints [1, 2, 3]");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, Attrs{{"strides", IntList{1, 1}}}),
                        ms::ValueError,
                        "[ms.value_error] conv2d: unknown attribute 'strides' (the attributes of conv2d are: stride, "
                        "padding, dilation, groups)");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::Conv2dAttrs>(ops::conv2d_op, Attrs{{"groups", std::int64_t{0}}}),
                        ms::ValueError, "[ms.value_error] conv2d: groups must be positive, got 0");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::ReduceAttrs>(ops::sum_op, Attrs{{"keepdim", std::int64_t{1}}}),
                        ms::ValueError, "[ms.value_error] sum: attribute 'keepdim' must be a bool, got an int 1");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::SoftmaxAttrs>(ops::softmax_op, Attrs{{"dim", std::int64_t{1}}}),
                        ms::ValueError,
                        "[ms.value_error] softmax: unknown attribute 'dim' (the attributes of softmax are: axis)");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::MaxPool2dAttrs>(ops::max_pool2d_op, Attrs{}), ms::ValueError,
                        "[ms.value_error] max_pool2d: attribute 'kernel_size' is missing");
  // A misspelt required attribute is reported as the unknown name, not as the missing one.
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::MaxPool2dAttrs>(ops::max_pool2d_op, Attrs{{"kernel", IntList{2, 2}}}),
                        ms::ValueError,
                        "[ms.value_error] max_pool2d: unknown attribute 'kernel' (the attributes of max_pool2d are: "
                        "kernel_size, stride, padding, dilation, ceil_mode)");
  MS_REQUIRE_THROWS_MSG(
      ops::attrs_as<ops::AvgPool2dAttrs>(ops::avg_pool2d_op,
                                         Attrs{{"kernel_size", IntList{2, 2}}, {"divisor_override", std::int64_t{0}}}),
      ms::ValueError, "[ms.value_error] avg_pool2d: divisor_override must be positive, got 0");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::NllLossAttrs>(ops::nll_loss_op, Attrs{{"reduction", std::string("avg")}}),
                        ms::ValueError,
                        "[ms.value_error] nll_loss: reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::NllLossGradAttrs>(ops::nll_loss_grad_op, Attrs{}), ms::ValueError,
                        "[ms.value_error] nll_loss_grad: attribute 'num_classes' is missing");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::BatchNormAttrs>(ops::batch_norm_op, Attrs{{"eps", -1.0}}), ms::ValueError,
                        "[ms.value_error] batch_norm: eps must be non-negative, got -1");
  MS_REQUIRE_THROWS_MSG(ops::attrs_as<ops::Conv2dGradInputAttrs>(ops::conv2d_grad_input_op,
                                                                 Attrs{{"input_shape", IntList{1, 2}}}),
                        ms::ValueError,
                        "[ms.value_error] conv2d_grad_input: attribute 'input_shape' must hold 4 values, got [1, 2]");
  // The same errors come from running the op with such attributes.
  Tensor<float> x = ms::ones<float>({1, 1, 4, 4}), w = ms::ones<float>({1, 1, 3, 3});
  const AnyTensor in[2] = {x, w};
  MS_REQUIRE_THROWS_MSG(ops::call(ops::conv2d_op, in, Attrs{{"pad", IntList{1, 1}}}), ms::ValueError,
                        "[ms.value_error] conv2d: unknown attribute 'pad' (the attributes of conv2d are: stride, "
                        "padding, dilation, groups)");
  const AnyTensor one[1] = {x};
  MS_REQUIRE_THROWS_MSG(ops::call(ops::mean_op, one, Attrs{{"axes", std::int64_t{1}}}), ms::ValueError,
                        "[ms.value_error] mean: attribute 'axes' must be a list of ints, got an int 1");
}

TEST_CASE("typed attrs: the registry holds each op's schema", "[ops][attrs]") {
  const ops::AttrSchema* s = ops::conv2d_op.attr_schema;
  REQUIRE(s != nullptr);
  CHECK(s->type == "Conv2dAttrs");
  CHECK(s->names() == "stride, padding, dilation, groups");
  REQUIRE(s->find("stride") != nullptr);
  CHECK(s->find("stride")->kind == "a list of 2 ints (height, width)");
  CHECK(s->find("stride")->dflt == "[1, 1]");
  CHECK(s->find("groups")->kind == "an int");
  CHECK(s->find("groups")->dflt == "1");
  CHECK(ops::conv2d_op.attr_names == std::vector<std::string>{"stride", "padding", "dilation", "groups"});
  const ops::AttrSchema* g = ops::conv2d_grad_input_op.attr_schema;
  REQUIRE(g != nullptr);
  CHECK(g->find("input_shape")->required);
  CHECK(ops::max_pool2d_op.attr_schema->find("stride")->dflt == "unset");
  CHECK(ops::softmax_op.attr_schema->find("axis")->dflt == "-1");
  CHECK(ops::var_op.attr_schema->names() == "axes, keepdim, correction");
  // Registration checks that documented names and schema agree.
  ops::OpDef bad;
  bad.name = "typed_attrs_test_bad";
  bad.infer = ops::softmax_op.infer;
  bad.kernel = ops::softmax_op.kernel;
  bad.attr_names = {"dim"};
  bad.attr_schema = ops::softmax_op.attr_schema;
  MS_REQUIRE_THROWS_MSG(ops::registry().add(bad), ms::ValueError,
                        "[ms.value_error] register op 'typed_attrs_test_bad': attribute 'dim' is not a field of "
                        "SoftmaxAttrs (axis)");
}

/// A conv + pool + reduce + softmax net, called through the API (typed structs) or through
/// ops::call with the string attributes the API wrote before this change.
AnyTensor net(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b, bool explicit_attrs) {
  if (!explicit_attrs) {
    AnyTensor y = ops::conv2d(x, w, b, 1, 1, 1, 1);
    y = ops::max_pool2d(y, 2, std::nullopt, 0, 1, false);
    y = ops::avg_pool2d(y, 2, 1, 0, true, true, std::nullopt);
    y = ops::adaptive_avg_pool2d(y, {2, 2});
    y = ops::mean(y, {2, 3}, false);
    y = ops::var(y, {0}, true, 0);
    return ops::log_softmax(ops::softmax(y, -1), 1);
  }
  const AnyTensor c_in[3] = {x, w, b};
  AnyTensor y = ops::call(ops::conv2d_op, c_in,
                          Attrs{{"stride", IntList{1, 1}}, {"padding", IntList{1, 1}}, {"dilation", IntList{1, 1}},
                                {"groups", std::int64_t{1}}})[0];
  auto one = [](const ops::OpDef& op, const AnyTensor& t, Attrs a) {
    const AnyTensor in[1] = {t};
    return ops::call(op, in, a)[0];
  };
  y = one(ops::max_pool2d_op, y, Attrs{{"kernel_size", IntList{2, 2}}, {"stride", IntList{2, 2}}, {"padding", IntList{0, 0}}});
  y = one(ops::avg_pool2d_op, y,
          Attrs{{"kernel_size", IntList{2, 2}}, {"stride", IntList{1, 1}}, {"padding", IntList{0, 0}}, {"ceil_mode", true},
                {"count_include_pad", true}});
  y = one(ops::adaptive_avg_pool2d_op, y, Attrs{{"output_size", IntList{2, 2}}});
  y = one(ops::mean_op, y, Attrs{{"axes", IntList{2, 3}}, {"keepdim", false}});
  y = one(ops::var_op, y, Attrs{{"axes", IntList{0}}, {"keepdim", true}, {"correction", std::int64_t{0}}});
  y = one(ops::softmax_op, y, Attrs{{"axis", std::int64_t{-1}}});
  return one(ops::log_softmax_op, y, Attrs{{"axis", std::int64_t{1}}});
}

ms::graph::Graph capture(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b, bool explicit_attrs) {
  ms::NoGradGuard no_grad;
  ms::graph::Capture cap;
  cap.input(x, "x");
  cap.param(w, "w");
  cap.param(b, "b");
  cap.output(net(x, w, b, explicit_attrs));
  return cap.finish();
}

TEST_CASE("typed attrs: a captured conv/pool/reduce/softmax graph dumps and freezes as with explicit Attrs",
          "[ops][attrs][graph][freeze]") {
  ms::manual_seed(5);
  Tensor<float> x = ms::randn<float>({2, 3, 9, 9}), w = ms::randn<float>({4, 3, 3, 3}), b = ms::randn<float>({4});
  ms::graph::Graph typed = capture(x, w, b, false), strings = capture(x, w, b, true);
  CHECK(typed.str() == strings.str());
  CHECK(typed.str().find("conv2d") != std::string::npos);
  ms_test::TempDir dir;
  ms::freeze(typed, dir / "typed.msf");
  ms::freeze(strings, dir / "strings.msf");
  CHECK(ms_test::read_bytes(dir / "typed.msf") == ms_test::read_bytes(dir / "strings.msf"));
  // Same values too (eager).
  CHECK(ms_test::same_bits(net(x, w, b, false), net(x, w, b, true)));
}

}  // namespace typed_attrs_test
