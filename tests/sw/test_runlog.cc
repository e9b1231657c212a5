// The training run's outputs (sw/runlog): CRC-32C, TensorBoard event files (read back here and
// by tests/reference/read_tfevents.py, an independent reader), metrics.csv, summary.json (read
// back by Python's json), the gnuplot curves and checkpoints (round trip, every refusal,
// atomic replacement). Python and gnuplot checks skip, naming the package, where it is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/checkpoint.h"
#include "tessera/weight_manifest.h"
#include "tessera/crc32c.h"
#include "tessera/metrics.h"
#include "tessera/plot.h"
#include "tessera/tfevents.h"
#include "tests/common/test_util.h"

namespace tessera::runlog {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

// A fresh empty directory under build/ for the running test.
std::string test_dir() {
  std::string name = test::current_test_name();
  std::string dir = "build/test_runlog/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  ASSERT_TRUE(f.good()) << path;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Runs a shell command; its stdout and exit status.
std::string run(const std::string& cmd, int* status) {
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return "";
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

std::string g9(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------
// CRC-32C

TEST(Crc32c, KnownAnswers) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), up(32);
  for (int i = 0; i < 32; ++i) up[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
}

TEST(Crc32c, RunningCrcContinues) {
  const std::string s = "the quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(crc32c(s.data() + cut, s.size() - cut, crc32c(s.data(), cut)),
              crc32c(s.data(), s.size()))
        << "cut at " << cut;
  }
}

TEST(Crc32c, MaskRoundTrips) {
  const uint32_t crc = crc32c("123456789", 9);
  EXPECT_EQ(mask_crc32c(crc), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_EQ(masked_crc32c("123456789", 9), mask_crc32c(crc));
  for (uint32_t v : {0u, 1u, 0xFFFFFFFFu, 0xE3069283u, 0x12345678u}) {
    EXPECT_EQ(unmask_crc32c(mask_crc32c(v)), v);
  }
}

// ---------------------------------------------------------------------------------------------
// Event files

struct Scalar {
  int64_t step;
  std::string tag;
  float value;
};

std::vector<Scalar> sample_scalars() {
  return {{0, "train/loss", 2.302585f},
          {0, "train/accuracy", 0.1f},
          {1, "train/loss", 1.5f},
          {1, "train/accuracy", 0.25f},
          {2, "train/loss", 1e-30f},
          {300, "eval/loss", -0.0f},
          {-5, "odd/negative_step", 123456.789f},
          {1LL << 40, "odd/huge_step", std::numeric_limits<float>::infinity()},
          {7, "odd/denormal", bits_float(0x00000001)},
          {8, "odd/max", std::numeric_limits<float>::max()}};
}

std::string write_sample_events(const std::string& dir) {
  EventWriter w(dir);
  double t = 1700000000.25;
  for (const Scalar& s : sample_scalars()) w.add_scalar(s.tag, s.step, s.value, t += 0.5);
  w.flush();
  return w.path();
}

TEST(EventWriter, FileNameAndFirstRecord) {
  const std::string dir = test_dir() + "/run";  // created by the writer
  EventWriter w(dir);
  const std::string prefix = dir + "/events.out.tfevents.";
  ASSERT_EQ(w.path().rfind(prefix, 0), 0u) << w.path();
  const std::string rest = w.path().substr(prefix.size());  // <seconds>.<hostname>
  const size_t dot = rest.find('.');
  ASSERT_NE(dot, std::string::npos) << w.path();
  const long long seconds = std::stoll(rest.substr(0, dot));
  EXPECT_LE(std::llabs(seconds - static_cast<long long>(std::time(nullptr))), 5);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(rest.substr(dot + 1), host);

  // The first record, byte by byte: length, masked CRC, Event{wall_time, file_version}.
  const std::string b = slurp(w.path());
  ASSERT_GE(b.size(), 16u);
  uint64_t len;
  std::memcpy(&len, b.data(), 8);
  ASSERT_EQ(b.size(), 16 + len);
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, b.data() + 8, 4);
  std::memcpy(&data_crc, b.data() + 12 + len, 4);
  EXPECT_EQ(len_crc, masked_crc32c(b.data(), 8));
  EXPECT_EQ(data_crc, masked_crc32c(b.data() + 12, len));
  const std::string data = b.substr(12, len);
  ASSERT_EQ(data.size(), 9u + 2 + 13);
  EXPECT_EQ(data[0], '\x09');  // field 1, wire type 1 (fixed64)
  double wall;
  std::memcpy(&wall, data.data() + 1, 8);
  EXPECT_NEAR(wall, unix_time_now(), 5.0);
  EXPECT_EQ(data.substr(9), std::string("\x1a\x0d") + "brain.Event:2");  // field 3, string
}

TEST(EventWriter, TwoWritersInOneSecondGetTwoFiles) {
  const std::string dir = test_dir();
  EventWriter a(dir), b(dir);
  EXPECT_NE(a.path(), b.path());
}

TEST(EventWriter, ScalarEncodingIsTheProtobufOne) {
  const std::string dir = test_dir();
  EventWriter w(dir);
  const size_t first = slurp(w.path()).size();
  w.add_scalar("loss", 3, 0.5f, 2.0);
  w.flush();
  const std::string data = slurp(w.path()).substr(first + 12);
  // Event{1: 2.0, 2: 3, 5: Summary{1: Value{1: "loss", 2: 0.5f}}}
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\x00\x40", 9) + "\x10\x03" +
                               "\x2a\x0d" + "\x0a\x0b" + "\x0a\x04" + "loss" +
                               std::string("\x15\x00\x00\x00\x3f", 5);
  EXPECT_EQ(data.substr(0, expected.size()), expected);
  EXPECT_EQ(data.size(), expected.size() + 4);  // then the data CRC
}

TEST(EventWriter, ReadBackInCpp) {
  const std::string path = write_sample_events(test_dir());
  const std::vector<ScalarEvent> got = read_scalar_events(path);
  const std::vector<Scalar> want = sample_scalars();
  ASSERT_EQ(got.size(), want.size());
  double t = 1700000000.25;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i].step) << i;
    EXPECT_EQ(got[i].tag, want[i].tag) << i;
    EXPECT_EQ(float_bits(got[i].value), float_bits(want[i].value)) << i;
    EXPECT_EQ(got[i].wall_time, t += 0.5) << i;
  }
}

