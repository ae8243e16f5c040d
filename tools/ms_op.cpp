// ms-op: list the registered operators and run any one of them from the command line.
//
//   ms-op list [FILTER]                 the op table (name, category, CPU dtypes, attributes, doc);
//                                       FILTER keeps ops whose category equals it or whose name contains it
//   ms-op run OP [options] INPUT...     runs OP through the generic ms::ops::call and prints its outputs
//   ms-op info                          the CPU kernels in force: x86-64 level, GEMM path
//   ms-op info OP                       one op: category, inputs, attributes (name, kind, default)
//   ms-op help                          usage
//
// Everything goes through ms::ops::registry(), so any registered op works, including
// user-defined ones compiled into a copy of this tool. Exit status: 0 on success, 2 on
// a usage error or an ms::Error (its message is printed), 1 on anything else. Arguments
// are parsed with CLI11 (errors name the option; --help and --version).

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

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include <ms/ms.hpp>
// The collectives (all_reduce, broadcast, ...) are listed too. This tool does not link MPI
// (ms::dist): run here, they see a world of one process, where each is the identity.
#include <ms/dist.hpp>

namespace {

using ms::AnyTensor;
using ms::DType;
namespace ops = ms::ops;

#ifndef MS_VERSION_STRING
#define MS_VERSION_STRING "unknown"
#endif

constexpr std::string_view kDescription = R"(ms-op: lists the registered operators and runs any one of them.
  ms-op list [FILTER]
  ms-op run OP [--attr KEY=VALUE]... [--dtype DTYPE] [--out FILE.npy] INPUT...
  ms-op info [OP]
  ms-op help
Exit status: 0 on success, 2 on a usage error or an ms error (the message is printed).)";
constexpr std::string_view kInputHelp =
    R"(a literal: 2.5, -3, true, [1,2,3], [[1,2],[3,4]], with an optional dtype suffix: [1,2,3]:int32, 7:float64;
or a .npy file (suffix casts it). A literal without suffix is int64 when all its numbers are integers,
float32 when any has a '.', an exponent, inf or nan, bool for true/false (like torch.tensor).)";
constexpr std::string_view kAttrHelp =
    R"(an attribute, typed by its text: 1 and -2 are ints, 0.5, 1e-3 and inf are floats, true/false bools,
[0,1] int lists, float32/int64/... dtypes, anything else a string ("..." forces a string).
Repeat for each attribute.)";

/// A usage mistake (printed with a hint to run `ms-op help`).
using ms_tools::UsageError;

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

int cmd_list(const std::string& filter) {
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

// ---- info OP ------------------------------------------------------------------------------------

/// One op's definition: category, CPU dtypes, inputs and its attributes, with kind and
/// default where the op declares a typed attribute struct (OpDef::attr_schema).
int cmd_info_op(const std::string& name) {
  const ops::OpDef& op = ops::registry().get(name);
  fmt::print("{}: {}\n", op.name, op.doc);
  fmt::print("  category:   {}\n", ops::category_name(op.category));
  fmt::print("  cpu dtypes: {}\n", dtypes_str(op.cpu_dtypes));
  fmt::print("  inputs:     {}\n", op.num_inputs < 0 ? std::string("variadic") : std::to_string(op.num_inputs));
  if (op.attr_schema) {
    fmt::print("  attributes ({}):\n", op.attr_schema->type);
    std::size_t w = 0;
    for (auto& f : op.attr_schema->fields) w = std::max(w, f.name.size());
    for (auto& f : op.attr_schema->fields)
      fmt::print("    {:<{}}  {}, {}\n", f.name, w, f.kind,
                 f.required ? std::string("required") : f.dflt == "unset" ? std::string("optional") : "default " + f.dflt);
  } else if (!op.attr_names.empty()) {
    std::string names;
    for (auto& a : op.attr_names) names += (names.empty() ? "" : ", ") + a;
    fmt::print("  attributes: {}\n", names);
  } else {
    fmt::print("  attributes: none\n");
  }
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

/// The arguments of `ms-op run`, as CLI11 parsed them.
struct RunArgs {
  std::string op, dtype, out_path;
  std::vector<std::string> attrs, inputs;
};

int cmd_run(const RunArgs& r) {
  const ops::OpDef& op = ops::registry().get(r.op);
  ops::Attrs attrs;
  for (const std::string& kv : r.attrs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--attr expects KEY=VALUE, got '{}'", kv));
    attrs.set(kv.substr(0, eq), parse_attr_value(kv.substr(eq + 1)));
  }
  const bool has_dtype = !r.dtype.empty();
  const DType dtype = has_dtype ? ms::dtype_from_name(r.dtype) : DType{};
  const std::string& out_path = r.out_path;
  const std::vector<std::string>& input_args = r.inputs;
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
  CLI::App app{std::string(kDescription), "ms-op"};
  app.set_version_flag("--version", "ms-op (ms " MS_VERSION_STRING ")");
  app.require_subcommand(1);
  std::string filter;
  CLI::App* list = app.add_subcommand("list", "prints every registered op: name, category, the dtypes its CPU kernel "
                                              "accepts, its attributes and a one-line description");
  list->add_option("FILTER", filter, "keeps the ops of one category (e.g. movement) or whose name contains FILTER");
  RunArgs r;
  CLI::App* run = app.add_subcommand("run", "runs OP on the inputs and prints each output");
  run->add_option("OP", r.op, "a registered op (see ms-op list)")->required();
  // INPUT...: see below
  // The inputs are the arguments after OP that are no option, taken raw (allow_extras):
  // as a positional option CLI11 would read a literal like [1,2] as a list of two values.
  run->allow_extras();
  run->footer("INPUT: " + std::string(kInputHelp));
  run->add_option("--attr", r.attrs, std::string(kAttrHelp))->type_name("KEY=VALUE")->allow_extra_args(false);
  std::vector<std::string> dtype_names;
  for (int i = 0; i < ms::kNumDTypes; ++i) dtype_names.emplace_back(ms::dtype_name(static_cast<DType>(i)));
  run->add_option("--dtype", r.dtype, "the dtype of every literal without a suffix")
      ->type_name("DTYPE")
      ->check(CLI::IsMember(dtype_names));
  run->add_option("--out", r.out_path, "writes the output to FILE.npy (several outputs: FILE_0.npy, FILE_1.npy, ...)")
      ->type_name("FILE.npy");
  CLI::App* info = app.add_subcommand("info", "prints which CPU kernels run: the x86-64 level of the elementwise "
                                              "kernels (and the levels compiled into this program), and the GEMM path; "
                                              "with OP, that op's definition and attributes (kind, default)");
  std::string info_op;
  info->add_option("OP", info_op, "a registered op (see ms-op list)");
  app.add_subcommand("help", "prints this text");
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    ms::dist::Context dist_world;  // a world of one process: `ms-op run all_reduce` is the identity
    if (args.empty() || args[0] == "help") {
      std::cout << app.help();
      return 0;
    }
    if (auto done = ms_tools::parse_command_line(app, argc, argv)) return *done;
    if (*list) return cmd_list(filter);
    if (*info) {
      if (!info_op.empty()) return cmd_info_op(info_op);
      fmt::print("CPU kernels: {}\n{}\n", ms::cpu::isa_summary(), ms::Profiler::cpu_gemm_line());
      return 0;
    }
    for (const std::string& a : run->remaining()) {
      if (a.size() > 2 && a.compare(0, 2, "--") == 0) throw UsageError(fmt::format("unknown option '{}'", a));
      r.inputs.push_back(a);
    }
    return cmd_run(r);
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
