// The training-step compiler for the example CNN (docs/compiler.md): it lowers
//   Conv2D(F, KxK, valid, relu) -> MaxPool2D(2x2) -> Flatten -> Dense(C, softmax)
// trained with sparse categorical cross-entropy and Adam into ONE chip program that runs a whole
// training step — forward, loss, backward and the Adam update — on the chip's DMA, MXU and VPU.
// The program is compiled once and replayed for every batch: the host only writes the batch
// (images and labels) into fixed HBM slots and reads the step's loss and accuracy back. Weights,
// the Adam moments and the bias-correction powers live in HBM between steps (contract 4).
//
// What is ours and what is the host's is documented in docs/compiler.md: the host converts the
// input pixels to bf16 (p / 255 rounded) and the labels to fp32 when it stages a batch; nothing
// else of the step runs on the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/chip.h"
#include "tessera/isa.h"

namespace tessera::compiler {

// The model family the compiler lowers (one input channel: Fashion-MNIST's images).
struct CnnSpec {
  uint32_t height = 28, width = 28;  // input image, one channel
  uint32_t filters = 32;             // Conv2D filters
  uint32_t kernel = 3;               // KxK, valid padding, stride 1, relu
  uint32_t pool = 2;                 // MaxPool2D pool = stride
  uint32_t classes = 10;             // Dense(classes, softmax)

