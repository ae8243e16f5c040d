#pragma once
// IDX files (the format of MNIST and Fashion-MNIST) and the Fashion-MNIST loader.
//
// An IDX file is: two zero bytes, a type byte (0x08 unsigned byte, 0x0C int32, 0x0D
// float32, 0x0E float64; 0x09 and 0x0B are not supported), a byte with the number of
// dims, then each dim as a big-endian uint32, then the data, big-endian, row-major.
// Image files have magic 0x00000803 (N, rows, cols), label files 0x00000801 (N,).
//
// Files are read through zlib's gzopen/gzread, so both gzip-compressed (.gz) and plain
// files work. The reader validates the magic, the dims, and that the file holds exactly
// the bytes the header promises (no fewer, no more); every problem throws ms::IOError
// naming the path.
//
//   auto train = ms::data::load_fashion_mnist("/usr/share/datasets/fashion-mnist");
//   train.images  // Tensor<float> (60000, 1, 28, 28) in [0, 1]
//   train.labels  // Tensor<int64_t> (60000,) in 0..9

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "../core/linkage.hpp"
#include "../core/tensor.hpp"

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
#include <zlib.h>
#endif

namespace ms::data {

#if MS_IMPL_BODIES
namespace detail::idx {

template <class... A>
[[noreturn]] void fail(const std::string& path, fmt::format_string<A...> f, A&&... args) {
  throw IOError(MS_FORMAT("idx: '{}': {}", path, fmt::format(f, std::forward<A>(args)...)));
}

/// A gzFile closed on scope exit.
struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

/// Reads up to n bytes; returns the number read (short at end of file). IOError on a
/// decompression error (corrupt or truncated gzip stream).
inline std::size_t read_some(gzFile f, void* dst, std::size_t n, const std::string& path) {
  std::size_t got = 0;
  auto* p = static_cast<unsigned char*>(dst);
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
    int r = gzread(f, p + got, chunk);
    if (r < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      fail(path, "read error ({})", msg ? msg : "unknown zlib error");
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  // A gzip stream cut short reads as end of file with Z_BUF_ERROR set.
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) fail(path, "read error ({})", msg ? msg : "unknown zlib error");
  return got;
}

inline const char* type_name(int code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
  }
  return "unknown";
}

}  // namespace detail::idx
#endif

/// Reads an IDX file (gzip-compressed or plain) into a contiguous tensor of its dims:
/// uint8 for type 0x08, int32 for 0x0C, float32 for 0x0D, float64 for 0x0E.
/// `expected_magic`, when given (e.g. 0x00000803), must match the file's magic number.
MS_IMPL AnyTensor read_idx(const std::filesystem::path& path, std::optional<std::uint32_t> expected_magic = {});

/// Reads an IDX image file (magic 0x00000803): uint8 (N, rows, cols).
MS_IMPL Tensor<std::uint8_t> read_idx_images(const std::filesystem::path& path);
/// Reads an IDX label file (magic 0x00000801): uint8 (N,).
MS_IMPL Tensor<std::uint8_t> read_idx_labels(const std::filesystem::path& path);

/// Images and labels of a dataset split.
struct Dataset {
  Tensor<float> images;          ///< (N, 1, rows, cols), scaled to [0, 1] (or normalized)
  Tensor<std::int64_t> labels;   ///< (N,)
  std::int64_t size() const { return labels.defined() ? labels.shape(0) : 0; }
};

/// Fashion-MNIST's mean and standard deviation of the training pixels (in [0, 1]).
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
/// Class names of Fashion-MNIST, by label.
inline constexpr std::array<const char*, 10> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

/// Loads an image file and a label file into a Dataset: images become float32 (N, 1, H, W)
/// divided by 255, and, when `normalize`, (x - mean) / std. IOError when the counts differ
/// or (with num_classes > 0) a label is out of range.
MS_IMPL Dataset load_idx_dataset(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                                bool normalize = false, double mean = kFashionMnistMean, double std = kFashionMnistStd,
                                std::int64_t num_classes = 0);

/// The directory of Fashion-MNIST if it can be found: $MS_FASHION_MNIST_DIR, then Debian's
/// dataset-fashion-mnist location /usr/share/datasets/fashion-mnist.
MS_IMPL std::optional<std::filesystem::path> find_fashion_mnist();

