// TFRecord files (sw/include/tessera/tfrecord.h): the framing written through
// runlog::tfrecord_frame and read back record by record with both CRCs checked, and the image
// dataset stored as one tf.train.Example per sample. The reader never allocates more than the
// bytes the file really has, whatever a length field says.
#include "tessera/tfrecord.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "sw/runlog/file_util.h"
#include "tessera/crc32c.h"
#include "tessera/tfevents.h"

namespace tessera::data {
namespace {

std::string hex(uint64_t value) {
  std::ostringstream s;
  s << "0x" << std::hex << value;
  return s.str();
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

// Reading a record's data: at most this much is allocated ahead of the bytes really read, so a
// length that lies about a pipe's contents cannot make the reader allocate it.
constexpr size_t kReadChunk = size_t{1} << 20;

}  // namespace

// ---- writer

TFRecordWriter::TFRecordWriter(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())) {
  const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw DataError(runlog::errno_message(tmp_path_, "cannot create"));
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const std::string message = runlog::errno_message(tmp_path_, "fdopen");
    ::close(fd);
    ::unlink(tmp_path_.c_str());
    throw DataError(message);
  }
}

TFRecordWriter::~TFRecordWriter() {
  if (file_) discard();
}

void TFRecordWriter::discard() {
  std::fclose(file_);
  file_ = nullptr;
  ::unlink(tmp_path_.c_str());
}

void TFRecordWriter::write(const std::string& data) {
  if (!file_) throw DataError(path_ + ": write to a closed writer");
  const std::string record = runlog::tfrecord_frame(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    const std::string message = runlog::errno_message(tmp_path_, "write");
    discard();
    throw DataError(message);
  }
  ++records_;
  bytes_ += record.size();
}

void TFRecordWriter::close() {
  if (!file_) throw DataError(path_ + ": close of a closed writer");
  auto fail = [&](const std::string& what) {
    const std::string message = runlog::errno_message(tmp_path_, what);
    discard();
    throw DataError(message);
  };
  if (std::fflush(file_) != 0) fail("flush");
  if (::fsync(::fileno(file_)) != 0) fail("fsync");
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) {
    const std::string message = runlog::errno_message(tmp_path_, "close");
    ::unlink(tmp_path_.c_str());
    throw DataError(message);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const std::string message = runlog::errno_message(tmp_path_, "cannot rename over " + path_);
    ::unlink(tmp_path_.c_str());
    throw DataError(message);
  }
  // The rename is durable once the directory is synced; some file systems refuse (EINVAL).
  const std::string dir = runlog::parent_dir(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw DataError(runlog::errno_message(dir, "cannot open directory to fsync"));
  if (::fsync(dfd) != 0 && errno != EINVAL) {
    const std::string message = runlog::errno_message(dir, "fsync of directory");
    ::close(dfd);
    throw DataError(message);
  }
  ::close(dfd);
}

// ---- reader

TFRecordReader::TFRecordReader(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw DataError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode)) size_ = st.st_size;
}

TFRecordReader::~TFRecordReader() {
  if (file_) std::fclose(file_);
}

void TFRecordReader::fail(const std::string& reason) const {
  throw DataError(path_ + ": offset " + hex(offset_) + ": record " + std::to_string(index_) + ": " +
                  reason);
}

size_t TFRecordReader::read_up_to(char* out, size_t n) {
  const size_t got = std::fread(out, 1, n, file_);
  if (got < n && std::ferror(file_)) {
    throw DataError(path_ + ": offset " + hex(offset_) + ": read error: " + std::strerror(errno));
  }
  return got;
}

