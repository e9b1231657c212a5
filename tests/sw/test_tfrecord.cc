// TFRecord files (sw/data/tfrecord.cc, sw/data/tf_example.cc) against an encoder of the test's
// own: the framing with a bit-by-bit CRC-32C (not the library's table), protobuf bytes written
// out by hand. Datasets round-trip byte for byte and shard into contiguous runs; a hand-made
// Example with its fields out of order, an unpacked label and unknown fields reads back; every
// cut and every flipped bit of a file is refused with the file and the damaged record's offset.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_util.h"
#include "tessera/data.h"
#include "tessera/tfrecord.h"

namespace tessera::data {
namespace {

// A fresh directory for one test (tests/common/test_util.h).
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_tfrecord") {}
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The names in `dir`, sorted.
std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// ---- the test's own encoder

// CRC-32C bit by bit (reflected polynomial 0x82F63B78), and TFRecord's mask.
uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  return out;
}

// One TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string frame(const std::string& data) {
  const std::string length = le(data.size(), 8);
  return length + le(masked(crc32c_bitwise(length)), 4) + data +
         le(masked(crc32c_bitwise(data)), 4);
}

std::string bytes(std::initializer_list<int> list) {
  std::string out;
  for (int b : list) out.push_back(static_cast<char>(b));
  return out;
}

std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}

// A length-delimited field of a field number below 16 (a one-byte key).
std::string ld(int field, const std::string& payload) {
  return bytes({field << 3 | 2}) + varint(payload.size()) + payload;
}

// The canonical Example of one image as TensorFlow writes it: map entries in key order
// (height, image, label, width), each key then value, int64 lists packed.
std::string image_example_bytes(const std::string& pixels, int label, int rows, int cols) {
  auto int64_feature = [](uint64_t v) { return ld(3, ld(1, varint(v))); };
  std::string features;
  features += ld(1, ld(1, "height") + ld(2, int64_feature(rows)));
  features += ld(1, ld(1, "image") + ld(2, ld(1, ld(1, pixels))));
  features += ld(1, ld(1, "label") + ld(2, int64_feature(label)));
  features += ld(1, ld(1, "width") + ld(2, int64_feature(cols)));
  return ld(1, features);
}

Dataset pattern_dataset(uint32_t count, uint32_t rows, uint32_t cols) {
  Dataset ds;
  ds.count = count;
  ds.rows = rows;
  ds.cols = cols;
  for (uint32_t i = 0; i < count * rows * cols; ++i) ds.images.push_back(uint8_t(i * 37 + i / 7));
  for (uint32_t i = 0; i < count; ++i) ds.labels.push_back(uint8_t(i * 101 % 256));
  if (count > 0) ds.labels[0] = 255;
  return ds;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Runs `body`, expects a DataError, and checks its message contains each of `parts`.
void expect_data_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no DataError; expected: " << (parts.empty() ? "" : parts[0]);
  } catch (const DataError& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message: " << message << "\nmissing: " << part;
    }
  }
}

// ---- framing

TEST(TFRecordFraming, TestCrcIsCrc32c) { EXPECT_EQ(crc32c_bitwise("123456789"), 0xE3069283u); }

TEST(TFRecordFraming, WriterFramesAsTheIndependentEncoder) {
  TempDir dir;
  const std::vector<std::string> records = {"", "a", std::string(300, '\x7f'),
                                            bytes({0, 1, 2, 0xff})};
  TFRecordWriter w(dir.file("r.tfrecord"));
  for (const std::string& r : records) w.write(r);
  w.close();
  std::string expected;
  for (const std::string& r : records) expected += frame(r);
  EXPECT_EQ(read_bytes(dir.file("r.tfrecord")), expected);
  EXPECT_EQ(w.records(), records.size());
  EXPECT_EQ(w.bytes(), expected.size());

  const std::vector<TFRecord> read = read_tfrecords(dir.file("r.tfrecord"));
  ASSERT_EQ(read.size(), records.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(read[i].data, records[i]) << "record " << i;
    EXPECT_EQ(read[i].index, i);
    EXPECT_EQ(read[i].offset, offset) << "record " << i;
    offset += 16 + records[i].size();
  }
}