TEST(EventWriter, CorruptedByteIsCaughtByTheCrc) {
  const std::string dir = test_dir();
  const std::string path = write_sample_events(dir);
  const std::string good = slurp(path);
  const size_t first_record = 16 + 24;  // wall_time (9) + file_version (15) in the first
  ASSERT_EQ(static_cast<uint8_t>(good[0]), 24u);
  struct Case {
    size_t offset;
    const char* message;
  };
  // A byte of the second record's length, of its length CRC, of its data, of its data CRC.
  uint64_t len2;
  std::memcpy(&len2, good.data() + first_record, 8);
  for (const Case& c : {Case{first_record + 1, "length CRC mismatch"},
                        Case{first_record + 9, "length CRC mismatch"},
                        Case{first_record + 12 + 5, "data CRC mismatch"},
                        Case{first_record + 12 + len2 + 2, "data CRC mismatch"}}) {
    std::string bad = good;
    bad[c.offset] ^= 0x10;
    const std::string bad_path = dir + "/events.out.tfevents.bad";
    spit(bad_path, bad);
    try {
      read_scalar_events(bad_path);
      ADD_FAILURE() << "byte " << c.offset << " corrupted, file accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("record 1 at byte " + std::to_string(first_record)),
                std::string::npos)
          << e.what();
    }
  }
  // Truncation is refused too.
  spit(dir + "/events.out.tfevents.short", good.substr(0, good.size() - 1));
  EXPECT_THROW(read_scalar_events(dir + "/events.out.tfevents.short"), std::runtime_error);
}

TEST(EventWriter, UnwritableDirectoryThrowsNamingIt) {
  const std::string dir = test_dir();
  spit(dir + "/a_file", "x");
  try {
    EventWriter w(dir + "/a_file/run");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/a_file"), std::string::npos) << e.what();
  }
}

TEST(EventWriter, IndependentPythonReaderAgrees) {
  if (!exists(kPython)) GTEST_FAIL() << kPython << " missing (Debian: apt-get install python3)";
  const std::string dir = test_dir();
  const std::string path = write_sample_events(dir);
  int status;
  const std::string out =
      run(std::string(kPython) + " tests/reference/read_tfevents.py '" + path + "'", &status);
  ASSERT_EQ(status, 0) << out;
  std::string want;
  for (const Scalar& s : sample_scalars()) {
    want += std::to_string(s.step) + "," + s.tag + "," + g9(s.value) + "\n";
  }
  EXPECT_EQ(out, want);

  // The Python reader refuses a damaged file as well.
  std::string bad = slurp(path);
  bad[bad.size() - 6] ^= 0x01;
  spit(dir + "/events.out.tfevents.bad", bad);
  run(std::string(kPython) + " tests/reference/read_tfevents.py " + dir +
          "/events.out.tfevents.bad 2>/dev/null",
      &status);
  EXPECT_NE(status, 0);
}

// Histograms: TensorFlow's default buckets, computed here from histogram.cc's formula (not from
// the writer's table): -DBL_MAX, -v_k ... -v_0, 0, v_0 ... v_k, DBL_MAX with v_0 = 1e-12,
// v_{i+1} = v_i * 1.1 while below 1e20. A value v counts in bucket i when limit[i-1] <= v <
// limit[i].
std::vector<double> tf_bucket_limits() {
  std::vector<double> pos;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos.push_back(v);
  pos.push_back(std::numeric_limits<double>::max());
  std::vector<double> all;
  for (size_t i = pos.size(); i-- > 0;) all.push_back(-pos[i]);
  all.push_back(0.0);
  all.insert(all.end(), pos.begin(), pos.end());
  return all;
}

