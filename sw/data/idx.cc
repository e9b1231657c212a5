// IDX files (LeCun's MNIST format) raw or gzip-compressed, and MNIST-layout datasets. Every
// check names the file and the offset in the uncompressed stream where the bad bytes are, so a
// damaged download is found from the message alone.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tessera/data.h"

namespace tessera::data {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kHeaderBytes = 4;  // magic (2), type (1), number of dims (1)
// deflate's largest expansion: 258 bytes from 2 bits, so at most 1032 bytes per input byte.
constexpr uint64_t kMaxDeflateRatio = 1032;

[[noreturn]] void fail_at(const std::string& path, uint64_t offset, const std::string& reason) {
  std::ostringstream message;
  message << path << ": offset 0x" << std::hex << offset << ": " << reason;
  throw DataError(message.str());
}

std::string hex_byte(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", value);
  return text;
}

const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown type";
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError(path + ": read error: " + std::strerror(errno));
  return bytes;
}

bool is_gzip(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// Inflates a gzip file (one or more members, as gzip itself accepts).
std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& compressed) {
  std::vector<uint8_t> out;
  // The last four bytes are the uncompressed size mod 2^32: a good first guess, believed only
  // up to what the compressed bytes can inflate to, so that a damaged trailer cannot make the
  // reader allocate gigabytes before it inflates a byte (zlib then reports the wrong length).
  if (compressed.size() >= 18) {
    const uint8_t* isize = compressed.data() + compressed.size() - 4;
    const uint64_t guess = uint32_t(isize[0]) | uint32_t(isize[1]) << 8 | uint32_t(isize[2]) << 16 |
                           uint32_t(isize[3]) << 24;
    out.reserve(std::min<uint64_t>(guess, kMaxDeflateRatio * compressed.size()));
  }
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    throw DataError(path + ": gzip: inflateInit2 failed");
  }
  stream.next_in = const_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(compressed.size());
  uint8_t chunk[1 << 16];
  for (;;) {
    stream.next_out = chunk;
    stream.avail_out = sizeof chunk;
    const int status = inflate(&stream, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof chunk - stream.avail_out));
    if (status == Z_STREAM_END) {
      // Another member may follow; anything else after a member is not gzip.
      if (stream.avail_in == 0) break;
      if (stream.avail_in >= 2 && stream.next_in[0] == 0x1f && stream.next_in[1] == 0x8b) {
        inflateReset(&stream);
        continue;
      }
      // (stream.total_in counts only the last member: inflateReset clears it.)
      const uint64_t left = stream.avail_in;
      const uint64_t at = compressed.size() - left;
      inflateEnd(&stream);
      std::ostringstream message;
      message << path << ": gzip: " << left
              << " bytes after the end of the compressed stream, from compressed offset 0x"
              << std::hex << at;
      throw DataError(message.str());
    }
    if (status == Z_OK) continue;
    // Where inflate stopped, as an offset into the compressed file.
    std::ostringstream at;
    at << " at compressed offset 0x" << std::hex << compressed.size() - stream.avail_in;
    if (status == Z_BUF_ERROR && stream.avail_in == 0) {
      inflateEnd(&stream);
      throw DataError(path + ": gzip: unexpected end of compressed data (file truncated)" +
                      at.str());
    }
    const std::string reason = stream.msg ? stream.msg : zError(status);
    inflateEnd(&stream);
    throw DataError(path + ": gzip: " + reason + at.str());
  }
  inflateEnd(&stream);
  return out;
}

