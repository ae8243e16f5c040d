#pragma once
// CPU code generation for fused elementwise programs (CompileOptions::codegen, or the
// environment variable MS_CPU_CODEGEN=1).
//
// The block interpreter of graph/fusion.hpp runs a fused program as a few passes of
// precompiled kernels over blocks kept in L1. Generated code runs it as one loop: each
// batch of elements goes through every member op in registers, the way a hand-written
// xsimd loop or an Eigen expression would. At compile(), the fused programs of the graph
// are written out as C++ that calls the ops' own functors (ElementwiseInfo::formula),
// compiled by the system compiler into one shared object per graph, loaded with dlopen,
// and installed in the fused nodes (FusedProgram::compiled).
//
// * Results: each op's result is rounded as the eager op rounds it (no contraction across
//   ops, the tail on padded copies through the same batch formula), so replays equal the
//   eager and interpreted results bit for bit, given the same compiler and flags; only a
//   NaN made from two NaN operands may carry the other one's sign and payload (the
//   compiler may swap the operands of a + b). The generated unit gets this unit's SIMD
//   flags (from its predefined macros), -O3 (at -O2, GCC calls Eigen's tanh out of line),
//   and -ffp-contract=off in ISO mode (-std=c++20, as this project's own programs build)
//   or =fast in GNU mode, as the compiler does by default in each.
// * Cache: objects are kept under MS_CODEGEN_CACHE (default $XDG_CACHE_HOME/ms-kernels,
//   else ~/.cache/ms-kernels), named by a hash of the source, compiler and flags, and
//   written atomically (temporary file, then rename): a second compile of the same graph,
//   in this process or another, loads the object without compiling. The hash also covers
//   the ms headers' contents, the xsimd and Eigen versions and the compiler's version, so an
//   upgrade never loads a stale object. The .cpp is kept next to it for reading.
// * Compiler: MS_CODEGEN_CXX (default g++, or clang++ when this unit is compiled by clang),
//   with MS_CODEGEN_FLAGS appended (e.g. -I for an Eigen outside /usr/include/eigen3);
//   MS_CODEGEN_INCLUDE overrides where the ms headers are (by default next to this file).
//   A failing compile throws BackendError with the command and the compiler's messages.
// * Covered: programs whose members are registered unary/binary arithmetic ops (not
//   comparisons, not custom ops) on one float dtype, in every form (plain, GEMM epilogue,
//   reduction). Other fused nodes keep the interpreter.

#include "../../core/linkage.hpp"
#include "../../graph/graph.hpp"

#if MS_IMPL_BODIES
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "../../core/atomic_file.hpp"
#include "../../core/cpu_isa.hpp"
#include "../../core/simd.hpp"
#include "../../graph/fusion.hpp"
#endif

