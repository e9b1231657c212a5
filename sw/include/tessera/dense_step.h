// The training-step compiler (docs/compiler.md): any model of the supported ops — Conv2D,
// MaxPool2D and AveragePooling2D before one Flatten, then Dense layers (relu or linear, Dropout
// after a hidden relu one) and Dense(C, softmax) — with sparse categorical cross-entropy
// (optionally label-smoothed) and Adam or SGD with momentum, lowered op by op (no fixed layer
// count or width) into ONE chip program per step: compiled once, replayed for every batch;
// weights, optimizer state and the Adam powers live in HBM. On one chip, or data-parallel on a
// ring of chips (Replication). The example CNN is one model among them.
//
// Every matmul of the step — the forward z = x W, the input gradient dx = dz W^T, the weight
// gradient dW^T = dz^T x and the bias gradient db = 1^T dz — is one generic tiled MXU loop
// (row blocks that fit the ACC, column groups, contraction groups double-buffered through the
// UB) with an op-specific VPU epilogue on the ACC rows (bias + relu, softmax cross-entropy,
// relu gradient, the optimizer update), except where a fusion rule has its own lowering (the
// conv + relu + max-pool: conv_pool_fused). HBM buffers are placed by a liveness planner: the
// activations and gradients of layers whose lifetimes do not overlap share bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/compiler.h"

