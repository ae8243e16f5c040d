#pragma once
// safetensors files (the format of Hugging Face's `safetensors`):
//   8 bytes   little-endian uint64 N, the length of the header
//   N bytes   a JSON object: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
//             "__metadata__": {"key": "value", ...}} (optional), padded with spaces
//   the rest  the byte buffer; tensor data is raw little-endian, row-major, at [b, e)
// dtypes: F32, F64, F16, BF16, I32, I64, U8, BOOL (others, e.g. I8 or F8_E4M3, are
// rejected as unsupported). Like the reference implementation, the reader requires the
// tensors to cover the byte buffer exactly (no gaps, overlaps or trailing bytes).
//
// save_safetensors writes a temporary file next to the destination and renames it into
// place, so a reader never sees a half-written file. load_safetensors validates the file
// and throws ms::IOError naming the path and the problem (truncated file, bad JSON,
// offsets out of range, unknown dtype, ...).
//
// nn::save(module, path) / nn::load(module, path) store a module's state_dict().

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../core/atomic_file.hpp"
#include "../core/linkage.hpp"
#include "../core/tensor.hpp"
#include "module.hpp"

#if MS_IMPL_BODIES  // the format's JSON header
#include <nlohmann/json.hpp>
#endif

namespace ms {

/// Writes tensors (any strides, cpu) to `path` in the safetensors format, atomically
/// (temporary file + rename). `metadata` becomes the "__metadata__" object.
MS_IMPL void save_safetensors(const std::map<std::string, AnyTensor>& tensors, const std::filesystem::path& path,
                              const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of a safetensors file (new contiguous cpu tensors). When `metadata`
/// is given, the "__metadata__" entries are stored there. Throws IOError naming the path
/// and the problem for a missing, truncated or malformed file.
MS_IMPL std::map<std::string, AnyTensor> load_safetensors(const std::filesystem::path& path,
                                                          std::map<std::string, std::string>* metadata = nullptr);

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
namespace detail::safetensors {

/// Headers above this size are rejected (the reference implementation's limit).
inline constexpr std::uint64_t kMaxHeader = 100'000'000;

inline const char* dtype_code(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::b8: return "BOOL";
  }
  return "?";
}

template <class... A>
[[noreturn]] void fail(const std::string& path, fmt::format_string<A...> f, A&&... args) {
  throw IOError(MS_FORMAT("safetensors: '{}': {}", path, fmt::format(f, std::forward<A>(args)...)));
}

/// DType of a safetensors dtype string; IOError for unknown or unsupported ones.
inline DType parse_dtype(const std::string& code, const std::string& tensor, const std::string& path) {
  static const std::pair<const char*, DType> known[] = {{"F32", DType::f32}, {"F64", DType::f64},
                                                        {"F16", DType::f16}, {"BF16", DType::bf16},
                                                        {"I32", DType::i32}, {"I64", DType::i64},
                                                        {"U8", DType::u8},   {"BOOL", DType::b8}};
  for (auto& [c, d] : known)
    if (code == c) return d;
  static const char* other[] = {"I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3",
                                "F6_E3M2", "C64"};
  for (auto* c : other)
    if (code == c) fail(path, "tensor '{}' has dtype {}, which ms does not support", tensor, code);
  fail(path, "tensor '{}' has an unknown dtype '{}'", tensor, code);
}

/// Swaps the bytes of every element (big-endian hosts only).
inline void swap_elements(char* p, std::size_t n, std::size_t esize) {
  if (esize == 1) return;
  for (std::size_t i = 0; i < n; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
}

struct FileCloser {
  std::FILE* f;
  ~FileCloser() {
    if (f) std::fclose(f);
  }
};


struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

/// Parses and validates the header; `data_size` is the size of the byte buffer.
inline std::vector<Entry> parse_header(const std::string& text, std::uint64_t data_size, const std::string& path,
                                       std::map<std::string, std::string>* metadata) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "bad JSON header ({})", e.what());
  }
  if (!j.is_object()) fail(path, "bad header: the JSON header is not an object");
  std::vector<Entry> entries;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "bad header: __metadata__ is not an object");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path, "bad header: __metadata__ value of '{}' is not a string", k);
        if (metadata) (*metadata)[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) fail(path, "bad header: the entry of tensor '{}' is not an object", name);
    if (!v.contains("dtype") || !v["dtype"].is_string())
      fail(path, "bad header: tensor '{}' has no dtype string", name);
    if (!v.contains("shape") || !v["shape"].is_array()) fail(path, "bad header: tensor '{}' has no shape array", name);
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      fail(path, "bad header: tensor '{}' needs data_offsets [begin, end]", name);
    for (auto& [k, x] : v.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        fail(path, "bad header: tensor '{}' has an unknown field '{}'", name, k);
    Entry e;
    e.name = name;
    e.dtype = parse_dtype(v["dtype"].get<std::string>(), name, path);
    const auto& shape = v["shape"];
    if (shape.size() > static_cast<std::size_t>(kMaxDims))
      fail(path, "tensor '{}' has {} dimensions; ms supports at most {}", name, shape.size(), kMaxDims);
    std::uint64_t count = 1;
    bool overflow = false;
    for (auto& d : shape) {
      if (!d.is_number_unsigned()) fail(path, "bad header: the shape of tensor '{}' holds {} (not a size)", name, d.dump());
      std::uint64_t x = d.get<std::uint64_t>();
      if (x > static_cast<std::uint64_t>(INT64_MAX)) fail(path, "tensor '{}' has a dimension {} that is too large", name, x);
      e.shape.push_back(static_cast<std::int64_t>(x));
      if (x != 0 && count > UINT64_MAX / x) overflow = true;
      count *= x;
    }
    for (auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) fail(path, "bad header: the data_offsets of tensor '{}' hold {}", name, o.dump());
    e.begin = v["data_offsets"][0].get<std::uint64_t>();
    e.end = v["data_offsets"][1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      fail(path, "data_offsets [{}, {}] of tensor '{}' are out of range (the data section holds {} bytes)", e.begin,
           e.end, name, data_size);
    const std::uint64_t esize = dtype_size(e.dtype);
    if (overflow || count > UINT64_MAX / esize || e.end - e.begin != count * esize)
      fail(path, "tensor '{}' ({} {}) needs {} bytes but data_offsets [{}, {}] span {}", name,
           v["dtype"].get<std::string>(), shape_str(e.shape), overflow ? std::string("too many") : std::to_string(count * esize),
           e.begin, e.end, e.end - e.begin);
    entries.push_back(std::move(e));
  }
  // The tensors must tile the byte buffer: sorted by offset, each starts where the last ended.
  std::vector<const Entry*> order;
  for (auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t pos = 0;
  for (const Entry* e : order) {
    if (e->begin != pos)
      fail(path, "data_offsets of tensor '{}' start at {}, expected {} (a gap or an overlap in the data)", e->name,
           e->begin, pos);
    pos = e->end;
  }
  if (pos != data_size)
    fail(path, "the data section holds {} bytes but the tensors cover {} (trailing or missing data)", data_size, pos);
  return entries;
}

}  // namespace detail::safetensors