bool TFRecordReader::next(TFRecord& record) {
  char header[kTFRecordHeaderBytes];
  const size_t got = read_up_to(header, sizeof header);
  if (got == 0) return false;
  if (got < sizeof header) {
    fail("truncated header: " + std::to_string(got) + " of " +
         std::to_string(kTFRecordHeaderBytes) + " bytes");
  }
  const uint64_t length = get_le(header, 8);
  const uint32_t stored_length_crc = static_cast<uint32_t>(get_le(header + 8, 4));
  const uint32_t length_crc = runlog::masked_crc32c(header, 8);
  if (stored_length_crc != length_crc) {
    std::string reason = "bad length CRC: stored " + hex32(stored_length_crc) + ", the length " +
                         hex(length) + " gives " + hex32(length_crc);
    if (offset_ == 0 && static_cast<uint8_t>(header[0]) == 0x1f &&
        static_cast<uint8_t>(header[1]) == 0x8b) {
      reason += " (the file starts with gzip's 0x1f 0x8b: gunzip a compressed TFRecord first)";
    }
    fail(reason);
  }
  if (length > kMaxTFRecordBytes) {
    fail("implausible length " + std::to_string(length) + " (more than " +
         std::to_string(kMaxTFRecordBytes) + " bytes)");
  }
  const uint64_t needed = length + kTFRecordFooterBytes;
  auto truncated = [&](uint64_t have) {
    fail("truncated data: the record needs " + std::to_string(length) + " data bytes and a " +
         std::to_string(kTFRecordFooterBytes) + "-byte CRC after its header, the file has " +
         std::to_string(have) + " more bytes");
  };
  std::string data;
  if (size_ >= 0) {  // a regular file: its size tells truncation before anything is read
    const uint64_t after_header = offset_ + kTFRecordHeaderBytes;
    const uint64_t size = static_cast<uint64_t>(size_);
    const uint64_t left = size > after_header ? size - after_header : 0;
    if (left < needed) truncated(left);
    data.reserve(needed);
  }
  // Read in chunks: the string grows only with bytes that are really there.
  while (data.size() < needed) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(needed - data.size(), kReadChunk));
    const size_t before = data.size();
    data.resize(before + want);
    const size_t n = read_up_to(data.data() + before, want);
    data.resize(before + n);
    if (n < want) truncated(data.size());
  }
  const uint32_t stored_data_crc = static_cast<uint32_t>(get_le(data.data() + length, 4));
  data.resize(length);
  const uint32_t data_crc = runlog::masked_crc32c(data.data(), data.size());
  if (stored_data_crc != data_crc) {
    fail("bad data CRC: stored " + hex32(stored_data_crc) + ", the " + std::to_string(length) +
         " data bytes give " + hex32(data_crc));
  }
  record.index = index_;
  record.offset = offset_;
  record.data = std::move(data);
  offset_ += kTFRecordHeaderBytes + needed;
  ++index_;
  return true;
}

std::vector<TFRecord> read_tfrecords(const std::string& path) {
  TFRecordReader reader(path);
  std::vector<TFRecord> records;
  TFRecord record;
  while (reader.next(record)) records.push_back(std::move(record));
  return records;
}

// ---- image datasets

std::string tfrecord_shard_path(const std::string& prefix, uint32_t shard, uint32_t shards) {
  if (shards == 1) return prefix;
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-%05u-of-%05u", shard, shards);
  return prefix + suffix;
}

namespace {

constexpr const char* kHeightKey = "height";
constexpr const char* kWidthKey = "width";

std::string image_example(const Dataset& ds, uint64_t i) {
  const uint64_t pixels = uint64_t{ds.rows} * ds.cols;
  Example ex;
  ex.features["image"] = Feature::bytes(
      {std::string(reinterpret_cast<const char*>(ds.images.data() + i * pixels), pixels)});
  ex.features["label"] = Feature::int64s({ds.labels[i]});
  ex.features[kHeightKey] = Feature::int64s({ds.rows});
  ex.features[kWidthKey] = Feature::int64s({ds.cols});
  return encode_example(ex);
}

}  // namespace

void write_tfrecord_images(const Dataset& ds, const std::string& path, uint32_t shards) {
  if (shards == 0) throw std::invalid_argument("write_tfrecord_images: shards must be >= 1");
  if (ds.images.size() != uint64_t{ds.count} * ds.rows * ds.cols || ds.labels.size() != ds.count) {
    throw std::invalid_argument("write_tfrecord_images: " + std::to_string(ds.images.size()) +
                                " image bytes and " + std::to_string(ds.labels.size()) +
                                " labels for " + std::to_string(ds.count) + " samples of " +
                                std::to_string(ds.rows) + "x" + std::to_string(ds.cols));
  }
  for (uint32_t s = 0; s < shards; ++s) {
    const uint64_t begin = uint64_t{s} * ds.count / shards;
    const uint64_t end = uint64_t{s + 1} * ds.count / shards;
    TFRecordWriter writer(tfrecord_shard_path(path, s, shards));
    for (uint64_t i = begin; i < end; ++i) writer.write(image_example(ds, i));
    writer.close();
  }
}

