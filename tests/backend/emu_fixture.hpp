#pragma once
// What the tests that drive the Ascend adapter against the emulator share: the adapter's
// backend for ascend:0 loaded from the emulator library, the emulator's control API
// (latency model, faults, counters), and a fixture that gives each test zero latency and
// no faults and restores the defaults afterwards. Only for builds that have the emulator
// (MS_ASCEND_EMULATOR_PATH).

#ifdef MS_ASCEND_EMULATOR_PATH

#include <catch2/catch.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <ms/backend/ascend/ascend_backend.hpp>

#include "../ascend_emulator/ms_emulator.h"

namespace ms_emu_test {

/// The adapter's backend for ascend:0, running on the emulator library.
inline ms::backend::ascend::AscendBackend& emu() {
  static const bool env = [] { return setenv("MS_ASCEND_LIBS", MS_ASCEND_EMULATOR_PATH, 1) == 0; }();
  (void)env;
  return ms::backend::ascend::ascend_backend(0);
}

/// The emulator's control API (msEmu*).
inline const msEmuApi& ctl() {
  static const msEmuApi c = [] {
    msEmuApi a{};
    if (msEmuLoadApi(MS_ASCEND_EMULATOR_PATH, &a) != 0)
      throw std::runtime_error("cannot load the msEmu* control API from " MS_ASCEND_EMULATOR_PATH);
    return a;
  }();
  return c;
}

inline msEmuCounters counters() {
  msEmuCounters c{};
  ctl().GetCounters(&c);
  return c;
}

/// Checks that no emulator handle outlived its use: after the device is drained, every
/// live_* handle gauge is back at its value in `base` (taken with baseline()).
/// The adapter keeps freed device blocks in its caching pool: a baseline for check_no_leak is
/// taken with the pool emptied, and check_no_leak empties it again before comparing.
inline msEmuCounters baseline() {
  emu().synchronize_all();
  emu().empty_cache();
  return counters();
}

inline void check_no_leak(const msEmuCounters& base) {
  emu().synchronize_all();
  emu().empty_cache();
  const msEmuCounters c = counters();
  CHECK(c.live_allocations == base.live_allocations);
  CHECK(c.live_streams == base.live_streams);
  CHECK(c.live_events == base.live_events);
  CHECK(c.live_tensors == base.live_tensors);
  CHECK(c.live_scalars == base.live_scalars);
  CHECK(c.live_int_arrays == base.live_int_arrays);
  CHECK(c.live_executors == base.live_executors);
  CHECK(c.live_models == base.live_models);
  CHECK(c.live_tensor_descs == base.live_tensor_descs);
  CHECK(c.live_data_buffers == base.live_data_buffers);
  CHECK(c.live_op_attrs == base.live_op_attrs);
}

/// Zero latency (AI Core and AI CPU), no faults, no fallback warnings on stderr; the
/// defaults are restored afterwards.
struct EmuFixture {
  EmuFixture() {
    emu().warn_on_fallback = false;
    ctl().SetLatency(0, 0, 0, 0);
    ctl().SetAiCpuLatency(0, 0);
    ctl().ClearFaults();
  }
  ~EmuFixture() {
    ctl().ClearFaults();
    ctl().ResetLatency();
  }
  EmuFixture(const EmuFixture&) = delete;
  EmuFixture& operator=(const EmuFixture&) = delete;
};

/// The line of a DeviceExecutable::dump() for node `name` ("(no line for ...)" if none).
inline std::string dump_line(const std::string& dump, const std::string& name) {
  const std::string key = "# " + name + "  @";
  auto p = dump.find(key);
  if (p == std::string::npos) return "(no line for " + name + ")";
  auto b = dump.rfind('\n', p) + 1, e = dump.find('\n', p);
  return dump.substr(b, e - b);
}

/// The what() of the E that f throws ("(no exception)" when it throws none).
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace ms_emu_test

#endif  // MS_ASCEND_EMULATOR_PATH
