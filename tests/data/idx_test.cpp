// IDX files and Fashion-MNIST (data/idx.hpp), and the DataLoader (data/loader.hpp).
// IDX files are crafted by the tests (plain, and gzip-compressed with zlib); two tiny
// committed fixtures (tests/fixtures/idx, written by Python's gzip/struct: 4 images of 3x2
// with pixel (n, r, c) = 10n + 3r + c except the last, 255, and labels 3 1 4 1) check
// reading files this code did not write. Every malformed file must throw ms::IOError with
// a message naming the path and the problem. A test tagged [data] loads the real
// Fashion-MNIST training set when it is installed (Debian's dataset-fashion-mnist) and
// skips with a warning otherwise.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <string>

#include <unistd.h>
#include <zlib.h>

#include "test_util.hpp"
#include <ms/data/idx.hpp>
#include <ms/data/loader.hpp>

namespace fs = std::filesystem;
using ms::Tensor;
using ms_test::io_error_of;
using ms_test::read_bytes;
using ms_test::require_values;
using ms_test::TempDir;
using ms_test::write_bytes;

namespace {

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
/// IDX bytes: magic, big-endian dims, data.
std::string idx_bytes(std::uint32_t magic, std::initializer_list<std::uint32_t> dims, const std::string& data) {
  std::string s = be32(magic);
  for (auto d : dims) s += be32(d);
  return s + data;
}
/// The bytes with these values.
std::string byte_str(std::initializer_list<int> v) {
  std::string s;
  for (int x : v) s += static_cast<char>(x);
  return s;
}
std::string iota_bytes(std::size_t n, int start = 0) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<char>((start + static_cast<int>(i)) & 0xff);
  return s;
}
/// Writes bytes gzip-compressed with zlib.
void write_gz(const fs::path& p, const std::string& bytes) {
  gzFile g = gzopen(p.string().c_str(), "wb");
  REQUIRE(g != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(g, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(g) == Z_OK);
}

std::string msg(const fs::path& p, const std::string& what) { return "[ms.io_error] idx: '" + p.string() + "': " + what; }

}  // namespace

TEST_CASE("idx: images and labels, plain and gzip-compressed", "[idx]") {
  TempDir dir;
  const std::string img = idx_bytes(0x803, {2, 3, 4}, iota_bytes(24, 100));
  const std::string lab = idx_bytes(0x801, {2}, byte_str({9, 0}));
  for (bool gz : {false, true}) {
    INFO("gzip " << gz);
    const fs::path pi = dir / (gz ? "i.gz" : "i"), pl = dir / (gz ? "l.gz" : "l");
    (gz ? write_gz : write_bytes)(pi, img);
    (gz ? write_gz : write_bytes)(pl, lab);
    Tensor<std::uint8_t> images = ms::data::read_idx_images(pi);
    CHECK(images.shape() == ms::Shape{2, 3, 4});
    std::vector<std::uint8_t> want(24);
    std::iota(want.begin(), want.end(), std::uint8_t{100});
    CHECK(images.to_vector() == want);
    Tensor<std::uint8_t> labels = ms::data::read_idx_labels(pl);
    CHECK(labels.shape() == ms::Shape{2});
    CHECK(labels.to_vector() == std::vector<std::uint8_t>{9, 0});
  }
}

TEST_CASE("idx: the committed fixtures (written by Python)", "[idx]") {
  const fs::path d = ms_test::data_dir("idx");
  auto ds = ms::data::load_idx_dataset(d / "tiny-images-idx3-ubyte.gz", d / "tiny-labels-idx1-ubyte");
  CHECK(ds.images.shape() == ms::Shape{4, 1, 3, 2});
  CHECK(ds.labels.to_vector() == std::vector<std::int64_t>{3, 1, 4, 1});
  CHECK(ds.size() == 4);
  std::vector<double> want;
  for (int n = 0; n < 4; ++n)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 2; ++c) want.push_back((n == 3 && r == 2 && c == 1 ? 255 : 10 * n + 3 * r + c) / 255.0);
  require_values(ds.images, want);
  // Normalized: (x - mean) / std.
  auto nd = ms::data::load_idx_dataset(d / "tiny-images-idx3-ubyte.gz", d / "tiny-labels-idx1-ubyte", true, 0.5, 0.25);
  for (auto& w : want) w = (w - 0.5) / 0.25;
  require_values(nd.images, want, 1e-5);
}

