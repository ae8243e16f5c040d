#pragma once
// Typed attribute structs. An op whose inference, kernel or gradient reads attributes declares
// them once, as a struct with a static fields() tuple (name, member, default), and reads
// them as that struct; the string form (ops::Attrs) stays what nodes carry, what dumps, CSE,
// the frozen-model format, ONNX and `ms-op run` see. From the one declaration come:
//
//   attrs_as<T>(op, attrs)   the struct, with typed errors (ValueError naming the op, the
//                            attribute, the kind expected and the value got; an absent one
//                            takes its default; a name the struct does not know is an error
//                            listing the valid ones), then T::validate(op) when T has one
//   to_attrs(t)              the string form, in field order (the order the API used before)
//   attr_schema<T>()         names, kinds and defaults (OpDef::attr_schema; `ms-op info OP`)
//
//   struct SoftmaxAttrs {
//     std::int64_t axis = -1;
//     static auto fields() { return std::tuple{field("axis", &SoftmaxAttrs::axis, -1)}; }
//   };
//
// Member types: std::int64_t, double (an int value is accepted), bool, DType, IntList,
// std::string, Int2 (a list of 2 ints), and std::optional of one of them (absent: nullopt,
// not written). Emit::unless_default leaves a field out of the string form while it holds
// its default, so graphs made before the field existed read and print as before.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "registry.hpp"

namespace ms::ops {

/// A (height, width) pair for kernel sizes, strides, paddings and dilations; one integer
/// stands for both: conv2d(x, w, {}, 2) is stride 2, conv2d(x, w, {}, {2, 1}) is 2 by 1.
struct Int2 {
  std::int64_t h = 0, w = 0;
  constexpr Int2() = default;
  constexpr Int2(std::int64_t v) : h(v), w(v) {}  // NOLINT: implicit by design
  constexpr Int2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  IntList list() const { return {h, w}; }
  friend constexpr bool operator==(const Int2&, const Int2&) = default;
};

/// When to_attrs writes a field.
enum class Emit : std::uint8_t {
  always,          ///< every time
  unless_default,  ///< only when it differs from its default
};

/// One field of a typed attribute struct S: its name in the string form, the member, its default.
template <class S, class M>
struct AttrField {
  std::string_view name;
  M S::*member;
  M dflt;
  bool required = false;  ///< absent is an error (no default)
  Emit emit = Emit::always;
};

/// A field with a default (taken when the attribute is absent).
template <class S, class M>
AttrField<S, M> field(std::string_view name, M S::*member, std::type_identity_t<M> dflt, Emit emit = Emit::always) {
  return {name, member, std::move(dflt), false, emit};
}
/// A field that every node must carry (a backward op's forward input shape).
template <class S, class M>
AttrField<S, M> required_field(std::string_view name, M S::*member) {
  return {name, member, M{}, true, Emit::always};
}

namespace detail {

/// How a member type reads from and writes to an AttrValue.
template <class M>
struct AttrCodec {
  static std::string kind() { return Attrs::kind_name(AttrValue(M{})); }
  static bool read(const AttrValue& v, M& out) {
    const M* p = std::get_if<M>(&v);
    if (p) out = *p;
    return p != nullptr;
  }
  static AttrValue write(const M& m) { return AttrValue(m); }
};
template <>
struct AttrCodec<double> {
  static std::string kind() { return "a float"; }
  static bool read(const AttrValue& v, double& out) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return out = static_cast<double>(*i), true;
    const auto* d = std::get_if<double>(&v);
    if (d) out = *d;
    return d != nullptr;
  }
  static AttrValue write(double m) { return AttrValue(m); }
};
template <>
struct AttrCodec<Int2> {
  static std::string kind() { return "a list of 2 ints (height, width)"; }
  static bool read(const AttrValue& v, Int2& out) {
    const auto* l = std::get_if<IntList>(&v);
    if (!l || l->size() != 2) return false;
    out = Int2((*l)[0], (*l)[1]);
    return true;
  }
  static AttrValue write(const Int2& m) { return AttrValue(m.list()); }
};
template <class M>
struct AttrCodec<std::optional<M>> {
  static std::string kind() { return AttrCodec<M>::kind(); }
  static bool read(const AttrValue& v, std::optional<M>& out) {
    M m{};
    if (!AttrCodec<M>::read(v, m)) return false;
    out = std::move(m);
    return true;
  }
  static AttrValue write(const std::optional<M>& m) { return AttrCodec<M>::write(*m); }
};

template <class M>
inline constexpr bool is_optional_v = false;
template <class M>
inline constexpr bool is_optional_v<std::optional<M>> = true;

/// The fields of T, made once.
template <class T>
const auto& attr_fields() {
  static const auto fs = T::fields();
  return fs;
}

/// Reads field f of t from `a`: true when `a` has it; an absent one takes its default (a
/// required one is noted in `missing`, reported once unknown names have been).
template <class T, class S, class M>
bool read_attr_field(const OpDef& op, const Attrs& a, const AttrField<S, M>& f, T& t, std::string_view& missing) {
  const AttrValue* v = a.find(f.name);
  if (v == nullptr) {
    if (f.required && missing.empty()) missing = f.name;
    t.*f.member = f.dflt;
    return false;
  }
  MS_CHECK(AttrCodec<M>::read(*v, t.*f.member), ValueError, "{}: attribute '{}' must be {}, got {} {}", op.name,
           f.name, AttrCodec<M>::kind(), Attrs::kind_name(*v), Attrs::value_str(*v));
  return true;
}

template <class T, class S, class M>
void write_attr_field_of(const T& t, const AttrField<S, M>& f, Attrs& a) {
  const M& m = t.*f.member;
  if constexpr (is_optional_v<M>) {
    if (!m) return;
  }
  if (f.emit == Emit::unless_default && m == f.dflt) return;
  a.set(std::string(f.name), AttrCodec<M>::write(m));
}

template <class M>
std::string attr_default_str(const M& m) {
  if constexpr (is_optional_v<M>) return m ? Attrs::value_str(AttrCodec<M>::write(m)) : "unset";
  else return Attrs::value_str(AttrCodec<M>::write(m));
}

}  // namespace detail

