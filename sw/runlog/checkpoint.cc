// Checkpoint files (sw/include/tessera/checkpoint.h).
#include "tessera/checkpoint.h"

#include <cstring>

#include "sw/runlog/file_util.h"
#include "tessera/crc32c.h"

namespace tessera::runlog {
namespace {

using Kind = CheckpointError::Kind;

void put_string(std::string& out, const std::string& s, const std::string& what) {
  if (s.size() > UINT32_MAX) throw CheckpointError(Kind::kInvalid, what + " is over 4 GiB");
  put_le(out, s.size(), 4);
  out += s;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string shape_string(const std::vector<uint32_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Reads the payload, whose first byte is at file offset `base`; every error names the file
// offset where the offending field starts.
class PayloadReader {
 public:
  PayloadReader(const std::string& bytes, size_t base, size_t end, const std::string& name)
      : b_(bytes), pos_(base), end_(end), name_(name) {}

  uint64_t u(int n, const char* what) {
    need(n, what);
    const uint64_t v = get_le(b_, pos_, n);
    pos_ += n;
    return v;
  }
  std::string str(const char* what) {
    const size_t at = pos_;
    const uint64_t len = u(4, what);
    if (len > end_ - pos_) {
      fail(at, std::string(what) + " of length " + std::to_string(len) +
                   " runs past the payload's end (offset " + std::to_string(end_) + ")");
    }
    std::string s = b_.substr(pos_, len);
    pos_ += len;
    return s;
  }
  void floats(std::vector<float>& out, uint64_t count) {
    out.resize(count);
    if (count) std::memcpy(out.data(), b_.data() + pos_, count * 4);  // the bits, NaNs as stored
    pos_ += count * 4;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw CheckpointError(Kind::kMalformedPayload, "checkpoint " + name_ +
                                                       ": malformed payload at offset " +
                                                       std::to_string(at) + ": " + what);
  }

 private:
  void need(int n, const char* what) {
    if (end_ - pos_ < static_cast<size_t>(n)) {
      fail(pos_, std::string(what) + " (" + std::to_string(n) +
                     " bytes) runs past the payload's end (offset " + std::to_string(end_) + ")");
    }
  }
  const std::string& b_;
  size_t pos_;
  size_t end_;
  const std::string& name_;
};

}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
  std::string payload;
  put_string(payload, c.model_signature, "model_signature");
  put_le(payload, c.step, 8);
  put_le(payload, c.data_epoch, 8);
  put_le(payload, c.data_index, 8);
  put_le(payload, c.seed, 8);
  put_le(payload, c.tensors.size(), 4);
  for (const Tensor& t : c.tensors) {
    uint64_t count = 1;
    for (uint32_t d : t.shape) count *= d;
    if (count != t.data.size()) {
      throw CheckpointError(Kind::kInvalid, "checkpoint: tensor '" + t.name + "' has " +
                                                std::to_string(t.data.size()) +
                                                " elements, its shape " + shape_string(t.shape) +
                                                " needs " + std::to_string(count));
    }
    put_string(payload, t.name, "tensor name");
    put_le(payload, t.shape.size(), 4);
    for (uint32_t d : t.shape) put_le(payload, d, 4);
    put_le(payload, count, 8);
    const size_t at = payload.size();
    payload.resize(at + count * 4);
    if (count) std::memcpy(&payload[at], t.data.data(), count * 4);
  }
  put_le(payload, c.meta.size(), 4);
  for (const auto& [key, value] : c.meta) {
    put_string(payload, key, "meta key");
    put_string(payload, value, "meta value");
  }

  std::string out(kCheckpointMagic, 8);
  put_le(out, kCheckpointVersion, 4);
  put_le(out, payload.size(), 8);
  out += payload;
  put_le(out, crc32c(out.data(), out.size()), 4);
  return out;
}

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  const std::string bytes = encode_checkpoint(c);
  try {
    write_file_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(Kind::kIo, "checkpoint save to " + path + ": " + e.what());
  }
}

Checkpoint decode_checkpoint(const std::string& b, const std::string& name,
                             const std::string& expected_signature) {
  const std::string where = "checkpoint " + name + ": ";
  const size_t size = b.size();
  const auto truncated = [&](const std::string& expected) {
    throw CheckpointError(Kind::kTruncated, where + "truncated: expected " + expected +
                                                ", the file has " + std::to_string(size) +
                                                " bytes");
  };
  if (size < 8) truncated("at least " + std::to_string(kCheckpointHeaderBytes) + " bytes");
  if (b.compare(0, 8, kCheckpointMagic, 8) != 0) {
    std::string found;
    for (int i = 0; i < 8; ++i) {
      const unsigned char c = static_cast<unsigned char>(b[i]);
      if (c >= 0x20 && c < 0x7F) {
        found.push_back(static_cast<char>(c));
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        found += buf;
      }
    }
    throw CheckpointError(Kind::kBadMagic, where + "bad magic at offset 0: expected \"" +
                                               kCheckpointMagic + "\", found \"" + found +
                                               "\" (not a Tessera checkpoint)");
  }
  if (size < kCheckpointHeaderBytes) {
    truncated("at least " + std::to_string(kCheckpointHeaderBytes) + " bytes");
  }
  const uint32_t version = static_cast<uint32_t>(get_le(b, 8, 4));
  if (version != kCheckpointVersion) {
    throw CheckpointError(Kind::kUnsupportedVersion, where + "unsupported version " +
                                                         std::to_string(version) +
                                                         " at offset 8 (this build reads version " +
                                                         std::to_string(kCheckpointVersion) + ")");
  }
  const uint64_t payload_len = get_le(b, 12, 8);
  const std::string layout = "header " + std::to_string(kCheckpointHeaderBytes) + " + payload " +
                             std::to_string(payload_len) + " + CRC " +
                             std::to_string(kCheckpointCrcBytes) +
                             "; the payload length is read at offset 12";
  if (payload_len > size - kCheckpointHeaderBytes ||
      size - kCheckpointHeaderBytes - payload_len < kCheckpointCrcBytes) {
    // Unsigned arithmetic that cannot wrap: the expected size may exceed any real file.
    const long double expected = static_cast<long double>(kCheckpointHeaderBytes) +
                                 static_cast<long double>(payload_len) + kCheckpointCrcBytes;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0Lf", expected);
    truncated(std::string(buf) + " bytes (" + layout + ")");
  }
  const size_t crc_at = kCheckpointHeaderBytes + payload_len;
  const size_t expected_size = crc_at + kCheckpointCrcBytes;
  if (size > expected_size) {
    throw CheckpointError(Kind::kTrailingBytes,
                          where + "trailing bytes: expected " + std::to_string(expected_size) +
                              " bytes (" + layout + "), the file has " + std::to_string(size) +
                              ": " + std::to_string(size - expected_size) +
                              " bytes after the CRC, from offset " + std::to_string(expected_size));
  }
  const uint32_t stored = static_cast<uint32_t>(get_le(b, crc_at, 4));
  const uint32_t computed = crc32c(b.data(), crc_at);
  if (stored != computed) {
    throw CheckpointError(Kind::kChecksumMismatch,
                          where + "checksum mismatch: the CRC-32C at offset " +
                              std::to_string(crc_at) + " is " + hex32(stored) +
                              ", the bytes before it give " + hex32(computed) +
                              " (the file is damaged)");
  }

  PayloadReader r(b, kCheckpointHeaderBytes, crc_at, name);
  Checkpoint c;
  c.model_signature = r.str("model_signature");
  c.step = r.u(8, "step");
  c.data_epoch = r.u(8, "data_epoch");
  c.data_index = r.u(8, "data_index");
  c.seed = r.u(8, "seed");
  const uint64_t tensors = r.u(4, "tensor count");
  for (uint64_t i = 0; i < tensors; ++i) {
    const size_t tensor_at = r.pos();
    Tensor t;
    t.name = r.str("tensor name");
    const uint64_t ndims = r.u(4, "tensor ndims");
    if (ndims * 4 > r.left()) {
      r.fail(tensor_at, "tensor '" + t.name + "' has " + std::to_string(ndims) +
                            " dims, more than the payload holds");
    }
    uint64_t count = 1;
    bool overflow = false;
    for (uint64_t d = 0; d < ndims; ++d) {
      t.shape.push_back(static_cast<uint32_t>(r.u(4, "tensor dim")));
      if (t.shape.back() != 0 && count > UINT64_MAX / t.shape.back()) overflow = true;
      count *= t.shape.back();
    }
    const size_t count_at = r.pos();
    const uint64_t stored_count = r.u(8, "tensor element count");
    if (overflow || stored_count != count) {
      r.fail(count_at, "tensor '" + t.name + "' has " + std::to_string(stored_count) +
                           " elements, its shape " + shape_string(t.shape) + " needs " +
                           (overflow ? std::string("more than 2^64") : std::to_string(count)));
    }
    if (count > r.left() / 4) {
      r.fail(count_at, "tensor '" + t.name + "' data (" + std::to_string(count) +
                           " floats) runs past the payload's end (offset " +
                           std::to_string(crc_at) + ")");
    }
    r.floats(t.data, count);
    c.tensors.push_back(std::move(t));
  }
  const uint64_t meta = r.u(4, "meta count");
  for (uint64_t i = 0; i < meta; ++i) {
    std::string key = r.str("meta key");
    std::string value = r.str("meta value");
    c.meta.emplace_back(std::move(key), std::move(value));
  }
  if (r.left() != 0) {
    r.fail(r.pos(), std::to_string(r.left()) + " bytes left over after the last field");
  }
  if (c.model_signature != expected_signature) {
    throw CheckpointError(Kind::kSignatureMismatch,
                          where + "checkpoint is for model \"" + c.model_signature +
                              "\", this run is \"" + expected_signature +
                              "\" (model_signature at offset " +
                              std::to_string(kCheckpointHeaderBytes) + ")");
  }
  return c;
}

Checkpoint load_checkpoint(const std::string& path, const std::string& expected_signature) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(Kind::kIo, std::string("checkpoint ") + e.what());
  }
  return decode_checkpoint(bytes, path, expected_signature);
}

}  // namespace tessera::runlog
