// A Keras-style training API over the Tessera chip (docs/training.md). It reads like the
// TensorFlow original:
//
//   keras::Sequential model({keras::Conv2D(32, 3, "relu", {28, 28, 1}), keras::MaxPool2D(2),
//                            keras::Flatten(), keras::Dense(10, "softmax")});
//   model.compile(keras::Adam(1e-3), "sparse_categorical_crossentropy", {"accuracy"});
//   model.fit(train, {.epochs = 1, .batch_size = 128});
//   auto [loss, acc] = model.evaluate(test);
//
// Underneath, compile() checks the layers against what the chip compiler lowers
// (tessera/dense_step.h), opens the device (backend `rtl` or `functional`) and compiles the
// training step once; fit() replays it for every batch. Unsupported layer stacks and
// configurations are refused in compile(), before any long work, with the reason.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dense_step.h"
#include "tessera/data.h"
#include "tessera/driver.h"

namespace tessera::keras {

struct Layer {
  enum class Kind { kConv2D, kMaxPool2D, kAveragePool2D, kFlatten, kDense, kDropout, kNormalization } kind;
  uint32_t units = 0;    // Conv2D filters / Dense units
  uint32_t size = 0;     // Conv2D kernel / pool size
  uint32_t strides = 0;  // Conv2D stride (0: 1) / pool stride (0: the pool size)
  std::string activation, padding = "valid";
  float rate = 0;     // Dropout: the fraction dropped
  uint64_t seed = 0;  // Dropout: its mask stream
  float mean = 0, variance = 1;  // Normalization (the first layer only; the host applies it)
  std::array<uint32_t, 3> input_shape{};  // H, W, C (first layer only; zeros: unset)

  uint32_t stride() const { return strides ? strides : (kind == Kind::kConv2D ? 1 : size); }
  bool operator==(const Layer& o) const;
};
Layer Conv2D(uint32_t filters, uint32_t kernel_size, const std::string& activation = "relu",
             std::array<uint32_t, 3> input_shape = {}, const std::string& padding = "valid",
             uint32_t strides = 1);
Layer MaxPool2D(uint32_t pool_size = 2, uint32_t strides = 0);
Layer AveragePool2D(uint32_t pool_size = 2, uint32_t strides = 0);
Layer Flatten();
Layer Dense(uint32_t units, const std::string& activation = "");
Layer Dropout(float rate, uint64_t seed = 0);
// Keras's Normalization(mean=, variance=) with scalar statistics: the images become
// (p / 255 - mean) / max(sqrt(variance), 1e-7) on the host (compiler::InputNormalization).
Layer Normalization(float mean, float variance, std::array<uint32_t, 3> input_shape = {});
const char* kind_name(Layer::Kind k);

// The model as the compiler's spec (tessera/dense_step.h; docs/compiler.md, "Supported ops"):
// Conv2D (relu | linear, valid | same, strides 1 | 2, kernel 1..7), MaxPool2D and
// AveragePooling2D (pool 2 | 3, strides = pool) before one Flatten, then Dense(relu | linear)*
// with a Dropout after any hidden relu Dense (its 64-bit seed folded to 32 bits as
// seed ^ seed >> 32), then Dense(softmax), optionally after a Normalization as the first layer
// (input preprocessing on the host); the first layer carries the input_shape. Anything else
// throws std::invalid_argument naming the layer and the argument.
compiler::DenseStackSpec dense_stack_spec(const std::vector<Layer>& layers);

// Keras's optimizers (their update forms: docs/compiler.md, "Optimizers"). A learning-rate
// schedule (Keras's CosineDecay / PolynomialDecay(power 1) over decay_steps) and the loss's
// label smoothing are set on the compiler's OptimizerSpec, which compile() also takes.
struct Adam {
  float learning_rate = 1e-3f, beta_1 = 0.9f, beta_2 = 0.999f, epsilon = 1e-7f;
  explicit Adam(float lr = 1e-3f) : learning_rate(lr) {}
  compiler::OptimizerSpec spec() const;
};
struct SGD {
  float learning_rate = 0.01f, momentum = 0.0f;
  explicit SGD(float lr = 0.01f, float momentum = 0.0f) : learning_rate(lr), momentum(momentum) {}
  compiler::OptimizerSpec spec() const;
};

// Data parallelism over a ring of chips (docs/multichip.md), TensorFlow's tf.distribute
// TPUStrategy in C++: a model built with a strategy is replicated on num_replicas_in_sync
// chips; compile()'s batch_size is the global batch (replicas x per-replica batch); fit and
// evaluate are unchanged. Each step every replica trains on its shard; the gradients are summed
// over the chips' ICI links (the ring all-reduce in the step program) and every replica applies
// the same update. `threads`: host threads for the rtl ring (0: one per chip, at most the cores).
struct TPUStrategy {
  explicit TPUStrategy(int num_replicas = 1, int threads = 0)
      : num_replicas_in_sync(num_replicas), threads(threads) {}
  int num_replicas_in_sync;
  int threads;
};

// Where and how the model runs (not in Keras: the chip's configuration).
struct DeviceOptions {
  driver::Backend backend = driver::Backend::kFunctional;
  int array = 16;    // N; the rtl backend is built for 4 and 16
  int channels = 1;  // HBM pseudo-channels (rtl: 1, or 2 at N = 16)
  // rtl: the synthesizable arithmetic, or the host-arithmetic build (N = 16, one channel):
  // the same cycles and bits, faster to simulate (driver.h, Arith).
  driver::Arith arith = driver::Arith::kRtl;
  uint64_t timeout_cycles = 2'000'000'000;
  // One chip: compile the split form of the step (the gradients stored to HBM, then the
  // update; bit-identical to the fused step) so that get_gradients() can read them. Under a
  // strategy the step is split anyway.
  bool keep_gradients = false;
};

// What a step reports to callbacks.
struct StepLogs {
  uint64_t step = 0;  // global step, from 0
  uint64_t epoch = 0, batch_in_epoch = 0;
  float loss = 0, accuracy = 0;
  driver::RunReport report;  // cycles and PERF counters (rtl); zeros on functional
  double wall_seconds = 0;   // this step: staging + run + read back
  const data::Batch* batch = nullptr;  // in fit's callbacks: the step's batch
};

// fit()'s hooks, in the order the callbacks were given: a callback may add to a step's logs for
// the ones after it (the sampled backend's check puts the rtl step's cycles there). The run
// folder of `tessera train` is made of callbacks (sw/tools/train_callbacks.h), so a program
// that fits a model gets the same files.
class Sequential;
struct Callback {
  virtual ~Callback() = default;
  virtual void on_train_begin(Sequential&) {}
  virtual void on_batch_begin(Sequential&, const data::Batch&) {}
  virtual void on_step_end(Sequential&, StepLogs&) {}
  virtual void on_epoch_end(Sequential&, uint64_t /*epoch*/) {}
  virtual void on_train_end(Sequential&) {}
};

struct FitOptions {
  uint64_t epochs = 1;
  uint64_t steps = 0;  // if nonzero: train exactly this many steps (overrides epochs)
  uint32_t batch_size = 128;
  uint64_t seed = 0;  // data order (shuffle)
  uint32_t prefetch = 2;
  uint64_t initial_step = 0;         // resume: the global step to start from
  data::Pipeline::Position start{};  // resume: the data position of initial_step
  std::vector<Callback*> callbacks;
  // Stop after this step even if more were asked for (0: never); for tests of resume.
  uint64_t stop_after = 0;
};

struct History {
  std::vector<float> loss, accuracy;  // per step
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  uint64_t samples = 0;
};

class Sequential {
 public:
  explicit Sequential(std::vector<Layer> layers);
  // Built under a strategy: replicated on its chips (`with strategy.scope(): model = ...`).
  Sequential(std::vector<Layer> layers, const TPUStrategy& strategy);
  ~Sequential();
  void add(const Layer& layer);