namespace ms::backend {

/// Process-wide counts of the code generator's work (for tests and tools).
struct CodegenStats {
  int compiles = 0;     ///< shared objects built by the compiler
  int cache_loads = 0;  ///< shared objects found in the cache and loaded without compiling
};

/// Counts of compiled and cache-loaded objects since the process started.
MS_IMPL CodegenStats codegen_stats();
/// Generates, compiles and installs kernels for the fused nodes of g that generated code
/// covers (see the top of this file); returns how many nodes got one.
MS_IMPL int generate_fused_kernels(graph::Graph& g);

#if MS_IMPL_BODIES  // compiled once, with the kernels' flags: core/linkage.hpp
namespace codegen {

inline std::atomic<int>& compile_count() {
  static std::atomic<int> n{0};
  return n;
}
inline std::atomic<int>& load_count() {
  static std::atomic<int> n{0};
  return n;
}

/// A C++ literal with the exact value of d.
inline std::string literal(double d) {
  if (std::isnan(d)) return std::signbit(d) ? "(-__builtin_nan(\"\"))" : "__builtin_nan(\"\")";
  if (std::isinf(d)) return d < 0 ? "(-__builtin_inf())" : "__builtin_inf()";
  return MS_FORMAT("{:a}", d);
}

/// Whether generated code can evaluate `p`, whose external inputs have metas `ext`.
inline bool supported(const graph::FusedProgram& p, std::span<const ops::TensorMeta> ext) {
  const DType t = p.out_meta.dtype;
  if ((t != DType::f32 && t != DType::f64) || p.source.empty() || ext.size() > 64) return false;
  for (const ops::TensorMeta& m : ext)
    if (m.dtype != t) return false;
  for (const auto& si : p.source) {
    const ops::OpDef& op = *si.op;
    if (op.elementwise.formula.empty() || (op.category != ops::Category::unary && op.category != ops::Category::binary) ||
        si.nin != op.num_inputs)
      return false;
  }
  return true;
}

/// The source of kernel `name` for program p (external input k is a broadcast scalar when
/// bit k of `scalars` is set): a functor applying the members in order, and the loop.
inline std::string kernel_source(const graph::FusedProgram& p, std::size_t next, std::uint64_t scalars,
                                 const std::string& name) {
  const char* T = p.out_meta.dtype == DType::f32 ? "float" : "double";
  std::string s = MS_FORMAT("// {}: fused[{}] ({})\nnamespace {{\nstruct {}_f {{\n", name, ::ms::detail::join_text(p.members, "+"), T,
                              name);
  for (std::size_t k = 0; k < p.source.size(); ++k) {
    const auto& si = p.source[k];
    std::vector<std::string> ps;
    for (int j = 0; j < ops::kMaxElementwiseParams; ++j) ps.push_back(literal(si.params[j]));
    s += MS_FORMAT("  static constexpr double p{}[] = {{{}}};\n  const {} f{}{{p{}}};\n", k, ::ms::detail::join_text(ps, ", "),
                     si.op->elementwise.formula, k, k);
  }
  std::vector<std::string> args;
  for (std::size_t e = 0; e < next; ++e) args.push_back(MS_FORMAT("V x{}", e));
  s += MS_FORMAT("  template <class V>\n  V operator()({}) const {{\n", ::ms::detail::join_text(args, ", "));
  std::vector<std::string> temp;  // temp index -> the value it holds now
  std::string result;
  for (std::size_t k = 0; k < p.source.size(); ++k) {
    const auto& si = p.source[k];
    std::vector<std::string> a;
    for (int j = 0; j < si.nin; ++j)
      a.push_back(si.src[j] < 0 ? MS_FORMAT("x{}", -si.src[j] - 1) : temp.at(static_cast<std::size_t>(si.src[j])));
    s += MS_FORMAT("    V v{} = f{}({});\n    ms::simd::no_contract(v{});\n", k, k, ::ms::detail::join_text(a, ", "), k);
    const std::string v = MS_FORMAT("v{}", k);
    if (si.dst < 0) result = v;
    else {
      if (temp.size() <= static_cast<std::size_t>(si.dst)) temp.resize(static_cast<std::size_t>(si.dst) + 1);
      temp[static_cast<std::size_t>(si.dst)] = v;
    }
  }
  s += MS_FORMAT("    return {};\n  }}\n}};\n}}  // namespace\n\n", result.empty() ? "x0" : result);
  // The loop: scalars broadcast once, others loaded per batch; the tail on padded copies.
  s += fmt::format(
      "extern \"C\" void {}(const void* const* in, const std::int64_t*, void* outp, std::int64_t n, const double*) {{\n"
      "  using T = {};\n  using B = xsimd::batch<T>;\n  constexpr std::int64_t W = B::size;\n  const {}_f f;\n"
      "  T* out = static_cast<T*>(outp);\n",
      name, T, name);
  std::vector<std::string> main_args, tail_args;
  for (std::size_t e = 0; e < next; ++e) {
    s += MS_FORMAT("  const T* p{} = static_cast<const T*>(in[{}]);\n", e, e);
    if (scalars >> e & 1) {
      s += MS_FORMAT("  const B s{}(p{}[0]);\n", e, e);
      main_args.push_back(MS_FORMAT("s{}", e));
      tail_args.push_back(MS_FORMAT("s{}", e));
    } else {
      main_args.push_back(MS_FORMAT("B::load_unaligned(p{} + i)", e));
      tail_args.push_back(MS_FORMAT("B::load_aligned(t{})", e));
    }
  }
  s += MS_FORMAT("  std::int64_t i = 0;\n  for (; i + W <= n; i += W) f({}).store_unaligned(out + i);\n",
                   ::ms::detail::join_text(main_args, ", "));
  s += "  if (i < n) {\n    const std::int64_t r = n - i;\n    alignas(64) T to[W];\n";
  for (std::size_t e = 0; e < next; ++e)
    if (!(scalars >> e & 1)) s += MS_FORMAT("    alignas(64) T t{}[W];\n", e);
  s += "    for (std::int64_t j = 0; j < W; ++j) {\n      const std::int64_t k = i + (j < r ? j : r - 1);\n";
  for (std::size_t e = 0; e < next; ++e)
    if (!(scalars >> e & 1)) s += MS_FORMAT("      t{}[j] = p{}[k];\n", e, e);
  s += MS_FORMAT("    }}\n    f({}).store_aligned(to);\n    for (std::int64_t j = 0; j < r; ++j) out[i + j] = to[j];\n  }}\n}}\n\n",
                   ::ms::detail::join_text(tail_args, ", "));
  return s;
}

/// The compiler command line, without input and output files.
struct Toolchain {
  std::string cxx;
  std::string flags;
  std::filesystem::path include;  ///< the directory holding ms/
  std::filesystem::path cache;
};

inline std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline Toolchain toolchain() {
  Toolchain t;
#if defined(__clang__)
  t.cxx = env_or("MS_CODEGEN_CXX", "clang++");
#else
  t.cxx = env_or("MS_CODEGEN_CXX", "g++");
#endif
  namespace fs = std::filesystem;
  // This header is <include>/ms/backend/cpu/codegen.hpp (unless MS_CODEGEN_INCLUDE says
  // where the ms headers are: a program built with a relative -I and run elsewhere).
  const fs::path include = t.include =
      env_or("MS_CODEGEN_INCLUDE", fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path().string());
  MS_CHECK(fs::exists(include / "ms" / "ops" / "binary.hpp"), IOError,
           "cpu codegen: the ms headers are not under {}; set MS_CODEGEN_INCLUDE to the directory that holds ms/",
           include.string());
  std::string f;
#if defined(__STRICT_ANSI__)
  f += "-std=c++20 -ffp-contract=off";
#else
  f += "-std=gnu++20 -ffp-contract=fast";
#endif
  // MS_NO_CONFIG_CHECK: the generated unit uses only formulas, never the kernels, so the
  // configuration checks of core/config_check.hpp do not apply to it.
  f += " -O3 -fPIC -shared -w -DMS_SEPARATE_KERNELS -DMS_KERNEL_BODIES=1 -DMS_NO_CONFIG_CHECK";
  // The generated code must pick the same xsimd architecture and the same instructions
  // (FMA inside the math functions) as the interpreter's kernels: those of the CPU level in
  // force (<ms/core/cpu_isa.hpp>), or, for the baseline, the features this unit was
  // compiled with. A level's units are compiled with -ffp-contract=off
  // (cmake/msKernels.cmake), whatever the language mode.
  if (const cpu::Isa level = cpu::isa(); level != cpu::Isa::baseline) {
    f += MS_FORMAT(" -march=x86-64-v{} -mtune=generic -ffp-contract=off", static_cast<int>(level) + 1);
  } else {
#if defined(__SSE4_2__)
    f += " -msse4.2";
#endif
#if defined(__AVX__)
    f += " -mavx";
#endif
#if defined(__AVX2__)
    f += " -mavx2";
#endif
#if defined(__FMA__)
    f += " -mfma";
#endif
#if defined(__F16C__)
    f += " -mf16c";
#endif
#if defined(__AVX512F__)
    f += " -mavx512f";
#endif
#if defined(__AVX512CD__)
    f += " -mavx512cd";
#endif
#if defined(__AVX512DQ__)
    f += " -mavx512dq";
#endif
#if defined(__AVX512BW__)
    f += " -mavx512bw";
#endif
#if defined(__AVX512VL__)
    f += " -mavx512vl";
#endif
  }
  f += MS_FORMAT(" -I'{}' -I/usr/include/eigen3", include.string());
  const std::string extra = env_or("MS_CODEGEN_FLAGS", "");
  if (!extra.empty()) f += " " + extra;
  t.flags = std::move(f);
  std::string cache = env_or("MS_CODEGEN_CACHE", "");
  if (cache.empty()) {
    const std::string xdg = env_or("XDG_CACHE_HOME", ""), home = env_or("HOME", "");
    if (!xdg.empty()) cache = xdg + "/ms-kernels";
    else if (!home.empty()) cache = home + "/.cache/ms-kernels";
    else cache = (fs::temp_directory_path() / MS_FORMAT("ms-kernels-{}", ::getuid())).string();
  }
  t.cache = cache;
  return t;
}

inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

/// What else the generated code depends on, for the cache key: the contents of every ms
/// header (the ops' formulas live there), the xsimd and Eigen versions, and the version the
/// compiler reports. Computed once per process, header directory and compiler.
inline std::string fingerprint(const Toolchain& tc) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::string> known;
  const std::string id = tc.include.string() + "\n" + tc.cxx;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(id); it != known.end()) return it->second;
  namespace fs = std::filesystem;
  const fs::path ms_dir = tc.include / "ms";
  std::vector<fs::path> headers;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(ms_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) headers.push_back(it->path());
  std::sort(headers.begin(), headers.end());
  std::uint64_t h = fnv1a(MS_FORMAT("xsimd {}.{}.{} eigen {}.{}.{}", XSIMD_VERSION_MAJOR, XSIMD_VERSION_MINOR,
                                      XSIMD_VERSION_PATCH, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION));
  for (const fs::path& p : headers) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    h = fnv1a(p.lexically_relative(ms_dir).string() + "\n" + text.str(), h);
  }
  std::string version;
  if (FILE* pipe = ::popen((tc.cxx + " -dumpfullversion -dumpversion 2>/dev/null").c_str(), "r")) {
    char buf[128];
    while (std::fgets(buf, sizeof buf, pipe)) version += buf;
    ::pclose(pipe);
  }
  return known[id] = MS_FORMAT("{:016x} {}", h, version);
}