/// The attributes `a` of a node of `op` as the typed struct T (see the top of this file).
template <class T>
T attrs_as(const OpDef& op, const Attrs& a) {
  const auto& fs = detail::attr_fields<T>();
  T t{};
  std::string_view missing;
  std::size_t found = 0;
  std::apply([&](const auto&... f) { ((found += detail::read_attr_field(op, a, f, t, missing) ? 1 : 0), ...); }, fs);
  if (found != a.items().size()) {  // a name that is no field (checked only then: parsing is per kernel call)
    for (const auto& item : a.items()) {
      const std::string& k = item.first;  // a named reference, not a binding: lambdas may capture it (clang 14)
      const bool known = std::apply([&](const auto&... f) { return ((f.name == k) || ...); }, fs);
      if (known) continue;
      std::string names;
      std::apply([&](const auto&... f) { ((names += (names.empty() ? "" : ", ") + std::string(f.name)), ...); }, fs);
      MS_THROW(ValueError, "{}: unknown attribute '{}' (the attributes of {} are: {})", op.name, k, op.name, names);
    }
  }
  MS_CHECK(missing.empty(), ValueError, "{}: attribute '{}' is missing", op.name, missing);
  if constexpr (requires { t.validate(op); }) t.validate(op);
  return t;
}

/// The string form of t: its fields in declaration order (see Emit for the ones left out).
template <class T>
Attrs to_attrs(const T& t) {
  Attrs a;
  std::apply([&](const auto&... f) { (detail::write_attr_field_of(t, f, a), ...); }, detail::attr_fields<T>());
  return a;
}

/// Names, kinds and defaults of T's fields; `type` names the struct in messages.
template <class T>
const AttrSchema& attr_schema(std::string_view type) {
  static const AttrSchema s = [&] {
    AttrSchema r;
    r.type = std::string(type);
    std::apply([&](const auto&... f) {
      (r.fields.push_back(AttrFieldInfo{
           std::string(f.name), detail::AttrCodec<std::decay_t<decltype(f.dflt)>>::kind(),
           f.required ? std::string() : detail::attr_default_str(f.dflt), f.required}),
       ...);
    }, detail::attr_fields<T>());
    return r;
  }();
  return s;
}

}  // namespace ms::ops

namespace ms {
using ops::Int2;
}  // namespace ms
