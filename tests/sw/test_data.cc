// The training data pipeline (sw/data): IDX files written here byte by byte, raw and through
// zlib's gzwrite, checked against the dims and bytes that went in; each malformed file against
// the offset where it goes wrong; the pipeline against properties that hold for any shuffle
// (permutations, the buffer window, shares that concatenate, seek = uninterrupted run); bf16
// against a nearest-value search that does not use the rounding trick.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "sw/data/shuffle.h"
#include "tests/common/test_util.h"
#include "tessera/data.h"
#include "tests/common/test_util.h"

namespace tessera::data {
namespace {

using Bytes = std::vector<uint8_t>;

// A fresh directory for one test (tests/common/test_util.h).
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_data") {}
};

Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload, uint8_t type = 0x08) {
  Bytes bytes = {0x00, 0x00, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(dim >> shift));
  }
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr) << path;
  ASSERT_EQ(gzwrite(out, bytes.data(), bytes.size()), int(bytes.size())) << path;
  ASSERT_EQ(gzclose(out), Z_OK) << path;
}

Bytes read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes pattern_bytes(size_t n, uint8_t salt = 0) {
  Bytes bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = uint8_t(i * 37 + salt);
  return bytes;
}

// Runs `body`, expects a DataError, and checks its message contains each of `parts`.
void expect_data_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message: " << message << "\nmissing: " << part;
    }
  }
}

TEST(IdxRead, RawAndGzipGiveDimsAndBytes) {
  TempDir dir;
  for (const std::vector<uint32_t>& dims :
       {std::vector<uint32_t>{7}, {3, 5}, {4, 2, 3}, {2, 3, 1, 5}}) {
    size_t n = 1;
    for (uint32_t d : dims) n *= d;
    const Bytes payload = pattern_bytes(n, uint8_t(dims.size()));
    const std::string raw = dir.file("a.idx"), gz = dir.file("a.idx.gz");
    write_raw(raw, idx_bytes(dims, payload));
    write_gzip(gz, idx_bytes(dims, payload));
    ASSERT_EQ(read_raw(gz).at(0), 0x1f);  // really compressed
    for (const std::string& path : {raw, gz}) {
      const IdxArray array = read_idx(path);
      EXPECT_EQ(array.dims, dims) << path;
      EXPECT_EQ(array.data, payload) << path;
    }
  }
}

TEST(IdxRead, BadMagicAtOffsetZero) {
  TempDir dir;
  Bytes bytes = idx_bytes({4}, pattern_bytes(4));
  bytes[1] = 0x01;
  write_raw(dir.file("m"), bytes);
  expect_data_error([&] { read_idx(dir.file("m")); }, {dir.file("m") + ": offset 0x0:", "magic"});
}

TEST(IdxRead, NonByteTypeIsRejectedByName) {
  TempDir dir;
  write_raw(dir.file("f"), idx_bytes({2}, pattern_bytes(8), 0x0D));
  expect_data_error([&] { read_idx(dir.file("f")); },
                    {dir.file("f") + ": offset 0x2:", "0x0d", "float32"});
}

TEST(IdxRead, DimensionCountOutOfRange) {
  TempDir dir;
  for (uint8_t ndims : {0, 5}) {
    Bytes bytes = {0, 0, 0x08, ndims};
    bytes.resize(4 + 4 * ndims + 1, 1);
    write_raw(dir.file("n"), bytes);
    expect_data_error([&] { read_idx(dir.file("n")); }, {dir.file("n") + ": offset 0x3:"});
  }
}

TEST(IdxRead, ZeroDimensionNamedAtItsOffset) {
  TempDir dir;
  write_raw(dir.file("z"), idx_bytes({4, 0, 2}, {}));
  expect_data_error([&] { read_idx(dir.file("z")); },
                    {dir.file("z") + ": offset 0x8:", "dimension 1 is 0"});
}

