#pragma once
// Binding elementwise ops to the kernels of one CPU level (see <ms/core/cpu_isa.hpp>).
//
// Every elementwise op is registered once, by the program's own units, with the kernels
// compiled under the program's flags (the baseline). The units of the other levels hold
// constant rows of kernel tables (IsaKernelRow) in the ELF section `ms_isa_rows`; the
// linker gathers them and names the section's bounds. add_elementwise_op binds each op to
// the row of the selected level as it is registered (the rows are data, so it does not
// matter which unit the linker initializes first), and cpu::set_isa rebinds every op.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/cpu_isa.hpp"
#include "registry.hpp"

namespace ms::cpu {

/// The levels whose elementwise kernels this program contains, lowest first (baseline always).
MS_IMPL std::vector<Isa> compiled_isas();
/// The best compiled level that is not above `want`.
MS_IMPL Isa best_compiled_isa(Isa want);
/// The level whose elementwise kernels run.
MS_IMPL Isa isa();
/// The copy of kernel `name` (an MS_ISA_FUNCTION of the level units) for the level in force,
/// or `base`, the program's own copy, when that level is the baseline or has no such row.
/// Look it up once per op call, outside the parallel part.
MS_IMPL ops::IsaFn isa_function(std::string_view name, ops::IsaFn base);
/// isa_function for a kernel compiled for float and double: row f32 or f64 by T.
template <class T>
ops::IsaFn isa_function_for(std::string_view f32, std::string_view f64, ops::IsaFn base) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return isa_function(std::is_same_v<T, float> ? f32 : f64, base);
}
/// "avx512 (x86-64-v4 (AVX-512 F/BW/DQ/VL)); compiled: baseline sse4 avx2 avx512; CPU: avx512".
MS_IMPL std::string isa_summary();
/// Binds every elementwise op to the kernels of `level` (for tests and benchmarks that
/// compare levels in one process; MS_CPU_ISA does the same at start-up). Call it while no
/// op runs: executables compiled before keep the kernels they were compiled with.
/// ValueError when the CPU cannot run the level or the program does not contain it.
MS_IMPL void set_isa(Isa level);

}  // namespace ms::cpu

namespace ms::ops {
/// Registers an elementwise op (made by make_elementwise_op) and binds it to the kernels of
/// the level in force.
MS_IMPL const OpDef& add_elementwise_op(OpDef d);

namespace detail {
/// The baseline kernel tables of every op bound by add_elementwise_op, by op name.
MS_IMPL std::map<std::string, IsaKernelRow, std::less<>> isa_base_tables();
/// The row of `level` for op `name` among the level units linked in, or null.
MS_IMPL const IsaKernelRow* find_isa_row(cpu::Isa level, std::string_view name);
}  // namespace detail
}  // namespace ms::ops

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
// The bounds of the section the linker makes from the levels' rows; null when the program
// holds no level unit (a header-only build).
extern "C" {
[[gnu::weak]] extern const ms::ops::IsaKernelRow __start_ms_isa_rows[];
[[gnu::weak]] extern const ms::ops::IsaKernelRow __stop_ms_isa_rows[];
[[gnu::weak]] extern const ms::ops::IsaFnRow __start_ms_isa_fns[];
[[gnu::weak]] extern const ms::ops::IsaFnRow __stop_ms_isa_fns[];
}

namespace ms::ops {

namespace detail {

/// Every level row linked into the program.
inline std::span<const IsaKernelRow> isa_rows() {
  if (__start_ms_isa_rows == nullptr || __stop_ms_isa_rows == nullptr) return {};
  return {__start_ms_isa_rows, static_cast<std::size_t>(__stop_ms_isa_rows - __start_ms_isa_rows)};
}

MS_IMPL const IsaKernelRow* find_isa_row(cpu::Isa level, std::string_view name) {
  for (const IsaKernelRow& r : isa_rows())
    if (r.level == static_cast<int>(level) && r.name != nullptr && name == r.name) return &r;
  return nullptr;
}

struct IsaBinding {
  std::mutex mu;
  /// The baseline tables of every op registered through add_elementwise_op, by name: a
  /// level's rows name their op (they are constants of other units, made before any op is).
  std::map<std::string, IsaKernelRow, std::less<>> base;
  cpu::Isa level = cpu::Isa::baseline;
  bool chosen = false;
};
inline IsaBinding& isa_binding() {
  static auto* b = new IsaBinding();
  return *b;
}
MS_IMPL std::map<std::string, IsaKernelRow, std::less<>> isa_base_tables() {
  auto& b = isa_binding();
  std::lock_guard lk(b.mu);
  return b.base;
}

inline IsaKernelRow tables_of(const OpDef& d) {
  IsaKernelRow r;
  std::copy(std::begin(d.elementwise.block), std::end(d.elementwise.block), r.block);
  for (int t = 0; t < kNumDTypes; ++t)
    std::copy(std::begin(d.elementwise.affine[t]), std::end(d.elementwise.affine[t]), r.affine[t]);
  return r;
}

}  // namespace detail

}  // namespace ms::ops

