// The training data pipeline (docs/data.md): IDX files (raw or gzip) checked byte by byte,
// MNIST-layout datasets such as Debian's Fashion-MNIST, and a deterministic
// shuffle -> batch -> prefetch pipeline with per-replica sharding and exact seek, so that a
// training run restarted from a checkpoint sees the same batches as one that never stopped.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera::data {

// A malformed or unreadable data file. The message is `PATH: offset 0xOFF: reason` (the offset
// in the uncompressed stream), `PATH: cannot open: <strerror>` or `PATH: gzip: <zlib error>`.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An IDX array of unsigned bytes (type 0x08), dims outermost first.
struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;  // product of dims bytes, row-major
};

// Reads an IDX file, raw or gzip-compressed (detected by the bytes 0x1f 0x8b). Checks the magic
// (0x00 0x00), the type (0x08 only), 1..4 dimensions each >= 1, and a payload of exactly the
// product of the dims (shorter: truncated; longer: trailing bytes). Throws DataError.
IdxArray read_idx(const std::string& path);

enum class Split { kTrain, kTest };

// An MNIST-layout dataset: `count` images of rows x cols bytes and one label (0..9) per image.
struct Dataset {
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<uint8_t> images;  // count * rows * cols, image-major
  std::vector<uint8_t> labels;  // count
};

// Loads train-{images-idx3,labels-idx1}-ubyte or t10k-... from `dir`, each file raw or with
// `.gz` (the raw name is tried first). Checks images are 3-D, labels 1-D, the counts agree and
// every label is < 10. Throws DataError.
Dataset load_mnist(const std::string& dir, Split split);

// Where Debian's dataset-fashion-mnist package installs the four files.
std::string default_data_dir();

struct PipelineConfig {
  uint32_t batch = 128;             // global batch, samples (all replicas together)
  uint32_t shuffle_buffer = 60000;  // elements; 1 means no shuffle
  uint64_t seed = 0;                // with the epoch number, seeds each epoch's shuffle
  uint32_t prefetch = 2;            // batches queued ahead by the producer thread; 0: none
  uint32_t replicas = 1;            // data-parallel replicas; must divide batch
  uint32_t replica = 0;             // this replica, 0..replicas-1
  bool drop_remainder = true;       // drop the last partial global batch of an epoch
};

struct Batch {
  uint64_t epoch = 0;
  uint64_t index = 0;                // batch index within the epoch
  std::vector<uint32_t> sample_ids;  // dataset indices, this replica's share
  std::vector<uint8_t> images;       // sample_ids.size() * rows * cols
  std::vector<uint8_t> labels;       // sample_ids.size()
};

// shuffle(shuffle_buffer, seed) -> batch(batch) -> shard(replicas, replica) -> prefetch(k),
// repeated forever. Deterministic for a config: the batch at a position depends only on the
// dataset, the config and the position. next(), seek() and position() belong to one consumer
// thread. The dataset must outlive the pipeline.
class Pipeline {
 public:
  // Throws std::invalid_argument for batch 0, shuffle_buffer 0, replicas 0, replica >= replicas,
  // batch not divisible by replicas, or an epoch with no batches.
  Pipeline(const Dataset& ds, PipelineConfig cfg);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  Batch next();  // blocks on the prefetch queue
  uint64_t batches_per_epoch() const;

  struct Position {
    uint64_t epoch = 0;
    uint64_t index = 0;
  };
  Position position() const;  // of the batch next() returns next
  // Restarts so next() returns exactly the batch an uninterrupted pipeline returns at `p`.
  // Throws std::out_of_range if p.index >= batches_per_epoch().
  void seek(Position p);

 private:
  Batch produce();  // the batch at producer_pos_, then advances it
  void start_producer();
  void stop_producer();
  void producer_loop();

  const Dataset& ds_;
  const PipelineConfig cfg_;
  const uint64_t batches_per_epoch_;

  // Producer state (the producer thread's while it runs).
  Position producer_pos_;
  uint64_t order_epoch_ = ~0ull;  // the epoch `order_` holds
  std::vector<uint32_t> order_;   // that epoch's shuffled sample ids

  Position consumer_pos_;

  mutable std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<Batch> queue_;
  std::exception_ptr producer_error_;
  bool stop_ = false;
  std::thread producer_;
};

// The batch's pixels as bf16 bits: p / 255.0f in fp32, rounded to bf16 to nearest, ties to even.
std::vector<uint16_t> images_to_bf16(const Batch& batch);
// The same through Keras's Normalization(mean, variance): (p / 255.0f - mean) / max(sqrt(variance),
// 1e-7f), every step in fp32 (sqrtf, then one subtraction and one division a pixel), then bf16.
std::vector<uint16_t> images_to_bf16(const Batch& batch, float mean, float variance);
// Inputs that are already values (a float array from Python, not pixels): each value rounded
// to bf16 (nearest, ties to even), or first normalized as Keras's Normalization does,
// (v - mean) / max(sqrt(variance), 1e-7) in fp32, with no 1/255 scaling.
std::vector<uint16_t> values_to_bf16(const float* values, size_t count);
std::vector<uint16_t> values_to_bf16(const float* values, size_t count, float mean, float variance);

}  // namespace tessera::data
