// safetensors files (nn/safetensors.hpp): the exact bytes the writer produces (header
// length, JSON header, 8-byte alignment, raw little-endian data), round trips of every
// dtype bit for bit (0-d, empty and strided tensors too), files crafted by hand the way
// other writers lay them out, a table of malformed files with their exact IOError
// messages, atomic saving, and nn::save / nn::load of a module's state dict.

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "test_util.hpp"
#include <ms/nn/module.hpp>
#include <ms/nn/safetensors.hpp>

namespace fs = std::filesystem;
using ms::AnyTensor;
using ms::Tensor;
using ms_test::io_error_of;
using ms_test::read_bytes;
using ms_test::require_values;
using ms_test::TempDir;
using ms_test::write_bytes;

namespace {

/// 8-byte little-endian length, header, data.
std::string st_bytes(const std::string& header, const std::string& data) {
  std::string out;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}
/// The tensor's data bytes, row-major (through ms::ops::contiguous).
std::string data_bytes(const AnyTensor& t) {
  AnyTensor c = ms::ops::contiguous(t);
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}
std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float x : v) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

/// A module with a parameter, a buffer of another dtype and a child.
struct Inner : ms::nn::Module {
  Tensor<float> w = Tensor<float>{{1, 2, 3}, {4, 5, 6}};
  Inner() { register_parameter("w", w); }
  std::string type_name() const override { return "Inner"; }
};
struct Outer : ms::nn::Module {
  Tensor<float> scale = Tensor<float>{0.5f, -1.25f};
  AnyTensor count = Tensor<std::int64_t>{7};
  std::shared_ptr<Inner> inner = std::make_shared<Inner>();
  Outer() {
    register_parameter("scale", scale);
    register_buffer("count", count);
    register_module("inner", inner);
  }
  std::string type_name() const override { return "Outer"; }
};

}  // namespace

TEST_CASE("safetensors: the writer's exact bytes", "[safetensors]") {
  TempDir dir;
  const fs::path p = dir / "a.safetensors";
  ms::save_safetensors({{"a", Tensor<float>{1.0f, 2.0f}}}, p);
  // {"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 54 bytes, padded to 56.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(header.size() == 54);
  CHECK(read_bytes(p) == st_bytes(header + "  ", f32_bytes({1.0f, 2.0f})));

  // Metadata comes first; tensors follow in name order with consecutive offsets.
  ms::save_safetensors({{"z", Tensor<std::int64_t>{5}}, {"b", ms::scalar<double>(0.5)}}, p, {{"format", "pt"}});
  const std::string h2 =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
      R"("z":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string padded = h2 + std::string((8 - h2.size() % 8) % 8, ' ');
  double half = 0.5;
  std::int64_t five = 5;
  std::string data(reinterpret_cast<const char*>(&half), 8);
  data.append(reinterpret_cast<const char*>(&five), 8);
  CHECK(read_bytes(p) == st_bytes(padded, data));
  std::map<std::string, std::string> meta;
  auto back = ms::load_safetensors(p, &meta);
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(back.size() == 2);
  CHECK(back.at("b").shape() == ms::Shape{});
  CHECK(Tensor<double>(back.at("b")).item() == 0.5);
  CHECK(Tensor<std::int64_t>(back.at("z")).item() == 5);
}

TEST_CASE("safetensors: every dtype round trips bit for bit", "[safetensors]") {
  TempDir dir;
  const fs::path p = dir / "all.safetensors";
  Tensor<float> f = ms::randn<float>({3, 4});
  std::map<std::string, AnyTensor> in{
      {"f32", f},
      {"f32_strided", f.t()},  // written in logical (row-major) order
      {"f64", Tensor<double>{1e300, -0.0, 3.5}},
      {"f16", ms::cast<ms::half>(Tensor<float>{1.5f, -2.0f, 65504.0f})},
      {"bf16", ms::cast<ms::bfloat16>(Tensor<float>{1.5f, -2.0f, 3e38f})},
      {"i32", Tensor<std::int32_t>{-7, 0, 2147483647}},
      {"i64", Tensor<std::int64_t>{{-1, 2}, {INT64_MIN, INT64_MAX}}},
      {"u8", Tensor<std::uint8_t>{0, 128, 255}},
      {"bool", Tensor<bool>{true, false, true}},
      {"scalar", ms::scalar<float>(3.25)},
      {"empty", ms::zeros<float>({0, 3})},
  };
  ms::save_safetensors(in, p);
  auto out = ms::load_safetensors(p);
  REQUIRE(out.size() == in.size());
  for (auto& [k, t] : in) {
    INFO(k);
    const AnyTensor& u = out.at(k);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
    CHECK(u.is_contiguous());
    CHECK(data_bytes(u) == data_bytes(t));
  }
  CHECK(Tensor<float>(out.at("f32_strided")).to_vector() == f.t().to_vector());
}

