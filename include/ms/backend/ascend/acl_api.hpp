#pragma once
// The AscendCL function table, loaded at run time with dlopen/dlsym.
// Belongs here: finding the Ascend libraries, resolving their symbols into
// AclApi, and turning a failed status code into ms::BackendError (acl_check).
// Must not know about tensors, graphs or the backend interface: the Ascend
// adapter builds on this table, and the same code drives real CANN or the
// Ascend emulator (tests/ascend_emulator), whichever the library list names.
//
// Error handling and RAII (for callers of this table):
//   * Every aclError / aclnnStatus return goes through acl_check(), which throws.
//     So every resource obtained before a later call that may throw must already
//     be owned by an RAII guard: device memory (aclrtFree), host memory
//     (aclrtFreeHost), streams, events, aclTensor / aclScalar / aclIntArray
//     (aclDestroy*), captured models (aclmdlRIDestroy), aclTensorDesc /
//     aclDataBuffer / aclopAttr of an AI CPU launch (aclDestroy*, aclopDestroyAttr).
//   * An aclOpExecutor returned by aclnnXxxGetWorkspaceSize is consumed by the
//     launch aclnnXxx(...) -- also when the launch fails. If the launch is never
//     reached (say the workspace allocation throws), release it with
//     aclDestroyAclOpExecutor when the table has it, else it leaks.
//   * Destructors of such guards must not throw: ignore (or log) the status of
//     aclrtFree / aclDestroy* there, never acl_check() it.
//   * aclGetRecentErrMsg() is per thread and is read by acl_check() right after
//     the failing call, on the same thread; do not call other ACL functions in
//     between.

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <ms/backend/ascend/acl_types.hpp>
#include <ms/core/error.hpp>

namespace ms::backend::ascend {

/// Default library lists: the CANN names, searched by the dynamic loader. Newer CANN splits
/// the aclnn kernels into libopapi_math.so + libopapi_nn.so (not to be mixed with the
/// aggregate libopapi.so of older releases) and moves the single-operator API into
/// libacl_op_executor.so / libacl_op_compiler.so (aclopCompileAndExecute); a library of
/// the list that does not open is skipped, so one list serves both layouts of the rest.
inline constexpr const char* kSplitAclLibs =
    "libascendcl.so:libnnopbase.so:libopapi_math.so:libopapi_nn.so:libacl_op_executor.so:libacl_op_compiler.so";
inline constexpr const char* kAggregateAclLibs =
    "libascendcl.so:libnnopbase.so:libopapi.so:libacl_op_executor.so:libacl_op_compiler.so";
/// The list tried when the split libraries are not both there.
inline constexpr const char* kDefaultAclLibs = kAggregateAclLibs;
/// Environment variable overriding the list (':'-separated names or paths).
inline constexpr const char* kAclLibsEnv = "MS_ASCEND_LIBS";

/// What one chip generation supports, where the generations differ (CANN documentation:
/// aclnnMatmul's cubeMathType, aclmdlRICaptureBegin's and aclopCompileAndExecute's product
/// support tables, the aclnn kernels' dtype tables).
/// A table fresh from load_acl_api knows no SoC yet and assumes everything (what the symbols
/// offer); the backend replaces that with soc_caps(aclrtGetSocName()).
struct SocCaps {
  std::string name;             ///< as aclrtGetSocName reports it ("" when not read or not said)
  bool fp32_keep_dtype = true;  ///< Matmul/BatchMatMul take FLOAT32 with cubeMathType KEEP_DTYPE
  bool capture = true;          ///< aclmdlRI stream capture
  bool single_op = true;        ///< the aclop* single-operator API (AI CPU operators)
  bool bf16 = true;             ///< bfloat16 in the vector and cube kernels
};

/// The capabilities of the SoC named `name`. Atlas A2/A3 (Ascend910B*, Ascend910_93*): all
/// but the single-operator API on A3; the training series (other Ascend910*): no fp32
/// KEEP_DTYPE, no capture, no bf16; the inference series (Ascend310P*): no fp32 KEEP_DTYPE,
/// no bf16. Anything else gets the conservative set (no KEEP_DTYPE fp32, no capture, no bf16).
inline SocCaps soc_caps(std::string_view name) {
  SocCaps c;
  c.name = std::string(name);
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  const bool a2_a3 = starts("Ascend910B") || starts("Ascend910_93");
  c.fp32_keep_dtype = c.bf16 = a2_a3;
  c.capture = a2_a3 || starts("Ascend310P");
  c.single_op = !starts("Ascend910_93");
  return c;
}

/// One function pointer per AscendCL C function. Required ones are never null
/// in a table returned by load_acl_api(); optional ones may be.
struct AclApi {
#define MS_ACL_TABLE_ENTRY(ret, name, params) acl_fn::name* name = nullptr;
  MS_ACL_REQUIRED_FUNCS(MS_ACL_TABLE_ENTRY)
  MS_ACL_OPTIONAL_FUNCS(MS_ACL_TABLE_ENTRY)
#undef MS_ACL_TABLE_ENTRY

#define MS_ACLNN_TABLE_ENTRY(Name, ...)                                          \
  acl_fn::aclnn##Name##GetWorkspaceSize* aclnn##Name##GetWorkspaceSize = nullptr; \
  acl_fn::aclnnLaunch* aclnn##Name = nullptr;
  MS_ACLNN_OPS(MS_ACLNN_TABLE_ENTRY)
#undef MS_ACLNN_TABLE_ENTRY

