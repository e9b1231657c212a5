// File helpers of the run-folder writers (file_util.h).
#include "sw/runlog/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tessera::runlog {

std::string errno_message(const std::string& path, const std::string& what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void make_dirs(const std::string& dir) {
  if (dir.empty()) return;
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      throw std::runtime_error(errno_message(prefix, "cannot create directory"));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw std::runtime_error(errno_message(dir, "stat"));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(dir + ": exists and is not a directory");
}

namespace {

// Writes all of `bytes` to `fd`; false (errno set) on failure.
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(errno_message(tmp, "cannot create"));
  // From here on the tmp file is ours: every failure removes it, keeping errno's message.
  auto fail = [&](const std::string& what, bool close_fd) {
    const std::string message = errno_message(tmp, what);
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(message);
  };
  if (!write_all(fd, bytes)) fail("write", true);
  if (::fsync(fd) != 0) fail("fsync", true);
  if (::close(fd) != 0) fail("close", false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail("cannot rename over " + path, false);
  }
  // The new file is in place; make the rename itself durable.
  const std::string dir = parent_dir(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw std::runtime_error(errno_message(dir, "cannot open directory to fsync"));
  // Some file systems cannot fsync a directory (EINVAL); the rename stands there regardless.
  if (::fsync(dfd) != 0 && errno != EINVAL) {
    const std::string message = errno_message(dir, "fsync of directory");
    ::close(dfd);
    throw std::runtime_error(message);
  }
  ::close(dfd);
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(errno_message(path, "cannot open"));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string message = errno_message(path, "read");
      ::close(fd);
      throw std::runtime_error(message);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace tessera::runlog
