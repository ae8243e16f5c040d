#pragma once
// Freezing a captured graph for inference: ms::freeze() writes the graph, its parameters
// and its constants to one file, atomically; ms::load_frozen() reads it back into a Graph,
// checking everything it reads (a corrupted, truncated or foreign file gives ms::IOError,
// never a crash). Compiling and running a loaded graph is inference.hpp's job;
// this header knows graphs and the registry only.
//
// File format (version 1). The file is a valid safetensors file, so any safetensors
// reader sees the weights:
//   8 bytes    little-endian uint64 N, the length of the header
//   N bytes    JSON header, padded with spaces so that the data starts at a multiple of 64:
//                "__metadata__": {"format": "ms.frozen", "ms.format_version": "1",
//                                 "ms.graph": "<graph JSON>", "ms.graph_crc32": "<decimal>",
//                                 "ms.data_crc32": "<decimal>", ...user metadata}
//                "<tensor>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}
//                "__pad.<k>": U8 filler tensors that keep every tensor 64-byte aligned
//   the rest   tensor data, raw little-endian, row-major; each tensor starts at a multiple
//              of 64 bytes from the start of the file
// The graph JSON (docs/guide.md#frozen-model-format) lists values and nodes in topological order:
//   {"values": [{"kind": "input"|"param"|"const"|"node", "name", "dtype", "shape", "tensor"}],
//    "nodes": [{"op", "inputs": [value ids], "outputs": [value ids], "attrs": [[key, tag, value]]}],
//    "inputs": [ids], "params": [ids], "outputs": [ids]}

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../core/atomic_file.hpp"
#include "../core/linkage.hpp"
#include "../ops/views.hpp"
#include "graph.hpp"

#include <zlib.h>

#if MS_IMPL_BODIES  // the format's JSON header
#include <nlohmann/json.hpp>
#endif

