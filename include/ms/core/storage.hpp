#pragma once
// Devices and storage: where a tensor's bytes live (Device) and the shared,
// reference-counted block that owns them (Storage). Views share one Storage.
// Must not know about shapes, dtypes or ops.

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "allocator.hpp"
#include "error.hpp"

namespace ms {

enum class DeviceType : std::uint8_t { cpu = 0, ascend = 1 };

/// A device: its type and index, printed "cpu" or "ascend:0".
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  static Device cpu() { return {}; }
  static Device ascend(int index = 0) { return {DeviceType::ascend, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  friend bool operator==(const Device&, const Device&) = default;
  std::string str() const { return is_cpu() ? "cpu" : MS_FORMAT("ascend:{}", index); }
  /// Parses "cpu", "ascend", "ascend:1".
  static Device parse(std::string_view s) {
    if (s == "cpu") return cpu();
    if (s.rfind("ascend", 0) == 0) {
      if (s.size() == 6) return ascend(0);
      if (s[6] == ':' && s.size() > 7) {
        int idx = 0;
        for (char c : s.substr(7)) {
          MS_CHECK(c >= '0' && c <= '9' && idx <= (std::numeric_limits<int>::max() - 9) / 10, ValueError,
                   "bad device string '{}' (expected cpu or ascend:N)", s);
          idx = idx * 10 + (c - '0');
        }
        return ascend(idx);
      }
    }
    MS_THROW(ValueError, "bad device string '{}' (expected cpu or ascend:N)", s);
  }
};

/// A block of memory on a device. Owned through an Allocator, through a user deleter
/// (from_blob with an owner), or not at all (from_blob over a borrowed buffer).
struct Storage {
  void* data = nullptr;
  std::size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;           ///< returns the block to this allocator when set
  std::function<void(void*)> deleter;       ///< otherwise called with `data` when set

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (allocator) allocator->deallocate(data, nbytes);
    else if (deleter) deleter(data);
  }

  /// A new host block of at least `nbytes`, 64-byte aligned, from the caching allocator.
  static std::shared_ptr<Storage> host(std::size_t nbytes) {
    auto s = std::allocate_shared<Storage>(detail::CachedBlockAllocator<Storage>{});
    auto& alloc = CachingHostAllocator::instance();
    s->data = alloc.allocate(nbytes);
    s->nbytes = nbytes;
    s->allocator = &alloc;
    return s;
  }
  /// A storage over memory the caller keeps alive (and optionally frees with `deleter`).
  static std::shared_ptr<Storage> borrowed(void* data, std::size_t nbytes, Device dev = {},
                                           std::function<void(void*)> deleter = {}) {
    auto s = std::make_shared<Storage>();
    s->data = data;
    s->nbytes = nbytes;
    s->device = dev;
    s->deleter = std::move(deleter);
    return s;
  }
};

}  // namespace ms

template <>
struct fmt::formatter<ms::Device> : ms::detail::TextFormatter {
  template <class Ctx>
  auto format(const ms::Device& d, Ctx& ctx) const {
    return format_text(d.str(), ctx);
  }
};