TEST(TFRecordFraming, WriterReplacesAtomicallyOnClose) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord");
  write_bytes(path, "old contents");
  {
    TFRecordWriter w(path);
    w.write("new");
    EXPECT_EQ(read_bytes(path), "old contents");    // untouched until close()
    EXPECT_EQ(dir_entries(dir.path()).size(), 2u);  // and the tmp file beside it
    w.close();
  }
  EXPECT_EQ(read_bytes(path), frame("new"));
  EXPECT_EQ(dir_entries(dir.path()), std::vector<std::string>{"data.tfrecord"});
  {
    TFRecordWriter abandoned(path);
    abandoned.write("never seen");
  }  // destroyed without close(): the file stays, the tmp file goes
  EXPECT_EQ(read_bytes(path), frame("new"));
  EXPECT_EQ(dir_entries(dir.path()), std::vector<std::string>{"data.tfrecord"});
}

TEST(TFRecordFraming, WriterIntoAMissingDirectoryNamesThePath) {
  expect_data_error([] { TFRecordWriter w("/nonexistent-dir/x.tfrecord"); },
                    {"/nonexistent-dir/x.tfrecord.tmp.", "cannot create"});
}

TEST(TFRecordFraming, MissingFileNamesThePath) {
  expect_data_error([] { read_tfrecords("/nonexistent/f.tfrecord"); },
                    {"/nonexistent/f.tfrecord: cannot open: "});
}

// Three records of 5, 0 and 9 data bytes: the file, and where each record starts.
struct ThreeRecords {
  std::string file;
  std::vector<uint64_t> starts;  // and the file's size last
};

ThreeRecords three_records() {
  ThreeRecords t;
  for (const std::string& data : {std::string("hello"), std::string(), std::string("123456789")}) {
    t.starts.push_back(t.file.size());
    t.file += frame(data);
  }
  t.starts.push_back(t.file.size());
  return t;
}

TEST(TFRecordFraming, EveryCutIsTruncationAtItsRecord) {
  TempDir dir;
  const ThreeRecords t = three_records();
  const std::string path = dir.file("cut.tfrecord");
  for (uint64_t cut = 0; cut < t.file.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    write_bytes(path, t.file.substr(0, cut));
    size_t r = 0;
    while (t.starts[r + 1] <= cut) ++r;  // the record the cut falls in
    if (cut == t.starts[r]) {            // a whole number of records
      EXPECT_EQ(read_tfrecords(path).size(), r);
      continue;
    }
    const bool in_header = cut - t.starts[r] < kTFRecordHeaderBytes;
    expect_data_error(
        [&] { read_tfrecords(path); },
        {path + ": offset " + hex(t.starts[r]) + ": record " + std::to_string(r) + ": ",
         in_header ? "truncated header" : "truncated data"});
  }
}

TEST(TFRecordFraming, EveryFlippedBitIsACrcErrorAtItsRecord) {
  TempDir dir;
  const ThreeRecords t = three_records();
  const std::string path = dir.file("flip.tfrecord");
  for (uint64_t at = 0; at < t.file.size(); ++at) {
    for (int bit : {0, 3, 7}) {
      SCOPED_TRACE("byte " + std::to_string(at) + " bit " + std::to_string(bit));
      std::string damaged = t.file;
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
      write_bytes(path, damaged);
      size_t r = 0;
      while (t.starts[r + 1] <= at) ++r;
      const uint64_t in_record = at - t.starts[r];
      // The length or its CRC: the length CRC. The data or its CRC: the data CRC -- unless the
      // flipped length's CRC happens to match, which a single bit cannot make happen.
      const char* reason = in_record < kTFRecordHeaderBytes ? "bad length CRC" : "bad data CRC";
      expect_data_error([&] { read_tfrecords(path); },
                        {path + ": offset " + hex(t.starts[r]) + ": record " + std::to_string(r) +
                         ": " + reason});
    }
  }
}

TEST(TFRecordFraming, ImplausibleLengthWithAGoodCrc) {
  TempDir dir;
  const std::string path = dir.file("long.tfrecord");
  const std::string length = le(uint64_t{1} << 40, 8);
  const std::string header = length + le(masked(crc32c_bitwise(length)), 4);
  write_bytes(path, frame("first") + header + "some bytes");
  expect_data_error([&] { read_tfrecords(path); },
                    {path + ": offset 0x15: record 1: implausible length 1099511627776"});
  // Just under the limit it is a length like any other, and the file too short for it.
  const std::string two_gib = le(kMaxTFRecordBytes, 8);
  write_bytes(path, two_gib + le(masked(crc32c_bitwise(two_gib)), 4) + "x");
  expect_data_error([&] { read_tfrecords(path); },
                    {path + ": offset 0x0: record 0: truncated data", "has 1 more bytes"});
}