  // Checks the stack, opens the device and compiles the training step for `batch_size` (the
  // global batch under a strategy). Throws std::invalid_argument with the reason for anything
  // the chip cannot run; on failure nothing stays open.
  void compile(const compiler::OptimizerSpec& optimizer, const std::string& loss,
               const std::vector<std::string>& metrics, const DeviceOptions& device = {},
               uint32_t batch_size = 128, uint64_t weight_seed = 0);
  void compile(const Adam& optimizer, const std::string& loss,
               const std::vector<std::string>& metrics, const DeviceOptions& device = {},
               uint32_t batch_size = 128, uint64_t weight_seed = 0) {
    compile(optimizer.spec(), loss, metrics, device, batch_size, weight_seed);
  }
  void compile(const SGD& optimizer, const std::string& loss,
               const std::vector<std::string>& metrics, const DeviceOptions& device = {},
               uint32_t batch_size = 128, uint64_t weight_seed = 0) {
    compile(optimizer.spec(), loss, metrics, device, batch_size, weight_seed);
  }

  History fit(const data::Dataset& train, const FitOptions& options);
  // One training step on one batch (the batch size compile() was given); advances step(). The
  // step's learning rate follows the optimizer's schedule at step().
  StepLogs train_on_batch(const data::Batch& batch);
  // The same step on images already staged as the chip takes them: bf16 bits, batch x the
  // model's input values (model_images() makes them from pixels; data::values_to_bf16 from
  // values), one label each. `epoch` and `index` only label the step's logs.
  StepLogs train_on_images(const std::vector<uint16_t>& images, const std::vector<uint8_t>& labels,
                           uint64_t epoch = 0, uint64_t index = 0);
  // Forward passes only (a separate compiled evaluation program; the weights are read).
  EvalResult evaluate(const data::Dataset& test, uint32_t batch_size = 0);
  // Softmax outputs, images x classes.
  std::vector<float> predict(const data::Dataset& images, uint32_t batch_size = 0);
  // One forward batch of staged bf16 images (any count up to the chip's HBM; an evaluation
  // program is compiled per distinct count and kept): the batch's mean loss and accuracy, or its
  // softmax outputs (count x classes).
  EvalResult evaluate_images(const std::vector<uint16_t>& images, const std::vector<uint8_t>& labels);
  std::vector<float> predict_images(const std::vector<uint16_t>& images, uint32_t count);
  // The model's input values per image (H*W*C for a convolutional model, else the Dense inputs).
  size_t input_values() const;

