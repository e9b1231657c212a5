// Checkpoints of a training run (docs/training.md, "Run folder", "Checkpoints"): the model's
// tensors, the step, where the data pipeline stands and the seed, so that a run resumes
// exactly. One file, little-endian:
//   "TSRCKPT1" | uint32 version (1) | uint64 payload length | payload | uint32 CRC-32C of all
//   the bytes before it
// payload: signature, step, data_epoch, data_index, seed, uint32 tensor count, per tensor
// (name, uint32 ndims, uint32 dims[ndims], uint64 element count, float32 bits[count]), uint32
// meta count, per entry (key, value); every string a uint32 length and its bytes.
// save_checkpoint replaces the file atomically; load_checkpoint checks everything and refuses a
// damaged file or one of another model with a CheckpointError naming the file and the offset.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runlog {

constexpr char kCheckpointMagic[9] = "TSRCKPT1";
constexpr uint32_t kCheckpointVersion = 1;
constexpr size_t kCheckpointHeaderBytes = 8 + 4 + 8;  // magic, version, payload length
constexpr size_t kCheckpointCrcBytes = 4;

struct Tensor {
  std::string name;
  std::vector<uint32_t> shape;
  std::vector<float> data;  // row-major; size is the product of shape (1 for a scalar)
};

struct Checkpoint {
  std::string model_signature;  // architecture and config; load refuses another model's file
  uint64_t step = 0;            // optimizer steps done
  uint64_t data_epoch = 0, data_index = 0;  // where the data pipeline resumes
  uint64_t seed = 0;
  std::vector<Tensor> tensors;
  std::vector<std::pair<std::string, std::string>> meta;
};

class CheckpointError : public std::runtime_error {
 public:
  enum class Kind {
    kIo,       // cannot open, read, write, fsync or rename
    kInvalid,  // save: a tensor's data does not match its shape
    kBadMagic,
    kUnsupportedVersion,
    kTruncated,
    kTrailingBytes,
    kChecksumMismatch,
    kMalformedPayload,
    kSignatureMismatch,
  };
  CheckpointError(Kind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// The file's bytes for `c` (what save_checkpoint writes). Throws CheckpointError (kInvalid)
// when a tensor's data size is not the product of its shape.
std::string encode_checkpoint(const Checkpoint& c);

// Atomic: writes PATH.tmp.<pid>, fsyncs it, renames it over PATH and fsyncs the directory. On
// any failure before the rename the old PATH is untouched and the tmp file removed.
void save_checkpoint(const std::string& path, const Checkpoint& c);

// Reads and checks PATH: magic, version, size (truncated or trailing bytes), CRC, the payload's
// structure, then that its model_signature is `expected_signature`. Throws CheckpointError.
Checkpoint load_checkpoint(const std::string& path, const std::string& expected_signature);

// The same checks on bytes in memory; `name` stands for the file in messages.
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& name,
                             const std::string& expected_signature);

}  // namespace tessera::runlog
