// ms::DataDump: file names and counts for dump_mode 0/1, input_output 0/1/2, iteration
// ranges, kernels by name / type / name-regex; .npy contents equal the op's inputs and
// outputs; statistic.csv values; overflow detection; exact config errors; results are
// bit-identical with dump on and off.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_util.hpp"
#include <ms/tools/dump.hpp>
#include <ms/tools/profiler.hpp>

namespace {

namespace fs = std::filesystem;
using ms::AnyTensor;
using ms::Tensor;
using ms_test::same_bits;

fs::path fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("ms_dump_test_" + name);
  fs::remove_all(d);
  return d;
}

std::string config(const fs::path& dir, const std::string& extra) {
  return fmt::format(R"({{"common_dump_settings": {{"path": "{}", "net_name": "Net"{}{}}}}})", dir.string(),
                     extra.empty() ? "" : ", ", extra);
}

/// .npy file names (sorted) directly in `d`.
std::vector<std::string> npy_files(const fs::path& d) {
  std::vector<std::string> out;
  if (!fs::exists(d)) return out;
  for (auto& e : fs::directory_iterator(d))
    if (e.path().extension() == ".npy") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Files (by "{type}.{name}.*.{io}.{slot}") in d: strips task/stream/timestamp.
std::multiset<std::string> keys(const fs::path& d) {
  std::multiset<std::string> out;
  std::regex re(R"(^([^.]+)\.([^.]+)\.(\d+)\.(\d+)\.(\d+)\.(input|output)\.(\d+)\.npy$)");
  for (auto& f : npy_files(d)) {
    std::smatch m;
    REQUIRE(std::regex_match(f, m, re));
    out.insert(m[1].str() + "." + m[2].str() + "." + m[6].str() + "." + m[7].str());
  }
  return out;
}

fs::path find_file(const fs::path& d, const std::string& prefix, const std::string& suffix) {
  for (auto& f : npy_files(d))
    if (f.rfind(prefix, 0) == 0 && f.size() >= suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
      return d / f;
  FAIL("no file " << prefix << "*" << suffix << " in " << d);
  return {};
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char c : line) {
    if (c == '"') q = !q;
    else if (c == ',' && !q) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

}  // namespace

TEST_CASE("dump: dump_mode 0 writes every op's inputs and outputs with the MindSpore file layout", "[tools]") {
  auto dir = fresh_dir("mode0");
  auto dump = ms::DataDump::from_json(config(dir, R"("dump_mode": 0, "iteration": "all", "input_output": 0)"));
  Tensor<float> a{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, b{{0.5f, 1.f, -1.f}, {2.f, 0.f, 3.f}};
  Tensor<float> c, e;
  {
    ms::DumpScope on(*dump);
    c = a + b;
    e = ms::exp(c);
  }
  auto it = dir / "rank_0" / "Net" / "0" / "0";
  CHECK(dump->iteration_dir() == it);
  CHECK(keys(it) == std::multiset<std::string>{"add.add_0.input.0", "add.add_0.input.1", "add.add_0.output.0",
                                                "exp.exp_0.input.0", "exp.exp_0.output.0"});
  CHECK(dump->files_written() == 5);
  // task ids 0 and 1, stream 0
  CHECK(find_file(it, "add.add_0.0.0.", ".output.0.npy").filename().string().size() > 0);
  CHECK(find_file(it, "exp.exp_0.1.0.", ".input.0.npy").filename().string().size() > 0);
  // contents read back equal the op's inputs and outputs
  CHECK(same_bits(ms::load_npy(find_file(it, "add.", ".input.0.npy")), a));
  CHECK(same_bits(ms::load_npy(find_file(it, "add.", ".input.1.npy")), b));
  CHECK(same_bits(ms::load_npy(find_file(it, "add.", ".output.0.npy")), c));
  CHECK(same_bits(ms::load_npy(find_file(it, "exp.", ".input.0.npy")), c));
  CHECK(same_bits(ms::load_npy(find_file(it, "exp.", ".output.0.npy")), e));
  CHECK_FALSE(fs::exists(it / "statistic.csv"));  // saved_data defaults to "tensor"
  fs::remove_all(dir);
}

TEST_CASE("dump: input_output 1 and 2 select inputs or outputs", "[tools]") {
  Tensor<float> a{1.f, 2.f}, b{3.f, 4.f};
  for (int io : {1, 2}) {
    auto dir = fresh_dir("io" + std::to_string(io));
    auto dump = ms::DataDump::from_json(config(dir, fmt::format(R"("dump_mode": 0, "input_output": {})", io)));
    {
      ms::DumpScope on(*dump);
      (void)(a * b);
    }
    auto it = dir / "rank_0" / "Net" / "0" / "0";
    if (io == 1)
      CHECK(keys(it) == std::multiset<std::string>{"mul.mul_0.input.0", "mul.mul_0.input.1"});
    else
      CHECK(keys(it) == std::multiset<std::string>{"mul.mul_0.output.0"});
    fs::remove_all(dir);
  }
}

TEST_CASE("dump: iteration ranges select iteration directories", "[tools]") {
  auto dir = fresh_dir("iter");
  auto dump = ms::DataDump::from_json(config(dir, R"("dump_mode": 0, "iteration": "0|2-3", "input_output": 2)"));
  Tensor<float> a{1.f, 2.f};
  {
    ms::DumpScope on(*dump);
    for (int i = 0; i < 5; ++i) {
      a = ms::sin(a);
      dump->next_iteration();
    }
  }
  auto net = dir / "rank_0" / "Net" / "0";
  CHECK(npy_files(net / "0").size() == 1);
  CHECK_FALSE(fs::exists(net / "1"));
  CHECK(npy_files(net / "2").size() == 1);
  CHECK(npy_files(net / "3").size() == 1);
  CHECK_FALSE(fs::exists(net / "4"));
  CHECK(keys(net / "2") == std::multiset<std::string>{"sin.sin_2.output.0"});
  dump->set_iteration(4);
  CHECK_FALSE(dump->dump_tensor("w", a));
  dump->set_iteration(3);
  CHECK(dump->dump_tensor("fc1.weight", a));
  CHECK(keys(net / "3") == std::multiset<std::string>{"sin.sin_3.output.0", "Parameter.fc1_weight.output.0"});
  CHECK(same_bits(ms::load_npy(find_file(net / "3", "Parameter.fc1_weight.", ".npy")), a));
  fs::remove_all(dir);
}

TEST_CASE("dump: dump_mode 1 selects kernels by name, by type and by name-regex", "[tools]") {
  Tensor<float> a{1.f, 2.f}, b{3.f, 4.f};
  auto run = [&](const std::string& kernels) {
    auto dir = fresh_dir("kernels");
    auto dump = ms::DataDump::from_json(config(dir, R"("dump_mode": 1, "input_output": 2, "kernels": )" + kernels));
    {
      ms::DumpScope on(*dump);
      auto c = a + b;   // add_0
      auto d = c * a;   // mul_0
      auto e = d + c;   // add_1
      auto f = ms::exp(e);  // exp_0
      (void)f;
    }
    auto k = keys(dir / "rank_0" / "Net" / "0" / "0");
    fs::remove_all(dir);
    return k;
  };
  CHECK(run(R"(["add_1"])") == std::multiset<std::string>{"add.add_1.output.0"});
  CHECK(run(R"(["add"])") == std::multiset<std::string>{"add.add_0.output.0", "add.add_1.output.0"});
  CHECK(run(R"x(["name-regex(^(mul|exp)_)"])x") == std::multiset<std::string>{"mul.mul_0.output.0", "exp.exp_0.output.0"});
  CHECK(run(R"(["exp_0", "mul"])") == std::multiset<std::string>{"mul.mul_0.output.0", "exp.exp_0.output.0"});
}

TEST_CASE("dump: graph replays dump into graph_id + 1 with node names", "[tools]") {
  auto dir = fresh_dir("replay");
  auto f = ms::jit([](const Tensor<float>& x, const Tensor<float>& y) { return ms::exp(x * y + y); });
  Tensor<float> a{1.f, 2.f, 3.f}, b{0.5f, 0.25f, 0.125f};
  Tensor<float> ref = f(a, b);
  auto dump = ms::DataDump::from_json(config(dir, R"("dump_mode": 0, "input_output": 0, "saved_data": "full")"));
  Tensor<float> got;
  {
    ms::DumpScope on(*dump);
    got = f(a, b);
  }
  CHECK(same_bits(got, ref));
  auto net = dir / "rank_0" / "Net";
  std::vector<std::string> graphs;
  for (auto& e : fs::directory_iterator(net)) graphs.push_back(e.path().filename().string());
  REQUIRE(graphs.size() == 1);
  CHECK(graphs[0] != "0");
  auto files = npy_files(net / graphs[0] / "0");
  CHECK(files.size() >= 3);  // at least the inputs and the output of one step
  CHECK(fs::exists(net / graphs[0] / "0" / "statistic.csv"));
  fs::remove_all(dir);
}

TEST_CASE("dump: statistic.csv holds min, max, mean, NaN and Inf counts", "[tools]") {
  auto dir = fresh_dir("stat");
  auto dump = ms::DataDump::from_json(config(dir, R"("saved_data": "statistic")"));
  Tensor<float> a{{1.f, -2.f}, {3.f, 4.f}};
  {
    ms::DumpScope on(*dump);
    (void)ms::neg(a);
  }
  auto it = dir / "rank_0" / "Net" / "0" / "0";
  CHECK(npy_files(it).empty());  // statistic only
  std::ifstream in(it / "statistic.csv");
  std::string header, l1, l2, l3;
  std::getline(in, header);
  std::getline(in, l1);
  std::getline(in, l2);
  CHECK_FALSE(std::getline(in, l3));
  CHECK(header ==
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Shape,Data Type,Min Value,Max Value,Avg Value,NaN Count,Inf Count");
  auto r1 = split_csv(l1), r2 = split_csv(l2);
  REQUIRE(r1.size() == 14);
  REQUIRE(r2.size() == 14);
  CHECK(r1[0] == "neg");
  CHECK(r1[1] == "neg_0");
  CHECK(r1[5] == "input");
  CHECK(r1[6] == "0");
  CHECK(r1[7] == "(2, 2)");
  CHECK(r1[8] == "float32");
  CHECK(r1[9] == "-2");
  CHECK(r1[10] == "4");
  CHECK(r1[11] == "1.5");
  CHECK(r1[12] == "0");
  CHECK(r1[13] == "0");
  CHECK(r2[5] == "output");
  CHECK(r2[9] == "-4");
  CHECK(r2[10] == "2");
  CHECK(r2[11] == "-1.5");
  fs::remove_all(dir);
}

TEST_CASE("dump: overflow mode finds the first op producing Inf and dumps it", "[tools]") {
  auto dir = fresh_dir("overflow");
  auto dump = ms::DataDump::from_json(config(dir, R"("op_debug_mode": 3, "saved_data": "full")"));
  Tensor<float> x{1.f, 0.f, 2.f}, y{1.f, 1.f, 1.f};
  dump->set_iteration(7);
  {
    ms::DumpScope on(*dump);
    auto s = x * y;          // mul_0: finite
    auto l = ms::log(s);     // log_0: -inf at 1
    auto z = l + y;          // add_0: -inf too (not dumped: only the first)
    (void)z;
  }
  auto first = dump->first_overflow();
  REQUIRE(first.has_value());
  CHECK(first->op_name == "log_0");
  CHECK(first->op_type == "log");
  CHECK(first->iteration == 7);
  CHECK(dump->overflows().size() == 2);
  auto it = dir / "rank_0" / "Net" / "0" / "7";
  CHECK(keys(it) == std::multiset<std::string>{"log.log_0.input.0", "log.log_0.output.0"});
  auto out = ms::load_npy<float>(find_file(it, "log.", ".output.0.npy")).to_vector();
  REQUIRE(out.size() == 3);
  CHECK(std::isinf(out[1]));
  std::ifstream in(it / "statistic.csv");
  std::string header, l1, l2;
  std::getline(in, header);
  std::getline(in, l1);
  std::getline(in, l2);
  auto r2 = split_csv(l2);
  REQUIRE(r2.size() == 14);
  CHECK(r2[5] == "output");
  CHECK(r2[13] == "1");
  fs::remove_all(dir);
}

TEST_CASE("dump: results are bit-identical with dump on and off", "[tools]") {
  auto dir = fresh_dir("bits");
  Tensor<float> a{{1.f, 2.f, 3.f}, {4.f, -5.f, 6.f}}, b{{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f, 0.6f}};
  auto compute = [&]() {
    auto c = ms::exp(a * b) + b;
    return (ms::sin(c) * a.transpose(0, 1).transpose(0, 1)).contiguous();
  };
  auto f = ms::jit([](const Tensor<float>& x, const Tensor<float>& y) { return ms::exp(x * y) + y; });
  Tensor<float> off = compute(), joff = f(a, b);
  auto dump = ms::DataDump::from_json(config(dir, R"("saved_data": "full")"));
  ms::Profiler prof;
  Tensor<float> on, jon;
  {
    ms::DumpScope d(*dump);
    ms::ProfilerScope p(prof);
    on = compute();
    jon = f(a, b);
  }
  CHECK(same_bits(on, off));
  CHECK(same_bits(jon, joff));
  CHECK(dump->files_written() > 0);
  fs::remove_all(dir);
}

TEST_CASE("dump: MS_DUMP_CONFIG names the config file", "[tools]") {
  auto dir = fresh_dir("env");
  fs::create_directories(dir);
  auto cfg = dir / "dump.json";
  {
    std::ofstream(cfg) << config(dir / "out", R"("dump_mode": 1, "kernels": ["exp"], "iteration": "0|5-8|100-120")");
  }
  ::unsetenv("MS_DUMP_CONFIG");
  CHECK(ms::DataDump::from_env() == nullptr);
  ::setenv("MS_DUMP_CONFIG", cfg.c_str(), 1);
  auto dump = ms::DataDump::from_env();
  ::unsetenv("MS_DUMP_CONFIG");
  REQUIRE(dump != nullptr);
  CHECK(dump->config().dump_mode == 1);
  CHECK(dump->config().net_name == "Net");
  CHECK(dump->config().ranges == std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {5, 8}, {100, 120}});
  CHECK(dump->config().iteration_selected(6));
  CHECK_FALSE(dump->config().iteration_selected(9));
  // the settings object on its own is accepted too
  auto flat = ms::DataDump::from_json(R"({"path": "/tmp/x", "dump_mode": 0})");
  CHECK(flat->config().path == fs::path("/tmp/x"));
  fs::remove_all(dir);
}

TEST_CASE("dump: bad configs give exact errors", "[tools]") {
  using ms::DataDump;
  using ms::ValueError;
  auto cfg = [](const std::string& extra) {
    return std::string(R"({"common_dump_settings": {"path": "/tmp/d")") + (extra.empty() ? "" : ", ") + extra + "}}";
  };
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("dump_mod": 0)")), ValueError,
                        "[ms.value_error] dump config: unknown key \"dump_mod\" (accepted: dump_mode, path, "
                        "net_name, iteration, input_output, kernels, saved_data, op_debug_mode, support_device, "
                        "file_format)");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("dump_mode": 2)")), ValueError,
                        "[ms.value_error] dump config: dump_mode must be 0 (all ops) or 1 (ops listed in "
                        "kernels), got 2");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("dump_mode": 1)")), ValueError,
                        "[ms.value_error] dump config: dump_mode 1 needs a non-empty kernels list");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(R"({"common_dump_settings": {"path": "rel/dir"}})"), ValueError,
                        "[ms.value_error] dump config: path must be an absolute directory path, got \"rel/dir\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(R"({"common_dump_settings": {"dump_mode": 0}})"), ValueError,
                        "[ms.value_error] dump config: missing required key \"path\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("iteration": "1-")")), ValueError,
                        "[ms.value_error] dump config: iteration must be \"all\" or ranges like "
                        "\"0|5-8|100-120\", got \"1-\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("iteration": "5-3")")), ValueError,
                        "[ms.value_error] dump config: iteration must be \"all\" or ranges like "
                        "\"0|5-8|100-120\", got \"5-3\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("input_output": 3)")), ValueError,
                        "[ms.value_error] dump config: input_output must be 0 (inputs and outputs), 1 (inputs) "
                        "or 2 (outputs), got 3");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("saved_data": "all")")), ValueError,
                        "[ms.value_error] dump config: saved_data must be \"tensor\", \"statistic\" or \"full\", "
                        "got \"all\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("op_debug_mode": 1)")), ValueError,
                        "[ms.value_error] dump config: op_debug_mode must be 0 (off), 3 or 4 (overflow "
                        "detection), got 1");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(cfg(R"("kernels": "add")")), ValueError,
                        "[ms.value_error] dump config: kernels must be a list of strings, got \"add\"");
  MS_REQUIRE_THROWS_MSG(DataDump::from_json(R"({"common_dump_settings": {"path": "/tmp/d"}, "extra": 1})"),
                        ValueError,
                        "[ms.value_error] dump config: unknown key \"extra\" (accepted at the top level: "
                        "common_dump_settings, e2e_dump_settings, async_dump_settings)");
  REQUIRE_THROWS_AS(DataDump::from_json(cfg(R"x("kernels": ["name-regex(()"])x")), ValueError);
  REQUIRE_THROWS_AS(DataDump::from_json("{not json"), ValueError);
}
