// Tests of .npy I/O (core/npy.hpp): round trips for every dtype and shape kind, files
// written by NumPy (tests/fixtures/npy, made with NumPy 1.24) read back and rewritten byte for
// byte, crafted Fortran-order / big-endian / v2.0 / v3.0 files, a table of malformed files
// with exact messages, a truncation/corruption sweep, atomic saving, and — when a python3
// with NumPy is available — a live cross-check in both directions.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "test_util.hpp"

using ms_test::read_bytes;
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::TempDir;
using ms_test::write_bytes;
namespace fs = std::filesystem;

namespace {

/// A .npy file with the given version and header dict (no alignment padding) and raw data.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict + "\n";
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}
template <class T>
std::string raw(std::initializer_list<T> vals) {
  std::string s;
  for (T v : vals) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}
template <class T>
std::string raw_big_endian(std::initializer_list<T> vals) {
  std::string s;
  for (T v : vals) {
    std::string b(reinterpret_cast<const char*>(&v), sizeof(T));
    s.append(b.rbegin(), b.rend());
  }
  return s;
}

/// Logical values as doubles for any dtype.
std::vector<double> values_of(const ms::AnyTensor& t) {
  std::vector<double> out;
  ms::visit_dtype(t.dtype(), [&]<class T>() {
    for (auto v : ms::Tensor<T>(t).to_vector()) out.push_back(static_cast<double>(static_cast<float>(v)));
  });
  if (t.dtype() == ms::DType::f64) out = ms::Tensor<double>(t).to_vector();
  if (t.dtype() == ms::DType::i64) {
    out.clear();
    for (auto v : ms::Tensor<std::int64_t>(t).to_vector()) out.push_back(static_cast<double>(v));
  }
  return out;
}

/// A tensor of dtype T and `shape` with distinct values (alternating for bool).
template <class T>
ms::Tensor<T> sample(const ms::Shape& shape) {
  std::int64_t n = ms::numel(shape);
  std::vector<T> v;
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) v.push_back(i % 3 == 0);
    else if constexpr (std::is_integral_v<T>) v.push_back(static_cast<T>(std::is_signed_v<T> ? i * 7 - 20 : i * 7));
    else v.push_back(static_cast<T>(static_cast<float>(i) * 0.5f - 3.25f));
  }
  return ms::from_vector(v, shape);
}

}  // namespace

TEMPLATE_TEST_CASE("npy: round trip of every dtype and shape kind", "[npy][io]", float, double, std::int32_t,
                   std::int64_t, std::uint8_t, bool, ms::half) {
  using T = TestType;
  TempDir dir;
  for (ms::Shape shape : {ms::Shape{2, 3}, ms::Shape{}, ms::Shape{5}, ms::Shape{0}, ms::Shape{2, 0, 3},
                          ms::Shape{2, 1, 3, 2}}) {
    INFO("shape " << ms::shape_str(shape));
    auto t = sample<T>(shape);
    auto p = dir / "a.npy";
    ms::save_npy(p, t);
    auto back = ms::load_npy(p);
    CHECK(back.dtype() == ms::dtype_v<T>);
    CHECK(back.shape() == shape);
    if (back.numel() > 0) CHECK(back.is_contiguous());  // core calls some 0-size layouts non-contiguous
    CHECK(values_of(back) == values_of(t));
    auto typed = ms::load_npy<T>(p);
    CHECK(typed.shape() == shape);
    // The data starts on a 64-byte boundary and the file is exactly header + data.
    auto bytes = read_bytes(p);
    std::size_t hlen = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    CHECK((10 + hlen) % 64 == 0);
    CHECK(bytes.size() == 10 + hlen + t.nbytes());
  }
}