TEST(IdxRead, TruncatedHeader) {
  TempDir dir;
  Bytes bytes = idx_bytes({4, 5, 6}, {});
  bytes.resize(10);  // 3 dims need 16 header bytes
  write_raw(dir.file("h"), bytes);
  expect_data_error([&] { read_idx(dir.file("h")); }, {dir.file("h") + ": offset 0xa:"});
}

TEST(IdxRead, TruncatedPayloadAtFirstMissingByteRawAndGzip) {
  TempDir dir;
  // Header 4 + 2 * 4 = 12 bytes; the payload needs 6 bytes, 4 are there: byte 16 is missing.
  const Bytes bytes = idx_bytes({2, 3}, pattern_bytes(4));
  write_raw(dir.file("t"), bytes);
  write_gzip(dir.file("t.gz"), bytes);
  for (const std::string& path : {dir.file("t"), dir.file("t.gz")}) {
    expect_data_error([&] { read_idx(path); }, {path + ": offset 0x10:", "truncated"});
  }
}

TEST(IdxRead, TrailingBytesAfterThePayload) {
  TempDir dir;
  // Header 12 bytes + 6 payload bytes: the first extra byte is at 18 = 0x12.
  write_raw(dir.file("x"), idx_bytes({2, 3}, pattern_bytes(8)));
  expect_data_error([&] { read_idx(dir.file("x")); },
                    {dir.file("x") + ": offset 0x12:", "2 trailing bytes"});
}

TEST(IdxRead, CorruptGzipNamesFileAndZlibError) {
  TempDir dir;
  write_gzip(dir.file("c.gz"), idx_bytes({64, 64}, pattern_bytes(4096)));
  Bytes gz = read_raw(dir.file("c.gz"));
  ASSERT_GT(gz.size(), 30u);
  // Break the deflate stream just after the 10-byte gzip header.
  Bytes corrupt = gz;
  for (size_t i = 10; i < 16; ++i) corrupt[i] = 0xFF;
  write_raw(dir.file("c.gz"), corrupt);
  expect_data_error([&] { read_idx(dir.file("c.gz")); }, {dir.file("c.gz") + ": gzip: "});
  // Cut short: the stream ends before its end marker.
  write_raw(dir.file("s.gz"), Bytes(gz.begin(), gz.begin() + gz.size() / 2));
  expect_data_error([&] { read_idx(dir.file("s.gz")); }, {dir.file("s.gz") + ": gzip: "});
  // A flipped payload bit caught by the CRC.
  Bytes bad_crc = gz;
  bad_crc[gz.size() - 6] ^= 0x01;
  write_raw(dir.file("r.gz"), bad_crc);
  expect_data_error([&] { read_idx(dir.file("r.gz")); }, {dir.file("r.gz") + ": gzip: "});
}

// read_idx(path) in a process whose address space has 1 GiB to spare: 0 for a gzip DataError
// about the length, 1 another DataError, 2 std::bad_alloc, 3 no limit set, 4 no error at all.
int read_gzip_with_a_gib_to_spare(const std::string& path) {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  rlimit limit{};
  limit.rlim_cur = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
  limit.rlim_max = RLIM_INFINITY;
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 3;
  try {
    read_idx(path);
  } catch (const DataError& e) {
    const std::string m = e.what();
    return m.find(path + ": gzip: ") == 0 && m.find("length") != std::string::npos ? 0 : 1;
  } catch (const std::bad_alloc&) {
    return 2;
  }
  return 4;
}

