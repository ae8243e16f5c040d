// ms-onnx-test: the ONNX backend conformance suite on ms. Every folder under ROOT holding a
// model.onnx is one test: the model is imported (ms::onnx::load), compiled for the CPU, run on each
// test_data_set_*/input_*.pb and compared with output_*.pb (|got - want| <= atol + rtol * |want|,
// NaN equal to NaN; integers and bools exactly). One line per test:
//   PASS name
//   FAIL name what differs / the error
//   SKIP name op: reason          (an op, attribute or dtype that ms does not support)
// and at the end `onnx: N passed, N failed, N skipped of T`. Exit status 1 when a test failed.
//
//   ms-onnx-test [ROOT] [--filter SUBSTR] [--rtol R] [--atol A] [--no-fork] [--timeout S]
// ROOT defaults to Debian's libonnx-testdata (/usr/share/libonnx-testdata/data). Each test runs
// in a child process (unless --no-fork), so that a crash is a FAIL of that test, not the end.

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <ms/ms.hpp>
#include <ms/onnx.hpp>

#include "cli.hpp"

#ifndef MS_VERSION_STRING
#define MS_VERSION_STRING "unknown"
#endif

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultRoot = "/usr/share/libonnx-testdata/data";

struct Options {
  fs::path root = kDefaultRoot;
  std::string filter;
  double rtol = 1e-3, atol = 1e-7;
  bool fork = true;
  int timeout = 120;
};

enum class Status { pass, fail, skip };
struct Result {
  Status status;
  std::string detail;
};

/// Inputs (or outputs) of one data set, in file order: input_0.pb, input_1.pb, ...
std::vector<std::pair<std::string, ms::AnyTensor>> read_set(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<std::string, ms::AnyTensor>> v;
  for (int i = 0;; ++i) {
    fs::path p = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!fs::exists(p)) break;
    std::ifstream in(p, std::ios::binary);
    ms::onnx::pb::TensorProto tp;
    if (!tp.ParseFromIstream(&in)) ms::onnx::bad_model(p.string(), "is not a valid TensorProto");
    v.emplace_back(tp.name(), ms::onnx::to_tensor(tp, p.string(), dir));
  }
  return v;
}

/// Compares one output; returns an empty string when equal within tolerance.
std::string compare(const ms::AnyTensor& got, const ms::AnyTensor& want, const Options& o) {
  if (got.dtype() != want.dtype()) return fmt::format("dtype {} where {} is expected", got.dtype(), want.dtype());
  if (got.shape() != want.shape())
    return fmt::format("shape {} where {} is expected", ms::shape_str(got.shape()), ms::shape_str(want.shape()));
  const ms::AnyTensor g = ms::ops::detail::contiguous_raw(got), w = ms::ops::detail::contiguous_raw(want);
  std::string err;
  ms::visit_dtype(got.dtype(), [&]<class T>() {
    const T* a = static_cast<const T*>(g.raw_data());
    const T* b = static_cast<const T*>(w.raw_data());
    std::int64_t bad = 0, first = -1;
    double worst = 0;
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      bool ok;
      if constexpr (std::is_integral_v<T>) {
        ok = a[i] == b[i];
      } else {
        const double x = static_cast<double>(static_cast<float>(a[i])), y = static_cast<double>(static_cast<float>(b[i]));
        if constexpr (std::is_same_v<T, double>) (void)0;
        const double xd = std::is_same_v<T, double> ? static_cast<double>(a[i]) : x;
        const double yd = std::is_same_v<T, double> ? static_cast<double>(b[i]) : y;
        if (std::isnan(xd) || std::isnan(yd)) ok = std::isnan(xd) && std::isnan(yd);
        else if (std::isinf(yd) || std::isinf(xd)) ok = xd == yd;
        else {
          const double d = std::abs(xd - yd);
          ok = d <= o.atol + o.rtol * std::abs(yd);
          worst = std::max(worst, d);
        }
      }
      if (!ok) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    if (bad) {
      auto show = [](const T& v) {
        if constexpr (std::is_integral_v<T>) return fmt::format("{}", static_cast<std::int64_t>(v));
        else return fmt::format("{}", static_cast<double>(static_cast<float>(v)));
      };
      err = fmt::format("{} of {} elements differ (first at {}: {} where {} is expected; max abs diff {:.3g})", bad,
                        g.numel(), first, show(a[first]), show(b[first]), worst);
    }
  });
  return err;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

Result run_test(const fs::path& dir, const Options& o) {
  try {
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return {Status::skip, "no test data sets"};
    const ms::onnx::pb::ModelProto proto = ms::onnx::read_model(dir / "model.onnx");
    for (const auto* list : {&proto.graph().input(), &proto.graph().output()})
      for (const auto& vi : *list)
        if (!vi.type().has_tensor_type())
          return {Status::skip, fmt::format("graph I/O: '{}' is a sequence, map or optional (ms runs tensors)", vi.name())};
    for (const auto& set : sets) {
      auto inputs = read_set(set, "input");
      auto outputs = read_set(set, "output");
      // The data set's inputs go to the graph inputs that are not initializers, by name when
      // the file names one, else in order.
      std::set<std::string> inits;
      for (const auto& t : proto.graph().initializer()) inits.insert(t.name());
      std::vector<std::string> names;
      for (const auto& vi : proto.graph().input())
        if (!inits.count(vi.name())) names.push_back(vi.name());
      std::map<std::string, ms::AnyTensor> feed;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        std::string n = inputs[i].first;
        if (n.empty() || std::find(names.begin(), names.end(), n) == names.end()) {
          if (i >= names.size()) return {Status::fail, fmt::format("data set has more inputs than the model ({})", names.size())};
          n = names[i];
        }
        feed[n] = inputs[i].second;
      }
      ms::onnx::LoadOptions lo;
      for (const auto& [n, t] : feed) lo.input_shapes[n] = t.shape();
      ms::onnx::Model model;
      try {
        model = ms::onnx::load_model(proto, (dir / "model.onnx").string(), dir, lo);
      } catch (const ms::onnx::ConstantRequired&) {
        // A node reads an input at load time (a shape, a slice bound): fold the inputs.
        lo.input_values = feed;
        model = ms::onnx::load_model(proto, (dir / "model.onnx").string(), dir, lo);
      }
      std::vector<ms::AnyTensor> args;
      for (const auto& n : model.input_names) {
        auto it = feed.find(n);
        if (it == feed.end()) return {Status::fail, fmt::format("data set has no value for input '{}'", n)};
        args.push_back(it->second);
      }
      auto exe = ms::InferenceModel::from_graph(std::move(model.graph));
      std::vector<ms::AnyTensor> got = exe.run(std::span<const ms::AnyTensor>(args));
      if (got.size() < outputs.size())
        return {Status::fail, fmt::format("{} outputs where {} are expected", got.size(), outputs.size())};
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        std::string d = compare(got[i], outputs[i].second, o);
        if (!d.empty())
          return {Status::fail, fmt::format("{}: output {} ('{}'): {}", set.filename().string(), i,
                                            model.output_names[i], d)};
      }
    }
    return {Status::pass, ""};
  } catch (const ms::onnx::UnsupportedError& e) {
    return {Status::skip, fmt::format("{}: {}", e.op_type(), e.reason())};
  } catch (const ms::onnx::UnsupportedDType& e) {
    return {Status::skip, fmt::format("dtype: {}", e.message())};
  } catch (const std::exception& e) {
    return {Status::fail, e.what()};
  }
}

