// The few pieces of the protobuf wire format that event files need: an encoder (varint,
// fixed32, fixed64, length-delimited fields) and a field-by-field decoder that skips what it
// does not know. Internal to tessera_runlog and the compiler's GraphDef export (header only);
// little-endian hosts only, as the rest of Tessera.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::runlog::proto {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class Writer {
 public:
  void varint(uint32_t field, uint64_t v) {
    key(field, kVarint);
    raw_varint(v);
  }
  // int64 as protobuf encodes it: two's complement, so a negative value takes 10 bytes.
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void fixed64(uint32_t field, uint64_t v) {
    key(field, kFixed64);
    raw_le(v, 8);
  }
  void fixed32(uint32_t field, uint32_t v) {
    key(field, kFixed32);
    raw_le(v, 4);
  }
  void double_(uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    fixed64(field, bits);
  }
  void float_(uint32_t field, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    fixed32(field, bits);
  }
  void bytes(uint32_t field, std::string_view b) {
    key(field, kLengthDelimited);
    raw_varint(b.size());
    buf_.append(b.data(), b.size());
  }
  void message(uint32_t field, const Writer& m) { bytes(field, m.buf_); }
  // A packed repeated double: one length-delimited field of the values' fixed64 bits.
  void packed_doubles(uint32_t field, const std::vector<double>& v) {
    key(field, kLengthDelimited);
    raw_varint(v.size() * 8);
    for (double d : v) {
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      raw_le(bits, 8);
    }
  }

  const std::string& str() const { return buf_; }

 private:
  void key(uint32_t field, WireType wt) { raw_varint((uint64_t{field} << 3) | wt); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }
  void raw_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  std::string buf_;
};

// One field of a message as read: its number, wire type and value (`u` for varint and fixed
// types, `bytes` for length-delimited ones, a view into the message).
struct Field {
  uint32_t number = 0;
  WireType wire_type = kVarint;
  uint64_t u = 0;
  std::string_view bytes;
};

// Reads fields one by one; throws std::runtime_error on malformed input.
class Reader {
 public:
  explicit Reader(std::string_view msg) : msg_(msg) {}
  bool next(Field& f) {
    if (pos_ == msg_.size()) return false;
    const uint64_t key = raw_varint();
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<WireType>(key & 7);
    f.bytes = {};
    switch (f.wire_type) {
      case kVarint:
        f.u = raw_varint();
        break;
      case kFixed64:
        f.u = raw_le(8);
        break;
      case kFixed32:
        f.u = raw_le(4);
        break;
      case kLengthDelimited: {
        const uint64_t n = raw_varint();
        if (n > msg_.size() - pos_) throw std::runtime_error("protobuf: length runs past the end");
        f.bytes = msg_.substr(pos_, n);
        pos_ += n;
        break;
      }
      default:
        throw std::runtime_error("protobuf: unsupported wire type " + std::to_string(key & 7));
    }
    return true;
  }

 private:
  uint64_t raw_varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == msg_.size()) throw std::runtime_error("protobuf: varint runs past the end");
      const uint8_t b = static_cast<uint8_t>(msg_[pos_++]);
      v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("protobuf: varint longer than 10 bytes");
  }
  uint64_t raw_le(int n) {
    if (msg_.size() - pos_ < static_cast<size_t>(n)) {
      throw std::runtime_error("protobuf: fixed field runs past the end");
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(msg_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }
  std::string_view msg_;
  size_t pos_ = 0;
};

}  // namespace tessera::runlog::proto
