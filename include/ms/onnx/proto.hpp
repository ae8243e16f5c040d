#pragma once
// ONNX protobuf messages and ms tensors: the loader's typed errors, the dtype table, TensorProto
// <-> AnyTensor (raw or typed fields, external data files) and reading a ModelProto from a file
// with every defect reported as a typed error naming the file. Nothing here knows about graphs.
// Needs Debian's libonnx / protobuf: link the ms::onnx CMake target.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>

#include "../core/error.hpp"
#include "../core/tensor.hpp"

namespace ms::onnx {

namespace pb = ::ONNX_NAMESPACE;

/// A model that ms cannot run: an op (or attribute, dtype) without an ms equivalent. The
/// message names the node, its op type and opset, and the reason; the fields carry them too.
class UnsupportedError : public NotImplementedError {
 public:
  UnsupportedError(std::string node, std::string op_type, int opset, std::string reason)
      : NotImplementedError(MS_FORMAT("onnx: node '{}' ({}, opset {}): {}", node, op_type, opset, reason)),
        node_(std::move(node)), op_type_(std::move(op_type)), opset_(opset), reason_(std::move(reason)) {}
  const std::string& node() const noexcept { return node_; }
  const std::string& op_type() const noexcept { return op_type_; }
  int opset() const noexcept { return opset_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string node_, op_type_;
  int opset_;
  std::string reason_;
};

/// A node whose input must be known when the model is loaded (a Reshape's shape, a Slice's
/// starts) but is a graph input: give its value with LoadOptions::input_values.
class ConstantRequired : public UnsupportedError {
 public:
  ConstantRequired(std::string node, std::string op_type, int opset, std::string input)
      : UnsupportedError(std::move(node), std::move(op_type), opset,
                         MS_FORMAT("input '{}' must be a constant (an initializer, a Constant node or a value "
                                     "given in LoadOptions::input_values)",
                                     input)),
        input_(std::move(input)) {}
  const std::string& input() const noexcept { return input_; }