uint32_t read_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  if (is_gzip(bytes)) bytes = gunzip(path, bytes);

  if (bytes.size() < kHeaderBytes) {
    fail_at(path, bytes.size(),
            "truncated header: " + std::to_string(bytes.size()) + " of 4 bytes");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail_at(path, 0,
            "bad magic " + hex_byte(bytes[0]) + " " + hex_byte(bytes[1]) +
                " (an IDX file starts 0x00 0x00)");
  }
  if (bytes[2] != kTypeUnsignedByte) {
    fail_at(path, 2,
            "element type " + hex_byte(bytes[2]) + " (" + idx_type_name(bytes[2]) +
                ") is not supported: only 0x08 (unsigned byte)");
  }
  const uint32_t ndims = bytes[3];
  if (ndims < 1 || ndims > kMaxDims) {
    fail_at(path, 3, "number of dimensions " + std::to_string(ndims) + " is not in 1..4");
  }
  const uint64_t payload_offset = kHeaderBytes + 4 * ndims;
  if (bytes.size() < payload_offset) {
    fail_at(path, bytes.size(),
            "truncated header: " + std::to_string(ndims) + " dimensions need " +
                std::to_string(payload_offset) + " bytes, file has " +
                std::to_string(bytes.size()));
  }

  IdxArray array;
  std::string shape;
  uint64_t payload_bytes = 1;
  bool payload_overflows = false;  // product of the dims beyond 2^64: certainly truncated
  for (uint32_t d = 0; d < ndims; ++d) {
    const uint64_t offset = kHeaderBytes + 4 * d;
    const uint32_t dim = read_be32(&bytes[offset]);
    if (dim == 0) fail_at(path, offset, "dimension " + std::to_string(d) + " is 0");
    array.dims.push_back(dim);
    shape += (d ? "x" : "") + std::to_string(dim);
    if (payload_bytes > UINT64_MAX / dim) payload_overflows = true;
    payload_bytes *= dim;
  }

  const uint64_t available = bytes.size() - payload_offset;
  if (payload_overflows || available < payload_bytes) {
    fail_at(
        path, bytes.size(),
        "truncated payload: shape " + shape + " needs " +
            (payload_overflows ? std::string("more than 2^64") : std::to_string(payload_bytes)) +
            " bytes, file has " + std::to_string(available));
  }
  if (available > payload_bytes) {
    fail_at(path, payload_offset + payload_bytes,
            std::to_string(available - payload_bytes) + " trailing bytes after the " + shape +
                " payload");
  }
  array.data.assign(bytes.begin() + payload_offset, bytes.end());
  return array;
}

namespace {

// `dir/name` if it exists, else `dir/name.gz` if that does; a DataError naming both otherwise.
std::string find_idx_file(const std::string& dir, const std::string& name) {
  const std::string raw = dir + "/" + name;
  const std::string gz = raw + ".gz";
  for (const std::string& candidate : {raw, gz}) {
    if (std::ifstream(candidate, std::ios::binary)) return candidate;
  }
  throw DataError(raw + "(.gz): cannot open: neither " + name + " nor " + name + ".gz exists in " +
                  dir);
}

}  // namespace

Dataset load_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);

  if (images.dims.size() != 3) {
    fail_at(images_path, 3,
            "images need 3 dimensions (count, rows, cols), file has " +
                std::to_string(images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    fail_at(labels_path, 3,
            "labels need 1 dimension (count), file has " + std::to_string(labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    fail_at(labels_path, 4,
            std::to_string(labels.dims[0]) + " labels for " + std::to_string(images.dims[0]) +
                " images in " + images_path);
  }
  constexpr uint64_t kLabelsPayloadOffset = 8;  // header (4) + one dimension (4)
  constexpr uint32_t kClasses = 10;
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kClasses) {
      fail_at(labels_path, kLabelsPayloadOffset + i,
              "label " + std::to_string(labels.data[i]) + " of sample " + std::to_string(i) +
                  " is not in 0..9");
    }
  }

  Dataset ds;
  ds.count = images.dims[0];
  ds.rows = images.dims[1];
  ds.cols = images.dims[2];
  ds.images = std::move(images.data);
  ds.labels = std::move(labels.data);
  return ds;
}

std::string default_data_dir() { return "/usr/share/datasets/fashion-mnist"; }

}  // namespace tessera::data
