#pragma once
// NumPy .npy files: ms::save_npy (atomic: a temporary file in the same directory,
// then a rename) and ms::load_npy (format versions 1.0, 2.0 and 3.0; C and Fortran
// order; little- and big-endian; float16/32/64, int32/64, uint8, bool). The loader
// treats every byte of the file as untrusted: each malformed file is an ms::IOError
// naming the path and the problem, never a crash or a read past the data.
// Must not know about ops (a non-contiguous tensor is written by walking its strides).

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "atomic_file.hpp"
#include "linkage.hpp"
#include "tensor.hpp"

namespace ms {

/// Writes `t` to `path` as a .npy file that numpy.load reads (format 1.0, or 2.0 when the
/// header would exceed 65535 bytes). Non-contiguous tensors are written in logical (C)
/// order. The file appears atomically: readers see the old file or the complete new one.
/// Throws DTypeError for bfloat16 (NumPy has no such type), DeviceError for a tensor not
/// on the cpu, IOError when the file cannot be written.
MS_IMPL void save_npy(const std::filesystem::path& path, const AnyTensor& t);

/// Reads a .npy file. A Fortran-order file becomes a tensor with column-major strides
/// (no copy; call contiguous() for C order). Throws IOError for a missing or malformed file.
MS_IMPL AnyTensor load_npy(const std::filesystem::path& path);

/// Reads a .npy file holding elements of type T; DTypeError when it holds another dtype.
template <Element T>
Tensor<T> load_npy(const std::filesystem::path& path) {
  AnyTensor t = load_npy(path);
  MS_CHECK(t.dtype() == dtype_v<T>, DTypeError, "load_npy: '{}' holds {} data, not {}", path.string(), t.dtype(),
           dtype_v<T>);
  return Tensor<T>(t);
}

/// Parses .npy bytes held in memory (`name` is used in error messages). The same checks
/// as load_npy; meant for fuzzing and for .npy data embedded in other containers.
MS_IMPL AnyTensor load_npy_from_memory(const void* data, std::size_t size, std::string_view name = "<memory>");

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
// ---- implementation -------------------------------------------------------------------------

namespace detail::npy {

inline constexpr char kMagic[] = "\x93NUMPY";
inline constexpr std::size_t kMagicLen = 6;
inline constexpr std::size_t kAlign = 64;                 // NumPy aligns the data to 64 bytes
inline constexpr std::size_t kGrowthAxisMaxDigits = 21;   // NumPy pads the header for in-place growth
inline constexpr bool kLittleHost = std::endian::native == std::endian::little;

/// Throws "load_npy: '<name>': <problem>".
template <class... A>
[[noreturn]] void fail(std::string_view name, fmt::format_string<A...> f, A&&... args) {
  throw IOError(MS_FORMAT("load_npy: '{}': {}", name, fmt::format(f, std::forward<A>(args)...)));
}

/// The descr string NumPy uses for a dtype on this host ("<f4", "|u1", ...).
inline std::string descr_of(DType d) {
  const char order = dtype_size(d) == 1 ? '|' : (kLittleHost ? '<' : '>');
  switch (d) {
    case DType::f32: return std::string(1, order) + "f4";
    case DType::f64: return std::string(1, order) + "f8";
    case DType::i32: return std::string(1, order) + "i4";
    case DType::i64: return std::string(1, order) + "i8";
    case DType::u8: return "|u1";
    case DType::b8: return "|b1";
    case DType::f16: return std::string(1, order) + "f2";
    case DType::bf16: break;
  }
  MS_THROW(DTypeError, "save_npy: NumPy has no {} type", d);
}

/// The whole header block (magic, version, length, dict, padding, newline), byte for byte
/// what numpy.save writes for the same dtype and shape.
inline std::string make_header(DType d, const Shape& shape) {
  std::string dict = MS_FORMAT("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(d), shape_str(shape));
  if (shape.rank() > 0) dict.append(kGrowthAxisMaxDigits - std::min(kGrowthAxisMaxDigits, MS_FORMAT("{}", shape[0]).size()), ' ');
  auto wrap = [&](int major, std::size_t len_bytes) {
    std::size_t hlen = dict.size() + 1;  // + '\n'
    std::size_t pad = kAlign - (hlen + kMagicLen + 2 + len_bytes) % kAlign;
    std::size_t total = hlen + pad;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((total >> (8 * i)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return std::pair(out, total);
  };
  auto [v1, total1] = wrap(1, 2);
  if (total1 <= 0xffff) return v1;
  return wrap(2, 4).first;
}

/// Printable excerpt of header text for error messages (trailing padding dropped).
inline std::string excerpt(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.remove_suffix(1);
  std::string out;
  for (char c : s.substr(0, std::min<std::size_t>(s.size(), 80))) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) out += c;
    else out += MS_FORMAT("\\x{:02x}", u);
  }
  if (s.size() > 80) out += "...";
  return out;
}

/// What the header dict says.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> dims;
  bool has_descr = false, has_fortran = false, has_shape = false;
};

/// Recursive-descent parser for the Python dict literal of a .npy header. It accepts only
/// what the format allows (string keys; a string, a bool and a tuple of ints as values), so
/// it needs no recursion and has no depth to blow up under fuzzing.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : s_(text), name_(name) {}