 private:
  std::string input_;
};

/// A malformed model file (truncated, corrupted, missing external data, a cycle, a tensor whose
/// data disagrees with its shape): an IOError whose message starts with the file's name.
[[noreturn]] inline void bad_model(const std::string& file, const std::string& what) {
  MS_THROW(IOError, "onnx: '{}': {}", file, what);
}

/// The ms dtype of an ONNX element type, or nullopt (int8, uint16, string, complex, ...).
inline std::optional<DType> dtype_from_onnx(int t) {
  switch (t) {
    case pb::TensorProto::FLOAT: return DType::f32;
    case pb::TensorProto::DOUBLE: return DType::f64;
    case pb::TensorProto::INT32: return DType::i32;
    case pb::TensorProto::INT64: return DType::i64;
    case pb::TensorProto::UINT8: return DType::u8;
    case pb::TensorProto::BOOL: return DType::b8;
    case pb::TensorProto::FLOAT16: return DType::f16;
    case pb::TensorProto::BFLOAT16: return DType::bf16;
    default: return std::nullopt;
  }
}
/// The ONNX element type of an ms dtype.
inline int dtype_to_onnx(DType d) {
  switch (d) {
    case DType::f32: return pb::TensorProto::FLOAT;
    case DType::f64: return pb::TensorProto::DOUBLE;
    case DType::i32: return pb::TensorProto::INT32;
    case DType::i64: return pb::TensorProto::INT64;
    case DType::u8: return pb::TensorProto::UINT8;
    case DType::b8: return pb::TensorProto::BOOL;
    case DType::f16: return pb::TensorProto::FLOAT16;
    case DType::bf16: return pb::TensorProto::BFLOAT16;
  }
  return pb::TensorProto::UNDEFINED;
}
/// "float", "int8", "string": the ONNX name of an element type, for messages.
inline std::string onnx_type_name(int t) {
  if (!pb::TensorProto_DataType_IsValid(t)) return MS_FORMAT("type {}", t);
  std::string s = pb::TensorProto_DataType_Name(static_cast<pb::TensorProto_DataType>(t));
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// Thrown by to_tensor for an element type ms has no dtype for (the caller adds the node).
class UnsupportedDType : public NotImplementedError {
 public:
  explicit UnsupportedDType(int t)
      : NotImplementedError(MS_FORMAT("onnx: element type {} is not supported", onnx_type_name(t))), type_(t) {}
  int type() const noexcept { return type_; }

 private:
  int type_;
};

namespace detail {

template <class T, class Src>
void copy_field(AnyTensor& t, const Src& field) {
  T* p = static_cast<T*>(t.raw_data());
  for (int i = 0; i < field.size(); ++i) p[i] = static_cast<T>(field.Get(i));
}

/// Reads `length` bytes at `offset` of an external data file, next to the model.
inline std::string read_external(const std::string& file, const std::filesystem::path& base_dir,
                                 const pb::TensorProto& tp) {
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      bad_model(file, MS_FORMAT("tensor '{}': external data {} \"{}\" is not a number", tp.name(), kv.key(),
                                  kv.value()));
    }
  }
  if (location.empty()) bad_model(file, MS_FORMAT("tensor '{}': external data without a location", tp.name()));
  const std::filesystem::path rel(location);
  if (rel.is_absolute() || rel.lexically_normal().string().rfind("..", 0) == 0)
    bad_model(file, MS_FORMAT("tensor '{}': external data location '{}' is outside the model's folder", tp.name(),
                                location));
  const std::filesystem::path p = base_dir / rel;
  std::ifstream in(p, std::ios::binary);
  if (!in) bad_model(file, MS_FORMAT("tensor '{}': external data file '{}' cannot be opened", tp.name(), p.string()));
  in.seekg(0, std::ios::end);
  const std::int64_t size = static_cast<std::int64_t>(in.tellg());
  if (offset < 0 || offset > size)
    bad_model(file, MS_FORMAT("tensor '{}': external data offset {} is beyond the end of '{}' ({} bytes)",
                                tp.name(), offset, p.string(), size));
  if (length < 0) length = size - offset;
  if (length > size - offset)
    bad_model(file, MS_FORMAT("tensor '{}': external data '{}' has {} bytes after offset {}, {} are declared",
                                tp.name(), p.string(), size - offset, offset, length));
  std::string bytes(static_cast<std::size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) bad_model(file, MS_FORMAT("tensor '{}': reading external data '{}' failed", tp.name(), p.string()));
  return bytes;
}

}  // namespace detail

/// The tensor a TensorProto holds, as a new host tensor. `file` names the model in errors;
/// `base_dir` is where external data files are looked up. Throws IOError when the data does not
/// match the declared shape, UnsupportedDType for element types without an ms dtype.
inline AnyTensor to_tensor(const pb::TensorProto& tp, const std::string& file = "<memory>",
                           const std::filesystem::path& base_dir = {}) {
  std::vector<std::int64_t> dims;
  std::uint64_t n = 1;
  for (auto d : tp.dims()) {
    if (d < 0) bad_model(file, MS_FORMAT("tensor '{}' has a negative dimension {}", tp.name(), d));
    if (d > 0 && n > (std::uint64_t{1} << 40) / static_cast<std::uint64_t>(d))
      bad_model(file, MS_FORMAT("tensor '{}' is too large", tp.name()));
    n *= static_cast<std::uint64_t>(d);
    dims.push_back(d);
  }
  const Shape shape(dims);
  auto dt = dtype_from_onnx(tp.data_type());
  if (!dt) {
    if (tp.data_type() == pb::TensorProto::UNDEFINED || !pb::TensorProto_DataType_IsValid(tp.data_type()))
      bad_model(file, MS_FORMAT("tensor '{}' has no valid element type ({})", tp.name(), tp.data_type()));
    throw UnsupportedDType(tp.data_type());
  }
  // Sizes are checked before anything is allocated: a corrupted shape must not allocate.
  const std::size_t want = static_cast<std::size_t>(n) * dtype_size(*dt);
  auto mismatch = [&](std::size_t have, const char* unit) {
    bad_model(file, MS_FORMAT("tensor '{}' declares shape {} of {} ({} elements) but holds {} {}", tp.name(),
                                shape_str(shape), onnx_type_name(tp.data_type()), n, have, unit));
  };
  const bool external = tp.data_location() == pb::TensorProto::EXTERNAL;
  if (external || tp.has_raw_data()) {
    std::string ext;
    const std::string& raw = external ? (ext = detail::read_external(file, base_dir, tp)) : tp.raw_data();
    if (raw.size() != want) mismatch(raw.size(), "bytes");
    AnyTensor t = AnyTensor::empty(shape, *dt);
    if (want) std::memcpy(t.raw_data(), raw.data(), want);
    if (*dt == DType::b8)  // any nonzero byte is true; ms bools must be 0 or 1
      for (std::size_t i = 0; i < want; ++i) static_cast<std::uint8_t*>(t.raw_data())[i] = raw[i] != 0;
    return t;
  }
  auto check = [&](int have) {
    if (static_cast<std::uint64_t>(have) != n) mismatch(static_cast<std::size_t>(have), "values");
  };
  int have = 0;
  switch (*dt) {
    case DType::f32: have = tp.float_data_size(); break;
    case DType::f64: have = tp.double_data_size(); break;
    case DType::i64: have = tp.int64_data_size(); break;
    default: have = tp.int32_data_size(); break;
  }
  check(have);
  AnyTensor t = AnyTensor::empty(shape, *dt);
  switch (*dt) {
    case DType::f32: check(tp.float_data_size()); detail::copy_field<float>(t, tp.float_data()); break;
    case DType::f64: check(tp.double_data_size()); detail::copy_field<double>(t, tp.double_data()); break;
    case DType::i64: check(tp.int64_data_size()); detail::copy_field<std::int64_t>(t, tp.int64_data()); break;
    case DType::i32: check(tp.int32_data_size()); detail::copy_field<std::int32_t>(t, tp.int32_data()); break;
    case DType::u8: check(tp.int32_data_size()); detail::copy_field<std::uint8_t>(t, tp.int32_data()); break;
    case DType::b8: {
      check(tp.int32_data_size());
      bool* p = static_cast<bool*>(t.raw_data());
      for (int i = 0; i < tp.int32_data_size(); ++i) p[i] = tp.int32_data(i) != 0;
      break;
    }
    case DType::f16:
    case DType::bf16: {  // the 16 bits of each value sit in int32_data
      check(tp.int32_data_size());
      auto* p = static_cast<std::uint16_t*>(t.raw_data());
      for (int i = 0; i < tp.int32_data_size(); ++i) p[i] = static_cast<std::uint16_t>(tp.int32_data(i));
      break;
    }
  }
  return t;
}

/// A TensorProto holding `t` (raw little-endian data).
inline pb::TensorProto from_tensor(const AnyTensor& t, const std::string& name = {}) {
  pb::TensorProto tp;
  tp.set_name(name);
  tp.set_data_type(dtype_to_onnx(t.dtype()));
  for (auto d : t.shape()) tp.add_dims(d);
  AnyTensor c = t;
  if (!c.is_contiguous()) {
    c = AnyTensor::empty(t.shape(), t.dtype());
    // Element by element through the strides; exporters hand contiguous tensors in practice.
    const std::size_t es = dtype_size(t.dtype());
    std::vector<std::int64_t> idx(static_cast<std::size_t>(t.dim()), 0);
    const char* base = static_cast<const char*>(t.raw_data());
    char* out = static_cast<char*>(c.raw_data());
    for (std::int64_t k = 0; k < t.numel(); ++k) {
      std::int64_t off = 0;
      for (int a = 0; a < t.dim(); ++a) off += idx[a] * t.strides()[a];
      std::memcpy(out + k * es, base + off * static_cast<std::int64_t>(es), es);
      for (int a = t.dim() - 1; a >= 0; --a) {
        if (++idx[a] < t.shape()[a]) break;
        idx[a] = 0;
      }
    }
  }
  tp.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
  return tp;
}

/// Reads a TensorProto file (the suite's input_0.pb, output_0.pb).
inline AnyTensor load_tensor_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_model(path.string(), "cannot be opened");
  pb::TensorProto tp;
  if (!tp.ParseFromIstream(&in)) bad_model(path.string(), "is not a valid ONNX TensorProto (truncated or corrupted)");
  return to_tensor(tp, path.string(), path.parent_path());
}

/// Parses a model from bytes; `file` names it in errors.
inline pb::ModelProto parse_model(const std::string& bytes, const std::string& file) {
  pb::ModelProto m;
  if (bytes.empty()) bad_model(file, "is empty");
  if (!m.ParseFromString(bytes)) bad_model(file, "is not a valid ONNX model (truncated or corrupted protobuf)");
  if (!m.has_graph()) bad_model(file, "has no graph (truncated, or not an ONNX model)");
  return m;
}

/// Reads and parses a model file.
inline pb::ModelProto read_model(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_model(path.string(), "cannot be opened");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_model(bytes, path.string());
}

}  // namespace ms::onnx
