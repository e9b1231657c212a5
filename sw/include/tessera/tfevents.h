// TensorBoard event files for a training run (docs/training.md, "Run folder"). EventWriter
// writes DIR/events.out.tfevents.<unix seconds>.<hostname>: a TFRecord stream (each record a
// uint64 length, its masked CRC-32C, the data, the data's masked CRC-32C, all little-endian)
// of Event protobufs as tensorflow/core/util/event.proto and summary.proto define them: first
// Event{wall_time, file_version: "brain.Event:2"}, then one Event{wall_time, step,
// summary{value{tag, simple_value}}} per scalar, Event{wall_time, step, summary{value{tag,
// histo}}} per histogram and Event{wall_time, graph_def} per graph. TensorBoard reads the file
// as it grows; tests/reference/read_tfevents.py reads its scalars without TensorFlow.
// read_scalar_events, read_histogram_events and read_graph_defs read it back here, checking
// both CRCs of every record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tessera::runlog {
namespace proto {
class Writer;  // sw/runlog/protobuf.h
}

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
  // Appends a histogram of `values` as TensorFlow's HistogramSummary writes it: a
  // HistogramProto over TensorFlow's default bucket limits (histogram_bucket_limits), each
  // non-empty bucket its own (limit, count) pair and each run of empty ones one pair with count
  // 0. Throws std::invalid_argument naming the tag when a value is NaN or infinite.
  void add_histogram(const std::string& tag, int64_t step, const std::vector<float>& values,
                     double wall_time = unix_time_now());
  // Appends a graph for TensorBoard's Graphs tab: `graph_def_bytes` is a serialized
  // tensorflow.GraphDef (compiler::graph_def_bytes makes one of the training step's graph).
  void add_graph(const std::string& graph_def_bytes, double wall_time = unix_time_now());
  void flush();
  // flush() and fsync: the records so far survive a crash (called before a checkpoint).
  void sync();
  const std::string& path() const { return path_; }

 private:
  void create(const std::string& dir);
  void write_record(const std::string& data);
  // Event{wall_time, step, summary{value}} for one Summary.Value message.
  void write_summary_value(const proto::Writer& value, int64_t step, double wall_time);
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

// TensorFlow's default histogram bucket limits (tensorflow/core/lib/histogram/histogram.cc):
// -DBL_MAX, the negated positive limits in increasing order, 0, then v = 1e-12, v *= 1.1 while
// v < 1e20, then DBL_MAX. Bucket i holds the values in [limit[i - 1], limit[i]).
const std::vector<double>& histogram_bucket_limits();

struct HistogramEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;  // parallel: bucket[i] counts up to bucket_limit[i]
};

// Reads an event file: checks each record's length and data CRCs and that the first event
// carries a file_version "brain.Event:*"; returns every scalar (simple_value) in file order.
// Throws std::runtime_error naming the file and the record's byte offset on any damage.
std::vector<ScalarEvent> read_scalar_events(const std::string& path);
// The same checks; every histogram (histo), or every graph_def's bytes, in file order.
std::vector<HistogramEvent> read_histogram_events(const std::string& path);
std::vector<std::string> read_graph_defs(const std::string& path);

}  // namespace tessera::runlog