TEST_CASE("npy: non-contiguous tensors are written in logical C order", "[npy][io]") {
  TempDir dir;
  auto t = ms::arange<std::int32_t>(12).reshape({3, 4});
  ms::save_npy(dir / "t.npy", t.t());
  auto back = ms::load_npy<std::int32_t>(dir / "t.npy");
  require_shape(back, {4, 3});
  CHECK(back.is_contiguous());
  CHECK(back.to_vector() == t.t().to_vector());
  ms::save_npy(dir / "s.npy", t.slice(1, 3, -5, -2));  // columns 3 and 1, negative stride
  CHECK(ms::load_npy<std::int32_t>(dir / "s.npy").to_vector() == std::vector<std::int32_t>{3, 1, 7, 5, 11, 9});
  ms::save_npy(dir / "e.npy", ms::Tensor<double>{1.5, 2.5}.expand({3, 2}));  // broadcast (stride 0)
  CHECK(ms::load_npy<double>(dir / "e.npy").to_vector() == std::vector<double>{1.5, 2.5, 1.5, 2.5, 1.5, 2.5});
}

TEST_CASE("npy: files written by NumPy load with the right values", "[npy][io]") {
  const fs::path d = ms_test::data_dir("npy");
  auto a = ms::load_npy<float>(d / "f4_2x3.npy");
  require_shape(a, {2, 3});
  require_values(a, {0, 0.5, 1, 1.5, 2, 2.5});

  auto f = ms::load_npy<double>(d / "f8_fortran.npy");  // Fortran order: column-major strides, no copy
  require_shape(f, {2, 3});
  CHECK(f.strides() == ms::Shape{1, 2});
  require_values(f, {0, 1, 2, 3, 4, 5});
  require_values(f.contiguous(), {0, 1, 2, 3, 4, 5});

  CHECK(ms::load_npy<std::int64_t>(d / "i8_big_endian.npy").to_vector() == std::vector<std::int64_t>{0, -3, -6, -9});
  CHECK(ms::load_npy<bool>(d / "b1.npy").to_vector() == std::vector<bool>{true, false, true});
  auto h = ms::load_npy<ms::half>(d / "f2_0d.npy");
  require_shape(h, {});
  CHECK(static_cast<float>(h.item()) == 1.5f);
  auto u = ms::load_npy<std::uint8_t>(d / "u1_empty.npy");
  require_shape(u, {0, 4});
  auto i = ms::load_npy<std::int32_t>(d / "i4_3d.npy");
  require_shape(i, {2, 3, 4});
  CHECK(i.to_vector()[0] == -12);
  CHECK(i.to_vector()[23] == 11);
  require_values(ms::load_npy<double>(d / "f8_v2.npy"), {0.25, -1e300, INFINITY});
  require_values(ms::load_npy<float>(d / "f4_v3.npy"), {1, 2, 3, 4});
}

TEST_CASE("npy: save_npy writes NumPy's bytes exactly", "[npy][io]") {
  // Same header text, padding and alignment as numpy.save (1.24) for C-order little-endian data.
  TempDir dir;
  const fs::path d = ms_test::data_dir("npy");
  for (const char* name : {"f4_2x3.npy", "b1.npy", "f2_0d.npy", "u1_empty.npy", "i4_3d.npy"}) {
    INFO(name);
    auto t = ms::load_npy(d / name);
    ms::save_npy(dir / name, t);
    CHECK(read_bytes(dir / name) == read_bytes(d / name));
  }
  // Big-endian and Fortran-order inputs are rewritten as NumPy would write the loaded array.
  auto be = ms::load_npy(d / "i8_big_endian.npy");
  ms::save_npy(dir / "le.npy", be);
  CHECK(read_bytes(dir / "le.npy").substr(10, 17) == "{'descr': '<i8', ");
  auto fo = ms::load_npy(d / "f8_fortran.npy");
  ms::save_npy(dir / "c.npy", fo);
  auto bytes = read_bytes(dir / "c.npy");
  CHECK(bytes.find("'fortran_order': False") != std::string::npos);
  require_values(ms::load_npy<double>(dir / "c.npy"), {0, 1, 2, 3, 4, 5});
}