TEST_CASE("safetensors: files laid out by other writers", "[safetensors]") {
  TempDir dir;
  const fs::path p = dir / "other.safetensors";
  // Unpadded header, keys not in offset order, data of "b" before "a", extra whitespace.
  const std::string header =
      R"({ "a" : {"shape": [2, 1], "dtype": "F32", "data_offsets": [8, 16]},)"
      R"( "b": {"dtype":"U8","shape":[3],"data_offsets":[5,8]}, "c": {"dtype":"BOOL","shape":[5],"data_offsets":[0,5]} })";
  std::string data = std::string("\x01\x00\x01\x01\x00", 5) + "\x07\x08\x09" + f32_bytes({-1.5f, 2.5f});
  write_bytes(p, st_bytes(header, data));
  auto out = ms::load_safetensors(p);
  require_values(Tensor<float>(out.at("a")), {-1.5, 2.5});
  CHECK(out.at("a").shape() == ms::Shape{2, 1});
  CHECK(Tensor<std::uint8_t>(out.at("b")).to_vector() == std::vector<std::uint8_t>{7, 8, 9});
  CHECK(Tensor<bool>(out.at("c")).to_vector() == std::vector<bool>{true, false, true, true, false});
  // An empty file of tensors is valid too.
  write_bytes(p, st_bytes("{}", ""));
  CHECK(ms::load_safetensors(p).empty());
}

TEST_CASE("safetensors: malformed files throw IOError naming the path and the problem", "[safetensors]") {
  TempDir dir;
  const fs::path p = dir / "bad.safetensors";
  const std::string pre = "[ms.io_error] safetensors: '" + p.string() + "': ";
  const std::string a8 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string d8 = f32_bytes({1, 2});
  struct Case {
    std::string name, bytes, message;
  };
  std::string huge_len = st_bytes("", "");
  huge_len[0] = '\xe8';
  huge_len[1] = '\x03';  // 1000
  const std::vector<Case> cases = {
      {"shorter than 8 bytes", std::string("\x05\x00\x00", 3), "truncated file (3 bytes; the 8-byte header length is missing)"},
      {"header longer than the file", huge_len + "{}",
       "truncated file: the header needs 1000 bytes, the file holds 2 after the length"},
      {"header over the limit", std::string("\x00\x00\x00\x10\x00\x00\x00\x00", 8),
       "header length 268435456 is larger than the limit of 100000000 bytes"},
      {"not an object", st_bytes("[1, 2]", ""), "bad header: the JSON header is not an object"},
      {"entry not an object", st_bytes(R"({"a": 3})", ""), "bad header: the entry of tensor 'a' is not an object"},
      {"no dtype", st_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", d8),
       "bad header: tensor 'a' has no dtype string"},
      {"no shape", st_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", d8),
       "bad header: tensor 'a' has no shape array"},
      {"bad offsets", st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", d8),
       "bad header: tensor 'a' needs data_offsets [begin, end]"},
      {"negative dim", st_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8),
       "bad header: the shape of tensor 'a' holds -2 (not a size)"},
      {"unknown field", st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", d8),
       "bad header: tensor 'a' has an unknown field 'x'"},
      {"unknown dtype", st_bytes(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", d8),
       "tensor 'a' has an unknown dtype 'F33'"},
      {"unsupported dtype", st_bytes(R"({"a":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", d8),
       "tensor 'a' has dtype I8, which ms does not support"},
      {"offsets past the data", st_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d8),
       "data_offsets [0, 16] of tensor 'a' are out of range (the data section holds 8 bytes)"},
      {"offsets reversed", st_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", d8),
       "data_offsets [8, 0] of tensor 'a' are out of range (the data section holds 8 bytes)"},
      {"size mismatch", st_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8),
       "tensor 'a' (F32 (3,)) needs 12 bytes but data_offsets [0, 8] span 8"},
      {"gap", st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})", d8),
       "data_offsets of tensor 'b' start at 6, expected 4 (a gap or an overlap in the data)"},
      {"overlap", st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8),
       "data_offsets of tensor 'b' start at 4, expected 8 (a gap or an overlap in the data)"},
      {"trailing data", st_bytes(a8, d8 + "xyz"),
       "the data section holds 11 bytes but the tensors cover 8 (trailing or missing data)"},
      {"bad metadata", st_bytes(R"({"__metadata__":{"k":1}})", ""), "bad header: __metadata__ value of 'k' is not a string"},
      {"bad bool", st_bytes(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
       "tensor 'a' is BOOL but holds the byte 2 at element 1"},
  };
  for (auto& c : cases) {
    INFO(c.name);
    write_bytes(p, c.bytes);
    MS_REQUIRE_THROWS_MSG(ms::load_safetensors(p), ms::IOError, pre + c.message);
  }
  // Bad JSON: the message carries the parser's description.
  write_bytes(p, st_bytes(R"({"a": )", ""));
  CHECK_THAT(io_error_of([&] { ms::load_safetensors(p); }), Catch::StartsWith(pre + "bad JSON header ("));
  MS_REQUIRE_THROWS_MSG(ms::load_safetensors(dir / "missing.safetensors"), ms::IOError,
                        "[ms.io_error] safetensors: '" + (dir / "missing.safetensors").string() +
                            "': cannot open the file (no such file)");
  MS_REQUIRE_THROWS_MSG(ms::load_safetensors(dir.path), ms::IOError,
                        "[ms.io_error] safetensors: '" + dir.path.string() + "': not a regular file");
  // Every truncation of a valid file is rejected with an IOError (never a crash).
  ms::save_safetensors({{"a", Tensor<float>{1, 2, 3}}, {"b", Tensor<std::int64_t>{4}}}, p);
  const std::string good = read_bytes(p);
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    write_bytes(p, good.substr(0, n));
    CHECK_THROWS_AS(ms::load_safetensors(p), ms::IOError);
  }
}