TEST(TFRecordFraming, GzipCompressedFileGetsAHint) {
  TempDir dir;
  const std::string path = dir.file("z.tfrecord.gz");
  write_bytes(path, bytes({0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5}));
  expect_data_error([&] { read_tfrecords(path); },
                    {path + ": offset 0x0: record 0: bad length CRC", "gzip"});
}

TEST(TFRecordFraming, PipeTruncatedInTheData) {
  TempDir dir;
  const std::string path = dir.file("fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  // A 100 MB record of which 3 bytes arrive: read through the pipe in chunks, not allocated.
  const std::string length = le(100'000'000, 8);
  const std::string stream = frame("ok") + length + le(masked(crc32c_bitwise(length)), 4) + "abc";
  std::thread writer([&] { write_bytes(path, stream); });
  expect_data_error([&] { read_tfrecords(path); },
                    {path + ": offset 0x12: record 1: truncated data", "has 3 more bytes"});
  writer.join();
}

// ---- Example

// One Example assembled by hand: an unknown fixed64 and varint at the top, the features in two
// Features fields (merged), entries in no order, value before key in some, an unpacked label
// and width, a packed height, an unknown feature (float_list) and an unknown group and field.
std::string hand_example() {
  const std::string image_entry =  // key, value, then unknown field 3 = 1
      bytes({0x0a, 0x05}) + "image" +
      bytes({0x12, 0x0a, 0x0a, 0x08, 0x0a, 0x06, 0, 1, 2, 0xfd, 0xfe, 0xff, 0x18, 0x01});
  const std::string label_entry =  // value first: Int64List{08 07}, unpacked
      bytes({0x12, 0x04, 0x1a, 0x02, 0x08, 0x07, 0x0a, 0x05}) + "label";
  const std::string height_entry =  // Int64List{0a 01 02}, packed
      bytes({0x0a, 0x06}) + "height" + bytes({0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x02});
  const std::string width_entry = bytes({0x12, 0x04, 0x1a, 0x02, 0x08, 0x03, 0x0a, 0x05}) + "width";
  const std::string colour_entry =  // FloatList{0d 1.5f}, unpacked
      bytes({0x0a, 0x06}) + "colour" + bytes({0x12, 0x07, 0x12, 0x05, 0x0d, 0, 0, 0xc0, 0x3f});
  EXPECT_EQ(image_entry.size(), 0x15u);
  EXPECT_EQ(label_entry.size(), 0x0du);
  EXPECT_EQ(height_entry.size(), 0x0fu);
  EXPECT_EQ(width_entry.size(), 0x0du);
  EXPECT_EQ(colour_entry.size(), 0x11u);
  const std::string part_a = bytes({0x0a, 0x0d}) + label_entry + bytes({0x0a, 0x0d}) + width_entry;
  const std::string part_b = bytes({0x0a, 0x11}) + colour_entry + bytes({0x0a, 0x15}) +
                             image_entry + bytes({0x0a, 0x0f}) + height_entry +
                             bytes({0x4b, 0x08, 0x01, 0x4c});  // group 9 { 1: 1 }
  EXPECT_EQ(part_a.size(), 0x1eu);
  EXPECT_EQ(part_b.size(), 0x3fu);
  return bytes({0x29, 1, 2, 3, 4, 5, 6, 7, 8}) +  // field 5, fixed64
         bytes({0x0a, 0x1e}) + part_a +           //
         bytes({0x10, 0x96, 0x01}) +              // field 2, varint 150
         bytes({0x0a, 0x3f}) + part_b;
}

TEST(TFRecordExample, HandAssembledExampleDecodes) {
  const Example ex = decode_example(hand_example(), "hand", 0, 0);
  ASSERT_EQ(ex.features.size(), 5u);
  const Feature& image = ex.features.at("image");
  EXPECT_EQ(image.kind, Feature::Kind::kBytes);
  EXPECT_EQ(image.bytes_list, std::vector<std::string>{bytes({0, 1, 2, 0xfd, 0xfe, 0xff})});
  EXPECT_EQ(ex.features.at("label").int64_list, std::vector<int64_t>{7});
  EXPECT_EQ(ex.features.at("height").int64_list, std::vector<int64_t>{2});
  EXPECT_EQ(ex.features.at("width").int64_list, std::vector<int64_t>{3});
  EXPECT_EQ(ex.features.at("colour").kind, Feature::Kind::kFloat);
  EXPECT_EQ(ex.features.at("colour").float_list, std::vector<float>{1.5f});
}

TEST(TFRecordExample, HandAssembledFileLoadsAsImages) {
  TempDir dir;
  const std::string path = dir.file("hand.tfrecord");
  // The same Example twice, then one in the canonical form with another label.
  write_bytes(path, frame(hand_example()) + frame(hand_example()) +
                        frame(image_example_bytes(bytes({9, 8, 7, 6, 5, 4}), 255, 2, 3)));
  const Dataset ds = load_tfrecord_images({path});
  EXPECT_EQ(ds.count, 3u);
  EXPECT_EQ(ds.rows, 2u);
  EXPECT_EQ(ds.cols, 3u);
  const std::string pixels = bytes({0, 1, 2, 0xfd, 0xfe, 0xff});
  EXPECT_EQ(std::string(ds.images.begin(), ds.images.end()),
            pixels + pixels + bytes({9, 8, 7, 6, 5, 4}));
  EXPECT_EQ(ds.labels, (std::vector<uint8_t>{7, 7, 255}));
}

TEST(TFRecordExample, EncodeIsTheCanonicalForm) {
  Example ex;
  ex.features["width"] = Feature::int64s({3});
  ex.features["label"] = Feature::int64s({200});
  ex.features["image"] = Feature::bytes({"abcdef"});
  ex.features["height"] = Feature::int64s({2});
  EXPECT_EQ(encode_example(ex), image_example_bytes("abcdef", 200, 2, 3));
}

TEST(TFRecordExample, PackedAndUnpackedListsDecodeAlike) {
  const std::vector<int64_t> ints = {0, 1, -1, 300, INT64_MIN, INT64_MAX};
  const std::vector<float> floats = {0.0f, -2.5f, 1e30f, 3.0f};
  std::string packed_ints, unpacked_ints, packed_floats, unpacked_floats;
  for (int64_t v : ints) {
    packed_ints += varint(static_cast<uint64_t>(v));
    unpacked_ints += bytes({0x08}) + varint(static_cast<uint64_t>(v));
  }
  for (float v : floats) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    packed_floats += le(b, 4);
    unpacked_floats += bytes({0x0d}) + le(b, 4);
  }
  auto example = [](const std::string& key, int list_field, const std::string& list) {
    return ld(1, ld(1, ld(1, key) + ld(2, ld(list_field, list))));
  };
  // Half packed, half not, in one list.
  std::string mixed_packed;
  for (size_t i = 0; i < 3; ++i) mixed_packed += varint(static_cast<uint64_t>(ints[i]));
  std::string mixed = ld(1, mixed_packed);
  for (size_t i = 3; i < ints.size(); ++i) {
    mixed += bytes({0x08}) + varint(static_cast<uint64_t>(ints[i]));
  }
  for (const std::string& list : {ld(1, packed_ints), unpacked_ints, mixed}) {
    const Example ex = decode_example(example("i", 3, list), "p", 0, 0);
    EXPECT_EQ(ex.features.at("i").int64_list, ints);
  }
  for (const std::string& list : {ld(1, packed_floats), unpacked_floats}) {
    const Example ex = decode_example(example("f", 2, list), "p", 0, 0);
    EXPECT_EQ(ex.features.at("f").float_list, floats);
  }
  // Encoded packed, decoded back.
  Example ex;
  ex.features["i"] = Feature::int64s(ints);
  ex.features["f"] = Feature::floats(floats);
  ex.features["b"] = Feature::bytes({"", "x", std::string(200, 'y')});
  ex.features["none"] = Feature{};
  const Example back = decode_example(encode_example(ex), "p", 0, 0);
  EXPECT_EQ(back.features.at("i").int64_list, ints);
  EXPECT_EQ(back.features.at("f").float_list, floats);
  EXPECT_EQ(back.features.at("b").bytes_list, ex.features["b"].bytes_list);
  EXPECT_EQ(back.features.at("none").kind, Feature::Kind::kNone);
}

