// TFRecord files of tf.train.Example protobufs, the storage TensorFlow's input pipelines read
// (docs/data.md, "TFRecord files"): the record framing with both masked CRC-32Cs checked, the
// Example/Features/Feature messages of tensorflow/core/example/{example,feature}.proto, and an
// image dataset stored one Example per sample ("image" raw bytes, "label", "height", "width"),
// whole or split into shards. Every damaged byte gives a DataError `PATH: offset 0xOFF: ...`
// with the byte offset of the record it is in.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/data.h"

namespace tessera::data {

// A record's framing: uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32
// masked CRC-32C of the data, all little-endian.
constexpr uint64_t kTFRecordHeaderBytes = 12;
constexpr uint64_t kTFRecordFooterBytes = 4;
// The largest record the reader believes (protobuf's own limit on a message, 2 GiB): a longer
// length whose CRC matches is refused as implausible before anything is allocated for it.
constexpr uint64_t kMaxTFRecordBytes = uint64_t{1} << 31;

// Writes a TFRecord file atomically: records go to PATH.tmp.<pid>, which close() flushes,
// fsyncs and renames over PATH (then fsyncs the directory). Until close() PATH is untouched; a
// writer destroyed without close() removes its tmp file. Throws DataError `PATH: what: strerror`.
class TFRecordWriter {
 public:
  explicit TFRecordWriter(const std::string& path);
  ~TFRecordWriter();
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  void write(const std::string& data);  // one record
  void close();
  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }  // written so far, framing included
  const std::string& path() const { return path_; }

 private:
  void discard();  // closes and removes the tmp file
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
};

// One record as read: its index in the file, the byte offset of its header and its data.
struct TFRecord {
  uint64_t index = 0;
  uint64_t offset = 0;
  std::string data;
};

// Reads a TFRecord file record by record, checking each one's framing: a header of 12 bytes,
// the length's CRC, a length up to kMaxTFRecordBytes, the data and its CRC all present, the
// data's CRC. Throws DataError `PATH: offset 0xOFF: record N: reason` (OFF the record's first
// byte) on the first damage, or `PATH: cannot open: <strerror>`.
class TFRecordReader {
 public:
  explicit TFRecordReader(const std::string& path);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  // The next record into `record`; false at the end of the file (after a whole record).
  bool next(TFRecord& record);
  uint64_t offset() const { return offset_; }  // of the next record
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& reason) const;
  size_t read_up_to(char* out, size_t n);  // fewer than n only at the end of the file
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t index_ = 0;
  int64_t size_ = -1;  // the file's size when it is a regular file, else -1
};

// Every record of a file, checked as TFRecordReader checks them.
std::vector<TFRecord> read_tfrecords(const std::string& path);

// A tf.train.Feature: one of bytes_list, float_list, int64_list, or none of them (kNone).
struct Feature {
  enum class Kind { kNone, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kNone;
  std::vector<std::string> bytes_list;  // the list of `kind`; the other two stay empty
  std::vector<float> float_list;
  std::vector<int64_t> int64_list;

  static Feature bytes(std::vector<std::string> values);
  static Feature floats(std::vector<float> values);
  static Feature int64s(std::vector<int64_t> values);
};

// A tf.train.Example: Features{map<string, Feature> feature}.
struct Example {
  std::map<std::string, Feature> features;
};

// The Example's protobuf bytes as TensorFlow writes them: map entries in key order, each entry
// key then value, float and int64 lists packed.
std::string encode_example(const Example& example);

// Parses an Example as a protobuf (proto3) parser does: fields in any order, unknown fields
// (groups too) skipped, a known field with another wire type skipped as unknown, float and int64
// lists packed or not, a repeated message field merged, a repeated map key's last entry kept.
// Malformed bytes (a varint or length past the end, wire type 6 or 7, field number 0, a packed
// float list not a multiple of 4 bytes, a key not UTF-8, an unclosed group) throw DataError
// `PATH: offset 0xOFF: record N: malformed Example: WHERE: what (data byte 0xB)`: the record's
// offset and index, the message (`feature "label": int64_list`) and the byte of the data.
Example decode_example(std::string_view data, const std::string& path, uint64_t record_offset,
                       uint64_t record_index);

// SHARD of SHARDS: PREFIX-SSSSS-of-NNNNN (five digits at least, TensorFlow's convention), or
// PREFIX itself when shards is 1.
std::string tfrecord_shard_path(const std::string& prefix, uint32_t shard, uint32_t shards);

// Writes `ds` one Example per sample, in order: "image" bytes_list (one value, rows * cols
// bytes, row-major), "label" int64_list, "height" (rows) and "width" (cols) int64_list. With
// shards > 1 the samples are cut into contiguous runs, shard s getting samples
// [s * count / shards, (s + 1) * count / shards), into tfrecord_shard_path(path, s, shards):
// loading the shards in order gives `ds` back. Throws std::invalid_argument for shards 0 or a
// dataset whose sizes disagree, DataError on an I/O failure.
void write_tfrecord_images(const Dataset& ds, const std::string& path, uint32_t shards = 1);

// Reads image Examples from `paths` in order into one Dataset. Each record's Example needs a
// bytes_list `image_key` of one value (the pixels, uint8, row-major) and an int64_list
// `label_key` of one value in 0..255; its shape is its int64 "height" and "width" features
// when it has them (both, one value each, height * width = the image's bytes), otherwise the
// image must be square. Every record has the first one's shape. Throws DataError naming the
// file and the record's offset for any damage, and `PATH: no records` when the files hold none;
// std::invalid_argument for no paths.
Dataset load_tfrecord_images(const std::vector<std::string>& paths,
                             const std::string& image_key = "image",
                             const std::string& label_key = "label");

}  // namespace tessera::data