  // Weights and optimizer state as they are on the device. Under a strategy each replica holds
  // the current fp32 weights and moments of the part it updates (docs/multichip.md, "Sharded
  // update"): these gather them from every replica — a collective call under mpirun (every
  // rank calls it).
  compiler::DenseParams get_weights();
  compiler::DenseOptState get_optimizer_state();
  void get_state(compiler::DenseParams& p, compiler::DenseOptState& s);  // both
  void set_state(const compiler::DenseParams& p, const compiler::DenseOptState& s);
  // The last step's gradients (scaled by 1 / the global batch, as the update applies them) in
  // get_weights()'s shapes; zeros before the first step. One chip keeps them only when compiled
  // with DeviceOptions::keep_gradients (else std::logic_error); under a strategy each replica
  // holds the all-reduced sum of its chunk and this gathers them — collective under mpirun.
  compiler::DenseParams get_gradients();
  // The training step's lowered graph as a serialized tensorflow.GraphDef, for TensorBoard's
  // Graphs tab (sw/compiler/graph_def.h); under a strategy one replica's step.
  std::string graph_def() const;
  // Keras's save_weights / load_weights: the weights (not the optimizer state) in the
  // checkpoint format (docs/training.md), atomically; load refuses another model's file (the
  // architecture part of signature()) with a runlog::CheckpointError naming the file.
  void save_weights(const std::string& path);
  void load_weights(const std::string& path);
  uint64_t step() const { return step_; }
  void set_step(uint64_t s) { step_ = s; }  // resume

  const std::vector<Layer>& layers() const { return layers_; }
  const compiler::DenseStackSpec& spec() const { return spec_; }
  const compiler::OptimizerSpec& optimizer() const { return opt_; }
  uint32_t batch_size() const { return batch_; }  // the global batch
  const compiler::DenseStackStep& train_step() const { return *train_; }
  uint64_t train_program_address() const { return train_prog_; }
  // The (first) chip: where evaluate/predict run and weights are read.
  driver::Device& device() { return *dev_; }
  int replicas() const { return strategy_.num_replicas_in_sync; }
  driver::Cluster* cluster() { return cluster_.get(); }  // replicas > 1
  std::string summary() const;                           // Keras-style layer table
  // The model, the optimizer (with its schedule) and the global batch: what a checkpoint must
  // match (the chips, the array size and the backend are not in it: the state is the same
  // tensors on any of them). The part before the first '|' is the architecture.
  std::string signature() const;

 private:
  struct Eval {
    std::unique_ptr<compiler::DenseStackStep> step;
    uint64_t prog = 0;
  };
  Eval& eval_program(uint32_t batch);
  // Runs the evaluation program over every image of `ds` in order, `per_batch` after each.
  void run_forward(const data::Dataset& ds, uint32_t batch,
                   const std::function<void(compiler::DenseStackStep&, uint32_t)>& per_batch);
  // Runs the evaluation program on one batch of staged images (its count's program).
  compiler::DenseStackStep& forward(const std::vector<uint16_t>& images,
                                    const std::vector<uint8_t>& labels);
  void check_compiled(const char* what) const;
  std::vector<Layer> layers_;
  compiler::DenseStackSpec spec_;
  compiler::OptimizerSpec opt_;
  DeviceOptions dev_opts_;
  uint32_t batch_ = 0;
  TPUStrategy strategy_;
  std::unique_ptr<driver::Device> device_;    // one chip
  std::unique_ptr<driver::Cluster> cluster_;  // replicas > 1
  driver::Device* dev_ = nullptr;             // device_, or this process's first chip
  std::vector<std::unique_ptr<compiler::DenseStackStep>> steps_;  // per rank
  compiler::DenseStackStep* train_ = nullptr;                     // dev_'s step
  std::vector<uint64_t> progs_;                                   // per rank
  uint64_t train_prog_ = 0;
  std::vector<Eval> evals_;
  uint64_t step_ = 0;
};

// The host's images for `spec`: p / 255 in bf16, or normalized first (spec.norm).
std::vector<uint16_t> model_images(const compiler::DenseStackSpec& spec, const data::Batch& batch);

}  // namespace tessera::keras
