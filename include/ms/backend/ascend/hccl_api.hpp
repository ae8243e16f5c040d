#pragma once
// The HCCL function table, loaded at run time with dlopen/dlsym like the AscendCL table
// (acl_api.hpp), plus the mapping of ms dtypes and reductions to HCCL's.
// Belongs here: finding libhccl.so, resolving its symbols into HcclApi, and turning a
// failed HcclResult into ms::BackendError (hccl_check). Must not know about tensors,
// process groups or MPI: the communicator is hccl_comm.hpp, the process-group side
// dist/hccl.hpp. The same code drives CANN's libhccl.so or the emulator's
// (tests/ascend_emulator/emu_hccl.cpp), whichever $MS_HCCL_LIBS names.

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "../../core/dtype.hpp"
#include "acl_api.hpp"
#include "hccl_types.hpp"

namespace ms::backend::ascend {

/// The HCCL library searched by the dynamic loader when $MS_HCCL_LIBS is not set.
inline constexpr const char* kDefaultHcclLibs = "libhccl.so";
/// Environment variable overriding the HCCL library (':'-separated names or paths).
inline constexpr const char* kHcclLibsEnv = "MS_HCCL_LIBS";

/// One function pointer per HCCL C function. Required ones are never null in a table
/// returned by load_hccl_api(); optional ones may be.
struct HcclApi {
#define MS_HCCL_TABLE_ENTRY(ret, name, params) hccl_fn::name* name = nullptr;
  MS_HCCL_REQUIRED_FUNCS(MS_HCCL_TABLE_ENTRY)
  MS_HCCL_OPTIONAL_FUNCS(MS_HCCL_TABLE_ENTRY)
#undef MS_HCCL_TABLE_ENTRY
  /// The libraries that were opened, ':'-separated (for messages).
  std::string libraries;
};

/// Opens the libraries in `libs` (':'-separated names or paths) and resolves the HCCL
/// symbols. Throws ms::BackendError naming libhccl.so, what was tried and $MS_HCCL_LIBS
/// when none opens, or naming the symbol when a required one is missing. Never dlclose()d.
inline HcclApi load_hccl_api(const std::string& libs) {
  const auto names = detail::split_libs(libs);
  MS_CHECK(!names.empty(), BackendError, "HCCL: empty library list '{}' (set {} to libhccl.so's path)", libs,
           kHcclLibsEnv);
  detail::OpenedLibs opened = detail::open_libs(names);
  MS_CHECK(!opened.handles.empty(), BackendError,
           "HCCL: could not load libhccl.so, the collective communication library of CANN: {} (install CANN's "
           "HCCL, or set {} to the library to use)",
           opened.tried(), kHcclLibsEnv);
  HcclApi api;
  api.libraries = detail::join(opened.opened, ":");
#define MS_HCCL_BIND_REQUIRED(ret, name, params)                                                            \
  detail::bind(api.name, opened, #name);                                                                    \
  MS_CHECK(api.name != nullptr, BackendError, "HCCL: required symbol {} not found in the HCCL library: {}", \
           #name, opened.tried());
  MS_HCCL_REQUIRED_FUNCS(MS_HCCL_BIND_REQUIRED)
#undef MS_HCCL_BIND_REQUIRED
#define MS_HCCL_BIND_OPTIONAL(ret, name, params) detail::bind(api.name, opened, #name);
  MS_HCCL_OPTIONAL_FUNCS(MS_HCCL_BIND_OPTIONAL)
#undef MS_HCCL_BIND_OPTIONAL
  return api;
}

/// $MS_HCCL_LIBS when set and non-empty, else "libhccl.so".
inline std::string default_hccl_libs() {
  const char* env = std::getenv(kHcclLibsEnv);
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(kDefaultHcclLibs);
}

/// The process-wide table, loaded on first use from default_hccl_libs(). Throws
/// ms::BackendError if loading fails (and tries again on the next call).
inline const HcclApi& hccl_api() {
  static const HcclApi api = load_hccl_api(default_hccl_libs());
  return api;
}

/// The name of an HcclResult ("HCCL_E_PARA"), for messages.
inline const char* hccl_result_name(HcclResult r) {
  switch (r) {
    case HCCL_SUCCESS: return "HCCL_SUCCESS";
    case HCCL_E_PARA: return "HCCL_E_PARA";
    case HCCL_E_PTR: return "HCCL_E_PTR";
    case HCCL_E_MEMORY: return "HCCL_E_MEMORY";
    case HCCL_E_INTERNAL: return "HCCL_E_INTERNAL";
    case HCCL_E_NOT_SUPPORT: return "HCCL_E_NOT_SUPPORT";
    case HCCL_E_NOT_FOUND: return "HCCL_E_NOT_FOUND";
    case HCCL_E_UNAVAIL: return "HCCL_E_UNAVAIL";
    case HCCL_E_SYSCALL: return "HCCL_E_SYSCALL";
    case HCCL_E_TIMEOUT: return "HCCL_E_TIMEOUT";
    case HCCL_E_RUNTIME: return "HCCL_E_RUNTIME";
    case HCCL_E_REMOTE: return "HCCL_E_REMOTE";
    case HCCL_E_OOM: return "HCCL_E_OOM";
    default: return "HCCL error";
  }
}

/// Throws ms::BackendError when `r` is not HCCL_SUCCESS:
/// "[ms.backend_error] HcclAllReduce failed with code 1 (HCCL_E_PARA): <message>", the
/// message being the runtime's aclGetRecentErrMsg() (HCCL reports there) when it has one.
inline void hccl_check(const AclApi& acl, HcclResult r, const char* call) {
  if (r == HCCL_SUCCESS) [[likely]] return;
  MS_THROW(BackendError, "{} failed with code {} ({}): {}", call, static_cast<int>(r), hccl_result_name(r),
           recent_error_message(acl));
}

/// The HcclDataType of an ms dtype, or nullopt when HCCL has none (bool).
inline std::optional<HcclDataType> hccl_dtype(DType d) {
  switch (d) {
    case DType::f32: return HCCL_DATA_TYPE_FP32;
    case DType::f64: return HCCL_DATA_TYPE_FP64;
    case DType::i32: return HCCL_DATA_TYPE_INT32;
    case DType::i64: return HCCL_DATA_TYPE_INT64;
    case DType::u8: return HCCL_DATA_TYPE_UINT8;
    case DType::f16: return HCCL_DATA_TYPE_FP16;
    case DType::bf16: return HCCL_DATA_TYPE_BFP16;
    case DType::b8: break;
  }
  return std::nullopt;
}

/// The dtypes HCCL reduces (hccl_ops.h: AllReduce and ReduceScatter take int8, int16, int32,
/// float16, float32 and bfloat16; the ones ms has). Broadcast and AllGather move every dtype
/// hccl_dtype() maps.
inline constexpr DTypeSet kHcclReduceTypes{DType::f32, DType::f16, DType::bf16, DType::i32};

}  // namespace ms::backend::ascend