// A gzip trailer's size field (ISIZE, the last 4 bytes) is only a reservation hint: a damaged
// one claiming 4 GiB must not be allocated before inflating (found by fuzz/fuzz_idx.cc: it was
// reserved as is). With 1 GiB of address space to spare, the read ends in zlib's length check.
TEST(IdxRead, GzipTrailerSizeIsNotBelievedBeyondTheData) {
  TempDir dir;
  write_gzip(dir.file("t.gz"), idx_bytes({2, 3}, pattern_bytes(6)));
  Bytes gz = read_raw(dir.file("t.gz"));
  ASSERT_GT(gz.size(), 18u);
  for (size_t i = gz.size() - 4; i < gz.size(); ++i) gz[i] = 0xFF;
  write_raw(dir.file("t.gz"), gz);
  const std::string path = dir.file("t.gz");
  EXPECT_EXIT(std::_Exit(read_gzip_with_a_gib_to_spare(path)), ::testing::ExitedWithCode(0), "");
}

// Bytes after the last of several gzip members: counted and placed from the file's start (zlib's
// total_in restarts at each member).
TEST(IdxRead, GarbageAfterTheSecondGzipMemberIsCountedFromTheFileStart) {
  TempDir dir;
  const Bytes idx = idx_bytes({4}, pattern_bytes(4));
  write_gzip(dir.file("a.gz"), Bytes(idx.begin(), idx.begin() + 5));
  write_gzip(dir.file("b.gz"), Bytes(idx.begin() + 5, idx.end()));
  Bytes two = read_raw(dir.file("a.gz"));
  const Bytes second = read_raw(dir.file("b.gz"));
  two.insert(two.end(), second.begin(), second.end());
  write_raw(dir.file("two.gz"), two);
  EXPECT_EQ(read_idx(dir.file("two.gz")).data, pattern_bytes(4));
  const size_t garbage_at = two.size();
  two.insert(two.end(), {0x01, 0x02, 0x03});
  write_raw(dir.file("two.gz"), two);
  std::ostringstream offset;
  offset << std::hex << garbage_at;
  expect_data_error([&] { read_idx(dir.file("two.gz")); },
                    {dir.file("two.gz") + ": gzip: 3 bytes after the end of the compressed stream",
                     "from compressed offset 0x" + offset.str()});
}

TEST(IdxRead, MissingFile) {
  TempDir dir;
  expect_data_error([&] { read_idx(dir.file("absent")); },
                    {dir.file("absent") + ": cannot open: ", std::strerror(ENOENT)});
}

// MNIST-layout files: `count` images of 3 x 2 and labels id % 10, images raw, labels gzip.
void write_mnist(const TempDir& dir, const std::string& prefix, uint32_t count) {
  Bytes labels(count);
  for (uint32_t i = 0; i < count; ++i) labels[i] = uint8_t(i % 10);
  write_raw(dir.file(prefix + "-images-idx3-ubyte"),
            idx_bytes({count, 3, 2}, pattern_bytes(count * 6, uint8_t(count))));
  write_gzip(dir.file(prefix + "-labels-idx1-ubyte.gz"), idx_bytes({count}, labels));
}

TEST(LoadMnist, ReadsBothSplitsRawOrGzip) {
  TempDir dir;
  write_mnist(dir, "train", 50);
  write_mnist(dir, "t10k", 20);
  const Dataset train = load_mnist(dir.path(), Split::kTrain);
  const Dataset test = load_mnist(dir.path(), Split::kTest);
  EXPECT_EQ(train.count, 50u);
  EXPECT_EQ(test.count, 20u);
  EXPECT_EQ(train.rows, 3u);
  EXPECT_EQ(train.cols, 2u);
  EXPECT_EQ(train.images, pattern_bytes(300, 50));
  EXPECT_EQ(test.images, pattern_bytes(120, 20));
  for (uint32_t i = 0; i < 50; ++i) ASSERT_EQ(train.labels[i], i % 10) << i;
}

TEST(LoadMnist, RejectsMismatchedCounts) {
  TempDir dir;
  write_mnist(dir, "train", 50);
  write_raw(dir.file("train-labels-idx1-ubyte"), idx_bytes({49}, Bytes(49, 1)));  // raw first
  expect_data_error([&] { load_mnist(dir.path(), Split::kTrain); },
                    {dir.file("train-labels-idx1-ubyte") + ": offset 0x4:", "49", "50"});
}

