// TensorBoard event files (sw/include/tessera/tfevents.h).
#include "tessera/tfevents.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
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
constexpr uint32_t kFieldEventGraphDef = 4;     // bytes (a serialized GraphDef)
constexpr uint32_t kFieldEventSummary = 5;      // Summary
constexpr uint32_t kFieldSummaryValue = 1;      // repeated Summary.Value
constexpr uint32_t kFieldValueTag = 1;          // string
constexpr uint32_t kFieldValueSimpleValue = 2;  // float
constexpr uint32_t kFieldValueHisto = 5;        // HistogramProto
// HistogramProto: min, max, num, sum, sum_squares (double), bucket_limit, bucket (packed double)
constexpr uint32_t kFieldHistoMin = 1;
constexpr uint32_t kFieldHistoMax = 2;
constexpr uint32_t kFieldHistoNum = 3;
constexpr uint32_t kFieldHistoSum = 4;
constexpr uint32_t kFieldHistoSumSquares = 5;
constexpr uint32_t kFieldHistoBucketLimit = 6;
constexpr uint32_t kFieldHistoBucket = 7;

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// A repeated double as read: packed (one length-delimited field) or one fixed64 field a value.
void append_doubles(const proto::Field& f, std::vector<double>& out) {
  if (f.wire_type == proto::kFixed64) {
    out.push_back(as_double(f.u));
  } else if (f.wire_type == proto::kLengthDelimited) {
    if (f.bytes.size() % 8 != 0)
      throw std::runtime_error("histogram: a packed double field of " +
                               std::to_string(f.bytes.size()) + " bytes");
    for (size_t i = 0; i < f.bytes.size(); i += 8) {
      uint64_t bits = 0;
      for (int k = 0; k < 8; ++k) bits |= uint64_t{static_cast<uint8_t>(f.bytes[i + k])} << (8 * k);
      out.push_back(as_double(bits));
    }
  }
}

// One Summary.Value as read: its tag and whichever of simple_value and histo it carries.
struct ValueRead {
  std::string tag;
  bool has_simple_value = false, has_histo = false;
  float simple_value = 0;
  HistogramEvent histo;
};

// One Event as read (the fields the readers report).
struct EventRead {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool has_graph_def = false;
  std::string graph_def;
  std::vector<ValueRead> values;
};

HistogramEvent decode_histo(std::string_view msg) {
  HistogramEvent h;
  proto::Reader r(msg);
  proto::Field f;
  while (r.next(f)) {
    if (f.number == kFieldHistoBucketLimit) {
      append_doubles(f, h.bucket_limit);
    } else if (f.number == kFieldHistoBucket) {
      append_doubles(f, h.bucket);
    } else if (f.wire_type == proto::kFixed64) {
      const double v = as_double(f.u);
      if (f.number == kFieldHistoMin) h.min = v;
      if (f.number == kFieldHistoMax) h.max = v;
      if (f.number == kFieldHistoNum) h.num = v;
      if (f.number == kFieldHistoSum) h.sum = v;
      if (f.number == kFieldHistoSumSquares) h.sum_squares = v;
    }
  }
  if (h.bucket_limit.size() != h.bucket.size())
    throw std::runtime_error("histogram: " + std::to_string(h.bucket_limit.size()) +
                             " bucket limits for " + std::to_string(h.bucket.size()) + " buckets");
  return h;
}

EventRead decode_event(std::string_view data) {
  EventRead e;
  proto::Reader event(data);
  proto::Field f;
  while (event.next(f)) {
    if (f.number == kFieldEventWallTime && f.wire_type == proto::kFixed64) {
      e.wall_time = as_double(f.u);
    } else if (f.number == kFieldEventStep && f.wire_type == proto::kVarint) {
      e.step = static_cast<int64_t>(f.u);
    } else if (f.number == kFieldEventFileVersion && f.wire_type == proto::kLengthDelimited) {
      e.file_version = std::string(f.bytes);
    } else if (f.number == kFieldEventGraphDef && f.wire_type == proto::kLengthDelimited) {
      e.has_graph_def = true;
      e.graph_def = std::string(f.bytes);
    } else if (f.number == kFieldEventSummary && f.wire_type == proto::kLengthDelimited) {
      proto::Reader summary(f.bytes);
      proto::Field sf;
      while (summary.next(sf)) {
        if (sf.number != kFieldSummaryValue || sf.wire_type != proto::kLengthDelimited) continue;
        proto::Reader value(sf.bytes);
        proto::Field vf;
        ValueRead v;
        while (value.next(vf)) {
          if (vf.number == kFieldValueTag && vf.wire_type == proto::kLengthDelimited) {
            v.tag = std::string(vf.bytes);
          } else if (vf.number == kFieldValueSimpleValue && vf.wire_type == proto::kFixed32) {
            const uint32_t bits = static_cast<uint32_t>(vf.u);
            std::memcpy(&v.simple_value, &bits, 4);
            v.has_simple_value = true;
          } else if (vf.number == kFieldValueHisto && vf.wire_type == proto::kLengthDelimited) {
            v.histo = decode_histo(vf.bytes);
            v.has_histo = true;
          }
        }
        e.values.push_back(std::move(v));
      }
    }
  }
  return e;
}

