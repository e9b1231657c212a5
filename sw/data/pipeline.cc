// The shuffle -> batch -> shard -> prefetch pipeline. One producer thread computes batches in
// order from its own position and pushes them into a bounded queue; next() pops. Every batch is
// a pure function of (dataset, config, epoch, index), which is what makes seek() exact.
#include <cmath>
#include <cstring>

#include "sw/data/shuffle.h"
#include "tessera/data.h"

namespace tessera::data {

std::vector<uint32_t> shuffle_order(uint32_t count, uint32_t buffer_size, uint64_t seed,
                                    uint64_t epoch) {
  Xoshiro256StarStar rng = epoch_rng(seed, epoch);
  std::vector<uint32_t> order;
  order.reserve(count);
  std::vector<uint32_t> buffer;
  uint32_t next_input = 0;
  while (next_input < count && buffer.size() < buffer_size) buffer.push_back(next_input++);
  while (!buffer.empty()) {
    const size_t slot = rng.uniform_below(buffer.size());
    order.push_back(buffer[slot]);
    if (next_input < count) {
      buffer[slot] = next_input++;
    } else {
      buffer[slot] = buffer.back();
      buffer.pop_back();
    }
  }
  return order;
}

namespace {

uint64_t count_batches(const Dataset& ds, const PipelineConfig& cfg) {
  if (cfg.batch == 0) return 0;
  return cfg.drop_remainder ? ds.count / cfg.batch
                            : (uint64_t(ds.count) + cfg.batch - 1) / cfg.batch;
}

const PipelineConfig& checked(const Dataset& ds, const PipelineConfig& cfg) {
  if (cfg.batch == 0) throw std::invalid_argument("Pipeline: batch must be at least 1");
  if (cfg.shuffle_buffer == 0) {
    throw std::invalid_argument("Pipeline: shuffle_buffer must be at least 1 (1: no shuffle)");
  }
  if (cfg.replicas == 0) throw std::invalid_argument("Pipeline: replicas must be at least 1");
  if (cfg.replica >= cfg.replicas) {
    throw std::invalid_argument("Pipeline: replica " + std::to_string(cfg.replica) +
                                " is not below replicas " + std::to_string(cfg.replicas));
  }
  if (cfg.batch % cfg.replicas != 0) {
    throw std::invalid_argument("Pipeline: batch " + std::to_string(cfg.batch) +
                                " is not divisible by replicas " + std::to_string(cfg.replicas));
  }
  if (ds.images.size() != uint64_t(ds.count) * ds.rows * ds.cols || ds.labels.size() != ds.count) {
    throw std::invalid_argument("Pipeline: dataset sizes do not match its count and shape");
  }
  if (count_batches(ds, cfg) == 0) {
    throw std::invalid_argument("Pipeline: " + std::to_string(ds.count) +
                                " samples make no batch of " + std::to_string(cfg.batch) +
                                (cfg.drop_remainder ? " with drop_remainder" : ""));
  }
  return cfg;
}

}  // namespace

Pipeline::Pipeline(const Dataset& ds, PipelineConfig cfg)
    : ds_(ds), cfg_(checked(ds, cfg)), batches_per_epoch_(count_batches(ds, cfg)) {
  start_producer();
}

Pipeline::~Pipeline() { stop_producer(); }

uint64_t Pipeline::batches_per_epoch() const { return batches_per_epoch_; }

Pipeline::Position Pipeline::position() const { return consumer_pos_; }

Batch Pipeline::produce() {
  const Position at = producer_pos_;
  if (order_epoch_ != at.epoch) {
    order_ = shuffle_order(ds_.count, cfg_.shuffle_buffer, cfg_.seed, at.epoch);
    order_epoch_ = at.epoch;
  }
  // The global batch is order_[global_begin, global_end); this replica's share is the r-th
  // contiguous slice of batch / replicas samples of it (empty or short in a last partial batch).
  const uint64_t share = cfg_.batch / cfg_.replicas;
  const uint64_t global_begin = at.index * cfg_.batch;
  const uint64_t global_end = std::min<uint64_t>(global_begin + cfg_.batch, ds_.count);
  const uint64_t begin = std::min(global_begin + cfg_.replica * share, global_end);
  const uint64_t end = std::min(begin + share, global_end);

  Batch batch;
  batch.epoch = at.epoch;
  batch.index = at.index;
  batch.sample_ids.assign(order_.begin() + begin, order_.begin() + end);
  const size_t image_bytes = size_t(ds_.rows) * ds_.cols;
  batch.images.resize(batch.sample_ids.size() * image_bytes);
  batch.labels.resize(batch.sample_ids.size());
  for (size_t i = 0; i < batch.sample_ids.size(); ++i) {
    const uint32_t id = batch.sample_ids[i];
    std::memcpy(&batch.images[i * image_bytes], &ds_.images[id * image_bytes], image_bytes);
    batch.labels[i] = ds_.labels[id];
  }

  if (++producer_pos_.index == batches_per_epoch_) {
    producer_pos_.index = 0;
    ++producer_pos_.epoch;
  }
  return batch;
}

void Pipeline::producer_loop() {
  try {
    for (;;) {
      Batch batch = produce();
      std::unique_lock<std::mutex> lock(mutex_);
      not_full_.wait(lock, [&] { return stop_ || queue_.size() < cfg_.prefetch; });
      if (stop_) return;
      queue_.push_back(std::move(batch));
      not_empty_.notify_one();
      // Checked again before the next (possibly long) produce().
      if (stop_) return;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    producer_error_ = std::current_exception();
    not_empty_.notify_one();
  }
}

void Pipeline::start_producer() {
  stop_ = false;
  producer_error_ = nullptr;
  queue_.clear();
  if (cfg_.prefetch > 0) producer_ = std::thread(&Pipeline::producer_loop, this);
}

void Pipeline::stop_producer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (producer_.joinable()) producer_.join();
}

Batch Pipeline::next() {
  Batch batch;
  if (cfg_.prefetch == 0) {
    batch = produce();
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty() || producer_error_; });
    if (queue_.empty()) std::rethrow_exception(producer_error_);
    batch = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
  }
  consumer_pos_ = {batch.epoch, batch.index + 1};
  if (consumer_pos_.index == batches_per_epoch_) consumer_pos_ = {batch.epoch + 1, 0};
  return batch;
}