TEST(EventWriter, HistogramReadsBackWithTensorFlowsBuckets) {
  const std::vector<double> limits = tf_bucket_limits();
  ASSERT_EQ(histogram_bucket_limits(), limits);
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> values;
  for (int i = 0; i < 2000; ++i) values.push_back(normal(rng));
  // zeros of both signs, a value below the first limit, exact and huge ones, the float extremes
  for (float v : {0.0f, -0.0f, 0.0f, 1e-13f, -1e-13f, 1.0f, -1.0f, 3e19f, 2e20f, -7e25f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min()})
    values.push_back(v);
  const std::string dir = test_dir();
  EventWriter w(dir);
  w.add_histogram("dense1/kernel", 7, values, 1700000000.5);
  w.add_histogram("empty", 8, {}, 1700000001.5);
  w.add_scalar("loss", 7, 0.25f, 1700000002.5);
  w.flush();
  const std::vector<HistogramEvent> got = read_histogram_events(w.path());
  ASSERT_EQ(got.size(), 2u);
  const HistogramEvent& h = got[0];
  EXPECT_EQ(h.tag, "dense1/kernel");
  EXPECT_EQ(h.step, 7);
  EXPECT_EQ(h.wall_time, 1700000000.5);

  // the independent count, bucket by bucket, and the statistics in double
  std::vector<double> count(limits.size(), 0.0);
  double min = std::numeric_limits<double>::max(), max = -min, sum = 0, squares = 0;
  for (float f : values) {
    const double v = f;
    size_t b = 0;
    while (!(v < limits[b])) ++b;  // the first limit above v (all values are below DBL_MAX)
    ASSERT_TRUE(b == 0 || limits[b - 1] <= v) << v;
    count[b] += 1;
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    squares += v * v;
  }
  EXPECT_EQ(h.num, static_cast<double>(values.size()));
  EXPECT_EQ(h.min, min);
  EXPECT_EQ(h.max, max);
  EXPECT_EQ(h.sum, sum);
  EXPECT_EQ(h.sum_squares, squares);
  // TensorFlow's encoding: each non-empty bucket, and each run of empty ones as one pair of its
  // last limit and count 0
  std::vector<double> want_limit, want_count;
  for (size_t i = 0; i < limits.size(); ++i)
    if (count[i] > 0 || i + 1 == limits.size() || count[i + 1] > 0) {
      want_limit.push_back(limits[i]);
      want_count.push_back(count[i]);
    }
  ASSERT_EQ(h.bucket_limit.size(), want_limit.size());
  ASSERT_EQ(h.bucket.size(), want_count.size());
  for (size_t i = 0; i < want_limit.size(); ++i) {
    EXPECT_EQ(h.bucket_limit[i], want_limit[i]) << i;
    EXPECT_EQ(h.bucket[i], want_count[i]) << "bucket up to " << want_limit[i];
  }
  double counted = 0;
  for (double c : h.bucket) counted += c;
  EXPECT_EQ(counted, static_cast<double>(values.size()));
  EXPECT_EQ(count[std::upper_bound(limits.begin(), limits.end(), 0.0) - limits.begin()], 5.0)
      << "0 (twice), -0, 1e-13 and the smallest denormal count in [0, 1e-12)";

  // no values: TensorFlow's empty histogram, one empty bucket up to DBL_MAX
  const HistogramEvent& e = got[1];
  EXPECT_EQ(e.tag, "empty");
  EXPECT_EQ(e.num, 0.0);
  EXPECT_EQ(e.min, std::numeric_limits<double>::max());
  EXPECT_EQ(e.max, -std::numeric_limits<double>::max());
  EXPECT_EQ(e.bucket_limit, std::vector<double>{std::numeric_limits<double>::max()});
  EXPECT_EQ(e.bucket, std::vector<double>{0.0});
  // the scalar reader sees the scalar only
  const std::vector<ScalarEvent> scalars = read_scalar_events(w.path());
  ASSERT_EQ(scalars.size(), 1u);
  EXPECT_EQ(scalars[0].tag, "loss");
}