  Header parse() {
    Header h;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') { ++i_; break; }
      std::string key = string_lit();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() == '[') fail(name_, "unsupported descr: structured dtypes (a list of fields) are not supported");
        h.descr = string_lit();
        h.has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = bool_lit();
        h.has_fortran = true;
      } else if (key == "shape") {
        h.dims = int_tuple();
        h.has_shape = true;
      } else {
        fail(name_, "unexpected key '{}' in the header", excerpt(key));
      }
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == '}') { ++i_; break; }
      error("expected ',' or '}'");
    }
    ws();
    if (i_ != s_.size()) error("unexpected text after the dict");
    if (!h.has_descr) fail(name_, "the header has no 'descr' key");
    if (!h.has_fortran) fail(name_, "the header has no 'fortran_order' key");
    if (!h.has_shape) fail(name_, "the header has no 'shape' key");
    return h;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail(name_, "cannot parse the header: {} at offset {} in \"{}\"", what, i_, excerpt(s_));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c || i_ >= s_.size()) error(MS_FORMAT("expected '{}'", c));
    ++i_;
  }
  std::string string_lit() {
    char q = peek();
    if (i_ >= s_.size() || (q != '\'' && q != '"')) error("expected a quoted string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;  // keep the escaped character as is
      out += s_[i_++];
    }
    if (i_ >= s_.size()) error("unterminated string");
    ++i_;
    return out;
  }
  bool bool_lit() {
    if (s_.substr(i_, 4) == "True") { i_ += 4; return true; }
    if (s_.substr(i_, 5) == "False") { i_ += 5; return false; }
    error("expected True or False for 'fortran_order'");
  }
  std::vector<std::int64_t> int_tuple() {
    if (peek() != '(' || i_ >= s_.size()) error("expected a tuple for 'shape'");
    ++i_;
    std::vector<std::int64_t> dims;
    for (;;) {
      ws();
      if (peek() == ')' && i_ < s_.size()) { ++i_; break; }
      dims.push_back(int_lit());
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == ')' && i_ < s_.size()) { ++i_; break; }
      error("expected ',' or ')' in the shape");
    }
    return dims;
  }
  std::int64_t int_lit() {
    std::size_t start = i_;
    bool neg = false;
    if (peek() == '-') { neg = true; ++i_; }
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') error("expected an integer in the shape");
    std::uint64_t v = 0;
    bool overflow = false;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      std::uint64_t digit = static_cast<std::uint64_t>(s_[i_++] - '0');
      if (v > (static_cast<std::uint64_t>(INT64_MAX) - digit) / 10) overflow = true;
      else v = v * 10 + digit;
    }
    if (peek() == 'L' && i_ < s_.size()) ++i_;  // Python 2 long suffix, written by old NumPy
    if (overflow) fail(name_, "dimension {} in the shape is too large", excerpt(s_.substr(start, i_ - start)));
    return neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  }

  std::string_view s_;
  std::string_view name_;
  std::size_t i_ = 0;
};

/// Everything needed to read the data, checked against the file size.
struct Layout {
  DType dtype = DType::f32;
  bool swap = false;
  bool fortran = false;
  Shape shape;
  std::size_t data_offset = 0;
  std::size_t nbytes = 0;
};

inline std::string dims_str(const std::vector<std::int64_t>& d) {
  if (d.size() == 1) return MS_FORMAT("({},)", d[0]);
  return MS_FORMAT("({})", ::ms::detail::join_text(d.begin(), d.end(), ", "));
}

