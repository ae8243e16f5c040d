// ms-op: list the registered operators and run any one of them from the command line.
//
//   ms-op list [FILTER]                 the op table (name, category, CPU dtypes, attributes, doc);
//                                       FILTER keeps ops whose category equals it or whose name contains it
//   ms-op run OP [options] INPUT...     runs OP through the generic ms::ops::call and prints its outputs
//   ms-op info                          the CPU kernels in force: x86-64 level, GEMM path
//   ms-op help                          usage
//
// Everything goes through ms::ops::registry(), so any registered op works, including
// user-defined ones compiled into a copy of this tool. Exit status: 0 on success, 2 on
// a usage error or an ms::Error (its message is printed), 1 on anything else.

#include <cctype>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <ms/ms.hpp>
// The collectives (all_reduce, broadcast, ...) are listed too. This tool does not link MPI
// (ms::dist): run here, they see a world of one process, where each is the identity.
#include <ms/dist.hpp>

namespace {

using ms::AnyTensor;
using ms::DType;
namespace ops = ms::ops;

constexpr std::string_view kUsage = R"(usage:
  ms-op list [FILTER]
      Prints every registered op: name, category, the dtypes its CPU kernel accepts,
      its attributes and a one-line description. FILTER keeps the ops of one category
      (e.g. movement) or whose name contains FILTER.
  ms-op run OP [--attr KEY=VALUE]... [--dtype DTYPE] [--out FILE.npy] INPUT...
      Runs OP on the inputs and prints each output.
      INPUT    a literal: 2.5, -3, true, [1,2,3], [[1,2],[3,4]], with an optional
               dtype suffix: [1,2,3]:int32, 7:float64; or a .npy file (suffix casts it)
               A literal without suffix is int64 when all its numbers are integers,
               float32 when any has a '.', an exponent, inf or nan, bool for true/false
               (like torch.tensor); --dtype sets the dtype of every literal without suffix.
      --attr   an attribute, typed by its text: 1 and -2 are ints, 0.5, 1e-3 and inf are
               floats, true/false bools, [0,1] int lists, float32/int64/... dtypes, anything
               else a string ("..." forces a string). Repeat for each attribute.
      --out    writes the output to FILE.npy (several outputs: FILE_0.npy, FILE_1.npy, ...).
  ms-op info
      Prints which CPU kernels run: the x86-64 level of the elementwise kernels (and the
      levels compiled into this program), and the GEMM/convolution path.
  ms-op help
      Prints this text.
Exit status: 0 on success, 2 on a usage error or an ms error (the message is printed).
)";

/// A usage mistake (printed with a hint to run `ms-op help`).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string short_dtype(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::b8: return "bool";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::string dtypes_str(ms::DTypeSet s) {
  std::string out;
  for (int i = 0; i < ms::kNumDTypes; ++i) {
    auto d = static_cast<DType>(i);
    if (!s.contains(d)) continue;
    if (!out.empty()) out += ',';
    out += short_dtype(d);
  }
  return out.empty() ? "-" : out;
}

// ---- list -----------------------------------------------------------------------------------

int cmd_list(const std::vector<std::string>& args) {
  if (args.size() > 1) throw UsageError("list takes at most one FILTER argument");
  std::string filter = args.empty() ? "" : args[0];
  struct Row {
    std::string name, cat, dtypes, attrs, doc;
  };
  std::vector<Row> rows;
  for (const ops::OpDef* op : ops::registry().all()) {
    std::string cat(ops::category_name(op->category));
    if (!filter.empty() && cat != filter && op->name.find(filter) == std::string::npos) continue;
    std::string attrs;
    for (auto& a : op->attr_names) attrs += (attrs.empty() ? "" : ",") + a;
    rows.push_back({op->name, cat, dtypes_str(op->cpu_dtypes), attrs.empty() ? "-" : attrs, op->doc});
  }
  Row head{"name", "category", "cpu dtypes", "attributes", "description"};
  std::size_t w[4] = {head.name.size(), head.cat.size(), head.dtypes.size(), head.attrs.size()};
  for (auto& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.cat.size());
    w[2] = std::max(w[2], r.dtypes.size());
    w[3] = std::max(w[3], r.attrs.size());
  }
  auto line = [&](const Row& r) {
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.name, w[0], r.cat, w[1], r.dtypes, w[2], r.attrs, w[3],
               r.doc);
  };
  line(head);
  line({std::string(w[0], '-'), std::string(w[1], '-'), std::string(w[2], '-'), std::string(w[3], '-'),
        std::string(11, '-')});
  for (auto& r : rows) line(r);
  fmt::print("{} op{}{}\n", rows.size(), rows.size() == 1 ? "" : "s",
             filter.empty() ? "" : fmt::format(" matching '{}'", filter));
  return 0;
}

