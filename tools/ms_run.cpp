// ms-run: load a frozen model (ms::freeze) or an ONNX model, run it on inputs read from .npy
// files, and write its outputs as .npy files; optionally time repeated runs. Converts ONNX models
// to frozen ones and back.
//
//   ms-run MODEL [--backend cpu|ascend[:N]] [--out FILE.npy] [--repeat N] [--warmup W] [--info] INPUT.npy...
//   ms-run --convert MODEL.onnx OUT.msf     (and MODEL.msf OUT.onnx)
//   ms-run --backend ascend[:N] --selftest
//
// Exit status: 0 on success, 2 on a usage error or an ms::Error (its message is printed),
// 1 on anything else. Arguments are parsed with CLI11: typed options with ranges, errors
// that name the option, --help and --version.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli.hpp"
#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>  // registers "ascend" (AscendCL from $MS_ASCEND_LIBS)
#include <ms/backend/ascend/selftest.hpp>
#ifdef MS_HAVE_ONNX
#include <ms/onnx.hpp>
#endif

namespace {

#ifndef MS_VERSION_STRING
#define MS_VERSION_STRING "unknown"
#endif

constexpr std::string_view kDescription = R"(ms-run: runs a frozen model.
  ms-run MODEL [options] INPUT.npy...
      Loads MODEL (a file written by ms::freeze, or an ONNX model: a .onnx file), runs it once on the inputs (one .npy
      file per model input, in order; NAME=FILE.npy gives an input by name) and prints
      each output's dtype, shape and values.
  ms-run --convert MODEL.onnx OUT.msf
      Imports an ONNX model and freezes it into ms's own format (symbolic dimensions as --dim
      gives them). MODEL.msf OUT.onnx writes a frozen model as ONNX (checked by ONNX's checker).
  ms-run --backend ascend[:N] --selftest
      Runs every op the Ascend adapter maps (aclnn and AI CPU) once on the device, compares
      it with the CPU and prints a table: op, inputs, engine, kernels, error, time, status
      (exit status 1 when an op failed or differs).
Exit status: 0 on success, 2 on a usage error or an ms error (the message is printed).)";

using ms_tools::UsageError;

std::string meta_str(const ms::ops::TensorMeta& m) { return fmt::format("{} {}", m.dtype, ms::shape_str(m.shape)); }

/// The p-th percentile (0..100) of sorted values, by linear interpolation (NumPy's default).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