TEST(TFRecordExample, RepeatedKeyKeepsTheLastEntryAndAOneofSwitchReplaces) {
  const std::string int_feature = ld(3, ld(1, varint(5)));
  const std::string bytes_feature = ld(1, ld(1, "z"));
  const std::string data =
      ld(1, ld(1, ld(1, "k") + ld(2, int_feature)) + ld(1, ld(1, "k") + ld(2, bytes_feature)) +
                ld(1, ld(1, "m") + ld(2, int_feature + bytes_feature)) +
                ld(1, ld(1, "n") + ld(2, int_feature) + ld(2, int_feature)));
  const Example ex = decode_example(data, "p", 0, 0);
  EXPECT_EQ(ex.features.at("k").kind, Feature::Kind::kBytes);
  EXPECT_EQ(ex.features.at("m").kind, Feature::Kind::kBytes);
  EXPECT_TRUE(ex.features.at("m").int64_list.empty());
  EXPECT_EQ(ex.features.at("n").int64_list, (std::vector<int64_t>{5, 5}));  // merged
}

TEST(TFRecordExample, MalformedProtobufNamesFileRecordAndWhat) {
  struct Case {
    std::string data;
    std::string what;
  };
  const std::string label = ld(1, "label");
  const std::vector<Case> cases = {
      {bytes({0x0a, 0x05, 0x0a}), "top level: field 1 of 5 bytes runs past the end"},
      {bytes({0x08, 0x80}), "top level: varint runs past the end of the message (data byte 0x1)"},
      {bytes({0x08}) + std::string(10, '\x80') + bytes({0}), "varint longer than 10 bytes"},
      {bytes({0x0e, 0}), "top level: wire type 6 (field 1) does not exist"},
      {bytes({0x0f}), "top level: wire type 7 (field 1) does not exist"},
      {bytes({0x00, 0x01}), "top level: field number 0"},
      {bytes({0x0c}), "top level: end-group without its start-group"},
      {bytes({0x0b, 0x08, 0x01}), "group 1 has no end-group"},
      {bytes({0x0b, 0x14}), "end-group 2 closes group 1"},
      {bytes({0x09, 1, 2, 3}), "8-byte fixed field runs past the end"},
      {ld(1, bytes({0x0a, 0x02, 0x0a})), "features: field 1 of 2 bytes runs past the end"},
      {ld(1, ld(1, label + ld(2, ld(3, ld(1, bytes({0x80})))))),
       "feature \"label\": int64_list: packed values: varint runs past the end"},
      {ld(1, ld(1, label + ld(2, ld(2, ld(1, "12345"))))),
       "feature \"label\": float_list: packed values of 5 bytes are not a whole number"},
      {ld(1, ld(1, ld(1, bytes({'a', 0xc0, 0xaf})))), "features: map entry: key is not UTF-8"},
      {ld(1, ld(1, ld(1, bytes({0xed, 0xa0, 0x80})))), "key is not UTF-8"},  // a surrogate
      {ld(1, ld(1, label + ld(2, ld(1, bytes({0x0d, 1, 2}))))),
       "feature \"label\": bytes_list: 4-byte fixed field runs past the end"},
  };
  TempDir dir;
  const std::string path = dir.file("bad.tfrecord");
  const std::string good = frame(image_example_bytes("abcd", 1, 2, 2));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_data_error([&] { decode_example(c.data, "f.tfrecord", 0x1234, 9); },
                      {"f.tfrecord: offset 0x1234: record 9: malformed Example: ", c.what});
    write_bytes(path, good + frame(c.data));
    expect_data_error(
        [&] { load_tfrecord_images({path}); },
        {path + ": offset " + hex(good.size()) + ": record 1: malformed Example: ", c.what});
  }
  // Deeply nested groups stop at protobuf's limit instead of the stack's.
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += bytes({0x0b});
  expect_data_error([&] { decode_example(deep, "d", 0, 0); }, {"groups nested deeper than 100"});
  // Valid but odd protobuf is not malformed: a key that is valid UTF-8, a field of a known
  // number with another wire type (skipped as unknown), an unknown group with nested groups.
  const std::string odd = ld(1, ld(1, ld(1, "\xc3\xa9t\xe2\x82\xac\xf0\x9f\x98\x80") + ld(2, "")) +
                                    bytes({0x08, 0x05})) +
                          bytes({0x0b, 0x13, 0x14, 0x0c});
  const Example ex = decode_example(odd, "o", 0, 0);
  ASSERT_EQ(ex.features.size(), 1u);
  EXPECT_EQ(ex.features.begin()->second.kind, Feature::Kind::kNone);
}

