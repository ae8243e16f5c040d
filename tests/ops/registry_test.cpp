// Walks the op registry: every op is complete (name, doc, inference, a kernel or a view,
// CPU dtypes, elementwise block kernels for each of them), names are unique, and every
// built-in op is named by some test file's MS_TEST_COVERS (a reference-value test).
// The coverage check is meaningful in the full ms_tests binary, which links every test file.
// Also checks the registry's own API: lookup, registration errors, Attrs, default costs.

#include <set>
#include <string>

#include "test_util.hpp"

namespace {
using ms::ops::Category;
using ms::ops::OpDef;
using ms::ops::registry;

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}
}  // namespace

TEST_CASE("registry: every op is a complete definition", "[op][registry]") {
  auto ops = registry().all();
  REQUIRE(ops.size() == registry().size());
  REQUIRE(ops.size() > 40);
  std::set<std::string> names;
  for (const OpDef* op : ops) {
    INFO("op '" << op->name << "'");
    REQUIRE_FALSE(op->name.empty());
    CHECK(names.insert(op->name).second);  // unique
    CHECK_FALSE(op->doc.empty());
    CHECK(op->infer != nullptr);
    CHECK((op->kernel != nullptr || op->view != nullptr));
    CHECK_FALSE(op->cpu_dtypes.empty());
    CHECK(ms::ops::category_name(op->category) != "?");
    CHECK(registry().find(op->name) == op);
    CHECK(&registry().get(op->name) == op);
    // Elementwise kernels pick a block function by dtype: there must be one for every CPU dtype
    // (16-bit floats may instead compute with the float32 one: elementwise_kernel upcasts).
    if (op->kernel == &ms::ops::elementwise_kernel) {
      for (int i = 0; i < ms::kNumDTypes; ++i) {
        auto d = static_cast<ms::DType>(i);
        if (op->cpu_dtypes.contains(d)) {
          INFO("dtype " << ms::dtype_name(d));
          const bool half = d == ms::DType::f16 || d == ms::DType::bf16;
          CHECK((op->elementwise.block[i] != nullptr ||
                 (half && op->elementwise.block[static_cast<int>(ms::DType::f32)] != nullptr)));
        }
      }
    }
    if (ms::ops::is_elementwise(op->category)) CHECK(op->kernel != nullptr);
  }
}

TEST_CASE("registry: every built-in op is covered by a reference test", "[op][registry]") {
  // Ops that tests register at run time (user-defined, Category::custom) are not built-ins.
  std::set<std::string> uncovered, registered;
  for (const OpDef* op : registry().all()) {
    if (op->category == Category::custom) continue;
    registered.insert(op->name);
    if (!ms_test::covered_ops().count(op->name)) uncovered.insert(op->name);
  }
  std::set<std::string> unknown;  // named by MS_TEST_COVERS but not registered: likely a typo
  for (auto& n : ms_test::covered_ops())
    if (!registry().find(n)) unknown.insert(n);
  if (!unknown.empty()) WARN("MS_TEST_COVERS names ops that are not registered: " << join(unknown));
  INFO(uncovered.size() << " of " << registered.size() << " ops have no reference test (MS_TEST_COVERS): "
                        << join(uncovered));
  CHECK(uncovered.empty());
}

TEST_CASE("registry: lookup and registration errors", "[op][registry]") {
  REQUIRE(registry().find("no_such_op") == nullptr);
  MS_REQUIRE_THROWS_MSG(registry().get("no_such_op"), ms::ValueError,
                        "[ms.value_error] no op named 'no_such_op' is registered");
  REQUIRE(registry().get("add").category == Category::binary);
  REQUIRE(registry().get("exp").category == Category::unary);
  REQUIRE(registry().get("lt").category == Category::compare);
  REQUIRE(registry().get("where").category == Category::ternary);
  REQUIRE(registry().get("reshape").category == Category::view);
  REQUIRE(registry().get("cast").category == Category::movement);
  REQUIRE(registry().get("add").num_inputs == 2);

  // A private registry, so the global one is not touched.
  ms::ops::Registry r;
  OpDef good;
  good.name = "twice";
  good.doc = "2x";
  good.infer = &ms::ops::infer_unary;
  good.kernel = [](const ms::ops::KernelArgs&) {};
  const OpDef& added = r.add(good);
  REQUIRE(added.name == "twice");
  REQUIRE(r.size() == 1);
  REQUIRE(r.find("twice") == &added);
  MS_REQUIRE_THROWS_MSG(r.add(good), ms::ValueError, "[ms.value_error] register op: an op named 'twice' is already registered");
  OpDef no_name = good;
  no_name.name = "";
  MS_REQUIRE_THROWS_MSG(r.add(no_name), ms::ValueError, "[ms.value_error] register op: an op needs a name");
  OpDef no_infer = good;
  no_infer.name = "a";
  no_infer.infer = nullptr;
  MS_REQUIRE_THROWS_MSG(r.add(no_infer), ms::ValueError,
                        "[ms.value_error] register op 'a': missing shape/dtype inference");
  OpDef no_kernel = good;
  no_kernel.name = "b";
  no_kernel.kernel = nullptr;
  MS_REQUIRE_THROWS_MSG(r.add(no_kernel), ms::ValueError, "[ms.value_error] register op 'b': missing CPU kernel");
  REQUIRE(r.size() == 1);
}