// ---- literal parsing ------------------------------------------------------------------------

/// A parsed literal: a scalar leaf or a list of children.
struct Lit {
  bool is_list = false;
  double value = 0;
  std::int64_t ivalue = 0;  ///< exact value of an integer token (doubles lose precision past 2^53)
  bool is_float = false, is_bool = false;
  std::vector<Lit> items;
};

class LitParser {
 public:
  explicit LitParser(std::string_view s) : s_(s) {}
  Lit parse() {
    Lit v = value();
    skip_ws();
    if (i_ != s_.size()) fail(fmt::format("unexpected '{}' at position {}", s_[i_], i_));
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    MS_THROW(ValueError, "ms-op: cannot parse the literal '{}': {}", s_, why);
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  Lit value() {
    skip_ws();
    if (i_ >= s_.size()) fail("it ends too early");
    if (s_[i_] == '[') {
      ++i_;
      Lit l;
      l.is_list = true;
      skip_ws();
      if (i_ < s_.size() && s_[i_] == ']') { ++i_; return l; }
      for (;;) {
        l.items.push_back(value());
        skip_ws();
        if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
        if (i_ < s_.size() && s_[i_] == ']') { ++i_; return l; }
        fail(i_ < s_.size() ? fmt::format("expected ',' or ']' at position {}", i_) : "a '[' is not closed");
      }
    }
    std::size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '[' &&
           !std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
    std::string tok(s_.substr(b, i_ - b));
    if (tok.empty()) fail(fmt::format("expected a number at position {}", b));
    Lit leaf;
    if (tok == "true" || tok == "True" || tok == "false" || tok == "False") {
      leaf.is_bool = true;
      leaf.value = tok[0] == 't' || tok[0] == 'T' ? 1 : 0;
      return leaf;
    }
    char* end = nullptr;
    leaf.value = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) fail(fmt::format("'{}' is not a number", tok));
    leaf.is_float = tok.find_first_of(".eEnNiI") != std::string::npos;
    if (!leaf.is_float) {
      errno = 0;
      leaf.ivalue = std::strtoll(tok.c_str(), &end, 10);
      if (errno == ERANGE) fail(fmt::format("{} does not fit in int64", tok));
      if (end != tok.c_str() + tok.size()) fail(fmt::format("'{}' is not a decimal number", tok));
    }
    return leaf;
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

/// Collects the shape (from the first element at each depth) and checks the nesting is rectangular.
void lit_shape(const Lit& l, ms::Shape& shape, int depth, std::string_view text) {
  if (!l.is_list) return;
  if (depth == shape.rank()) shape.push_back(static_cast<std::int64_t>(l.items.size()));
  if (!l.items.empty()) lit_shape(l.items[0], shape, depth + 1, text);
}
void lit_flatten(const Lit& l, const ms::Shape& shape, int depth, std::vector<const Lit*>& out,
                 std::string_view text) {
  bool want_list = depth < shape.rank();
  if (l.is_list != want_list || (want_list && static_cast<std::int64_t>(l.items.size()) != shape[depth]))
    MS_THROW(ValueError, "ms-op: the literal '{}' is ragged (its lists must nest like an array of shape {})", text,
             ms::shape_str(shape));
  if (!want_list) { out.push_back(&l); return; }
  for (auto& c : l.items) lit_flatten(c, shape, depth + 1, out, text);
}

AnyTensor tensor_from_literal(std::string_view text, const DType* dtype) {
  Lit root = LitParser(text).parse();
  ms::Shape shape;
  lit_shape(root, shape, 0, text);
  std::vector<const Lit*> leaves;
  lit_flatten(root, shape, 0, leaves, text);
  DType d;
  if (dtype) {
    d = *dtype;
  } else {
    bool any_float = false, all_bool = !leaves.empty();
    for (auto* l : leaves) {
      any_float |= l->is_float;
      all_bool &= l->is_bool;
    }
    d = all_bool ? DType::b8 : (any_float || leaves.empty() ? DType::f32 : DType::i64);
  }
  AnyTensor t = AnyTensor::empty(shape, d);
  ms::visit_dtype(d, [&]<class T>() {
    T* p = static_cast<T*>(t.raw_data());
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      double v = leaves[i]->value;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        MS_CHECK(v == std::floor(v) && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                     v <= static_cast<double>(std::numeric_limits<T>::max()),
                 ValueError, "ms-op: {} in the literal '{}' is not representable as {}", v, text, d);
        p[i] = leaves[i]->is_float || leaves[i]->is_bool ? static_cast<T>(v) : static_cast<T>(leaves[i]->ivalue);
      } else if constexpr (std::is_same_v<T, bool>) {
        p[i] = v != 0;
      } else {
        p[i] = static_cast<T>(v);
      }
    }
  });
  return t;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// An INPUT argument: a .npy path or a literal, with an optional ":dtype" suffix.
AnyTensor parse_input(const std::string& arg, const DType* default_dtype) {
  std::string body = arg;
  DType suffix{};
  bool has_suffix = false;
  if (auto colon = arg.rfind(':'); colon != std::string::npos && !ends_with(arg, ".npy")) {
    body = arg.substr(0, colon);
    suffix = ms::dtype_from_name(arg.substr(colon + 1));
    has_suffix = true;
  }
  if (ends_with(body, ".npy")) {
    AnyTensor t = ms::load_npy(body);
    return has_suffix ? ops::cast(t, suffix) : t;
  }
  return tensor_from_literal(body, has_suffix ? &suffix : default_dtype);
}

/// An attribute value typed by its text (see the usage).
ops::AttrValue parse_attr_value(const std::string& v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (!v.empty() && v.front() == '[') {
    Lit l = LitParser(v).parse();
    ops::IntList out;
    for (auto& item : l.items) {
      MS_CHECK(!item.is_list && !item.is_float && !item.is_bool, ValueError,
               "ms-op: attribute list '{}' must hold integers only", v);
      out.push_back(item.ivalue);
    }
    return out;
  }
  if (!v.empty()) {
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() + v.size() && errno != ERANGE) return static_cast<std::int64_t>(i);
    double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() + v.size()) return d;
    try {
      return ms::dtype_from_name(v);
    } catch (const ms::DTypeError&) {
    }
  }
  return v;
}