TEST(EventWriter, HistogramEncodingIsTheProtobufOne) {
  const std::string dir = test_dir();
  EventWriter w(dir);
  const size_t first = slurp(w.path()).size();
  w.add_histogram("h", 2, {0.5f}, 1.0);
  w.flush();
  const std::string data = slurp(w.path()).substr(first + 12);
  auto f64 = [](double v) {
    std::string s(8, '\0');
    std::memcpy(&s[0], &v, 8);
    return s;
  };
  // 0.5 lies in [v_k, v_k+1) of the positive limits: the pairs are (the limit before it, 0),
  // (its bucket's limit, 1), (DBL_MAX, 0)
  const std::vector<double> limits = tf_bucket_limits();
  const size_t b = std::upper_bound(limits.begin(), limits.end(), 0.5) - limits.begin();
  std::string histo = "\x09" + f64(0.5) + "\x11" + f64(0.5) + "\x19" + f64(1.0) + "\x21" +
                      f64(0.5) + "\x29" + f64(0.25);
  histo += std::string("\x32\x18") + f64(limits[b - 1]) + f64(limits[b]) +
           f64(std::numeric_limits<double>::max());
  histo += std::string("\x3a\x18") + f64(0.0) + f64(1.0) + f64(0.0);
  const std::string value = std::string("\x0a\x01") + "h" + "\x2a" + char(histo.size()) + histo;
  const std::string summary = "\x0a" + std::string(1, char(value.size())) + value;
  const std::string expected =
      "\x09" + f64(1.0) + "\x10\x02" + "\x2a" + std::string(1, char(summary.size())) + summary;
  ASSERT_LT(summary.size(), 128u);
  EXPECT_EQ(data.substr(0, expected.size()), expected);
  EXPECT_EQ(data.size(), expected.size() + 4);  // then the data CRC
}

TEST(EventWriter, HistogramRefusesNaNAndInfinityNamingTheTag) {
  const std::string dir = test_dir();
  EventWriter w(dir);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    try {
      w.add_histogram("dense2/kernel_grad", 3, {1.0f, bad, 2.0f});
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("dense2/kernel_grad"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("value 1"), std::string::npos) << e.what();
    }
  }
  w.flush();
  EXPECT_TRUE(read_histogram_events(w.path()).empty()) << "nothing written for a refused one";
}

TEST(EventWriter, GraphDefRoundTripsAndSurvivesResume) {
  const std::string dir = test_dir();
  const std::string graph = std::string("\x0a\x05node\0", 7) + "any bytes";
  std::string path;
  {
    EventWriter w(dir);
    path = w.path();
    w.add_graph(graph, 5.0);
    for (int64_t s = 0; s < 3; ++s) w.add_scalar("loss", s, 1.0f / (s + 1));
  }
  // Event{1: wall_time, 4: graph_def}
  const std::string file = slurp(path);
  const size_t second = 16 + static_cast<uint8_t>(file[0]);
  const std::string expected =
      std::string("\x09\x00\x00\x00\x00\x00\x00\x14\x40", 9) + "\x22" + char(graph.size()) + graph;
  EXPECT_EQ(file.substr(second + 12, expected.size()), expected);
  EXPECT_EQ(read_graph_defs(path), std::vector<std::string>{graph});
  // a resumed run keeps the graph (it has no step) and the steps before its first
  {
    EventWriter w(dir, 2);
    EXPECT_EQ(w.path(), path);
    w.add_scalar("loss", 2, 0.125f);
  }
  EXPECT_EQ(read_graph_defs(path), std::vector<std::string>{graph});
  const std::vector<ScalarEvent> s = read_scalar_events(path);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].value, 0.125f);
  // the independent Python reader prints the scalars and skips the graph
  if (!exists(kPython)) GTEST_FAIL() << kPython << " missing (Debian: apt-get install python3)";
  int status;
  const std::string out =
      run(std::string(kPython) + " tests/reference/read_tfevents.py '" + path + "'", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(out, "0,loss,1\n1,loss,0.5\n2,loss,0.125\n");
}

// ---------------------------------------------------------------------------------------------
// metrics.csv and summary.json

TEST(MetricsCsv, HeaderAndRows) {
  const std::string dir = test_dir();
  {
    MetricsCsv m(dir, {"lr", "grad_norm"});
    EXPECT_EQ(m.path(), dir + "/metrics.csv");
    m.add_row(0, 2.302585093, 0.1, {1e-3, 12.5});
    // Flushed each row: the file holds it before the writer closes.
    EXPECT_EQ(slurp(m.path()), "step,loss,accuracy,lr,grad_norm\n0,2.30258509,0.1,0.001,12.5\n");
    m.add_row(1, 1.0f / 3.0f, 0.5, {3e-4, 0.0});
    EXPECT_THROW(m.add_row(2, 1.0, 1.0, {1.0}), std::invalid_argument);
  }
  const std::string csv = slurp(dir + "/metrics.csv");
  EXPECT_EQ(csv,
            "step,loss,accuracy,lr,grad_norm\n0,2.30258509,0.1,0.001,12.5\n"
            "1,0.333333343,0.5,0.0003,0\n");
  // %.9g gives a float back exactly.
  EXPECT_EQ(std::strtof("0.333333343", nullptr), 1.0f / 3.0f);
  EXPECT_THROW(MetricsCsv(dir, {"a,b"}), std::invalid_argument);
}