/// Maps a descr ("<f4", ">i8", "|b1", ...) to a dtype and whether its bytes need swapping.
inline std::pair<DType, bool> parse_descr(const std::string& descr, std::string_view name) {
  auto unsupported = [&]() {
    fail(name, "unsupported dtype descr '{}' (ms reads f2, f4, f8, i4, i8, u1 and b1, little- or big-endian)",
         excerpt(descr));
  };
  std::string_view s = descr;
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    order = s[0];
    s.remove_prefix(1);
  }
  DType d;
  if (s == "f2") d = DType::f16;
  else if (s == "f4") d = DType::f32;
  else if (s == "f8") d = DType::f64;
  else if (s == "i4") d = DType::i32;
  else if (s == "i8") d = DType::i64;
  else if (s == "u1") d = DType::u8;
  else if (s == "b1" || s == "?") d = DType::b8;
  else unsupported();
  if (order == '|' && dtype_size(d) != 1) unsupported();  // multi-byte data needs a byte order
  bool file_little = order == '<' || (order == '=' && kLittleHost);
  bool swap = dtype_size(d) > 1 && order != '|' && file_little != kLittleHost;
  return {d, swap};
}

/// Parses the preamble and header from the first bytes of a file of `file_size` bytes.
/// `read(offset, n, dst)` fills dst with n bytes at offset (the caller checked they exist).
template <class Read>
Layout parse_layout(std::uint64_t file_size, Read&& read, std::string_view name) {
  unsigned char pre[12] = {};
  std::size_t have = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, sizeof(pre)));
  read(0, have, pre);
  if (have < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0)
    fail(name, "not a .npy file (missing the \\x93NUMPY magic string)");
  if (have < 8) fail(name, "truncated header (the file has {} bytes)", file_size);
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3) fail(name, "unsupported .npy format version {}.{}", major, minor);
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t pre_len = kMagicLen + 2 + len_bytes;
  if (have < pre_len) fail(name, "truncated header (the file has {} bytes)", file_size);
  std::uint64_t hlen = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) hlen |= static_cast<std::uint64_t>(pre[8 + i]) << (8 * i);
  if (hlen > file_size - pre_len)
    fail(name, "truncated header (it declares {} bytes after the {}-byte preamble; the file has {})", hlen, pre_len,
         file_size - pre_len);
  std::string text(static_cast<std::size_t>(hlen), '\0');
  read(pre_len, text.size(), text.data());
  if (major < 3) {
    // Versions 1 and 2 are latin-1 text; the dict itself is pure ASCII, so reject other bytes plainly.
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) fail(name, "cannot parse the header: it is not ASCII text (\"{}\")", excerpt(text));
  }
  Header h = HeaderParser(text, name).parse();

  Layout L;
  std::tie(L.dtype, L.swap) = parse_descr(h.descr, name);
  L.fortran = h.fortran_order;
  if (h.dims.size() > static_cast<std::size_t>(kMaxDims))
    fail(name, "shape {} has {} dimensions; ms supports at most {}", dims_str(h.dims), h.dims.size(), kMaxDims);
  std::int64_t n = 1;
  for (auto d : h.dims) {
    if (d < 0) fail(name, "negative dimension {} in shape {}", d, dims_str(h.dims));
  }
  for (auto d : h.dims) {
    if (__builtin_mul_overflow(n, d, &n)) fail(name, "shape {} has too many elements", dims_str(h.dims));
  }
  std::int64_t nbytes = 0;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(dtype_size(L.dtype)), &nbytes))
    fail(name, "shape {} has too many elements", dims_str(h.dims));
  L.shape = Shape(h.dims);
  L.data_offset = pre_len + static_cast<std::size_t>(hlen);
  L.nbytes = static_cast<std::size_t>(nbytes);
  const std::uint64_t avail = file_size - L.data_offset;
  if (avail != static_cast<std::uint64_t>(nbytes))
    fail(name, "data size mismatch: shape {} of {} needs {} bytes, the file has {} after the header", dims_str(h.dims),
         L.dtype, nbytes, avail);
  return L;
}

/// Allocates the tensor a layout describes (column-major strides for Fortran order).
inline AnyTensor allocate(const Layout& L) {
  AnyTensor t = AnyTensor::empty(L.shape, L.dtype);
  if (L.fortran) {
    Shape st = Shape::filled(L.shape.rank(), 1);
    std::int64_t acc = 1;
    for (int i = 0; i < L.shape.rank(); ++i) {
      st[i] = acc;
      acc *= std::max<std::int64_t>(L.shape[i], 1);
    }
    t.impl()->strides = st;
  }
  return t;
}