/// Runs one test in a child process: a crash or a hang is that test's FAIL.
Result run_isolated(const fs::path& dir, const Options& o) {
  int fds[2];
  if (pipe(fds) != 0) return run_test(dir, o);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return run_test(dir, o);
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(o.timeout));
    Result r = run_test(dir, o);
    std::string msg = std::to_string(static_cast<int>(r.status)) + one_line(r.detail);
    ssize_t off = 0;
    while (off < static_cast<ssize_t>(msg.size())) {
      ssize_t k = write(fds[1], msg.data() + off, msg.size() - static_cast<std::size_t>(off));
      if (k <= 0) break;
      off += k;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(k));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st))
    return {Status::fail, WTERMSIG(st) == SIGALRM ? fmt::format("timed out after {} s", o.timeout)
                                                   : fmt::format("crashed (signal {})", WTERMSIG(st))};
  if (msg.empty()) return {Status::fail, "the test process ended without a result"};
  return {static_cast<Status>(msg[0] - '0'), msg.substr(1)};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ms-onnx-test: runs every ONNX backend test (a folder holding model.onnx) under ROOT on ms", "ms-onnx-test"};
  app.set_version_flag("--version", "ms-onnx-test (ms " MS_VERSION_STRING ")");
  std::string root = o.root.string();
  app.add_option("ROOT", root, "the test data (default: Debian's libonnx-testdata, " + std::string(kDefaultRoot) + ")");
  app.add_option("--filter", o.filter, "runs only the tests whose name contains SUBSTR")->type_name("SUBSTR");
  app.add_option("--rtol", o.rtol, "relative tolerance")->type_name("R")->check(CLI::Range(0.0, 1e6));
  app.add_option("--atol", o.atol, "absolute tolerance")->type_name("A")->check(CLI::Range(0.0, 1e6));
  app.add_option("--timeout", o.timeout, "seconds a test may run")->type_name("S")->check(CLI::Range(1, 86400));
  bool no_fork = false;
  app.add_flag("--no-fork", no_fork, "runs the tests in this process (a crash ends the run)");
  try {
    if (auto done = ms_tools::parse_command_line(app, argc, argv)) return *done;
  } catch (const ms_tools::UsageError& e) {
    std::cerr << "ms-onnx-test: " << e.what() << " (see: ms-onnx-test --help)\n";
    return 2;
  }
  o.fork = !no_fork;
  o.root = root;
  if (!fs::is_directory(o.root)) {
    std::cerr << "ms-onnx-test: " << o.root << " is not a folder (install libonnx-testdata, or give ROOT)\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::recursive_directory_iterator(o.root))
    if (e.is_regular_file() && e.path().filename() == "model.onnx") tests.push_back(e.path().parent_path());
  std::sort(tests.begin(), tests.end());
  int pass = 0, fail = 0, skip = 0, total = 0;
  for (const auto& dir : tests) {
    const std::string name = fs::relative(dir, o.root).string();
    if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
    ++total;
    Result r = o.fork ? run_isolated(dir, o) : run_test(dir, o);
    const char* tag = r.status == Status::pass ? "PASS" : r.status == Status::fail ? "FAIL" : "SKIP";
    (r.status == Status::pass ? pass : r.status == Status::fail ? fail : skip)++;
    std::cout << tag << ' ' << name;
    if (!r.detail.empty()) std::cout << ' ' << one_line(r.detail);
    std::cout << '\n' << std::flush;
  }
  std::cout << fmt::format("onnx: {} passed, {} failed, {} skipped of {}\n", pass, fail, skip, total);
  return fail ? 1 : 0;
}