TEST(LoadMnist, RejectsLabelOfTenOrMoreNamingOffsetAndValue) {
  TempDir dir;
  write_mnist(dir, "t10k", 20);
  Bytes labels(20, 3);
  labels[5] = 12;  // payload starts at 8: offset 13
  write_gzip(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes({20}, labels));
  expect_data_error([&] { load_mnist(dir.path(), Split::kTest); },
                    {dir.file("t10k-labels-idx1-ubyte.gz") + ": offset 0xd:", "label 12"});
}

TEST(LoadMnist, RejectsWrongRankAndMissingFiles) {
  TempDir dir;
  write_mnist(dir, "train", 10);
  write_raw(dir.file("train-images-idx3-ubyte"), idx_bytes({10, 6}, pattern_bytes(60)));
  expect_data_error([&] { load_mnist(dir.path(), Split::kTrain); },
                    {dir.file("train-images-idx3-ubyte") + ": offset 0x3:", "3 dimensions"});
  expect_data_error([&] { load_mnist(dir.path(), Split::kTest); },
                    {dir.file("t10k-images-idx3-ubyte"), "cannot open"});
}

// A synthetic dataset whose image bytes and label say which sample they are.
Dataset synthetic_dataset(uint32_t count, uint32_t rows = 2, uint32_t cols = 3) {
  Dataset ds;
  ds.count = count;
  ds.rows = rows;
  ds.cols = cols;
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t k = 0; k < rows * cols; ++k) ds.images.push_back(uint8_t(i * 7 + k));
    ds.labels.push_back(uint8_t(i % 10));
  }
  return ds;
}

// The batch's images and labels are those of its sample ids.
void expect_batch_matches_ids(const Dataset& ds, const Batch& batch) {
  const size_t image_bytes = ds.rows * ds.cols;
  ASSERT_EQ(batch.images.size(), batch.sample_ids.size() * image_bytes);
  ASSERT_EQ(batch.labels.size(), batch.sample_ids.size());
  for (size_t i = 0; i < batch.sample_ids.size(); ++i) {
    const uint32_t id = batch.sample_ids[i];
    ASSERT_LT(id, ds.count);
    EXPECT_EQ(batch.labels[i], ds.labels[id]) << "sample " << i << " id " << id;
    EXPECT_TRUE(std::equal(batch.images.begin() + i * image_bytes,
                           batch.images.begin() + (i + 1) * image_bytes,
                           ds.images.begin() + id * image_bytes))
        << "sample " << i << " id " << id;
  }
}

std::vector<Batch> take(Pipeline& pipeline, size_t n) {
  std::vector<Batch> batches;
  for (size_t i = 0; i < n; ++i) batches.push_back(pipeline.next());
  return batches;
}

std::vector<uint32_t> ids_of(const std::vector<Batch>& batches) {
  std::vector<uint32_t> ids;
  for (const Batch& b : batches) ids.insert(ids.end(), b.sample_ids.begin(), b.sample_ids.end());
  return ids;
}

TEST(Pipeline, EveryEpochIsAPermutation) {
  const Dataset ds = synthetic_dataset(100);
  PipelineConfig cfg;
  cfg.batch = 10;
  cfg.shuffle_buffer = 30;
  cfg.seed = test::test_seed();
  cfg.drop_remainder = false;
  Pipeline pipeline(ds, cfg);
  ASSERT_EQ(pipeline.batches_per_epoch(), 10u);
  std::vector<uint32_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<uint32_t> previous;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<Batch> batches = take(pipeline, 10);
    for (uint64_t i = 0; i < 10; ++i) {
      EXPECT_EQ(batches[i].epoch, epoch);
      EXPECT_EQ(batches[i].index, i);
      expect_batch_matches_ids(ds, batches[i]);
    }
    std::vector<uint32_t> ids = ids_of(batches);
    EXPECT_NE(ids, identity) << "epoch " << epoch << " not shuffled";
    EXPECT_NE(ids, previous) << "epoch " << epoch << " repeats the last epoch's order";
    previous = ids;
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, identity) << "epoch " << epoch;
  }
}

