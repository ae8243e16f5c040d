#pragma once
// Files written atomically: the bytes go to a temporary file in the destination's folder
// (so the rename cannot cross file systems), which is flushed, synced and then renamed over
// the destination. A reader sees the old file or the new one, never a part; a failure
// (disk full, a closed pipe, an exception while writing) removes the temporary file and
// leaves the old file as it was. Every writer of the library goes through here: .npy,
// safetensors, frozen models, ONNX models, Chrome traces, IR dumps, generated code.

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#include <unistd.h>
#define MS_ATOMIC_FILE_POSIX 1
#endif

#include "error.hpp"

namespace ms {

/// A file being written: construct it for the destination, write(), then commit(). Without
/// commit() (an exception, an early return) the destination is untouched. Errors are
/// IOError naming `who` (the operation: "save_npy", "freeze", ...) and the destination.
class AtomicFile {
 public:
  AtomicFile(std::filesystem::path path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
    const std::string name = path_.string();
    tmp_ = name + ".tmp.XXXXXX";
#if defined(MS_ATOMIC_FILE_POSIX)
    const int fd = ::mkstemp(tmp_.data());
    if (fd < 0) MS_THROW(IOError, "{}: cannot create a file next to '{}' ({})", who_, name, std::strerror(errno));
    ::fchmod(fd, 0644);  // mkstemp makes 0600 files; what the library writes is ordinary data
    f_ = ::fdopen(fd, "wb");
    if (!f_) {
      const int e = errno;
      ::close(fd);
      std::remove(tmp_.c_str());
      MS_THROW(IOError, "{}: cannot write '{}' ({})", who_, name, std::strerror(e));
    }
#else
    tmp_ = name + ".tmp";
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) MS_THROW(IOError, "{}: cannot create a file next to '{}' ({})", who_, name, std::strerror(errno));
#endif
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }

  void write(const void* data, std::size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) fail(errno);
  }
  void write(std::string_view s) { write(s.data(), s.size()); }

  /// Flushes, syncs and closes the temporary file, then renames it over the destination.
  void commit() {
    if (std::fflush(f_) != 0) fail(errno);
#if defined(MS_ATOMIC_FILE_POSIX)
    if (::fsync(::fileno(f_)) != 0 && errno != EINVAL) fail(errno);  // EINVAL: no fsync on this file system
#endif
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail(errno);
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) MS_THROW(IOError, "{}: cannot move the new file into place as '{}' ({})", who_, path_.string(), ec.message());
    committed_ = true;
  }

  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail(int e) {
    MS_THROW(IOError, "{}: writing '{}' failed ({})", who_, path_.string(), std::strerror(e));
  }

  std::filesystem::path path_;
  std::string who_;
  std::string tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

namespace detail {
/// Seeks a file being read to an absolute 64-bit offset (fseek's long is 32 bits on some systems).
inline bool seek_file(std::FILE* f, std::uint64_t off) {
#if defined(MS_ATOMIC_FILE_POSIX)
  return ::fseeko(f, static_cast<off_t>(off), SEEK_SET) == 0;
#else
  return off <= static_cast<std::uint64_t>(LONG_MAX) && std::fseek(f, static_cast<long>(off), SEEK_SET) == 0;
#endif
}
}  // namespace detail

/// Writes `bytes` to `path` atomically (see AtomicFile).
inline void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, std::string who) {
  AtomicFile f(path, std::move(who));
  f.write(bytes);
  f.commit();
}

}  // namespace ms
