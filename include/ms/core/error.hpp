#pragma once
// Errors: ms::Error, its typed subclasses, and the macros that throw them.
// Belongs here: the error taxonomy and message prefixing. Must not know about
// tensors or graphs; callers format shapes and dtypes into the message.

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/core.h>

#include "linkage.hpp"
#include "text.hpp"
#if MS_KERNEL_BODIES
#include <fmt/format.h>  // what the kernels and the bodies compiled once format with
#endif

namespace ms {

/// Base of every error the library throws. what() reads
/// "[ms.<category>] <message>", e.g. "[ms.shape_error] add: cannot broadcast (3, 4) with (5,)".
class Error : public std::runtime_error {
 public:
  Error(std::string category, const std::string& message)
      : std::runtime_error("[ms." + category + "] " + message),
        category_(std::move(category)),
        message_(message) {}
  /// The category without the "ms." prefix, e.g. "shape_error".
  const std::string& category() const noexcept { return category_; }
  /// The message without the category prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string category_;
  std::string message_;
};

#define MS_DEFINE_ERROR(Name, category)                                   \
  class Name : public Error {                                             \
   public:                                                                \
    explicit Name(const std::string& message) : Error(category, message) {} \
  };

/// Shapes that do not fit the op (broadcast, matmul inner dims, reshape sizes).
MS_DEFINE_ERROR(ShapeError, "shape_error")
/// A dtype the op does not accept, or two dtypes that must match and do not.
MS_DEFINE_ERROR(DTypeError, "dtype_error")
/// An axis or index out of range.
MS_DEFINE_ERROR(IndexError, "index_error")
/// Reading or writing a file failed, or a file is malformed.
MS_DEFINE_ERROR(IOError, "io_error")
/// An argument value that is invalid for reasons other than shape/dtype/index.
MS_DEFINE_ERROR(ValueError, "value_error")
/// A graph that is malformed, or an operation that is illegal during capture.
MS_DEFINE_ERROR(GraphError, "graph_error")
/// A backend call failed (device runtime status, missing library, ...).
MS_DEFINE_ERROR(BackendError, "backend_error")
/// Tensors on different devices, or an op unsupported on a device.
MS_DEFINE_ERROR(DeviceError, "device_error")
/// Memory could not be allocated.
MS_DEFINE_ERROR(MemoryError, "memory_error")
/// A feature that is not available (e.g. an op without a gradient rule).
MS_DEFINE_ERROR(NotImplementedError, "not_implemented")

#undef MS_DEFINE_ERROR

}  // namespace ms

/// MS_FORMAT("{}: shapes {} and {}", ...): fmt::format for ms's own messages and text. The
/// format string is checked against the arguments at compile time in the units that compile
/// ms's kernels (the kernel library, header-only programs), which parse every message ms has.
/// A unit with separate kernels (a user's API unit, core/linkage.hpp) formats at run time
/// instead: checking some three hundred format strings again in every such unit cost about a
/// second of its compile. Both forms format the same text, so an inline function compiled one
/// way in one unit and the other way in another behaves the same whichever copy the linker
/// keeps. Define MS_CHECKED_FORMATS to check in every unit.
#if MS_KERNEL_BODIES || defined(MS_CHECKED_FORMATS)
#define MS_FORMAT(...) ::fmt::format(__VA_ARGS__)
#else
#define MS_FORMAT(message, ...) ::fmt::vformat(::fmt::string_view(message), ::fmt::make_format_args(__VA_ARGS__))
#endif
/// Throws ms::Type with an MS_FORMAT message: MS_THROW(ShapeError, "{}: bad shape {}", op, s).
#define MS_THROW(Type, ...) throw ::ms::Type(MS_FORMAT(__VA_ARGS__))

/// Checks a user-facing condition; throws ms::Type with a formatted message when false.
#define MS_CHECK(cond, Type, ...)         \
  do {                                    \
    if (!(cond)) [[unlikely]] {           \
      MS_THROW(Type, __VA_ARGS__);        \
    }                                     \
  } while (0)