namespace ms {

/// The version of the frozen-model format this build writes and reads.
inline constexpr int kFrozenFormatVersion = 1;

/// Extra key/value strings stored in the file's metadata (e.g. {"model": "lenet"}).
struct FreezeOptions {
  std::map<std::string, std::string> metadata;
};

/// Serializes `g` (a captured graph, before compile: fused nodes cannot be saved) with its
/// parameters and constants into the bytes of a frozen-model file.
MS_IMPL std::string freeze_to_bytes(const graph::Graph& g, const FreezeOptions& opt = {});
/// Writes `g` to `path` atomically (a temporary file next to it, then a rename).
MS_IMPL void freeze(const graph::Graph& g, const std::filesystem::path& path, const FreezeOptions& opt = {});
/// Reads a frozen model. Parameters and constants are views into one 64-byte aligned
/// buffer holding the file (no per-tensor copy). Throws IOError on any problem.
MS_IMPL graph::Graph load_frozen(const std::filesystem::path& path,
                                std::map<std::string, std::string>* metadata = nullptr);
/// Same, from bytes in memory (`name` is used in error messages).
MS_IMPL graph::Graph load_frozen_from_memory(const void* data, std::size_t size, std::string_view name = "<memory>",
                                            std::map<std::string, std::string>* metadata = nullptr);

// ---- implementation ---------------------------------------------------------------------------

namespace detail::frozen {
/// CRC-32 (zlib) of n bytes: the frozen format's checksums.
inline std::uint32_t crc32_of(const char* p, std::size_t n) {
  uLong c = ::crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    c = ::crc32(c, reinterpret_cast<const Bytef*>(p), chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}
}  // namespace detail::frozen

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
namespace detail::frozen {
inline constexpr std::uint64_t kAlign = 64;
inline constexpr std::uint64_t kMaxHeader = 100'000'000;
inline constexpr std::size_t kMaxItems = 1'000'000;  ///< values or nodes in one graph

inline const char* st_code(DType d) {
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
inline bool st_dtype(const std::string& code, DType& out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (code == st_code(static_cast<DType>(i))) {
      out = static_cast<DType>(i);
      return true;
    }
  return false;
}
inline bool dtype_by_name(const std::string& name, DType& out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == name) {
      out = static_cast<DType>(i);
      return true;
    }
  return false;
}

using json = nlohmann::json;

inline json attr_to_json(const std::string& key, const ops::AttrValue& v) {
  return std::visit(
      [&](const auto& x) -> json {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::int64_t>) return json::array({key, "i", x});
        else if constexpr (std::is_same_v<X, double>) return json::array({key, "f", MS_FORMAT("{}", x)});
        else if constexpr (std::is_same_v<X, bool>) return json::array({key, "b", x});
        else if constexpr (std::is_same_v<X, DType>) return json::array({key, "dtype", std::string(dtype_name(x))});
        else if constexpr (std::is_same_v<X, ops::IntList>) return json::array({key, "ints", x});
        else return json::array({key, "s", x});
      },
      v);
}

inline json meta_json(const ops::TensorMeta& m) {
  return json{{"dtype", std::string(dtype_name(m.dtype))}, {"shape", m.shape.vec()}};
}

/// Problems while loading: always IOError, prefixed with the file's name.
[[noreturn]] inline void fail(std::string_view name, const std::string& what) {
  MS_THROW(IOError, "load_frozen: '{}': {}", name, what);
}

/// Typed accessors that turn a malformed document into an IOError.
struct Reader {
  std::string_view file;
  const json& field(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) fail(file, MS_FORMAT("{} must be a JSON object", where));
    auto it = obj.find(key);
    if (it == obj.end()) fail(file, MS_FORMAT("{} has no \"{}\"", where, key));
    return *it;
  }
  std::int64_t integer(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) fail(file, MS_FORMAT("{} must be an integer", where));
    return v.get<std::int64_t>();
  }
  const std::string& string(const json& v, const std::string& where) const {
    if (!v.is_string()) fail(file, MS_FORMAT("{} must be a string", where));
    return v.get_ref<const std::string&>();
  }
  const json& array(const json& v, const std::string& where) const {
    if (!v.is_array()) fail(file, MS_FORMAT("{} must be an array", where));
    return v;
  }
  Shape shape(const json& v, const std::string& where) const {
    array(v, where);
    if (v.size() > static_cast<std::size_t>(kMaxDims))
      fail(file, MS_FORMAT("{} has {} dimensions (at most {})", where, v.size(), kMaxDims));
    std::vector<std::int64_t> dims;
    std::uint64_t n = 1;
    for (auto& d : v) {
      std::int64_t x = integer(d, where);
      if (x < 0) fail(file, MS_FORMAT("{} has a negative dimension {}", where, x));
      if (x > 0 && n > (std::uint64_t{1} << 48) / static_cast<std::uint64_t>(x))
        fail(file, MS_FORMAT("{} is too large", where));
      n *= static_cast<std::uint64_t>(x);
      dims.push_back(x);
    }
    return Shape(dims);
  }
  DType dtype(const json& v, const std::string& where) const {
    DType d{};
    if (!dtype_by_name(string(v, where), d)) fail(file, MS_FORMAT("{}: unknown dtype \"{}\"", where, v.get<std::string>()));
    return d;
  }
  ops::AttrValue attr(const json& a, std::string& key, const std::string& where) const {
    array(a, where);
    if (a.size() != 3) fail(file, MS_FORMAT("{} must be [key, type, value]", where));
    key = string(a[0], where + " key");
    const std::string& tag = string(a[1], where + " type");
    const json& v = a[2];
    if (tag == "i") return integer(v, where);
    if (tag == "f") {
      const std::string& s = string(v, where);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size()) fail(file, MS_FORMAT("{}: \"{}\" is not a number", where, s));
      return d;
    }
    if (tag == "b") {
      if (!v.is_boolean()) fail(file, MS_FORMAT("{} must be true or false", where));
      return v.get<bool>();
    }
    if (tag == "dtype") return dtype(v, where);
    if (tag == "ints") {
      array(v, where);
      if (v.size() > 4096) fail(file, MS_FORMAT("{} is too long", where));
      ops::IntList l;
      for (auto& x : v) l.push_back(integer(x, where));
      return l;
    }
    if (tag == "s") return string(v, where);
    fail(file, MS_FORMAT("{}: unknown attribute type \"{}\"", where, tag));
  }
};

