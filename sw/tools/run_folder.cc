// Run folders (sw/tools/run_folder.h).
#include "sw/tools/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tessera::tools {

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool RunFolderLock::acquire(const std::string& dir, std::string& message) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    message = path + ": cannot open the run folder's lock: " + std::strerror(errno);
    return false;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    message = e == EWOULDBLOCK ? "run folder " + dir + " is in use by another tessera train (pid " +
                                     (pid.empty() ? std::string("unknown") : pid) + " holds " +
                                     path + "); wait for it to end or choose another --out"
                               : path + ": cannot lock: " + std::strerror(e);
    return false;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    message = path + ": cannot write the pid: " + std::strerror(errno);
    return false;
  }
  return true;
}

int remove_stale_tmp_files(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos && e.is_regular_file(ec) &&
        std::filesystem::remove(e.path(), ec))
      ++removed;
  }
  return removed;
}

void remove_event_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && e.is_regular_file(ec))
      std::filesystem::remove(e.path(), ec);
}

std::string resume_run_dir(const std::string& resume) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(resume);
  if (fs::is_directory(p, ec)) return p.string();
  if (p.parent_path().filename() == "checkpoint") return p.parent_path().parent_path().string();
  return "";
}

bool same_folder(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec1, ec2;
  const auto x = std::filesystem::weakly_canonical(a, ec1);
  const auto y = std::filesystem::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && x == y;
}

}  // namespace tessera::tools