TEST_CASE("idx: int32, float32 and float64 elements are read big-endian", "[idx]") {
  TempDir dir;
  const fs::path p = dir / "x.idx";
  write_bytes(p, idx_bytes(0x0C01, {2}, be32(0xFFFFFFFEu) + be32(7)));
  auto i = ms::data::read_idx(p);
  CHECK(i.dtype() == ms::DType::i32);
  CHECK(Tensor<std::int32_t>(i).to_vector() == std::vector<std::int32_t>{-2, 7});
  float f = 1.5f;
  std::uint32_t fb;
  std::memcpy(&fb, &f, 4);
  write_gz(p, idx_bytes(0x0D02, {1, 1}, be32(fb)));
  auto ft = ms::data::read_idx(p);
  CHECK(ft.shape() == ms::Shape{1, 1});
  CHECK(Tensor<float>(ft).item() == 1.5f);
  double dv = -0.25;
  std::uint64_t db;
  std::memcpy(&db, &dv, 8);
  write_bytes(p, idx_bytes(0x0E01, {1}, be32(static_cast<std::uint32_t>(db >> 32)) + be32(static_cast<std::uint32_t>(db))));
  CHECK(Tensor<double>(ms::data::read_idx(p)).item() == -0.25);
  // Zero images is a valid (empty) file.
  write_bytes(p, idx_bytes(0x803, {0, 28, 28}, ""));
  CHECK(ms::data::read_idx_images(p).shape() == ms::Shape{0, 28, 28});
}

TEST_CASE("idx: malformed files throw IOError naming the path and the problem", "[idx]") {
  TempDir dir;
  const fs::path p = dir / "bad-idx3-ubyte";
  const fs::path pz = dir / "bad-idx3-ubyte.gz";
  MS_REQUIRE_THROWS_MSG(ms::data::read_idx_images(dir / "missing"), ms::IOError, msg(dir / "missing", "no such file"));
  MS_REQUIRE_THROWS_MSG(ms::data::read_idx_images(dir.path), ms::IOError, msg(dir.path, "not a regular file"));
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "truncated header (0 bytes; an IDX file starts with a 4-byte magic number)"},
      {"short magic", std::string("\0\0", 2), "truncated header (2 bytes; an IDX file starts with a 4-byte magic number)"},
      {"label file as images", idx_bytes(0x801, {2}, "ab"), "bad magic number 0x00000801 (expected 0x00000803)"},
      {"not IDX", "GIF89a.....", "bad magic number 0x47494638 (expected 0x00000803)"},
      {"truncated dims", idx_bytes(0x803, {2, 3}, ""), "truncated header: 3 dimensions need 12 bytes, got 8"},
      {"truncated data", idx_bytes(0x803, {2, 3, 4}, iota_bytes(23)),
       "truncated data: the header (2, 3, 4) promises 24 bytes of unsigned byte data, the file holds 23"},
      {"trailing data", idx_bytes(0x803, {2, 3, 4}, iota_bytes(25)),
       "trailing data: the file holds more than the 24 bytes its header (2, 3, 4) promises"},
      {"implausible dims", idx_bytes(0x803, {0xFFFFFFFF, 0xFFFFFFFF, 2}, ""),
       "implausible dimensions (4294967295, 4294967295) (too many elements)"},
  };
  for (auto& c : cases) {
    for (bool gz : {false, true}) {
      INFO(c.name << ", gzip " << gz);
      const fs::path& f = gz ? pz : p;
      (gz ? write_gz : write_bytes)(f, c.bytes);
      MS_REQUIRE_THROWS_MSG(ms::data::read_idx_images(f), ms::IOError, msg(f, c.message));
    }
  }
  // The generic reader checks what it can without an expected magic number.
  write_bytes(p, idx_bytes(0x0B01, {1}, "ab"));
  MS_REQUIRE_THROWS_MSG(ms::data::read_idx(p), ms::IOError,
                        msg(p, "unsupported element type 0x0B (int16) in magic number 0x00000B01"));
  write_bytes(p, idx_bytes(0x0800, {}, ""));
  MS_REQUIRE_THROWS_MSG(ms::data::read_idx(p), ms::IOError, msg(p, "bad number of dimensions 0 (expected 1 to 8)"));
  write_bytes(p, idx_bytes(0x01000801, {1}, "a"));
  MS_REQUIRE_THROWS_MSG(ms::data::read_idx(p), ms::IOError, msg(p, "bad magic number 0x01000801 (not an IDX file)"));

  // A gzip stream cut short, and one with corrupt compressed bytes: zlib's error is reported.
  write_gz(pz, idx_bytes(0x803, {10, 28, 28}, iota_bytes(7840)));
  const std::string gz = read_bytes(pz);
  write_bytes(pz, gz.substr(0, gz.size() / 2));
  CHECK_THAT(io_error_of([&] { ms::data::read_idx_images(pz); }), Catch::StartsWith(msg(pz, "read error (")));
  std::string corrupt = gz;
  for (std::size_t i = 20; i < 40 && i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5A);
  write_bytes(pz, corrupt);
  CHECK_THAT(io_error_of([&] { ms::data::read_idx_images(pz); }), Catch::StartsWith(msg(pz, "read error (")));
  // Every truncation of a valid gzip file fails cleanly.
  for (std::size_t n = 0; n < gz.size(); n += 7) {
    INFO("gzip file truncated to " << n << " bytes");
    write_bytes(pz, gz.substr(0, n));
    CHECK_THROWS_AS(ms::data::read_idx_images(pz), ms::IOError);
  }
}