  uint32_t conv_h() const { return height - kernel + 1; }
  uint32_t conv_w() const { return width - kernel + 1; }
  uint32_t pool_h() const { return conv_h() / pool; }
  uint32_t pool_w() const { return conv_w() / pool; }
  uint32_t features() const { return pool_h() * pool_w() * filters; }  // Flatten (NHWC)
  uint32_t taps() const { return kernel * kernel; }
};

// Adam in the Keras form: lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t);
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; w -= lr_t m / (sqrt(v) + eps).
struct AdamSpec {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-7f;
};

// The chip the program is for: tessera::ChipShape (tessera/chip.h; docs/isa.md, machine
// parameters).

// Host-side parameters in Keras's layouts (fp32): conv kernel [K][K][1][F] (HWIO), conv bias
// [F], dense kernel [features][C] with features in NHWC Flatten order, dense bias [C].
struct CnnParams {
  std::vector<float> conv_kernel, conv_bias, dense_kernel, dense_bias;
};
// Adam state: first and second moments shaped like the parameters, and the bias-correction
// powers b1^t, b2^t (fp32, updated by the chip by one multiply per step).
struct AdamState {
  CnnParams m, v;
  float beta1_power = 1.0f, beta2_power = 1.0f;
};

// Data parallelism (docs/multichip.md): the same step on every chip of a ring of `replicas`,
// each with its own shard of the global batch (replicas x batch). The program computes its
// shard's gradients scaled by 1 / global batch into an HBM gradient buffer, sums them over the
// ring with a reduce-scatter (fixed order), runs Adam on the chunk the reduce-scatter leaves
// it (GradShards: the update is sharded) and all-gathers the updated bf16 copies and fp32
// biases: every replica computes with the same weights. `split_update` with one replica
// compiles the same split program without the collectives (one chunk: the whole update) —
// bit-identical to the fused single-chip step (a test of the split).
struct Replication {
  int replicas = 1;
  int rank = 0;
  bool split_update = false;
  bool split() const { return replicas > 1 || split_update; }
};

// The HBM regions of the step (byte addresses; docs/compiler.md lists their layouts).
struct HbmLayout {
  uint64_t base = 0, bytes = 0;
  // batch slots written by the host before each step
  uint64_t images = 0;  // [batch][H][W] bf16
  uint64_t labels = 0;  // [batch rounded up to N] fp32
  // state
  uint64_t conv_w = 0, conv_w_m = 0, conv_w_v = 0;     // [taps][F] fp32
  uint64_t conv_b = 0, conv_b_m = 0, conv_b_v = 0;     // [F] fp32
  uint64_t conv_w16 = 0;                               // [Kc*N][F] bf16, rows >= taps zero
  uint64_t dense_w = 0, dense_w_m = 0, dense_w_v = 0;  // [classes][features] fp32 (W^T)
  uint64_t dense_b = 0, dense_b_m = 0, dense_b_v = 0;  // [Cpad] fp32
  uint64_t dense_w16t = 0;  // [Cpad][features] bf16 (W^T; rows >= classes zero): the only
                            // bf16 copy (dense_fwd loads its tiles transposed, MXU.LDW t)
  uint64_t powers = 0;      // [2][N] fp32: b1^t, b2^t in every lane
  uint64_t consts = 0;      // [2*Cc][N] fp32: class index, valid mask
  // activations kept for the backward pass
  uint64_t features = 0;   // [pool_h][batch][pool_w F] bf16 (pooled-row-major), the pooled
                           // relu output
  uint64_t argmax = 0;     // [batch][pool_h][code_words()][F] int32: per pooled column the
                           // window position 0..3 of the max (4: relu off), 3 bits, 10 a word
  uint64_t dfeatures = 0;  // [batch][features] bf16, d loss / d features
  // results
  uint64_t metrics = 0;  // [2][N] fp32: batch mean loss, number of correct predictions
  uint64_t probs = 0;    // [batch][Cpad] fp32: the softmax output (StepKind::kEvaluate)
  // split update (Replication::split): the gradients, fp32, one vector for the ring's
  // reduce-scatter, in P equal chunks of GradShards::chunk elements (a multiple of N); chunk 0:
  // conv kernel [taps][F], conv bias [F], dense bias [Cpad], then dense W^T columns
  // [col[0], col[1]) as [classes][col[1] - col[0]]; chunk k > 0: columns [col[k], col[k+1])
  // the same way; each chunk zero-padded (grads_elems = P x chunk)
  uint64_t grads = 0, grads_elems = 0;
  uint64_t program = 0;  // the step program
};

struct StepStats {
  uint64_t instructions = 0;  // in the program (REPEAT bodies once)
  uint64_t executed = 0;      // executed in a step (REPEAT bodies count times; REPEATs not)
  uint64_t loops = 0;         // REPEAT loops in the program (docs/compiler.md, stage 6)
  uint64_t waits = 0, signals = 0;
  uint64_t dma = 0, mxu = 0, vpu = 0;  // instructions per unit (sync included)
  uint64_t macs = 0;                   // MXU.MM rows x N x N
  uint64_t dma_elements = 0;           // elements the DMA moves (a word a cycle on runs)
  uint64_t hbm_bytes = 0;              // HBM bytes the DMA reads and writes
  struct Phase {
    std::string name;
    uint64_t first_instruction = 0, instructions = 0;  // in the program
    uint64_t mxu_bound = 0;  // MXU.MM rows + N per MXU.LDW: the phase's MXU shape bound
    uint64_t vpu = 0;        // VPU instructions (one lane-vector each: the VPU bound)
    uint64_t dma = 0;        // DMA instructions
    uint64_t macs = 0;
    uint64_t dma_elements = 0;
    uint64_t hbm_bytes = 0;
  };
  std::vector<Phase> phases;
};

// How a data-parallel step shards its update (docs/multichip.md, "Sharded update"): the
// gradient vector is P chunks; chunk k holds the dense kernel's W^T columns [col[k], col[k+1])
// (whole groups of max(N, 16) columns) and chunk 0 also the small tensors (conv kernel, conv bias,
// dense bias). After the reduce-scatter chip r holds the sum of chunk (r + 1) mod P: it alone runs
// Adam on that chunk's tensors and holds their fp32 weights and moments; an all-gather then
// gives every chip the updated bf16 copies and fp32 biases the forward pass reads.
struct GradShards {
  uint32_t chunk = 0;         // elements per chunk (a multiple of N)
  uint32_t small = 0;         // elements of the small tensors at the start of chunk 0
  std::vector<uint32_t> col;  // P + 1 column boundaries, col[0] = 0, col[P] = features
  int owner(int k) const {
    return (k + static_cast<int>(col.size()) - 2) % (static_cast<int>(col.size()) - 1);
  }
};

// A training step, or the forward pass alone (evaluate / predict: loss, correct count and the
// softmax probabilities; no update, the weights and Adam state are only read).
enum class StepKind { kTrain, kEvaluate };

class CnnTrainStep {
 public:
  // Lays the step out in HBM from `hbm_base` (a 4 KiB-aligned address) and compiles it. Throws
  // std::invalid_argument naming the problem for a configuration the chip cannot run (filters
  // not a multiple of N, a batch whose buffers do not fit in the UB or ACC, ...).
  CnnTrainStep(const CnnSpec& spec, const AdamSpec& adam, const ChipShape& chip, uint32_t batch,
               uint64_t hbm_base, StepKind kind = StepKind::kTrain,
               const HbmLayout* share_state = nullptr, const Replication& replication = {});
  // With `share_state` (a step compiled for the same model and chip), the weights, Adam state,
  // powers and constants are that step's: an evaluation program reads the training program's
  // weights in place. Only the batch, activation and result regions are laid out anew.
  // The bytes of HBM the step's data needs from its base (the program is loaded separately).
  static uint64_t data_bytes(const CnnSpec& spec, const ChipShape& chip, uint32_t batch,
                             const Replication& replication = {});
  const Replication& replication() const { return rep_; }
  StepKind kind() const { return kind_; }