TEST(SummaryJson, EscapesAndNumbers) {
  EXPECT_EQ(json_quote("a\"b\\c\n\t\x01/é"), "\"a\\\"b\\\\c\\n\\t\\u0001/é\"");
  EXPECT_EQ(json_quote(std::string("bad\xff\xc0\x80") + "x"), "\"bad\\ufffd\\ufffd\\ufffdx\"");
  EXPECT_EQ(JsonValue(3.0).dump(), "3.0");
  EXPECT_EQ(JsonValue(0.1).dump(), "0.10000000000000001");
  EXPECT_EQ(JsonValue(std::nan("")).dump(), "null");
  EXPECT_EQ(JsonValue(-std::numeric_limits<double>::infinity()).dump(), "null");
  EXPECT_EQ(JsonValue(int64_t{-9007199254740993}).dump(), "-9007199254740993");
  EXPECT_EQ(JsonValue(uint64_t{18446744073709551615u}).dump(), "18446744073709551615");
  EXPECT_EQ(JsonValue::array(std::vector<int>{1, 2}).dump(), "[1,2]");
  EXPECT_EQ(JsonValue::object({{"a", true}, {"b", JsonValue()}}).dump(), "{\"a\":true,\"b\":null}");
}

TEST(SummaryJson, PythonReadsItBack) {
  if (!exists(kPython)) GTEST_FAIL() << kPython << " missing (Debian: apt-get install python3)";
  const std::string dir = test_dir();
  const std::string path = dir + "/summary.json";
  spit(path, "old contents");
  write_summary_json(
      path, {{"final_loss", 0.1},
             {"steps", int64_t{123456789012}},
             {"diverged", false},
             {"best_loss", std::nan("")},
             {"name", "run \"one\"\n\ttabs\\ünïcode"},
             {"losses", JsonValue::array(std::vector<double>{2.5, 1.0 / 3.0, 1e-300})},
             {"tags", JsonValue::array(std::vector<std::string>{"a", "b,c"})},
             {"config", JsonValue::object(
                            {{"lr", 0.001}, {"batch", 64}, {"nested", JsonValue::object({})}})}});
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(::getpid())));
  const std::string script =
      "import json, sys\n"
      "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
      "assert d['final_loss'] == 0.1, d\n"
      "assert d['steps'] == 123456789012 and type(d['steps']) is int, d\n"
      "assert d['diverged'] is False, d\n"
      "assert d['best_loss'] is None, d\n"
      "assert d['name'] == 'run \"one\"\\n\\ttabs\\\\\\u00fcn\\u00efcode', repr(d['name'])\n"
      "assert d['losses'] == [2.5, 1.0 / 3.0, 1e-300], d\n"
      "assert d['tags'] == ['a', 'b,c'], d\n"
      "assert d['config'] == {'lr': 0.001, 'batch': 64, 'nested': {}}, d\n"
      "assert list(d) == ['final_loss', 'steps', 'diverged', 'best_loss', 'name', 'losses',"
      " 'tags', 'config'], list(d)\n"
      "print('ok')\n";
  spit(dir + "/check.py", script);
  int status;
  const std::string out =
      run(std::string(kPython) + " " + dir + "/check.py " + path + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(SummaryJson, MissingDirectoryThrows) {
  const std::string dir = test_dir();
  EXPECT_THROW(write_summary_json(dir + "/no/such/summary.json", {{"a", 1}}), std::runtime_error);
}

// ---------------------------------------------------------------------------------------------
// Curves

TEST(Plot, WritesAPng) {
  if (find_gnuplot().empty()) {
    GTEST_FAIL() << "gnuplot missing (Debian: apt-get install gnuplot-nox)";
  }
  const std::string dir = test_dir();
  {
    MetricsCsv m(dir, {"lr"});
    for (int step = 0; step < 50; ++step) {
      m.add_row(step, 2.3 * std::exp(-step / 15.0), 1.0 - 0.9 * std::exp(-step / 10.0), {1e-3});
    }
  }
  const std::string png = dir + "/curves.png";
  plot_training_curves(dir + "/metrics.csv", png);
  const std::string b = slurp(png);
  ASSERT_GT(b.size(), 8u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(exists(png + ".gp"));
}

TEST(Plot, GnuplotFailureThrowsWithItsOutput) {
  if (find_gnuplot().empty()) {
    GTEST_FAIL() << "gnuplot missing (Debian: apt-get install gnuplot-nox)";
  }
  const std::string dir = test_dir();
  try {
    plot_training_curves(dir + "/no_such.csv", dir + "/curves.png");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("failed"), std::string::npos) << e.what();
  }
  int status;
  EXPECT_EQ(run("ls -A '" + dir + "'", &status), "curves.png.gp\n");  // no half-drawn PNG
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

constexpr const char* kSignature = "mlp 784-128-10 relu bf16 matmul fp32 accumulate";

Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.model_signature = kSignature;
  c.step = 12345;
  c.data_epoch = 3;
  c.data_index = 59999;
  c.seed = 0xDEADBEEFCAFEF00Dull;
  Tensor w1{"fc1.weight", {4, 3}, {}};
  for (uint32_t b :
       {0x3F800000u, 0x80000000u /* -0.0 */, 0x7FC00001u /* NaN payload */,
        0xFFBFFFFFu /* negative quiet-bit-clear NaN */, 0x7F800000u, 0x00000001u, 0xFF7FFFFFu,
        0x3EAAAAABu, 0x00000000u, 0x7F800001u /* signalling NaN */, 0xC0490FDBu, 0x12345678u}) {
    w1.data.push_back(bits_float(b));
  }
  c.tensors.push_back(w1);
  c.tensors.push_back({"fc1.bias", {3}, {0.5f, -0.25f, 1e-38f}});
  c.tensors.push_back({"scalar", {}, {42.0f}});
  c.tensors.push_back({"empty", {0, 7}, {}});
  c.meta = {{"git", "23d937a"}, {"optimizer", "sgd momentum=0.9"}, {"", ""}};
  return c;
}

void expect_bit_identical(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.model_signature, b.model_signature);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.data_epoch, b.data_epoch);
  EXPECT_EQ(a.data_index, b.data_index);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.meta, b.meta);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    EXPECT_EQ(a.tensors[t].name, b.tensors[t].name);
    EXPECT_EQ(a.tensors[t].shape, b.tensors[t].shape);
    ASSERT_EQ(a.tensors[t].data.size(), b.tensors[t].data.size());
    for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
      EXPECT_EQ(float_bits(a.tensors[t].data[i]), float_bits(b.tensors[t].data[i]))
          << a.tensors[t].name << "[" << i << "]";
    }
  }
}