TEST_CASE("idx: image/label count mismatch and labels out of range", "[idx]") {
  TempDir dir;
  const fs::path pi = dir / "i.gz", pl = dir / "l.gz";
  write_gz(pi, idx_bytes(0x803, {3, 2, 2}, iota_bytes(12)));
  write_gz(pl, idx_bytes(0x801, {2}, byte_str({1, 2})));
  MS_REQUIRE_THROWS_MSG(ms::data::load_idx_dataset(pi, pl), ms::IOError,
                        "[ms.io_error] idx: image/label count mismatch: '" + pi.string() + "' holds 3 images but '" +
                            pl.string() + "' holds 2 labels");
  write_gz(pl, idx_bytes(0x801, {3}, byte_str({1, 12, 2})));
  MS_REQUIRE_THROWS_MSG(ms::data::load_idx_dataset(pi, pl, false, 0, 1, 10), ms::IOError,
                        msg(pl, "label 12 at index 1 is out of range 0..9"));
  MS_REQUIRE_THROWS_MSG(ms::data::load_idx_dataset(pl, pi), ms::IOError,
                        msg(pl, "bad magic number 0x00000801 (expected 0x00000803)"));
}

TEST_CASE("idx: load_fashion_mnist from a directory of crafted files", "[idx]") {
  TempDir dir;
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes(0x803, {2, 28, 28}, iota_bytes(2 * 784)));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes(0x801, {2}, byte_str({9, 0})));
  auto ds = ms::data::load_fashion_mnist(dir.path, /*train=*/false);
  CHECK(ds.images.shape() == ms::Shape{2, 1, 28, 28});
  CHECK(ds.images.to_vector()[300] == Approx((300 % 256) / 255.0));
  CHECK(ds.labels.to_vector() == std::vector<std::int64_t>{9, 0});
  auto norm = ms::data::load_fashion_mnist(dir.path, false, /*normalize=*/true);
  CHECK(norm.images.to_vector()[0] == Approx((0 - 0.2860) / 0.3530));
  MS_REQUIRE_THROWS_MSG(ms::data::load_fashion_mnist(dir.path, /*train=*/true), ms::IOError,
                        "[ms.io_error] idx: Fashion-MNIST: neither '" + (dir / "train-images-idx3-ubyte.gz").string() +
                            "' nor '" + (dir / "train-images-idx3-ubyte").string() + "' exists");
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x803, {1, 2, 2}, iota_bytes(4)));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x801, {1}, byte_str({1})));
  MS_REQUIRE_THROWS_MSG(ms::data::load_fashion_mnist(dir.path), ms::IOError,
                        "[ms.io_error] idx: '" + (dir / "train-images-idx3-ubyte.gz").string() +
                            "': Fashion-MNIST images are 28x28, got 2x2");
}