TEST_CASE("safetensors: saving is atomic and leaves no temporary files", "[safetensors]") {
  TempDir dir;
  const fs::path p = dir / "m.safetensors";
  ms::save_safetensors({{"a", Tensor<float>{1}}}, p);
  ms::save_safetensors({{"a", Tensor<float>{2}}}, p);  // replaces the file
  CHECK(Tensor<float>(ms::load_safetensors(p).at("a")).item() == 2.0f);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  const fs::path nowhere = dir / "no_such_dir" / "x.safetensors";
  CHECK_THROWS_AS(ms::save_safetensors({{"a", Tensor<float>{1}}}, nowhere), ms::IOError);
  MS_REQUIRE_THROWS_MSG(ms::save_safetensors({{"a", AnyTensor()}}, p), ms::ValueError,
                        "[ms.value_error] save_safetensors: '" + p.string() + "': tensor 'a' is undefined");
  MS_REQUIRE_THROWS_MSG(ms::save_safetensors({{"__metadata__", Tensor<float>{1}}}, p), ms::ValueError,
                        "[ms.value_error] save_safetensors: '" + p.string() + "': invalid tensor name '__metadata__'");
  CHECK(Tensor<float>(ms::load_safetensors(p).at("a")).item() == 2.0f);  // untouched by the failures
}

TEST_CASE("nn::save / nn::load: a module's state dict round trips bit for bit", "[safetensors][nn]") {
  TempDir dir;
  const fs::path p = dir / "outer.safetensors";
  Outer a;
  {
    ms::NoGradGuard no_grad;  // scale is a parameter (requires grad)
    a.scale.copy_(Tensor<float>{0.1f, 1e-30f});
  }
  ms::nn::save(a, p, {{"model", "outer"}});
  auto sd = ms::load_safetensors(p);
  CHECK(sd.size() == 3);
  CHECK(sd.at("inner.w").dtype() == ms::DType::f32);
  CHECK(sd.at("count").dtype() == ms::DType::i64);

  Outer b;
  Tensor<float> w_handle = b.inner->w;  // loading writes in place: existing handles see the values
  ms::nn::load(b, p);
  CHECK(data_bytes(b.scale) == data_bytes(a.scale));
  CHECK(data_bytes(w_handle) == data_bytes(a.inner->w));
  CHECK(Tensor<std::int64_t>(b.count).item() == 7);
  CHECK(b.scale.requires_grad());  // still a parameter

  // Mismatches name the path and the key.
  ms::save_safetensors({{"scale", Tensor<float>{1, 2, 3}}, {"count", Tensor<std::int64_t>{1}},
                        {"inner.w", ms::zeros<float>({2, 3})}},
                       p);
  MS_REQUIRE_THROWS_MSG(ms::nn::load(b, p), ms::ShapeError,
                        "[ms.shape_error] '" + p.string() +
                            "': load_state_dict: size mismatch for key 'scale': the checkpoint has shape (3,), the "
                            "module has (2,)");
  ms::save_safetensors({{"scale", Tensor<float>{1, 2}}, {"inner.w", ms::zeros<float>({2, 3})}}, p);
  MS_REQUIRE_THROWS_MSG(ms::nn::load(b, p), ms::ValueError,
                        "[ms.value_error] '" + p.string() +
                            "': load_state_dict: error(s) loading the state dict of Outer; missing key(s): 'count'");
  ms::nn::load(b, p, /*strict=*/false);  // loads what is there
  require_values(b.scale, {1, 2});
  CHECK_THROWS_AS(ms::nn::load(b, dir / "absent.safetensors"), ms::IOError);
}