  /// The libraries that were opened, ':'-separated (for messages).
  std::string libraries;
  /// Optional symbols that were not found (aclnn ops by op name, e.g. "aclnnGelu").
  std::vector<std::string> missing_optional;

  /// What the chip supports (set by the backend from aclrtGetSocName; see soc_caps()).
  SocCaps soc;

  /// Stream capture and replay (aclmdlRICaptureBegin/End, aclmdlRIExecuteAsync, aclmdlRIDestroy),
  /// present and supported by the chip.
  bool has_capture() const noexcept {
    return aclmdlRICaptureBegin && aclmdlRICaptureEnd && aclmdlRIExecuteAsync && aclmdlRIDestroy && soc.capture;
  }
  /// The single-operator API that AI CPU operators need (aclopCompileAndExecute and its
  /// descriptions), present and supported by the chip.
  bool has_aicpu() const noexcept {
#define MS_ACL_HAS_FN(ret, name, params) &&name != nullptr
    return soc.single_op MS_ACL_SINGLE_OP_FUNCS(MS_ACL_HAS_FN);
#undef MS_ACL_HAS_FN
  }
  /// aclDestroyAclOpExecutor, to release an executor that was never launched.
  bool has_executor_destroy() const noexcept { return aclDestroyAclOpExecutor != nullptr; }
  /// Both phases of the aclnn op `name` ("Add", "Matmul", ...) are present.
  bool has_op(std::string_view name) const noexcept {
#define MS_ACLNN_HAS_OP(Name, ...) \
  if (name == #Name) return aclnn##Name##GetWorkspaceSize != nullptr && aclnn##Name != nullptr;
    MS_ACLNN_OPS(MS_ACLNN_HAS_OP)
#undef MS_ACLNN_HAS_OP
    return false;
  }
};

namespace detail {

inline std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

inline std::vector<std::string> split_libs(const std::string& libs) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  while (start <= libs.size()) {
    auto end = libs.find(':', start);
    if (end == std::string::npos) end = libs.size();
    if (end > start) out.push_back(libs.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// Opened libraries plus what happened to each one, for error messages.
struct OpenedLibs {
  std::vector<void*> handles;
  std::vector<std::string> opened;
  std::vector<std::string> failures;  // "name (dlerror text)"

  void* find(const char* symbol) const {
    for (void* h : handles) {
      if (void* p = ::dlsym(h, symbol)) return p;
    }
    return nullptr;
  }
  std::string tried() const {
    std::string s = MS_FORMAT("opened [{}]", join(opened, ", "));
    if (!failures.empty()) s += MS_FORMAT("; failed to open [{}]", join(failures, "; "));
    return s;
  }
};

/// dlopens each library of `names` in order; the ones that fail are listed with dlerror's
/// text. RTLD_GLOBAL: CANN's own plugins resolve symbols across these libraries.
inline OpenedLibs open_libs(const std::vector<std::string>& names) {
  OpenedLibs opened;
  for (const auto& name : names) {
    if (void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_GLOBAL)) {
      opened.handles.push_back(h);
      opened.opened.push_back(name);
    } else {
      const char* err = ::dlerror();
      opened.failures.push_back(MS_FORMAT("{} ({})", name, err ? err : "unknown error"));
    }
  }
  return opened;
}

template <typename Fn>
void bind(Fn*& slot, const OpenedLibs& libs, const char* symbol) {
  // dlsym hands back an object pointer; POSIX guarantees it converts to a function pointer.
  slot = reinterpret_cast<Fn*>(libs.find(symbol));
}

}  // namespace detail

/// Opens every library in `libs` (':'-separated names or paths) and resolves
/// each AscendCL symbol in the first library that defines it.
/// Throws ms::BackendError when no library opens, or when a required symbol is
/// missing (the message names the symbol and the libraries tried).
/// Libraries are never dlclose()d: the runtime keeps threads and state alive
/// until the process exits, and dlopen() reference-counts repeated loads.
inline AclApi load_acl_api(const std::string& libs) {
  const auto names = detail::split_libs(libs);
  if (names.empty()) MS_THROW(BackendError, "Ascend: empty library list '{}'", libs);

  detail::OpenedLibs opened = detail::open_libs(names);
  if (opened.handles.empty()) {
    MS_THROW(BackendError,
             "Ascend: could not load any AscendCL library: {} (set {} to the libraries to use)",
             opened.tried(), kAclLibsEnv);
  }

  AclApi api;
  api.libraries = detail::join(opened.opened, ":");

#define MS_ACL_BIND_REQUIRED(ret, name, params)                                            \
  detail::bind(api.name, opened, #name);                                                   \
  if (api.name == nullptr) {                                                               \
    MS_THROW(BackendError, "Ascend: required symbol {} not found in the AscendCL libraries: {}", \
             #name, opened.tried());                                                       \
  }
  MS_ACL_REQUIRED_FUNCS(MS_ACL_BIND_REQUIRED)
#undef MS_ACL_BIND_REQUIRED

#define MS_ACL_BIND_OPTIONAL(ret, name, params) \
  detail::bind(api.name, opened, #name);        \
  if (api.name == nullptr) api.missing_optional.emplace_back(#name);
  MS_ACL_OPTIONAL_FUNCS(MS_ACL_BIND_OPTIONAL)
#undef MS_ACL_BIND_OPTIONAL

  // An op is usable only with both phases; a half-present pair counts as missing.
#define MS_ACLNN_BIND(Name, ...)                                                   \
  detail::bind(api.aclnn##Name##GetWorkspaceSize, opened, "aclnn" #Name "GetWorkspaceSize"); \
  detail::bind(api.aclnn##Name, opened, "aclnn" #Name);                            \
  if (api.aclnn##Name##GetWorkspaceSize == nullptr || api.aclnn##Name == nullptr) { \
    api.aclnn##Name##GetWorkspaceSize = nullptr;                                   \
    api.aclnn##Name = nullptr;                                                     \
    api.missing_optional.emplace_back("aclnn" #Name);                              \
  }
  MS_ACLNN_OPS(MS_ACLNN_BIND)
#undef MS_ACLNN_BIND

  // Without any aclnn kernel every op would quietly run on the host: say so once.
  bool any_op = false;
#define MS_ACLNN_ANY(Name, ...) any_op = any_op || api.aclnn##Name != nullptr;
  MS_ACLNN_OPS(MS_ACLNN_ANY)
#undef MS_ACLNN_ANY
  if (!any_op) {
    std::fprintf(stderr,
                 "[ms] warning: no aclnn kernel found in the Ascend libraries (%s); every op will run on "
                 "the host (set %s to the libraries that hold them)\n",
                 opened.tried().c_str(), kAclLibsEnv);
  }
  return api;
}

/// The CANN list: the split aclnn libraries when both are there, else the aggregate one.
inline std::string cann_acl_libs(bool split_opapi) { return split_opapi ? kSplitAclLibs : kAggregateAclLibs; }

/// The library list to use: $MS_ASCEND_LIBS when set and non-empty, else cann_acl_libs()
/// for what the dynamic loader finds.
inline std::string default_acl_libs() {
  const char* env = std::getenv(kAclLibsEnv);
  if (env != nullptr && *env != '\0') return std::string(env);
  // Opened here only to look; load_acl_api opens them again (dlopen counts references).
  const bool split = ::dlopen("libopapi_math.so", RTLD_LAZY | RTLD_GLOBAL) != nullptr &&
                     ::dlopen("libopapi_nn.so", RTLD_LAZY | RTLD_GLOBAL) != nullptr;
  if (!split) (void)::dlerror();
  return cann_acl_libs(split);
}

/// The runtime's aclGetRecentErrMsg() (AscendCL and HCCL report there), or a placeholder.
inline std::string_view recent_error_message(const AclApi& api) {
  const char* recent = api.aclGetRecentErrMsg ? api.aclGetRecentErrMsg() : nullptr;
  return (recent != nullptr && *recent != '\0') ? std::string_view(recent) : std::string_view("(no error message)");
}

/// The process-wide table, loaded on first use from default_acl_libs().
/// Throws ms::BackendError if loading fails (and tries again on the next call).
inline const AclApi& acl_api() {
  static const AclApi api = load_acl_api(default_acl_libs());
  return api;
}

/// Throws ms::BackendError when `code` is not ACL_SUCCESS:
/// "[ms.backend_error] aclrtMalloc failed with code 207001: <aclGetRecentErrMsg()>".
/// Works for aclError and aclnnStatus alike (0 is success for both).
inline void acl_check(const AclApi& api, aclError code, const char* call) {
  if (code == ACL_SUCCESS) [[likely]] return;
  MS_THROW(BackendError, "{} failed with code {}: {}", call, code, recent_error_message(api));
}

}  // namespace ms::backend::ascend