TEST_CASE("idx: the real Fashion-MNIST training set", "[idx][data]") {
  auto dir = ms::data::find_fashion_mnist();
  if (!dir) {
    WARN("Fashion-MNIST not found (install dataset-fashion-mnist or set MS_FASHION_MNIST_DIR); skipped");
    return;
  }
  auto train = ms::data::load_fashion_mnist(*dir);
  CHECK(train.images.shape() == ms::Shape{60000, 1, 28, 28});
  CHECK(train.labels.shape() == ms::Shape{60000});
  std::vector<std::int64_t> counts(10, 0);
  std::int64_t out_of_range = 0;
  for (auto l : train.labels.to_vector()) {
    if (l < 0 || l > 9) ++out_of_range;
    else ++counts[static_cast<std::size_t>(l)];
  }
  CHECK(out_of_range == 0);
  CHECK(counts == std::vector<std::int64_t>(10, 6000));  // the training split is balanced
  const auto px = train.images.to_vector();
  double sum = 0, sq = 0;
  float lo = 1, hi = 0;
  for (float v : px) {
    sum += v;
    sq += static_cast<double>(v) * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double mean = sum / static_cast<double>(px.size());
  const double std = std::sqrt(sq / static_cast<double>(px.size()) - mean * mean);
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
  CHECK(mean == Approx(ms::data::kFashionMnistMean).margin(5e-4));  // the documented statistics
  CHECK(std == Approx(ms::data::kFashionMnistStd).margin(5e-4));
  auto test = ms::data::load_fashion_mnist(*dir, /*train=*/false);
  CHECK(test.size() == 10000);
}

// ---- DataLoader -------------------------------------------------------------------------------

namespace {
/// Images whose every pixel of sample i equals i, labels i.
ms::data::Dataset numbered(std::int64_t n) {
  ms::data::Dataset d;
  d.images = ms::AnyTensor::empty(ms::Shape{n, 1, 2, 2}, ms::DType::f32);
  d.labels = ms::AnyTensor::empty(ms::Shape{n}, ms::DType::i64);
  for (std::int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) d.images.data()[i * 4 + k] = static_cast<float>(i);
    d.labels.data()[i] = i;
  }
  return d;
}
/// The labels of every batch of one epoch; checks that images travel with their labels.
std::vector<std::vector<std::int64_t>> epoch_labels(ms::data::DataLoader& loader) {
  std::vector<std::vector<std::int64_t>> out;
  for (const ms::data::Batch& b : loader) {
    CHECK(b.images.is_contiguous());
    CHECK(b.images.shape(0) == b.size());
    auto l = b.labels.to_vector();
    auto im = b.images.to_vector();
    for (std::size_t i = 0; i < l.size(); ++i) CHECK(im[i * 4 + 3] == static_cast<float>(l[i]));
    out.push_back(l);
  }
  return out;
}
}  // namespace

TEST_CASE("DataLoader: batches in order, sizes and drop_last", "[data_loader]") {
  auto d = numbered(10);
  ms::data::DataLoader loader(d.images, d.labels, 4);
  CHECK(loader.size() == 3);
  CHECK(loader.num_samples() == 10);
  auto e = epoch_labels(loader);
  CHECK(e == std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  auto b = loader.batch(2);
  CHECK(b.images.shape() == ms::Shape{2, 1, 2, 2});
  CHECK(!b.images.shares_storage(d.images));  // a copy, not a view
  ms::data::DataLoader dropping(d.images, d.labels, 4, false, 0, /*drop_last=*/true);
  CHECK(dropping.size() == 2);
  CHECK(epoch_labels(dropping).size() == 2);
  ms::data::DataLoader exact(d.images, d.labels, 5, false, 0, true);
  CHECK(exact.size() == 2);
  MS_REQUIRE_THROWS_MSG(loader.batch(3), ms::IndexError, "[ms.index_error] DataLoader: batch 3 is out of range for 3 batches");
}

TEST_CASE("DataLoader: shuffling is seeded, covers every sample and changes per epoch", "[data_loader]") {
  auto d = numbered(50);
  ms::data::DataLoader a(d.images, d.labels, 8, /*shuffle=*/true, /*seed=*/42);
  ms::data::DataLoader b(d.images, d.labels, 8, true, 42);
  ms::data::DataLoader c(d.images, d.labels, 8, true, 43);
  auto a1 = epoch_labels(a);
  ms::manual_seed(1);  // the loader does not use the global generator
  auto b1 = epoch_labels(b);
  CHECK(a1 == b1);
  CHECK(epoch_labels(c) != a1);
  std::set<std::int64_t> seen;
  std::vector<std::int64_t> flat;
  for (auto& batch : a1)
    for (auto l : batch) {
      seen.insert(l);
      flat.push_back(l);
    }
  CHECK(seen.size() == 50);
  std::vector<std::int64_t> sorted(50);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(flat != sorted);
  auto a2 = epoch_labels(a);  // the next epoch reshuffles
  CHECK(a2 != a1);
  CHECK(a.epoch() == 1);
  CHECK(epoch_labels(b) == a2);  // still reproducible epoch by epoch
  a.set_epoch(0);                // an epoch's order depends only on (seed, epoch)
  std::vector<std::int64_t> again(a.order().begin(), a.order().begin() + 8);
  CHECK(again == a1[0]);
}

TEST_CASE("DataLoader: errors", "[data_loader]") {
  auto d = numbered(4);
  MS_REQUIRE_THROWS_MSG(ms::data::DataLoader(d.images, d.labels, 0), ms::ValueError,
                        "[ms.value_error] DataLoader: batch_size must be positive, got 0");
  Tensor<std::int64_t> three = Tensor<std::int64_t>{1, 2, 3};
  MS_REQUIRE_THROWS_MSG(ms::data::DataLoader(d.images, three, 2), ms::ShapeError,
                        "[ms.shape_error] DataLoader: 4 images but 3 labels");
}
