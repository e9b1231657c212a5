// tessera tfrecord convert / check (sw/tools/tfrecord_tool.h).
#include "sw/tools/tfrecord_tool.h"

#include <sys/stat.h>

#include <algorithm>
#include <ostream>
#include <stdexcept>

#include "tessera/data.h"
#include "tessera/tfrecord.h"

namespace tessera::tools {
namespace {

uint64_t file_bytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string shape(const data::Dataset& ds) {
  return std::to_string(ds.rows) + "x" + std::to_string(ds.cols);
}

}  // namespace

int tfrecord_convert(const TFRecordConvertOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.shards == 0) {
    err << "tessera tfrecord convert: --shards must be at least 1\n";
    return 2;
  }
  try {
    const data::Split split = opt.split == "test" ? data::Split::kTest : data::Split::kTrain;
    const data::Dataset ds = data::load_mnist(opt.idx_dir, split);
    if (opt.shards > ds.count) {
      err << "tessera tfrecord convert: --shards " << opt.shards << " is more than the " << ds.count
          << " samples\n";
      return 2;
    }
    data::write_tfrecord_images(ds, opt.out_prefix, opt.shards);
    uint64_t total = 0;
    for (uint32_t s = 0; s < opt.shards; ++s) {
      const std::string path = data::tfrecord_shard_path(opt.out_prefix, s, opt.shards);
      const uint64_t records =
          (uint64_t{s} + 1) * ds.count / opt.shards - uint64_t{s} * ds.count / opt.shards;
      const uint64_t bytes = file_bytes(path);
      total += bytes;
      out << path << ": " << records << " records, " << shape(ds) << " images, " << bytes
          << " bytes\n";
    }
    if (opt.shards > 1) {
      out << "total: " << ds.count << " records in " << opt.shards << " files, " << total
          << " bytes\n";
    }
    return 0;
  } catch (const std::exception& e) {  // DataError (input or output), invalid_argument
    err << "tessera tfrecord convert: " << e.what() << "\n";
    return 2;
  }
}

int tfrecord_check(const std::vector<std::string>& files, std::ostream& out, std::ostream& err) {
  try {
    uint64_t records = 0, bytes = 0;
    std::string first_shape, first_file;
    for (const std::string& path : files) {
      const data::Dataset ds = data::load_tfrecord_images({path});
      const auto [lo, hi] = std::minmax_element(ds.labels.begin(), ds.labels.end());
      const uint64_t size = file_bytes(path);
      out << path << ": " << ds.count << " records, " << shape(ds) << " images, labels " << int(*lo)
          << ".." << int(*hi) << ", " << size << " bytes\n";
      if (first_file.empty()) {
        first_file = path;
        first_shape = shape(ds);
      } else if (shape(ds) != first_shape) {
        err << "tessera tfrecord check: " << path << ": images are " << shape(ds) << ", "
            << first_file << "'s are " << first_shape << "\n";
        return 2;
      }
      records += ds.count;
      bytes += size;
    }
    if (files.size() > 1) {
      out << "total: " << records << " records in " << files.size() << " files, " << bytes
          << " bytes\n";
    }
    return 0;
  } catch (const std::exception& e) {
    err << "tessera tfrecord check: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace tessera::tools