int run(int argc, char** argv) {
  ms::InferenceOptions opt;
  std::string model_path, out_path;
  std::vector<std::string> inputs;
  long repeat = 0, warmup = -1;
  int threads = 0;
  bool info = false, selftest = false, convert = false;
  std::vector<std::string> dim_args;
  std::map<std::string, std::int64_t> dims;
  CLI::App app{std::string(kDescription), "ms-run"};
  app.set_version_flag("--version", "ms-run (ms " MS_VERSION_STRING ")");
  app.add_option("MODEL", model_path, "a model file written by ms::freeze");
  app.add_option("INPUT", inputs, "one .npy file per model input, in order, or NAME=FILE.npy");
  app.add_option("--backend", opt.backend,
                 fmt::format("the backend to run on: cpu (default), or a device such as ascend or ascend:1 (loads "
                             "AscendCL from $MS_ASCEND_LIBS; ops without a device kernel run on the host CPU with "
                             "copies). This build: {}",
                             fmt::join(ms::inference_backends(), ", ")))
      ->type_name("NAME");
  app.add_option("-o,--out", out_path, "writes the output there (several outputs: FILE_0.npy, FILE_1.npy, ...)")
      ->type_name("FILE.npy");
  app.add_option("--repeat", repeat, "then runs N more times and prints latency percentiles (ms)")
      ->type_name("N")
      ->check(CLI::Range(1L, 1000000000L));
  app.add_option("--warmup", warmup, "untimed runs before the timed ones (default 3 with --repeat)")
      ->type_name("W")
      ->check(CLI::Range(0L, 1000000000L));
  app.add_option("--threads", threads, "intra-op threads")->type_name("T")->check(CLI::Range(1, 4096));
  app.add_flag("--info", info, "prints the model's inputs, outputs, metadata and compiled graph, and exits");
  app.add_option("--dim", dim_args, "an ONNX model's symbolic dimension NAME is N (default 1); repeat for each")
      ->type_name("NAME=N");
  app.add_flag("--convert", convert, "converts MODEL (first argument) to OUT (second): .onnx to a frozen model or back");
  app.add_flag("--selftest", selftest, "with --backend ascend[:N]: checks every op the Ascend adapter maps");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help") {  // `ms-run help`, as the other tools take it
    std::cout << app.help();
    return args.empty() ? 2 : 0;
  }
  if (auto done = ms_tools::parse_command_line(app, argc, argv)) return *done;
  if (selftest) {
    const ms::Device dev = ms::Device::parse(app.count("--backend") ? opt.backend : std::string("ascend"));
    if (dev.type != ms::DeviceType::ascend) throw UsageError("--selftest needs --backend ascend[:N]");
    auto& be = ms::backend::ascend::ascend_backend(dev.index);
    be.warn_on_fallback = false;
    const auto rows = ms::backend::ascend::selftest(be);
    std::cout << ms::backend::ascend::selftest_table(be, rows);
    const auto bad = std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.status != "ok"; });
    const auto host = std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.engine == "host"; });
    std::cout << fmt::format("{} ops: {} ok, {} failed or differ, {} on the host\n", rows.size(),
                             static_cast<long>(rows.size()) - bad, bad, host);
    return bad == 0 ? 0 : 1;
  }
  if (model_path.empty()) throw UsageError("no MODEL given");
  if (threads > 0) ms::set_num_threads(threads);
  for (const std::string& v : dim_args) {
    const auto eq = v.find('=');
    char* end = nullptr;
    const long long n = eq == std::string::npos ? 0 : std::strtoll(v.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || end == nullptr || *end != '\0' || n < 1)
      throw UsageError(fmt::format("--dim: '{}' is not NAME=N with N >= 1", v));
    dims[v.substr(0, eq)] = n;
  }
  const std::string convert_to = convert ? "?" : "";
  auto is_onnx = [](const std::string& p) { return std::filesystem::path(p).extension() == ".onnx"; };
#ifdef MS_HAVE_ONNX
  auto import_onnx = [&] {
    ms::onnx::LoadOptions lo;
    lo.dims = dims;
    return ms::onnx::load(model_path, lo);
  };