namespace ms::cpu {

MS_IMPL std::vector<Isa> compiled_isas() {
  std::vector<Isa> out{Isa::baseline};
  for (const ops::IsaKernelRow& r : ops::detail::isa_rows())
    if (std::find(out.begin(), out.end(), static_cast<Isa>(r.level)) == out.end()) out.push_back(static_cast<Isa>(r.level));
  std::sort(out.begin(), out.end());
  return out;
}

MS_IMPL Isa best_compiled_isa(Isa want) {
  Isa best = Isa::baseline;
  for (Isa l : compiled_isas())
    if (static_cast<int>(l) <= static_cast<int>(want)) best = l;
  return best;
}

namespace detail {
/// The level in force, chosen on first use from MS_CPU_ISA and the CPU; the caller holds mu.
/// That first use is the registration of the first elementwise op, before main(): a bad
/// MS_CPU_ISA ends the program there with its message (exit status 2), as a usage error.
inline Isa current_isa_locked(ops::detail::IsaBinding& b) {
  if (!b.chosen) {
    try {
      b.level = best_compiled_isa(requested_isa());
    } catch (const Error& e) {
      std::fprintf(stderr, "ms: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
    b.chosen = true;
  }
  return b.level;
}
}  // namespace detail

MS_IMPL Isa isa() {
  auto& b = ops::detail::isa_binding();
  std::lock_guard lk(b.mu);
  return detail::current_isa_locked(b);
}

MS_IMPL ops::IsaFn isa_function(std::string_view name, ops::IsaFn base) {
  const int level = static_cast<int>(isa());
  if (level == static_cast<int>(Isa::baseline) || __start_ms_isa_fns == nullptr || __stop_ms_isa_fns == nullptr)
    return base;
  for (const ops::IsaFnRow* r = __start_ms_isa_fns; r != __stop_ms_isa_fns; ++r)
    if (r->level == level && r->name != nullptr && name == r->name) return r->fn;
  return base;
}

MS_IMPL std::string isa_summary() {
  std::string compiled;
  for (Isa l : compiled_isas()) compiled += (compiled.empty() ? "" : " ") + std::string(isa_name(l));
  const Isa now = isa();
  return MS_FORMAT("{} ({}); compiled: {}; CPU: {}", isa_name(now), isa_description(now), compiled,
                     isa_name(detected_isa()));
}

MS_IMPL void set_isa(Isa level) {
  check_isa_supported(level, detected_isa(), "set_isa");
  const auto compiled = compiled_isas();
  if (std::find(compiled.begin(), compiled.end(), level) == compiled.end()) {
    std::string names;
    for (Isa l : compiled) names += (names.empty() ? "" : ", ") + std::string(isa_name(l));
    MS_THROW(ValueError, "set_isa: this program holds no {} kernels (compiled: {}); build it with ms::ms or "
                         "ms_add_kernel_library to get every level", isa_name(level), names);
  }
  auto& b = ops::detail::isa_binding();
  std::lock_guard lk(b.mu);
  for (auto& [name, base] : b.base) {
    const ops::IsaKernelRow* row = level == Isa::baseline ? nullptr : ops::detail::find_isa_row(level, name);
    ops::registry().set_elementwise_tables(ops::registry().get(name), row ? *row : base);
  }
  b.level = level;
  b.chosen = true;
}

}  // namespace ms::cpu

namespace ms::ops {

MS_IMPL const OpDef& add_elementwise_op(OpDef d) {
  auto& b = detail::isa_binding();
  std::lock_guard lk(b.mu);
  const cpu::Isa level = cpu::detail::current_isa_locked(b);
  const OpDef& op = registry().add(std::move(d));
  b.base.emplace(op.name, detail::tables_of(op));
  if (level != cpu::Isa::baseline)
    if (const IsaKernelRow* row = detail::find_isa_row(level, op.name)) registry().set_elementwise_tables(op, *row);
  return op;
}

}  // namespace ms::ops
#endif  // MS_IMPL_BODIES
