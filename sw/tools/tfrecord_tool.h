// tessera tfrecord convert / check: an MNIST-layout IDX dataset written as TFRecord files of
// image Examples, and TFRecord files read back with every record's CRCs and Example checked
// (docs/data.md, "TFRecord files"). Exit status 0, or 2 for bad input (the message names the
// file and the record's byte offset).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::tools {

struct TFRecordConvertOptions {
  std::string idx_dir;     // train-images-idx3-ubyte(.gz) and the rest, as load_mnist reads them
  std::string out_prefix;  // the file (one shard) or the shards' prefix
  std::string split = "train";  // train or test
  uint32_t shards = 1;
};

// Writes the split's images and labels with data::write_tfrecord_images; prints each file
// written with its records and bytes.
int tfrecord_convert(const TFRecordConvertOptions& opt, std::ostream& out, std::ostream& err);

// Reads each file as image Examples (data::load_tfrecord_images); prints each file's records,
// image shape, label range and bytes, then the total. All files must have one shape.
int tfrecord_check(const std::vector<std::string>& files, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
