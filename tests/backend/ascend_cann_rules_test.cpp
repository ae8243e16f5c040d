// The rules of a real CANN runtime that the Ascend adapter must follow (issue 20, items
// 1-8), checked against the strict emulator: its SoC profiles (aclrtGetSocName), frees
// that do not wait for queued work, misaligned tensor addresses, aclopExecuteV2 without a
// loaded model, pageable async copies, and the device-count check. Each item has a test
// named after it; each runs under every profile (ctest runs the [ascend] suite once per
// MS_EMU_SOC value), and the profile-specific parts switch the emulator's profile for a
// second backend of their own.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/ascend/selftest.hpp>
#include <ms/backend/device_executor.hpp>

#include "../ascend_emulator/ms_emulator.h"
#include "emu_fixture.hpp"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend CANN rule tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] CANN rule tests did not run");
}

#else

namespace ascend_cann_rules_test {
namespace {

using namespace ms;
using backend::Engine;
using backend::ascend::AclApi;
using backend::ascend::AscendBackend;
using Catch::Matchers::Contains;

using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::EmuFixture;

const Device kAscend = Device::ascend(0);

/// The emulator's function table, loaded apart from the singleton backend's.
AclApi load_emu() { return backend::ascend::load_acl_api(MS_ASCEND_EMULATOR_PATH); }

/// Switches the emulator to SoC profile `soc` for the scope, restoring the profile before.
struct SocScope {
  explicit SocScope(const char* soc) : before(emu().soc().name) { REQUIRE(ctl().SetSoc(soc) == 0); }
  ~SocScope() { (void)ctl().SetSoc(before.c_str()); }
  std::string before;
};

/// A device copy of `h` made by backend `be` (its own pools and stream).
AnyTensor upload(AscendBackend& be, const AnyTensor& h) {
  auto st = be.allocate(h.nbytes());
  be.copy_to_device(st->data, h.raw_data(), h.nbytes());
  return AnyTensor::view_of(std::move(st), h.shape(), contiguous_strides(h.shape()), 0, h.dtype());
}
std::vector<float> download(AscendBackend& be, const AnyTensor& d) {
  be.synchronize(be.eager_stream());
  std::vector<float> v(static_cast<std::size_t>(d.numel()));
  be.copy_to_host(v.data(), d.raw_data(), d.nbytes());
  return v;
}
/// Runs `op` with backend `be` on AI Core into a fresh output of `shape`.
AnyTensor run_on(AscendBackend& be, const char* op, std::vector<AnyTensor> in, const Shape& shape, DType dt,
                 const ops::Attrs& attrs = {}) {
  std::vector<AnyTensor> out{AnyTensor::view_of(be.allocate(static_cast<std::size_t>(numel(shape)) * dtype_size(dt)),
                                                shape, contiguous_strides(shape), 0, dt)};
  be.launch(Engine::ai_core, ops::registry().get(op), in, out, attrs, be.eager_stream());
  return out[0];
}

std::vector<ops::TensorMeta> metas(std::initializer_list<ops::TensorMeta> m) { return m; }
bool supported(const char* op, std::vector<ops::TensorMeta> in, const ops::Attrs& a = {}) {
  return emu().supports(ops::registry().get(op), std::span<const ops::TensorMeta>(in.data(), in.size()), a);
}

}  // namespace

TEST_CASE("ascend soc profiles: aclrtGetSocName names the profile and the adapter reads its capabilities",
          "[ascend][soc]") {
  EmuFixture fx;
  const std::string soc = emu().api().aclrtGetSocName();
  CHECK(soc == emu().soc().name);
  for (const char* family : {"Ascend910", "Ascend910B", "Ascend310P", "Ascend910_93"}) {
    SocScope scope(family);
    AscendBackend be(load_emu(), 0);
    INFO(be.soc().name);
    CHECK(be.soc().name.rfind(family, 0) == 0);
    const bool a2 = std::string(family) == "Ascend910B" || std::string(family) == "Ascend910_93";
    CHECK(be.soc().fp32_keep_dtype == a2);
    CHECK(be.soc().bf16 == a2);
    CHECK(be.can_capture() == (std::string(family) != "Ascend910"));
    CHECK(be.api().has_aicpu() == (std::string(family) != "Ascend910_93"));
  }
  CHECK(ctl().SetSoc("Ascend999") == -1);
}

TEST_CASE("ascend item 1: AI CPU ops go through aclopCompileAndExecute with the kernels' dtype rows",
          "[ascend][aicpu][soc]") {
  EmuFixture fx;
  const AclApi& api = emu().api();
  // aclopExecuteV2 only finds loaded op models: the strict runtime has none.
  aclopAttr* attr = api.aclopCreateAttr();
  REQUIRE(attr != nullptr);
  CHECK(api.aclopExecuteV2("Erf", 0, nullptr, nullptr, 0, nullptr, nullptr, attr, nullptr) == ACL_ERROR_OP_NOT_FOUND);
  CHECK_THAT(std::string(api.aclGetRecentErrMsg()), Contains("no loaded op model"));
  api.aclopDestroyAttr(attr);

  // argmax of float: ArgMaxD writes int32 indices, widened to ms's int64 on the device.
  Tensor<float> x{{0.5f, 3.0f, -1.0f}, {7.0f, 2.0f, 9.0f}};
  auto c0 = counters();
  Tensor<std::int64_t> got = ms::argmax(x.to(kAscend), std::int64_t{1}).to(Device::cpu());
  auto c1 = counters();
  CHECK(got.to_vector() == std::vector<std::int64_t>{1, 2});
  CHECK(c1.aicpu_launches - c0.aicpu_launches == (api.has_aicpu() ? 1u : 0u));
  Tensor<float> p = ms::prod(x.to(kAscend), std::vector<std::int64_t>{0}).to(Device::cpu());
  CHECK(p.to_vector() == std::vector<float>{3.5f, 6.0f, -9.0f});

  // The rows admit only what the kernels take: no double for ArgMaxD/ArgMinD, no double or
  // int64 for ReduceProdD; those calls run on the host and still give the right values.
  const auto& argmax = ops::registry().get("argmax");
  const auto& prod = ops::registry().get("prod");
  auto m64 = metas({{DType::f64, Shape{2, 3}}});
  auto mi64 = metas({{DType::i64, Shape{2, 3}}});
  auto m32 = metas({{DType::f32, Shape{2, 3}}});
  const ops::Attrs ax{{"axis", std::int64_t{1}}};
  CHECK_FALSE(emu().supports(Engine::ai_cpu, argmax, m64, ax));
  CHECK_FALSE(emu().supports(Engine::ai_cpu, prod, m64, {}));
  CHECK_FALSE(emu().supports(Engine::ai_cpu, prod, mi64, {}));
  CHECK(emu().supports(Engine::ai_cpu, argmax, m32, ax) == api.has_aicpu());
  Tensor<double> xd = ms::cast<double>(x);
  CHECK(Tensor<std::int64_t>(ms::argmax(xd.to(kAscend), std::int64_t{1}).to(Device::cpu())).to_vector() ==
        std::vector<std::int64_t>{1, 2});
}

TEST_CASE("ascend item 2: a tensor dropped while its readers are queued is freed stream-ordered",
          "[ascend][memory]") {
  EmuFixture fx;
  // The emulator poisons a block at aclrtFree; a queued kernel that reads it afterwards fails.
  {
    const AclApi& api = emu().api();
    ctl().SetLatency(20'000'000, 0, 0, 0);  // 20 ms per kernel: the launches below wait in the queue
    void* a = nullptr;
    void* b = nullptr;
    REQUIRE(api.aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    REQUIRE(api.aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    const std::int64_t dims[1] = {16};
    aclTensor* ta = api.aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, a);
    aclTensor* tb = api.aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, b);
    std::uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    REQUIRE(api.aclnnExpGetWorkspaceSize(ta, tb, &ws, &ex) == ACLNN_SUCCESS);
    REQUIRE(api.aclnnExp(nullptr, 0, ex, emu().eager_stream().raw()) == ACLNN_SUCCESS);
    const auto c0 = counters();
    REQUIRE(api.aclrtFree(a) == ACL_SUCCESS);  // the kernel has not run yet
    const aclError rc = api.aclrtSynchronizeStream(emu().eager_stream().raw());
    CHECK(rc == ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_THAT(std::string(api.aclGetRecentErrMsg()), Contains("use-after-free: aclnnExp"));
    CHECK(counters().use_after_free - c0.use_after_free == 1);
    (void)api.aclDestroyTensor(ta);
    (void)api.aclDestroyTensor(tb);
    (void)api.aclrtFree(b);
    ctl().SetLatency(0, 0, 0, 0);
  }
  // The adapter: dropping the input of a queued kernel must not free it under the kernel.
  ctl().SetLatency(20'000'000, 0, 0, 0);
  const auto s0 = emu().memory_stats();
  const auto c0 = counters();
  Tensor<float> x = ms::arange<float>(-4, 4).to(kAscend);
  Tensor<float> y = ms::relu(x);
  x = Tensor<float>();  // the last reference: the relu kernel is still queued
  const auto s1 = emu().memory_stats();
  CHECK(s1.deferred - s0.deferred >= 1);  // waits for an event, not freed
  std::vector<float> got = y.to(Device::cpu()).to_vector();
  CHECK(got == std::vector<float>{0, 0, 0, 0, 0, 1, 2, 3});
  CHECK(counters().use_after_free == c0.use_after_free);
  ctl().SetLatency(0, 0, 0, 0);
  // Once the stream has passed the event the block is reused instead of allocated again.
  emu().synchronize_all();
  const auto s2 = emu().memory_stats();
  Tensor<float> z = ms::zeros<float>({8}).to(kAscend);
  const auto s3 = emu().memory_stats();
  CHECK(s3.reuses - s2.reuses == 1);
  CHECK(s3.mallocs == s2.mallocs);
  CHECK(z.to(Device::cpu()).to_vector() == std::vector<float>(8, 0.0f));
  // The profiler's summary reports the pool's reuse statistics.
  const auto s4 = emu().memory_stats();
  const std::string line =
      fmt::format("ascend:0 memory pool: {} requests, {} reused", s4.mallocs + s4.reuses, s4.reuses);
  CHECK_THAT(ms::Profiler().table(), Contains(line));
}

TEST_CASE("ascend item 3: fp32 matmul passes the cubeMathType the SoC supports", "[ascend][soc]") {
  EmuFixture fx;
  for (const char* family : {"Ascend910", "Ascend310P", "Ascend910B"}) {
    SocScope scope(family);
    AscendBackend be(load_emu(), 0);
    INFO(family);
    Tensor<float> a{{1, 2}, {3, 4}}, b{{5, 6}, {7, 8}};
    AnyTensor da = upload(be, a), db = upload(be, b);
    CHECK(be.cube_math_type() == (be.soc().fp32_keep_dtype ? ACLNN_CUBE_KEEP_DTYPE
                                                           : ACLNN_CUBE_ALLOW_FP32_DOWN_PRECISION));
    AnyTensor o = run_on(be, "matmul", {da, db}, Shape{2, 2}, DType::f32);
    CHECK(download(be, o) == std::vector<float>{19, 22, 43, 50});
    // The user can insist on KEEP_DTYPE: where the chip has no such mode the error names it.
    be.cube_math = backend::ascend::CubeMath::keep_dtype;
    if (be.soc().fp32_keep_dtype) {
      CHECK(download(be, run_on(be, "matmul", {da, db}, Shape{2, 2}, DType::f32)) == std::vector<float>{19, 22, 43, 50});
    } else {
      const std::string msg = ms_emu_test::thrown<BackendError>([&] { run_on(be, "matmul", {da, db}, Shape{2, 2}, DType::f32); });
      CHECK_THAT(msg, Contains("matmul on ascend:0 ((2, 2) float32, (2, 2) float32)"));
      CHECK_THAT(msg, Contains("cubeMathType KEEP_DTYPE (0) is not supported for ACL_FLOAT"));
    }
    be.synchronize_all();
  }
}

TEST_CASE("ascend item 4: dtypes the kernels lack fall back to the host", "[ascend][soc]") {
  EmuFixture fx;
  const Shape s{2, 3};
  for (const char* op : {"gelu", "tanh", "relu", "sigmoid"}) {
    INFO(op);
    CHECK_FALSE(supported(op, {{DType::f64, s}}));
    CHECK(supported(op, {{DType::f32, s}}));
  }
  CHECK_FALSE(supported("matmul", {{DType::f64, Shape{2, 3}}, {DType::f64, Shape{3, 2}}}));
  CHECK_FALSE(supported("relu", {{DType::u8, s}}));
  CHECK_FALSE(supported("neg", {{DType::u8, s}}));
  CHECK(supported("neg", {{DType::f64, s}}));
  CHECK(supported("relu", {{DType::bf16, s}}) == emu().soc().bf16);
  // The host fallback gives the values a kernel would have refused to compute.
  Tensor<double> a{{1, -2, 3}, {-4, 5, -6}};
  Tensor<double> b{{1, 0}, {0, 1}, {1, 1}};
  auto got = ms::matmul(ms::relu(a.to(kAscend)), b.to(kAscend)).to(Device::cpu());
  CHECK(got.to_vector() == std::vector<double>{4, 3, 0, 5});
  const auto fb = emu().fallback_ops();
  CHECK(std::find(fb.begin(), fb.end(), "matmul") != fb.end());
  // The emulator refuses what the kernels refuse, naming the SoC.
  const AclApi& api = emu().api();
  void* p = nullptr;
  REQUIRE(api.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  const std::int64_t dims[1] = {4};
  aclTensor* t = api.aclCreateTensor(dims, 1, ACL_DOUBLE, nullptr, 0, ACL_FORMAT_ND, dims, 1, p);
  std::uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  CHECK(api.aclnnReluGetWorkspaceSize(t, t, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
  CHECK_THAT(std::string(api.aclGetRecentErrMsg()),
             Contains("aclnnRelu: self has dtype ACL_DOUBLE; on " + emu().soc().name));
  (void)api.aclDestroyTensor(t);
  (void)api.aclrtFree(p);
}

TEST_CASE("ascend item 5: tensor data addresses are 32-byte aligned, offsets in elements", "[ascend]") {
  EmuFixture fx;
  const AclApi& api = emu().api();
  void* p = nullptr;
  REQUIRE(api.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  const std::int64_t dims[1] = {1}, storage[1] = {2};
  CHECK(api.aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage, 1, static_cast<char*>(p) + 4) ==
        nullptr);
  CHECK_THAT(std::string(api.aclGetRecentErrMsg()), Contains("is not 32-byte aligned"));
  aclTensor* ok = api.aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 1, ACL_FORMAT_ND, storage, 1, p);
  CHECK(ok != nullptr);
  (void)api.aclDestroyTensor(ok);
  (void)api.aclrtFree(p);
  // The loss kernels' off-value is such a tensor: cross entropy runs on the device.
  Tensor<float> logits{{1.0f, 2.0f, 0.5f}, {0.1f, 0.2f, 3.0f}};
  Tensor<std::int64_t> target{1, 2};
  const ops::Attrs ce{{"reduction", std::string("mean")}, {"label_smoothing", 0.0}, {"ignore_index", std::int64_t{-100}}};
  const auto& op = ops::registry().get("cross_entropy");
  AnyTensor want = ops::call1(op, {AnyTensor(logits), AnyTensor(target)}, ce);
  const auto c0 = counters();
  AnyTensor got = to(ops::call1(op, {to(logits, kAscend), to(target, kAscend)}, ce), Device::cpu());
  CHECK(counters().launches - c0.launches >= 2);  // OneHot + SoftmaxCrossEntropyWithLogits + Mean
  CHECK(got.as<float>().item() == Approx(want.as<float>().item()).epsilon(1e-6));
}

TEST_CASE("ascend item 6: capture only where the SoC has it, else uncaptured replay", "[ascend][soc]") {
  EmuFixture fx;
  {
    SocScope scope("Ascend910");
    AscendBackend be(load_emu(), 0);
    be.warn_on_fallback = false;
    CHECK_FALSE(be.can_capture());
    // The runtime's answer on that chip.
    backend::Stream st = be.create_stream();
    CHECK(be.api().aclmdlRICaptureBegin(st.raw(), ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_THAT(std::string(be.api().aclGetRecentErrMsg()), Contains("not supported on Ascend910A"));
  }
  // A graph compiled with capture=true runs either way, with the same results.
  auto f = [](const Tensor<float>& x) { return ms::relu(x * x - 1.0f); };
  Tensor<float> x = ms::arange<float>(-3, 3).reshape({2, 3});
  backend::CompileOptions opt;
  opt.capture = true;
  opt.max_streams = 1;
  auto ex = backend::compile_for_device(backend::trace(f, x), emu(), opt);
  auto r = ex.run_sunk(std::vector<AnyTensor>{AnyTensor(x)});
  CHECK(ex.captured() == emu().can_capture());
  CHECK(Tensor<float>(r.outputs[0]).to_vector() == std::vector<float>{8, 3, 0, 0, 0, 3});
}

TEST_CASE("ascend item 7: the library list tries the split aclnn libraries, then the aggregate", "[ascend]") {
  using backend::ascend::cann_acl_libs;
  const std::string split = cann_acl_libs(true), aggregate = cann_acl_libs(false);
  CHECK(split.find("libopapi_math.so:libopapi_nn.so") != std::string::npos);
  CHECK(split.find("libopapi.so") == std::string::npos);  // never mixed
  CHECK(aggregate.find("libopapi.so") != std::string::npos);
  CHECK(aggregate.find("libopapi_math.so") == std::string::npos);
  for (const std::string& l : {split, aggregate}) {
    CHECK(l.rfind("libascendcl.so:libnnopbase.so:", 0) == 0);
    CHECK(l.find("libacl_op_executor.so") != std::string::npos);
    CHECK(l.find("libacl_op_compiler.so") != std::string::npos);  // aclopCompileAndExecute
  }
  // $MS_ASCEND_LIBS still wins; without it, no CANN here means the aggregate list.
  const char* before = std::getenv("MS_ASCEND_LIBS");
  const std::string saved = before ? before : "";
  setenv("MS_ASCEND_LIBS", "libmine.so", 1);
  CHECK(backend::ascend::default_acl_libs() == "libmine.so");
  unsetenv("MS_ASCEND_LIBS");
  CHECK(backend::ascend::default_acl_libs() == aggregate);
  if (before) setenv("MS_ASCEND_LIBS", saved.c_str(), 1);
}

TEST_CASE("ascend item 8: pinned staging, one aclrtSetDevice per thread, a bad index is a DeviceError",
          "[ascend]") {
  EmuFixture fx;
  // A device index past the count: the adapter's DeviceError, not the runtime's 107001.
  const std::string msg = ms_emu_test::thrown<DeviceError>([] { AscendBackend be(load_emu(), 3); });
  CHECK(msg == "[ms.device_error] ascend:3 does not exist (1 device(s) found)");
  CHECK(ms_emu_test::thrown<DeviceError>([] { AscendBackend be(load_emu(), -1); }) ==
        "[ms.device_error] ascend:-1 does not exist (1 device(s) found)");
  // Eager ops on a thread already bound do not set the device again.
  Tensor<float> x = ms::arange<float>(0, 6).to(kAscend);
  ctl().ResetCounters();
  for (int i = 0; i < 5; ++i) x = ms::relu(-ms::exp(x));
  CHECK(counters().set_device_calls == 0);
  CHECK(x.to(Device::cpu()).to_vector() == std::vector<float>(6, 0.0f));
  // Asynchronous copies from and to pageable memory go through pinned staging buffers.
  std::vector<float> src{1, 2, 3, 4}, dst(4, 0.0f);
  auto st = emu().allocate(16);
  const auto c0 = counters();
  emu().copy_to_device_async(st->data, src.data(), 16, emu().eager_stream());
  src.assign(4, -1.0f);  // the source was read when the copy was issued
  emu().copy_to_host_async(dst.data(), st->data, 16, emu().eager_stream());
  emu().synchronize(emu().eager_stream());
  CHECK(dst == std::vector<float>{1, 2, 3, 4});
  const auto c1 = counters();
  CHECK(c1.pageable_async_copies == c0.pageable_async_copies);
  CHECK(c1.h2d_copies - c0.h2d_copies == 1);
  CHECK(c1.d2h_copies - c0.d2h_copies == 1);
  CHECK(emu().staging_stats().mallocs >= 1);
  // A new thread binds once, then reuses its binding.
  std::uint64_t thread_set_device = 0;
  std::vector<float> thread_values;
  std::thread t([&] {
    ctl().ResetCounters();
    Tensor<float> y = ms::exp(ms::zeros<float>({3}).to(kAscend));
    y = ms::exp(y);
    thread_values = y.to(Device::cpu()).to_vector();
    thread_set_device = counters().set_device_calls;
  });
  t.join();
  CHECK(thread_set_device == 1);
  REQUIRE(thread_values.size() == 3);
  for (float v : thread_values) CHECK(v == Approx(std::exp(1.0)));
}

TEST_CASE("ascend selftest: every mapped op runs once on the device and matches the CPU", "[ascend][soc]") {
  EmuFixture fx;
  ms::manual_seed(3);
  const auto rows = backend::ascend::selftest(emu());
  REQUIRE(rows.size() >= 29);
  for (const auto& r : rows) {
    INFO(r.op << " " << r.inputs << " on " << r.engine << ": " << r.status);
    CHECK(r.status == "ok");
    // Float inputs: every mapped op has a device engine, but for AI CPU rows on a SoC without the API.
    CHECK((r.engine != "host" || !emu().api().has_aicpu()));
  }
  const std::string table = backend::ascend::selftest_table(emu(), rows);
  CHECK_THAT(table, Contains("ascend:0 (" + emu().soc().name));
  CHECK_THAT(table, Contains("aclnnMatmul"));
}

}  // namespace ascend_cann_rules_test

#endif  // MS_ASCEND_EMULATOR_PATH