TEST(Pipeline, ShuffleBufferWindowAndIdentity) {
  // tf.data semantics: output k is drawn from a buffer holding only inputs below buffer + k.
  const uint64_t seed = test::test_seed();
  for (uint32_t buffer : {1u, 2u, 8u, 100u, 1000u}) {
    const std::vector<uint32_t> order = shuffle_order(100, buffer, seed, 0);
    ASSERT_EQ(order.size(), 100u);
    for (uint32_t k = 0; k < 100; ++k) {
      ASSERT_LT(order[k], buffer + k) << "buffer " << buffer << " output " << k;
    }
    std::vector<uint32_t> identity(100);
    std::iota(identity.begin(), identity.end(), 0);
    if (buffer == 1) {
      EXPECT_EQ(order, identity);
    } else {
      EXPECT_NE(order, identity) << "buffer " << buffer;
    }
  }
}

TEST(Pipeline, BufferOfOneGivesDatasetOrder) {
  const Dataset ds = synthetic_dataset(64);
  PipelineConfig cfg;
  cfg.batch = 16;
  cfg.shuffle_buffer = 1;
  cfg.seed = 99;
  Pipeline pipeline(ds, cfg);
  for (uint32_t round = 0; round < 8; ++round) {
    const Batch batch = pipeline.next();
    for (uint32_t i = 0; i < 16; ++i) ASSERT_EQ(batch.sample_ids[i], (round % 4) * 16 + i);
  }
}

TEST(Pipeline, SameSeedSameSequenceDifferentSeedDifferent) {
  const Dataset ds = synthetic_dataset(200);
  PipelineConfig cfg;
  cfg.batch = 16;
  cfg.seed = test::test_seed();
  Pipeline a(ds, cfg), b(ds, cfg);
  cfg.seed += 1;
  Pipeline c(ds, cfg);
  const std::vector<uint32_t> ids_a = ids_of(take(a, 30));
  EXPECT_EQ(ids_a, ids_of(take(b, 30)));
  EXPECT_NE(ids_a, ids_of(take(c, 30)));
}

TEST(Pipeline, PrefetchDepthDoesNotChangeTheSequence) {
  const Dataset ds = synthetic_dataset(150);
  PipelineConfig cfg;
  cfg.batch = 20;
  cfg.shuffle_buffer = 40;
  cfg.seed = test::test_seed();
  cfg.drop_remainder = false;
  cfg.prefetch = 0;
  Pipeline sync(ds, cfg);
  cfg.prefetch = 3;
  Pipeline prefetched(ds, cfg);
  for (int i = 0; i < 40; ++i) {
    const Batch x = sync.next(), y = prefetched.next();
    ASSERT_EQ(x.epoch, y.epoch) << i;
    ASSERT_EQ(x.index, y.index) << i;
    ASSERT_EQ(x.sample_ids, y.sample_ids) << i;
    ASSERT_EQ(x.images, y.images) << i;
    ASSERT_EQ(x.labels, y.labels) << i;
  }
}

