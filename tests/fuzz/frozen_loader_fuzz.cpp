// Fuzz target over the frozen-model loader; the logic is in frozen_loader_fuzz.hpp.
// Built two ways (tests/fuzz/CMakeLists.txt), both only on request (the seed corpus is
// replayed by ms_tests):
//   - with clang and -fsanitize=fuzzer: a libFuzzer binary (MS_LIBFUZZER defined), run for
//     a bounded time by the fuzz_frozen_loader test (MS_BUILD_FUZZERS=ON), linked with the
//     instrumented kernel library it shares with the ONNX importer's target;
//   - with any compiler: a replay program that runs every file (or every file of every
//     directory) named on its command line:
//       frozen_loader_fuzz_replay tests/fuzz/corpus
//     and that writes the seed corpus with:
//       frozen_loader_fuzz_replay --make-corpus tests/fuzz/corpus
//     (cmake --build build --target frozen_loader_fuzz_replay)

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frozen_loader_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ms_fuzz::one_input(data, size);
  return 0;
}

#if !defined(MS_LIBFUZZER)
namespace {

int replay_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", p.string().c_str());
    return 1;
  }
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--make-corpus") {
    std::filesystem::create_directories(argv[2]);
    for (auto& [name, bytes] : ms_fuzz::seed_models()) {
      std::ofstream f(std::filesystem::path(argv[2]) / name, std::ios::binary);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      std::printf("wrote %s (%zu bytes)\n", name.c_str(), bytes.size());
    }
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR... | --make-corpus DIR\n", argv[0]);
    return 2;
  }
  int files = 0, failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p = argv[i];
    std::vector<std::filesystem::path> list;
    if (std::filesystem::is_directory(p)) {
      for (auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) list.push_back(e.path());
      std::sort(list.begin(), list.end());
    } else {
      list.push_back(p);
    }
    for (auto& f : list) {
      failed += replay_file(f);
      ++files;
    }
  }
  // Every seed must also load cleanly as written (with its checksums intact): a seed that
  // stops loading means the format changed without a new version.
  int seeds_ok = 0;
  for (auto& [name, bytes] : ms_fuzz::seed_models()) {
    ms::load_frozen_from_memory(bytes.data(), bytes.size(), name);
    ++seeds_ok;
  }
  std::printf("replayed %d inputs (%d unreadable); %d fresh seed models load\n", files, failed, seeds_ok);
  return failed == 0 && files > 0 ? 0 : 1;
}
#endif