namespace tessera::compiler {

struct DenseLayerSpec {
  uint32_t units = 0;
  bool relu = false;  // hidden layers: relu or none; the last layer is always softmax
  // Dropout(rate, seed) after this (hidden, relu) layer: in training each output is kept with
  // probability 1 - rate and scaled by 1 / (1 - rate); evaluation passes it through. The mask
  // is a hash of (seed, step, sample, unit) computed by the chip (dropout_keep).
  float dropout = 0;
  uint32_t dropout_seed = 0;
};

// The Dropout mask as the chip computes it (docs/compiler.md, "Dropout"): h = H(seed ^ step),
// h = H(h + sample), h = H(h + unit) with H Thomas Wang's 32-bit shift-add hash; the unit is
// dropped when the float 1.m with m = the top 23 bits of h is below the fp32 1 + rate.
uint32_t dropout_hash(uint32_t x);
bool dropout_keep(uint32_t seed, uint32_t step, uint32_t sample, uint32_t unit, float rate);
// A layer before Flatten (docs/compiler.md, "Convolutional layers"). Conv2D(filters,
// kernel 1..7, stride 1 or 2, padding valid or same (TensorFlow's: the extra row and column
// at the bottom and right), relu or linear); MaxPool2D / AveragePooling2D with pool 2 or 3,
// strides = pool, padding valid.
struct FeatureLayerSpec {
  enum class Kind { kConv, kMaxPool, kAvgPool } kind = Kind::kConv;
  uint32_t filters = 0, kernel = 3, stride = 1;
  bool same = false, relu = false;
  uint32_t pool = 2;
};
struct Shape3 {  // a feature map per sample: H x W x C, stored NHWC
  uint32_t h = 0, w = 0, c = 0;
  uint64_t size() const { return uint64_t{h} * w * c; }
};
// Keras's Normalization(mean, variance) as the model's first layer: the host feeds the chip
// (p / 255 - mean) / max(sqrt(variance), 1e-7) (fp32, then bf16 RNE) instead of p / 255
// (data::images_to_bf16): input preprocessing, as Keras runs it in the input pipeline.
struct InputNormalization {
  bool on = false;
  float mean = 0.0f, variance = 1.0f;
  bool operator==(const InputNormalization& o) const {
    return on == o.on && (!on || (mean == o.mean && variance == o.variance));
  }
};

struct DenseStackSpec {
  InputNormalization norm;
  uint32_t inputs = 784;  // the Flatten size (H W C, NHWC order): with features, the last map's
  Shape3 input_shape;     // the input map (used when `features` is not empty)
  std::vector<FeatureLayerSpec> features;  // the layers before Flatten, in order
  std::vector<DenseLayerSpec> layers;
  uint32_t classes() const { return layers.empty() ? 0 : layers.back().units; }
};
// The feature maps: [0] the input, [i + 1] the output of features[i]; throws
// std::invalid_argument naming the layer (from 0, in model order) for what cannot be lowered.
std::vector<Shape3> feature_shapes(const DenseStackSpec& spec);
// The fusion rule conv + relu + max-pool (docs/compiler.md, "Fusion by pattern"): feature layer
// i, a Conv2D with relu, and the MaxPool2D(2) after it run as one op when its output map has an
// even height and width, its filters are a multiple of N, two output rows fit an ACC half and
// its operand is gathered (not a stride-1 conv of a multiple of N channels: implicit GEMM):
// the matmul's epilogue adds the bias, applies the relu, pools and keeps the argmax (the first
// window position holding the max of the fp32 sums, before the bias: 0..3; 4 where the relu is
// off), and the backward pass routes the pooled gradient by it. The pooled values are the
// unfused ones bit for bit; the routing differs only where taps tie after the bias and the
// rounding to bf16 (the unfused path routes to the first of them).
bool conv_pool_fused(const DenseStackSpec& spec, size_t i, const ChipShape& chip);
// A fused pair whose convolution is the first (no input gradient) and takes one input channel
// at stride 1: the routing runs inside that convolution's weight gradient and dz is never
// stored — item by item (a pooled row of a sample each) for a valid convolution of the images
// (conv_pool_lowering.h, emit_conv_pool_weight_gradient), else in the by-taps matmul's operand
// loads, where two stages of six pooled rows of dp and codes take at most a third of the UB;
// the pool then has no backward phase of its own.
bool pool_routed_in_weight_gradient(const DenseStackSpec& spec, size_t i, const ChipShape& chip);
// (K, U) of every layer with weights, in model order: Conv2D K = k k C_in, U = filters (its
// kernel [k][k][C_in][filters] read as a K x U matrix, rows (ky, kx, c)); Dense K = inputs.
std::vector<std::pair<uint32_t, uint32_t>> weight_shapes(const DenseStackSpec& spec);

// Adam (Keras form: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; w -= lr_t m / (sqrt(v) + eps)) or SGD with momentum (Keras form:
// v = mu v - lr g; w += v;
// momentum 0 is plain SGD, w -= lr g, bit for bit).
// The learning rate may follow a schedule over `decay_steps` steps (Keras's schedules with the
// optimizer's iteration count, from 0): constant; cosine, CosineDecay(lr, decay_steps) (alpha 0:
// lr (1 + cos(pi t / T)) / 2); linear, PolynomialDecay(lr, decay_steps, end 0, power 1):
// lr (1 - t / T). Past T the rate stays at its final value. The host computes step t's rate
// (lr_at) and writes it with DenseStackStep::lr_image before the step; the chip reads it.
struct OptimizerSpec {
  enum class Kind { kAdam, kSgd } kind = Kind::kAdam;
  enum class Schedule { kConstant, kCosine, kLinear } schedule = Schedule::kConstant;
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-7f;
  float momentum = 0.0f;
  uint64_t decay_steps = 0;
  // The loss's label smoothing eps in [0, 1] (set with the optimizer, as Keras's compile() takes
  // both): the softmax cross-entropy's targets are (1 - eps) one-hot + eps / C over the C
  // classes (Keras's CategoricalCrossentropy(label_smoothing)); 0 is the sparse categorical
  // cross-entropy, and its program is the one compiled without the option. Evaluation programs
  // report the plain cross-entropy whatever eps is.
  float label_smoothing = 0.0f;
  // Step t's learning rate: fp32(lr * f(t)) with f evaluated in double.
  float lr_at(uint64_t t) const;
};
// "constant", "cosine", "linear"; throws std::invalid_argument naming the value otherwise.
OptimizerSpec::Schedule parse_schedule(const std::string& name);
const char* schedule_name(OptimizerSpec::Schedule s);

// Parameters in Keras's layouts (fp32), one entry per layer with weights in model order (the
// Conv2D layers, then the Dense ones; Keras's get_weights order): kernel[j] is [K][U] of
// weight_shapes (Conv2D: [kh][kw][in][filters]), bias[j] [U].
struct DenseParams {
  std::vector<std::vector<float>> kernel, bias;
};
// Optimizer state: Adam's moments m, v (SGD: the velocity in m, v unused and zero) and the
// bias-correction powers b1^t, b2^t.
struct DenseOptState {
  DenseParams m, v;
  float beta1_power = 1.0f, beta2_power = 1.0f;
  uint32_t steps = 0;  // training steps taken (step t's Dropout masks use t = steps + 1)
};

// Lowering choices that change DenseStackStep's program, never its results (tests compare
// both ways).
struct DenseLoweringChoices {
  // a stride-1 walk of a compact map (the conv input gradient's): the MXU streams the map
  // staged in the UB (emit_matmul_implicit) where the staging fits; false: the patch gather
  bool implicit_gemm = true;
};

class Graph;
class StepLowering;

class DenseStackStep {
 public:
  // One HBM tensor of the step.
  struct Region {
    std::string name;
    uint64_t addr = 0, bytes = 0;
  };
  // Per layer with weights: the kernel as W^T rows [Up][Kp] (fp32 master, moments, the bf16
  // copy the MXU reads; Up, Kp the widths rounded up to N, padding zero), the bias [Up].
  // A Dense layer's w and m (and v with Adam) share one region of 3 [Up][Kp] fp32 tensors,
  // interleaved N values at a time (`streams` = 3, or 2 with SGD: w_m = w + 4N, w_v = w + 8N,
  // each tensor's N-value groups streams x 4N bytes apart; SGD's v is the region's last third),
  // so the optimizer epilogue moves one run per W^T row of a piece instead of one per tensor.
  // A convolution's are three tensors one after the other (streams = 1).
  struct LayerRegions {
    uint64_t w = 0, w_m = 0, w_v = 0, w16 = 0, b = 0, b_m = 0, b_v = 0;
    // Split update (Replication::split): the kernel's gradient (W^T's U real rows, [U][Kp])
    // and the bias's [Up], fp32, in the layout's gradient vector (0 otherwise).
    uint64_t g = 0, g_b = 0;
    uint32_t streams = 1;
    // Byte address of element e (row-major [Up][Kp]) of the tensor at `base` (w, w_m or w_v).
    uint64_t at(uint64_t base, uint64_t e, uint32_t n) const {
      const uint64_t group = (base != w_v || streams == 3) ? uint64_t{streams} * 4 * n : 4 * n;
      return base + e / n * group + e % n * 4;
    }
  };
  struct Layout {
    uint64_t base = 0, bytes = 0;
    uint64_t images = 0;  // [Bpad][P0] bf16, written by the host (padding zero); with
                          // features [B][H][W][C] (NHWC)
    uint64_t labels = 0;  // [Bpad] fp32
    std::vector<LayerRegions> layers;
    uint64_t powers = 0;   // [3][N]: b1^t, b2^t (fp32), the step count (uint32)
    uint64_t lr = 0;       // [N] fp32: the next step's learning rate (the host writes it)
    uint64_t consts = 0;   // [2 Cc][N] fp32: class index, valid-class mask
    uint64_t ones = 0;     // [max(Bpad, conv rows)] bf16 1.0: the bias gradient's activation row
    uint64_t metrics = 0;  // [2][N] fp32: mean loss, correct count
    uint64_t probs = 0;    // [Bpad][Cpad] fp32 (StepKind::kEvaluate)
    // Split update: every layer's gradients (LayerRegions::g, g_b), one fp32 vector for the
    // ring all-reduce, zero-padded to grads_elems (allreduce_padded_elems); the host zeroes
    // it with the state (the program never writes the padding).
    uint64_t grads = 0, grads_elems = 0;
    // The planner's transient buffers (activations x_l, gradients dz_l and dz_l^T), with the
    // phase interval each is live in and its address (shared bytes where lifetimes allow).
    struct Transient {
      std::string name;
      uint64_t addr = 0, bytes = 0;
      int first = 0, last = 0;
    };
    std::vector<Transient> transients;
    uint64_t transient_bytes = 0, transient_unshared = 0;  // planned / the sum of all sizes
  };

