// TensorBoard event files for a training run (docs/training.md, "Run folder"). EventWriter
// writes DIR/events.out.tfevents.<unix seconds>.<hostname>: a TFRecord stream (each record a
// uint64 length, its masked CRC-32C, the data, the data's masked CRC-32C, all little-endian)
// of Event protobufs as tensorflow/core/util/event.proto and summary.proto define them: first
// Event{wall_time, file_version: "brain.Event:2"}, then one Event{wall_time, step,
// summary{value{tag, simple_value}}} per scalar. TensorBoard reads the file as it grows;
// tests/reference/read_tfevents.py reads it without TensorFlow. read_scalar_events reads it back
// here, checking both CRCs of every record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tessera::runlog {

constexpr const char* kEventFileVersion = "brain.Event:2";

// Seconds since the Unix epoch, with the system clock's resolution.
double unix_time_now();

class EventWriter {
 public:
  // Creates `dir` (and its parents) when missing, then the event file in it; when a file of
  // that name exists already (two writers in one second), appends ".1", ".2", ... so that no
  // file is ever overwritten. Throws std::runtime_error naming the path and strerror.
  explicit EventWriter(const std::string& dir);
  // Continues the event file of a run resumed in place at step `first_step`: the newest
  // events.out.tfevents.* in DIR (by modification time) keeps its name and its records up to the
  // first one of a step >= first_step or the first torn or damaged record (a killed run's tail),
  // is replaced with them atomically, and is appended to. When DIR has no event file, creates one
  // as the other constructor. Throws std::runtime_error naming the file and the record's byte
  // offset when the kept records stop short of step first_step - 1 (or the first record is bad).
  EventWriter(const std::string& dir, int64_t first_step);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Appends one scalar event (buffered; flush() to make it visible). Throws on a write error.
  void add_scalar(const std::string& tag, int64_t step, float value,
                  double wall_time = unix_time_now());
  void flush();
  // flush() and fsync: the records so far survive a crash (called before a checkpoint).
  void sync();
  const std::string& path() const { return path_; }

 private:
  void create(const std::string& dir);
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// One TFRecord's data: encodes a record's framing around `data` (what EventWriter writes).
std::string tfrecord_frame(const std::string& data);

struct ScalarEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

// Reads an event file: checks each record's length and data CRCs and that the first event
// carries a file_version "brain.Event:*"; returns every scalar (simple_value) in file order.
// Throws std::runtime_error naming the file and the record's byte offset on any damage.
std::vector<ScalarEvent> read_scalar_events(const std::string& path);

}  // namespace tessera::runlog
