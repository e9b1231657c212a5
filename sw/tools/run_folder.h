// A training run's folder (docs/errors.md): the lock that keeps one run at a time in it, the
// clean-up of what a killed writer left, and where a --resume argument points. Used by both
// training paths (the example CNN's and the general compiler's).
#pragma once

#include <string>

namespace tessera::tools {

// An exclusive lock on a run folder: flock(2) on DIR/.lock, which holds the holder's pid. The
// kernel drops a flock when its process ends, however it ends (SIGKILL included), so a killed
// run never leaves a stale lock in the way of its resume; the .lock file itself stays.
class RunFolderLock {
 public:
  RunFolderLock() = default;
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;
  ~RunFolderLock();  // releases the lock
  // True when this process holds the lock now; false with `message` set otherwise.
  bool acquire(const std::string& dir, std::string& message);

 private:
  int fd_ = -1;
};

// Removes what writers killed mid-write left in `dir` (not its subfolders): the tmp files of the
// atomic replacements (NAME.tmp.<pid>[.png]). Only called with the folder's lock held, so no
// live writer owns one. Returns how many went.
int remove_stale_tmp_files(const std::string& dir);

// Removes the event files in `dir`: a new run in a folder replaces its metrics.csv, summary and
// checkpoint, and an old event file would show another run's curves beside this one's.
void remove_event_files(const std::string& dir);

// The run folder a --resume argument names: the folder itself, or for its checkpoint file
// (DIR/checkpoint/ckpt.tsr) the folder two levels up; empty for another file.
std::string resume_run_dir(const std::string& resume);

// Whether two paths name the same folder (false when either is empty or does not resolve).
bool same_folder(const std::string& a, const std::string& b);

}  // namespace tessera::tools