/// Loads the Fashion-MNIST training split (60000 images) or, with train = false, the test
/// split (10000) from `dir`, which holds {train,t10k}-{images-idx3,labels-idx1}-ubyte,
/// gzip-compressed (.gz) or plain. Images: float32 (N, 1, 28, 28) in [0, 1], or normalized
/// with mean 0.2860 and std 0.3530 when `normalize`. Labels: int64 (N,) in 0..9.
MS_IMPL Dataset load_fashion_mnist(const std::filesystem::path& dir, bool train = true, bool normalize = false);

}  // namespace ms::data

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms::data {
MS_IMPL AnyTensor read_idx(const std::filesystem::path& path, std::optional<std::uint32_t> expected_magic) {
  using namespace detail::idx;
  const std::string name = path.string();
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(name, "no such file");
  if (!std::filesystem::is_regular_file(status)) fail(name, "not a regular file");
  GzFile g;
  g.f = gzopen(name.c_str(), "rb");
  if (!g.f) fail(name, "cannot open the file ({})", std::strerror(errno));
  gzbuffer(g.f, 1 << 17);

  unsigned char head[4];
  std::size_t got = read_some(g.f, head, 4, name);
  if (got < 4) fail(name, "truncated header ({} bytes; an IDX file starts with a 4-byte magic number)", got);
  const std::uint32_t magic = (std::uint32_t{head[0]} << 24) | (std::uint32_t{head[1]} << 16) |
                              (std::uint32_t{head[2]} << 8) | head[3];
  if (expected_magic && magic != *expected_magic)
    fail(name, "bad magic number 0x{:08X} (expected 0x{:08X})", magic, *expected_magic);
  if (head[0] != 0 || head[1] != 0) fail(name, "bad magic number 0x{:08X} (not an IDX file)", magic);
  const int type = head[2], ndim = head[3];
  DType dtype;
  switch (type) {
    case 0x08: dtype = DType::u8; break;
    case 0x0C: dtype = DType::i32; break;
    case 0x0D: dtype = DType::f32; break;
    case 0x0E: dtype = DType::f64; break;
    default: fail(name, "unsupported element type 0x{:02X} ({}) in magic number 0x{:08X}", type, type_name(type), magic);
  }
  if (ndim < 1 || ndim > kMaxDims) fail(name, "bad number of dimensions {} (expected 1 to {})", ndim, kMaxDims);

  std::vector<unsigned char> dbytes(static_cast<std::size_t>(4 * ndim));
  got = read_some(g.f, dbytes.data(), dbytes.size(), name);
  if (got < dbytes.size()) fail(name, "truncated header: {} dimensions need {} bytes, got {}", ndim, dbytes.size(), got);
  Shape shape;
  std::uint64_t count = 1;
  for (int i = 0; i < ndim; ++i) {
    const unsigned char* b = &dbytes[static_cast<std::size_t>(4 * i)];
    const std::uint64_t d = (std::uint64_t{b[0]} << 24) | (std::uint64_t{b[1]} << 16) | (std::uint64_t{b[2]} << 8) | b[3];
    shape.push_back(static_cast<std::int64_t>(d));
    constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 40;
    if (d != 0 && count > kMaxElements / d) fail(name, "implausible dimensions {} (too many elements)", shape_str(shape));
    count *= d;
  }
  const std::size_t esize = dtype_size(dtype);
  const std::uint64_t nbytes = count * esize;

  // Read in chunks, growing the buffer as data arrives, so that a header that promises far
  // more than the file holds fails as truncated instead of allocating its claim up front.
  std::vector<char> buf;
  constexpr std::size_t kChunk = std::size_t{1} << 24;
  while (buf.size() < nbytes) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(nbytes - buf.size(), kChunk));
    std::size_t old = buf.size();
    buf.resize(old + want);
    std::size_t r = read_some(g.f, buf.data() + old, want, name);
    buf.resize(old + r);
    if (r < want)
      fail(name, "truncated data: the header {} promises {} bytes of {} data, the file holds {}", shape_str(shape),
           nbytes, type_name(type), buf.size());
  }
  unsigned char extra;
  if (read_some(g.f, &extra, 1, name) != 0)
    fail(name, "trailing data: the file holds more than the {} bytes its header {} promises", nbytes, shape_str(shape));

  AnyTensor t = AnyTensor::empty(shape, dtype);
  if (nbytes) std::memcpy(t.raw_data(), buf.data(), static_cast<std::size_t>(nbytes));
  if (esize > 1 && std::endian::native == std::endian::little) {
    auto* p = static_cast<char*>(t.raw_data());
    for (std::uint64_t i = 0; i < count; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
  }
  return t;
}