/// The shared object built from `source`: loaded from the cache or compiled into it. The
/// handle stays open for the life of the process (kernels of it may be held anywhere).
inline void* load_or_compile(const std::string& source) {
  namespace fs = std::filesystem;
  static std::mutex mu;
  static std::unordered_map<std::uint64_t, void*> loaded;
  const Toolchain tc = toolchain();
  const std::uint64_t key = fnv1a(source, fnv1a(tc.cxx + "\n" + tc.flags + "\n" + fingerprint(tc) + "\n"));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  std::error_code ec;
  fs::create_directories(tc.cache, ec);
  MS_CHECK(fs::is_directory(tc.cache), IOError, "cpu codegen: cannot create the kernel cache {} ({})",
           tc.cache.string(), ec.message());
  const fs::path base = tc.cache / MS_FORMAT("ms_{:016x}", key);
  const fs::path so = base.string() + ".so", cpp = base.string() + ".cpp";
  for (const fs::path& p : {so, cpp, tc.cache})
    MS_CHECK(p.string().find('\'') == std::string::npos, ValueError,
             "cpu codegen: the path {} contains a quote; set MS_CODEGEN_CACHE to another directory", p.string());
  void* h = nullptr;
  if (fs::exists(so)) {
    h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) load_count()++;
  }
  if (!h) {
    write_file_atomically(cpp, source, "cpu codegen");
    const std::string tmp = so.string() + MS_FORMAT(".{}.tmp", ::getpid());
    const std::string log = base.string() + MS_FORMAT(".{}.log", ::getpid());
    const std::string cmd = MS_FORMAT("{} {} -o '{}' '{}' > '{}' 2>&1", tc.cxx, tc.flags, tmp, cpp.string(), log);
    const int status = std::system(cmd.c_str());
    const int rc = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::string messages;
    {
      std::ifstream f(log);
      std::string line;
      for (int k = 0; k < 30 && std::getline(f, line); ++k) messages += line + "\n";
    }
    fs::remove(log, ec);
    if (rc != 0) {
      fs::remove(tmp, ec);
      MS_THROW(BackendError,
               "cpu codegen: compiling the fused kernels failed (exit status {}).\n  command: {}\n{}"
               "Set MS_CODEGEN_CXX / MS_CODEGEN_FLAGS, or compile without CompileOptions::codegen "
               "(MS_CPU_CODEGEN=0) to use the block interpreter.",
               rc, cmd, messages);
    }
    fs::rename(tmp, so, ec);
    if (ec) {
      fs::remove(tmp, ec);
      MS_THROW(IOError, "cpu codegen: cannot move the compiled object into place as {}", so.string());
    }
    compile_count()++;
    h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    MS_CHECK(h, BackendError, "cpu codegen: cannot load {}: {}", so.string(), ::dlerror());
  }
  loaded.emplace(key, h);
  return h;
}

}  // namespace codegen