TEST_CASE("registry: attributes", "[op][registry]") {
  ms::ops::Attrs a{{"axis", std::int64_t{1}}, {"keepdim", true}};
  a.set("eps", 1e-5).set("dtype", ms::DType::f64).set("perm", ms::ops::IntList{2, 0, 1}).set("mode", std::string("x"));
  REQUIRE(a.i("axis") == 1);
  REQUIRE(a.i("missing", 7) == 7);
  REQUIRE(a.b("keepdim"));
  REQUIRE_FALSE(a.b("missing"));
  REQUIRE(a.f("eps") == 1e-5);
  REQUIRE(a.f("axis") == 1.0);  // an integer attribute reads as a double
  REQUIRE(a.f("missing", 0.5) == 0.5);
  REQUIRE(a.dtype("dtype") == ms::DType::f64);
  REQUIRE(a.ints("perm") == ms::ops::IntList{2, 0, 1});
  REQUIRE(a.str("mode") == "x");
  REQUIRE(a.has("eps"));
  REQUIRE_FALSE(a.has("nope"));
  REQUIRE(a.str() == "axis=1, keepdim=true, eps=1e-05, dtype=float64, perm=[2, 0, 1], mode=\"x\"");
  MS_REQUIRE_THROWS_MSG(a.i("nope"), ms::ValueError, "[ms.value_error] attribute 'nope' is missing");
  MS_REQUIRE_THROWS_MSG(a.i("eps"), ms::ValueError, "[ms.value_error] attribute 'eps' has the wrong type: expected an int, got a float 1e-05");
  a.set("axis", std::int64_t{2});  // replaces in place
  REQUIRE(a.i("axis") == 2);
  REQUIRE(a.items().size() == 6);

  ms::ops::Attrs b{{"axis", std::int64_t{2}}, {"keepdim", true}};
  b.set("eps", 1e-5).set("dtype", ms::DType::f64).set("perm", ms::ops::IntList{2, 0, 1}).set("mode", std::string("x"));
  REQUIRE(a == b);
  REQUIRE(a.hash() == b.hash());
  b.set("perm", ms::ops::IntList{2, 1, 0});
  REQUIRE_FALSE(a == b);
  REQUIRE(a.hash() != b.hash());
  REQUIRE(ms::ops::Attrs{}.empty());
  REQUIRE(ms::ops::Attrs{}.str().empty());
}

TEST_CASE("registry: default costs and meta printing", "[op][registry]") {
  using ms::ops::TensorMeta;
  const OpDef& add = registry().get("add");
  TensorMeta a{ms::DType::f32, ms::Shape{3, 4}}, b{ms::DType::f32, ms::Shape{4}};
  TensorMeta out{ms::DType::f32, ms::Shape{3, 4}};
  TensorMeta in[] = {a, b};
  ms::ops::Cost c = ms::ops::op_cost(add, in, std::span<const TensorMeta>(&out, 1), {});
  REQUIRE(c.bytes == 48 + 16 + 48);
  REQUIRE(c.flops == 12);
  const OpDef& reshape = registry().get("reshape");
  ms::ops::Cost v = ms::ops::op_cost(reshape, std::span<const TensorMeta>(&a, 1), std::span<const TensorMeta>(&out, 1), {});
  REQUIRE(v.bytes == 0);
  REQUIRE(v.flops == 0);
  REQUIRE(ms::ops::metas_str(in) == "(3, 4) float32, (4,) float32");
}

TEST_CASE("run_op: a preset CPU output receives the result, and other slots are refused", "[op]") {
  namespace ops = ms::ops;
  const ms::Tensor<float> a{1, 2, 3}, b{10, 20, 30};
  const ms::AnyTensor in[2] = {a, b};
  const auto metas = ops::infer_outputs(ops::add_op, in, {});
  ms::Tensor<float> dst = ms::zeros<float>({3});
  const float* storage = dst.data();
  ms::AnyTensor out[1] = {dst};
  ops::run_op(ops::add_op, in, {}, metas, out);
  CHECK(out[0].raw_data() == storage);
  CHECK(dst.to_vector() == std::vector<float>{11, 22, 33});
  // Wrong shape, wrong dtype, not contiguous: refused before the kernel writes anything.
  ms::AnyTensor wrong[1] = {ms::zeros<float>({4})};
  MS_REQUIRE_THROWS_MSG(ops::run_op(ops::add_op, in, {}, metas, wrong), ms::ShapeError,
                        "[ms.shape_error] add: output 0 must be a contiguous CPU tensor float32 (3,), got float32 (4,) "
                        "on cpu");
  ms::AnyTensor wrong_dtype[1] = {ms::zeros<double>({3})};
  CHECK_THROWS_AS(ops::run_op(ops::add_op, in, {}, metas, wrong_dtype), ms::ShapeError);
  ms::Tensor<float> strided = ms::zeros<float>({6}).slice(0, 0, 6, 2);
  ms::AnyTensor wrong_layout[1] = {strided};
  CHECK_THROWS_AS(ops::run_op(ops::add_op, in, {}, metas, wrong_layout), ms::ShapeError);
  CHECK(strided.to_vector() == std::vector<float>{0, 0, 0});
  // A view op returns a view of its input: a preset output would be silently dropped.
  const ops::Attrs shape_attr{{"shape", std::vector<std::int64_t>{3, 1}}};
  const ms::AnyTensor one[1] = {a};
  const auto vmetas = ops::infer_outputs(ops::reshape_op, one, shape_attr);
  ms::AnyTensor preset[1] = {ms::zeros<float>({3, 1})};
  MS_REQUIRE_THROWS_MSG(ops::run_op(ops::reshape_op, one, shape_attr, vmetas, preset), ms::ValueError,
                        "[ms.value_error] reshape: returns a view of its input and takes no preset output");
}
