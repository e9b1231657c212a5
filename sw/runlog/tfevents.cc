// TensorBoard event files (sw/include/tessera/tfevents.h).
#include "tessera/tfevents.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "sw/runlog/file_util.h"
#include "sw/runlog/protobuf.h"
#include "tessera/crc32c.h"

namespace tessera::runlog {
namespace {

// Field numbers of tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto.
constexpr uint32_t kFieldEventWallTime = 1;     // double
constexpr uint32_t kFieldEventStep = 2;         // int64
constexpr uint32_t kFieldEventFileVersion = 3;  // string
constexpr uint32_t kFieldEventSummary = 5;      // Summary
constexpr uint32_t kFieldSummaryValue = 1;      // repeated Summary.Value
constexpr uint32_t kFieldValueTag = 1;          // string
constexpr uint32_t kFieldValueSimpleValue = 2;  // float

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

double unix_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string tfrecord_frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

EventWriter::EventWriter(const std::string& dir) { create(dir); }

void EventWriter::create(const std::string& dir) {
  make_dirs(dir);
  const std::string base = (dir.empty() ? std::string(".") : dir) + "/events.out.tfevents." +
                           std::to_string(static_cast<long long>(std::time(nullptr))) + "." +
                           hostname();
  int fd = -1;
  for (int n = 0; fd < 0; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || n == 1000)) {
      throw std::runtime_error(errno_message(path_, "cannot create event file"));
    }
  }
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const std::string message = errno_message(path_, "fdopen");
    ::close(fd);
    throw std::runtime_error(message);
  }
  proto::Writer event;
  event.double_(kFieldEventWallTime, unix_time_now());
  event.bytes(kFieldEventFileVersion, kEventFileVersion);
  write_record(event.str());
  flush();
}