namespace {

// A record's place for the messages: `PATH: offset 0xOFF: record N: `.
std::string where(const std::string& path, const TFRecord& record) {
  return path + ": offset " + hex(record.offset) + ": record " + std::to_string(record.index) +
         ": ";
}

std::string feature_names(const Example& ex) {
  if (ex.features.empty()) return "none";
  std::string names;
  for (const auto& entry : ex.features) names += (names.empty() ? "" : ", ") + entry.first;
  return names;
}

const char* kind_name(Feature::Kind kind) {
  switch (kind) {
    case Feature::Kind::kBytes:
      return "bytes_list";
    case Feature::Kind::kFloat:
      return "float_list";
    case Feature::Kind::kInt64:
      return "int64_list";
    case Feature::Kind::kNone:
      break;
  }
  return "no list";
}

// The feature `key` of `ex`, which must be of `kind` with exactly one value.
const Feature& single(const Example& ex, const std::string& key, Feature::Kind kind,
                      const std::string& at) {
  const auto it = ex.features.find(key);
  if (it == ex.features.end()) {
    throw DataError(at + "no feature \"" + key + "\" (the Example has: " + feature_names(ex) + ")");
  }
  const Feature& f = it->second;
  if (f.kind != kind) {
    throw DataError(at + "feature \"" + key + "\" is a " + kind_name(f.kind) + ", not a " +
                    kind_name(kind));
  }
  const size_t n = kind == Feature::Kind::kBytes   ? f.bytes_list.size()
                   : kind == Feature::Kind::kInt64 ? f.int64_list.size()
                                                   : f.float_list.size();
  if (n != 1) {
    throw DataError(at + "feature \"" + key + "\" has " + std::to_string(n) + " values, not one");
  }
  return f;
}

struct Shape {
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// The image's shape: its height and width features, or the square of its size.
Shape image_shape(const Example& ex, uint64_t bytes, const std::string& at) {
  const bool has_height = ex.features.count(kHeightKey) != 0;
  const bool has_width = ex.features.count(kWidthKey) != 0;
  if (has_height != has_width) {
    throw DataError(at + "feature \"" + (has_height ? kHeightKey : kWidthKey) + "\" without \"" +
                    (has_height ? kWidthKey : kHeightKey) + "\"");
  }
  if (has_height) {
    const int64_t h = single(ex, kHeightKey, Feature::Kind::kInt64, at).int64_list[0];
    const int64_t w = single(ex, kWidthKey, Feature::Kind::kInt64, at).int64_list[0];
    // Both positive and no larger than the image, so that the product cannot overflow.
    if (h < 1 || w < 1 || uint64_t(h) > bytes || uint64_t(w) > bytes ||
        uint64_t(h) * uint64_t(w) != bytes) {
      throw DataError(at + "height " + std::to_string(h) + " x width " + std::to_string(w) +
                      " does not match the image's " + std::to_string(bytes) + " bytes");
    }
    return {static_cast<uint32_t>(h), static_cast<uint32_t>(w)};
  }
  uint64_t side = static_cast<uint64_t>(std::sqrt(static_cast<double>(bytes)));
  while (side * side > bytes) --side;
  while ((side + 1) * (side + 1) <= bytes) ++side;
  if (bytes == 0 || side * side != bytes) {
    throw DataError(at + "image of " + std::to_string(bytes) +
                    " bytes has no \"height\" and \"width\" features and is not square");
  }
  return {static_cast<uint32_t>(side), static_cast<uint32_t>(side)};
}

}  // namespace

Dataset load_tfrecord_images(const std::vector<std::string>& paths, const std::string& image_key,
                             const std::string& label_key) {
  if (paths.empty()) throw std::invalid_argument("load_tfrecord_images: no files");
  Dataset ds;
  std::string first_at;  // the first record's place, for a shape that differs from it
  for (const std::string& path : paths) {
    TFRecordReader reader(path);
    TFRecord record;
    while (reader.next(record)) {
      const std::string at = where(path, record);
      const Example ex = decode_example(record.data, path, record.offset, record.index);
      const std::string& image = single(ex, image_key, Feature::Kind::kBytes, at).bytes_list[0];
      const int64_t label = single(ex, label_key, Feature::Kind::kInt64, at).int64_list[0];
      if (label < 0 || label > 255) {
        throw DataError(at + "label " + std::to_string(label) + " is not in 0..255");
      }
      const Shape shape = image_shape(ex, image.size(), at);
      if (first_at.empty()) {
        first_at = at.substr(0, at.size() - 2);
        ds.rows = shape.rows;
        ds.cols = shape.cols;
      } else if (shape.rows != ds.rows || shape.cols != ds.cols) {
        throw DataError(at + "image is " + std::to_string(shape.rows) + "x" +
                        std::to_string(shape.cols) + ", the first one (" + first_at + ") is " +
                        std::to_string(ds.rows) + "x" + std::to_string(ds.cols));
      }
      if (ds.count == UINT32_MAX) throw DataError(at + "more than 2^32 - 1 records");
      ds.images.insert(ds.images.end(), image.begin(), image.end());
      ds.labels.push_back(static_cast<uint8_t>(label));
      ++ds.count;
    }
  }
  if (ds.count == 0) {
    throw DataError(paths[0] +
                    (paths.size() > 1
                         ? " (and " + std::to_string(paths.size() - 1) + " other files)"
                         : std::string()) +
                    ": no records");
  }
  return ds;
}

}  // namespace tessera::data