// ---- image datasets

TEST(TFRecordImages, RoundTripIsByteIdentical) {
  TempDir dir;
  for (const auto& [rows, cols] : {std::pair<uint32_t, uint32_t>{28, 28}, {3, 5}, {1, 1}}) {
    const Dataset ds = pattern_dataset(23, rows, cols);
    const std::string path = dir.file("ds.tfrecord");
    write_tfrecord_images(ds, path);
    // What the test's own encoder writes, byte for byte.
    std::string expected;
    const size_t pixels = size_t{rows} * cols;
    for (uint32_t i = 0; i < ds.count; ++i) {
      expected += frame(image_example_bytes(
          std::string(ds.images.begin() + i * pixels, ds.images.begin() + (i + 1) * pixels),
          ds.labels[i], rows, cols));
    }
    EXPECT_EQ(read_bytes(path), expected) << rows << "x" << cols;
    const Dataset back = load_tfrecord_images({path});
    EXPECT_EQ(back.count, ds.count);
    EXPECT_EQ(back.rows, rows);
    EXPECT_EQ(back.cols, cols);
    EXPECT_EQ(back.images, ds.images);
    EXPECT_EQ(back.labels, ds.labels);
  }
}

TEST(TFRecordImages, ShardsAreContiguousAndCoverEverySampleOnce) {
  TempDir dir;
  const Dataset ds = pattern_dataset(10, 4, 4);
  const std::string prefix = dir.file("train.tfrecord");
  write_tfrecord_images(ds, prefix, 3);
  EXPECT_EQ(tfrecord_shard_path(prefix, 1, 3), prefix + "-00001-of-00003");
  EXPECT_EQ(tfrecord_shard_path(prefix, 0, 1), prefix);
  EXPECT_EQ(dir_entries(dir.path()), (std::vector<std::string>{"train.tfrecord-00000-of-00003",
                                                               "train.tfrecord-00001-of-00003",
                                                               "train.tfrecord-00002-of-00003"}));
  std::vector<std::string> paths;
  std::vector<int> seen(ds.count, 0);
  const std::vector<uint32_t> firsts = {0, 3, 6, 10};  // s * 10 / 3
  for (uint32_t s = 0; s < 3; ++s) {
    paths.push_back(tfrecord_shard_path(prefix, s, 3));
    const Dataset shard = load_tfrecord_images({paths.back()});
    ASSERT_EQ(shard.count, firsts[s + 1] - firsts[s]) << "shard " << s;
    for (uint32_t k = 0; k < shard.count; ++k) {
      const uint32_t i = firsts[s] + k;
      ++seen[i];
      EXPECT_TRUE(std::equal(shard.images.begin() + k * 16, shard.images.begin() + (k + 1) * 16,
                             ds.images.begin() + i * 16))
          << "shard " << s << " record " << k << " is not sample " << i;
      EXPECT_EQ(shard.labels[k], ds.labels[i]) << "shard " << s << " record " << k;
    }
  }
  EXPECT_EQ(seen, std::vector<int>(ds.count, 1));
  const Dataset all = load_tfrecord_images(paths);
  EXPECT_EQ(all.images, ds.images);
  EXPECT_EQ(all.labels, ds.labels);
  EXPECT_THROW(write_tfrecord_images(ds, prefix, 0), std::invalid_argument);
}

