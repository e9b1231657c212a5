// make_seeds OUT_DIR: the fuzz targets' seed inputs, made with the project's own writers so
// that they are valid files of each format: OUT_DIR/idx (a tiny t10k image/label pair, raw and
// gzip, in fuzz_idx's input layout), OUT_DIR/program (every fuzz/corpus/asm/*.s assembled for
// N = 4), OUT_DIR/checkpoint (a checkpoint from encode_checkpoint, whole and its payload alone),
// OUT_DIR/tfrecord (an image dataset from write_tfrecord_images, an Example alone).
// The text seeds (assembly, traces, vectors) are fuzz/corpus/<target>/ themselves.
#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/asm.h"
#include "tessera/checkpoint.h"
#include "tessera/tfrecord.h"

namespace {

using Bytes = std::vector<uint8_t>;

void write(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error(path + ": cannot write");
}

void make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error(dir + ": cannot create");
  }
}

// An IDX file of unsigned bytes: 0x00 0x00 0x08 ndims, the dims big-endian, the payload.
Bytes idx(const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int k = 3; k >= 0; --k) b.push_back(static_cast<uint8_t>(d >> (8 * k)));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes gzip(const Bytes& raw) {
  z_stream s{};
  if (deflateInit2(&s, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  Bytes out(deflateBound(&s, raw.size()) + 32);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  if (deflate(&s, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// fuzz_idx's layout: the images file's length (4 bytes, little-endian), it, the labels file.
Bytes idx_pair(const Bytes& images, const Bytes& labels) {
  Bytes b;
  for (int k = 0; k < 4; ++k) b.push_back(static_cast<uint8_t>(images.size() >> (8 * k)));
  b.insert(b.end(), images.begin(), images.end());
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

void idx_seeds(const std::string& dir) {
  Bytes pixels;
  for (int k = 0; k < 2 * 3 * 3; ++k) pixels.push_back(static_cast<uint8_t>(k * 14));
  const Bytes images = idx({2, 3, 3}, pixels);
  const Bytes labels = idx({2}, {7, 1});
  write(dir + "/pair_raw.bin", idx_pair(images, labels));
  write(dir + "/pair_gzip.bin", idx_pair(gzip(images), gzip(labels)));
  write(dir + "/pair_gzip_images.bin", idx_pair(gzip(images), labels));
  Bytes two_members = gzip(Bytes(images.begin(), images.begin() + 10));
  const Bytes rest = gzip(Bytes(images.begin() + 10, images.end()));
  two_members.insert(two_members.end(), rest.begin(), rest.end());
  write(dir + "/pair_two_gzip_members.bin", idx_pair(two_members, labels));
  write(dir + "/four_dims.bin", idx_pair(idx({1, 2, 1, 2}, {1, 2, 3, 4}), labels));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void program_seeds(const std::string& asm_dir, const std::string& dir) {
  DIR* d = opendir(asm_dir.c_str());
  if (!d) throw std::runtime_error(asm_dir + ": cannot open");
  int written = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 3 || name.compare(name.size() - 2, 2, ".s") != 0) continue;
    const tessera::assembler::AsmResult r =
        tessera::assembler::assemble(read_text(asm_dir + "/" + name), {4});
    if (!r.ok()) {
      closedir(d);
      throw std::runtime_error(tessera::assembler::format_error(asm_dir + "/" + name, r.errors[0]));
    }
    write(dir + "/" + name.substr(0, name.size() - 2) + ".bin", r.bytes());
    ++written;
  }
  closedir(d);
  if (written == 0) throw std::runtime_error(asm_dir + ": no .s files");
}

void checkpoint_seeds(const std::string& dir) {
  tessera::runlog::Checkpoint c;
  c.model_signature = "fuzz-model n=4";  // fuzz_checkpoint's expected signature
  c.step = 3;
  c.data_epoch = 1;
  c.data_index = 2;
  c.seed = 42;
  c.tensors.push_back({"dense/kernel", {2, 2}, {1.0f, -2.0f, 0.5f, 0.0f}});
  c.tensors.push_back({"dense/bias", {}, {0.25f}});
  c.tensors.push_back({"empty", {0}, {}});
  c.meta = {{"optimizer", "adam"}, {"lr", "0.001"}};
  const std::string file = tessera::runlog::encode_checkpoint(c);
  write(dir + "/ckpt.tsr", Bytes(file.begin(), file.end()));
  // The payload alone (fuzz_checkpoint wraps every input in a header and CRC too).
  const size_t header = tessera::runlog::kCheckpointHeaderBytes;
  const size_t crc = tessera::runlog::kCheckpointCrcBytes;
  write(dir + "/payload.bin", Bytes(file.begin() + header, file.end() - crc));
}

void tfrecord_seeds(const std::string& dir) {
  tessera::data::Dataset ds;
  ds.count = 3;
  ds.rows = 2;
  ds.cols = 3;
  for (int k = 0; k < 3 * 2 * 3; ++k) ds.images.push_back(static_cast<uint8_t>(k * 15));
  ds.labels = {0, 9, 255};
  tessera::data::write_tfrecord_images(ds, dir + "/images.tfrecord");
  // An Example alone (fuzz_tfrecord also frames every input as one record's data).
  tessera::data::Example ex;
  ex.features["image"] = tessera::data::Feature::bytes({"abcd"});
  ex.features["label"] = tessera::data::Feature::int64s({-1, 300});
  ex.features["mean"] = tessera::data::Feature::floats({0.5f, -2.0f});
  const std::string bytes = tessera::data::encode_example(ex);
  write(dir + "/example.bin", Bytes(bytes.begin(), bytes.end()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  try {
    make_dir(out);
    for (const char* t : {"idx", "program", "checkpoint", "tfrecord"}) make_dir(out + "/" + t);
    idx_seeds(out + "/idx");
    program_seeds(std::string(TESSERA_FUZZ_CORPUS_DIR) + "/asm", out + "/program");
    checkpoint_seeds(out + "/checkpoint");
    tfrecord_seeds(out + "/tfrecord");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
