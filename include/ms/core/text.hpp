#pragma once
// Text helpers on fmt/core.h alone, so that the API headers need not parse fmt/format.h:
// join_text (fmt::join's job) and TextFormatter, the base of the fmt formatters of ms's
// value types (DType, Shape, Device), which honours string specs such as "{:>8}".
// Must not know about ms's types.

#include <iterator>
#include <string>
#include <string_view>

#include <fmt/core.h>

namespace ms::detail {

/// The elements of [first, last) formatted with "{}", separated by `sep`.
template <class It>
std::string join_text(It first, It last, std::string_view sep) {
  std::string s;
  for (It it = first; it != last; ++it) {
    if (it != first) s += sep;
    fmt::format_to(std::back_inserter(s), "{}", *it);
  }
  return s;
}
/// The elements of a range formatted with "{}", separated by `sep`.
template <class R>
std::string join_text(const R& r, std::string_view sep) {
  return join_text(std::begin(r), std::end(r), sep);
}

/// A formatter for a type printed as text: parse keeps the spec ("{:>8}"), format_text
/// formats the text with it (fmt's string formatting, at run time).
struct TextFormatter {
  char spec[32] = "{}";
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    std::size_t n = 0;
    spec[n++] = '{';
    spec[n++] = ':';
    for (; it != ctx.end() && *it != '}'; ++it) {
      if (n + 2 >= sizeof spec) ctx.on_error("format spec too long");
      spec[n++] = *it;
    }
    spec[n++] = '}';
    spec[n] = '\0';
    return it;
  }
  template <class Ctx>
  auto format_text(std::string_view text, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), fmt::runtime(std::string_view(spec)), text);
  }
};

}  // namespace ms::detail