TEST_CASE("npy: crafted Fortran-order, big-endian, v2.0 and v3.0 files", "[npy][io]") {
  TempDir dir;
  // Fortran order: memory holds columns; shape (2, 3).
  write_bytes(dir / "f.npy", npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                       raw<std::int32_t>({1, 4, 2, 5, 3, 6})));
  auto f = ms::load_npy<std::int32_t>(dir / "f.npy");
  CHECK(f.strides() == ms::Shape{1, 2});
  CHECK(f.to_vector() == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  // Fortran order with three dims.
  write_bytes(dir / "f3.npy", npy_bytes("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2, 2), }",
                                        raw<std::int64_t>({0, 4, 2, 6, 1, 5, 3, 7})));
  CHECK(ms::load_npy<std::int64_t>(dir / "f3.npy").to_vector() == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // Big-endian data of every multi-byte type is byte-swapped.
  write_bytes(dir / "b4.npy", npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }",
                                        raw_big_endian<std::int32_t>({1, 256, -2})));
  CHECK(ms::load_npy<std::int32_t>(dir / "b4.npy").to_vector() == std::vector<std::int32_t>{1, 256, -2});
  write_bytes(dir / "bf8.npy", npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }",
                                         raw_big_endian<double>({1.5, -0.125})));
  CHECK(ms::load_npy<double>(dir / "bf8.npy").to_vector() == std::vector<double>{1.5, -0.125});
  write_bytes(dir / "bf4.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                                         raw_big_endian<float>({3.25f})));
  CHECK(ms::load_npy<float>(dir / "bf4.npy").to_vector() == std::vector<float>{3.25f});
  write_bytes(dir / "bf2.npy", npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }",
                                         raw_big_endian<std::uint16_t>({0x3e00})));  // 1.5 in binary16
  CHECK(static_cast<float>(ms::load_npy<ms::half>(dir / "bf2.npy").to_vector()[0]) == 1.5f);
  write_bytes(dir / "bi8.npy", npy_bytes("{'descr': '>i8', 'fortran_order': True, 'shape': (2, 2), }",
                                         raw_big_endian<std::int64_t>({1, 3, 2, 4})));
  CHECK(ms::load_npy<std::int64_t>(dir / "bi8.npy").to_vector() == std::vector<std::int64_t>{1, 2, 3, 4});
  // '|u1' and '>u1' mean the same; '=' is the native order.
  write_bytes(dir / "u.npy", npy_bytes("{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "\x05\xff"));
  CHECK(ms::load_npy<std::uint8_t>(dir / "u.npy").to_vector() == std::vector<std::uint8_t>{5, 255});
  write_bytes(dir / "n.npy", npy_bytes("{'descr': '=i4', 'fortran_order': False, 'shape': (1,), }", raw<std::int32_t>({9})));
  CHECK(ms::load_npy<std::int32_t>(dir / "n.npy").to_vector() == std::vector<std::int32_t>{9});
  // v2.0 and v3.0: a 4-byte header length.
  write_bytes(dir / "v2.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                        raw<float>({1.f, 2.f}), 2));
  CHECK(ms::load_npy<float>(dir / "v2.npy").to_vector() == std::vector<float>{1.f, 2.f});
  write_bytes(dir / "v3.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                        raw<std::int64_t>({-5}), 3));
  CHECK(ms::load_npy<std::int64_t>(dir / "v3.npy").item() == -5);
  // Header spelling NumPy's literal_eval accepts: double quotes, any key order, no trailing
  // comma, extra spaces, Python 2 long suffix.
  write_bytes(dir / "h.npy", npy_bytes("{ \"shape\" : ( 2L , 1 ) , \"fortran_order\":False,\"descr\":\"<i4\" }",
                                       raw<std::int32_t>({7, 8})));
  auto h = ms::load_npy<std::int32_t>(dir / "h.npy");
  require_shape(h, {2, 1});
  CHECK(h.to_vector() == std::vector<std::int32_t>{7, 8});
  // Bool bytes other than 0/1 load as true (stored as 1).
  write_bytes(dir / "b.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x02\x01", 3)));
  auto b = ms::load_npy<bool>(dir / "b.npy");
  CHECK(b.to_vector() == std::vector<bool>{false, true, true});
  CHECK(static_cast<const std::uint8_t*>(b.raw_data())[1] == 1);
}

TEST_CASE("npy: a table of malformed files, each an IOError naming the path and the problem", "[npy][io]") {
  TempDir dir;
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string f8 = raw<float>({1.f, 2.f});
  struct Case {
    const char* name;
    std::string bytes;
    std::string problem;
  };
  std::vector<Case> cases = {
      {"empty", "", "not a .npy file (missing the \\x93NUMPY magic string)"},
      {"zip", "PK\x03\x04 not numpy", "not a .npy file (missing the \\x93NUMPY magic string)"},
      {"short_magic", "\x93NUM", "not a .npy file (missing the \\x93NUMPY magic string)"},
      {"no_version", std::string("\x93NUMPY\x01", 7), "truncated header (the file has 7 bytes)"},
      {"no_length", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated header (the file has 10 bytes)"},
      {"version4", std::string("\x93NUMPY\x04\x00\x10\x00", 10) + "{}", "unsupported .npy format version 4.0"},
      {"truncated_header", std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{'descr'",
       "truncated header (it declares 255 bytes after the 10-byte preamble; the file has 8)"},
      {"missing_colon", npy_bytes("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", f8),
       "cannot parse the header: expected ':' at offset 9 in \"{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }\""},
      {"not_a_dict", npy_bytes("[1, 2]", f8), "cannot parse the header: expected '{' at offset 0 in \"[1, 2]\""},
      {"unterminated", npy_bytes("{'descr': '<f4", ""), "cannot parse the header: unterminated string at offset 15 in \"{'descr': '<f4\""},
      {"bad_bool", npy_bytes("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", f8),
       "cannot parse the header: expected True or False for 'fortran_order' at offset 34 in \"{'descr': '<f4', "
       "'fortran_order': maybe, 'shape': (2,), }\""},
      {"shape_not_tuple", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': 2, }", f8),
       "cannot parse the header: expected a tuple for 'shape' at offset 50 in \"{'descr': '<f4', 'fortran_order': "
       "False, 'shape': 2, }\""},
      {"shape_float", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", f8),
       "cannot parse the header: expected ',' or ')' in the shape at offset 52 in \"{'descr': '<f4', "
       "'fortran_order': False, 'shape': (2.5,), }\""},
      {"trailing_text", npy_bytes(ok_dict + " junk", f8),
       "cannot parse the header: unexpected text after the dict at offset 58 in \"{'descr': '<f4', 'fortran_order': "
       "False, 'shape': (2,), } junk\""},
      {"non_ascii", npy_bytes("{'descr': '<f4\xe9', 'fortran_order': False, 'shape': (2,), }", f8),
       "cannot parse the header: it is not ASCII text (\"{'descr': '<f4\\xe9', 'fortran_order': False, 'shape': "
       "(2,), }\")"},
      {"unknown_descr", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", f8),
       "unsupported dtype descr '<c8' (ms reads f2, f4, f8, i4, i8, u1 and b1, little- or big-endian)"},
      {"object_descr", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", f8),
       "unsupported dtype descr '|O' (ms reads f2, f4, f8, i4, i8, u1 and b1, little- or big-endian)"},
      {"no_byte_order", npy_bytes("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", f8),
       "unsupported dtype descr '|f4' (ms reads f2, f4, f8, i4, i8, u1 and b1, little- or big-endian)"},
      {"structured", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f8),
       "unsupported descr: structured dtypes (a list of fields) are not supported"},
      {"no_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", f8), "the header has no 'shape' key"},
      {"no_descr", npy_bytes("{'fortran_order': False, 'shape': (2,), }", f8), "the header has no 'descr' key"},
      {"extra_key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'foo': 1}", f8),
       "unexpected key 'foo' in the header"},
      {"negative_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", f8),
       "negative dimension -1 in shape (-1, 3)"},
      {"overflow", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", f8),
       "shape (1099511627776, 1099511627776) has too many elements"},
      {"overflow_bytes", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", f8),
       "shape (4611686018427387904,) has too many elements"},
      {"huge_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f8),
       "dimension 99999999999999999999 in the shape is too large"},
      {"too_many_dims", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2), }", f8),
       "shape (1, 1, 1, 1, 1, 1, 1, 1, 2) has 9 dimensions; ms supports at most 8"},
      {"truncated_data", npy_bytes(ok_dict, f8.substr(0, 7)),
       "data size mismatch: shape (2,) of float32 needs 8 bytes, the file has 7 after the header"},
      {"no_data", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", ""),
       "data size mismatch: shape (3, 2) of float64 needs 48 bytes, the file has 0 after the header"},
      {"trailing_data", npy_bytes(ok_dict, f8 + "xyz"),
       "data size mismatch: shape (2,) of float32 needs 8 bytes, the file has 11 after the header"},
  };
  REQUIRE(cases.size() >= 8);
  for (auto& c : cases) {
    INFO(c.name);
    auto p = dir / (std::string(c.name) + ".npy");
    write_bytes(p, c.bytes);
    MS_REQUIRE_THROWS_MSG(ms::load_npy(p), ms::IOError, fmt::format("[ms.io_error] load_npy: '{}': {}", p.string(), c.problem));
    // The in-memory parser reports the same problem under the name it is given.
    MS_REQUIRE_THROWS_MSG(ms::load_npy_from_memory(c.bytes.data(), c.bytes.size(), "buf"), ms::IOError,
                          fmt::format("[ms.io_error] load_npy: 'buf': {}", c.problem));
  }
  // Missing files and directories.
  auto missing = dir / "nope.npy";
  MS_REQUIRE_THROWS_MSG(ms::load_npy(missing), ms::IOError,
                        fmt::format("[ms.io_error] load_npy: '{}': cannot open the file (No such file or directory)",
                                    missing.string()));
  MS_REQUIRE_THROWS_MSG(ms::load_npy(dir.path), ms::IOError,
                        fmt::format("[ms.io_error] load_npy: '{}': not a regular file", dir.path.string()));
  // The typed loader names both dtypes.
  write_bytes(dir / "ok.npy", npy_bytes(ok_dict, f8));
  MS_REQUIRE_THROWS_MSG(ms::load_npy<double>(dir / "ok.npy"), ms::DTypeError,
                        fmt::format("[ms.dtype_error] load_npy: '{}' holds float32 data, not float64",
                                    (dir / "ok.npy").string()));
}

