// tf.train.Example in the protobuf wire format (sw/include/tessera/tfrecord.h), after
// tensorflow/core/example/example.proto and feature.proto:
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }
//            (each entry a message { string key = 1; Feature value = 2; })
//   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                           Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
// The decoder follows a proto3 parser's rules and reports the data byte where it stops.
#include <cstring>
#include <sstream>

#include "tessera/tfrecord.h"

namespace tessera::data {
namespace {

constexpr uint32_t kExampleFeatures = 1;  // Example.features
constexpr uint32_t kFeaturesFeature = 1;  // Features.feature, one map entry each
constexpr uint32_t kEntryKey = 1;
constexpr uint32_t kEntryValue = 2;
constexpr uint32_t kFeatureBytesList = 1;
constexpr uint32_t kFeatureFloatList = 2;
constexpr uint32_t kFeatureInt64List = 3;
constexpr uint32_t kListValue = 1;  // BytesList / FloatList / Int64List .value

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};

constexpr int kMaxGroupDepth = 100;  // protobuf's default recursion limit

// ---- encoder

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_length_delimited(std::string& out, uint32_t field, const std::string& bytes) {
  put_varint(out, uint64_t{field} << 3 | kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string encode_feature(const Feature& f) {
  std::string list;
  switch (f.kind) {
    case Feature::Kind::kNone:
      return {};
    case Feature::Kind::kBytes:
      for (const std::string& v : f.bytes_list) put_length_delimited(list, kListValue, v);
      break;
    case Feature::Kind::kFloat: {
      std::string packed;
      for (float v : f.float_list) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        for (int i = 0; i < 4; ++i) packed.push_back(static_cast<char>(bits >> (8 * i)));
      }
      if (!packed.empty()) put_length_delimited(list, kListValue, packed);
      break;
    }
    case Feature::Kind::kInt64: {
      std::string packed;
      for (int64_t v : f.int64_list) put_varint(packed, static_cast<uint64_t>(v));
      if (!packed.empty()) put_length_delimited(list, kListValue, packed);
      break;
    }
  }
  const uint32_t field = f.kind == Feature::Kind::kBytes   ? kFeatureBytesList
                         : f.kind == Feature::Kind::kFloat ? kFeatureFloatList
                                                           : kFeatureInt64List;
  std::string out;
  put_length_delimited(out, field, list);
  return out;
}

// ---- decoder

// A parse failure at data byte `at`; decode_example turns it into a DataError with the place.
struct ParseError {
  uint64_t at;
  std::string what;
};

struct Field {
  uint32_t number = 0;
  WireType wire_type = kVarint;
  uint64_t value = 0;  // varint, fixed64 and fixed32 fields
  size_t begin = 0;    // length-delimited fields: their bytes, [begin, end) of the data
  size_t end = 0;
};

// The fields of one message, the bytes [pos, end) of the record's data `d`, one by one.
class MessageReader {
 public:
  MessageReader(std::string_view d, size_t begin, size_t end, std::string context)
      : d_(d), pos_(begin), end_(end), context_(std::move(context)) {}

  // The next field (groups of unknown fields skipped whole); false at the message's end.
  bool next(Field& f) {
    while (pos_ < end_) {
      const size_t key_at = pos_;
      const uint64_t key = varint();
      if (key > UINT32_MAX) fail(key_at, "field key beyond 32 bits");
      f.number = static_cast<uint32_t>(key >> 3);
      f.wire_type = static_cast<WireType>(key & 7);
      if (f.number == 0) fail(key_at, "field number 0");
      if (f.wire_type == kStartGroup) {
        skip_group(f.number, key_at, 1);
        continue;
      }
      if (f.wire_type == kEndGroup) fail(key_at, "end-group without its start-group");
      read_value(f, key_at);
      return true;
    }
    return false;
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw ParseError{at, context_ + ": " + what};
  }
  const std::string& context() const { return context_; }
  bool at_end() const { return pos_ == end_; }

  uint64_t varint() {
    const size_t start = pos_;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ == end_) fail(start, "varint runs past the end of the message");
      const uint8_t b = static_cast<uint8_t>(d_[pos_++]);
      if (shift < 64) v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
    fail(start, "varint longer than 10 bytes");
  }

 private:
  void read_value(Field& f, size_t key_at) {
    switch (f.wire_type) {
      case kVarint:
        f.value = varint();
        return;
      case kFixed64:
        f.value = fixed(8, key_at);
        return;
      case kFixed32:
        f.value = fixed(4, key_at);
        return;
      case kLengthDelimited: {
        const size_t length_at = pos_;
        const uint64_t n = varint();
        if (n > end_ - pos_) {
          fail(length_at, "field " + std::to_string(f.number) + " of " + std::to_string(n) +
                              " bytes runs past the end of the message (" +
                              std::to_string(end_ - pos_) + " left)");
        }
        f.begin = pos_;
        f.end = pos_ + n;
        pos_ += n;
        return;
      }
      default:
        fail(key_at, "wire type " + std::to_string(f.wire_type) + " (field " +
                         std::to_string(f.number) + ") does not exist");
    }
  }

  uint64_t fixed(int n, size_t key_at) {
    if (end_ - pos_ < static_cast<size_t>(n)) {
      fail(key_at, std::to_string(n) + "-byte fixed field runs past the end of the message");
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(d_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }

  // Skips to the end-group of `number` (nested groups included).
  void skip_group(uint32_t number, size_t start_at, int depth) {
    if (depth > kMaxGroupDepth) fail(start_at, "groups nested deeper than 100");
    for (;;) {
      if (pos_ == end_) fail(start_at, "group " + std::to_string(number) + " has no end-group");
      const size_t key_at = pos_;
      const uint64_t key = varint();
      if (key > UINT32_MAX) fail(key_at, "field key beyond 32 bits");
      Field f;
      f.number = static_cast<uint32_t>(key >> 3);
      f.wire_type = static_cast<WireType>(key & 7);
      if (f.number == 0) fail(key_at, "field number 0");
      if (f.wire_type == kEndGroup) {
        if (f.number != number) {
          fail(key_at,
               "end-group " + std::to_string(f.number) + " closes group " + std::to_string(number));
        }
        return;
      }
      if (f.wire_type == kStartGroup) {
        skip_group(f.number, key_at, depth + 1);
      } else {
        read_value(f, key_at);
      }
    }
  }

  std::string_view d_;
  size_t pos_;
  size_t end_;
  std::string context_;
};

// Whether `s` is UTF-8 as protobuf checks a proto3 string: no overlong forms, no surrogates,
// nothing beyond U+10FFFF.
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<size_t>(n)) return false;
    for (int k = 1; k <= n; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

void parse_bytes_list(std::string_view d, size_t b, size_t e, const std::string& ctx,
                      std::vector<std::string>& out) {
  MessageReader r(d, b, e, ctx + ": bytes_list");
  Field f;
  while (r.next(f)) {
    if (f.number == kListValue && f.wire_type == kLengthDelimited) {
      out.emplace_back(d.substr(f.begin, f.end - f.begin));
    }
  }
}

float float_from_bits(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

void parse_float_list(std::string_view d, size_t b, size_t e, const std::string& ctx,
                      std::vector<float>& out) {
  MessageReader r(d, b, e, ctx + ": float_list");
  Field f;
  while (r.next(f)) {
    if (f.number != kListValue) continue;
    if (f.wire_type == kFixed32) {
      out.push_back(float_from_bits(static_cast<uint32_t>(f.value)));
    } else if (f.wire_type == kLengthDelimited) {  // packed
      const size_t n = f.end - f.begin;
      if (n % 4 != 0) {
        r.fail(f.begin, "packed values of " + std::to_string(n) +
                            " bytes are not a whole number of 4-byte floats");
      }
      for (size_t p = f.begin; p < f.end; p += 4) {
        uint32_t bits = 0;
        for (int i = 0; i < 4; ++i) bits |= uint32_t{static_cast<uint8_t>(d[p + i])} << (8 * i);
        out.push_back(float_from_bits(bits));
      }
    }
  }
}

void parse_int64_list(std::string_view d, size_t b, size_t e, const std::string& ctx,
                      std::vector<int64_t>& out) {
  MessageReader r(d, b, e, ctx + ": int64_list");
  Field f;
  while (r.next(f)) {
    if (f.number != kListValue) continue;
    if (f.wire_type == kVarint) {
      out.push_back(static_cast<int64_t>(f.value));
    } else if (f.wire_type == kLengthDelimited) {  // packed: varints back to back
      MessageReader packed(d, f.begin, f.end, r.context() + ": packed values");
      while (!packed.at_end()) out.push_back(static_cast<int64_t>(packed.varint()));
    }
  }
}

// Merges the Feature message [b, e) into `feature`: a list of the kind it holds is appended to,
// a list of another kind replaces it (a oneof).
void parse_feature(std::string_view d, size_t b, size_t e, const std::string& ctx,
                   Feature& feature) {
  MessageReader r(d, b, e, ctx);
  Field f;
  while (r.next(f)) {
    if (f.wire_type != kLengthDelimited) continue;
    Feature::Kind kind;
    if (f.number == kFeatureBytesList) {
      kind = Feature::Kind::kBytes;
    } else if (f.number == kFeatureFloatList) {
      kind = Feature::Kind::kFloat;
    } else if (f.number == kFeatureInt64List) {
      kind = Feature::Kind::kInt64;
    } else {
      continue;
    }
    if (feature.kind != kind) feature = Feature{kind, {}, {}, {}};
    switch (kind) {
      case Feature::Kind::kBytes:
        parse_bytes_list(d, f.begin, f.end, ctx, feature.bytes_list);
        break;
      case Feature::Kind::kFloat:
        parse_float_list(d, f.begin, f.end, ctx, feature.float_list);
        break;
      default:
        parse_int64_list(d, f.begin, f.end, ctx, feature.int64_list);
        break;
    }
  }
}

// One map entry {key = 1, value = 2}, its fields in any order: the key is read first, so that
// a problem in the value is reported under its feature's name.
void parse_entry(std::string_view d, size_t b, size_t e, Example& ex) {
  std::string key;
  {
    MessageReader r(d, b, e, "features: map entry");
    Field f;
    while (r.next(f)) {
      if (f.number != kEntryKey || f.wire_type != kLengthDelimited) continue;
      key.assign(d.substr(f.begin, f.end - f.begin));  // the last one counts
      if (!is_utf8(key)) r.fail(f.begin, "key is not UTF-8");
    }
  }
  const std::string ctx = "feature \"" + key + "\"";
  Feature feature;
  MessageReader r(d, b, e, ctx);
  Field f;
  while (r.next(f)) {
    if (f.number == kEntryValue && f.wire_type == kLengthDelimited) {
      parse_feature(d, f.begin, f.end, ctx, feature);
    }
  }
  ex.features[key] = std::move(feature);  // a later entry of the same key replaces it
}

std::string hex(uint64_t value) {
  std::ostringstream s;
  s << "0x" << std::hex << value;
  return s.str();
}

}  // namespace

Feature Feature::bytes(std::vector<std::string> values) {
  Feature f;
  f.kind = Kind::kBytes;
  f.bytes_list = std::move(values);
  return f;
}

Feature Feature::floats(std::vector<float> values) {
  Feature f;
  f.kind = Kind::kFloat;
  f.float_list = std::move(values);
  return f;
}

Feature Feature::int64s(std::vector<int64_t> values) {
  Feature f;
  f.kind = Kind::kInt64;
  f.int64_list = std::move(values);
  return f;
}

std::string encode_example(const Example& example) {
  std::string features;
  for (const auto& [key, feature] : example.features) {
    std::string entry;
    put_length_delimited(entry, kEntryKey, key);
    put_length_delimited(entry, kEntryValue, encode_feature(feature));
    put_length_delimited(features, kFeaturesFeature, entry);
  }
  std::string out;
  put_length_delimited(out, kExampleFeatures, features);
  return out;
}

Example decode_example(std::string_view data, const std::string& path, uint64_t record_offset,
                       uint64_t record_index) {
  Example ex;
  try {
    MessageReader example(data, 0, data.size(), "top level");
    Field f;
    while (example.next(f)) {
      if (f.number != kExampleFeatures || f.wire_type != kLengthDelimited) continue;
      // Features fields that repeat merge: their entries all count.
      MessageReader features(data, f.begin, f.end, "features");
      Field ff;
      while (features.next(ff)) {
        if (ff.number == kFeaturesFeature && ff.wire_type == kLengthDelimited) {
          parse_entry(data, ff.begin, ff.end, ex);
        }
      }
    }
  } catch (const ParseError& e) {
    throw DataError(path + ": offset " + hex(record_offset) + ": record " +
                    std::to_string(record_index) + ": malformed Example: " + e.what +
                    " (data byte " + hex(e.at) + ")");
  }
  return ex;
}

}  // namespace tessera::data