  const CnnSpec& spec() const { return spec_; }
  const ChipShape& chip() const { return chip_; }
  uint32_t batch() const { return batch_; }
  const HbmLayout& layout() const { return layout_; }
  const std::vector<isa::Instruction>& program() const { return program_; }
  std::vector<uint8_t> program_bytes() const;
  const StepStats& stats() const { return stats_; }
  // The analytic bound in cycles: MXU rows streamed + weight-tile loads (the MXU's shape bound)
  // and VPU instructions (one lane-vector each), DMA assumed hidden.
  uint64_t mxu_bound_cycles() const { return mxu_bound_; }
  uint64_t vpu_bound_cycles() const { return stats_.vpu; }

  // Host <-> HBM images. Each returns (address, bytes) writes; `read_*` take a reader.
  using Write = std::pair<uint64_t, std::vector<uint8_t>>;
  std::vector<Write> state_image(const CnnParams& p, const AdamState& s) const;
  std::vector<Write> batch_image(const std::vector<uint16_t>& images_bf16,
                                 const std::vector<uint8_t>& labels) const;
  using Reader = std::vector<uint8_t> (*)(void* ctx, uint64_t addr, size_t bytes);
  void read_state(Reader read, void* ctx, CnnParams& p, AdamState& s) const;
  // Split update: the gradient vector's chunks (grads_elems == 0 otherwise: empty `col`).
  const GradShards& shards() const { return shards_; }
  // A data-parallel step's current state from every replica's read_state (index = rank): each
  // tensor part from the chip that owns its chunk (the others hold stale fp32 weights and
  // moments there). With one replica, that replica's state.
  void merge_replica_states(const std::vector<CnnParams>& ps, const std::vector<AdamState>& ss,
                            CnnParams& p, AdamState& s) const;
  // The HBM ranges every replica holds identically after a data-parallel step: the bf16
  // weight copies and the fp32 biases (address, bytes).
  std::vector<std::pair<uint64_t, uint64_t>> replicated_ranges() const;
  // The step's results from the metrics region.
  void read_metrics(Reader read, void* ctx, float& loss, float& correct) const;
  // kEvaluate: the softmax output, batch x classes.
  std::vector<float> read_probabilities(Reader read, void* ctx) const;

  // Shape helpers.
  uint32_t class_pad() const;   // classes rounded up to N
  uint32_t tap_pad() const;     // taps rounded up to N
  uint32_t code_words() const;  // argmax words per pooled row and channel: ceil(pool_w / 10)
  static constexpr uint32_t kCodesPerWord = 10;  // 3-bit argmax codes in an int32

 private:
  CnnTrainStep() = default;
  void plan_hbm(uint64_t base, const HbmLayout* share_state = nullptr);
  void compile();
  CnnSpec spec_;
  StepKind kind_ = StepKind::kTrain;
  AdamSpec adam_;
  ChipShape chip_;
  uint32_t batch_ = 0;
  Replication rep_;
  HbmLayout layout_;
  GradShards shards_;
  std::vector<isa::Instruction> program_;
  StepStats stats_;
  uint64_t mxu_bound_ = 0;
};

// Glorot-uniform kernels and zero biases from a seed (a fixed generator: docs/training.md).
CnnParams glorot_init(const CnnSpec& spec, uint64_t seed);
AdamState zero_adam_state(const CnnSpec& spec);

}  // namespace tessera::compiler
