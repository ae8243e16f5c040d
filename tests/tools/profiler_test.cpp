// ms::Profiler: one complete ("X") trace event per executed op, eager and in a jit replay
// (a fused node is one event typed by its fused[...] label), parseable Chrome trace JSON with
// thread_name metadata, non-overlapping events on a track, summaries that add up to the
// events, an atomic trace file, and chaining with another observer.

#include <catch2/catch.hpp>
#include <ms/ms.hpp>

#include <ms/tools/dump.hpp>
#include <ms/tools/profiler.hpp>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

#include <filesystem>
#include <fstream>
#include <map>

namespace {

using ms::Tensor;
using nlohmann::json;

std::vector<json> complete_events(const json& trace) {
  std::vector<json> out;
  for (auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("profiler: eager ops give one complete event each", "[tools]") {
  Tensor<float> a{1.f, 2.f, 3.f, 4.f}, b{0.5f, -1.f, 2.f, 8.f};
  ms::Profiler prof;
  {
    ms::ProfilerScope on(prof);
    auto c = a + b;
    auto d = c * a;
    auto e = ms::exp(d);
    auto f = e - b;
    auto g = ms::sin(f);
    (void)g;
  }
  auto evs = prof.events();
  REQUIRE(evs.size() == 5);
  CHECK(evs[0].name == "add_0");
  CHECK(evs[0].type == "add");
  CHECK(evs[1].type == "mul");
  CHECK(evs[2].type == "exp");
  CHECK(evs[3].type == "sub");
  CHECK(evs[4].type == "sin");
  CHECK(evs[0].graph_id == -1);
  CHECK(evs[0].bytes == 3 * 4 * 4);  // two inputs and one output of 4 floats
  CHECK(evs[0].flops == 4);

  json trace = json::parse(prof.chrome_trace());
  CHECK(trace.at("displayTimeUnit") == "ms");
  auto x = complete_events(trace);
  REQUIRE(x.size() == 5);
  std::map<int, std::vector<json>> by_track;
  for (auto& e : x) {
    CHECK(e.at("pid") == 1);
    CHECK(e.at("ts").is_number());
    CHECK(e.at("dur").get<double>() >= 0);
    CHECK(e.at("args").contains("flops"));
    CHECK(e.at("args").contains("bytes"));
    CHECK(e.at("args").contains("graph_id"));
    by_track[e.at("tid").get<int>()].push_back(e);
  }
  CHECK(x[2].at("name") == "exp_0");
  CHECK(x[2].at("cat") == "exp");
  // a thread_name metadata event for every track
  for (auto& [tid, list] : by_track) {
    bool named = false;
    for (auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("tid") == tid) named = true;
    CHECK(named);
    // events on one track do not overlap
    std::sort(list.begin(), list.end(), [](const json& p, const json& q) { return p.at("ts").get<double>() < q.at("ts").get<double>(); });
    for (std::size_t i = 1; i < list.size(); ++i)
      CHECK(list[i - 1].at("ts").get<double>() + list[i - 1].at("dur").get<double>() <= list[i].at("ts").get<double>() + 1e-9);
  }

  // summaries add up to the events
  std::int64_t sum = 0;
  for (auto& e : evs) sum += e.duration_ns();
  std::int64_t by_op = 0, by_type = 0;
  double pct = 0;
  for (auto& r : prof.summary_by_op()) by_op += r.total_ns;
  for (auto& r : prof.summary_by_type()) {
    by_type += r.total_ns;
    pct += r.percent;
    CHECK(r.calls == 1);
    CHECK(r.min_ns <= r.max_ns);
  }
  CHECK(by_op == sum);
  CHECK(by_type == sum);
  CHECK(prof.total_ns() == sum);
  if (sum > 0) CHECK(pct == Approx(100.0));
  double dur_us = 0;
  for (auto& e : x) dur_us += e.at("dur").get<double>();
  CHECK(dur_us == Approx(sum / 1e3));
  std::string t = prof.table();
  CHECK(t.find("By op type") != std::string::npos);
  CHECK(t.find("GFLOP/s") != std::string::npos);
  CHECK(t.find("exp") != std::string::npos);
}

TEST_CASE("profiler: repeated calls are grouped by type", "[tools]") {
  Tensor<float> a{1.f, 2.f, 3.f};
  ms::Profiler prof;
  prof.start();
  for (int i = 0; i < 3; ++i) a = a + a;
  prof.stop();
  (void)(a * a);  // not recorded after stop()
  auto rows = prof.summary_by_type();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].key == "add");
  CHECK(rows[0].calls == 3);
  CHECK(prof.summary_by_op().size() == 3);  // add_0, add_1, add_2
  CHECK(ms::ops::detail::observer == nullptr);
}

TEST_CASE("profiler: a jit replay of a fused graph is one event with the fused label", "[tools]") {
  auto f = ms::jit([](const Tensor<float>& x, const Tensor<float>& y) { return x * y + y; });
  Tensor<float> a{1.f, 2.f, 3.f, 4.f}, b{2.f, 3.f, 4.f, 5.f};
  Tensor<float> ref = f(a, b);  // traces and compiles
  ms::Profiler prof;
  Tensor<float> got;
  {
    ms::ProfilerScope on(prof);
    got = f(a, b);
  }
  CHECK(got.to_vector() == ref.to_vector());
  auto evs = prof.events();
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].type.rfind("fused[", 0) == 0);
  CHECK(evs[0].type.find("mul") != std::string::npos);
  CHECK(evs[0].type.find("add") != std::string::npos);
  CHECK(evs[0].graph_id >= 0);
  CHECK_FALSE(evs[0].name.empty());
  auto x = complete_events(json::parse(prof.chrome_trace()));
  REQUIRE(x.size() == 1);
  CHECK(x[0].at("cat") == evs[0].type);
  CHECK(x[0].at("name") == evs[0].name);
  CHECK(x[0].at("args").at("graph_id") == evs[0].graph_id);
}