TEST(Pipeline, ReplicaSharesConcatenateToTheGlobalBatch) {
  const Dataset ds = synthetic_dataset(100);
  for (bool drop : {true, false}) {
    PipelineConfig cfg;
    cfg.batch = 12;
    cfg.shuffle_buffer = 50;
    cfg.seed = test::test_seed();
    cfg.drop_remainder = drop;
    Pipeline global(ds, cfg);
    for (uint32_t replicas : {2u, 4u}) {
      std::vector<std::unique_ptr<Pipeline>> shards;
      for (uint32_t r = 0; r < replicas; ++r) {
        PipelineConfig shard_cfg = cfg;
        shard_cfg.replicas = replicas;
        shard_cfg.replica = r;
        shards.push_back(std::make_unique<Pipeline>(ds, shard_cfg));
        EXPECT_EQ(shards.back()->batches_per_epoch(), global.batches_per_epoch());
      }
      global.seek({0, 0});
      for (uint64_t step = 0; step < 2 * global.batches_per_epoch(); ++step) {
        const Batch whole = global.next();
        std::vector<uint32_t> joined;
        Bytes joined_images;
        for (uint32_t r = 0; r < replicas; ++r) {
          const Batch share = shards[r]->next();
          EXPECT_EQ(share.epoch, whole.epoch);
          EXPECT_EQ(share.index, whole.index);
          if (drop) {
            EXPECT_EQ(share.sample_ids.size(), 12u / replicas);
          }
          joined.insert(joined.end(), share.sample_ids.begin(), share.sample_ids.end());
          joined_images.insert(joined_images.end(), share.images.begin(), share.images.end());
        }
        ASSERT_EQ(joined, whole.sample_ids) << "replicas " << replicas << " step " << step;
        ASSERT_EQ(joined_images, whole.images) << "replicas " << replicas << " step " << step;
      }
    }
  }
}

TEST(Pipeline, RejectsBadConfigs) {
  const Dataset ds = synthetic_dataset(20);
  auto with = [](std::function<void(PipelineConfig&)> change) {
    PipelineConfig cfg;
    cfg.batch = 6;
    change(cfg);
    return cfg;
  };
  EXPECT_THROW(Pipeline(ds, with([](auto& c) { c.replicas = 4; })), std::invalid_argument);
  EXPECT_THROW(Pipeline(ds, with([](auto& c) { c.replicas = 2, c.replica = 2; })),
               std::invalid_argument);
  EXPECT_THROW(Pipeline(ds, with([](auto& c) { c.batch = 0; })), std::invalid_argument);
  EXPECT_THROW(Pipeline(ds, with([](auto& c) { c.shuffle_buffer = 0; })), std::invalid_argument);
  EXPECT_THROW(Pipeline(ds, with([](auto& c) { c.batch = 21; })), std::invalid_argument);
  EXPECT_NO_THROW(Pipeline(ds, with([](auto& c) { c.replicas = 3, c.replica = 2; })));
}

TEST(Pipeline, DropRemainderAndEpochRollover) {
  const Dataset ds = synthetic_dataset(100);
  PipelineConfig cfg;
  cfg.batch = 32;
  cfg.seed = test::test_seed();
  Pipeline dropping(ds, cfg);
  cfg.drop_remainder = false;
  Pipeline keeping(ds, cfg);
  EXPECT_EQ(dropping.batches_per_epoch(), 3u);
  EXPECT_EQ(keeping.batches_per_epoch(), 4u);
  for (uint64_t step = 0; step < 9; ++step) {
    const Pipeline::Position at = dropping.position();
    const Batch batch = dropping.next();
    EXPECT_EQ(batch.epoch, step / 3);
    EXPECT_EQ(batch.index, step % 3);
    EXPECT_EQ(at.epoch, batch.epoch);
    EXPECT_EQ(at.index, batch.index);
    EXPECT_EQ(batch.sample_ids.size(), 32u);
  }
  const std::vector<Batch> epoch = take(keeping, 4);
  EXPECT_EQ(epoch[3].sample_ids.size(), 4u);
  EXPECT_EQ(keeping.next().epoch, 1u);
}