TEST(Checkpoint, RoundTripIsBitExact) {
  const std::string path = test_dir() + "/ckpt.bin";
  const Checkpoint c = sample_checkpoint();
  save_checkpoint(path, c);
  expect_bit_identical(load_checkpoint(path, kSignature), c);
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(::getpid())));
  // The layout's fixed parts.
  const std::string b = slurp(path);
  EXPECT_EQ(b.substr(0, 8), "TSRCKPT1");
  EXPECT_EQ(b.substr(8, 4), std::string("\x01\x00\x00\x00", 4));
  uint64_t payload;
  std::memcpy(&payload, b.data() + 12, 8);
  EXPECT_EQ(b.size(), 20 + payload + 4);
  uint32_t crc;
  std::memcpy(&crc, b.data() + b.size() - 4, 4);
  EXPECT_EQ(crc, crc32c(b.data(), b.size() - 4));
}

// Loads `bytes` as a file; the CheckpointError's kind and message.
CheckpointError::Kind load_error(const std::string& path, const std::string& bytes,
                                 std::string* message, const std::string& signature = kSignature) {
  spit(path, bytes);
  try {
    load_checkpoint(path, signature);
  } catch (const CheckpointError& e) {
    *message = e.what();
    return e.kind();
  }
  *message = "(loaded)";
  return CheckpointError::Kind::kIo;
}

// `bytes` with its trailing CRC recomputed, so that a structural defect gets past the checksum.
std::string with_crc(std::string bytes) {
  const uint32_t crc = crc32c(bytes.data(), bytes.size() - 4);
  std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
  return bytes;
}