MS_IMPL CodegenStats codegen_stats() { return {codegen::compile_count().load(), codegen::load_count().load()}; }


MS_IMPL int generate_fused_kernels(graph::Graph& g) {
  struct Job {
    std::size_t node;
    std::uint64_t scalars;
    std::string name;
  };
  std::vector<Job> jobs;
  std::string source =
      "// Fused kernels generated by ms (backend/cpu/codegen.hpp) for one compiled graph.\n"
      "#include <cstdint>\n#include <ms/ops/binary.hpp>\n\n";
  auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const graph::Node& n = nodes[i];
    if (n.dead || !n.fused) continue;
    const graph::FusedProgram& p = *n.fused;
    // The program's external inputs: the node's (after a GEMM producer's own, whose
    // result is input 0).
    std::vector<ops::TensorMeta> ext;
    if (p.producer) ext.push_back(g.value(n.outputs[0]).meta);
    for (std::size_t k = p.producer ? static_cast<std::size_t>(p.producer_inputs) : 0; k < n.inputs.size(); ++k)
      ext.push_back(g.value(n.inputs[k]).meta);
    if (!codegen::supported(p, ext)) continue;
    std::uint64_t scalars = 0;
    for (std::size_t k = 0; k < ext.size(); ++k)
      if (numel(ext[k].shape) == 1) scalars |= std::uint64_t{1} << k;
    Job j{i, scalars, MS_FORMAT("ms_fused_{}", jobs.size())};
    source += codegen::kernel_source(p, ext.size(), scalars, j.name);
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return 0;
  void* h = codegen::load_or_compile(source);
  for (const Job& j : jobs) {
    auto fn = reinterpret_cast<ops::BlockFn>(::dlsym(h, j.name.c_str()));
    MS_CHECK(fn, BackendError, "cpu codegen: the compiled object has no symbol {}", j.name);
    auto p = std::make_shared<graph::FusedProgram>(*nodes[j.node].fused);
    p->compiled = fn;
    p->compiled_scalars = j.scalars;
    nodes[j.node].fused = std::move(p);
  }
  return static_cast<int>(jobs.size());
}

#endif  // MS_IMPL_BODIES

}  // namespace ms::backend