TEST(Pipeline, SeekGivesTheUninterruptedBatch) {
  const Dataset ds = synthetic_dataset(100);
  for (uint32_t prefetch : {0u, 3u}) {
    PipelineConfig cfg;
    cfg.batch = 8;
    cfg.shuffle_buffer = 25;
    cfg.seed = test::test_seed();
    cfg.prefetch = prefetch;
    cfg.replicas = 2;
    cfg.replica = 1;
    Pipeline reference(ds, cfg);
    const uint64_t per_epoch = reference.batches_per_epoch();
    ASSERT_EQ(per_epoch, 12u);
    const std::vector<Batch> uninterrupted = take(reference, 4 * per_epoch);

    Pipeline pipeline(ds, cfg);
    take(pipeline, 5);
    for (Pipeline::Position p : {Pipeline::Position{2, 3}, {0, 0}, {3, 11}, {1, 7}, {2, 3}}) {
      pipeline.seek(p);
      EXPECT_EQ(pipeline.position().epoch, p.epoch);
      EXPECT_EQ(pipeline.position().index, p.index);
      const uint64_t flat = p.epoch * per_epoch + p.index;
      for (uint64_t k = 0; k < 3 && flat + k < uninterrupted.size(); ++k) {
        const Batch got = pipeline.next();
        const Batch& want = uninterrupted[flat + k];
        ASSERT_EQ(got.epoch, want.epoch) << "seek " << p.epoch << "," << p.index << " +" << k;
        ASSERT_EQ(got.index, want.index) << "seek " << p.epoch << "," << p.index << " +" << k;
        ASSERT_EQ(got.sample_ids, want.sample_ids)
            << "seek " << p.epoch << "," << p.index << " +" << k;
        ASSERT_EQ(got.images, want.images);
      }
    }
    EXPECT_THROW(pipeline.seek({0, per_epoch}), std::out_of_range);
  }
}

TEST(Pipeline, DestructorWithAFullQueueReturnsPromptly) {
  const Dataset ds = synthetic_dataset(1000, 28, 28);
  PipelineConfig cfg;
  cfg.batch = 100;
  cfg.prefetch = 2;
  auto pipeline = std::make_unique<Pipeline>(ds, cfg);
  pipeline->next();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the queue refills and blocks
  const auto start = std::chrono::steady_clock::now();
  pipeline.reset();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5);
}

TEST(Pipeline, SplitMix64MatchesPublishedValues) {
  // The splitmix64 sequence for seed 1234567 as published with the algorithm's test vectors.
  SplitMix64 generator(1234567);
  for (uint64_t want : {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                        4593380528125082431ull, 16408922859458223821ull}) {
    EXPECT_EQ(generator.next(), want);
  }
}

TEST(Pipeline, UniformBelowIsRoughlyUniform) {
  Xoshiro256StarStar rng = epoch_rng(test::test_seed(), 0);
  constexpr int kBins = 7, kDraws = 70000;
  int counts[kBins] = {};
  for (int i = 0; i < kDraws; ++i) ++counts[rng.uniform_below(kBins)];
  double chi_square = 0;
  for (int c : counts) chi_square += std::pow(c - kDraws / kBins, 2) / (kDraws / kBins);
  EXPECT_LT(chi_square, 30.0);  // 6 degrees of freedom: p < 1e-4
}

// The bf16 value nearest to `value` (ties to the even mantissa), found by comparing distances
// to the two neighbours in double precision rather than by adding a rounding bias.
uint16_t nearest_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t below = bits & 0xFFFF0000u, above = below + 0x10000u;
  float low, high;
  std::memcpy(&low, &below, sizeof low);
  std::memcpy(&high, &above, sizeof high);
  const double to_low = double(value) - low, to_high = double(high) - value;
  if (to_low < to_high) return uint16_t(below >> 16);
  if (to_high < to_low) return uint16_t(above >> 16);
  return uint16_t(((below >> 16) & 1) ? above >> 16 : below >> 16);
}