MS_IMPL void save_safetensors(const std::map<std::string, AnyTensor>& tensors, const std::filesystem::path& path,
                              const std::map<std::string, std::string>& metadata) {
  using namespace detail::safetensors;
  const std::string name = path.string();
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (auto& [key, t] : tensors) {
    MS_CHECK(!key.empty() && key != "__metadata__", ValueError, "save_safetensors: '{}': invalid tensor name '{}'",
             name, key);
    MS_CHECK(t.defined(), ValueError, "save_safetensors: '{}': tensor '{}' is undefined", name, key);
    MS_CHECK(t.device().is_cpu(), DeviceError, "save_safetensors: '{}': tensor '{}' is on {}", name, key, t.device());
    header[key] = {{"dtype", dtype_code(t.dtype())},
                   {"shape", t.shape().vec()},
                   {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);

  AtomicFile f(path, "safetensors");
  f.write(len, 8);
  f.write(text);
  std::vector<char> buf;
  for (auto& [key, t] : tensors) {
    const std::size_t esize = dtype_size(t.dtype());
    const char* base = static_cast<const char*>(t.raw_data());
    const bool swap = std::endian::native == std::endian::big;
    if (t.is_contiguous() && !swap) {
      f.write(base, t.nbytes());
      continue;
    }
    buf.clear();
    buf.reserve(t.nbytes());
    ms::detail::for_each_offset(t.shape(), t.strides(), [&](std::int64_t off) {
      const char* p = base + off * static_cast<std::int64_t>(esize);
      buf.insert(buf.end(), p, p + esize);
    });
    if (swap) swap_elements(buf.data(), buf.size() / esize, esize);
    f.write(buf.data(), buf.size());
  }
  f.commit();
}

MS_IMPL std::map<std::string, AnyTensor> load_safetensors(const std::filesystem::path& path,
                                                          std::map<std::string, std::string>* metadata) {
  using namespace detail::safetensors;
  const std::string name = path.string();
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(name, "cannot open the file (no such file)");
  if (!std::filesystem::is_regular_file(status)) fail(name, "not a regular file");
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) fail(name, "cannot open the file ({})", std::strerror(errno));
  FileCloser closer{f};
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(name, "cannot read the file size ({})", ec.message());
  if (size < 8) fail(name, "truncated file ({} bytes; the 8-byte header length is missing)", size);
  unsigned char len[8];
  if (std::fread(len, 1, 8, f) != 8) fail(name, "read error in the header length");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeader) fail(name, "header length {} is larger than the limit of {} bytes", n, kMaxHeader);
  if (n > size - 8) fail(name, "truncated file: the header needs {} bytes, the file holds {} after the length", n, size - 8);
  std::string text(static_cast<std::size_t>(n), '\0');
  if (n && std::fread(text.data(), 1, n, f) != n) fail(name, "read error in the header");
  const std::uint64_t data_start = 8 + n, data_size = size - data_start;
  std::vector<Entry> entries = parse_header(text, data_size, name, metadata);
  std::map<std::string, AnyTensor> out;
  for (auto& e : entries) {
    AnyTensor t = AnyTensor::empty(e.shape, e.dtype);
    const std::uint64_t nbytes = e.end - e.begin;
    if (nbytes) {
      if (!ms::detail::seek_file(f, data_start + e.begin) || std::fread(t.raw_data(), 1, nbytes, f) != nbytes)
        fail(name, "truncated data for tensor '{}' (the file changed or is unreadable)", e.name);
      if (std::endian::native == std::endian::big)
        swap_elements(static_cast<char*>(t.raw_data()), static_cast<std::size_t>(t.numel()), dtype_size(e.dtype));
    }
    if (e.dtype == DType::b8) {
      auto* p = static_cast<unsigned char*>(t.raw_data());
      for (std::int64_t i = 0; i < t.numel(); ++i)
        if (p[i] > 1) fail(name, "tensor '{}' is BOOL but holds the byte {} at element {}", e.name, p[i], i);
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}
#endif  // MS_IMPL_BODIES

namespace nn {

using ms::load_safetensors;
using ms::save_safetensors;

/// Saves module.state_dict() (parameters and buffers) as a safetensors file.
inline void save(const Module& module, const std::filesystem::path& path,
                 const std::map<std::string, std::string>& metadata = {}) {
  save_safetensors(module.state_dict(), path, metadata);
}

/// Loads a safetensors file into the module's parameters and buffers, in place
/// (load_state_dict; strict: every key must match). File problems throw IOError; key,
/// shape and dtype mismatches the errors of load_state_dict, with the path prefixed.
inline void load(Module& module, const std::filesystem::path& path, bool strict = true) {
  StateDict sd = load_safetensors(path);
  try {
    module.load_state_dict(sd, strict);
  } catch (const ShapeError& e) {
    throw ShapeError(MS_FORMAT("'{}': {}", path.string(), e.message()));
  } catch (const DTypeError& e) {
    throw DTypeError(MS_FORMAT("'{}': {}", path.string(), e.message()));
  } catch (const ValueError& e) {
    throw ValueError(MS_FORMAT("'{}': {}", path.string(), e.message()));
  }
}

}  // namespace nn
}  // namespace ms