void expect_has(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(Checkpoint, EachDamageIsRefusedWithItsReason) {
  using Kind = CheckpointError::Kind;
  const std::string dir = test_dir();
  const std::string path = dir + "/ckpt.bin";
  const std::string good = encode_checkpoint(sample_checkpoint());
  std::string m;

  try {
    load_checkpoint(dir + "/missing.bin", kSignature);
    ADD_FAILURE() << "missing file loaded";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), Kind::kIo);
    expect_has(e.what(), dir + "/missing.bin");
    expect_has(e.what(), "No such file or directory");
  }

  std::string bad = good;
  bad[3] = 'X';
  EXPECT_EQ(load_error(path, bad, &m), Kind::kBadMagic);
  expect_has(m, path);
  expect_has(m, "bad magic at offset 0");
  expect_has(m, "found \"TSRXKPT1\"");

  bad = good;
  bad[8] = 2;
  EXPECT_EQ(load_error(path, bad, &m), Kind::kUnsupportedVersion);
  expect_has(m, "unsupported version 2 at offset 8");

  EXPECT_EQ(load_error(path, good.substr(0, good.size() - 1), &m), Kind::kTruncated);
  expect_has(m, "truncated: expected " + std::to_string(good.size()) + " bytes");
  expect_has(m, "the file has " + std::to_string(good.size() - 1) + " bytes");
  EXPECT_EQ(load_error(path, good.substr(0, 5), &m), Kind::kTruncated);
  EXPECT_EQ(load_error(path, good.substr(0, 15), &m), Kind::kTruncated);
  EXPECT_EQ(load_error(path, "", &m), Kind::kTruncated);
  bad = good;
  bad[19] = '\x7f';  // a payload length no file has
  EXPECT_EQ(load_error(path, bad, &m), Kind::kTruncated);

  EXPECT_EQ(load_error(path, good + "xyz", &m), Kind::kTrailingBytes);
  expect_has(m, "trailing bytes: expected " + std::to_string(good.size()) + " bytes");
  expect_has(m, "3 bytes after the CRC, from offset " + std::to_string(good.size()));

  // One flipped bit anywhere past the header is caught by the CRC.
  for (size_t at : {size_t{20}, size_t{100}, good.size() / 2, good.size() - 5, good.size() - 1}) {
    bad = good;
    bad[at] ^= 0x04;
    EXPECT_EQ(load_error(path, bad, &m), Kind::kChecksumMismatch) << "offset " << at << ": " << m;
    expect_has(m, "checksum mismatch: the CRC-32C at offset " + std::to_string(good.size() - 4));
  }
  bad = good;
  bad[100] ^= 0x04;
  uint32_t stored, computed;
  std::memcpy(&stored, good.data() + good.size() - 4, 4);
  computed = crc32c(bad.data(), bad.size() - 4);
  load_error(path, bad, &m);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%08x", stored);
  expect_has(m, std::string("is ") + hex);
  std::snprintf(hex, sizeof hex, "0x%08x", computed);
  expect_has(m, std::string("give ") + hex);

  // Malformed payloads with a valid CRC. The first tensor's element count sits after the
  // signature, four uint64s, the tensor count, its name, ndims and two dims.
  const size_t sig_len = std::strlen(kSignature);
  const size_t tensor0 = 20 + 4 + sig_len + 32 + 4;
  const size_t count0 = tensor0 + 4 + std::strlen("fc1.weight") + 4 + 8;
  bad = good;
  bad[count0] = 11;  // 11 elements for shape [4,3]
  EXPECT_EQ(load_error(path, with_crc(bad), &m), Kind::kMalformedPayload);
  expect_has(m, "malformed payload at offset " + std::to_string(count0));
  expect_has(m, "tensor 'fc1.weight' has 11 elements, its shape [4,3] needs 12");

  bad = good;
  bad[count0 - 8] = 5;  // shape [5,3]: count 12 no longer matches
  EXPECT_EQ(load_error(path, with_crc(bad), &m), Kind::kMalformedPayload);
  expect_has(m, "its shape [5,3] needs 15");

  bad = good;
  bad[20 + 2] = 0x10;  // signature length 2^20: beyond the payload
  EXPECT_EQ(load_error(path, with_crc(bad), &m), Kind::kMalformedPayload);
  expect_has(m, "malformed payload at offset 20: model_signature of length");
  expect_has(m, "runs past the payload's end");

  bad = good;
  bad[tensor0 + 1] = 0x01;  // the first tensor's name length 10 + 256: past the payload's end
  EXPECT_EQ(load_error(path, with_crc(bad), &m), Kind::kMalformedPayload) << m;
  expect_has(m, "at offset " + std::to_string(tensor0) + ": tensor name of length 266");

  // A payload one byte longer than its fields (length and CRC consistent).
  bad = good.substr(0, good.size() - 4) + "Z" + "0000";
  const uint64_t longer = good.size() - 24 + 1;
  std::memcpy(&bad[12], &longer, 8);
  EXPECT_EQ(load_error(path, with_crc(bad), &m), Kind::kMalformedPayload);
  expect_has(m, "1 bytes left over after the last field");

  EXPECT_EQ(load_error(path, good, &m, "cnn 3x3 conv"), Kind::kSignatureMismatch);
  expect_has(m, path);
  expect_has(m, std::string("checkpoint is for model \"") + kSignature +
                    "\", this run is \"cnn 3x3 conv\"");
}

TEST(Checkpoint, SaveRefusesATensorWhoseDataDoesNotMatchItsShape) {
  Checkpoint c = sample_checkpoint();
  c.tensors[1].data.pop_back();
  const std::string path = test_dir() + "/ckpt.bin";
  try {
    save_checkpoint(path, c);
    FAIL() << "no exception";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::kInvalid);
    expect_has(e.what(), "tensor 'fc1.bias' has 2 elements, its shape [3] needs 3");
  }
  EXPECT_FALSE(exists(path));
}

TEST(Checkpoint, SaveIntoMissingDirectoryThrowsAndLeavesNothing) {
  const std::string dir = test_dir();
  try {
    save_checkpoint(dir + "/nope/ckpt.bin", sample_checkpoint());
    FAIL() << "no exception";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::kIo);
    expect_has(e.what(), dir + "/nope/ckpt.bin.tmp.");
  }
  EXPECT_FALSE(exists(dir + "/nope"));
  int status;
  EXPECT_EQ(run("ls -A '" + dir + "'", &status), "");
}