  // Lays the step out from `hbm_base` and compiles it; throws std::invalid_argument naming the
  // layer and the problem for what it cannot lower. `share_state`: an evaluation step reads a
  // training step's weights in place (same spec and chip).
  //
  // Data parallelism (`replication`, docs/multichip.md): every replica runs this program on its
  // own `batch` samples of a global batch of replicas x batch (replica r: samples r batch ..).
  // The weight-gradient epilogues store the gradients (scaled by 1 / the global batch) to the
  // gradient vector instead of updating; the ring all-reduce (reduce-scatter, then all-gather;
  // tessera/allreduce.h) sums them over the chips in a fixed order; then every replica runs
  // the same optimizer update on the summed vector, so every chip holds the same weights,
  // moments and bf16 copies after the step. Dropout draws the mask of the global sample.
  // `split_update` with one replica: the same split program without the all-reduce,
  // bit-identical to the fused step (a test of the split).
  using Choices = DenseLoweringChoices;
  DenseStackStep(const DenseStackSpec& spec, const OptimizerSpec& opt, const ChipShape& chip,
                 uint32_t batch, uint64_t hbm_base, StepKind kind = StepKind::kTrain,
                 const Layout* share_state = nullptr, const Choices& choices = Choices(),
                 const Replication& replication = {});
  static uint64_t data_bytes(const DenseStackSpec& spec, const ChipShape& chip, uint32_t batch,
                             const Replication& replication = {});
  const Replication& replication() const { return rep_; }
  // Data parallelism: chip r updates the tensors' parts in gradient-vector chunk (r + 1) mod P
  // (the sharded update) and holds current fp32 weights and moments only there; the bf16
  // copies and the fp32 biases the passes read are all-gathered, the same on every chip. The
  // state from every replica's read_state (index = rank): each element from the chip that
  // updated it. With one replica, that replica's state.
  void merge_replica_states(const std::vector<DenseParams>& ps,
                            const std::vector<DenseOptState>& ss, DenseParams& p,
                            DenseOptState& s) const;
  // The HBM ranges every replica holds identically after a data-parallel step: each layer's
  // bf16 copy and fp32 bias (address, bytes).
  std::vector<std::pair<uint64_t, uint64_t>> replicated_ranges() const;