TEST(TFRecordImages, ShapeFromHeightAndWidthOrASquare) {
  TempDir dir;
  const std::string path = dir.file("s.tfrecord");
  auto example = [](std::map<std::string, Feature> f) {
    Example ex;
    ex.features = std::move(f);
    return frame(encode_example(ex));
  };
  // No height and width: a square image of 9 bytes is 3x3.
  write_bytes(path,
              example({{"image", Feature::bytes({"123456789"})}, {"label", Feature::int64s({4})}}));
  Dataset ds = load_tfrecord_images({path});
  EXPECT_EQ(ds.rows, 3u);
  EXPECT_EQ(ds.cols, 3u);
  // Other keys for the image and the label.
  write_bytes(path, example({{"img", Feature::bytes({"1234"})}, {"y", Feature::int64s({1})}}));
  ds = load_tfrecord_images({path}, "img", "y");
  EXPECT_EQ(ds.rows, 2u);
  EXPECT_EQ(ds.labels, std::vector<uint8_t>{1});
}

TEST(TFRecordImages, BadImageExamplesNameFileAndRecord) {
  TempDir dir;
  const std::string path = dir.file("bad.tfrecord");
  const std::string first = frame(image_example_bytes("abcdef", 1, 2, 3));
  const std::string at = path + ": offset " + hex(first.size()) + ": record 1: ";
  auto check = [&](std::map<std::string, Feature> f, const std::string& what) {
    SCOPED_TRACE(what);
    Example ex;
    ex.features = std::move(f);
    write_bytes(path, first + frame(encode_example(ex)));
    expect_data_error([&] { load_tfrecord_images({path}); }, {at, what});
  };
  const Feature image = Feature::bytes({"abcdef"});
  const Feature label = Feature::int64s({1});
  const Feature h = Feature::int64s({2}), w = Feature::int64s({3});
  check({{"label", label}, {"pixels", image}},
        "no feature \"image\" (the Example has: label, pixels)");
  check({{"image", image}}, "no feature \"label\"");
  check({{"image", Feature::floats({1})}, {"label", label}},
        "feature \"image\" is a float_list, not a bytes_list");
  check({{"image", Feature::bytes({"abc", "def"})}, {"label", label}},
        "feature \"image\" has 2 values, not one");
  check({{"image", image}, {"label", Feature::int64s({})}}, "feature \"label\" has 0 values");
  check({{"image", image}, {"label", Feature::int64s({256})}}, "label 256 is not in 0..255");
  check({{"image", image}, {"label", Feature::int64s({-1})}}, "label -1 is not in 0..255");
  check({{"image", image}, {"label", label}, {"height", h}},
        "feature \"height\" without \"width\"");
  check({{"image", image}, {"label", label}, {"height", h}, {"width", Feature::int64s({2})}},
        "height 2 x width 2 does not match the image's 6 bytes");
  check({{"image", image},
         {"label", label},
         {"height", Feature::int64s({-2})},
         {"width", Feature::int64s({-3})}},
        "height -2 x width -3 does not match");
  check({{"image", image}, {"label", label}},
        "image of 6 bytes has no \"height\" and \"width\" features and is not square");
  check({{"image", image}, {"label", label}, {"height", w}, {"width", h}},
        "image is 3x2, the first one (" + path + ": offset 0x0: record 0) is 2x3");
  // The first record's shape is checked against the second file's too.
  const std::string other = dir.file("other.tfrecord");
  write_bytes(other, frame(image_example_bytes("abcd", 0, 2, 2)));
  write_bytes(path, first);
  expect_data_error(
      [&] {
        load_tfrecord_images({path, other});
      },
      {other + ": offset 0x0: record 0: image is 2x2"});
}

