// Files that survive crashes, and writes whose failures are reported. Every function throws
// purine::Error naming the file and the system's reason (a full disk, a directory that is a file,
// a missing permission). Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace purine {

// Writes `bytes` to `path` so that a crash at any moment leaves either the old content or the new
// one: to a temporary beside it ("<path>.tmp-<pid>"), flushed and fsynced, renamed over `path`,
// then the directory fsynced. A `path` that exists and is not a regular file (a device such as
// /dev/full, a pipe) is written in place, every write and the close checked. On failure the
// temporary is removed and `path` is untouched.
void write_file_durably(const std::string& path, const std::string& bytes);

// Whether a temporary of write_file_durably() is named so (a leftover of a crashed writer).
bool is_durable_temporary(const std::string& file_name);

// Fails now, before work whose result would go there, if `path` cannot be written: its
// directory is missing or not a directory, or it is a directory, or opening it for writing is
// refused. Leaves an existing file as it was and removes a file it had to create. `what` names
// the file in the message ("the summary file").
void check_writable(const std::string& path, const std::string& what);

// The whole file, refusing one larger than `max_bytes` before reading it (by its size when it is
// a regular file; a device or pipe is read up to max_bytes + 1 bytes, never further).
std::string read_file_bounded(const std::string& path, int64_t max_bytes, const std::string& what);
// The file's first `max_bytes` bytes (all of a shorter file).
std::string read_file_prefix(const std::string& path, int64_t max_bytes, const std::string& what);

}  // namespace purine
