// Ascend emulator: SoC profiles. The runtime reports its chip through aclrtGetSocName,
// and what the chip's kernels and runtime accept differs by generation; a profile
// carries the differences the adapter has to respect (from the CANN documentation of
// each op and runtime call): the dtypes of the aclnn kernels that are narrower than the
// emulator's generic ones, fp32 Matmul with cubeMathType KEEP_DTYPE, model-RI capture,
// and the single-operator (aclop*) API.
// Selected by $MS_EMU_SOC at first use (default Ascend910B) or by msEmuSetSoc.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "emu_ops.hpp"

namespace msemu {
namespace {

// The profiles. `family` is what MS_EMU_SOC takes; `name` is what aclrtGetSocName
// answers, as a device of that family reports it.
const SocProfile kProfiles[] = {
    // Atlas training series (Ascend 910): no KEEP_DTYPE fp32 in the cube unit, no
    // aclmdlRI capture, no bfloat16 in the vector kernels; the aclop* API is there.
    {"Ascend910", "Ascend910A", false, false, true, false},
    // Atlas A2 training / 800I A2 inference (Ascend 910B): the reference profile.
    {"Ascend910B", "Ascend910B3", true, true, true, true},
    // Atlas inference series (Ascend 310P): like the 910 for fp32 matmul, with capture.
    {"Ascend310P", "Ascend310P3", false, true, true, false},
    // Atlas A3 (Ascend 910_93): the single-operator API is not supported any more.
    {"Ascend910_93", "Ascend910_9391", true, true, false, true},
};

std::mutex g_soc_mu;
const SocProfile* g_soc = nullptr;

const SocProfile* find_profile(const char* name) {
  if (name == nullptr || *name == '\0') return nullptr;
  for (const SocProfile& p : kProfiles)
    if (std::strcmp(name, p.family) == 0 || std::strcmp(name, p.name) == 0) return &p;
  return nullptr;
}

}  // namespace

const SocProfile& soc() {
  std::lock_guard lk(g_soc_mu);
  if (g_soc == nullptr) {
    const char* env = std::getenv("MS_EMU_SOC");
    g_soc = find_profile(env);
    if (g_soc == nullptr) {
      if (env != nullptr && *env != '\0')
        std::fprintf(stderr, "[ms emulator] unknown MS_EMU_SOC '%s' (Ascend910, Ascend910B, Ascend310P, "
                             "Ascend910_93): using Ascend910B\n", env);
      g_soc = &kProfiles[1];
    }
  }
  return *g_soc;
}

int check_soc_dtype(const char* op, const char* what, aclDataType dt) {
  const SocProfile& p = soc();
  // Kernels whose documented dtype list is narrower than "every dtype the emulator
  // computes with". The lists hold the dtypes of the CANN kernels' self/x argument.
  struct Row {
    const char* op;
    aclDataType allowed[8];
  };
  static const Row rows[] = {
      {"aclnnMatmul", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DT_UNDEFINED}},
      {"aclnnBatchMatMul", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DT_UNDEFINED}},
      {"aclnnGelu", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DT_UNDEFINED}},
      {"aclnnTanh", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DT_UNDEFINED}},
      {"aclnnSigmoid", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DT_UNDEFINED}},
      {"aclnnRelu", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT8, ACL_INT32, ACL_INT64, ACL_DT_UNDEFINED}},
      {"aclnnNeg", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_INT32, ACL_INT64, ACL_DT_UNDEFINED}},
  };
  if (dt == ACL_BF16 && !p.bf16) {
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: %s has dtype ACL_BF16, which %s kernels do not support", op,
                                              what, p.name));
  }
  for (const Row& r : rows) {
    if (std::strcmp(r.op, op) != 0) continue;
    std::string allowed;
    for (aclDataType a : r.allowed) {
      if (a == ACL_DT_UNDEFINED) break;
      if (a == dt) return ACL_SUCCESS;
      if (a == ACL_BF16 && !p.bf16) continue;
      allowed += allowed.empty() ? "" : ", ";
      allowed += dtype_name(a);
    }
    return fail(ACLNN_ERR_PARAM_INVALID, strf("%s: %s has dtype %s; on %s the kernel takes %s", op, what,
                                              dtype_name(dt), p.name, allowed.c_str()));
  }
  return ACL_SUCCESS;
}

}  // namespace msemu

using namespace msemu;

MS_EMU_API const char* aclrtGetSocName() { return soc().name; }

MS_EMU_API int msEmuSetSoc(const char* name) {
  const SocProfile* p = find_profile(name);
  if (p == nullptr) return -1;
  (void)soc();  // an $MS_EMU_SOC read later must not override this choice
  std::lock_guard lk(g_soc_mu);
  g_soc = p;
  return 0;
}

#endif  // MS_ASCEND_EMULATOR_BUILD
