// Fuzz target over the ONNX importer: any bytes, parsed as an ONNX model and imported with
// ms::onnx::load_model, either load or fail with an ms::Error (IOError for a malformed file,
// UnsupportedError for a node ms cannot run, ShapeError and the like for an inconsistent graph).
// Anything else, a crash or a sanitizer report, is a bug. Built with clang and -fsanitize=fuzzer
// when MS_BUILD_FUZZERS=ON and the ms::onnx target exists (tests/fuzz/CMakeLists.txt); seeded
// with models of the ONNX backend test data (libonnx-testdata).

#include <cstdint>
#include <string>

#include <ms/onnx.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ms::onnx::LoadOptions opt;
  opt.max_input_elements = std::int64_t{1} << 16;  // a mutated shape must not exhaust memory,
  opt.max_value_elements = std::int64_t{1} << 24;  // nor a mutated attribute (a Conv's pads)
  try {
    const ms::onnx::pb::ModelProto m =
        ms::onnx::parse_model(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    ms::onnx::Model model = ms::onnx::load_model(m, "fuzz.onnx", {}, opt);
    (void)model;
  } catch (const ms::Error&) {
  }
  return 0;
}