// Reads every record of `path`, checking both CRCs and that the first event carries the
// file_version, and hands each decoded event to `each`; throws std::runtime_error naming the
// file and the record's byte offset on any damage.
void read_events(const std::string& path, const std::function<void(const EventRead&)>& each) {
  const std::string file = read_file(path);
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
    const std::string_view data(file.data() + pos + 12, length);
    const uint32_t data_crc = static_cast<uint32_t>(get_le(file, pos + 12 + length, 4));
    if (data_crc != masked_crc32c(data.data(), data.size())) {
      throw std::runtime_error(where + "data CRC mismatch");
    }
    pos += 12 + length + 4;
    EventRead e;
    try {
      e = decode_event(data);
      if (index == 0 && e.file_version.rfind("brain.Event:", 0) != 0) {
        throw std::runtime_error("the first event has no file_version \"brain.Event:*\"");
      }
    } catch (const std::runtime_error& err) {
      throw std::runtime_error(where + err.what());
    }
    each(e);
  }
}

}  // namespace

const std::vector<double>& histogram_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

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
  write_summary_value(v, step, wall_time);
}

void EventWriter::write_summary_value(const proto::Writer& value, int64_t step, double wall_time) {
  proto::Writer summary;
  summary.message(kFieldSummaryValue, value);
  proto::Writer event;
  event.double_(kFieldEventWallTime, wall_time);
  event.int64(kFieldEventStep, step);
  event.message(kFieldEventSummary, summary);
  write_record(event.str());
}

void EventWriter::add_histogram(const std::string& tag, int64_t step,
                                const std::vector<float>& values, double wall_time) {
  const std::vector<double>& limits = histogram_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  // (TensorFlow's Histogram: min starts at the last limit, max at -DBL_MAX; sums in double)
  double min = limits.back(), max = -DBL_MAX, sum = 0, sum_squares = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float f = values[i];
    if (!std::isfinite(f))
      throw std::invalid_argument("add_histogram '" + tag + "': value " + std::to_string(i) +
                                  " is " + (std::isnan(f) ? "NaN" : "infinite") +
                                  " (a histogram takes finite values only)");
    const double v = f;
    counts[std::upper_bound(limits.begin(), limits.end(), v) - limits.begin()] += 1.0;
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    sum_squares += v * v;
  }
  // as HistogramProto's encoder drops empty buckets: a pair per non-empty bucket, one per run
  // of empty ones (its last limit, count 0)
  std::vector<double> bucket_limit, bucket;
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0.0) {
      while (i < counts.size() && counts[i] <= 0.0) end = limits[i++];
    }
    bucket_limit.push_back(end);
    bucket.push_back(count);
  }
  proto::Writer histo;
  histo.double_(kFieldHistoMin, min);
  histo.double_(kFieldHistoMax, max);
  histo.double_(kFieldHistoNum, static_cast<double>(values.size()));
  histo.double_(kFieldHistoSum, sum);
  histo.double_(kFieldHistoSumSquares, sum_squares);
  histo.packed_doubles(kFieldHistoBucketLimit, bucket_limit);
  histo.packed_doubles(kFieldHistoBucket, bucket);
  proto::Writer v;
  v.bytes(kFieldValueTag, tag);
  v.message(kFieldValueHisto, histo);
  write_summary_value(v, step, wall_time);
}

void EventWriter::add_graph(const std::string& graph_def_bytes, double wall_time) {
  proto::Writer event;
  event.double_(kFieldEventWallTime, wall_time);
  event.bytes(kFieldEventGraphDef, graph_def_bytes);
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
  std::vector<ScalarEvent> out;
  read_events(path, [&](const EventRead& e) {
    for (const ValueRead& v : e.values)
      if (v.has_simple_value) out.push_back({e.wall_time, e.step, v.tag, v.simple_value});
  });
  return out;
}

std::vector<HistogramEvent> read_histogram_events(const std::string& path) {
  std::vector<HistogramEvent> out;
  read_events(path, [&](const EventRead& e) {
    for (const ValueRead& v : e.values) {
      if (!v.has_histo) continue;
      out.push_back(v.histo);
      out.back().wall_time = e.wall_time;
      out.back().step = e.step;
      out.back().tag = v.tag;
    }
  });
  return out;
}

std::vector<std::string> read_graph_defs(const std::string& path) {
  std::vector<std::string> out;
  read_events(path, [&](const EventRead& e) {
    if (e.has_graph_def) out.push_back(e.graph_def);
  });
  return out;
}

}  // namespace tessera::runlog