TEST(ImagesToBf16, MatchesNearestValueForAllPixels) {
  Batch batch;
  for (int p = 0; p < 256; ++p) batch.images.push_back(uint8_t(p));
  const std::vector<uint16_t> bf16 = images_to_bf16(batch);
  ASSERT_EQ(bf16.size(), 256u);
  EXPECT_EQ(bf16[0], 0x0000);
  EXPECT_EQ(bf16[255], 0x3F80);
  EXPECT_EQ(bf16[128], 0x3F01);  // 0.50196 = 0x3F008081: above the halfway point
  for (int p = 0; p < 256; ++p) {
    ASSERT_EQ(bf16[p], nearest_bf16(float(p) / 255.0f)) << "pixel " << p;
    // The bf16 value is within half a bf16 ulp (2^-8 relative) of p / 255.
    const uint32_t back_bits = uint32_t(bf16[p]) << 16;
    float back;
    std::memcpy(&back, &back_bits, sizeof back);
    EXPECT_LE(std::fabs(back - p / 255.0), p / 255.0 * std::ldexp(1.0, -8)) << "pixel " << p;
  }
}

// Keras's Normalization on the host: (p / 255 - mean) / sqrt(variance), each step an fp32
// operation, then the nearest bf16 (an independent rounding: nearest_bf16 above). Every pixel,
// three sets of statistics; the result is also within a bf16 half-ulp of the exact value in
// double. Bad statistics are refused before any pixel is converted.
TEST(ImagesToBf16, NormalizationIsFp32ThenNearestBf16) {
  Batch batch;
  for (int p = 0; p < 256; ++p) batch.images.push_back(uint8_t(p));
  const std::pair<float, float> stats[] = {{0.2860f, 0.1246f}, {0.5f, 0.25f}, {-1.5f, 9.0f}};
  for (const auto& [mean, variance] : stats) {
    const std::vector<uint16_t> bf16 = images_to_bf16(batch, mean, variance);
    ASSERT_EQ(bf16.size(), 256u);
    const float scale = std::sqrt(variance);
    for (int p = 0; p < 256; ++p) {
      const float x = float(p) / 255.0f, centred = x - mean, value = centred / scale;
      // nearest_bf16 rounds a magnitude: the sign goes back on after
      const uint16_t want = uint16_t(nearest_bf16(std::fabs(value)) | (value < 0 ? 0x8000 : 0));
      ASSERT_EQ(bf16[p], want) << "pixel " << p << ", mean " << mean;
      const uint32_t back_bits = uint32_t(bf16[p]) << 16;
      float back;
      std::memcpy(&back, &back_bits, sizeof back);
      const double exact = (p / 255.0 - double(mean)) / std::sqrt(double(variance));
      EXPECT_LE(std::fabs(back - exact), std::fabs(exact) * std::ldexp(1.0, -8) + 1e-6)
          << "pixel " << p;
    }
  }
  EXPECT_EQ(images_to_bf16(batch, 0.0f, 1.0f), images_to_bf16(batch)) << "identity statistics";
  EXPECT_THROW(images_to_bf16(batch, 0.0f, 0.0f), std::invalid_argument);
  EXPECT_THROW(images_to_bf16(batch, 0.0f, -1.0f), std::invalid_argument);
  EXPECT_THROW(images_to_bf16(batch, std::nanf(""), 1.0f), std::invalid_argument);
}

TEST(FashionMnist, LoadsTheDebianDataset) {
  const std::string dir = default_data_dir();
  if (access(dir.c_str(), R_OK) != 0) {
    GTEST_FAIL() << dir << " is absent: install the Debian package dataset-fashion-mnist";
  }
  const Dataset train = load_mnist(dir, Split::kTrain);
  const Dataset test = load_mnist(dir, Split::kTest);
  EXPECT_EQ(train.count, 60000u);
  EXPECT_EQ(test.count, 10000u);
  for (const Dataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->rows, 28u);
    EXPECT_EQ(ds->cols, 28u);
    // Fashion-MNIST is balanced: every class has a tenth of each split.
    std::map<int, uint32_t> per_class;
    for (uint8_t label : ds->labels) ++per_class[label];
    ASSERT_EQ(per_class.size(), 10u);
    for (const auto& [label, n] : per_class) EXPECT_EQ(n, ds->count / 10) << "class " << label;
  }
}

}  // namespace
}  // namespace tessera::data