/// Byte order and bool normalization after the raw bytes are in place.
inline void fix_data(const Layout& L, void* data) {
  const std::size_t esize = dtype_size(L.dtype);
  const std::size_t n = L.nbytes / esize;
  auto* p = static_cast<unsigned char*>(data);
  if (L.swap) {
    for (std::size_t i = 0; i < n; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
  }
  if (L.dtype == DType::b8) {  // a C++ bool must hold 0 or 1; NumPy reads any nonzero byte as True
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
}

/// Closes a FILE* on scope exit.
struct FileCloser {
  std::FILE* f;
  ~FileCloser() {
    if (f) std::fclose(f);
  }
};

inline std::string errno_str(int e) { return std::strerror(e); }


}  // namespace detail::npy

MS_IMPL AnyTensor load_npy_from_memory(const void* data, std::size_t size, std::string_view name) {
  using namespace detail::npy;
  const auto* bytes = static_cast<const unsigned char*>(data);
  MS_CHECK(bytes != nullptr || size == 0, ValueError, "load_npy_from_memory: data is null");
  Layout L = parse_layout(size, [&](std::size_t off, std::size_t n, void* dst) { if (n) std::memcpy(dst, bytes + off, n); }, name);
  AnyTensor t = allocate(L);
  if (L.nbytes) std::memcpy(t.raw_data(), bytes + L.data_offset, L.nbytes);
  fix_data(L, t.raw_data());
  return t;
}

MS_IMPL AnyTensor load_npy(const std::filesystem::path& path) {
  using namespace detail::npy;
  const std::string name = path.string();
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    fail(name, "cannot open the file ({})", ec ? ec.message() : errno_str(ENOENT));
  if (!std::filesystem::is_regular_file(status)) fail(name, "not a regular file");
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) fail(name, "cannot open the file ({})", errno_str(errno));
  FileCloser closer{f};
  std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(name, "cannot read the file size ({})", ec.message());
  auto read = [&](std::uint64_t off, std::size_t n, void* dst) {
    if (n == 0) return;
    if (!ms::detail::seek_file(f, off) || std::fread(dst, 1, n, f) != n)
      fail(name, "read error at byte {} (the file changed or is unreadable)", off);
  };
  Layout L = parse_layout(size, read, name);
  AnyTensor t = allocate(L);
  if (L.nbytes && (!ms::detail::seek_file(f, L.data_offset) || std::fread(t.raw_data(), 1, L.nbytes, f) != L.nbytes))
    fail(name, "truncated data (the file shrank while it was read)");
  fix_data(L, t.raw_data());
  return t;
}

MS_IMPL void save_npy(const std::filesystem::path& path, const AnyTensor& t) {
  using namespace detail::npy;
  const std::string name = path.string();
  MS_CHECK(t.defined(), ValueError, "save_npy: '{}': the tensor is undefined", name);
  MS_CHECK(t.dtype() != DType::bf16, DTypeError,
           "save_npy: '{}': NumPy has no bfloat16 type; convert the tensor to float32 first", name);
  MS_CHECK(t.device().is_cpu(), DeviceError, "save_npy: '{}': the tensor is on {}, copy it to the cpu first", name,
           t.device());
  const std::string header = make_header(t.dtype(), t.shape());

  AtomicFile f(path, "save_npy");
  f.write(header);
  const auto* base = static_cast<const char*>(t.raw_data());
  const std::size_t esize = dtype_size(t.dtype());
  if (t.is_contiguous()) {
    f.write(base, t.nbytes());
  } else {
    // Gather into a bounded buffer in logical order, so a big strided view costs no big copy.
    std::vector<char> buf;
    buf.reserve(std::min<std::size_t>(t.nbytes(), std::size_t{1} << 20));
    detail::for_each_offset(t.shape(), t.strides(), [&](std::int64_t off) {
      buf.insert(buf.end(), base + off * static_cast<std::int64_t>(esize), base + (off + 1) * static_cast<std::int64_t>(esize));
      if (buf.size() >= (std::size_t{1} << 20)) {
        f.write(buf.data(), buf.size());
        buf.clear();
      }
    });
    f.write(buf.data(), buf.size());
  }
  f.commit();
}

#endif

}  // namespace ms