TEST_CASE("npy: every truncation and many corruptions fail cleanly", "[npy][io]") {
  // Run under ASan this also proves the loader never reads past the bytes it is given.
  TempDir dir;
  auto t = ms::arange<double>(6).reshape({2, 3});
  ms::save_npy(dir / "x.npy", t);
  const std::string good = read_bytes(dir / "x.npy");
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<char> buf(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));  // exact-size heap block
    CHECK_THROWS_AS(ms::load_npy_from_memory(buf.data(), buf.size(), "cut"), ms::IOError);
  }
  auto whole = ms::load_npy_from_memory(good.data(), good.size());
  CHECK(values_of(whole) == values_of(t));
  // Deterministic byte flips over the preamble and header: success or an IOError, nothing else.
  ms::Generator g(1234);
  int ok = 0, io = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    int flips = 1 + static_cast<int>(g.below(3));
    for (int k = 0; k < flips; ++k) {
      std::size_t at = static_cast<std::size_t>(g.below(128));
      bad[at] = static_cast<char>(g.below(256));
    }
    std::vector<char> buf(bad.begin(), bad.end());
    try {
      auto r = ms::load_npy_from_memory(buf.data(), buf.size());
      ++ok;
      CHECK(r.nbytes() <= buf.size());
    } catch (const ms::IOError&) {
      ++io;
    }
  }
  CHECK(ok + io == 3000);
  CHECK(io > 0);
}