  const DenseStackSpec& spec() const { return spec_; }
  const ChipShape& chip() const { return chip_; }
  uint32_t batch() const { return batch_; }
  StepKind kind() const { return kind_; }
  const Layout& layout() const { return layout_; }
  const std::vector<isa::Instruction>& program() const { return program_; }
  std::vector<uint8_t> program_bytes() const;
  const StepStats& stats() const { return stats_; }
  // Each unit's bound over the whole step (StepStats::Phase has them per phase).
  uint64_t mxu_bound_cycles() const { return mxu_bound_; }
  uint64_t vpu_bound_cycles() const { return stats_.vpu_cycles; }
  uint64_t dma_bound_cycles() const { return stats_.dma_cycles; }
  // HBM bytes (the DMA's and the stored program's) over the pins' peak, 16 B a cycle a
  // pseudo-channel (docs/memory.md).
  uint64_t hbm_bound_cycles() const;
  // Flits sent to a neighbour at the ICI link's peak (compiler::ici_flit_cycles a flit).
  uint64_t ici_bound_cycles() const;
  // The instructions the step executes: the sequencer decodes one a cycle for every unit.
  uint64_t seq_bound_cycles() const { return stats_.executed; }
  // The step's roofline bound: per phase the largest of its MXU, VPU, DMA, HBM, ICI and SEQ
  // bounds
  // (compiler::roofline), summed.
  uint64_t bound_cycles() const;
  // One line per lowered matmul: its phase, shapes and tiling (tessera compile --dump).
  const std::vector<std::string>& lowering_plan() const { return plan_; }
  // The lowered graph the program is emitted from (sw/compiler/graph.h).
  const Graph& graph() const;
  // The HBM from the first state tensor to the end of the constants: what rtl and functional
  // runs compare byte for byte.
  std::pair<uint64_t, uint64_t> state_range() const;

  using Write = std::pair<uint64_t, std::vector<uint8_t>>;
  using Reader = std::vector<uint8_t> (*)(void* ctx, uint64_t addr, size_t bytes);
  std::vector<Write> state_image(const DenseParams& p, const DenseOptState& s) const;
  // images: [batch][inputs] bf16 (the host's p / 255 rounded), labels: class indices.
  std::vector<Write> batch_image(const std::vector<uint16_t>& images_bf16,
                                 const std::vector<uint8_t>& labels) const;
  // The learning rate of the next step (state_image writes the optimizer's lr).
  Write lr_image(float lr) const;
  void read_state(Reader read, void* ctx, DenseParams& p, DenseOptState& s) const;
  // Split update (replication().split()): the gradients in this chip's gradient vector after a
  // step, in Keras's layouts (kernel [K][U], bias [U]; scaled by 1 / the global batch, as the
  // update reads them). With one replica they are the step's gradients; with P, chip r holds
  // the all-reduced sum only in chunk (r + 1) mod P (its other chunks keep partial sums):
  // merge_replica_gradients takes each element from that chip. Throws std::logic_error for a
  // fused step (it keeps no gradients).
  DenseParams read_gradients(Reader read, void* ctx) const;
  DenseParams merge_replica_gradients(const std::vector<DenseParams>& gs) const;
  void read_metrics(Reader read, void* ctx, float& loss, float& correct) const;
  std::vector<float> read_probabilities(Reader read, void* ctx) const;  // batch x classes

  uint32_t padded(uint32_t width) const { return (width + chip_.n - 1) / chip_.n * chip_.n; }
  uint32_t ones_count() const;  // the ones row's length: the longest bias-gradient contraction

 private:
  DenseStackStep() = default;
  // One tensor set from the replicas' (one each): every element from the chip that owns it.
  DenseParams merge_owned(const std::vector<const DenseParams*>& parts) const;
  void plan_hbm(uint64_t base, const Layout* share);
  void compile();  // StepLowering over the lowered graph
  friend class StepLowering;
  DenseStackSpec spec_;
  OptimizerSpec opt_;
  ChipShape chip_;
  Choices choices_;
  Replication rep_;
  uint32_t batch_ = 0;
  StepKind kind_ = StepKind::kTrain;
  Layout layout_;
  std::vector<isa::Instruction> program_;
  StepStats stats_;
  uint64_t mxu_bound_ = 0;
  std::vector<std::string> plan_;
  std::shared_ptr<const Graph> graph_;  // the lowered graph the program is emitted from
};

// Glorot-uniform kernels and zero biases from a seed (the generator of glorot_init), zero state.
DenseParams glorot_init(const DenseStackSpec& spec, uint64_t seed);
DenseOptState zero_opt_state(const DenseStackSpec& spec);

}  // namespace tessera::compiler
