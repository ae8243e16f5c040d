// The frozen-model loader's fuzz corpus, replayed inside the test suite: every seed (and
// every input that libFuzzer once found worth keeping) either loads or throws ms::IOError,
// with and without repaired checksums; a deterministic batch of byte mutations of each
// seed keeps to the same contract; and the seed models the corpus was made from still load.
// The libFuzzer target itself (tests/fuzz/frozen_loader_fuzz.cpp) runs in CI with clang.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "frozen_loader_fuzz.hpp"

namespace frozen_loader_corpus_test {
namespace {

std::vector<std::filesystem::path> corpus_files() {
  const auto dir = std::filesystem::path(__FILE__).parent_path() / "corpus";
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_directory(dir))
    for (auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void feed(const std::string& b) {
  ms_fuzz::one_input(reinterpret_cast<const std::uint8_t*>(b.data()), b.size());
}

}  // namespace

TEST_CASE("fuzz corpus: every seed loads or fails with IOError", "[fuzz][freeze]") {
  const auto files = corpus_files();
  REQUIRE(files.size() >= 5);
  int loaded = 0, refused = 0;
  for (const auto& f : files) {
    INFO(f.filename().string());
    const std::string b = file_bytes(f);
    REQUIRE_FALSE(b.empty());
    CHECK_NOTHROW(feed(b));  // anything but IOError escapes one_input and fails here
    try {
      ms::load_frozen_from_memory(b.data(), b.size(), f.filename().string());
      ++loaded;
    } catch (const ms::IOError&) {
      ++refused;
    }
  }
  CHECK(loaded >= 4);   // mlp, conv, custom_ops, attrs
  CHECK(refused >= 1);  // truncated.msf
  const std::string truncated = file_bytes(std::filesystem::path(__FILE__).parent_path() / "corpus" / "truncated.msf");
  CHECK_THROWS_AS(ms::load_frozen_from_memory(truncated.data(), truncated.size(), "truncated.msf"), ms::IOError);
}

TEST_CASE("fuzz corpus: byte mutations of the seeds keep the loader's contract", "[fuzz][freeze]") {
  std::mt19937 rng(2026);
  int inputs = 0;
  for (const auto& f : corpus_files()) {
    const std::string seed = file_bytes(f);
    if (seed.size() < 16) continue;
    for (int k = 0; k < 48; ++k) {
      std::string b = seed;
      switch (k % 4) {
        case 0:  // flip a few bytes anywhere
          for (int j = 0; j < 4; ++j) b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255);
          break;
        case 1:  // cut the file short
          b.resize(rng() % b.size());
          break;
        case 2: {  // overwrite a byte of the JSON header with a digit or a bracket
          const std::size_t hdr = std::min<std::size_t>(b.size() - 8, 4096);
          const char repl[] = "0123456789[]{}\":,-e";
          b[8 + rng() % hdr] = repl[rng() % (sizeof(repl) - 1)];
          break;
        }
        default:  // corrupt the 8-byte header length
          b[rng() % 8] = static_cast<char>(rng());
          break;
      }
      INFO(f.filename().string() << " mutation " << k);
      CHECK_NOTHROW(feed(b));
      ++inputs;
    }
  }
  CHECK(inputs >= 4 * 48);
}

TEST_CASE("fuzz corpus: the seed models still load as written", "[fuzz][freeze]") {
  for (auto& [name, bytes] : ms_fuzz::seed_models()) {
    INFO(name);
    ms::graph::Graph g = ms::load_frozen_from_memory(bytes.data(), bytes.size(), name);
    CHECK(!g.outputs().empty());
  }
}

}  // namespace frozen_loader_corpus_test