void Pipeline::seek(Position p) {
  if (p.index >= batches_per_epoch_) {
    throw std::out_of_range("Pipeline::seek: batch index " + std::to_string(p.index) +
                            " is not below batches_per_epoch " +
                            std::to_string(batches_per_epoch_));
  }
  stop_producer();
  producer_pos_ = p;
  consumer_pos_ = p;
  start_producer();
}

namespace {
// Round to nearest, ties to even: add just under half an ulp of bf16, plus one if the kept
// part is odd, then truncate. (No NaN or infinity arises from the pixels' arithmetic.)
uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
}  // namespace

std::vector<uint16_t> images_to_bf16(const Batch& batch) {
  std::vector<uint16_t> out(batch.images.size());
  for (size_t i = 0; i < batch.images.size(); ++i) out[i] = to_bf16(batch.images[i] / 255.0f);
  return out;
}

std::vector<uint16_t> images_to_bf16(const Batch& batch, float mean, float variance) {
  if (!(variance > 0) || !std::isfinite(variance) || !std::isfinite(mean))
    throw std::invalid_argument("Normalization: mean " + std::to_string(mean) + ", variance " +
                                std::to_string(variance) + ": finite, variance > 0");
  const float scale = std::max(std::sqrt(variance), 1e-7f);
  std::vector<uint16_t> out(batch.images.size());
  for (size_t i = 0; i < batch.images.size(); ++i)
    out[i] = to_bf16((batch.images[i] / 255.0f - mean) / scale);
  return out;
}

std::vector<uint16_t> values_to_bf16(const float* values, size_t count) {
  std::vector<uint16_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = to_bf16(values[i]);
  return out;
}

std::vector<uint16_t> values_to_bf16(const float* values, size_t count, float mean, float variance) {
  if (!(variance > 0) || !std::isfinite(variance) || !std::isfinite(mean))
    throw std::invalid_argument("Normalization: mean " + std::to_string(mean) + ", variance " +
                                std::to_string(variance) + ": finite, variance > 0");
  const float scale = std::max(std::sqrt(variance), 1e-7f);
  std::vector<uint16_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = to_bf16((values[i] - mean) / scale);
  return out;
}

}  // namespace tessera::data
