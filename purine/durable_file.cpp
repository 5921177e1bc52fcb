#include "purine/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace purine {

namespace {

const char kTemporaryMark[] = ".tmp-";

std::string reason() { return std::strerror(errno); }

// Closes on scope exit unless released; close errors of a written file are checked by
// close_checked.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  int get() const { return fd_; }
  // Closes now; false (errno set) when close reports an error, e.g. a deferred write failure.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

void write_all(int fd, const std::string& bytes, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    require(n > 0, "failed writing '", path, "': ", n < 0 ? reason() : "no progress");
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Writes in place, checking every write, fsync (where the file supports it) and the close.
void write_in_place(const std::string& path, const std::string& bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  require(fd.get() >= 0, "cannot write '", path, "': ", reason());
  write_all(fd.get(), bytes, path);
  require(::fsync(fd.get()) == 0 || errno == EINVAL || errno == EROFS, "failed writing '", path,
          "': ", reason());
  require(fd.close(), "failed writing '", path, "': ", reason());
}

}  // namespace

bool is_durable_temporary(const std::string& file_name) {
  return file_name.find(kTemporaryMark) != std::string::npos;
}

void write_file_durably(const std::string& path, const std::string& bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    require(!S_ISDIR(st.st_mode), "cannot write '", path, "': it is a directory");
    return write_in_place(path, bytes);
  }
  const std::string temporary = path + kTemporaryMark + std::to_string(::getpid());
  Fd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  require(fd.get() >= 0, "cannot write '", path, "': ", reason());
  try {
    write_all(fd.get(), bytes, path);
    require(::fsync(fd.get()) == 0, "failed writing '", path, "': ", reason());
    require(fd.close(), "failed writing '", path, "': ", reason());
    require(::rename(temporary.c_str(), path.c_str()) == 0, "cannot write '", path,
            "': ", reason());
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  // The rename is durable once the directory is.
  const std::string dir = directory_of(path);
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  require(dir_fd.get() >= 0 && ::fsync(dir_fd.get()) == 0, "failed syncing the directory '", dir,
          "' of '", path, "': ", reason());
}

void check_writable(const std::string& path, const std::string& what) {
  require(!path.empty(), what, ": empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    require(!S_ISDIR(st.st_mode), "cannot write ", what, " '", path, "': it is a directory");
    Fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    require(fd.get() >= 0, "cannot write ", what, " '", path, "': ", reason());
    return;
  }
  // Created and removed again: what the real write will need from the directory.
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  require(fd.get() >= 0, "cannot write ", what, " '", path, "': ", reason());
  ::unlink(path.c_str());
}

namespace {

// An open file for reading, not a directory; `st` gets its status.
Fd open_for_reading(const std::string& path, const std::string& what, struct stat& st) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  require(fd.get() >= 0, "cannot read ", what, " '", path, "': ", reason());
  require(::fstat(fd.get(), &st) == 0, "cannot read ", what, " '", path, "': ", reason());
  require(!S_ISDIR(st.st_mode), "cannot read ", what, " '", path, "': it is a directory");
  return fd;
}

// Up to `limit` bytes from `fd` (fewer at its end), in a buffer of `expected` bytes at first.
std::string read_up_to(int fd, size_t expected, size_t limit, const std::string& path,
                       const std::string& what) {
  std::string bytes(std::min(expected, limit), '\0');
  size_t done = 0;
  for (;;) {
    // A device or pipe may hold more than it claims: never read past `limit`.
    if (done == bytes.size()) {
      if (done == limit) break;
      bytes.resize(std::min(limit, std::max<size_t>(2 * done, 1 << 16)));
    }
    const ssize_t n = ::read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    require(n >= 0, "failed reading ", what, " '", path, "': ", reason());
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

std::string read_file_bounded(const std::string& path, int64_t max_bytes, const std::string& what) {
  struct stat st;
  Fd fd = open_for_reading(path, what, st);
  require(!S_ISREG(st.st_mode) || st.st_size <= max_bytes, what, " '", path, "' has ", st.st_size,
          " bytes, more than the ", max_bytes, " this model could need");
  std::string bytes =
      read_up_to(fd.get(), static_cast<size_t>(S_ISREG(st.st_mode) ? st.st_size : 0),
                 static_cast<size_t>(max_bytes) + 1, path, what);
  require(static_cast<int64_t>(bytes.size()) <= max_bytes, what, " '", path,
          "' holds more than the ", max_bytes, " bytes this model could need");
  return bytes;
}

std::string read_file_prefix(const std::string& path, int64_t max_bytes, const std::string& what) {
  struct stat st;
  Fd fd = open_for_reading(path, what, st);
  return read_up_to(fd.get(), static_cast<size_t>(max_bytes), static_cast<size_t>(max_bytes), path,
                    what);
}

}  // namespace purine
