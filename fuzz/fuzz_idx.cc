// fuzz_idx: the IDX reader and the MNIST loader (sw/data/idx.cc) on arbitrary files: read_idx
// (raw or gzip, the magic, type, dims, payload size) and load_mnist (3-D images, 1-D labels, the
// counts agree, every label below 10).
// Input: a 4-byte little-endian length L, then L bytes of the images file (fewer if the input
// is shorter), then the labels file. Both are written into a scratch folder as the t10k pair
// and read from there, as the tools read them.
// Properties: a DataError names the file first; an array read has 1..4 dims and exactly
// product(dims) bytes; a dataset has count images of rows x cols bytes and count labels < 10.
// Any other exception, a sanitizer report or a huge allocation is a finding.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "fuzz/fuzz_check.h"
#include "tessera/data.h"

namespace {

std::string scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz_idx.XXXXXX";
    if (!mkdtemp(t.data())) std::abort();
    return t;
  }();
  return dir;
}

void write(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) std::abort();
}

uint64_t product(const std::vector<uint32_t>& dims) {
  uint64_t p = 1;
  for (uint32_t d : dims) p *= d;
  return p;
}

// read_idx on one file: a checked array or a DataError naming the file.
bool read_one(const std::string& path) {
  try {
    const tessera::data::IdxArray a = tessera::data::read_idx(path);
    FUZZ_CHECK(a.dims.size() >= 1 && a.dims.size() <= 4, path);
    FUZZ_CHECK(a.data.size() == product(a.dims), path);
    return true;
  } catch (const tessera::data::DataError& e) {
    FUZZ_CHECK(starts_with(e.what(), path), e.what());
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t len = 0;
  for (int k = 0; k < 4; ++k) len |= uint32_t{data[k]} << (8 * k);
  const size_t images_size = std::min<size_t>(len, size - 4);
  const std::string dir = scratch_dir();
  const std::string images = dir + "/t10k-images-idx3-ubyte";
  const std::string labels = dir + "/t10k-labels-idx1-ubyte";
  write(images, data + 4, images_size);
  write(labels, data + 4 + images_size, size - 4 - images_size);

  const bool images_ok = read_one(images);
  const bool labels_ok = read_one(labels);
  try {
    const tessera::data::Dataset ds = tessera::data::load_mnist(dir, tessera::data::Split::kTest);
    FUZZ_CHECK(images_ok && labels_ok, "load_mnist read a file read_idx refused");
    FUZZ_CHECK(ds.images.size() == uint64_t{ds.count} * ds.rows * ds.cols, "image bytes");
    FUZZ_CHECK(ds.labels.size() == ds.count, "label count");
    for (uint8_t l : ds.labels) FUZZ_CHECK(l < 10, "label " + std::to_string(l));
  } catch (const tessera::data::DataError& e) {
    FUZZ_CHECK(starts_with(e.what(), images) || starts_with(e.what(), labels), e.what());
  }
  return 0;
}
