// fuzz_tfrecord: the TFRecord reader and the tf.train.Example decoder (sw/data/tfrecord.cc,
// sw/data/tf_example.cc) on arbitrary bytes, twice: as a whole file (the framing: headers,
// lengths, both CRCs), and as the data of one correctly framed record, so that mutations reach
// the protobuf parser past the checksums. Each file is also loaded as an image dataset.
// Properties: a DataError names the file first, and a record's error its offset and index; the
// records read frame back to exactly the file; an Example decoded encodes to bytes that decode
// to the same Example; a dataset loaded has count images of rows x cols bytes and count labels.
// Any other exception, a sanitizer report or a huge allocation (a length believed) is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_check.h"
#include "tessera/tfevents.h"
#include "tessera/tfrecord.h"

namespace {

namespace td = tessera::data;

// The input file: an in-memory file (memfd) named by its /proc/self/fd path, rewritten for each
// input; a file on disk truncated and rewritten every run would cost a writeback each time.
int scratch_fd() {
  static const int fd = memfd_create("fuzz_tfrecord", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  return fd;
}

std::string scratch_file() { return "/proc/self/fd/" + std::to_string(scratch_fd()); }

void write(const std::string& bytes) {
  const int fd = scratch_fd();
  if (::ftruncate(fd, 0) != 0) std::abort();
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
}

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

bool same(const td::Example& a, const td::Example& b) {
  if (a.features.size() != b.features.size()) return false;
  for (auto i = a.features.begin(), j = b.features.begin(); i != a.features.end(); ++i, ++j) {
    const td::Feature &x = i->second, &y = j->second;
    if (i->first != j->first || x.kind != y.kind || x.bytes_list != y.bytes_list ||
        x.int64_list != y.int64_list || !same_bits(x.float_list, y.float_list))
      return false;
  }
  return true;
}

// One record's data as an Example: decoded, or a DataError at the record's place.
void check_example(const std::string& data, const std::string& path, uint64_t offset,
                   uint64_t index) {
  try {
    const td::Example ex = td::decode_example(data, path, offset, index);
    const td::Example again = td::decode_example(td::encode_example(ex), path, offset, index);
    FUZZ_CHECK(same(ex, again), "an Example decodes differently after encoding");
  } catch (const td::DataError& e) {
    const std::string at = path + ": offset " + hex(offset) + ": record " + std::to_string(index) +
                           ": malformed Example: ";
    FUZZ_CHECK(starts_with(e.what(), at), e.what());
  }
}

void check_file(const std::string& path, const std::string& bytes) {
  write(bytes);
  try {
    const std::vector<td::TFRecord> records = td::read_tfrecords(path);
    std::string framed;
    for (const td::TFRecord& r : records) {
      FUZZ_CHECK(r.offset == framed.size(), "record offset " + std::to_string(r.offset));
      framed += tessera::runlog::tfrecord_frame(r.data);
      check_example(r.data, path, r.offset, r.index);
    }
    FUZZ_CHECK(framed == bytes, "the records read do not frame back to the file");
  } catch (const td::DataError& e) {
    FUZZ_CHECK(starts_with(e.what(), path + ": offset 0x"), e.what());
  }
  try {
    const td::Dataset ds = td::load_tfrecord_images({path});
    FUZZ_CHECK(ds.count > 0 && ds.rows > 0 && ds.cols > 0, "an empty dataset loaded");
    FUZZ_CHECK(ds.images.size() == uint64_t{ds.count} * ds.rows * ds.cols, "image bytes");
    FUZZ_CHECK(ds.labels.size() == ds.count, "label count");
  } catch (const td::DataError& e) {
    FUZZ_CHECK(starts_with(e.what(), path + ": "), e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string path = scratch_file();
  check_file(path, input);
  check_file(path, tessera::runlog::tfrecord_frame(input));
  return 0;
}