TEST_CASE("npy: saving is atomic and reports failures", "[npy][io]") {
  TempDir dir;
  auto p = dir / "a.npy";
  ms::save_npy(p, ms::arange<float>(4));
  ms::save_npy(p, ms::arange<float>(2));  // replaces the old file
  CHECK(ms::load_npy<float>(p).to_vector() == std::vector<float>{0, 1});
  // Only the destination remains: no temporary files are left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  auto perms = fs::status(p).permissions();
  CHECK((perms & fs::perms::owner_read) != fs::perms::none);
  CHECK((perms & fs::perms::others_read) != fs::perms::none);

  auto bad = dir / "no" / "such" / "x.npy";
  MS_REQUIRE_THROWS_MSG(ms::save_npy(bad, ms::arange<float>(2)), ms::IOError,
                        fmt::format("[ms.io_error] save_npy: cannot create a file next to '{}' (No such file or "
                                    "directory)",
                                    bad.string()));
  CHECK_FALSE(fs::exists(bad));
  MS_REQUIRE_THROWS_MSG(ms::save_npy(dir / "bf.npy", ms::zeros<ms::bfloat16>({2})), ms::DTypeError,
                        fmt::format("[ms.dtype_error] save_npy: '{}': NumPy has no bfloat16 type; convert the tensor "
                                    "to float32 first",
                                    (dir / "bf.npy").string()));
  CHECK_FALSE(fs::exists(dir / "bf.npy"));
  MS_REQUIRE_THROWS_MSG(ms::save_npy(dir / "u.npy", ms::AnyTensor()), ms::ValueError,
                        fmt::format("[ms.value_error] save_npy: '{}': the tensor is undefined", (dir / "u.npy").string()));
}

