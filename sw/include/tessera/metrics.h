// Per-step metrics and the end-of-run summary of a training run (docs/training.md, "Run
// folder"). MetricsCsv writes DIR/metrics.csv: a header `step,loss,accuracy[,extra...]`, then
// one row a call, every float as %.9g (enough to read a float back exactly), flushed each row
// so that a crash loses nothing already logged. write_summary_json writes one JSON object with
// a small hand-written encoder: strings escaped (invalid UTF-8 replaced by U+FFFD), doubles as
// %.17g so they read back exactly, NaN and infinities as null; atomically (tmp + rename).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runlog {

constexpr const char* kMetricsCsvName = "metrics.csv";

class MetricsCsv {
 public:
  // Creates `dir` when missing and DIR/metrics.csv (truncating an old one), and writes the
  // header. Extra column names must be non-empty and hold no ',', '"', CR or LF
  // (std::invalid_argument otherwise). Throws std::runtime_error naming the path and strerror.
  explicit MetricsCsv(const std::string& dir, std::vector<std::string> extra_columns = {});
  // Continues the DIR/metrics.csv of a run resumed in place at step `first_step`: keeps the
  // header (it must be the one these columns give) and the whole rows of steps below
  // `first_step`, drops the rest (rows a killed run logged after its checkpoint, a torn last
  // line), replaces the file with them atomically and appends from there. A missing file is
  // created as by the other constructor. Throws std::runtime_error naming the file and line for
  // another header, a malformed row, or rows that stop short of first_step - 1.
  MetricsCsv(const std::string& dir, std::vector<std::string> extra_columns, int64_t first_step);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;

  // One row; `extras` must have one value per extra column (std::invalid_argument otherwise).
  void add_row(int64_t step, double loss, double accuracy, const std::vector<double>& extras = {});
  // Makes every row written so far durable (fsync): called before a checkpoint, so that the
  // rows of the steps a checkpoint covers survive a crash.
  void sync();
  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void set_columns(std::vector<std::string> extra_columns);
  std::string header() const;
  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* file_ = nullptr;
};

// A JSON value: null, bool, integer, double, string, array or object (keys in insertion order).
class JsonValue {
 public:
  enum class Kind { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };
  using Object = std::vector<std::pair<std::string, JsonValue>>;
  using Array = std::vector<JsonValue>;

  JsonValue() = default;  // null
  JsonValue(bool b) : kind_(Kind::kBool), bool_(b) {}
  JsonValue(int v) : kind_(Kind::kInt), int_(v) {}
  JsonValue(long v) : kind_(Kind::kInt), int_(v) {}
  JsonValue(long long v) : kind_(Kind::kInt), int_(v) {}
  JsonValue(unsigned v) : kind_(Kind::kUint), uint_(v) {}
  JsonValue(unsigned long v) : kind_(Kind::kUint), uint_(v) {}
  JsonValue(unsigned long long v) : kind_(Kind::kUint), uint_(v) {}
  JsonValue(float v) : kind_(Kind::kDouble), double_(v) {}
  JsonValue(double v) : kind_(Kind::kDouble), double_(v) {}
  JsonValue(const char* s) : kind_(Kind::kString), string_(s) {}
  JsonValue(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}
  JsonValue(Array a) : kind_(Kind::kArray), array_(std::move(a)) {}
  static JsonValue object(Object fields);
  template <typename T>
  static JsonValue array(const std::vector<T>& values) {
    Array a;
    for (const T& v : values) a.emplace_back(v);
    return JsonValue(std::move(a));
  }

  Kind kind() const { return kind_; }
  // Compact JSON text (no whitespace), or indented by `indent` spaces a level when > 0.
  std::string dump(int indent = 0) const;

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  uint64_t uint_ = 0;
  double double_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// A JSON string literal (with the quotes) for `s`.
std::string json_quote(const std::string& s);

// Writes `fields` as one JSON object (2-space indent, trailing newline) to `path` atomically.
// Throws std::runtime_error naming the path and strerror.
void write_summary_json(const std::string& path,
                        const std::vector<std::pair<std::string, JsonValue>>& fields);

}  // namespace tessera::runlog
