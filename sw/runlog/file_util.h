// File helpers shared by the run-folder writers: whole-file atomic replacement (a tmp file
// beside the target, fsync, rename, fsync of the directory) and errno messages that name the
// path. Internal to tessera_runlog.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::runlog {

// "PATH: what: strerror(errno)".
std::string errno_message(const std::string& path, const std::string& what);

// The directory holding `path` ("." when it has no '/').
std::string parent_dir(const std::string& path);

// Creates `dir` and its missing parents (mkdir -p); throws std::runtime_error naming the path.
void make_dirs(const std::string& dir);

// Replaces `path` with `bytes` atomically: writes PATH.tmp.<pid>, fsyncs it, renames it over
// PATH and fsyncs the directory. On a failure before the rename, PATH is untouched and the tmp
// file (if this call created it) is removed. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The whole file; throws std::runtime_error naming the path when it cannot be read.
std::string read_file(const std::string& path);

// Little-endian integers of `n` bytes appended to / read from a byte string (the checkpoint and
// TFRecord formats).
inline void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline uint64_t get_le(const std::string& s, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(s[pos + i])} << (8 * i);
  return v;
}

}  // namespace tessera::runlog