// ---- run ------------------------------------------------------------------------------------

int cmd_run(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("run needs an op name: ms-op run OP [options] INPUT...");
  const ops::OpDef& op = ops::registry().get(args[0]);
  ops::Attrs attrs;
  std::string out_path;
  DType dtype{};
  bool has_dtype = false;
  std::vector<std::string> input_args;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value_of = [&](std::string_view flag) -> std::string {
      // --flag VALUE or --flag=VALUE
      if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", flag));
      return args[++i];
    };
    auto is_flag = [&](std::string_view flag) {
      return a == flag || (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=');
    };
    if (is_flag("--attr")) {
      std::string kv = value_of("--attr");
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(fmt::format("--attr expects KEY=VALUE, got '{}'", kv));
      attrs.set(kv.substr(0, eq), parse_attr_value(kv.substr(eq + 1)));
    } else if (is_flag("--dtype")) {
      dtype = ms::dtype_from_name(value_of("--dtype"));
      has_dtype = true;
    } else if (is_flag("--out")) {
      out_path = value_of("--out");
    } else if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      throw UsageError(fmt::format("unknown option '{}'", a));
    } else {
      input_args.push_back(a);
    }
  }
  std::vector<AnyTensor> inputs;
  for (auto& s : input_args) inputs.push_back(parse_input(s, has_dtype ? &dtype : nullptr));
  std::vector<AnyTensor> outs = ops::call(op, inputs, attrs);
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!out_path.empty()) {
      std::filesystem::path p = out_path;
      if (outs.size() > 1) p = p.parent_path() / fmt::format("{}_{}{}", p.stem().string(), k, p.extension().string());
      ms::save_npy(p, outs[k]);
      fmt::print("wrote {} (shape {}, {})\n", p.string(), ms::shape_str(outs[k].shape()), outs[k].dtype());
    } else {
      if (outs.size() > 1) fmt::print("output {}:\n", k);
      fmt::print("{}\n", outs[k]);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    ms::dist::Context dist_world;  // a world of one process: `ms-op run all_reduce` is the identity
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
      fmt::print("{}", kUsage);
      return 0;
    }
    std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "list") return cmd_list(args);
    if (cmd == "run") return cmd_run(args);
    if (cmd == "info") {
      if (!args.empty()) throw UsageError("info takes no arguments");
      fmt::print("CPU kernels: {}\n{}\n", ms::cpu::isa_summary(), ms::Profiler::cpu_gemm_line());
      return 0;
    }
    throw UsageError(fmt::format("unknown command '{}'", cmd));
  } catch (const UsageError& e) {
    fmt::print(stderr, "ms-op: {} (see: ms-op help)\n", e.what());
    return 2;
  } catch (const ms::Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ms-op: {}\n", e.what());
    return 1;
  }
}