TEST(Checkpoint, SaveReplacesAtomically) {
  const std::string dir = test_dir();
  const std::string path = dir + "/ckpt.bin";
  Checkpoint c = sample_checkpoint();
  save_checkpoint(path, c);
  c.step = 20000;
  c.tensors[1].data[0] = 7.0f;
  save_checkpoint(path, c);
  expect_bit_identical(load_checkpoint(path, kSignature), c);
  int status;
  EXPECT_EQ(run("ls -A '" + dir + "'", &status), "ckpt.bin\n");

  // A save that fails (its tmp path is a directory) leaves the old file byte-identical and
  // removes nothing it did not create.
  const std::string before = slurp(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  Checkpoint next = c;
  next.step = 30000;
  try {
    save_checkpoint(path, next);
    ADD_FAILURE() << "no exception";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::kIo);
    expect_has(e.what(), tmp);
  }
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(load_checkpoint(path, kSignature).step, 20000u);
  ::rmdir(tmp.c_str());

  // Saving over a read-only directory fails the same way.
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
    EXPECT_THROW(save_checkpoint(path, next), CheckpointError);
    ::chmod(dir.c_str(), 0755);
    EXPECT_EQ(slurp(path), before);
  }
}

}  // namespace
}  // namespace tessera::runlog

// The weight export's manifest: a valid one (either format) gives one entry per weighted
// layer; every refusal names the manifest, the layer and the field.
TEST(WeightManifest, ParsesAnExportAndRefusesWhatDoesNotFitTheModel) {
  using tessera::runlog::ExpectedWeights;
  using tessera::runlog::parse_weight_manifest;
  using tessera::runlog::WeightManifestError;
  ExpectedWeights want;
  want.layers = {{"Conv2D", "relu", {3, 3, 1, 4}}, {"Dense", "softmax", {676, 10}}};
  want.normalization = true;
  want.mean = 0.28604f;
  want.variance = 0.12463f;
  struct Parts {
    std::string format = "tessera-sequential-weights-1", kfile = "conv0_kernel.f32";
    std::string kshape = "[3, 3, 1, 4]", bshape = "[10]", act = "relu";
    std::string norm = R"("normalization": {"mean": 0.28604, "variance": 0.12463}, )";
  };
  auto manifest = [](const Parts& p) {
    return R"({"format": ")" + p.format + R"(", )" + p.norm + R"("layers": [
      {"class_name": "Conv2D", "activation": ")" + p.act + R"(", "kernel": {"file": ")" +
           p.kfile + R"(", "shape": )" + p.kshape +
           R"(}, "bias": {"file": "conv0_bias.f32", "shape": [4]}},
      {"class_name": "MaxPool2D", "pool_size": 2}, {"class_name": "Flatten"},
      {"class_name": "Dense", "activation": "softmax",
       "kernel": {"file": "dense1_kernel.f32", "shape": [676, 10]},
       "bias": {"file": "dense1_bias.f32", "shape": )" + p.bshape + "}}]}";
  };
  const auto ok = parse_weight_manifest(manifest(Parts{}), "m", want);
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].where, "layers[0] (Conv2D)");
  EXPECT_EQ(ok[0].kernel.file, "conv0_kernel.f32");
  EXPECT_EQ(ok[0].kernel.count(), 36u);
  EXPECT_EQ(ok[1].where, "layers[3] (Dense)");
  EXPECT_EQ(ok[1].bias.shape, std::vector<uint64_t>{10});
  auto refused = [&](const std::string& text, const std::string& expect) {
    try {
      parse_weight_manifest(text, "m", want);
    } catch (const WeightManifestError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("m: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted: " << text;
  };
  auto with = [&](auto change) {
    Parts p;
    change(p);
    return manifest(p);
  };
  refused("{\"format\": ", "not JSON");
  refused("[1, 2]", "not a JSON object");
  refused(with([](Parts& p) { p.format = "other-1"; }),
          "format 'other-1' is not a Tessera weight export");
  refused(with([](Parts& p) { p.kfile = "../secret"; }),
          "layers[0] (Conv2D) kernel: file '../secret' is not a plain file name");
  refused(with([](Parts& p) { p.kshape = "[1, 3, 3, 4]"; }),  // the same count and last dimension
          "layers[0] (Conv2D) kernel: shape [1,3,3,4], the model's is [3,3,1,4]");
  refused(with([](Parts& p) { p.bshape = "[11]"; }), "layers[3] (Dense) bias: shape [11]");
  refused(with([](Parts& p) { p.kshape = "[3, 3, -1, 4]"; }),
          "shape element 2 is not an integer from 1 to 2^30");
  refused(with([](Parts& p) { p.kshape = "[3, 3, [[[1]]], 4]"; }), "shape element 2");
  refused(with([](Parts& p) { p.act = "linear"; }),
          "layers[0] (Conv2D): activation 'linear', the model's is 'relu'");
  refused(with([](Parts& p) { p.norm = ""; }), "no \"normalization\"");
  refused(with([](Parts& p) {
            p.norm = R"("normalization": {"mean": 0.3, "variance": 0.12463}, )";
          }),
          "normalization: mean and variance differ");
  ExpectedWeights one = want;
  one.layers.pop_back();
  EXPECT_THROW(parse_weight_manifest(manifest(Parts{}), "m", one), WeightManifestError);
  ExpectedWeights three = want;
  three.layers.push_back({"Dense", "softmax", {10, 10}});
  EXPECT_THROW(parse_weight_manifest(manifest(Parts{}), "m", three), WeightManifestError);
}