namespace {
/// A python3 that imports NumPy: $MS_TEST_PYTHON, python3, or the system one; empty if none.
std::string python_with_numpy() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MS_TEST_PYTHON")) candidates.emplace_back(env);
  candidates.insert(candidates.end(), {"python3", "/usr/bin/python3", "/usr/local/bin/python3"});
  for (auto& py : candidates)
    if (std::system((py + " -c \"import numpy\" >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}
}  // namespace

TEST_CASE("npy: cross-check with NumPy in both directions", "[npy][io][python]") {
  const std::string py = python_with_numpy();
  if (py.empty()) {
    WARN("no python3 with NumPy found (set MS_TEST_PYTHON): skipping the live NumPy cross-check");
    return;
  }
  TempDir dir;
  // ms -> NumPy: NumPy checks dtype, shape and values and exits non-zero on any mismatch.
  ms::save_npy(dir / "f4.npy", ms::arange<float>(6).reshape({2, 3}) * 0.5f);
  ms::save_npy(dir / "i8.npy", ms::arange<std::int64_t>(-3, 3).reshape({3, 2}).t());
  ms::save_npy(dir / "b1.npy", ms::Tensor<bool>{true, false, true});
  ms::save_npy(dir / "f2.npy", ms::full<ms::half>({2}, 0.75));
  ms::save_npy(dir / "u1.npy", ms::zeros<std::uint8_t>({0, 2}));
  ms::save_npy(dir / "f8.npy", ms::scalar<double>(-2.5));
  // NumPy -> ms: Fortran order, big-endian and v2.0 files written by NumPy itself.
  std::string script =
      "import numpy as np, sys, os\n"
      "d = sys.argv[1]\n"
      "L = lambda n: np.load(os.path.join(d, n))\n"
      "a = L('f4.npy'); assert a.dtype == np.float32 and a.shape == (2, 3), a\n"
      "assert (a == np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5).all(), a\n"
      "b = L('i8.npy'); assert b.dtype == np.int64 and (b == np.arange(-3, 3).reshape(3, 2).T).all(), b\n"
      "assert L('b1.npy').tolist() == [True, False, True]\n"
      "c = L('f2.npy'); assert c.dtype == np.float16 and c.tolist() == [0.75, 0.75]\n"
      "e = L('u1.npy'); assert e.dtype == np.uint8 and e.shape == (0, 2)\n"
      "f = L('f8.npy'); assert f.shape == () and f == -2.5\n"
      "np.save(os.path.join(d, 'np_fortran.npy'), np.asfortranarray(np.arange(12.).reshape(3, 4)))\n"
      "np.save(os.path.join(d, 'np_be.npy'), np.array([[1, -2], [300, 4]], dtype='>i4'))\n"
      "np.save(os.path.join(d, 'np_f2.npy'), np.array([0.5, -3.0], dtype=np.float16))\n"
      "with open(os.path.join(d, 'np_v2.npy'), 'wb') as fh:\n"
      "    np.lib.format.write_array(fh, np.array([True, False]), version=(2, 0))\n";
  write_bytes(dir / "check.py", script);
  std::string cmd = py + " " + (dir / "check.py").string() + " " + dir.path.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto fo = ms::load_npy<double>(dir / "np_fortran.npy");
  require_shape(fo, {3, 4});
  require_values(fo, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(ms::load_npy<std::int32_t>(dir / "np_be.npy").to_vector() == std::vector<std::int32_t>{1, -2, 300, 4});
  require_values(ms::load_npy<ms::half>(dir / "np_f2.npy").to<float>(), {0.5, -3.0});
  CHECK(ms::load_npy<bool>(dir / "np_v2.npy").to_vector() == std::vector<bool>{true, false});
}