TEST_CASE("profiler: write_chrome_trace writes the file atomically", "[tools]") {
  auto dir = std::filesystem::temp_directory_path() / "ms_profiler_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Tensor<float> a{1.f, 2.f};
  ms::Profiler prof;
  {
    ms::ProfilerScope on(prof);
    (void)ms::exp(a);
  }
  auto path = dir / "trace.json";
  prof.write_chrome_trace(path);
  std::ifstream in(path);
  json j = json::parse(in);
  CHECK(complete_events(j).size() == 1);
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++files;
  CHECK(files == 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST_CASE("profiler: chains to the previously installed observer (dump + profiler)", "[tools]") {
  auto dir = std::filesystem::temp_directory_path() / "ms_profiler_chain_test";
  std::filesystem::remove_all(dir);
  auto dump = ms::DataDump::from_json(fmt::format(R"({{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net", "iteration": "all", "input_output": 2}}}})", dir.string()));
  Tensor<float> a{1.f, 2.f};
  ms::Profiler prof;
  {
    ms::DumpScope d(*dump);
    ms::ProfilerScope p(prof);
    auto b = ms::exp(a);
    auto c = b + a;
    (void)c;
  }
  CHECK(prof.events().size() == 2);
  CHECK(dump->files_written() == 2);  // one output each
  CHECK(ms::ops::detail::observer == nullptr);
  std::filesystem::remove_all(dir);
}

TEST_CASE("profiler: the summary and the trace name the CPU GEMM and convolution paths and the primitive cache",
          "[tools][dnnl]") {
  const ms::CpuGemm saved = ms::cpu_gemm();
  const ms::CpuConv saved_conv = ms::cpu_conv();
  if (ms::cpu_gemm_available(ms::CpuGemm::dnnl)) ms::set_cpu_conv(ms::CpuConv::dnnl);
  Tensor<float> x = ms::ones<float>({2, 1, 6, 6}), w = ms::ones<float>({3, 1, 3, 3});
  ms::Profiler prof;
  prof.start();
  Tensor<float> y = ms::conv2d(x, w);
  y = ms::conv2d(x, w);
  prof.stop();
  const ms::CpuConv conv = ms::cpu_conv();
  const std::string table = prof.table(), trace = prof.chrome_trace();
  ms::set_cpu_conv(saved_conv);
  ms_test::require_values(y, std::vector<double>(2 * 3 * 4 * 4, 9.0));  // 3 x 3 windows of ones
  const ms::DnnlCacheStats c = ms::dnnl_cache_stats();
  const std::string line =
      fmt::format("CPU GEMM: {} ({}), convolutions {}; primitive cache {}/{}, {} hits, {} misses",
                  ms::cpu_gemm_name(saved), ms::dnnl_cpu_isa(), ms::cpu_conv_name(conv), c.size, c.capacity, c.hits,
                  c.misses);
  CHECK(table.find(line) != std::string::npos);
  const json other = json::parse(trace).at("otherData");
  CHECK(other.at("cpu_gemm") == std::string(ms::cpu_gemm_name(saved)));
  CHECK(other.at("cpu_conv") == std::string(ms::cpu_conv_name(conv)));
  CHECK(other.at("dnnl_isa") == ms::dnnl_cpu_isa());
  CHECK(other.at("dnnl_cache").at("hits").get<std::uint64_t>() == c.hits);
#if defined(MS_HAVE_DNNL)
  CHECK(c.hits >= 1);  // the second conv2d found the first one's primitive
#endif
}