#endif
  if (!convert_to.empty()) {
    if (inputs.size() != 1) throw UsageError("--convert takes MODEL and OUT");
    const std::string& out = inputs[0];
#ifdef MS_HAVE_ONNX
    if (is_onnx(model_path) && !is_onnx(out)) {
      ms::onnx::Model m = import_onnx();
      const std::size_t nodes = m.graph.num_nodes();
      ms::FreezeOptions fo;
      fo.metadata["source"] = std::filesystem::path(model_path).filename().string();
      fo.metadata["onnx.opset"] = std::to_string(m.opset);
      if (!m.producer.empty()) fo.metadata["onnx.producer"] = m.producer;
      ms::freeze(m.graph, out, fo);
      fmt::print("wrote {} ({} nodes, opset {})\n", out, nodes, m.opset);
      return 0;
    }
    if (!is_onnx(model_path) && is_onnx(out)) {
      ms::onnx::save_frozen_as_onnx(model_path, out);
      fmt::print("wrote {}\n", out);
      return 0;
    }
    throw UsageError("--convert converts MODEL.onnx to a frozen model, or a frozen model to OUT.onnx");
#else
    throw UsageError("this ms-run was built without ONNX support (the ms::onnx target: libonnx-dev, libprotobuf-dev)");
#endif
  }

  const auto load_start = std::chrono::steady_clock::now();
  ms::InferenceModel model = [&] {
    if (!is_onnx(model_path)) return ms::InferenceModel::load(model_path, opt);
#ifdef MS_HAVE_ONNX
    return ms::InferenceModel::from_graph(import_onnx().graph, opt);
#else
    throw UsageError("this ms-run was built without ONNX support (the ms::onnx target: libonnx-dev, libprotobuf-dev)");
#endif
  }();
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const auto& in_metas = model.input_metas();
  if (info) {
    fmt::print("model {} (loaded and compiled for {} in {:.2f} ms)\n", model_path, model.backend_name(),
               is_onnx(model_path) ? load_ms : model.load_seconds() * 1e3);
    for (std::size_t i = 0; i < in_metas.size(); ++i)
      fmt::print("input {} \"{}\": {}\n", i, model.input_names()[i], meta_str(in_metas[i]));
    for (std::size_t i = 0; i < model.output_metas().size(); ++i)
      fmt::print("output {}: {}\n", i, meta_str(model.output_metas()[i]));
    for (auto& [k, v] : model.metadata())
      if (k != "ms.graph") fmt::print("metadata {} = {}\n", k, v);
    if (model.on_device())
      fmt::print("compiled graph ({} device streams, {} host nodes):\n{}", model.device_executable().num_streams(),
                 model.device_executable().num_host_nodes(), model.compiled_str());
    else
      fmt::print("compiled graph ({} steps, arena {} bytes):\n{}", model.executable().num_steps(),
                 model.executable().arena_bytes(), model.compiled_str());
    return 0;
  }

  // Inputs: positional, or NAME=FILE.npy.
  std::vector<ms::AnyTensor> feed(in_metas.size());
  std::size_t next = 0;
  for (const std::string& spec : inputs) {
    std::size_t slot = next;
    std::string file = spec;
    auto eq = spec.find('=');
    if (eq != std::string::npos && !std::filesystem::exists(spec)) {
      const std::string name = spec.substr(0, eq);
      file = spec.substr(eq + 1);
      auto it = std::find(model.input_names().begin(), model.input_names().end(), name);
      if (it == model.input_names().end())
        throw UsageError(fmt::format("the model has no input named '{}' (inputs: {})", name,
                                     fmt::join(model.input_names(), ", ")));
      slot = static_cast<std::size_t>(it - model.input_names().begin());
    } else {
      while (slot < feed.size() && feed[slot].defined()) ++slot;
      next = slot + 1;
    }
    if (slot >= feed.size())
      throw UsageError(fmt::format("too many inputs: the model takes {}", in_metas.size()));
    if (feed[slot].defined()) throw UsageError(fmt::format("input {} is given twice", slot));
    feed[slot] = ms::load_npy(file);
    const auto& m = in_metas[slot];
    if (feed[slot].dtype() != m.dtype || !(feed[slot].shape() == m.shape))
      throw UsageError(fmt::format("input {} \"{}\" must be {}, but {} holds {} {}", slot, model.input_names()[slot],
                                   meta_str(m), file, feed[slot].dtype(), ms::shape_str(feed[slot].shape())));
  }
  for (std::size_t i = 0; i < feed.size(); ++i)
    if (!feed[i].defined())
      throw UsageError(fmt::format("input {} \"{}\" ({}) is missing", i, model.input_names()[i], meta_str(in_metas[i])));

  std::vector<ms::AnyTensor> outs = model.run(feed);
  for (std::size_t i = 0; i < outs.size(); ++i) fmt::print("output {}: {}\n", i, outs[i]);
  if (!out_path.empty()) {
    for (std::size_t i = 0; i < outs.size(); ++i) {
      std::filesystem::path p = out_path;
      if (outs.size() > 1) p = p.parent_path() / fmt::format("{}_{}{}", p.stem().string(), i, p.extension().string());
      ms::save_npy(p, outs[i]);
      fmt::print("wrote {}\n", p.string());
    }
  }
  if (repeat > 0) {
    if (warmup < 0) warmup = 3;
    for (long i = 0; i < warmup; ++i) model.run(feed);
    std::vector<double> ms_times;
    ms_times.reserve(static_cast<std::size_t>(repeat));
    for (long i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = model.run(feed);
      auto t1 = std::chrono::steady_clock::now();
      ms_times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms_times.begin(), ms_times.end());
    double mean = 0;
    for (double t : ms_times) mean += t;
    mean /= static_cast<double>(ms_times.size());
    fmt::print("latency over {} runs ({} warmup, {} threads, backend {}): min {:.4f} ms, p50 {:.4f} ms, p90 {:.4f} ms, "
               "p99 {:.4f} ms, max {:.4f} ms, mean {:.4f} ms\n",
               repeat, warmup, ms::get_num_threads(), model.backend_name(), ms_times.front(),
               percentile(ms_times, 50), percentile(ms_times, 90), percentile(ms_times, 99), ms_times.back(), mean);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ms-run: %s (run `ms-run help` for usage)\n", e.what());
    return 2;
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "ms-run: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ms-run: unexpected error: %s\n", e.what());
    return 1;
  }
}