EventWriter::EventWriter(const std::string& dir, int64_t first_step) {
  make_dirs(dir);
  const std::string folder = dir.empty() ? std::string(".") : dir;
  // The newest event file of the folder: the run's (a fresh run keeps one).
  std::string newest;
  struct timespec newest_time {};
  if (DIR* d = ::opendir(folder.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("events.out.tfevents.", 0) != 0 || name.find(".tmp.") != std::string::npos)
        continue;
      struct stat st {};
      if (::stat((folder + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const bool later = newest.empty() || st.st_mtim.tv_sec > newest_time.tv_sec ||
                         (st.st_mtim.tv_sec == newest_time.tv_sec &&
                          st.st_mtim.tv_nsec > newest_time.tv_nsec);
      if (later) {
        newest = name;
        newest_time = st.st_mtim;
      }
    }
    ::closedir(d);
  }
  if (newest.empty()) {
    create(dir);
    return;
  }
  path_ = folder + "/" + newest;
  const std::string file = read_file(path_);
  // Keep whole, intact records of steps below first_step; the first is the file_version event.
  size_t pos = 0;
  int64_t last_step = -1;
  for (int index = 0; pos < file.size(); ++index) {
    const std::string where =
        path_ + ": record " + std::to_string(index) + " at byte " + std::to_string(pos);
    if (file.size() - pos < 12) break;  // torn
    const uint64_t length = get_le(file, pos, 8);
    if (static_cast<uint32_t>(get_le(file, pos + 8, 4)) != masked_crc32c(file.data() + pos, 8))
      break;
    if (length > file.size() - pos - 12 || file.size() - pos - 12 - length < 4) break;
    const std::string data = file.substr(pos + 12, length);
    if (static_cast<uint32_t>(get_le(file, pos + 12 + length, 4)) !=
        masked_crc32c(data.data(), data.size()))
      break;
    bool has_step = false;
    int64_t step = 0;
    try {
      proto::Reader event(data);
      proto::Field f;
      while (event.next(f)) {
        if (f.number == kFieldEventStep && f.wire_type == proto::kVarint) {
          step = static_cast<int64_t>(f.u);
          has_step = true;
        }
      }
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    if (index == 0 && has_step) {
      throw std::runtime_error(where + ": the first record is not the file_version event");
    }
    if (has_step && step >= first_step) break;
    if (has_step) last_step = step;
    pos += 12 + length + 4;
  }
  if (pos == 0) {
    throw std::runtime_error(path_ + ": record 0 at byte 0: torn or damaged file_version event");
  }
  if (last_step >= 0 && last_step + 1 != first_step) {
    throw std::runtime_error(path_ + ": its records end at step " + std::to_string(last_step) +
                             " (byte " + std::to_string(pos) + "), the checkpoint is at step " +
                             std::to_string(first_step) + ": the steps in between are missing");
  }
  if (pos != file.size()) write_file_atomically(path_, file.substr(0, pos));  // else: all kept
  file_ = std::fopen(path_.c_str(), "ab");
  if (file_ == nullptr) throw std::runtime_error(errno_message(path_, "cannot open to append"));
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::write_record(const std::string& data) {
  const std::string record = tfrecord_frame(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw std::runtime_error(errno_message(path_, "write"));
  }
}

void EventWriter::add_scalar(const std::string& tag, int64_t step, float value, double wall_time) {
  proto::Writer v;
  v.bytes(kFieldValueTag, tag);
  v.float_(kFieldValueSimpleValue, value);
  proto::Writer summary;
  summary.message(kFieldSummaryValue, v);
  proto::Writer event;
  event.double_(kFieldEventWallTime, wall_time);
  event.int64(kFieldEventStep, step);
  event.message(kFieldEventSummary, summary);
  write_record(event.str());
}

void EventWriter::flush() {
  if (std::fflush(file_) != 0) throw std::runtime_error(errno_message(path_, "flush"));
}

void EventWriter::sync() {
  flush();
  if (::fsync(::fileno(file_)) != 0) throw std::runtime_error(errno_message(path_, "fsync"));
}

std::vector<ScalarEvent> read_scalar_events(const std::string& path) {
  const std::string file = read_file(path);
  std::vector<ScalarEvent> out;
  size_t pos = 0;
  for (int index = 0; pos < file.size(); ++index) {
    const std::string where =
        path + ": record " + std::to_string(index) + " at byte " + std::to_string(pos) + ": ";
    if (file.size() - pos < 12) throw std::runtime_error(where + "truncated header");
    const uint64_t length = get_le(file, pos, 8);
    const uint32_t length_crc = static_cast<uint32_t>(get_le(file, pos + 8, 4));
    if (length_crc != masked_crc32c(file.data() + pos, 8)) {
      throw std::runtime_error(where + "length CRC mismatch");
    }
    if (length > file.size() - pos - 12 || file.size() - pos - 12 - length < 4) {
      throw std::runtime_error(where + "truncated: the record's data runs past the end");
    }
    const std::string data = file.substr(pos + 12, length);
    const uint32_t data_crc = static_cast<uint32_t>(get_le(file, pos + 12 + length, 4));
    if (data_crc != masked_crc32c(data.data(), data.size())) {
      throw std::runtime_error(where + "data CRC mismatch");
    }
    pos += 12 + length + 4;

    try {
      double wall_time = 0;
      int64_t step = 0;
      std::string file_version;
      std::vector<std::pair<std::string, float>> values;
      proto::Reader event(data);
      proto::Field f;
      while (event.next(f)) {
        if (f.number == kFieldEventWallTime && f.wire_type == proto::kFixed64) {
          std::memcpy(&wall_time, &f.u, 8);
        } else if (f.number == kFieldEventStep && f.wire_type == proto::kVarint) {
          step = static_cast<int64_t>(f.u);
        } else if (f.number == kFieldEventFileVersion && f.wire_type == proto::kLengthDelimited) {
          file_version = std::string(f.bytes);
        } else if (f.number == kFieldEventSummary && f.wire_type == proto::kLengthDelimited) {
          proto::Reader summary(f.bytes);
          proto::Field sf;
          while (summary.next(sf)) {
            if (sf.number != kFieldSummaryValue || sf.wire_type != proto::kLengthDelimited)
              continue;
            proto::Reader value(sf.bytes);
            proto::Field vf;
            std::string tag;
            bool has_simple_value = false;
            float simple_value = 0;
            while (value.next(vf)) {
              if (vf.number == kFieldValueTag && vf.wire_type == proto::kLengthDelimited) {
                tag = std::string(vf.bytes);
              } else if (vf.number == kFieldValueSimpleValue && vf.wire_type == proto::kFixed32) {
                const uint32_t bits = static_cast<uint32_t>(vf.u);
                std::memcpy(&simple_value, &bits, 4);
                has_simple_value = true;
              }
            }
            if (has_simple_value) values.emplace_back(tag, simple_value);
          }
        }
      }
      if (index == 0 && file_version.rfind("brain.Event:", 0) != 0) {
        throw std::runtime_error("the first event has no file_version \"brain.Event:*\"");
      }
      for (auto& [tag, value] : values) out.push_back({wall_time, step, tag, value});
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(where + e.what());
    }
  }
  return out;
}

}  // namespace tessera::runlog
