// metrics.csv and summary.json (sw/include/tessera/metrics.h).
#include "tessera/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "sw/runlog/file_util.h"

namespace tessera::runlog {
namespace {

std::string format_g(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

void append_indent(std::string& out, int indent, int depth) {
  if (indent <= 0) return;
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * depth, ' ');
}

// Length of the well-formed UTF-8 sequence at s[i] (1..4), or 0 when it is not one.
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || (cp >= 0xD800 && cp <= 0xDFFF) ||
      cp > 0x10FFFF) {
    return 0;
  }
  return n;
}

}  // namespace

void MetricsCsv::set_columns(std::vector<std::string> extra_columns) {
  columns_ = {"step", "loss", "accuracy"};
  for (const std::string& c : extra_columns) {
    if (c.empty() || c.find_first_of(",\"\r\n") != std::string::npos) {
      throw std::invalid_argument("metrics.csv: bad column name '" + c +
                                  "' (empty, or holds ',', '\"', CR or LF)");
    }
    columns_.push_back(c);
  }
}

std::string MetricsCsv::header() const {
  std::string header;
  for (size_t i = 0; i < columns_.size(); ++i) header += (i ? "," : "") + columns_[i];
  return header + "\n";
}

MetricsCsv::MetricsCsv(const std::string& dir, std::vector<std::string> extra_columns) {
  set_columns(std::move(extra_columns));
  make_dirs(dir);
  path_ = (dir.empty() ? std::string(".") : dir) + "/" + kMetricsCsvName;
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) throw std::runtime_error(errno_message(path_, "cannot create"));
  if (std::fputs(header().c_str(), file_) == EOF || std::fflush(file_) != 0) {
    throw std::runtime_error(errno_message(path_, "write"));
  }
}

MetricsCsv::MetricsCsv(const std::string& dir, std::vector<std::string> extra_columns,
                       int64_t first_step) {
  set_columns(std::move(extra_columns));
  make_dirs(dir);
  path_ = (dir.empty() ? std::string(".") : dir) + "/" + kMetricsCsvName;
  const std::string head = header();
  std::string kept = head, text;
  const bool exists = ::access(path_.c_str(), F_OK) == 0;
  if (exists) {
    text = read_file(path_);
    if (text.compare(0, head.size(), head) != 0) {
      const std::string found = text.substr(0, text.find('\n'));
      throw std::runtime_error(path_ + ": line 1: header is '" + found + "', this run writes '" +
                               head.substr(0, head.size() - 1) + "'");
    }
    int64_t last = -1;
    size_t pos = head.size();
    for (size_t line = 2; pos < text.size(); ++line) {
      const size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a torn last line: the killed run's, not covered
      const std::string row = text.substr(pos, nl - pos);
      char* end = nullptr;
      errno = 0;
      const long long step = std::strtoll(row.c_str(), &end, 10);
      if (end == row.c_str() || *end != ',' || errno != 0 || step < 0 || step <= last) {
        throw std::runtime_error(path_ + ": line " + std::to_string(line) + " (byte offset " +
                                 std::to_string(pos) + "): malformed row '" + row +
                                 "' (expected an increasing step, then the values)");
      }
      if (step >= first_step) break;
      kept.append(text, pos, nl + 1 - pos);
      last = step;
      pos = nl + 1;
    }
    if (last >= 0 && last + 1 != first_step) {
      throw std::runtime_error(path_ + ": its rows end at step " + std::to_string(last) +
                               ", the checkpoint is at step " + std::to_string(first_step) +
                               ": the rows in between are missing");
    }
  }
  if (!exists || kept != text) write_file_atomically(path_, kept);  // else nothing to drop
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr) throw std::runtime_error(errno_message(path_, "cannot open to append"));
}

MetricsCsv::~MetricsCsv() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsCsv::sync() {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    throw std::runtime_error(errno_message(path_, "fsync"));
  }
}

void MetricsCsv::add_row(int64_t step, double loss, double accuracy,
                         const std::vector<double>& extras) {
  if (extras.size() + 3 != columns_.size()) {
    throw std::invalid_argument(path_ + ": row has " + std::to_string(extras.size()) +
                                " extra values, the header " + std::to_string(columns_.size() - 3) +
                                " extra columns");
  }
  std::string row =
      std::to_string(step) + "," + format_g("%.9g", loss) + "," + format_g("%.9g", accuracy);
  for (double v : extras) row += "," + format_g("%.9g", v);
  row += "\n";
  if (std::fputs(row.c_str(), file_) == EOF || std::fflush(file_) != 0) {
    throw std::runtime_error(errno_message(path_, "write"));
  }
}

JsonValue JsonValue::object(Object fields) {
  JsonValue v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(fields);
  return v;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\\ufffd";  // not UTF-8: the replacement character, so the file stays JSON
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out += "\"";
  return out;
}

std::string JsonValue::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void JsonValue::dump_to(std::string& out, int indent, int depth) const {
  switch (kind_) {
    case Kind::kNull:
      out += "null";
      break;
    case Kind::kBool:
      out += bool_ ? "true" : "false";
      break;
    case Kind::kInt:
      out += std::to_string(int_);
      break;
    case Kind::kUint:
      out += std::to_string(uint_);
      break;
    case Kind::kDouble: {
      if (!std::isfinite(double_)) {
        out += "null";  // JSON has no NaN or infinity
        break;
      }
      std::string s = format_g("%.17g", double_);
      // Keep it a float to readers that tell the two apart: 3 -> 3.0.
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      out += s;
      break;
    }
    case Kind::kString:
      out += json_quote(string_);
      break;
    case Kind::kArray:
      out += "[";
      for (size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ",";
        append_indent(out, indent, depth + 1);
        array_[i].dump_to(out, indent, depth + 1);
      }
      if (!array_.empty()) append_indent(out, indent, depth);
      out += "]";
      break;
    case Kind::kObject:
      out += "{";
      for (size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ",";
        append_indent(out, indent, depth + 1);
        out += json_quote(object_[i].first);
        out += indent > 0 ? ": " : ":";
        object_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!object_.empty()) append_indent(out, indent, depth);
      out += "}";
      break;
  }
}

void write_summary_json(const std::string& path,
                        const std::vector<std::pair<std::string, JsonValue>>& fields) {
  write_file_atomically(path, JsonValue::object(fields).dump(2) + "\n");
}

}  // namespace tessera::runlog