inline void put_u64(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace detail::frozen

MS_IMPL std::string freeze_to_bytes(const graph::Graph& g, const FreezeOptions& opt) {
  using namespace detail::frozen;
  MS_CHECK(std::endian::native == std::endian::little, NotImplementedError,
           "freeze: big-endian hosts are not supported");
  // Values that the saved graph keeps: inputs, params, the live nodes' outputs, and the
  // constants they read. Ids are renumbered densely in that order.
  const auto& values = g.values();
  std::vector<std::int64_t> id(values.size(), -1);
  json jvalues = json::array(), jnodes = json::array(), jin = json::array(), jparams = json::array(),
       jout = json::array();
  std::vector<std::pair<std::string, AnyTensor>> tensors;
  std::set<std::string> used_names;
  auto tensor_key = [&](const std::string& want) {
    std::string k = want.empty() || want.rfind("__", 0) == 0 ? "t" + want : want;
    for (int i = 1; used_names.count(k); ++i) k = MS_FORMAT("{}.{}", want, i);
    used_names.insert(k);
    return k;
  };
  auto add_value = [&](graph::ValueId v) {
    const graph::Value& val = values[static_cast<std::size_t>(v)];
    json j = meta_json(val.meta);
    j["kind"] = std::string(graph::value_kind_name(val.kind));
    j["name"] = val.name;
    if (val.kind == graph::ValueKind::param || val.kind == graph::ValueKind::constant) {
      MS_CHECK(val.data.defined() && val.data.device().is_cpu(), ValueError,
               "freeze: {} '{}' has no data on the cpu", graph::value_kind_name(val.kind), val.name);
      std::string key = tensor_key(val.kind == graph::ValueKind::param ? val.name : MS_FORMAT("const.{}", tensors.size()));
      j["tensor"] = key;
      tensors.emplace_back(key, ops::detail::contiguous_raw(val.data));
    }
    id[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(jvalues.size());
    jvalues.push_back(std::move(j));
  };
  for (graph::ValueId v : g.inputs()) { add_value(v); jin.push_back(id[static_cast<std::size_t>(v)]); }
  for (graph::ValueId v : g.params()) { add_value(v); jparams.push_back(id[static_cast<std::size_t>(v)]); }
  for (const graph::Node& n : g.nodes()) {
    if (n.dead) continue;
    MS_CHECK(!n.fused, GraphError,
             "freeze: node {} is a fused node; freeze the captured graph, before compile() optimizes it", n.name);
    json ins = json::array(), outs = json::array(), attrs = json::array();
    for (graph::ValueId v : n.inputs) {
      if (id[static_cast<std::size_t>(v)] < 0) {
        MS_CHECK(values[static_cast<std::size_t>(v)].kind == graph::ValueKind::constant, GraphError,
                 "freeze: node {} reads %{} before it is defined", n.name, v);
        add_value(v);
      }
      ins.push_back(id[static_cast<std::size_t>(v)]);
    }
    for (graph::ValueId v : n.outputs) {
      add_value(v);
      outs.push_back(id[static_cast<std::size_t>(v)]);
    }
    for (auto& [k, a] : n.attrs.items()) attrs.push_back(attr_to_json(k, a));
    jnodes.push_back(json{{"op", n.op->name}, {"name", n.name}, {"inputs", ins}, {"outputs", outs}, {"attrs", attrs}});
  }
  for (graph::ValueId v : g.outputs()) {
    if (id[static_cast<std::size_t>(v)] < 0) add_value(v);  // a constant returned as is
    jout.push_back(id[static_cast<std::size_t>(v)]);
  }
  const std::string graph_text =
      json{{"values", jvalues}, {"nodes", jnodes}, {"inputs", jin}, {"params", jparams}, {"outputs", jout}}.dump();

  // Data: every tensor at a multiple of 64; the gaps are U8 "__pad.<k>" tensors so that a
  // safetensors reader, which wants the buffer covered exactly, accepts the file.
  json header = json::object();
  std::string data;
  int pads = 0;
  auto pad_to_alignment = [&]() {
    std::size_t gap = (kAlign - data.size() % kAlign) % kAlign;
    if (gap == 0) return;
    header[MS_FORMAT("__pad.{}", pads++)] = {
        {"dtype", "U8"}, {"shape", json::array({gap})}, {"data_offsets", json::array({data.size(), data.size() + gap})}};
    data.append(gap, '\0');
  };
  for (auto& [key, t] : tensors) {
    pad_to_alignment();
    header[key] = {{"dtype", st_code(t.dtype())},
                   {"shape", t.shape().vec()},
                   {"data_offsets", json::array({data.size(), data.size() + t.nbytes()})}};
    data.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  json meta = json::object();
  for (auto& [k, v] : opt.metadata) meta[k] = v;
  meta["format"] = "ms.frozen";
  meta["ms.format_version"] = std::to_string(kFrozenFormatVersion);
  meta["ms.graph"] = graph_text;
  meta["ms.graph_crc32"] = std::to_string(crc32_of(graph_text.data(), graph_text.size()));
  meta["ms.data_crc32"] = std::to_string(crc32_of(data.data(), data.size()));
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((kAlign - (8 + text.size()) % kAlign) % kAlign, ' ');
  std::string out;
  out.reserve(8 + text.size() + data.size());
  put_u64(out, text.size());
  out += text;
  out += data;
  return out;
}

MS_IMPL void freeze(const graph::Graph& g, const std::filesystem::path& path, const FreezeOptions& opt) {
  const std::string bytes = freeze_to_bytes(g, opt);
  write_file_atomically(path, bytes, "freeze");
}

namespace detail::frozen {

/// Reads a frozen model held in a buffer (64-byte aligned, the whole file) into a graph;
/// anything malformed is an IOError naming the file and what is wrong.
class FrozenParser {
 public:
  FrozenParser(const std::shared_ptr<Storage>& b, std::size_t n, std::string_view file)
      : buf(b), size(n), name(file), r{file} {}

  graph::Graph parse(std::map<std::string, std::string>* metadata) {
    read_header(metadata);
    read_graph_json();
    read_values();
    for (std::size_t ni = 0; ni < jn->size(); ++ni) read_node(ni);
    return finish();
  }

 private:
  /// The length-prefixed JSON header: metadata, format version, checksums.
  void read_header(std::map<std::string, std::string>* metadata) {
    const char* base = static_cast<const char*>(buf->data);
    if (size < 8) fail(name, MS_FORMAT("the file is {} bytes long: too short for a frozen model (truncated?)", size));
    std::uint64_t hlen = 0;
    for (int i = 0; i < 8; ++i) hlen |= static_cast<std::uint64_t>(static_cast<unsigned char>(base[i])) << (8 * i);
    if (hlen > kMaxHeader) fail(name, MS_FORMAT("the header length {} is implausible (not a frozen model?)", hlen));
    if (hlen > size - 8)
      fail(name, MS_FORMAT("the header needs {} bytes but the file has {} after the length (truncated?)", hlen, size - 8));
    try {
      header = json::parse(base + 8, base + 8 + hlen);
    } catch (const json::exception& e) {
      fail(name, MS_FORMAT("the header is not valid JSON ({})", e.what()));
    }
    if (!header.is_object()) fail(name, "the header is not a JSON object");
    auto mit = header.find("__metadata__");
    if (mit == header.end() || !mit->is_object() || mit->value("format", std::string()) != "ms.frozen")
      fail(name, "this is not a frozen ms model (no \"format\": \"ms.frozen\" metadata; a plain safetensors file?)");
    const json& meta = *mit;
    for (auto& [k, v] : meta.items())
      if (!v.is_string()) fail(name, MS_FORMAT("metadata \"{}\" must be a string", k));
    const std::string& version = r.string(r.field(meta, "ms.format_version", "metadata"), "ms.format_version");
    if (version != std::to_string(kFrozenFormatVersion))
      fail(name, MS_FORMAT("format version {} is not supported (this build reads version {})", version,
                             kFrozenFormatVersion));
    graph_text = r.string(r.field(meta, "ms.graph", "metadata"), "ms.graph");
    data_begin = 8 + static_cast<std::size_t>(hlen);
    data_size = size - data_begin;
    auto check_crc = [&](const char* key, const char* p, std::size_t n, const char* what) {
      const std::string& want = r.string(r.field(meta, key, "metadata"), key);
      if (want != std::to_string(crc32_of(p, n)))
        fail(name, MS_FORMAT("the {} checksum does not match (the file is corrupted or truncated)", what));
    };
    check_crc("ms.graph_crc32", graph_text.data(), graph_text.size(), "graph");
    check_crc("ms.data_crc32", base + data_begin, data_size, "weights");
    if (data_begin % kAlign != 0) fail(name, "the tensor data does not start at a multiple of 64 bytes");
    if (metadata) {
      metadata->clear();
      for (auto& [k, v] : meta.items()) (*metadata)[k] = v.get<std::string>();
    }
  }

  void read_graph_json() {
    try {
      gj = json::parse(graph_text);
    } catch (const json::exception& e) {
      fail(name, MS_FORMAT("the graph is not valid JSON ({})", e.what()));
    }
    jv = &r.array(r.field(gj, "values", "graph"), "graph values");
    jn = &r.array(r.field(gj, "nodes", "graph"), "graph nodes");
    const json& jvalues = *jv;
    const json& jnodes = *jn;
    if (jvalues.size() > kMaxItems || jnodes.size() > kMaxItems) fail(name, "the graph is too large");
  }

  /// A tensor named by the header, as a view into the buffer.
  AnyTensor tensor(const std::string& key, const ops::TensorMeta& m, const std::string& where) const {
    if (key == "__metadata__") fail(name, MS_FORMAT("{}: invalid tensor name", where));
    auto it = header.find(key);
    if (it == header.end()) fail(name, MS_FORMAT("{}: tensor \"{}\" is not in the file", where, key));
    const json& e = *it;
    DType d{};
    if (!st_dtype(r.string(r.field(e, "dtype", "tensor " + key), "dtype of " + key), d))
      fail(name, MS_FORMAT("tensor \"{}\": unsupported dtype \"{}\"", key, e["dtype"].get<std::string>()));
    Shape s = r.shape(r.field(e, "shape", "tensor " + key), "shape of tensor " + key);
    const json& off = r.array(r.field(e, "data_offsets", "tensor " + key), "data_offsets of " + key);
    if (off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(name, MS_FORMAT("tensor \"{}\": data_offsets must be two non-negative integers", key));
    const std::uint64_t b = off[0].get<std::uint64_t>(), en = off[1].get<std::uint64_t>();
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel(s)) * dtype_size(d);
    if (b > en || en > data_size || en - b != bytes)
      fail(name, MS_FORMAT("tensor \"{}\": data_offsets [{}, {}] do not hold {} {} ({} bytes) in {} bytes of data", key,
                             b, en, dtype_name(d), shape_str(s), bytes, data_size));
    if ((data_begin + b) % kAlign != 0) fail(name, MS_FORMAT("tensor \"{}\" is not 64-byte aligned", key));
    if (d != m.dtype || !(s == m.shape))
      fail(name, MS_FORMAT("{}: tensor \"{}\" is {} {} but the graph says {} {}", where, key, dtype_name(d),
                             shape_str(s), dtype_name(m.dtype), shape_str(m.shape)));
    return AnyTensor::view_of(buf, s, contiguous_strides(s), static_cast<std::int64_t>((data_begin + b) / dtype_size(d)), d);
  }

  std::string value_name(std::size_t i) const {
    auto it = (*jv)[i].find("name");
    return it != (*jv)[i].end() && it->is_string() ? it->get<std::string>() : std::string();
  }
  std::size_t index(const json& x, const std::string& where) const {
    std::int64_t k = r.integer(x, where);
    if (k < 0 || static_cast<std::size_t>(k) >= jv->size())
      fail(name, MS_FORMAT("{} refers to value {}, which does not exist", where, k));
    return static_cast<std::size_t>(k);
  }

  /// The values' metadata, then inputs, parameters and constants.
  void read_values() {
    const json& jvalues = *jv;
    id.assign(jvalues.size(), -1);
    metas.assign(jvalues.size(), {});
    kinds.assign(jvalues.size(), {});
    for (std::size_t i = 0; i < jvalues.size(); ++i) {
      const std::string where = MS_FORMAT("value {}", i);
      const json& v = jvalues[i];
      kinds[i] = r.string(r.field(v, "kind", where), where + " kind");
      metas[i] = {r.dtype(r.field(v, "dtype", where), where + " dtype"), r.shape(r.field(v, "shape", where), where + " shape")};
      if (kinds[i] != "input" && kinds[i] != "param" && kinds[i] != "const" && kinds[i] != "node")
        fail(name, MS_FORMAT("{}: unknown kind \"{}\"", where, kinds[i]));
    }
    // Inputs and params first, in their declared order.
    for (const char* list : {"inputs", "params"}) {
      const json& ids = r.array(r.field(gj, list, "graph"), MS_FORMAT("graph {}", list));
      const std::string kind = std::string(list) == "inputs" ? "input" : "param";
      for (const json& x : ids) {
        std::size_t k = index(x, MS_FORMAT("graph {}", list));
        if (kinds[k] != kind || id[k] >= 0) fail(name, MS_FORMAT("graph {}: value {} is not a new {}", list, k, kind));
        const std::string where = MS_FORMAT("value {}", k);
        id[k] = kind == "input" ? g.add_input(metas[k], value_name(k))
                                : g.add_param(tensor(r.string(r.field(jvalues[k], "tensor", where), where + " tensor"),
                                                     metas[k], where),
                                              value_name(k));
      }
    }
    for (std::size_t k = 0; k < jvalues.size(); ++k) {
      if (kinds[k] == "const") {
        const std::string where = MS_FORMAT("value {}", k);
        id[k] = g.add_constant(tensor(r.string(r.field(jvalues[k], "tensor", where), where + " tensor"), metas[k], where),
                               value_name(k));
      } else if ((kinds[k] == "input" || kinds[k] == "param") && id[k] < 0) {
        fail(name, MS_FORMAT("value {} is an {} that the graph's list does not declare", k, kinds[k]));
      }
    }
  }

  /// Node ni of the file, checked against this build's op registry.
  void read_node(std::size_t ni) {
    const json& n = (*jn)[ni];
    const std::string where = MS_FORMAT("node {}", ni);
    const std::string& opname = r.string(r.field(n, "op", where), where + " op");
    const ops::OpDef* op = ops::registry().find(opname);
    if (!op)
      fail(name, MS_FORMAT("{} uses op '{}', which is not registered in this program (a user-defined op must be "
                             "registered before the model is loaded)", where, opname));
    if (op->category == ops::Category::fused) fail(name, MS_FORMAT("{}: fused nodes cannot be loaded", where));
    std::vector<graph::ValueId> ins;
    SmallVec<ops::TensorMeta, 4> in_metas;
    for (const json& x : r.array(r.field(n, "inputs", where), where + " inputs")) {
      std::size_t k = index(x, where + " inputs");
      if (id[k] < 0) fail(name, MS_FORMAT("{} ({}) reads value {} before it is defined", where, opname, k));
      ins.push_back(id[k]);
      in_metas.push_back(metas[k]);
    }
    if (op->num_inputs >= 0 ? static_cast<int>(ins.size()) != op->num_inputs : ins.empty())
      fail(name, MS_FORMAT("{} ({}) has {} inputs", where, opname, ins.size()));
    if (!ins.empty()) {
      const int di = std::min<int>(op->elementwise.dispatch_input, static_cast<int>(ins.size()) - 1);
      if (!op->cpu_dtypes.contains(in_metas[static_cast<std::size_t>(di)].dtype))
        fail(name, MS_FORMAT("{} ({}): unsupported input dtype {}", where, opname, in_metas[static_cast<std::size_t>(di)].dtype));
    }
    ops::Attrs attrs;
    const json& ja = r.array(r.field(n, "attrs", where), where + " attrs");
    for (std::size_t ai = 0; ai < ja.size(); ++ai) {
      std::string key;
      ops::AttrValue v = r.attr(ja[ai], key, MS_FORMAT("{} attribute {}", where, ai));
      attrs.set(std::move(key), std::move(v));
    }
    const json& jouts = r.array(r.field(n, "outputs", where), where + " outputs");
    std::vector<graph::ValueId> outs;
    try {
      outs = g.add_node(*op, std::move(ins), std::move(attrs));
    } catch (const Error& e) {
      fail(name, MS_FORMAT("{} ({}) does not accept its inputs: {}", where, opname, e.what()));
    }
    if (outs.size() != jouts.size())
      fail(name, MS_FORMAT("{} ({}) has {} outputs but the op infers {}", where, opname, jouts.size(), outs.size()));
    for (std::size_t o = 0; o < outs.size(); ++o) {
      std::size_t k = index(jouts[o], where + " outputs");
      if (kinds[k] != "node" || id[k] >= 0) fail(name, MS_FORMAT("{} ({}): output value {} is not a new node value", where, opname, k));
      const ops::TensorMeta& got = g.value(outs[o]).meta;
      if (!(got == metas[k]))
        fail(name, MS_FORMAT("{} ({}): output {} is {} {} in the file but this build infers {} {} (incompatible op)",
                               where, opname, o, dtype_name(metas[k].dtype), shape_str(metas[k].shape),
                               dtype_name(got.dtype), shape_str(got.shape)));
      id[k] = outs[o];
    }
  }

  graph::Graph finish() {
    const json& jvalues = *jv;
    for (std::size_t k = 0; k < jvalues.size(); ++k)
      if (id[k] < 0) fail(name, MS_FORMAT("value {} is never defined", k));
    const json& jout = r.array(r.field(gj, "outputs", "graph"), "graph outputs");
    if (jout.empty()) fail(name, "the graph has no outputs");
    for (const json& x : jout) g.mark_output(id[index(x, "graph outputs")]);
    try {
      graph::verify(g);
    } catch (const Error& e) {
      fail(name, e.what());
    }
    return std::move(g);
  }

  std::shared_ptr<Storage> buf;
  std::size_t size;
  std::string_view name;
  const Reader r;
  json header, gj;
  std::string graph_text;
  std::size_t data_begin = 0, data_size = 0;
  const json* jv = nullptr;  ///< the graph's values
  const json* jn = nullptr;  ///< the graph's nodes
  graph::Graph g;
  std::vector<graph::ValueId> id;
  std::vector<ops::TensorMeta> metas;
  std::vector<std::string> kinds;
};

/// Parses a frozen model held in `buf` (64-byte aligned, the whole file).
inline graph::Graph parse(const std::shared_ptr<Storage>& buf, std::size_t size, std::string_view name,
                          std::map<std::string, std::string>* metadata) {
  return FrozenParser(buf, size, name).parse(metadata);
}

/// Parses with every failure reported as IOError (also allocation failures and the like).
inline graph::Graph parse_checked(const std::shared_ptr<Storage>& buf, std::size_t size, std::string_view name,
                                  std::map<std::string, std::string>* metadata) {
  try {
    return parse(buf, size, name, metadata);
  } catch (const IOError&) {
    throw;
  } catch (const Error& e) {
    fail(name, e.what());
  } catch (const std::exception& e) {
    fail(name, MS_FORMAT("unexpected error: {}", e.what()));
  }
}

}  // namespace detail::frozen

MS_IMPL graph::Graph load_frozen_from_memory(const void* data, std::size_t size, std::string_view name,
                                            std::map<std::string, std::string>* metadata) {
  auto buf = Storage::host(std::max<std::size_t>(size, 1));
  if (size) std::memcpy(buf->data, data, size);
  return detail::frozen::parse_checked(buf, size, name, metadata);
}

MS_IMPL graph::Graph load_frozen(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
  const std::string name = path.string();
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) MS_THROW(IOError, "load_frozen: cannot open '{}' ({})", name, std::strerror(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    std::fclose(f);
    MS_THROW(IOError, "load_frozen: cannot read the size of '{}' ({})", name, ec.message());
  }
  auto buf = Storage::host(std::max<std::size_t>(static_cast<std::size_t>(size), 1));
  const std::size_t got = size ? std::fread(buf->data, 1, static_cast<std::size_t>(size), f) : 0;
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err || got != size) MS_THROW(IOError, "load_frozen: reading '{}' failed after {} of {} bytes", name, got, size);
  return detail::frozen::parse_checked(buf, static_cast<std::size_t>(size), name, metadata);
}

#endif  // MS_IMPL_BODIES

}  // namespace ms