MS_IMPL Tensor<std::uint8_t> read_idx_images(const std::filesystem::path& path) {
  return Tensor<std::uint8_t>(read_idx(path, 0x00000803u));
}

MS_IMPL Tensor<std::uint8_t> read_idx_labels(const std::filesystem::path& path) {
  return Tensor<std::uint8_t>(read_idx(path, 0x00000801u));
}

MS_IMPL Dataset load_idx_dataset(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                                bool normalize, double mean, double std,
                                std::int64_t num_classes) {
  Tensor<std::uint8_t> img = read_idx_images(images_path);
  Tensor<std::uint8_t> lab = read_idx_labels(labels_path);
  MS_CHECK(img.dim() == 3, IOError, "idx: '{}': expected 3 dimensions (N, rows, cols), got {}", images_path.string(),
           shape_str(img.shape()));
  MS_CHECK(lab.dim() == 1, IOError, "idx: '{}': expected 1 dimension (N,), got {}", labels_path.string(),
           shape_str(lab.shape()));
  MS_CHECK(img.shape(0) == lab.shape(0), IOError,
           "idx: image/label count mismatch: '{}' holds {} images but '{}' holds {} labels", images_path.string(),
           img.shape(0), labels_path.string(), lab.shape(0));
  const std::int64_t n = img.shape(0), h = img.shape(1), w = img.shape(2);
  Dataset ds;
  ds.images = AnyTensor::empty(Shape{n, 1, h, w}, DType::f32);
  ds.labels = AnyTensor::empty(Shape{n}, DType::i64);
  const auto* src = static_cast<const std::uint8_t*>(img.raw_data());
  auto* dst = static_cast<float*>(ds.images.raw_data());
  float table[256];
  for (int v = 0; v < 256; ++v) {
    float x = static_cast<float>(v) / 255.0f;
    table[v] = normalize ? static_cast<float>((x - mean) / std) : x;
  }
  for (std::int64_t i = 0; i < img.numel(); ++i) dst[i] = table[src[i]];
  const auto* ls = static_cast<const std::uint8_t*>(lab.raw_data());
  auto* ld = static_cast<std::int64_t*>(ds.labels.raw_data());
  for (std::int64_t i = 0; i < n; ++i) {
    if (num_classes > 0)
      MS_CHECK(ls[i] < num_classes, IOError, "idx: '{}': label {} at index {} is out of range 0..{}",
               labels_path.string(), ls[i], i, num_classes - 1);
    ld[i] = ls[i];
  }
  return ds;
}

MS_IMPL std::optional<std::filesystem::path> find_fashion_mnist() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("MS_FASHION_MNIST_DIR"); env && *env) dirs.emplace_back(env);
  dirs.emplace_back("/usr/share/datasets/fashion-mnist");
  for (auto& d : dirs) {
    std::error_code ec;
    if (std::filesystem::exists(d / "train-images-idx3-ubyte.gz", ec) ||
        std::filesystem::exists(d / "train-images-idx3-ubyte", ec))
      return d;
  }
  return std::nullopt;
}

MS_IMPL Dataset load_fashion_mnist(const std::filesystem::path& dir, bool train, bool normalize) {
  const std::string prefix = train ? "train" : "t10k";
  auto pick = [&](const std::string& base) {
    std::error_code ec;
    auto gz = dir / (base + ".gz");
    if (std::filesystem::exists(gz, ec)) return gz;
    auto plain = dir / base;
    if (std::filesystem::exists(plain, ec)) return plain;
    MS_THROW(IOError, "idx: Fashion-MNIST: neither '{}' nor '{}' exists", gz.string(), plain.string());
  };
  auto images = pick(prefix + "-images-idx3-ubyte");
  auto labels = pick(prefix + "-labels-idx1-ubyte");
  Dataset ds = load_idx_dataset(images, labels, normalize, kFashionMnistMean, kFashionMnistStd, 10);
  MS_CHECK(ds.images.shape(2) == 28 && ds.images.shape(3) == 28, IOError,
           "idx: '{}': Fashion-MNIST images are 28x28, got {}x{}", images.string(), ds.images.shape(2),
           ds.images.shape(3));
  return ds;
}

}  // namespace ms::data
#endif