TEST(TFRecordImages, NoRecordsIsAnError) {
  TempDir dir;
  write_bytes(dir.file("empty"), "");
  expect_data_error([&] { load_tfrecord_images({dir.file("empty")}); },
                    {dir.file("empty") + ": no records"});
  expect_data_error(
      [&] {
        load_tfrecord_images({dir.file("empty"), dir.file("empty")});
      },
      {dir.file("empty") + " (and 1 other files): no records"});
  EXPECT_THROW(load_tfrecord_images({}), std::invalid_argument);
}

TEST(TFRecordImages, DamagedDatasetFileNamesTheRecord) {
  TempDir dir;
  const Dataset ds = pattern_dataset(5, 4, 4);
  const std::string path = dir.file("d.tfrecord");
  write_tfrecord_images(ds, path);
  const std::string good = read_bytes(path);
  const std::vector<TFRecord> records = read_tfrecords(path);
  ASSERT_EQ(records.size(), 5u);
  std::string damaged = good;
  damaged[records[3].offset + 20] ^= 0x10;  // in record 3's data
  write_bytes(path, damaged);
  expect_data_error([&] { load_tfrecord_images({path}); },
                    {path + ": offset " + hex(records[3].offset) + ": record 3: bad data CRC"});
  write_bytes(path, good.substr(0, records[4].offset + 5));
  expect_data_error(
      [&] { load_tfrecord_images({path}); },
      {path + ": offset " + hex(records[4].offset) + ": record 4: truncated header: 5 of 12"});
}

}  // namespace
}  // namespace tessera::data
