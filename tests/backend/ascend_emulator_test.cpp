// Tests of the AscendCL loader (ms/backend/ascend/acl_api.hpp) against the
// Ascend emulator (tests/ascend_emulator): memory, copies, streams, events,
// aclnn ops, capture/replay, counters and injected faults.
// The build defines MS_ASCEND_EMULATOR_PATH (absolute path of the emulator .so)
// when the emulator target exists; without it these tests are skipped.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ms/backend/ascend/acl_api.hpp>

#include "../ascend_emulator/ms_emulator.h"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend emulator tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] emulator tests did not run");
}

#else

// Everything below lives in a namespace of its own: its RAII helpers (Tensor, Stream, ...)
// and the using-directive for the AscendCL names must not meet the other test files that
// are compiled in the same unit.
namespace ascend_emulator_test {
namespace {

using namespace ms::backend::ascend;
using Catch::Matchers::Contains;

const AclApi& emu_api() {
  static const AclApi api = load_acl_api(MS_ASCEND_EMULATOR_PATH);
  return api;
}

const msEmuApi& emu_ctl() {
  static const msEmuApi ctl = [] {
    msEmuApi c{};
    if (msEmuLoadApi(MS_ASCEND_EMULATOR_PATH, &c) != 0) {
      throw std::runtime_error("cannot load the msEmu* control API from " MS_ASCEND_EMULATOR_PATH);
    }
    return c;
  }();
  return ctl;
}

msEmuCounters counters() {
  msEmuCounters c{};
  emu_ctl().GetCounters(&c);
  return c;
}

// ---------------------------------------------------------------- RAII helpers

struct DevBuf {
  const AclApi* api;
  void* ptr = nullptr;
  size_t bytes;
  DevBuf(const AclApi& a, size_t n) : api(&a), bytes(n) {
    acl_check(a, a.aclrtMalloc(&ptr, n, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  }
  ~DevBuf() {
    if (ptr != nullptr) (void)api->aclrtFree(ptr);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Stream {
  const AclApi* api;
  aclrtStream s = nullptr;
  explicit Stream(const AclApi& a) : api(&a) { acl_check(a, a.aclrtCreateStream(&s), "aclrtCreateStream"); }
  ~Stream() {
    if (s != nullptr) (void)api->aclrtDestroyStream(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Event {
  const AclApi* api;
  aclrtEvent e = nullptr;
  explicit Event(const AclApi& a) : api(&a) { acl_check(a, a.aclrtCreateEvent(&e), "aclrtCreateEvent"); }
  ~Event() {
    if (e != nullptr) (void)api->aclrtDestroyEvent(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Tensor {
  const AclApi* api;
  aclTensor* t = nullptr;
  Tensor(const AclApi& a, std::vector<int64_t> dims, void* data, aclDataType dt = ACL_FLOAT,
         std::vector<int64_t> strides = {}, int64_t offset = 0)
      : api(&a) {
    const int64_t* st = strides.empty() ? nullptr : strides.data();
    t = a.aclCreateTensor(dims.data(), dims.size(), dt, st, offset, ACL_FORMAT_ND, dims.data(), dims.size(),
                          data);
    if (t == nullptr) acl_check(a, ACLNN_ERR_PARAM_INVALID, "aclCreateTensor");
  }
  ~Tensor() { (void)api->aclDestroyTensor(t); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  operator aclTensor*() const { return t; }
};

struct Scalar {
  const AclApi* api;
  aclScalar* s;
  Scalar(const AclApi& a, float v) : api(&a), s(a.aclCreateScalar(&v, ACL_FLOAT)) {}
  ~Scalar() { (void)api->aclDestroyScalar(s); }
  Scalar(const Scalar&) = delete;
  Scalar& operator=(const Scalar&) = delete;
  operator aclScalar*() const { return s; }
};

struct IntArray {
  const AclApi* api;
  aclIntArray* a;
  IntArray(const AclApi& api_, std::vector<int64_t> v) : api(&api_), a(api_.aclCreateIntArray(v.data(), v.size())) {}
  ~IntArray() { (void)api->aclDestroyIntArray(a); }
  IntArray(const IntArray&) = delete;
  IntArray& operator=(const IntArray&) = delete;
  operator aclIntArray*() const { return a; }
};

/// Both aclnn phases, checked: gws(args..., &ws, &executor) then launch(...).
template <class Gws, class... Args>
void run_op(const AclApi& api, const char* name, Gws* gws, acl_fn::aclnnLaunch* launch, aclrtStream stream,
            Args... args) {
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  acl_check(api, gws(args..., &ws, &ex), (std::string(name) + "GetWorkspaceSize").c_str());
  void* wsp = nullptr;
  if (ws > 0) acl_check(api, api.aclrtMalloc(&wsp, ws, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  const aclError rc = launch(wsp, ws, ex, stream);
  if (wsp != nullptr) (void)api.aclrtFree(wsp);
  acl_check(api, rc, name);
}
#define RUN_OP(Name, stream, ...) \
  run_op(api, "aclnn" #Name, api.aclnn##Name##GetWorkspaceSize, api.aclnn##Name, stream, __VA_ARGS__)

void h2d(const AclApi& api, const DevBuf& d, const std::vector<float>& v) {
  acl_check(api, api.aclrtMemcpy(d.ptr, d.bytes, v.data(), v.size() * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE),
            "aclrtMemcpy");
}

std::vector<float> d2h(const AclApi& api, const DevBuf& d, size_t n) {
  std::vector<float> v(n);
  acl_check(api, api.aclrtMemcpy(v.data(), n * sizeof(float), d.ptr, n * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST),
            "aclrtMemcpy");
  return v;
}

/// The cubeMathType the current SoC profile takes for fp32 Matmul/BatchMatMul.
int8_t fp32_cube(const AclApi& api) {
  return soc_caps(api.aclrtGetSocName()).fp32_keep_dtype ? ACLNN_CUBE_KEEP_DTYPE : ACLNN_CUBE_ALLOW_FP32_DOWN_PRECISION;
}

std::string recent(const AclApi& api) {
  const char* m = api.aclGetRecentErrMsg();
  return m ? m : "";
}

/// Per test: aclInit + aclrtSetDevice, zero latency, no faults, counters reset.
struct EmuFixture {
  const AclApi& api = emu_api();
  const msEmuApi& ctl = emu_ctl();
  bool owns_init = false;
  msEmuLatency saved_latency{};
  msEmuCounters base{};  // gauges at the start (other tests may hold resources)

  EmuFixture() {
    const aclError rc = api.aclInit(nullptr);
    owns_init = rc == ACL_SUCCESS;
    if (!owns_init) (void)api.aclGetRecentErrMsg();  // ACL_ERROR_REPEAT_INITIALIZE: already up
    acl_check(api, api.aclrtSetDevice(0), "aclrtSetDevice");
    ctl.GetLatency(&saved_latency);
    ctl.SetLatency(0, 0, 0, 0);
    ctl.ClearFaults();
    ctl.ResetCounters();
    base = counters();
  }
  ~EmuFixture() {
    ctl.ClearFaults();
    ctl.SetLatency(saved_latency.launch_ns, saved_latency.sync_ns, saved_latency.copy_ps_per_byte,
                   saved_latency.copy_fixed_ns);
    (void)api.aclrtResetDevice(0);
    if (owns_init) (void)api.aclFinalize();
    (void)api.aclGetRecentErrMsg();
  }
};

}  // namespace

// ================================================================ loader

TEST_CASE("load_acl_api resolves every symbol from the emulator", "[ascend]") {
  const AclApi& api = emu_api();
  CHECK(api.libraries == MS_ASCEND_EMULATOR_PATH);
  CHECK(api.missing_optional.empty());
  CHECK(api.has_capture());
  CHECK(api.has_executor_destroy());
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Sqrt", "Relu", "Sigmoid", "Tanh",
                         "Gelu", "Matmul", "BatchMatMul", "Softmax", "ReduceSum", "Mean", "Cast"}) {
    INFO(op);
    CHECK(api.has_op(op));
  }
  CHECK_FALSE(api.has_op("Conv2d"));
}

TEST_CASE("load_acl_api reports libraries and symbols it cannot find", "[ascend]") {
  CHECK_THROWS_WITH(load_acl_api("/nonexistent/libnope.so"),
                    Contains("[ms.backend_error]") && Contains("/nonexistent/libnope.so") &&
                        Contains("MS_ASCEND_LIBS"));
  // libm opens, but has no AscendCL symbols: the first required one is named.
  CHECK_THROWS_WITH(load_acl_api("libm.so.6:/nonexistent/libnope.so"),
                    Contains("required symbol aclInit") && Contains("libm.so.6") &&
                        Contains("/nonexistent/libnope.so"));
  CHECK_THROWS_AS(load_acl_api(""), ms::BackendError);
}

TEST_CASE_METHOD(EmuFixture, "acl_check formats call, code and recent message", "[ascend]") {
  CHECK_NOTHROW(acl_check(api, ACL_SUCCESS, "aclrtMalloc"));
  void* p = nullptr;
  const aclError rc = api.aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST);
  REQUIRE(rc == ACL_ERROR_INVALID_PARAM);
  CHECK_THROWS_WITH(acl_check(api, rc, "aclrtMalloc"),
                    "[ms.backend_error] aclrtMalloc failed with code 100000: aclrtMalloc: size must not be 0");
  // The message was consumed; a later failure without one says so.
  CHECK_THROWS_WITH(acl_check(api, 507000, "aclrtFoo"), Contains("aclrtFoo failed with code 507000: (no error message)"));
  CHECK(api.aclInit(nullptr) == ACL_ERROR_REPEAT_INITIALIZE);
  CHECK_THAT(recent(api), Contains("already initialized"));
  CHECK(api.aclGetRecentErrMsg() == nullptr);  // cleared on read
}

// ================================================================ memory

TEST_CASE_METHOD(EmuFixture, "device memory round trip, memset and counters", "[ascend]") {
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  {
    DevBuf a(api, 64), b(api, 64);
    auto c = counters();
    CHECK(c.live_allocations - base.live_allocations == 2);
    CHECK(c.live_device_bytes - base.live_device_bytes == 128);

    CHECK(d2h(api, a, 16)[0] != d2h(api, a, 16)[0]);  // fresh device memory is NaN-filled
    h2d(api, a, x);
    acl_check(api, api.aclrtMemcpy(b.ptr, 64, a.ptr, 64, ACL_MEMCPY_DEVICE_TO_DEVICE), "aclrtMemcpy");
    CHECK(d2h(api, b, 16) == x);

    acl_check(api, api.aclrtMemset(a.ptr, 64, 0, 64), "aclrtMemset");
    CHECK(d2h(api, a, 16) == std::vector<float>(16, 0.0f));
    acl_check(api, api.aclrtMemset(a.ptr, 64, 0x3F, 8), "aclrtMemset");
    std::vector<unsigned char> bytes(64);
    acl_check(api, api.aclrtMemcpy(bytes.data(), 64, a.ptr, 64, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    CHECK(bytes[0] == 0x3F);
    CHECK(bytes[7] == 0x3F);
    CHECK(bytes[8] == 0);

    c = counters();
    CHECK(c.h2d_copies == 1);
    CHECK(c.h2d_bytes == 64);
    CHECK(c.d2h_copies == 5);
    CHECK(c.d2h_bytes == 5 * 64);
    CHECK(c.d2d_copies == 1);
    CHECK(c.d2d_bytes == 64);
    CHECK(c.memsets == 2);
    CHECK(c.syncs == 0);
  }
  const auto c = counters();
  CHECK(c.live_allocations == base.live_allocations);
  CHECK(c.live_device_bytes == base.live_device_bytes);
  CHECK(c.peak_device_bytes >= base.live_device_bytes + 128);

  void* host = nullptr;
  acl_check(api, api.aclrtMallocHost(&host, 100), "aclrtMallocHost");
  CHECK(counters().live_host_allocations == base.live_host_allocations + 1);
  std::memset(host, 1, 100);  // host memory is usable by the host
  acl_check(api, api.aclrtFreeHost(host), "aclrtFreeHost");
  CHECK(api.aclrtFreeHost(host) == ACL_ERROR_RT_MEMORY_FREE);
  (void)api.aclGetRecentErrMsg();
}

TEST_CASE_METHOD(EmuFixture, "invalid device pointers are rejected with clean error codes", "[ascend]") {
  std::vector<float> host(16, 1.0f);
  DevBuf a(api, 64);

  // A host pointer where the kind says device.
  CHECK(api.aclrtMemcpy(host.data(), 64, host.data(), 64, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_ERROR_RT_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("dst") && Contains("not device memory"));
  // A device pointer where the kind says host.
  CHECK(api.aclrtMemcpy(a.ptr, 64, host.data(), 64, ACL_MEMCPY_HOST_TO_HOST) == ACL_ERROR_RT_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("is device memory but the kind ACL_MEMCPY_HOST_TO_HOST"));
  // Past the end of the allocation.
  std::vector<float> big(32);
  CHECK(api.aclrtMemcpy(big.data(), 128, a.ptr, 128, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_ERROR_RT_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("overruns the device allocation") && Contains("by 64 bytes"));
  CHECK(api.aclrtMemcpy(host.data(), 64, static_cast<char*>(a.ptr) + 4, 64, ACL_MEMCPY_DEVICE_TO_HOST) ==
        ACL_ERROR_RT_PARAM_INVALID);
  (void)api.aclGetRecentErrMsg();
  // count > destMax.
  CHECK(api.aclrtMemcpy(a.ptr, 32, host.data(), 64, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_ERROR_INVALID_PARAM);
  CHECK_THAT(recent(api), Contains("exceeds destMax"));
  // ACL_MEMCPY_DEFAULT infers the direction from the pointers.
  CHECK(api.aclrtMemcpy(a.ptr, 64, host.data(), 64, ACL_MEMCPY_DEFAULT) == ACL_SUCCESS);

  // Use after free, double free.
  void* p = nullptr;
  acl_check(api, api.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  acl_check(api, api.aclrtFree(p), "aclrtFree");
  CHECK(api.aclrtMemcpy(p, 64, host.data(), 64, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_ERROR_RT_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("not inside a live device allocation"));
  CHECK(api.aclrtFree(p) == ACL_ERROR_RT_MEMORY_FREE);
  CHECK_THROWS_WITH(acl_check(api, api.aclrtFree(p), "aclrtFree"),
                    Contains("aclrtFree failed with code 207002") && Contains("not the start of a live device allocation"));
  CHECK(api.aclrtMemset(p, 64, 0, 64) == ACL_ERROR_RT_PARAM_INVALID);
  (void)api.aclGetRecentErrMsg();

  // An op whose tensor lies in freed memory fails at launch; its executor is consumed.
  Tensor t(api, {16}, p), out(api, {16}, a.ptr);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  REQUIRE(api.aclnnExpGetWorkspaceSize(t, out, &ws, &ex) == ACLNN_SUCCESS);
  CHECK(api.aclnnExp(nullptr, ws, ex, nullptr) == ACLNN_ERR_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("aclnnExp: self data") && Contains("not inside a live device allocation"));
  CHECK(counters().live_executors == base.live_executors);
  CHECK(counters().launches == 0);
  // A view reaching past its buffer is caught too.
  Tensor wide(api, {17}, a.ptr);
  REQUIRE(api.aclnnExpGetWorkspaceSize(wide, wide, &ws, &ex) == ACLNN_SUCCESS);
  CHECK(api.aclnnExp(nullptr, ws, ex, nullptr) == ACLNN_ERR_PARAM_INVALID);
  CHECK_THAT(recent(api), Contains("overruns"));

  // Each thread needs aclrtSetDevice, as with CANN.
  aclError other_thread = ACL_SUCCESS;
  std::thread([&] {
    void* q = nullptr;
    other_thread = api.aclrtMalloc(&q, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    (void)api.aclGetRecentErrMsg();
  }).join();
  CHECK(other_thread == ACL_ERROR_RT_CONTEXT_NULL);
}

// ================================================================ ops on a stream

TEST_CASE_METHOD(EmuFixture, "async copies and aclnn ops on a stream", "[ascend]") {
  Stream s(api);
  const std::vector<float> a_host{1, 2, 3, 4, 5, 6};        // [2, 3]
  const std::vector<float> b_host{0.5f, -1, 2, 1, 0, -3};   // [2, 3]
  const std::vector<float> m_host{1, 0, 2, 1, 0, -1};       // [3, 2]
  DevBuf a(api, 24), b(api, 24), m(api, 24), mul(api, 24), add(api, 24), ex(api, 24), mm(api, 16), sm(api, 24),
      rs(api, 8), rs0(api, 12);
  auto upload = [&](const DevBuf& d, const std::vector<float>& v) {
    acl_check(api, api.aclrtMemcpyAsync(d.ptr, d.bytes, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE, s.s),
              "aclrtMemcpyAsync");
  };
  upload(a, a_host);
  upload(b, b_host);
  upload(m, m_host);

  Tensor ta(api, {2, 3}, a.ptr), tb(api, {2, 3}, b.ptr), tm(api, {3, 2}, m.ptr);
  Tensor tmul(api, {2, 3}, mul.ptr), tadd(api, {2, 3}, add.ptr), tex(api, {2, 3}, ex.ptr);
  Tensor tmm(api, {2, 2}, mm.ptr), tsm(api, {2, 3}, sm.ptr), trs(api, {2}, rs.ptr), trs0(api, {1, 3}, rs0.ptr);
  Scalar two(api, 2.0f);
  IntArray dim1(api, {1}), dim0(api, {0});

  RUN_OP(Mul, s.s, ta.t, tb.t, tmul.t);                             // a * b
  RUN_OP(Add, s.s, ta.t, tmul.t, two.s, tadd.t);                     // a + 2 (a * b)
  RUN_OP(Exp, s.s, tb.t, tex.t);                                     // exp(b)
  RUN_OP(Matmul, s.s, ta.t, tm.t, tmm.t, fp32_cube(api));            // [2,3] @ [3,2]
  RUN_OP(Softmax, s.s, ta.t, int64_t{1}, tsm.t);                     // along rows
  RUN_OP(ReduceSum, s.s, ta.t, dim1.a, false, ACL_FLOAT, trs.t);     // row sums
  RUN_OP(ReduceSum, s.s, ta.t, dim0.a, true, ACL_FLOAT, trs0.t);     // column sums, keepDims

  std::vector<float> r_mul(6), r_add(6), r_exp(6), r_mm(4), r_sm(6), r_rs(2), r_rs0(3);
  auto download = [&](std::vector<float>& v, const DevBuf& d) {
    acl_check(api, api.aclrtMemcpyAsync(v.data(), v.size() * 4, d.ptr, v.size() * 4, ACL_MEMCPY_DEVICE_TO_HOST, s.s),
              "aclrtMemcpyAsync");
  };
  download(r_mul, mul);
  download(r_add, add);
  download(r_exp, ex);
  download(r_mm, mm);
  download(r_sm, sm);
  download(r_rs, rs);
  download(r_rs0, rs0);
  acl_check(api, api.aclrtSynchronizeStream(s.s), "aclrtSynchronizeStream");

  CHECK(r_mul == std::vector<float>{0.5f, -2, 6, 4, 0, -18});
  CHECK(r_add == std::vector<float>{2, -2, 15, 12, 5, -30});
  for (size_t i = 0; i < 6; ++i) CHECK(r_exp[i] == Approx(std::exp(b_host[i])));
  // [[1,2,3],[4,5,6]] @ [[1,0],[2,1],[0,-1]] = [[5,-1],[14,-1]]
  CHECK(r_mm == std::vector<float>{5, -1, 14, -1});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(r_sm[0] == Approx(std::exp(1.0) / z));
  CHECK(r_sm[2] == Approx(std::exp(3.0) / z));
  CHECK(r_sm[3] == Approx(std::exp(1.0) / z));  // softmax is shift-invariant: row 2 = row 1 + 3
  CHECK(r_sm[0] + r_sm[1] + r_sm[2] == Approx(1.0));
  CHECK(r_rs == std::vector<float>{6, 15});
  CHECK(r_rs0 == std::vector<float>{5, 7, 9});

  const auto c = counters();
  CHECK(c.launches == 7);
  CHECK(c.h2d_copies == 3);
  CHECK(c.h2d_bytes == 72);
  CHECK(c.d2h_copies == 7);
  CHECK(c.d2h_bytes == 4 * (6 + 6 + 6 + 4 + 6 + 2 + 3));
  CHECK(c.syncs == 1);
  CHECK(c.live_tensors == base.live_tensors + 10);
  CHECK(c.live_executors == base.live_executors);  // every executor was consumed by its launch
  CHECK(c.live_streams == base.live_streams + 1);
}

TEST_CASE_METHOD(EmuFixture, "every op computes host-checked values", "[ascend]") {
  const std::vector<float> x{-2, -0.5f, 0.25f, 1, 2, 4};  // [2, 3]
  DevBuf dx(api, 24), dy(api, 24), dv(api, 12), dout(api, 48), dh(api, 12), di(api, 24);
  h2d(api, dx, x);
  h2d(api, dv, {1, 2, 4});
  Tensor tx(api, {2, 3}, dx.ptr), ty(api, {2, 3}, dy.ptr), tv(api, {3}, dv.ptr);
  // Ops run on the default stream; aclrtMemcpy is not ordered after stream work.
  auto get = [&](const DevBuf& d, size_t n) {
    acl_check(api, api.aclrtSynchronizeStream(nullptr), "aclrtSynchronizeStream");
    return d2h(api, d, n);
  };
  auto unary_check = [&](auto gws, acl_fn::aclnnLaunch* launch, const char* name, auto ref) {
    INFO(name);
    run_op(api, name, gws, launch, nullptr, tx.t, ty.t);  // default stream
    const auto y = get(dy, 6);
    for (size_t i = 0; i < 6; ++i) CHECK(y[i] == Approx(ref(static_cast<double>(x[i]))).margin(1e-6));
  };
  unary_check(api.aclnnNegGetWorkspaceSize, api.aclnnNeg, "aclnnNeg", [](double v) { return -v; });
  unary_check(api.aclnnReluGetWorkspaceSize, api.aclnnRelu, "aclnnRelu", [](double v) { return v > 0 ? v : 0; });
  unary_check(api.aclnnSigmoidGetWorkspaceSize, api.aclnnSigmoid, "aclnnSigmoid",
              [](double v) { return 1 / (1 + std::exp(-v)); });
  unary_check(api.aclnnTanhGetWorkspaceSize, api.aclnnTanh, "aclnnTanh", [](double v) { return std::tanh(v); });
  unary_check(api.aclnnGeluGetWorkspaceSize, api.aclnnGelu, "aclnnGelu",
              [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  unary_check(api.aclnnExpGetWorkspaceSize, api.aclnnExp, "aclnnExp", [](double v) { return std::exp(v); });
  {
    // log/sqrt of the positive half: a view at element offset 3 of [2, 3] (the second row).
    Tensor row(api, {3}, dx.ptr, ACL_FLOAT, {1}, 3), out(api, {3}, dy.ptr);
    RUN_OP(Log, nullptr, row.t, out.t);
    auto y = get(dy, 3);
    for (size_t i = 0; i < 3; ++i) CHECK(y[i] == Approx(std::log(x[3 + i])));
    RUN_OP(Sqrt, nullptr, row.t, out.t);
    y = get(dy, 3);
    for (size_t i = 0; i < 3; ++i) CHECK(y[i] == Approx(std::sqrt(x[3 + i])));
  }
  {
    // Broadcasting [2,3] with [3]; Sub with alpha; Div.
    Scalar half(api, 0.5f);
    RUN_OP(Sub, nullptr, tx.t, tv.t, half.s, ty.t);
    auto y = get(dy, 6);
    const float v[3] = {1, 2, 4};
    for (size_t i = 0; i < 6; ++i) CHECK(y[i] == Approx(x[i] - 0.5f * v[i % 3]));
    RUN_OP(Div, nullptr, tx.t, tv.t, ty.t);
    y = get(dy, 6);
    for (size_t i = 0; i < 6; ++i) CHECK(y[i] == Approx(x[i] / v[i % 3]));
    // Transposed view: x as [3, 2] with strides (1, 3), times itself.
    Tensor xt(api, {3, 2}, dx.ptr, ACL_FLOAT, {1, 3}), out(api, {3, 2}, dy.ptr);
    RUN_OP(Mul, nullptr, xt.t, xt.t, out.t);
    y = get(dy, 6);
    CHECK(y == std::vector<float>{4, 1, 0.25f, 4, 0.0625f, 16});
  }
  {
    // BatchMatMul [2, 1, 3] @ [2, 3, 1]; Mean over all dims and over dim -1.
    Tensor a(api, {2, 1, 3}, dx.ptr), b(api, {2, 3, 1}, dx.ptr), out(api, {2, 1, 1}, dout.ptr);
    RUN_OP(BatchMatMul, nullptr, a.t, b.t, out.t, fp32_cube(api));
    auto y = get(dout, 2);
    CHECK(y[0] == Approx(4 + 0.25 + 0.0625));
    CHECK(y[1] == Approx(1 + 4 + 16));
    IntArray all(api, {}), last(api, {-1});
    Tensor m0(api, {}, dout.ptr), m1(api, {2, 1}, dout.ptr);
    RUN_OP(Mean, nullptr, tx.t, all.a, false, ACL_FLOAT, m0.t);
    CHECK(get(dout, 1)[0] == Approx((-2 - 0.5 + 0.25 + 1 + 2 + 4) / 6.0));
    RUN_OP(Mean, nullptr, tx.t, last.a, true, ACL_FLOAT, m1.t);
    y = get(dout, 2);
    CHECK(y[0] == Approx((-2 - 0.5 + 0.25) / 3.0));
    CHECK(y[1] == Approx(7 / 3.0));
  }
  {
    // Cast float32 -> float16 -> float32, and float32 -> int32 (truncation).
    Tensor h(api, {2, 3}, dh.ptr, ACL_FLOAT16), i32(api, {2, 3}, di.ptr, ACL_INT32);
    RUN_OP(Cast, nullptr, tx.t, ACL_FLOAT16, h.t);
    RUN_OP(Cast, nullptr, h.t, ACL_FLOAT, ty.t);
    CHECK(get(dy, 6) == x);  // all exactly representable in float16
    acl_check(api, api.aclrtSynchronizeStream(nullptr), "aclrtSynchronizeStream");
    std::vector<uint16_t> bits(6);
    acl_check(api, api.aclrtMemcpy(bits.data(), 12, dh.ptr, 12, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    CHECK(bits[0] == 0xC000);  // -2.0 in IEEE half
    CHECK(bits[3] == 0x3C00);  // 1.0
    RUN_OP(Cast, nullptr, tx.t, ACL_INT32, i32.t);
    acl_check(api, api.aclrtSynchronizeStream(nullptr), "aclrtSynchronizeStream");
    std::vector<int32_t> ints(6);
    acl_check(api, api.aclrtMemcpy(ints.data(), 24, di.ptr, 24, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    CHECK(ints == std::vector<int32_t>{-2, 0, 0, 1, 2, 4});
  }
  {
    // Shape, dtype and argument errors come back from the first phase.
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    Tensor bad(api, {4}, dy.ptr), i8(api, {2, 3}, dy.ptr, ACL_COMPLEX64);
    CHECK(api.aclnnMulGetWorkspaceSize(tx, bad, ty, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    CHECK_THAT(recent(api), Contains("cannot broadcast self (2, 3) with other (4,)"));
    CHECK(api.aclnnExpGetWorkspaceSize(tx, bad, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    CHECK(api.aclnnExpGetWorkspaceSize(i8, ty, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    CHECK_THAT(recent(api), Contains("does not support"));
    CHECK(api.aclnnExpGetWorkspaceSize(nullptr, ty, &ws, &ex) == ACLNN_ERR_PARAM_NULLPTR);
    CHECK(api.aclnnMatmulGetWorkspaceSize(tx, tx, ty, 0, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    CHECK(api.aclnnSoftmaxGetWorkspaceSize(tx, 2, ty, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    CHECK(api.aclnnCastGetWorkspaceSize(tx, ACL_INT32, ty, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
    (void)api.aclGetRecentErrMsg();
    CHECK(counters().live_executors == base.live_executors);
  }
}

// ================================================================ events and streams

TEST_CASE_METHOD(EmuFixture, "events order work and time it with the latency model", "[ascend]") {
  ctl.SetLatency(2'000'000, 0, 0, 0);  // 2 ms per kernel
  Stream s(api);
  Event start(api), end(api);
  DevBuf a(api, 16);
  h2d(api, a, {1, 2, 3, 4});
  Tensor t(api, {4}, a.ptr);

  float ms = 0;
  CHECK(api.aclrtEventElapsedTime(&ms, start.e, end.e) == ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  (void)api.aclGetRecentErrMsg();

  acl_check(api, api.aclrtRecordEvent(start.e, s.s), "aclrtRecordEvent");
  for (int i = 0; i < 3; ++i) RUN_OP(Neg, s.s, t.t, t.t);
  acl_check(api, api.aclrtRecordEvent(end.e, s.s), "aclrtRecordEvent");
  acl_check(api, api.aclrtSynchronizeEvent(end.e), "aclrtSynchronizeEvent");
  acl_check(api, api.aclrtEventElapsedTime(&ms, start.e, end.e), "aclrtEventElapsedTime");
  CHECK(ms >= 6.0f);
  CHECK(ms < 1000.0f);
  CHECK(d2h(api, a, 4) == std::vector<float>{-1, -2, -3, -4});  // three negations, in order
  CHECK(counters().syncs == 1);
}

TEST_CASE_METHOD(EmuFixture, "aclrtStreamWaitEvent orders work across two streams", "[ascend]") {
  ctl.SetLatency(30'000'000, 0, 0, 0);  // 30 ms per kernel: the consumer would overtake without the wait
  Stream producer(api), consumer(api);
  Event ready(api), done(api);
  DevBuf x(api, 16), y(api, 16), z(api, 16);
  h2d(api, x, {0, 1, 2, 3});
  Tensor tx(api, {4}, x.ptr), ty(api, {4}, y.ptr), tz(api, {4}, z.ptr);
  Scalar one(api, 1.0f);

  RUN_OP(Exp, producer.s, tx.t, ty.t);  // y = exp(x), slow
  acl_check(api, api.aclrtRecordEvent(ready.e, producer.s), "aclrtRecordEvent");
  acl_check(api, api.aclrtStreamWaitEvent(consumer.s, ready.e), "aclrtStreamWaitEvent");
  RUN_OP(Add, consumer.s, ty.t, ty.t, one.s, tz.t);  // z = 2 y
  acl_check(api, api.aclrtRecordEvent(done.e, consumer.s), "aclrtRecordEvent");
  std::vector<float> out(4);
  acl_check(api, api.aclrtMemcpyAsync(out.data(), 16, z.ptr, 16, ACL_MEMCPY_DEVICE_TO_HOST, consumer.s),
            "aclrtMemcpyAsync");
  acl_check(api, api.aclrtSynchronizeStream(consumer.s), "aclrtSynchronizeStream");  // only the consumer
  for (int i = 0; i < 4; ++i) CHECK(out[i] == Approx(2 * std::exp(i)));
  float ms = -1;
  acl_check(api, api.aclrtEventElapsedTime(&ms, ready.e, done.e), "aclrtEventElapsedTime");
  CHECK(ms >= 30.0f);  // the consumer's kernel ran after the producer's event
}

// ================================================================ capture

TEST_CASE_METHOD(EmuFixture, "stream capture records launches and replays them", "[ascend]") {
  Stream s(api);
  DevBuf x(api, 16), acc(api, 16);
  h2d(api, x, {1, 2, 3, 4});
  acl_check(api, api.aclrtMemset(acc.ptr, 16, 0, 16), "aclrtMemset");
  Tensor tx(api, {4}, x.ptr), tacc(api, {4}, acc.ptr);
  Scalar one(api, 1.0f);
  ctl.ResetCounters();

  CHECK(api.aclmdlRICaptureBegin(nullptr, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == ACL_ERROR_INVALID_PARAM);
  (void)api.aclGetRecentErrMsg();
  if (!soc_caps(api.aclrtGetSocName()).capture) {  // the Atlas training series has no capture
    CHECK(api.aclmdlRICaptureBegin(s.s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_THAT(recent(api), Contains("not supported on"));
    return;
  }
  acl_check(api, api.aclmdlRICaptureBegin(s.s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "aclmdlRICaptureBegin");
  CHECK(api.aclmdlRICaptureBegin(s.s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == ACL_ERROR_RT_STREAM_CAPTURED);
  RUN_OP(Add, s.s, tacc.t, tx.t, one.s, tacc.t);  // acc += x
  RUN_OP(Add, s.s, tacc.t, tx.t, one.s, tacc.t);  // acc += x
  CHECK(api.aclrtSynchronizeStream(s.s) == ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  (void)api.aclGetRecentErrMsg();
  aclmdlRI model = nullptr;
  acl_check(api, api.aclmdlRICaptureEnd(s.s, &model), "aclmdlRICaptureEnd");
  CHECK(api.aclmdlRICaptureEnd(s.s, &model) == ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  (void)api.aclGetRecentErrMsg();

  auto c = counters();
  CHECK(c.launches == 0);
  CHECK(c.captured_tasks == 2);
  CHECK(d2h(api, acc, 4) == std::vector<float>(4, 0.0f));  // nothing ran during capture

  for (int i = 0; i < 3; ++i) acl_check(api, api.aclmdlRIExecuteAsync(model, s.s), "aclmdlRIExecuteAsync");
  acl_check(api, api.aclrtSynchronizeStream(s.s), "aclrtSynchronizeStream");
  CHECK(d2h(api, acc, 4) == std::vector<float>{6, 12, 18, 24});  // 3 replays x 2 adds
  c = counters();
  CHECK(c.capture_replays == 3);
  CHECK(c.launches == 0);
  CHECK(c.live_models == base.live_models + 1);
  acl_check(api, api.aclmdlRIDestroy(model), "aclmdlRIDestroy");
  CHECK(counters().live_models == base.live_models);
  CHECK(api.aclmdlRIExecuteAsync(model, s.s) == ACL_ERROR_INVALID_RESOURCE_HANDLE);
  (void)api.aclGetRecentErrMsg();

  // A model whose memory was freed after capture is refused.
  {
    void* tmp = nullptr;
    acl_check(api, api.aclrtMalloc(&tmp, 16, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    Tensor tt(api, {4}, tmp);
    acl_check(api, api.aclmdlRICaptureBegin(s.s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), "aclmdlRICaptureBegin");
    RUN_OP(Neg, s.s, tx.t, tt.t);
    acl_check(api, api.aclmdlRICaptureEnd(s.s, &model), "aclmdlRICaptureEnd");
    acl_check(api, api.aclrtFree(tmp), "aclrtFree");
    CHECK(api.aclmdlRIExecuteAsync(model, s.s) == ACL_ERROR_RT_PARAM_INVALID);
    CHECK_THAT(recent(api), Contains("freed after capture"));
    acl_check(api, api.aclmdlRIDestroy(model), "aclmdlRIDestroy");
  }
}

// ================================================================ faults

TEST_CASE_METHOD(EmuFixture, "injected faults surface as error codes and BackendError", "[ascend]") {
  SECTION("allocation failure") {
    REQUIRE(ctl.InjectFault(MS_EMU_FAULT_ALLOC, 1) == 0);
    DevBuf first(api, 64);  // the first allocation passes
    void* p = nullptr;
    const aclError rc = api.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK(rc == ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK(p == nullptr);
    CHECK_THROWS_WITH(acl_check(api, rc, "aclrtMalloc"),
                      Contains("[ms.backend_error] aclrtMalloc failed with code 207001: ") &&
                          Contains("out of device memory"));
    DevBuf third(api, 64);  // one-shot
    CHECK(counters().live_allocations == base.live_allocations + 2);
  }
  SECTION("operator failure in the first phase") {
    REQUIRE(ctl.InjectFault(MS_EMU_FAULT_OP_WORKSPACE, 0) == 0);
    DevBuf a(api, 16);
    Tensor t(api, {4}, a.ptr);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    const aclnnStatus rc = api.aclnnNegGetWorkspaceSize(t, t, &ws, &ex);
    CHECK(rc == ACLNN_ERR_INNER);
    CHECK_THROWS_WITH(acl_check(api, rc, "aclnnNegGetWorkspaceSize"),
                      Contains("aclnnNegGetWorkspaceSize failed with code 561000") && Contains("injected"));
    CHECK_NOTHROW(RUN_OP(Neg, nullptr, t.t, t.t));
  }
  SECTION("operator failure at launch") {
    REQUIRE(ctl.InjectFault(MS_EMU_FAULT_OP_LAUNCH, 1) == 0);
    DevBuf a(api, 16);
    Tensor t(api, {4}, a.ptr);
    CHECK_NOTHROW(RUN_OP(Neg, nullptr, t.t, t.t));
    CHECK_THROWS_WITH(RUN_OP(Neg, nullptr, t.t, t.t), Contains("aclnnNeg failed with code 361001"));
    CHECK(counters().live_executors == base.live_executors);  // released by the failed launch
    CHECK(counters().launches == 1);
  }
  SECTION("stream error after N launches") {
    REQUIRE(ctl.InjectFault(MS_EMU_FAULT_STREAM, 1) == 0);
    Stream s(api);
    DevBuf a(api, 16), b(api, 16), c(api, 16);
    h2d(api, a, {1, 2, 3, 4});
    Tensor ta(api, {4}, a.ptr), tb(api, {4}, b.ptr), tc(api, {4}, c.ptr);
    RUN_OP(Neg, s.s, ta.t, tb.t);  // runs
    RUN_OP(Neg, s.s, tb.t, tc.t);  // fails on the device
    RUN_OP(Neg, s.s, tc.t, ta.t);  // skipped: the stream is in error
    const aclError rc = api.aclrtSynchronizeStream(s.s);
    CHECK(rc == ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_THROWS_WITH(acl_check(api, rc, "aclrtSynchronizeStream"),
                      Contains("aclrtSynchronizeStream failed with code 507015") &&
                          Contains("AI Core exception in aclnnNeg"));
    CHECK(api.aclrtSynchronizeStream(s.s) == ACL_SUCCESS);  // reported once
    CHECK(d2h(api, b, 4) == std::vector<float>{-1, -2, -3, -4});
    CHECK(std::isnan(d2h(api, c, 4)[0]));                    // never written
    CHECK(d2h(api, a, 4) == std::vector<float>{1, 2, 3, 4});  // third kernel skipped
  }
  SECTION("copy failure") {
    REQUIRE(ctl.InjectFault(MS_EMU_FAULT_MEMCPY, 0) == 0);
    DevBuf a(api, 16);
    const std::vector<float> v(4, 1.0f);
    const aclError rc = api.aclrtMemcpy(a.ptr, 16, v.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK(rc == ACL_ERROR_RT_COPY_DATA);
    CHECK_THROWS_WITH(acl_check(api, rc, "aclrtMemcpy"), Contains("aclrtMemcpy failed with code 507052"));
    CHECK(counters().h2d_copies == 0);
  }
  CHECK(ctl.InjectFault(42, 0) == -1);
}

TEST_CASE_METHOD(EmuFixture, "executors are consumed by their launch or by aclDestroyAclOpExecutor", "[ascend]") {
  DevBuf a(api, 16);
  Tensor t(api, {4}, a.ptr);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  REQUIRE(api.aclnnNegGetWorkspaceSize(t, t, &ws, &ex) == ACLNN_SUCCESS);
  CHECK(ws == 0);
  CHECK(counters().live_executors == base.live_executors + 1);
  CHECK(api.aclDestroyAclOpExecutor(ex) == ACLNN_SUCCESS);
  CHECK(counters().live_executors == base.live_executors);
  CHECK(api.aclnnNeg(nullptr, 0, ex, nullptr) == ACLNN_ERR_PARAM_INVALID);  // already destroyed
  CHECK_THAT(recent(api), Contains("not live"));
  REQUIRE(api.aclnnNegGetWorkspaceSize(t, t, &ws, &ex) == ACLNN_SUCCESS);
  CHECK(api.aclnnExp(nullptr, 0, ex, nullptr) == ACLNN_ERR_PARAM_INVALID);  // made for aclnnNeg
  CHECK_THAT(recent(api), Contains("made by aclnnNegGetWorkspaceSize"));
  CHECK(counters().live_executors == base.live_executors);
}

TEST_CASE_METHOD(EmuFixture, "streams on several threads run concurrently", "[ascend]") {
  ctl.SetLatency(100'000, 0, 0, 0);
  constexpr int kThreads = 3, kIters = 20;
  std::vector<std::vector<float>> results(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        acl_check(api, api.aclrtSetDevice(0), "aclrtSetDevice");
        Stream s(api);
        DevBuf x(api, 16), ones(api, 16);
        const std::vector<float> init(4, static_cast<float>(t)), one_v(4, 1.0f);
        acl_check(api, api.aclrtMemcpyAsync(x.ptr, 16, init.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE, s.s),
                  "aclrtMemcpyAsync");
        acl_check(api, api.aclrtMemcpyAsync(ones.ptr, 16, one_v.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE, s.s),
                  "aclrtMemcpyAsync");
        Tensor tx(api, {4}, x.ptr), tones(api, {4}, ones.ptr);
        Scalar one(api, 1.0f);
        for (int i = 0; i < kIters; ++i) RUN_OP(Add, s.s, tx.t, tones.t, one.s, tx.t);  // x += 1
        std::vector<float> out(4);
        acl_check(api, api.aclrtMemcpyAsync(out.data(), 16, x.ptr, 16, ACL_MEMCPY_DEVICE_TO_HOST, s.s),
                  "aclrtMemcpyAsync");
        acl_check(api, api.aclrtSynchronizeStream(s.s), "aclrtSynchronizeStream");
        results[static_cast<size_t>(t)] = out;
        (void)api.aclrtResetDevice(0);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(errors[static_cast<size_t>(t)].empty());
    CHECK(results[static_cast<size_t>(t)] == std::vector<float>(4, static_cast<float>(t + kIters)));
  }
  CHECK(counters().launches == kThreads * kIters);
  CHECK(counters().live_streams == base.live_streams);
}

#undef RUN_OP

}  // namespace ascend_emulator_test

#endif  // MS_ASCEND_EMULATOR_PATH
